//! OpenCode inputs → [`Session`] → [`Plan`].
//!
//! Three input forms, told apart by their bytes:
//! - `opencode.db` (SQLite; its `-wal` beside it is folded in): the store itself;
//! - `opencode export <id>` JSON (`{info, messages}`);
//! - `opencode run --format=json` stdout, one event per line (`step_start`, `text`,
//!   `reasoning`, `tool_use`, `step_finish`, `error`, and in some builds `user` and `done`).
//!
//! One step (`step-start … step-finish`, one model call) is one model turn; its tool parts,
//! in call order (part ids), are one batch. A call and its result live in one tool part;
//! repeated states of one call (`pending` → `running` → `completed`/`error`) are merged, so
//! no call is replayed twice. A step whose calls have not all reached `completed` or
//! `error` is the torn end, never a boundary.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{json, Value};

use super::session::{with_ids, InputForm, Message, Session};
use crate::error::TrajectoryError;
use crate::kit::{Batch, Locator, Observation, Plan, ToolCall};

/// What the adapter keeps of its parse (in `plan.native`).
#[derive(Debug, Clone)]
pub struct Parsed {
    pub session: Session,
    /// Where each batch's calls live: `(message index, part index)` per call.
    pub sites: Vec<Vec<(usize, usize)>>,
    /// The step of each batch: `(message index, index of its step-finish part, or the
    /// message's last part when the step has none)`.
    pub step_ends: Vec<(usize, usize)>,
    plan: Plan,
}

impl Parsed {
    pub fn plan(&self) -> &Plan {
        &self.plan
    }
}

fn err(
    path: &Path,
    line: usize,
    field: impl Into<String>,
    msg: impl Into<String>,
) -> TrajectoryError {
    TrajectoryError::new(path, line, field, msg)
}

const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// Parse any OpenCode input form.
pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<Parsed, TrajectoryError> {
    let session = if bytes.starts_with(SQLITE_MAGIC) {
        super::store::read_session(path)?
    } else {
        let text = crate::error::utf8_text(path, bytes, "the file")?;
        if looks_like_export(text) {
            read_export(path, text)?
        } else {
            read_events(path, text)?
        }
    };
    plan_of(path, session)
}

/// An export is one JSON object with `info` and `messages`; events are one object per line.
fn looks_like_export(text: &str) -> bool {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    // A pretty-printed export starts with a lone `{`; a one-line export parses whole.
    first.trim() == "{"
        || serde_json::from_str::<Value>(first)
            .ok()
            .is_some_and(|v| v.get("info").is_some() && v.get("messages").is_some())
}

/// Lines of ids in a pretty-printed export, found in document order: each search starts
/// where the previous one ended (and newlines are counted once), so a whole export is
/// located in one pass.
struct Cursor<'a> {
    text: &'a str,
    pos: usize,
    line: usize,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Self {
        Cursor {
            text,
            pos: 0,
            line: 1,
        }
    }
    /// The 1-based line of the next occurrence of `needle` (from the start again when it
    /// does not follow; 0 when absent).
    fn line_of(&mut self, needle: &str) -> usize {
        let Some(i) = self.text[self.pos..].find(needle).map(|i| self.pos + i) else {
            return match self.text.find(needle) {
                Some(i) => self.text[..i].bytes().filter(|&b| b == b'\n').count() + 1,
                None => 0,
            };
        };
        self.line += self.text[self.pos..i]
            .bytes()
            .filter(|&b| b == b'\n')
            .count();
        self.pos = i;
        self.line
    }
}

/// The line of `field` in a pretty-printed export (0 when not even its first step exists).
fn locate(text: &str, field: &str) -> usize {
    crate::kit::json_lines::line_of_field(text, field).unwrap_or(0)
}

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

fn read_export(path: &Path, text: &str) -> Result<Session, TrajectoryError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| err(path, e.line(), "json", format!("not a valid export: {e}")))?;
    let info = v
        .get("info")
        .filter(|i| i.is_object())
        .ok_or_else(|| err(path, 1, "info", "an export needs the session `info` object"))?
        .clone();
    let mut cursor = Cursor::new(text);
    if str_of(&info, "id").is_none() {
        return Err(err(
            path,
            locate(text, "info.id"),
            "info.id",
            "the session has no string id",
        ));
    }
    let list = v
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| err(path, 1, "messages", "an export needs a `messages` array"))?;
    let mut messages = Vec::with_capacity(list.len());
    for (mi, m) in list.iter().enumerate() {
        let field = format!("messages[{mi}]");
        let minfo = m.get("info").filter(|i| i.is_object()).ok_or_else(|| {
            err(
                path,
                locate(text, &format!("{field}.info")),
                format!("{field}.info"),
                "a message needs an `info` object",
            )
        })?;
        let mid = str_of(minfo, "id").ok_or_else(|| {
            err(
                path,
                locate(text, &format!("{field}.info.id")),
                format!("{field}.info.id"),
                "a message needs a string id",
            )
        })?;
        let line = cursor.line_of(&format!("\"{mid}\""));
        let parts = m.get("parts").and_then(Value::as_array).ok_or_else(|| {
            err(
                path,
                line,
                format!("{field}.parts"),
                "a message needs a `parts` array",
            )
        })?;
        let mut part_lines = Vec::with_capacity(parts.len());
        for (pi, p) in parts.iter().enumerate() {
            let pid = str_of(p, "id").ok_or_else(|| {
                err(
                    path,
                    line,
                    format!("{field}.parts[{pi}].id"),
                    "a part needs a string id",
                )
            })?;
            let pline = cursor.line_of(&format!("\"{pid}\""));
            check_part(path, pline, &format!("{field}.parts[{pi}]"), p).map_err(|mut e| {
                // The line of the field itself (an export part's id is written last).
                e.line = crate::kit::json_lines::line_of_field(text, &e.field).unwrap_or(e.line);
                e
            })?;
            part_lines.push(pline);
        }
        messages.push(Message {
            info: minfo.clone(),
            parts: parts.clone(),
            line,
            part_lines,
        });
    }
    Ok(Session {
        form: InputForm::Export,
        info,
        info_known: true,
        messages,
    })
}

/// The checks every part passes, whatever the input form.
pub(super) fn check_part(
    path: &Path,
    line: usize,
    field: &str,
    p: &Value,
) -> Result<(), TrajectoryError> {
    let ty = str_of(p, "type").ok_or_else(|| {
        err(
            path,
            line,
            format!("{field}.type"),
            "a part needs a string type",
        )
    })?;
    if ty != "tool" {
        return Ok(());
    }
    for k in ["callID", "tool"] {
        if str_of(p, k).is_none() {
            return Err(err(
                path,
                line,
                format!("{field}.{k}"),
                format!("a tool part needs a string `{k}`"),
            ));
        }
    }
    let state = p.get("state").filter(|s| s.is_object()).ok_or_else(|| {
        err(
            path,
            line,
            format!("{field}.state"),
            "a tool part needs a `state` object",
        )
    })?;
    match str_of(state, "status") {
        Some("pending" | "running") => Ok(()),
        Some("completed") => {
            if !state.get("input").is_some_and(Value::is_object) {
                return Err(err(
                    path,
                    line,
                    format!("{field}.state.input"),
                    "a completed call needs an object input",
                ));
            }
            if str_of(state, "output").is_none() {
                return Err(err(
                    path,
                    line,
                    format!("{field}.state.output"),
                    "a completed call needs a string output",
                ));
            }
            Ok(())
        }
        Some("error") => {
            if !state.get("input").is_some_and(Value::is_object) {
                return Err(err(
                    path,
                    line,
                    format!("{field}.state.input"),
                    "a failed call needs an object input",
                ));
            }
            if str_of(state, "error").is_none() {
                return Err(err(
                    path,
                    line,
                    format!("{field}.state.error"),
                    "a failed call needs a string error",
                ));
            }
            Ok(())
        }
        Some(other) => Err(err(
            path,
            line,
            format!("{field}.state.status"),
            format!("unknown tool state `{other}` (pending, running, completed, error)"),
        )),
        None => Err(err(
            path,
            line,
            format!("{field}.state.status"),
            "a tool state needs a string status",
        )),
    }
}

/// `opencode run --format=json` stdout.
fn read_events(path: &Path, text: &str) -> Result<Session, TrajectoryError> {
    let mut sid: Option<String> = None;
    let mut messages: Vec<Message> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    let mut users = 0usize;
    let lines: Vec<&str> = text.split('\n').collect();
    let last_nonempty = lines.iter().rposition(|l| !l.trim().is_empty());
    for (i, raw) in lines.iter().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let ev: Value = match serde_json::from_str(raw) {
            Ok(v) => v,
            // A torn final line (the process was killed mid-write) ends the stream.
            Err(_) if Some(i) == last_nonempty => break,
            Err(e) => return Err(err(path, line, "line", format!("not a JSON event: {e}"))),
        };
        if !ev.is_object() {
            return Err(err(path, line, "line", "an event must be a JSON object"));
        }
        let ty = str_of(&ev, "type")
            .ok_or_else(|| err(path, line, "type", "an event needs a string type"))?;
        if let Some(s) = str_of(&ev, "sessionID") {
            match &sid {
                None => sid = Some(s.to_string()),
                Some(prev) if prev != s => {
                    return Err(err(
                        path,
                        line,
                        "sessionID",
                        format!("events of two sessions ({prev}, {s}) in one stream"),
                    ))
                }
                _ => {}
            }
        }
        let session_id = sid.clone().unwrap_or_default();
        match ty {
            "user" => {
                users += 1;
                let parts: Vec<Value> = ev
                    .get("parts")
                    .or_else(|| ev.pointer("/message/parts"))
                    .and_then(Value::as_array)
                    .cloned()
                    .ok_or_else(|| {
                        err(path, line, "parts", "a user event needs a `parts` array")
                    })?;
                let mid = str_of(&ev, "messageID")
                    .or_else(|| ev.pointer("/message/info/id").and_then(Value::as_str))
                    .or_else(|| parts.first().and_then(|p| str_of(p, "messageID")))
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("msg_user_{users}"));
                let mut info = ev
                    .pointer("/message/info")
                    .cloned()
                    .unwrap_or_else(|| json!({"role": "user"}));
                info["role"] = json!("user");
                if let Some(ts) = ev.get("timestamp") {
                    if info.get("time").is_none() {
                        info["time"] = json!({"created": ts});
                    }
                }
                let info = with_ids(info, &[("id", &mid), ("sessionID", &session_id)]);
                let parts: Vec<Value> = parts
                    .into_iter()
                    .enumerate()
                    .map(|(k, p)| {
                        let pid = str_of(&p, "id")
                            .map(str::to_string)
                            .unwrap_or_else(|| format!("prt_user_{users}_{k}"));
                        with_ids(
                            p,
                            &[
                                ("id", &pid),
                                ("sessionID", &session_id),
                                ("messageID", &mid),
                            ],
                        )
                    })
                    .collect();
                let n = parts.len();
                by_id.insert(mid, messages.len());
                messages.push(Message {
                    info,
                    parts,
                    line,
                    part_lines: vec![line; n],
                });
            }
            "step_start" | "text" | "reasoning" | "tool_use" | "step_finish" => {
                let part = ev.get("part").filter(|p| p.is_object()).ok_or_else(|| {
                    err(
                        path,
                        line,
                        "part",
                        format!("a {ty} event needs a `part` object"),
                    )
                })?;
                let pid = str_of(part, "id")
                    .ok_or_else(|| err(path, line, "part.id", "a part needs a string id"))?
                    .to_string();
                let mid = str_of(part, "messageID")
                    .ok_or_else(|| {
                        err(
                            path,
                            line,
                            "part.messageID",
                            "a part needs a string messageID",
                        )
                    })?
                    .to_string();
                check_part(path, line, "part", part)?;
                let mi = match by_id.get(&mid) {
                    Some(&mi) => mi,
                    None => {
                        let info = with_ids(
                            json!({"role": "assistant", "time": {"created": ev.get("timestamp").cloned().unwrap_or(Value::Null)}}),
                            &[("id", &mid), ("sessionID", &session_id)],
                        );
                        by_id.insert(mid.clone(), messages.len());
                        messages.push(Message {
                            info,
                            parts: Vec::new(),
                            line,
                            part_lines: Vec::new(),
                        });
                        messages.len() - 1
                    }
                };
                let m = &mut messages[mi];
                if ty == "step_finish" {
                    if let Some(r) = str_of(part, "reason") {
                        m.info["finish"] = json!(r);
                    }
                    if let Some(ts) = ev.get("timestamp") {
                        m.info["time"]["completed"] = ts.clone();
                    }
                }
                // One part per id: a later state of the same part replaces the earlier one.
                match m
                    .parts
                    .iter()
                    .position(|p| str_of(p, "id") == Some(pid.as_str()))
                {
                    Some(k) => {
                        m.parts[k] = part.clone();
                        m.part_lines[k] = line;
                    }
                    None => {
                        m.parts.push(part.clone());
                        m.part_lines.push(line);
                    }
                }
            }
            // `error` (a failed model call), `done`, and anything newer: no parts.
            _ => {}
        }
    }
    // Merge repeated states of one call held by different part ids (keep the furthest).
    for m in &mut messages {
        dedupe_calls(m);
        sort_parts(m);
    }
    let sid = sid.ok_or_else(|| err(path, 1, "sessionID", "no event names its session"))?;
    Ok(Session {
        form: InputForm::Events,
        info: json!({"id": sid}),
        info_known: false,
        messages,
    })
}

fn rank(status: Option<&str>) -> u8 {
    match status {
        Some("completed" | "error") => 2,
        Some("running") => 1,
        _ => 0,
    }
}

/// One tool part per `callID`: the one furthest along (completed/error > running > pending).
fn dedupe_calls(m: &mut Message) {
    let mut keep: HashMap<String, usize> = HashMap::new();
    let mut drop = vec![false; m.parts.len()];
    for (k, p) in m.parts.iter().enumerate() {
        if str_of(p, "type") != Some("tool") {
            continue;
        }
        let call = str_of(p, "callID").unwrap_or("").to_string();
        let r = rank(p.pointer("/state/status").and_then(Value::as_str));
        match keep.get(&call) {
            Some(&prev) => {
                let pr = rank(
                    m.parts[prev]
                        .pointer("/state/status")
                        .and_then(Value::as_str),
                );
                if r >= pr {
                    drop[prev] = true;
                    keep.insert(call, k);
                } else {
                    drop[k] = true;
                }
            }
            None => {
                keep.insert(call, k);
            }
        }
    }
    let mut k = 0;
    m.parts.retain(|_| {
        k += 1;
        !drop[k - 1]
    });
    let mut k = 0;
    m.part_lines.retain(|_| {
        k += 1;
        !drop[k - 1]
    });
}

/// Parts in id order (OpenCode's own order: ids are monotonic), lines alongside.
pub(super) fn sort_parts(m: &mut Message) {
    let mut idx: Vec<usize> = (0..m.parts.len()).collect();
    idx.sort_by(|&a, &b| str_of(&m.parts[a], "id").cmp(&str_of(&m.parts[b], "id")));
    m.parts = idx.iter().map(|&i| m.parts[i].clone()).collect();
    m.part_lines = idx.iter().map(|&i| m.part_lines[i]).collect();
}

/// What the model saw of a finished call: `state.output` (completed) or `state.error`.
pub fn recorded_observation(part: &Value) -> Option<Observation> {
    let state = part.get("state")?;
    match str_of(state, "status")? {
        "completed" => Some(Observation {
            text: str_of(state, "output")?.to_string(),
            is_error: false,
            native: None,
        }),
        "error" => Some(Observation {
            text: str_of(state, "error")?.to_string(),
            is_error: true,
            native: None,
        }),
        _ => None,
    }
}

/// The steps of an assistant message, as inclusive part index ranges: a step starts at a
/// `step-start` (or at the first part) and ends at its `step-finish`, before the next
/// `step-start`, or at the last part.
fn steps_of(m: &Message) -> Vec<(usize, usize)> {
    let n = m.parts.len();
    let mut steps = Vec::new();
    let mut start: Option<usize> = None;
    for k in 0..n {
        let ty = str_of(&m.parts[k], "type");
        if ty == Some("step-start") {
            if let Some(s) = start {
                steps.push((s, k - 1));
            }
            start = Some(k);
        } else if start.is_none() {
            start = Some(k);
        }
        if ty == Some("step-finish") {
            steps.push((start.unwrap_or(k), k));
            start = None;
        }
    }
    if let Some(s) = start {
        steps.push((s, n - 1));
    }
    steps
}

fn plan_of(path: &Path, session: Session) -> Result<Parsed, TrajectoryError> {
    super::integrity::check(path, &session)?;
    if !session.messages.iter().any(|m| m.role() == "user") && session.form != InputForm::Events {
        return Err(err(
            path,
            0,
            "messages",
            "the session holds no user message",
        ));
    }
    let mut batches = Vec::new();
    let mut sites = Vec::new();
    let mut step_ends = Vec::new();
    let mut turns = 0usize;
    let mut torn = false;
    for (mi, m) in session.messages.iter().enumerate() {
        if m.role() != "assistant" {
            continue;
        }
        for (s, e) in steps_of(m) {
            turns += 1;
            let calls: Vec<usize> = (s..=e)
                .filter(|&k| str_of(&m.parts[k], "type") == Some("tool"))
                .collect();
            if calls.is_empty() {
                continue;
            }
            let finished = str_of(&m.parts[e], "type") == Some("step-finish");
            let mut complete = !torn;
            let mut tool_calls = Vec::with_capacity(calls.len());
            for &k in &calls {
                let p = &m.parts[k];
                let original = recorded_observation(p);
                if original.is_none() {
                    complete = false;
                }
                tool_calls.push(ToolCall {
                    call_id: str_of(p, "callID").unwrap_or("").to_string(),
                    tool: str_of(p, "tool").unwrap_or("").to_string(),
                    input: p
                        .pointer("/state/input")
                        .cloned()
                        .unwrap_or_else(|| json!({})),
                    original,
                    locator: Locator {
                        line: m.part_lines[k],
                        native_id: str_of(p, "id").map(str::to_string),
                    },
                });
            }
            // The store and the export hold finished steps without a step-finish part only
            // when the message itself completed.
            if !finished && m.info.pointer("/time/completed").is_none() {
                complete = false;
            }
            if !complete {
                torn = true;
            }
            batches.push(Batch {
                index: batches.len() + 1,
                calls: tool_calls,
                model_turn: turns,
                locator: Locator {
                    line: m.part_lines[s],
                    native_id: Some(m.id().to_string()),
                },
                complete,
            });
            sites.push(calls.iter().map(|&k| (mi, k)).collect());
            step_ends.push((mi, e));
        }
    }
    let plan = Plan {
        agent: "opencode".into(),
        recorded_version: session.version().map(str::to_string),
        session_id: Some(session.id().to_string()),
        original_cwd: session.directory().map(std::path::PathBuf::from),
        batches: batches.into(),
        model_turns: turns,
        native: Default::default(),
    };
    Ok(Parsed {
        session,
        sites,
        step_ends,
        plan,
    })
}
