//! The supported Claude Code ranges, proven at their ends with the real CLI of each end:
//! sessions of 2.1.220 ..= 2.1.332 replay (`versions::RANGE`); sessions of 2.1.286 ..= 2.1.332
//! continue with the CLI of the same version (`versions::CONTINUE_RANGE`); parallel results
//! written in completion order are re-attached; a session outside a range is refused before
//! any tool runs.
//!
//! Every run is a `pvisor replay` in a private mount namespace at the recording's path.

#[path = "support/claude.rs"]
mod claude;
#[path = "support/ns.rs"]
mod ns;

use ns::Case;
use serde_json::Value;
use std::path::Path;

fn main_requests(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "main")
        .collect()
}

fn meta(name: &str) -> Value {
    let p = claude::recorded_dir().join(name).join("meta.json");
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// `pvisor replay` of recording `name` (or of `trajectory`) at `after`, in its own namespace.
fn replay(
    name: &str,
    trajectory: Option<&Path>,
    after: usize,
    extra: &[String],
) -> (Case, i32, Value, String) {
    let rec = claude::recorded_dir().join(name);
    let work = meta(name)["cwd"].as_str().unwrap().to_string();
    let case = Case::new(&work);
    let session = trajectory
        .map(Path::to_path_buf)
        .unwrap_or_else(|| rec.join("session.jsonl"));
    let mut args: Vec<String> = [
        "replay",
        "--agent",
        "claude-code",
        "--run-id",
        "r",
        "--after-step",
        &after.to_string(),
        "--trajectory",
        &session.display().to_string(),
        "--workspace",
        &work,
        "--state-dir",
        &case.root.path().join("state").display().to_string(),
        "--output-dir",
        &case.root.path().join("out").display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().cloned());
    let (code, r, err) = case.pvisor(&args, |w| {
        claude::copy_tree(&rec.join("workspace-before"), w);
        claude::set_mtimes(w, claude::SEED_MTIME);
    });
    (case, code, r, err)
}

fn continue_args(name: &str, version: &str, max_steps: usize) -> Vec<String> {
    let rec = claude::recorded_dir().join(name);
    vec![
        "--max-steps".into(),
        max_steps.to_string(),
        "--agent-entrypoint".into(),
        claude::claude_entrypoint_of(Some(version))
            .display()
            .to_string(),
        "--model-script".into(),
        rec.join("script.json").display().to_string(),
    ]
}

/// The original run's main request that first carried the result of `call_id`.
fn original_after(name: &str, call_id: &str) -> Value {
    let rec = claude::recorded_dir().join(name);
    let mut all = main_requests(&rec.join("requests.jsonl"));
    all.extend(main_requests(&rec.join("requests-resume.jsonl")));
    all.into_iter()
        .find(|r| {
            r["body"]["messages"].as_array().unwrap().iter().any(|m| {
                m["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|b| b["tool_use_id"] == call_id)
            })
        })
        .unwrap_or_else(|| panic!("{name}: no original request carries {call_id}"))
}

/// Replay-only and continue at every boundary of `name` with Claude Code `version`: the
/// fresh observations equal the recorded ones and the first request equals the original
/// request N+1 except the device id.
fn every_boundary(name: &str, version: &str, continues: bool) {
    let session = claude::recorded_dir().join(name).join("session.jsonl");
    let parsed = pvisor::adapters::claude_code::parse_file(&session).unwrap();
    let plan = parsed.plan().clone();
    assert_eq!(
        plan.recorded_version.as_deref(),
        Some(version),
        "{name} was recorded by {version}"
    );
    for n in 1..=plan.max_boundary() {
        let (_c, code, r, err) = replay(name, None, n, &["--replay-only".to_string()]);
        assert_eq!(code, 0, "{name} N={n} replay-only: {err}\n{r}");
        assert_eq!(
            r["metadata"]["observations"]["different"], 0,
            "{name} N={n}: {r}"
        );

        if !continues {
            let (_c, code, r, err) = replay(name, None, n, &continue_args(name, "2.1.332", n + 2));
            assert_eq!(
                code, 11,
                "{name} N={n}: a continuation is refused: {err}\n{r}"
            );
            let msg = r["failure"]["message"].as_str().unwrap();
            assert!(
                msg.contains("2.1.286 to 2.1.332") && msg.contains("--replay-only"),
                "{msg}"
            );
            assert_eq!(r["replayed_tool_calls"], 0);
            eprintln!("{name} N={n}: replay-only ok, continuation refused before anything ran");
            continue;
        }
        let prefix = plan.batches.in_memory().unwrap()[n - 1].model_turn;
        let (c, code, r, err) = replay(name, None, n, &continue_args(name, version, prefix + 2));
        assert_eq!(code, 0, "{name} N={n} continue: {err}\n{r}");
        assert_eq!(r["phase"], "continued", "{name} N={n}");
        assert_eq!(
            r["agent"]["version"],
            format!("{version} (Claude Code)"),
            "{name} N={n}"
        );
        let got = main_requests(&c.state("r").join("logs/scripted-model.jsonl"));
        let last_call = &plan.batches.in_memory().unwrap()[n - 1]
            .calls
            .last()
            .unwrap()
            .call_id;
        let orig = original_after(name, last_call);
        let mut d = vec![];
        claude::diff_paths(&orig["body"], &got[0]["body"], String::new(), &mut d);
        d.retain(|p| p != "/metadata/user_id");
        assert!(
            d.is_empty(),
            "{name} N={n}: request 1 differs from the original at {d:?}"
        );
        eprintln!("{name} N={n}: replay-only and continue with {version} ok");
    }
}

#[test]
fn low_ends_replay_2_1_220_and_continue_2_1_286_at_every_boundary() {
    every_boundary("five-step-2.1.220", "2.1.220", false);
    every_boundary("five-step-2.1.286", "2.1.286", true);
}

#[test]
fn parallel_results_in_completion_order_at_the_range_ends() {
    for (name, version, continues) in [
        ("parallel-order-2.1.332", "2.1.332", true),
        ("parallel-order-2.1.286", "2.1.286", true),
        ("parallel-order-2.1.220", "2.1.220", false),
    ] {
        every_boundary(name, version, continues);
    }
}

#[test]
fn a_cli_outside_the_continue_range_is_refused_before_anything_runs() {
    let name = "five-step";
    let (c, code, r, err) = replay(name, None, 2, &continue_args(name, "2.1.220", 8));
    assert_eq!(code, 11, "{r}\n{err}");
    let msg = r["failure"]["message"].as_str().unwrap();
    assert!(
        msg.contains("2.1.220") && msg.contains("continues with 2.1.286 to 2.1.332"),
        "{msg}"
    );
    assert!(
        claude::list_files(&c.fresh().join("work")).is_empty(),
        "nothing ran"
    );
}

#[test]
fn a_session_outside_the_range_is_refused_in_every_mode_before_any_tool_runs() {
    let src = claude::recorded_dir().join("five-step/session.jsonl");
    let text = std::fs::read_to_string(&src).unwrap();
    for v in ["2.0.77", "2.1.219", "2.1.333"] {
        let dir = tempfile::tempdir().unwrap();
        let edited = dir.path().join("session.jsonl");
        std::fs::write(
            &edited,
            text.replace("\"version\":\"2.1.332\"", &format!("\"version\":\"{v}\"")),
        )
        .unwrap();
        for mode in [
            vec!["--prepare-only".to_string()],
            vec!["--replay-only".to_string()],
            continue_args("five-step", "2.1.332", 8),
        ] {
            let (c, code, r, err) = replay("five-step", Some(&edited), 2, &mode);
            assert_eq!(code, 11, "{v} {mode:?}: {r}\n{err}");
            assert_eq!(r["failure"]["category"], "unsupported_version", "{v}");
            let msg = r["failure"]["message"].as_str().unwrap();
            assert!(msg.contains(v) && msg.contains(" to 2.1.332"), "{v}: {msg}");
            assert_eq!(r["replayed_tool_calls"], 0, "{v} {mode:?}");
            // The workspace (empty before the recording) is still empty: nothing ran.
            let ws = c.fresh().join("work");
            assert!(
                claude::list_files(&ws).is_empty(),
                "{v} {mode:?}: a tool ran: {:?}",
                claude::list_files(&ws)
            );
        }
    }
}
