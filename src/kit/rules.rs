//! What the bridge needs from an agent's adapter to validate its model requests: exactly
//! which items the agent's resume machinery (or a declared notice) inserts, how its
//! conversation items compare, and what must never remain. The bridge itself knows no agent.

use serde_json::Value;

use crate::protocol::Protocol;

/// A request the rules refuse (the bridge fails closed with this reason and difference).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRefusal {
    pub reason: String,
    /// The first difference, in words (shown by the audit).
    pub difference: Option<String>,
}

impl RuleRefusal {
    pub fn new(reason: impl Into<String>) -> Self {
        RuleRefusal {
            reason: reason.into(),
            difference: None,
        }
    }
}

/// One item a rule removed: its journal kind (`claude:resume_text_block`…) and the item.
#[derive(Debug, Clone, PartialEq)]
pub struct Removed {
    pub kind: String,
    pub item: Value,
}

/// An agent's request rules.
pub trait RequestRules: Send + Sync + std::fmt::Debug {
    /// Remove exactly the items the agent inserted into `messages` (the request's
    /// conversation list) around the boundary; `prefix_len` is the length of the expected
    /// prefix. Anything the rules do not recognize is left for the prefix comparison, which
    /// fails closed.
    fn remove_inserted(
        &self,
        messages: &mut Vec<Value>,
        prefix_len: usize,
    ) -> Result<Vec<Removed>, RuleRefusal>;

    /// How many leading items of `messages` the agent generates afresh for every request
    /// (a system prompt rendered with the live date and environment): forwarded as they
    /// are, never part of the prefix, so never compared. Default: none.
    fn generated_head(&self, _messages: &[Value]) -> usize {
        0
    }

    /// A text that must occur nowhere in the request once the removals are done (a per-run
    /// resume nonce).
    fn forbidden_text(&self) -> Option<&str> {
        None
    }

    /// The comparison form of one conversation item (default: the protocol's canonical form).
    fn canonical(&self, protocol: Protocol, item: &Value) -> Value {
        protocol.canonical_message(item)
    }

    /// Checks of the whole request beyond its conversation (`messages` after removals).
    fn check_request(&self, _body: &Value, _messages: &[Value]) -> Result<(), RuleRefusal> {
        Ok(())
    }

    /// Whether the agent itself sends the boundary prompt (it was given as the agent's own
    /// next prompt, e.g. Pi's `prompt()`, and stays in its history): then the bridge checks
    /// that it stands right after O′N in every request instead of inserting it. Default:
    /// the bridge inserts it.
    fn boundary_prompt_in_history(&self) -> bool {
        false
    }
}

/// The resume inserts nothing (Pi SDK `continue()`, OpenHands `run()`).
#[derive(Debug, Clone, Default)]
pub struct NoInserts;

impl RequestRules for NoInserts {
    fn remove_inserted(&self, _: &mut Vec<Value>, _: usize) -> Result<Vec<Removed>, RuleRefusal> {
        Ok(Vec::new())
    }
}

/// The resume inserts nothing, and the boundary prompt, when set, is handed to the agent as
/// its own next prompt (it stays in its history: Pi's `prompt()`, mini-swe-agent's next user
/// message), so the bridge checks it instead of inserting it.
#[derive(Debug, Clone, Default)]
pub struct OwnPrompt {
    /// The continuation was given the boundary prompt.
    pub prompt: bool,
}

impl RequestRules for OwnPrompt {
    fn remove_inserted(&self, _: &mut Vec<Value>, _: usize) -> Result<Vec<Removed>, RuleRefusal> {
        Ok(Vec::new())
    }
    fn boundary_prompt_in_history(&self) -> bool {
        self.prompt
    }
}

/// A user message whose only content is `text` right after the prefix (the prompt of a
/// CLI resume that needs one: Pi CLI, OpenCode `run --session`); the agent keeps it in its
/// history, so every later request carries it at the same place.
#[derive(Debug, Clone)]
pub struct TrailingUserMessage {
    pub text: String,
    /// The journal kind of the removed item.
    pub kind: &'static str,
}

impl RequestRules for TrailingUserMessage {
    fn remove_inserted(
        &self,
        messages: &mut Vec<Value>,
        prefix_len: usize,
    ) -> Result<Vec<Removed>, RuleRefusal> {
        match messages.get(prefix_len) {
            Some(m) if is_sole_text_user(m, &self.text) => Ok(vec![Removed {
                kind: self.kind.into(),
                item: messages.remove(prefix_len),
            }]),
            _ => Ok(Vec::new()),
        }
    }
    fn forbidden_text(&self) -> Option<&str> {
        Some(&self.text)
    }
}

/// The `role` of a conversation item.
pub fn role(m: &Value) -> Option<&str> {
    m.get("role").and_then(Value::as_str)
}

/// A `text` / `input_text` block holding exactly `text`.
pub fn is_text_block(b: &Value, text: &str) -> bool {
    matches!(
        b.get("type").and_then(Value::as_str),
        Some("text" | "input_text")
    ) && b.get("text").and_then(Value::as_str) == Some(text)
}

/// A user message whose whole content is `text` (a string, or one text block).
pub fn is_sole_text_user(m: &Value, text: &str) -> bool {
    if role(m) != Some("user") {
        return false;
    }
    match m.get("content") {
        Some(Value::String(s)) => s == text,
        Some(Value::Array(a)) => a.len() == 1 && is_text_block(&a[0], text),
        _ => false,
    }
}

/// Does `text` still occur as a text block (or a whole string content) anywhere?
pub fn text_block_remains(messages: &[Value], text: &str) -> bool {
    messages.iter().any(|m| match m.get("content") {
        Some(Value::String(s)) => s == text,
        Some(Value::Array(a)) => a.iter().any(|b| is_text_block(b, text)),
        _ => false,
    })
}

/// Remove block `block` of message `message`; when it carried `cache_control`, the
/// breakpoint moves to the block before it (where the agent had it before the insertion).
/// Returns the removed block.
pub fn remove_block(messages: &mut [Value], message: usize, block: usize) -> Option<Value> {
    let blocks = messages
        .get_mut(message)?
        .get_mut("content")?
        .as_array_mut()?;
    if block >= blocks.len() {
        return None;
    }
    let removed = blocks.remove(block);
    if let Some(cc) = removed.get("cache_control").cloned() {
        if block > 0 {
            if let Some(prev) = blocks.get_mut(block - 1).and_then(Value::as_object_mut) {
                prev.entry("cache_control").or_insert(cc);
            }
        }
    }
    Some(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn trailing_user_message_is_removed_only_right_after_the_prefix() {
        let r = TrailingUserMessage {
            text: "NONCE".into(),
            kind: "trailing_user_message",
        };
        let mut m = vec![
            json!({"role": "user", "content": "task"}),
            json!({"role": "user", "content": [{"type": "text", "text": "NONCE"}]}),
        ];
        assert!(r.remove_inserted(&mut m.clone(), 2).unwrap().is_empty());
        let removed = r.remove_inserted(&mut m, 1).unwrap();
        assert_eq!(removed.len(), 1);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn a_removed_block_hands_its_cache_breakpoint_back() {
        let mut m = vec![json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "ok"},
            {"type": "text", "text": "N", "cache_control": {"type": "ephemeral"}}
        ]})];
        remove_block(&mut m, 0, 1).unwrap();
        assert_eq!(
            m[0]["content"],
            json!([{"type": "tool_result", "tool_use_id": "t", "content": "ok", "cache_control": {"type": "ephemeral"}}])
        );
        assert!(!text_block_remains(&m, "N"));
    }
}
