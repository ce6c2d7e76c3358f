//! A replay runs days after the recording: Claude Code resumed on a later day inserts a
//! "The date has changed" system turn after the boundary. The real claude runs under
//! libfaketime three days ahead (Debian package `faketime`, installed by scripts/test.sh);
//! the first request the model receives must still be the original request N+1.

#[path = "support/claude.rs"]
mod claude;

use std::path::{Path, PathBuf};
use std::process::Command;

use fs2::FileExt;
use serde_json::Value;

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

fn main_requests(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "main")
        .collect()
}

#[test]
fn a_replay_three_days_later_still_sends_the_original_request() {
    assert!(
        Path::new(LIBFAKETIME).is_file(),
        "{LIBFAKETIME} is missing: install the Debian package `faketime` (scripts/test.sh does)"
    );
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/tmp/pvisor-rec-five-step.lock")
        .unwrap();
    lock.lock_exclusive().unwrap();
    let rec = claude::recorded_dir().join("five-step");
    let work = PathBuf::from("/tmp/pvisor-rec-five-step/work");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let root = tempfile::tempdir().unwrap();
    let wrapper = root.path().join("claude-later");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/bash\nexport LD_PRELOAD={LIBFAKETIME} FAKETIME=+3d FAKETIME_DISABLE_SHM=1 FAKETIME_DONT_FAKE_MONOTONIC=1\nexec {} \"$@\"\n",
            claude::claude_entrypoint().display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&wrapper)
        .status()
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args([
            "replay",
            "--agent",
            "claude-code",
            "--run-id",
            "later",
            "--after-step",
            "2",
            "--max-steps",
            "4",
        ])
        .arg("--trajectory")
        .arg(rec.join("session.jsonl"))
        .arg("--workspace")
        .arg(&work)
        .arg("--state-dir")
        .arg(root.path().join("state"))
        .arg("--output-dir")
        .arg(root.path().join("out"))
        .arg("--agent-entrypoint")
        .arg(&wrapper)
        .arg("--model-script")
        .arg(rec.join("script.json"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let state = root.path().join("state/later");
    let got = main_requests(&state.join("logs/scripted-model.jsonl"));
    let orig = main_requests(&rec.join("requests.jsonl"));
    assert_eq!(
        got[0]["body"]["messages"], orig[2]["body"]["messages"],
        "request 1 must be the original request N+1"
    );
    assert_eq!(got[0]["body"]["system"], orig[2]["body"]["system"]);
    // later requests carry the live turns; the notice is removed from them too
    for (i, q) in got.iter().enumerate() {
        assert!(
            !q["body"]["messages"]
                .to_string()
                .contains("The date has changed"),
            "request {} carries the date notice",
            i + 1
        );
    }
    assert_eq!(
        claude::parallel_results_unordered(&got[1]["body"]["messages"]),
        claude::parallel_results_unordered(&orig[3]["body"]["messages"]),
        "request 2 (after a live step) equals the original too (live parallel results in completion order)"
    );
    // the notice really was there and was removed by the bridge (journaled)
    let export = String::from_utf8(
        Command::new(env!("CARGO_BIN_EXE_pvisor"))
            .args(["journal", "export"])
            .arg(&state)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        export.contains("claude:date_change_notice"),
        "the bridge journal shows no removed date notice: the clock was not faked?"
    );
}
