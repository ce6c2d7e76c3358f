//! Recording genuine Codex CLI 0.149.0 sessions with the REAL `codex` against the scripted
//! model server (`tests/support/codex.rs`). The committed recordings live in
//! `tests/fixtures/codex/recorded/<name>/`; re-record them with
//! `PVISOR_RECORD=1 cargo test --test e2e_codex_record record_fixtures -- --ignored --nocapture`
//! (`PVISOR_RECORD=patches,commands` records only those).

#[path = "support/codex.rs"]
mod codex;

use codex::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "re-records tests/fixtures/codex/recorded; run with PVISOR_RECORD=1 and --ignored"]
async fn record_fixtures() {
    let names = selected(recorded_names());
    for name in names {
        eprintln!("recording {name}");
        record(&name).await;
    }
}

/// Every committed recording is a complete, parseable Codex session of the recorded cwd.
#[test]
fn recordings_are_complete() {
    for name in recorded_names() {
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
        let parsed = pvisor::adapters::codex::parse_file(&dir.join("rollout.jsonl")).unwrap();
        assert_eq!(
            parsed.session_id,
            meta["session_id"].as_str().unwrap(),
            "{name}"
        );
        assert!(parsed.plan().max_boundary() >= 3, "{name}");
        assert!(
            dir.join("requests.jsonl").is_file()
                && dir.join("workspace-before").is_dir()
                && dir.join("workspace-after").is_dir()
        );
    }
}
