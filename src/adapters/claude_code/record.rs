//! Recording Claude Code sessions with the real CLI against the scripted model (`pvisor
//! certify`): `claude -p --output-format stream-json` in a fresh `HOME`, the steps of a
//! generated task as Claude's own tools (Bash, Read, Write, Edit, Grep, Glob).

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

use crate::kit::recorder::{base_env, shell_quoted, stdout_event, RecordRequest, Recorder, Step};
use crate::scripted::ToolCallSpec;

pub struct ClaudeRecorder;

fn call(name: &str, input: Value) -> ToolCallSpec {
    ToolCallSpec {
        name: name.into(),
        input,
        custom: false,
    }
}

impl Recorder for ClaudeRecorder {
    fn calls(&self, step: &Step, work: &Path) -> Vec<ToolCallSpec> {
        let abs = |p: &str| work.join(p).to_string_lossy().into_owned();
        vec![match step {
            Step::Run { cmd } => call(
                "Bash",
                json!({ "command": cmd, "description": "Run a step of the task" }),
            ),
            Step::Write { path, content } => call(
                "Write",
                json!({ "file_path": abs(path), "content": content }),
            ),
            Step::Read { path } => call("Read", json!({ "file_path": abs(path) })),
            Step::Edit { path, old, new } => call(
                "Edit",
                json!({ "file_path": abs(path), "old_string": old, "new_string": new }),
            ),
            Step::Delete { path } => call(
                "Bash",
                json!({ "command": format!("rm {}", shell_quoted(path)),
                        "description": "Delete a file" }),
            ),
            Step::Search { pattern } => call(
                "Grep",
                json!({ "pattern": pattern, "output_mode": "content", "-n": true }),
            ),
            Step::List { glob } => call("Glob", json!({ "pattern": glob })),
            Step::Malformed { number } => call(
                "Bash",
                json!({ "command": number, "description": "A malformed call" }),
            ),
        }]
    }

    fn command(&self, req: &RecordRequest) -> Result<std::process::Command, String> {
        let mut cmd = std::process::Command::new(req.entrypoint);
        cmd.args([
            "-p",
            req.prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
        ])
        .current_dir(req.work)
        .env_clear()
        .envs(base_env(req.home))
        .envs([
            // Required as root, otherwise --dangerously-skip-permissions is refused.
            ("IS_SANDBOX", "1"),
            ("ANTHROPIC_BASE_URL", req.base_url),
            ("ANTHROPIC_API_KEY", req.api_key),
            ("DISABLE_TELEMETRY", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
            ("DISABLE_ERROR_REPORTING", "1"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ]);
        Ok(cmd)
    }

    fn session(&self, req: &RecordRequest, stdout: &str) -> Result<PathBuf, String> {
        let sid = stdout_event(stdout, &|v| v["type"] == "system" && v["subtype"] == "init")
            .and_then(|v| v["session_id"].as_str().map(String::from))
            .ok_or("no `system/init` event on claude's stdout")?;
        let dir = super::rebuild::escaped_project_dir(req.work).map_err(|e| e.to_string())?;
        let p = req
            .home
            .join(".claude/projects")
            .join(dir)
            .join(format!("{sid}.jsonl"));
        if p.is_file() {
            Ok(p)
        } else {
            Err(format!("claude wrote no session {}", p.display()))
        }
    }

    fn mask_request(&self, body: &Value) -> Value {
        masked(body)
    }
}

/// A Messages request body without its declared dynamic field: the device id of a fresh
/// `~/.claude.json` (`metadata.user_id`).
pub fn masked(body: &Value) -> Value {
    let mut b = body.clone();
    if let Some(m) = b.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("user_id");
    }
    b
}
