//! Shared pieces of the wire formats: SSE framing, chunking, token estimates, the reply to
//! render.

use super::script::Turn;
use bytes::Bytes;
use serde_json::Value;

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SseEvent {
    /// The `event:` line (Anthropic, Responses); `None` for Chat Completions.
    pub event: Option<String>,
    /// The `data:` payload (one line: JSON or `[DONE]`).
    pub data: String,
}

impl SseEvent {
    pub fn named(event: &str, data: &Value) -> Self {
        SseEvent {
            event: Some(event.to_string()),
            data: data.to_string(),
        }
    }
    pub fn data(data: impl Into<String>) -> Self {
        SseEvent {
            event: None,
            data: data.into(),
        }
    }
    pub fn to_bytes(&self) -> Bytes {
        let mut s = String::new();
        if let Some(e) = &self.event {
            s.push_str("event: ");
            s.push_str(e);
            s.push('\n');
        }
        s.push_str("data: ");
        s.push_str(&self.data);
        s.push_str("\n\n");
        Bytes::from(s)
    }
}

/// What to render: one turn, with its id tag and the numbers the envelopes need.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub turn: Turn,
    /// `t003` for a scripted turn, `side` for a side request.
    pub tag: String,
    /// The model name to report (the request's `model`).
    pub model: String,
    pub input_tokens: u64,
    /// Maximum characters per text/thinking/argument delta.
    pub chunk_chars: usize,
    /// Unix seconds, for the OpenAI `created` fields.
    pub created: u64,
}

impl Reply {
    /// The turn's text, when it has a non-empty one.
    pub fn text(&self) -> Option<&str> {
        self.turn.text.as_deref().filter(|t| !t.is_empty())
    }
    /// The turn's thinking, when it has a non-empty one.
    pub fn thinking(&self) -> Option<&str> {
        self.turn.thinking.as_deref().filter(|t| !t.is_empty())
    }
    /// Estimated output tokens: about 4 characters per token, at least 1.
    pub fn output_tokens(&self) -> u64 {
        let mut chars = 0usize;
        chars += self.text().map_or(0, |t| t.chars().count());
        chars += self.thinking().map_or(0, |t| t.chars().count());
        for c in &self.turn.tool_calls {
            chars += c.name.len() + c.input_text().chars().count();
        }
        (chars as u64).div_ceil(4).max(1)
    }
    /// Split a string into deltas of at most `chunk_chars` characters (never empty pieces; an
    /// empty string gives no piece).
    pub fn chunks(&self, s: &str) -> Vec<String> {
        chunks(s, self.chunk_chars)
    }
}

/// Split `s` into pieces of at most `n` characters (`n` 0 = one piece).
pub fn chunks(s: &str, n: usize) -> Vec<String> {
    if s.is_empty() {
        return Vec::new();
    }
    if n == 0 {
        return vec![s.to_string()];
    }
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

/// Estimated input tokens of a request body: about 4 bytes per token, at least 1.
pub fn estimate_tokens(raw: &[u8]) -> u64 {
    (raw.len() as u64).div_ceil(4).max(1)
}
