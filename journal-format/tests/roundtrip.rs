//! Property tests of the codec: every event kind round-trips through a record; arbitrary
//! bytes never panic the reader and never allocate past the cap.

use journal_format::event::*;
use journal_format::header::{FileHeader, JournalId};
use journal_format::{Encoder, Event, RecordReader};
use proptest::prelude::*;

fn build(kind: u16, s: &[String], n: &[u64], b: &[bool]) -> Event {
    let st = |i: usize| s[i % s.len()].clone();
    let nu = |i: usize| n[i % n.len()];
    let bo = |i: usize| b[i % b.len()];
    let opt = |i: usize| if bo(i) { Some(st(i)) } else { None };
    let class = [
        CallClass::ReadOnly,
        CallClass::Mutating,
        CallClass::NonRegenerable,
        CallClass::Unknown,
    ][(nu(3) % 4) as usize];
    // The batch summaries of `trajectory_parsed` and `batches_listed`.
    let summaries = || -> Vec<BatchSummary> {
        (0..nu(1) % 4)
            .map(|i| BatchSummary {
                index: i,
                model_turn: nu(i as usize),
                locator: st(i as usize),
                calls: (0..nu(2) % 3)
                    .map(|j| CallSummary {
                        call_id: st(j as usize),
                        tool: st(j as usize + 1),
                        args_digest: st(2),
                        class,
                    })
                    .collect(),
                complete: bo(i as usize),
            })
            .collect()
    };
    let decision = [
        InDoubtDecision::RerunReadOnly,
        InDoubtDecision::RerunRestored,
        InDoubtDecision::RerunAccepted,
        InDoubtDecision::Stopped,
    ][(nu(4) % 4) as usize];
    let category = FailureCategory::ALL[(nu(0) % 13) as usize];
    let upstream = [
        UpstreamProtocol::Anthropic,
        UpstreamProtocol::OpenaiResponses,
        UpstreamProtocol::OpenaiChat,
        UpstreamProtocol::Scripted,
        UpstreamProtocol::Native,
    ][(nu(1) % 5) as usize];
    let mode = [Mode::PrepareOnly, Mode::ReplayOnly, Mode::Continue][(nu(0) % 3) as usize];
    let status = [
        AgentStatus::NotStarted,
        AgentStatus::Completed,
        AgentStatus::MaxSteps,
        AgentStatus::Failed,
    ][(nu(1) % 4) as usize];
    let role = [
        SessionRole::Prepared,
        SessionRole::Reconstructed,
        SessionRole::Continued,
    ][(nu(2) % 3) as usize];
    match kind {
        1 => Event::RunRequested(Box::new(RunRequested {
            run_id: st(0),
            request_digest: st(1),
            request_json: st(2),
            agent: st(3),
            agent_version: opt(4),
            agent_entrypoint: opt(5),
            mode,
            after_step: nu(3),
            max_steps: if bo(6) { Some(nu(4)) } else { None },
            boundary_prompt: if bo(7) {
                Some(PromptFacts {
                    length_chars: nu(5),
                    sha256: st(6),
                })
            } else {
                None
            },
            source_path: st(7),
            workspace: st(8),
            state_dir: st(9),
            output_dir: st(10),
            pvisor_version: st(11),
            model: if bo(8) {
                Some(ModelUpstream {
                    protocol: upstream,
                    base_url: opt(9),
                    model: opt(10),
                    api_key_env: opt(11),
                    script_digest: opt(12),
                })
            } else {
                None
            },
        })),
        2 => Event::TrajectoryParsed(TrajectoryParsed {
            source_path: st(0),
            source_sha256: st(1),
            session_id: opt(2),
            recorded_version: opt(3),
            model_turns: nu(0),
            batches: summaries(),
            plan_blob: st(4),
            batch_count: if bo(2) { Some(nu(3)) } else { None },
        }),
        3 => Event::BoundaryValidated(BoundaryValidated {
            after_step: nu(0),
            prefix_tool_calls: nu(1),
            prefix_model_turns: nu(2),
            max_boundary: nu(3),
            live_budget: if bo(0) { Some(nu(4)) } else { None },
            stale_calls: vec![st(0), st(1)],
        }),
        4 => Event::BatchStarted(BatchStarted {
            batch: nu(0),
            calls: nu(1),
        }),
        5 => Event::ToolCallStarted(ToolCallStarted {
            batch: nu(0),
            call: nu(1),
            call_id: st(0),
            tool: st(1),
            args_digest: st(2),
            class,
        }),
        6 => Event::ToolCallFinished(ToolCallFinished {
            batch: nu(0),
            call: nu(1),
            call_id: st(0),
            exit_code: if bo(0) { Some(nu(2) as i64 - 7) } else { None },
            is_error: bo(1),
            duration_ms: nu(3),
            observation_digest: st(1),
            observation_blob: st(2),
            observation_len: nu(4),
            stale: bo(2),
            touched: vec![st(3)],
        }),
        7 => Event::ObservationCompared(ObservationCompared {
            batch: nu(0),
            call: nu(1),
            call_id: st(0),
            equal: bo(0),
            equal_masked: bo(1),
            diff_digest: opt(2),
            diff_blob: opt(3),
        }),
        8 => Event::BatchFinished(BatchFinished {
            batch: nu(0),
            workspace_digest: st(0),
        }),
        9 => Event::SessionWritten(SessionWritten {
            role,
            path: st(0),
            digest: st(1),
            records: nu(0),
        }),
        10 => Event::BridgeStarted(BridgeStarted {
            listen: st(0),
            protocol: st(1),
            upstream: st(2),
            prefix_digest: st(3),
            prefix_items: nu(0),
        }),
        11 => Event::BridgeRequestValidated(BridgeRequestValidated {
            n: nu(0),
            request_digest: st(0),
            prefix_digest: st(1),
            removed: vec![st(2)],
            boundary_prompt_injected: bo(0),
            ok: bo(1),
            reason: opt(3),
            side: bo(2),
            removed_items: if bo(3) {
                vec![RemovedItem {
                    kind: st(2),
                    digest: st(3),
                }]
            } else {
                vec![]
            },
            refused_request_blob: opt(4),
            difference: opt(5),
            budget_exhausted: bo(4),
        }),
        12 => Event::ContinuationStarted(ContinuationStarted {
            command: vec![st(0), st(1)],
            agent_version: opt(2),
            budget: if bo(0) { Some(nu(0)) } else { None },
            attempt: nu(1),
            neutralized: if bo(1) {
                vec![Neutralized {
                    fact: st(0),
                    recorded: st(1),
                    live: st(2),
                }]
            } else {
                vec![]
            },
            from_boundary: bo(2),
        }),
        13 => Event::ContinuationStep(ContinuationStep {
            n: nu(0),
            action_digest: st(0),
            tools: vec![st(1)],
        }),
        14 => Event::AgentExited(AgentExited {
            status,
            code: if bo(0) { Some(nu(0) as i64) } else { None },
            signal: None,
            message: opt(1),
            stopped_by: None,
        }),
        15 => Event::Recovered(Recovered {
            offset: nu(0),
            length: nu(1),
            quarantine_path: st(0),
        }),
        16 => Event::InDoubtResolved(InDoubtResolved {
            batch: nu(0),
            call: nu(1),
            call_id: st(0),
            tool: st(1),
            decision,
        }),
        17 => Event::Resumed(Resumed {
            from_seq: nu(0),
            pvisor_version: st(0),
        }),
        18 => Event::RunFinished(RunFinished {
            result_digest: st(0),
        }),
        19 => Event::RunFailed(RunFailed {
            category,
            message: st(1),
            retryable: bo(0),
        }),
        20 => Event::WorkspaceCheckpointed(WorkspaceCheckpointed {
            batch: nu(0),
            call: nu(1),
            manifest_blob: st(0),
            entries: nu(2),
            new_bytes: nu(3),
            unstored: if bo(0) { vec![st(1), st(2)] } else { vec![] },
        }),
        21 => Event::WorkspaceRestored(WorkspaceRestored {
            batch: nu(0),
            call: nu(1),
            manifest_blob: st(0),
            written: nu(2),
            removed: nu(3),
        }),
        22 => Event::InnerCallFinished(InnerCallFinished {
            batch: nu(0),
            call: nu(1),
            seq: nu(2),
            tool: st(0),
            input_digest: st(1),
            blob: st(2),
            ok: bo(0),
            duration_ms: nu(3),
            touched: if bo(1) { vec![st(3)] } else { vec![] },
        }),
        23 => Event::BlobStored(BlobStored {
            blob: st(0),
            bytes: st(1).into_bytes(),
        }),
        24 => Event::BatchesListed(BatchesListed {
            first: nu(0),
            batches: summaries(),
        }),
        k => Event::Unknown {
            kind: k,
            payload: st(0).into_bytes(),
        },
    }
}

#[test]
fn kinds_are_dense_and_named() {
    let kinds: Vec<u16> = KINDS.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, (1..=24).collect::<Vec<_>>());
    for (k, name) in KINDS {
        assert_ne!(*name, "unknown", "kind {k} has no name");
        let e = build(*k, &["x".into()], &[1], &[true]);
        assert_eq!(e.kind(), *k);
        assert_eq!(e.name(), *name);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn every_event_kind_round_trips(kind in 1u16..=26, s in prop::collection::vec(".{0,40}", 1..14), n in prop::collection::vec(any::<u64>(), 1..6), b in prop::collection::vec(any::<bool>(), 1..14), at in any::<u64>(), id in any::<[u8; 16]>()) {
        let events = vec![build(kind, &s, &n, &b), build(kind % 23 + 1, &s, &n, &b)];
        let header = FileHeader::new(JournalId(id), at);
        let mut bytes = header.encode().to_vec();
        let mut enc = Encoder::new(&header);
        for e in &events { bytes.extend(enc.encode(e, at).unwrap()); }
        let mut rr = RecordReader::open(&bytes[..]).unwrap();
        let mut got = vec![];
        while let Some(r) = rr.next_record().unwrap() {
            prop_assert_eq!(r.at_ms, at);
            got.push(Event::decode(r.kind, r.payload()).unwrap());
        }
        prop_assert_eq!(got, events);
        prop_assert_eq!(rr.head(), enc.head());
    }

    #[test]
    fn arbitrary_bytes_never_panic(prefix in any::<bool>(), data in prop::collection::vec(any::<u8>(), 0..4096)) {
        let mut bytes = vec![];
        if prefix { bytes.extend(FileHeader::new(JournalId([3; 16]), 0).encode()); }
        bytes.extend(data);
        if let Ok(mut rr) = RecordReader::open(&bytes[..]) {
            let mut n = 0;
            while let Ok(Some(r)) = rr.next_record() {
                let _ = Event::decode(r.kind, r.payload());
                n += 1;
                prop_assert!(n < 10_000);
            }
        }
    }
}
