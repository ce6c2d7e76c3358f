//! The rebuilt OpenCode session: an `opencode export`-shaped JSON cut after the step of
//! batch N, every replayed call's part carrying its fresh state (`output` or `error`, title,
//! metadata), written in the run's isolated home, where the continuation imports it with
//! `opencode import` (the store is empty there, so every id is kept). Also the canonical
//! prefix: the Chat Completions messages OpenCode will send for that session (its system
//! prompt aside, which it renders afresh for every request).

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::js;
use super::parse::Parsed;
use super::session::Session;
use crate::kit::{AdapterError, Observation, RebuildRequest, RebuiltSession};

/// The isolated home of the run's OpenCode (replayed bash commands run with it too).
pub fn home_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("opencode/home")
}

/// `$XDG_DATA_HOME/opencode` of `home` (store, logs, saved tool outputs).
pub fn data_dir(home: &Path) -> PathBuf {
    home.join(".local/share/opencode")
}

/// `$XDG_CONFIG_HOME/opencode` of `home`.
pub fn config_dir(home: &Path) -> PathBuf {
    home.join(".config/opencode")
}

/// OpenCode's config dir of `home` seeded so that its background plugin install finds
/// nothing to do (no network); files already there are kept.
pub fn seed_config_dir(home: &Path) -> std::io::Result<()> {
    let cfg = config_dir(home);
    std::fs::create_dir_all(cfg.join("node_modules"))?;
    let plugin = format!(
        "{{\"@opencode-ai/plugin\":\"{}\"}}",
        super::SUPPORTED_VERSION
    );
    for (name, text) in [
        ("package.json", format!("{{\"dependencies\":{plugin}}}\n")),
        (
            "package-lock.json",
            format!(
                "{{\"lockfileVersion\":3,\"packages\":{{\"\":{{\"dependencies\":{plugin}}}}}}}\n"
            ),
        ),
    ] {
        let p = cfg.join(name);
        if !p.exists() {
            std::fs::write(&p, text)?;
        }
    }
    Ok(())
}

/// The environment that points OpenCode (and the commands it runs) at `home`, offline.
pub fn agent_env_vars(home: &Path) -> Vec<(String, String)> {
    let h = |p: &str| home.join(p).display().to_string();
    vec![
        ("HOME".into(), home.display().to_string()),
        ("XDG_DATA_HOME".into(), h(".local/share")),
        ("XDG_CONFIG_HOME".into(), h(".config")),
        ("XDG_CACHE_HOME".into(), h(".cache")),
        ("XDG_STATE_HOME".into(), h(".local/state")),
    ]
}

/// The export file the continuation imports.
pub fn export_path(state_dir: &Path) -> PathBuf {
    state_dir.join("opencode/session-export.json")
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AdapterError + '_ {
    move |source| AdapterError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The session cut after batch `n` with `observations` in its tool parts.
pub fn cut_session(
    parsed: &Parsed,
    n: usize,
    observations: &std::collections::BTreeMap<String, Observation>,
) -> Session {
    let mut s = parsed.session.clone();
    let (mi, end) = parsed.step_ends[n - 1];
    s.messages.truncate(mi + 1);
    let m = &mut s.messages[mi];
    m.parts.truncate(end + 1);
    m.part_lines.truncate(end + 1);
    for batch in &parsed.sites[..n] {
        for &(bm, k) in batch {
            let part = &mut s.messages[bm].parts[k];
            let Some(call) = part
                .get("callID")
                .and_then(Value::as_str)
                .map(str::to_string)
            else {
                continue;
            };
            if let Some(obs) = observations.get(&call) {
                set_state(part, obs);
            }
        }
    }
    if !s.info_known {
        // The event stream tells no session info: the least `opencode import` accepts.
        let dir = s.directory().unwrap_or("/").to_string();
        let now = s
            .messages
            .first()
            .and_then(|m| m.info.pointer("/time/created").cloned())
            .unwrap_or(json!(0));
        s.info = json!({
            "id": s.id(), "slug": "pvisor-replay", "projectID": "global", "directory": dir,
            "title": "pvisor replay", "version": super::SUPPORTED_VERSION,
            "time": {"created": now, "updated": now},
        });
    }
    s
}

/// The part's state for a fresh observation (unchanged when it is the recorded one).
fn set_state(part: &mut Value, obs: &Observation) {
    let state = part.get("state").cloned().unwrap_or_else(|| json!({}));
    let recorded = super::parse::recorded_observation(part);
    if recorded
        .as_ref()
        .is_some_and(|r| r.text == obs.text && r.is_error == obs.is_error)
        && obs.native.is_none()
    {
        return;
    }
    let input = state.get("input").cloned().unwrap_or_else(|| json!({}));
    let time = state.get("time").cloned().unwrap_or_else(|| json!({}));
    let native = obs.native.clone().unwrap_or(Value::Null);
    let mut next = Map::new();
    if obs.is_error {
        next.insert("status".into(), json!("error"));
        next.insert("input".into(), input);
        next.insert("error".into(), json!(obs.text));
    } else {
        let mut metadata = native
            .get("metadata")
            .cloned()
            .or_else(|| state.get("metadata").cloned())
            .unwrap_or_else(|| json!({}));
        if part.get("tool").and_then(Value::as_str) == Some("bash")
            && native.get("metadata").is_none()
        {
            metadata["output"] = json!(obs.text);
        }
        let title = native
            .get("title")
            .cloned()
            .or_else(|| state.get("title").cloned())
            .unwrap_or_else(|| json!(""));
        next.insert("status".into(), json!("completed"));
        next.insert("input".into(), input);
        next.insert("output".into(), json!(obs.text));
        next.insert("metadata".into(), metadata);
        next.insert("title".into(), title);
        if let Some(a) = native.get("attachments") {
            next.insert("time".into(), time);
            next.insert("attachments".into(), a.clone());
            part["state"] = Value::Object(next);
            return;
        }
    }
    next.insert("time".into(), time);
    part["state"] = Value::Object(next);
}

pub fn rebuild(req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
    let parsed =
        req.plan.native.get::<Parsed>().ok_or_else(|| {
            AdapterError::Unsupported("the plan carries no OpenCode parse".into())
        })?;
    let observations = req.observation_map()?;
    let session = cut_session(parsed, req.after_step, &observations);
    let export = session.to_export();
    let bytes = format!(
        "{}\n",
        serde_json::to_string_pretty(&export).expect("JSON values serialize")
    );
    let native = export_path(req.state_dir);
    if let Some(d) = native.parent() {
        std::fs::create_dir_all(d).map_err(io(d))?;
    }
    std::fs::write(&native, &bytes).map_err(io(&native))?;
    if let Some(d) = req.artifact_path.parent() {
        std::fs::create_dir_all(d).map_err(io(d))?;
    }
    std::fs::write(req.artifact_path, &bytes).map_err(io(req.artifact_path))?;
    let records = session
        .messages
        .iter()
        .map(|m| 1 + m.parts.len() as u64)
        .sum();
    Ok(RebuiltSession {
        native_path: native,
        artifact_path: req.artifact_path.to_path_buf(),
        digest: format!("blake3:{}", blake3::hash(bytes.as_bytes()).to_hex()),
        records,
        session_id: session.id().to_string(),
        prefix: prefix(&session).unwrap_or_default(),
    })
}

/// Why a session cannot be sent as OpenCode sends it (checked before anything runs).
pub fn prefix_refusal(session: &Session) -> Option<String> {
    prefix(session).err()
}

/// The Chat Completions messages OpenCode sends for `session` after its system prompt
/// (MessageV2 → AI SDK → `@ai-sdk/openai-compatible`).
pub fn prefix(session: &Session) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for m in &session.messages {
        match m.role() {
            "user" => out.push(user_message(m)?),
            "assistant" => {
                if let Some(e) = m.info.get("error") {
                    let aborted =
                        e.get("name").and_then(Value::as_str) == Some("MessageAbortedError");
                    let content = m.parts.iter().any(|p| {
                        !matches!(
                            p.get("type").and_then(Value::as_str),
                            Some("step-start" | "reasoning")
                        )
                    });
                    if !(aborted && content) {
                        continue;
                    }
                }
                out.extend(assistant_messages(m)?);
            }
            other => return Err(format!("message {} has role `{other}`", m.id())),
        }
    }
    Ok(out)
}

fn user_message(m: &super::session::Message) -> Result<Value, String> {
    let mut texts = Vec::new();
    for p in &m.parts {
        match p.get("type").and_then(Value::as_str) {
            Some("text") => {
                if p.get("ignored").and_then(Value::as_bool) == Some(true) {
                    continue;
                }
                let t = p.get("text").and_then(Value::as_str).unwrap_or("");
                if !t.is_empty() {
                    texts.push(t.to_string());
                }
            }
            Some(other) => {
                return Err(format!(
                    "user message {} has a `{other}` part, which pvisor does not rebuild for OpenCode yet",
                    m.id()
                ))
            }
            None => {}
        }
    }
    Ok(match texts.as_slice() {
        [one] => json!({"role": "user", "content": one}),
        many => {
            json!({"role": "user", "content": many.iter().map(|t| json!({"type": "text", "text": t})).collect::<Vec<_>>()})
        }
    })
}

/// One assistant message per step, then one tool message per call (in call order).
fn assistant_messages(m: &super::session::Message) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls: Vec<Value> = Vec::new();
    let mut results: Vec<Value> = Vec::new();
    let flush = |text: &mut String,
                 reasoning: &mut String,
                 calls: &mut Vec<Value>,
                 results: &mut Vec<Value>,
                 out: &mut Vec<Value>| {
        if text.is_empty() && reasoning.is_empty() && calls.is_empty() {
            return;
        }
        let mut a = Map::new();
        a.insert("role".into(), json!("assistant"));
        a.insert("content".into(), json!(std::mem::take(text)));
        if !reasoning.is_empty() {
            a.insert("reasoning_content".into(), json!(std::mem::take(reasoning)));
        }
        if !calls.is_empty() {
            a.insert("tool_calls".into(), json!(std::mem::take(calls)));
        }
        out.push(Value::Object(a));
        out.append(results);
    };
    for p in &m.parts {
        match p.get("type").and_then(Value::as_str) {
            Some("step-start") => flush(
                &mut text,
                &mut reasoning,
                &mut calls,
                &mut results,
                &mut out,
            ),
            Some("text") => text.push_str(p.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("reasoning") => {
                reasoning.push_str(p.get("text").and_then(Value::as_str).unwrap_or(""))
            }
            Some("tool") => {
                let id = p.get("callID").and_then(Value::as_str).unwrap_or("");
                let state = p.get("state").cloned().unwrap_or_default();
                if state
                    .get("attachments")
                    .is_some_and(|a| a.as_array().is_some_and(|a| !a.is_empty()))
                {
                    return Err(format!(
                        "call {id} returned a file attachment (an image or PDF read), which pvisor does not rebuild for OpenCode yet"
                    ));
                }
                calls.push(json!({
                    "id": id,
                    "type": "function",
                    "function": {
                        "name": p.get("tool").and_then(Value::as_str).unwrap_or(""),
                        "arguments": js::stringify(state.get("input").unwrap_or(&json!({})), 0),
                    },
                }));
                let content = tool_result(&state);
                results.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
            }
            Some(
                "compaction" | "subtask" | "file" | "agent" | "patch" | "snapshot" | "retry"
                | "step-finish",
            )
            | None => {}
            Some(other) => {
                return Err(format!("assistant message {} has a `{other}` part", m.id()))
            }
        }
    }
    flush(
        &mut text,
        &mut reasoning,
        &mut calls,
        &mut results,
        &mut out,
    );
    Ok(out)
}

/// What the model sees of a tool part.
fn tool_result(state: &Value) -> String {
    let s = |k: &str| {
        state
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    match state.get("status").and_then(Value::as_str) {
        Some("completed")
            if state
                .pointer("/time/compacted")
                .is_some_and(|c| !c.is_null()) =>
        {
            "[Old tool result content cleared]".into()
        }
        Some("completed") => s("output"),
        Some("error") => match state.pointer("/metadata/output").and_then(Value::as_str) {
            Some(o)
                if state
                    .pointer("/metadata/interrupted")
                    .and_then(Value::as_bool)
                    == Some(true) =>
            {
                o.to_string()
            }
            _ => s("error"),
        },
        _ => "[Tool execution was interrupted]".into(),
    }
}
