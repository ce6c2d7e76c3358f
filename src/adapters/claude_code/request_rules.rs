//! What Claude Code's resume inserts into its model requests, for the bridge
//! (`crate::kit::RequestRules`).
//!
//! * The resume text (`--input-format stream-json` with
//!   `CLAUDE_CODE_RESUME_INTERRUPTED_TURN=1`): one text block — Claude's `Continue from
//!   where you left off.` or `CLAUDE_CODE_RESUME_PROMPT` (a per-run nonce) — appended to the
//!   boundary tool-result user message (Claude merges consecutive user turns; when the
//!   prefix ends with harness `system` turns after the tool results, still into the user
//!   message before them), or (not observed, accepted) a user message of its own right after
//!   the prefix. Claude keeps that record, so it appears in every later request too:
//!   `claude:resume_text_block`.
//! * Resumed on another day than the session's last turn, Claude adds a `system` notice "The
//!   date has changed. Today's date is now …" right after the boundary and keeps it there:
//!   removed, with its cache breakpoint moved back to the boundary message's last block:
//!   `claude:date_change_notice`.
//! * A message-level `output_config` (Claude puts the request's effort on its context system
//!   turn) is request configuration, not conversation (sessions before 2.1.332 do not record
//!   it): left out of the comparison and checked against the request's own `output_config`.

use serde_json::Value;

use crate::kit::rules::{
    is_sole_text_user, is_text_block, remove_block, role, text_block_remains, Removed,
    RequestRules, RuleRefusal,
};
use crate::protocol::Protocol;

/// Claude Code's default resume text.
pub const DEFAULT_RESUME_TEXT: &str = "Continue from where you left off.";

pub const RESUME_TEXT_KIND: &str = "claude:resume_text_block";
pub const DATE_NOTICE_KIND: &str = "claude:date_change_notice";

#[derive(Debug, Clone)]
pub struct ClaudeRequestRules {
    /// The resume text Claude was given (a nonce, or the default text).
    pub resume_text: String,
}

impl ClaudeRequestRules {
    pub fn new(resume_text: &str) -> Self {
        ClaudeRequestRules {
            resume_text: resume_text.to_string(),
        }
    }

    /// Where the resume text is: `(message, Some(block))` inside the boundary user message,
    /// `(message, None)` as a message of its own right after the prefix.
    fn locate(&self, messages: &[Value], prefix_len: usize) -> Option<(usize, Option<usize>)> {
        let text = self.resume_text.as_str();
        let mut j = prefix_len;
        while j > 0 && messages.get(j - 1).and_then(role) == Some("system") {
            j -= 1;
        }
        if j >= 1 {
            if let Some(m) = messages.get(j - 1) {
                if role(m) == Some("user") {
                    if let Some(blocks) = m.get("content").and_then(Value::as_array) {
                        if blocks.len() >= 2
                            && blocks.last().is_some_and(|b| is_text_block(b, text))
                        {
                            return Some((j - 1, Some(blocks.len() - 1)));
                        }
                    }
                }
            }
        }
        messages
            .get(prefix_len)
            .filter(|m| is_sole_text_user(m, text))
            .map(|_| (prefix_len, None))
    }
}

/// Is `m` Claude Code's date-change notice (a `system` turn with one text block, rendered
/// from a `date` attachment with `changed: true`)?
pub fn is_date_change_notice(m: &Value) -> bool {
    let notice = |t: &str| {
        t.starts_with("The date has changed. Today's date is now ")
            || t.starts_with("The UTC date is now ")
    };
    role(m) == Some("system")
        && match m.get("content") {
            // the last message carries the cache breakpoint, so it is a block list
            Some(Value::Array(a)) => {
                a.len() == 1 && a[0].get("text").and_then(Value::as_str).is_some_and(notice)
            }
            // earlier in the list it is a plain string
            Some(Value::String(t)) => notice(t),
            _ => false,
        }
}

impl RequestRules for ClaudeRequestRules {
    fn remove_inserted(
        &self,
        msgs: &mut Vec<Value>,
        plen: usize,
    ) -> Result<Vec<Removed>, RuleRefusal> {
        let mut removed = Vec::new();
        match self.locate(msgs, plen) {
            Some((m, Some(b))) => {
                if let Some(item) = remove_block(msgs, m, b) {
                    removed.push(Removed {
                        kind: RESUME_TEXT_KIND.into(),
                        item,
                    });
                }
            }
            Some((m, None)) => removed.push(Removed {
                kind: RESUME_TEXT_KIND.into(),
                item: msgs.remove(m),
            }),
            None => {}
        }
        if msgs.get(plen).is_some_and(is_date_change_notice) {
            let m = msgs.remove(plen);
            let cc = m
                .pointer("/content")
                .and_then(Value::as_array)
                .and_then(|a| a.last())
                .and_then(|b| b.get("cache_control"))
                .cloned();
            if let (Some(cc), Some(prev)) = (cc, plen.checked_sub(1).and_then(|i| msgs.get_mut(i)))
            {
                if let Some(last) = prev
                    .get_mut("content")
                    .and_then(Value::as_array_mut)
                    .and_then(|a| a.last_mut())
                    .and_then(Value::as_object_mut)
                {
                    last.entry("cache_control").or_insert(cc);
                }
            }
            removed.push(Removed {
                kind: DATE_NOTICE_KIND.into(),
                item: m,
            });
        }
        if text_block_remains(msgs, &self.resume_text) {
            return Err(RuleRefusal::new(format!(
                "the transport item `{RESUME_TEXT_KIND}` appears outside its place"
            )));
        }
        Ok(removed)
    }

    fn forbidden_text(&self) -> Option<&str> {
        // Claude's own default text may occur in a conversation; a nonce never does.
        (self.resume_text != DEFAULT_RESUME_TEXT).then_some(self.resume_text.as_str())
    }

    fn canonical(&self, protocol: Protocol, item: &Value) -> Value {
        let mut v = protocol.canonical_message(item);
        if let Some(o) = v.as_object_mut() {
            o.remove("output_config");
        }
        v
    }

    fn check_request(&self, body: &Value, messages: &[Value]) -> Result<(), RuleRefusal> {
        let top = body.get("output_config");
        match messages
            .iter()
            .position(|m| m.get("output_config").is_some_and(|c| Some(c) != top))
        {
            Some(i) => Err(RuleRefusal::new(format!(
                "message {i} has an `output_config` other than the request's"
            ))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(text: &str) -> ClaudeRequestRules {
        ClaudeRequestRules::new(text)
    }

    #[test]
    fn resume_block_inside_the_boundary_message() {
        let mut msgs = vec![
            json!({"role": "user", "content": "task"}),
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                {"type": "text", "text": DEFAULT_RESUME_TEXT, "cache_control": {"type": "ephemeral"}}
            ]}),
        ];
        let r = rules(DEFAULT_RESUME_TEXT)
            .remove_inserted(&mut msgs, 3)
            .unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].kind, RESUME_TEXT_KIND);
        assert_eq!(
            msgs[2]["content"],
            json!([{"type": "tool_result", "tool_use_id": "t1", "content": "ok", "cache_control": {"type": "ephemeral"}}])
        );
        assert!(rules(DEFAULT_RESUME_TEXT)
            .remove_inserted(&mut msgs, 3)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn resume_block_before_trailing_system_turns() {
        let mut msgs = vec![
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}, {"type": "text", "text": "N"}]}),
            json!({"role": "system", "content": "note", "output_config": {}}),
        ];
        assert_eq!(rules("N").remove_inserted(&mut msgs, 2).unwrap().len(), 1);
        assert_eq!(msgs[0]["content"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn resume_message_after_a_system_turn_and_never_elsewhere() {
        let msgs = vec![
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}),
            json!({"role": "system", "content": "note"}),
            json!({"role": "user", "content": [{"type": "text", "text": "NONCE-1"}]}),
        ];
        let mut m = msgs.clone();
        assert_eq!(
            rules("NONCE-1").remove_inserted(&mut m, 2).unwrap().len(),
            1
        );
        assert_eq!(m.len(), 2);
        // Not in one of its two places: it stays, and is refused.
        let mut m = msgs.clone();
        assert!(rules("NONCE-1").remove_inserted(&mut m, 1).is_err());
    }

    #[test]
    fn date_notice_removed_with_its_breakpoint_moved_back() {
        let mut msgs = vec![
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}),
            json!({"role": "system", "content": [{"type": "text", "text": "The date has changed. Today's date is now 2026-12-04.", "cache_control": {"type": "ephemeral"}}]}),
        ];
        let r = rules("NONCE").remove_inserted(&mut msgs, 1).unwrap();
        assert_eq!(r[0].kind, DATE_NOTICE_KIND);
        assert_eq!(msgs.len(), 1);
        assert_eq!(
            msgs[0]["content"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
    }

    #[test]
    fn message_output_config_is_request_configuration() {
        let r = rules("N");
        let m = json!({"role": "system", "content": "env", "output_config": {"effort": "medium"}});
        assert_eq!(
            r.canonical(Protocol::Anthropic, &m),
            json!({"role": "system", "content": [{"type": "text", "text": "env"}]})
        );
        let body = json!({"output_config": {"effort": "medium"}});
        assert!(r.check_request(&body, std::slice::from_ref(&m)).is_ok());
        assert!(r.check_request(&json!({}), &[m]).is_err());
    }
}
