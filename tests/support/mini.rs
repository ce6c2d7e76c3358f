//! Running the REAL mini-swe-agent (2.4.6 and 1.17.5, each in its own virtual environment
//! installed by `pvisor agents install mini-swe-agent@<version>`) against the scripted model
//! server, and recording its trajectories as fixtures under
//! `tests/fixtures/mini-swe-agent/recorded/<name>/`.
//!
//! Inputs of a recording: `script.json`, `task.json` (`{"prompt": …, "version": …}`, 2.x
//! also `"config"`: a builtin config, `mini.yaml` by default, and `"model_class"`),
//! `workspace-before/`. Outputs: `mini.traj.json` (the `-o` trajectory), `requests.jsonl`
//! (every request mini sent), `workspace-after/`, `meta.json`.
//! Every recording runs at the fixed paths `/tmp/pvisor-rec-mini-<name>/{home,work}` under
//! the lock `/tmp/pvisor-rec-mini-<name>.lock`; replays of it run at that path in a private
//! mount namespace (`tests/support/ns.rs`). Commands time out after 2 s there (mini's
//! `environment.timeout`), so that the timeout turn is quick.
#![allow(dead_code, unused_imports)]

#[allow(clippy::duplicate_mod)]
#[path = "recording.rs"]
mod recording;

use pvisor::scripted::{start, LoggedRequest, Script, ServerOptions};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

pub const API_KEY: &str = "pvisor-mini-key";
pub const MODEL: &str = "openai/fake-model";

pub use recording::{copy_dir, main_requests, project_root, selected, walk};

pub fn fixtures_dir() -> PathBuf {
    project_root().join("tests/fixtures/mini-swe-agent")
}

pub fn recorded_dir() -> PathBuf {
    fixtures_dir().join("recorded")
}

/// Names of the committed recordings.
pub fn recorded_names() -> Vec<String> {
    recording::names(&recorded_dir())
}

pub fn fixed_root(name: &str) -> PathBuf {
    recording::fixed_root("mini", name)
}

pub fn fixed_work(name: &str) -> PathBuf {
    fixed_root(name).join("work")
}

pub fn lock(name: &str) -> std::fs::File {
    recording::lock("mini", name)
}

/// The real `mini` of `version`, installed once per test process and version.
pub fn mini(version: &str) -> PathBuf {
    static ENTRIES: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut e = ENTRIES.lock().unwrap();
    if let Some((_, p)) = e.iter().find(|(v, _)| v == version) {
        return p.clone();
    }
    let p = recording::install(&format!("mini-swe-agent@{version}"));
    e.push((version.to_string(), p.clone()));
    p
}

pub fn mini_246() -> PathBuf {
    mini("2.4.6")
}

pub fn mini_1175() -> PathBuf {
    mini("1.17.5")
}

/// The version a recording (or any trajectory) was made with.
pub fn version_of(trajectory: &Path) -> String {
    let v: Value = serde_json::from_slice(&std::fs::read(trajectory).unwrap()).unwrap();
    v["info"]["mini_version"].as_str().unwrap().to_string()
}

/// mini goes on after every model reply but the submitting one (a format error, a text-only
/// reply and the server's exhausted turn are model calls after which mini asks again).
pub fn goes_on(turn: Option<&Value>) -> bool {
    !turn.is_some_and(|t| {
        t.to_string()
            .contains("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
    })
}

/// mini's environment for a run in `home` against `base_url`.
pub fn env_for(home: &Path, base_url: &str) -> Vec<(String, String)> {
    vec![
        ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
        ("HOME".into(), home.display().to_string()),
        ("LANG".into(), "C.UTF-8".into()),
        ("TZ".into(), "UTC".into()),
        ("OPENAI_BASE_URL".into(), format!("{base_url}/v1")),
        ("OPENAI_API_KEY".into(), API_KEY.into()),
        ("LITELLM_LOCAL_MODEL_COST_MAP".into(), "True".into()),
        ("MSWEA_CONFIGURED".into(), "true".into()),
        (
            "LITELLM_MODEL_REGISTRY_PATH".into(),
            fixtures_dir()
                .join("litellm-registry.json")
                .display()
                .to_string(),
        ),
    ]
}

/// The config of a 1.x recording: the package's `mini.yaml` with a 2 s command timeout
/// (1.x takes one config file; 2.x takes `-c mini.yaml -c environment.timeout=2`).
fn v1_config(entry: &Path, out: &Path) {
    let venv = entry.parent().unwrap().parent().unwrap();
    let yaml = walk(&venv.join("lib"))
        .into_iter()
        .find(|p| p.ends_with("minisweagent/config/mini.yaml"))
        .expect("mini.yaml in the 1.x package");
    let text = std::fs::read_to_string(yaml).unwrap();
    assert!(text.contains("\nenvironment:\n"));
    std::fs::write(
        out,
        text.replace("\nenvironment:\n", "\nenvironment:\n  timeout: 2\n"),
    )
    .unwrap();
}

/// Record `name` with the real mini of the version `task.json` names.
pub async fn record(name: &str) {
    let _l = lock(name);
    let dir = recorded_dir().join(name);
    let root = fixed_root(name);
    let _ = std::fs::remove_dir_all(&root);
    let (home, work) = (root.join("home"), fixed_work(name));
    std::fs::create_dir_all(&home).unwrap();
    copy_dir(&dir.join("workspace-before"), &work);
    let task: Value =
        serde_json::from_slice(&std::fs::read(dir.join("task.json")).unwrap()).unwrap();
    let prompt = task["prompt"].as_str().unwrap().to_string();
    let version = task["version"].as_str().unwrap().to_string();
    let entry = mini(&version);
    let log = dir.join("requests.jsonl");
    let _ = std::fs::remove_file(&log);
    let script = Script::from_path(dir.join("script.json")).unwrap();
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
    let traj = root.join("mini.traj.json");
    let mut args: Vec<String> = ["-y", "--exit-immediately", "-m", MODEL, "-t", &prompt, "-o"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(traj.display().to_string());
    if version.starts_with("1.") {
        let cfg = root.join("config.yaml");
        v1_config(&entry, &cfg);
        args.extend(["-c".into(), cfg.display().to_string()]);
    } else {
        let config = task["config"].as_str().unwrap_or("mini.yaml");
        args.extend(["-c", config, "-c", "environment.timeout=2"].map(String::from));
        if let Some(class) = task["model_class"].as_str() {
            args.extend(["--model-class".to_string(), class.to_string()]);
        }
    }
    let child = tokio::process::Command::new(&entry)
        .args(&args)
        .current_dir(&work)
        .env_clear()
        .envs(env_for(&home, &server.base_url()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
        .await
        .expect("mini timed out")
        .unwrap();
    let requests: Vec<LoggedRequest> = server.requests();
    server.shutdown().await;
    assert!(
        out.status.success() && traj.is_file(),
        "mini failed: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::copy(&traj, dir.join("mini.traj.json")).unwrap();
    let after = dir.join("workspace-after");
    let _ = std::fs::remove_dir_all(&after);
    copy_dir(&work, &after);
    let t: Value = serde_json::from_slice(&std::fs::read(&traj).unwrap()).unwrap();
    let meta = json!({
        "agent": "mini-swe-agent",
        "version": version,
        "trajectory_format": t["trajectory_format"],
        "exit_status": t["info"]["exit_status"],
        "cwd": work,
        "home": home,
        "command": format!("mini {}", args.iter().map(|a| if a == &prompt { "<prompt>".to_string() } else { a.clone() }).collect::<Vec<_>>().join(" ")),
        "prompt": prompt,
        "main_requests": requests.iter().filter(|r| r.kind == pvisor::scripted::RequestKind::Main).count(),
        "script_exhausted": requests.iter().any(|r| r.exhausted),
        "recorded_on": time::OffsetDateTime::now_utc().date().to_string(),
        "recorded_with": format!("PVISOR_RECORD={name} cargo test --test e2e_mini_record record_fixtures -- --ignored --nocapture"),
    });
    std::fs::write(
        dir.join("meta.json"),
        serde_json::to_string_pretty(&meta).unwrap() + "\n",
    )
    .unwrap();
    eprintln!(
        "recorded {name} with mini {version}: {} requests",
        requests.len()
    );
}

/// mini's requests carry no per-run field: nothing is masked.
pub fn masked(body: &Value) -> Value {
    body.clone()
}
