//! The Anthropic Messages conversation Pi 0.83.0 sends for a session's messages: a port of
//! pi-ai's `transformMessages` + `convertMessages` (`api/anthropic-messages.js`) for an
//! API-key session (not OAuth) on the session's own model. The bridge compares it with
//! every request's `messages` (`cache_control` aside, which Pi puts on the last user block).

use serde_json::{json, Value};

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// `(provider, api, model)` of the model the continuation runs: assistant messages of that
/// model keep their blocks as they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    pub provider: String,
    pub api: String,
    pub id: String,
}

/// A tool id as Anthropic accepts it (`normalizeToolCallId`), for calls of another model.
fn normalize_id(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// pi-ai's `transformMessages`: thinking of other models as text, ids normalized, error or
/// aborted assistant turns dropped, and "No result provided" for calls left without result.
pub fn transform(messages: &[Value], model: &Model) -> Vec<Value> {
    let mut ids: std::collections::HashMap<String, String> = Default::default();
    let mut transformed = Vec::with_capacity(messages.len());
    for m in messages {
        let mut m = m.clone();
        if m.get("content").is_none_or(Value::is_null) {
            m["content"] = json!([]);
        }
        match str_of(&m, "role") {
            Some("toolResult") => {
                if let Some(n) = str_of(&m, "toolCallId").and_then(|i| ids.get(i)).cloned() {
                    m["toolCallId"] = json!(n);
                }
            }
            Some("assistant") => {
                let same = str_of(&m, "provider") == Some(&model.provider)
                    && str_of(&m, "api") == Some(&model.api)
                    && str_of(&m, "model") == Some(&model.id);
                let blocks = m["content"].as_array().cloned().unwrap_or_default();
                let mut out = Vec::with_capacity(blocks.len());
                for b in blocks {
                    match str_of(&b, "type") {
                        Some("thinking") => {
                            if b.get("redacted").and_then(Value::as_bool) == Some(true) {
                                if same {
                                    out.push(b);
                                }
                                continue;
                            }
                            let sig = str_of(&b, "thinkingSignature").unwrap_or("");
                            if same && !sig.is_empty() {
                                out.push(b);
                                continue;
                            }
                            let text = str_of(&b, "thinking").unwrap_or("");
                            if blank(text) {
                                continue;
                            }
                            out.push(if same {
                                b
                            } else {
                                json!({"type": "text", "text": text})
                            });
                        }
                        Some("text") if !same => out.push(
                            json!({"type": "text", "text": str_of(&b, "text").unwrap_or("")}),
                        ),
                        Some("toolCall") => {
                            let mut c = b.clone();
                            if !same {
                                if let Some(o) = c.as_object_mut() {
                                    o.remove("thoughtSignature");
                                }
                                let id = str_of(&b, "id").unwrap_or("").to_string();
                                let n = normalize_id(&id);
                                if n != id {
                                    ids.insert(id, n.clone());
                                    c["id"] = json!(n);
                                }
                            }
                            out.push(c);
                        }
                        _ => out.push(b),
                    }
                }
                m["content"] = Value::Array(out);
            }
            _ => {}
        }
        transformed.push(m);
    }
    // Synthetic results for calls a later turn left unanswered.
    let mut result = Vec::with_capacity(transformed.len());
    let mut pending: Vec<(String, String)> = vec![];
    let mut answered: std::collections::HashSet<String> = Default::default();
    let flush = |result: &mut Vec<Value>,
                 pending: &mut Vec<(String, String)>,
                 answered: &mut std::collections::HashSet<String>| {
        for (id, name) in pending.drain(..) {
            if !answered.contains(&id) {
                result.push(json!({"role": "toolResult", "toolCallId": id, "toolName": name, "content": [{"type": "text", "text": "No result provided"}], "isError": true}));
            }
        }
        answered.clear();
    };
    for m in transformed {
        match str_of(&m, "role") {
            Some("assistant") => {
                flush(&mut result, &mut pending, &mut answered);
                if matches!(str_of(&m, "stopReason"), Some("error" | "aborted")) {
                    continue;
                }
                let calls = super::session::calls_of(&m);
                if !calls.is_empty() {
                    pending = calls;
                    answered.clear();
                }
                result.push(m);
            }
            Some("toolResult") => {
                answered.insert(str_of(&m, "toolCallId").unwrap_or("").to_string());
                result.push(m);
            }
            Some("user") => {
                flush(&mut result, &mut pending, &mut answered);
                result.push(m);
            }
            _ => result.push(m),
        }
    }
    flush(&mut result, &mut pending, &mut answered);
    result
}

fn image(b: &Value) -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": b.get("mimeType").cloned().unwrap_or(Value::Null), "data": b.get("data").cloned().unwrap_or(Value::Null)}})
}

/// `convertContentBlocks`: text only → the texts joined by newlines; with images → blocks
/// (a placeholder text first when there is no text).
fn tool_content(content: &Value) -> Value {
    let blocks = content.as_array().cloned().unwrap_or_default();
    if !blocks.iter().any(|b| str_of(b, "type") == Some("image")) {
        return json!(blocks
            .iter()
            .map(|b| str_of(b, "text").unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n"));
    }
    let mut out: Vec<Value> = blocks
        .iter()
        .map(|b| {
            if str_of(b, "type") == Some("text") {
                json!({"type": "text", "text": str_of(b, "text").unwrap_or("")})
            } else {
                image(b)
            }
        })
        .collect();
    if !out.iter().any(|b| b["type"] == "text") {
        out.insert(0, json!({"type": "text", "text": "(see attached image)"}));
    }
    Value::Array(out)
}

/// The Anthropic `messages` Pi sends for `messages` (its context), without `cache_control`.
pub fn anthropic_messages(messages: &[Value], model: &Model) -> Vec<Value> {
    let msgs = transform(messages, model);
    let mut params = Vec::new();
    let mut i = 0;
    while i < msgs.len() {
        let m = &msgs[i];
        match str_of(m, "role") {
            Some("user") => match m.get("content") {
                Some(Value::String(s)) if !blank(s) => {
                    params.push(json!({"role": "user", "content": s}));
                }
                Some(Value::Array(a)) => {
                    let blocks: Vec<Value> = a
                        .iter()
                        .map(|b| {
                            if str_of(b, "type") == Some("text") {
                                json!({"type": "text", "text": str_of(b, "text").unwrap_or("")})
                            } else {
                                image(b)
                            }
                        })
                        .filter(|b| b["type"] != "text" || !blank(b["text"].as_str().unwrap_or("")))
                        .collect();
                    if !blocks.is_empty() {
                        params.push(json!({"role": "user", "content": blocks}));
                    }
                }
                _ => {}
            },
            Some("assistant") => {
                let mut blocks = Vec::new();
                for b in m["content"].as_array().into_iter().flatten() {
                    match str_of(b, "type") {
                        Some("text") => {
                            let t = str_of(b, "text").unwrap_or("");
                            if !blank(t) {
                                blocks.push(json!({"type": "text", "text": t}));
                            }
                        }
                        Some("thinking") => {
                            let sig = str_of(b, "thinkingSignature").unwrap_or("");
                            if b.get("redacted").and_then(Value::as_bool) == Some(true) {
                                blocks.push(json!({"type": "redacted_thinking", "data": sig}));
                                continue;
                            }
                            let text = str_of(b, "thinking").unwrap_or("");
                            if blank(text) && blank(sig) {
                                continue;
                            }
                            if blank(sig) {
                                blocks.push(json!({"type": "text", "text": text}));
                            } else {
                                blocks.push(json!({"type": "thinking", "thinking": text, "signature": sig}));
                            }
                        }
                        Some("toolCall") => blocks.push(json!({
                            "type": "tool_use",
                            "id": b.get("id").cloned().unwrap_or(Value::Null),
                            "name": b.get("name").cloned().unwrap_or(Value::Null),
                            "input": b.get("arguments").filter(|a| !a.is_null()).cloned().unwrap_or(json!({})),
                        })),
                        _ => {}
                    }
                }
                if !blocks.is_empty() {
                    params.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            Some("toolResult") => {
                let mut results = Vec::new();
                while i < msgs.len() && str_of(&msgs[i], "role") == Some("toolResult") {
                    let r = &msgs[i];
                    results.push(json!({
                        "type": "tool_result",
                        "tool_use_id": r.get("toolCallId").cloned().unwrap_or(Value::Null),
                        "content": tool_content(&r["content"]),
                        "is_error": r.get("isError").cloned().unwrap_or(Value::Null),
                    }));
                    i += 1;
                }
                params.push(json!({"role": "user", "content": results}));
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> Model {
        Model {
            provider: "anthropic".into(),
            api: "anthropic-messages".into(),
            id: "claude-sonnet-4-5".into(),
        }
    }

    #[test]
    fn a_turn_with_parallel_results_becomes_one_user_message() {
        let msgs = vec![
            json!({"role": "user", "content": [{"type": "text", "text": "go"}]}),
            json!({"role": "assistant", "provider": "anthropic", "api": "anthropic-messages", "model": "claude-sonnet-4-5", "stopReason": "toolUse",
                   "content": [{"type": "thinking", "thinking": "t", "thinkingSignature": "sig"}, {"type": "text", "text": " "},
                               {"type": "toolCall", "id": "a", "name": "read", "arguments": {"path": "x"}}, {"type": "toolCall", "id": "b", "name": "bash", "arguments": {"command": "ls"}}]}),
            json!({"role": "toolResult", "toolCallId": "a", "toolName": "read", "content": [{"type": "text", "text": "1"}, {"type": "text", "text": "2"}], "isError": false}),
            json!({"role": "toolResult", "toolCallId": "b", "toolName": "bash", "content": [{"type": "text", "text": "x"}], "isError": true}),
        ];
        let out = anthropic_messages(&msgs, &model());
        assert_eq!(out.len(), 3);
        assert_eq!(
            out[1]["content"][0],
            json!({"type": "thinking", "thinking": "t", "signature": "sig"})
        );
        assert_eq!(
            out[1]["content"].as_array().unwrap().len(),
            3,
            "the blank text block is dropped"
        );
        assert_eq!(out[2]["content"][0]["content"], "1\n2");
        assert_eq!(out[2]["content"][1]["is_error"], true);
    }

    #[test]
    fn errored_turns_are_dropped_and_orphans_get_a_result() {
        let msgs = vec![
            json!({"role": "user", "content": "go"}),
            json!({"role": "assistant", "provider": "anthropic", "api": "anthropic-messages", "model": "claude-sonnet-4-5", "stopReason": "toolUse",
                   "content": [{"type": "toolCall", "id": "a", "name": "read", "arguments": {}}]}),
            json!({"role": "user", "content": "again"}),
            json!({"role": "assistant", "provider": "anthropic", "api": "anthropic-messages", "model": "claude-sonnet-4-5", "stopReason": "error", "content": []}),
        ];
        let out = anthropic_messages(&msgs, &model());
        assert_eq!(out.len(), 4);
        assert_eq!(out[2]["content"][0]["content"], "No result provided");
        assert_eq!(out[3], json!({"role": "user", "content": "again"}));
    }
}
