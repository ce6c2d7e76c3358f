//! Acceptance: `pvisor replay --agent claude-code` from the command line, with the REAL
//! Claude Code CLI (installed by scripts/install-agents.sh) and the built-in scripted model
//! (`--model-script`), on genuine recorded sessions, at every boundary, in all three modes.

#[path = "support/claude.rs"]
mod claude;

use std::path::{Path, PathBuf};
use std::process::Command;

use fs2::FileExt;
use serde_json::Value;

struct CwdLock(#[allow(dead_code)] std::fs::File);

/// The recorded sessions use fixed workspace paths; tests touching one path take its lock.
fn lock_cwd(name: &str) -> CwdLock {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(format!("/tmp/pvisor-rec-{name}.lock"))
        .unwrap();
    f.lock_exclusive().unwrap();
    CwdLock(f)
}

struct Case {
    rec: PathBuf,
    work: PathBuf,
    root: tempfile::TempDir,
    _lock: CwdLock,
}

fn case(name: &str) -> Case {
    let lock = lock_cwd(name);
    let rec = claude::recorded_dir().join(name);
    let meta: Value =
        serde_json::from_slice(&std::fs::read(rec.join("meta.json")).unwrap()).unwrap();
    let work = PathBuf::from(meta["cwd"].as_str().unwrap());
    Case {
        rec,
        work,
        root: tempfile::tempdir().unwrap(),
        _lock: lock,
    }
}

impl Case {
    /// A fresh workspace at the original path, as before the recorded run.
    fn reset(&self) {
        let _ = std::fs::remove_dir_all(&self.work);
        claude::copy_tree(&self.rec.join("workspace-before"), &self.work);
        claude::set_mtimes(&self.work, claude::SEED_MTIME);
    }
    fn replay(&self, run_id: &str, after: usize, extra: &[&str]) -> (i32, Value, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_pvisor"))
            .args([
                "replay",
                "--agent",
                "claude-code",
                "--run-id",
                run_id,
                "--after-step",
                &after.to_string(),
            ])
            .arg("--trajectory")
            .arg(self.rec.join("session.jsonl"))
            .arg("--workspace")
            .arg(&self.work)
            .arg("--state-dir")
            .arg(self.root.path().join("state"))
            .arg("--output-dir")
            .arg(self.root.path().join("out"))
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
    fn state(&self, run_id: &str) -> PathBuf {
        self.root.path().join("state").join(run_id)
    }
    fn refold(&self, run_id: &str) -> Value {
        let (_, evs, _) = pvisor::journal::Journal::open_dir(&self.state(run_id)).unwrap();
        serde_json::to_value(pvisor::fold::derive(&pvisor::fold::fold(&evs).unwrap())).unwrap()
    }
    fn batches(&self) -> usize {
        let bytes = std::fs::read(self.rec.join("session.jsonl")).unwrap();
        pvisor::adapters::claude_code::parse_bytes(&self.rec.join("session.jsonl"), &bytes)
            .unwrap()
            .plan()
            .max_boundary()
    }
    fn entry(&self) -> String {
        claude::claude_entrypoint().display().to_string()
    }
    fn script(&self) -> String {
        self.rec.join("script.json").display().to_string()
    }
}

fn main_requests(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "main")
        .collect()
}

/// The original run's main request that first carried the result of `call_id`.
fn original_after(rec: &Path, call_id: &str) -> Value {
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
        .unwrap_or_else(|| {
            panic!(
                "no original request of {} carries the result of {call_id}",
                rec.display()
            )
        })
}

#[test]
fn every_boundary_in_all_three_modes() {
    for name in ["five-step", "search-errors", "edits"] {
        let c = case(name);
        let n_batches = c.batches();
        assert!(n_batches >= 2, "{name}");
        let script: Value =
            serde_json::from_slice(&std::fs::read(c.rec.join("script.json")).unwrap()).unwrap();
        let session = std::fs::read(c.rec.join("session.jsonl")).unwrap();
        let plan =
            pvisor::adapters::claude_code::parse_bytes(&c.rec.join("session.jsonl"), &session)
                .unwrap()
                .plan()
                .clone();
        for n in 1..=n_batches {
            // prepare-only: no tool runs, the workspace stays as it was
            c.reset();
            let before = claude::file_states(&c.work);
            let id = format!("{name}-p{n}");
            let (code, r, err) = c.replay(&id, n, &["--prepare-only"]);
            assert_eq!(code, 0, "{name} N={n} prepare-only: {err}");
            assert_eq!(r["phase"], "prepared");
            assert!(
                claude::file_states(&c.work) == before,
                "{name} N={n}: prepare-only touched the workspace (names, mtimes or bytes)"
            );
            assert_eq!(c.refold(&id), r);

            // replay-only: fresh observations equal the originals byte for byte
            c.reset();
            let id = format!("{name}-r{n}");
            let (code, r, err) = c.replay(&id, n, &["--replay-only"]);
            assert_eq!(code, 0, "{name} N={n} replay-only: {err}\n{r}");
            assert_eq!(r["phase"], "replayed");
            assert_eq!(
                r["metadata"]["observations"]["different"],
                0,
                "{name} N={n}: {}",
                std::fs::read_to_string(
                    c.root
                        .path()
                        .join("out")
                        .join(&id)
                        .join("observation-comparison.json")
                )
                .unwrap()
            );
            assert_eq!(
                r["replayed_tool_calls"].as_u64().unwrap() as usize,
                plan.batches[..n]
                    .iter()
                    .map(|b| b.calls.len())
                    .sum::<usize>()
            );
            assert_eq!(c.refold(&id), r);

            // continue: the real claude, first request = the original request N+1
            c.reset();
            let id = format!("{name}-c{n}");
            let prefix = plan.batches[n - 1].model_turn;
            let max = (prefix + 2).to_string();
            let (code, r, err) = c.replay(
                &id,
                n,
                &[
                    "--max-steps",
                    &max,
                    "--agent-entrypoint",
                    &c.entry(),
                    "--model-script",
                    &c.script(),
                ],
            );
            assert_eq!(code, 0, "{name} N={n} continue: {err}\n{r}");
            assert_eq!(r["phase"], "continued");
            assert_eq!(
                c.refold(&id),
                r,
                "{name} N={n}: fold(journal) != printed result"
            );
            let got = main_requests(&c.state(&id).join("logs/scripted-model.jsonl"));
            assert!(!got.is_empty());
            let last_call = &plan.batches[n - 1].calls.last().unwrap().call_id;
            let orig = original_after(&c.rec, last_call);
            let mut d = vec![];
            claude::diff_paths(&orig["body"], &got[0]["body"], String::new(), &mut d);
            // declared dynamic field: the device id (a fresh ~/.claude.json); the tool-call
            // ids of the scripted server are per turn, so they are equal too
            d.retain(|p| p != "/metadata/user_id");
            assert!(
                d.is_empty(),
                "{name} N={n}: first request differs from the original at {d:?}"
            );
            // budget of 2 live steps: max_steps when both scripted replies call tools
            let turns = script["turns"].as_array().unwrap();
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
            assert_eq!(r["agent_status"], expect, "{name} N={n}");
            let steps = r["continued_steps"].as_u64().unwrap();
            assert!((1..=2).contains(&steps), "{name} N={n}: {steps} live steps");
            eprintln!("{name} N={n}: prepare/replay/continue ok ({steps} live steps, {expect})");
        }
    }
}

#[test]
fn a_boundary_prompt_is_injected_once_and_never_stored() {
    let c = case("five-step");
    c.reset();
    let prompt = "Before going on, say which files exist. (pvisor-secret-7f3a)";
    let (code, r, err) = c.replay(
        "bp",
        2,
        &[
            "--max-steps",
            "4",
            "--agent-entrypoint",
            &c.entry(),
            "--model-script",
            &c.script(),
            "--boundary-user-prompt",
            prompt,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["metadata"]["boundary_user_prompt"]["injected"], true);
    assert_eq!(r["metadata"]["boundary_user_prompt"]["injection_count"], 1);
    assert_eq!(
        r["metadata"]["input_condition"],
        "boundary_user_prompt_appended"
    );
    let got = main_requests(&c.state("bp").join("logs/scripted-model.jsonl"));
    for (i, q) in got.iter().enumerate() {
        let text = q["body"]["messages"].to_string();
        assert_eq!(
            text.matches("pvisor-secret-7f3a").count(),
            1,
            "request {i} must carry the prompt exactly once"
        );
    }
    // the plaintext is nowhere in the journal, the result or the outputs
    let mut leaks = vec![];
    for dir in [c.state("bp"), c.root.path().join("out/bp")] {
        for f in claude::list_files(&dir) {
            if f.starts_with("logs/") {
                continue; // the scripted model's own request log holds request bodies by design
            }
            let b = std::fs::read(dir.join(&f)).unwrap();
            if String::from_utf8_lossy(&b).contains("pvisor-secret-7f3a") {
                leaks.push(f);
            }
        }
    }
    assert!(
        leaks.is_empty(),
        "boundary prompt plaintext found in {leaks:?}"
    );
    assert!(!r.to_string().contains("pvisor-secret-7f3a"));
    let audit = Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args(["journal", "audit"])
        .arg(c.state("bp"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&audit.stdout);
    assert_eq!(audit.status.code(), Some(0), "{text}");
    assert!(
        text.contains("privacy=ok") && text.contains("bridge=ok"),
        "{text}"
    );
}

#[test]
fn malformed_sessions_are_trajectory_errors_naming_the_line() {
    let c = case("five-step");
    let src = std::fs::read_to_string(c.rec.join("session.jsonl")).unwrap();
    let lines: Vec<&str> = src.lines().collect();
    let bad = c.root.path().join("bad.jsonl");
    let mut truncated = lines.clone();
    let cut = truncated[10].len() / 2;
    let half = &lines[10][..cut];
    truncated[10] = half;
    std::fs::write(&bad, truncated.join("\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args([
            "replay",
            "--agent",
            "claude-code",
            "--after-step",
            "1",
            "--replay-only",
            "--run-id",
            "bad",
        ])
        .arg("--trajectory")
        .arg(&bad)
        .arg("--workspace")
        .arg(c.root.path())
        .arg("--state-dir")
        .arg(c.root.path().join("state"))
        .arg("--output-dir")
        .arg(c.root.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(10));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["failure"]["category"], "trajectory_error");
    assert!(
        r["failure"]["message"]
            .as_str()
            .unwrap()
            .contains("bad.jsonl:11"),
        "{r}"
    );
}
