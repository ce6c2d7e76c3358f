//! What an OpenCode session guarantees about itself, checked before anything is replayed, so
//! that a damaged kept prefix is refused (naming the line and the field) rather than replayed
//! as another conversation. For the export and the store (the event form carries less).
//!
//! - **Order and ids**: messages are ordered by `(time.created, id)` and parts by `id`, as
//!   OpenCode orders them, with no id twice; every part names its message and the session,
//!   every message the session.
//! - **Roles**: a message is a `user` or an `assistant` message; an assistant message answers
//!   a user message before it (`parentID`).
//! - **Parts**: of a known type; a text or reasoning part has its text; a call stored as
//!   `completed` has arguments its tool's schema accepts (OpenCode checks them before it runs
//!   a tool, and stores a refused call as failed).
//! - **Steps**: an assistant step (`step-start` … `step-finish`) that finishes with reason
//!   `tool-calls` holds tool calls, and the message's `finish` is its last step's reason.
//!
//! What OpenCode writes once and repeats nowhere cannot be checked: the texts of user and
//! assistant parts, a call's id, the values of its arguments (whose damage a replay sees when
//! the re-run's observation differs from the recorded one), and whether a text or reasoning
//! part, one of several calls of a step, or a whole step (an assistant message) was dropped:
//! OpenCode chains nothing from one step to the next.

use std::path::Path;

use serde_json::Value;

use super::session::{InputForm, Message, Session};
use crate::error::TrajectoryError;

/// Part types OpenCode writes.
const PART_TYPES: &[&str] = &[
    "text",
    "reasoning",
    "tool",
    "step-start",
    "step-finish",
    "file",
    "patch",
    "snapshot",
    "agent",
    "compaction",
    "subtask",
    "retry",
];

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// The key OpenCode orders messages by.
fn order_key(m: &Message) -> (i64, &str) {
    (
        m.info
            .pointer("/time/created")
            .and_then(Value::as_i64)
            .unwrap_or(0),
        m.id(),
    )
}

/// All checks of a session read from an export or the store.
pub fn check(path: &Path, s: &Session) -> Result<(), TrajectoryError> {
    if s.form == InputForm::Events {
        return Ok(());
    }
    let sid = s.id();
    let mut users: Vec<&str> = Vec::new();
    for (mi, m) in s.messages.iter().enumerate() {
        let field = format!("messages[{mi}].info");
        if let Some(prev) = mi.checked_sub(1).map(|p| &s.messages[p]) {
            if order_key(prev) >= order_key(m) {
                return Err(TrajectoryError::new(path,
                    m.line,
                    format!("{field}.id"),
                    format!(
                        "message {} does not come after message {} (OpenCode orders messages by creation time and id)",
                        m.id(),
                        prev.id()
                    ),
                ));
            }
        }
        if str_of(&m.info, "sessionID") != Some(sid) {
            return Err(TrajectoryError::new(
                path,
                m.line,
                format!("{field}.sessionID"),
                format!("the message is not of session {sid}"),
            ));
        }
        match m.role() {
            "user" => users.push(m.id()),
            "assistant" => {
                let parent = str_of(&m.info, "parentID").unwrap_or("");
                if !users.contains(&parent) {
                    return Err(TrajectoryError::new(path,
                        m.line,
                        format!("{field}.parentID"),
                        format!("an assistant message answers a user message before it; {parent:?} is none"),
                    ));
                }
            }
            other => {
                return Err(TrajectoryError::new(
                    path,
                    m.line,
                    format!("{field}.role"),
                    format!("unknown role `{other}` (user, assistant)"),
                ))
            }
        }
        parts(path, mi, m, sid)?;
        if m.role() == "assistant" {
            steps(path, mi, m)?;
        }
    }
    Ok(())
}

fn parts(path: &Path, mi: usize, m: &Message, sid: &str) -> Result<(), TrajectoryError> {
    for (k, p) in m.parts.iter().enumerate() {
        let field = format!("messages[{mi}].parts[{k}]");
        let line = m.part_lines.get(k).copied().unwrap_or(m.line);
        let id = str_of(p, "id").unwrap_or("");
        if k > 0 && str_of(&m.parts[k - 1], "id").unwrap_or("") >= id {
            return Err(TrajectoryError::new(path,
                line,
                format!("{field}.id"),
                format!("part {id} does not come after the part before it (OpenCode orders parts by id)"),
            ));
        }
        if str_of(p, "messageID") != Some(m.id()) {
            return Err(TrajectoryError::new(
                path,
                line,
                format!("{field}.messageID"),
                format!("the part is not of message {}", m.id()),
            ));
        }
        if str_of(p, "sessionID") != Some(sid) {
            return Err(TrajectoryError::new(
                path,
                line,
                format!("{field}.sessionID"),
                format!("the part is not of session {sid}"),
            ));
        }
        let ty = str_of(p, "type").unwrap_or("");
        if !PART_TYPES.contains(&ty) {
            return Err(TrajectoryError::new(
                path,
                line,
                format!("{field}.type"),
                format!("unknown part type `{ty}`"),
            ));
        }
        if ty == "tool" {
            tool_state(p).map_err(|(f, m)| {
                TrajectoryError::new(path, line, format!("{field}.state{f}"), m)
            })?;
        }
        if ty == "tool" && p.pointer("/state/status").and_then(Value::as_str) == Some("completed") {
            let tool = str_of(p, "tool").unwrap_or("");
            let input = p.pointer("/state/input").unwrap_or(&Value::Null);
            if let Some(e) = super::tools::schema_error(tool, input) {
                return Err(TrajectoryError::new(path,
                    line,
                    format!("{field}.state.input"),
                    format!("the call is stored as completed, but OpenCode refuses these arguments: {e}"),
                ));
            }
        }
        if matches!(ty, "text" | "reasoning") && str_of(p, "text").is_none() {
            return Err(TrajectoryError::new(
                path,
                line,
                format!("{field}.text"),
                format!("a {ty} part needs a string text"),
            ));
        }
    }
    Ok(())
}

/// A tool part's state holds the keys OpenCode's `ToolState` has for its status, and an
/// object `input` (a key moved into or out of `input` changes the call the model sees).
fn tool_state(p: &Value) -> Result<(), (&'static str, String)> {
    let Some(state) = p.get("state").and_then(Value::as_object) else {
        return Err(("", "a tool part needs a state object".into()));
    };
    let status = state.get("status").and_then(Value::as_str).unwrap_or("");
    let known: &[&str] = match status {
        "pending" => &["status", "input", "raw"],
        "running" => &["status", "input", "title", "metadata", "time"],
        "completed" => &[
            "status",
            "input",
            "output",
            "title",
            "metadata",
            "time",
            "attachments",
        ],
        "error" => &["status", "input", "error", "metadata", "time"],
        other => return Err((".status", format!("unknown tool state `{other}`"))),
    };
    if let Some(k) = state.keys().find(|k| !known.contains(&k.as_str())) {
        return Err((
            "",
            format!("a `{status}` tool state has a key OpenCode does not write: `{k}`"),
        ));
    }
    if !state.get("input").is_none_or(Value::is_object) {
        return Err((".input", "the call's input must be an object".into()));
    }
    Ok(())
}

fn steps(path: &Path, mi: usize, m: &Message) -> Result<(), TrajectoryError> {
    let mut has_tool = false;
    let mut last_reason: Option<&str> = None;
    for (k, p) in m.parts.iter().enumerate() {
        match str_of(p, "type") {
            Some("step-start") => has_tool = false,
            Some("tool") => has_tool = true,
            Some("step-finish") => {
                let reason = str_of(p, "reason");
                if reason == Some("tool-calls") && !has_tool {
                    return Err(TrajectoryError::new(
                        path,
                        m.part_lines.get(k).copied().unwrap_or(m.line),
                        format!("messages[{mi}].parts[{k}].reason"),
                        "`tool-calls`, but the step holds no tool call",
                    ));
                }
                last_reason = reason;
            }
            _ => {}
        }
    }
    if let (Some(r), Some(f)) = (last_reason, str_of(&m.info, "finish")) {
        if r != f {
            return Err(TrajectoryError::new(
                path,
                m.line,
                format!("messages[{mi}].info.finish"),
                format!("`{f}`, but the message's last step finished with `{r}`"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::adapters::opencode::parse::parse_bytes;
    use serde_json::Value;
    use std::path::Path;

    fn parse(p: &Path, v: &Value) -> Result<(), String> {
        let text = serde_json::to_string_pretty(v).unwrap();
        parse_bytes(p, text.as_bytes())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_genuine_export_passes_and_damage_names_the_field() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/opencode/recorded/tools/export.json");
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        parse(&p, &v).unwrap();
        let mut parts = v.clone();
        parts["messages"][1]["parts"]
            .as_array_mut()
            .unwrap()
            .swap(1, 2);
        assert!(parse(&p, &parts)
            .unwrap_err()
            .contains("messages[1].parts[2].id"));
        let mut messages = v.clone();
        messages["messages"].as_array_mut().unwrap().swap(1, 2);
        assert!(parse(&p, &messages)
            .unwrap_err()
            .contains("messages[2].info.id"));
        let mut orphan = v.clone();
        orphan["messages"].as_array_mut().unwrap().remove(0);
        assert!(parse(&p, &orphan).unwrap_err().contains("parentID"));
        let tool = v["messages"][1]["parts"]
            .as_array()
            .unwrap()
            .iter()
            .position(|p| p["type"] == "tool")
            .unwrap();
        let mut args = v.clone();
        args["messages"][1]["parts"][tool]["state"]["input"]["command"] = 12345.into();
        let e = parse(&p, &args).unwrap_err();
        assert!(
            e.contains("state.input") && e.contains("Expected string"),
            "{e}"
        );
        let mut moved = v.clone();
        let state = &mut moved["messages"][1]["parts"][tool]["state"];
        let command = state["input"]
            .as_object_mut()
            .unwrap()
            .remove("command")
            .unwrap();
        state["command"] = command;
        let e = parse(&p, &moved).unwrap_err();
        assert!(e.contains(".state") && e.contains("`command`"), "{e}");
        let mut reason = v.clone();
        let parts_of = reason["messages"][1]["parts"].as_array_mut().unwrap();
        parts_of.retain(|p| p["type"] != "tool");
        assert!(parse(&p, &reason).unwrap_err().contains("reason"));
    }
}
