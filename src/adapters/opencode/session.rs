//! The one shape every OpenCode input becomes: an `opencode export` session (`{info,
//! messages: [{info, parts}]}`), each message and part with its ids, ordered as OpenCode
//! orders them (messages by `(time.created, id)`, parts by `id`).

use serde_json::{json, Map, Value};

/// Where the session was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputForm {
    /// `opencode export <id>` JSON.
    Export,
    /// `opencode.db` (SQLite, WAL folded in).
    Store,
    /// `opencode run --format=json` stdout events.
    Events,
}

/// One message with its parts.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The message info, with `id` and `sessionID`.
    pub info: Value,
    /// The parts, each with `id`, `sessionID` and `messageID`, ordered by id.
    pub parts: Vec<Value>,
    /// 1-based line of the message in the input (0 in the store).
    pub line: usize,
    /// 1-based line of each part (0 in the store).
    pub part_lines: Vec<usize>,
}

impl Message {
    pub fn id(&self) -> &str {
        self.info.get("id").and_then(Value::as_str).unwrap_or("")
    }
    pub fn role(&self) -> &str {
        self.info.get("role").and_then(Value::as_str).unwrap_or("")
    }
}

/// A whole session.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub form: InputForm,
    /// The session info (`id`, `directory`, `title`, `version`, …). For the event form only
    /// what the events tell (`id`), marked by `info_known == false`.
    pub info: Value,
    pub info_known: bool,
    pub messages: Vec<Message>,
}

impl Session {
    pub fn id(&self) -> &str {
        self.info.get("id").and_then(Value::as_str).unwrap_or("")
    }

    /// The OpenCode version that wrote the session, when the input records it.
    pub fn version(&self) -> Option<&str> {
        self.info.get("version").and_then(Value::as_str)
    }

    /// The session's directory (the original cwd), when recorded.
    pub fn directory(&self) -> Option<&str> {
        self.info
            .get("directory")
            .and_then(Value::as_str)
            .or_else(|| {
                self.messages.iter().find_map(|m| {
                    m.info
                        .get("path")
                        .and_then(|p| p.get("cwd"))
                        .and_then(Value::as_str)
                })
            })
    }

    /// The export JSON of this session (what `opencode import` reads).
    pub fn to_export(&self) -> Value {
        json!({
            "info": self.info,
            "messages": self.messages.iter().map(|m| json!({"info": m.info, "parts": m.parts})).collect::<Vec<_>>(),
        })
    }
}

/// `data` of a store row, completed with the ids the store keeps in columns (in the order
/// `opencode export` writes them: the data's own keys, then the ids).
pub fn with_ids(data: Value, ids: &[(&str, &str)]) -> Value {
    let mut m: Map<String, Value> = match data {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    for (k, v) in ids {
        m.insert((*k).to_string(), Value::String((*v).to_string()));
    }
    Value::Object(m)
}
