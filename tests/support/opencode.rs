//! Running the REAL OpenCode CLI (pinned 1.17.11) against the scripted model server, and
//! recording its sessions as fixtures under `tests/fixtures/opencode/recorded/<name>/`.
//!
//! Inputs of a recording: `script.json` (with `${CWD}` placeholders), `task.json`
//! (`{"prompt": …}`), `workspace-before/` (an `opencode.json` naming the provider `fake` is
//! added). Outputs: `export.json` (`opencode export`), `opencode.db` (the store, WAL
//! folded in), `stdout.jsonl` (the `--format=json` events), `requests.jsonl` (every request
//! OpenCode sent), `workspace-after/`, `meta.json`.
//! Every recording runs at the fixed paths `/tmp/pvisor-rec-opencode-<name>/{home,work}`
//! under the lock `/tmp/pvisor-rec-opencode-<name>.lock`; replays of it run at that path in
//! a private mount namespace (`tests/support/ns.rs`).
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

pub const API_KEY: &str = "pvisor-opencode-key";

pub use recording::{copy_dir, main_requests, project_root, selected};

pub use recording::agents_dir;

pub fn genuine_dir() -> PathBuf {
    project_root().join("tests/fixtures/opencode/genuine")
}

pub fn recorded_dir() -> PathBuf {
    project_root().join("tests/fixtures/opencode/recorded")
}

/// Names of the committed recordings.
pub fn recorded_names() -> Vec<String> {
    recording::names(&recorded_dir())
}

pub fn fixed_root(name: &str) -> PathBuf {
    recording::fixed_root("opencode", name)
}

pub fn fixed_work(name: &str) -> PathBuf {
    fixed_root(name).join("work")
}

pub fn lock(name: &str) -> std::fs::File {
    recording::lock("opencode", name)
}

/// The pinned CLI, installed once per test process.
pub fn opencode_entrypoint() -> PathBuf {
    static ENTRY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ENTRY.get_or_init(|| recording::install("opencode")).clone()
}

/// The directory of the installed ripgrep (on the recording's PATH).
pub fn helper_bin() -> PathBuf {
    opencode_entrypoint()
        .ancestors()
        .nth(3)
        .unwrap()
        .join("bin")
}

/// The project config every recording's workspace holds: the scripted model as the
/// OpenAI-compatible provider `fake` (its URL is the recording server's; continuations
/// point it at the bridge).
pub fn opencode_json(base_url: &str) -> String {
    serde_json::to_string_pretty(&pvisor::adapters::opencode::record::project_config(
        base_url, API_KEY,
    ))
    .unwrap()
        + "\n"
}

pub fn script(name: &str) -> Script {
    Script::from_path(recorded_dir().join(name).join("script.json"))
        .unwrap()
        .substitute(&[("CWD", &fixed_work(name).to_string_lossy())])
}

/// OpenCode's environment for `home`, offline.
pub fn env_for(home: &Path) -> Vec<(String, String)> {
    let h = |p: &str| home.join(p).display().to_string();
    vec![
        (
            "PATH".into(),
            format!("{}:/usr/local/bin:/usr/bin:/bin", helper_bin().display()),
        ),
        ("HOME".into(), home.display().to_string()),
        ("XDG_DATA_HOME".into(), h(".local/share")),
        ("XDG_CONFIG_HOME".into(), h(".config")),
        ("XDG_CACHE_HOME".into(), h(".cache")),
        ("XDG_STATE_HOME".into(), h(".local/state")),
        ("SHELL".into(), "/bin/bash".into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("TZ".into(), "UTC".into()),
        ("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()),
        ("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()),
        ("OPENCODE_DISABLE_LSP_DOWNLOAD".into(), "1".into()),
        ("OPENCODE_DISABLE_SHARE".into(), "1".into()),
    ]
}

/// Seed OpenCode's config dir so its background plugin install finds nothing to do.
pub fn seed_config(home: &Path) {
    pvisor::adapters::opencode::rebuild::seed_config_dir(home).unwrap();
}

/// Record `name` with the real OpenCode.
pub async fn record(name: &str) {
    let _l = lock(name);
    let dir = recorded_dir().join(name);
    let root = fixed_root(name);
    let _ = std::fs::remove_dir_all(&root);
    let (home, work) = (root.join("home"), fixed_work(name));
    std::fs::create_dir_all(&home).unwrap();
    seed_config(&home);
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
    std::fs::write(
        work.join("opencode.json"),
        opencode_json(&server.base_url()),
    )
    .unwrap();
    let stdout_path = root.join("stdout.jsonl");
    let child = tokio::process::Command::new(opencode_entrypoint())
        .args([
            "run",
            "--format=json",
            "--dangerously-skip-permissions",
            &prompt,
        ])
        .current_dir(&work)
        .env_clear()
        .envs(env_for(&home))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
        .await
        .expect("opencode timed out")
        .unwrap();
    let requests: Vec<LoggedRequest> = server.requests();
    server.shutdown().await;
    let stdout = std::fs::read_to_string(&stdout_path).unwrap();
    assert!(
        out.status.success(),
        "opencode failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let session_id = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| v["sessionID"].as_str().map(String::from))
        .expect("a sessionID in the events");
    let export = std::process::Command::new(opencode_entrypoint())
        .args(["export", &session_id])
        .current_dir(&work)
        .env_clear()
        .envs(env_for(&home))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        export.status.success(),
        "{}",
        String::from_utf8_lossy(&export.stderr)
    );
    std::fs::write(dir.join("export.json"), &export.stdout).unwrap();
    // The store with its WAL folded in.
    let db = home.join(".local/share/opencode/opencode.db");
    let _ = std::fs::remove_file(dir.join("opencode.db"));
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "VACUUM INTO ?1",
            [dir.join("opencode.db").display().to_string()],
        )
        .unwrap();
    std::fs::write(dir.join("stdout.jsonl"), &stdout).unwrap();
    let after = dir.join("workspace-after");
    let _ = std::fs::remove_dir_all(&after);
    copy_dir(&work, &after);
    let exhausted = requests.iter().any(|r| r.exhausted);
    let meta = json!({
        "agent": "opencode",
        "version": "1.17.11",
        "session_id": session_id,
        "cwd": work,
        "home": home,
        "command": "opencode run --format=json --dangerously-skip-permissions <prompt>",
        "prompt": prompt,
        "main_requests": requests.iter().filter(|r| r.kind == pvisor::scripted::RequestKind::Main).count(),
        "script_exhausted": exhausted,
        "recorded_on": time::OffsetDateTime::now_utc().date().to_string(),
        "recorded_with": format!("PVISOR_RECORD={name} cargo test --test e2e_opencode_record record_fixtures -- --ignored --nocapture"),
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
    pvisor::adapters::opencode::record::masked(body)
}
