//! Recording genuine OpenCode 1.17.11 sessions with the REAL `opencode` against the scripted
//! model server (`tests/support/opencode.rs`). The committed recordings live in
//! `tests/fixtures/opencode/recorded/<name>/`; re-record them with
//! `PVISOR_RECORD=1 cargo test --test e2e_opencode_record record_fixtures -- --ignored --nocapture`
//! (`PVISOR_RECORD=tools,errors` records only those).

#[path = "support/opencode.rs"]
mod opencode;

use opencode::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "re-records tests/fixtures/opencode/recorded; run with PVISOR_RECORD=1 and --ignored"]
async fn record_fixtures() {
    let names = selected(recorded_names());
    for name in names {
        eprintln!("recording {name}");
        record(&name).await;
    }
}

/// Every committed recording is a complete session in all three input forms (export, store,
/// event stream), each parsing to the same batches.
#[test]
fn recordings_are_complete_in_every_form() {
    let names = recorded_names();
    assert!(names.len() >= 2, "{names:?}");
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
        let plan = |file: &str| {
            let p = dir.join(file);
            pvisor::adapters::opencode::parse_bytes(&p, &std::fs::read(&p).unwrap())
                .unwrap_or_else(|e| panic!("{name}/{file}: {e}"))
                .plan()
                .clone()
        };
        let (export, store, events) = (
            plan("export.json"),
            plan("opencode.db"),
            plan("stdout.jsonl"),
        );
        assert_eq!(
            export.session_id.as_deref(),
            meta["session_id"].as_str(),
            "{name}"
        );
        assert!(
            export.max_boundary() >= 5,
            "{name}: {}",
            export.max_boundary()
        );
        let calls = |p: &pvisor::kit::Plan| {
            p.batches
                .in_memory()
                .unwrap()
                .iter()
                .map(|b| {
                    b.calls
                        .iter()
                        .map(|c| (c.call_id.clone(), c.original.clone()))
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(calls(&export), calls(&store), "{name}: export vs store");
        assert_eq!(calls(&export), calls(&events), "{name}: export vs events");
    }
}
