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

use super::versions::Format;
use crate::bridge::BridgeStats;
use crate::kit::companion::{litellm_openai_model, EndReport};
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
    /// The rebuilt trajectory's artifact copy (never written by mini).
    rebuilt_artifact: PathBuf,
    end: EndReport,
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
            // The artifact: the native file holds the live turns once mini has run.
            rebuilt: messages_of(&rebuilt.artifact_path)?,
            rebuilt_artifact: rebuilt.artifact_path.clone(),
            end: EndReport::default(),
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
            config["model"] = json!(litellm_openai_model(m));
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
        self.end.observe(line)
    }

    fn verdict(&self, exit: &ExitInfo, bridge: &BridgeStats, budget: Option<u64>) -> AgentVerdict {
        let failed = |m: String| AgentVerdict {
            status: AgentStatus::Failed,
            message: Some(m),
        };
        let end = match self.end.checked(exit, "mini's runner") {
            Ok(end) => end,
            Err(m) => return failed(m),
        };
        if let Some(e) = end["error"].as_str() {
            return failed(format!("mini stopped on an error: {e}"));
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

    /// mini saves its whole trajectory after every step (2.x) or at the end (1.x), over the
    /// rebuilt file, so the file holds the rebuilt messages and the live turns up to a step
    /// boundary (or, killed during a save, a torn file: no live turn survives). Cut after the
    /// last complete live turn that did not end the run (an `exit` takes the turn before it).
    fn resume(&mut self, write: bool) -> Result<crate::runner::ResumeInfo, AdapterError> {
        if self.prompt.is_some() {
            return Err(AdapterError::Unsupported(
                "resuming a mini continuation that was given a boundary prompt: start a new run"
                    .into(),
            ));
        }
        let artifact = std::fs::read(&self.rebuilt_artifact).map_err(io(&self.rebuilt_artifact))?;
        let base = super::parse::parse_bytes(&self.rebuilt_artifact, &artifact)?;
        let continued = std::fs::read(&self.session_file)
            .ok()
            .and_then(|b| super::parse::parse_bytes(&self.session_file, &b).ok());
        let (doc, msgs) = match &continued {
            Some(p) => (p.doc.clone(), p.messages().to_vec()),
            None => (base.doc.clone(), self.rebuilt.clone()),
        };
        let k = self.rebuilt.len();
        if msgs.len() < k || msgs[..k] != self.rebuilt[..] {
            return Err(AdapterError::Continuation(
                "resuming: mini's trajectory no longer starts with the rebuilt messages".into(),
            ));
        }
        let (cut, turns) = live_cut(base.format, &msgs[k..]);
        let live = &msgs[k..k + cut];
        if write {
            let mut doc = doc;
            doc["messages"] = Value::Array(msgs[..k + cut].to_vec());
            let text = super::pyjson::dumps(&doc);
            std::fs::write(&self.session_file, text).map_err(io(&self.session_file))?;
        }
        Ok(crate::runner::ResumeInfo {
            live: super::rebuild::api_prefix(base.format, live),
            complete_turns: turns,
            interrupted: None,
        })
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

/// Whether `m` is a model reply (a turn): an assistant message, or 2.x's format error.
fn is_turn(m: &Value) -> bool {
    m["role"] == "assistant"
        || m.pointer("/extra/interrupt_type").and_then(Value::as_str) == Some("FormatError")
}

/// How many results a turn waits for: its tool calls (2.x), its parsed actions (text-based
/// 2.x), one answer (1.x), none (a format error).
fn results_of(format: Format, m: &Value) -> usize {
    if m["role"] != "assistant" {
        return 0;
    }
    match format {
        Format::V1 => 1,
        Format::V1_1 => match m["tool_calls"].as_array().filter(|a| !a.is_empty()) {
            Some(calls) => calls.len(),
            None => m
                .pointer("/extra/actions")
                .and_then(Value::as_array)
                .map_or(0, Vec::len),
        },
    }
}

/// The length of the live messages up to the last complete turn that did not end the run,
/// and the number of those turns. A trailing `exit` drops the turn before it (asked again, it
/// ends the run again), as does a turn without all its results.
pub fn live_cut(format: Format, live: &[Value]) -> (usize, u64) {
    let mut ends: Vec<usize> = vec![];
    let mut i = 0;
    let mut cut_before_turns = 0usize;
    while i < live.len() {
        let m = &live[i];
        if m["role"] == "exit" {
            ends.pop();
            break;
        }
        if !is_turn(m) {
            if ends.is_empty() {
                cut_before_turns = i + 1; // e.g. a message before the first turn
            }
            i += 1;
            continue;
        }
        let need = results_of(format, m);
        let got = live[i + 1..]
            .iter()
            .take(need)
            .take_while(|r| !is_turn(r) && r["role"] != "exit")
            .count();
        if got < need {
            break;
        }
        i += 1 + need;
        ends.push(i);
    }
    match ends.last() {
        Some(&e) => (e, ends.len() as u64),
        None => (cut_before_turns.min(live.len()), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn a(calls: usize) -> Value {
        let tc: Vec<Value> = (0..calls).map(|k| json!({"id": format!("c{k}")})).collect();
        json!({"role": "assistant", "content": "x", "tool_calls": tc})
    }
    fn t() -> Value {
        json!({"role": "tool", "content": "o"})
    }

    #[test]
    fn the_cut_keeps_complete_turns_that_did_not_end_the_run() {
        let fe =
            json!({"role": "user", "content": "e", "extra": {"interrupt_type": "FormatError"}});
        let exit = json!({"role": "exit", "content": ""});
        let v2 = Format::V1_1;
        assert_eq!(live_cut(v2, &[]), (0, 0));
        assert_eq!(live_cut(v2, &[a(2), t(), t(), a(1), t()]), (5, 2));
        assert_eq!(
            live_cut(v2, &[a(2), t(), t(), a(1)]),
            (3, 1),
            "results missing"
        );
        assert_eq!(live_cut(v2, &[a(1), t(), fe.clone(), a(1), t()]), (5, 3));
        assert_eq!(
            live_cut(v2, &[a(1), t(), a(1), t(), exit]),
            (2, 1),
            "exit drops its turn"
        );
        let u = |c: &str| json!({"role": "user", "content": c});
        let v1 = Format::V1;
        let asst = json!({"role": "assistant", "content": "x"});
        assert_eq!(live_cut(v1, &[asst.clone(), u("o"), asst.clone()]), (2, 1));
        assert_eq!(live_cut(v1, &[asst.clone(), u("o"), asst, u("")]), (4, 2));
    }
}
