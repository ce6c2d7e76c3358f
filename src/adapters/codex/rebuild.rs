//! Rebuild a Codex rollout at a batch boundary, with fresh observations, in an isolated
//! `CODEX_HOME` below the run's state dir.
//!
//! - `CODEX_HOME = <state>/codex-home`; the rollout goes to
//!   `sessions/YYYY/MM/DD/rollout-<YYYY-MM-DDTHH-MM-SS>-<id>.jsonl` (the session_meta
//!   timestamp; Codex finds the file by the id in its name);
//! - lines are kept up to the last output item of batch N; unchanged lines are written byte
//!   for byte; an output line whose observation changed gets `payload.output` replaced (a
//!   string, or the native content-item array) and is re-serialized (key order kept);
//! - `config.toml` selects the model of the last `turn_context` and a `pvisor` Responses
//!   provider; its `base_url` is overridden with `-c` when the continuation starts;
//! - `prefix` = the Responses `input` items Codex sends for these lines: every
//!   `response_item` payload without Codex's private `internal_chat_message_metadata_passthrough`.

use super::parse::{self, ParsedRollout};
use crate::kit::{AdapterError, RebuildRequest, RebuiltSession};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The provider id written to config.toml.
pub const PROVIDER: &str = "pvisor";
/// The environment variable holding the (bridge) API key.
pub const API_KEY_ENV: &str = "PVISOR_CODEX_API_KEY";
/// The key Codex keeps in rollout items but never sends.
pub const PRIVATE_KEY: &str = "internal_chat_message_metadata_passthrough";

/// The isolated Codex home of a run.
pub fn codex_home(state_dir: &Path) -> PathBuf {
    state_dir.join("codex-home")
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AdapterError + '_ {
    move |source| AdapterError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The canonical Responses input item of a rollout response item.
pub fn canonical_item(item: &Value) -> Value {
    let mut v = item.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove(PRIVATE_KEY);
    }
    v
}

/// The relative rollout path for a session.
pub fn rollout_rel_path(parsed: &ParsedRollout) -> PathBuf {
    let meta = &parsed.lines[parsed.meta_index].value;
    let ts = meta
        .get("payload")
        .and_then(|p| p.get("timestamp"))
        .or_else(|| meta.get("timestamp"))
        .and_then(Value::as_str)
        .unwrap_or("1970-01-01T00:00:00");
    let ts: String = ts.chars().take(19).collect();
    let ok = ts.len() == 19 && ts.as_bytes()[4] == b'-' && ts.as_bytes()[10] == b'T';
    let ts = if ok {
        ts
    } else {
        "1970-01-01T00:00:00".to_string()
    };
    let (y, m, d) = (&ts[0..4], &ts[5..7], &ts[8..10]);
    PathBuf::from("sessions")
        .join(y)
        .join(m)
        .join(d)
        .join(format!(
            "rollout-{}-{}.jsonl",
            ts.replace(':', "-"),
            parsed.session_id
        ))
}

/// The model of the last `turn_context` before `upto` (line index), if any.
pub fn model_of(parsed: &ParsedRollout, upto: usize) -> Option<String> {
    parsed.lines[..upto.min(parsed.lines.len())]
        .iter()
        .rev()
        .find(|l| l.line_type() == "turn_context")
        .and_then(|l| {
            l.value["payload"]
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
}

/// Lines (indexes) kept for boundary `after_step`, and the cut index (exclusive).
pub fn cut_index(parsed: &ParsedRollout, after_step: usize) -> Result<usize, AdapterError> {
    let plan = parsed.plan();
    if after_step == 0 || after_step > plan.max_boundary() {
        return Err(AdapterError::Unsupported(format!(
            "boundary {after_step} is not selectable (1..={})",
            plan.max_boundary()
        )));
    }
    let batch = &plan.batches[after_step - 1];
    let mut last = 0;
    for c in &batch.calls {
        let rec = parsed
            .call(&c.call_id)
            .expect("calls of the plan are in the parse");
        last = last.max(rec.output_index.expect("a complete batch has outputs"));
    }
    if let Some(l) = parsed.lines[..=last]
        .iter()
        .find(|l| l.line_type() == "compacted")
    {
        return Err(AdapterError::Unsupported(format!(
            "line {}: a `compacted` history before the boundary is not rebuilt yet",
            l.line
        )));
    }
    Ok(last + 1)
}

/// Rebuild the rollout.
pub fn rebuild(req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
    let parsed = parse::parse_file(req.source)?;
    let cut = cut_index(&parsed, req.after_step)?;
    let allowed: std::collections::HashSet<&str> = parsed.plan().batches[..req.after_step]
        .iter()
        .flat_map(|b| b.calls.iter().map(|c| c.call_id.as_str()))
        .collect();
    let mut out = String::new();
    let mut prefix = Vec::new();
    let mut records = 0u64;
    for (idx, l) in parsed.lines[..cut].iter().enumerate() {
        let mut line = l.raw.clone();
        let mut item = l.response_item(parsed.era).cloned();
        if let Some(it) = item.as_mut() {
            let ty = it
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if ty == "function_call_output" || ty == "custom_tool_call_output" {
                let id = it["call_id"].as_str().unwrap_or("").to_string();
                if let (true, Some(obs)) =
                    (allowed.contains(id.as_str()), req.observations.get(&id))
                {
                    let orig = parsed.call(&id).and_then(|c| c.call.original.clone());
                    if orig.as_ref() != Some(obs) {
                        let new_out = match &obs.native {
                            Some(n) => n.clone(),
                            None => Value::String(obs.text.clone()),
                        };
                        it["output"] = new_out;
                        let mut v = l.value.clone();
                        match parsed.era {
                            parse::Era::Wrapped => v["payload"] = it.clone(),
                            parse::Era::Bare => v = it.clone(),
                        }
                        line = serde_json::to_string(&v).expect("serialize a JSON value");
                    }
                }
            }
            prefix.push(canonical_item(it));
        }
        let _ = idx;
        out.push_str(&line);
        out.push('\n');
        records += 1;
    }
    let home = codex_home(req.state_dir);
    let rel = rollout_rel_path(&parsed);
    let native_path = home.join(&rel);
    std::fs::create_dir_all(native_path.parent().expect("has a parent"))
        .map_err(io(&native_path))?;
    std::fs::write(&native_path, &out).map_err(io(&native_path))?;
    let model = model_of(&parsed, cut).unwrap_or_else(|| "gpt-5.5".into());
    let config = config_toml(&model, "http://127.0.0.1:9/v1");
    let cfg_path = home.join("config.toml");
    std::fs::write(&cfg_path, config).map_err(io(&cfg_path))?;
    if let Some(p) = req.artifact_path.parent() {
        std::fs::create_dir_all(p).map_err(io(p))?;
    }
    std::fs::write(req.artifact_path, &out).map_err(io(req.artifact_path))?;
    Ok(RebuiltSession {
        native_path,
        artifact_path: req.artifact_path.to_path_buf(),
        digest: crate::digest::blake3(out.as_bytes()),
        records,
        session_id: parsed.session_id.clone(),
        prefix,
    })
}

/// config.toml of the isolated home.
pub fn config_toml(model: &str, base_url: &str) -> String {
    format!(
        "model = {model:?}\nmodel_provider = \"{PROVIDER}\"\n\n[model_providers.{PROVIDER}]\nname = \"pvisor replay bridge\"\nbase_url = {base_url:?}\nwire_api = \"responses\"\nenv_key = \"{API_KEY_ENV}\"\n"
    )
}
