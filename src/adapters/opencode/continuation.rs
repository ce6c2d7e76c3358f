//! Continuing a rebuilt OpenCode session with the real `opencode run --format=json --session
//! <id> <nonce>` through the Chat Completions bridge.
//!
//! - The rebuilt export is imported (`opencode import`) into the run's isolated home, in the
//!   workspace (the session's directory), into an empty store, so every id is kept. When the
//!   agent's clock is not after the recorded ids, it is imported again moved back in time
//!   ([`super::clock`]; journaled as the neutralized fact `opencode:message_clock`).
//! - The session's provider is pointed at the bridge with `OPENCODE_CONFIG_CONTENT` (which
//!   OpenCode merges over the project's `opencode.json`); the bridge key is its API key.
//!   The plugin install OpenCode starts in the background is pre-empted (its config dir is
//!   seeded), models.dev, autoupdate, share and LSP downloads are off: no network.
//! - `run` needs a message: a per-run nonce, which the bridge removes
//!   ([`super::request_rules::OpenCodeRules`]).
//! - stdout goes to a file the runner tails. Two watchdogs: the step budget (OpenCode has no
//!   turn limit of its own: when it asks for one model reply more than the budget, the
//!   bridge holds the request and the runner interrupts OpenCode with SIGINT;
//!   `agent_status: max_steps`, `metadata.opencode_step_budget`), and ten minutes without
//!   output or model request (`metadata.opencode_idle`).
//! - After exit the session is read back from the store, cleaned of the nonce message and of
//!   the unanswered step a SIGINT leaves, and written as the `continued` export.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::request_rules::OpenCodeRules;
use super::session::Session;
use crate::bridge::BridgeStats;
use crate::kit::{AdapterError, RebuiltSession, RequestRules};
use crate::protocol::Protocol;
use crate::runner::{
    AgentCommand, AgentVerdict, ContinuationAgent, ContinuedSession, ExitInfo, StdinMode, Watchdogs,
};
use journal_format::event::AgentStatus;

/// How long OpenCode may write nothing and ask the model nothing.
pub const IDLE_LIMIT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone)]
pub struct OpenCodeContinuation {
    pub entrypoint: PathBuf,
    pub workspace: PathBuf,
    pub home: PathBuf,
    pub export: PathBuf,
    pub session_id: String,
    pub continued_artifact: PathBuf,
    pub nonce: String,
    pub model: Option<String>,
    pub path_env: String,
    /// `(providerID, modelID)` and agent of the session's last user message.
    provider: String,
    model_id: String,
    agent: String,
    stdout_file: PathBuf,
    rebuilt: Session,
    /// The session as imported when the agent's clock is behind the recording
    /// ([`super::clock`]), with the map from its ids back to the recorded ones.
    moved: Option<(Session, std::collections::HashMap<String, String>)>,
    neutralized: Vec<journal_format::event::Neutralized>,
    error: Option<String>,
    finished_stop: bool,
}

/// `(providerID, modelID, agent)` the session's last user message ran with.
pub fn session_model(session: &Session) -> Option<(String, String, String)> {
    let m = session.messages.iter().rev().find(|m| m.role() == "user")?;
    let model = m.info.get("model")?;
    Some((
        model.get("providerID")?.as_str()?.to_string(),
        model.get("modelID")?.as_str()?.to_string(),
        m.info
            .get("agent")
            .and_then(Value::as_str)
            .unwrap_or("build")
            .to_string(),
    ))
}

/// The project config of `dir` (`opencode.json`, else `opencode.jsonc` with its comments
/// removed).
pub fn project_config(dir: &Path) -> Option<Value> {
    for name in ["opencode.json", "opencode.jsonc"] {
        if let Ok(text) = std::fs::read_to_string(dir.join(name)) {
            return serde_json::from_str(&strip_jsonc(&text)).ok();
        }
    }
    None
}

/// JSONC → JSON: `//` and `/* */` comments and trailing commas removed (strings kept).
fn strip_jsonc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let b: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        let c = b[i];
        if in_str {
            out.push(c);
            if c == '\\' && i + 1 < b.len() {
                out.push(b[i + 1]);
                i += 2;
                continue;
            }
            if c == '"' {
                in_str = false;
            }
            i += 1;
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                out.push(c);
                i += 1;
            }
            '/' if b.get(i + 1) == Some(&'/') => {
                while i < b.len() && b[i] != '\n' {
                    i += 1;
                }
            }
            '/' if b.get(i + 1) == Some(&'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == '*' && b[i + 1] == '/') {
                    i += 1;
                }
                i += 2;
            }
            ',' => {
                let mut j = i + 1;
                while j < b.len() && b[j].is_whitespace() {
                    j += 1;
                }
                if !matches!(b.get(j), Some('}' | ']')) {
                    out.push(c);
                }
                i += 1;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// Why the session cannot be continued through the bridge from `workspace`, if it cannot:
/// the provider must be an OpenAI-compatible one of the project config.
pub fn provider_refusal(session: &Session, workspace: &Path) -> Option<String> {
    let Some((provider, model, _)) = session_model(session) else {
        return Some("the session records no model for its last user message (the event stream of `opencode run` has no user message: pass the session's `opencode export` JSON or its opencode.db)".into());
    };
    let Some(cfg) = project_config(workspace) else {
        return Some(format!(
            "{} has no opencode.json: the session's provider `{provider}` must be configured in the workspace",
            workspace.display()
        ));
    };
    let Some(p) = cfg.pointer(&format!("/provider/{provider}")) else {
        return Some(format!(
            "provider `{provider}` (model {model}) is not configured in {}/opencode.json; pvisor continues OpenCode through an OpenAI-compatible provider of the project config",
            workspace.display()
        ));
    };
    match p.get("npm").and_then(Value::as_str) {
        Some("@ai-sdk/openai-compatible") => None,
        other => Some(format!(
            "provider `{provider}` uses {}; pvisor continues OpenCode through `@ai-sdk/openai-compatible` providers (Chat Completions) only",
            other.unwrap_or("no npm package")
        )),
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AdapterError + '_ {
    move |source| AdapterError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl OpenCodeContinuation {
    pub fn new(
        entrypoint: &Path,
        rebuilt: &RebuiltSession,
        workspace: &Path,
        state_dir: &Path,
        continued_artifact: &Path,
    ) -> Result<Self, AdapterError> {
        let bytes = std::fs::read(&rebuilt.native_path).map_err(io(&rebuilt.native_path))?;
        let parsed = super::parse::parse_bytes(&rebuilt.native_path, &bytes)?;
        let session = parsed.session.clone();
        if let Some(why) = provider_refusal(&session, workspace) {
            return Err(AdapterError::Unsupported(why));
        }
        let (provider, model_id, agent) = session_model(&session).expect("checked above");
        let nonce = format!(
            "pvisor-opencode-resume-{}",
            &crate::bridge::random_key()[4..28]
        );
        let home = super::rebuild::home_dir(state_dir);
        Ok(OpenCodeContinuation {
            entrypoint: entrypoint.to_path_buf(),
            workspace: workspace.to_path_buf(),
            export: rebuilt.native_path.clone(),
            session_id: rebuilt.session_id.clone(),
            continued_artifact: continued_artifact.to_path_buf(),
            nonce,
            model: None,
            path_env: "/usr/local/bin:/usr/bin:/bin".into(),
            provider,
            model_id,
            agent,
            stdout_file: state_dir.join("opencode/run-stdout.jsonl"),
            home,
            rebuilt: session,
            moved: None,
            neutralized: vec![],
            error: None,
            finished_stop: false,
        })
    }

    fn env(&self, extra: &[(&str, String)]) -> Vec<(String, String)> {
        let mut path = self.path_env.clone();
        if let Some(dir) = crate::install::helper_near(Some(&self.entrypoint), &super::ENTRY, "rg")
            .and_then(|p| p.parent().map(Path::to_path_buf))
        {
            path = format!("{}:{path}", dir.display());
        }
        let mut env = super::rebuild::agent_env_vars(&self.home);
        env.extend([
            ("PATH".into(), path),
            (
                "SHELL".into(),
                std::env::var("SHELL").unwrap_or_else(|_| "/bin/bash".into()),
            ),
            (
                "LANG".into(),
                std::env::var("LANG").unwrap_or_else(|_| "C.UTF-8".into()),
            ),
            ("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()),
            ("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()),
            ("OPENCODE_DISABLE_LSP_DOWNLOAD".into(), "1".into()),
            ("OPENCODE_DISABLE_SHARE".into(), "1".into()),
        ]);
        if let Ok(tz) = std::env::var("TZ") {
            env.push(("TZ".into(), tz));
        }
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
        env
    }

    /// The isolated home, with OpenCode's config dir seeded so that its background plugin
    /// install finds nothing to do (no network).
    fn prepare_home(&self) -> Result<(), AdapterError> {
        super::rebuild::seed_config_dir(&self.home)
            .map_err(io(&super::rebuild::config_dir(&self.home)))
    }

    /// `opencode import <export>` in the workspace, into an empty store (an earlier attempt's
    /// store is removed: a live continuation is never resumed, and a moved import must not
    /// meet the recorded ids).
    fn import(&self, export: &Path) -> Result<(), AdapterError> {
        let store = self.store();
        for suffix in ["", "-wal", "-shm"] {
            let f = PathBuf::from(format!("{}{suffix}", store.display()));
            match std::fs::remove_file(&f) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&f)(e)),
                _ => {}
            }
        }
        let out = std::process::Command::new(&self.entrypoint)
            .arg("import")
            .arg(export)
            .current_dir(&self.workspace)
            .env_clear()
            .envs(self.env(&[]))
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| {
                AdapterError::Continuation(format!("cannot run `opencode import`: {e}"))
            })?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success()
            || !stdout.contains(&format!("Imported session: {}", self.session_id))
        {
            return Err(AdapterError::Continuation(format!(
                "`opencode import {}` did not import session {} (exit {:?}): {} {}",
                export.display(),
                self.session_id,
                out.status.code(),
                stdout.trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    fn store(&self) -> PathBuf {
        super::rebuild::data_dir(&self.home).join("opencode.db")
    }

    /// Imports the rebuilt session; when the agent's clock (read back from the store) is
    /// not safely after the recorded ids, imports it again moved back in time.
    fn import_before_the_agent_clock(&mut self) -> Result<(), AdapterError> {
        self.import(&self.export.clone())?;
        self.moved = None;
        self.neutralized.clear();
        let Some(now) = super::clock::agent_clock(&self.store()) else {
            return Ok(());
        };
        let Some(delta) = super::clock::needed_shift(&self.rebuilt, now) else {
            return Ok(());
        };
        let (moved, back) = super::clock::shifted(&self.rebuilt, delta);
        let path = self.stdout_file.with_file_name("import-moved-back.json");
        let text = serde_json::to_string_pretty(&moved.to_export()).expect("JSON values serialize");
        std::fs::write(&path, text).map_err(io(&path))?;
        self.import(&path)?;
        let newest = self
            .rebuilt
            .messages
            .iter()
            .filter_map(|m| m.info.pointer("/time/created").and_then(Value::as_u64))
            .max()
            .unwrap_or(0);
        self.neutralized.push(journal_format::event::Neutralized {
            fact: "opencode:message_clock".into(),
            recorded: crate::report::export::rfc3339(newest),
            live: format!(
                "{} (moved back {delta} ms: the agent's clock reads {})",
                crate::report::export::rfc3339(newest.saturating_sub(delta)),
                crate::report::export::rfc3339(now)
            ),
        });
        self.moved = Some((moved, back));
        Ok(())
    }
}

impl ContinuationAgent for OpenCodeContinuation {
    fn protocol(&self) -> Protocol {
        Protocol::OpenaiChat
    }

    fn request_rules(&self) -> std::sync::Arc<dyn RequestRules> {
        std::sync::Arc::new(OpenCodeRules::new(&self.nonce))
    }

    fn watchdogs(&self) -> Watchdogs {
        Watchdogs {
            step_budget: Some("opencode_step_budget".into()),
            idle: Some(("opencode_idle".into(), IDLE_LIMIT)),
        }
    }

    fn command(
        &mut self,
        bridge_url: &str,
        bridge_key: &str,
        _budget: Option<u64>,
    ) -> Result<AgentCommand, AdapterError> {
        self.prepare_home()?;
        self.import_before_the_agent_clock()?;
        let overlay = json!({
            "autoupdate": false,
            "share": "disabled",
            "provider": {
                (self.provider.clone()): {"options": {"baseURL": format!("{bridge_url}/v1"), "apiKey": bridge_key}},
            },
        });
        let model = self.model.clone().unwrap_or_else(|| self.model_id.clone());
        let args = vec![
            "run".to_string(),
            "--format=json".into(),
            "--dangerously-skip-permissions".into(),
            "--session".into(),
            self.session_id.clone(),
            "--model".into(),
            format!("{}/{model}", self.provider),
            "--agent".into(),
            self.agent.clone(),
            self.nonce.clone(),
        ];
        Ok(AgentCommand {
            program: self.entrypoint.clone(),
            args,
            env: self.env(&[("OPENCODE_CONFIG_CONTENT", overlay.to_string())]),
            cwd: self.workspace.clone(),
            stdin: StdinMode::Null,
            neutralized: self.neutralized.clone(),
            stdout_file: Some(self.stdout_file.clone()),
        })
    }

    fn observe_stdout(&mut self, line: &str) -> bool {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            return false;
        };
        match v.get("type").and_then(Value::as_str) {
            Some("error") => {
                let e = &v["error"];
                let name = e.get("name").and_then(Value::as_str).unwrap_or("error");
                let msg = e
                    .pointer("/data/message")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                self.error = Some(format!("{name}: {msg}"));
            }
            Some("step_finish") => {
                self.finished_stop =
                    v.pointer("/part/reason").and_then(Value::as_str) == Some("stop");
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
        if let Some(e) = &self.error {
            return failed(format!("opencode reported an error: {e}"));
        }
        if exit.code != Some(0) {
            return failed(format!(
                "opencode exited with code {:?} (signal {:?})",
                exit.code, exit.signal
            ));
        }
        if bridge.steps == 0 {
            return failed("opencode finished without any model reply through the bridge".into());
        }
        AgentVerdict {
            status: AgentStatus::Completed,
            message: None,
        }
    }

    fn finish(&mut self) -> Result<Option<ContinuedSession>, AdapterError> {
        let store = self.store();
        let mut s = super::store::read_session(&store)?;
        if s.id() != self.session_id {
            return Err(AdapterError::Continuation(format!(
                "the store holds session {}, not the imported {}",
                s.id(),
                self.session_id
            )));
        }
        // The prefix must be the imported one, message for message.
        let imported = self.moved.as_ref().map(|(m, _)| m).unwrap_or(&self.rebuilt);
        let k = imported.messages.len();
        for (i, m) in imported.messages.iter().enumerate() {
            let Some(got) = s.messages.get(i) else {
                return Err(AdapterError::Continuation(format!(
                    "the continued session lost message {}",
                    m.id()
                )));
            };
            let ids = |x: &super::session::Message| {
                x.parts.iter().map(|p| p["id"].clone()).collect::<Vec<_>>()
            };
            if got.id() != m.id() || ids(got) != ids(m) {
                return Err(AdapterError::Continuation(format!(
                    "the continued session's message {i} is not the rebuilt {}",
                    m.id()
                )));
            }
        }
        let mut removed = Vec::new();
        let mut prompt_ids = Vec::new();
        let last_user = imported
            .messages
            .iter()
            .rev()
            .find(|m| m.role() == "user")
            .map(|m| m.id().to_string());
        let mut kept = s.messages[..k].to_vec();
        for m in s.messages.drain(k..) {
            let is_nonce = m.role() == "user"
                && m.parts
                    .iter()
                    .all(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                && m.parts
                    .iter()
                    .any(|p| p.get("text").and_then(Value::as_str) == Some(self.nonce.as_str()));
            if is_nonce {
                prompt_ids.push(m.id().to_string());
                removed.push("opencode:resume_prompt".to_string());
                continue;
            }
            let unanswered = m.role() == "assistant"
                && m.info.pointer("/time/completed").is_none()
                && m.parts
                    .iter()
                    .all(|p| p.get("type").and_then(Value::as_str) == Some("step-start"));
            if unanswered {
                removed.push("opencode:unanswered_step".to_string());
                continue;
            }
            let mut m = m;
            if let (Some(parent), Some(last)) =
                (m.info.get("parentID").and_then(Value::as_str), &last_user)
            {
                if prompt_ids.iter().any(|p| p == parent) {
                    m.info["parentID"] = json!(last);
                }
            }
            kept.push(m);
        }
        if let Some((_, back)) = &self.moved {
            // The recorded prefix, and the new messages' references to it, as recorded.
            kept.splice(..k, self.rebuilt.messages.iter().cloned());
            for m in &mut kept[k..] {
                super::clock::map_back(&mut m.info, back);
                m.parts
                    .iter_mut()
                    .for_each(|p| super::clock::map_back(p, back));
            }
        }
        s.messages = kept;
        let text = format!(
            "{}\n",
            serde_json::to_string_pretty(&s.to_export()).expect("JSON values serialize")
        );
        if text.contains(&self.nonce) {
            return Err(AdapterError::Continuation(
                "the resume nonce remains in the continued session".into(),
            ));
        }
        if let Some(d) = self.continued_artifact.parent() {
            std::fs::create_dir_all(d).map_err(io(d))?;
        }
        std::fs::write(&self.continued_artifact, &text).map_err(io(&self.continued_artifact))?;
        Ok(Some(ContinuedSession {
            session_id: self.session_id.clone(),
            native_path: store,
            artifact_path: self.continued_artifact.clone(),
            digest: format!("blake3:{}", blake3::hash(text.as_bytes()).to_hex()),
            records: s.messages.iter().map(|m| 1 + m.parts.len() as u64).sum(),
            removed,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonc_comments_and_trailing_commas() {
        let v: Value = serde_json::from_str(&strip_jsonc(
            "{\n // c\n \"a\": \"x//y\", /* b */ \"b\": [1,2,],\n}",
        ))
        .unwrap();
        assert_eq!(v, json!({"a": "x//y", "b": [1, 2]}));
    }
}
