//! Codex CLI rollout JSONL → [`ParsedRollout`] → [`Plan`].
//!
//! Three file eras are read (see `docs/agents/codex.md`):
//! 1. bare (≤ early Sept 2025): line 1 is the session meta object `{id, timestamp,
//!    instructions, git}`, then bare response items (`{"type":"message",…}`) and
//!    `{"record_type":"state"}` markers;
//! 2. wrapped: every line is `{timestamp, type, payload}` with `type` one of `session_meta`,
//!    `turn_context`, `response_item`, `event_msg`, `compacted`;
//! 3. 2026 additions (`world_state`, `inter_agent_communication…`, …): kept verbatim, never
//!    model-visible.
//!
//! Only `response_item`s are model-visible; `event_msg` lines are UI mirrors. The native
//! session id comes from `session_meta` (or the bare-era meta line) only.
//!
//! A **model reply** is a maximal run of reply items (`reasoning`, assistant `message`,
//! `function_call`, `custom_tool_call`, `local_shell_call`, `web_search_call`, …) not
//! interrupted by a non-reply response item (a tool output, a user/developer message) or by
//! an `event_msg/token_count` (written when a sampling round completes). A **batch** is the
//! tool calls of one reply; calls are paired with their `*_output` items by `call_id`.

use super::integrity::Said;
use super::scan::{BStr, Head, LineReader, ModelItem, Obj, PartTyped, RawLine};
use crate::error::TrajectoryError;
use crate::kit::batches::{budget_from_env, Builder};
use crate::kit::{Batch, Locator, Observation, Plan, ToolCall};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The agent name used in plans.
pub const AGENT: &str = "codex";

/// The rollout era of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// Bare response items, meta object on line 1.
    Bare,
    /// `{timestamp, type, payload}` lines.
    Wrapped,
}

/// How a tool call was encoded, which decides the output item type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// `function_call` (JSON `arguments`), answered by `function_call_output`.
    Function,
    /// `custom_tool_call` (freeform `input`), answered by `custom_tool_call_output`.
    Custom,
    /// `local_shell_call` (`action.command` argv), answered by `function_call_output`.
    LocalShell,
}

impl CallKind {
    /// The item type of the answer.
    pub fn output_type(self) -> &'static str {
        match self {
            CallKind::Custom => "custom_tool_call_output",
            _ => "function_call_output",
        }
    }
}

/// One line of the rollout, parsed whole.
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutLine {
    /// 1-based line number.
    pub line: usize,
    pub value: Value,
}

impl RolloutLine {
    /// The response item this line carries (wrapped `payload` or a bare item), if any.
    pub fn response_item(&self, era: Era) -> Option<&Value> {
        match era {
            Era::Wrapped => (self.value.get("type").and_then(Value::as_str)
                == Some("response_item"))
            .then(|| &self.value["payload"]),
            Era::Bare => {
                if self.line == 1 || self.value.get("record_type").is_some() {
                    None
                } else if self.value.get("type").and_then(Value::as_str) == Some("response_item") {
                    Some(&self.value["payload"])
                } else {
                    self.value
                        .get("type")
                        .and_then(Value::as_str)
                        .filter(|t| is_response_item_type(t))
                        .map(|_| &self.value)
                }
            }
        }
    }

    /// The wrapped line type (`session_meta`, `event_msg`, …), empty for bare items.
    pub fn line_type(&self) -> &str {
        self.value.get("type").and_then(Value::as_str).unwrap_or("")
    }
}

/// Response item types of the Responses API / Codex `ResponseItem` that a bare-era line may be.
fn is_response_item_type(t: &str) -> bool {
    matches!(
        t,
        "message"
            | "reasoning"
            | "function_call"
            | "function_call_output"
            | "custom_tool_call"
            | "custom_tool_call_output"
            | "local_shell_call"
            | "web_search_call"
            | "image_generation_call"
            | "tool_search_call"
            | "tool_search_output"
            | "ghost_snapshot"
            | "compaction"
            | "compaction_summary"
    )
}

/// Whether a response item of type `ty` (and `role`, for messages) is part of a model reply
/// (as opposed to an input the harness added: tool outputs, user/developer/system messages).
fn is_reply(ty: &str, role: Option<&str>) -> bool {
    match ty {
        "message" => role == Some("assistant"),
        "reasoning"
        | "function_call"
        | "custom_tool_call"
        | "local_shell_call"
        | "web_search_call"
        | "image_generation_call"
        | "tool_search_call" => true,
        _ => false,
    }
}

/// Whether a response item is part of a model reply.
pub fn is_reply_item(item: &Value) -> bool {
    is_reply(
        item.get("type").and_then(Value::as_str).unwrap_or(""),
        item.get("role").and_then(Value::as_str),
    )
}

/// Response item types that are calls or their outputs: read from the whole line.
fn is_call_or_output(ty: &str) -> bool {
    matches!(
        ty,
        "function_call"
            | "custom_tool_call"
            | "local_shell_call"
            | "function_call_output"
            | "custom_tool_call_output"
    )
}

/// The `(type, text)` of typed parts, as the cross-check reads them.
fn typed_parts<'a>(p: &'a [Obj<PartTyped>]) -> Vec<(Option<&'a str>, Option<&'a str>)> {
    p.iter()
        .map(|p| (Some(p.ty.as_str()), p.text.as_ref().map(BStr::as_str)))
        .collect()
}

/// A glance at a line as Codex writes it (`{"timestamp":…,"ordinal":…,"type":…,"payload":
/// {"type":"…"`): its payload's type, to route the line — a call or an output to the whole
/// parse, a message or reasoning to its typed reading, anything else to its head — without
/// reading its head first. The glance decides nothing about the file: each route refuses what
/// it cannot read exactly as the whole parse does and hands it to the whole parse.
fn payload_type_at_a_glance(text: &[u8]) -> Option<&str> {
    const KEY: &[u8] = br#""payload":{"type":""#;
    let at = memchr::memmem::find(&text[..text.len().min(256)], KEY)?;
    let rest = &text[at + KEY.len()..];
    let end = memchr::memchr(b'"', rest)?;
    std::str::from_utf8(&rest[..end]).ok()
}

/// A parsed rollout: the plan, and what rebuild, continuation and the report need beyond it,
/// kept small (byte ranges into the file, not its lines), so a rollout of any size is read in
/// constant memory besides the plan itself.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedRollout {
    pub path: PathBuf,
    pub era: Era,
    pub session_id: String,
    pub cwd: Option<PathBuf>,
    pub cli_version: Option<String>,
    /// The session meta's timestamp (its payload's, else the line's).
    pub meta_timestamp: Option<String>,
    /// The model of the last `turn_context` line.
    pub last_turn_model: Option<String>,
    /// The cwd of the last `turn_context` line.
    pub last_turn_cwd: Option<PathBuf>,
    /// Per model reply (1-based number - 1): the byte range from its first item's line to
    /// the end of its last item's line.
    pub replies: Vec<std::ops::Range<u64>>,
    /// Per batch, per call: the byte range of the line of its output (empty when none).
    pub outputs: Vec<Vec<std::ops::Range<u64>>>,
    /// Every `turn_context` line: where it starts and its model.
    pub turn_models: Vec<(u64, Option<String>)>,
    /// The first `compacted` line: its number and where it starts.
    pub compacted: Option<(usize, u64)>,
    /// Every line ends with a newline, none with `\r`, none is blank: the file can be cut
    /// and copied byte for byte.
    pub plain: bool,
    pub plan: Plan,
}

impl ParsedRollout {
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The plan, carrying the rest of the parse (see [`crate::kit::Native`]).
    pub fn into_plan(mut self) -> Plan {
        let plan = std::mem::replace(
            &mut self.plan,
            Plan {
                agent: AGENT.into(),
                recorded_version: None,
                session_id: None,
                original_cwd: None,
                batches: Default::default(),
                model_turns: 0,
                native: Default::default(),
            },
        );
        plan.carrying(self)
    }
}

/// The model-visible text of an output value (string, content-item array, or the legacy
/// `{content, success}` object), its error flag, and the verbatim native value when it is
/// not a plain string.
pub fn observation_of(output: &Value) -> Option<Observation> {
    match output {
        Value::String(s) => Some(Observation {
            text: s.clone(),
            is_error: false,
            native: None,
        }),
        Value::Array(items) => {
            let mut text = String::new();
            for it in items {
                if let Some(t) = it.get("text").and_then(Value::as_str) {
                    text.push_str(t);
                }
            }
            Some(Observation {
                text,
                is_error: false,
                native: Some(output.clone()),
            })
        }
        Value::Object(o) => {
            let inner = o.get("content").or_else(|| o.get("body"))?;
            let mut obs = observation_of(inner)?;
            obs.is_error = o.get("success").and_then(Value::as_bool) == Some(false);
            obs.native = Some(output.clone());
            Some(obs)
        }
        _ => None,
    }
}

/// Parse a rollout file, reading it once, line by line.
pub fn parse_file(path: &Path) -> Result<ParsedRollout, TrajectoryError> {
    parse_file_hashed(path).map(|(p, _)| p)
}

/// Parse a rollout file and return its `sha256:<hex>` too (one read).
pub fn parse_file_hashed(path: &Path) -> Result<(ParsedRollout, String), TrajectoryError> {
    let file = std::fs::File::open(path).map_err(|e| {
        TrajectoryError::new(path, 0, "file", format!("cannot read the rollout: {e}"))
    })?;
    let mut reader = LineReader::new(std::io::BufReader::with_capacity(1 << 20, file)).hashing();
    let parsed = parse_lines(path, &mut reader, true, budget_from_env())?;
    Ok((parsed, reader.sha256().unwrap_or_default()))
}

/// Parse rollout bytes.
pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<ParsedRollout, TrajectoryError> {
    parse_lines(path, &mut LineReader::new(bytes), true, budget_from_env())
}

fn err(path: &Path, line: usize, field: &str, msg: String) -> TrajectoryError {
    TrajectoryError::new(path, line, field, msg)
}

/// What the session meta line says.
struct SessionMeta {
    session_id: String,
    cwd: Option<PathBuf>,
    cli_version: Option<String>,
    timestamp: Option<String>,
}

/// Where a call not yet answered is, while the parse pairs outputs with calls.
struct CallSlot {
    batch: usize,
    call: usize,
    kind: CallKind,
}

/// A batch the parse still holds: the last one (it may gain calls) and those with a call not
/// yet answered. The others are handed to the plan's [`Builder`], which may spill them.
struct OpenBatch {
    batch: Batch,
    unanswered: usize,
}

/// A call id as the parse remembers it once the call is answered (a digest: memory does not
/// grow with the ids' length).
fn id_digest(id: &str) -> [u8; 16] {
    let h = blake3::hash(id.as_bytes());
    let mut d = [0; 16];
    d.copy_from_slice(&h.as_bytes()[..16]);
    d
}

/// The parse in progress, fed one line at a time.
struct Parser<'p> {
    path: &'p Path,
    heads: bool,
    era: Option<Era>,
    /// 1-based number of the first non-blank line.
    first_line: usize,
    meta: Option<SessionMeta>,
    last_turn_model: Option<String>,
    last_turn_cwd: Option<PathBuf>,
    replies: Vec<std::ops::Range<u64>>,
    in_reply: bool,
    /// Batches not yet final, by 0-based index.
    open: std::collections::BTreeMap<usize, OpenBatch>,
    /// The number of batches so far.
    count: usize,
    plan: Builder,
    /// The first call, in plan order, whose arguments do not fit its tool and whose
    /// recorded observation is not Codex's answer to that: its batch and the error.
    misfit: Option<(usize, TrajectoryError)>,
    outputs: Vec<Vec<std::ops::Range<u64>>>,
    turn_models: Vec<(u64, Option<String>)>,
    compacted: Option<(usize, u64)>,
    plain: bool,
    /// Call id -> its place, for the calls not yet answered.
    calls: HashMap<String, CallSlot>,
    /// Every call id seen (duplicates and second outputs are refused).
    seen: std::collections::HashSet<[u8; 16]>,
    /// What the rollout says twice ([`super::integrity`]).
    cross: super::integrity::Crosscheck,
}

/// The parse; `heads`: classify the lines that allow it from their [`Head`] (false: parse
/// every line whole, the reference the fast path is tested against).
fn parse_lines<R: std::io::BufRead>(
    path: &Path,
    reader: &mut LineReader<R>,
    heads: bool,
    budget: usize,
) -> Result<ParsedRollout, TrajectoryError> {
    let mut p = Parser {
        heads,
        path,
        era: None,
        first_line: 0,
        meta: None,
        last_turn_model: None,
        last_turn_cwd: None,
        replies: vec![],
        in_reply: false,
        open: Default::default(),
        count: 0,
        plan: Builder::new(budget),
        misfit: None,
        outputs: vec![],
        turn_models: vec![],
        compacted: None,
        plain: true,
        calls: HashMap::new(),
        seen: Default::default(),
        cross: Default::default(),
    };
    loop {
        let line = reader
            .next_line()
            .map_err(|e| err(path, 0, "file", format!("cannot read the rollout: {e}")))?;
        let Some(line) = line else { break };
        p.line(&line)?;
    }
    p.finish()
}

impl Parser<'_> {
    fn line(&mut self, l: &RawLine) -> Result<(), TrajectoryError> {
        let text = std::str::from_utf8(l.text).map_err(|_| {
            err(
                self.path,
                l.number,
                "line",
                "the rollout is not valid UTF-8".into(),
            )
        })?;
        if l.last_unterminated || (l.end - l.start) as usize != l.text.len() + 1 {
            self.plain = false;
        }
        if text.trim().is_empty() {
            self.plain = false;
            return Ok(());
        }
        // A wrapped line whose head says it is neither a call, an output nor the session
        // meta is classified from the head alone; any other line is parsed whole.
        if self.heads && self.era == Some(Era::Wrapped) {
            match payload_type_at_a_glance(l.text) {
                // Messages and reasoning in exactly the shape the whole parse accepts.
                Some(ty @ ("message" | "reasoning")) => {
                    if let Some(m) = ModelItem::of(l.text, ty) {
                        return self.model_item(&m, l);
                    }
                }
                Some(ty) if is_call_or_output(ty) => {}
                _ => {
                    if let Some(h) = Head::of(l.text) {
                        if self.by_head(&h, l) {
                            return self.cross.ordinal(self.path, l.number, h.ordinal.map(Some));
                        }
                    }
                }
            }
        }
        let value = match serde_json::from_str::<Value>(text) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => {
                return Err(err(
                    self.path,
                    l.number,
                    "line",
                    "a rollout line must be a JSON object".into(),
                ))
            }
            // A torn final line (crash while writing) is ignored, as Codex does.
            Err(_) if l.last_unterminated => return Ok(()),
            Err(e) => {
                return Err(err(
                    self.path,
                    l.number,
                    "line",
                    format!("invalid JSON: {e}"),
                ))
            }
        };
        let line = RolloutLine {
            line: l.number,
            value,
        };
        if self.era.is_none() {
            self.first(&line)?;
        }
        if self.era == Some(Era::Wrapped) {
            let ordinal = line.value.get("ordinal").map(Value::as_u64);
            self.cross.ordinal(self.path, l.number, ordinal)?;
        }
        self.whole(&line, l.start..l.end)
    }

    /// The first non-blank line: the era, and the session meta of a bare file.
    fn first(&mut self, first: &RolloutLine) -> Result<(), TrajectoryError> {
        self.first_line = first.line;
        let wrapped = first.value.get("payload").is_some()
            && first.value.get("type").and_then(Value::as_str).is_some();
        if wrapped {
            self.era = Some(Era::Wrapped);
            return Ok(());
        }
        self.era = Some(Era::Bare);
        if first.value.get("type").is_some() || first.value.get("id").is_none() {
            return Err(err(self.path, first.line, "session_meta", "line 1 is not a session meta object ({id, timestamp, …}): the native session id is unknown".into()));
        }
        self.meta = Some(session_meta(self.path, first.line, &first.value, None)?);
        Ok(())
    }

    /// Handle a wrapped line from its head; false when it must be parsed whole.
    fn by_head(&mut self, h: &Head, l: &RawLine) -> bool {
        match h.line_type() {
            "session_meta" => self.meta.is_some(),
            "event_msg" => {
                if h.payload_type() == Some("item_completed") {
                    // Cross-checked with the items it repeats, from the head.
                    if let Some(p) = h.payload.as_ref() {
                        self.cross.event_head(l.number, p);
                    }
                    return true;
                }
                if h.payload_type() == Some("token_count") {
                    self.in_reply = false;
                }
                true
            }
            "turn_context" => {
                let p = h.payload.as_ref();
                self.last_turn_model = p.and_then(|p| p.model.as_deref()).map(str::to_string);
                self.last_turn_cwd = p.and_then(|p| p.cwd.as_deref()).map(PathBuf::from);
                self.turn_models
                    .push((l.start, self.last_turn_model.clone()));
                true
            }
            "compacted" => {
                self.compacted.get_or_insert((l.number, l.start));
                true
            }
            "response_item" => {
                let Some(p) = h.payload.as_ref() else {
                    return false;
                };
                let Some(ty) = p.ty.as_deref() else {
                    return false;
                };
                // Calls and outputs are parsed; messages and reasoning are cross-checked with
                // the events that repeat them.
                if is_call_or_output(ty) || matches!(ty, "message" | "reasoning") {
                    return false;
                }
                self.item_kind(is_reply(ty, p.role.as_deref()), l.start..l.end);
                true
            }
            _ => true,
        }
    }

    /// A message or reasoning line read typed ([`ModelItem::of`]): what the whole parse does
    /// with it (its ordinal, the reply it extends, what the cross-check keeps of it).
    fn model_item(&mut self, m: &ModelItem, l: &RawLine) -> Result<(), TrajectoryError> {
        self.cross
            .ordinal(self.path, l.number, m.ordinal().map(Some))?;
        match m {
            ModelItem::Message(x) => {
                let p = &x.payload;
                self.item_kind(is_reply("message", m.role()), l.start..l.end);
                let content = typed_parts(&p.content);
                self.cross.said(
                    l.number,
                    Said::Message {
                        role: m.role(),
                        id: p.id.as_ref().map(BStr::as_str),
                        turn: p
                            .passthrough
                            .as_ref()
                            .and_then(|t| t.turn_id.as_ref())
                            .map(BStr::as_str),
                        content: Some(&content),
                    },
                );
            }
            ModelItem::Reasoning(x) => {
                let p = &x.payload;
                self.item_kind(is_reply("reasoning", None), l.start..l.end);
                let summary = typed_parts(&p.summary);
                self.cross.said(
                    l.number,
                    Said::Reasoning {
                        id: p.id.as_ref().map(BStr::as_str),
                        summary: Some(&summary),
                    },
                );
            }
        }
        Ok(())
    }

    /// Whether the item at `range` is part of a reply: extends or ends the current one.
    fn item_kind(&mut self, reply: bool, range: std::ops::Range<u64>) {
        if !reply {
            self.in_reply = false;
        } else if self.in_reply {
            self.replies.last_mut().expect("a reply is open").end = range.end;
        } else {
            self.replies.push(range);
            self.in_reply = true;
        }
    }

    /// Handle a line parsed whole.
    fn whole(
        &mut self,
        l: &RolloutLine,
        range: std::ops::Range<u64>,
    ) -> Result<(), TrajectoryError> {
        let era = self.era.expect("the era is known after the first line");
        match l.line_type() {
            "session_meta" if era == Era::Wrapped && self.meta.is_none() => {
                let payload = &l.value["payload"];
                let ts = payload
                    .get("timestamp")
                    .or_else(|| l.value.get("timestamp"))
                    .and_then(Value::as_str);
                self.meta = Some(session_meta(self.path, l.line, payload, ts)?);
                return Ok(());
            }
            "event_msg"
                if l.value["payload"].get("type").and_then(Value::as_str)
                    == Some("token_count") =>
            {
                self.in_reply = false;
                return Ok(());
            }
            "event_msg"
                if era == Era::Wrapped
                    && l.value["payload"].get("type").and_then(Value::as_str)
                        == Some("item_completed") =>
            {
                self.cross.event(l.line, &l.value["payload"]);
                return Ok(());
            }
            "turn_context" => {
                let p = &l.value["payload"];
                self.last_turn_model = p.get("model").and_then(Value::as_str).map(str::to_string);
                self.last_turn_cwd = p.get("cwd").and_then(Value::as_str).map(PathBuf::from);
                self.turn_models
                    .push((range.start, self.last_turn_model.clone()));
            }
            "compacted" => {
                self.compacted.get_or_insert((l.line, range.start));
            }
            _ => {}
        }
        let Some(item) = l.response_item(era) else {
            return Ok(());
        };
        if !item.is_object() {
            return Err(err(
                self.path,
                l.line,
                "payload",
                "a response item must be an object".into(),
            ));
        }
        let ty = match item.get("type") {
            Some(Value::String(s)) => s.as_str(),
            _ => {
                return Err(err(
                    self.path,
                    l.line,
                    "payload.type",
                    "a response item needs a string `type`".into(),
                ))
            }
        };
        self.item_kind(is_reply_item(item), range.clone());
        // The item's own fields are checked first (their errors name them), then its shape as a
        // whole and what other records repeat of it.
        if matches!(ty, "function_call_output" | "custom_tool_call_output") {
            self.attach_output(l, item, ty, range)?;
            return self.cross.item(self.path, l.line, item);
        }
        let call = call_of(self.path, l.line, item, ty)?;
        self.cross.item(self.path, l.line, item)?;
        let Some((kind, tool, input)) = call else {
            return Ok(());
        };
        let id = match item.get("call_id").or_else(|| item.get("id")) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => {
                return Err(err(
                    self.path,
                    l.line,
                    "payload.call_id",
                    format!("a `{ty}` item needs a non-empty string call_id"),
                ))
            }
        };
        if !self.seen.insert(id_digest(&id)) {
            return Err(err(
                self.path,
                l.line,
                "payload.call_id",
                format!("duplicate call_id `{id}`"),
            ));
        }
        let call = ToolCall {
            call_id: id.clone(),
            tool,
            input,
            original: None,
            locator: Locator {
                line: l.line,
                native_id: Some(id.clone()),
            },
        };
        let reply = self.replies.len();
        let last = self.count.checked_sub(1);
        let extends = last
            .and_then(|i| self.open.get(&i))
            .is_some_and(|o| o.batch.model_turn == reply);
        if !extends {
            // The batch before can gain no call now: final, unless a call awaits its output.
            if let Some(i) = last {
                self.seal_if_answered(i)?;
            }
            self.open.insert(
                self.count,
                OpenBatch {
                    batch: Batch {
                        index: self.count + 1,
                        locator: call.locator.clone(),
                        calls: vec![],
                        model_turn: reply,
                        complete: false,
                    },
                    unanswered: 0,
                },
            );
            self.count += 1;
            self.outputs.push(Vec::with_capacity(1));
        }
        let batch = self.count - 1;
        let open = self.open.get_mut(&batch).expect("the last batch is open");
        open.batch.calls.push(call);
        open.unanswered += 1;
        self.outputs
            .last_mut()
            .expect("pushed with its batch")
            .push(0..0);
        let slot = CallSlot {
            batch,
            call: open.batch.calls.len() - 1,
            kind,
        };
        self.calls.insert(id, slot);
        Ok(())
    }

    /// Hand batch `i` (0-based) to the plan if every call of it is answered.
    fn seal_if_answered(&mut self, i: usize) -> Result<(), TrajectoryError> {
        if self.open.get(&i).is_some_and(|o| o.unanswered == 0) {
            self.seal(i)?;
        }
        Ok(())
    }

    /// Batch `i` (0-based) is final: checked and handed to the plan.
    fn seal(&mut self, i: usize) -> Result<(), TrajectoryError> {
        let Some(OpenBatch {
            mut batch,
            unanswered,
        }) = self.open.remove(&i)
        else {
            return Ok(());
        };
        batch.complete = unanswered == 0;
        // Every call's arguments have the types its tool reads, or the rollout records
        // Codex's own argument error for it (see `crate::kit::args`): the first call that
        // does neither, in plan order, is the parse's error.
        if self.misfit.as_ref().is_none_or(|(b, _)| i < *b) {
            if let Some((c, m)) = super::tools::ARGUMENTS.unanswered(&batch.calls) {
                let e = err(
                    self.path,
                    c.locator.line,
                    &format!("payload.arguments.{}", m.field),
                    format!(
                        "{} call {}: {}, and the rollout does not record Codex's argument error for it",
                        c.tool, c.call_id, m.message
                    ),
                );
                self.misfit = Some((i, e));
            }
        }
        self.plan.put(batch).map_err(|e| self.spill_error(e))
    }

    fn spill_error(&self, e: std::io::Error) -> TrajectoryError {
        err(
            self.path,
            0,
            "file",
            format!(
                "cannot spill the plan to the temporary directory {}: {e}",
                std::env::temp_dir().display()
            ),
        )
    }

    /// Pair an output item with its earlier call.
    fn attach_output(
        &mut self,
        l: &RolloutLine,
        item: &Value,
        ty: &str,
        range: std::ops::Range<u64>,
    ) -> Result<(), TrajectoryError> {
        let path = self.path;
        let id = match item.get("call_id") {
            Some(Value::String(s)) if !s.is_empty() => s.as_str(),
            _ => {
                return Err(err(
                    path,
                    l.line,
                    "payload.call_id",
                    format!("a `{ty}` item needs a non-empty string call_id"),
                ))
            }
        };
        let Some(slot) = self.calls.get(id) else {
            let why = if self.seen.contains(&id_digest(id)) {
                format!("second output for call `{id}`")
            } else {
                format!("output for unknown call `{id}` (no earlier call has this call_id)")
            };
            return Err(err(path, l.line, "payload.call_id", why));
        };
        if slot.kind.output_type() != ty {
            return Err(err(
                path,
                l.line,
                "payload.type",
                format!(
                    "call `{id}` is answered by `{ty}`, expected `{}`",
                    slot.kind.output_type()
                ),
            ));
        }
        let output = item
            .get("output")
            .ok_or_else(|| err(path, l.line, "payload.output", "missing output".into()))?;
        let obs = observation_of(output).ok_or_else(|| {
            err(
                path,
                l.line,
                "payload.output",
                "output must be a string, an array of content items or {content, success}".into(),
            )
        })?;
        let (b, c) = (slot.batch, slot.call);
        self.calls.remove(id);
        let open = self
            .open
            .get_mut(&b)
            .expect("a batch with a call to answer is open");
        open.batch.calls[c].original = Some(obs);
        open.unanswered -= 1;
        self.outputs[b][c] = range;
        // The last batch stays open: it may gain calls.
        if b + 1 < self.count {
            self.seal_if_answered(b)?;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<ParsedRollout, TrajectoryError> {
        // Every batch still open is final now (one with a call never answered is incomplete).
        let open: Vec<usize> = self.open.keys().copied().collect();
        for i in open {
            self.seal(i)?;
        }
        let Some(era) = self.era else {
            return Err(err(self.path, 0, "file", "the rollout is empty".into()));
        };
        self.cross.finish(self.path)?;
        let Some(meta) = self.meta else {
            return Err(err(
                self.path,
                self.first_line,
                "session_meta",
                "no session_meta line: the native session id is unknown".into(),
            ));
        };
        if let Some((_, e)) = self.misfit {
            return Err(e);
        }
        let batches = self.plan.finish().map_err(|e| {
            err(
                self.path,
                0,
                "file",
                format!("cannot finish the plan's spill file: {e}"),
            )
        })?;
        let plan = Plan {
            agent: AGENT.into(),
            recorded_version: meta.cli_version.clone(),
            session_id: Some(meta.session_id.clone()),
            original_cwd: meta.cwd.clone(),
            batches,
            model_turns: self.replies.len(),
            native: Default::default(),
        };
        Ok(ParsedRollout {
            path: self.path.to_path_buf(),
            era,
            session_id: meta.session_id,
            cwd: meta.cwd,
            cli_version: meta.cli_version,
            meta_timestamp: meta.timestamp,
            last_turn_model: self.last_turn_model,
            last_turn_cwd: self.last_turn_cwd,
            replies: self.replies,
            outputs: self.outputs,
            turn_models: self.turn_models,
            compacted: self.compacted,
            plain: self.plain,
            plan,
        })
    }
}

/// The session meta object `meta` (line `line`); `timestamp` for a wrapped line, else the
/// object's own.
fn session_meta(
    path: &Path,
    line: usize,
    meta: &Value,
    timestamp: Option<&str>,
) -> Result<SessionMeta, TrajectoryError> {
    let session_id = match meta.get("id") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(_) => {
            return Err(err(
                path,
                line,
                "session_meta.payload.id",
                "the session id must be a non-empty string".into(),
            ))
        }
        None => {
            return Err(err(
                path,
                line,
                "session_meta.payload.id",
                "missing session id".into(),
            ))
        }
    };
    let cli_version = meta
        .get("cli_version")
        .and_then(Value::as_str)
        .map(str::to_string);
    // The versions a continuation supports record the base instructions every request of
    // the session carries (`base_instructions.text`; the continued agent reads them from
    // here): a session meta of such a version without them was changed, e.g. its key
    // renamed, and would resume with other instructions.
    if cli_version
        .as_deref()
        .is_some_and(|v| super::ENTRY.continues(v))
        && !meta
            .pointer("/base_instructions/text")
            .is_some_and(Value::is_string)
    {
        return Err(err(
            path,
            line,
            "session_meta.payload.base_instructions",
            format!(
                "Codex {} records the session's base instructions as `base_instructions.text`; this session meta has none (a changed key?)",
                cli_version.as_deref().unwrap_or_default()
            ),
        ));
    }
    Ok(SessionMeta {
        session_id,
        cwd: meta.get("cwd").and_then(Value::as_str).map(PathBuf::from),
        cli_version,
        timestamp: timestamp
            .or_else(|| meta.get("timestamp").and_then(Value::as_str))
            .map(str::to_string),
    })
}

/// The kind, tool name and input of a call item of type `ty`; `None` when the item is not a
/// call.
fn call_of(
    path: &Path,
    line: usize,
    item: &Value,
    ty: &str,
) -> Result<Option<(CallKind, String, Value)>, TrajectoryError> {
    Ok(Some(match ty {
        "function_call" => {
            let name = item.get("name").and_then(Value::as_str).ok_or_else(|| {
                err(
                    path,
                    line,
                    "payload.name",
                    "a function_call needs a string name".into(),
                )
            })?;
            let args = match item.get("arguments") {
                Some(Value::String(s)) => {
                    serde_json::from_str::<Value>(s).unwrap_or_else(|_| Value::String(s.clone()))
                }
                Some(v @ Value::Object(_)) => v.clone(),
                _ => {
                    return Err(err(
                        path,
                        line,
                        "payload.arguments",
                        "a function_call needs `arguments` (a JSON string)".into(),
                    ))
                }
            };
            (CallKind::Function, name.to_string(), args)
        }
        "custom_tool_call" => {
            let name = item.get("name").and_then(Value::as_str).ok_or_else(|| {
                err(
                    path,
                    line,
                    "payload.name",
                    "a custom_tool_call needs a string name".into(),
                )
            })?;
            let input = item.get("input").and_then(Value::as_str).ok_or_else(|| {
                err(
                    path,
                    line,
                    "payload.input",
                    "a custom_tool_call needs a string input".into(),
                )
            })?;
            (
                CallKind::Custom,
                name.to_string(),
                Value::String(input.to_string()),
            )
        }
        "local_shell_call" => {
            let action = item
                .get("action")
                .filter(|a| a.is_object())
                .ok_or_else(|| {
                    err(
                        path,
                        line,
                        "payload.action",
                        "a local_shell_call needs an action object".into(),
                    )
                })?;
            (
                CallKind::LocalShell,
                "local_shell".to_string(),
                action.clone(),
            )
        }
        _ => return Ok(None),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_era() {
        let src = concat!(
            "{\"id\":\"s1\",\"timestamp\":\"2025-08-01T00:00:00Z\",\"instructions\":null,\"git\":{}}\n",
            "{\"record_type\":\"state\"}\n",
            "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"hi\"}]}\n",
            "{\"type\":\"function_call\",\"name\":\"shell\",\"arguments\":\"{\\\"command\\\":[\\\"ls\\\"]}\",\"call_id\":\"c1\"}\n",
            "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"{\\\"output\\\":\\\"a\\\\n\\\",\\\"metadata\\\":{\\\"exit_code\\\":0,\\\"duration_seconds\\\":0.0}}\"}\n",
            "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"done\"}]}\n",
        );
        let p = parse_bytes(Path::new("x"), src.as_bytes()).unwrap();
        assert_eq!(p.era, Era::Bare);
        assert_eq!(p.session_id, "s1");
        assert_eq!(p.plan().batches.len(), 1);
        assert!(p.plan().batches.loaded().unwrap()[0].complete);
        assert_eq!(p.plan().model_turns, 2);
    }

    /// A rollout of `n` one-call batches (the genuine session's header and copies of its
    /// first batch, as the scale bench makes them), edited by `edit` (its lines, 0-based),
    /// with the ordinals numbered again.
    fn copies(n: usize, edit: impl Fn(&mut Vec<String>)) -> Vec<u8> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/codex/genuine/rollout-final.jsonl");
        let text = std::fs::read_to_string(path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut all: Vec<String> = lines[..8].iter().map(|l| l.to_string()).collect();
        for i in 0..n {
            for l in &lines[8..16] {
                all.push(l.replace("_t000", &format!("_b{i:03}")));
            }
        }
        edit(&mut all);
        let mut out = String::new();
        for (k, l) in all.iter().enumerate() {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v["ordinal"] = k.into();
            out.push_str(&serde_json::to_string(&v).unwrap());
            out.push('\n');
        }
        out.into_bytes()
    }

    /// Line (0-based) of batch `b`'s (0-based) line `k` (0-based, of 8) in [`copies`].
    fn at(b: usize, k: usize) -> usize {
        8 + 8 * b + k
    }

    /// Parsed with every batch spilled and with none: the same answer, which is returned.
    fn both(bytes: &[u8]) -> Result<ParsedRollout, String> {
        let spilled = parse_lines(Path::new("m"), &mut LineReader::new(bytes), true, 0);
        let held = parse_lines(
            Path::new("m"),
            &mut LineReader::new(bytes),
            true,
            usize::MAX,
        );
        match (spilled, held) {
            (Ok(a), Ok(b)) => {
                assert!(a.plan.batches.spilled() && !b.plan.batches.spilled());
                assert!(a == b);
                Ok(a)
            }
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string());
                Err(a.to_string())
            }
            (a, b) => panic!("{:?} vs {:?}", a.err(), b.err()),
        }
    }

    #[test]
    fn what_an_event_repeats_is_checked_against_its_item() {
        // A message event that says something else than its item: named at the event's line.
        let bytes = copies(3, |l| {
            l[at(1, 2)] = l[at(1, 2)].replace("I'll create a.txt", "I will create a.txt");
        });
        let e = both(&bytes).unwrap_err();
        assert!(
            e.contains(&format!("m:{}:", at(1, 2) + 1))
                && e.contains("the AgentMessage `msg_fake_b001` differs from the response item"),
            "{e}"
        );
        // A reasoning event whose item is gone.
        let bytes = copies(3, |l| {
            l[at(2, 0)] = l[at(2, 0)].replace("rs_fake_b002", "rs_fake_gone");
        });
        let e = both(&bytes).unwrap_err();
        assert!(
            e.contains(&format!("m:{}:", at(2, 0) + 1))
                && e.contains("the Reasoning `rs_fake_gone` has no response item of that id"),
            "{e}"
        );
        // A command that is not the call's: named at the call's line, with the event's.
        let bytes = copies(3, |l| {
            l[at(1, 5)] = l[at(1, 5)].replace("echo hi > a.txt", "echo hi > b.txt");
        });
        let e = both(&bytes).unwrap_err();
        assert!(
            e.contains(&format!("m:{}:", at(1, 4) + 1))
                && e.contains(&format!(
                    "the `cmd` of call `call_fake_b001_0` differs from the command Codex recorded running (line {})",
                    at(1, 5) + 1
                )),
            "{e}"
        );
        // An item id given twice: the last item of that id is the one compared, so the
        // first event, which matched the first item, no longer does.
        let bytes = copies(3, |l| {
            l[at(1, 3)] = l[at(1, 3)]
                .replace("msg_fake_b001", "msg_fake_b000")
                .replace("I'll create a.txt", "Something else");
        });
        let e = both(&bytes).unwrap_err();
        assert!(
            e.contains(&format!("m:{}:", at(0, 2) + 1))
                && e.contains("the AgentMessage `msg_fake_b000` differs"),
            "{e}"
        );
        // The copies themselves are consistent.
        assert!(both(&copies(3, |_| {})).is_ok());
    }

    #[test]
    fn a_session_meta_without_its_base_instructions_is_refused() {
        for (from, to) in [
            ("\"base_instructions\"", "\"base_instructIons\""),
            (
                "\"base_instructions\":{\"text\"",
                "\"base_instructions\":{\"texT\"",
            ),
        ] {
            let bytes = copies(1, |l| {
                assert!(l[0].contains(from));
                l[0] = l[0].replacen(from, to, 1);
            });
            let e = both(&bytes).unwrap_err();
            assert!(
                e.contains("m:1: session_meta.payload.base_instructions")
                    && e.contains("Codex 0.149.0 records the session's base instructions"),
                "{e}"
            );
        }
        // A version no continuation supports is read as before (its replay is refused, with
        // the version, later).
        let bytes = copies(1, |l| {
            l[0] = l[0]
                .replace("\"base_instructions\"", "\"x\"")
                .replace("0.149.0", "0.1.0")
        });
        assert!(both(&bytes).is_ok());
    }

    #[test]
    fn a_batch_left_unanswered_is_incomplete_among_sealed_ones() {
        // Batch 2 of 4 loses its output: it stays open while 3 and 4 are sealed.
        let bytes = copies(4, |l| {
            l.remove(at(1, 6));
        });
        let p = both(&bytes).unwrap();
        let b = p.plan.batches.loaded().unwrap();
        let shapes: Vec<(usize, bool)> = b.iter().map(|b| (b.index, b.complete)).collect();
        assert_eq!(shapes, vec![(1, true), (2, false), (3, true), (4, true)]);
        assert!(b[1].calls[0].original.is_none());
        assert_eq!(p.plan.max_boundary(), 1);
        assert_eq!(p.outputs[1], vec![0..0]);
        assert!(p.outputs[2][0].end > p.outputs[2][0].start);
    }

    #[test]
    fn a_second_output_for_a_sealed_batch_is_refused() {
        let bytes = copies(3, |l| {
            let again = l[at(0, 6)].clone();
            l.insert(at(2, 0), again);
        });
        let e = both(&bytes).unwrap_err();
        assert!(
            e.contains("second output for call `call_fake_b000_0`"),
            "{e}"
        );
        // A call id given twice is refused too, sealed or not.
        let bytes = copies(3, |l| {
            l[at(2, 4)] = l[at(2, 4)].replace("call_fake_b002_0", "call_fake_b000_0");
        });
        let e = both(&bytes).unwrap_err();
        assert!(e.contains("duplicate call_id `call_fake_b000_0`"), "{e}");
    }

    #[test]
    fn the_first_misfit_call_in_plan_order_is_named() {
        // Batch 2's call (its output removed: it stays open to the end) and batch 3's
        // (answered: sealed first) both give `cmd` as a number.
        let misfit = |l: &mut String| {
            *l = l.replace(r#"\"cmd\": \"echo hi > a.txt && ls\""#, r#"\"cmd\": 5"#);
        };
        let bytes = copies(4, |l| {
            misfit(&mut l[at(1, 4)]);
            misfit(&mut l[at(2, 4)]);
            l.remove(at(1, 6));
        });
        let e = both(&bytes).unwrap_err();
        assert!(e.contains("call_fake_b001_0"), "{e}");
        assert!(e.contains("payload.arguments.cmd"), "{e}");
        // Batch 3's alone.
        let bytes = copies(4, |l| misfit(&mut l[at(2, 4)]));
        let e = both(&bytes).unwrap_err();
        assert!(e.contains("call_fake_b002_0"), "{e}");
    }

    proptest::proptest! {
        /// Lines classified from their head give the parse of every line read whole, on
        /// damaged real rollouts too (same plan, same ranges, same error).
        #[test]
        fn heads_parse_as_whole_lines(pos in 0usize..1_000_000, byte in proptest::prelude::any::<u8>(), mode in 0u8..5, which in 0usize..2) {
            let name = ["rollout-final.jsonl", "rollout-run1.jsonl"][which];
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex/genuine").join(name);
            let mut bytes = std::fs::read(path).unwrap();
            let i = pos % bytes.len();
            match mode {
                0 => bytes[i] = byte,
                1 => bytes.truncate(i),
                2 => bytes.insert(i, byte),
                _ => {
                    // A duplicated or a dropped line.
                    let start = bytes[..i].iter().rposition(|b| *b == b'\n').map_or(0, |p| p + 1);
                    let end = bytes[i..].iter().position(|b| *b == b'\n').map_or(bytes.len(), |p| i + p + 1);
                    let line = bytes[start..end].to_vec();
                    if mode == 3 {
                        bytes.splice(start..start, line);
                    } else {
                        bytes.drain(start..end);
                    }
                }
            }
            // The routed parse spills every batch to its file; the whole one keeps them.
            let fast = parse_lines(Path::new("m"), &mut LineReader::new(&bytes[..]), true, 0);
            let whole = parse_lines(Path::new("m"), &mut LineReader::new(&bytes[..]), false, usize::MAX);
            match (fast, whole) {
                (Ok(a), Ok(b)) => proptest::prop_assert_eq!(a, b),
                (Err(a), Err(b)) => proptest::prop_assert_eq!(a.to_string(), b.to_string()),
                (a, b) => proptest::prop_assert!(false, "{:?} vs {:?}", a.map(|p| p.plan.batches.len()), b.map(|p| p.plan.batches.len())),
            }
        }
    }

    /// Messages and reasoning read typed: every shape the whole parse accepts gives the same
    /// parse, and every one it refuses is refused with the same error.
    #[test]
    fn typed_messages_and_reasoning_parse_as_whole_lines() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/codex/genuine/rollout-final.jsonl");
        let text = std::fs::read_to_string(path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // the assistant message (line 12), the reasoning (line 10), the user message (line 7),
        // and the completed-item events of the reasoning (line 9) and the message (line 11)
        let variants: &[(usize, &str, &str)] = &[
            (
                12,
                r#""role":"assistant""#,
                r#""role":"assistant","end_turn":7,"phase":{"a":[1]}"#,
            ),
            (
                12,
                r#""role":"assistant""#,
                r#""role":"assistant","status":"done""#,
            ),
            (
                12,
                r#""role":"assistant""#,
                r#""role":"assistant","role":"assistant""#,
            ),
            (12, r#""role":"assistant""#, r#""role":7"#),
            (12, r#""role":"assistant","#, ""),
            (12, r#""id":"msg_fake_t000""#, r#""id":null"#),
            (12, r#""id":"msg_fake_t000""#, r#""id":5"#),
            (
                12,
                r#""type":"output_text","text""#,
                r#""type":"output_text","annotations":[],"text""#,
            ),
            (
                12,
                r#""text":"I'll create a.txt and list the directory.""#,
                r#""text":null"#,
            ),
            (
                12,
                r#","text":"I'll create a.txt and list the directory.""#,
                "",
            ),
            (12, r#""type":"output_text","#, ""),
            (12, r#""text":"I'll"#, r#""text":"I\u0027ll"#),
            (12, r#""text":"I'll"#, r#""text":"\ud800 I'll"#),
            (12, r#""content":["#, r#""content":"x","c":["#),
            (12, r#""turn_id":"#, r#""turn_id":1,"t":"#),
            (
                12,
                r#""internal_chat_message_metadata_passthrough":{"#,
                r#""internal_chat_message_metadata_passthrough":null,"x":{"#,
            ),
            (12, r#""ordinal":11"#, r#""ordinal":null"#),
            (12, r#""ordinal":11"#, r#""ordinal":"11""#),
            (12, r#""timestamp":"2026"#, r#""timestamp":1e999,"t":"2026"#),
            (12, r#""type":"response_item""#, r#""type":"event_msg""#),
            (
                10,
                r#""content":null"#,
                r#""content":[{"type":"reasoning_text","text":"t"}]"#,
            ),
            (
                10,
                r#""content":null"#,
                r#""content":[{"type":"reasoning_text","text":null}]"#,
            ),
            (10, r#""content":null"#, r#""content":{}"#),
            (10, r#""content":null,"#, ""),
            (
                10,
                r#""encrypted_content":null"#,
                r#""encrypted_content":"abc""#,
            ),
            (
                10,
                r#""encrypted_content":null"#,
                r#""encrypted_content":1"#,
            ),
            (10, r#""summary":["#, r#""summary":null,"s":["#),
            (
                10,
                r#""id":"rs_fake_t000""#,
                r#""id":"rs_fake_t000","role":"assistant""#,
            ),
            (
                10,
                r#""summary_text","text":"Start"#,
                r#""summary_text","text":"start"#,
            ),
            (7, r#""text":"Create"#, r#""text":"create"#),
            (7, r#""role":"user""#, r#""role":"developer""#),
            // a struct written as an array: read by position by a derived struct, never by
            // the whole parse
            (
                12,
                r#"{"type":"output_text","text":"I'll create a.txt and list the directory."}"#,
                r#"["output_text","I'll create a.txt and list the directory."]"#,
            ),
            (
                7,
                r#"{"turn_id":"01a229dc-f12e-7950-a459-c192cba7f12f","create_time":1795998675.3240418}"#,
                r#"["01a229dc-f12e-7950-a459-c192cba7f12f"]"#,
            ),
            (
                11,
                r#"{"type":"AgentMessage","id":"msg_fake_t000","content":[{"type":"Text","text":"I'll create a.txt and list the directory."}]}"#,
                r#"["AgentMessage","msg_fake_t000",[{"type":"Text","text":"I'll create a.txt and list the directory."}]]"#,
            ),
            (
                11,
                r#"{"type":"Text","text":"I'll create a.txt and list the directory."}"#,
                r#"["Text","I'll create a.txt and list the directory."]"#,
            ),
            (
                9,
                r#"{"type":"item_completed","#,
                r#"["item_completed"],"p":{"type":"item_completed","#,
            ),
        ];
        let typed = |line: &str, n: usize| {
            let ty = if n == 10 { "reasoning" } else { "message" };
            [7, 10, 12].contains(&n) && ModelItem::of(line.as_bytes(), ty).is_some()
        };
        assert!([7, 10, 12].iter().all(|&n| typed(lines[n - 1], n)));
        let mut read_typed = 0;
        for (i, (n, from, to)) in variants.iter().enumerate() {
            let line = lines[n - 1];
            assert!(line.contains(from), "variant {i}: line {n} lacks {from}");
            let mut all = lines.clone();
            let changed = line.replacen(from, to, 1);
            all[n - 1] = &changed;
            read_typed += typed(&changed, *n) as usize;
            let bytes = all.join("\n") + "\n";
            let fast = parse_lines(
                Path::new("m"),
                &mut LineReader::new(bytes.as_bytes()),
                true,
                0,
            );
            let whole = parse_lines(
                Path::new("m"),
                &mut LineReader::new(bytes.as_bytes()),
                false,
                usize::MAX,
            );
            match (fast, whole) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "variant {i}"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "variant {i}"),
                (a, b) => panic!("variant {i}: {:?} vs {:?}", a.err(), b.err()),
            }
        }
        // the accepted shapes were read typed, not handed to the whole parse
        assert_eq!(read_typed, 12);
    }

    #[test]
    fn missing_meta_names_line() {
        let src = "{\"timestamp\":\"t\",\"type\":\"response_item\",\"payload\":{\"type\":\"message\",\"role\":\"user\",\"content\":[]}}\n";
        let e = parse_bytes(Path::new("x"), src.as_bytes()).unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.message.contains("session_meta"), "{e}");
    }
}
