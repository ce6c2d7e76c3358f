//! The fold: one pure function from events to [`ReplayState`], rejecting illegal transitions
//! with the offending sequence number.

use journal_format::event::*;
use journal_format::Event;

use super::state::{CallState, FinishedBatch, Parsed, Phase, Refused, ReplayState};
use crate::journal::StoredEvent;

/// An event that the phase machine does not allow where it stands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "illegal transition at sequence number {seq}: event `{event}` in phase `{phase}`: {reason}"
)]
pub struct FoldError {
    pub seq: u64,
    pub event: String,
    pub phase: String,
    pub reason: String,
}

/// Fold a whole journal.
pub fn fold<'a>(
    events: impl IntoIterator<Item = &'a StoredEvent>,
) -> Result<ReplayState, FoldError> {
    let mut s = ReplayState::default();
    for e in events {
        apply(&mut s, e)?;
    }
    Ok(s)
}

/// Apply one event as a reader that streams the journal does: when it finishes a batch, that
/// batch's calls and checkpoints leave the state and are returned
/// ([`ReplayState::take_finished_batch`]), so the state stays the same size however long
/// the run. Everything [`derive`](super::derive) reads is the same as after [`apply`].
pub fn apply_streaming(
    s: &mut ReplayState,
    se: &StoredEvent,
) -> Result<Option<FinishedBatch>, FoldError> {
    apply(s, se)?;
    Ok(match &se.event {
        Event::BatchFinished(b) => Some(s.take_finished_batch(b.batch)),
        _ => None,
    })
}

fn call_key(batch: u64, call: u64) -> (u64, u64) {
    (batch, call)
}

/// Apply one event to the state (the step of the fold).
pub fn apply(s: &mut ReplayState, se: &StoredEvent) -> Result<(), FoldError> {
    let err = |s: &ReplayState, reason: String| FoldError {
        seq: se.seq,
        event: se.event.name().to_string(),
        phase: s.phase.name(),
        reason,
    };
    let ev = &se.event;
    // Events allowed in any phase.
    match ev {
        Event::Recovered(r) => {
            s.recoveries.push(r.clone());
            return {
                finish(s, se);
                Ok(())
            };
        }
        Event::BlobStored(b) => {
            if blake3::hash(&b.bytes).to_hex().as_str() != b.blob {
                return Err(err(
                    s,
                    format!("the content carried for blob {} does not hash to its name", b.blob),
                ));
            }
            finish(s, se);
            return Ok(());
        }
        Event::Unknown { kind, .. } => return Err(err(s, format!("event kind {kind} is unknown to this pvisor (written by a newer version); upgrade to fold it"))),
        _ => {}
    }
    if s.phase.is_terminal() {
        return Err(err(s, "the run already ended".into()));
    }
    let mode = s.mode();
    match (s.phase, ev) {
        (_, Event::RunFailed(f)) => {
            // Allowed from every non-terminal phase, `empty` included (a failure before the
            // request could be recorded, in a state directory that exists).
            s.failure = Some(f.clone());
            s.phase = Phase::Failed;
        }
        (Phase::Empty, Event::RunRequested(r)) => {
            s.request = Some((**r).clone());
            s.phase = Phase::Requested;
        }
        (p, Event::Resumed(_)) if p != Phase::Empty => {
            s.resumes += 1;
        }
        (Phase::Requested, Event::TrajectoryParsed(t)) => {
            s.parsed = Some(Parsed::of(t));
            s.phase = Phase::Parsed;
        }
        (Phase::Parsed, Event::BatchesListed(l)) => {
            let Some(next) = s.batches_to_list() else {
                return Err(err(
                    s,
                    "batches listed beyond the parsed batch count".into(),
                ));
            };
            if l.first != next {
                return Err(err(
                    s,
                    format!("batches listed from {}, expected from {next}", l.first),
                ));
            }
            let p = s.parsed.as_mut().expect("batches_to_list needs a parse");
            let count = p.batch_count;
            if p.listed() + l.batches.len() as u64 > count {
                return Err(err(
                    s,
                    format!("batches listed beyond the parsed batch count {count}"),
                ));
            }
            p.list(&l.batches);
        }
        (Phase::Parsed, Event::BoundaryValidated(b)) => {
            if let Some(next) = s.batches_to_list() {
                return Err(err(
                    s,
                    format!("boundary validated before batch {next} was listed"),
                ));
            }
            let n = s.parsed.as_ref().map(|p| p.listed()).unwrap_or(0);
            if b.after_step > n {
                return Err(err(
                    s,
                    format!("boundary {} beyond the {n} parsed batches", b.after_step),
                ));
            }
            s.boundary = Some(b.clone());
            s.phase = Phase::Validated;
        }
        (Phase::Validated, Event::SessionWritten(w)) if w.role == SessionRole::Prepared => {
            s.sessions.insert("prepared".into(), w.clone());
            s.phase = Phase::Prepared;
        }
        (Phase::Prepared, Event::RunFinished(f)) if mode == Some(Mode::PrepareOnly) => {
            s.finished = Some(f.clone());
            s.phase = Phase::Finished;
        }
        (Phase::Prepared, Event::BatchStarted(b))
        | (Phase::BatchDone(_), Event::BatchStarted(b))
            if mode != Some(Mode::PrepareOnly) =>
        {
            let expect = match s.phase {
                Phase::BatchDone(k) => k + 1,
                _ => 1,
            };
            if b.batch != expect {
                return Err(err(
                    s,
                    format!("expected batch {expect} to start, got batch {}", b.batch),
                ));
            }
            if b.batch > s.after_step() {
                return Err(err(
                    s,
                    format!(
                        "batch {} is beyond the boundary {}",
                        b.batch,
                        s.after_step()
                    ),
                ));
            }
            s.phase = Phase::Replaying(b.batch);
        }
        (Phase::Replaying(k), Event::ToolCallStarted(c)) => {
            if c.batch != k {
                return Err(err(
                    s,
                    format!("tool call of batch {} inside batch {k}", c.batch),
                ));
            }
            if c.call > 0 {
                let prev_done = s
                    .calls
                    .get(&call_key(k, c.call - 1))
                    .map(|p| p.finished.is_some())
                    .unwrap_or(false);
                if !prev_done {
                    return Err(err(
                        s,
                        format!(
                            "call {} started before call {} finished",
                            c.call,
                            c.call - 1
                        ),
                    ));
                }
            }
            let entry = s.calls.entry(call_key(k, c.call)).or_default();
            if entry.finished.is_some() {
                return Err(err(
                    s,
                    format!(
                        "call {} of batch {k} already finished; completed calls are never re-run",
                        c.call
                    ),
                ));
            }
            if entry.starts > 0 && entry.accepted_decisions() < entry.starts as usize {
                return Err(err(
                    s,
                    format!(
                        "call {} of batch {k} restarted without an in-doubt decision",
                        c.call
                    ),
                ));
            }
            entry.batch = k;
            entry.call = c.call;
            entry.call_id = c.call_id.clone();
            entry.tool = c.tool.clone();
            entry.class = c.class;
            entry.args_digest = c.args_digest.clone();
            entry.starts += 1;
            s.blocked = None;
        }
        // An inner call belongs to a call that started and has not finished; the fold only
        // checks that (the audit reads the inner calls themselves).
        (Phase::Replaying(k), Event::InnerCallFinished(f)) => {
            match s.calls.get(&call_key(k, f.call)) {
                Some(e) if e.starts > 0 && e.finished.is_none() && f.batch == k => {}
                _ => {
                    return Err(err(
                        s,
                        format!(
                            "an inner call of call {} of batch {} outside that call's run",
                            f.call, f.batch
                        ),
                    ))
                }
            }
        }
        (Phase::Replaying(k), Event::WorkspaceCheckpointed(c)) if c.batch == k => {
            s.checkpoints
                .entry((c.batch, c.call))
                .or_insert_with(|| c.clone());
        }
        (Phase::Continuing, Event::WorkspaceCheckpointed(c)) if c.batch == 0 => {
            s.checkpoints
                .entry((c.batch, c.call))
                .or_insert_with(|| c.clone());
        }
        (Phase::Replaying(k), Event::WorkspaceRestored(r)) if r.batch == k => {
            restored(s, r).map_err(|m| err(s, m))?;
        }
        (Phase::Continuing, Event::WorkspaceRestored(r)) if r.batch == 0 => {
            restored(s, r).map_err(|m| err(s, m))?;
        }
        (Phase::Replaying(k), Event::InDoubtResolved(d)) => {
            let Some(entry) = s.calls.get_mut(&call_key(k, d.call)) else {
                return Err(err(s, format!("no started call {} in batch {k}", d.call)));
            };
            if !entry.in_doubt() {
                return Err(err(
                    s,
                    format!("call {} of batch {k} is not in doubt", d.call),
                ));
            }
            entry.in_doubt_decisions.push(d.decision);
            s.blocked = (d.decision == InDoubtDecision::Stopped).then(|| format!("batch {k} call {} ({}, {}) started before the crash and has no recorded outcome; it changes the workspace, so re-running it could apply it twice", d.call, d.tool, d.call_id));
        }
        (Phase::Replaying(k), Event::ToolCallFinished(f)) => {
            let entry = s.calls.get_mut(&call_key(k, f.call));
            match entry {
                Some(e)
                    if e.starts > 0
                        && e.finished.is_none()
                        && f.batch == k
                        && e.call_id == f.call_id =>
                {
                    s.tally.finished += 1;
                    s.tally.stale += f.stale as u64;
                    e.finished = Some(f.clone())
                }
                _ => {
                    return Err(err(
                        s,
                        format!(
                            "call {} of batch {} finished without being started",
                            f.call, f.batch
                        ),
                    ))
                }
            }
        }
        (Phase::Replaying(k), Event::ObservationCompared(c)) => {
            match s.calls.get_mut(&call_key(k, c.call)) {
                Some(e) if e.finished.is_some() && e.compared.is_none() => {
                    s.tally.equal += c.equal as u64;
                    s.tally.equal_masked += (c.equal || c.equal_masked) as u64;
                    s.tally.differ += (!c.equal && !c.equal_masked) as u64;
                    e.compared = Some(c.clone())
                }
                _ => {
                    return Err(err(
                        s,
                        format!(
                            "comparison of call {} before it finished (or twice)",
                            c.call
                        ),
                    ))
                }
            }
        }
        (Phase::Replaying(k), Event::BatchFinished(b)) => {
            let expected_calls = s.parsed.as_ref().and_then(|p| p.calls_of(k)).unwrap_or(0);
            let done = s
                .calls
                .range((k, 0)..(k + 1, 0))
                .filter(|(_, c)| c.finished.is_some())
                .count() as u64;
            if b.batch != k || done != expected_calls {
                return Err(err(
                    s,
                    format!(
                        "batch {} finished with {done} of {expected_calls} calls done",
                        b.batch
                    ),
                ));
            }
            s.batches_done += 1;
            s.last_batch_digest = Some((k, b.workspace_digest.clone()));
            s.phase = Phase::BatchDone(k);
        }
        (Phase::Prepared, Event::SessionWritten(w))
        | (Phase::BatchDone(_), Event::SessionWritten(w))
            if w.role == SessionRole::Reconstructed && mode != Some(Mode::PrepareOnly) =>
        {
            if s.batches_done != s.after_step() {
                return Err(err(
                    s,
                    format!(
                        "reconstructed session written after {} of {} batches",
                        s.batches_done,
                        s.after_step()
                    ),
                ));
            }
            s.sessions.insert("reconstructed".into(), w.clone());
            s.phase = Phase::Replayed;
        }
        (Phase::Replayed, Event::RunFinished(f)) if mode == Some(Mode::ReplayOnly) => {
            s.finished = Some(f.clone());
            s.phase = Phase::Finished;
        }
        (Phase::Replayed, Event::BridgeStarted(b))
        | (Phase::Continuing, Event::BridgeStarted(b))
            if mode == Some(Mode::Continue) =>
        {
            // A resumed continuation starts a second bridge on the longer prefix; the first
            // start (whose prefix is the rebuilt prefix, O′N last) stays the reference.
            if s.bridge.started.is_none() {
                s.bridge.started = Some(b.clone());
            } else {
                s.bridge.restarts.push(b.clone());
            }
        }
        (Phase::Replayed, Event::ContinuationStarted(c))
        | (Phase::Continuing, Event::ContinuationStarted(c))
            if mode == Some(Mode::Continue) =>
        {
            let expect = s.continuations.len() as u64 + 1;
            if c.attempt != expect {
                return Err(err(
                    s,
                    format!(
                        "continuation attempt {} where {expect} was expected",
                        c.attempt
                    ),
                ));
            }
            if c.from_boundary {
                if c.attempt < 2 {
                    return Err(err(
                        s,
                        "a first continuation attempt cannot start again from the boundary".into(),
                    ));
                }
                // The agent starts over from the rebuilt session: the earlier attempts' steps
                // are not part of its conversation any more, and it is given the boundary
                // prompt again.
                let old = std::mem::take(&mut s.steps);
                s.superseded_steps.extend(old);
                s.bridge.injections = 0;
            }
            s.continuations.push(c.clone());
            s.steps_this_attempt = 0;
            s.blocked = None;
            s.phase = Phase::Continuing;
        }
        (Phase::Continuing, Event::InDoubtResolved(d)) if d.batch == 0 => {
            // A live step whose tool calls were in flight when the run crashed (batch 0 =
            // the continuation; `call` = the step number).
            if d.call == 0 || d.call > s.steps.len() as u64 {
                return Err(err(
                    s,
                    format!(
                        "in-doubt live step {} but the journal has {} steps",
                        d.call,
                        s.steps.len()
                    ),
                ));
            }
            s.live_in_doubt.push(d.clone());
            s.blocked = (d.decision == InDoubtDecision::Stopped).then(|| format!("live step {} ({}: {}) was interrupted while its tool calls ran; they change the workspace, so asking the model again could apply them twice", d.call, d.tool, d.call_id));
        }
        (Phase::Continuing, Event::BridgeRequestValidated(v)) => {
            if v.side {
                s.bridge.side_requests += 1;
            } else if v.ok {
                s.bridge.validated += 1;
                if v.n == 1 && s.bridge.first_request_ok.is_none() {
                    s.bridge.first_request_ok = Some(true);
                }
            } else if v.budget_exhausted {
                // The request after the last allowed step: the budget's end, not an error.
                s.bridge.budget_stops += 1;
            } else {
                s.bridge.rejected += 1;
                if v.n == 1 {
                    s.bridge.first_request_ok = Some(false);
                }
                s.bridge.refusals.push(Refused {
                    seq: se.seq,
                    n: v.n,
                    reason: v.reason.clone().unwrap_or_default(),
                    difference: v.difference.clone(),
                    blob: v.refused_request_blob.clone(),
                });
            }
            s.bridge.removed.extend(v.removed_items.iter().cloned());
            if v.boundary_prompt_injected {
                s.bridge.injections += 1;
                if s.bridge.injections > 1 {
                    return Err(err(s, "boundary prompt injected more than once".into()));
                }
            }
        }
        (Phase::Continuing, Event::ContinuationStep(st)) => {
            let expect = s.steps.len() as u64 + 1;
            let resumed_first = s.continuations.len() > 1 && s.steps_this_attempt == 0;
            if resumed_first && st.n >= 1 && st.n < expect {
                // The first step of a resumed attempt may go back: the replies of steps n… were
                // journaled, but the agent's session did not hold them as complete turns when
                // the run crashed (the agent had not stored them yet, or their tool calls were
                // cut as in doubt), so the model was asked again from step n. The steps of the
                // agent's actual conversation are the ones that count; the superseded ones
                // stay journaled and are listed here.
                let old = s.steps.split_off(st.n as usize - 1);
                s.superseded_steps.extend(old);
                s.steps.push(st.clone());
            } else if st.n != expect {
                return Err(err(
                    s,
                    format!("continuation step {} where {expect} was expected", st.n),
                ));
            } else {
                s.steps.push(st.clone());
            }
            s.steps_this_attempt += 1;
        }
        (Phase::Continuing, Event::AgentExited(a)) => {
            s.agent_exit = Some(a.clone());
            s.phase = Phase::Continued;
        }
        (Phase::Continued, Event::SessionWritten(w)) if w.role == SessionRole::Continued => {
            s.sessions.insert("continued".into(), w.clone());
        }
        (Phase::Continued, Event::RunFinished(f)) => {
            s.finished = Some(f.clone());
            s.phase = Phase::Finished;
        }
        (_, other) => {
            return Err(err(
                s,
                format!(
                    "not allowed here (mode {:?})",
                    mode.map(|m| format!("{m:?}"))
                        .unwrap_or_else(|| "unknown".into())
                ),
            )
            .with_event(other));
        }
    }
    finish(s, se);
    Ok(())
}

trait WithEvent {
    fn with_event(self, e: &Event) -> Self;
}
impl WithEvent for FoldError {
    fn with_event(mut self, e: &Event) -> Self {
        self.event = e.name().to_string();
        self
    }
}

fn finish(s: &mut ReplayState, se: &StoredEvent) {
    s.last_seq = se.seq;
    s.events += 1;
    s.first_at_ms.get_or_insert(se.at_ms);
    s.last_at_ms = Some(se.at_ms);
}

impl Default for CallState {
    fn default() -> Self {
        CallState {
            batch: 0,
            call: 0,
            call_id: String::new(),
            tool: String::new(),
            class: CallClass::Unknown,
            args_digest: String::new(),
            starts: 0,
            finished: None,
            compared: None,
            in_doubt_decisions: Vec::new(),
        }
    }
}

/// A restore names a checkpoint the journal holds.
fn restored(s: &mut ReplayState, r: &WorkspaceRestored) -> Result<(), String> {
    match s.checkpoints.get(&(r.batch, r.call)) {
        Some(c) if c.manifest_blob == r.manifest_blob => {
            s.restores.push(r.clone());
            Ok(())
        }
        _ => Err(format!(
            "workspace restored to a checkpoint of ({}, {}) the journal does not hold",
            r.batch, r.call
        )),
    }
}
