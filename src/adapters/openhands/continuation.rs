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
use crate::kit::companion::{litellm_openai_model, EndReport};
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
    /// The length of the rebuilt prefix (messages), where the live messages start.
    prefix_len: usize,
    end: EndReport,
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
            prefix_len: rebuilt.prefix.len(),
            end: EndReport::default(),
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
            config["model"] = json!(litellm_openai_model(m));
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
        self.end.observe(line)
    }

    fn verdict(&self, exit: &ExitInfo, bridge: &BridgeStats, _budget: Option<u64>) -> AgentVerdict {
        let failed = |m: String| AgentVerdict {
            status: AgentStatus::Failed,
            message: Some(m),
        };
        let end = match self.end.checked(exit, "the OpenHands runner") {
            Ok(end) => end,
            Err(m) => return failed(m),
        };
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

    /// The SDK writes every event as it happens, so after a crash its store holds the rebuilt
    /// events and the live ones up to the instant of the kill. Cut after the last complete
    /// live turn that did not end the run (every action answered; a `finish` or a text reply,
    /// asked again, ends it again), set the store `idle` with its leaf there, and render the
    /// kept live turns as the SDK will send them.
    fn resume(&mut self, write: bool) -> Result<crate::runner::ResumeInfo, AdapterError> {
        if self.prompt.is_some() {
            return Err(AdapterError::Unsupported(
                "resuming an OpenHands continuation that was given a boundary prompt: start a new run".into(),
            ));
        }
        let k = self.rebuilt_events.len();
        let bundle = super::store::read(&self.conversation_dir).ok();
        let events = bundle.as_deref().map(event_lines).unwrap_or_default();
        if events.len() < k || events[..k] != self.rebuilt_events[..] {
            return Err(AdapterError::Continuation(
                "resuming: the OpenHands store no longer starts with the rebuilt events".into(),
            ));
        }
        let live: Vec<Value> = events[k..]
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or(Value::Null))
            .collect();
        let (cut, turns) = live_cut(&live);
        let mut info = crate::runner::ResumeInfo {
            live: vec![],
            complete_turns: turns,
            interrupted: None,
        };
        if !write {
            return Ok(info);
        }
        let bundle = bundle.unwrap_or_default();
        let first = String::from_utf8_lossy(&bundle)
            .lines()
            .next()
            .unwrap_or("{}")
            .to_string();
        let mut base: Value = serde_json::from_str(&first)
            .map_err(|e| AdapterError::Continuation(format!("resuming: base_state.json: {e}")))?;
        let kept: Vec<(String, String)> = events[..k + cut]
            .iter()
            .map(|l| {
                let id = serde_json::from_str::<Value>(l)
                    .ok()
                    .and_then(|v| v["id"].as_str().map(str::to_string));
                (id.unwrap_or_default(), l.clone())
            })
            .collect();
        if let Some(o) = base.as_object_mut() {
            o.insert("execution_status".into(), json!("idle"));
            if o.contains_key("leaf_event_id") {
                o.insert(
                    "leaf_event_id".into(),
                    json!(kept.last().map(|(id, _)| id.clone())),
                );
            }
        }
        let cut_store = super::rebuild::Cut {
            base_state: base,
            events: kept,
        };
        cut_store.write(&self.conversation_dir)?;
        let persist = self
            .conversation_dir
            .parent()
            .unwrap_or(&self.conversation_dir);
        let answer = super::runner::one_shot(
            &self.entrypoint,
            &self.state_dir,
            &self.workspace,
            &json!({"mode": "messages", "persistenceDir": persist, "conversationId": self.conversation_id, "cwd": self.workspace}),
        )
        .map_err(|e| AdapterError::Continuation(format!("resuming: OpenHands could not load its store: {e}")))?;
        let messages = answer["messages"].as_array().cloned().unwrap_or_default();
        info.live = messages.get(self.prefix_len..).unwrap_or_default().to_vec();
        Ok(info)
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

fn kind(e: &Value) -> &str {
    e["kind"].as_str().unwrap_or("")
}

/// The number of live events up to the last complete turn that did not end the run, and the
/// number of those turns. A turn is one LLM response: its `ActionEvent`s (complete when each
/// call has its result) or an agent `MessageEvent` (a text reply, which ends the run, as a
/// `finish` call does: asked again, it ends it again).
pub fn live_cut(live: &[Value]) -> (usize, u64) {
    let (mut cut, mut turns) = (0usize, 0u64);
    let mut i = 0;
    while i < live.len() {
        let e = &live[i];
        let is_reply = kind(e) == "MessageEvent" && e["source"] == "agent";
        if is_reply {
            break;
        }
        if kind(e) != "ActionEvent" {
            i += 1;
            continue;
        }
        let response = e["llm_response_id"].clone();
        let mut j = i;
        while j < live.len()
            && kind(&live[j]) == "ActionEvent"
            && live[j]["llm_response_id"] == response
        {
            j += 1;
        }
        let actions = &live[i..j];
        if actions.iter().any(|a| a["tool_name"] == "finish") {
            break;
        }
        let mut end = j;
        let mut complete = true;
        for a in actions {
            let id = &a["tool_call_id"];
            match live[j..].iter().position(|r| {
                matches!(
                    kind(r),
                    "ObservationEvent" | "AgentErrorEvent" | "UserRejectObservation"
                ) && &r["tool_call_id"] == id
            }) {
                Some(p) => end = end.max(j + p + 1),
                None => complete = false,
            }
        }
        if !complete {
            break;
        }
        turns += 1;
        cut = end;
        i = end;
    }
    (cut, turns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(resp: &str, id: &str, tool: &str) -> Value {
        json!({"kind": "ActionEvent", "llm_response_id": resp, "tool_call_id": id, "tool_name": tool, "id": id})
    }
    fn obs(id: &str) -> Value {
        json!({"kind": "ObservationEvent", "tool_call_id": id, "id": format!("o{id}")})
    }

    #[test]
    fn the_cut_keeps_complete_turns_that_did_not_end_the_run() {
        assert_eq!(live_cut(&[]), (0, 0));
        let a = |r, i| action(r, i, "terminal");
        assert_eq!(
            live_cut(&[a("r1", "c1"), obs("c1"), a("r2", "c2"), obs("c2")]),
            (4, 2)
        );
        assert_eq!(
            live_cut(&[
                a("r1", "c1"),
                a("r1", "c2"),
                obs("c1"),
                obs("c2"),
                a("r2", "c3")
            ]),
            (4, 1),
            "a turn without its results is the interrupted one"
        );
        assert_eq!(
            live_cut(&[a("r1", "c1"), a("r1", "c2"), obs("c1")]),
            (0, 0),
            "a parallel batch missing a result"
        );
        let reply = json!({"kind": "MessageEvent", "source": "agent"});
        assert_eq!(live_cut(&[a("r1", "c1"), obs("c1"), reply]), (2, 1));
        assert_eq!(
            live_cut(&[
                a("r1", "c1"),
                obs("c1"),
                action("r2", "c2", "finish"),
                obs("c2")
            ]),
            (2, 1),
            "finish ends the run: asked again"
        );
        let err = json!({"kind": "ConversationErrorEvent"});
        assert_eq!(live_cut(&[a("r1", "c1"), obs("c1"), err]), (2, 1));
    }
}
