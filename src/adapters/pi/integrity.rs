//! What a Pi session guarantees about itself, checked before anything is replayed, so that a
//! damaged kept prefix is refused (naming the line and the field) rather than replayed as
//! another conversation.
//!
//! - **Shape** ([`check_message`]): every message has the fields Pi's own types give it
//!   (`@earendil-works/pi-ai` `UserMessage`, `AssistantMessage`, `ToolResultMessage`), of
//!   their types; a content block is one of the kinds its role allows.
//! - **Cross-checks** ([`check_context`], along the context the agent would load):
//!   - an assistant message's `provider` and `model` are those of the `model_change` in
//!     effect, and every assistant message of one provider and model names the same `api`
//!     (Pi converts a message of another model differently);
//!   - `stopReason` is `toolUse` exactly when the message holds tool calls (a stop reason
//!     of `error` or `aborted` may end a message with calls: Pi drops such a turn);
//!   - the results of a message's calls follow it, in call order, one per call, each naming
//!     its call's tool (`toolName`);
//!   - the context starts at the file's first entry (only it has no parent).
//!
//! What Pi writes once and repeats nowhere cannot be checked: the texts of user and assistant
//! messages, thinking, and the arguments of a call (whose damage a replay sees when the
//! re-run's observation differs from the recorded one).

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use super::session::Entry;
use crate::error::TrajectoryError;

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// Message roles Pi stores (`AgentMessage`).
const ROLES: &[&str] = &[
    "user",
    "assistant",
    "toolResult",
    "bashExecution",
    "custom",
    "branchSummary",
    "compactionSummary",
];

/// Stop reasons of an assistant message.
const STOP_REASONS: &[&str] = &["stop", "length", "toolUse", "error", "aborted"];

/// A field `k` of `v` that must be a string.
fn need_str(
    path: &Path,
    line: usize,
    v: &Value,
    field: &str,
    k: &str,
) -> Result<(), TrajectoryError> {
    match v.get(k) {
        Some(Value::String(_)) => Ok(()),
        _ => Err(TrajectoryError::new(
            path,
            line,
            format!("{field}.{k}"),
            format!("`{k}` must be a string"),
        )),
    }
}

/// The content blocks of a message: an array of objects whose `type` is one of `kinds`, each
/// with its required fields.
fn check_blocks(
    path: &Path,
    line: usize,
    field: &str,
    content: &Value,
    kinds: &[&str],
) -> Result<(), TrajectoryError> {
    let blocks = content.as_array().ok_or_else(|| {
        TrajectoryError::new(
            path,
            line,
            format!("{field}.content"),
            "the content must be an array",
        )
    })?;
    for (i, b) in blocks.iter().enumerate() {
        let f = format!("{field}.content[{i}]");
        let ty = str_of(b, "type").ok_or_else(|| {
            TrajectoryError::new(
                path,
                line,
                format!("{f}.type"),
                "a block needs a string type",
            )
        })?;
        if !kinds.contains(&ty) {
            return Err(TrajectoryError::new(
                path,
                line,
                format!("{f}.type"),
                format!(
                    "a block of type `{ty}` (this message holds {})",
                    kinds.join(", ")
                ),
            ));
        }
        match ty {
            "text" => need_str(path, line, b, &f, "text")?,
            "thinking" => need_str(path, line, b, &f, "thinking")?,
            "image" => {
                need_str(path, line, b, &f, "data")?;
                need_str(path, line, b, &f, "mimeType")?;
            }
            "toolCall" => {
                need_str(path, line, b, &f, "id")?;
                need_str(path, line, b, &f, "name")?;
                if !b.get("arguments").is_some_and(Value::is_object) {
                    return Err(TrajectoryError::new(
                        path,
                        line,
                        format!("{f}.arguments"),
                        "a toolCall needs an object `arguments`",
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The shape of one message (`field`: its field path, e.g. `message`).
pub fn check_message(
    path: &Path,
    line: usize,
    field: &str,
    m: &Value,
) -> Result<(), TrajectoryError> {
    let role = str_of(m, "role").ok_or_else(|| {
        TrajectoryError::new(
            path,
            line,
            format!("{field}.role"),
            "a message needs a string role",
        )
    })?;
    if !ROLES.contains(&role) {
        return Err(TrajectoryError::new(
            path,
            line,
            format!("{field}.role"),
            format!("unknown role `{role}`"),
        ));
    }
    match role {
        "assistant" => {
            check_blocks(
                path,
                line,
                field,
                m.get("content").unwrap_or(&Value::Null),
                &["text", "thinking", "toolCall"],
            )?;
            for k in ["api", "provider", "model"] {
                need_str(path, line, m, field, k)?;
            }
            match str_of(m, "stopReason") {
                Some(s) if STOP_REASONS.contains(&s) => {}
                _ => {
                    return Err(TrajectoryError::new(
                        path,
                        line,
                        format!("{field}.stopReason"),
                        format!("the stop reason must be one of {}", STOP_REASONS.join(", ")),
                    ))
                }
            }
        }
        "toolResult" => {
            need_str(path, line, m, field, "toolCallId")?;
            need_str(path, line, m, field, "toolName")?;
            check_blocks(
                path,
                line,
                field,
                m.get("content").unwrap_or(&Value::Null),
                &["text", "image"],
            )?;
            if !m.get("isError").is_some_and(Value::is_boolean) {
                return Err(TrajectoryError::new(
                    path,
                    line,
                    format!("{field}.isError"),
                    "isError must be a boolean",
                ));
            }
        }
        "user" => match m.get("content") {
            Some(Value::String(_)) => {}
            Some(c @ Value::Array(_)) => check_blocks(path, line, field, c, &["text", "image"])?,
            _ => {
                return Err(TrajectoryError::new(
                    path,
                    line,
                    format!("{field}.content"),
                    "a user message needs a string or an array content",
                ))
            }
        },
        _ => {}
    }
    Ok(())
}

/// The cross-checks of the context (root → leaf) the agent would load; `root`: the id of the
/// file's first entry, where the context must start (a session file; events are chained
/// here).
pub fn check_context(
    path: &Path,
    entries: &[Entry],
    root: Option<&str>,
) -> Result<(), TrajectoryError> {
    if let (Some(first), Some(root)) = (entries.first(), root) {
        if first.id() != root {
            return Err(TrajectoryError::new(path,
                first.line,
                "parentId",
                "the context does not reach the session's first entry (a parentId is missing or damaged)",
            ));
        }
    }
    let mut model: Option<(String, String)> = None;
    let mut apis: HashMap<(String, String), String> = HashMap::new();
    // The calls still waiting for their result: (id, tool), in call order.
    let mut waiting: Vec<(String, String)> = Vec::new();
    let mut waiting_from = 0;
    for e in entries {
        if e.kind() == "model_change" {
            model = Some((
                str_of(&e.value, "provider").unwrap_or("").into(),
                str_of(&e.value, "modelId").unwrap_or("").into(),
            ));
            continue;
        }
        let Some(m) = e.message() else { continue };
        let role = str_of(m, "role").unwrap_or("");
        if role == "toolResult" {
            let id = str_of(m, "toolCallId").unwrap_or("");
            let Some((want, tool)) = waiting.first() else {
                return Err(TrajectoryError::new(
                    path,
                    e.line,
                    "message.toolCallId",
                    format!("a result for call {id}, which no message before it is waiting for"),
                ));
            };
            if want != id {
                return Err(TrajectoryError::new(path,
                    e.line,
                    "message.toolCallId",
                    format!("the result of call {id} where the result of call {want} (line {waiting_from}) comes next"),
                ));
            }
            if str_of(m, "toolName") != Some(tool.as_str()) {
                return Err(TrajectoryError::new(
                    path,
                    e.line,
                    "message.toolName",
                    format!("call {id} is a call of `{tool}`"),
                ));
            }
            waiting.remove(0);
            continue;
        }
        // Calls left without a result (an aborted batch) make that batch the torn end: no
        // boundary at or after it.
        waiting.clear();
        if role != "assistant" {
            continue;
        }
        let provider = str_of(m, "provider").unwrap_or("").to_string();
        let name = str_of(m, "model").unwrap_or("").to_string();
        if let Some((p, id)) = &model {
            if (p, id) != (&provider, &name) {
                return Err(TrajectoryError::new(path,
                    e.line,
                    "message.model",
                    format!("the message names model {provider}/{name}; the session's model is {p}/{id}"),
                ));
            }
        }
        let api = str_of(m, "api").unwrap_or("").to_string();
        if let Some(a) = apis.insert((provider.clone(), name.clone()), api.clone()) {
            if a != api {
                return Err(TrajectoryError::new(
                    path,
                    e.line,
                    "message.api",
                    format!("`{api}`, where the earlier messages of {provider}/{name} name `{a}`"),
                ));
            }
        }
        let calls = super::session::calls_of(m);
        let stop = str_of(m, "stopReason").unwrap_or("");
        if (stop == "toolUse") == calls.is_empty() && !matches!(stop, "error" | "aborted") {
            return Err(TrajectoryError::new(
                path,
                e.line,
                "message.stopReason",
                match calls.len() {
                    0 => "`toolUse`, but the message holds no tool call".to_string(),
                    n => format!("`{stop}`, but the message holds {n} tool call(s)"),
                },
            ));
        }
        waiting = calls;
        waiting_from = e.line;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::adapters::pi::parse::parse_bytes;
    use serde_json::Value;
    use std::path::Path;

    fn session() -> (std::path::PathBuf, Vec<Value>) {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/pi/recorded/tools/session.jsonl");
        let text = std::fs::read_to_string(&p).unwrap();
        (
            p,
            text.lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
        )
    }

    fn parse(p: &Path, lines: &[Value]) -> Result<(), String> {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        parse_bytes(p, text.as_bytes())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_genuine_session_passes_and_damage_names_the_field() {
        let (p, lines) = session();
        parse(&p, &lines).unwrap();
        let result = lines
            .iter()
            .position(|l| l["message"]["role"] == "toolResult")
            .unwrap();
        let mut wrong_tool = lines.clone();
        wrong_tool[result]["message"]["toolName"] = "write".into();
        assert!(parse(&p, &wrong_tool)
            .unwrap_err()
            .contains("message.toolName"));
        // Lines in another order are the same context (Pi follows parentId); results in
        // another order are not.
        let mut moved = lines.clone();
        moved.swap(result, result + 1);
        parse(&p, &moved).unwrap();
        let mut swapped = lines.clone();
        let m = swapped[result]["message"].take();
        swapped[result]["message"] = swapped[result + 1]["message"].take();
        swapped[result + 1]["message"] = m;
        assert!(parse(&p, &swapped)
            .unwrap_err()
            .contains("message.toolCallId"));
        let reply = lines
            .iter()
            .position(|l| l["message"]["role"] == "assistant")
            .unwrap();
        let mut other_model = lines.clone();
        other_model[reply]["message"]["model"] = "claude-opus-4".into();
        assert!(parse(&p, &other_model)
            .unwrap_err()
            .contains("message.model"));
        let mut stop = lines.clone();
        stop[reply]["message"]["stopReason"] = "stop".into();
        assert!(parse(&p, &stop).unwrap_err().contains("message.stopReason"));
        let mut block = lines.clone();
        block[reply]["message"]["content"][0]["type"] = "thinkng".into();
        assert!(parse(&p, &block).unwrap_err().contains("content[0].type"));
    }
}
