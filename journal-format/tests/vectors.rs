//! Golden vectors: the bytes in `vectors/` must equal what this codec writes, byte for byte.
//! They are never regenerated silently: set `PVISOR_BLESS=1` to rewrite them deliberately
//! (and bump the format version if an existing vector changed).

use journal_format::event::*;
use journal_format::header::{FileHeader, JournalId};
use journal_format::{Encoder, Event, RecordReader, ScanError, TailState};
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("vectors")
}

fn d(s: &str) -> String {
    format!("blake3:{}", blake3::hash(s.as_bytes()).to_hex())
}

/// The events of a complete continue-mode replay (2 batches, 2 live steps, max_steps).
pub fn complete_events() -> Vec<Event> {
    let call = |id: &str, tool: &str, class: &str| CallSummary {
        call_id: id.into(),
        tool: tool.into(),
        args_digest: d(id),
        class: serde_json::from_value(serde_json::json!(class)).unwrap(),
    };
    let fin = |b: u64, c: u64, id: &str, text: &str| ToolCallFinished {
        batch: b,
        call: c,
        call_id: id.into(),
        exit_code: Some(0),
        is_error: false,
        duration_ms: 12,
        observation_digest: d(text),
        observation_blob: blake3::hash(text.as_bytes()).to_hex().to_string(),
        observation_len: text.len() as u64,
        stale: false,
        touched: vec![],
    };
    let cmp = |b: u64, c: u64, id: &str| ObservationCompared {
        batch: b,
        call: c,
        call_id: id.into(),
        equal: true,
        equal_masked: true,
        diff_digest: None,
        diff_blob: None,
    };
    vec![
        Event::RunRequested(Box::new(RunRequested {
            run_id: "run-golden".into(),
            request_digest: d("request"),
            request_json: "{\"agent\":\"claude-code\"}".into(),
            agent: "claude-code".into(),
            agent_version: Some("2.1.332".into()),
            agent_entrypoint: Some("/opt/claude".into()),
            mode: Mode::Continue,
            after_step: 2,
            max_steps: Some(4),
            boundary_prompt: Some(PromptFacts {
                length_chars: 5,
                sha256: "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
                    .into(),
            }),
            source_path: "/src/session.jsonl".into(),
            workspace: "/work".into(),
            state_dir: "/state".into(),
            output_dir: "/out".into(),
            pvisor_version: "0.1.0".into(),
            model: Some(ModelUpstream {
                protocol: UpstreamProtocol::Scripted,
                base_url: None,
                model: None,
                api_key_env: None,
                script_digest: Some(d("script")),
            }),
        })),
        Event::TrajectoryParsed(TrajectoryParsed {
            source_path: "/src/session.jsonl".into(),
            source_sha256: "sha256:00".into(),
            session_id: Some("bb060794-24b9-4e25-8e25-e714a6132171".into()),
            recorded_version: Some("2.1.332".into()),
            model_turns: 5,
            batches: vec![
                BatchSummary {
                    index: 1,
                    model_turn: 1,
                    locator: "line:21".into(),
                    calls: vec![
                        call("toolu_a", "Bash", "mutating"),
                        call("toolu_b", "Read", "read_only"),
                    ],
                    complete: true,
                },
                BatchSummary {
                    index: 2,
                    model_turn: 2,
                    locator: "line:29".into(),
                    calls: vec![call("toolu_c", "Edit", "mutating")],
                    complete: true,
                },
                BatchSummary {
                    index: 3,
                    model_turn: 3,
                    locator: "line:42".into(),
                    calls: vec![call("toolu_d", "Bash", "mutating")],
                    complete: true,
                },
            ],
            plan_blob: blake3::hash(b"plan").to_hex().to_string(),
            batch_count: None,
        }),
        Event::BoundaryValidated(BoundaryValidated {
            after_step: 2,
            prefix_tool_calls: 3,
            prefix_model_turns: 2,
            max_boundary: 3,
            live_budget: Some(2),
            stale_calls: vec![],
        }),
        Event::SessionWritten(SessionWritten {
            role: SessionRole::Prepared,
            path: "/out/native/prepared.jsonl".into(),
            digest: d("prepared"),
            records: 20,
        }),
        Event::BatchStarted(BatchStarted { batch: 1, calls: 2 }),
        Event::ToolCallStarted(ToolCallStarted {
            batch: 1,
            call: 0,
            call_id: "toolu_a".into(),
            tool: "Bash".into(),
            args_digest: d("toolu_a"),
            class: CallClass::Mutating,
        }),
        Event::ToolCallFinished(fin(1, 0, "toolu_a", "a.txt")),
        Event::ObservationCompared(cmp(1, 0, "toolu_a")),
        Event::ToolCallStarted(ToolCallStarted {
            batch: 1,
            call: 1,
            call_id: "toolu_b".into(),
            tool: "Read".into(),
            args_digest: d("toolu_b"),
            class: CallClass::ReadOnly,
        }),
        Event::ToolCallFinished(fin(1, 1, "toolu_b", "1\thi\n")),
        Event::ObservationCompared(cmp(1, 1, "toolu_b")),
        Event::BatchFinished(BatchFinished {
            batch: 1,
            workspace_digest: d("ws1"),
        }),
        Event::BatchStarted(BatchStarted { batch: 2, calls: 1 }),
        Event::ToolCallStarted(ToolCallStarted {
            batch: 2,
            call: 0,
            call_id: "toolu_c".into(),
            tool: "Edit".into(),
            args_digest: d("toolu_c"),
            class: CallClass::Mutating,
        }),
        Event::ToolCallFinished(fin(
            2,
            0,
            "toolu_c",
            "The file /work/notes.txt has been updated successfully.",
        )),
        Event::ObservationCompared(cmp(2, 0, "toolu_c")),
        Event::BatchFinished(BatchFinished {
            batch: 2,
            workspace_digest: d("ws2"),
        }),
        Event::SessionWritten(SessionWritten {
            role: SessionRole::Reconstructed,
            path: "/out/native/reconstructed.jsonl".into(),
            digest: d("reconstructed"),
            records: 30,
        }),
        Event::BridgeStarted(BridgeStarted {
            listen: "127.0.0.1:40001".into(),
            protocol: "anthropic".into(),
            upstream: "scripted".into(),
            prefix_digest: d("prefix"),
            prefix_items: 6,
        }),
        Event::ContinuationStarted(ContinuationStarted {
            command: vec!["claude".into(), "--resume".into()],
            agent_version: Some("2.1.332".into()),
            budget: Some(2),
            attempt: 1,
            ..Default::default()
        }),
        Event::BridgeRequestValidated(BridgeRequestValidated {
            n: 1,
            request_digest: d("r1"),
            prefix_digest: d("prefix"),
            removed: vec!["claude:resume_text_block".into()],
            boundary_prompt_injected: true,
            ok: true,
            reason: None,
            side: false,
            ..Default::default()
        }),
        Event::ContinuationStep(ContinuationStep {
            n: 1,
            action_digest: d("a1"),
            tools: vec!["Bash".into()],
        }),
        Event::BridgeRequestValidated(BridgeRequestValidated {
            n: 2,
            request_digest: d("r2"),
            prefix_digest: d("prefix2"),
            removed: vec![],
            boundary_prompt_injected: false,
            ok: true,
            reason: None,
            side: false,
            ..Default::default()
        }),
        Event::ContinuationStep(ContinuationStep {
            n: 2,
            action_digest: d("a2"),
            tools: vec!["Edit".into()],
        }),
        Event::AgentExited(AgentExited {
            status: AgentStatus::MaxSteps,
            code: Some(0),
            signal: None,
            message: None,
            stopped_by: None,
        }),
        Event::SessionWritten(SessionWritten {
            role: SessionRole::Continued,
            path: "/out/native/continued.jsonl".into(),
            digest: d("continued"),
            records: 40,
        }),
        Event::RunFinished(RunFinished {
            result_digest: d("result"),
        }),
    ]
}

/// The header of the format 1.0 vectors (kept forever, byte for byte).
fn header() -> FileHeader {
    let mut h = FileHeader::new(JournalId([0x11; 16]), 1_764_460_800_000);
    h.minor = 0;
    h
}

/// Format 1.1: a continuation that resumed on another host and day — snapshots neutralized,
/// a date notice removed by a declared rule — and a request refused with its first
/// difference and redacted body blob.
pub fn v1_1_events() -> Vec<Event> {
    let mut evs = complete_events();
    evs.truncate(20); // up to and including bridge_started
    evs.push(Event::ContinuationStarted(ContinuationStarted {
        command: vec!["claude".into(), "--resume".into()],
        agent_version: Some("2.1.332".into()),
        budget: Some(2),
        attempt: 1,
        neutralized: vec![
            Neutralized {
                fact: "claude:environment.osVersion".into(),
                recorded: "Linux 1.0.0-recorded".into(),
                live: "Linux 2.0.0-live".into(),
            },
            Neutralized {
                fact: "claude:date".into(),
                recorded: "2026-11-30".into(),
                live: "2026-12-03".into(),
            },
        ],
        from_boundary: false,
    }));
    evs.push(Event::BridgeRequestValidated(BridgeRequestValidated {
        n: 1,
        request_digest: d("r1"),
        prefix_digest: d("prefix"),
        removed: vec![
            "claude:resume_text_block".into(),
            "claude:date_change_notice".into(),
        ],
        boundary_prompt_injected: false,
        ok: true,
        reason: None,
        side: false,
        removed_items: vec![
            RemovedItem {
                kind: "claude:resume_text_block".into(),
                digest: d("nonce"),
            },
            RemovedItem {
                kind: "claude:date_change_notice".into(),
                digest: d("notice"),
            },
        ],
        ..Default::default()
    }));
    evs.push(Event::BridgeRequestValidated(BridgeRequestValidated {
        n: 2,
        request_digest: d("r2"),
        prefix_digest: d("prefix"),
        removed: vec![],
        boundary_prompt_injected: false,
        ok: false,
        reason: Some("the request does not continue the expected prefix".into()),
        side: false,
        removed_items: vec![],
        refused_request_blob: Some(blake3::hash(b"refused").to_hex().to_string()),
        difference: Some("1 message after O′N: role=system, text begins `# Environment`".into()),
        budget_exhausted: false,
    }));
    evs.push(Event::AgentExited(AgentExited {
        status: AgentStatus::Failed,
        code: Some(1),
        signal: None,
        message: Some("bridge refused".into()),
        stopped_by: None,
    }));
    evs.push(Event::RunFailed(RunFailed {
        category: FailureCategory::ContinuationError,
        message: "bridge refused".into(),
        retryable: false,
    }));
    evs
}

fn encode(header: &FileHeader, events: &[Event]) -> Vec<u8> {
    let mut out = header.encode().to_vec();
    let mut enc = Encoder::new(header);
    for (i, e) in events.iter().enumerate() {
        out.extend(enc.encode(e, 1_764_460_800_000 + 1000 * i as u64).unwrap());
    }
    out
}

/// Byte offsets of each record (index i = seq i+1).
fn offsets(bytes: &[u8]) -> Vec<u64> {
    let mut rr = RecordReader::open(bytes).unwrap();
    let mut v = vec![];
    while let Ok(Some(r)) = rr.next_record() {
        v.push(r.offset);
    }
    v
}

/// Format 1.2: a mutating call checkpointed, interrupted, its workspace restored and the call
/// run again (`rerun_restored`); a live step checkpointed before its tool calls ran.
pub fn v1_2_events() -> Vec<Event> {
    let all = complete_events();
    let mut evs: Vec<Event> = all[..5].to_vec(); // up to batch_started 1
    let cp = |batch: u64, call: u64, what: &str| {
        Event::WorkspaceCheckpointed(WorkspaceCheckpointed {
            batch,
            call,
            manifest_blob: blake3::hash(what.as_bytes()).to_hex().to_string(),
            entries: 3,
            new_bytes: 12,
            unstored: vec![],
        })
    };
    evs.push(cp(1, 0, "manifest-1-0"));
    evs.push(all[5].clone()); // tool_call_started 1/0
    evs.push(Event::Resumed(Resumed {
        from_seq: 7,
        pvisor_version: "0.1.0".into(),
    }));
    evs.push(Event::WorkspaceRestored(WorkspaceRestored {
        batch: 1,
        call: 0,
        manifest_blob: blake3::hash(b"manifest-1-0").to_hex().to_string(),
        written: 1,
        removed: 1,
    }));
    evs.push(Event::InDoubtResolved(InDoubtResolved {
        batch: 1,
        call: 0,
        call_id: "toolu_a".into(),
        tool: "Bash".into(),
        decision: InDoubtDecision::RerunRestored,
    }));
    evs.push(all[5].clone()); // started again
    evs.extend(all[6..21].iter().cloned()); // … first validation of the continuation
    evs.push(cp(0, 1, "manifest-live-1"));
    evs.extend(all[21..].iter().cloned());
    evs
}

/// Format 1.3: a continuation the runner's step-budget watchdog stopped with SIGINT.
pub fn v1_3_events() -> Vec<Event> {
    let mut evs = complete_events();
    for e in evs.iter_mut() {
        if let Event::AgentExited(a) = e {
            a.signal = Some(2);
            a.code = None;
            a.stopped_by = Some(StoppedBy {
                name: "opencode_step_budget".into(),
                reason: StopReason::StepBudget,
                signal: "SIGINT".into(),
                steps: 2,
                budget: Some(2),
                idle_seconds: None,
            });
        }
    }
    evs
}

/// Format 1.4: a continuation killed after its first live step ran a tool, started again
/// from the boundary (`continuation_started.from_boundary`): the workspace restored to the
/// step's checkpoint, the step asked again.
pub fn v1_4_events() -> Vec<Event> {
    let all = complete_events();
    let mut evs: Vec<Event> = all[..21].to_vec(); // … first validation of the continuation
    let manifest = blake3::hash(b"manifest-live-1").to_hex().to_string();
    evs.push(Event::WorkspaceCheckpointed(WorkspaceCheckpointed {
        batch: 0,
        call: 1,
        manifest_blob: manifest.clone(),
        entries: 3,
        new_bytes: 12,
        unstored: vec![],
    }));
    evs.push(all[21].clone()); // live step 1 (Bash), then the crash
    evs.push(Event::Resumed(Resumed {
        from_seq: 24,
        pvisor_version: "0.1.0".into(),
    }));
    evs.push(Event::WorkspaceRestored(WorkspaceRestored {
        batch: 0,
        call: 1,
        manifest_blob: manifest,
        written: 1,
        removed: 0,
    }));
    evs.push(Event::InDoubtResolved(InDoubtResolved {
        batch: 0,
        call: 1,
        call_id: String::new(),
        tool: "Bash".into(),
        decision: InDoubtDecision::RerunRestored,
    }));
    evs.push(all[18].clone()); // a second bridge on the same prefix
    evs.push(Event::ContinuationStarted(ContinuationStarted {
        command: vec!["claude".into(), "--resume".into()],
        agent_version: Some("2.1.332".into()),
        budget: Some(2),
        attempt: 2,
        from_boundary: true,
        ..Default::default()
    }));
    evs.extend(all[20..].iter().cloned()); // the whole continuation again
    evs
}

/// Format 1.5: the first call is a code-mode cell that made two inner tool calls (one
/// rejected), journaled before the cell's own `tool_call_finished`.
pub fn v1_5_events() -> Vec<Event> {
    let mut evs = complete_events();
    let at = evs
        .iter()
        .position(|e| matches!(e, Event::ToolCallFinished(_)))
        .expect("a finished call");
    let inner = |seq: u64, tool: &str, ok: bool, touched: Vec<String>| {
        Event::InnerCallFinished(InnerCallFinished {
            batch: 1,
            call: 0,
            seq,
            tool: tool.into(),
            input_digest: d(&format!("input {seq}")),
            blob: blake3::hash(format!("inner {seq}").as_bytes())
                .to_hex()
                .to_string(),
            ok,
            duration_ms: 3 * seq,
            touched,
        })
    };
    evs.insert(at, inner(2, "apply_patch", false, vec![]));
    evs.insert(at, inner(1, "exec_command", true, vec!["a.txt".into()]));
    evs
}

/// Format 1.6: the first call's observation is carried by the journal (`blob_stored`, right
/// before the `tool_call_finished` that names it).
pub fn v1_6_events() -> Vec<Event> {
    let mut evs = complete_events();
    let at = evs
        .iter()
        .position(|e| matches!(e, Event::ToolCallFinished(_)))
        .expect("a finished call");
    let Event::ToolCallFinished(f) = &mut evs[at] else {
        unreachable!()
    };
    let bytes = br#"{"text":"a.txt\n","is_error":false}"#.to_vec();
    f.observation_blob = blake3::hash(&bytes).to_hex().to_string();
    let blob = f.observation_blob.clone();
    evs.insert(at, Event::BlobStored(BlobStored { blob, bytes }));
    evs
}

/// Format 1.7: the batch summaries in two events, the first batch in `trajectory_parsed`
/// (with `batch_count`) and the others in `batches_listed` right after it.
pub fn v1_7_events() -> Vec<Event> {
    let mut evs = v1_6_events();
    let at = evs
        .iter()
        .position(|e| matches!(e, Event::TrajectoryParsed(_)))
        .expect("a parse");
    let Event::TrajectoryParsed(t) = &mut evs[at] else {
        unreachable!()
    };
    t.batch_count = Some(t.batches.len() as u64);
    let rest = t.batches.split_off(1);
    evs.insert(
        at + 1,
        Event::BatchesListed(BatchesListed {
            first: 2,
            batches: rest,
        }),
    );
    evs
}

fn vectors() -> Vec<(&'static str, Vec<u8>)> {
    let complete = encode(&header(), &complete_events());
    let offs = offsets(&complete);
    let mut torn = complete.clone();
    torn.truncate(complete.len() - 10);
    let mut flip = complete.clone();
    flip[offs[4] as usize + 40] ^= 0x04; // inside the payload of seq 5
                                         // forked: seq 1..6, then a second, different seq 6 whose chain links to seq 5.
    let evs = complete_events();
    let mut forked = encode(&header(), &evs[..6]);
    let mut enc = Encoder::new(&header());
    for (i, e) in evs[..5].iter().enumerate() {
        enc.encode(e, 1_764_460_800_000 + 1000 * i as u64).unwrap();
    }
    let alt = Event::ToolCallStarted(ToolCallStarted {
        batch: 1,
        call: 0,
        call_id: "toolu_a".into(),
        tool: "Bash".into(),
        args_digest: d("other"),
        class: CallClass::Mutating,
    });
    forked.extend(enc.encode(&alt, 1_764_460_805_500).unwrap());
    let mut newer = header();
    newer.major = journal_format::FORMAT_MAJOR + 1;
    let newer_bytes = encode(&newer, &evs[..2]);
    let mut h11 = header();
    h11.minor = 1;
    let v11 = encode(&h11, &v1_1_events());
    let mut h12 = header();
    h12.minor = 2;
    let v12 = encode(&h12, &v1_2_events());
    let mut h13 = header();
    h13.minor = 3;
    let v13 = encode(&h13, &v1_3_events());
    let mut h14 = header();
    h14.minor = 4;
    let v14 = encode(&h14, &v1_4_events());
    let mut h15 = header();
    h15.minor = 5;
    let v15 = encode(&h15, &v1_5_events());
    let mut h16 = header();
    h16.minor = 6;
    let v16 = encode(&h16, &v1_6_events());
    let mut h17 = header();
    h17.minor = 7;
    let v17 = encode(&h17, &v1_7_events());
    vec![
        ("complete", complete),
        ("torn-tail", torn),
        ("bitflip", flip),
        ("forked", forked),
        ("newer-major", newer_bytes),
        ("complete-1.1", v11),
        ("complete-1.2", v12),
        ("complete-1.3", v13),
        ("complete-1.4", v14),
        ("complete-1.5", v15),
        ("complete-1.6", v16),
        ("complete-1.7", v17),
    ]
}

#[test]
fn golden_vectors_are_byte_identical() {
    let bless = std::env::var("PVISOR_BLESS").is_ok();
    for (name, bytes) in vectors() {
        let p = dir().join(format!("{name}.pvj"));
        if bless {
            std::fs::write(&p, &bytes).unwrap();
            continue;
        }
        let on_disk = std::fs::read(&p).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run with PVISOR_BLESS=1 once to create it)",
                p.display()
            )
        });
        assert!(on_disk == bytes, "{}: the codec no longer writes the committed bytes; a format change needs a version bump and an explicit PVISOR_BLESS=1", p.display());
    }
}

fn classify(bytes: &[u8]) -> (String, Option<u64>, Option<u64>) {
    let rr = match RecordReader::open(bytes) {
        Ok(r) => r,
        Err(ScanError::TooNew { .. }) => return ("too_new".into(), None, Some(0)),
        Err(e) => return (format!("error {e}"), None, None),
    };
    match rr.scan() {
        Ok(rep) => match rep.tail {
            TailState::Clean { .. } => ("intact".into(), Some(rep.last_seq), None),
            TailState::Torn { offset, .. } => {
                ("torn_tail".into(), Some(rep.last_seq + 1), Some(offset))
            }
        },
        Err(e @ ScanError::Forked { .. }) => ("forked".into(), e.seq(), e.offset()),
        Err(e) => ("corrupt".into(), e.seq(), e.offset()),
    }
}

#[test]
fn golden_vectors_scan_as_expected() {
    for (name, _) in vectors() {
        let bytes = std::fs::read(dir().join(format!("{name}.pvj"))).unwrap();
        let expect: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir().join(format!("{name}.expect.json"))).unwrap(),
        )
        .unwrap();
        let (status, seq, offset) = classify(&bytes);
        assert_eq!(status, expect["status"].as_str().unwrap(), "{name}");
        assert_eq!(seq, expect["seq"].as_u64(), "{name} seq");
        assert_eq!(offset, expect["offset"].as_u64(), "{name} offset");
    }
}

#[test]
fn every_event_of_the_complete_vector_decodes_back() {
    let bytes = std::fs::read(dir().join("complete.pvj")).unwrap();
    let mut rr = RecordReader::open(&bytes[..]).unwrap();
    let mut got = vec![];
    while let Some(r) = rr.next_record().unwrap() {
        got.push(Event::decode(r.kind, r.payload()).unwrap());
    }
    assert_eq!(got, complete_events());
}

#[test]
fn the_1_1_vector_decodes_back_and_1_0_events_encode_as_before() {
    let bytes = std::fs::read(dir().join("complete-1.1.pvj")).unwrap();
    let rr = RecordReader::open(&bytes[..]).unwrap();
    assert_eq!(rr.header().minor, 1);
    let mut rr = rr;
    let mut got = vec![];
    while let Some(r) = rr.next_record().unwrap() {
        got.push(Event::decode(r.kind, r.payload()).unwrap());
    }
    assert_eq!(got, v1_1_events());
    // An event without the 1.1 fields has the 1.0 encoding (no new keys on the wire).
    let old = &complete_events()[20];
    let payload = old.encode_payload();
    assert!(!String::from_utf8_lossy(&payload).contains("neutralized"));
}

#[test]
fn the_1_2_vector_decodes_back() {
    let got = read_vector("complete-1.2", 2);
    assert_eq!(got, v1_2_events());
    assert!(got.iter().any(|e| matches!(e, Event::WorkspaceRestored(_))));
}

#[test]
fn the_1_3_vector_decodes_back_and_older_events_encode_as_before() {
    let got = read_vector("complete-1.3", 3);
    assert_eq!(got, v1_3_events());
    // An agent_exited without a watchdog has the 1.2 encoding (no new key on the wire).
    let old = complete_events()
        .into_iter()
        .find(|e| matches!(e, Event::AgentExited(_)))
        .unwrap();
    assert!(!String::from_utf8_lossy(&old.encode_payload()).contains("stopped_by"));
}

#[test]
fn the_1_4_vector_decodes_back_and_older_events_encode_as_before() {
    let got = read_vector("complete-1.4", 4);
    assert_eq!(got, v1_4_events());
    assert!(got
        .iter()
        .any(|e| matches!(e, Event::ContinuationStarted(c) if c.from_boundary)));
    // A continuation_started of a first attempt has the 1.3 encoding (no new key).
    let old = complete_events()
        .into_iter()
        .find(|e| matches!(e, Event::ContinuationStarted(_)))
        .unwrap();
    assert!(!String::from_utf8_lossy(&old.encode_payload()).contains("from_boundary"));
}

#[test]
fn the_1_5_vector_decodes_back_and_older_events_encode_as_before() {
    let got = read_vector("complete-1.5", 5);
    assert_eq!(got, v1_5_events());
    let inner: Vec<_> = got.iter().filter(|e| e.kind() == 22).collect();
    assert_eq!(inner.len(), 2);
    assert_eq!(inner[0].name(), "inner_call_finished");
    // The 1.4 events are a subset: none of them changed its encoding.
    let n = complete_records_without(22);
    assert_eq!(n + 2, got.len());
}

#[test]
fn the_1_6_vector_decodes_back_and_older_events_encode_as_before() {
    let got = read_vector("complete-1.6", 6);
    assert_eq!(got, v1_6_events());
    let held: Vec<_> = got
        .iter()
        .filter_map(|e| match e {
            Event::BlobStored(b) => Some(b),
            _ => None,
        })
        .collect();
    assert_eq!(held.len(), 1);
    assert_eq!(
        got.iter().find(|e| e.kind() == 23).unwrap().name(),
        "blob_stored"
    );
    // The content is kept byte for byte (msgpack bin, not an array of numbers) and names
    // itself.
    assert_eq!(
        held[0].blob,
        blake3::hash(&held[0].bytes).to_hex().to_string()
    );
    let payload = Event::BlobStored(held[0].clone()).encode_payload();
    assert!(payload
        .windows(held[0].bytes.len())
        .any(|w| w == held[0].bytes));
    // The 1.5 events are a subset: none of them changed its encoding.
    let n = complete_records_without(23);
    assert_eq!(n + 1, got.len());
}

#[test]
fn the_1_7_vector_decodes_back_and_older_events_encode_as_before() {
    let got = read_vector("complete-1.7", 7);
    assert_eq!(got, v1_7_events());
    let listed = got.iter().find(|e| e.kind() == 24).unwrap();
    assert_eq!(listed.name(), "batches_listed");
    let (Some(Event::TrajectoryParsed(t)), Event::BatchesListed(l)) =
        (got.iter().find(|e| e.kind() == 2), listed)
    else {
        unreachable!()
    };
    assert_eq!(
        t.batch_count,
        Some((t.batches.len() + l.batches.len()) as u64)
    );
    assert_eq!(l.first, t.batches.len() as u64 + 1);
    // Without `batch_count` a trajectory_parsed encodes as in 1.0 (the complete vector).
    let n = complete_records_without(24);
    assert_eq!(n + 2, got.len());
}

/// The events of golden vector `name`, whose header has minor version `minor`.
fn read_vector(name: &str, minor: u16) -> Vec<Event> {
    let bytes = std::fs::read(dir().join(format!("{name}.pvj"))).unwrap();
    let mut rr = RecordReader::open(&bytes[..]).unwrap();
    assert_eq!(rr.header().minor, minor, "{name}");
    let mut got = vec![];
    while let Some(r) = rr.next_record().unwrap() {
        got.push(Event::decode(r.kind, r.payload()).unwrap());
    }
    got
}

/// The number of records of `complete.pvj`, none of which has `kind` (a later addition).
fn complete_records_without(kind: u16) -> usize {
    let old = std::fs::read(dir().join("complete.pvj")).unwrap();
    let mut rr = RecordReader::open(&old[..]).unwrap();
    let mut n = 0;
    while let Some(r) = rr.next_record().unwrap() {
        assert_ne!(r.kind, kind);
        n += 1;
    }
    n
}
