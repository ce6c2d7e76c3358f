//! Running the REAL OpenHands SDK (openhands-sdk 1.34.0 in the venv `pvisor agents install
//! openhands` makes) against the scripted model server, and recording conversations as
//! fixtures under `tests/fixtures/openhands/recorded/<name>/`.
//!
//! Inputs of a recording: `script.json` (`${CWD}` stands for the workspace), `task.json`
//! (`{"prompt": …, "resume_prompt": …}`), `workspace-before/`. The driver
//! (`src/adapters/openhands/record.py`) runs the SDK's default CLI agent with the prompt, then loads the
//! stored conversation again and continues it with the resume prompt, as the genuine fixture
//! was made. Outputs: `native-run1/` (the store after run 1: the trajectory the tests replay),
//! `native-final/`, `requests.jsonl`, `workspace-after/`, `meta.json`. Every recording runs at
//! the fixed paths `/tmp/pvisor-rec-openhands-<name>/{home,work,persist}` under its lock;
//! replays run at that path in a private mount namespace (`tests/support/ns.rs`).
#![allow(dead_code, unused_imports)]

#[allow(clippy::duplicate_mod)]
#[path = "recording.rs"]
mod recording;

use pvisor::scripted::{start, LoggedRequest, Script, ServerOptions};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

pub const API_KEY: &str = "pvisor-openhands-key";

pub use recording::{copy_dir, main_requests, project_root, selected, walk};

pub fn fixtures_dir() -> PathBuf {
    project_root().join("tests/fixtures/openhands")
}

pub fn recorded_dir() -> PathBuf {
    fixtures_dir().join("recorded")
}

/// Names of the committed recordings.
pub fn recorded_names() -> Vec<String> {
    recording::names(&recorded_dir())
}

pub fn fixed_root(name: &str) -> PathBuf {
    recording::fixed_root("openhands", name)
}

pub fn fixed_work(name: &str) -> PathBuf {
    fixed_root(name).join("work")
}

/// The Python of the SDK's venv, installed once per test process.
pub fn openhands() -> PathBuf {
    static ENTRY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ENTRY
        .get_or_init(|| recording::install("openhands"))
        .clone()
}

/// A request body without its declared dynamic fact (the adapter's recorder's mask).
pub fn masked(body: &Value) -> Value {
    pvisor::adapters::openhands::record::masked(body)
}

/// OpenHands goes on after a reply that calls tools other than `finish` (a text reply or a
/// `finish` call ends the run).
pub fn goes_on(turn: Option<&Value>) -> bool {
    turn.and_then(|t| t["tool_calls"].as_array())
        .is_some_and(|calls| !calls.is_empty() && calls.iter().all(|c| c["name"] != "finish"))
}

/// The conversation folder below a persistence dir (its only child).
pub fn conversation_in(persist: &Path) -> PathBuf {
    std::fs::read_dir(persist)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("base_state.json").is_file())
        .expect("a stored conversation")
}

async fn drive(entry: &Path, home: &Path, config: Value) -> Value {
    let script = project_root().join("src/adapters/openhands/record.py");
    let child = tokio::process::Command::new(entry)
        .arg(&script)
        .current_dir(config["work"].as_str().unwrap())
        .env_clear()
        .envs([
            ("PATH", "/usr/local/bin:/usr/bin:/bin".to_string()),
            ("HOME", home.display().to_string()),
            ("TMPDIR", home.join("tmp").display().to_string()),
            ("TMUX_TMPDIR", home.join("tmux").display().to_string()),
            ("LANG", "C.UTF-8".into()),
            ("TZ", "UTC".into()),
            ("PVISOR_RECORD_OPENHANDS", config.to_string()),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
        .await
        .expect("OpenHands timed out")
        .unwrap();
    let _ = std::process::Command::new("tmux")
        .args(["-L", "openhands", "kill-server"])
        .env("TMUX_TMPDIR", home.join("tmux"))
        .output();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok());
    match last {
        Some(v) if out.status.success() => v,
        _ => panic!(
            "OpenHands failed: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// Record `name` with the real SDK.
pub async fn record(name: &str) {
    let _l = recording::lock("openhands", name);
    let dir = recorded_dir().join(name);
    let root = fixed_root(name);
    let _ = std::fs::remove_dir_all(&root);
    let (home, work, persist) = (root.join("home"), fixed_work(name), root.join("persist"));
    for d in [&home, &home.join("tmp"), &home.join("tmux"), &persist] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::create_dir_all(&work).unwrap();
    copy_dir(&dir.join("workspace-before"), &work);
    let task: Value =
        serde_json::from_slice(&std::fs::read(dir.join("task.json")).unwrap()).unwrap();
    let entry = openhands();
    let log = dir.join("requests.jsonl");
    let _ = std::fs::remove_file(&log);
    let script = Script::from_path(dir.join("script.json"))
        .unwrap()
        .substitute(&[("CWD", &work.display().to_string())]);
    let server = start(
        script,
        ServerOptions {
            log_path: Some(log.clone()),
            api_key: Some(API_KEY.into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let base = json!({
        "base_url": format!("{}/v1", server.base_url()),
        "api_key": API_KEY,
        "work": work,
        "persist": persist,
    });
    let mut run1 = base.clone();
    run1["prompt"] = task["prompt"].clone();
    let first = drive(&entry, &home, run1).await;
    let conv = conversation_in(&persist);
    let run1 = dir.join("native-run1");
    let _ = std::fs::remove_dir_all(&run1);
    copy_dir(&conv, &run1.join(conv.file_name().unwrap()));
    let mut resume = base.clone();
    resume["prompt"] = task["resume_prompt"].clone();
    resume["conversation_id"] = first["conversation_id"].clone();
    let second = drive(&entry, &home, resume).await;
    let requests: Vec<LoggedRequest> = server.requests();
    server.shutdown().await;
    let to = dir.join("native-final");
    let _ = std::fs::remove_dir_all(&to);
    copy_dir(&conv, &to.join(conv.file_name().unwrap()));
    let after = dir.join("workspace-after");
    let _ = std::fs::remove_dir_all(&after);
    copy_dir(&work, &after);
    let meta = json!({
        "agent": "openhands",
        "version": pvisor::adapters::openhands::PINNED,
        "cwd": work,
        "home": home,
        "conversation_id": first["conversation_id"],
        "run1_status": first["execution_status"],
        "resume_status": second["execution_status"],
        "prompt": task["prompt"],
        "resume_prompt": task["resume_prompt"],
        "main_requests": requests.iter().filter(|r| r.kind == pvisor::scripted::RequestKind::Main).count(),
        "script_exhausted": requests.iter().any(|r| r.exhausted),
        "recorded_on": time::OffsetDateTime::now_utc().date().to_string(),
        "recorded_with": format!("PVISOR_RECORD={name} cargo test --test e2e_openhands_record record_fixtures -- --ignored --nocapture"),
    });
    std::fs::write(
        dir.join("meta.json"),
        serde_json::to_string_pretty(&meta).unwrap() + "\n",
    )
    .unwrap();
    eprintln!(
        "recorded {name} with OpenHands: {} requests",
        requests.len()
    );
}
