//! Recording a genuine native session with the real agent CLI against the scripted model: the
//! part of an adapter that `pvisor certify` drives. A generated task is a list of
//! agent-neutral [`Step`]s; the adapter says which of its own tool calls performs each, how
//! its CLI is started headless on a prompt, where the session it wrote is, and which fields
//! of its requests are declared dynamic.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

use crate::scripted::{ToolCallSpec, Turn};

/// One agent-neutral step of a generated task (paths are relative to the workspace).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Step {
    /// A shell command (it may fail, print to stderr, print a lot, write files).
    Run { cmd: String },
    /// Create or overwrite a text file.
    Write { path: String, content: String },
    /// Read a file (it may be missing, empty, not UTF-8).
    Read { path: String },
    /// Replace `old` by `new` in a file (it may not apply).
    Edit {
        path: String,
        old: String,
        new: String,
    },
    /// Delete a file (it may be missing).
    Delete { path: String },
    /// Lines matching a regular expression, below the workspace.
    Search { pattern: String },
    /// Files matching a glob, below the workspace.
    List { glob: String },
    /// A command call whose command is a number, not a string: the agent answers with its own
    /// argument error and runs nothing.
    Malformed { number: u32 },
}

impl Step {
    /// Whether the step only reads (steps of one batch run concurrently in most agents, so a
    /// batch of several calls holds only these).
    pub fn reads_only(&self) -> bool {
        matches!(
            self,
            Step::Read { .. } | Step::Search { .. } | Step::List { .. }
        )
    }
}

/// What a recording needs: the agent, a fresh home, the workspace (already seeded), the
/// scripted model's address and the prompt.
#[derive(Debug, Clone)]
pub struct RecordRequest<'a> {
    pub entrypoint: &'a Path,
    /// A fresh, empty home for the agent (its config and sessions go there).
    pub home: &'a Path,
    pub work: &'a Path,
    /// `http://127.0.0.1:<port>` of the scripted model.
    pub base_url: &'a str,
    /// The key the scripted model requires ([`Recorder::api_key`]).
    pub api_key: &'a str,
    pub prompt: &'a str,
}

/// How to record this agent's sessions and compare its requests.
pub trait Recorder: Send + Sync {
    /// The agent's tool calls that perform `step` in `work` (usually one).
    fn calls(&self, step: &Step, work: &Path) -> Vec<ToolCallSpec>;
    /// The model's last turn, which ends the run: plain text by default; an agent that ends
    /// only on a command of its own (mini-swe-agent's submission) gets that call.
    fn last_turn(&self) -> Turn {
        Turn {
            text: Some("Done.".into()),
            ..Default::default()
        }
    }
    /// Whether the agent's main requests always offer tools (then a request without tools is
    /// a side request of the scripted model: titles, summaries).
    fn no_tools_is_side(&self) -> bool {
        true
    }
    /// The key the agent sends; the scripted model requires it.
    fn api_key(&self) -> &'static str {
        "pvisor-certify-key"
    }
    /// Files the agent needs in its workspace besides the task's (a project config naming the
    /// model provider), as (relative path, bytes); they are there in the recording and in
    /// every replay of it.
    fn workspace_files(&self) -> Vec<(String, Vec<u8>)> {
        vec![]
    }
    /// The agent CLI started headless on `req.prompt` (config written into `req.home` first).
    fn command(&self, req: &RecordRequest) -> Result<std::process::Command, String>;
    /// Called once the agent has exited (or failed): end what it leaves running.
    fn finished(&self, _req: &RecordRequest) {}
    /// The native session the run wrote (a file, or a folder), found from its home and its
    /// stdout.
    fn session(&self, req: &RecordRequest, stdout: &str) -> Result<PathBuf, String>;
    /// A request body without its declared dynamic fields (ids of a fresh home, per-turn
    /// metadata, wall times), so that the rest compares byte for byte.
    fn mask_request(&self, body: &Value) -> Value;
}

/// The environment variables common to every recorded agent: nothing of this machine's user
/// is inherited.
pub fn base_env(home: &Path) -> Vec<(String, String)> {
    [
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("HOME", &home.to_string_lossy()),
        ("SHELL", "/bin/bash"),
        ("LANG", "C.UTF-8"),
        ("TZ", "UTC"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// `s` as one single-quoted shell word.
pub fn shell_quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The first file below `dir` (searched depth first) whose name satisfies `wanted`.
pub fn find_file(dir: &Path, wanted: &dyn Fn(&str) -> bool) -> Option<PathBuf> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if wanted(&e.file_name().to_string_lossy()) {
                return Some(p);
            }
        }
    }
    None
}

/// The first JSON line of `stdout` that satisfies `wanted`.
pub fn stdout_event(stdout: &str, wanted: &dyn Fn(&Value) -> bool) -> Option<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| wanted(v))
}
