//! Recording Pi sessions with the real CLI against the scripted model (`pvisor certify`):
//! `pi --mode json -p` in a fresh `HOME` whose `models.json` points the `anthropic` provider
//! at the scripted model, the steps of a generated task as Pi's own tools (read, bash, edit,
//! write; searches and listings through bash, as Pi enables no grep/find tool by default).

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

use crate::kit::recorder::{
    base_env, find_file, shell_quoted as quoted, stdout_event, RecordRequest, Recorder, Step,
};
use crate::scripted::ToolCallSpec;

pub struct PiRecorder;

fn call(name: &str, input: Value) -> ToolCallSpec {
    ToolCallSpec {
        name: name.into(),
        input,
        custom: false,
    }
}

fn bash(command: String) -> ToolCallSpec {
    call("bash", json!({ "command": command }))
}

impl Recorder for PiRecorder {
    fn calls(&self, step: &Step, _work: &Path) -> Vec<ToolCallSpec> {
        vec![match step {
            Step::Run { cmd } => bash(cmd.clone()),
            Step::Write { path, content } => {
                call("write", json!({ "path": path, "content": content }))
            }
            Step::Read { path } => call("read", json!({ "path": path })),
            Step::Edit { path, old, new } => call(
                "edit",
                json!({ "path": path, "edits": [{ "oldText": old, "newText": new }] }),
            ),
            Step::Delete { path } => bash(format!("rm {}", quoted(path))),
            Step::Search { pattern } => bash(format!("grep -rn -- {} . | sort", quoted(pattern))),
            Step::List { glob } => bash(format!("find . -name {} | sort", quoted(glob))),
            Step::Malformed { number } => call("bash", json!({ "command": number })),
        }]
    }

    fn command(&self, req: &RecordRequest) -> Result<std::process::Command, String> {
        let agent_dir = req.home.join(".pi/agent");
        std::fs::create_dir_all(&agent_dir)
            .map_err(|e| format!("create {}: {e}", agent_dir.display()))?;
        let models = agent_dir.join("models.json");
        std::fs::write(
            &models,
            json!({"providers": {"anthropic": {"baseUrl": req.base_url}}}).to_string(),
        )
        .map_err(|e| format!("write {}: {e}", models.display()))?;
        let mut cmd = std::process::Command::new(req.entrypoint);
        cmd.args([
            "--provider",
            "anthropic",
            "--model",
            "claude-sonnet-4-5",
            "--mode",
            "json",
            "-p",
            req.prompt,
        ])
        .current_dir(req.work)
        .env_clear()
        .envs(base_env(req.home))
        .envs([
            ("ANTHROPIC_API_KEY", req.api_key),
            ("PI_OFFLINE", "1"),
            ("PI_TELEMETRY", "0"),
            ("PI_SKIP_VERSION_CHECK", "1"),
        ]);
        Ok(cmd)
    }

    fn session(&self, req: &RecordRequest, stdout: &str) -> Result<PathBuf, String> {
        let id = stdout_event(stdout, &|v| v["type"] == "session")
            .and_then(|v| v["id"].as_str().map(String::from))
            .ok_or("no `session` header on pi's stdout")?;
        let suffix = format!("_{id}.jsonl");
        find_file(&req.home.join(".pi/agent/sessions"), &|name| {
            name.ends_with(&suffix)
        })
        .ok_or_else(|| format!("pi wrote no session file *{suffix}"))
    }

    fn mask_request(&self, body: &Value) -> Value {
        masked(body)
    }
}

/// An Anthropic request body of Pi without its declared dynamic fields: where Pi is
/// installed (its system prompt names its README, docs and examples), and the name of a bash
/// full-output file.
pub fn masked(body: &Value) -> Value {
    static INSTALL: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let install = INSTALL.get_or_init(|| {
        regex::Regex::new(
            r"(?m)^(- (?:Main documentation|Additional docs|Examples): )\S*/pi-coding-agent/",
        )
        .expect("valid")
    });
    let mut b = body.clone();
    if let Some(sys) = b["system"].as_array_mut() {
        for s in sys {
            if let Some(t) = s["text"].as_str() {
                s["text"] = json!(install.replace_all(t, "$1<pi package>/").into_owned());
            }
        }
    }
    serde_json::from_str(&super::tools::mask_full_output_file(&b.to_string())).unwrap_or(b)
}
