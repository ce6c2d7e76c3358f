//! A minimal `Plan` built by hand from a recorded Claude session (the real parser lives in
//! the Claude adapter; tests only need batches with call ids and the original observations).
#![allow(dead_code)]

use pvisor::kit::{Batch, Locator, Observation, Plan, ToolCall};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn observation_of(block: &Value) -> Observation {
    let is_error = block["is_error"].as_bool().unwrap_or(false);
    match &block["content"] {
        Value::String(s) => Observation {
            text: s.clone(),
            is_error,
            native: None,
        },
        Value::Array(a) => Observation {
            text: a
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            is_error,
            native: Some(Value::Array(a.clone())),
        },
        Value::Null => Observation {
            text: String::new(),
            is_error,
            native: Some(Value::Null),
        },
        other => Observation {
            text: other.to_string(),
            is_error,
            native: Some(other.clone()),
        },
    }
}

/// Batches = tool_use blocks grouped by assistant `message.id`, in order of appearance.
pub fn plan_from_session(path: &Path) -> Plan {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut results: BTreeMap<String, Observation> = BTreeMap::new();
    for l in &lines {
        if l["type"] == "user" {
            for b in l["message"]["content"].as_array().into_iter().flatten() {
                if b["type"] == "tool_result" {
                    results.insert(b["tool_use_id"].as_str().unwrap().into(), observation_of(b));
                }
            }
        }
    }
    let mut msg_ids: Vec<String> = Vec::new();
    let mut batches: Vec<Batch> = Vec::new();
    let mut session_id = None;
    let mut cwd = None;
    for (i, l) in lines.iter().enumerate() {
        if session_id.is_none() {
            session_id = l["sessionId"].as_str().map(String::from);
        }
        if cwd.is_none() {
            cwd = l["cwd"].as_str().map(PathBuf::from);
        }
        if l["type"] != "assistant" {
            continue;
        }
        let mid = l["message"]["id"].as_str().unwrap().to_string();
        if !msg_ids.contains(&mid) {
            msg_ids.push(mid.clone());
        }
        let turn = msg_ids.iter().position(|m| *m == mid).unwrap() + 1;
        for b in l["message"]["content"].as_array().unwrap() {
            if b["type"] != "tool_use" {
                continue;
            }
            let id = b["id"].as_str().unwrap().to_string();
            let call = ToolCall {
                call_id: id.clone(),
                tool: b["name"].as_str().unwrap().into(),
                input: b["input"].clone(),
                original: results.get(&id).cloned(),
                locator: Locator {
                    line: i + 1,
                    native_id: Some(id.clone()),
                },
            };
            match batches.last_mut() {
                Some(bt) if bt.locator.native_id.as_deref() == Some(mid.as_str()) => {
                    bt.calls.push(call)
                }
                _ => batches.push(Batch {
                    index: batches.len() + 1,
                    calls: vec![call],
                    model_turn: turn,
                    locator: Locator {
                        line: i + 1,
                        native_id: Some(mid.clone()),
                    },
                    complete: false,
                }),
            }
        }
    }
    for b in &mut batches {
        b.complete = b.calls.iter().all(|c| c.original.is_some());
    }
    Plan {
        agent: "claude-code".into(),
        recorded_version: Some("2.1.332".into()),
        session_id,
        original_cwd: cwd,
        batches: batches.into(),
        model_turns: msg_ids.len(),
        native: Default::default(),
    }
}

/// The original observation of every call of batches 1..=n.
pub fn original_observations(plan: &Plan, n: usize) -> BTreeMap<String, Observation> {
    plan.batches.in_memory().unwrap()[..n]
        .iter()
        .flat_map(|b| b.calls.iter())
        .map(|c| (c.call_id.clone(), c.original.clone().unwrap()))
        .collect()
}

/// Reset `work` to the state after batches 1..=n of a recorded run: copy
/// `workspace-before/`, set the seed mtime, then apply the batches' effects (Bash commands
/// run with `bash -c` in `work`, Write/Edit/MultiEdit applied; read-only tools skipped).
/// Only the simple tools of the recorded fixtures are supported.
pub fn reset_workspace(recorded: &Path, work: &Path, plan: &Plan, n: usize) {
    let _ = std::fs::remove_dir_all(work);
    std::fs::create_dir_all(work).unwrap();
    copy_dir(&recorded.join("workspace-before"), work);
    for f in walk(work) {
        let file = std::fs::File::options().write(true).open(&f).unwrap();
        file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_767_225_600))
            .unwrap();
    }
    let cwd = plan.original_cwd.clone().unwrap();
    let map = |p: &str| -> PathBuf {
        let p = Path::new(p);
        match p.strip_prefix(&cwd) {
            Ok(rest) => work.join(rest),
            Err(_) => work.join(p),
        }
    };
    for b in &plan.batches.in_memory().unwrap()[..n] {
        for c in &b.calls {
            let i = &c.input;
            match c.tool.as_str() {
                "Bash" => {
                    let st = std::process::Command::new("bash")
                        .arg("-c")
                        .arg(i["command"].as_str().unwrap())
                        .current_dir(work)
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null())
                        .status()
                        .unwrap();
                    let _ = st;
                }
                "Write" => std::fs::write(
                    map(i["file_path"].as_str().unwrap()),
                    i["content"].as_str().unwrap(),
                )
                .unwrap(),
                "Edit" => {
                    let p = map(i["file_path"].as_str().unwrap());
                    let s = std::fs::read_to_string(&p).unwrap();
                    let (old, new) = (
                        i["old_string"].as_str().unwrap(),
                        i["new_string"].as_str().unwrap(),
                    );
                    let s = if i["replace_all"].as_bool().unwrap_or(false) {
                        s.replace(old, new)
                    } else {
                        s.replacen(old, new, 1)
                    };
                    std::fs::write(&p, s).unwrap();
                }
                _ => {}
            }
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).into_iter().flatten().flatten() {
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

fn walk(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
