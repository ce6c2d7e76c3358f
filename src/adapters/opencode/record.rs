//! Recording OpenCode sessions with the real CLI against the scripted model (`pvisor
//! certify`): `opencode run --format=json` in a fresh home, the workspace's `opencode.json`
//! naming the OpenAI-compatible provider `fake` (its address given at run time by
//! `OPENCODE_CONFIG_CONTENT`, as the continuation gives the bridge's), the steps of a
//! generated task as OpenCode's own tools (bash, read, write, edit, grep, glob). The session
//! is taken with `opencode export`.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

use crate::kit::recorder::{base_env, shell_quoted, stdout_event, RecordRequest, Recorder, Step};
use crate::scripted::ToolCallSpec;

pub struct OpenCodeRecorder;

fn call(name: &str, input: Value) -> ToolCallSpec {
    ToolCallSpec {
        name: name.into(),
        input,
        custom: false,
    }
}

fn bash(command: Value, description: &str) -> ToolCallSpec {
    call(
        "bash",
        json!({ "command": command, "description": description }),
    )
}

/// The provider every recording's workspace names.
const PROVIDER: &str = "fake";

/// The workspace's `opencode.json`: the scripted model as the OpenAI-compatible provider
/// `fake`, at `base_url`.
pub fn project_config(base_url: &str, api_key: &str) -> Value {
    json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {PROVIDER: {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Fake",
            "options": {"baseURL": format!("{base_url}/v1"), "apiKey": api_key},
            "models": {"fake-model": {"name": "Fake Model", "tool_call": true}},
        }},
        "model": "fake/fake-model",
        "small_model": "fake/fake-model",
        "autoupdate": false,
        "share": "disabled",
    })
}

impl OpenCodeRecorder {
    fn env(&self, req: &RecordRequest) -> Vec<(String, String)> {
        let mut env = base_env(req.home);
        env.extend(super::rebuild::agent_env_vars(req.home));
        if let Some(dir) = crate::install::helper_near(Some(req.entrypoint), &super::ENTRY, "rg")
            .and_then(|p| p.parent().map(Path::to_path_buf))
        {
            env.push((
                "PATH".into(),
                format!("{}:/usr/local/bin:/usr/bin:/bin", dir.display()),
            ));
        }
        env.extend(
            [
                "OPENCODE_DISABLE_AUTOUPDATE",
                "OPENCODE_DISABLE_MODELS_FETCH",
                "OPENCODE_DISABLE_LSP_DOWNLOAD",
                "OPENCODE_DISABLE_SHARE",
            ]
            .map(|k| (k.to_string(), "1".to_string())),
        );
        env
    }
}

impl Recorder for OpenCodeRecorder {
    fn calls(&self, step: &Step, work: &Path) -> Vec<ToolCallSpec> {
        let abs = |p: &str| work.join(p).to_string_lossy().into_owned();
        vec![match step {
            Step::Run { cmd } => bash(json!(cmd), "Run a step of the task"),
            Step::Write { path, content } => call(
                "write",
                json!({ "filePath": abs(path), "content": content }),
            ),
            Step::Read { path } => call("read", json!({ "filePath": abs(path) })),
            Step::Edit { path, old, new } => call(
                "edit",
                json!({ "filePath": abs(path), "oldString": old, "newString": new }),
            ),
            Step::Delete { path } => {
                bash(json!(format!("rm {}", shell_quoted(path))), "Delete a file")
            }
            Step::Search { pattern } => call("grep", json!({ "pattern": pattern })),
            Step::List { glob } => call("glob", json!({ "pattern": glob })),
            Step::Malformed { number } => bash(json!(number), "A malformed call"),
        }]
    }

    /// The address in the file is a placeholder: the run is given the scripted model's.
    fn workspace_files(&self) -> Vec<(String, Vec<u8>)> {
        let config = project_config("http://127.0.0.1:9", self.api_key());
        vec![(
            "opencode.json".into(),
            (serde_json::to_string_pretty(&config).unwrap_or_default() + "\n").into_bytes(),
        )]
    }

    fn command(&self, req: &RecordRequest) -> Result<std::process::Command, String> {
        super::rebuild::seed_config_dir(req.home)
            .map_err(|e| format!("seed OpenCode's config dir: {e}"))?;
        let live = json!({"provider": {PROVIDER: {"options": {
            "baseURL": format!("{}/v1", req.base_url), "apiKey": req.api_key,
        }}}});
        let mut cmd = std::process::Command::new(req.entrypoint);
        cmd.args([
            "run",
            "--format=json",
            "--dangerously-skip-permissions",
            req.prompt,
        ])
        .current_dir(req.work)
        .env_clear()
        .envs(self.env(req))
        .env("OPENCODE_CONFIG_CONTENT", live.to_string());
        Ok(cmd)
    }

    fn session(&self, req: &RecordRequest, stdout: &str) -> Result<PathBuf, String> {
        let id = stdout_event(stdout, &|v| v["sessionID"].is_string())
            .and_then(|v| v["sessionID"].as_str().map(String::from))
            .ok_or("no event with a sessionID on opencode's stdout")?;
        let out = std::process::Command::new(req.entrypoint)
            .args(["export", &id])
            .current_dir(req.work)
            .env_clear()
            .envs(self.env(req))
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("opencode export: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "opencode export {id} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let path = req.home.join(format!("export-{id}.json"));
        std::fs::write(&path, &out.stdout).map_err(|e| format!("write {}: {e}", path.display()))?;
        Ok(path)
    }

    fn mask_request(&self, body: &Value) -> Value {
        masked(body)
    }
}

/// A Chat Completions request body of OpenCode without its declared dynamic fields: the
/// date line of the system prompt (rendered for every request with the live date), where
/// truncated outputs were saved, and the order of glob/grep results (ripgrep walks in
/// parallel).
pub fn masked(body: &Value) -> Value {
    static DATE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let date = DATE.get_or_init(|| regex::Regex::new(r"Today's date: [^\n]*").expect("valid"));
    let mut b = body.clone();
    let calls: std::collections::HashMap<String, String> = b["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| {
            Some((
                c["id"].as_str()?.to_string(),
                c["function"]["name"].as_str()?.to_string(),
            ))
        })
        .collect();
    if let Some(ms) = b["messages"].as_array_mut() {
        for m in ms.iter_mut() {
            if m["role"] == "system" {
                let c = m["content"].as_str().unwrap_or("").to_string();
                m["content"] = json!(date.replace_all(&c, "Today's date: <date>").into_owned());
            }
            if m["role"] == "tool" {
                let call = crate::kit::ToolCall {
                    call_id: String::new(),
                    tool: calls
                        .get(m["tool_call_id"].as_str().unwrap_or(""))
                        .cloned()
                        .unwrap_or_default(),
                    input: Value::Null,
                    original: None,
                    locator: Default::default(),
                };
                if let Some(t) = m["content"].as_str() {
                    m["content"] = json!(super::tools::mask_dynamic(&call, t));
                }
            }
        }
    }
    b
}
