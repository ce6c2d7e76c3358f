//! Continuing a rebuilt Pi session with Pi's own SDK through the Anthropic bridge: the Pi
//! entrypoint with the runner preloaded in continue mode ([`super::runner`]) opens the session file with
//! `SessionManager.open`, points the session's provider at the bridge (a `models.json` of
//! the run; the bridge key is its `ANTHROPIC_API_KEY`) and calls `session.agent.continue()`
//! — or, with a boundary prompt, one `session.prompt(P)` (the text reaches the runner in a
//! file of the run's state dir, never on its command line, and the file is removed after). The step budget is the runner's
//! `--max-model-calls`: Pi stops after that many model replies, their tools run.
//! After exit the session file must start with the rebuilt bytes (Pi only appends).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::bridge::BridgeStats;
use crate::kit::{AdapterError, RebuiltSession, RequestRules};
use crate::protocol::Protocol;
use crate::runner::{
    AgentCommand, AgentVerdict, ContinuationAgent, ContinuedSession, ExitInfo, StdinMode,
};
use journal_format::event::AgentStatus;

pub struct PiContinuation {
    pub entrypoint: PathBuf,
    pub state_dir: PathBuf,
    pub workspace: PathBuf,
    pub session_file: PathBuf,
    pub session_id: String,
    pub provider: String,
    pub rebuilt: Vec<u8>,
    pub continued_artifact: PathBuf,
    pub prompt: Option<String>,
    end: Option<Value>,
    header_id: Option<String>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AdapterError + '_ {
    move |source| AdapterError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl PiContinuation {
    pub fn new(
        entrypoint: &Path,
        rebuilt: &RebuiltSession,
        workspace: &Path,
        state_dir: &Path,
        continued_artifact: &Path,
        prompt: Option<&str>,
    ) -> Result<Self, AdapterError> {
        let bytes = std::fs::read(&rebuilt.native_path).map_err(io(&rebuilt.native_path))?;
        let parsed = super::parse::parse_bytes(&rebuilt.native_path, &bytes)?;
        if let Some(why) = super::rebuild::continue_refusal(&parsed.session) {
            return Err(AdapterError::Unsupported(why));
        }
        let provider = parsed
            .session
            .model()
            .map(|m| m.0)
            .unwrap_or_else(|| "anthropic".into());
        Ok(PiContinuation {
            entrypoint: entrypoint.to_path_buf(),
            state_dir: state_dir.to_path_buf(),
            workspace: workspace.to_path_buf(),
            session_file: rebuilt.native_path.clone(),
            session_id: rebuilt.session_id.clone(),
            provider,
            rebuilt: bytes,
            continued_artifact: continued_artifact.to_path_buf(),
            prompt: prompt.map(str::to_string),
            end: None,
            header_id: None,
        })
    }
}

impl ContinuationAgent for PiContinuation {
    fn protocol(&self) -> Protocol {
        Protocol::Anthropic
    }

    fn request_rules(&self) -> std::sync::Arc<dyn RequestRules> {
        std::sync::Arc::new(super::request_rules::PiRules {
            prompt: self.prompt.is_some(),
        })
    }

    fn command(
        &mut self,
        bridge_url: &str,
        bridge_key: &str,
        budget: Option<u64>,
    ) -> Result<AgentCommand, AdapterError> {
        let dir = self.state_dir.join("pi");
        let script = super::runner::materialize(&dir).map_err(io(&dir))?;
        let mut config = serde_json::json!({
            "mode": "continue",
            "session": self.session_file,
            "baseUrl": bridge_url,
            "provider": self.provider,
            "cwd": self.workspace,
        });
        if let Some(b) = budget {
            config["maxModelCalls"] = b.into();
        }
        if let Some(p) = &self.prompt {
            let f = dir.join("boundary-prompt.txt");
            std::fs::write(&f, p).map_err(io(&f))?;
            config["promptFile"] = f.display().to_string().into();
        }
        let mut env = super::rebuild::agent_env(&self.state_dir);
        env.push(("ANTHROPIC_API_KEY".into(), bridge_key.to_string()));
        env.extend(super::runner::command_env(&script, &config));
        Ok(AgentCommand {
            program: self.entrypoint.clone(),
            args: super::runner::ARGS.iter().map(|a| a.to_string()).collect(),
            env,
            cwd: self.workspace.clone(),
            stdin: StdinMode::Null,
            ..Default::default()
        })
    }

    fn observe_stdout(&mut self, line: &str) -> bool {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            return false;
        };
        match v.get("type").and_then(Value::as_str) {
            Some("session") => {
                self.header_id = v.get("id").and_then(Value::as_str).map(str::to_string)
            }
            Some("pvisor_end") => {
                self.end = Some(v);
                return true;
            }
            _ => {}
        }
        false
    }

    fn verdict(&self, exit: &ExitInfo, bridge: &BridgeStats, _budget: Option<u64>) -> AgentVerdict {
        let failed = |m: String| AgentVerdict {
            status: AgentStatus::Failed,
            message: Some(m),
        };
        let Some(end) = &self.end else {
            return failed(format!(
                "Pi's runner ended without its final report (exit {:?}, signal {:?})",
                exit.code, exit.signal
            ));
        };
        if let Some(e) = end.get("error").and_then(Value::as_str) {
            return failed(format!("Pi reported an error: {e}"));
        }
        if self.header_id.as_deref() != Some(self.session_id.as_str()) {
            return failed(format!(
                "Pi continued session {:?}, not {}",
                self.header_id, self.session_id
            ));
        }
        if exit.code != Some(0) {
            return failed(format!("Pi's runner exited with {:?}", exit.code));
        }
        if bridge.steps == 0 {
            return failed("Pi finished without any model reply through the bridge".into());
        }
        let budget_hit = end.get("budgetReached").and_then(Value::as_bool) == Some(true)
            && end.get("stopReason").and_then(Value::as_str) == Some("toolUse");
        AgentVerdict {
            status: if budget_hit {
                AgentStatus::MaxSteps
            } else {
                AgentStatus::Completed
            },
            message: None,
        }
    }

    fn finish(&mut self) -> Result<Option<ContinuedSession>, AdapterError> {
        let _ = std::fs::remove_file(self.state_dir.join("pi/boundary-prompt.txt"));
        let bytes = std::fs::read(&self.session_file).map_err(io(&self.session_file))?;
        if !bytes.starts_with(&self.rebuilt) {
            return Err(AdapterError::Continuation(
                "the continued session does not start with the rebuilt one (Pi rewrote it)".into(),
            ));
        }
        let parsed = super::parse::parse_bytes(&self.session_file, &bytes)?;
        if parsed.session.id() != self.session_id {
            return Err(AdapterError::Continuation(format!(
                "the continued session is {}, not {}",
                parsed.session.id(),
                self.session_id
            )));
        }
        if let Some(d) = self.continued_artifact.parent() {
            std::fs::create_dir_all(d).map_err(io(d))?;
        }
        std::fs::write(&self.continued_artifact, &bytes).map_err(io(&self.continued_artifact))?;
        Ok(Some(ContinuedSession {
            session_id: self.session_id.clone(),
            native_path: self.session_file.clone(),
            artifact_path: self.continued_artifact.clone(),
            digest: format!("blake3:{}", blake3::hash(&bytes).to_hex()),
            records: bytes
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .count() as u64,
            removed: vec![],
        }))
    }
}
