//! Acceptance: `pvisor replay --agent codex` from the command line on every session recorded
//! with the real Codex CLI 0.149.0 (`tests/fixtures/codex/recorded/<name>/`, see
//! `tests/support/codex.rs`), at every boundary, prepare-only, replay-only and continued with
//! the real codex, in a fresh workspace at the recorded path
//! `/tmp/pvisor-rec-codex-<name>/work` (lock `/tmp/pvisor-rec-codex-<name>.lock`).

#[path = "support/codex.rs"]
mod codex;

use codex::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn rollout(name: &str) -> std::path::PathBuf {
    recorded_dir().join(name).join("rollout.jsonl")
}

fn replay(
    name: &str,
    root: &Path,
    run_id: &str,
    after: usize,
    extra: &[&str],
) -> (i32, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args([
            "replay",
            "--agent",
            "codex",
            "--run-id",
            run_id,
            "--after-step",
            &after.to_string(),
        ])
        .arg("--trajectory")
        .arg(rollout(name))
        .arg("--workspace")
        .arg(fixed_work(name))
        .arg("--state-dir")
        .arg(root.join("state"))
        .arg("--output-dir")
        .arg(root.join("out"))
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let v: Value = serde_json::from_str(stdout.lines().last().unwrap_or("{}"))
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    (
        out.status.code().unwrap_or(-1),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn refold(state: &Path) -> Value {
    let (_, evs, _) = pvisor::journal::Journal::open_dir(state).unwrap();
    serde_json::to_value(pvisor::fold::derive(&pvisor::fold::fold(&evs).unwrap())).unwrap()
}

/// Files of a directory tree, relative, sorted, with their contents.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                v.push((
                    p.strip_prefix(dir).unwrap().to_string_lossy().into_owned(),
                    std::fs::read(&p).unwrap(),
                ));
            }
        }
    }
    v.sort();
    v
}

fn prepare_and_replay_only(name: &str) {
    let _l = lock(name);
    let root = tempfile::tempdir().unwrap();
    let plan = pvisor::adapters::codex::parse_file(&rollout(name))
        .unwrap()
        .plan()
        .clone();
    let before = tree(&recorded_dir().join(name).join("workspace-before"));
    for n in 1..=plan.max_boundary() {
        reset_work(name);
        let id = format!("p{n}");
        let (code, r, err) = replay(name, root.path(), &id, n, &["--prepare-only"]);
        assert_eq!(code, 0, "{name} N={n} prepare-only: {err}\n{r}");
        assert_eq!(r["phase"], "prepared");
        assert_eq!(
            tree(&fixed_work(name)),
            before,
            "{name}: prepare-only touched the workspace"
        );
        assert_eq!(refold(&root.path().join("state").join(&id)), r);

        reset_work(name);
        let id = format!("r{n}");
        let (code, r, err) = replay(name, root.path(), &id, n, &["--replay-only"]);
        assert_eq!(code, 0, "{name} N={n} replay-only: {err}\n{r}");
        assert_eq!(r["phase"], "replayed");
        let cmp = std::fs::read_to_string(
            root.path()
                .join("out")
                .join(&id)
                .join("observation-comparison.json"),
        )
        .unwrap_or_default();
        assert_eq!(
            r["metadata"]["observations"]["different"], 0,
            "{name} N={n}: {cmp}"
        );
        assert_eq!(
            r["replayed_tool_calls"].as_u64().unwrap() as usize,
            plan.batches[..n]
                .iter()
                .map(|b| b.calls.len())
                .sum::<usize>()
        );
        assert_eq!(refold(&root.path().join("state").join(&id)), r);
        eprintln!("{name} N={n}: replayed, observations equal");
    }
    // After the last boundary the workspace is the recorded one.
    assert_eq!(
        tree(&fixed_work(name)),
        tree(&recorded_dir().join(name).join("workspace-after")),
        "{name}"
    );
}

fn continue_everywhere(name: &str) {
    let _l = lock(name);
    let entry = codex_entrypoint();
    let root = tempfile::tempdir().unwrap();
    let dir = recorded_dir().join(name);
    let script = dir.join("script.json");
    let parsed = pvisor::adapters::codex::parse_file(&rollout(name)).unwrap();
    let plan = parsed.plan().clone();
    let originals = main_requests(&dir.join("requests.jsonl"));
    let script_v: Value = serde_json::from_slice(&std::fs::read(&script).unwrap()).unwrap();
    let turns = script_v["turns"].as_array().unwrap();
    for n in 1..=plan.max_boundary() {
        reset_work(name);
        let id = format!("c{n}");
        let prefix = plan.batches[n - 1].model_turn;
        let max = (prefix + 2).to_string();
        let (code, r, err) = replay(
            name,
            root.path(),
            &id,
            n,
            &[
                "--max-steps",
                &max,
                "--agent-entrypoint",
                &entry.display().to_string(),
                "--model-script",
                &script.display().to_string(),
            ],
        );
        let state = root.path().join("state").join(&id);
        assert_eq!(
            code,
            0,
            "{name} N={n} continue: {err}\n{r}\n{}",
            std::fs::read_to_string(state.join("logs/agent-stderr.log")).unwrap_or_default()
        );
        assert_eq!(r["phase"], "continued");
        assert_eq!(
            refold(&state),
            r,
            "{name} N={n}: fold(journal) != printed result"
        );
        let got = main_requests(&state.join("logs/scripted-model.jsonl"));
        assert!(!got.is_empty());
        // The first upstream request is the original request that followed batch N.
        let last_call = &plan.batches[n - 1].calls.last().unwrap().call_id;
        let orig = originals
            .iter()
            .find(|q| {
                q["body"]["input"].as_array().unwrap().iter().any(|i| {
                    i["type"].as_str().unwrap_or("").ends_with("_output")
                        && i["call_id"] == last_call.as_str()
                })
            })
            .unwrap();
        assert_eq!(
            masked(&got[0]["body"]),
            masked(&orig["body"]),
            "{name} N={n}: first request differs from the original"
        );
        // Budget of 2 live steps.
        let tool_turns = (0..2)
            .take_while(|k| {
                turns
                    .get(prefix + k)
                    .map(|t| {
                        t["tool_calls"]
                            .as_array()
                            .map(|a| !a.is_empty())
                            .unwrap_or(false)
                    })
                    .unwrap_or(false)
            })
            .count();
        let expect = if tool_turns == 2 {
            "max_steps"
        } else {
            "completed"
        };
        assert_eq!(r["agent_status"], expect, "{name} N={n}: {r}");
        let cont = std::fs::read_to_string(
            root.path()
                .join("out")
                .join(&id)
                .join("native/continued-session.jsonl"),
        )
        .unwrap();
        assert!(!cont.contains("pvisor-codex-resume-"), "{name} N={n}");
        let cp = pvisor::adapters::codex::parse_bytes(Path::new("c"), cont.as_bytes()).unwrap();
        assert_eq!(cp.session_id, parsed.session_id);
        eprintln!("{name} N={n}: continued ok ({expect})");
    }
}

#[test]
fn patches_prepare_and_replay_only() {
    prepare_and_replay_only("patches");
}

#[test]
fn commands_prepare_and_replay_only() {
    prepare_and_replay_only("commands");
}

#[test]
fn patches_continue_with_the_real_codex() {
    continue_everywhere("patches");
}

#[test]
fn commands_continue_with_the_real_codex() {
    continue_everywhere("commands");
}

/// Every recording is covered by a test above.
#[test]
fn all_recordings_covered() {
    assert_eq!(recorded_names(), ["commands", "patches"]);
}
