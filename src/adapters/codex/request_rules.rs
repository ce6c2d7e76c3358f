//! What Codex CLI 0.149.0's `codex exec resume <id> <text>` inserts into its model requests
//! (Responses `input` items), for the bridge (`crate::kit::RequestRules`).
//!
//! * A user message whose only `input_text` is the resume prompt (a per-run nonce) right
//!   after the prefix: `codex:resume_prompt`.
//! * Before it, a developer `<skills_instructions>` message when the CODEX_HOME path differs
//!   from the original run's: `codex:skills_instructions` (removed only when the prompt
//!   follows it).
//! * Both stay in Codex's history, so every later request carries them at the same place.
//! * A re-sent `<environment_context>` after the boundary (cwd, date, timezone or shell
//!   differ from the original run) cannot be removed: the request would not end at O′N, so
//!   it is refused with that reason.
//! * Rollout-only keys (`internal_chat_message_metadata_passthrough`) are never compared.

use serde_json::Value;

use crate::kit::rules::{is_sole_text_user, role, Removed, RequestRules, RuleRefusal};
use crate::protocol::Protocol;

/// The text a Codex skills developer item starts with.
pub const SKILLS_PREFIX: &str = "<skills_instructions>";
/// A key Codex writes into rollout items and never sends (one definition: rebuild's).
pub use super::rebuild::PRIVATE_KEY as ROLLOUT_ONLY_KEY;

#[derive(Debug, Clone)]
pub struct CodexRequestRules {
    /// The resume prompt (a nonce).
    pub prompt: String,
    /// The session's base instructions (`session_meta.base_instructions.text`): in code mode
    /// Codex sends them as the developer message after its `additional_tools` item.
    pub instructions: Option<String>,
}

/// Is `m` Codex's developer `<skills_instructions>` message?
pub fn is_skills_item(m: &Value) -> bool {
    m.get("type").and_then(Value::as_str).unwrap_or("message") == "message"
        && role(m) == Some("developer")
        && m.get("content").and_then(Value::as_array).is_some_and(|a| {
            a.len() == 1
                && a[0]
                    .get("text")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.starts_with(SKILLS_PREFIX))
        })
}

fn is_environment_context(m: &Value) -> bool {
    role(m) == Some("user")
        && m.pointer("/content/0/text")
            .and_then(Value::as_str)
            .is_some_and(|t| t.starts_with("<environment_context>"))
}

impl RequestRules for CodexRequestRules {
    /// Code mode (responses-lite) sends its tools as leading `additional_tools` items and
    /// then the base instructions as a developer message; Codex renders both for every
    /// request from its own configuration (they are not in the rollout's items), like the
    /// `tools` and `instructions` fields of a classic request.
    fn generated_head(&self, msgs: &[Value]) -> usize {
        let tools = msgs
            .iter()
            .take_while(|m| m.get("type").and_then(Value::as_str) == Some("additional_tools"))
            .count();
        if tools == 0 {
            return 0;
        }
        let instructions = msgs.get(tools).is_some_and(|m| {
            role(m) == Some("developer")
                && m.get("id").is_none()
                && m.pointer("/content/0/text").and_then(Value::as_str)
                    == self.instructions.as_deref()
                && m["content"].as_array().map(Vec::len) == Some(1)
        });
        tools + usize::from(instructions)
    }

    fn remove_inserted(
        &self,
        msgs: &mut Vec<Value>,
        plen: usize,
    ) -> Result<Vec<Removed>, RuleRefusal> {
        let mut removed = Vec::new();
        if msgs.get(plen).is_some_and(is_skills_item)
            && msgs
                .get(plen + 1)
                .is_some_and(|m| is_sole_text_user(m, &self.prompt))
        {
            removed.push(Removed {
                kind: "codex:skills_instructions".into(),
                item: msgs.remove(plen),
            });
        }
        if let Some(m) = msgs.get(plen).filter(|m| is_environment_context(m)) {
            return Err(RuleRefusal {
                reason: "Codex re-sent its <environment_context> after the boundary (cwd, date, timezone or shell differ from the original run): the request would not end at O′N".into(),
                difference: Some(format!(
                    "a message after O′N: {}",
                    crate::bridge::difference::describe_message(m)
                )),
            });
        }
        if msgs
            .get(plen)
            .is_some_and(|m| is_sole_text_user(m, &self.prompt))
        {
            removed.push(Removed {
                kind: "codex:resume_prompt".into(),
                item: msgs.remove(plen),
            });
        }
        Ok(removed)
    }

    fn forbidden_text(&self) -> Option<&str> {
        Some(&self.prompt)
    }

    fn canonical(&self, protocol: Protocol, item: &Value) -> Value {
        let mut v = protocol.canonical_message(item);
        if let Some(o) = v.as_object_mut() {
            o.remove(ROLLOUT_ONLY_KEY);
            // A missing optional field and a `null` one are the same item.
            o.retain(|_, x| !x.is_null());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn skills_item_only_before_the_prompt() {
        let r = CodexRequestRules {
            prompt: "NONCE".into(),
            instructions: None,
        };
        let skills = json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<skills_instructions>\n…"}]});
        let prompt = json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "NONCE"}]});
        let mut m = vec![
            json!({"type": "function_call_output"}),
            skills.clone(),
            prompt,
        ];
        let removed = r.remove_inserted(&mut m, 1).unwrap();
        assert_eq!(
            removed.iter().map(|x| x.kind.as_str()).collect::<Vec<_>>(),
            ["codex:skills_instructions", "codex:resume_prompt"]
        );
        assert_eq!(m.len(), 1);
        let mut m = vec![json!({"type": "function_call_output"}), skills];
        assert!(r.remove_inserted(&mut m, 1).unwrap().is_empty());
        let env = json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>…"}]});
        assert!(r.remove_inserted(&mut vec![json!({}), env], 1).is_err());
    }

    #[test]
    fn the_code_mode_head_is_the_tools_then_the_base_instructions() {
        let r = CodexRequestRules {
            prompt: "NONCE".into(),
            instructions: Some("You are Codex".into()),
        };
        let tools = json!({"type": "additional_tools", "role": "developer", "tools": []});
        let base = json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex"}]});
        let other = json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are someone else"}]});
        let user = json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]});
        assert_eq!(
            r.generated_head(&[tools.clone(), base.clone(), user.clone()]),
            2
        );
        assert_eq!(r.generated_head(&[tools.clone(), other, user.clone()]), 1);
        assert_eq!(r.generated_head(&[base, user]), 0);
    }
}
