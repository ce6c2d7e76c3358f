//! Claude Code session JSONL → [`ParsedSession`] → [`Plan`].
//!
//! File format (see `docs/agents/claude-code.md` and the reference notes): one JSON object
//! per line. Conversation records (`user`, `assistant`, `system`, `attachment`, `progress`,
//! …) carry `uuid` and `parentUuid`; metadata records (`queue-operation`, `last-prompt`,
//! `api-request`, `cost-state`, …) carry no `uuid` and are passed through untouched.
//!
//! The active conversation is the `parentUuid` chain that ends at the newest leaf:
//! - leaves are non-sidechain records nobody points to (by `parentUuid` or
//!   `logicalParentUuid`); each leaf is walked up to its nearest `user`/`assistant`
//!   record, and the one latest in the file is the tip;
//! - the tip is walked to the root; at a compact boundary (`parentUuid: null` with a
//!   `logicalParentUuid`) the walk continues through `logicalParentUuid`, so the tool calls
//!   made before a compaction are replayed too;
//! - results of parallel tool calls hang off their own `tool_use` line, so all but one are
//!   off the chain: a `user` record whose parent is on the chain and that answers a
//!   `tool_use` not yet answered on the chain is re-attached (as Claude's own loader does).
//!
//! Streaming writes one `assistant` line per content block; consecutive assistant lines
//! with the same `message.id` form one API message (tool results may sit between them).
//! A batch is the `tool_use` blocks of one such message; batches are numbered from 1.

use crate::error::TrajectoryError;
use crate::kit::{Batch, Locator, Observation, Plan, ToolCall};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The agent name used in plans.
pub const AGENT: &str = "claude-code";

/// One non-empty line of the session file.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// 1-based line number in the file.
    pub line: usize,
    /// The line's JSON object, verbatim (key order preserved).
    pub value: Value,
    /// Top-level `type` (empty when absent).
    pub kind: String,
    pub uuid: Option<String>,
    pub parent_uuid: Option<String>,
    /// Only on compact boundaries: the record the conversation logically continues from.
    pub logical_parent_uuid: Option<String>,
    pub is_sidechain: bool,
    /// A later line repeating an earlier record byte-for-byte (same uuid, same content);
    /// it takes no part in the conversation.
    pub duplicate: bool,
}

impl Record {
    /// True for records that take part in the `parentUuid` graph of the main session.
    pub fn is_node(&self) -> bool {
        self.uuid.is_some() && !self.is_sidechain && !self.duplicate
    }

    /// `message.content` as an array of blocks, when it is one.
    pub fn content_blocks(&self) -> Option<&Vec<Value>> {
        self.value.get("message")?.get("content")?.as_array()
    }
}

/// One API-level assistant message: the chain records that hold its content blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct AssistantMessage {
    /// `message.id` (the record uuid when the record has none).
    pub message_id: String,
    /// Indices into [`ParsedSession::records`], file order.
    pub records: Vec<usize>,
    /// `message.model == "<synthetic>"`: written by Claude Code itself (e.g. "No response
    /// requested."), not a model reply; not counted as a model turn.
    pub synthetic: bool,
}

/// Where a tool call and its result live in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSite {
    pub call_id: String,
    pub tool: String,
    /// 1-based batch number.
    pub batch: usize,
    /// Index into [`ParsedSession::records`] of the assistant line with the `tool_use`.
    pub use_record: usize,
    /// Index of the `tool_use` block in that line's `message.content`.
    pub use_block: usize,
    /// The user line holding the `tool_result`, when there is one.
    pub result_record: Option<usize>,
    pub result_block: Option<usize>,
}

/// Everything parsed from a session file: the raw records and the active conversation.
/// The [`Plan`] is derived from it; rebuild works on the records.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedSession {
    pub path: PathBuf,
    /// Every non-empty line, in file order.
    pub records: Vec<Record>,
    /// The active conversation (chain from root to tip plus re-attached parallel results),
    /// as indices into `records`, in file order.
    pub chain: Vec<usize>,
    /// Indices of compact-boundary records crossed by the chain.
    pub compact_boundaries: Vec<usize>,
    /// Assistant messages on the chain, in order.
    pub assistant_messages: Vec<AssistantMessage>,
    /// Every tool call of every batch, in plan order.
    pub calls: Vec<CallSite>,
    pub session_id: Option<String>,
    pub original_cwd: Option<PathBuf>,
    pub recorded_version: Option<String>,
    plan: Plan,
}

impl ParsedSession {
    /// The plan derived from the session.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The tip of the active conversation (last chain record), if any.
    pub fn tip(&self) -> Option<&Record> {
        self.chain.last().map(|&i| &self.records[i])
    }

    /// The call site of a tool call id.
    pub fn call(&self, call_id: &str) -> Option<&CallSite> {
        self.calls.iter().find(|c| c.call_id == call_id)
    }

    /// True when the record at `index` is on the active conversation.
    pub fn on_chain(&self, index: usize) -> bool {
        self.chain.binary_search(&index).is_ok()
    }
}

/// Parse a session file into a [`Plan`].
pub fn parse(path: &Path) -> Result<Plan, TrajectoryError> {
    parse_file(path).map(|s| s.plan)
}

/// Read and parse a session file.
pub fn parse_file(path: &Path) -> Result<ParsedSession, TrajectoryError> {
    let bytes = std::fs::read(path)
        .map_err(|e| TrajectoryError::new(path, 0, "file", format!("cannot read: {e}")))?;
    parse_bytes(path, &bytes)
}

fn err(
    path: &Path,
    line: usize,
    field: impl Into<String>,
    message: impl Into<String>,
) -> TrajectoryError {
    TrajectoryError::new(path, line, field, message)
}

fn opt_string(
    path: &Path,
    line: usize,
    v: &Value,
    key: &str,
) -> Result<Option<String>, TrajectoryError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(err(
            path,
            line,
            key,
            format!("expected a string or null, found {}", kind_of(other)),
        )),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parse session bytes (`path` is only used in errors and in the result).
/// Every call's arguments have the types its tool takes, or the session records Claude's own
/// argument error for it (see `crate::kit::args`).
fn check_arguments(path: &Path, batches: &[Batch]) -> Result<(), TrajectoryError> {
    match super::tools::ARGUMENTS.unanswered(batches.iter().flat_map(|b| &b.calls)) {
        None => Ok(()),
        Some((c, m)) => Err(err(
            path,
            c.locator.line,
            format!("message.content.input.{}", m.field),
            format!(
                "{} call {}: {}, and the session does not record Claude's argument error for it",
                c.tool, c.call_id, m.message
            ),
        )),
    }
}

pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<ParsedSession, TrajectoryError> {
    let records = read_records(path, bytes)?;
    super::integrity::check(path, &records)?;
    build(path, records)
}

fn read_records(path: &Path, bytes: &[u8]) -> Result<Vec<Record>, TrajectoryError> {
    let mut records = Vec::new();
    let ends_with_newline = bytes.last() == Some(&b'\n');
    let pieces: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let last_index = pieces.len().saturating_sub(1);
    let mut by_uuid: HashMap<String, usize> = HashMap::new();
    for (i, raw) in pieces.iter().enumerate() {
        let line = i + 1;
        if raw.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let truncated = i == last_index && !ends_with_newline;
        let text = std::str::from_utf8(raw)
            .map_err(|e| err(path, line, "line", format!("not valid UTF-8: {e}")))?;
        let value: Value = serde_json::from_str(text).map_err(|e| {
            if truncated {
                err(
                    path,
                    line,
                    "line",
                    format!(
                        "truncated or invalid JSON on the last line (no trailing newline): {e}"
                    ),
                )
            } else {
                err(path, line, "line", format!("invalid JSON: {e}"))
            }
        })?;
        if !value.is_object() {
            return Err(err(
                path,
                line,
                "line",
                format!("expected a JSON object, found {}", kind_of(&value)),
            ));
        }
        let kind = match value.get("type") {
            None => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(err(
                    path,
                    line,
                    "type",
                    format!("expected a string, found {}", kind_of(other)),
                ))
            }
        };
        let uuid = opt_string(path, line, &value, "uuid")?;
        let parent_uuid = opt_string(path, line, &value, "parentUuid")?;
        let logical_parent_uuid = opt_string(path, line, &value, "logicalParentUuid")?;
        let is_sidechain = match value.get("isSidechain") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(err(
                    path,
                    line,
                    "isSidechain",
                    format!("expected a boolean, found {}", kind_of(other)),
                ))
            }
        };
        let mut duplicate = false;
        if let Some(u) = &uuid {
            if u.is_empty() {
                return Err(err(path, line, "uuid", "empty uuid"));
            }
            if let Some(&first) = by_uuid.get(u) {
                let earlier: &Record = &records[first];
                if earlier.value == value {
                    duplicate = true;
                } else {
                    return Err(err(
                        path,
                        line,
                        "uuid",
                        format!(
                            "uuid {u} already used with different content on line {}",
                            earlier.line
                        ),
                    ));
                }
            } else {
                by_uuid.insert(u.clone(), records.len());
            }
        }
        records.push(Record {
            line,
            value,
            kind,
            uuid,
            parent_uuid,
            logical_parent_uuid,
            is_sidechain,
            duplicate,
        });
    }
    Ok(records)
}

fn is_conversational(kind: &str) -> bool {
    kind == "user" || kind == "assistant"
}

fn build(path: &Path, records: Vec<Record>) -> Result<ParsedSession, TrajectoryError> {
    let nodes = node_index(&records);
    let tip = find_tip(&records, &nodes);
    let (walk, compact_boundaries) = walk_to_root(path, &records, &nodes, tip)?;
    check_loaded(path, &records, &walk)?;
    let chain = reattach_parallel_siblings(&records, &nodes, &walk);
    let assistant_messages = assistant_messages(path, &records, &chain)?;
    let (mut uses, use_by_id) = tool_uses(path, &records, &assistant_messages)?;
    let observations = tool_results(path, &records, &chain, &mut uses, &use_by_id)?;
    check_answered(path, &records, &uses, &assistant_messages)?;
    let (turn_of_message, turns) = model_turns(&assistant_messages);
    let batches = batches(
        &records,
        &uses,
        &assistant_messages,
        &turn_of_message,
        observations,
    );
    check_arguments(path, &batches)?;
    let meta = session_meta(&records, &chain);

    let plan = Plan {
        agent: AGENT.to_string(),
        recorded_version: meta.recorded_version.clone(),
        session_id: meta.session_id.clone(),
        original_cwd: meta.original_cwd.clone(),
        batches: batches.into(),
        model_turns: turns,
        native: Default::default(),
    };
    Ok(ParsedSession {
        path: path.to_path_buf(),
        calls: uses.into_iter().map(|u| u.site).collect(),
        records,
        chain,
        compact_boundaries,
        assistant_messages,
        session_id: meta.session_id,
        original_cwd: meta.original_cwd,
        recorded_version: meta.recorded_version,
        plan,
    })
}

/// uuid → record index, main-session nodes only.
fn node_index(records: &[Record]) -> HashMap<&str, usize> {
    let mut nodes: HashMap<&str, usize> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        if r.is_node() {
            if let Some(u) = r.uuid.as_deref() {
                nodes.insert(u, i);
            }
        }
    }
    nodes
}

/// The uuids some node points to (by `parentUuid` or `logicalParentUuid`).
fn referenced_uuids(records: &[Record]) -> HashSet<&str> {
    let mut has_child: HashSet<&str> = HashSet::new();
    for r in records.iter().filter(|r| r.is_node()) {
        if let Some(p) = r.parent_uuid.as_deref() {
            has_child.insert(p);
        }
        if let Some(p) = r.logical_parent_uuid.as_deref() {
            has_child.insert(p);
        }
    }
    has_child
}

/// Tip: among leaves, walk up to the nearest user/assistant; take the latest in the file.
fn find_tip(records: &[Record], nodes: &HashMap<&str, usize>) -> Option<usize> {
    let has_child = referenced_uuids(records);
    let mut tip: Option<usize> = None;
    for (i, r) in records.iter().enumerate() {
        if !r.is_node() || r.uuid.as_deref().is_none_or(|u| has_child.contains(u)) {
            continue;
        }
        let mut cur = Some(i);
        let mut steps = 0usize;
        while let Some(c) = cur {
            if is_conversational(&records[c].kind) {
                if tip.is_none_or(|t| records[c].line > records[t].line) {
                    tip = Some(c);
                }
                break;
            }
            steps += 1;
            if steps > records.len() {
                break; // a cycle; the chain walk reports it if it matters
            }
            cur = records[c]
                .parent_uuid
                .as_deref()
                .and_then(|p| nodes.get(p).copied());
        }
    }
    tip
}

/// The record types Claude Code loads into a conversation (the others it skips).
pub const CONVERSATION_TYPES: [&str; 5] = ["user", "assistant", "attachment", "system", "progress"];

/// Every record of the conversation is one Claude loads: a record of another type on the
/// chain would be skipped when Claude resumes, cutting the chain there (everything before
/// it lost), and an attachment without a kind is one no part of Claude reads (a prompt
/// snapshot that lost its kind leaves Claude resuming against an earlier one). Claude writes
/// neither: the file was changed.
fn check_loaded(path: &Path, records: &[Record], walk: &[usize]) -> Result<(), TrajectoryError> {
    for &i in walk {
        let r = &records[i];
        if !CONVERSATION_TYPES.contains(&r.kind.as_str()) {
            return Err(err(
                path,
                r.line,
                "type",
                format!(
                    "the conversation's chain passes through a record of type `{}`, which Claude Code does not load (it writes {})",
                    r.kind,
                    CONVERSATION_TYPES.join(", ")
                ),
            ));
        }
        if r.kind == "attachment"
            && !r
                .value
                .get("attachment")
                .and_then(|a| a.get("type"))
                .is_some_and(Value::is_string)
        {
            return Err(err(
                path,
                r.line,
                "attachment.type",
                "an attachment record without its kind (`attachment.type`): Claude Code writes one on every attachment",
            ));
        }
    }
    Ok(())
}

/// Walk the tip to the root. Returns the walk (root first) and the compact boundaries it
/// crossed (file order).
fn walk_to_root(
    path: &Path,
    records: &[Record],
    nodes: &HashMap<&str, usize>,
    tip: Option<usize>,
) -> Result<(Vec<usize>, Vec<usize>), TrajectoryError> {
    let mut walk: Vec<usize> = Vec::new();
    let mut compact_boundaries = Vec::new();
    if let Some(t) = tip {
        let mut seen: HashSet<usize> = HashSet::new();
        let mut cur = t;
        loop {
            if !seen.insert(cur) {
                return Err(err(
                    path,
                    records[cur].line,
                    "parentUuid",
                    "the parentUuid chain has a cycle",
                ));
            }
            walk.push(cur);
            let r = &records[cur];
            let (next, field) = match (&r.parent_uuid, &r.logical_parent_uuid) {
                (Some(p), _) => (Some(p), "parentUuid"),
                (None, Some(lp)) => {
                    compact_boundaries.push(cur);
                    (Some(lp), "logicalParentUuid")
                }
                (None, None) => (None, ""),
            };
            match next {
                None => break,
                Some(p) => match nodes.get(p.as_str()) {
                    Some(&pi) => cur = pi,
                    None => {
                        let why = if records
                            .iter()
                            .any(|x| x.uuid.as_deref() == Some(p.as_str()) && x.is_sidechain)
                        {
                            "is a sidechain record"
                        } else {
                            "is not in the file"
                        };
                        return Err(err(
                            path,
                            r.line,
                            field,
                            format!(
                                "broken chain: parent {p} of {} {why}",
                                r.uuid.as_deref().unwrap_or("?")
                            ),
                        ));
                    }
                },
            }
        }
    }
    walk.reverse();
    compact_boundaries.reverse();
    Ok((walk, compact_boundaries))
}

/// `message.id` of a record, when it has one.
fn message_id_of(r: &Record) -> Option<String> {
    r.value
        .get("message")
        .and_then(|m| m.get("id"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Re-attach off-chain siblings of parallel calls: further blocks (assistant lines) of a
/// message already on the walk, and results that answer a tool_use nobody answered yet.
/// Returns the chain, sorted (file order).
fn reattach_parallel_siblings(
    records: &[Record],
    nodes: &HashMap<&str, usize>,
    walk: &[usize],
) -> Vec<usize> {
    // Tool results on the walk (to know which uses are already answered).
    let mut answered: HashSet<String> = HashSet::new();
    for &i in walk {
        if records[i].kind == "user" {
            for id in result_ids(&records[i]) {
                answered.insert(id);
            }
        }
    }
    let mut in_chain: HashSet<usize> = walk.iter().copied().collect();
    let chain_message_ids: HashSet<String> = walk
        .iter()
        .filter(|&&i| records[i].kind == "assistant")
        .filter_map(|&i| message_id_of(&records[i]))
        .collect();
    loop {
        let mut changed = false;
        for (i, r) in records.iter().enumerate() {
            if !r.is_node() || in_chain.contains(&i) {
                continue;
            }
            let parent_in = r
                .parent_uuid
                .as_deref()
                .and_then(|p| nodes.get(p))
                .is_some_and(|pi| in_chain.contains(pi));
            if !parent_in {
                continue;
            }
            if r.kind == "assistant" {
                if message_id_of(r).is_some_and(|id| chain_message_ids.contains(&id)) {
                    in_chain.insert(i);
                    changed = true;
                }
            } else if r.kind == "user" {
                let ids = result_ids(r);
                if !ids.is_empty() && ids.iter().all(|id| !answered.contains(id)) {
                    answered.extend(ids);
                    in_chain.insert(i);
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    let mut chain: Vec<usize> = in_chain.into_iter().collect();
    chain.sort_unstable();
    chain
}

/// Assistant messages (consecutive assistant lines with one message.id).
fn assistant_messages(
    path: &Path,
    records: &[Record],
    chain: &[usize],
) -> Result<Vec<AssistantMessage>, TrajectoryError> {
    let mut assistant_messages: Vec<AssistantMessage> = Vec::new();
    let mut open: Option<String> = None;
    for &i in chain {
        let r = &records[i];
        if r.kind != "assistant" {
            continue;
        }
        let msg = match r.value.get("message") {
            Some(m @ Value::Object(_)) => m,
            Some(other) => {
                return Err(err(
                    path,
                    r.line,
                    "message",
                    format!("expected an object, found {}", kind_of(other)),
                ))
            }
            None => {
                return Err(err(
                    path,
                    r.line,
                    "message",
                    "assistant record without a message",
                ))
            }
        };
        let id = match msg.get("id") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            None | Some(Value::Null) => r.uuid.clone().unwrap_or_default(),
            Some(other) => {
                return Err(err(
                    path,
                    r.line,
                    "message.id",
                    format!("expected a string, found {}", kind_of(other)),
                ))
            }
        };
        match msg.get("content") {
            None | Some(Value::Array(_)) | Some(Value::String(_)) => {}
            Some(other) => {
                return Err(err(
                    path,
                    r.line,
                    "message.content",
                    format!("expected an array or a string, found {}", kind_of(other)),
                ))
            }
        }
        let synthetic = msg.get("model").and_then(Value::as_str) == Some("<synthetic>");
        if open.as_deref() == Some(id.as_str()) {
            if let Some(last) = assistant_messages.last_mut() {
                last.records.push(i);
            }
        } else {
            assistant_messages.push(AssistantMessage {
                message_id: id.clone(),
                records: vec![i],
                synthetic,
            });
            open = Some(id);
        }
    }
    Ok(assistant_messages)
}

/// One `tool_use` block of the conversation.
struct ToolUse {
    site: CallSite,
    input: Value,
    line: usize,
    field: String,
    message_index: usize,
}

/// tool_use blocks → calls, grouped into batches. Returns the uses in plan order and each
/// call id's index among them.
fn tool_uses(
    path: &Path,
    records: &[Record],
    assistant_messages: &[AssistantMessage],
) -> Result<(Vec<ToolUse>, HashMap<String, usize>), TrajectoryError> {
    let mut uses: Vec<ToolUse> = Vec::new();
    let mut use_by_id: HashMap<String, usize> = HashMap::new();
    let mut batch_of_message: Vec<Option<usize>> = vec![None; assistant_messages.len()];
    let mut batches_seen = 0usize;
    for (mi, m) in assistant_messages.iter().enumerate() {
        for &ri in &m.records {
            let r = &records[ri];
            let Some(blocks) = r.content_blocks() else {
                continue;
            };
            for (bi, b) in blocks.iter().enumerate() {
                if b.get("type").and_then(Value::as_str) != Some("tool_use") {
                    continue;
                }
                let field = format!("message.content[{bi}]");
                let id = match b.get("id") {
                    Some(Value::String(s)) if !s.is_empty() => s.clone(),
                    _ => {
                        return Err(err(
                            path,
                            r.line,
                            format!("{field}.id"),
                            "tool_use without a string id",
                        ))
                    }
                };
                let name = match b.get("name") {
                    Some(Value::String(s)) => s.clone(),
                    _ => {
                        return Err(err(
                            path,
                            r.line,
                            format!("{field}.name"),
                            "tool_use without a string name",
                        ))
                    }
                };
                if let Some(&prev) = use_by_id.get(&id) {
                    return Err(err(
                        path,
                        r.line,
                        format!("{field}.id"),
                        format!(
                            "duplicate tool_use id {id} (first on line {})",
                            uses[prev].line
                        ),
                    ));
                }
                let batch = match batch_of_message[mi] {
                    Some(b) => b,
                    None => {
                        batches_seen += 1;
                        batch_of_message[mi] = Some(batches_seen);
                        batches_seen
                    }
                };
                let input = match b.get("input") {
                    Some(v @ Value::Object(_)) => v.clone(),
                    _ => {
                        return Err(err(
                            path,
                            r.line,
                            format!("{field}.input"),
                            "tool_use without an object input",
                        ))
                    }
                };
                use_by_id.insert(id.clone(), uses.len());
                uses.push(ToolUse {
                    site: CallSite {
                        call_id: id,
                        tool: name,
                        batch,
                        use_record: ri,
                        use_block: bi,
                        result_record: None,
                        result_block: None,
                    },
                    input,
                    line: r.line,
                    field,
                    message_index: mi,
                });
            }
        }
    }
    Ok((uses, use_by_id))
}

/// tool_result blocks on the chain: records where each use is answered and returns the
/// observations by call id.
fn tool_results(
    path: &Path,
    records: &[Record],
    chain: &[usize],
    uses: &mut [ToolUse],
    use_by_id: &HashMap<String, usize>,
) -> Result<HashMap<String, Observation>, TrajectoryError> {
    let mut observations: HashMap<String, Observation> = HashMap::new();
    for &i in chain {
        let r = &records[i];
        if r.kind != "user" {
            continue;
        }
        let Some(blocks) = r.content_blocks() else {
            continue;
        };
        for (bi, b) in blocks.iter().enumerate() {
            if b.get("type").and_then(Value::as_str) != Some("tool_result") {
                continue;
            }
            let field = format!("message.content[{bi}].tool_use_id");
            let id = match b.get("tool_use_id") {
                Some(Value::String(s)) => s.clone(),
                _ => {
                    return Err(err(
                        path,
                        r.line,
                        field,
                        "tool_result without a string tool_use_id",
                    ))
                }
            };
            let Some(&ui) = use_by_id.get(&id) else {
                return Err(err(
                    path,
                    r.line,
                    field,
                    format!("tool_result for {id}, which no tool_use on the conversation issued"),
                ));
            };
            let u = &mut uses[ui];
            if u.site.result_record.is_some() {
                return Err(err(
                    path,
                    r.line,
                    field,
                    format!("second tool_result for {id}"),
                ));
            }
            if r.line < u.line {
                return Err(err(
                    path,
                    r.line,
                    field,
                    format!(
                        "tool_result for {id} comes before its tool_use (line {})",
                        u.line
                    ),
                ));
            }
            let observation = result_observation(path, r.line, bi, b)?;
            u.site.result_record = Some(i);
            u.site.result_block = Some(bi);
            observations.insert(id, observation);
        }
    }
    Ok(observations)
}

/// The observation of one `tool_result` block (`bi` is its index in `message.content`).
fn result_observation(
    path: &Path,
    line: usize,
    bi: usize,
    b: &Value,
) -> Result<Observation, TrajectoryError> {
    let is_error = match b.get("is_error") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(v)) => *v,
        Some(other) => {
            return Err(err(
                path,
                line,
                format!("message.content[{bi}].is_error"),
                format!("expected a boolean, found {}", kind_of(other)),
            ))
        }
    };
    let (text, native) = match b.get("content") {
        None | Some(Value::Null) => (String::new(), None),
        Some(Value::String(s)) => (s.clone(), None),
        Some(Value::Array(items)) => {
            let text: String = items
                .iter()
                .filter(|it| it.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|it| it.get("text").and_then(Value::as_str))
                .collect();
            (text, Some(Value::Array(items.clone())))
        }
        Some(other) => {
            return Err(err(
                path,
                line,
                format!("message.content[{bi}].content"),
                format!("expected a string or an array, found {}", kind_of(other)),
            ))
        }
    };
    Ok(Observation {
        text,
        is_error,
        native,
    })
}

/// Every call must be answered before the next assistant message.
fn check_answered(
    path: &Path,
    records: &[Record],
    uses: &[ToolUse],
    assistant_messages: &[AssistantMessage],
) -> Result<(), TrajectoryError> {
    for u in uses {
        if u.site.result_record.is_none() && u.message_index + 1 < assistant_messages.len() {
            let next = &assistant_messages[u.message_index + 1];
            let next_line = next.records.first().map(|&i| records[i].line).unwrap_or(0);
            return Err(err(
                path,
                u.line,
                u.field.clone(),
                format!("tool_use {} ({}) has no tool_result before the next assistant message (line {next_line})", u.site.call_id, u.site.tool),
            ));
        }
    }
    Ok(())
}

/// Model turns: non-synthetic assistant messages; a batch's turn is its message's rank.
/// Returns the turn of each message and the number of turns.
fn model_turns(assistant_messages: &[AssistantMessage]) -> (Vec<usize>, usize) {
    let mut turn_of_message = Vec::with_capacity(assistant_messages.len());
    let mut turns = 0usize;
    for m in assistant_messages {
        if !m.synthetic {
            turns += 1;
        }
        turn_of_message.push(turns);
    }
    (turn_of_message, turns)
}

/// The plan's batches: each use's call, with its observation (taken from `observations`).
fn batches(
    records: &[Record],
    uses: &[ToolUse],
    assistant_messages: &[AssistantMessage],
    turn_of_message: &[usize],
    mut observations: HashMap<String, Observation>,
) -> Vec<Batch> {
    let mut batches: Vec<Batch> = Vec::new();
    for u in uses {
        if batches.len() < u.site.batch {
            let m = &assistant_messages[u.message_index];
            let first_line = m.records.first().map(|&i| records[i].line).unwrap_or(0);
            batches.push(Batch {
                index: u.site.batch,
                calls: Vec::new(),
                model_turn: turn_of_message[u.message_index],
                locator: Locator {
                    line: first_line,
                    native_id: Some(m.message_id.clone()),
                },
                complete: true,
            });
        }
        let Some(batch) = batches.last_mut() else {
            continue;
        };
        let original = observations.remove(&u.site.call_id);
        if original.is_none() {
            batch.complete = false;
        }
        batch.calls.push(ToolCall {
            call_id: u.site.call_id.clone(),
            tool: u.site.tool.clone(),
            input: u.input.clone(),
            original,
            locator: Locator {
                line: u.line,
                native_id: Some(u.site.call_id.clone()),
            },
        });
    }
    batches
}

/// Session facts read from the conversation.
struct SessionMeta {
    session_id: Option<String>,
    recorded_version: Option<String>,
    original_cwd: Option<PathBuf>,
}

/// Session id and version from the conversational tip; cwd from the first chain record
/// that has one.
fn session_meta(records: &[Record], chain: &[usize]) -> SessionMeta {
    let tip_record = chain
        .iter()
        .rev()
        .map(|&i| &records[i])
        .find(|r| is_conversational(&r.kind));
    let str_field = |r: &Record, k: &str| r.value.get(k).and_then(Value::as_str).map(str::to_owned);
    SessionMeta {
        session_id: tip_record.and_then(|r| str_field(r, "sessionId")),
        recorded_version: tip_record.and_then(|r| str_field(r, "version")),
        original_cwd: chain
            .iter()
            .find_map(|&i| str_field(&records[i], "cwd"))
            .map(PathBuf::from),
    }
}

/// The `tool_use_id`s answered by a user record.
fn result_ids(r: &Record) -> Vec<String> {
    r.content_blocks()
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                .filter_map(|b| {
                    b.get("tool_use_id")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default()
}
