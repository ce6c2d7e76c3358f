//! Recording genuine Pi 0.83.0 sessions with the REAL `pi` against the scripted model server
//! (`tests/support/pi.rs`). The committed recordings live in `tests/fixtures/pi/recorded/<name>/`;
//! re-record them with
//! `PVISOR_RECORD=1 cargo test --test e2e_pi_record record_fixtures -- --ignored --nocapture`
//! (`PVISOR_RECORD=tools,errors` records only those).

#[path = "support/pi.rs"]
mod pi;

use pi::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "re-records tests/fixtures/pi/recorded; run with PVISOR_RECORD=1 and --ignored"]
async fn record_fixtures() {
    let names = selected(recorded_names());
    for name in names {
        eprintln!("recording {name}");
        record(&name).await;
    }
}

/// Every committed recording is complete, and its two forms (session file, `--mode json`
/// events) parse to the same batches with the same recorded results.
#[test]
fn recordings_are_complete_in_both_forms() {
    let names = recorded_names();
    assert!(names.len() >= 2, "{names:?}");
    let adapter = (pvisor::adapters::registry().get("pi-agent").unwrap().make)();
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
        let plans: Vec<pvisor::kit::Plan> = ["session.jsonl", "stdout.jsonl"]
            .iter()
            .map(|f| {
                let p = dir.join(f);
                adapter
                    .parse(&p, &std::fs::read(&p).unwrap())
                    .unwrap_or_else(|e| panic!("{name}/{f}: {e}"))
            })
            .collect();
        assert!(
            plans[0].max_boundary() >= 3,
            "{name}: {} complete batches",
            plans[0].max_boundary()
        );
        // The same calls with the same recorded results (lines and entry ids differ).
        type Call = (
            usize,
            String,
            String,
            serde_json::Value,
            Option<pvisor::kit::Observation>,
        );
        let calls = |p: &pvisor::kit::Plan| -> Vec<Call> {
            p.batches
                .in_memory()
                .unwrap()
                .iter()
                .flat_map(|b| {
                    b.calls.iter().map(move |c| {
                        (
                            b.model_turn,
                            c.call_id.clone(),
                            c.tool.clone(),
                            c.input.clone(),
                            c.original.clone(),
                        )
                    })
                })
                .collect()
        };
        assert!(
            calls(&plans[0]) == calls(&plans[1]),
            "{name}: both forms give the same calls"
        );
    }
}
