//! Continue a rebuilt Claude Code 2.1.332 session with the real `claude` CLI through the
//! bridge (see `docs/agents/claude-code.md`, "Rebuild and continuation").
//!
//! Command (cwd = the workspace, nothing inherited from the caller's environment):
//!
//! ```text
//! HOME=<state>/agent-home CLAUDE_CONFIG_DIR=<state>/agent-home/claude
//! ANTHROPIC_BASE_URL=<bridge> ANTHROPIC_API_KEY=<per-run bridge key>
//! CLAUDE_CODE_RESUME_INTERRUPTED_TURN=1 CLAUDE_CODE_RESUME_PROMPT=<nonce>
//! DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1
//! CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 IS_SANDBOX=1 PATH=… SHELL=/bin/bash LANG=C.UTF-8 TZ=UTC
//! claude -p --resume <session-id> --input-format stream-json --output-format stream-json
//!        --verbose --dangerously-skip-permissions [--max-turns <budget>] [--model M] [extra…]
//! ```
//!
//! stdin is a pipe with no message on it, kept open until the `result` event, then closed.
//! With a session that ends on tool results Claude re-runs the interrupted turn and appends
//! one text block (the nonce) to the boundary user message; the bridge removes it.
//!
//! Budget: `--max-turns K` lets Claude make exactly K model requests (measured on 2.1.332:
//! the K-th reply's tools still run, then it stops with `subtype: error_max_turns`,
//! `num_turns: K+1`, exit code 1). That is reported as `max_steps` only when the bridge
//! answered exactly K main requests.

use super::drift::{neutralize, HostFacts};
use super::rebuild::{write_file, write_user_id, ClaudeHome};
use super::request_rules::{ClaudeRequestRules, DEFAULT_RESUME_TEXT as CLAUDE_DEFAULT_RESUME_TEXT};
use crate::bridge::BridgeStats;
use crate::kit::RequestRules;
use crate::kit::{AdapterError, RebuiltSession};
use crate::protocol::Protocol;
use crate::runner::{
    AgentCommand, AgentVerdict, ContinuationAgent, ContinuedSession, ExitInfo, StdinMode,
};
use journal_format::event::AgentStatus;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The text Claude inserts on resume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResumeText {
    /// Claude's own `Continue from where you left off.`.
    Default,
    /// `CLAUDE_CODE_RESUME_PROMPT=<nonce>`: a per-run random text that cannot collide with
    /// real content (the default).
    Nonce(String),
}

impl ResumeText {
    pub fn fresh_nonce() -> ResumeText {
        use rand::RngCore;
        let mut b = [0u8; 12];
        rand::thread_rng().fill_bytes(&mut b);
        ResumeText::Nonce(format!("PVISOR-RESUME-{}", hex::encode(b)))
    }
    pub fn text(&self) -> &str {
        match self {
            ResumeText::Default => CLAUDE_DEFAULT_RESUME_TEXT,
            ResumeText::Nonce(n) => n,
        }
    }
}

/// A Claude continuation of one rebuilt session.
#[derive(Debug, Clone)]
pub struct ClaudeContinuation {
    /// The `claude` executable.
    pub entrypoint: PathBuf,
    /// The agent's cwd (the path the session was rebuilt for).
    pub workspace: PathBuf,
    pub home: ClaudeHome,
    pub session_id: String,
    /// The session file Claude resumes (and appends to).
    pub native_path: PathBuf,
    /// Where the cleaned continued session is copied.
    pub continued_artifact: PathBuf,
    pub resume_text: ResumeText,
    /// Extra CLI flags of the original run that shape the request (e.g. `--allowedTools Glob Grep`).
    pub extra_args: Vec<String>,
    /// `--model`, when the original run used a non-default model.
    pub model: Option<String>,
    /// The original `~/.claude.json` `userID`, to keep `metadata.user_id.device_id` stable.
    pub user_id: Option<String>,
    /// `PATH` for the agent.
    pub path_env: String,
    /// Extra environment (applied last: may override anything above).
    pub extra_env: Vec<(String, String)>,
    /// The host facts Claude will observe; the session's snapshots are set to them.
    pub facts: HostFacts,
    /// The rebuilt file's bytes (snapshots set to `facts`): the continued file must start
    /// with them.
    rebuilt: Vec<u8>,
    /// Snapshots that differed from `facts` in the rebuilt session.
    neutralized: Vec<journal_format::event::Neutralized>,
    result: Option<Value>,
    init_session: Option<String>,
}

impl ClaudeContinuation {
    /// A continuation of `session` (as written by [`super::rebuild::rebuild`] for
    /// `workspace` under `state_dir`).
    pub fn new(
        entrypoint: &Path,
        session: &RebuiltSession,
        workspace: &Path,
        state_dir: &Path,
        continued_artifact: &Path,
    ) -> Result<Self, AdapterError> {
        // The artifact copy holds the same bytes as the native file right after rebuild; a
        // resumed run reads it because the native file has grown with the live turns since.
        let from = if session.artifact_path.is_file() {
            &session.artifact_path
        } else {
            &session.native_path
        };
        let rebuilt = std::fs::read_to_string(from).map_err(|source| AdapterError::Io {
            path: from.clone(),
            source,
        })?;
        let facts = HostFacts::observe(workspace);
        let (rebuilt, neutralized) = neutralize(&rebuilt, &facts);
        Ok(ClaudeContinuation {
            entrypoint: entrypoint.to_path_buf(),
            workspace: workspace.to_path_buf(),
            home: ClaudeHome::new(state_dir),
            session_id: session.session_id.clone(),
            native_path: session.native_path.clone(),
            continued_artifact: continued_artifact.to_path_buf(),
            resume_text: ResumeText::fresh_nonce(),
            extra_args: Vec::new(),
            model: None,
            user_id: None,
            path_env: "/usr/local/bin:/usr/bin:/bin".into(),
            extra_env: Vec::new(),
            facts,
            rebuilt: rebuilt.into_bytes(),
            neutralized,
            result: None,
            init_session: None,
        })
    }

    /// The agent's native session with its host/time snapshots set to [`Self::facts`].
    fn read_native(&self) -> Result<Vec<u8>, AdapterError> {
        let text =
            std::fs::read_to_string(&self.native_path).map_err(|source| AdapterError::Io {
                path: self.native_path.clone(),
                source,
            })?;
        Ok(neutralize(&text, &self.facts).0.into_bytes())
    }

    /// The `result` event Claude printed, once seen.
    pub fn result_event(&self) -> Option<&Value> {
        self.result.as_ref()
    }
}

impl ContinuationAgent for ClaudeContinuation {
    fn protocol(&self) -> Protocol {
        Protocol::Anthropic
    }

    fn request_rules(&self) -> std::sync::Arc<dyn RequestRules> {
        std::sync::Arc::new(ClaudeRequestRules::new(self.resume_text.text()))
    }

    fn command(
        &mut self,
        bridge_url: &str,
        bridge_key: &str,
        budget: Option<u64>,
    ) -> Result<AgentCommand, AdapterError> {
        if let Some(u) = &self.user_id {
            write_user_id(&self.home, u)?;
        }
        // Drift: the snapshots Claude compares on resume are set to what it observes now.
        let native = self.read_native()?;
        write_file(&self.native_path, &native)?;
        let mut args: Vec<String> = [
            "-p",
            "--resume",
            &self.session_id,
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(b) = budget {
            args.push("--max-turns".into());
            args.push(b.to_string());
        }
        if let Some(m) = &self.model {
            args.push("--model".into());
            args.push(m.clone());
        }
        args.extend(self.extra_args.iter().cloned());
        let mut env: Vec<(String, String)> = vec![
            ("PATH".into(), self.path_env.clone()),
            ("HOME".into(), self.home.home.to_string_lossy().into_owned()),
            (
                "CLAUDE_CONFIG_DIR".into(),
                self.home.config_dir.to_string_lossy().into_owned(),
            ),
            ("SHELL".into(), "/bin/bash".into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("TZ".into(), "UTC".into()),
            // Required as root (otherwise --dangerously-skip-permissions is refused).
            ("IS_SANDBOX".into(), "1".into()),
            ("ANTHROPIC_BASE_URL".into(), bridge_url.into()),
            ("ANTHROPIC_API_KEY".into(), bridge_key.into()),
            ("NO_PROXY".into(), "127.0.0.1,localhost".into()),
            ("DISABLE_TELEMETRY".into(), "1".into()),
            ("DISABLE_AUTOUPDATER".into(), "1".into()),
            ("DISABLE_ERROR_REPORTING".into(), "1".into()),
            (
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
                "1".into(),
            ),
            ("CLAUDE_CODE_RESUME_INTERRUPTED_TURN".into(), "1".into()),
        ];
        if let ResumeText::Nonce(n) = &self.resume_text {
            env.push(("CLAUDE_CODE_RESUME_PROMPT".into(), n.clone()));
        }
        for (k, v) in &self.extra_env {
            env.retain(|(ek, _)| ek != k);
            env.push((k.clone(), v.clone()));
        }
        Ok(AgentCommand {
            program: self.entrypoint.clone(),
            args,
            env,
            cwd: self.workspace.clone(),
            stdin: StdinMode::OpenUntilResult,
            neutralized: self.neutralized.clone(),
            stdout_file: None,
        })
    }

    fn observe_stdout(&mut self, line: &str) -> bool {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            return false;
        };
        match v.get("type").and_then(Value::as_str) {
            Some("system") if v.get("subtype").and_then(Value::as_str) == Some("init") => {
                self.init_session = v
                    .get("session_id")
                    .and_then(Value::as_str)
                    .map(String::from);
                false
            }
            Some("result") => {
                self.result = Some(v);
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
        if let Some(s) = &self.init_session {
            if s != &self.session_id {
                return failed(format!(
                    "claude resumed session {s}, not {}",
                    self.session_id
                ));
            }
        }
        let Some(r) = &self.result else {
            return failed(format!(
                "claude exited (code {:?}, signal {:?}) without a result event",
                exit.code, exit.signal
            ));
        };
        let subtype = r.get("subtype").and_then(Value::as_str).unwrap_or("");
        let is_error = r.get("is_error").and_then(Value::as_bool).unwrap_or(false);
        let detail = || {
            let errors: Vec<String> = r
                .get("errors")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|e| e.as_str().map(String::from))
                .collect();
            let text = r.get("result").and_then(Value::as_str).unwrap_or("");
            if errors.is_empty() {
                text.to_string()
            } else {
                errors.join("; ")
            }
        };
        match subtype {
            "error_max_turns" => match budget {
                Some(b) if bridge.steps == b => AgentVerdict {
                    status: AgentStatus::MaxSteps,
                    message: Some(format!("live step budget of {b} used ({})", detail())),
                },
                _ => failed(format!(
                    "claude stopped at its turn limit but the bridge answered {} of {:?} steps",
                    bridge.steps, budget
                )),
            },
            "success" if !is_error => {
                if exit.code != Some(0) {
                    failed(format!(
                        "claude reported success but exited with {:?}",
                        exit.code
                    ))
                } else if bridge.steps == 0 {
                    failed(
                        "claude reported success without any model reply through the bridge".into(),
                    )
                } else {
                    AgentVerdict {
                        status: AgentStatus::Completed,
                        message: None,
                    }
                }
            }
            // A fatal state is a failure whatever the exit code says.
            _ => failed(format!(
                "claude reported {subtype} (is_error {is_error}): {}",
                detail()
            )),
        }
    }

    fn resume(&mut self, write: bool) -> Result<crate::runner::ResumeInfo, AdapterError> {
        let bytes = self.read_native()?;
        let cleaned = clean_continued(
            &bytes,
            &self.rebuilt,
            &self.session_id,
            self.resume_text.text(),
        )?;
        let (info, text) = resume_cut(&cleaned.text, self.rebuilt.len())?;
        if write {
            write_file(&self.native_path, text.as_bytes())?;
        }
        Ok(info)
    }

    fn finish(&mut self) -> Result<Option<ContinuedSession>, AdapterError> {
        let bytes = self.read_native()?;
        let cleaned = clean_continued(
            &bytes,
            &self.rebuilt,
            &self.session_id,
            self.resume_text.text(),
        )?;
        write_file(&self.native_path, cleaned.text.as_bytes())?;
        if let Some(d) = self.continued_artifact.parent() {
            std::fs::create_dir_all(d).map_err(|source| AdapterError::Io {
                path: d.to_path_buf(),
                source,
            })?;
        }
        write_file(&self.continued_artifact, cleaned.text.as_bytes())?;
        Ok(Some(ContinuedSession {
            session_id: self.session_id.clone(),
            native_path: self.native_path.clone(),
            artifact_path: self.continued_artifact.clone(),
            digest: crate::digest::blake3(cleaned.text.as_bytes()),
            records: cleaned.records,
            removed: cleaned.removed,
        }))
    }
}

/// A stored message (`api-request-blob`) whose last block is the resume text, without that
/// block; `None` when it holds no resume text.
fn without_resume_text(message: Option<&Value>, resume_text: &str) -> Option<Value> {
    let m = message?;
    let blocks = m.get("content")?.as_array()?;
    let (last, rest) = blocks.split_last()?;
    let t = last.get("text").and_then(Value::as_str)?;
    if rest.is_empty()
        || !(is_nonce(t) || (t == resume_text && resume_text != CLAUDE_DEFAULT_RESUME_TEXT))
    {
        return None;
    }
    let mut m = m.clone();
    m["content"] = Value::Array(rest.to_vec());
    Some(m)
}

/// `PVISOR-RESUME-<24 hex>`: a resume nonce of this or an earlier attempt.
fn is_nonce(s: &str) -> bool {
    s.strip_prefix("PVISOR-RESUME-")
        .is_some_and(|h| h.len() == 24 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn contains_nonce(s: &str) -> bool {
    s.match_indices("PVISOR-RESUME-")
        .any(|(i, _)| s.get(i..i + 38).is_some_and(is_nonce))
}

/// Cut a cleaned session (rebuilt prefix of `prefix_len` bytes + live records) after its last
/// complete live turn: the last user record whose tool results answer every tool call issued
/// so far. What follows (an assistant reply whose tools have no results yet, a final text
/// reply, bookkeeping records) is the interrupted turn. Returns the live messages up to the
/// cut (canonical, rendered like the rebuilt prefix) and the cut session text.
pub fn resume_cut(
    text: &str,
    prefix_len: usize,
) -> Result<(crate::runner::ResumeInfo, String), AdapterError> {
    let bad =
        |m: String| AdapterError::Continuation(format!("resuming the continued session: {m}"));
    let prefix = text
        .get(..prefix_len)
        .ok_or_else(|| bad("shorter than the rebuilt prefix".into()))?;
    let mut recs: Vec<(&str, Value)> = Vec::new();
    for (i, line) in text[prefix_len..].split('\n').enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        recs.push((
            line,
            serde_json::from_str(line).map_err(|e| bad(format!("appended line {}: {e}", i + 1)))?,
        ));
    }
    let ty = |v: &Value| {
        v.get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let blocks = |v: &Value| {
        v.pointer("/message/content")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let mut pending: HashSet<String> = HashSet::new();
    let (mut safe_end, mut safe_turns, mut turns) = (0usize, 0u64, 0u64);
    let mut in_assistant: Option<Option<String>> = None;
    for (i, (_, v)) in recs.iter().enumerate() {
        match ty(v).as_str() {
            "assistant" => {
                let id = v
                    .pointer("/message/id")
                    .and_then(Value::as_str)
                    .map(String::from);
                if in_assistant.as_ref() != Some(&id) || id.is_none() {
                    turns += 1;
                    in_assistant = Some(id);
                }
                for b in blocks(v) {
                    if b.get("type").and_then(Value::as_str) == Some("tool_use") {
                        pending.insert(
                            b.get("id")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                        );
                    }
                }
            }
            "user" => {
                in_assistant = None;
                let ids: Vec<String> = blocks(v)
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                    .filter_map(|b| {
                        b.get("tool_use_id")
                            .and_then(Value::as_str)
                            .map(String::from)
                    })
                    .collect();
                for id in &ids {
                    pending.remove(id);
                }
                if !ids.is_empty() && pending.is_empty() {
                    safe_end = i + 1;
                    safe_turns = turns;
                }
            }
            _ => {}
        }
    }
    let kept = &recs[..safe_end];
    let conversational: Vec<&Value> = kept
        .iter()
        .map(|(_, v)| v)
        .filter(|v| matches!(ty(v).as_str(), "user" | "assistant" | "attachment"))
        .collect();
    let mut blobs: HashMap<String, Value> = HashMap::new();
    for line in text.lines() {
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            if ty(&v) == "api-request-blob" {
                if let Some(m) = v.get("message") {
                    let full = crate::protocol::anthropic::canonical_message(m);
                    blobs.insert(super::rebuild::role_content_key(&full), full);
                }
            }
        }
    }
    let live = super::rebuild::with_recorded_extras(
        super::rebuild::render_messages(&conversational),
        &blobs,
    );
    if live
        .first()
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str)
        .is_some_and(|r| r != "assistant")
    {
        return Err(bad("the live part does not start with a model turn".into()));
    }
    let interrupted = (safe_end < recs.len()).then(|| {
        recs[safe_end..]
            .iter()
            .filter(|(_, v)| ty(v) == "assistant")
            .flat_map(|(_, v)| blocks(v))
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
            .map(|b| {
                (
                    b.get("id")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    b.get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    b.get("input").cloned().unwrap_or(Value::Null),
                )
            })
            .collect::<Vec<_>>()
    });
    // Bookkeeping records alone (no model turn started) are not an interrupted turn.
    let interrupted = interrupted
        .filter(|t| !t.is_empty() || recs[safe_end..].iter().any(|(_, v)| ty(v) == "assistant"));
    let mut out = prefix.to_string();
    for (raw, _) in kept {
        out.push_str(raw);
        out.push('\n');
    }
    Ok((
        crate::runner::ResumeInfo {
            live,
            complete_turns: safe_turns,
            interrupted,
        },
        out,
    ))
}

/// The cleaned continued session.
#[derive(Debug, Clone)]
pub struct CleanedSession {
    pub text: String,
    pub records: u64,
    /// Removed record types, in order.
    pub removed: Vec<String>,
}

/// Remove the resume's transport records from what Claude appended after the rebuilt prefix:
/// `queue-operation` records, the `isMeta` user record carrying the resume text, the
/// date-change `attachment` right after it (a resume on another day), and a `last-prompt`
/// naming the resume text; children of a removed record are re-parented to its parent.
/// Fails when the file no longer starts with the rebuilt bytes, when an appended record names
/// another session, or when the resume text survives anywhere in the appended part.
pub fn clean_continued(
    bytes: &[u8],
    rebuilt: &[u8],
    session_id: &str,
    resume_text: &str,
) -> Result<CleanedSession, AdapterError> {
    let bad = |m: String| AdapterError::Continuation(format!("continued session: {m}"));
    if !bytes.starts_with(rebuilt) {
        return Err(bad(
            "the rebuilt prefix was changed (the file does not start with it)".into(),
        ));
    }
    let prefix_text =
        std::str::from_utf8(rebuilt).map_err(|_| bad("prefix is not UTF-8".into()))?;
    let appended = std::str::from_utf8(&bytes[rebuilt.len()..])
        .map_err(|_| bad("appended part is not UTF-8".into()))?;
    let mut records: Vec<(String, Value)> = Vec::new();
    for (i, line) in appended.split('\n').enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(line).map_err(|e| bad(format!("appended line {}: {e}", i + 1)))?;
        if let Some(s) = v.get("sessionId").and_then(Value::as_str) {
            if s != session_id {
                return Err(bad(format!("an appended record names session {s}")));
            }
        }
        records.push((line.to_string(), v));
    }
    let is_resume_text = |v: &Value| match v.pointer("/message/content") {
        Some(Value::String(s)) => s == resume_text || is_nonce(s),
        Some(Value::Array(a)) => {
            a.len() == 1
                && a[0]
                    .get("text")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t == resume_text || is_nonce(t))
        }
        _ => false,
    };
    let mut removed_parent: HashMap<String, Option<String>> = HashMap::new();
    let mut removed: Vec<String> = Vec::new();
    let mut keep = vec![true; records.len()];
    // Claude stores each message it sends once (`api-request-blob`, by hash): the resume text
    // joins the tool results before it in one user message, which is stored with it. Without
    // the resume text it is the results message: stored as such (or not at all when the
    // prefix already stores it), and the requests name it by its own hash.
    let mut rehashed: HashMap<String, String> = HashMap::new();
    let mut rewritten: HashMap<usize, String> = HashMap::new();
    for (i, (_, v)) in records.iter().enumerate() {
        let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
        let drop = match ty {
            "queue-operation" => true,
            "api-request-blob" => match without_resume_text(v.get("message"), resume_text) {
                Some(m) => {
                    let new = super::rebuild::claude_message_sha256(&m);
                    if let Some(h) = v.get("hash").and_then(Value::as_str) {
                        rehashed.insert(h.to_string(), new.clone());
                    }
                    let stored = prefix_text.contains(&format!("\"hash\":\"{new}\""));
                    if !stored {
                        let mut b = v.clone();
                        b["hash"] = Value::String(new);
                        b["message"] = m;
                        rewritten.insert(i, serde_json::to_string(&b).expect("JSON"));
                    }
                    stored
                }
                None => false,
            },
            "user" => v.get("isMeta").and_then(Value::as_bool) == Some(true) && is_resume_text(v),
            "last-prompt" => v
                .get("lastPrompt")
                .and_then(Value::as_str)
                .is_some_and(|t| t == resume_text || is_nonce(t)),
            // The date-change notice a resume on another day adds right after its resume
            // text: a transport item the bridge removes (`claude:date_change_notice`). Kept,
            // a later resume would render it again inside the live part.
            "attachment" => {
                v.pointer("/attachment/type").and_then(Value::as_str) == Some("date")
                    && v.pointer("/attachment/changed").and_then(Value::as_bool) == Some(true)
                    && v.get("parentUuid")
                        .and_then(Value::as_str)
                        .is_some_and(|p| removed_parent.contains_key(p))
            }
            _ => false,
        };
        if drop {
            keep[i] = false;
            removed.push(ty.to_string());
            if let Some(u) = v.get("uuid").and_then(Value::as_str) {
                removed_parent.insert(
                    u.to_string(),
                    v.get("parentUuid")
                        .and_then(Value::as_str)
                        .map(String::from),
                );
            }
        }
    }
    let resolve = |mut p: Option<String>| {
        let mut seen = HashSet::new();
        while let Some(u) = p.clone() {
            match removed_parent.get(&u) {
                Some(next) if seen.insert(u) => p = next.clone(),
                _ => break,
            }
        }
        p
    };
    let mut text = prefix_text.to_string();
    let mut count = prefix_text.lines().filter(|l| !l.trim().is_empty()).count() as u64;
    for (i, (raw, v)) in records.iter().enumerate() {
        if !keep[i] {
            continue;
        }
        let parent = v
            .get("parentUuid")
            .and_then(Value::as_str)
            .map(String::from);
        let renamed = v.get("type").and_then(Value::as_str) == Some("api-request")
            && v.get("tail").and_then(Value::as_array).is_some_and(|t| {
                t.iter()
                    .any(|h| h.as_str().is_some_and(|h| rehashed.contains_key(h)))
            });
        let line = match &parent {
            Some(p) if removed_parent.contains_key(p) => {
                let mut v = v.clone();
                v["parentUuid"] = resolve(parent.clone())
                    .map(Value::String)
                    .unwrap_or(Value::Null);
                serde_json::to_string(&v).expect("JSON")
            }
            _ if rewritten.contains_key(&i) => rewritten[&i].clone(),
            _ if renamed => {
                let mut v = v.clone();
                if let Some(Value::Array(tail)) = v.get_mut("tail") {
                    for h in tail.iter_mut() {
                        if let Some(new) = h.as_str().and_then(|x| rehashed.get(x)) {
                            *h = Value::String(new.clone());
                        }
                    }
                }
                serde_json::to_string(&v).expect("JSON")
            }
            _ => raw.clone(),
        };
        if (line.contains(resume_text) && resume_text != CLAUDE_DEFAULT_RESUME_TEXT)
            || contains_nonce(&line)
        {
            return Err(bad("the resume nonce survives in an appended record".into()));
        }
        if v.get("isMeta").and_then(Value::as_bool) == Some(true) && is_resume_text(v) {
            return Err(bad("a resume record survives".into()));
        }
        text.push_str(&line);
        text.push('\n');
        count += 1;
    }
    Ok(CleanedSession {
        text,
        records: count,
        removed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SID: &str = "e8a2467a-ba83-4554-be3e-e274fa2053bf";

    fn line(v: Value) -> String {
        format!("{v}\n")
    }

    #[test]
    fn cleaning_removes_transport_records_and_reparents() {
        let prefix = line(
            json!({"type": "user", "uuid": "b", "parentUuid": null, "sessionId": SID, "message": {"content": [{"type": "tool_result"}]}}),
        );
        let mut f = prefix.clone();
        f += &line(json!({"type": "queue-operation", "operation": "enqueue", "sessionId": SID}));
        f += &line(json!({"type": "queue-operation", "operation": "dequeue", "sessionId": SID}));
        f += &line(
            json!({"type": "user", "isMeta": true, "uuid": "m", "parentUuid": "b", "sessionId": SID, "message": {"role": "user", "content": [{"type": "text", "text": "PVISOR-RESUME-1"}]}}),
        );
        f += &line(
            json!({"type": "assistant", "uuid": "a", "parentUuid": "m", "sessionId": SID, "message": {"content": []}}),
        );
        f += &line(json!({"type": "cost-state", "sessionId": SID}));
        let c = clean_continued(f.as_bytes(), prefix.as_bytes(), SID, "PVISOR-RESUME-1").unwrap();
        assert_eq!(c.removed, ["queue-operation", "queue-operation", "user"]);
        assert_eq!(c.records, 3);
        let lines: Vec<Value> = c
            .text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[1]["parentUuid"], "b");
        assert!(!c.text.contains("PVISOR-RESUME-1"));
    }

    /// Claude's stored copy of the results message with the resume text appended becomes the
    /// results message under its own hash (or goes, when the prefix stores it already), and
    /// the request names it by that hash.
    #[test]
    fn cleaning_restores_the_stored_results_message_without_the_resume_text() {
        let nonce = "PVISOR-RESUME-0123456789abcdef01234567";
        let results = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]});
        let mut sent = results.clone();
        sent["content"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "text", "text": nonce}));
        let want = super::super::rebuild::claude_message_sha256(&results);
        let appended = |prefix: &str| {
            let mut f = prefix.to_string();
            f += &line(
                json!({"type": "user", "isMeta": true, "uuid": "m", "parentUuid": "b", "sessionId": SID, "message": {"role": "user", "content": [{"type": "text", "text": nonce}]}}),
            );
            f += &line(
                json!({"type": "api-request-blob", "sessionId": SID, "hash": "old", "message": sent}),
            );
            f += &line(
                json!({"type": "api-request", "sessionId": SID, "id": "r2", "keep": 1, "tail": ["a1", "old"]}),
            );
            f
        };
        let prefix = line(
            json!({"type": "user", "uuid": "b", "parentUuid": null, "sessionId": SID, "message": {"content": [{"type": "tool_result"}]}}),
        );
        let c =
            clean_continued(appended(&prefix).as_bytes(), prefix.as_bytes(), SID, nonce).unwrap();
        assert!(!c.text.contains("PVISOR-RESUME"), "{}", c.text);
        let lines: Vec<Value> = c
            .text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[1]["type"], "api-request-blob");
        assert_eq!(lines[1]["hash"], want.as_str());
        assert_eq!(lines[1]["message"], results);
        assert_eq!(lines[2]["tail"], json!(["a1", want]));
        // Stored before the boundary already: the copy goes, the request names the stored one.
        let prefix2 = prefix.clone()
            + &line(
                json!({"type": "api-request-blob", "sessionId": SID, "hash": want, "message": results}),
            );
        let c = clean_continued(
            appended(&prefix2).as_bytes(),
            prefix2.as_bytes(),
            SID,
            nonce,
        )
        .unwrap();
        assert_eq!(c.removed, ["user", "api-request-blob"]);
        assert_eq!(c.text.matches("api-request-blob").count(), 1);
        assert!(
            c.text.contains(&format!("\"tail\":[\"a1\",\"{want}\"]")),
            "{}",
            c.text
        );
    }

    #[test]
    fn cleaning_refuses_a_changed_prefix_or_another_session() {
        let prefix = line(json!({"type": "user", "uuid": "b", "sessionId": SID}));
        let other = line(json!({"type": "user", "uuid": "c", "sessionId": SID}));
        assert!(clean_continued(other.as_bytes(), prefix.as_bytes(), SID, "N").is_err());
        let f = prefix.clone()
            + &line(
                json!({"type": "assistant", "uuid": "x", "parentUuid": "b", "sessionId": "00000000-0000-4000-8000-000000000000"}),
            );
        assert!(clean_continued(f.as_bytes(), prefix.as_bytes(), SID, "N").is_err());
        // The nonce surviving outside a removable record is refused.
        let f = prefix.clone()
            + &line(
                json!({"type": "assistant", "uuid": "x", "parentUuid": "b", "sessionId": SID, "message": {"content": [{"type": "text", "text": "PVISOR-RESUME-9"}]}}),
            );
        assert!(clean_continued(f.as_bytes(), prefix.as_bytes(), SID, "PVISOR-RESUME-9").is_err());
    }

    #[test]
    fn resume_cuts_after_the_last_complete_turn_and_drops_old_nonces() {
        let prefix = line(
            json!({"type": "user", "uuid": "b", "parentUuid": null, "sessionId": SID, "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0", "content": "x"}]}}),
        );
        let mut f = prefix.clone();
        // attempt 1's transport record, with a nonce this process never saw
        f += &line(
            json!({"type": "user", "isMeta": true, "uuid": "m", "parentUuid": "b", "sessionId": SID, "message": {"role": "user", "content": [{"type": "text", "text": "PVISOR-RESUME-0123456789abcdef01234567"}]}}),
        );
        // attempt 1 ran on another day: Claude noted the date change after the prefix
        f += &line(
            json!({"type": "attachment", "uuid": "d", "parentUuid": "m", "sessionId": SID, "attachment": {"type": "date", "date": "2026-12-05", "changed": true}, "rendered": [{"content": "<system-reminder>\nThe date has changed. Today's date is now 2026-12-05. No need to announce the new date — the user's own clock shows it.\n</system-reminder>"}], "renderedRole": "system"}),
        );
        f += &line(
            json!({"type": "assistant", "uuid": "a1", "parentUuid": "d", "sessionId": SID, "message": {"id": "msg1", "role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "echo 1"}}]}}),
        );
        f += &line(
            json!({"type": "user", "uuid": "u1", "parentUuid": "a1", "sessionId": SID, "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "1"}]}}),
        );
        // interrupted: text stored, tool call stored, no result
        f += &line(
            json!({"type": "assistant", "uuid": "a2", "parentUuid": "u1", "sessionId": SID, "message": {"id": "msg2", "role": "assistant", "content": [{"type": "text", "text": "two"}]}}),
        );
        f += &line(
            json!({"type": "assistant", "uuid": "a3", "parentUuid": "a2", "sessionId": SID, "message": {"id": "msg2", "role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "echo 2"}}]}}),
        );
        let c = clean_continued(
            f.as_bytes(),
            prefix.as_bytes(),
            SID,
            "PVISOR-RESUME-ffffffffffffffffffffffff",
        )
        .unwrap();
        assert_eq!(c.removed, ["user", "attachment"]);
        let (info, text) = resume_cut(&c.text, prefix.len()).unwrap();
        assert_eq!(info.complete_turns, 1);
        assert_eq!(info.interrupted.as_ref().unwrap()[0].0, "t2");
        assert_eq!(info.live.len(), 2, "{:?}", info.live);
        assert_eq!(info.live[0]["role"], "assistant");
        assert!(
            !text.contains("PVISOR-RESUME") && !text.contains("\"a2\"") && text.contains("\"u1\"")
        );
        let recs: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            recs[1]["parentUuid"], "b",
            "re-parented past the removed nonce record"
        );
        assert_eq!(
            recs[1]["uuid"], "a1",
            "the date notice of the resume is gone"
        );
        // nothing after the last complete turn: no interrupted turn
        let (info, _) = resume_cut(&text, prefix.len()).unwrap();
        assert!(info.interrupted.is_none());
    }

    fn cont_with_result(result: Option<Value>) -> ClaudeContinuation {
        ClaudeContinuation {
            entrypoint: "claude".into(),
            workspace: "/w".into(),
            home: ClaudeHome::new(Path::new("/s")),
            session_id: SID.into(),
            native_path: "/s/x.jsonl".into(),
            continued_artifact: "/o/c.jsonl".into(),
            resume_text: ResumeText::Default,
            extra_args: vec![],
            model: None,
            user_id: None,
            path_env: String::new(),
            extra_env: vec![],
            facts: super::super::drift::HostFacts::observe(Path::new("/")),
            rebuilt: vec![],
            neutralized: vec![],
            result,
            init_session: Some(SID.into()),
        }
    }

    #[test]
    fn verdicts() {
        let stats = |steps| BridgeStats {
            steps,
            ..Default::default()
        };
        let exit = |code| ExitInfo {
            code: Some(code),
            signal: None,
            timed_out: false,
        };
        let ok = cont_with_result(Some(
            json!({"type": "result", "subtype": "success", "is_error": false}),
        ));
        assert_eq!(
            ok.verdict(&exit(0), &stats(2), Some(5)).status,
            AgentStatus::Completed
        );
        // Exit 0 with a fatal state is a failure.
        let fatal = cont_with_result(Some(
            json!({"type": "result", "subtype": "success", "is_error": true, "result": "API Error: 500"}),
        ));
        let v = fatal.verdict(&exit(0), &stats(1), Some(5));
        assert_eq!(v.status, AgentStatus::Failed);
        assert!(v.message.unwrap().contains("API Error: 500"));
        let max = cont_with_result(Some(
            json!({"type": "result", "subtype": "error_max_turns", "is_error": true, "num_turns": 3}),
        ));
        assert_eq!(
            max.verdict(&exit(1), &stats(2), Some(2)).status,
            AgentStatus::MaxSteps
        );
        // Claude's count and the bridge's must agree.
        assert_eq!(
            max.verdict(&exit(1), &stats(1), Some(2)).status,
            AgentStatus::Failed
        );
        assert_eq!(
            cont_with_result(None)
                .verdict(&exit(0), &stats(1), None)
                .status,
            AgentStatus::Failed
        );
        // Success without any reply through the bridge is not a continuation.
        assert_eq!(
            ok.verdict(&exit(0), &stats(0), None).status,
            AgentStatus::Failed
        );
    }

    #[test]
    fn command_shape() {
        let mut c = cont_with_result(None);
        c.resume_text = ResumeText::Nonce("PVISOR-RESUME-abc".into());
        c.extra_args = vec!["--allowedTools".into(), "Glob".into()];
        // The native session's host/time snapshots are set to this host before the start.
        let dir = tempfile::tempdir().unwrap();
        c.native_path = dir.path().join("s.jsonl");
        let env_rec = r#"{"type":"attachment","attachment":{"type":"environment","snapshot":{"platform":"linux","shell":"bash","osVersion":"Linux 0.0.0-old"}},"rendered":[{"content":"OS Version: Linux 0.0.0-old"}]}"#;
        let date_rec = r#"{"type":"attachment","attachment":{"type":"date","date":"2000-01-01"}}"#;
        std::fs::write(&c.native_path, format!("{env_rec}\n{date_rec}\n")).unwrap();
        let (rebuilt, neutralized) = neutralize(&format!("{env_rec}\n{date_rec}\n"), &c.facts);
        c.rebuilt = rebuilt.into_bytes();
        c.neutralized = neutralized;
        let cmd = c.command("http://127.0.0.1:9", "pvb-key", Some(3)).unwrap();
        let written = std::fs::read(&c.native_path).unwrap();
        assert_eq!(
            written, c.rebuilt,
            "the native file holds the neutralized snapshots"
        );
        let text = String::from_utf8(written).unwrap();
        assert!(
            text.contains("OS Version: Linux 0.0.0-old"),
            "rendered text kept"
        );
        assert!(!text.contains(r#""osVersion":"Linux 0.0.0-old""#) && !text.contains("2000-01-01"));
        let facts: Vec<&str> = cmd.neutralized.iter().map(|n| n.fact.as_str()).collect();
        assert_eq!(facts, ["claude:environment.osVersion", "claude:date"]);
        assert_eq!(&cmd.args[..3], ["-p", "--resume", SID]);
        assert!(cmd.args.windows(2).any(|w| w == ["--max-turns", "3"]));
        assert!(cmd
            .args
            .ends_with(&["--allowedTools".to_string(), "Glob".to_string()]));
        assert!(!cmd
            .args
            .iter()
            .any(|a| a.contains("pvb-key") || a.contains("PVISOR-RESUME")));
        let env: HashMap<_, _> = cmd.env.iter().cloned().collect();
        assert_eq!(env["ANTHROPIC_API_KEY"], "pvb-key");
        assert_eq!(env["CLAUDE_CODE_RESUME_PROMPT"], "PVISOR-RESUME-abc");
        assert_eq!(env["CLAUDE_CODE_RESUME_INTERRUPTED_TURN"], "1");
        assert_eq!(env["CLAUDE_CONFIG_DIR"], "/s/agent-home/claude");
        assert_eq!(cmd.stdin, StdinMode::OpenUntilResult);
    }
}
