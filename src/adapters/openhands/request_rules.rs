//! What the continuation does to OpenHands' Chat Completions requests, for the bridge:
//! nothing. The SDK reloads the rebuilt store and `run()` renders it, so request 1 is the
//! original request N+1 (the tools come from the live agent; the file_editor description names
//! the workspace). A boundary prompt is the SDK's own `send_message()`: one user message after
//! the last tool message, kept in every later request, where the bridge checks it
//! ([`crate::kit::RequestRules::boundary_prompt_in_history`]).

use serde_json::{json, Value};

use crate::kit::{Removed, RequestRules, RuleRefusal};
use crate::protocol::Protocol;

/// OpenHands' rules.
#[derive(Debug, Clone, Default)]
pub struct OpenHandsRules {
    /// The continuation was given the boundary prompt.
    pub prompt: bool,
}

impl RequestRules for OpenHandsRules {
    fn remove_inserted(&self, _: &mut Vec<Value>, _: usize) -> Result<Vec<Removed>, RuleRefusal> {
        Ok(Vec::new())
    }

    fn boundary_prompt_in_history(&self) -> bool {
        self.prompt
    }

    /// The SDK sends every content as a list of text parts: a plain string content (the
    /// bridge's own form of the boundary prompt) compares as its one-part list.
    fn canonical(&self, protocol: Protocol, item: &Value) -> Value {
        let mut m = protocol.canonical_message(item);
        if let Some(s) = m.get("content").and_then(Value::as_str).map(str::to_string) {
            m["content"] = json!([{"type": "text", "text": s}]);
        }
        m
    }
}
