//! Recording OpenHands SDK conversations with the REAL SDK against the scripted model server
//! (`tests/support/openhands.rs`). The committed recordings live in
//! `tests/fixtures/openhands/recorded/<name>/`; re-record them with
//! `PVISOR_RECORD=1 cargo test --test e2e_openhands_record record_fixtures -- --ignored --nocapture`.

#[path = "support/openhands.rs"]
mod openhands;

use openhands::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "re-records tests/fixtures/openhands/recorded; run with PVISOR_RECORD=1 and --ignored"]
async fn record_fixtures() {
    for name in selected(recorded_names()) {
        eprintln!("recording {name}");
        record(&name).await;
    }
}

/// Every committed recording is complete: recorded at its fixed path, both runs finished,
/// the script played to its end, and it holds what it is for (parallel calls, a failing
/// command, an edit that does not apply, unicode, the shell's state across calls).
#[test]
fn recordings_are_complete() {
    let names = recorded_names();
    assert!(!names.is_empty());
    let adapter = (pvisor::adapters::registry().get("openhands").unwrap().make)();
    for name in names {
        let dir = recorded_dir().join(&name);
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
        assert_eq!(
            meta["cwd"],
            fixed_work(&name).to_string_lossy().as_ref(),
            "{name}"
        );
        assert_eq!(
            meta["script_exhausted"], false,
            "{name}: the script ran out"
        );
        assert_eq!(meta["run1_status"], "finished", "{name}");
        assert_eq!(meta["resume_status"], "finished", "{name}");
        let p = dir.join("native-run1");
        let plan = adapter
            .parse(&p, &adapter.read_input(&p).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(plan.max_boundary() >= 6, "{name}: {}", plan.max_boundary());
        let calls: Vec<&pvisor::kit::ToolCall> = plan
            .batches
            .in_memory()
            .unwrap()
            .iter()
            .flat_map(|b| &b.calls)
            .collect();
        let all: String = calls
            .iter()
            .filter_map(|c| c.original.as_ref().map(|o| o.text.clone()))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            plan.batches
                .in_memory()
                .unwrap()
                .iter()
                .any(|b| b.calls.len() >= 3),
            "{name}: parallel calls"
        );
        assert!(
            all.contains("[Command finished with exit code 2]"),
            "{name}: a failing command"
        );
        assert!(
            calls
                .iter()
                .any(|c| c.original.as_ref().is_some_and(|o| o.is_error)),
            "{name}: an error result"
        );
        assert!(
            all.contains("мир") && all.contains("日本"),
            "{name}: unicode"
        );
        assert!(
            all.contains("bär"),
            "{name}: the shell keeps exported variables"
        );
        for tool in ["terminal", "file_editor", "task_tracker", "think", "finish"] {
            assert!(
                calls.iter().any(|c| c.tool == tool),
                "{name}: no {tool} call"
            );
        }
    }
}
