//! One-line summaries of events for timelines.

use journal_format::Event;

fn short(d: &str) -> &str {
    let d = d.split(':').next_back().unwrap_or(d);
    &d[..d.len().min(12)]
}

pub fn summary(e: &Event) -> String {
    match e {
        Event::RunRequested(r) => format!(
            "run {} agent={} mode={:?} after_step={} max_steps={}{}",
            r.run_id,
            r.agent,
            r.mode,
            r.after_step,
            r.max_steps
                .map(|m| m.to_string())
                .unwrap_or_else(|| "-".into()),
            if r.boundary_prompt.is_some() {
                " boundary_prompt=yes"
            } else {
                ""
            }
        ),
        Event::TrajectoryParsed(t) => format!(
            "{} batches{}, {} model turns, session {} ({})",
            t.batch_count.unwrap_or(t.batches.len() as u64),
            match t.batch_count {
                Some(_) => format!(" ({} listed here)", t.batches.len()),
                None => String::new(),
            },
            t.model_turns,
            t.session_id.as_deref().unwrap_or("-"),
            short(&t.source_sha256)
        ),
        Event::BatchesListed(l) => format!(
            "batches {}..={}",
            l.first,
            (l.first + l.batches.len() as u64).saturating_sub(1)
        ),
        Event::BoundaryValidated(b) => format!(
            "after_step={} prefix_calls={} prefix_turns={} live_budget={}",
            b.after_step,
            b.prefix_tool_calls,
            b.prefix_model_turns,
            b.live_budget
                .map(|x| x.to_string())
                .unwrap_or_else(|| "-".into())
        ),
        Event::BatchStarted(b) => format!("batch {} ({} calls)", b.batch, b.calls),
        Event::ToolCallStarted(c) => format!(
            "batch {} call {} {} {} args {}",
            c.batch,
            c.call,
            c.tool,
            c.call_id,
            short(&c.args_digest)
        ),
        Event::BlobStored(b) => format!("blob {} ({} bytes)", short(&b.blob), b.bytes.len()),
        Event::InnerCallFinished(f) => format!(
            "batch {} call {} inner #{} {} {} {}ms",
            f.batch,
            f.call,
            f.seq,
            f.tool,
            if f.ok { "ok" } else { "rejected" },
            f.duration_ms
        ),
        Event::ToolCallFinished(f) => format!(
            "batch {} call {} exit={} error={} {}ms obs {} ({} bytes){}",
            f.batch,
            f.call,
            f.exit_code
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into()),
            f.is_error,
            f.duration_ms,
            short(&f.observation_digest),
            f.observation_len,
            if f.stale { " STALE" } else { "" }
        ),
        Event::ObservationCompared(c) => format!(
            "batch {} call {} {}",
            c.batch,
            c.call,
            if c.equal {
                "equal"
            } else if c.equal_masked {
                "equal except dynamic fields"
            } else {
                "DIFFERS"
            }
        ),
        Event::BatchFinished(b) => {
            format!("batch {} workspace {}", b.batch, short(&b.workspace_digest))
        }
        Event::AgentExited(a) if a.stopped_by.is_some() => {
            let w = a.stopped_by.as_ref().expect("checked");
            format!(
                "{:?} code={} stopped by {} ({})",
                a.status,
                a.code.map(|c| c.to_string()).unwrap_or("-".into()),
                w.name,
                w.signal
            )
        }
        Event::SessionWritten(w) => {
            format!("{:?} session {} ({})", w.role, w.path, short(&w.digest))
        }
        Event::BridgeStarted(b) => format!("bridge {} {} → {}", b.listen, b.protocol, b.upstream),
        Event::BridgeRequestValidated(v) => format!(
            "request {}{} {}{}{}",
            v.n,
            if v.side { " (side)" } else { "" },
            if v.ok {
                "ok"
            } else if v.budget_exhausted {
                "beyond the step budget"
            } else {
                "REJECTED"
            },
            if v.removed.is_empty() {
                String::new()
            } else {
                format!(" removed {}", v.removed.join(","))
            },
            if v.boundary_prompt_injected {
                " +boundary prompt"
            } else {
                ""
            }
        ),
        Event::ContinuationStarted(c) => format!(
            "attempt {} budget {} {}",
            c.attempt,
            c.budget
                .map(|b| b.to_string())
                .unwrap_or_else(|| "-".into()),
            c.command.first().map(String::as_str).unwrap_or("")
        ),
        Event::ContinuationStep(s) => format!("step {} {}", s.n, s.tools.join(",")),
        Event::AgentExited(a) => format!(
            "{:?} code={}",
            a.status,
            a.code.map(|c| c.to_string()).unwrap_or_else(|| "-".into())
        ),
        Event::Recovered(r) => format!(
            "torn tail of {} bytes at offset {} quarantined to {}",
            r.length, r.offset, r.quarantine_path
        ),
        Event::InDoubtResolved(d) => format!(
            "batch {} call {} {} → {}",
            d.batch,
            d.call,
            d.tool,
            d.decision.as_str()
        ),
        Event::Resumed(r) => format!("resumed after seq {}", r.from_seq),
        Event::WorkspaceCheckpointed(c) => format!(
            "{} {} entries, {} new bytes{}",
            at(c.batch, c.call),
            c.entries,
            c.new_bytes,
            if c.unstored.is_empty() {
                String::new()
            } else {
                format!(", {} unstored", c.unstored.len())
            }
        ),
        Event::WorkspaceRestored(r) => format!(
            "{} {} written, {} removed",
            at(r.batch, r.call),
            r.written,
            r.removed
        ),
        Event::RunFinished(f) => format!("result {}", short(&f.result_digest)),
        Event::RunFailed(f) => format!("{}: {}", f.category, f.message),
        Event::Unknown { kind, payload } => {
            format!("unknown kind {kind} ({} bytes)", payload.len())
        }
    }
}

/// `batch K call I`, or `live step N` for batch 0.
fn at(batch: u64, call: u64) -> String {
    if batch == 0 {
        format!("live step {call}")
    } else {
        format!("batch {batch} call {call}")
    }
}
