//! Continuing a rebuilt Codex rollout with the real `codex exec resume <id> --json` through
//! the Responses bridge.
//!
//! - `codex exec resume` needs a prompt: a per-run nonce is passed and the bridge removes it
//!   ([`super::request_rules::CodexRequestRules`]), together with the developer `<skills_instructions>`
//!   item Codex inserts before it because its home path differs from the original run's.
//! - config.toml of the isolated `CODEX_HOME` is rewritten with the bridge URL; the bridge
//!   key travels in `PVISOR_CODEX_API_KEY`; stdin is `/dev/null`.
//! - Codex has no turn limit of its own in `exec`: the bridge answers the (B+1)-th model
//!   request with a 400 Codex does not retry, so it stops at once; the runner reports
//!   `max_steps`.
//! - After exit the rollout (Codex appends to the same file) must start with the rebuilt
//!   bytes; the appended nonce message, skills item, their `world_state` and UI mirrors are
//!   removed; the nonce must appear nowhere else.

use super::rebuild::{codex_home, config_toml, API_KEY_ENV};
use super::request_rules::{
    is_skills_item as is_codex_skills_item, CodexRequestRules, SKILLS_PREFIX as CODEX_SKILLS_PREFIX,
};
use crate::bridge::BridgeStats;
use crate::kit::RequestRules;
use crate::kit::{AdapterError, RebuiltSession};
use crate::protocol::Protocol;
use crate::runner::{
    AgentCommand, AgentVerdict, ContinuationAgent, ContinuedSession, ExitInfo, StdinMode,
};
use journal_format::event::AgentStatus;
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct CodexContinuation {
    pub entrypoint: PathBuf,
    pub workspace: PathBuf,
    pub codex_home: PathBuf,
    pub session_id: String,
    pub native_path: PathBuf,
    pub continued_artifact: PathBuf,
    pub nonce: String,
    pub model: Option<String>,
    pub path_env: String,
    rebuilt: Vec<u8>,
    /// The timezone of the recorded run (`TZ` of the continuation).
    timezone: Option<String>,
    /// Stored snapshots set to the live values (journaled).
    neutralized: Vec<journal_format::event::Neutralized>,
    thread_id: Option<String>,
    turn_completed: bool,
    turn_failed: Option<String>,
}

impl CodexContinuation {
    pub fn new(
        entrypoint: &Path,
        session: &RebuiltSession,
        workspace: &Path,
        state_dir: &Path,
        continued_artifact: &Path,
    ) -> Result<Self, AdapterError> {
        let (timezone, neutralized) = pin_environment_date(&session.native_path)?;
        let rebuilt = std::fs::read(&session.native_path).map_err(|source| AdapterError::Io {
            path: session.native_path.clone(),
            source,
        })?;
        let nonce = format!(
            "pvisor-codex-resume-{}",
            &crate::bridge::random_key()[4..36]
        );
        Ok(CodexContinuation {
            entrypoint: entrypoint.to_path_buf(),
            workspace: workspace.to_path_buf(),
            codex_home: codex_home(state_dir),
            session_id: session.session_id.clone(),
            native_path: session.native_path.clone(),
            continued_artifact: continued_artifact.to_path_buf(),
            nonce,
            model: None,
            path_env: "/usr/local/bin:/usr/bin:/bin".into(),
            rebuilt,
            timezone,
            neutralized,
            thread_id: None,
            turn_completed: false,
            turn_failed: None,
        })
    }

    /// The newest rollout of the session under the isolated home.
    fn rollout(&self) -> Option<PathBuf> {
        let suffix = format!("-{}.jsonl", self.session_id);
        let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
        let mut stack = vec![self.codex_home.join("sessions")];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("rollout-") && n.ends_with(&suffix))
                {
                    let t = e
                        .metadata()
                        .and_then(|m| m.modified())
                        .unwrap_or(std::time::UNIX_EPOCH);
                    if best.as_ref().is_none_or(|(bt, _)| t > *bt) {
                        best = Some((t, p));
                    }
                }
            }
        }
        best.map(|b| b.1)
    }
}

/// Is this appended rollout line a transport record (nonce prompt, skills item and its
/// `world_state`, or their UI mirrors)?
fn is_transport_line(v: &Value, nonce: &str) -> Option<&'static str> {
    let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
    let p = &v["payload"];
    match ty {
        "response_item" => {
            if p.get("type").and_then(Value::as_str) == Some("message")
                && p.get("role").and_then(Value::as_str) == Some("user")
            {
                let c = p["content"].as_array();
                if c.is_some_and(|a| {
                    a.len() == 1 && a[0].get("text").and_then(Value::as_str) == Some(nonce)
                }) {
                    return Some("codex:resume_prompt");
                }
            }
            is_codex_skills_item(p).then_some("codex:skills_instructions")
        }
        "world_state"
            if p.to_string().contains(CODEX_SKILLS_PREFIX)
                || p.get("host_skills").is_some()
                || p.pointer("/state/host_skills").is_some() =>
        {
            Some("codex:world_state")
        }
        "event_msg" if p.to_string().contains(nonce) => Some("codex:event_msg"),
        _ => None,
    }
}

impl ContinuationAgent for CodexContinuation {
    fn protocol(&self) -> Protocol {
        Protocol::OpenaiResponses
    }

    fn request_rules(&self) -> std::sync::Arc<dyn RequestRules> {
        let instructions = self
            .rebuilt
            .split(|b| *b == b'\n')
            .next()
            .and_then(|l| serde_json::from_slice::<Value>(l).ok())
            .and_then(|v| {
                v.pointer("/payload/base_instructions/text")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
        std::sync::Arc::new(CodexRequestRules {
            prompt: self.nonce.clone(),
            instructions,
        })
    }

    fn command(
        &mut self,
        bridge_url: &str,
        bridge_key: &str,
        _budget: Option<u64>,
    ) -> Result<AgentCommand, AdapterError> {
        let parsed = super::parse::parse_file(&self.native_path)?;
        // Codex re-sends its <environment_context> when the cwd changed since the recorded
        // turn, so the first request could not end at O′N: refuse before starting.
        let recorded_cwd = parsed.last_turn_cwd.clone().or_else(|| parsed.cwd.clone());
        if let Some(c) = recorded_cwd {
            if c != self.workspace {
                return Err(AdapterError::Continuation(format!(
                    "Codex continues only in the original working directory {} (the workspace is {}): with another cwd it re-sends its <environment_context> and the first request would not end at O′N",
                    c.display(),
                    self.workspace.display()
                )));
            }
        }
        let model = match &self.model {
            Some(m) => m.clone(),
            None => parsed
                .last_turn_model
                .clone()
                .unwrap_or_else(|| "gpt-5.5".into()),
        };
        let cfg = self.codex_home.join("config.toml");
        std::fs::write(&cfg, config_toml(&model, &format!("{bridge_url}/v1"))).map_err(
            |source| AdapterError::Io {
                path: cfg.clone(),
                source,
            },
        )?;
        let home = self
            .codex_home
            .parent()
            .unwrap_or(&self.codex_home)
            .join("agent-home");
        std::fs::create_dir_all(&home).map_err(|source| AdapterError::Io {
            path: home.clone(),
            source,
        })?;
        let args = [
            "exec",
            "resume",
            &self.session_id,
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            &self.nonce,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        Ok(AgentCommand {
            program: self.entrypoint.clone(),
            args,
            env: vec![
                ("PATH".into(), self.path_env.clone()),
                ("HOME".into(), home.display().to_string()),
                ("CODEX_HOME".into(), self.codex_home.display().to_string()),
                (API_KEY_ENV.into(), bridge_key.into()),
            ]
            .into_iter()
            .chain(
                self.timezone
                    .iter()
                    .map(|tz| ("TZ".to_string(), tz.clone())),
            )
            .collect(),
            cwd: self.workspace.clone(),
            stdin: StdinMode::Null,
            neutralized: self.neutralized.clone(),
            stdout_file: None,
        })
    }

    fn observe_stdout(&mut self, line: &str) -> bool {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            return false;
        };
        match v.get("type").and_then(Value::as_str) {
            Some("thread.started") => {
                self.thread_id = v
                    .get("thread_id")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                false
            }
            Some("turn.completed") => {
                self.turn_completed = true;
                true
            }
            Some("turn.failed") | Some("error") => {
                let m = v
                    .pointer("/error/message")
                    .or_else(|| v.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                self.turn_failed.get_or_insert(m);
                v["type"] == "turn.failed"
            }
            _ => false,
        }
    }

    fn verdict(&self, exit: &ExitInfo, bridge: &BridgeStats, _budget: Option<u64>) -> AgentVerdict {
        let failed = |m: String| AgentVerdict {
            status: AgentStatus::Failed,
            message: Some(m),
        };
        if let Some(t) = &self.thread_id {
            if t != &self.session_id {
                return failed(format!("codex resumed thread {t}, not {}", self.session_id));
            }
        }
        if let Some(m) = &self.turn_failed {
            return failed(format!("codex reported a failed turn: {m}"));
        }
        if !self.turn_completed {
            return failed(format!(
                "codex exited (code {:?}, signal {:?}) without turn.completed",
                exit.code, exit.signal
            ));
        }
        if exit.code != Some(0) {
            return failed(format!(
                "codex completed its turn but exited with {:?}",
                exit.code
            ));
        }
        if bridge.steps == 0 {
            return failed("codex completed without any model reply through the bridge".into());
        }
        AgentVerdict {
            status: AgentStatus::Completed,
            message: None,
        }
    }

    fn finish(&mut self) -> Result<Option<ContinuedSession>, AdapterError> {
        let path = self.rollout().ok_or_else(|| {
            AdapterError::Continuation(format!(
                "no rollout of session {} under {}",
                self.session_id,
                self.codex_home.display()
            ))
        })?;
        let bytes = std::fs::read(&path).map_err(|source| AdapterError::Io {
            path: path.clone(),
            source,
        })?;
        if !bytes.starts_with(&self.rebuilt) {
            return Err(AdapterError::Continuation(format!("{} does not start with the rebuilt prefix: refusing a continuation that is not the same session", path.display())));
        }
        let appended = String::from_utf8_lossy(&bytes[self.rebuilt.len()..]).into_owned();
        let mut out = String::from_utf8_lossy(&self.rebuilt).into_owned();
        let mut removed = Vec::new();
        // Codex numbers its lines (`ordinal`); the kept live lines are numbered on from the
        // prefix, so that the cleaned rollout has no gap where transport records were.
        let mut next_ordinal = out
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
            .and_then(|v| v.get("ordinal").and_then(Value::as_u64))
            .map(|n| n + 1);
        for line in appended.lines() {
            let mut renumbered = None;
            if let Ok(mut v) = serde_json::from_str::<Value>(line) {
                if let Some(kind) = is_transport_line(&v, &self.nonce) {
                    removed.push(kind.to_string());
                    continue;
                }
                if let (Some(n), Some(_)) = (next_ordinal, v.get("ordinal")) {
                    if v["ordinal"].as_u64() != Some(n) {
                        v["ordinal"] = Value::from(n);
                        renumbered = Some(serde_json::to_string(&v).expect("JSON"));
                    }
                    next_ordinal = Some(n + 1);
                }
            }
            if line.contains(&self.nonce) {
                return Err(AdapterError::Continuation("the resume nonce remains in the continued rollout outside the records it was expected in".into()));
            }
            out.push_str(renumbered.as_deref().unwrap_or(line));
            out.push('\n');
        }
        if !removed.iter().any(|r| r == "codex:resume_prompt") {
            return Err(AdapterError::Continuation(
                "the continued rollout has no resume prompt record: not the expected resume".into(),
            ));
        }
        let parsed = super::parse::parse_bytes(&path, out.as_bytes())?;
        if parsed.session_id != self.session_id {
            return Err(AdapterError::Continuation(format!(
                "the continued rollout is session {}, not {}",
                parsed.session_id, self.session_id
            )));
        }
        std::fs::write(&path, &out).map_err(|source| AdapterError::Io {
            path: path.clone(),
            source,
        })?;
        if let Some(p) = self.continued_artifact.parent() {
            std::fs::create_dir_all(p).map_err(|source| AdapterError::Io {
                path: p.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&self.continued_artifact, &out).map_err(|source| AdapterError::Io {
            path: self.continued_artifact.clone(),
            source,
        })?;
        Ok(Some(ContinuedSession {
            session_id: self.session_id.clone(),
            native_path: path,
            artifact_path: self.continued_artifact.clone(),
            digest: crate::digest::blake3(out.as_bytes()),
            records: out.lines().count() as u64,
            removed,
        }))
    }
}

/// The zone name Codex's `iana_time_zone` reads on Linux: the `/etc/localtime` link target
/// after `zoneinfo/`, else `/etc/timezone`.
pub fn host_iana_zone() -> Option<String> {
    if let Ok(target) = std::fs::read_link("/etc/localtime") {
        let t = target.to_string_lossy();
        if let Some(i) = t.find("zoneinfo/") {
            return Some(t[i + "zoneinfo/".len()..].to_string());
        }
    }
    std::fs::read_to_string("/etc/timezone")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Codex 0.149.0 rebuilds a baseline from the rollout's `world_state` records (the last full
/// snapshot plus later patches) and compares it with the live environment before every model
/// request; a difference re-sends `<environment_context>` after the boundary, so request 1
/// would not end at O′N (see `docs/agents/codex.md`, "Drift model"). The stored values the
/// model never sees are set to what Codex will compute: `current_date` to today in the
/// recorded timezone (the continuation runs with that `TZ`; `chrono::Local` follows it) and
/// `timezone` to the host's zone name (Codex reads it from `/etc/localtime`, never from
/// `TZ`; without one it uses `Etc/UTC` and the UTC date). The model-visible environment
/// message of the prefix is left as recorded. Returns the recorded timezone (the `TZ` of the
/// continuation) and what was changed. Done right before the agent starts (the rebuilt
/// session and its journaled digest stay as rebuilt).
pub fn pin_environment_date(
    rollout: &Path,
) -> Result<(Option<String>, Vec<journal_format::event::Neutralized>), AdapterError> {
    let text = std::fs::read_to_string(rollout).map_err(|source| AdapterError::Io {
        path: rollout.to_path_buf(),
        source,
    })?;
    // `world_state` environments are the baseline 0.149.0 compares; `turn_context` holds the
    // same two values (the baseline of rollouts written before world state existed).
    fn environments(v: &mut Value) -> Option<&mut Value> {
        match v.get("type").and_then(Value::as_str) {
            Some("world_state") => v
                .get_mut("payload")?
                .get_mut("state")?
                .get_mut("environments"),
            Some("turn_context") => v.get_mut("payload"),
            _ => None,
        }
    }
    let mut tz: Option<String> = None;
    for line in text.lines() {
        if let Ok(mut v) = serde_json::from_str::<Value>(line) {
            if let Some(t) = environments(&mut v)
                .and_then(|e| e.get("timezone"))
                .and_then(Value::as_str)
            {
                tz = Some(t.to_string());
            }
        }
    }
    let Some(zone) = tz.clone() else {
        return Ok((None, Vec::new()));
    };
    let host_zone = host_iana_zone();
    let date_zone = if host_zone.is_some() {
        zone.as_str()
    } else {
        "UTC"
    };
    let out = std::process::Command::new("date")
        .env("TZ", date_zone)
        .arg("+%F")
        .output()
        .map_err(|source| AdapterError::Io {
            path: "date".into(),
            source,
        })?;
    let today = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if today.len() != 10 {
        return Err(AdapterError::Continuation(format!(
            "cannot compute today's date in {date_zone}"
        )));
    }
    let live_zone = host_zone.unwrap_or_else(|| "Etc/UTC".to_string());
    let mut changed = false;
    let mut neutralized: Vec<journal_format::event::Neutralized> = Vec::new();
    let mut new = String::with_capacity(text.len());
    for line in text.lines() {
        let mut kept = line.to_string();
        if let Ok(mut v) = serde_json::from_str::<Value>(line) {
            let mut touched = false;
            if let Some(env) = environments(&mut v) {
                for (key, live) in [("current_date", &today), ("timezone", &live_zone)] {
                    if let Some(d) = env
                        .get(key)
                        .and_then(Value::as_str)
                        .filter(|d| d != live)
                        .map(str::to_string)
                    {
                        let fact = format!("codex:{key}");
                        if !neutralized
                            .iter()
                            .any(|n| n.fact == fact && n.recorded == d)
                        {
                            neutralized.push(journal_format::event::Neutralized {
                                fact,
                                recorded: d,
                                live: live.clone(),
                            });
                        }
                        env[key] = Value::String(live.clone());
                        touched = true;
                    }
                }
            }
            if touched {
                kept = serde_json::to_string(&v).expect("serialize a JSON value");
                changed = true;
            }
        }
        new.push_str(&kept);
        new.push('\n');
    }
    if changed {
        std::fs::write(rollout, new).map_err(|source| AdapterError::Io {
            path: rollout.to_path_buf(),
            source,
        })?;
    }
    Ok((Some(zone), neutralized))
}
