//! Running the REAL Claude Code CLI against the scripted model server, and recording its
//! sessions as fixtures.
#![allow(dead_code)]

use pvisor::scripted::{start, LoggedRequest, RequestKind, Script, ServerOptions};
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The project root (the crate's manifest dir).
pub fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where the recorded sessions live.
pub fn recorded_dir() -> PathBuf {
    project_root().join("tests/fixtures/claude/recorded")
}

/// The API key the tests give both claude and the server (the server enforces it).
pub const API_KEY: &str = "pvisor-test-key";

/// Install (or find) the pinned Claude Code via `pvisor agents install claude-code` and
/// return its entrypoint. Panics, with the installer's output, when that fails: the e2e tests
/// never skip.
pub fn claude_entrypoint() -> PathBuf {
    static ENTRY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ENTRY.get_or_init(|| install("claude-code")).clone()
}

/// The entrypoint of Claude Code `version` (the pinned one when `None`), installed by
/// `pvisor agents install claude-code@<version>` when missing.
pub fn claude_entrypoint_of(version: Option<&str>) -> PathBuf {
    match version {
        None => claude_entrypoint(),
        Some(v) => {
            static ENTRIES: std::sync::Mutex<Vec<(String, PathBuf)>> =
                std::sync::Mutex::new(Vec::new());
            let mut m = ENTRIES.lock().unwrap();
            if let Some((_, p)) = m.iter().find(|(k, _)| k == v) {
                return p.clone();
            }
            let p = install(&format!("claude-code@{v}"));
            m.push((v.to_string(), p.clone()));
            p
        }
    }
}

fn install(spec: &str) -> PathBuf {
    install_agent(spec)
}

/// `pvisor agents install <spec>` into the project's `.cache/agents` (never skipped: a failed
/// install fails the test with the installer's output).
pub fn install_agent(spec: &str) -> PathBuf {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args(["agents", "install", spec])
        .env("PVISOR_AGENTS_DIR", project_root().join(".cache/agents"))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run pvisor agents install {spec}: {e}"));
    assert!(
        out.status.success(),
        "pvisor agents install {spec} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let entry = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
    assert!(
        entry.is_file(),
        "the installer printed no usable entrypoint: {stdout:?}"
    );
    entry
}

/// `cwd` as Claude Code names its project folder: every non-alphanumeric character -> `-`.
pub fn escaped_cwd(cwd: &Path) -> String {
    cwd.to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// What a recorded task asks: prompts and extra flags.
#[derive(Debug, Clone, Deserialize)]
pub struct Task {
    pub prompt: String,
    #[serde(default)]
    pub resume_prompt: Option<String>,
    /// Extra claude flags (e.g. `["--allowedTools", "Glob", "Grep"]`).
    #[serde(default)]
    pub args: Vec<String>,
    /// Main requests expected in run 1 / in the resume.
    pub run1_turns: usize,
    #[serde(default)]
    pub resume_turns: usize,
    /// The Claude Code version to record with (default: the pinned one).
    #[serde(default)]
    pub agent_version: Option<String>,
}

impl Task {
    pub fn load(dir: &Path) -> Task {
        let p = dir.join("task.json");
        serde_json::from_str(
            &std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }
}

/// The environment Claude Code gets (nothing else is inherited).
pub fn claude_env(home: &Path, base_url: &str) -> Vec<(String, String)> {
    [
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("HOME", &home.to_string_lossy()),
        ("SHELL", "/bin/bash"),
        ("LANG", "C.UTF-8"),
        ("TZ", "UTC"),
        // Required as root, otherwise --dangerously-skip-permissions is refused.
        ("IS_SANDBOX", "1"),
        ("ANTHROPIC_BASE_URL", base_url),
        ("ANTHROPIC_API_KEY", API_KEY),
        ("DISABLE_TELEMETRY", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("DISABLE_ERROR_REPORTING", "1"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The result of one claude invocation against a fresh server process.
#[derive(Debug)]
pub struct ClaudeRun {
    pub args: Vec<String>,
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub requests: Vec<LoggedRequest>,
    pub duration: Duration,
    /// `session_id` of the stdout `system/init` event.
    pub session_id: String,
}

impl ClaudeRun {
    pub fn main_requests(&self) -> Vec<&LoggedRequest> {
        self.requests
            .iter()
            .filter(|r| r.kind == RequestKind::Main)
            .collect()
    }
    /// The stdout `result` event.
    pub fn result(&self) -> Option<Value> {
        self.stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["type"] == "result")
    }
    pub fn describe(&self) -> String {
        format!(
            "claude {:?}\nstatus: {}\nstdout:\n{}\nstderr:\n{}\nrequests: {:?}",
            self.args,
            self.status,
            self.stdout,
            self.stderr,
            self.requests
                .iter()
                .map(|r| (r.seq, &r.method, &r.path, r.kind, r.turn, r.status))
                .collect::<Vec<_>>()
        )
    }
}

/// Start a fresh server for `script`, run `claude <args>` in `work` with `HOME=home`, stop
/// the server. `log` gets the server's request log.
pub async fn run_claude(
    script: &Script,
    home: &Path,
    work: &Path,
    args: &[String],
    log: Option<&Path>,
    entry: &Path,
) -> ClaudeRun {
    let entry = entry.to_path_buf();
    let opts = ServerOptions {
        log_path: log.map(Path::to_path_buf),
        api_key: Some(API_KEY.into()),
        ..Default::default()
    };
    let server = start(script.clone(), opts)
        .await
        .expect("start scripted server");
    let mut cmd = tokio::process::Command::new(&entry);
    cmd.args(args)
        .current_dir(work)
        .env_clear()
        .envs(claude_env(home, &server.base_url()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let t0 = Instant::now();
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", entry.display()));
    let out = tokio::time::timeout(Duration::from_secs(240), child.wait_with_output())
        .await
        .expect("claude did not finish within 240 s")
        .expect("wait for claude");
    let duration = t0.elapsed();
    let requests = server.requests();
    server.shutdown().await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let session_id = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "system" && v["subtype"] == "init")
        .and_then(|v| v["session_id"].as_str().map(String::from))
        .unwrap_or_default();
    ClaudeRun {
        args: args.to_vec(),
        status: out.status,
        stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        requests,
        duration,
        session_id,
    }
}

/// `claude -p <prompt> --output-format stream-json --verbose --dangerously-skip-permissions [extra]`
pub fn run1_args(prompt: &str, extra: &[String]) -> Vec<String> {
    let mut a: Vec<String> = [
        "-p",
        prompt,
        "--output-format",
        "stream-json",
        "--verbose",
        "--dangerously-skip-permissions",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().cloned());
    a
}

/// `claude -p --resume <sid> <prompt> --output-format stream-json --verbose --dangerously-skip-permissions [extra]`
pub fn resume_args(session_id: &str, prompt: &str, extra: &[String]) -> Vec<String> {
    let mut a: Vec<String> = [
        "-p",
        "--resume",
        session_id,
        prompt,
        "--output-format",
        "stream-json",
        "--verbose",
        "--dangerously-skip-permissions",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().cloned());
    a
}

/// The native session file of `session_id` for `work` under `home`.
pub fn session_file(home: &Path, work: &Path, session_id: &str) -> PathBuf {
    home.join(".claude/projects")
        .join(escaped_cwd(work))
        .join(format!("{session_id}.jsonl"))
}

/// Parse a JSONL file (panics on a bad line, naming it).
pub fn read_jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// `(tool_use id, name)` of every assistant `tool_use` block in a native session, in order.
pub fn session_tool_uses(lines: &[Value]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for l in lines.iter().filter(|l| l["type"] == "assistant") {
        for b in l["message"]["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_use" {
                out.push((
                    b["id"].as_str().unwrap_or("").into(),
                    b["name"].as_str().unwrap_or("").into(),
                ));
            }
        }
    }
    out
}

/// `tool_use_id -> (content, is_error)` of every `tool_result` in a native session.
pub fn session_tool_results(lines: &[Value]) -> Vec<(String, Value, bool)> {
    let mut out = Vec::new();
    for l in lines.iter().filter(|l| l["type"] == "user") {
        for b in l["message"]["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_result" {
                out.push((
                    b["tool_use_id"].as_str().unwrap_or("").into(),
                    b["content"].clone(),
                    b["is_error"].as_bool().unwrap_or(false),
                ));
            }
        }
    }
    out
}

/// The ids the scripted server gives the tool calls of `script` turns `range`.
pub fn expected_tool_uses(script: &Script, range: std::ops::Range<usize>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for t in range {
        for (i, c) in script.turns[t].tool_calls.iter().enumerate() {
            out.push((pvisor::scripted::ids::anthropic_tool(t, i), c.name.clone()));
        }
    }
    out
}

/// Copy a directory tree (files and dirs only).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    if !from.exists() {
        return;
    }
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let ty = e.file_type().unwrap();
        let dest = to.join(e.file_name());
        if ty.is_dir() {
            copy_tree(&e.path(), &dest);
        } else if ty.is_file() {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// Modification time given to every seed file (Unix seconds, 2026-01-01T00:00:00Z), so that
/// mtime-ordered tool output (Glob) does not depend on copy order.
pub const SEED_MTIME: u64 = 1_767_225_600;

/// Set the mtime of every file under `dir`.
pub fn set_mtimes(dir: &Path, secs: u64) {
    let t = std::time::UNIX_EPOCH + Duration::from_secs(secs);
    for f in list_files(dir) {
        let file = std::fs::File::options()
            .write(true)
            .open(dir.join(&f))
            .unwrap();
        file.set_modified(t).unwrap();
    }
}

/// Every file under `dir` with its mtime and bytes, sorted by path: equal before and after
/// a step that must not touch the workspace.
pub fn file_states(dir: &Path) -> Vec<(String, std::time::SystemTime, Vec<u8>)> {
    list_files(dir)
        .into_iter()
        .map(|f| {
            let p = dir.join(&f);
            let m = std::fs::metadata(&p).unwrap().modified().unwrap();
            (f, m, std::fs::read(&p).unwrap())
        })
        .collect()
}

/// Relative paths of the files under `dir`, sorted.
pub fn list_files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, d: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The outcome of running one recorded task (run 1, and the resume when the task has one).
pub struct TaskRun {
    pub home: PathBuf,
    pub work: PathBuf,
    pub script: Script,
    pub task: Task,
    pub run1: ClaudeRun,
    pub resume: Option<ClaudeRun>,
    /// The native session right after run 1.
    pub session_run1: Vec<u8>,
}

/// Run the task of recording `dir` in `root/{home,work}` (wiped first, `workspace-before/`
/// copied in): run 1 against a fresh server, then the resume (if any) against another fresh
/// server. Request logs go to `logs_to/requests*.jsonl` when given.
pub async fn run_task(dir: &Path, root: &Path, logs_to: Option<&Path>) -> TaskRun {
    let task = Task::load(dir);
    let _ = std::fs::remove_dir_all(root);
    let home = root.join("home");
    let work = root.join("work");
    std::fs::create_dir_all(&home).unwrap();
    copy_tree(&dir.join("workspace-before"), &work);
    set_mtimes(&work, SEED_MTIME);
    let script = Script::from_path(dir.join("script.json"))
        .expect("load script")
        .substitute(&[("CWD", &work.to_string_lossy())]);

    let log1 = logs_to.map(|d| d.join("requests.jsonl"));
    if let Some(l) = &log1 {
        let _ = std::fs::remove_file(l);
    }
    let run1 = run_claude(
        &script,
        &home,
        &work,
        &run1_args(&task.prompt, &task.args),
        log1.as_deref(),
        &claude_entrypoint_of(task.agent_version.as_deref()),
    )
    .await;
    assert!(run1.status.success(), "run 1 failed:\n{}", run1.describe());
    assert!(
        !run1.session_id.is_empty(),
        "no session id on stdout:\n{}",
        run1.describe()
    );
    let sf = session_file(&home, &work, &run1.session_id);
    let session_run1 =
        std::fs::read(&sf).unwrap_or_else(|e| panic!("{}: {e}\n{}", sf.display(), run1.describe()));

    let resume = match &task.resume_prompt {
        Some(p) => {
            let log2 = logs_to.map(|d| d.join("requests-resume.jsonl"));
            if let Some(l) = &log2 {
                let _ = std::fs::remove_file(l);
            }
            let r = run_claude(
                &script,
                &home,
                &work,
                &resume_args(&run1.session_id, p, &task.args),
                log2.as_deref(),
                &claude_entrypoint_of(task.agent_version.as_deref()),
            )
            .await;
            assert!(r.status.success(), "resume failed:\n{}", r.describe());
            Some(r)
        }
        None => None,
    };
    TaskRun {
        home,
        work,
        script,
        task,
        run1,
        resume,
        session_run1,
    }
}

/// Record recording `name` at the fixed path `/tmp/pvisor-rec-<name>` and write the outputs
/// next to its inputs (`script.json`, `task.json`, `workspace-before/`).
pub async fn record(name: &str) {
    let dir = recorded_dir().join(name);
    let root = PathBuf::from(format!("/tmp/pvisor-rec-{name}"));
    for f in [
        "session.jsonl",
        "session-run1.jsonl",
        "requests.jsonl",
        "requests-resume.jsonl",
        "stdout.jsonl",
        "stdout-resume.jsonl",
        "claude.json",
    ] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    let _ = std::fs::remove_dir_all(dir.join("workspace-after"));
    let run = run_task(&dir, &root, Some(&dir)).await;
    let sid = run.run1.session_id.clone();
    let sf = session_file(&run.home, &run.work, &sid);
    std::fs::copy(&sf, dir.join("session.jsonl")).unwrap();
    std::fs::write(dir.join("stdout.jsonl"), &run.run1.stdout).unwrap();
    if let Some(r) = &run.resume {
        std::fs::write(dir.join("session-run1.jsonl"), &run.session_run1).unwrap();
        std::fs::write(dir.join("stdout-resume.jsonl"), &r.stdout).unwrap();
    }
    // The claude state file holds the userID that becomes metadata.user_id.device_id.
    if let Ok(s) = std::fs::read(run.home.join(".claude.json")) {
        std::fs::write(dir.join("claude.json"), s).unwrap();
    }
    copy_tree(&run.work, &dir.join("workspace-after"));
    let version =
        std::process::Command::new(claude_entrypoint_of(run.task.agent_version.as_deref()))
            .arg("--version")
            .output()
            .unwrap();
    let mut home_files = list_files(&run.home);
    home_files.retain(|f| !f.starts_with(".claude/projects/") || f.ends_with(".jsonl"));
    let meta = json!({
        "name": name,
        "agent": "claude-code",
        "version": String::from_utf8_lossy(&version.stdout).trim(),
        "session_id": sid,
        "cwd": run.work,
        "home": run.home,
        "native_path": sf,
        "escaped_cwd": escaped_cwd(&run.work),
        "command_run1": format!("claude {}", shell_words(&run.run1.args)),
        "command_resume": run.resume.as_ref().map(|r| format!("claude {}", shell_words(&r.args))),
        "env": claude_env(Path::new("<home>"), "http://127.0.0.1:<port>")
            .into_iter().map(|(k, v)| (k, Value::String(v))).collect::<serde_json::Map<_, _>>(),
        "prompt": run.task.prompt,
        "resume_prompt": run.task.resume_prompt,
        "main_requests_run1": run.run1.main_requests().len(),
        "main_requests_resume": run.resume.as_ref().map(|r| r.main_requests().len()),
        "requests_run1": run.run1.requests.len(),
        "requests_resume": run.resume.as_ref().map(|r| r.requests.len()),
        "duration_ms_run1": run.run1.duration.as_millis() as u64,
        "duration_ms_resume": run.resume.as_ref().map(|r| r.duration.as_millis() as u64),
        "workspace_before": list_files(&dir.join("workspace-before")),
        "workspace_before_mtime": SEED_MTIME,
        "workspace_after": list_files(&run.work),
        "home_files_after": home_files,
        "files": {
            "session.jsonl": "native session file after the last run (copied from native_path)",
            "session-run1.jsonl": "native session right after run 1 (only when there is a resume)",
            "requests.jsonl": "scripted server request log of run 1",
            "requests-resume.jsonl": "request log of the resume (a fresh server process)",
            "stdout.jsonl": "claude's stream-json stdout, run 1",
            "stdout-resume.jsonl": "stdout of the resume",
            "claude.json": "$HOME/.claude.json after the runs (userID -> metadata.user_id.device_id)",
            "script.json": "the script played (${CWD} = cwd)",
            "task.json": "prompts, extra flags, expected main request counts",
            "workspace-before/": "the workspace before run 1 (absent = empty); every file's mtime set to workspace_before_mtime",
            "workspace-after/": "the workspace after the last run"
        }
    });
    std::fs::write(
        dir.join("meta.json"),
        serde_json::to_string_pretty(&meta).unwrap() + "\n",
    )
    .unwrap();
}

fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Paths where two JSON values differ (appended to `out`, below `path`).
pub fn diff_paths(a: &Value, b: &Value, path: String, out: &mut Vec<String>) {
    out.extend(
        pvisor::certify::check::differences(a, b)
            .into_iter()
            .map(|p| format!("{path}{p}")),
    );
}

/// `messages` with the tool results of each user message in `tool_use_id` order and no
/// `cache_control`: the results of parallel calls made by a *live* step reach the request in
/// the order the tools finished (Claude runs them concurrently), which no replay controls.
/// Only for comparing requests after a live step; the replayed prefix is compared as is.
pub fn parallel_results_unordered(messages: &Value) -> Value {
    let mut m = messages.clone();
    for msg in m.as_array_mut().into_iter().flatten() {
        if let Some(blocks) = msg.get_mut("content").and_then(Value::as_array_mut) {
            for b in blocks.iter_mut() {
                if let Some(o) = b.as_object_mut() {
                    o.remove("cache_control");
                }
            }
            if blocks.iter().all(|b| b["type"] == "tool_result") {
                blocks.sort_by(|a, b| a["tool_use_id"].as_str().cmp(&b["tool_use_id"].as_str()));
            }
        }
    }
    m
}
