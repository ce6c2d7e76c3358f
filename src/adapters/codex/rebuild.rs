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
use super::scan::{self, Head, LineReader};
use crate::kit::{AdapterError, Observation, Observations, RebuildRequest, RebuiltSession};
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
    let ts = parsed
        .meta_timestamp
        .as_deref()
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

/// The rollout being written: the file, its digest and line count.
struct Out {
    file: std::io::BufWriter<std::fs::File>,
    hash: blake3::Hasher,
    records: u64,
    path: PathBuf,
}

impl Out {
    fn write(&mut self, bytes: &[u8]) -> Result<(), AdapterError> {
        use std::io::Write;
        self.file.write_all(bytes).map_err(io(&self.path))?;
        self.hash.update(bytes);
        Ok(())
    }

    /// One line (without its newline).
    fn line(&mut self, text: &[u8]) -> Result<(), AdapterError> {
        self.write(text)?;
        self.write(b"\n")?;
        self.records += 1;
        Ok(())
    }

    /// The next `len` bytes of `source`: whole lines, copied as they are.
    fn copy(
        &mut self,
        source: &mut impl std::io::BufRead,
        mut len: u64,
        source_path: &Path,
    ) -> Result<(), AdapterError> {
        while len > 0 {
            let buf = source.fill_buf().map_err(io(source_path))?;
            if buf.is_empty() {
                return Err(AdapterError::Unsupported(format!(
                    "{}: the rollout changed since it was parsed (it is shorter)",
                    source_path.display()
                )));
            }
            let k = buf.len().min(len as usize);
            let chunk = &buf[..k];
            self.records += memchr::memchr_iter(b'\n', chunk).count() as u64;
            use std::io::Write;
            self.file.write_all(chunk).map_err(io(&self.path))?;
            self.hash.update(chunk);
            source.consume(k);
            len -= k as u64;
        }
        Ok(())
    }
}

/// Rebuild the rollout: its lines up to the last output of batch `after_step`, with the calls'
/// output lines rewritten where the fresh observation differs from the recorded one. The
/// source is read once and never held: unchanged bytes are copied as they are.
pub fn rebuild(req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
    let reparsed;
    let parsed = match req.plan.native.get::<ParsedRollout>() {
        Some(p) => p,
        None => {
            reparsed = parse::parse_file(req.source)?;
            &reparsed
        }
    };
    let plan = req.plan;
    if req.after_step == 0 || req.after_step > plan.max_boundary() {
        return Err(AdapterError::Unsupported(format!(
            "boundary {} is not selectable (1..={})",
            req.after_step,
            plan.max_boundary()
        )));
    }
    let home = codex_home(req.state_dir);
    let native_path = home.join(rollout_rel_path(parsed));
    let dir = native_path.parent().expect("has a parent");
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let tmp = dir.join(".pvisor-rebuild.tmp");
    let file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    let mut out = Out {
        file: std::io::BufWriter::with_capacity(1 << 20, file),
        hash: blake3::Hasher::new(),
        records: 0,
        path: tmp.clone(),
    };
    let source = std::fs::File::open(req.source).map_err(io(req.source))?;
    let source = std::io::BufReader::with_capacity(1 << 20, source);
    // A plain file (no blank line, no `\r`) is cut and copied by byte ranges; otherwise, or
    // when the continuation needs the prefix items, it is read line by line.
    let by_ranges =
        parsed.plain && !req.for_continuation && parsed.outputs.len() == plan.batches.len();
    let written = if by_ranges {
        copy_by_ranges(req, parsed, source, &mut out).map(|model| (model, vec![]))
    } else {
        copy_by_lines(req, parsed, source, &mut out)
    };
    let written = written.and_then(|w| {
        use std::io::Write;
        out.file.flush().map_err(io(&tmp))?;
        Ok(w)
    });
    let (model, prefix) = match written {
        Ok(w) => w,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    std::fs::rename(&tmp, &native_path).map_err(io(&native_path))?;
    let config = config_toml(
        model.as_deref().unwrap_or("gpt-5.5"),
        "http://127.0.0.1:9/v1",
    );
    let cfg_path = home.join("config.toml");
    std::fs::write(&cfg_path, config).map_err(io(&cfg_path))?;
    if let Some(p) = req.artifact_path.parent() {
        std::fs::create_dir_all(p).map_err(io(p))?;
    }
    std::fs::copy(&native_path, req.artifact_path).map_err(io(req.artifact_path))?;
    Ok(RebuiltSession {
        native_path,
        artifact_path: req.artifact_path.to_path_buf(),
        digest: format!("blake3:{}", out.hash.finalize().to_hex()),
        records: out.records,
        session_id: parsed.session_id.clone(),
        prefix,
    })
}

/// The output line `line` (a wrapped line or a bare item) with its item's output replaced by
/// `obs`: the new line and the new item.
fn with_output(mut line: Value, era: parse::Era, obs: &Observation) -> (Vec<u8>, Value) {
    let output = match &obs.native {
        Some(n) => n.clone(),
        None => Value::String(obs.text.clone()),
    };
    let item = match era {
        parse::Era::Wrapped => &mut line["payload"],
        parse::Era::Bare => &mut line,
    };
    item["output"] = output;
    let item = item.clone();
    let text = serde_json::to_vec(&line).expect("serialize a JSON value");
    (text, item)
}

/// Copy the rollout up to the cut from the byte ranges the parse kept, rewriting the output
/// lines whose observation changed. The model of the last `turn_context` before the cut.
fn copy_by_ranges(
    req: &RebuildRequest,
    parsed: &ParsedRollout,
    mut source: impl std::io::BufRead,
    out: &mut Out,
) -> Result<Option<String>, AdapterError> {
    let n = req.after_step;
    let cut = parsed.outputs[n - 1]
        .iter()
        .map(|r| r.end)
        .max()
        .unwrap_or(0);
    if let Some((line, start)) = parsed.compacted {
        if start < cut {
            return Err(compacted(line));
        }
    }
    let model = parsed
        .turn_models
        .iter()
        .rev()
        .find(|(start, _)| *start < cut)
        .and_then(|(_, m)| m.clone());
    // The prepared session keeps the recorded observations: nothing is rewritten.
    let mut changed: Vec<(std::ops::Range<u64>, &Observation)> = vec![];
    if let Observations::Fresh(fresh) = req.observations {
        for (b, batch) in req.plan.batches.range(0..n).enumerate() {
            for (c, call) in batch?.calls.iter().enumerate() {
                if let Some(obs) = fresh.get(&call.call_id) {
                    if call.original.as_ref() != Some(obs) {
                        changed.push((parsed.outputs[b][c].clone(), obs));
                    }
                }
            }
        }
    }
    changed.sort_by_key(|(r, _)| r.start);
    let mut pos = 0u64;
    let mut line = vec![];
    for (range, obs) in changed {
        out.copy(&mut source, range.start - pos, req.source)?;
        line.resize((range.end - range.start) as usize, 0);
        source.read_exact(&mut line).map_err(io(req.source))?;
        let value: Value = serde_json::from_slice(line.strip_suffix(b"\n").unwrap_or(&line))
            .map_err(|e| changed_source(req, &e.to_string()))?;
        let (text, _) = with_output(value, parsed.era, obs);
        out.line(&text)?;
        pos = range.end;
    }
    out.copy(&mut source, cut - pos, req.source)?;
    Ok(model)
}

fn changed_source(req: &RebuildRequest, why: &str) -> AdapterError {
    AdapterError::Unsupported(format!(
        "{}: the rollout changed since it was parsed ({why})",
        req.source.display()
    ))
}

/// Copy the rollout up to the cut line by line (blank lines dropped, `\r` removed), rewriting
/// the output lines whose observation changed and collecting the prefix items when the
/// continuation needs them. The model of the last `turn_context` before the cut.
fn copy_by_lines(
    req: &RebuildRequest,
    parsed: &ParsedRollout,
    source: impl std::io::BufRead,
    out: &mut Out,
) -> Result<(Option<String>, Vec<Value>), AdapterError> {
    // The cut is the line of batch N's last output.
    let last = req.plan.batches.at(req.after_step - 1)?;
    let mut pending: std::collections::HashSet<&str> =
        last.calls.iter().map(|c| c.call_id.as_str()).collect();
    let fresh_of = match req.observations {
        Observations::Fresh(m) => Some(m),
        Observations::Originals => None,
    };
    let mut lines = LineReader::new(source);
    let mut prefix = Vec::new();
    let mut model: Option<String> = None;
    while !pending.is_empty() {
        let Some(l) = lines.next_line().map_err(io(req.source))? else {
            return Err(changed_source(
                req,
                &format!("it ends before the last output of batch {}", req.after_step),
            ));
        };
        if scan::is_blank(l.text) {
            continue;
        }
        // A line that is not a call's output needs only its head (unless the prefix is
        // wanted, which holds every response item).
        let head = (parsed.era == parse::Era::Wrapped && !req.for_continuation)
            .then(|| Head::of(l.text))
            .flatten()
            .filter(|h| {
                h.line_type() != "response_item"
                    || h.payload_type().is_some_and(|t| !t.ends_with("_output"))
            });
        if let Some(h) = head {
            match h.line_type() {
                "turn_context" => {
                    model = h
                        .payload
                        .as_ref()
                        .and_then(|p| p.model.as_deref())
                        .map(str::to_string)
                }
                "compacted" => return Err(compacted(l.number)),
                _ => {}
            }
            out.line(l.text)?;
            continue;
        }
        let Ok(value) = serde_json::from_slice::<Value>(l.text) else {
            // The parse accepted the file: only a torn final line fails here.
            continue;
        };
        let line = parse::RolloutLine {
            line: l.number,
            value,
        };
        match line.line_type() {
            "turn_context" => {
                model = line.value["payload"]
                    .get("model")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            }
            "compacted" => return Err(compacted(l.number)),
            _ => {}
        }
        let Some(item) = line.response_item(parsed.era) else {
            out.line(l.text)?;
            continue;
        };
        let ty = item.get("type").and_then(Value::as_str).unwrap_or("");
        let id = item.get("call_id").and_then(Value::as_str).unwrap_or("");
        let fresh = if ty == "function_call_output" || ty == "custom_tool_call_output" {
            pending.remove(id);
            fresh_of.and_then(|m| m.get(id)).filter(|obs| {
                item.get("output").and_then(parse::observation_of).as_ref() != Some(*obs)
            })
        } else {
            None
        };
        let item = match fresh {
            Some(obs) => {
                let (text, item) = with_output(line.value.clone(), parsed.era, obs);
                out.line(&text)?;
                item
            }
            None => {
                out.line(l.text)?;
                item.clone()
            }
        };
        if req.for_continuation {
            prefix.push(canonical_item(&item));
        }
    }
    Ok((model, prefix))
}

fn compacted(line: usize) -> AdapterError {
    AdapterError::Unsupported(format!(
        "line {line}: a `compacted` history before the boundary is not rebuilt yet"
    ))
}

/// config.toml of the isolated home.
pub fn config_toml(model: &str, base_url: &str) -> String {
    format!(
        "model = {model:?}\nmodel_provider = \"{PROVIDER}\"\n\n[model_providers.{PROVIDER}]\nname = \"pvisor replay bridge\"\nbase_url = {base_url:?}\nwire_api = \"responses\"\nenv_key = \"{API_KEY_ENV}\"\n"
    )
}
