//! Running the REAL Codex CLI (pinned 0.149.0) against the scripted model server, and
//! recording its sessions as fixtures under `tests/fixtures/codex/recorded/<name>/`.
//!
//! Inputs of a recording: `script.json` (with `${CWD}` placeholders), `task.json`
//! (`{"prompt": …}`), `workspace-before/`. Outputs: `rollout.jsonl` (the native session),
//! `requests.jsonl` (every request Codex sent), `stdout.jsonl`, `stderr.txt`,
//! `workspace-after/`, `meta.json` (cwd, session id, command, version, date).
//! Every recording runs at the fixed paths `/tmp/pvisor-rec-codex-<name>/{home,work}`
//! (Codex re-sends its `<environment_context>` when the cwd differs, so replays must use the
//! same path), under the lock `/tmp/pvisor-rec-codex-<name>.lock`.
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

pub const API_KEY: &str = "pvisor-codex-key";

pub use recording::{copy_dir, main_requests, project_root, selected};

pub fn recorded_dir() -> PathBuf {
    project_root().join("tests/fixtures/codex/recorded")
}

/// Names of the committed recordings.
pub fn recorded_names() -> Vec<String> {
    recording::names(&recorded_dir())
}

pub fn fixed_root(name: &str) -> PathBuf {
    recording::fixed_root("codex", name)
}

pub fn fixed_work(name: &str) -> PathBuf {
    fixed_root(name).join("work")
}

pub fn lock(name: &str) -> std::fs::File {
    recording::lock("codex", name)
}

/// The pinned CLI, installed once per test process.
pub fn codex_entrypoint() -> PathBuf {
    static ENTRY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ENTRY.get_or_init(|| recording::install("codex")).clone()
}

/// Reset `work` to the recording's `workspace-before/`.
pub fn reset_work(name: &str) {
    let work = fixed_work(name);
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    copy_dir(&recorded_dir().join(name).join("workspace-before"), &work);
}

pub fn script(name: &str) -> Script {
    Script::from_path(recorded_dir().join(name).join("script.json"))
        .unwrap()
        .substitute(&[("CWD", &fixed_work(name).to_string_lossy())])
}

fn newest_rollout(dir: &Path) -> Option<PathBuf> {
    let mut found = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("rollout-")
            {
                found.push(p);
            }
        }
    }
    found.sort();
    found.pop()
}

/// Record `name` afresh at its fixed paths and write the outputs into its fixture folder.
pub async fn record(name: &str) {
    let _l = lock(name);
    let dir = recorded_dir().join(name);
    let task: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("task.json")).unwrap()).unwrap();
    let prompt = task["prompt"].as_str().unwrap().to_string();
    let root = fixed_root(name);
    let home = root.join("home");
    let work = fixed_work(name);
    let _ = std::fs::remove_dir_all(&home);
    reset_work(name);
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
    let codex_home = home.join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    // `model` of task.json: `gpt-5.6-sol` records a code-mode session.
    let model = task["model"].as_str().unwrap_or("gpt-5.5").to_string();
    let config = "model = \"<MODEL>\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\nname = \"Fake\"\n\
                  base_url = \"<BASE_URL>/v1\"\nwire_api = \"responses\"\nenv_key = \"FAKE_API_KEY\"\n";
    std::fs::write(
        codex_home.join("config.toml"),
        config
            .replace("<BASE_URL>", &server.base_url())
            .replace("<MODEL>", &model),
    )
    .unwrap();
    let args = [
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        prompt.as_str(),
    ];
    let child = tokio::process::Command::new(codex_entrypoint())
        .args(args)
        .current_dir(&work)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &home)
        .env("SHELL", "/bin/bash")
        .env("CODEX_HOME", &codex_home)
        .env("FAKE_API_KEY", API_KEY)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
        .await
        .expect("codex timed out")
        .unwrap();
    let requests: Vec<LoggedRequest> = server.requests();
    server.shutdown().await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "codex failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let thread_id = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "thread.started")
        .and_then(|v| v["thread_id"].as_str().map(String::from))
        .expect("thread.started");
    let rollout = newest_rollout(&codex_home.join("sessions")).expect("a rollout");
    assert!(rollout.to_string_lossy().contains(&thread_id));
    std::fs::copy(&rollout, dir.join("rollout.jsonl")).unwrap();
    std::fs::write(dir.join("stdout.jsonl"), &stdout).unwrap();
    std::fs::write(dir.join("stderr.txt"), &out.stderr).unwrap();
    let after = dir.join("workspace-after");
    let _ = std::fs::remove_dir_all(&after);
    copy_dir(&work, &after);
    let exhausted = requests.iter().any(|r| r.exhausted);
    let meta = json!({
        "agent": "codex",
        "version": "codex-cli 0.149.0",
        "model": model,
        "session_id": thread_id,
        "cwd": work,
        "codex_home": codex_home,
        "native_path": rollout,
        "command": "codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox <prompt>",
        "prompt": prompt,
        "env": "env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=<root>/home SHELL=/bin/bash CODEX_HOME=<root>/home/.codex FAKE_API_KEY=…",
        "config_toml": config,
        "main_requests": requests.iter().filter(|r| r.kind == pvisor::scripted::RequestKind::Main).count(),
        "script_exhausted": exhausted,
        "recorded_with": format!("PVISOR_RECORD={name} cargo test --test e2e_codex_record record_fixtures -- --ignored --nocapture"),
    });
    std::fs::write(
        dir.join("meta.json"),
        serde_json::to_string_pretty(&meta).unwrap() + "\n",
    )
    .unwrap();
    eprintln!(
        "recorded {name}: session {thread_id}, {} requests",
        requests.len()
    );
}

/// The request body without its declared dynamic fields (the adapter's recorder says which).
pub fn masked(body: &Value) -> Value {
    pvisor::adapters::codex::record::masked(body)
}
