//! `pvisor journal stress STATE_DIR` (hidden): a miniature engine used by the kill-loop
//! tests. It folds the journal, decides the next event, appends it durably and prints
//! `ack <seq>` once it is durable, until the run is finished or `--max-events` is reached.
//! A SIGKILL at any instant must never lose an acknowledged event.

use std::io::Write;
use std::path::PathBuf;

use journal_format::event::*;
use journal_format::Event;

use super::error::CliError;
use super::exit;
use crate::fold::{self, Phase, ReplayState};
use crate::journal::{Durability, Journal};

/// Batches of the synthetic run when `--batches` is not given (4 events per batch).
pub const DEFAULT_BATCHES: u64 = 400;

/// Batch summaries per journaled event (about 1 MiB of them, the size a replay lists).
const SUMMARIES_PER_EVENT: u64 = 5_000;

/// The summaries of batches `first..` (at most [`SUMMARIES_PER_EVENT`], none past `batches`).
fn summaries(first: u64, batches: u64) -> Vec<BatchSummary> {
    let d = |x: String| crate::digest::blake3(x.as_bytes());
    (first..=batches.min(first + SUMMARIES_PER_EVENT - 1))
        .map(|i| BatchSummary {
            index: i,
            model_turn: i,
            locator: format!("line:{i}"),
            calls: vec![CallSummary {
                call_id: format!("c{i}"),
                tool: "Bash".into(),
                args_digest: d(format!("a{i}")),
                class: CallClass::Mutating,
            }],
            complete: true,
        })
        .collect()
}

/// What every call of the synthetic run observes: one blob, stored once, so the run's
/// blobs are all present (an audit of it checks them and finds nothing).
const OBSERVATION: &[u8] = br#"{"text":"","is_error":false}"#;

fn next(s: &ReplayState, started_here: bool, batches: u64, blob: &str) -> Option<Event> {
    let d = |x: String| crate::digest::blake3(x.as_bytes());
    Some(match s.phase {
        Phase::Empty => Event::RunRequested(Box::new(RunRequested {
            run_id: "stress".into(),
            request_digest: d("req".into()),
            request_json: "{}".into(),
            agent: "stress".into(),
            agent_version: None,
            agent_entrypoint: None,
            mode: Mode::ReplayOnly,
            after_step: batches,
            max_steps: None,
            boundary_prompt: None,
            source_path: "-".into(),
            workspace: "-".into(),
            state_dir: "-".into(),
            output_dir: "-".into(),
            pvisor_version: env!("CARGO_PKG_VERSION").into(),
            model: None,
        })),
        Phase::Requested => Event::TrajectoryParsed(TrajectoryParsed {
            source_path: "-".into(),
            source_sha256: "sha256:-".into(),
            session_id: None,
            recorded_version: None,
            model_turns: batches,
            batches: summaries(1, batches),
            plan_blob: "-".into(),
            batch_count: (batches > SUMMARIES_PER_EVENT).then_some(batches),
        }),
        // A long run lists its other batches in bounded events, as a replay does.
        Phase::Parsed if s.batches_to_list().is_some() => {
            let first = s.batches_to_list().unwrap_or(1);
            Event::BatchesListed(BatchesListed {
                first,
                batches: summaries(first, batches),
            })
        }
        Phase::Parsed => Event::BoundaryValidated(BoundaryValidated {
            after_step: batches,
            prefix_tool_calls: batches,
            prefix_model_turns: batches,
            max_boundary: batches,
            live_budget: None,
            stale_calls: vec![],
        }),
        Phase::Validated => Event::SessionWritten(SessionWritten {
            role: SessionRole::Prepared,
            path: "-".into(),
            digest: d("p".into()),
            records: 0,
        }),
        Phase::Prepared => Event::BatchStarted(BatchStarted { batch: 1, calls: 1 }),
        Phase::BatchDone(k) if k < batches => Event::BatchStarted(BatchStarted {
            batch: k + 1,
            calls: 1,
        }),
        Phase::BatchDone(_) => Event::SessionWritten(SessionWritten {
            role: SessionRole::Reconstructed,
            path: "-".into(),
            digest: d("r".into()),
            records: 0,
        }),
        Phase::Replaying(k) => {
            let call = s.calls.get(&(k, 0));
            match call {
                None => Event::ToolCallStarted(ToolCallStarted {
                    batch: k,
                    call: 0,
                    call_id: format!("c{k}"),
                    tool: "Bash".into(),
                    args_digest: d(format!("a{k}")),
                    class: CallClass::Mutating,
                }),
                Some(c) if c.in_doubt() && started_here => {
                    Event::ToolCallFinished(ToolCallFinished {
                        batch: k,
                        call: 0,
                        call_id: c.call_id.clone(),
                        exit_code: Some(0),
                        is_error: false,
                        duration_ms: 1,
                        observation_digest: d(String::new()),
                        observation_blob: blob.into(),
                        observation_len: OBSERVATION.len() as u64,
                        stale: false,
                        touched: vec![],
                    })
                }
                Some(c) if c.in_doubt() && c.in_doubt_decisions.len() < c.starts as usize => {
                    Event::InDoubtResolved(InDoubtResolved {
                        batch: k,
                        call: 0,
                        call_id: c.call_id.clone(),
                        tool: c.tool.clone(),
                        decision: InDoubtDecision::RerunAccepted,
                    })
                }
                Some(c) if c.in_doubt() && c.in_doubt_decisions.len() == c.starts as usize => {
                    Event::ToolCallStarted(ToolCallStarted {
                        batch: k,
                        call: 0,
                        call_id: format!("c{k}"),
                        tool: "Bash".into(),
                        args_digest: d(format!("a{k}")),
                        class: CallClass::Mutating,
                    })
                }
                Some(_) => Event::BatchFinished(BatchFinished {
                    batch: k,
                    workspace_digest: d(format!("w{k}")),
                }),
            }
        }
        Phase::Replayed => Event::RunFinished(RunFinished {
            result_digest: d("done".into()),
        }),
        _ => return None,
    })
}

pub fn run(state_dir: PathBuf, max_events: u64, batches: u64) -> Result<i32, CliError> {
    let (mut j, events, _) = Journal::open_dir(&state_dir)?;
    let blob = crate::journal::BlobStore::new(&state_dir)
        .put(OBSERVATION)
        .map_err(|e| {
            CliError::new(
                exit::CONFIGURATION,
                format!("cannot store a blob in {}: {e}", state_dir.display()),
                None,
            )
        })?;
    let mut state = fold::fold(&events)
        .map_err(|e| CliError::new(exit::JOURNAL_ILLEGAL_ORDER, e.to_string(), None))?;
    let stdout = std::io::stdout();
    let mut n = 0;
    let mut started_here = false;
    while n < max_events {
        // A call started by an earlier (killed) process and never finished is in doubt: the
        // decision is journaled before it is re-run. A call this process started is finished.
        let Some(ev) = next(&state, started_here, batches, &blob) else {
            break;
        };
        started_here = matches!(ev, Event::ToolCallStarted(_));
        let stored = j.append(ev, Durability::Sync)?;
        fold::apply(&mut state, &stored)
            .map_err(|e| CliError::new(exit::JOURNAL_ILLEGAL_ORDER, e.to_string(), None))?;
        let mut out = stdout.lock();
        let _ = writeln!(out, "ack {}", stored.seq);
        let _ = out.flush();
        n += 1;
    }
    Ok(exit::OK)
}
