//! Second upstream mode: translate an (already validated) Anthropic Messages request to an
//! OpenAI Chat Completions request and the answer back. This first version is **buffered**:
//! the upstream is called without streaming and, when the agent asked for a stream, a
//! complete Anthropic SSE sequence is synthesised from the answer.
//!
//! Mapping (request): `system` text blocks → one leading `system` message (joined by a blank
//! line); mid-conversation `system` turns → `system` messages; user text → `user` messages;
//! `tool_result` → `tool` messages (before the user text of the same turn, as OpenAI requires);
//! assistant text → `content`, `tool_use` → `tool_calls`, thinking blocks dropped (Chat has no
//! signed reasoning input); `tools` → functions; `tool_choice` auto/any/tool/none →
//! auto/required/function/none; `max_tokens`, `temperature`, `top_p`, `stop_sequences` kept.
//! Images and documents are refused (the bridge fails closed rather than drop content).
//!
//! Mapping (answer): `content` → text block, `reasoning_content` → dropped, `tool_calls` →
//! `tool_use` blocks (arguments parsed as JSON; unparsable arguments are refused),
//! `finish_reason` stop/tool_calls/length → `end_turn`/`tool_use`/`max_tokens`.

use serde_json::{json, Map, Value};

/// Text of an Anthropic content value (string or blocks); refuses non-text blocks.
fn text_of(content: &Value, what: &str) -> Result<String, String> {
    match content {
        Value::String(s) => Ok(s.clone()),
        Value::Null => Ok(String::new()),
        Value::Array(blocks) => {
            let mut parts = Vec::new();
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => parts.push(
                        b.get("text")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    ),
                    other => {
                        return Err(format!(
                        "{what}: content block {other:?} cannot be translated to Chat Completions"
                    ))
                    }
                }
            }
            Ok(parts.join("\n"))
        }
        _ => Err(format!("{what}: unexpected content")),
    }
}

/// Anthropic Messages request → Chat Completions request (non-streaming).
pub fn anthropic_to_chat(req: &Value, model: Option<&str>) -> Result<Value, String> {
    let mut messages: Vec<Value> = Vec::new();
    if let Some(sys) = req.get("system") {
        let text = match sys {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n\n"),
            _ => String::new(),
        };
        if !text.is_empty() {
            messages.push(json!({"role": "system", "content": text}));
        }
    }
    for (i, m) in req
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("no messages")?
        .iter()
        .enumerate()
    {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        let content = m.get("content").cloned().unwrap_or(Value::Null);
        match role {
            "system" => messages.push(
                json!({"role": "system", "content": text_of(&content, &format!("messages[{i}]"))?}),
            ),
            "user" => {
                let blocks: Vec<Value> = match &content {
                    Value::String(s) => vec![json!({"type": "text", "text": s})],
                    Value::Array(a) => a.clone(),
                    _ => Vec::new(),
                };
                let mut texts = Vec::new();
                for b in &blocks {
                    match b.get("type").and_then(Value::as_str) {
                        Some("tool_result") => {
                            let id = b.get("tool_use_id").and_then(Value::as_str).unwrap_or("");
                            let mut text = text_of(b.get("content").unwrap_or(&Value::Null), &format!("messages[{i}] tool_result"))?;
                            if b.get("is_error").and_then(Value::as_bool) == Some(true) && text.is_empty() {
                                text = "error".into();
                            }
                            messages.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
                        }
                        Some("text") => texts.push(b.get("text").and_then(Value::as_str).unwrap_or("").to_string()),
                        other => return Err(format!("messages[{i}]: user block {other:?} cannot be translated to Chat Completions")),
                    }
                }
                if !texts.is_empty() {
                    messages.push(json!({"role": "user", "content": texts.join("\n")}));
                }
            }
            "assistant" => {
                let blocks: Vec<Value> = match &content {
                    Value::String(s) => vec![json!({"type": "text", "text": s})],
                    Value::Array(a) => a.clone(),
                    _ => Vec::new(),
                };
                let mut texts = Vec::new();
                let mut calls = Vec::new();
                for b in &blocks {
                    match b.get("type").and_then(Value::as_str) {
                        Some("text") => texts.push(b.get("text").and_then(Value::as_str).unwrap_or("").to_string()),
                        Some("thinking") | Some("redacted_thinking") => {}
                        Some("tool_use") => calls.push(json!({
                            "id": b.get("id"),
                            "type": "function",
                            "function": {"name": b.get("name"), "arguments": b.get("input").map(|v| v.to_string()).unwrap_or_else(|| "{}".into())}
                        })),
                        other => return Err(format!("messages[{i}]: assistant block {other:?} cannot be translated to Chat Completions")),
                    }
                }
                let mut msg = Map::new();
                msg.insert("role".into(), json!("assistant"));
                msg.insert(
                    "content".into(),
                    if texts.is_empty() {
                        Value::Null
                    } else {
                        json!(texts.join("\n"))
                    },
                );
                if !calls.is_empty() {
                    msg.insert("tool_calls".into(), Value::Array(calls));
                }
                messages.push(Value::Object(msg));
            }
            other => {
                return Err(format!(
                    "messages[{i}]: role {other:?} cannot be translated"
                ))
            }
        }
    }
    let mut out = Map::new();
    out.insert(
        "model".into(),
        json!(model
            .map(String::from)
            .or_else(|| req.get("model").and_then(Value::as_str).map(String::from))),
    );
    out.insert("messages".into(), Value::Array(messages));
    if let Some(tools) = req.get("tools").and_then(Value::as_array) {
        let fns: Vec<Value> = tools
            .iter()
            .filter(|t| t.get("input_schema").is_some())
            .map(|t| json!({"type": "function", "function": {"name": t.get("name"), "description": t.get("description").cloned().unwrap_or(json!("")), "parameters": t.get("input_schema")}}))
            .collect();
        if !fns.is_empty() {
            out.insert("tools".into(), Value::Array(fns));
        }
    }
    if let Some(tc) = req.get("tool_choice") {
        let mapped = match tc.get("type").and_then(Value::as_str) {
            Some("auto") => Some(json!("auto")),
            Some("any") => Some(json!("required")),
            Some("none") => Some(json!("none")),
            Some("tool") => Some(json!({"type": "function", "function": {"name": tc.get("name")}})),
            _ => None,
        };
        if let Some(m) = mapped {
            out.insert("tool_choice".into(), m);
        }
    }
    for (from, to) in [
        ("max_tokens", "max_tokens"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("stop_sequences", "stop"),
    ] {
        if let Some(v) = req.get(from) {
            out.insert(to.into(), v.clone());
        }
    }
    out.insert("stream".into(), json!(false));
    Ok(Value::Object(out))
}

/// Chat Completions answer → Anthropic message.
pub fn chat_to_anthropic(resp: &Value, model: &str) -> Result<Value, String> {
    let choice = resp
        .pointer("/choices/0")
        .ok_or("upstream answer has no choices")?;
    let msg = choice
        .get("message")
        .ok_or("upstream answer has no message")?;
    let mut content = Vec::new();
    if let Some(t) = msg.get("content").and_then(Value::as_str) {
        if !t.is_empty() {
            content.push(json!({"type": "text", "text": t}));
        }
    }
    for c in msg
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let args = c
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .unwrap_or("{}");
        let input: Value = if args.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(args)
                .map_err(|e| format!("tool call arguments are not JSON: {e}"))?
        };
        content.push(json!({"type": "tool_use", "id": c.get("id"), "name": c.pointer("/function/name"), "input": input}));
    }
    let stop = match choice.get("finish_reason").and_then(Value::as_str) {
        Some("tool_calls") | Some("function_call") => "tool_use",
        Some("length") => "max_tokens",
        _ => {
            if content.iter().any(|b| b["type"] == "tool_use") {
                "tool_use"
            } else {
                "end_turn"
            }
        }
    };
    let id = resp.get("id").and_then(Value::as_str).unwrap_or("chat");
    Ok(json!({
        "id": format!("msg_{}", id.replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "_")),
        "type": "message",
        "role": "assistant",
        "model": resp.get("model").and_then(Value::as_str).unwrap_or(model),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": {
            "input_tokens": resp.pointer("/usage/prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
            "output_tokens": resp.pointer("/usage/completion_tokens").and_then(Value::as_u64).unwrap_or(0)
        }
    }))
}

/// A complete Anthropic SSE sequence for `message`.
pub fn anthropic_sse(message: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ev = |name: &str, data: Value| {
        out.extend_from_slice(format!("event: {name}\ndata: {data}\n\n").as_bytes());
    };
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(0);
    ev(
        "message_start",
        json!({"type": "message_start", "message": start}),
    );
    for (i, b) in message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        match b["type"].as_str() {
            Some("text") => {
                ev(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}),
                );
                ev(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": b["text"]}}),
                );
            }
            Some("tool_use") => {
                ev(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}}),
                );
                ev(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": b["input"].to_string()}}),
                );
            }
            _ => continue,
        }
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        );
    }
    ev(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null}, "usage": {"output_tokens": message["usage"]["output_tokens"]}}),
    );
    ev("message_stop", json!({"type": "message_stop"}));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_answer_round_trip() {
        let req = json!({
            "model": "claude-x", "max_tokens": 100,
            "system": [{"type": "text", "text": "S1"}, {"type": "text", "text": "S2", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "task"}]},
                {"role": "system", "content": "env"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": "go"}, {"type": "tool_use", "id": "tu1", "name": "Bash", "input": {"command": "ls"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "a.txt"}, {"type": "text", "text": "more"}]}
            ],
            "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any"}
        });
        let c = anthropic_to_chat(&req, Some("open-model")).unwrap();
        assert_eq!(c["model"], "open-model");
        assert_eq!(
            c["messages"][0],
            json!({"role": "system", "content": "S1\n\nS2"})
        );
        assert_eq!(
            c["messages"][3]["tool_calls"][0]["function"]["arguments"],
            "{\"command\":\"ls\"}"
        );
        assert_eq!(
            c["messages"][4],
            json!({"role": "tool", "tool_call_id": "tu1", "content": "a.txt"})
        );
        assert_eq!(c["messages"][5], json!({"role": "user", "content": "more"}));
        assert_eq!(c["tool_choice"], "required");
        let ans = json!({"id": "chatcmpl-1", "model": "open-model", "choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant", "content": "ok", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{\"file_path\":\"/x\"}"}}]}}], "usage": {"prompt_tokens": 5, "completion_tokens": 2}});
        let m = chat_to_anthropic(&ans, "claude-x").unwrap();
        assert_eq!(m["stop_reason"], "tool_use");
        assert_eq!(m["content"][1]["input"]["file_path"], "/x");
        let sse = String::from_utf8(anthropic_sse(&m)).unwrap();
        assert!(sse.starts_with("event: message_start\n"));
        assert!(sse.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
    }

    #[test]
    fn images_are_refused() {
        let req =
            json!({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]});
        assert!(anthropic_to_chat(&req, None).is_err());
    }
}
