//! OpenAI Responses.

use serde_json::Value;

/// Every request with an `input` list is the agent's conversation (Codex code mode sends no
/// `tools` key: its tools travel as an input item).
pub fn is_main(body: &Value) -> bool {
    body.get("input").and_then(Value::as_array).is_some()
}

fn call_name(item: &Value) -> Option<String> {
    match item.get("type").and_then(Value::as_str)? {
        "function_call" | "custom_tool_call" => {
            item.get("name").and_then(Value::as_str).map(str::to_string)
        }
        "local_shell_call" => Some("local_shell".into()),
        _ => None,
    }
}

/// A tool call starting in a streamed event (`response.output_item.added`).
pub fn tool_start(event: &Value) -> Option<String> {
    if event.get("type").and_then(Value::as_str) != Some("response.output_item.added") {
        return None;
    }
    call_name(event.get("item")?)
}

/// Tool names of a non-streamed response (its `output` items).
pub fn answer_tools(response: &Value) -> Vec<String> {
    response
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(call_name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_of_streams_and_responses() {
        let ev = json!({"type": "response.output_item.added", "item": {"type": "function_call", "name": "exec_command"}});
        assert_eq!(tool_start(&ev).as_deref(), Some("exec_command"));
        let r = json!({"output": [{"type": "message"}, {"type": "custom_tool_call", "name": "apply_patch"}]});
        assert_eq!(answer_tools(&r), ["apply_patch"]);
        assert!(is_main(&json!({"input": []})) && !is_main(&json!({"input": "hi"})));
    }
}
