//! The audit report for a person, as text.

use std::fmt::Write;

use std::convert::Infallible;

use super::check::AuditReport;
use super::reread::RereadError;

/// Write the report as text to `s`, as it is made (the call reports are read again from the
/// journal as they are written).
pub fn render(r: &AuditReport, s: &mut dyn Write) -> Result<(), RereadError<Infallible>> {
    let run = &r.run;
    let _ = writeln!(s, "audit of {}", r.journal);
    let _ = writeln!(s, "verdict: {}", if r.ok { "OK" } else { "FAILED" });
    let _ = writeln!(
        s,
        "events: {}  head: {}",
        r.events,
        r.head.as_deref().unwrap_or("-")
    );
    let c = &r.checks;
    let _ = writeln!(
        s,
        "checks: integrity={} order={} budget={} privacy={} bridge={} blobs={} result.json={}",
        c.integrity, c.order, c.budget, c.privacy, c.bridge, c.blobs, c.result_file
    );
    let _ = writeln!(
        s,
        "run: {} agent={} after_step={} phase={} quality={} agent_status={} replayed_calls={} live_steps={}",
        run["run_id"].as_str().unwrap_or("-"),
        run["agent"]["type"].as_str().unwrap_or("-"),
        run["after_step"],
        run["phase"].as_str().unwrap_or("-"),
        run["quality"].as_str().unwrap_or("-"),
        run["agent_status"].as_str().unwrap_or("-"),
        run["replayed_tool_calls"],
        run["continued_steps"],
    );
    if let Some(f) = run["failure"].as_object() {
        let _ = writeln!(
            s,
            "failure: {}: {}",
            f["category"].as_str().unwrap_or(""),
            f["message"].as_str().unwrap_or("")
        );
    }
    if !r.findings.is_empty() {
        let _ = writeln!(s, "\nfindings:");
        for f in &r.findings {
            let _ = writeln!(
                s,
                "  [{}] {}: {}{}",
                f.severity,
                f.check,
                f.message,
                f.seq.map(|q| format!(" (seq {q})")).unwrap_or_default()
            );
        }
    }
    if !r.refused_requests.is_empty() {
        let _ = writeln!(s, "\nrefused model requests:");
        for q in &r.refused_requests {
            let _ = writeln!(
                s,
                "  request {} (seq {}): {}",
                q.n,
                q.seq,
                q.difference.as_deref().unwrap_or(&q.reason)
            );
            if let Some(p) = &q.request_path {
                let _ = writeln!(s, "    kept request (secrets redacted): {p}");
            }
            let _ = writeln!(s, "    hint: {}", q.hint);
        }
    }
    if !r.drift.is_empty() {
        let _ = writeln!(s, "\nhost/time snapshots set to this host before the agent started (model-visible text kept):");
        for d in &r.drift {
            let _ = writeln!(s, "  {}: {} -> {}", d.fact, d.recorded, d.live);
        }
    }
    if !r.removed_items.is_empty() {
        let _ = writeln!(s, "\nitems removed from model requests by declared rules:");
        let mut kinds: Vec<(&str, Vec<&str>)> = Vec::new();
        for i in &r.removed_items {
            let d = &i.digest[..i.digest.len().min(19)];
            match kinds.iter_mut().find(|(k, _)| *k == i.kind) {
                Some((_, ds)) => ds.push(d),
                None => kinds.push((&i.kind, vec![d])),
            }
        }
        for (k, ds) in kinds {
            let mut uniq = ds.clone();
            uniq.dedup();
            let _ = writeln!(s, "  {k} ×{}  {}", ds.len(), uniq.join(" "));
        }
    }
    if !r.restores.is_empty() {
        let _ = writeln!(
            s,
            "\nworkspace restored to its checkpoint before an interrupted call ran again:"
        );
        for x in &r.restores {
            let at = if x.batch == 0 {
                format!("live step {}", x.call)
            } else {
                format!("batch {} call {}", x.batch, x.call)
            };
            let _ = writeln!(
                s,
                "  {at}: {} written, {} removed (manifest {})",
                x.written,
                x.removed,
                &x.manifest_blob[..x.manifest_blob.len().min(12)]
            );
        }
    }
    if !r.calls.is_empty() {
        let _ = writeln!(s, "\nreplayed tool calls:");
        let _ = writeln!(
            s,
            "  {:<5} {:<4} {:<14} {:<28} {:>5} {:>8}  observation",
            "batch", "call", "tool", "call id", "exit", "ms"
        );
        r.calls.for_each(|c| {
            let _ = writeln!(
                s,
                "  {:<5} {:<4} {:<14} {:<28} {:>5} {:>8}  {}{}",
                c.batch,
                c.call,
                c.tool,
                c.call_id,
                c.exit_code
                    .map(|x| x.to_string())
                    .unwrap_or_else(|| "-".into()),
                c.duration_ms
                    .map(|x| x.to_string())
                    .unwrap_or_else(|| "-".into()),
                c.observation,
                if c.in_doubt_decisions.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (in doubt: {})",
                        c.in_doubt_decisions
                            .iter()
                            .map(|d| d.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            );
            if let Some(d) = &c.diff {
                for line in d.lines() {
                    let _ = writeln!(s, "      {line}");
                }
            }
            Ok::<(), Infallible>(())
        })?;
    }
    if !r.steps.is_empty() {
        let _ = writeln!(s, "\ncontinuation steps:");
        for st in &r.steps {
            let _ = writeln!(
                s,
                "  step {:<3} {}  {}",
                st.n,
                &st.action_digest[..st.action_digest.len().min(19)],
                st.tools.join(", ")
            );
        }
    }
    if !r.superseded_steps.is_empty() {
        let _ = writeln!(
            s,
            "\nsuperseded live steps (replaced by a resumed attempt):"
        );
        for st in &r.superseded_steps {
            let _ = writeln!(
                s,
                "  step {:<3} {}  {}",
                st.n,
                &st.action_digest[..st.action_digest.len().min(19)],
                st.tools.join(", ")
            );
        }
    }
    Ok(())
}
