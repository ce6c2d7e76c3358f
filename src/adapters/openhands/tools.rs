//! OpenHands' tools re-executed by OpenHands itself: the companion runner ([`super::runner`],
//! tools mode) builds the recorded agent from `base_state.json` (its tools created by the SDK
//! as in the recorded run) and executes each recorded `ActionEvent` exactly as the agent's
//! step does (`ParallelToolExecutor` around `_execute_action_event`); a recorded call whose
//! arguments failed validation (`action: null`) is answered by the SDK's own parser again.
//! The fresh result event (an `ObservationEvent` or `AgentErrorEvent`, as the SDK writes it)
//! is the observation's native form; its stored text is what replays compare.
//!
//! The terminal keeps its shell between calls (cwd, exported variables, background jobs), as
//! OpenHands does; a runner started after a crash starts a fresh shell in the directory the
//! last completed terminal call reported.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::parse::{self, Parsed};
use crate::error::ExecError;
use crate::kit::companion::{Companion, CompanionCommand};
use crate::kit::{ExecContext, Observation, ToolCall, ToolClass, ToolOutcome};

pub fn classify(call: &ToolCall) -> ToolClass {
    match call.tool.as_str() {
        "finish" | "think" | "glob" | "grep" => ToolClass::ReadOnly,
        "file_editor" | "planning_file_editor"
            if call.input.get("command").and_then(Value::as_str) == Some("view") =>
        {
            ToolClass::ReadOnly
        }
        "terminal" | "file_editor" | "planning_file_editor" | "task_tracker" | "apply_patch" => {
            ToolClass::Mutating
        }
        _ => ToolClass::Unknown,
    }
}

/// The conversation folder of a run's tools and of its rebuilt store (task_tracker's
/// `TASKS.json` and the terminal's full outputs live there, where the continued agent reads
/// them): `<state>/openhands/conversations/<id hex>`.
pub fn conversation_dir(state_dir: &std::path::Path, conversation_id: &str) -> PathBuf {
    super::runner::home_of(state_dir)
        .join("conversations")
        .join(parse::conversation_hex(conversation_id).unwrap_or_default())
}

/// One replay process's runner of OpenHands actions.
pub struct Runner {
    ctx: ExecContext,
    base_state: Value,
    actions: std::collections::HashMap<String, Value>,
    conversation_dir: PathBuf,
    terminal_cwd: Option<String>,
    entrypoint: PathBuf,
    process: Option<Companion>,
}

impl Runner {
    /// Starts the runner, so that a missing SDK or another version is refused before any
    /// action runs. `terminal_cwd`: where a fresh shell starts after a crash.
    pub fn new(
        ctx: &ExecContext,
        parsed: &Parsed,
        terminal_cwd: Option<String>,
    ) -> Result<Runner, String> {
        let entrypoint = super::runner::entrypoint_for(ctx.agent_entrypoint.as_deref())?;
        // A Python without the SDK is named as such (quick: no SDK import).
        super::runner::probe_version(&entrypoint)?;
        let actions = parsed
            .actions()
            .map(|(id, action)| (id.to_string(), action.clone()))
            .collect();
        let mut r = Runner {
            ctx: ctx.clone(),
            base_state: parsed.base_state.clone(),
            actions,
            conversation_dir: conversation_dir(&ctx.state_dir, parsed.conversation_id()),
            terminal_cwd,
            entrypoint,
            process: None,
        };
        r.start()?;
        Ok(r)
    }

    fn start(&mut self) -> Result<&mut Companion, String> {
        if self.process.is_none() {
            let dir = super::runner::home_of(&self.ctx.state_dir);
            let script =
                super::runner::materialize(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            std::fs::create_dir_all(&self.conversation_dir)
                .map_err(|e| format!("{}: {e}", self.conversation_dir.display()))?;
            // A tmux server left by a killed process of this run ends first.
            super::runner::kill_tmux(&self.ctx.state_dir);
            let mut c = Companion::start(CompanionCommand {
                program: self.entrypoint.clone(),
                args: vec![script.display().to_string()],
                env: super::runner::env(&self.ctx.state_dir, &json!({"mode": "tools"})),
                cwd: self.ctx.workspace.clone(),
                stderr_log: self.ctx.log_dir.join("openhands-tools-runner.stderr.log"),
                name: "the OpenHands runner".into(),
                groups: Some(crate::supervisor::groups::dir_of(&self.ctx.state_dir)),
            })?;
            let hello = c.call(json!({"op": "hello"}))?;
            let v = hello["sdk_version"].as_str().unwrap_or("");
            if !super::ENTRY.replays(v) {
                return Err(format!(
                    "{} has openhands-sdk {v:?}; pvisor replays with {}: run `pvisor agents install {}`",
                    self.entrypoint.display(),
                    super::ENTRY.versions_text(),
                    super::NAME
                ));
            }
            let tools: Vec<&str> = self.base_state["agent"]["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["name"].as_str())
                .collect();
            if tools.contains(&"terminal") && hello["tmux"].is_null() {
                return Err("OpenHands' terminal runs its shell in tmux, and `tmux` is not on PATH: install it (Debian: `apt-get install tmux`)".into());
            }
            let mut init = json!({
                "op": "init",
                "base_state": self.base_state,
                "cwd": self.ctx.workspace,
                "conversation_dir": self.conversation_dir,
            });
            if let Some(d) = &self.terminal_cwd {
                init["terminal_cwd"] = json!(d);
            }
            let init = c.call(init)?;
            if init["ok"] != true {
                return Err(format!(
                    "OpenHands could not build the recorded agent: {}",
                    init["error"].as_str().unwrap_or("")
                ));
            }
            self.terminal_cwd = None;
            self.process = Some(c);
        }
        Ok(self.process.as_mut().expect("started"))
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        if let Some(mut c) = self.process.take() {
            let _ = c.call(json!({"op": "exit"}));
        }
        super::runner::kill_tmux(&self.ctx.state_dir);
    }
}

impl crate::kit::ToolRunner for Runner {
    fn execute(&mut self, call: &ToolCall) -> Result<ToolOutcome, ExecError> {
        let action =
            self.actions
                .get(&call.call_id)
                .cloned()
                .ok_or_else(|| ExecError::BadInput {
                    tool: call.tool.clone(),
                    message: "no recorded ActionEvent for this call".into(),
                })?;
        let started = std::time::Instant::now();
        let fail = |m: String| ExecError::Io {
            tool: call.tool.clone(),
            source: std::io::Error::other(m),
        };
        // The fresh result takes the recorded one's place in the event tree (its id and parent).
        let mut request = json!({"op": "execute", "action_event": action});
        if let Some(rec) = call.original.as_ref().and_then(|o| o.native.as_ref()) {
            for (key, field) in [("event_id", "id"), ("parent_id", "parent_id")] {
                if let Some(v) = rec.get(field).filter(|v| v.is_string()) {
                    request[key] = v.clone();
                }
            }
        }
        let answer = self.start().and_then(|c| c.call(request));
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                // A dead runner is started again (a fresh shell) for the next call.
                self.process = None;
                return Err(fail(e));
            }
        };
        if answer["ok"] != true {
            return Err(fail(format!(
                "OpenHands failed to execute the action: {}",
                answer["error"].as_str().unwrap_or("")
            )));
        }
        let event = answer["events"]
            .as_array()
            .and_then(|e| e.first())
            .cloned()
            .ok_or_else(|| fail("OpenHands produced no result event".into()))?;
        Ok(ToolOutcome {
            observation: parse::observation_of(&event),
            exit_code: answer["exit_code"].as_i64().map(|c| c as i32),
            duration_ms: started.elapsed().as_millis() as u64,
            touched: vec![],
        })
    }
}

/// Where a fresh shell should start after a crash: the working directory the last completed
/// terminal call reported, when it is not the workspace.
pub fn terminal_cwd_after(
    completed: &[(ToolCall, Observation)],
    workspace: &std::path::Path,
) -> Option<String> {
    let last = completed.iter().rev().find(|(c, _)| c.tool == "terminal")?;
    let dir = last
        .1
        .native
        .as_ref()?
        .pointer("/observation/metadata/working_dir")?
        .as_str()?;
    (std::path::Path::new(dir) != workspace).then(|| dir.to_string())
}
