//! What every agent's recorder shares (`tests/support/<agent>.rs` includes it): the pinned CLI
//! installed once per test process, the committed recordings, their fixed paths and locks,
//! and request logs.
#![allow(dead_code)]

use fs2::FileExt;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;

pub fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn agents_dir() -> PathBuf {
    project_root().join(".cache/agents")
}

/// `pvisor agents install <agent>` into the project's `.cache/agents` (installed when missing;
/// never skipped): the entrypoint.
pub fn install(agent: &str) -> PathBuf {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args(["agents", "install", agent])
        .env("PVISOR_AGENTS_DIR", agents_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run pvisor agents install {agent}: {e}"));
    assert!(
        out.status.success(),
        "installing the pinned {agent} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap()
            .trim(),
    )
}

/// Names of the committed recordings in `dir` (folders with a `script.json`).
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("script.json").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `/tmp/pvisor-rec-<tag>-<name>`: where recording `name` ran (and replays of it run, in a
/// private mount namespace).
pub fn fixed_root(tag: &str, name: &str) -> PathBuf {
    PathBuf::from(format!("/tmp/pvisor-rec-{tag}-{name}"))
}

/// Exclusive lock on the fixed paths of a recording.
pub fn lock(tag: &str, name: &str) -> std::fs::File {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(format!("/tmp/pvisor-rec-{tag}-{name}.lock"))
        .unwrap();
    f.lock_exclusive().unwrap();
    f
}

/// A copy of `from` (missing: nothing) into `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// The main requests of a scripted-model (or genuine) request log.
pub fn main_requests(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "main")
        .collect()
}

/// The recordings `PVISOR_RECORD` selects (`1` = all, else a comma-separated list of names);
/// panics with the usage when it is unset or selects nothing.
pub fn selected(all: Vec<String>) -> Vec<String> {
    let Ok(which) = std::env::var("PVISOR_RECORD") else {
        panic!("set PVISOR_RECORD=1 (all) or PVISOR_RECORD=name,name to re-record");
    };
    let names: Vec<String> = all
        .into_iter()
        .filter(|n| which == "1" || which.split(',').any(|w| w == n))
        .collect();
    assert!(
        !names.is_empty(),
        "no recording matches PVISOR_RECORD={which}"
    );
    names
}

/// Every file below `dir` (none when it does not exist).
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
