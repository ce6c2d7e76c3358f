//! What OpenCode 1.17.11's `opencode run --session <id> <message>` does to its Chat
//! Completions requests, for the bridge (`crate::kit::RequestRules`):
//!
//! * `run` needs a message: pvisor passes a per-run nonce (no spaces, so `run` does not
//!   quote it), which OpenCode stores as a user message right after the prefix and sends in
//!   every later request at that place: `opencode:resume_prompt`, removed each time.
//! * The system prompt is rendered afresh for every request (it carries the live date,
//!   working directory, instructions and skills) and is not stored in the session: the
//!   leading `system` messages are the agent's generated head, forwarded and not compared.
//! * Nothing else is inserted (measured: the first request is otherwise byte-identical to
//!   the original request N+1).

use serde_json::Value;

use crate::kit::rules::{role, Removed, RequestRules, RuleRefusal, TrailingUserMessage};

#[derive(Debug, Clone)]
pub struct OpenCodeRules {
    nonce: TrailingUserMessage,
}

impl OpenCodeRules {
    pub fn new(nonce: &str) -> Self {
        OpenCodeRules {
            nonce: TrailingUserMessage {
                text: nonce.to_string(),
                kind: "opencode:resume_prompt",
            },
        }
    }
}

impl RequestRules for OpenCodeRules {
    fn generated_head(&self, messages: &[Value]) -> usize {
        messages
            .iter()
            .take_while(|m| role(m) == Some("system"))
            .count()
    }

    fn remove_inserted(
        &self,
        messages: &mut Vec<Value>,
        prefix_len: usize,
    ) -> Result<Vec<Removed>, RuleRefusal> {
        self.nonce.remove_inserted(messages, prefix_len)
    }

    fn forbidden_text(&self) -> Option<&str> {
        self.nonce.forbidden_text()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_system_head_is_skipped_and_the_nonce_removed() {
        let r = OpenCodeRules::new("pvisor-nonce");
        let msgs = vec![
            json!({"role": "system", "content": "You are opencode… Today's date: Tue Dec 01 2026"}),
            json!({"role": "user", "content": "\"task\""}),
        ];
        assert_eq!(r.generated_head(&msgs), 1);
        let mut tail = vec![
            json!({"role": "user", "content": "\"task\""}),
            json!({"role": "user", "content": "pvisor-nonce"}),
        ];
        let removed = r.remove_inserted(&mut tail, 1).unwrap();
        assert_eq!(removed[0].kind, "opencode:resume_prompt");
        assert_eq!(tail.len(), 1);
    }
}
