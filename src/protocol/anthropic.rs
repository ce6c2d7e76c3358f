//! Anthropic Messages.

use serde_json::Value;

/// A request with tools is the agent's conversation; tool-less calls (titles, summaries)
/// are side requests.
pub fn is_main(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

/// Remove every `cache_control` key, at any depth.
pub fn strip_cache_control(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("cache_control");
            for (_, child) in map.iter_mut() {
                strip_cache_control(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_cache_control),
        _ => {}
    }
}

/// The canonical form of one `messages[]` entry: every `cache_control` removed and a
/// message-level string `content` turned into one text block (an agent sends the same
/// message either way depending on where its cache breakpoint sits; the API treats them the
/// same).
pub fn canonical_message(m: &Value) -> Value {
    let mut m = m.clone();
    strip_cache_control(&mut m);
    if let Some(obj) = m.as_object_mut() {
        if let Some(Value::String(s)) = obj.get("content") {
            let block = serde_json::json!([{"type": "text", "text": s}]);
            obj.insert("content".into(), block);
        }
    }
    m
}

/// The tool name if a streamed event starts a `tool_use` (or server tool) content block.
pub fn tool_start(event: &Value) -> Option<String> {
    if event.get("type").and_then(Value::as_str) != Some("content_block_start") {
        return None;
    }
    let block = event.get("content_block")?;
    match block.get("type").and_then(Value::as_str) {
        Some("tool_use") | Some("server_tool_use") => Some(
            block
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        ),
        _ => None,
    }
}

/// Tool names of a non-streamed message.
pub fn answer_tools(message: &Value) -> Vec<String> {
    message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| {
            matches!(
                b.get("type").and_then(Value::as_str),
                Some("tool_use") | Some("server_tool_use")
            )
        })
        .map(|b| {
            b.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

/// `thinking: disabled`, and the `clear_thinking` context edits that need thinking removed.
pub fn disable_thinking(body: &mut Value) {
    body["thinking"] = serde_json::json!({"type": "disabled"});
    if let Some(cm) = body
        .get_mut("context_management")
        .and_then(Value::as_object_mut)
    {
        if let Some(edits) = cm.get_mut("edits").and_then(Value::as_array_mut) {
            edits.retain(|e| {
                !e.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.starts_with("clear_thinking"))
            });
        }
        if cm
            .get("edits")
            .and_then(Value::as_array)
            .is_some_and(|e| e.is_empty())
        {
            cm.remove("edits");
        }
    }
    if body
        .get("context_management")
        .and_then(Value::as_object)
        .is_some_and(|o| o.is_empty())
    {
        if let Some(o) = body.as_object_mut() {
            o.remove("context_management");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn message_canonical_form() {
        let a = json!({"role": "system", "content": "hello"});
        let b = json!({"role": "system", "content": [{"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}]});
        assert_eq!(canonical_message(&a), canonical_message(&b));
    }

    #[test]
    fn tools_of_streams_and_messages() {
        let ev = json!({"type": "content_block_start", "content_block": {"type": "tool_use", "name": "Bash"}});
        assert_eq!(tool_start(&ev).as_deref(), Some("Bash"));
        let m = json!({"content": [{"type": "text", "text": "x"}, {"type": "tool_use", "name": "Read"}]});
        assert_eq!(answer_tools(&m), ["Read"]);
    }
}
