//! Recording OpenHands conversations with the real SDK against the scripted model (`pvisor
//! certify`): the SDK's default CLI agent run on the task's prompt by `record.py` (embedded,
//! written into the fresh home) with the Python of the SDK's environment, its LLM at the
//! scripted model; the steps of a generated task as OpenHands' own tools (terminal,
//! file_editor). The session is the stored conversation folder.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

use crate::kit::recorder::{base_env, shell_quoted as quoted, RecordRequest, Recorder, Step};
use crate::scripted::ToolCallSpec;

/// The driver the SDK's Python runs.
const DRIVER: &str = include_str!("record.py");

pub struct OpenHandsRecorder;

fn call(name: &str, mut input: Value) -> ToolCallSpec {
    input["summary"] = json!(format!("{name} call"));
    input["security_risk"] = json!("LOW");
    ToolCallSpec {
        name: name.into(),
        input,
        custom: false,
    }
}

fn terminal(command: Value) -> ToolCallSpec {
    call("terminal", json!({ "command": command }))
}

fn folders(home: &Path) -> (PathBuf, PathBuf, PathBuf) {
    (home.join("tmp"), home.join("tmux"), home.join("persist"))
}

impl Recorder for OpenHandsRecorder {
    fn calls(&self, step: &Step, work: &Path) -> Vec<ToolCallSpec> {
        let abs = |p: &str| work.join(p).to_string_lossy().into_owned();
        vec![match step {
            Step::Run { cmd } => terminal(json!(cmd)),
            Step::Write { path, content } => call(
                "file_editor",
                json!({ "command": "create", "path": abs(path), "file_text": content }),
            ),
            Step::Read { path } => call(
                "file_editor",
                json!({ "command": "view", "path": abs(path) }),
            ),
            Step::Edit { path, old, new } => call(
                "file_editor",
                json!({ "command": "str_replace", "path": abs(path),
                        "old_str": old, "new_str": new }),
            ),
            Step::Delete { path } => terminal(json!(format!("rm {}", quoted(path)))),
            Step::Search { pattern } => {
                terminal(json!(format!("grep -rn -- {} . | sort", quoted(pattern))))
            }
            Step::List { glob } => terminal(json!(format!("find . -name {} | sort", quoted(glob)))),
            Step::Malformed { number } => terminal(json!(number)),
        }]
    }

    fn command(&self, req: &RecordRequest) -> Result<std::process::Command, String> {
        let (tmp, tmux, persist) = folders(req.home);
        for d in [&tmp, &tmux, &persist] {
            std::fs::create_dir_all(d).map_err(|e| format!("create {}: {e}", d.display()))?;
        }
        let driver = req.home.join("record.py");
        std::fs::write(&driver, DRIVER).map_err(|e| format!("write {}: {e}", driver.display()))?;
        let config = json!({
            "base_url": format!("{}/v1", req.base_url),
            "api_key": req.api_key,
            "work": req.work,
            "persist": persist,
            "prompt": req.prompt,
        });
        let mut cmd = std::process::Command::new(req.entrypoint);
        cmd.arg(&driver)
            .current_dir(req.work)
            .env_clear()
            .envs(base_env(req.home))
            .env("TMPDIR", &tmp)
            .env("TMUX_TMPDIR", &tmux)
            .env("PVISOR_RECORD_OPENHANDS", config.to_string());
        Ok(cmd)
    }

    /// The terminal tool's tmux server outlives the SDK: ended.
    fn finished(&self, req: &RecordRequest) {
        let _ = std::process::Command::new("tmux")
            .args(["-L", "openhands", "kill-server"])
            .env("TMUX_TMPDIR", folders(req.home).1)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }

    fn session(&self, req: &RecordRequest, _stdout: &str) -> Result<PathBuf, String> {
        let persist = folders(req.home).2;
        std::fs::read_dir(&persist)
            .map_err(|e| format!("{}: {e}", persist.display()))?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.join("base_state.json").is_file())
            .ok_or_else(|| format!("no stored conversation in {}", persist.display()))
    }

    fn mask_request(&self, body: &Value) -> Value {
        masked(body)
    }
}

/// Every string of a request body with the declared dynamic fact masked: the Python
/// interpreter the sandbox's `PATH` finds (`[Python interpreter: …]`, rendered from the
/// terminal's metadata), a fact of the machine, not of the run.
pub fn masked(body: &Value) -> Value {
    match body {
        Value::String(s) => Value::String(super::parse::mask_dynamic(s)),
        Value::Array(a) => Value::Array(a.iter().map(masked).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), masked(v))).collect()),
        v => v.clone(),
    }
}
