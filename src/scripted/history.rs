//! Which turn to play, derived from the request's own history.
//!
//! The turn index is the number of assistant turns already present in the request. A run of
//! consecutive assistant messages (or assistant-produced items) counts as one turn, so a
//! client that splits one reply into several messages is counted right. Nothing here depends
//! on server state: a retried request replays the same turn, and a resumed agent talking to a
//! brand-new server process gets the next turn of the script.
//!
//! Caveat, inherited from the agents: when Claude Code resumes a session that ends on a tool
//! result, it inserts a synthetic assistant message (`No response requested.`) before the new
//! prompt; that message counts as a turn like any other.

use serde_json::Value;

/// Anthropic Messages: runs of `role: "assistant"` in `messages`. `role: "system"` messages
/// (Claude Code's mid-conversation system turns) neither count nor end a run; `user` ends it.
pub fn anthropic_turns(body: &Value) -> usize {
    count_runs(body.get("messages"), |m| {
        match m.get("role").and_then(Value::as_str) {
            Some("assistant") => Role::Assistant,
            Some("system") => Role::Neutral,
            _ => Role::Other,
        }
    })
}

/// OpenAI Chat Completions: runs of `role: "assistant"` in `messages`; any other role
/// (`user`, `tool`, `system`, `developer`) ends a run.
pub fn chat_turns(body: &Value) -> usize {
    count_runs(body.get("messages"), |m| {
        match m.get("role").and_then(Value::as_str) {
            Some("assistant") => Role::Assistant,
            _ => Role::Other,
        }
    })
}

/// OpenAI Responses: runs of assistant-produced items in `input` (`message` with role
/// `assistant`, `reasoning`, `function_call`, `custom_tool_call`, and other `*_call` items
/// except their `*_output`). User/developer/system messages and tool outputs end a run. A
/// string `input` has no history.
pub fn responses_turns(body: &Value) -> usize {
    count_runs(body.get("input"), |item| {
        let ty = item.get("type").and_then(Value::as_str);
        let role = item.get("role").and_then(Value::as_str);
        match (ty, role) {
            (Some("message") | None, Some("assistant")) => Role::Assistant,
            (Some("message") | None, _) => Role::Other,
            (Some("reasoning"), _) => Role::Assistant,
            (Some(t), _) if t.ends_with("_output") => Role::Other,
            (Some(t), _) if t.ends_with("_call") => Role::Assistant,
            _ => Role::Other,
        }
    })
}

#[derive(PartialEq)]
enum Role {
    Assistant,
    Neutral,
    Other,
}

fn count_runs(list: Option<&Value>, classify: impl Fn(&Value) -> Role) -> usize {
    let Some(Value::Array(items)) = list else {
        return 0;
    };
    let mut turns = 0;
    let mut in_run = false;
    for item in items {
        match classify(item) {
            Role::Assistant => {
                if !in_run {
                    turns += 1;
                    in_run = true;
                }
            }
            Role::Neutral => {}
            Role::Other => in_run = false,
        }
    }
    turns
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn anthropic_counts_runs_and_skips_system() {
        let b = json!({"messages":[
            {"role":"user","content":"x"},{"role":"system","content":"env"},
            {"role":"assistant","content":"a"},{"role":"system","content":"note"},{"role":"assistant","content":"b"},
            {"role":"user","content":"r"},{"role":"assistant","content":"c"},{"role":"user","content":"r"}]});
        assert_eq!(anthropic_turns(&b), 2);
        assert_eq!(anthropic_turns(&json!({})), 0);
    }

    #[test]
    fn responses_counts_item_runs() {
        let b = json!({"input":[
            {"type":"message","role":"developer","content":[]},
            {"type":"message","role":"user","content":[]},
            {"type":"reasoning","summary":[]},
            {"type":"message","role":"assistant","content":[]},
            {"type":"function_call","call_id":"c1"},
            {"type":"function_call_output","call_id":"c1"},
            {"type":"custom_tool_call","call_id":"c2"},
            {"type":"custom_tool_call_output","call_id":"c2"}]});
        assert_eq!(responses_turns(&b), 2);
        assert_eq!(responses_turns(&json!({"input":"hi"})), 0);
    }

    #[test]
    fn chat_counts_runs() {
        let b = json!({"messages":[{"role":"system"},{"role":"user"},{"role":"assistant"},{"role":"tool"},
                                   {"role":"tool"},{"role":"assistant"},{"role":"assistant"},{"role":"user"}]});
        assert_eq!(chat_turns(&b), 2);
    }
}
