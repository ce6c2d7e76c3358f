//! Codex CLI rollout JSONL → [`ParsedRollout`] → [`Plan`].
//!
//! Three file eras are read (see `docs/agents/codex.md`):
//! 1. bare (≤ early Sept 2025): line 1 is the session meta object `{id, timestamp,
//!    instructions, git}`, then bare response items (`{"type":"message",…}`) and
//!    `{"record_type":"state"}` markers;
//! 2. wrapped: every line is `{timestamp, type, payload}` with `type` one of `session_meta`,
//!    `turn_context`, `response_item`, `event_msg`, `compacted`;
//! 3. 2026 additions (`world_state`, `inter_agent_communication…`, …): kept verbatim, never
//!    model-visible.
//!
//! Only `response_item`s are model-visible; `event_msg` lines are UI mirrors. The native
//! session id comes from `session_meta` (or the bare-era meta line) only.
//!
//! A **model reply** is a maximal run of reply items (`reasoning`, assistant `message`,
//! `function_call`, `custom_tool_call`, `local_shell_call`, `web_search_call`, …) not
//! interrupted by a non-reply response item (a tool output, a user/developer message) or by
//! an `event_msg/token_count` (written when a sampling round completes). A **batch** is the
//! tool calls of one reply; calls are paired with their `*_output` items by `call_id`.

use crate::error::TrajectoryError;
use crate::kit::{Batch, Locator, Observation, Plan, ToolCall};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The agent name used in plans.
pub const AGENT: &str = "codex";

/// The rollout era of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// Bare response items, meta object on line 1.
    Bare,
    /// `{timestamp, type, payload}` lines.
    Wrapped,
}

/// How a tool call was encoded, which decides the output item type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// `function_call` (JSON `arguments`), answered by `function_call_output`.
    Function,
    /// `custom_tool_call` (freeform `input`), answered by `custom_tool_call_output`.
    Custom,
    /// `local_shell_call` (`action.command` argv), answered by `function_call_output`.
    LocalShell,
}

impl CallKind {
    /// The item type of the answer.
    pub fn output_type(self) -> &'static str {
        match self {
            CallKind::Custom => "custom_tool_call_output",
            _ => "function_call_output",
        }
    }
}

/// One non-empty line of the rollout.
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutLine {
    /// 1-based line number.
    pub line: usize,
    /// The line, verbatim (without its newline).
    pub raw: String,
    pub value: Value,
}

impl RolloutLine {
    /// The response item this line carries (wrapped `payload` or a bare item), if any.
    pub fn response_item(&self, era: Era) -> Option<&Value> {
        match era {
            Era::Wrapped => (self.value.get("type").and_then(Value::as_str)
                == Some("response_item"))
            .then(|| &self.value["payload"]),
            Era::Bare => {
                if self.line == 1 || self.value.get("record_type").is_some() {
                    None
                } else if self.value.get("type").and_then(Value::as_str) == Some("response_item") {
                    Some(&self.value["payload"])
                } else {
                    self.value
                        .get("type")
                        .and_then(Value::as_str)
                        .filter(|t| is_response_item_type(t))
                        .map(|_| &self.value)
                }
            }
        }
    }

    /// The wrapped line type (`session_meta`, `event_msg`, …), empty for bare items.
    pub fn line_type(&self) -> &str {
        self.value.get("type").and_then(Value::as_str).unwrap_or("")
    }
}

/// Response item types of the Responses API / Codex `ResponseItem` that a bare-era line may be.
fn is_response_item_type(t: &str) -> bool {
    matches!(
        t,
        "message"
            | "reasoning"
            | "function_call"
            | "function_call_output"
            | "custom_tool_call"
            | "custom_tool_call_output"
            | "local_shell_call"
            | "web_search_call"
            | "image_generation_call"
            | "tool_search_call"
            | "tool_search_output"
            | "ghost_snapshot"
            | "compaction"
            | "compaction_summary"
    )
}

/// Whether a response item is part of a model reply (as opposed to an input the harness
/// added: tool outputs, user/developer/system messages).
fn is_reply_item(item: &Value) -> bool {
    match item.get("type").and_then(Value::as_str).unwrap_or("") {
        "message" => item.get("role").and_then(Value::as_str) == Some("assistant"),
        "reasoning"
        | "function_call"
        | "custom_tool_call"
        | "local_shell_call"
        | "web_search_call"
        | "image_generation_call"
        | "tool_search_call" => true,
        _ => false,
    }
}

/// A call as found in the rollout.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    pub call: ToolCall,
    pub kind: CallKind,
    /// Index into [`ParsedRollout::lines`] of the call item.
    pub line_index: usize,
    /// Index into [`ParsedRollout::lines`] of the output item, when present.
    pub output_index: Option<usize>,
    /// 1-based reply number.
    pub reply: usize,
}

/// A parsed rollout.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedRollout {
    pub path: PathBuf,
    pub era: Era,
    pub lines: Vec<RolloutLine>,
    /// Index of the session meta line.
    pub meta_index: usize,
    pub session_id: String,
    pub cwd: Option<PathBuf>,
    pub cli_version: Option<String>,
    /// Every call, in file order.
    pub calls: Vec<CallRecord>,
    /// Per reply (1-based number - 1): the line indexes of its items.
    pub replies: Vec<Vec<usize>>,
    plan: Plan,
    /// Call id -> index into `calls` (the first call of an id, as a search in file order finds).
    by_id: std::collections::HashMap<String, usize>,
}

impl ParsedRollout {
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The call record of a call id.
    pub fn call(&self, call_id: &str) -> Option<&CallRecord> {
        self.calls.get(*self.by_id.get(call_id)?)
    }
}

/// The model-visible text of an output value (string, content-item array, or the legacy
/// `{content, success}` object), its error flag, and the verbatim native value when it is
/// not a plain string.
pub fn observation_of(output: &Value) -> Option<Observation> {
    match output {
        Value::String(s) => Some(Observation {
            text: s.clone(),
            is_error: false,
            native: None,
        }),
        Value::Array(items) => {
            let mut text = String::new();
            for it in items {
                if let Some(t) = it.get("text").and_then(Value::as_str) {
                    text.push_str(t);
                }
            }
            Some(Observation {
                text,
                is_error: false,
                native: Some(output.clone()),
            })
        }
        Value::Object(o) => {
            let inner = o.get("content").or_else(|| o.get("body"))?;
            let mut obs = observation_of(inner)?;
            obs.is_error = o.get("success").and_then(Value::as_bool) == Some(false);
            obs.native = Some(output.clone());
            Some(obs)
        }
        _ => None,
    }
}

/// Parse a rollout file.
pub fn parse_file(path: &Path) -> Result<ParsedRollout, TrajectoryError> {
    let bytes = std::fs::read(path).map_err(|e| {
        TrajectoryError::new(path, 0, "file", format!("cannot read the rollout: {e}"))
    })?;
    parse_bytes(path, &bytes)
}

/// Parse rollout bytes.
pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<ParsedRollout, TrajectoryError> {
    let lines = read_lines(path, bytes)?;
    let meta = session_meta(path, &lines)?;
    let (calls, replies) = replies_and_calls(path, &lines, meta.era)?;
    let batches = batches(&calls);
    let mut by_id = std::collections::HashMap::with_capacity(calls.len());
    for (i, c) in calls.iter().enumerate() {
        by_id.entry(c.call.call_id.clone()).or_insert(i);
    }
    let plan = Plan {
        agent: AGENT.into(),
        recorded_version: meta.cli_version.clone(),
        session_id: Some(meta.session_id.clone()),
        original_cwd: meta.cwd.clone(),
        batches,
        model_turns: replies.len(),
        native: Default::default(),
    };
    Ok(ParsedRollout {
        path: path.to_path_buf(),
        era: meta.era,
        lines,
        meta_index: meta.index,
        session_id: meta.session_id,
        cwd: meta.cwd,
        cli_version: meta.cli_version,
        calls,
        replies,
        plan,
        by_id,
    })
}

fn err(path: &Path, line: usize, field: &str, msg: String) -> TrajectoryError {
    TrajectoryError::new(path, line, field, msg)
}

/// The non-empty lines of the rollout, each a JSON object (a torn final line is dropped).
fn read_lines(path: &Path, bytes: &[u8]) -> Result<Vec<RolloutLine>, TrajectoryError> {
    let text = crate::error::utf8_text(path, bytes, "the rollout")?;
    let torn_tail = !text.is_empty() && !text.ends_with('\n');
    let raw_lines: Vec<&str> = text.split('\n').collect();
    let n_raw = raw_lines.len();
    let mut lines = Vec::new();
    for (i, raw) in raw_lines.into_iter().enumerate() {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        if raw.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(raw) {
            Ok(v @ Value::Object(_)) => lines.push(RolloutLine {
                line: i + 1,
                raw: raw.to_string(),
                value: v,
            }),
            Ok(_) => {
                return Err(err(
                    path,
                    i + 1,
                    "line",
                    "a rollout line must be a JSON object".into(),
                ))
            }
            // A torn final line (crash while writing) is ignored, as Codex does.
            Err(_) if torn_tail && i + 1 == n_raw => {}
            Err(e) => return Err(err(path, i + 1, "line", format!("invalid JSON: {e}"))),
        }
    }
    if lines.is_empty() {
        return Err(err(path, 0, "file", "the rollout is empty".into()));
    }
    Ok(lines)
}

/// What the session meta line says.
struct SessionMeta {
    era: Era,
    /// Index into the lines of the meta line.
    index: usize,
    session_id: String,
    cwd: Option<PathBuf>,
    cli_version: Option<String>,
}

/// Era and session meta (`lines` is not empty).
fn session_meta(path: &Path, lines: &[RolloutLine]) -> Result<SessionMeta, TrajectoryError> {
    let first = &lines[0];
    let wrapped = first.value.get("payload").is_some()
        && first.value.get("type").and_then(Value::as_str).is_some();
    let era = if wrapped { Era::Wrapped } else { Era::Bare };
    let (meta_index, meta): (usize, &Value) = match era {
        Era::Wrapped => match lines.iter().position(|l| l.line_type() == "session_meta") {
            Some(i) => (i, &lines[i].value["payload"]),
            None => {
                return Err(err(
                    path,
                    first.line,
                    "session_meta",
                    "no session_meta line: the native session id is unknown".into(),
                ))
            }
        },
        Era::Bare => {
            if first.value.get("type").is_some() || first.value.get("id").is_none() {
                return Err(err(path, first.line, "session_meta", "line 1 is not a session meta object ({id, timestamp, …}): the native session id is unknown".into()));
            }
            (0, &first.value)
        }
    };
    let meta_line = lines[meta_index].line;
    let session_id = match meta.get("id") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(_) => {
            return Err(err(
                path,
                meta_line,
                "session_meta.payload.id",
                "the session id must be a non-empty string".into(),
            ))
        }
        None => {
            return Err(err(
                path,
                meta_line,
                "session_meta.payload.id",
                "missing session id".into(),
            ))
        }
    };
    let cwd = meta.get("cwd").and_then(Value::as_str).map(PathBuf::from);
    let cli_version = meta
        .get("cli_version")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(SessionMeta {
        era,
        index: meta_index,
        session_id,
        cwd,
        cli_version,
    })
}

/// Replies, calls, outputs: the calls in file order (with their outputs attached) and the
/// line indexes of each reply's items.
fn replies_and_calls(
    path: &Path,
    lines: &[RolloutLine],
    era: Era,
) -> Result<(Vec<CallRecord>, Vec<Vec<usize>>), TrajectoryError> {
    let mut calls: Vec<CallRecord> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    let mut replies: Vec<Vec<usize>> = Vec::new();
    let mut in_reply = false;
    for (idx, l) in lines.iter().enumerate() {
        if l.line_type() == "event_msg"
            && l.value["payload"].get("type").and_then(Value::as_str) == Some("token_count")
        {
            in_reply = false;
            continue;
        }
        let Some(item) = l.response_item(era) else {
            continue;
        };
        if !item.is_object() {
            return Err(err(
                path,
                l.line,
                "payload",
                "a response item must be an object".into(),
            ));
        }
        let ty = match item.get("type") {
            Some(Value::String(s)) => s.as_str(),
            _ => {
                return Err(err(
                    path,
                    l.line,
                    "payload.type",
                    "a response item needs a string `type`".into(),
                ))
            }
        };
        if is_reply_item(item) {
            if !in_reply {
                replies.push(Vec::new());
                in_reply = true;
            }
            replies.last_mut().expect("a reply was pushed").push(idx);
        } else {
            in_reply = false;
        }
        if matches!(ty, "function_call_output" | "custom_tool_call_output") {
            attach_output(path, l, idx, item, ty, &mut calls, &by_id)?;
            continue;
        }
        let Some((kind, tool, input)) = call_of(path, l.line, item, ty)? else {
            continue;
        };
        let id = match item.get("call_id").or_else(|| item.get("id")) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => {
                return Err(err(
                    path,
                    l.line,
                    "payload.call_id",
                    format!("a `{ty}` item needs a non-empty string call_id"),
                ))
            }
        };
        if by_id.contains_key(&id) {
            return Err(err(
                path,
                l.line,
                "payload.call_id",
                format!("duplicate call_id `{id}`"),
            ));
        }
        by_id.insert(id.clone(), calls.len());
        calls.push(CallRecord {
            call: ToolCall {
                call_id: id.clone(),
                tool,
                input,
                original: None,
                locator: Locator {
                    line: l.line,
                    native_id: Some(id),
                },
            },
            kind,
            line_index: idx,
            output_index: None,
            reply: replies.len(),
        });
    }
    Ok((calls, replies))
}

/// The kind, tool name and input of a call item of type `ty`; `None` when the item is not a
/// call.
fn call_of(
    path: &Path,
    line: usize,
    item: &Value,
    ty: &str,
) -> Result<Option<(CallKind, String, Value)>, TrajectoryError> {
    Ok(Some(match ty {
        "function_call" => {
            let name = item.get("name").and_then(Value::as_str).ok_or_else(|| {
                err(
                    path,
                    line,
                    "payload.name",
                    "a function_call needs a string name".into(),
                )
            })?;
            let args = match item.get("arguments") {
                Some(Value::String(s)) => {
                    serde_json::from_str::<Value>(s).unwrap_or_else(|_| Value::String(s.clone()))
                }
                Some(v @ Value::Object(_)) => v.clone(),
                _ => {
                    return Err(err(
                        path,
                        line,
                        "payload.arguments",
                        "a function_call needs `arguments` (a JSON string)".into(),
                    ))
                }
            };
            (CallKind::Function, name.to_string(), args)
        }
        "custom_tool_call" => {
            let name = item.get("name").and_then(Value::as_str).ok_or_else(|| {
                err(
                    path,
                    line,
                    "payload.name",
                    "a custom_tool_call needs a string name".into(),
                )
            })?;
            let input = item.get("input").and_then(Value::as_str).ok_or_else(|| {
                err(
                    path,
                    line,
                    "payload.input",
                    "a custom_tool_call needs a string input".into(),
                )
            })?;
            (
                CallKind::Custom,
                name.to_string(),
                Value::String(input.to_string()),
            )
        }
        "local_shell_call" => {
            let action = item
                .get("action")
                .filter(|a| a.is_object())
                .ok_or_else(|| {
                    err(
                        path,
                        line,
                        "payload.action",
                        "a local_shell_call needs an action object".into(),
                    )
                })?;
            (
                CallKind::LocalShell,
                "local_shell".to_string(),
                action.clone(),
            )
        }
        _ => return Ok(None),
    }))
}

/// Pair an output item (line `l`, index `idx`, type `ty`) with its earlier call.
fn attach_output(
    path: &Path,
    l: &RolloutLine,
    idx: usize,
    item: &Value,
    ty: &str,
    calls: &mut [CallRecord],
    by_id: &HashMap<String, usize>,
) -> Result<(), TrajectoryError> {
    let id = match item.get("call_id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => {
            return Err(err(
                path,
                l.line,
                "payload.call_id",
                format!("a `{ty}` item needs a non-empty string call_id"),
            ))
        }
    };
    let Some(&ci) = by_id.get(&id) else {
        return Err(err(
            path,
            l.line,
            "payload.call_id",
            format!("output for unknown call `{id}` (no earlier call has this call_id)"),
        ));
    };
    let c = &mut calls[ci];
    if c.output_index.is_some() {
        return Err(err(
            path,
            l.line,
            "payload.call_id",
            format!("second output for call `{id}`"),
        ));
    }
    if c.kind.output_type() != ty {
        return Err(err(
            path,
            l.line,
            "payload.type",
            format!(
                "call `{id}` is answered by `{ty}`, expected `{}`",
                c.kind.output_type()
            ),
        ));
    }
    let output = item
        .get("output")
        .ok_or_else(|| err(path, l.line, "payload.output", "missing output".into()))?;
    let obs = observation_of(output).ok_or_else(|| {
        err(
            path,
            l.line,
            "payload.output",
            "output must be a string, an array of content items or {content, success}".into(),
        )
    })?;
    c.output_index = Some(idx);
    c.call.original = Some(obs);
    Ok(())
}

/// Batches: the calls of each reply, in order.
fn batches(calls: &[CallRecord]) -> Vec<Batch> {
    let mut batches: Vec<Batch> = Vec::new();
    for c in calls {
        match batches.last_mut() {
            Some(b) if b.model_turn == c.reply => b.calls.push(c.call.clone()),
            _ => batches.push(Batch {
                index: batches.len() + 1,
                calls: vec![c.call.clone()],
                model_turn: c.reply,
                locator: c.call.locator.clone(),
                complete: false,
            }),
        }
    }
    for b in &mut batches {
        b.complete = b.calls.iter().all(|c| c.original.is_some());
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_era() {
        let src = concat!(
            "{\"id\":\"s1\",\"timestamp\":\"2025-08-01T00:00:00Z\",\"instructions\":null,\"git\":{}}\n",
            "{\"record_type\":\"state\"}\n",
            "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"hi\"}]}\n",
            "{\"type\":\"function_call\",\"name\":\"shell\",\"arguments\":\"{\\\"command\\\":[\\\"ls\\\"]}\",\"call_id\":\"c1\"}\n",
            "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"{\\\"output\\\":\\\"a\\\\n\\\",\\\"metadata\\\":{\\\"exit_code\\\":0,\\\"duration_seconds\\\":0.0}}\"}\n",
            "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"done\"}]}\n",
        );
        let p = parse_bytes(Path::new("x"), src.as_bytes()).unwrap();
        assert_eq!(p.era, Era::Bare);
        assert_eq!(p.session_id, "s1");
        assert_eq!(p.plan().batches.len(), 1);
        assert!(p.plan().batches[0].complete);
        assert_eq!(p.plan().model_turns, 2);
    }

    #[test]
    fn missing_meta_names_line() {
        let src = "{\"timestamp\":\"t\",\"type\":\"response_item\",\"payload\":{\"type\":\"message\",\"role\":\"user\",\"content\":[]}}\n";
        let e = parse_bytes(Path::new("x"), src.as_bytes()).unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.message.contains("session_meta"), "{e}");
    }
}
