//! Acceptance: `pvisor replay --agent codex` from the command line on the genuine Codex CLI
//! 0.149.0 rollout (`tests/fixtures/codex/genuine`), at every boundary, prepare-only and
//! replay-only, in a fresh workspace at a fixed path (`/tmp/pvisor-rec-codex-genuine/work`,
//! lock `/tmp/pvisor-rec-codex-genuine.lock`).

use std::path::{Path, PathBuf};
use std::process::Command;

use fs2::FileExt;
use serde_json::Value;

const WORK: &str = "/tmp/pvisor-rec-codex-genuine/work";

fn lock() -> std::fs::File {
    let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open("/tmp/pvisor-rec-codex-genuine.lock").unwrap();
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
    let mut v: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

fn replay(root: &Path, run_id: &str, after: usize, extra: &[&str]) -> (i32, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args(["replay", "--agent", "codex", "--run-id", run_id, "--after-step", &after.to_string()])
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
    let v: Value = serde_json::from_str(stdout.lines().last().unwrap_or("{}")).unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), v, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn refold(state: &Path) -> Value {
    let (_, evs, _) = pvisor::journal::Journal::open_dir(state).unwrap();
    serde_json::to_value(pvisor::fold::derive(&pvisor::fold::fold(&evs).unwrap())).unwrap()
}

#[test]
fn every_boundary_prepare_and_replay_only() {
    let _l = lock();
    let root = tempfile::tempdir().unwrap();
    let plan = pvisor::adapters::codex::parse_file(&rollout()).unwrap().plan().clone();
    assert_eq!(plan.max_boundary(), 5);
    for n in 1..=plan.max_boundary() {
        reset();
        let id = format!("p{n}");
        let (code, r, err) = replay(root.path(), &id, n, &["--prepare-only"]);
        assert_eq!(code, 0, "N={n} prepare-only: {err}\n{r}");
        assert_eq!(r["phase"], "prepared");
        assert!(files(Path::new(WORK)).is_empty(), "prepare-only touched the workspace");
        assert_eq!(refold(&root.path().join("state").join(&id)), r);

        reset();
        let id = format!("r{n}");
        let (code, r, err) = replay(root.path(), &id, n, &["--replay-only"]);
        assert_eq!(code, 0, "N={n} replay-only: {err}\n{r}");
        assert_eq!(r["phase"], "replayed");
        let cmp = std::fs::read_to_string(root.path().join("out").join(&id).join("observation-comparison.json")).unwrap_or_default();
        assert_eq!(r["metadata"]["observations"]["different"], 0, "N={n}: {cmp}");
        assert_eq!(r["replayed_tool_calls"].as_u64().unwrap() as usize, plan.batches[..n].iter().map(|b| b.calls.len()).sum::<usize>());
        assert_eq!(refold(&root.path().join("state").join(&id)), r);
        let expect: &[&str] = if n == 1 { &["a.txt"] } else { &["a.txt", "notes.txt"] };
        assert_eq!(files(Path::new(WORK)), expect, "N={n}");
    }
}

#[test]
fn code_mode_is_refused_before_anything_runs() {
    let _l = lock();
    reset();
    let root = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args(["replay", "--agent", "codex", "--run-id", "cm", "--after-step", "2", "--replay-only"])
        .arg("--trajectory")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex/codemode/rollout-run1.jsonl"))
        .arg("--workspace")
        .arg(WORK)
        .arg("--state-dir")
        .arg(root.path().join("state"))
        .arg("--output-dir")
        .arg(root.path().join("out"))
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_ne!(out.status.code(), Some(0), "{r}");
    assert!(r["failure"]["message"].as_str().unwrap_or("").contains("exec"), "{r}");
    assert!(files(Path::new(WORK)).is_empty(), "a refused replay ran something");
}
