//! The trajectory cut after batch N, with the fresh observation messages in place of the
//! recorded ones, written the way mini writes it ([`super::pyjson`]): untouched messages and
//! `info` stay byte-identical (`info` is the recording's until the continued agent saves its
//! own), but for `info.model_stats.api_calls`, which counts the kept turns as mini's own
//! save after that turn does. Also the Chat Completions prefix mini sends for it: 2.x sends every message without
//! `extra` and without null fields; 1.x sends `role` and `content` only.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::parse::{self, Parsed};
use super::versions::Format;
use crate::kit::{AdapterError, RebuildRequest, RebuiltSession};

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AdapterError + '_ {
    move |source| AdapterError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where the rebuilt trajectory lives (the continued agent saves over it).
pub fn native_path(state_dir: &Path) -> PathBuf {
    state_dir.join("mini/trajectory.traj.json")
}

/// The messages of the trajectory cut after batch `n`, with `fresh` observation messages
/// (call id → message) where given.
pub fn cut_messages(
    p: &Parsed,
    n: usize,
    fresh: &dyn Fn(&str) -> Option<Value>,
) -> Result<Vec<Value>, AdapterError> {
    let end = p.boundary_message(n).ok_or_else(|| {
        AdapterError::Unsupported(format!(
            "batch {n} has no complete observations to cut after"
        ))
    })?;
    let mut messages: Vec<Value> = p.messages()[..=end].to_vec();
    for (site, batch) in p
        .sites
        .iter()
        .zip(p.plan().batches.loaded()?.iter())
        .take(n)
    {
        for (call, &at) in batch.calls.iter().zip(&site.observations) {
            if let Some(m) = fresh(&call.call_id) {
                messages[at] = m;
            }
        }
    }
    Ok(messages)
}

/// What the model receives for `messages`.
pub fn api_prefix(format: Format, messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| match format {
            Format::V1 => serde_json::json!({"role": m["role"], "content": m["content"]}),
            Format::V1_1 => {
                let mut o = m.as_object().cloned().unwrap_or_default();
                o.retain(|k, v| k != "extra" && !v.is_null());
                Value::Object(o)
            }
        })
        .collect()
}

/// A trajectory document with `messages` in place of the recorded ones, whose
/// `info.model_stats.api_calls` counts their model turns, as mini's own save after that turn
/// does (the cost stays the recording's: a format error's cost is in it but not in any kept
/// message).
pub fn document(p: &Parsed, messages: Vec<Value>) -> Value {
    let mut doc = p.doc.clone();
    if let Some(stats) = doc
        .pointer_mut("/info/model_stats")
        .and_then(Value::as_object_mut)
        .filter(|s| s.contains_key("api_calls"))
    {
        stats.insert("api_calls".into(), parse::model_turns(&messages).into());
    }
    doc["messages"] = Value::Array(messages);
    doc
}

/// The trajectory mini will continue (written to its native path and the artifact).
pub fn rebuild(req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
    write(req, true)
}

/// The same session for a run whose continuation already started: the artifact only (mini
/// owns its native file then: it holds the live turns).
pub fn rebuild_for_resume(req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
    write(req, false)
}

fn write(req: &RebuildRequest, native_too: bool) -> Result<RebuiltSession, AdapterError> {
    let owned;
    let p = match req.plan.native.get::<Parsed>() {
        Some(p) => p,
        None => {
            let bytes = std::fs::read(req.source).map_err(io(req.source))?;
            owned = parse::parse_bytes(req.source, &bytes)?;
            &owned
        }
    };
    let observations = req.observation_map()?;
    let fresh = |id: &str| {
        observations.get(id).map(|o| match &o.native {
            Some(m) => m.clone(),
            None => serde_json::json!({"role": "user", "content": o.text}),
        })
    };
    let messages = cut_messages(p, req.after_step, &fresh)?;
    let prefix = api_prefix(p.format, &messages);
    let records = messages.len() as u64;
    let text = super::pyjson::dumps(&document(p, messages));
    let native = native_path(req.state_dir);
    let artifact = req.artifact_path.to_path_buf();
    let targets: &[&PathBuf] = if native_too {
        &[&native, &artifact]
    } else {
        &[&artifact]
    };
    for f in targets.iter().copied() {
        if let Some(d) = f.parent() {
            std::fs::create_dir_all(d).map_err(io(d))?;
        }
        std::fs::write(f, &text).map_err(io(f))?;
    }
    let digest = blake3::hash(text.as_bytes()).to_hex();
    Ok(RebuiltSession {
        native_path: native,
        artifact_path: req.artifact_path.to_path_buf(),
        digest: format!("blake3:{digest}"),
        records,
        session_id: p.plan().session_id.clone().unwrap_or_default(),
        prefix,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_genuine_trajectories_are_written_back_byte_for_byte() {
        for rel in [
            "genuine-2.4.6/mini.traj.json",
            "genuine-1.17.5/mini.traj.json",
        ] {
            let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/mini-swe-agent")
                .join(rel);
            let bytes = std::fs::read(&path).unwrap();
            let p = parse::parse_bytes(&path, &bytes).unwrap();
            let text = super::super::pyjson::dumps(&p.doc);
            let orig = String::from_utf8(bytes).unwrap();
            let first = text.lines().zip(orig.lines()).position(|(a, b)| a != b);
            assert!(
                first.is_none() && text.len() == orig.len(),
                "{rel}: line {first:?}: {:?} vs {:?}",
                first.map(|i| text.lines().nth(i)),
                first.map(|i| orig.lines().nth(i))
            );
        }
    }

    #[test]
    fn the_prefix_is_what_mini_sends() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/mini-swe-agent/genuine-2.4.6");
        let bytes = std::fs::read(path.join("mini.traj.json")).unwrap();
        let p = parse::parse_bytes(&path.join("mini.traj.json"), &bytes).unwrap();
        let log = std::fs::read_to_string(path.join("requests-run1.jsonl")).unwrap();
        let requests: Vec<Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        for n in 1..=p.plan().max_boundary() {
            let msgs = cut_messages(&p, n, &|_| None).unwrap();
            let prefix = api_prefix(p.format, &msgs);
            let turn = p.plan().batches.in_memory().unwrap()[n - 1].model_turn;
            assert_eq!(
                Value::Array(prefix),
                requests[turn]["body"]["messages"],
                "N={n}"
            );
        }
    }
}
