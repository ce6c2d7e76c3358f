//! Pi inputs → [`Session`] → [`Plan`].
//!
//! Two input forms, told apart by their records:
//! - a v3 (or v2) session file: a `session` header, then entries with `id`/`parentId`; the
//!   context is the path from the leaf (the last entry in file order) to the root, as Pi's
//!   `SessionManager` reads it (branches off that path are ignored);
//! - `pi --mode json` / `--mode rpc` stdout: the same header (json mode), then agent events;
//!   the messages are the `message_end` events (the full message as Pi stores it), chained in
//!   order; `message_update` deltas and RPC `response` lines are skipped.
//!
//! One model turn is one assistant message; its `toolCall` blocks are one batch, complete
//! when every call has its `toolResult` (matched by `toolCallId`). A batch with a missing
//! result is the torn end, never a boundary.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{json, Value};

use super::integrity;
use super::session::{Entry, InputForm, Session};
use crate::error::TrajectoryError;
use crate::kit::{Batch, Locator, Observation, Plan, ToolCall};

/// What the adapter keeps of its parse (in `plan.native`).
#[derive(Debug, Clone)]
pub struct Parsed {
    pub session: Session,
    /// Per batch: the entry index of its assistant message, and the entry index of each
    /// call's result (in call order).
    pub sites: Vec<(usize, Vec<usize>)>,
    plan: Plan,
}

impl Parsed {
    pub fn plan(&self) -> &Plan {
        &self.plan
    }
    /// The entry index of the last tool result of batch `n` (1-based): where the rebuilt
    /// session ends.
    pub fn boundary_entry(&self, n: usize) -> Option<usize> {
        let (a, results) = self.sites.get(n.checked_sub(1)?)?;
        Some(results.iter().copied().max().unwrap_or(*a))
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

/// Entry types of a session file.
const ENTRY_TYPES: &[&str] = &[
    "message",
    "model_change",
    "thinking_level_change",
    "compaction",
    "branch_summary",
    "custom",
    "custom_message",
    "label",
    "session_info",
];

/// Parse either input form.
pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<Parsed, TrajectoryError> {
    let text = crate::error::utf8_text(path, bytes, "the file")?;
    let records = records(path, text)?;
    if records.is_empty() {
        return Err(err(path, 0, "file", "the file holds no record"));
    }
    let is_file = records.iter().any(|(_, v, _)| {
        v.get("id").is_some()
            && v.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| ENTRY_TYPES.contains(&t))
    });
    let session = if is_file {
        read_session_file(path, records)?
    } else {
        read_events(path, records)?
    };
    plan_of(path, session)
}

/// `(line, value, raw text)` of every JSON line; a torn last line (no newline, not JSON) is
/// the end of a file being written, and is skipped.
fn records<'a>(
    path: &Path,
    text: &'a str,
) -> Result<Vec<(usize, Value, &'a str)>, TrajectoryError> {
    let mut out = Vec::new();
    let ends_with_newline = text.ends_with('\n');
    let lines: Vec<&str> = text.split('\n').collect();
    let last = lines.len().saturating_sub(1);
    for (i, raw) in lines.iter().enumerate() {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        if raw.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(raw) {
            Ok(v) if v.is_object() => out.push((i + 1, v, raw)),
            Ok(_) => return Err(err(path, i + 1, "line", "a record must be a JSON object")),
            Err(_) if i == last && !ends_with_newline => break,
            Err(e) => return Err(err(path, i + 1, "line", format!("not JSON: {e}"))),
        }
    }
    Ok(out)
}

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

fn check_header(path: &Path, line: usize, v: &Value) -> Result<(), TrajectoryError> {
    if str_of(v, "id").is_none() {
        return Err(err(
            path,
            line,
            "id",
            "the session header needs a string id",
        ));
    }
    match v.get("version").and_then(Value::as_u64) {
        None | Some(2) | Some(3) => Ok(()),
        Some(1) => Err(err(
            path,
            line,
            "version",
            "a v1 session (no entry ids): open it once with Pi 0.83.0, which migrates it to v3",
        )),
        Some(other) => Err(err(
            path,
            line,
            "version",
            format!("unknown session version {other} (2 and 3 are read)"),
        )),
    }
}

fn read_session_file(
    path: &Path,
    records: Vec<(usize, Value, &str)>,
) -> Result<Session, TrajectoryError> {
    let mut it = records.into_iter();
    let (hline, header, hraw) = it.next().expect("not empty");
    if str_of(&header, "type") != Some("session") {
        return Err(err(
            path,
            hline,
            "type",
            "a session file starts with its `session` header",
        ));
    }
    check_header(path, hline, &header)?;
    let mut all: Vec<Entry> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (line, v, raw) in it {
        let Some(ty) = str_of(&v, "type") else {
            return Err(err(path, line, "type", "an entry needs a string type"));
        };
        if ty == "session" {
            return Err(err(path, line, "type", "a second session header"));
        }
        let Some(id) = str_of(&v, "id") else {
            return Err(err(path, line, "id", "an entry needs a string id"));
        };
        if !ENTRY_TYPES.contains(&ty) {
            return Err(err(
                path,
                line,
                "type",
                format!("unknown entry type `{ty}`"),
            ));
        }
        match v.get("parentId") {
            Some(Value::Null) | Some(Value::String(_)) => {}
            None => {
                return Err(err(
                    path,
                    line,
                    "parentId",
                    "an entry needs its parentId (null for the first)",
                ))
            }
            Some(_) => {
                return Err(err(
                    path,
                    line,
                    "parentId",
                    "parentId must be a string or null",
                ))
            }
        }
        if index.insert(id.to_string(), all.len()).is_some() {
            return Err(err(
                path,
                line,
                "id",
                format!("entry id {id} appears twice"),
            ));
        }
        check_entry(path, line, "", &v)?;
        all.push(Entry {
            value: v.clone(),
            line,
            raw: Some(raw.to_string()),
        });
    }
    // The context: leaf (last entry) → root.
    let mut chain = Vec::new();
    let mut at = all.len().checked_sub(1);
    while let Some(i) = at {
        if chain.len() > all.len() {
            return Err(err(
                path,
                all[i].line,
                "parentId",
                "the parentId chain has a cycle",
            ));
        }
        chain.push(i);
        at = match all[i].value.get("parentId").and_then(Value::as_str) {
            None => None,
            Some(p) => Some(*index.get(p).ok_or_else(|| {
                err(
                    path,
                    all[i].line,
                    "parentId",
                    format!("parent {p} is not in the file"),
                )
            })?),
        };
    }
    chain.reverse();
    let entries: Vec<Entry> = chain.into_iter().map(|i| all[i].clone()).collect();
    integrity::check_context(path, &entries, all.first().map(Entry::id))?;
    Ok(Session {
        form: InputForm::SessionFile,
        header,
        header_raw: Some(hraw.to_string()),
        entries,
    })
}

/// The checks every message passes, whatever the input form (`prefix`: the field path of
/// the entry, e.g. `message` in an event).
fn check_entry(path: &Path, line: usize, prefix: &str, v: &Value) -> Result<(), TrajectoryError> {
    if str_of(v, "type") != Some("message") {
        return Ok(());
    }
    let m = v.get("message").filter(|m| m.is_object()).ok_or_else(|| {
        err(
            path,
            line,
            format!("{prefix}message"),
            "a message entry needs a `message` object",
        )
    })?;
    integrity::check_message(path, line, &format!("{prefix}message"), m)
}

/// ISO-8601 (UTC, milliseconds) of a JavaScript timestamp, as Pi writes entry timestamps.
pub fn iso_ms(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let f = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    t.format(&f).unwrap_or_default()
}

fn read_events(
    path: &Path,
    records: Vec<(usize, Value, &str)>,
) -> Result<Session, TrajectoryError> {
    let mut header: Option<(Value, String)> = None;
    let mut entries: Vec<Entry> = Vec::new();
    let mut saw_event = false;
    for (line, v, raw) in records {
        let Some(ty) = str_of(&v, "type") else {
            return Err(err(path, line, "type", "an event needs a string type"));
        };
        match ty {
            "session" => {
                if header.is_some() || saw_event {
                    return Err(err(path, line, "type", "a second session header"));
                }
                check_header(path, line, &v)?;
                header = Some((v.clone(), raw.to_string()));
            }
            "message_end" => {
                saw_event = true;
                let m = v.get("message").filter(|m| m.is_object()).ok_or_else(|| {
                    err(
                        path,
                        line,
                        "message",
                        "message_end needs a `message` object",
                    )
                })?;
                integrity::check_message(path, line, "message", m)?;
                let ts = m.get("timestamp").and_then(Value::as_i64).unwrap_or(0);
                let parent = entries.last().map(|e| json!(e.id())).unwrap_or(Value::Null);
                let id = format!("{:08x}", entries.len() as u32 + 1);
                entries.push(Entry {
                    value: json!({"type": "message", "id": id, "parentId": parent, "timestamp": iso_ms(ts), "message": m}),
                    line,
                    raw: None,
                });
            }
            _ => saw_event = true,
        }
    }
    if !saw_event {
        return Err(err(
            path,
            0,
            "file",
            "neither a Pi session file nor Pi events",
        ));
    }
    let (header, header_raw) = match header {
        Some((h, r)) => (h, Some(r)),
        None => (json!({"type": "session", "version": 3, "id": ""}), None),
    };
    integrity::check_context(path, &entries, None)?;
    Ok(Session {
        form: InputForm::Events,
        header,
        header_raw,
        entries,
    })
}

/// The text a model saw of a tool result: its text blocks joined by newlines.
pub fn result_text(content: &Value) -> String {
    content
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| str_of(b, "type") == Some("text"))
        .filter_map(|b| str_of(b, "text"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A recorded tool result as an observation (the whole `{content, details}` kept native).
pub fn observation_of(m: &Value) -> Observation {
    let mut native = json!({"content": m.get("content").cloned().unwrap_or(json!([]))});
    if let Some(d) = m.get("details") {
        native["details"] = d.clone();
    }
    Observation {
        text: result_text(&m["content"]),
        is_error: m.get("isError").and_then(Value::as_bool).unwrap_or(false),
        native: Some(native),
    }
}

fn plan_of(path: &Path, session: Session) -> Result<Parsed, TrajectoryError> {
    let mut results: HashMap<String, usize> = HashMap::new();
    for (i, e) in session.entries.iter().enumerate() {
        if e.role() == "toolResult" {
            let id = str_of(e.message().expect("role"), "toolCallId")
                .unwrap_or("")
                .to_string();
            if results.insert(id.clone(), i).is_some() {
                return Err(err(
                    path,
                    e.line,
                    "message.toolCallId",
                    format!("a second result for call {id}"),
                ));
            }
        }
    }
    let mut batches = Vec::new();
    let mut sites = Vec::new();
    let mut turns = 0;
    let mut torn = false;
    let mut calls_seen: HashMap<String, usize> = HashMap::new();
    for (i, e) in session.entries.iter().enumerate() {
        if e.role() != "assistant" {
            continue;
        }
        turns += 1;
        let m = e.message().expect("role");
        let blocks: Vec<&Value> = m["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| str_of(b, "type") == Some("toolCall"))
            .collect();
        if blocks.is_empty() {
            continue;
        }
        let mut calls = Vec::new();
        let mut at = Vec::new();
        let mut complete = !torn;
        for b in blocks {
            let id = str_of(b, "id").unwrap_or("").to_string();
            if calls_seen.insert(id.clone(), e.line).is_some() {
                return Err(err(
                    path,
                    e.line,
                    "message.content.id",
                    format!("call id {id} appears twice"),
                ));
            }
            let result = results.get(&id).copied().filter(|&r| r > i);
            let original =
                result.map(|r| observation_of(session.entries[r].message().expect("role")));
            match result {
                Some(r) => at.push(r),
                None => complete = false,
            }
            calls.push(ToolCall {
                call_id: id.clone(),
                tool: str_of(b, "name").unwrap_or("").to_string(),
                input: b.get("arguments").cloned().unwrap_or(json!({})),
                original,
                locator: Locator {
                    line: e.line,
                    native_id: Some(id),
                },
            });
        }
        torn |= !complete;
        batches.push(Batch {
            index: batches.len() + 1,
            calls,
            model_turn: turns,
            locator: Locator {
                line: e.line,
                native_id: Some(e.id().to_string()),
            },
            complete,
        });
        sites.push((i, at));
    }
    let plan = Plan {
        agent: super::NAME.into(),
        recorded_version: None,
        session_id: Some(session.id().to_string()).filter(|s| !s.is_empty()),
        original_cwd: session.cwd().map(Into::into),
        batches: batches.into(),
        model_turns: turns,
        native: Default::default(),
    };
    Ok(Parsed {
        session,
        sites,
        plan,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = concat!(
        r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-11-30T00:31:59.009Z","cwd":"/w"}"#,
        "\n",
        r#"{"type":"model_change","id":"a0000001","parentId":null,"timestamp":"t","provider":"anthropic","modelId":"m"}"#,
        "\n",
        r#"{"type":"message","id":"a0000002","parentId":"a0000001","timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"go"}]}}"#,
        "\n",
        r#"{"type":"message","id":"a0000003","parentId":"a0000002","timestamp":"t","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls"}},{"type":"toolCall","id":"c2","name":"read","arguments":{"path":"x"}}],"api":"anthropic-messages","provider":"anthropic","model":"m","stopReason":"toolUse"}}"#,
        "\n",
        r#"{"type":"message","id":"a0000004","parentId":"a0000003","timestamp":"t","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"x\n"}],"isError":false}}"#,
        "\n",
        r#"{"type":"message","id":"a0000005","parentId":"a0000004","timestamp":"t","message":{"role":"toolResult","toolCallId":"c2","toolName":"read","content":[{"type":"text","text":"hi"}],"isError":false}}"#,
        "\n",
    );

    #[test]
    fn a_session_file_gives_one_batch_per_assistant_message() {
        let p = parse_bytes(Path::new("s.jsonl"), FILE.as_bytes()).unwrap();
        let plan = p.plan();
        assert_eq!(plan.batches.len(), 1);
        assert_eq!(plan.batches.in_memory().unwrap()[0].calls.len(), 2);
        assert!(plan.batches.in_memory().unwrap()[0].complete);
        assert_eq!(
            plan.batches.in_memory().unwrap()[0].calls[1]
                .original
                .as_ref()
                .unwrap()
                .text,
            "hi"
        );
        assert_eq!(p.boundary_entry(1), Some(4));
        assert_eq!(p.session.model(), Some(("anthropic".into(), "m".into())));
    }

    #[test]
    fn a_missing_result_is_the_torn_end() {
        let cut: String = FILE.lines().take(5).map(|l| format!("{l}\n")).collect();
        let p = parse_bytes(Path::new("s.jsonl"), cut.as_bytes()).unwrap();
        assert!(!p.plan().batches.in_memory().unwrap()[0].complete);
        assert_eq!(p.plan().max_boundary(), 0);
    }

    #[test]
    fn a_branch_off_the_leaf_path_is_ignored() {
        let extra = r#"{"type":"message","id":"b0000001","parentId":"a0000002","timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"other"}],"api":"anthropic-messages","provider":"anthropic","model":"m","stopReason":"stop"}}"#;
        // The leaf is the last entry: put the branch before the main line's end.
        let mut lines: Vec<&str> = FILE.lines().collect();
        lines.insert(3, extra);
        let text = lines.join("\n") + "\n";
        let p = parse_bytes(Path::new("s.jsonl"), text.as_bytes()).unwrap();
        assert!(p.session.entries.iter().all(|e| e.id() != "b0000001"));
        assert_eq!(p.plan().model_turns, 1);
    }

    #[test]
    fn errors_name_line_and_field() {
        let bad = FILE.replace(
            r#""name":"read","arguments":{"path":"x"}"#,
            r#""name":"read","arguments":"x""#,
        );
        let e = parse_bytes(Path::new("s.jsonl"), bad.as_bytes()).unwrap_err();
        assert_eq!(e.line, 4);
        assert_eq!(e.field, "message.content[1].arguments");
        let bad = FILE.replace(r#""parentId":"a0000004""#, r#""parentId":"zzz""#);
        let e = parse_bytes(Path::new("s.jsonl"), bad.as_bytes()).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (6, "parentId"));
    }
}
