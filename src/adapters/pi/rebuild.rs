//! The rebuilt Pi session: a v3 session file cut after the last tool result of batch N,
//! every replayed result carrying its fresh `content`/`details`/`isError` (the other lines
//! kept byte for byte), written where Pi looks for it in the run's isolated agent dir
//! (`<state>/pi/home/.pi/agent/sessions/--<cwd>--/<timestamp>_<id>.jsonl`). Also the
//! Anthropic Messages prefix Pi sends for it ([`super::convert`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::parse::Parsed;
use super::session::{Entry, InputForm, Session};
use crate::kit::{AdapterError, Observation, RebuildRequest, RebuiltSession};

/// The run's isolated `HOME` for Pi.
pub fn home_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("pi/home")
}

/// `PI_CODING_AGENT_DIR` of the run.
pub fn agent_dir(state_dir: &Path) -> PathBuf {
    home_dir(state_dir).join(".pi/agent")
}

/// The environment Pi's code runs with (tools and continuation): the isolated home and
/// agent dir, offline, nothing inherited but `PATH`, `LANG`, `TZ`, `USER`.
pub fn agent_env(state_dir: &Path) -> Vec<(String, String)> {
    let home = home_dir(state_dir);
    let mut env = vec![
        ("HOME".to_string(), home.display().to_string()),
        (
            "PI_CODING_AGENT_DIR".into(),
            agent_dir(state_dir).display().to_string(),
        ),
        ("PI_OFFLINE".into(), "1".into()),
        ("PI_SKIP_VERSION_CHECK".into(), "1".into()),
        ("PI_TELEMETRY".into(), "0".into()),
        ("SHELL".into(), "/bin/bash".into()),
    ];
    for k in ["PATH", "LANG", "TZ", "USER", "TMPDIR"] {
        if let Ok(v) = std::env::var(k) {
            env.push((k.into(), v));
        }
    }
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    }
    env
}

/// `--<cwd without its leading separator, with / \ : as ->--`, as Pi names a session dir.
pub fn session_dir_name(cwd: &str) -> String {
    let trimmed = cwd.trim_start_matches(['/', '\\']);
    let safe: String = trimmed
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect();
    format!("--{safe}--")
}

/// Where Pi keeps `session` in the run's agent dir.
pub fn session_path(state_dir: &Path, session: &Session, cwd: &Path) -> PathBuf {
    let ts: String = session
        .timestamp()
        .chars()
        .map(|c| if c == ':' || c == '.' { '-' } else { c })
        .collect();
    agent_dir(state_dir)
        .join("sessions")
        .join(session_dir_name(&cwd.display().to_string()))
        .join(format!("{ts}_{}.jsonl", session.id()))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AdapterError + '_ {
    move |source| AdapterError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The tool result message with a fresh observation (Pi's key order kept; `details` only
/// when the tool gave some).
fn with_observation(m: &Value, obs: &Observation) -> Value {
    let native = obs
        .native
        .clone()
        .unwrap_or_else(|| json!({"content": [{"type": "text", "text": obs.text}]}));
    let mut out = serde_json::Map::new();
    let src = m.as_object().cloned().unwrap_or_default();
    for (k, v) in &src {
        match k.as_str() {
            "content" => {
                out.insert(k.clone(), native["content"].clone());
                if let Some(d) = native.get("details") {
                    out.insert("details".into(), d.clone());
                }
            }
            "details" => {}
            "isError" => {
                out.insert(k.clone(), json!(obs.is_error));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// A fresh 8-hex entry id not used in the session.
fn fresh_id(session: &Session, taken: &[String]) -> String {
    loop {
        let id = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
        if !session.entries.iter().any(|e| e.id() == id) && !taken.contains(&id) {
            return id;
        }
    }
}

/// The session cut after batch `n` with the given observations; for the event form, the
/// model and thinking level entries Pi writes first.
pub fn cut(parsed: &Parsed, n: usize, observations: &BTreeMap<String, Observation>) -> Session {
    let mut s = parsed.session.clone();
    let end = parsed.boundary_entry(n).unwrap_or(0);
    s.entries.truncate(end + 1);
    let results: std::collections::HashSet<usize> = parsed.sites[..n]
        .iter()
        .flat_map(|(_, r)| r.iter().copied())
        .collect();
    for i in results {
        let e = &mut s.entries[i];
        let Some(m) = e.message().cloned() else {
            continue;
        };
        let id = m.get("toolCallId").and_then(Value::as_str).unwrap_or("");
        let Some(obs) = observations.get(id) else {
            continue;
        };
        let recorded = super::parse::observation_of(&m);
        if &recorded == obs {
            continue;
        }
        e.value["message"] = with_observation(&m, obs);
        e.raw = None;
    }
    if s.form == InputForm::Events {
        let mut head = vec![];
        let mut taken = vec![];
        if let Some((provider, model)) = s.model() {
            let id = fresh_id(&s, &taken);
            taken.push(id.clone());
            head.push(json!({"type": "model_change", "id": id, "parentId": null, "timestamp": s.timestamp(), "provider": provider, "modelId": model}));
        }
        let id = fresh_id(&s, &taken);
        let parent = taken
            .last()
            .cloned()
            .map(Value::from)
            .unwrap_or(Value::Null);
        taken.push(id.clone());
        // The event stream does not say; Pi's default level.
        head.push(json!({"type": "thinking_level_change", "id": id, "parentId": parent, "timestamp": s.timestamp(), "thinkingLevel": DEFAULT_THINKING}));
        if let Some(first) = s.entries.first_mut() {
            first.value["parentId"] = json!(taken.last());
            first.raw = None;
        }
        let mut entries: Vec<Entry> = head
            .into_iter()
            .map(|v| Entry {
                value: v,
                line: 0,
                raw: None,
            })
            .collect();
        entries.append(&mut s.entries);
        s.entries = entries;
        if s.id().is_empty() {
            // `--mode rpc` prints no header: a new session id.
            let ts = s
                .entries
                .iter()
                .find_map(|e| e.value.get("timestamp").and_then(Value::as_str))
                .unwrap_or("1970-01-01T00:00:00.000Z")
                .to_string();
            s.header = json!({"type": "session", "version": 3, "id": uuid::Uuid::new_v4().to_string(), "timestamp": ts, "cwd": s.cwd().unwrap_or("")});
            s.header_raw = None;
        }
    }
    s
}

/// Pi 0.83.0's default thinking level (what `pi` writes when no `--thinking` is given).
pub const DEFAULT_THINKING: &str = "medium";

/// The session file's text.
pub fn render(s: &Session) -> String {
    let mut out = String::new();
    out.push_str(&s.header_raw.clone().unwrap_or_else(|| s.header.to_string()));
    out.push('\n');
    for e in &s.entries {
        out.push_str(&e.raw.clone().unwrap_or_else(|| e.value.to_string()));
        out.push('\n');
    }
    out
}

/// The messages of the context (what Pi sends) and why a session cannot be continued.
pub fn context_messages(s: &Session) -> Result<Vec<Value>, String> {
    let mut out = vec![];
    for e in &s.entries {
        match e.kind() {
            "message" => match e.role() {
                "user" | "assistant" | "toolResult" => out.push(e.message().cloned().unwrap_or(Value::Null)),
                other => return Err(format!("entry {} (line {}) is a `{other}` message, which pvisor does not rebuild", e.id(), e.line)),
            },
            "model_change" | "thinking_level_change" | "label" | "session_info" | "custom" => {}
            other => return Err(format!("entry {} (line {}) is a `{other}` entry (compaction and summaries are not rebuilt)", e.id(), e.line)),
        }
    }
    Ok(out)
}

/// The model the continuation runs (the session's), with its API.
pub fn model_of(s: &Session) -> Option<super::convert::Model> {
    let (provider, id) = s.model()?;
    let api = s
        .entries
        .iter()
        .rev()
        .filter(|e| e.role() == "assistant")
        .find_map(|e| e.message()?.get("api")?.as_str().map(str::to_string))
        .unwrap_or_else(|| "anthropic-messages".into());
    Some(super::convert::Model { provider, api, id })
}

/// Why this cut cannot be continued with pvisor's Anthropic bridge, if it cannot.
pub fn continue_refusal(s: &Session) -> Option<String> {
    if let Err(e) = context_messages(s) {
        return Some(e);
    }
    match model_of(s) {
        None => Some("the session records no model".into()),
        Some(m) if m.api != "anthropic-messages" => Some(format!(
            "the session's model {}/{} speaks `{}`; pvisor continues Pi sessions through the Anthropic Messages bridge only",
            m.provider, m.id, m.api
        )),
        _ => None,
    }
}

pub fn rebuild(req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
    let parsed = req.plan.native.get::<Parsed>().ok_or_else(|| {
        AdapterError::Unsupported("the plan was not parsed by the Pi adapter".into())
    })?;
    let observations = req.observation_map()?;
    let s = cut(parsed, req.after_step, &observations);
    let path = session_path(req.state_dir, &s, req.workspace);
    let text = render(&s);
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(io(d))?;
    }
    std::fs::write(&path, &text).map_err(io(&path))?;
    if let Some(d) = req.artifact_path.parent() {
        std::fs::create_dir_all(d).map_err(io(d))?;
    }
    std::fs::write(req.artifact_path, &text).map_err(io(req.artifact_path))?;
    let prefix = match (context_messages(&s), model_of(&s)) {
        (Ok(msgs), Some(model)) => super::convert::anthropic_messages(&msgs, &model),
        _ => vec![],
    };
    Ok(RebuiltSession {
        native_path: path,
        artifact_path: req.artifact_path.to_path_buf(),
        digest: format!("blake3:{}", blake3::hash(text.as_bytes()).to_hex()),
        records: 1 + s.entries.len() as u64,
        session_id: s.id().to_string(),
        prefix,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_dirs_are_named_as_pi_names_them() {
        assert_eq!(
            session_dir_name("/tmp/realagent-pi.XD1fLg/work"),
            "--tmp-realagent-pi.XD1fLg-work--"
        );
        assert_eq!(session_dir_name("/a/my:dir/w"), "--a-my-dir-w--");
    }

    #[test]
    fn a_fresh_result_keeps_pis_key_order() {
        let m = json!({"role": "toolResult", "toolCallId": "c", "toolName": "bash", "content": [{"type": "text", "text": "old"}], "isError": false, "timestamp": 5});
        let obs = Observation {
            text: "new".into(),
            is_error: true,
            native: Some(json!({"content": [{"type": "text", "text": "new"}], "details": {}})),
        };
        let got = with_observation(&m, &obs);
        assert_eq!(
            got.to_string(),
            r#"{"role":"toolResult","toolCallId":"c","toolName":"bash","content":[{"type":"text","text":"new"}],"details":{},"isError":true,"timestamp":5}"#
        );
    }
}
