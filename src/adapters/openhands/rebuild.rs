//! The conversation cut after batch N, written as the SDK writes its store, and the Chat
//! Completions prefix the continued agent will send for it.
//!
//! The cut keeps the recorded events up to the last result of batch N; each result event is
//! replaced by the fresh one (which took the recorded one's id and parent, so the event tree
//! is unchanged) and every other event keeps its bytes. `base_state.json` keeps everything
//! but what makes the SDK resume at the cut: `execution_status` `idle` (a `finished`
//! conversation would return from `run()` at once), `leaf_event_id` at the last kept event
//! (the branch the next step extends), `last_user_message_id`, `persistence_dir`, the
//! workspace, and the per-call statistics of the model calls kept.
//!
//! The prefix is the SDK's own rendering of the written store (the runner's messages mode:
//! View → messages → `format_messages_for_llm`): what `run()` sends is checked against it.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::parse::Parsed;
use crate::kit::{AdapterError, RebuildRequest, RebuiltSession};

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AdapterError + '_ {
    move |source| AdapterError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A cut conversation: `base_state.json` and the event lines, in index order.
pub struct Cut {
    pub base_state: Value,
    /// `(event id, compact JSON)`.
    pub events: Vec<(String, String)>,
}

impl Cut {
    /// The canonical byte form ([`super::store`]): the artifact pvisor digests.
    pub fn bundle(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec(&self.base_state).unwrap_or_default();
        out.push(b'\n');
        for (_, e) in &self.events {
            out.extend_from_slice(e.as_bytes());
            out.push(b'\n');
        }
        out
    }

    /// Write the store into `conv_dir` (`base_state.json`, `events/`), replacing the events
    /// a previous write left there (the tools' files, `TASKS.json` and `observations/`, stay).
    pub fn write(&self, conv_dir: &Path) -> Result<(), AdapterError> {
        let events = conv_dir.join("events");
        std::fs::create_dir_all(&events).map_err(io(&events))?;
        for e in std::fs::read_dir(&events).map_err(io(&events))?.flatten() {
            if super::store::event_index(&e.file_name().to_string_lossy()).is_some() {
                std::fs::remove_file(e.path()).map_err(io(&e.path()))?;
            }
        }
        for (i, (id, text)) in self.events.iter().enumerate() {
            let p = events.join(super::store::event_file_name(i, id));
            std::fs::write(&p, text).map_err(io(&p))?;
        }
        let p = conv_dir.join("base_state.json");
        let text = serde_json::to_vec(&self.base_state).unwrap_or_default();
        std::fs::write(&p, text).map_err(io(&p))
    }
}

/// The events kept by a cut after batch `n`: up to the last result of batch `n` (for `n` = 0,
/// up to the first action).
fn kept(parsed: &Parsed, n: usize) -> usize {
    match n {
        0 => parsed
            .sites
            .first()
            .and_then(|s| s.0.first().copied())
            .unwrap_or(parsed.events.len()),
        n => parsed.boundary_event(n).map_or(0, |e| e + 1),
    }
}

/// Truncate the per-call statistics to the first `calls` model calls and sum them again.
fn cut_stats(stats: &mut Value, calls: usize) {
    let Some(m) = stats
        .pointer_mut("/usage_to_metrics/agent")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for key in ["costs", "response_latencies", "token_usages"] {
        if let Some(a) = m.get_mut(key).and_then(Value::as_array_mut) {
            a.truncate(calls);
        }
    }
    if let Some(costs) = m.get("costs").and_then(Value::as_array) {
        let total: f64 = costs.iter().filter_map(|c| c["cost"].as_f64()).sum();
        m.insert("accumulated_cost".into(), json!(total));
    }
    let usages = m.get("token_usages").and_then(Value::as_array).cloned();
    if let (Some(usages), Some(acc)) = (
        usages,
        m.get_mut("accumulated_token_usage")
            .and_then(Value::as_object_mut),
    ) {
        for (k, v) in acc.iter_mut() {
            if v.is_u64() && usages.iter().all(|u| u[k].is_u64()) {
                *v = json!(usages.iter().filter_map(|u| u[k].as_u64()).sum::<u64>());
            }
        }
    }
}

/// The cut of `req` with its observations, for a store in `conv_dir`.
pub fn cut(req: &RebuildRequest, conv_dir: &Path) -> Result<Cut, AdapterError> {
    let parsed =
        req.plan.native.get::<Parsed>().ok_or_else(|| {
            AdapterError::Unsupported("the plan carries no OpenHands store".into())
        })?;
    let n = req.after_step;
    let observations = req.observation_map()?;
    let end = kept(parsed, n);
    // Result event index → the call it answers (batches 1..=n).
    let mut result_of = std::collections::HashMap::new();
    for (b, (_, results)) in parsed.sites.iter().enumerate().take(n) {
        for &r in results {
            if let Some(id) = parsed.events[r]["tool_call_id"].as_str() {
                result_of.insert(r, (b + 1, id.to_string()));
            }
        }
    }
    let mut events = Vec::with_capacity(end);
    for i in 0..end {
        let recorded = &parsed.events[i];
        let id = recorded["id"].as_str().unwrap_or_default().to_string();
        let text = match result_of.get(&i) {
            None => parsed.raw[i].clone(),
            Some((b, call)) => {
                let obs = observations.get(call).ok_or_else(|| {
                    AdapterError::Continuation(format!(
                        "no observation for call {call} of batch {b}"
                    ))
                })?;
                match &obs.native {
                    // The recorded event itself (prepare-only): its own bytes.
                    Some(ev) if ev == recorded => parsed.raw[i].clone(),
                    Some(ev) => {
                        if ev["id"] != recorded["id"] {
                            return Err(AdapterError::Continuation(format!(
                                "the fresh result of call {call} does not carry the recorded event id"
                            )));
                        }
                        serde_json::to_string(ev).unwrap_or_default()
                    }
                    None => {
                        return Err(AdapterError::Continuation(format!(
                            "the observation of call {call} carries no OpenHands event"
                        )))
                    }
                }
            }
        };
        events.push((id, text));
    }
    let mut base = parsed.base_state.clone();
    if let Some(o) = base.as_object_mut() {
        o.insert("execution_status".into(), json!("idle"));
        o.insert("persistence_dir".into(), json!(conv_dir));
        let chained = parsed.events.iter().any(|e| e.get("parent_id").is_some());
        if o.contains_key("leaf_event_id") || chained {
            let leaf = events
                .last()
                .map(|(id, _)| json!(id))
                .unwrap_or(Value::Null);
            o.insert("leaf_event_id".into(), leaf);
            if o.contains_key("head_is_empty") {
                o.insert("head_is_empty".into(), json!(events.is_empty()));
            }
        }
        if o.contains_key("last_user_message_id") {
            let last_user = parsed.events[..end]
                .iter()
                .rev()
                .find(|e| e["kind"] == "MessageEvent" && e["source"] == "user")
                .map(|e| e["id"].clone())
                .unwrap_or(Value::Null);
            o.insert("last_user_message_id".into(), last_user);
        }
        if let Some(w) = o.get_mut("workspace").and_then(Value::as_object_mut) {
            w.insert("working_dir".into(), json!(req.workspace));
        }
        let calls = match n {
            0 => 0,
            n => req.plan.batches.shape(n - 1).map_or(0, |s| s.model_turn),
        };
        if let Some(stats) = o.get_mut("stats") {
            cut_stats(stats, calls);
        }
    }
    Ok(Cut {
        base_state: base,
        events,
    })
}

/// The Chat Completions messages the SDK renders for the store in `conv_dir`.
pub fn prefix_of(
    req: &RebuildRequest,
    conv_dir: &Path,
    conversation_id: &str,
) -> Result<Vec<Value>, AdapterError> {
    let entry =
        super::runner::entrypoint_for(req.agent_entrypoint).map_err(AdapterError::Unsupported)?;
    let persist = conv_dir.parent().unwrap_or(conv_dir);
    let answer = super::runner::one_shot(
        &entry,
        req.state_dir,
        req.workspace,
        &json!({"mode": "messages", "persistenceDir": persist, "conversationId": conversation_id, "cwd": req.workspace}),
    )
    .map_err(|e| AdapterError::Continuation(format!("OpenHands could not load the rebuilt conversation: {e}")))?;
    Ok(answer["messages"].as_array().cloned().unwrap_or_default())
}

fn session(
    req: &RebuildRequest,
    cut: &Cut,
    native: PathBuf,
    prefix: Vec<Value>,
) -> Result<RebuiltSession, AdapterError> {
    let bundle = cut.bundle();
    if let Some(d) = req.artifact_path.parent() {
        std::fs::create_dir_all(d).map_err(io(d))?;
    }
    std::fs::write(req.artifact_path, &bundle).map_err(io(req.artifact_path))?;
    Ok(RebuiltSession {
        native_path: native,
        artifact_path: req.artifact_path.to_path_buf(),
        digest: format!("blake3:{}", blake3::hash(&bundle).to_hex()),
        records: 1 + cut.events.len() as u64,
        session_id: cut.base_state["id"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        prefix,
    })
}

fn conversation_id(req: &RebuildRequest) -> String {
    req.plan.session_id.clone().unwrap_or_default()
}

/// Write the cut store where the continued agent will load it (the tools' conversation
/// folder) and its artifact; the prefix is rendered (one SDK start) only for a continuation.
pub fn rebuild(req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
    let id = conversation_id(req);
    let conv = super::tools::conversation_dir(req.state_dir, &id);
    let cut = cut(req, &conv)?;
    cut.write(&conv)?;
    let prefix = if req.for_continuation {
        prefix_of(req, &conv, &id)?
    } else {
        vec![]
    };
    session(req, &cut, conv, prefix)
}

/// The same session for a run whose agent already continued it: the agent's store is left
/// alone; the cut is written to a scratch folder only to render its prefix.
pub fn rebuild_for_resume(req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
    let id = conversation_id(req);
    let conv = super::tools::conversation_dir(req.state_dir, &id);
    let cut = cut(req, &conv)?;
    let scratch = super::runner::home_of(req.state_dir)
        .join("resume-cut")
        .join(conv.file_name().unwrap_or_default());
    let mut copy = Cut {
        base_state: cut.base_state.clone(),
        events: cut.events.clone(),
    };
    copy.base_state["persistence_dir"] = json!(scratch);
    copy.write(&scratch)?;
    let prefix = prefix_of(req, &scratch, &id)?;
    let _ = std::fs::remove_dir_all(scratch.parent().unwrap_or(&scratch));
    session(req, &cut, conv, prefix)
}
