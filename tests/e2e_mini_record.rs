//! Recording genuine mini-swe-agent trajectories (2.4.6 and 1.17.5) with the REAL `mini`
//! against the scripted model server (`tests/support/mini.rs`). The committed recordings live
//! in `tests/fixtures/mini-swe-agent/recorded/<name>/`; re-record them with
//! `PVISOR_RECORD=1 cargo test --test e2e_mini_record record_fixtures -- --ignored --nocapture`
//! (`PVISOR_RECORD=v1-tools` records only that one).

#[path = "support/mini.rs"]
mod mini;

use mini::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "re-records tests/fixtures/mini-swe-agent/recorded; run with PVISOR_RECORD=1 and --ignored"]
async fn record_fixtures() {
    for name in selected(recorded_names()) {
        eprintln!("recording {name}");
        record(&name).await;
    }
}

/// Every committed recording is complete: recorded at its fixed path by the version it
/// names, the script played to its end, and what each recording is for is in it.
#[test]
fn recordings_are_complete() {
    let names = recorded_names();
    assert!(names.len() >= 2, "{names:?}");
    let adapter = (pvisor::adapters::registry()
        .get("mini-swe-agent")
        .unwrap()
        .make)();
    let mut formats = std::collections::BTreeSet::new();
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
        assert_eq!(meta["exit_status"], "Submitted", "{name}");
        let p = dir.join("mini.traj.json");
        let plan = adapter
            .parse(&p, &std::fs::read(&p).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(plan.recorded_version.as_deref(), meta["version"].as_str());
        formats.insert(meta["trajectory_format"].as_str().unwrap().to_string());
        assert!(
            plan.max_boundary() >= 5,
            "{name}: {} complete batches",
            plan.max_boundary()
        );
        let texts: Vec<String> = plan
            .batches
            .in_memory()
            .unwrap()
            .iter()
            .flat_map(|b| b.calls.iter())
            .filter_map(|c| c.original.as_ref().map(|o| o.text.clone()))
            .collect();
        let all = texts.join("\n");
        // A failing command, a timeout, output past 10,000 characters.
        assert!(
            plan.batches
                .in_memory()
                .unwrap()
                .iter()
                .flat_map(|b| &b.calls)
                .any(|c| c.original.as_ref().is_some_and(|o| o.is_error)),
            "{name}"
        );
        assert!(all.contains("timed out"), "{name}: no timeout");
        assert!(
            all.contains("output_head") || all.contains("<output_head>"),
            "{name}: no truncation"
        );
        if name == "v2-tools" {
            assert!(
                plan.batches
                    .in_memory()
                    .unwrap()
                    .iter()
                    .any(|b| b.calls.len() >= 2),
                "{name}: parallel calls"
            );
        } else if name == "v1-tools" {
            let turns: Vec<usize> = plan
                .batches
                .in_memory()
                .unwrap()
                .iter()
                .map(|b| b.model_turn)
                .collect();
            assert!(
                turns.windows(2).any(|w| w[1] > w[0] + 1),
                "{name}: a format-error turn"
            );
        }
    }
    assert_eq!(
        formats.len(),
        2,
        "both trajectory formats are recorded: {formats:?}"
    );
}
