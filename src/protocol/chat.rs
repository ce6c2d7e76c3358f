//! OpenAI Chat Completions.

use serde_json::Value;

/// Every request with a `messages` list is the agent's conversation (litellm-based agents
/// without tools, e.g. mini-swe-agent 1.x, send none).
pub fn is_main(body: &Value) -> bool {
    body.get("messages").and_then(Value::as_array).is_some()
}

/// Messages are compared as sent, except `cache_control` (provider hints that move).
pub fn canonical_message(m: &Value) -> Value {
    let mut m = m.clone();
    super::anthropic::strip_cache_control(&mut m);
    m
}

/// A tool call starting in a streamed chunk: a `tool_calls` delta that names its function.
pub fn tool_start(chunk: &Value) -> Option<String> {
    chunk
        .pointer("/choices/0/delta/tool_calls")?
        .as_array()?
        .iter()
        .find_map(|c| {
            c.pointer("/function/name")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
}

/// Tool names of a non-streamed completion.
pub fn answer_tools(completion: &Value) -> Vec<String> {
    completion
        .pointer("/choices/0/message/tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            c.pointer("/function/name")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_of_chunks_and_completions() {
        let ch = json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "bash", "arguments": ""}}]}}]});
        assert_eq!(tool_start(&ch).as_deref(), Some("bash"));
        let more = json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]});
        assert_eq!(tool_start(&more), None);
        let c = json!({"choices": [{"message": {"tool_calls": [{"function": {"name": "bash"}}]}}]});
        assert_eq!(answer_tools(&c), ["bash"]);
    }
}
