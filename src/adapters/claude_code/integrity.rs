//! What a Claude Code session says about itself, checked, so that a damaged session is not
//! replayed silently. Claude Code 2.1.332 writes:
//!
//! - `api-request-shape`: the system prompt and tool list of the requests it sends, with
//!   `shapeHash`, the SHA-256 of the shape's canonical JSON;
//! - `api-request-blob`: each message it sent, once, with `hash`, the SHA-256 of the message's
//!   canonical JSON (the request records name their messages by these hashes, and the
//!   rebuild checks the prefix it renders against them);
//! - `prompt_snapshot` attachments: the system prompt (its parts, joined by a blank line, are
//!   the shape's last system block; `cliPrefix` its first) and the tools (each tool's
//!   `schema` is the shape's definition of that tool).
//!
//! A session without these records (earlier versions) is not checked for what it does not
//! write.

use super::parse::Record;
use crate::error::TrajectoryError;
use serde_json::Value;
use std::path::Path;

fn err(path: &Path, line: usize, field: &str, message: String) -> TrajectoryError {
    TrajectoryError::new(path, line, field, message)
}

fn sha256_canonical(v: &Value) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(
        crate::digest::canonical_json(v).as_bytes(),
    ))
}

/// Whether a prompt snapshot agrees with a request shape.
fn agrees(snapshot: &Value, shape: &Value) -> bool {
    let system: Vec<&str> = shape["system"]
        .as_array()
        .map(|a| a.iter().filter_map(|b| b["text"].as_str()).collect())
        .unwrap_or_default();
    let parts: Option<Vec<&str>> = snapshot["systemPrompt"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect());
    if parts.map(|p| p.join("\n\n")).as_deref() != system.last().copied() {
        return false;
    }
    if let Some(prefix) = snapshot.get("cliPrefix") {
        if prefix.as_str() != system.first().copied() {
            return false;
        }
    }
    let Some(tools) = snapshot.get("tools") else {
        return true;
    };
    let shape_tools = shape["tools"].as_array();
    tools.as_array().is_some_and(|ts| {
        ts.iter().all(|t| {
            let name = t["name"].as_str();
            shape_tools
                .and_then(|st| st.iter().find(|s| s["name"].as_str() == name))
                .is_some_and(|s| *s == t["schema"])
        })
    })
}

/// The keys of a `prompt_snapshot` attachment: those of the schema Claude reads it with
/// (2.1.332's bundled JavaScript; the genuine sessions of 2.1.286 and 2.1.332 in
/// `tests/fixtures/claude/` write a subset): its fields, and its flags (booleans). Claude
/// writes each flag only when its condition holds, so any of them may be absent.
const SNAPSHOT_FIELDS: [&str; 7] = [
    "type",
    "systemPrompt",
    "tools",
    "cliPrefix",
    "contextRendering",
    "systemTurnsAnsweredBy",
    "leadingTools",
];
const SNAPSHOT_FLAGS: [&str; 8] = [
    "reminderFold",
    "echoWireToolInputs",
    "systemTurns",
    "toolChangeHeader",
    "inlineTools",
    "keptReminders",
    "toolResultSafeguards",
    "effortAfterText",
];

/// The nearest prompt snapshot above a record on its chain (by `parentUuid`; a compact
/// boundary, which has none, ends the walk: what is above it is not loaded again).
struct SnapshotsAbove<'a> {
    records: &'a [Record],
    by_uuid: std::collections::HashMap<&'a str, usize>,
}

impl<'a> SnapshotsAbove<'a> {
    fn of(records: &'a [Record]) -> Self {
        let by_uuid = records
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.uuid.as_deref().map(|u| (u, i)))
            .collect();
        SnapshotsAbove { records, by_uuid }
    }

    /// The prompt snapshot before record `i` in the file.
    fn previous_snapshot(&self, i: usize) -> Option<usize> {
        self.records[..i]
            .iter()
            .rposition(|r| r.value["attachment"]["type"].as_str() == Some("prompt_snapshot"))
    }

    fn nearest(&self, i: usize) -> Option<usize> {
        let mut parent = self.records[i].parent_uuid.as_deref();
        // At most one step per record: a damaged file may link its records in a cycle.
        for _ in 0..self.records.len() {
            let j = *self.by_uuid.get(parent?)?;
            let r = &self.records[j];
            if r.value["attachment"]["type"].as_str() == Some("prompt_snapshot") {
                return Some(j);
            }
            parent = r.parent_uuid.as_deref();
        }
        None
    }
}

/// Check the records of one session.
pub fn check(path: &Path, records: &[Record]) -> Result<(), TrajectoryError> {
    let mut shapes: Vec<&Value> = Vec::new();
    for r in records {
        match r.kind.as_str() {
            "api-request-shape" => {
                let shape = r.value.get("shape").unwrap_or(&Value::Null);
                let want = r.value.get("shapeHash").and_then(Value::as_str);
                if want != Some(sha256_canonical(shape).as_str()) {
                    return Err(err(
                        path,
                        r.line,
                        "shapeHash",
                        "the request shape (system prompt and tools) does not have the hash Claude recorded: one of them was changed".into(),
                    ));
                }
                shapes.push(shape);
            }
            "api-request-blob" => {
                let message = r.value.get("message").unwrap_or(&Value::Null);
                let want = r.value.get("hash").and_then(Value::as_str);
                if want != Some(super::rebuild::claude_message_sha256(message).as_str()) {
                    return Err(err(
                        path,
                        r.line,
                        "hash",
                        "the stored message does not have the hash Claude recorded: one of them was changed".into(),
                    ));
                }
            }
            _ => {}
        }
    }
    let above = SnapshotsAbove::of(records);
    for (i, r) in records.iter().enumerate() {
        let Some(a) = r.value.get("attachment") else {
            continue;
        };
        if a.get("type").and_then(Value::as_str) != Some("prompt_snapshot") {
            // Only a prompt snapshot carries a system prompt: one under another kind lost its
            // own (Claude would skip it and resume against an earlier snapshot).
            if a.get("systemPrompt").is_some() {
                return Err(err(
                    path,
                    r.line,
                    "attachment.type",
                    "an attachment with a system prompt whose kind is not `prompt_snapshot`".into(),
                ));
            }
            continue;
        }
        // The types Claude reads them with.
        for (key, ok) in [
            (
                "systemPrompt",
                a.get("systemPrompt")
                    .is_none_or(|v| v.as_array().is_some_and(|x| x.iter().all(Value::is_string))),
            ),
            ("tools", a.get("tools").is_none_or(Value::is_array)),
            ("cliPrefix", a.get("cliPrefix").is_none_or(Value::is_string)),
            (
                "contextRendering",
                a.get("contextRendering").is_none_or(Value::is_string),
            ),
        ] {
            if !ok {
                return Err(err(
                    path,
                    r.line,
                    &format!("attachment.{key}"),
                    format!("`{key}` has the wrong type"),
                ));
            }
        }
        for key in SNAPSHOT_FLAGS {
            if a.get(key).is_some_and(|v| !v.is_boolean()) {
                return Err(err(
                    path,
                    r.line,
                    &format!("attachment.{key}"),
                    format!("`{key}` must be a boolean"),
                ));
            }
        }
        // Claude reads a snapshot by these keys: another is one of them renamed, and the
        // value it held would be lost when Claude resumes (known for the versions a
        // continuation supports).
        let known_keys = r
            .value
            .get("version")
            .and_then(Value::as_str)
            .is_some_and(|v| super::versions::CONTINUE_RANGE.contains(v));
        if let Some(key) = a.as_object().filter(|_| known_keys).and_then(|o| {
            o.keys().find(|k| {
                !SNAPSHOT_FIELDS.contains(&k.as_str()) && !SNAPSHOT_FLAGS.contains(&k.as_str())
            })
        }) {
            return Err(err(
                path,
                r.line,
                &format!("attachment.{key}"),
                format!(
                    "`{key}` is not a key of the prompt snapshots Claude Code writes ({})",
                    [&SNAPSHOT_FIELDS[..], &SNAPSHOT_FLAGS[..]]
                        .concat()
                        .join(", ")
                ),
            ));
        }
        // A snapshot without tools is a copy of the one before it on the chain (2.1.332's
        // writer of a snapshot that adds tools always writes them; the others copy the
        // earlier snapshot's tools when it lists any, and its `cliPrefix`). Checked where that
        // snapshot is also the one before it in the file, for the versions whose writers were
        // read: a compacted or rewound conversation may resume from one the chain does not
        // show.
        let before = above
            .nearest(i)
            .filter(|&p| known_keys && above.previous_snapshot(i) == Some(p))
            .map(|p| (&records[p].value["attachment"], p));
        if a.get("tools").is_none() && before.is_some() {
            let lists_tools =
                before.is_some_and(|(b, _)| b["tools"].as_array().is_some_and(|t| !t.is_empty()));
            let prefix_from_before = a
                .get("cliPrefix")
                .is_none_or(|c| before.is_some_and(|(b, _)| b.get("cliPrefix") == Some(c)));
            if lists_tools || !prefix_from_before {
                return Err(err(
                    path,
                    r.line,
                    "attachment.tools",
                    match before {
                        Some((_, p)) if lists_tools => format!("the prompt snapshot has no tools, and the one before it on the conversation's chain (line {}) lists some: Claude copies them into every later snapshot", records[p].line),
                        _ => "the prompt snapshot has no tools but a `cliPrefix` the snapshot before it on the conversation's chain does not have: Claude writes a new prefix only with the tools".to_string(),
                    },
                ));
            }
        }
        // Claude writes these two together (the same condition).
        if a.get("toolChangeHeader").is_some() != a.get("inlineTools").is_some() {
            return Err(err(
                path,
                r.line,
                "attachment.inlineTools",
                "`toolChangeHeader` and `inlineTools` are written together, and one is missing"
                    .into(),
            ));
        }
        // Each tool's own name and description are its schema's.
        for (i, t) in a
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if t.get("name") != t["schema"].get("name")
                || t.get("description") != t["schema"].get("description")
            {
                return Err(err(
                    path,
                    r.line,
                    &format!("attachment.tools[{i}]"),
                    "the tool's name or description differs from its schema's".into(),
                ));
            }
        }
        if !shapes.is_empty() && !shapes.iter().any(|s| agrees(a, s)) {
            return Err(err(
                path,
                r.line,
                "attachment.systemPrompt",
                "the prompt snapshot (system prompt, tools) differs from every request shape Claude recorded with a hash".into(),
            ));
        }
    }
    Ok(())
}
