//! The streaming fold (`apply_streaming`, which takes each finished batch out of the state)
//! against the whole fold: on generated runs — stale reuses, every comparison outcome,
//! checkpoints, in-doubt re-runs, failures, cuts and out-of-order events — both refuse the
//! same event with the same error, and everything derived from the state is the same.

use journal_format::event::*;
use journal_format::Event;
use proptest::prelude::*;
use pvisor::fold::{self, ReplayState};
use pvisor::journal::StoredEvent;

/// One call of a generated batch.
#[derive(Debug, Clone)]
struct Call {
    stale: bool,
    /// 0: not compared, 1: equal, 2: equal once masked, 3: differs.
    outcome: u8,
    checkpoint: bool,
    /// Interrupted once, then re-run after an accepted in-doubt decision.
    rerun: bool,
}

fn call() -> impl Strategy<Value = Call> {
    (
        any::<bool>(),
        0u8..4,
        any::<bool>(),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(stale, outcome, checkpoint, rerun)| Call {
            stale,
            outcome,
            checkpoint,
            rerun,
        })
}

fn summary(i: u64, calls: usize) -> BatchSummary {
    BatchSummary {
        index: i,
        model_turn: i,
        locator: format!("line:{i}"),
        calls: (0..calls)
            .map(|c| CallSummary {
                call_id: format!("c{i}.{c}"),
                tool: "Bash".into(),
                args_digest: format!("a{i}.{c}"),
                class: CallClass::Mutating,
            })
            .collect(),
        complete: true,
    }
}

/// The events of a replay-only run of `batches`, its listing split in events of `per_event`.
fn run(batches: &[Vec<Call>], per_event: usize, failed: bool) -> Vec<Event> {
    let n = batches.len() as u64;
    let mut ev = vec![Event::RunRequested(Box::new(RunRequested {
        run_id: "r".into(),
        request_digest: "d".into(),
        request_json: "{}".into(),
        agent: "codex".into(),
        agent_version: None,
        agent_entrypoint: None,
        mode: Mode::ReplayOnly,
        after_step: n,
        max_steps: None,
        boundary_prompt: None,
        source_path: "s".into(),
        workspace: "w".into(),
        state_dir: "st".into(),
        output_dir: "o".into(),
        pvisor_version: "0".into(),
        model: None,
    }))];
    let summaries: Vec<BatchSummary> = batches
        .iter()
        .enumerate()
        .map(|(i, b)| summary(i as u64 + 1, b.len()))
        .collect();
    let mut chunks = summaries.chunks(per_event.max(1));
    ev.push(Event::TrajectoryParsed(TrajectoryParsed {
        source_path: "s".into(),
        source_sha256: "sha256:x".into(),
        session_id: Some("sid".into()),
        recorded_version: None,
        model_turns: n,
        batches: chunks.next().map(|c| c.to_vec()).unwrap_or_default(),
        plan_blob: "p".into(),
        batch_count: (batches.len() > per_event).then_some(n),
    }));
    let mut first = per_event as u64 + 1;
    for c in chunks {
        ev.push(Event::BatchesListed(BatchesListed {
            first,
            batches: c.to_vec(),
        }));
        first += c.len() as u64;
    }
    ev.push(Event::BoundaryValidated(BoundaryValidated {
        after_step: n,
        prefix_tool_calls: batches.iter().map(|b| b.len() as u64).sum(),
        prefix_model_turns: n,
        max_boundary: n,
        live_budget: None,
        stale_calls: vec![],
    }));
    ev.push(Event::SessionWritten(SessionWritten {
        role: SessionRole::Prepared,
        path: "p".into(),
        digest: "d".into(),
        records: 0,
    }));
    for (i, b) in batches.iter().enumerate() {
        let k = i as u64 + 1;
        ev.push(Event::BatchStarted(BatchStarted {
            batch: k,
            calls: b.len() as u64,
        }));
        for (j, c) in b.iter().enumerate() {
            let j = j as u64;
            let id = format!("c{k}.{j}");
            if c.checkpoint {
                ev.push(Event::WorkspaceCheckpointed(WorkspaceCheckpointed {
                    batch: k,
                    call: j,
                    manifest_blob: format!("m{k}.{j}"),
                    entries: 1,
                    new_bytes: 0,
                    unstored: vec![],
                }));
            }
            let start = Event::ToolCallStarted(ToolCallStarted {
                batch: k,
                call: j,
                call_id: id.clone(),
                tool: "Bash".into(),
                args_digest: format!("a{k}.{j}"),
                class: CallClass::Mutating,
            });
            if c.rerun {
                ev.push(start.clone());
                ev.push(Event::InDoubtResolved(InDoubtResolved {
                    batch: k,
                    call: j,
                    call_id: id.clone(),
                    tool: "Bash".into(),
                    decision: InDoubtDecision::RerunAccepted,
                }));
            }
            ev.push(start);
            ev.push(Event::ToolCallFinished(ToolCallFinished {
                batch: k,
                call: j,
                call_id: id.clone(),
                exit_code: Some(0),
                is_error: false,
                duration_ms: 1,
                observation_digest: format!("o{k}.{j}"),
                observation_blob: format!("b{k}.{j}"),
                observation_len: 1,
                stale: c.stale,
                touched: vec![],
            }));
            if c.outcome > 0 {
                ev.push(Event::ObservationCompared(ObservationCompared {
                    batch: k,
                    call: j,
                    call_id: id,
                    equal: c.outcome == 1,
                    equal_masked: c.outcome == 2,
                    diff_digest: None,
                    diff_blob: None,
                }));
            }
        }
        ev.push(Event::BatchFinished(BatchFinished {
            batch: k,
            workspace_digest: format!("w{k}"),
        }));
    }
    ev.push(Event::SessionWritten(SessionWritten {
        role: SessionRole::Reconstructed,
        path: "r".into(),
        digest: "d".into(),
        records: 0,
    }));
    ev.push(if failed {
        Event::RunFailed(RunFailed {
            category: FailureCategory::ExecutorError,
            message: "m".into(),
            retryable: false,
        })
    } else {
        Event::RunFinished(RunFinished {
            result_digest: "x".into(),
        })
    });
    ev
}

fn stored(events: Vec<Event>) -> Vec<StoredEvent> {
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| StoredEvent {
            seq: i as u64 + 1,
            at_ms: i as u64,
            offset: 0,
            event,
        })
        .collect()
}

/// What a reader sees of a state.
fn seen(s: &ReplayState) -> (serde_json::Value, String, serde_json::Value, bool) {
    (
        serde_json::to_value(fold::derive(s)).unwrap(),
        s.phase.name(),
        serde_json::to_value(s.progress()).unwrap(),
        s.in_doubt().is_some(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn the_streaming_fold_refuses_and_derives_what_the_whole_fold_does(
        batches in prop::collection::vec(prop::collection::vec(call(), 0..4), 0..8),
        per_event in 1usize..4,
        failed in any::<bool>(),
        cut in any::<prop::sample::Index>(),
        damage in 0u8..4,
        at in any::<prop::sample::Index>(),
    ) {
        let mut events = run(&batches, per_event, failed);
        let len = events.len();
        match damage {
            // cut where a crash would
            1 => events.truncate(cut.index(len + 1)),
            // two events out of order
            2 if len > 1 => {
                let i = at.index(len - 1);
                events.swap(i, i + 1);
            }
            // an event journaled twice
            3 => {
                let i = at.index(len);
                let e = events[i].clone();
                events.insert(i, e);
            }
            _ => {}
        }
        let (mut whole, mut streamed) = (ReplayState::default(), ReplayState::default());
        let mut taken = 0u64;
        for e in &stored(events) {
            let a = fold::apply(&mut whole, e);
            let b = fold::apply_streaming(&mut streamed, e);
            if let Ok(Some(done)) = &b {
                // each finished batch is handed over once, with exactly its calls
                prop_assert_eq!(done.calls.len() as u64, whole.parsed.as_ref().unwrap().calls_of(done.batch).unwrap());
                prop_assert!(done.calls.iter().all(|c| c.batch == done.batch));
                prop_assert!(done.checkpoints.iter().all(|c| c.batch == done.batch));
                taken += 1;
            }
            prop_assert_eq!(a.clone().err(), b.err());
            if a.is_err() {
                break;
            }
            prop_assert_eq!(seen(&whole), seen(&streamed));
            // the streamed state holds the calls of the batch in progress alone
            prop_assert!(streamed.calls.keys().all(|(k, _)| *k > whole.batches_done));
            prop_assert!(streamed.checkpoints.keys().all(|(k, _)| *k == 0 || *k > whole.batches_done));
        }
        prop_assert_eq!(taken, whole.batches_done);
        // the tally the result is derived from counts what the whole fold's calls say
        let count = |f: &dyn Fn(&pvisor::fold::state::CallState) -> bool| whole.calls.values().filter(|c| f(c)).count() as u64;
        let compared = |f: &dyn Fn(&ObservationCompared) -> bool| count(&|c| c.compared.as_ref().is_some_and(f));
        prop_assert_eq!(whole.tally, pvisor::fold::state::CallTally {
            finished: count(&|c| c.finished.is_some()),
            stale: count(&|c| c.finished.as_ref().is_some_and(|f| f.stale)),
            equal: compared(&|x| x.equal),
            equal_masked: compared(&|x| x.equal || x.equal_masked),
            differ: compared(&|x| !x.equal && !x.equal_masked),
        });
        prop_assert_eq!(streamed.tally, whole.tally);
    }
}
