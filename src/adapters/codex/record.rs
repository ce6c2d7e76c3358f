//! Recording Codex sessions with the real CLI against the scripted model (`pvisor certify`):
//! `codex exec --json` in a fresh `CODEX_HOME` whose provider is the scripted model, the
//! steps of a generated task as Codex's own tools (`exec_command`, freeform `apply_patch`).

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

use crate::kit::recorder::{
    base_env, find_file, shell_quoted as quoted, stdout_event, RecordRequest, Recorder, Step,
};
use crate::scripted::ToolCallSpec;

pub struct CodexRecorder;

fn exec(cmd: String) -> ToolCallSpec {
    ToolCallSpec {
        name: "exec_command".into(),
        input: json!({ "cmd": cmd }),
        custom: false,
    }
}

fn patch(body: String) -> ToolCallSpec {
    ToolCallSpec {
        name: "apply_patch".into(),
        input: Value::String(format!("*** Begin Patch\n{body}*** End Patch\n")),
        custom: true,
    }
}

/// `text` as the `+` lines of an added file (a last line without its newline still becomes
/// a line: Codex writes every added line with one).
fn plus_lines(text: &str) -> String {
    text.lines().map(|l| format!("+{l}\n")).collect()
}

impl Recorder for CodexRecorder {
    fn calls(&self, step: &Step, _work: &Path) -> Vec<ToolCallSpec> {
        vec![match step {
            Step::Run { cmd } => exec(cmd.clone()),
            Step::Write { path, content } => {
                patch(format!("*** Add File: {path}\n{}", plus_lines(content)))
            }
            Step::Read { path } => exec(format!("cat {}", quoted(path))),
            Step::Edit { path, old, new } => patch(format!(
                "*** Update File: {path}\n@@\n{}{}",
                old.lines().map(|l| format!("-{l}\n")).collect::<String>(),
                plus_lines(new)
            )),
            Step::Delete { path } => patch(format!("*** Delete File: {path}\n")),
            Step::Search { pattern } => exec(format!("grep -rn -- {} . | sort", quoted(pattern))),
            Step::List { glob } => exec(format!("find . -name {} | sort", quoted(glob))),
            Step::Malformed { number } => ToolCallSpec {
                name: "exec_command".into(),
                input: json!({ "cmd": number }),
                custom: false,
            },
        }]
    }

    /// As in the committed Codex scripts: no request is a side request by its shape.
    fn no_tools_is_side(&self) -> bool {
        false
    }

    fn command(&self, req: &RecordRequest) -> Result<std::process::Command, String> {
        let codex_home = req.home.join(".codex");
        std::fs::create_dir_all(&codex_home)
            .map_err(|e| format!("create {}: {e}", codex_home.display()))?;
        let config = format!(
            "model = \"gpt-5.5\"\nmodel_provider = \"scripted\"\n\n[model_providers.scripted]\n\
             name = \"Scripted\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\n\
             env_key = \"SCRIPTED_API_KEY\"\n",
            req.base_url
        );
        let path = codex_home.join("config.toml");
        std::fs::write(&path, config).map_err(|e| format!("write {}: {e}", path.display()))?;
        let mut cmd = std::process::Command::new(req.entrypoint);
        cmd.args([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            req.prompt,
        ])
        .current_dir(req.work)
        .env_clear()
        .envs(base_env(req.home))
        .env("CODEX_HOME", &codex_home)
        .env("SCRIPTED_API_KEY", req.api_key);
        Ok(cmd)
    }

    fn session(&self, req: &RecordRequest, stdout: &str) -> Result<PathBuf, String> {
        let thread = stdout_event(stdout, &|v| v["type"] == "thread.started")
            .and_then(|v| v["thread_id"].as_str().map(String::from))
            .ok_or("no `thread.started` event on codex's stdout")?;
        if let Some(p) = find_file(&req.home.join(".codex/sessions"), &|name| {
            name.starts_with("rollout-") && name.contains(&thread)
        }) {
            return Ok(p);
        }
        Err(format!("no rollout of thread {thread} under CODEX_HOME"))
    }

    fn mask_request(&self, body: &Value) -> Value {
        masked(body)
    }
}

/// A Responses request body without its declared dynamic fields: the fresh observations'
/// chunk ids and wall times, and Codex's per-turn `client_metadata` (turn ids, installation
/// id, turn start time).
pub fn masked(body: &Value) -> Value {
    let mut b = body.clone();
    if let Some(items) = b["input"].as_array_mut() {
        for it in items {
            if let Some(o) = it.get("output").and_then(Value::as_str) {
                it["output"] = Value::String(super::tools::mask_dynamic(o));
            }
            // Code mode: the first item of an exec/wait output is its status and wall time.
            if let Some(parts) = it.get_mut("output").and_then(Value::as_array_mut) {
                for p in parts {
                    if let Some(t) = p.get("text").and_then(Value::as_str) {
                        p["text"] = Value::String(super::tools::mask_dynamic(t));
                    }
                }
            }
        }
    }
    if let Some(o) = b.as_object_mut() {
        o.remove("client_metadata");
    }
    b
}
