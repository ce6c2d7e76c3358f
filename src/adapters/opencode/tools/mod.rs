//! OpenCode 1.17.11's built-in tools, re-executed with its own output texts (read out of the
//! 1.17.11 binary's JavaScript and checked against the real CLI; docs/agents/opencode.md).
//!
//! Each tool returns what OpenCode stores in the tool part: the model-visible `output` (or
//! the error text of a failed call, which the model sees verbatim), the `title` and the
//! `metadata`. Title and metadata travel in [`Observation::native`] so that rebuild writes
//! a consistent part.

// A tool's schema error is an ordinary tool result (`Produced`, the text the model sees),
// carried in `Err` by the parameter helpers so that `?` ends the call early: its size is
// that of every result, and boxing it would buy nothing.
#![allow(clippy::result_large_err)]

mod bash;
mod edit;
mod read;
mod search;
mod truncate;
mod write;

use std::path::{Component, Path, PathBuf};

use serde_json::{json, Value};

use crate::error::ExecError;
use crate::kit::{ExecContext, Observation, ToolCall, ToolClass, ToolOutcome};

/// The tools a replay re-executes.
pub const REPLAYABLE: &[&str] = &[
    "bash",
    "read",
    "write",
    "edit",
    "glob",
    "grep",
    "todowrite",
    "invalid",
];

/// Tools whose observation cannot be regenerated in a sandbox (network, sub-agents, the
/// user's skills and questions).
pub const NON_REGENERABLE: &[&str] = &[
    "webfetch",
    "websearch",
    "codesearch",
    "task",
    "skill",
    "question",
];

pub fn classify(call: &ToolCall) -> ToolClass {
    match call.tool.as_str() {
        "read" | "glob" | "grep" | "invalid" | "todowrite" => ToolClass::ReadOnly,
        "bash" | "write" | "edit" => ToolClass::Mutating,
        t if NON_REGENERABLE.contains(&t) => ToolClass::NonRegenerable,
        _ => ToolClass::Unknown,
    }
}

/// What a tool produced: the part's `output` (or `error`), `title` and `metadata`.
#[derive(Debug, Clone, PartialEq)]
pub struct Produced {
    pub output: String,
    pub error: bool,
    pub title: String,
    pub metadata: Value,
}

impl Produced {
    pub fn ok(output: impl Into<String>, title: impl Into<String>, metadata: Value) -> Self {
        Produced {
            output: output.into(),
            error: false,
            title: title.into(),
            metadata,
        }
    }
    pub fn err(message: impl Into<String>) -> Self {
        Produced {
            output: message.into(),
            error: true,
            title: String::new(),
            metadata: json!({}),
        }
    }
}

/// Where OpenCode's own files of the replay live (the isolated data dir the continuation
/// uses too: full outputs of truncated tools are saved there).
#[derive(Debug, Clone)]
pub struct Env {
    /// The instance directory: the session's directory, which the workspace stands in for.
    pub directory: PathBuf,
    /// The git root above `directory`, else `/` (titles are relative to it).
    pub worktree: PathBuf,
    /// `$XDG_DATA_HOME/opencode` of the isolated home.
    pub data_dir: PathBuf,
    /// The isolated home (bash's `HOME`).
    pub home: PathBuf,
    pub log_dir: PathBuf,
}

impl Env {
    pub fn new(ctx: &ExecContext) -> Env {
        let home = super::rebuild::home_dir(&ctx.state_dir);
        Env {
            directory: ctx.workspace.clone(),
            worktree: git_root(&ctx.workspace).unwrap_or_else(|| PathBuf::from("/")),
            data_dir: super::rebuild::data_dir(&home),
            home,
            log_dir: ctx.log_dir.clone(),
        }
    }

    /// `path.resolve(directory, p)`.
    pub fn resolve(&self, p: &str) -> PathBuf {
        normalize(&self.directory.join(p))
    }

    /// `path.relative(worktree, p)`.
    pub fn title_of(&self, p: &Path) -> String {
        relative(&self.worktree, p)
    }
}

fn git_root(dir: &Path) -> Option<PathBuf> {
    let mut d = Some(dir);
    while let Some(x) = d {
        if x.join(".git").exists() {
            return Some(x.to_path_buf());
        }
        d = x.parent();
    }
    None
}

/// Lexical normalization (`path.resolve` without touching the file system).
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push("/");
    }
    out
}

/// `path.relative(from, to)` for absolute, normalized paths.
pub fn relative(from: &Path, to: &Path) -> String {
    let f: Vec<_> = from.components().collect();
    let t: Vec<_> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = std::iter::repeat_n("..".to_string(), f.len() - common).collect();
    parts.extend(
        t[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

/// A required string parameter, or the schema error OpenCode gives for a missing one.
fn string_param<'a>(tool: &str, input: &'a Value, key: &str) -> Result<&'a str, Produced> {
    match input.get(key) {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(invalid(tool, &format!("Missing key\n  at [\"{key}\"]"))),
        Some(v) => Err(invalid(
            tool,
            &format!(
                "Expected string, got {}\n  at [\"{key}\"]",
                super::js::stringify(v, 0)
            ),
        )),
    }
}

/// An optional string parameter.
fn opt_string<'a>(tool: &str, input: &'a Value, key: &str) -> Result<Option<&'a str>, Produced> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(invalid(
            tool,
            &format!(
                "Expected string, got {}\n  at [\"{key}\"]",
                super::js::stringify(v, 0)
            ),
        )),
    }
}

/// The schema error OpenCode gives for `input` of a replayable tool (its required and typed
/// parameters), or `None` when the arguments fit. A call OpenCode stored as `completed`
/// passed its schema (the integrity check); a replayed call is checked here before its tool
/// runs, so the parse and the execution refuse the same arguments.
pub fn schema_error(tool: &str, input: &Value) -> Option<String> {
    check_schema(tool, input).err().map(|p| p.output)
}

/// [`schema_error`] as the tool result the model sees.
fn check_schema(tool: &str, input: &Value) -> Result<(), Produced> {
    match tool {
        "bash" => {
            string_param(tool, input, "command")?;
            bash::timeout_of(input)?;
        }
        "read" => {
            string_param(tool, input, "filePath")?;
            read::usize_param(input, "offset")?;
            read::usize_param(input, "limit")?;
        }
        "write" => {
            string_param(tool, input, "filePath")?;
            string_param(tool, input, "content")?;
        }
        "edit" => {
            for k in ["filePath", "oldString", "newString"] {
                string_param(tool, input, k)?;
            }
        }
        "glob" => {
            string_param(tool, input, "pattern")?;
            opt_string(tool, input, "path")?;
        }
        "grep" => {
            string_param(tool, input, "pattern")?;
            opt_string(tool, input, "path")?;
            opt_string(tool, input, "include")?;
        }
        "todowrite" if !input.get("todos").is_some_and(Value::is_array) => {
            return Err(todowrite(input));
        }
        _ => {}
    }
    Ok(())
}

/// The error of `Tool.define` for arguments its schema rejects.
fn invalid(tool: &str, detail: &str) -> Produced {
    Produced::err(format!(
        "The {tool} tool was called with invalid arguments: SchemaError({detail}).\nPlease rewrite the input so it satisfies the expected schema."
    ))
}

/// OpenCode's tools for one replay process: the instruction files the model has seen
/// (earlier reads' `metadata.loaded`) and those the current reply's reads claimed.
pub struct Runner {
    env: Env,
    ctx: ExecContext,
    instructions: read::Instructions,
}

impl Runner {
    /// `completed`: the calls that already ran (after a crash), whose reads loaded
    /// instruction files the model has seen.
    pub fn new(ctx: &ExecContext, completed: &[(ToolCall, Observation)]) -> Runner {
        let mut instructions = read::Instructions::default();
        for (call, obs) in completed {
            if call.tool != "read" {
                continue;
            }
            let from_meta = obs
                .native
                .as_ref()
                .and_then(|n| n.pointer("/metadata/loaded"))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                });
            match from_meta {
                Some(l) => instructions.loaded.extend(l),
                None => instructions.loaded.extend(
                    obs.text
                        .lines()
                        .filter_map(|l| l.strip_prefix("Instructions from: "))
                        .map(str::to_string),
                ),
            }
        }
        Runner {
            env: Env::new(ctx),
            ctx: ctx.clone(),
            instructions,
        }
    }
}

impl crate::kit::ToolRunner for Runner {
    fn before_batch(&mut self, _batch: &crate::kit::Batch) {
        self.instructions.claimed.clear();
    }

    fn execute(&mut self, call: &ToolCall) -> Result<ToolOutcome, ExecError> {
        let (env, ctx) = (&self.env, &self.ctx);
        let started = std::time::Instant::now();
        let input = &call.input;
        let (produced, exit, touched) = match check_schema(&call.tool, input) {
            Err(refused) => (refused, None, vec![]),
            Ok(()) => match call.tool.as_str() {
                "bash" => bash::run(env, ctx, &call.call_id, input)?,
                "read" => (
                    read::run(env, ctx, input, &mut self.instructions)?,
                    None,
                    vec![],
                ),
                "write" => write::run(env, ctx, input)?,
                "edit" => edit::run(env, ctx, input)?,
                "glob" => (search::glob(env, ctx, input)?, None, vec![]),
                "grep" => (search::grep(env, ctx, input)?, None, vec![]),
                "todowrite" => (todowrite(input), None, vec![]),
                "invalid" => (
                    Produced::ok(
                        format!(
                            "The arguments provided to the tool are invalid: {}",
                            input
                                .get("error")
                                .and_then(Value::as_str)
                                .unwrap_or("undefined")
                        ),
                        "Invalid Tool",
                        json!({}),
                    ),
                    None,
                    vec![],
                ),
                other => {
                    return Err(ExecError::Unsupported {
                        tool: other.to_string(),
                        reason: "OpenCode's tool cannot be re-executed".into(),
                    })
                }
            },
        };
        // `Tool.define`: a result without `metadata.truncated` goes through the generic cut.
        let produced = if produced.error || produced.metadata.get("truncated").is_some() {
            produced
        } else {
            truncate::generic(env, &call.tool, produced)?
        };
        let mut metadata = produced.metadata;
        let attachments = metadata
            .as_object_mut()
            .and_then(|m| m.remove("attachments"));
        let mut native = json!({"title": produced.title, "metadata": metadata});
        if let Some(a) = attachments {
            native["attachments"] = a;
        }
        Ok(ToolOutcome {
            observation: Observation {
                text: produced.output,
                is_error: produced.error,
                native: Some(native),
            },
            exit_code: exit,
            duration_ms: started.elapsed().as_millis() as u64,
            touched,
        })
    }
}

fn todowrite(input: &Value) -> Produced {
    let todos = match input.get("todos") {
        Some(t @ Value::Array(_)) => t.clone(),
        None | Some(Value::Null) => return invalid("todowrite", "Missing key\n  at [\"todos\"]"),
        Some(_) => return invalid("todowrite", "Expected array\n  at [\"todos\"]"),
    };
    let open = todos
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t.get("status").and_then(Value::as_str) != Some("completed"))
        .count();
    Produced::ok(
        super::js::stringify(&todos, 2),
        format!("{open} todos"),
        json!({"todos": todos}),
    )
}

/// Masks of the observation text fields that differ by nature between runs: where a
/// truncated output was saved, and the order of search results (ripgrep walks in parallel).
pub fn mask_dynamic(call: &ToolCall, text: &str) -> String {
    let saved = regex::Regex::new(r"Full output saved to: \S+").expect("valid regex");
    let text = saved
        .replace_all(text, "Full output saved to: <path>")
        .into_owned();
    match call.tool.as_str() {
        "glob" => {
            let mut lines: Vec<&str> = text.lines().collect();
            let end = lines
                .iter()
                .position(|l| l.is_empty())
                .unwrap_or(lines.len());
            lines[..end].sort_unstable();
            lines.join("\n")
        }
        "grep" => {
            // `Found N matches`, then one group per file: a `path:` line (no indent) and its
            // `  Line k: …` lines (a matched line's own newline leaves blank lines inside a
            // group), then notes such as `(Results are truncated…)`. Groups come in ripgrep's
            // walk order: compared as a sorted set.
            let mut lines = text.lines();
            let head = lines.next().unwrap_or("");
            let mut groups: Vec<Vec<&str>> = Vec::new();
            let mut notes: Vec<&str> = Vec::new();
            for l in lines {
                let unindented = !l.is_empty() && !l.starts_with(' ');
                if unindented && l.ends_with(':') {
                    groups.push(vec![l]);
                } else if unindented {
                    notes.push(l);
                } else if let Some(g) = groups.last_mut() {
                    g.push(l);
                } else {
                    notes.push(l);
                }
            }
            let mut groups: Vec<String> = groups
                .iter()
                .map(|g| g.join("\n").trim_end().to_string())
                .collect();
            groups.sort_unstable();
            format!("{head}\n{}\n{}", groups.join("\n\n"), notes.join("\n"))
        }
        _ => text,
    }
}

/// The path inside the workspace (symlinks resolved), or the workspace error.
fn confined(ctx: &ExecContext, p: &Path) -> Result<PathBuf, ExecError> {
    crate::workspace::confine::confine(&ctx.workspace, p)
}

/// [`confined`] for a path the tool writes (no hard link to a file outside).
fn confined_for_write(ctx: &ExecContext, p: &Path) -> Result<PathBuf, ExecError> {
    crate::workspace::confine::confine_for_write(&ctx.workspace, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grep_call() -> ToolCall {
        ToolCall {
            call_id: "c".into(),
            tool: "grep".into(),
            input: json!({}),
            original: None,
            locator: Default::default(),
        }
    }

    /// The two walk orders ripgrep gave for one recording (a matched line's newline leaves
    /// a blank line inside a group) mask to the same text; a changed match does not.
    #[test]
    fn grep_groups_compare_in_any_walk_order() {
        let a = "Found 3 matches\n/w/src/util.py:\n  Line 1: def add(a, b):\n\n  Line 5: def  sub(a,  b):\n\n\n/w/src/main.py:\n  Line 1: def main():\n";
        let b = "Found 3 matches\n/w/src/main.py:\n  Line 1: def main():\n\n\n/w/src/util.py:\n  Line 1: def add(a, b):\n\n  Line 5: def  sub(a,  b):\n";
        let c = b.replace("def main", "def mane");
        let call = grep_call();
        assert_eq!(mask_dynamic(&call, a), mask_dynamic(&call, b));
        assert_ne!(mask_dynamic(&call, a), mask_dynamic(&call, &c));
        let noted = format!("{a}\n(Results are truncated: showing first 100 results. Consider using a more specific path or pattern.)");
        assert!(mask_dynamic(&call, &noted).ends_with("pattern.)"));
    }

    #[test]
    fn the_schema_check_refuses_what_the_tools_refuse() {
        assert_eq!(
            schema_error("read", &json!({"filePath": "a", "offset": 3})),
            None
        );
        let offset = schema_error("read", &json!({"filePath": "a", "offset": "x"})).unwrap();
        assert!(offset.starts_with("The read tool was called with invalid arguments"));
        assert!(schema_error("bash", &json!({"command": "ls", "timeout": "x"})).is_some());
        assert!(
            schema_error("edit", &json!({"filePath": "a", "oldString": "b"}))
                .unwrap()
                .contains("newString")
        );
        assert!(schema_error("todowrite", &json!({"todos": {}})).is_some());
        assert_eq!(schema_error("webfetch", &json!(5)), None);
    }
}
