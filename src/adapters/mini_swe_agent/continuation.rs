//! Continuing a rebuilt mini trajectory with mini's own agent loop, in the companion runner
//! preloaded into the real mini entrypoint ([`super::runner`], continue mode): it loads the
//! rebuilt trajectory's messages (recorded system and task messages included, never
//! re-rendered), appends the boundary prompt as one `user` message when there is one, points
//! litellm at the bridge (`litellm.api_base`/`api_key`: neither saved nor seen by commands),
//! restores mini's counters from the messages (`n_calls`, `cost`, consecutive format errors)
//! and runs the body of mini's own `run()` loop (`agent.step()` until an `exit`), saving the
//! trajectory in its original format over the rebuilt file after every step (2.x) or at the
//! end (1.x). The budget is mini's own `step_limit` (prefix calls + budget): mini stops with
//! its genuine `LimitsExceeded` and never sends the request beyond it; the recorded
//! `step_limit` is put back into the saved configuration.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::bridge::BridgeStats;
use crate::kit::{AdapterError, RebuiltSession, RequestRules};
use crate::protocol::Protocol;
use crate::runner::{AgentCommand, AgentVerdict, ContinuationAgent, ContinuedSession, ExitInfo};
use journal_format::event::AgentStatus;

pub struct MiniContinuation {
    pub entrypoint: PathBuf,
    pub state_dir: PathBuf,
    pub workspace: PathBuf,
    pub session_file: PathBuf,
    pub session_id: String,
    pub continued_artifact: PathBuf,
    pub model: Option<String>,
    pub prompt: Option<String>,
    /// The rebuilt messages: the continued trajectory must start with them.
    rebuilt: Vec<Value>,
    end: Option<Value>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AdapterError + '_ {
    move |source| AdapterError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The messages of a trajectory file.
fn messages_of(path: &Path) -> Result<Vec<Value>, AdapterError> {
    let bytes = std::fs::read(path).map_err(io(path))?;
    let p = super::parse::parse_bytes(path, &bytes)?;
    Ok(p.messages().to_vec())
}

impl MiniContinuation {
    pub fn new(
        entrypoint: &Path,
        rebuilt: &RebuiltSession,
        workspace: &Path,
        state_dir: &Path,
        continued_artifact: &Path,
        model: Option<&str>,
        prompt: Option<&str>,
    ) -> Result<Self, AdapterError> {
        Ok(MiniContinuation {
            entrypoint: entrypoint.to_path_buf(),
            state_dir: state_dir.to_path_buf(),
            workspace: workspace.to_path_buf(),
            session_file: rebuilt.native_path.clone(),
            session_id: rebuilt.session_id.clone(),
            continued_artifact: continued_artifact.to_path_buf(),
            model: model.map(str::to_string),
            prompt: prompt.map(str::to_string),
            rebuilt: messages_of(&rebuilt.native_path)?,
            end: None,
        })
    }

    fn prompt_file(&self) -> PathBuf {
        self.state_dir.join("mini/boundary-prompt.txt")
    }
}

impl ContinuationAgent for MiniContinuation {
    fn protocol(&self) -> Protocol {
        Protocol::OpenaiChat
    }

    fn request_rules(&self) -> std::sync::Arc<dyn RequestRules> {
        std::sync::Arc::new(super::request_rules::MiniRules {
            prompt: self.prompt.is_some(),
        })
    }

    fn command(
        &mut self,
        bridge_url: &str,
        bridge_key: &str,
        budget: Option<u64>,
    ) -> Result<AgentCommand, AdapterError> {
        let dir = self.state_dir.join("mini");
        let preload = super::runner::materialize(&dir).map_err(io(&dir))?;
        let mut config = json!({
            "mode": "continue",
            "trajectory": self.session_file,
            "output": self.session_file,
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
        let mut env = super::runner::env(&self.state_dir, &preload, &config);
        env.push(("PVISOR_MINI_API_KEY".into(), bridge_key.to_string()));
        Ok(AgentCommand {
            program: self.entrypoint.clone(),
            args: super::runner::ARGS.iter().map(|a| a.to_string()).collect(),
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

    fn verdict(&self, exit: &ExitInfo, bridge: &BridgeStats, budget: Option<u64>) -> AgentVerdict {
        let failed = |m: String| AgentVerdict {
            status: AgentStatus::Failed,
            message: Some(m),
        };
        let Some(end) = &self.end else {
            return failed(format!(
                "mini's runner ended without its final report (exit {:?}, signal {:?})",
                exit.code, exit.signal
            ));
        };
        if end["ok"] != true {
            return failed(format!(
                "mini's runner failed: {}",
                end["error"].as_str().unwrap_or("")
            ));
        }
        if let Some(e) = end["error"].as_str() {
            return failed(format!("mini stopped on an error: {e}"));
        }
        if exit.code != Some(0) {
            return failed(format!("mini's runner exited with {:?}", exit.code));
        }
        let status = end["exit_status"].as_str().unwrap_or("");
        let steps = end["steps"].as_u64().unwrap_or(0);
        if steps == 0 && bridge.steps == 0 {
            return failed(format!(
                "mini made no model call through the bridge (exit status {status:?})"
            ));
        }
        match status {
            "LimitsExceeded" if budget.is_some_and(|b| steps >= b) => AgentVerdict {
                status: AgentStatus::MaxSteps,
                message: None,
            },
            "Submitted" => AgentVerdict {
                status: AgentStatus::Completed,
                message: None,
            },
            other => AgentVerdict {
                status: AgentStatus::Completed,
                message: Some(format!("mini's exit status: {other}")),
            },
        }
    }

    fn finish(&mut self) -> Result<Option<ContinuedSession>, AdapterError> {
        let _ = std::fs::remove_file(self.prompt_file());
        let bytes = std::fs::read(&self.session_file).map_err(io(&self.session_file))?;
        let p = super::parse::parse_bytes(&self.session_file, &bytes)?;
        let got = p.messages();
        let same =
            got.len() >= self.rebuilt.len() && got.iter().zip(&self.rebuilt).all(|(a, b)| a == b);
        if !same {
            return Err(AdapterError::Continuation(
                "the continued trajectory does not start with the rebuilt messages (mini rewrote them)".into(),
            ));
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
            records: got.len() as u64,
            removed: vec![],
        }))
    }
}
