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

use super::scan::{Head, LineReader, RawLine};
use crate::error::TrajectoryError;
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
                batches: vec![],
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
    parse_blocks(path, file, BLOCK)
}

/// The size of the blocks a large rollout is read in (each ends at a line's end).
const BLOCK: usize = 2 << 20;

/// Parse a rollout read in blocks of about `block` bytes: this thread reads and hashes them
/// and takes in the lines' facts in file order, while two threads find the facts of the
/// next blocks' lines (the JSON scanning, most of the work). The blocks are classified here
/// until the era is known (with every line parsed whole, the reference). Memory: a few
/// blocks in flight, whatever the file's size.
fn parse_blocks(
    path: &Path,
    mut r: impl std::io::Read,
    block: usize,
) -> Result<(ParsedRollout, String), TrajectoryError> {
    use sha2::Digest;
    let io = |e: std::io::Error| err(path, 0, "file", format!("cannot read the rollout: {e}"));
    let mut sha = sha2::Sha256::new();
    let mut carry: Vec<u8> = vec![];
    let mut eof = false;
    // The next block: whole lines (the last one may lack its newline at the end of the file).
    let mut next_block = || -> std::io::Result<Option<Vec<u8>>> {
        let mut buf = std::mem::take(&mut carry);
        loop {
            if eof {
                return Ok((!buf.is_empty()).then_some(buf));
            }
            let have = buf.len();
            buf.resize(have + block, 0);
            let mut n = 0;
            while have + n < buf.len() {
                match r.read(&mut buf[have + n..]) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            buf.truncate(have + n);
            sha.update(&buf[have..]);
            eof = have + n < have + block;
            if eof {
                continue;
            }
            if let Some(nl) = buf.iter().rposition(|b| *b == b'\n') {
                carry = buf[nl + 1..].to_vec();
                buf.truncate(nl + 1);
                return Ok(Some(buf));
            }
        }
    };
    let mut p = Parser::new(path, true);
    // (line number base, byte offset base) of the next block.
    let (mut lines, mut offset) = (0usize, 0u64);
    let take_in =
        |p: &mut Parser, facts: Vec<Fact>, lines: &mut usize, offset: &mut u64, len: u64| {
            let n = facts.len();
            for mut f in facts {
                f.number += *lines;
                f.start += *offset;
                f.end += *offset;
                p.apply(f)?;
            }
            *lines += n;
            *offset += len;
            Ok::<(), TrajectoryError>(())
        };
    // Until the era is known, blocks are read here.
    while p.era.is_none() {
        let Some(b) = next_block().map_err(io)? else {
            return p.finish().map(|parsed| (parsed, hex_sha(sha)));
        };
        let facts = block_facts(&b, false);
        take_in(&mut p, facts, &mut lines, &mut offset, b.len() as u64)?;
    }
    let heads = p.era == Some(Era::Wrapped);
    std::thread::scope(|s| {
        let mut to: Vec<std::sync::mpsc::SyncSender<Vec<u8>>> = vec![];
        let mut from: Vec<std::sync::mpsc::Receiver<(Vec<Fact>, u64)>> = vec![];
        for _ in 0..2 {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
            let (ftx, frx) = std::sync::mpsc::sync_channel(2);
            s.spawn(move || {
                while let Ok(b) = rx.recv() {
                    let facts = block_facts(&b, heads);
                    if ftx.send((facts, b.len() as u64)).is_err() {
                        break;
                    }
                }
            });
            to.push(tx);
            from.push(frx);
        }
        let mut in_flight = std::collections::VecDeque::new();
        let mut sent = 0usize;
        loop {
            let b = next_block().map_err(io)?;
            let done = b.is_none();
            if let Some(b) = b {
                let w = sent % 2;
                to[w].send(b).expect("a parse thread ended early");
                in_flight.push_back(w);
                sent += 1;
            }
            while in_flight.len() > 3 || (done && !in_flight.is_empty()) {
                let w = in_flight.pop_front().expect("in flight");
                let (facts, len) = from[w].recv().expect("a parse thread ended early");
                take_in(&mut p, facts, &mut lines, &mut offset, len)?;
            }
            if done {
                return Ok(());
            }
        }
    })?;
    p.finish().map(|parsed| (parsed, hex_sha(sha)))
}

fn hex_sha(h: sha2::Sha256) -> String {
    use sha2::Digest;
    format!("sha256:{}", hex::encode(h.finalize()))
}

/// The facts of a block's lines (numbers and offsets relative to the block).
fn block_facts(b: &[u8], heads: bool) -> Vec<Fact> {
    let mut r = LineReader::new(b);
    let mut out = vec![];
    while let Ok(Some(l)) = r.next_line() {
        out.push(classify(&l, heads));
    }
    out
}

/// Parse rollout bytes.
pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<ParsedRollout, TrajectoryError> {
    parse_lines(path, &mut LineReader::new(bytes), true)
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

/// Where a call of the plan is, while the parse pairs outputs with calls.
struct CallSlot {
    batch: usize,
    call: usize,
    kind: CallKind,
}

/// What one line is, found without the parse's state (so that it can be found on another
/// thread): the parse takes facts in file order ([`Parser::apply`]).
struct Fact {
    number: usize,
    start: u64,
    end: u64,
    /// The line is blank, unterminated or ends with `\r`.
    not_plain: bool,
    kind: FactKind,
}

enum FactKind {
    NotUtf8,
    Blank,
    /// A wrapped line classified from its head.
    Head(HeadKind),
    /// A line parsed whole.
    Whole(Value),
    NotObject,
    /// An unparsable final line without a newline (a crash while writing): ignored.
    Torn,
    Invalid(String),
}

/// What the head of a wrapped line says, when that is all the parse needs of it.
enum HeadKind {
    TokenCount,
    TurnContext {
        model: Option<String>,
        cwd: Option<String>,
    },
    Compacted,
    /// A response item that is neither a call nor an output: part of a reply or not.
    Item {
        reply: bool,
    },
    Other,
}

/// What a line is; `heads`: a wrapped file's line may be classified from its [`Head`].
fn classify(l: &RawLine, heads: bool) -> Fact {
    let mut fact = Fact {
        number: l.number,
        start: l.start,
        end: l.end,
        not_plain: l.last_unterminated || (l.end - l.start) as usize != l.text.len() + 1,
        kind: FactKind::Blank,
    };
    let Ok(text) = std::str::from_utf8(l.text) else {
        fact.kind = FactKind::NotUtf8;
        return fact;
    };
    if text.trim().is_empty() {
        fact.not_plain = true;
        return fact;
    }
    if heads {
        if let Some(k) = Head::of(l.text).and_then(|h| head_kind(&h)) {
            fact.kind = FactKind::Head(k);
            return fact;
        }
    }
    fact.kind = match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => FactKind::Whole(v),
        Ok(_) => FactKind::NotObject,
        Err(_) if l.last_unterminated => FactKind::Torn,
        Err(e) => FactKind::Invalid(e.to_string()),
    };
    fact
}

/// What a wrapped line's head says, or `None` when the line must be parsed whole (a call,
/// an output, the session meta, a head without the fields that decide).
fn head_kind(h: &Head) -> Option<HeadKind> {
    Some(match h.line_type() {
        "session_meta" => return None,
        "event_msg" if h.payload_type() == Some("token_count") => HeadKind::TokenCount,
        "turn_context" => {
            let p = h.payload.as_ref();
            HeadKind::TurnContext {
                model: p.and_then(|p| p.model.as_deref()).map(str::to_string),
                cwd: p.and_then(|p| p.cwd.as_deref()).map(str::to_string),
            }
        }
        "compacted" => HeadKind::Compacted,
        "response_item" => {
            let p = h.payload.as_ref()?;
            let ty = p.ty.as_deref()?;
            if is_call_or_output(ty) {
                return None;
            }
            HeadKind::Item {
                reply: is_reply(ty, p.role.as_deref()),
            }
        }
        _ => HeadKind::Other,
    })
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
    batches: Vec<Batch>,
    outputs: Vec<Vec<std::ops::Range<u64>>>,
    turn_models: Vec<(u64, Option<String>)>,
    compacted: Option<(usize, u64)>,
    plain: bool,
    /// Call id -> its place in `batches`.
    calls: HashMap<String, CallSlot>,
}

/// The parse; `heads`: classify the lines that allow it from their [`Head`] (false: parse
/// every line whole, the reference the fast path is tested against).
fn parse_lines<R: std::io::BufRead>(
    path: &Path,
    reader: &mut LineReader<R>,
    heads: bool,
) -> Result<ParsedRollout, TrajectoryError> {
    let mut p = Parser::new(path, heads);
    loop {
        let line = reader
            .next_line()
            .map_err(|e| err(path, 0, "file", format!("cannot read the rollout: {e}")))?;
        let Some(line) = line else { break };
        p.line(&line)?;
    }
    p.finish()
}

impl<'p> Parser<'p> {
    fn new(path: &'p Path, heads: bool) -> Self {
        Parser {
            heads,
            path,
            era: None,
            first_line: 0,
            meta: None,
            last_turn_model: None,
            last_turn_cwd: None,
            replies: vec![],
            in_reply: false,
            batches: vec![],
            outputs: vec![],
            turn_models: vec![],
            compacted: None,
            plain: true,
            calls: HashMap::new(),
        }
    }

    fn line(&mut self, l: &RawLine) -> Result<(), TrajectoryError> {
        let heads = self.heads && self.era == Some(Era::Wrapped);
        self.apply(classify(l, heads))
    }

    /// Take in what a line is (lines in file order).
    fn apply(&mut self, f: Fact) -> Result<(), TrajectoryError> {
        if f.not_plain {
            self.plain = false;
        }
        let range = f.start..f.end;
        let value = match f.kind {
            FactKind::NotUtf8 => {
                return Err(err(
                    self.path,
                    f.number,
                    "line",
                    "the rollout is not valid UTF-8".into(),
                ))
            }
            FactKind::Blank | FactKind::Torn => return Ok(()),
            FactKind::NotObject => {
                return Err(err(
                    self.path,
                    f.number,
                    "line",
                    "a rollout line must be a JSON object".into(),
                ))
            }
            FactKind::Invalid(e) => {
                return Err(err(
                    self.path,
                    f.number,
                    "line",
                    format!("invalid JSON: {e}"),
                ))
            }
            FactKind::Head(h) => {
                match h {
                    HeadKind::TokenCount => self.in_reply = false,
                    HeadKind::TurnContext { model, cwd } => {
                        self.last_turn_model = model;
                        self.last_turn_cwd = cwd.map(PathBuf::from);
                        self.turn_models
                            .push((range.start, self.last_turn_model.clone()));
                    }
                    HeadKind::Compacted => {
                        self.compacted.get_or_insert((f.number, range.start));
                    }
                    HeadKind::Item { reply } => self.item_kind(reply, range),
                    HeadKind::Other => {}
                }
                return Ok(());
            }
            FactKind::Whole(v) => v,
        };
        let line = RolloutLine {
            line: f.number,
            value,
        };
        if self.era.is_none() {
            self.first(&line)?;
        }
        self.whole(&line, range)
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
        if matches!(ty, "function_call_output" | "custom_tool_call_output") {
            return self.attach_output(l, item, ty, range);
        }
        let Some((kind, tool, input)) = call_of(self.path, l.line, item, ty)? else {
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
        if self.calls.contains_key(&id) {
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
        match self.batches.last_mut() {
            Some(b) if b.model_turn == reply => b.calls.push(call),
            _ => {
                self.batches.push(Batch {
                    index: self.batches.len() + 1,
                    locator: call.locator.clone(),
                    calls: vec![call],
                    model_turn: reply,
                    complete: false,
                });
                self.outputs.push(Vec::with_capacity(1));
            }
        }
        self.outputs
            .last_mut()
            .expect("pushed with its batch")
            .push(0..0);
        let batch = self.batches.len() - 1;
        let slot = CallSlot {
            batch,
            call: self.batches[batch].calls.len() - 1,
            kind,
        };
        self.calls.insert(id, slot);
        Ok(())
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
            return Err(err(
                path,
                l.line,
                "payload.call_id",
                format!("output for unknown call `{id}` (no earlier call has this call_id)"),
            ));
        };
        let c = &mut self.batches[slot.batch].calls[slot.call];
        if c.original.is_some() {
            return Err(err(
                path,
                l.line,
                "payload.call_id",
                format!("second output for call `{id}`"),
            ));
        }
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
        c.original = Some(obs);
        self.outputs[slot.batch][slot.call] = range;
        Ok(())
    }

    fn finish(self) -> Result<ParsedRollout, TrajectoryError> {
        let Some(era) = self.era else {
            return Err(err(self.path, 0, "file", "the rollout is empty".into()));
        };
        let Some(meta) = self.meta else {
            return Err(err(
                self.path,
                self.first_line,
                "session_meta",
                "no session_meta line: the native session id is unknown".into(),
            ));
        };
        let mut batches = self.batches;
        for b in &mut batches {
            b.complete = b.calls.iter().all(|c| c.original.is_some());
        }
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
    Ok(SessionMeta {
        session_id,
        cwd: meta.get("cwd").and_then(Value::as_str).map(PathBuf::from),
        cli_version: meta
            .get("cli_version")
            .and_then(Value::as_str)
            .map(str::to_string),
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
        assert!(p.plan().batches[0].complete);
        assert_eq!(p.plan().model_turns, 2);
    }

    proptest::proptest! {
        /// Lines classified from their head give the parse of every line read whole, on
        /// damaged real rollouts too (same plan, same ranges, same error).
        #[test]
        fn heads_parse_as_whole_lines(pos in 0usize..1_000_000, byte in proptest::prelude::any::<u8>(), mode in 0u8..5, which in 0usize..2, block in 1usize..20_000) {
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
            let fast = parse_lines(Path::new("m"), &mut LineReader::new(&bytes[..]), true);
            let whole = parse_lines(Path::new("m"), &mut LineReader::new(&bytes[..]), false);
            // Read in blocks, their lines classified on other threads: the same parse.
            let blocks = parse_blocks(Path::new("m"), &bytes[..], block);
            match (&blocks, &fast) {
                (Ok((a, sha)), Ok(b)) => {
                    proptest::prop_assert_eq!(a, b);
                    proptest::prop_assert_eq!(sha, &crate::digest::sha256(&bytes));
                }
                (Err(a), Err(b)) => proptest::prop_assert_eq!(a.to_string(), b.to_string()),
                _ => proptest::prop_assert!(false, "blocks {:?} vs lines {:?}", blocks.as_ref().map(|p| p.0.plan.batches.len()), fast.as_ref().map(|p| p.plan.batches.len())),
            }
            match (fast, whole) {
                (Ok(a), Ok(b)) => proptest::prop_assert_eq!(a, b),
                (Err(a), Err(b)) => proptest::prop_assert_eq!(a.to_string(), b.to_string()),
                (a, b) => proptest::prop_assert!(false, "{:?} vs {:?}", a.map(|p| p.plan.batches.len()), b.map(|p| p.plan.batches.len())),
            }
        }
    }

    #[test]
    fn missing_meta_names_line() {
        let src = "{\"timestamp\":\"t\",\"type\":\"response_item\",\"payload\":{\"type\":\"message\",\"role\":\"user\",\"content\":[]}}\n";
        let e = parse_bytes(Path::new("x"), src.as_bytes()).unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.message.contains("session_meta"), "{e}");
    }
}
