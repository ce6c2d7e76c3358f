//! Rebuild a Claude Code 2.1.332 native session at a batch boundary, with fresh observations.
//!
//! Input: the source session JSONL (raw lines), a [`Plan`] (batches with call ids), the
//! boundary N and one observation per call of batches 1..=N. Output: a session file that the
//! real `claude --resume <id>` loads in an isolated config dir, plus the canonical
//! model-visible message prefix that Claude will send first (see `docs/agents/claude-code.md`).
//!
//! # What is kept
//! * The **active chain** ending at the boundary: the last `tool_result` record of batch N
//!   (plus the `attachment` records that Claude chained right after it before its next model
//!   request, e.g. a `changed on disk` note), walked up through `parentUuid` to the root, plus
//!   the sibling `tool_result` records of parallel calls (Claude re-attaches them on load).
//!   Records of abandoned branches and everything after the cut are dropped.
//! * Metadata records (no `uuid`) before the cut, except: `last-prompt`/`summary` whose leaf
//!   is not kept, `file-history-snapshot` of a dropped message, and `content-replacement`
//!   records of a replaced or dropped result (Claude re-applies them on resume).
//! * Unchanged records are written byte for byte; a record is re-serialized only when one of
//!   its `tool_result` blocks received a different observation. Its `toolUseResult` (UI
//!   metadata the model never sees, and stale after the replacement) is then removed.
//!
//! # File-read state
//! Claude rebuilds its read-file state from the transcript and compares it with the files'
//! mtimes: a file whose mtime is later than Claude's last look at it is reported "modified on
//! disk" by the next Edit/Write. After a replay every file the prefix touched has a fresh
//! mtime, so rebuild sets the mtime of every workspace file that a file tool (Read, Write,
//! Edit, MultiEdit, NotebookEdit) of the prefix names to the timestamp of the assistant
//! record holding the **last** such call on it (≤ the result timestamp Claude records), i.e.
//! "unchanged since Claude last looked". Paths are rebased from the original cwd onto the
//! workspace and must stay inside it; missing files are skipped.

use crate::kit::{AdapterError, Observation, Plan, RebuildRequest, RebuiltSession};
use crate::protocol::anthropic::canonical_message as canonical_anthropic_message;

/// Hex SHA-256 of the canonical JSON: the hash Claude Code writes into its `api-request`
/// records (`tail`) and `api-request-blob` records (`hash`).
pub fn claude_message_sha256(m: &Value) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(
        crate::digest::canonical_json(m).as_bytes(),
    ))
}
use crate::error::TrajectoryError;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The Claude Code version this rebuild targets.
pub const CLAUDE_VERSION: &str = "2.1.332";

/// Layout of the isolated agent home below the run's state dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaudeHome {
    /// `HOME` for the agent: `<state>/agent-home`.
    pub home: PathBuf,
    /// `CLAUDE_CONFIG_DIR`: `<state>/agent-home/claude`.
    pub config_dir: PathBuf,
}

impl ClaudeHome {
    pub fn new(state_dir: &Path) -> ClaudeHome {
        let home = state_dir.join("agent-home");
        let config_dir = home.join("claude");
        ClaudeHome { home, config_dir }
    }

    /// `<config>/projects/<escaped cwd>`.
    pub fn project_dir(&self, cwd: &Path) -> Result<PathBuf, AdapterError> {
        Ok(self
            .config_dir
            .join("projects")
            .join(escaped_project_dir(cwd)?))
    }

    /// The session file of `session_id` for `cwd`.
    pub fn session_path(&self, cwd: &Path, session_id: &str) -> Result<PathBuf, AdapterError> {
        Ok(self.project_dir(cwd)?.join(format!("{session_id}.jsonl")))
    }
}

/// Claude's project folder name for a cwd: every character that is not ASCII alphanumeric
/// becomes `-` (`/tmp/my_proj.x` → `-tmp-my-proj-x`). Names over 200 characters get a hash
/// suffix whose algorithm differs between Claude builds: refused.
pub fn escaped_project_dir(cwd: &Path) -> Result<String, AdapterError> {
    let s: String = cwd
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    if s.chars().count() > 200 {
        return Err(AdapterError::Unsupported(format!(
            "workspace path {} gives a Claude project folder name over 200 characters (Claude hashes those; not supported)",
            cwd.display()
        )));
    }
    Ok(s)
}

/// One parsed line of the source session.
#[derive(Debug, Clone)]
struct Line {
    /// 0-based line index in the file.
    idx: usize,
    raw: String,
    v: Value,
}

impl Line {
    fn ty(&self) -> &str {
        self.v.get("type").and_then(Value::as_str).unwrap_or("")
    }
    fn uuid(&self) -> Option<&str> {
        self.v.get("uuid").and_then(Value::as_str)
    }
    fn parent(&self) -> Option<&str> {
        self.v.get("parentUuid").and_then(Value::as_str)
    }
    fn message_id(&self) -> Option<&str> {
        self.v.pointer("/message/id").and_then(Value::as_str)
    }
    fn is_conversational(&self) -> bool {
        self.uuid().is_some() && super::parse::CONVERSATION_TYPES.contains(&self.ty())
    }
    /// `tool_use_id`s of the tool_result blocks of a user record.
    fn result_ids(&self) -> Vec<String> {
        if self.ty() != "user" {
            return Vec::new();
        }
        content_blocks(&self.v)
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            .filter_map(|b| {
                b.get("tool_use_id")
                    .and_then(Value::as_str)
                    .map(String::from)
            })
            .collect()
    }
}

fn content_blocks(record: &Value) -> Vec<Value> {
    match record.pointer("/message/content") {
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    }
}

fn terr(path: &Path, line: usize, field: &str, msg: impl Into<String>) -> AdapterError {
    AdapterError::Trajectory(TrajectoryError::new(path, line, field, msg))
}

fn io_err(path: &Path, source: std::io::Error) -> AdapterError {
    AdapterError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn read_lines(path: &Path) -> Result<Vec<Line>, AdapterError> {
    let text = std::fs::read_to_string(path).map_err(|e| io_err(path, e))?;
    let mut out = Vec::new();
    for (idx, raw) in text.split('\n').enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(raw)
            .map_err(|e| terr(path, idx + 1, "line", format!("not JSON: {e}")))?;
        if !v.is_object() {
            return Err(terr(path, idx + 1, "line", "not a JSON object"));
        }
        out.push(Line {
            idx,
            raw: raw.to_string(),
            v,
        });
    }
    Ok(out)
}

/// The cut: which lines are kept, and which record ends the chain.
#[derive(Debug)]
struct Cut {
    /// Positions (into the `lines` vector) of kept lines, in file order.
    kept: Vec<usize>,
    /// Positions of the kept conversational records, in file order.
    conversational: Vec<usize>,
    /// Position of the last kept conversational record (the leaf).
    leaf: usize,
    /// Position of the last tool_result record of batch N.
    boundary: usize,
}

fn compute_cut(
    path: &Path,
    lines: &[Line],
    kept_calls: &BTreeSet<String>,
    boundary_calls: &[String],
) -> Result<Cut, AdapterError> {
    // Result record of every kept call (first occurrence).
    let mut result_pos: HashMap<String, usize> = HashMap::new();
    for (pos, l) in lines.iter().enumerate() {
        for id in l.result_ids() {
            result_pos.entry(id).or_insert(pos);
        }
    }
    for id in kept_calls {
        if !result_pos.contains_key(id) {
            return Err(terr(
                path,
                0,
                "tool_result",
                format!(
                    "call {id} has no tool_result record; the boundary is not a complete batch"
                ),
            ));
        }
    }
    let boundary = boundary_calls
        .iter()
        .map(|id| result_pos[id])
        .max()
        .ok_or_else(|| terr(path, 0, "batch", "the boundary batch has no calls"))?;

    // uuid -> position, for records up to the boundary and the trailing attachments.
    let mut by_uuid: HashMap<&str, usize> = HashMap::new();
    for (pos, l) in lines.iter().enumerate().take(boundary + 1) {
        if let Some(u) = l.uuid() {
            by_uuid.entry(u).or_insert(pos);
        }
    }
    // Extend over the attachments Claude chained to the boundary result before its next model
    // request (they are part of that request: e.g. a system "changed on disk" note, the prompt
    // snapshot), following the chain as Claude does, not the order of the lines (a repeated
    // line is the same record).
    let mut leaf = boundary;
    let mut followed: HashSet<&str> = lines[leaf].uuid().into_iter().collect();
    while let Some(parent) = lines[leaf].uuid() {
        let next = lines.iter().enumerate().find(|(_, l)| {
            l.ty() == "attachment"
                && l.parent() == Some(parent)
                && l.uuid().is_some_and(|u| !followed.contains(u))
        });
        let Some((pos, l)) = next else {
            break;
        };
        let u = l.uuid().expect("found by its uuid");
        followed.insert(u);
        by_uuid.entry(u).or_insert(pos);
        leaf = by_uuid[u];
    }

    // Walk the chain from the leaf to the root.
    let mut chain: BTreeSet<usize> = BTreeSet::new();
    let mut cur = Some(leaf);
    while let Some(pos) = cur {
        if !chain.insert(pos) {
            return Err(terr(
                path,
                lines[pos].idx + 1,
                "parentUuid",
                "cycle in the parentUuid chain",
            ));
        }
        cur = match lines[pos].v.get("parentUuid") {
            None | Some(Value::Null) => None,
            Some(Value::String(p)) => match by_uuid.get(p.as_str()) {
                Some(&pp) => Some(pp),
                None => {
                    return Err(terr(
                        path,
                        lines[pos].idx + 1,
                        "parentUuid",
                        format!("parent {p} is not in the session before the boundary"),
                    ))
                }
            },
            Some(_) => return Err(terr(path, lines[pos].idx + 1, "parentUuid", "not a string")),
        };
    }
    // Parallel calls, as Claude re-attaches them on load: the other lines of an assistant
    // message on the chain (one line per content block, same `message.id`), and the
    // tool_result records of kept calls hanging off any of those lines. Results are written
    // in the order the calls completed, so a result may hang off a tool_use line that is
    // not on the chain walked from the boundary.
    let mut conversational: BTreeSet<usize> = chain.clone();
    let chain_messages: HashSet<&str> = chain
        .iter()
        .filter(|&&p| lines[p].ty() == "assistant")
        .filter_map(|&p| lines[p].message_id())
        .collect();
    for (pos, l) in lines.iter().enumerate().take(leaf + 1) {
        if l.ty() == "assistant" && l.message_id().is_some_and(|m| chain_messages.contains(m)) {
            conversational.insert(pos);
        }
    }
    let anchors: HashSet<&str> = conversational
        .iter()
        .filter_map(|&p| lines[p].uuid())
        .collect();
    for (pos, l) in lines.iter().enumerate().take(leaf + 1) {
        let ids = l.result_ids();
        if ids.is_empty() || conversational.contains(&pos) {
            continue;
        }
        if l.parent().is_some_and(|p| anchors.contains(p))
            && ids.iter().all(|id| kept_calls.contains(id))
        {
            conversational.insert(pos);
        }
    }
    for id in kept_calls {
        if !conversational.contains(&result_pos[id]) {
            return Err(terr(
                path,
                lines[result_pos[id]].idx + 1,
                "parentUuid",
                format!(
                    "the tool_result of {id} is not on the active chain ending at the boundary"
                ),
            ));
        }
    }
    for &pos in &conversational {
        let l = &lines[pos];
        if l.v.get("isCompactSummary").and_then(Value::as_bool) == Some(true)
            || (l.ty() == "system"
                && l.v.get("subtype").and_then(Value::as_str) == Some("compact_boundary"))
        {
            return Err(AdapterError::Unsupported(format!(
                "line {}: compacted sessions are not supported by the Claude Code rebuild",
                l.idx + 1
            )));
        }
        if l.v.get("isSidechain").and_then(Value::as_bool) == Some(true) {
            return Err(terr(
                path,
                l.idx + 1,
                "isSidechain",
                "a sidechain record is on the main chain",
            ));
        }
    }

    // Metadata before the cut.
    let kept_uuids: HashSet<&str> = conversational
        .iter()
        .filter_map(|&p| lines[p].uuid())
        .collect();
    let mut kept = Vec::new();
    for (pos, l) in lines.iter().enumerate().take(leaf + 1) {
        if conversational.contains(&pos) {
            kept.push(pos);
            continue;
        }
        if l.uuid().is_some() && l.is_conversational() {
            continue; // another branch
        }
        if l.uuid().is_some() {
            continue; // unknown record type with a uuid: not ours to keep
        }
        let refers_kept = |key: &str| {
            l.v.get(key)
                .and_then(Value::as_str)
                .is_some_and(|u| kept_uuids.contains(u))
        };
        let keep = match l.ty() {
            "last-prompt" | "summary" => refers_kept("leafUuid"),
            "file-history-snapshot" => l.v.get("messageId").is_none() || refers_kept("messageId"),
            "content-replacement" => false, // decided below with the replaced ids
            _ => true,
        };
        // Bookkeeping written after the boundary result belongs to the next model request.
        if pos > boundary {
            continue;
        }
        if keep || l.ty() == "content-replacement" {
            kept.push(pos);
        }
    }
    Ok(Cut {
        kept,
        conversational: conversational.into_iter().collect(),
        leaf,
        boundary,
    })
}

/// The new content of a tool_result block for an observation.
fn observation_content(obs: &Observation) -> Value {
    match &obs.native {
        Some(v) => v.clone(),
        None => Value::String(obs.text.clone()),
    }
}

/// Splice `obs` into a tool_result block; returns whether it changed.
fn splice_block(block: &mut Map<String, Value>, obs: &Observation) -> bool {
    let new_content = observation_content(obs);
    let old_err = block
        .get("is_error")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if block.get("content") == Some(&new_content) && old_err == obs.is_error {
        return false;
    }
    block.insert("content".into(), new_content);
    if obs.is_error {
        block.insert("is_error".into(), Value::Bool(true));
    } else if block.contains_key("is_error") {
        block.insert("is_error".into(), Value::Bool(false));
    }
    true
}

/// Render the model-visible messages of kept conversational records, in the canonical
/// Anthropic form, the way Claude Code 2.1.332 builds its request from a transcript:
///
/// * a run of assistant records with one `message.id` → one assistant message (blocks in
///   line order); thinking-only and whitespace-only assistant messages are dropped; records of
///   that id after tool-result records only (results of calls that ended while the reply
///   streamed) join the same message, and their results the one user message after it;
/// * a user record → a user message (a string prompt becomes one text block);
/// * the attachments that follow a user record (until the next user/assistant record) are
///   grouped with it: `renderedRole: "user"` ones become text blocks (`rendered` + `"\n"`)
///   placed before a prompt's text or after tool results; `renderedRole: "system"` ones become
///   one `role: "system"` message after it, their `<system-reminder>` bodies joined by a
///   blank line; attachments without `rendered` are not model-visible;
/// * consecutive user messages are merged (as the API does).
pub fn render_messages(records: &[&Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    // The last assistant message pushed: its index in `out` and its `message.id`.
    let mut last_assistant: Option<(usize, Option<String>)> = None;
    let mut i = 0;
    while i < records.len() {
        let r = records[i];
        let ty = r.get("type").and_then(Value::as_str).unwrap_or("");
        match ty {
            "assistant" => {
                let id = r
                    .pointer("/message/id")
                    .and_then(Value::as_str)
                    .map(String::from);
                let mut blocks: Vec<Value> = Vec::new();
                let mut j = i;
                while j < records.len() {
                    let rj = records[j];
                    let tyj = rj.get("type").and_then(Value::as_str).unwrap_or("");
                    if tyj != "assistant" {
                        break;
                    }
                    let idj = rj
                        .pointer("/message/id")
                        .and_then(Value::as_str)
                        .map(String::from);
                    if j > i && (idj != id || id.is_none()) {
                        break;
                    }
                    blocks.extend(content_blocks(rj));
                    j += 1;
                }
                i = j;
                let meaningful =
                    blocks
                        .iter()
                        .any(|b| match b.get("type").and_then(Value::as_str) {
                            Some("thinking") | Some("redacted_thinking") => false,
                            Some("text") => b
                                .get("text")
                                .and_then(Value::as_str)
                                .is_some_and(|t| !t.trim().is_empty()),
                            _ => true,
                        });
                // A tool that finished while the reply was still streaming (an unknown tool's
                // error, a fast call of a parallel batch) has its result record written
                // between the reply's records: Claude merges the reply's later blocks into
                // its message all the same, and the results after it.
                let earlier = last_assistant
                    .as_ref()
                    .filter(|(_, prev)| id.is_some() && *prev == id)
                    .map(|(at, _)| *at)
                    .filter(|&at| out[at + 1..].iter().all(only_tool_results));
                if let Some(at) = earlier {
                    if let Some(Value::Array(a)) = out[at].get_mut("content") {
                        a.extend(blocks);
                    }
                } else if meaningful {
                    out.push(json!({"role": "assistant", "content": blocks}));
                    last_assistant = Some((out.len() - 1, id));
                }
            }
            "user" | "attachment" => {
                // The anchor user record (if any) and the attachments that follow it.
                let (anchor, mut j) = if ty == "user" {
                    (Some(r), i + 1)
                } else {
                    (None, i)
                };
                let mut user_atts: Vec<Value> = Vec::new();
                let mut system_texts: Vec<String> = Vec::new();
                while j < records.len()
                    && records[j].get("type").and_then(Value::as_str) == Some("attachment")
                {
                    let a = records[j];
                    let rendered: Vec<String> = a
                        .get("rendered")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|x| x.get("content").and_then(Value::as_str).map(String::from))
                        .collect();
                    match a.get("renderedRole").and_then(Value::as_str) {
                        Some("system") => {
                            system_texts.extend(rendered.iter().map(|s| strip_reminder(s)))
                        }
                        Some("user") => user_atts.extend(
                            rendered
                                .iter()
                                .map(|s| json!({"type": "text", "text": format!("{s}\n")})),
                        ),
                        _ => {}
                    }
                    j += 1;
                }
                i = j;
                let mut content: Vec<Value> = Vec::new();
                if let Some(u) = anchor {
                    let own: Vec<Value> = match u.pointer("/message/content") {
                        Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
                        Some(Value::Array(a)) => a.clone(),
                        _ => Vec::new(),
                    };
                    let is_results = own
                        .iter()
                        .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"));
                    if is_results {
                        content.extend(own);
                        content.extend(user_atts);
                    } else {
                        content.extend(user_atts);
                        content.extend(own);
                    }
                } else {
                    content.extend(user_atts);
                }
                if !content.is_empty() {
                    push_user(&mut out, content);
                }
                if !system_texts.is_empty() {
                    out.push(json!({"role": "system", "content": [{"type": "text", "text": system_texts.join("\n\n")}]}));
                }
            }
            _ => i += 1, // system records, progress: not model-visible
        }
    }
    out.into_iter()
        .map(|m| canonical_anthropic_message(&m))
        .collect()
}

/// A user message that holds tool results only.
fn only_tool_results(m: &Value) -> bool {
    m.get("role").and_then(Value::as_str) == Some("user")
        && m.get("content").and_then(Value::as_array).is_some_and(|a| {
            a.iter()
                .all(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        })
}

fn push_user(out: &mut Vec<Value>, content: Vec<Value>) {
    if let Some(last) = out.last_mut() {
        if last.get("role").and_then(Value::as_str) == Some("user") {
            if let Some(Value::Array(a)) = last.get_mut("content") {
                a.extend(content);
                return;
            }
        }
    }
    out.push(json!({"role": "user", "content": content}));
}

fn strip_reminder(s: &str) -> String {
    s.strip_prefix("<system-reminder>\n")
        .and_then(|t| t.strip_suffix("\n</system-reminder>"))
        .unwrap_or(s)
        .to_string()
}

/// The message hashes of the model request Claude recorded right after `after_pos` (its
/// `api-request` record: `base` request's first `keep` hashes + `tail`), if there is one
/// before the next assistant record.
fn recorded_request_hashes(lines: &[Line], after_pos: usize) -> Option<Vec<String>> {
    let mut by_id: HashMap<String, Vec<String>> = HashMap::new();
    for (pos, l) in lines.iter().enumerate() {
        if l.ty() == "assistant" && pos > after_pos {
            return None;
        }
        if l.ty() != "api-request" {
            continue;
        }
        let keep = l.v.get("keep").and_then(Value::as_u64).unwrap_or(0) as usize;
        let mut list: Vec<String> = match l.v.get("base").and_then(Value::as_str) {
            Some(b) => by_id.get(b)?.iter().take(keep).cloned().collect(),
            None => Vec::new(),
        };
        if list.len() != keep {
            return None;
        }
        list.extend(
            l.v.get("tail")?
                .as_array()?
                .iter()
                .filter_map(|h| h.as_str().map(String::from)),
        );
        if pos > after_pos {
            return Some(list);
        }
        if let Some(id) = l.v.get("id").and_then(Value::as_str) {
            by_id.insert(id.to_string(), list);
        }
    }
    None
}

/// The messages Claude stored in `api-request-blob` records, keyed by the canonical JSON of
/// their `role` and `content` only.
fn recorded_blobs(lines: &[Line]) -> HashMap<String, Value> {
    let mut out = HashMap::new();
    for l in lines.iter().filter(|l| l.ty() == "api-request-blob") {
        if let Some(m) = l.v.get("message") {
            let full = canonical_anthropic_message(m);
            out.insert(role_content_key(&full), full);
        }
    }
    out
}

pub(crate) fn role_content_key(m: &Value) -> String {
    crate::digest::canonical_json(&json!({"role": m.get("role"), "content": m.get("content")}))
}

/// Claude sends some harness turns with extra per-turn keys (the context `system` turn
/// carries `output_config: {effort}`) that the transcript does not hold; the session's
/// `api-request-blob` records do. A rendered message whose role and content equal a recorded
/// blob's takes the blob's exact form.
pub(crate) fn with_recorded_extras(
    messages: Vec<Value>,
    blobs: &HashMap<String, Value>,
) -> Vec<Value> {
    messages
        .into_iter()
        .map(|m| match blobs.get(&role_content_key(&m)) {
            Some(b) => b.clone(),
            None => m,
        })
        .collect()
}

/// Parse an RFC 3339 timestamp.
fn parse_ts(s: &str) -> Option<std::time::SystemTime> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    let nanos = t.unix_timestamp_nanos();
    if nanos < 0 {
        return None;
    }
    Some(std::time::UNIX_EPOCH + std::time::Duration::from_nanos(nanos as u64))
}

/// Set the mtimes for Claude's read-file state (see the module docs). Returns the files set.
fn set_read_state_mtimes(
    records: &[&Value],
    original_cwd: Option<&Path>,
    workspace: &Path,
) -> Vec<(PathBuf, std::time::SystemTime)> {
    let mut last: BTreeMap<PathBuf, std::time::SystemTime> = BTreeMap::new();
    let ws = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    for r in records {
        if r.get("type").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        let Some(ts) = r
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(parse_ts)
        else {
            continue;
        };
        for b in content_blocks(r) {
            if b.get("type").and_then(Value::as_str) != Some("tool_use") {
                continue;
            }
            let name = b.get("name").and_then(Value::as_str).unwrap_or("");
            let key = match name {
                "Read" | "Write" | "Edit" | "MultiEdit" => "file_path",
                "NotebookEdit" => "notebook_path",
                _ => continue,
            };
            let Some(p) = b.pointer(&format!("/input/{key}")).and_then(Value::as_str) else {
                continue;
            };
            let p = Path::new(p);
            let rebased = if p.is_relative() {
                ws.join(p)
            } else if let Some(rest) = original_cwd.and_then(|c| p.strip_prefix(c).ok()) {
                ws.join(rest)
            } else {
                p.to_path_buf()
            };
            last.insert(rebased, ts);
        }
    }
    let mut set = Vec::new();
    for (p, ts) in last {
        let Ok(real) = std::fs::canonicalize(&p) else {
            continue;
        };
        if !real.starts_with(&ws) || !real.is_file() {
            continue;
        }
        if let Ok(f) = std::fs::File::options().write(true).open(&real) {
            if f.set_modified(ts).is_ok() {
                set.push((real, ts));
            }
        }
    }
    set
}

/// What [`rebuild_lines`] produced, before anything is written.
#[derive(Debug, Clone)]
pub struct RebuiltLines {
    pub session_id: String,
    /// The new session file's text (JSONL, trailing newline).
    pub text: String,
    pub records: u64,
    /// Canonical prefix with the spliced observations.
    pub prefix: Vec<Value>,
    /// Canonical prefix with the original observations (what the source session rendered).
    pub original_prefix: Vec<Value>,
    /// Call ids whose tool_result content changed.
    pub replaced: Vec<String>,
    /// The kept conversational records (after splicing), for the mtime pass.
    kept_records: Vec<Value>,
}

/// The pure part of rebuild: cut, splice, render. No file is written.
pub fn rebuild_lines(
    source: &Path,
    plan: &Plan,
    after_step: usize,
    observations: &BTreeMap<String, Observation>,
) -> Result<RebuiltLines, AdapterError> {
    if after_step == 0 || after_step > plan.batches.len() {
        return Err(terr(
            source,
            0,
            "after_step",
            format!("boundary {after_step} outside 1..={}", plan.batches.len()),
        ));
    }
    if after_step > plan.max_boundary() {
        return Err(terr(
            source,
            0,
            "after_step",
            format!(
                "batch {after_step} is incomplete (max boundary {})",
                plan.max_boundary()
            ),
        ));
    }
    let lines = read_lines(source)?;
    let batches = plan.batches.loaded()?;
    let kept_calls: BTreeSet<String> = batches[..after_step]
        .iter()
        .flat_map(|b| b.calls.iter().map(|c| c.call_id.clone()))
        .collect();
    let boundary_calls: Vec<String> = batches[after_step - 1]
        .calls
        .iter()
        .map(|c| c.call_id.clone())
        .collect();
    for id in &kept_calls {
        if !observations.contains_key(id) {
            return Err(terr(
                source,
                0,
                "observations",
                format!("no observation for call {id}"),
            ));
        }
    }
    let cut = compute_cut(source, &lines, &kept_calls, &boundary_calls)?;

    // Session id: every kept record that names one must name the same.
    let mut session_id = plan.session_id.clone();
    for &pos in &cut.kept {
        if let Some(s) = lines[pos].v.get("sessionId").and_then(Value::as_str) {
            match &session_id {
                None => session_id = Some(s.to_string()),
                Some(x) if x == s => {}
                Some(x) => {
                    return Err(terr(
                        source,
                        lines[pos].idx + 1,
                        "sessionId",
                        format!("{s} differs from the session id {x}"),
                    ));
                }
            }
        }
    }
    let session_id = session_id.ok_or_else(|| terr(source, 0, "sessionId", "no session id"))?;
    if uuid::Uuid::parse_str(&session_id).is_err() {
        return Err(terr(
            source,
            0,
            "sessionId",
            format!("{session_id} is not a UUID"),
        ));
    }

    // Splice the observations.
    let mut replaced: Vec<String> = Vec::new();
    let mut new_values: HashMap<usize, Value> = HashMap::new();
    for &pos in &cut.conversational {
        let l = &lines[pos];
        let ids = l.result_ids();
        if ids.is_empty() {
            continue;
        }
        let mut v = l.v.clone();
        let mut changed = false;
        if let Some(Value::Array(blocks)) = v.pointer_mut("/message/content") {
            for b in blocks.iter_mut() {
                let Some(obj) = b.as_object_mut() else {
                    continue;
                };
                if obj.get("type").and_then(Value::as_str) != Some("tool_result") {
                    continue;
                }
                let id = obj
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                if let Some(obs) = observations.get(&id) {
                    if splice_block(obj, obs) {
                        changed = true;
                        replaced.push(id);
                    }
                }
            }
        }
        if changed {
            if let Some(o) = v.as_object_mut() {
                o.remove("toolUseResult");
            }
            new_values.insert(pos, v);
        }
    }
    let replaced_set: HashSet<&str> = replaced.iter().map(String::as_str).collect();

    let mut text = String::new();
    let mut records = 0u64;
    for &pos in &cut.kept {
        let l = &lines[pos];
        if l.ty() == "content-replacement" {
            let id = l.v.get("toolUseId").and_then(Value::as_str).unwrap_or("");
            if replaced_set.contains(id) || !kept_calls.contains(id) {
                continue;
            }
        }
        match new_values.get(&pos) {
            Some(v) => text.push_str(&serde_json::to_string(v).expect("JSON values serialize")),
            None => text.push_str(&l.raw),
        }
        text.push('\n');
        records += 1;
    }

    let originals: Vec<&Value> = cut.conversational.iter().map(|&p| &lines[p].v).collect();
    let spliced: Vec<Value> = cut
        .conversational
        .iter()
        .map(|&p| new_values.get(&p).unwrap_or(&lines[p].v).clone())
        .collect();
    let blobs = recorded_blobs(&lines);
    let original_prefix = with_recorded_extras(render_messages(&originals), &blobs);
    let prefix = with_recorded_extras(render_messages(&spliced.iter().collect::<Vec<_>>()), &blobs);
    let last_role = prefix
        .last()
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str);
    if !matches!(last_role, Some("user") | Some("system")) {
        return Err(terr(
            source,
            lines[cut.boundary].idx + 1,
            "prefix",
            "the rendered prefix does not end with the tool results",
        ));
    }

    // Self-check against the request Claude itself recorded after the boundary.
    if let Some(hashes) = recorded_request_hashes(&lines, cut.leaf) {
        let mine: Vec<String> = original_prefix.iter().map(claude_message_sha256).collect();
        if mine != hashes {
            let i = mine
                .iter()
                .zip(&hashes)
                .position(|(a, b)| a != b)
                .unwrap_or(mine.len().min(hashes.len()));
            return Err(AdapterError::Unsupported(format!(
                "the prefix rendered from the session differs from the request Claude recorded after batch {after_step} \
                 (first difference at message {i}; {} rendered vs {} recorded messages)",
                mine.len(),
                hashes.len()
            )));
        }
    }
    Ok(RebuiltLines {
        session_id,
        text,
        records,
        prefix,
        original_prefix,
        replaced,
        kept_records: spliced,
    })
}

/// Rebuild the session for `req` (see the module docs): writes the session into the isolated
/// config dir under `req.state_dir` and the artifact copy, and sets the workspace mtimes.
pub fn rebuild(req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
    rebuild_with(req, true)
}

/// [`rebuild`] without touching the native session file or the workspace: computes the same
/// session and writes only the artifact copy (for a run resumed during its continuation).
pub fn rebuild_artifact_only(req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
    rebuild_with(req, false)
}

fn rebuild_with(req: &RebuildRequest, write_native: bool) -> Result<RebuiltSession, AdapterError> {
    let observations = req.observation_map()?;
    let rebuilt = rebuild_lines(req.source, req.plan, req.after_step, &observations)?;
    let home = ClaudeHome::new(req.state_dir);
    let cwd = std::fs::canonicalize(req.workspace).map_err(|e| io_err(req.workspace, e))?;
    let native_path = home.session_path(&cwd, &rebuilt.session_id)?;
    if write_native {
        let dir = native_path.parent().expect("session path has a parent");
        std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
        write_file(&native_path, rebuilt.text.as_bytes())?;
    }
    if let Some(parent) = req.artifact_path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
    }
    write_file(req.artifact_path, rebuilt.text.as_bytes())?;
    if write_native && req.touch_workspace {
        let original_cwd = req.plan.original_cwd.clone().or_else(|| {
            rebuilt
                .kept_records
                .iter()
                .find_map(|r| r.get("cwd").and_then(Value::as_str).map(PathBuf::from))
        });
        let refs: Vec<&Value> = rebuilt.kept_records.iter().collect();
        set_read_state_mtimes(&refs, original_cwd.as_deref(), &cwd);
    }
    Ok(RebuiltSession {
        native_path,
        artifact_path: req.artifact_path.to_path_buf(),
        digest: crate::digest::blake3(rebuilt.text.as_bytes()),
        records: rebuilt.records,
        session_id: rebuilt.session_id,
        prefix: rebuilt.prefix,
    })
}

/// Write a file atomically (temp file + rename), mode 0600.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), AdapterError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| io_err(&tmp, e))?;
    f.write_all(bytes).map_err(|e| io_err(&tmp, e))?;
    f.sync_all().map_err(|e| io_err(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io_err(path, e))
}

/// Write `userID` into the isolated Claude state file(s) so that
/// `metadata.user_id.device_id` matches the original run (optional).
pub fn write_user_id(home: &ClaudeHome, user_id: &str) -> Result<(), AdapterError> {
    let v = json!({"userID": user_id});
    for p in [
        home.config_dir.join(".claude.json"),
        home.home.join(".claude.json"),
    ] {
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(|e| io_err(d, e))?;
        }
        write_file(&p, format!("{}\n", v).as_bytes())?;
    }
    Ok(())
}
