//! Acceptance: `pvisor replay --agent codex` from the command line on the genuine Codex CLI
//! 0.149.0 rollout (`tests/fixtures/codex/genuine`), at every boundary, prepare-only and
//! replay-only and continued with the real codex, in a fresh workspace at the original path
//! (`/tmp/realagent-codex.BU6ewi/work`, lock `/tmp/pvisor-rec-codex-genuine.lock`): Codex
//! re-sends its `<environment_context>` when the cwd differs, and the bridge refuses that.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/codex.rs"]
mod codex;

use codex::{main_requests, masked};
use fs2::FileExt;
use serde_json::Value;

const WORK: &str = "/tmp/realagent-codex.BU6ewi/work";

fn lock() -> std::fs::File {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/tmp/pvisor-rec-codex-genuine.lock")
        .unwrap();
    f.lock_exclusive().unwrap();
    f
}

fn rollout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex/genuine/rollout-final.jsonl")
}

fn reset() {
    let _ = std::fs::remove_dir_all(WORK);
    std::fs::create_dir_all(WORK).unwrap();
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn replay(root: &Path, run_id: &str, after: usize, extra: &[&str]) -> (i32, Value, String) {
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
        .arg(rollout())
        .arg("--workspace")
        .arg(WORK)
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

#[test]
fn a_code_mode_cell_calling_notify_is_refused_before_anything_runs() {
    let _l = lock();
    reset();
    let root = tempfile::tempdir().unwrap();
    // The genuine code-mode session with its first cell calling `notify` (an extra output of
    // the call that pvisor does not reproduce).
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/codex/codemode/rollout-run1.jsonl");
    let mut done = false;
    let edited: String = std::fs::read_to_string(&src)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if !done && v["payload"]["type"] == "custom_tool_call" {
                v["payload"]["input"] = Value::from("notify(\"hello\")");
                done = true;
            }
            format!("{v}\n")
        })
        .collect();
    assert!(done);
    let trajectory = root.path().join("notify.jsonl");
    std::fs::write(&trajectory, edited).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args([
            "replay",
            "--agent",
            "codex",
            "--run-id",
            "cm",
            "--after-step",
            "2",
            "--replay-only",
        ])
        .arg("--trajectory")
        .arg(&trajectory)
        .arg("--workspace")
        .arg(WORK)
        .arg("--state-dir")
        .arg(root.path().join("state"))
        .arg("--output-dir")
        .arg(root.path().join("out"))
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_ne!(out.status.code(), Some(0), "{r}");
    assert!(
        r["failure"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("notify"),
        "{r}"
    );
    assert!(
        files(Path::new(WORK)).is_empty(),
        "a refused replay ran something"
    );
}

fn main_requests_all(log: &Path) -> Vec<Value> {
    main_requests(log)
}

#[test]
fn a_boundary_prompt_is_injected_once_and_never_stored() {
    let _l = lock();
    reset();
    let entry = codex::codex_entrypoint().display().to_string();
    let root = tempfile::tempdir().unwrap();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex/five-step/script.json");
    let prompt = "Before going on, say which files exist. (pvisor-secret-c0d3x)";
    let (code, r, err) = replay(
        root.path(),
        "bp",
        2,
        &[
            "--max-steps",
            "5",
            "--agent-entrypoint",
            &entry,
            "--model-script",
            &script.display().to_string(),
            "--boundary-user-prompt",
            prompt,
        ],
    );
    assert_eq!(code, 0, "{err}\n{r}");
    assert_eq!(r["metadata"]["boundary_user_prompt"]["injected"], true);
    assert_eq!(r["metadata"]["boundary_user_prompt"]["injection_count"], 1);
    assert_eq!(
        r["metadata"]["input_condition"],
        "boundary_user_prompt_appended"
    );
    let state = root.path().join("state/bp");
    let got = main_requests(&state.join("logs/scripted-model.jsonl"));
    assert!(!got.is_empty());
    for (i, q) in got.iter().enumerate() {
        assert_eq!(
            q["body"]["input"]
                .to_string()
                .matches("pvisor-secret-c0d3x")
                .count(),
            1,
            "request {i} must carry the prompt exactly once"
        );
    }
    let mut leaks = vec![];
    for dir in [state.clone(), root.path().join("out/bp")] {
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    if !p.ends_with("logs") {
                        stack.push(p);
                    }
                } else if String::from_utf8_lossy(&std::fs::read(&p).unwrap())
                    .contains("pvisor-secret-c0d3x")
                {
                    leaks.push(p);
                }
            }
        }
    }
    assert!(
        leaks.is_empty(),
        "boundary prompt plaintext found in {leaks:?}"
    );
}

/// A rollout recorded on another day: Codex would re-send its `<environment_context>` (the
/// stored date differs from today's) and the bridge would refuse; the continuation pins the
/// stored, never model-visible date so request 1 still ends at O′N.
#[test]
fn a_rollout_recorded_on_another_day_continues() {
    let _l = lock();
    let entry = codex::codex_entrypoint().display().to_string();
    let root = tempfile::tempdir().unwrap();
    let old = root.path().join("rollout-old-day.jsonl");
    let mut patched = 0;
    let text: String = std::fs::read_to_string(rollout())
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            if matches!(
                v["type"].as_str(),
                Some("turn_context") | Some("world_state")
            ) && l.contains("\"current_date\":")
            {
                patched += 1;
                let re = regex::Regex::new(r#""current_date":\s*"\d{4}-\d{2}-\d{2}""#).unwrap();
                return re
                    .replace_all(l, "\"current_date\":\"2025-01-02\"")
                    .into_owned()
                    + "\n";
            }
            l.to_string() + "\n"
        })
        .collect();
    assert!(patched > 0);
    std::fs::write(&old, text).unwrap();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex/five-step/script.json");
    reset();
    let out = Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args([
            "replay",
            "--agent",
            "codex",
            "--run-id",
            "old-day",
            "--after-step",
            "1",
            "--max-steps",
            "3",
        ])
        .arg("--trajectory")
        .arg(&old)
        .arg("--workspace")
        .arg(WORK)
        .arg("--state-dir")
        .arg(root.path().join("state"))
        .arg("--output-dir")
        .arg(root.path().join("out"))
        .args([
            "--agent-entrypoint",
            &entry,
            "--model-script",
            &script.display().to_string(),
        ])
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(
        out.stdout
            .trim_ascii_end()
            .rsplit(|b| *b == b'\n')
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{r}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(r["phase"], "continued");
    let got = main_requests(&root.path().join("state/old-day/logs/scripted-model.jsonl"));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex/genuine");
    let originals = main_requests_all(&dir.join("requests-run1.jsonl"));
    assert_eq!(
        masked(&got[0]["body"])["input"],
        masked(&originals[1]["body"])["input"],
        "request 1 must end at O′N with no environment item added"
    );
}

/// The recorded code-mode session replayed from the command line (isolated, so its
/// original path is free): every tool call of every cell is an `inner_call_finished` event
/// inside its cell's call, and the audit page shows them under the cell.
#[test]
fn a_code_mode_replay_journals_each_cell_s_tool_calls_and_the_audit_shows_them() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex/recorded/codemode");
    let root = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args([
            "replay",
            "--agent",
            "codex",
            "--run-id",
            "cm",
            "--after-step",
            "6",
            "--replay-only",
            "--quiet",
        ])
        .arg("--trajectory")
        .arg(dir.join("rollout.jsonl"))
        .arg("--agent-entrypoint")
        .arg(codex::codex_entrypoint())
        .arg("--workspace")
        .arg(codex::fixed_work("codemode"))
        .arg("--workspace-seed")
        .arg(dir.join("workspace-before"))
        .arg("--state-dir")
        .arg(root.path().join("state"))
        .arg("--output-dir")
        .arg(root.path().join("out"))
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "{r}");
    assert_eq!(r["quality"], "verified", "{r}");
    assert_eq!(r["metadata"]["observations"]["different"], 0, "{r}");
    let export = std::fs::read_to_string(root.path().join("out/cm/journal.jsonl")).unwrap();
    let inner: Vec<Value> = export
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "inner_call_finished")
        .collect();
    // Batch 1 (cell 1): exec_command, apply_patch, exec_command; batch 2 (cells 2, 3): 1 + 2;
    // batch 3 (cell 4): apply_patch (rejected) + update_plan; batch 5's cell yielded while
    // its exec_command ran, which ended during batch 6's `wait`: journaled there.
    let tools: Vec<(u64, &str, bool)> = inner
        .iter()
        .map(|e| {
            (
                e["data"]["batch"].as_u64().unwrap(),
                e["data"]["tool"].as_str().unwrap(),
                e["data"]["ok"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(tools.len(), 9, "{tools:?}");
    assert_eq!(tools[8], (6, "exec_command", true), "{tools:?}");
    assert!(tools.contains(&(3, "apply_patch", false)), "{tools:?}");
    assert!(tools.contains(&(1, "apply_patch", true)), "{tools:?}");
    let html = root.path().join("audit.html");
    let a = Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args(["journal", "audit"])
        .arg(root.path().join("state/cm"))
        .args(["--format", "html", "-o"])
        .arg(&html)
        .output()
        .unwrap();
    assert_eq!(
        a.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&a.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(
        page.matches("this call&#39;s code made").count()
            + page.matches("this call's code made").count(),
        5
    );
    assert!(page.contains("rejected"));
}
