//! The one shape both Pi inputs become: the session header and the entries on the path from
//! the root to the leaf (what Pi's `SessionManager` builds its context from), each with its
//! 1-based line and, for a session file, its exact text.

use serde_json::Value;

/// Where the session was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputForm {
    /// A v3 session file (`~/.pi/agent/sessions/--<cwd>--/<ts>_<id>.jsonl`).
    SessionFile,
    /// `pi --mode json` / `--mode rpc` stdout events.
    Events,
}

/// One session entry (`message`, `model_change`, `thinking_level_change`, …).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub value: Value,
    /// 1-based line in the input.
    pub line: usize,
    /// The entry's line as written, for a session file (kept byte for byte on rebuild).
    pub raw: Option<String>,
}

impl Entry {
    pub fn kind(&self) -> &str {
        self.value.get("type").and_then(Value::as_str).unwrap_or("")
    }
    pub fn id(&self) -> &str {
        self.value.get("id").and_then(Value::as_str).unwrap_or("")
    }
    /// The `message` of a message entry.
    pub fn message(&self) -> Option<&Value> {
        (self.kind() == "message")
            .then(|| self.value.get("message"))
            .flatten()
    }
    pub fn role(&self) -> &str {
        self.message()
            .and_then(|m| m.get("role"))
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// A whole session.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub form: InputForm,
    /// `{"type":"session","version":3,"id","timestamp","cwd"}`.
    pub header: Value,
    /// The header line as written (session file and event stream alike).
    pub header_raw: Option<String>,
    /// The entries from the root to the leaf, in order.
    pub entries: Vec<Entry>,
}

impl Session {
    pub fn id(&self) -> &str {
        self.header.get("id").and_then(Value::as_str).unwrap_or("")
    }
    pub fn cwd(&self) -> Option<&str> {
        self.header.get("cwd").and_then(Value::as_str)
    }
    pub fn timestamp(&self) -> &str {
        self.header
            .get("timestamp")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
    /// `(provider, modelId)` in effect at the leaf: the last `model_change`, else the last
    /// assistant message's.
    pub fn model(&self) -> Option<(String, String)> {
        let from_change = self.entries.iter().rev().find_map(|e| {
            (e.kind() == "model_change").then(|| {
                Some((
                    e.value.get("provider")?.as_str()?.to_string(),
                    e.value.get("modelId")?.as_str()?.to_string(),
                ))
            })?
        });
        from_change.or_else(|| {
            self.entries.iter().rev().find_map(|e| {
                let m = e.message()?;
                (m.get("role")?.as_str()? == "assistant").then_some(())?;
                Some((
                    m.get("provider")?.as_str()?.to_string(),
                    m.get("model")?.as_str()?.to_string(),
                ))
            })
        })
    }
    /// The thinking level in effect at the leaf, when recorded.
    pub fn thinking_level(&self) -> Option<&str> {
        self.entries.iter().rev().find_map(|e| {
            (e.kind() == "thinking_level_change")
                .then(|| e.value.get("thinkingLevel").and_then(Value::as_str))
                .flatten()
        })
    }
}

/// The tool calls of an assistant message: `(id, tool)` of each `toolCall` block, in order.
pub fn calls_of(message: &Value) -> Vec<(String, String)> {
    let text = |b: &Value, k: &str| b.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"))
        .map(|b| (text(b, "id"), text(b, "name")))
        .collect()
}
