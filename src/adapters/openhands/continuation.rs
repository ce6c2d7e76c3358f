//! Continuing a rebuilt conversation with the SDK's own reload and loop, in the companion
//! runner ([`super::runner`], continue mode): `Conversation(agent, workspace, persistence_dir,
//! conversation_id)` loads the store the rebuild wrote, `send_message(prompt)` when there is a
//! boundary prompt, then `run()`. The agent is the recorded one with its LLM (and its
//! condenser's) pointed at the bridge; the key comes from the environment and is never
//! written (the SDK stores it redacted). The budget is the SDK's own `max_iteration_per_run`:
//! at the limit the conversation ends in `error` with `MaxIterationsReached` (reported as
//! `max_steps`); any other error status is a failure even though the process exits 0.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::bridge::BridgeStats;
use crate::kit::{AdapterError, RebuiltSession, RequestRules};
use crate::protocol::Protocol;
use crate::runner::{AgentCommand, AgentVerdict, ContinuationAgent, ContinuedSession, ExitInfo};
use journal_format::event::AgentStatus;

pub struct OpenHandsContinuation {
    pub entrypoint: PathBuf,
    pub state_dir: PathBuf,
    pub workspace: PathBuf,
    /// The rebuilt conversation folder (`<persist>/<id hex>`).
    pub conversation_dir: PathBuf,
    pub conversation_id: String,
    pub continued_artifact: PathBuf,
    pub model: Option<String>,
    pub prompt: Option<String>,
    /// The rebuilt event lines: the continued store must start with them.
    rebuilt_events: Vec<String>,
    end: Option<Value>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AdapterError + '_ {
    move |source| AdapterError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The event lines of a canonical store (everything after `base_state.json`).
fn event_lines(bundle: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bundle)
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

impl OpenHandsContinuation {
    pub fn new(
        entrypoint: &Path,
        rebuilt: &RebuiltSession,
        workspace: &Path,
        state_dir: &Path,
        continued_artifact: &Path,
        model: Option<&str>,
        prompt: Option<&str>,
    ) -> Result<Self, AdapterError> {
        let artifact = std::fs::read(&rebuilt.artifact_path).map_err(io(&rebuilt.artifact_path))?;
        Ok(OpenHandsContinuation {
            entrypoint: entrypoint.to_path_buf(),
            state_dir: state_dir.to_path_buf(),
            workspace: workspace.to_path_buf(),
            conversation_dir: rebuilt.native_path.clone(),
            conversation_id: rebuilt.session_id.clone(),
            continued_artifact: continued_artifact.to_path_buf(),
            model: model.map(str::to_string),
            prompt: prompt.map(str::to_string),
            rebuilt_events: event_lines(&artifact),
            end: None,
        })
    }

    fn prompt_file(&self) -> PathBuf {
        super::runner::home_of(&self.state_dir).join("boundary-prompt.txt")
    }
}

impl ContinuationAgent for OpenHandsContinuation {
    fn protocol(&self) -> Protocol {
        Protocol::OpenaiChat
    }

    fn request_rules(&self) -> std::sync::Arc<dyn RequestRules> {
        std::sync::Arc::new(super::request_rules::OpenHandsRules {
            prompt: self.prompt.is_some(),
        })
    }

    fn command(
        &mut self,
        bridge_url: &str,
        bridge_key: &str,
        budget: Option<u64>,
    ) -> Result<AgentCommand, AdapterError> {
        let dir = super::runner::home_of(&self.state_dir);
        let script = super::runner::materialize(&dir).map_err(io(&dir))?;
        super::runner::kill_tmux(&self.state_dir);
        let persist = self
            .conversation_dir
            .parent()
            .unwrap_or(&self.conversation_dir);
        let mut config = json!({
            "mode": "continue",
            "persistenceDir": persist,
            "conversationId": self.conversation_id,
            "cwd": self.workspace,
            "baseUrl": format!("{bridge_url}/v1"),
        });
        if let Some(b) = budget {
            config["maxSteps"] = b.into();
        }
        if let Some(m) = &self.model {
            config["model"] = json!(if m.contains('/') {
                m.clone()
            } else {
                format!("openai/{m}")
            });
        }
        if let Some(p) = &self.prompt {
            let f = self.prompt_file();
            std::fs::write(&f, p).map_err(io(&f))?;
            config["promptFile"] = json!(f);
        }
        let mut env = super::runner::env(&self.state_dir, &config);
        env.push(("PVISOR_OPENHANDS_API_KEY".into(), bridge_key.to_string()));
        Ok(AgentCommand {
            program: self.entrypoint.clone(),
            args: vec![script.display().to_string()],
            env,
            cwd: self.workspace.clone(),
            ..Default::default()
        })
    }

    fn observe_stdout(&mut self, line: &str) -> bool {
        match serde_json::from_str::<Value>(line) {
            Ok(v) if v["type"] == "pvisor_end" => {
                self.end = Some(v);
                true
            }
            _ => false,
        }
    }

    fn verdict(&self, exit: &ExitInfo, bridge: &BridgeStats, _budget: Option<u64>) -> AgentVerdict {
        let failed = |m: String| AgentVerdict {
            status: AgentStatus::Failed,
            message: Some(m),
        };
        let Some(end) = &self.end else {
            return failed(format!(
                "the OpenHands runner ended without its final report (exit {:?}, signal {:?})",
                exit.code, exit.signal
            ));
        };
        if end["ok"] != true {
            return failed(format!(
                "the OpenHands runner failed: {}",
                end["error"].as_str().unwrap_or("")
            ));
        }
        if exit.code != Some(0) {
            return failed(format!("the OpenHands runner exited with {:?}", exit.code));
        }
        let calls = end["model_calls"].as_u64().unwrap_or(0);
        if calls == 0 && bridge.steps == 0 {
            return failed(format!(
                "OpenHands made no model call through the bridge (status {})",
                end["execution_status"]
            ));
        }
        match end["agent_status"].as_str() {
            Some("completed") => AgentVerdict {
                status: AgentStatus::Completed,
                message: None,
            },
            Some("max_steps") => AgentVerdict {
                status: AgentStatus::MaxSteps,
                message: None,
            },
            _ => failed(format!(
                "the conversation ended in status {} ({}: {})",
                end["execution_status"],
                end["error_code"].as_str().unwrap_or("no error code"),
                end["error_detail"]
                    .as_str()
                    .or(end["exception"].as_str())
                    .unwrap_or("")
            )),
        }
    }

    fn finish(&mut self) -> Result<Option<ContinuedSession>, AdapterError> {
        let _ = std::fs::remove_file(self.prompt_file());
        super::runner::kill_tmux(&self.state_dir);
        let bundle =
            super::store::read(&self.conversation_dir).map_err(io(&self.conversation_dir))?;
        let got = event_lines(&bundle);
        let same = got.len() >= self.rebuilt_events.len()
            && got.iter().zip(&self.rebuilt_events).all(|(a, b)| a == b);
        if !same {
            return Err(AdapterError::Continuation(
                "the continued conversation does not start with the rebuilt events (OpenHands rewrote them)".into(),
            ));
        }
        if let Some(d) = self.continued_artifact.parent() {
            std::fs::create_dir_all(d).map_err(io(d))?;
        }
        std::fs::write(&self.continued_artifact, &bundle).map_err(io(&self.continued_artifact))?;
        Ok(Some(ContinuedSession {
            session_id: self.conversation_id.clone(),
            native_path: self.conversation_dir.clone(),
            artifact_path: self.continued_artifact.clone(),
            digest: format!("blake3:{}", blake3::hash(&bundle).to_hex()),
            records: 1 + got.len() as u64,
            removed: vec![],
        }))
    }
}
