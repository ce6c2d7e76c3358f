//! Running the REAL Pi CLI (pinned 0.83.0, with the Node 22 `pvisor agents install`
//! puts beside it) against the scripted model server, and recording its sessions as
//! fixtures under `tests/fixtures/pi/recorded/<name>/`.
//!
//! Inputs of a recording: `script.json` (with `${CWD}` placeholders), `task.json`
//! (`{"prompt": …}`), `workspace-before/`. Outputs: `session.jsonl` (Pi's v3 session file),
//! `stdout.jsonl` (the `--mode json` events), `requests.jsonl` (every request Pi sent),
//! `workspace-after/`, `meta.json`.
//! Every recording runs at the fixed paths `/tmp/pvisor-rec-pi-<name>/{home,work}` under the
//! lock `/tmp/pvisor-rec-pi-<name>.lock`; replays of it run at that path in a private mount
//! namespace (`tests/support/ns.rs`).
#![allow(dead_code, unused_imports)]

// Each agent support includes the shared part (a test crate may include several agents).
#[allow(clippy::duplicate_mod)]
#[path = "recording.rs"]
mod recording;

use pvisor::scripted::{start, LoggedRequest, Script, ServerOptions};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

pub const API_KEY: &str = "pvisor-pi-key";

pub use recording::{copy_dir, main_requests, project_root, selected, walk};

pub use recording::agents_dir;

pub fn genuine_dir() -> PathBuf {
    project_root().join("tests/fixtures/pi/genuine")
}

pub fn recorded_dir() -> PathBuf {
    project_root().join("tests/fixtures/pi/recorded")
}

/// Names of the committed recordings.
pub fn recorded_names() -> Vec<String> {
    recording::names(&recorded_dir())
}

pub fn fixed_root(name: &str) -> PathBuf {
    recording::fixed_root("pi", name)
}

pub fn fixed_work(name: &str) -> PathBuf {
    fixed_root(name).join("work")
}

pub fn lock(name: &str) -> std::fs::File {
    recording::lock("pi", name)
}

/// The pinned CLI, installed once per test process.
pub fn pi_entrypoint() -> PathBuf {
    static ENTRY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ENTRY.get_or_init(|| recording::install("pi-agent")).clone()
}

pub fn script(name: &str) -> Script {
    Script::from_path(recorded_dir().join(name).join("script.json"))
        .unwrap()
        .substitute(&[("CWD", &fixed_work(name).to_string_lossy())])
}

/// Record `name` with the real Pi.
pub async fn record(name: &str) {
    let _l = lock(name);
    let dir = recorded_dir().join(name);
    let root = fixed_root(name);
    let _ = std::fs::remove_dir_all(&root);
    let (home, work) = (root.join("home"), fixed_work(name));
    std::fs::create_dir_all(home.join(".pi/agent")).unwrap();
    copy_dir(&dir.join("workspace-before"), &work);
    let task: Value =
        serde_json::from_slice(&std::fs::read(dir.join("task.json")).unwrap()).unwrap();
    let prompt = task["prompt"].as_str().unwrap().to_string();
    let log = dir.join("requests.jsonl");
    let _ = std::fs::remove_file(&log);
    let server = start(
        script(name),
        ServerOptions {
            log_path: Some(log.clone()),
            api_key: Some(API_KEY.into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    // The command `pvisor certify` records with (models.json pointing at the server).
    let entry = pi_entrypoint();
    let base_url = server.base_url();
    let req = pvisor::kit::recorder::RecordRequest {
        entrypoint: &entry,
        home: &home,
        work: &work,
        base_url: &base_url,
        api_key: API_KEY,
        prompt: &prompt,
    };
    let mut cmd =
        pvisor::kit::recorder::Recorder::command(&pvisor::adapters::pi::record::PiRecorder, &req)
            .unwrap();
    let stdout_path = root.join("stdout.jsonl");
    cmd.stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(Stdio::piped());
    let child = tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
        .await
        .expect("pi timed out")
        .unwrap();
    let requests: Vec<LoggedRequest> = server.requests();
    server.shutdown().await;
    let stdout = std::fs::read_to_string(&stdout_path).unwrap();
    assert!(
        out.status.success(),
        "pi failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let header: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    let session_id = header["id"].as_str().unwrap().to_string();
    let sessions = home.join(".pi/agent/sessions");
    let file = walk(&sessions)
        .into_iter()
        .find(|p| {
            p.to_string_lossy()
                .ends_with(&format!("_{session_id}.jsonl"))
        })
        .expect("Pi wrote its session file");
    std::fs::copy(&file, dir.join("session.jsonl")).unwrap();
    std::fs::write(dir.join("stdout.jsonl"), &stdout).unwrap();
    let after = dir.join("workspace-after");
    let _ = std::fs::remove_dir_all(&after);
    copy_dir(&work, &after);
    let exhausted = requests.iter().any(|r| r.exhausted);
    let meta = json!({
        "agent": "pi-agent",
        "version": "0.83.0",
        "session_id": session_id,
        "cwd": work,
        "home": home,
        "native_path": file,
        "command": "pi --provider anthropic --model claude-sonnet-4-5 --mode json -p <prompt>",
        "prompt": prompt,
        "main_requests": requests.iter().filter(|r| r.kind == pvisor::scripted::RequestKind::Main).count(),
        "script_exhausted": exhausted,
        "recorded_on": time::OffsetDateTime::now_utc().date().to_string(),
        "recorded_with": format!("PVISOR_RECORD={name} cargo test --test e2e_pi_record record_fixtures -- --ignored --nocapture"),
    });
    std::fs::write(
        dir.join("meta.json"),
        serde_json::to_string_pretty(&meta).unwrap() + "\n",
    )
    .unwrap();
    eprintln!(
        "recorded {name}: session {session_id}, {} requests",
        requests.len()
    );
}

/// The request body without its declared dynamic fields (the adapter's recorder's mask).
pub fn masked(body: &Value) -> Value {
    pvisor::adapters::pi::record::masked(body)
}
