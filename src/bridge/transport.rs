//! Transport rules: exactly which temporary items an agent's resume machinery inserts into
//! its model requests, so that the bridge can remove those and nothing else.
//!
//! A rule works on the request's message list *after* the expected prefix position is known:
//! it may only touch the boundary message (`messages[prefix_len - 1]`) and the message right
//! after it (`messages[prefix_len]`). Anything else that differs from the expected prefix is a
//! validation failure, never something a rule may silently drop.

use serde_json::Value;

/// What an agent's resume inserts (one variant per resume mechanism; add Codex / OpenCode /
/// Pi rules here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportRule {
    /// The resume inserts nothing (pi SDK `continue()`, OpenHands `run()`).
    None,
    /// Claude Code 2.1.332, `--input-format stream-json` resume with
    /// `CLAUDE_CODE_RESUME_INTERRUPTED_TURN=1`: one text block `text` (default
    /// `Continue from where you left off.`, or `CLAUDE_CODE_RESUME_PROMPT`) appended to the
    /// boundary tool-result user message (Claude merges consecutive user turns; when the
    /// prefix ends with harness `system` turns after the tool results, still into the user
    /// message before them), or (not observed, accepted) a user message of its own right
    /// after the prefix.
    /// Claude keeps that record in its history, so it appears in every later request too.
    ClaudeResumeText { text: String },
    /// A separate user message whose only content is `text` right after the prefix (the
    /// nonce prompt of `-p`-style resumes: pi CLI, OpenCode, Codex `exec resume`).
    TrailingUserMessage { text: String },
    /// Codex CLI 0.149.0 `codex exec resume <id> <text>` (Responses `input` items): a user
    /// message whose only `input_text` is `text` right after the prefix, preceded by a
    /// developer `<skills_instructions>` message when the CODEX_HOME path differs from the
    /// original run's. Both stay in Codex's history, so every later request carries them at
    /// the same position.
    CodexResume { text: String },
}

/// The text a Codex skills developer item starts with.
pub const CODEX_SKILLS_PREFIX: &str = "<skills_instructions>";

/// Claude Code's default resume text.
pub const CLAUDE_DEFAULT_RESUME_TEXT: &str = "Continue from where you left off.";

/// One edit the rule applied, mirrored on the raw request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// Block `block` of message `message` was removed.
    Block { message: usize, block: usize },
    /// Message `message` was removed.
    Message { message: usize },
}

impl TransportRule {
    /// The journal name of what this rule removes.
    pub fn item_name(&self) -> &'static str {
        match self {
            TransportRule::None => "none",
            TransportRule::ClaudeResumeText { .. } => "claude:resume_text_block",
            TransportRule::TrailingUserMessage { .. } => "trailing_user_message",
            TransportRule::CodexResume { .. } => "codex:resume_prompt",
        }
    }

    /// The inserted text, if the rule has one.
    pub fn text(&self) -> Option<&str> {
        match self {
            TransportRule::None => None,
            TransportRule::ClaudeResumeText { text }
            | TransportRule::TrailingUserMessage { text }
            | TransportRule::CodexResume { text } => Some(text),
        }
    }

    /// Find the transport item in `messages` (canonical or raw Anthropic messages; only
    /// `role`, `content`, `type` and `text` are looked at). Returns the removal to apply, if
    /// the item is present where the rule says it may be.
    pub fn locate(&self, messages: &[Value], prefix_len: usize) -> Option<Removal> {
        match self {
            TransportRule::None => None,
            TransportRule::ClaudeResumeText { text } => {
                // Inside the boundary user message: its last block. When the prefix ends with
                // harness `system` turns (e.g. a "changed on disk" note), Claude still merges
                // the text into the user message before them.
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
                                    return Some(Removal::Block {
                                        message: j - 1,
                                        block: blocks.len() - 1,
                                    });
                                }
                            }
                        }
                    }
                }
                // A user message of its own after the prefix.
                messages
                    .get(prefix_len)
                    .filter(|m| is_sole_text_user(m, text))
                    .map(|_| Removal::Message {
                        message: prefix_len,
                    })
            }
            TransportRule::TrailingUserMessage { text } | TransportRule::CodexResume { text } => {
                messages
                    .get(prefix_len)
                    .filter(|m| is_sole_text_user(m, text))
                    .map(|_| Removal::Message {
                        message: prefix_len,
                    })
            }
        }
    }
}

fn role(m: &Value) -> Option<&str> {
    m.get("role").and_then(Value::as_str)
}

fn is_text_block(b: &Value, text: &str) -> bool {
    matches!(
        b.get("type").and_then(Value::as_str),
        Some("text" | "input_text")
    ) && b.get("text").and_then(Value::as_str) == Some(text)
}

/// Is `m` Codex's developer `<skills_instructions>` message (Responses item)?
pub fn is_codex_skills_item(m: &Value) -> bool {
    m.get("type").and_then(Value::as_str).unwrap_or("message") == "message"
        && role(m) == Some("developer")
        && m.get("content").and_then(Value::as_array).is_some_and(|a| {
            a.len() == 1
                && a[0]
                    .get("text")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.starts_with(CODEX_SKILLS_PREFIX))
        })
}

/// Is `m` Claude Code's date-change notice (a `system` turn with one text block, rendered
/// from a `date` attachment with `changed: true`)?
pub fn is_claude_date_change_notice(m: &Value) -> bool {
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

fn is_sole_text_user(m: &Value, text: &str) -> bool {
    if role(m) != Some("user") {
        return false;
    }
    match m.get("content") {
        Some(Value::String(s)) => s == text,
        Some(Value::Array(a)) => a.len() == 1 && is_text_block(&a[0], text),
        _ => false,
    }
}

/// Apply `removal` to a message list; when the removed block carried `cache_control`, the
/// breakpoint moves to the block before it (where the agent had it before the insertion).
pub fn apply_removal(messages: &mut Vec<Value>, removal: &Removal) {
    match *removal {
        Removal::Message { message } => {
            if message < messages.len() {
                messages.remove(message);
            }
        }
        Removal::Block { message, block } => {
            let Some(blocks) = messages
                .get_mut(message)
                .and_then(|m| m.get_mut("content"))
                .and_then(Value::as_array_mut)
            else {
                return;
            };
            if block >= blocks.len() {
                return;
            }
            let removed = blocks.remove(block);
            if let Some(cc) = removed.get("cache_control").cloned() {
                if block > 0 {
                    if let Some(prev) = blocks.get_mut(block - 1).and_then(Value::as_object_mut) {
                        prev.entry("cache_control").or_insert(cc);
                    }
                }
            }
        }
    }
}

/// Does `text` still occur as a text block (or a whole string content) anywhere in `messages`?
pub fn text_block_remains(messages: &[Value], text: &str) -> bool {
    messages.iter().any(|m| match m.get("content") {
        Some(Value::String(s)) => s == text,
        Some(Value::Array(a)) => a.iter().any(|b| is_text_block(b, text)),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule() -> TransportRule {
        TransportRule::ClaudeResumeText {
            text: CLAUDE_DEFAULT_RESUME_TEXT.into(),
        }
    }

    #[test]
    fn claude_block_inside_the_boundary_message() {
        let mut msgs = vec![
            json!({"role": "user", "content": "task"}),
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                {"type": "text", "text": CLAUDE_DEFAULT_RESUME_TEXT, "cache_control": {"type": "ephemeral"}}
            ]}),
        ];
        let r = rule().locate(&msgs, 3).unwrap();
        assert_eq!(
            r,
            Removal::Block {
                message: 2,
                block: 1
            }
        );
        apply_removal(&mut msgs, &r);
        assert_eq!(
            msgs[2]["content"],
            json!([{"type": "tool_result", "tool_use_id": "t1", "content": "ok", "cache_control": {"type": "ephemeral"}}])
        );
        assert!(!text_block_remains(&msgs, CLAUDE_DEFAULT_RESUME_TEXT));
        assert_eq!(rule().locate(&msgs, 3), None);
    }

    #[test]
    fn claude_block_before_trailing_system_turns() {
        let msgs = vec![
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}, {"type": "text", "text": "N"}]}),
            json!({"role": "system", "content": "note", "output_config": {}}),
        ];
        let r = TransportRule::ClaudeResumeText { text: "N".into() };
        assert_eq!(
            r.locate(&msgs, 2),
            Some(Removal::Block {
                message: 0,
                block: 1
            })
        );
    }

    #[test]
    fn claude_message_after_a_system_turn() {
        let msgs = vec![
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}),
            json!({"role": "system", "content": "note"}),
            json!({"role": "user", "content": [{"type": "text", "text": "NONCE-1"}]}),
        ];
        let r = TransportRule::ClaudeResumeText {
            text: "NONCE-1".into(),
        };
        assert_eq!(r.locate(&msgs, 2), Some(Removal::Message { message: 2 }));
        // Never outside the two allowed places.
        assert_eq!(r.locate(&msgs, 1), None);
    }
}
