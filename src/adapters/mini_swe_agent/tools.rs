//! mini's one tool, `bash`, re-executed by mini's **own** environment and templates in the
//! companion runner ([`super::runner`]): `LocalEnvironment.execute` with the trajectory's
//! config (cwd, env, timeout) and the observation rendered by its configured template
//! (output head/tail truncation, the timeout and format texts), so that the fresh
//! observation message is the one mini would append. The runner holds no state between
//! calls: every call is journaled by pvisor, and a restarted runner continues from the next.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::parse::Parsed;
use super::versions::Format;
use crate::error::ExecError;
use crate::kit::companion::{Companion, CompanionCommand};
use crate::kit::{ExecContext, Observation, ToolCall, ToolClass, ToolOutcome};

pub fn classify(call: &ToolCall) -> ToolClass {
    match call.tool.as_str() {
        "bash" => ToolClass::Mutating,
        _ => ToolClass::Unknown,
    }
}

/// What the runner needs from the trajectory: its configuration (never its messages).
#[derive(Debug, Clone)]
pub struct Session {
    pub format: Format,
    pub version: String,
    /// `{"info": {"config": …, "mini_version": …}, "trajectory_format": …}`.
    pub config_doc: Value,
    /// Call id → the command mini ran (a string, or the value the model sent).
    pub commands: std::collections::HashMap<String, Value>,
}

impl Session {
    pub fn of(p: &Parsed) -> Session {
        let mut commands = std::collections::HashMap::new();
        // The mini parse builds its plan in memory (`Batches::from` a Vec), never spilled.
        debug_assert!(!p.plan().batches.spilled());
        let batches = p.plan().batches.in_memory().unwrap_or(&[]);
        for (site, batch) in p.sites.iter().zip(batches) {
            for (c, cmd) in batch.calls.iter().zip(&site.commands) {
                commands.insert(c.call_id.clone(), cmd.clone());
            }
        }
        Session {
            format: p.format,
            version: p.version.clone(),
            config_doc: json!({
                "info": {"config": p.doc["info"]["config"], "mini_version": p.version},
                "trajectory_format": p.format.name(),
            }),
            commands,
        }
    }
}

/// One replay process's runner of mini actions (the companion starts at the first call).
pub struct Runner {
    ctx: ExecContext,
    session: Session,
    entrypoint: PathBuf,
    process: Option<Companion>,
}

impl Runner {
    /// Starts the runner in the mini of the recorded version, so that a missing mini or
    /// another version is refused before any command runs.
    pub fn new(ctx: &ExecContext, session: Session) -> Result<Runner, String> {
        let entrypoint =
            super::runner::entrypoint_for(ctx.agent_entrypoint.as_deref(), &session.version)?;
        let mut r = Runner {
            ctx: ctx.clone(),
            session,
            entrypoint,
            process: None,
        };
        r.start()?;
        Ok(r)
    }

    fn start(&mut self) -> Result<&mut Companion, String> {
        if self.process.is_none() {
            let dir = self.ctx.state_dir.join("mini");
            let preload =
                super::runner::materialize(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let mut c = Companion::start(CompanionCommand {
                program: self.entrypoint.clone(),
                args: super::runner::ARGS.iter().map(|a| a.to_string()).collect(),
                env: super::runner::env(&self.ctx.state_dir, &preload, &json!({"mode": "tools"})),
                cwd: self.ctx.workspace.clone(),
                stderr_log: self.ctx.log_dir.join("mini-tools-runner.stderr.log"),
                name: "the mini-swe-agent runner".into(),
                groups: Some(crate::supervisor::groups::dir_of(&self.ctx.state_dir)),
            })?;
            let hello = c.call(json!({"op": "hello"}))?;
            let v = hello["version"].as_str().unwrap_or("");
            if v != self.session.version {
                return Err(format!(
                    "{} is mini-swe-agent {v}, but the trajectory was recorded by {}: run `pvisor agents install {}@{}` (used by default), or pass that version's entrypoint",
                    self.entrypoint.display(),
                    self.session.version,
                    super::NAME,
                    self.session.version
                ));
            }
            let init = c.call(json!({
                "op": "init",
                "traj": self.session.config_doc,
                "cwd": self.ctx.workspace,
            }))?;
            if init["ok"] != true {
                return Err(format!(
                    "mini could not load the trajectory's configuration: {}",
                    init["error"].as_str().unwrap_or("")
                ));
            }
            self.process = Some(c);
        }
        Ok(self.process.as_mut().expect("started"))
    }
}

impl crate::kit::ToolRunner for Runner {
    fn execute(&mut self, call: &ToolCall) -> Result<ToolOutcome, ExecError> {
        if call.tool != "bash" {
            return Err(ExecError::Unsupported {
                tool: call.tool.clone(),
                reason: "mini-swe-agent's only tool is bash".into(),
            });
        }
        let command = match self.session.commands.get(&call.call_id) {
            Some(c) => c.clone(),
            None => call
                .input
                .get("command")
                .filter(|c| !c.is_null())
                .cloned()
                .ok_or_else(|| ExecError::BadInput {
                    tool: call.tool.clone(),
                    message: "no `command`".into(),
                })?,
        };
        let mut request = json!({"op": "execute", "action": command});
        if self.session.format == Format::V1_1 {
            request["tool_call_id"] = json!(call.call_id);
        }
        let started = std::time::Instant::now();
        let fail = |m: String| ExecError::Io {
            tool: "bash".into(),
            source: std::io::Error::other(m),
        };
        let answer = self.start().and_then(|c| c.call(request));
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                // A dead runner is started again for the next call.
                self.process = None;
                return Err(fail(e));
            }
        };
        if answer["ok"] != true {
            return Err(fail(format!(
                "mini failed to execute the action: {}",
                answer["error"].as_str().unwrap_or("")
            )));
        }
        let message = answer["messages"]
            .as_array()
            .and_then(|m| m.first())
            .cloned()
            .ok_or_else(|| fail("mini appended no observation message".into()))?;
        Ok(ToolOutcome {
            observation: Observation {
                text: message
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                is_error: super::parse::is_error(&message),
                native: Some(message),
            },
            exit_code: answer["returncode"].as_i64().map(|c| c as i32),
            duration_ms: started.elapsed().as_millis() as u64,
            touched: vec![],
        })
    }
}
