//! Perform one step: do the work, then journal its event. Each function is called only
//! when `decide` chose its step, so it may trust the folded state.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use journal_format::event::*;
use journal_format::Event;

use super::failure::RunError;
use super::recorder::Recorder;
use crate::digest;
use crate::kit::{
    Adapter, AdapterError, ExecContext, Observation, Plan, RebuildRequest, ToolClass,
};
use crate::request::ReplayRequest;

pub fn request_event(req: &ReplayRequest, agent_version: Option<String>) -> Event {
    let canonical = req.canonical_json();
    Event::RunRequested(Box::new(RunRequested {
        run_id: req.run_id.clone(),
        request_digest: digest::blake3(canonical.as_bytes()),
        request_json: canonical,
        agent: req.agent.clone(),
        agent_version,
        agent_entrypoint: req
            .agent_entrypoint
            .as_ref()
            .map(|p| p.display().to_string()),
        mode: req.mode,
        after_step: req.after_step,
        max_steps: req.max_steps,
        boundary_prompt: req.prompt_facts(),
        source_path: req.trajectory.display().to_string(),
        workspace: req.workspace.display().to_string(),
        state_dir: req.state_dir.display().to_string(),
        output_dir: req.output_dir.display().to_string(),
        pvisor_version: env!("CARGO_PKG_VERSION").into(),
        model: Some(req.model_upstream()),
    }))
}

/// Read and parse the source. Returns the plan and the source's SHA-256.
pub fn parse_source(
    adapter: &dyn Adapter,
    req: &ReplayRequest,
) -> Result<(Plan, String), RunError> {
    adapter
        .parse_path(&req.trajectory)
        .map_err(|error| match another_agent(adapter.name(), req) {
            Some(agent) => RunError::TrajectoryOfAnotherAgent { error, agent },
            None => RunError::Trajectory(error),
        })
}

/// The supported agent (other than `tried`) whose parser reads the trajectory into at least
/// one batch: a hint for a run given the wrong `--agent`.
fn another_agent(tried: &str, req: &ReplayRequest) -> Option<&'static str> {
    crate::adapters::registry()
        .entries()
        .iter()
        .filter(|e| e.name != tried)
        .find(|e| {
            (e.make)()
                .parse_path(&req.trajectory)
                .is_ok_and(|(p, _)| !p.batches.is_empty())
        })
        .map(|e| e.name)
}

/// The batch summaries journaled in one event are at most about this large (the format caps
/// a record at 16 MiB): a longer trajectory lists the others in `batches_listed` events.
const SUMMARIES_PER_EVENT_BYTES: usize = 1 << 20;

/// The summaries of the plan's batches from index `from` (0-based), as many as fit in one
/// event.
fn summaries(
    adapter: &dyn Adapter,
    plan: &Plan,
    from: usize,
) -> Result<Vec<BatchSummary>, RunError> {
    let mut size = 0;
    let mut out = vec![];
    for b in plan.batches.range(from..plan.batches.len()) {
        let b = b?;
        let bytes: usize = b
            .calls
            .iter()
            .map(|c| c.call_id.len() + c.tool.len() + 120)
            .sum::<usize>()
            + 40;
        if !out.is_empty() && size + bytes > SUMMARIES_PER_EVENT_BYTES {
            break;
        }
        size += bytes;
        out.push(BatchSummary {
            index: b.index as u64,
            model_turn: b.model_turn as u64,
            locator: format!("line:{}", b.locator.line),
            calls: b
                .calls
                .iter()
                .map(|c| CallSummary {
                    call_id: c.call_id.clone(),
                    tool: c.tool.clone(),
                    args_digest: digest::json_digest(&c.input),
                    class: adapter.classify(c),
                })
                .collect(),
            complete: b.complete,
        });
    }
    Ok(out)
}

pub fn parse(
    rec: &mut Recorder,
    adapter: &dyn Adapter,
    req: &ReplayRequest,
) -> Result<Plan, RunError> {
    let (plan, sha) = parse_source(adapter, req)?;
    // Written as it is serialized: a long plan (spilled to its file) is never held whole.
    let plan_blob = rec.blob_written(|w| {
        let mut w = std::io::BufWriter::with_capacity(1 << 16, w);
        serde_json::to_writer(&mut w, &plan).map_err(std::io::Error::other)?;
        std::io::Write::flush(&mut w)
    })?;
    let batches = summaries(adapter, &plan, 0)?;
    let batch_count = (batches.len() < plan.batches.len()).then_some(plan.batches.len() as u64);
    rec.record(Event::TrajectoryParsed(TrajectoryParsed {
        source_path: req.trajectory.display().to_string(),
        source_sha256: sha,
        session_id: plan.session_id.clone(),
        recorded_version: plan.recorded_version.clone(),
        model_turns: plan.model_turns as u64,
        batches,
        plan_blob,
        batch_count,
    }))?;
    Ok(plan)
}

/// Journal the next summaries of a long trajectory, from batch `first` (1-based).
pub fn list_batches(
    rec: &mut Recorder,
    adapter: &dyn Adapter,
    plan: &Plan,
    first: u64,
) -> Result<(), RunError> {
    let batches = summaries(adapter, plan, first as usize - 1)?;
    rec.record_deferred(Event::BatchesListed(BatchesListed { first, batches }))?;
    Ok(())
}

pub fn validate(
    rec: &mut Recorder,
    adapter: &dyn Adapter,
    agent: &crate::kit::AgentEntry,
    req: &ReplayRequest,
    plan: &Plan,
) -> Result<(), RunError> {
    // Tool semantics follow the version that recorded the session: one outside the
    // adapter's proven range is refused in every mode, before any tool runs.
    if let Some(v) = &plan.recorded_version {
        if !agent.replays(v) {
            return Err(RunError::UnsupportedVersion(format!(
                "{} was recorded by {} {v}; the {} adapter replays {}; nothing was run",
                req.trajectory.display(),
                agent.name,
                agent.name,
                agent.versions_text()
            )));
        }
        if req.mode == Mode::Continue && !agent.continues(v) {
            return Err(RunError::UnsupportedVersion(format!(
                "{} was recorded by {} {v}; the {} adapter continues sessions of {} (this one can be replayed with --replay-only); nothing was run",
                req.trajectory.display(),
                agent.name,
                agent.name,
                agent.continue_versions_text()
            )));
        }
    }
    let n = req.after_step as usize;
    let max = plan.max_boundary();
    if n > max {
        let why = if n <= plan.batches.len() {
            format!("batch {n} is incomplete (a call has no recorded result)")
        } else {
            format!(
                "the trajectory has {} tool-call batches",
                plan.batches.len()
            )
        };
        let error = crate::error::TrajectoryError::new(
            &req.trajectory,
            plan.batches
                .shape(n.min(plan.batches.len()).saturating_sub(1))
                .map_or(0, |b| b.line),
            "after_step",
            format!("boundary {n} is beyond the last complete batch ({max}): {why}"),
        );
        // No batch at all: perhaps another agent's session that this parser reads as empty.
        let agent = plan
            .batches
            .is_empty()
            .then(|| another_agent(adapter.name(), req))
            .flatten();
        return Err(match agent {
            Some(agent) => RunError::TrajectoryOfAnotherAgent { error, agent },
            None => RunError::Trajectory(error),
        });
    }
    if let (Some(want), Some(have)) = (&req.session_id, &plan.session_id) {
        if want != have {
            return Err(crate::error::TrajectoryError::new(
                &req.trajectory,
                0,
                "sessionId",
                format!("the trajectory's native session is {have}, not the --session-id {want}"),
            )
            .into());
        }
    }
    // What only the adapter knows: whether this session can be rebuilt and continued at
    // boundary n (e.g. it holds what the agent needs to resume).
    adapter.check_plan(plan, n, req.mode)?;
    let mut stale = vec![];
    for b in plan.batches.range(0..n) {
        let b = b?;
        for (i, c) in b.calls.iter().enumerate() {
            match adapter.classify(c) {
                ToolClass::Unknown => {
                    return Err(RunError::ExecutorRefused(match adapter.refusal(c) {
                        Some(why) => format!("batch {} call {i}: tool `{}` ({}) is not replayed by the {} adapter: {why}; nothing was run", b.index, c.tool, c.call_id, adapter.name()),
                        None => format!("batch {} call {i}: tool `{}` ({}) is unknown to the {} adapter; nothing was run", b.index, c.tool, c.call_id, adapter.name()),
                    }))
                }
                ToolClass::NonRegenerable if !req.allow_stale_observations => {
                    return Err(RunError::ExecutorRefused(format!("batch {} call {i}: the observation of `{}` ({}) cannot be regenerated; nothing was run (pass --allow-stale-observations to reuse the original and mark the result degraded)", b.index, c.tool, c.call_id)))
                }
                ToolClass::NonRegenerable => stale.push(format!("{}:{i}", b.index)),
                _ => {}
            }
        }
    }
    let prefix_model_turns = plan.batches.shape(n - 1).map_or(0, |s| s.model_turn) as u64;
    let live_budget = match (req.mode, req.max_steps) {
        (_, None) => None,
        (Mode::Continue, Some(m)) => {
            if m <= prefix_model_turns {
                return Err(RunError::Configuration(format!("--max-steps {m} leaves no live step: the prefix up to batch {n} already has {prefix_model_turns} model turns (max-steps counts them)")));
            }
            Some(m - prefix_model_turns)
        }
        (Mode::ReplayOnly, Some(m)) => {
            if m < prefix_model_turns {
                return Err(RunError::Configuration(format!("--max-steps {m} does not cover the {prefix_model_turns} model turns of the prefix")));
            }
            Some(m - prefix_model_turns)
        }
        (Mode::PrepareOnly, Some(m)) => Some(m.saturating_sub(prefix_model_turns)),
    };
    if req.mode != Mode::PrepareOnly && !req.workspace.is_dir() {
        return Err(RunError::Workspace(format!(
            "workspace {} does not exist or is not a directory",
            req.workspace.display()
        )));
    }
    rec.record(Event::BoundaryValidated(BoundaryValidated {
        after_step: req.after_step,
        prefix_tool_calls: plan.batches.calls_before(n) as u64,
        prefix_model_turns,
        max_boundary: max as u64,
        live_budget,
        stale_calls: stale,
    }))?;
    Ok(())
}

pub fn native_dir(req: &ReplayRequest) -> PathBuf {
    req.output_dir.join("native")
}

pub fn write_session(
    rec: &mut Recorder,
    adapter: &dyn Adapter,
    req: &ReplayRequest,
    plan: &Plan,
    observations: crate::kit::Observations,
    role: SessionRole,
) -> Result<crate::kit::RebuiltSession, RunError> {
    let (state_sub, file) = match role {
        SessionRole::Prepared => (req.state_dir.join("prepared"), "prepared-session"),
        _ => (req.state_dir.clone(), "reconstructed-session"),
    };
    let ext = adapter.session_extension(&req.trajectory);
    let artifact = native_dir(req).join(format!("{file}.{ext}"));
    std::fs::create_dir_all(native_dir(req))
        .map_err(|e| RunError::Internal(format!("{}: {e}", native_dir(req).display())))?;
    let rebuilt = adapter.rebuild(&RebuildRequest {
        source: &req.trajectory,
        plan,
        after_step: req.after_step as usize,
        observations,
        workspace: &req.workspace,
        state_dir: &state_sub,
        artifact_path: &artifact,
        touch_workspace: role != SessionRole::Prepared,
        agent_entrypoint: req.agent_entrypoint.as_deref(),
        for_continuation: role != SessionRole::Prepared && req.mode == Mode::Continue,
    })?;
    rec.record(Event::SessionWritten(SessionWritten {
        role,
        path: rebuilt.artifact_path.display().to_string(),
        digest: rebuilt.digest.clone(),
        records: rebuilt.records,
    }))?;
    Ok(rebuilt)
}

/// The fresh observations recorded in the journal (stale ones are the originals).
pub fn fresh_observations(rec: &Recorder) -> Result<BTreeMap<String, Observation>, RunError> {
    let mut out = BTreeMap::new();
    for c in rec.state.calls.values() {
        if let Some(f) = &c.finished {
            let b = rec.blobs.get_verified(&f.observation_blob).map_err(|e| {
                RunError::Internal(format!(
                    "observation blob of batch {} call {}: {e}",
                    f.batch, f.call
                ))
            })?;
            let o: Observation = serde_json::from_slice(&b).map_err(|e| {
                RunError::Internal(format!("observation blob {}: {e}", f.observation_blob))
            })?;
            out.insert(c.call_id.clone(), o);
        }
    }
    Ok(out)
}

pub fn exec_context(req: &ReplayRequest) -> ExecContext {
    ExecContext {
        workspace: req.workspace.clone(),
        log_dir: req.state_dir.join("logs"),
        state_dir: req.state_dir.clone(),
        timeout: Duration::from_secs(600),
        agent_entrypoint: req.agent_entrypoint.clone(),
    }
}

/// The calls the journal says finished, in order, with their recorded observations.
pub fn completed_calls(
    rec: &Recorder,
    plan: &Plan,
) -> Result<Vec<(crate::kit::ToolCall, Observation)>, RunError> {
    let fresh = fresh_observations(rec)?;
    let mut out = vec![];
    for c in rec.state.calls.values() {
        if c.finished.is_some() {
            let batch = plan.batches.get(c.batch as usize - 1)?;
            if let (Some(call), Some(o)) = (
                batch.as_ref().and_then(|b| b.calls.get(c.call as usize)),
                fresh.get(&c.call_id),
            ) {
                out.push((call.clone(), o.clone()));
            }
        }
    }
    Ok(out)
}

/// Rebuild the reconstructed session again (a resumed run whose process rebuilt it has
/// gone) and check it is the session the journal recorded.
pub fn rebuild_again(
    rec: &Recorder,
    adapter: &dyn Adapter,
    req: &ReplayRequest,
    plan: &Plan,
) -> Result<crate::kit::RebuiltSession, RunError> {
    // Once the agent was started it owns its native session (it appended live turns): only
    // recompute it then, never write it again.
    let started = !rec.state.continuations.is_empty();
    rebuild_with(rec, adapter, req, plan, started, |r| {
        if started {
            adapter.rebuild_for_resume(r)
        } else {
            adapter.rebuild(r)
        }
    })
}

/// The rebuilt session written again for an agent that starts over from the boundary after
/// a crash (`Adapter::rebuild_for_restart`): the same bytes as the journaled one.
pub fn rebuild_for_restart(
    rec: &Recorder,
    adapter: &dyn Adapter,
    req: &ReplayRequest,
    plan: &Plan,
) -> Result<crate::kit::RebuiltSession, RunError> {
    rebuild_with(rec, adapter, req, plan, false, |r| {
        adapter.rebuild_for_restart(r)
    })
}

/// Rebuild with `rebuild` and check the digest against the journaled reconstructed session.
fn rebuild_with(
    rec: &Recorder,
    adapter: &dyn Adapter,
    req: &ReplayRequest,
    plan: &Plan,
    started: bool,
    rebuild: impl Fn(&RebuildRequest) -> Result<crate::kit::RebuiltSession, AdapterError>,
) -> Result<crate::kit::RebuiltSession, RunError> {
    let obs = fresh_observations(rec)?;
    let artifact = native_dir(req).join(format!(
        "reconstructed-session.{}",
        adapter.session_extension(&req.trajectory)
    ));
    let rebuilt = rebuild(&RebuildRequest {
        source: &req.trajectory,
        plan,
        after_step: req.after_step as usize,
        observations: crate::kit::Observations::Fresh(&obs),
        workspace: &req.workspace,
        state_dir: &req.state_dir,
        artifact_path: &artifact,
        touch_workspace: !started,
        agent_entrypoint: req.agent_entrypoint.as_deref(),
        for_continuation: req.mode == Mode::Continue,
    })?;
    if let Some(w) = rec.state.sessions.get("reconstructed") {
        if w.digest != rebuilt.digest {
            return Err(RunError::Internal(format!("the reconstructed session rebuilt on resume ({}) differs from the journaled one ({})", rebuilt.digest, w.digest)));
        }
    }
    Ok(rebuilt)
}

pub fn run_call(
    rec: &mut Recorder,
    tools: &mut dyn crate::kit::ToolRunner,
    adapter: &dyn Adapter,
    call: &crate::kit::ToolCall,
    k: u64,
    i: u64,
) -> Result<(), RunError> {
    let class = adapter.classify(call);
    rec.record(Event::ToolCallStarted(ToolCallStarted {
        batch: k,
        call: i,
        call_id: call.call_id.clone(),
        tool: call.tool.clone(),
        args_digest: digest::json_digest(&call.input),
        class,
    }))?;
    let (obs, exit_code, duration_ms, touched, stale) = if class == ToolClass::NonRegenerable {
        let o = call.original.clone().ok_or_else(|| {
            RunError::Internal(format!(
                "batch {k} call {i} has no original observation to reuse"
            ))
        })?;
        (o, None, 0, vec![], true)
    } else {
        let mut journal_err = None;
        let out = tools.execute_observed(call, &mut |inner| {
            if journal_err.is_none() {
                journal_err = record_inner(rec, k, i, inner).err();
            }
        });
        if let Some(e) = journal_err {
            return Err(e);
        }
        let out = out.map_err(|e| RunError::Executor {
            batch: k,
            call: i,
            tool: call.tool.clone(),
            source: e,
        })?;
        (
            out.observation,
            out.exit_code,
            out.duration_ms,
            out.touched
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            false,
        )
    };
    let blob_bytes = serde_json::to_vec(&obs).map_err(|e| RunError::Internal(e.to_string()))?;
    let blob = rec.blob(&blob_bytes)?;
    rec.record_deferred(Event::ToolCallFinished(ToolCallFinished {
        batch: k,
        call: i,
        call_id: call.call_id.clone(),
        exit_code: exit_code.map(i64::from),
        is_error: obs.is_error,
        duration_ms,
        observation_digest: digest::blake3(obs.text.as_bytes()),
        observation_blob: blob,
        observation_len: obs.text.len() as u64,
        stale,
        touched,
    }))?;
    Ok(())
}

/// Journal one inner call of call `i` of batch `k` (its input and result in a blob).
fn record_inner(
    rec: &mut Recorder,
    k: u64,
    i: u64,
    inner: crate::kit::InnerCall,
) -> Result<(), RunError> {
    let body = serde_json::json!({"input": inner.input, "result": inner.result});
    let bytes = serde_json::to_vec(&body).map_err(|e| RunError::Internal(e.to_string()))?;
    let blob = rec.blob(&bytes)?;
    rec.record_deferred(Event::InnerCallFinished(InnerCallFinished {
        batch: k,
        call: i,
        seq: inner.seq,
        tool: inner.tool,
        input_digest: digest::json_digest(&inner.input),
        blob,
        ok: inner.ok,
        duration_ms: inner.duration_ms,
        touched: inner
            .touched
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
    }))?;
    Ok(())
}

pub fn compare(
    rec: &mut Recorder,
    adapter: &dyn Adapter,
    plan: &Plan,
    k: u64,
    i: u64,
) -> Result<(), RunError> {
    let batch = plan.batches.at(k as usize - 1)?;
    let call = batch
        .calls
        .get(i as usize)
        .ok_or_else(|| RunError::JournalOrder(format!("batch {k} has no call {i}")))?;
    let f = rec.state.calls[&(k, i)]
        .finished
        .clone()
        .expect("decide: finished");
    let fresh: Observation = serde_json::from_slice(
        &rec.blobs
            .get_verified(&f.observation_blob)
            .map_err(|e| RunError::Internal(e.to_string()))?,
    )
    .map_err(|e| RunError::Internal(e.to_string()))?;
    let orig = call.original.clone().unwrap_or(Observation {
        text: String::new(),
        is_error: false,
        native: None,
    });
    let c = crate::compare::observation::compare(
        &orig,
        &fresh,
        |t| adapter.mask_dynamic(call, t),
        adapter.streams_interleave(call),
    );
    let (equal, equal_masked) = (c.equal, c.equal_masked);
    let (diff_digest, diff_blob) = match c.diff {
        None => (None, None),
        Some(d) => {
            let b = rec.blob(d.as_bytes())?;
            (Some(digest::blake3(d.as_bytes())), Some(b))
        }
    };
    rec.record_deferred(Event::ObservationCompared(ObservationCompared {
        batch: k,
        call: i,
        call_id: call.call_id.clone(),
        equal,
        equal_masked,
        diff_digest,
        diff_blob,
    }))?;
    Ok(())
}

/// Digest of every path the finished calls touched: `path NUL content-digest` lines, sorted.
pub fn workspace_digest(rec: &Recorder, workspace: &std::path::Path) -> String {
    workspace_listing(
        rec.state
            .calls
            .values()
            .filter_map(|c| c.finished.as_ref())
            .flat_map(|f| f.touched.iter().cloned()),
        workspace,
    )
    .0
}

/// The listing behind [`workspace_digest`] (`path NUL blake3-hex-or-"-" LF`, sorted) and its
/// digest: the digest is `blake3:` + the blob name of the listing, so storing the listing in
/// the blob store makes every `batch_finished.workspace_digest` resolvable path by path.
pub fn workspace_listing(
    paths: impl Iterator<Item = String>,
    workspace: &std::path::Path,
) -> (String, Vec<u8>) {
    let mut paths: Vec<String> = paths.collect();
    paths.sort();
    paths.dedup();
    let mut listing = Vec::new();
    for p in paths {
        let content = std::fs::read(workspace.join(&p))
            .map(|b| blake3::hash(&b).to_hex().to_string())
            .unwrap_or_else(|_| "-".into());
        listing.extend_from_slice(p.as_bytes());
        listing.push(0);
        listing.extend_from_slice(content.as_bytes());
        listing.push(b'\n');
    }
    (
        format!("blake3:{}", blake3::hash(&listing).to_hex()),
        listing,
    )
}

/// `batch_finished` for batch k, its per-path listing stored as a blob first.
pub fn finish_batch(rec: &mut Recorder, req: &ReplayRequest, k: u64) -> Result<(), RunError> {
    let paths = rec
        .state
        .calls
        .values()
        .filter_map(|c| c.finished.as_ref())
        .flat_map(|f| f.touched.iter().cloned())
        .collect::<Vec<_>>();
    let (d, listing) = workspace_listing(paths.into_iter(), &req.workspace);
    rec.blob(&listing)?;
    rec.record_deferred(Event::BatchFinished(BatchFinished {
        batch: k,
        workspace_digest: d,
    }))?;
    Ok(())
}

fn parse_listing(b: &[u8]) -> BTreeMap<String, String> {
    String::from_utf8_lossy(b)
        .lines()
        .filter_map(|l| l.split_once('\0'))
        .map(|(p, d)| (p.to_string(), d.to_string()))
        .collect()
}

/// Before a resumed run re-executes anything: the paths the completed batches touched must
/// still hold what the journal says the last finished batch left (paths changed by calls that
/// completed after it are excluded; with a call in doubt the check waits for its decision).
/// Returns the differing paths, each `path (journaled X, now Y)`.
pub fn check_workspace(
    state: &crate::fold::ReplayState,
    blobs: &crate::journal::BlobStore,
    workspace: &std::path::Path,
) -> Result<(), Vec<String>> {
    use crate::fold::Phase;
    let k = match state.phase {
        Phase::Replaying(k) => k - 1,
        Phase::BatchDone(k) => k,
        Phase::Replayed => state.batches_done,
        _ => return Ok(()),
    };
    let Some(want) = state
        .last_batch_digest
        .as_ref()
        .filter(|(b, _)| *b == k)
        .map(|(_, d)| d)
    else {
        return Ok(());
    };
    if state.in_doubt().is_some() {
        return Ok(());
    }
    let touched = |pred: &dyn Fn(u64) -> bool| -> Vec<String> {
        state
            .calls
            .values()
            .filter(|c| pred(c.batch))
            .filter_map(|c| c.finished.as_ref())
            .flat_map(|f| f.touched.iter().cloned())
            .collect()
    };
    // A completed later call that changes the workspace without naming what it touched (a
    // shell command) makes every path a legitimate change: nothing can be attributed then.
    if state.calls.values().any(|c| {
        c.batch > k
            && c.finished.as_ref().is_some_and(|f| f.touched.is_empty())
            && c.class != ToolClass::ReadOnly
    }) {
        return Ok(());
    }
    let done = touched(&|b| b <= k);
    let later: std::collections::BTreeSet<String> = touched(&|b| b > k).into_iter().collect();
    let (now, listing) = workspace_listing(done.into_iter(), workspace);
    if &now == want {
        return Ok(());
    }
    let now_map = parse_listing(&listing);
    let Ok(journaled) = blobs.get_verified(want.trim_start_matches("blake3:")) else {
        // A journal without listings: only the whole digest is known.
        return if later.is_empty() {
            Err(now_map
                .keys()
                .map(|p| format!("{p} (one of these differs)"))
                .collect())
        } else {
            Ok(())
        };
    };
    let then = parse_listing(&journaled);
    let diffs: Vec<String> = then
        .iter()
        .filter(|(p, _)| !later.contains(*p))
        .filter(|(p, d)| now_map.get(*p) != Some(*d))
        .map(|(p, d)| {
            format!(
                "{p} (journaled {}, now {})",
                short(d),
                now_map.get(p).map(|x| short(x)).unwrap_or("-")
            )
        })
        .collect();
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(diffs)
    }
}

fn short(d: &str) -> &str {
    if d == "-" {
        "missing"
    } else {
        &d[..d.len().min(12)]
    }
}
