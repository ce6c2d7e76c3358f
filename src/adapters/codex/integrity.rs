//! What a Codex 0.149 rollout says twice, checked against itself, so that a damaged rollout is
//! not replayed silently:
//!
//! - every line carries an `ordinal`, one more than the line before (Codex numbers them; the
//!   continued sessions pvisor cleans are numbered on where transport records were taken
//!   out): a missing, repeated or misplaced line breaks the sequence;
//! - every item Codex completes is also written as an `event_msg` `item_completed`: the user's
//!   prompt (`UserMessage`, the same text as a user message of its turn), the model's
//!   messages (`AgentMessage`, the same id and text as the assistant message), reasoning
//!   summaries (`Reasoning`, by id), and the command each `exec_command` call ran
//!   (`CommandExecution`, by call id: `command[2]` is the call's `cmd`).
//!
//! A file without ordinals or `item_completed` events (earlier Codex versions) is not checked
//! for what it does not write. What no record repeats and nothing hashes cannot be checked:
//! the base instructions (`session_meta`), the developer and environment-context messages,
//! item ids, statuses and encrypted reasoning, the text of an `apply_patch` input, and the
//! arguments of an `update_plan` call.

use crate::error::TrajectoryError;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// Facts gathered while the rollout is read; checked at its end.
#[derive(Default)]
pub struct Crosscheck {
    /// The last ordinal, and whether the file numbers its lines at all.
    last_ordinal: Option<u64>,
    numbered: Option<bool>,
    /// `(turn id, text)` of each `UserMessage`, with its line.
    user_events: Vec<(String, Digest, usize)>,
    /// `(turn id, text)` of each user message item.
    user_items: HashMap<(String, Digest), usize>,
    /// Texts by id: `AgentMessage` and `Reasoning` events, assistant messages and reasoning
    /// items (the last of an id).
    said_events: Vec<SaidEvent>,
    said_items: HashMap<Key, Digest>,
    /// `CommandExecution` commands by call id (with their line); `exec_command` calls' `cmd`
    /// by call id (with the call's line).
    command_events: Vec<(IdAt, Digest, u32)>,
    command_calls: HashMap<Key, (Digest, u32)>,
    /// The ids the events name, for the error messages.
    ids: Ids,
}

/// What the cross-check keeps per item and event grows with the file: a rollout of a million
/// batches holds millions. So an id is kept as a 16-byte digest where it is only looked up
/// ([`Key`]), and its text once, in one buffer, where an error may have to name it ([`Ids`]);
/// lines as `u32`.
type Key = [u8; 16];

fn key(id: &str) -> Key {
    let mut k = [0; 16];
    k.copy_from_slice(&blake3::hash(id.as_bytes()).as_bytes()[..16]);
    k
}

/// A line number as kept (a rollout of over 4 billion lines is named at the last one).
fn line32(line: usize) -> u32 {
    u32::try_from(line).unwrap_or(u32::MAX)
}

/// The text of the ids kept, one after another.
#[derive(Default)]
struct Ids(String);

/// An id's place in [`Ids`].
#[derive(Clone, Copy)]
struct IdAt {
    start: u64,
    len: u32,
}

impl Ids {
    fn put(&mut self, id: &str) -> IdAt {
        let start = self.0.len() as u64;
        self.0.push_str(id);
        IdAt {
            start,
            len: u32::try_from(id.len()).unwrap_or(u32::MAX),
        }
    }
    fn get(&self, at: IdAt) -> &str {
        let start = usize::try_from(at.start).unwrap_or(usize::MAX);
        self.0
            .get(start..start.saturating_add(at.len as usize))
            .unwrap_or("")
    }
}

/// An `AgentMessage` or `Reasoning` event.
struct SaidEvent {
    id: IdAt,
    text: Digest,
    line: u32,
    reasoning: bool,
}

fn err(path: &Path, line: usize, field: &str, message: String) -> TrajectoryError {
    TrajectoryError::new(path, line, field, message)
}

/// A digest of model-visible text: what the cross-check keeps per item instead of the text,
/// so its memory does not grow with what the model said (BLAKE3, its first 16 bytes).
type Digest = [u8; 16];

fn digest16(h: blake3::Hash) -> Digest {
    let mut d = [0; 16];
    d.copy_from_slice(&h.as_bytes()[..16]);
    d
}

/// Digests a list of parts, each a `type` and a `text` (either may be missing); `None` for a
/// missing list. Lengths are hashed with the bytes, so no two lists share a digest by their
/// separators.
#[derive(Default)]
struct PartsDigest(blake3::Hasher);

impl PartsDigest {
    fn field(&mut self, v: Option<&str>) {
        match v {
            None => {
                self.0.update(&[0]);
            }
            Some(s) => {
                self.0.update(&[1]);
                self.0.update(&(s.len() as u64).to_le_bytes());
                self.0.update(s.as_bytes());
            }
        }
    }
    fn part(&mut self, ty: Option<&str>, text: Option<&str>) {
        self.field(ty);
        self.field(text);
    }
    /// The digest of one text (a command).
    fn text(s: &str) -> Digest {
        digest16(blake3::hash(s.as_bytes()))
    }
    fn missing() -> Digest {
        digest16(blake3::hash(b"no list"))
    }
    fn finish(self) -> Digest {
        digest16(self.0.finalize())
    }
}

/// The parts, `(type, text)`, of a content or summary list.
pub type Parts<'a> = [(Option<&'a str>, Option<&'a str>)];

/// A model-visible item as the cross-check reads it, from the whole line or its head.
pub enum Said<'a> {
    Message {
        role: Option<&'a str>,
        id: Option<&'a str>,
        /// `internal_chat_message_metadata_passthrough.turn_id`.
        turn: Option<&'a str>,
        content: Option<&'a Parts<'a>>,
    },
    Reasoning {
        id: Option<&'a str>,
        summary: Option<&'a Parts<'a>>,
    },
}

/// An `item_completed` event as the cross-check reads it, from the whole line or its head.
struct Completed<'a> {
    turn: &'a str,
    id: &'a str,
    kind: Option<&'a str>,
    /// The content's parts, when it is a list.
    content: Option<Vec<(Option<&'a str>, Option<&'a str>)>>,
    summary_text: Option<Vec<Option<&'a str>>>,
    /// The command's last word, when it is a list of three (`bash -lc <cmd>`).
    command: Option<&'a str>,
}

/// The parts, `(type, text)`, of a response item's content list.
fn parts_of(content: Option<&Value>) -> Option<Vec<(Option<&str>, Option<&str>)>> {
    content.and_then(Value::as_array).map(|a| {
        a.iter()
            .map(|p| (str_of(p.get("type")), str_of(p.get("text"))))
            .collect()
    })
}

/// The digest of a content list's parts, with the event's part type `from` read as the
/// response item's `to` (`Text` → `output_text`).
fn parts(content: Option<&[(Option<&str>, Option<&str>)]>, rename: Option<(&str, &str)>) -> Digest {
    let Some(a) = content else {
        return PartsDigest::missing();
    };
    let mut d = PartsDigest::default();
    for &(ty, text) in a {
        let ty = ty.map(|ty| match rename {
            Some((from, to)) if ty == from => to,
            _ => ty,
        });
        d.part(ty, text);
    }
    d.finish()
}

/// The shape every model-visible response item must have (Codex reads them into typed
/// items): string `role` and content parts with a string `type` (and `text`, when there is
/// one) for messages; summary parts alike for reasoning.
fn shape(item: &Value) -> Result<(), (&'static str, String)> {
    let ty = item.get("type").and_then(Value::as_str).unwrap_or("");
    // The keys Codex 0.149.0 writes for each model-visible item type (a key it does not
    // write is a changed name: Codex would read the item without it).
    const PRIVATE: &str = "internal_chat_message_metadata_passthrough";
    let known: &[&str] = match ty {
        "message" => &[
            "type", "id", "role", "content", "end_turn", "phase", PRIVATE,
        ],
        "reasoning" => &[
            "type",
            "id",
            "summary",
            "content",
            "encrypted_content",
            PRIVATE,
        ],
        "function_call" => &[
            "type",
            "id",
            "name",
            "namespace",
            "arguments",
            "call_id",
            PRIVATE,
        ],
        "custom_tool_call" => &["type", "id", "status", "call_id", "name", "input", PRIVATE],
        "function_call_output" | "custom_tool_call_output" => {
            &["type", "id", "call_id", "output", PRIVATE]
        }
        _ => &[],
    };
    if !known.is_empty() {
        if let Some(k) = item
            .as_object()
            .and_then(|o| o.keys().find(|k| !known.contains(&k.as_str())))
        {
            return Err((
                "payload",
                format!("a `{ty}` item has a key Codex does not write: `{k}`"),
            ));
        }
    }
    for (key, field) in [
        ("id", "payload.id"),
        ("status", "payload.status"),
        ("encrypted_content", "payload.encrypted_content"),
    ] {
        if item
            .get(key)
            .is_some_and(|v| !v.is_string() && !v.is_null())
        {
            return Err((field, format!("`{key}` must be a string")));
        }
    }
    let list = match ty {
        "message" => {
            if !item.get("role").is_some_and(Value::is_string) {
                return Err(("payload.role", "a message needs a string `role`".into()));
            }
            ("payload.content", item.get("content"))
        }
        "reasoning" => {
            // The raw reasoning, when the provider returns it: `null` or parts like the
            // summary's.
            match item.get("content") {
                None | Some(Value::Null) => {}
                Some(Value::Array(a)) if a.iter().all(|p| {
                    p.get("type").is_some_and(Value::is_string)
                        && p.get("text").is_none_or(Value::is_string)
                }) => {}
                Some(_) => {
                    return Err((
                        "payload.content",
                        "a `reasoning` item's content is null or an array of parts with a string `type` and `text`".into(),
                    ))
                }
            }
            ("payload.summary", item.get("summary"))
        }
        _ => return Ok(()),
    };
    let (field, Some(Value::Array(a))) = list else {
        return Err((
            list.0,
            format!("a `{ty}` item needs an array `{}`", &list.0[8..]),
        ));
    };
    for p in a {
        let ok = p.get("type").is_some_and(Value::is_string)
            && p.get("text").is_none_or(Value::is_string);
        if !ok {
            return Err((
                field,
                format!("a part of a `{ty}` item needs a string `type` and a string `text`"),
            ));
        }
    }
    Ok(())
}

/// A string value, if `v` is one.
fn str_of(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
}

impl Crosscheck {
    /// The `ordinal` of line `line`: `None` when it has none, `Some(None)` when it is not a
    /// whole number.
    pub fn ordinal(
        &mut self,
        path: &Path,
        line: usize,
        ordinal: Option<Option<u64>>,
    ) -> Result<(), TrajectoryError> {
        let numbered = *self.numbered.get_or_insert(ordinal.is_some());
        if !numbered {
            return Ok(());
        }
        let Some(Some(n)) = ordinal else {
            return Err(err(
                path,
                line,
                "ordinal",
                "the rollout numbers its lines and this one has no ordinal number".into(),
            ));
        };
        if let Some(last) = self.last_ordinal {
            if n != last + 1 {
                return Err(err(
                    path,
                    line,
                    "ordinal",
                    format!(
                        "ordinal {n} after {last}: a line is missing, repeated or out of order"
                    ),
                ));
            }
        }
        self.last_ordinal = Some(n);
        Ok(())
    }

    /// A line of type `event_msg` whose payload is `item_completed`, read whole.
    pub fn event(&mut self, line: usize, payload: &Value) {
        let item = &payload["item"];
        let content = parts_of(item.get("content"));
        self.completed(
            line,
            Completed {
                turn: str_of(payload.get("turn_id")).unwrap_or(""),
                id: str_of(item.get("id")).unwrap_or(""),
                kind: str_of(item.get("type")),
                content,
                summary_text: item
                    .get("summary_text")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().map(Value::as_str).collect()),
                command: item
                    .get("command")
                    .and_then(Value::as_array)
                    .filter(|a| a.len() == 3)
                    .and_then(|a| a[2].as_str()),
            },
        )
    }

    /// The same line, from its head ([`super::scan::Head`], which declines any field of
    /// another type than these: such a line is read whole).
    pub fn event_head(&mut self, line: usize, payload: &super::scan::PayloadHead) {
        let item = payload.item.as_ref();
        let content = item.and_then(|i| i.content.as_ref()).map(|a| {
            a.iter()
                .map(|p| (p.ty.as_deref(), p.text.as_deref()))
                .collect()
        });
        self.completed(
            line,
            Completed {
                turn: payload.turn_id.as_deref().unwrap_or(""),
                id: item.and_then(|i| i.id.as_deref()).unwrap_or(""),
                kind: item.and_then(|i| i.ty.as_deref()),
                content,
                summary_text: item
                    .and_then(|i| i.summary_text.as_ref())
                    .map(|a| a.iter().map(|t| t.as_deref()).collect()),
                command: item
                    .and_then(|i| i.command.as_ref())
                    .filter(|a| a.len() == 3)
                    .and_then(|a| a[2].as_deref()),
            },
        )
    }

    fn completed(&mut self, line: usize, c: Completed) {
        let id = c.id;
        match c.kind {
            Some("UserMessage") => self.user_events.push((
                c.turn.to_string(),
                parts(c.content.as_deref(), Some(("text", "input_text"))),
                line,
            )),
            Some("AgentMessage") => {
                let text = parts(c.content.as_deref(), Some(("Text", "output_text")));
                let id = self.ids.put(id);
                self.said_events.push(SaidEvent {
                    id,
                    text,
                    line: line32(line),
                    reasoning: false,
                })
            }
            Some("Reasoning") => {
                let summary = match &c.summary_text {
                    Some(a) => {
                        let mut d = PartsDigest::default();
                        for t in a {
                            d.part(Some("summary_text"), *t);
                        }
                        d.finish()
                    }
                    None => PartsDigest::missing(),
                };
                let id = self.ids.put(id);
                self.said_events.push(SaidEvent {
                    id,
                    text: summary,
                    line: line32(line),
                    reasoning: true,
                })
            }
            Some("CommandExecution") => {
                if let Some(cmd) = c.command {
                    let id = self.ids.put(id);
                    self.command_events
                        .push((id, PartsDigest::text(cmd), line32(line)))
                }
            }
            _ => {}
        }
    }

    /// What a message or reasoning item said (its shape already checked), from the whole
    /// line ([`Self::item`]) or from its typed head ([`super::scan::ModelItemLine`]).
    pub fn said(&mut self, line: usize, said: Said) {
        match said {
            Said::Message {
                role: Some("user"),
                turn,
                content,
                ..
            } => {
                self.user_items
                    .entry((turn.unwrap_or("").to_string(), parts(content, None)))
                    .or_insert(line);
            }
            Said::Message {
                role: Some("assistant"),
                id: Some(id),
                content,
                ..
            } => {
                self.said_items.insert(key(id), parts(content, None));
            }
            Said::Reasoning {
                id: Some(id),
                summary,
            } => {
                self.said_items.insert(key(id), parts(summary, None));
            }
            _ => {}
        }
    }

    /// A response item.
    pub fn item(&mut self, path: &Path, line: usize, item: &Value) -> Result<(), TrajectoryError> {
        shape(item).map_err(|(field, m)| err(path, line, field, m))?;
        let ty = item.get("type").and_then(Value::as_str).unwrap_or("");
        let id = item.get("id").and_then(Value::as_str);
        match (ty, item.get("role").and_then(Value::as_str)) {
            ("message", role) => self.said(
                line,
                Said::Message {
                    role,
                    id,
                    turn: str_of(
                        item.pointer("/internal_chat_message_metadata_passthrough/turn_id"),
                    ),
                    content: parts_of(item.get("content")).as_deref(),
                },
            ),
            ("reasoning", _) => self.said(
                line,
                Said::Reasoning {
                    id,
                    summary: parts_of(item.get("summary")).as_deref(),
                },
            ),
            ("function_call", _)
                if item.get("name").and_then(Value::as_str) == Some("exec_command") =>
            {
                let cmd = item
                    .get("arguments")
                    .and_then(Value::as_str)
                    .and_then(|a| serde_json::from_str::<Value>(a).ok())
                    .and_then(|a| a.get("cmd").and_then(Value::as_str).map(PartsDigest::text));
                if let (Some(call), Some(cmd)) = (item.get("call_id").and_then(Value::as_str), cmd)
                {
                    self.command_calls.insert(key(call), (cmd, line32(line)));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Check what was gathered.
    pub fn finish(&self, path: &Path) -> Result<(), TrajectoryError> {
        for (turn, text, line) in &self.user_events {
            if !self.user_items.contains_key(&(turn.clone(), *text)) {
                return Err(err(
                    path,
                    *line,
                    "payload.item.content",
                    "the user message Codex recorded as completed is not the user message of its turn: one of the two was changed".into(),
                ));
            }
        }
        for e in &self.said_events {
            let id = self.ids.get(e.id);
            let kind = if e.reasoning {
                "Reasoning"
            } else {
                "AgentMessage"
            };
            let line = e.line as usize;
            match self.said_items.get(&key(id)) {
                Some(t) if *t == e.text => {}
                Some(_) => {
                    return Err(err(
                        path,
                        line,
                        "payload.item",
                        format!("the {kind} `{id}` differs from the response item of that id: one of the two was changed"),
                    ))
                }
                None => {
                    return Err(err(
                        path,
                        line,
                        "payload.item.id",
                        format!("the {kind} `{id}` has no response item of that id"),
                    ))
                }
            }
        }
        for (at, cmd, line) in &self.command_events {
            let id = self.ids.get(*at);
            if let Some((want, call_line)) = self.command_calls.get(&key(id)) {
                if want != cmd {
                    return Err(err(
                        path,
                        *call_line as usize,
                        "payload.arguments",
                        format!("the `cmd` of call `{id}` differs from the command Codex recorded running (line {line})"),
                    ));
                }
            }
        }
        Ok(())
    }
}
