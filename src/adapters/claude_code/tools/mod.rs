//! Re-execution of Claude Code 2.1.332's native tools.
//!
//! Each tool produces exactly the `tool_result.content` text (and `is_error`) Claude Code
//! puts in front of the model, given the same sandbox state. The texts were read in the
//! 2.1.332 bundle; each file cites the module (`chunk-*.js`) and function it follows.
//!
//! Claude Code's tools are not stateless: they share per-session state that the replay
//! must carry from one call to the next, exactly as the real session did:
//! - the *read-file state* (`readFileState`: which files the model has read, their content
//!   and mtime at that moment), which decides whether Write/Edit refuse ("File has not been
//!   read yet", "modified since read") and whether their success text ends with
//!   " (file state is current in your context — no need to Read it back)";
//! - the shell's *current directory*: a `cd` inside the working directory carries to the
//!   next Bash call and relative paths of every tool resolve against it.
//!
//! That state lives in a [`ToolSession`]. [`execute`] uses one session per workspace
//! (a process-wide registry), so calls executed in order see the state the originals saw.
//! For crash resumption, [`ToolSession::seed`] rebuilds the state from calls that are not
//! re-executed (as Claude Code itself rebuilds it from the transcript on resume), and
//! [`ToolSession::observe_attachment`] applies Claude's between-turn re-reads
//! (`edited_text_file` attachment records) — feed it the chain's attachment records that
//! precede each batch.
//!
//! Start each replay with [`begin_session`]`(workspace, ToolConfig::for_session(&parsed))`:
//! the default configuration assumes the read guard applies, which is wrong for sessions
//! recorded with `--dangerously-skip-permissions`.
//!
//! Calls are refused (`ExecError::Unsupported`) when their output cannot be reproduced
//! faithfully (see `docs/agents/claude-code.md`); input that does not match the tool's
//! schema is refused with `ExecError::BadInput` (Claude's schema error text is not
//! reproduced).

pub mod bash;
pub mod edit;
pub mod glob;
pub mod grep;
pub mod ls;
pub mod notebook;
pub mod read;
pub(crate) mod text;
pub mod write;

use crate::adapters::claude_code::parse::ParsedSession;
use crate::error::ExecError;
use crate::kit::{ExecContext, Observation, ToolCall, ToolClass, ToolOutcome};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// How a tool call may be treated by replay (see [`ToolClass`]).
///
/// Read/Glob/Grep/LS are read-only; Bash/Write/Edit/MultiEdit/NotebookEdit mutate; sub-agent,
/// web, task and todo tools (and Bash with `run_in_background: true`) cannot be regenerated;
/// anything else is unknown and refused before anything runs.
pub fn classify(tool: &str, input: &Value) -> ToolClass {
    match tool {
        "Read" | "Glob" | "Grep" | "LS" => ToolClass::ReadOnly,
        "Bash" => {
            if input.get("run_in_background").and_then(Value::as_bool) == Some(true) {
                ToolClass::NonRegenerable
            } else {
                ToolClass::Mutating
            }
        }
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" => ToolClass::Mutating,
        "Agent" | "Task" | "TaskOutput" | "TodoWrite" | "WebFetch" | "WebSearch" | "BashOutput"
        | "KillShell" => ToolClass::NonRegenerable,
        t if t.starts_with("Task") => ToolClass::NonRegenerable,
        _ => ToolClass::Unknown,
    }
}

/// The argument types of Claude Code's tools (from their input schemas; arguments a schema
/// does not list are not checked here).
pub fn arg_types(tool: &str) -> Option<&'static [crate::kit::args::Arg]> {
    use crate::kit::args::Ty::*;
    Some(match tool {
        "Bash" => &[
            ("command", Str, true),
            ("timeout", Num, false),
            ("description", Str, false),
            ("run_in_background", Bool, false),
        ],
        "Read" => &[
            ("file_path", Str, true),
            ("offset", Num, false),
            ("limit", Num, false),
        ],
        "Write" => &[("file_path", Str, true), ("content", Str, true)],
        "Edit" => &[
            ("file_path", Str, true),
            ("old_string", Str, true),
            ("new_string", Str, true),
            ("replace_all", Bool, false),
        ],
        "Glob" => &[("pattern", Str, true), ("path", Str, false)],
        "Grep" => &[
            ("pattern", Str, true),
            ("path", Str, false),
            ("glob", Str, false),
            ("type", Str, false),
            ("output_mode", Str, false),
            ("-n", Bool, false),
            ("-i", Bool, false),
            ("multiline", Bool, false),
            ("-A", Num, false),
            ("-B", Num, false),
            ("-C", Num, false),
            ("head_limit", Num, false),
        ],
        "NotebookEdit" => &[("notebook_path", Str, true), ("new_source", Str, true)],
        _ => return None,
    })
}

/// Whether a recorded observation is Claude's answer to arguments that do not fit the tool,
/// given without running anything (`<tool_use_error>InputValidationError: Bash failed due
/// to the following issue…`).
pub fn is_argument_error(tool: &str, obs: &Observation) -> bool {
    obs.is_error
        && obs.text.starts_with(&format!(
            "<tool_use_error>InputValidationError: {tool} failed"
        ))
}

/// Claude Code's argument rules (`crate::kit::args`).
pub const ARGUMENTS: crate::kit::args::Rules = crate::kit::args::Rules {
    types: arg_types,
    is_answer: is_argument_error,
};

/// Whether the Read-before-write guard of Write/Edit applies.
///
/// In 2.1.332 the guard ("File has not been read yet. Read it first before writing to it.")
/// is skipped when writing the path is allowed without asking (`$ue` → `cLr` → `Pqe` in
/// `chunk-bqhgd24a.js`/`chunk-757mw3zq.js`): in `bypassPermissions` mode, and for paths an
/// allow rule or `acceptEdits` covers. A GrowthBook model list can re-enable it; that list
/// is empty by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadGuard {
    /// Write/Edit of an existing file need an earlier full Read.
    Enforce,
    /// Writing without a Read is allowed (bypassPermissions / acceptEdits).
    Skip,
}

/// Session-wide settings of the tools.
#[derive(Debug, Clone)]
pub struct ToolConfig {
    /// Claude's starting directory (`cwd` of the session). Defaults to the workspace.
    /// Messages like "Note: your current working directory is …" print it.
    pub cwd: Option<PathBuf>,
    /// The `tengu_tab_read_sep` feature flag: when on, Read numbers lines with `:` instead
    /// of a tab for files whose content starts with or contains a tab-indented line. Off in
    /// the recorded runs (the Read tool description then says "line number + tab").
    pub tab_aware_separator: bool,
    pub read_guard: ReadGuard,
    /// Where results over a tool's size threshold are saved (`<persisted-output>`).
    /// Claude uses `~/.claude/projects/<project>/<session>/tool-results/`; default here:
    /// `<log_dir>/tool-results`.
    pub tool_results_dir: Option<PathBuf>,
    /// Extra environment for Bash (on top of the inherited one and Claude's own
    /// `CLAUDECODE=1`, `GIT_EDITOR=true`).
    pub bash_env: Vec<(String, String)>,
    /// What the session's Claude Code version does differently (`versions::Behaviour`).
    /// `legacy_tools`: re-execute `LS` and `MultiEdit` (tools of Claude Code before 2.1). In
    /// 2.1.220..=2.1.332 they do not exist and a call gets `<tool_use_error>Error: No such
    /// tool available: LS</tool_use_error>` (recorded), which is what the default reproduces.
    pub behaviour: super::versions::Behaviour,
    /// Calls of a tool the request that made them did not offer (its `api-request-shape`
    /// lists the tools; sessions without one offer every tool): Claude answers them
    /// `No such tool available` without running anything.
    pub unoffered: std::collections::HashSet<String>,
}

impl Default for ToolConfig {
    fn default() -> Self {
        ToolConfig {
            cwd: None,
            tab_aware_separator: false,
            read_guard: ReadGuard::Enforce,
            tool_results_dir: None,
            bash_env: Vec::new(),
            behaviour: super::versions::Behaviour::default(),
            unoffered: Default::default(),
        }
    }
}

impl ToolConfig {
    /// Settings matching a recorded session: its cwd and permission mode.
    pub fn for_session(session: &ParsedSession) -> Self {
        let mode = session
            .chain
            .iter()
            .rev()
            .filter_map(|&i| {
                session.records[i]
                    .value
                    .get("permissionMode")
                    .and_then(Value::as_str)
            })
            .next()
            .map(str::to_owned);
        let behaviour = super::versions::Behaviour::of(
            session
                .recorded_version
                .as_deref()
                .and_then(super::versions::parse),
        );
        let read_guard = match mode.as_deref() {
            Some("bypassPermissions") | Some("acceptEdits") => ReadGuard::Skip,
            _ => ReadGuard::Enforce,
        };
        ToolConfig {
            cwd: session.original_cwd.clone(),
            read_guard,
            behaviour,
            unoffered: unoffered_calls(session),
            ..ToolConfig::default()
        }
    }
}

/// The names of the tools offered by the last request before record `before` (its
/// `api-request-shape` record: Claude writes one before each request whose system prompt and
/// tools are new); `None` for sessions that record no shape (before 2.1.332).
pub fn offered_tools(session: &ParsedSession, before: usize) -> Option<Vec<String>> {
    let tools = session.records[..before.min(session.records.len())]
        .iter()
        .rev()
        .find(|r| r.kind == "api-request-shape")?
        .value
        .pointer("/shape/tools")?
        .as_array()?;
    Some(
        tools
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str).map(String::from))
            .collect(),
    )
}

/// The calls whose tool the request that made them did not offer ([`offered_tools`]).
fn unoffered_calls(session: &ParsedSession) -> std::collections::HashSet<String> {
    session
        .calls
        .iter()
        .filter(|c| offered_tools(session, c.use_record).is_some_and(|t| !t.contains(&c.tool)))
        .map(|c| c.call_id.clone())
        .collect()
}

/// `chunk-bqhgd24a.js`: the runner's answer to a tool name it does not offer; for the
/// search tools a native build leaves out, with the Bash command to use instead.
fn no_such_tool(tool: &str) -> String {
    let instead = match tool {
        "Grep" => " Grep is not available in this session — search file contents with `grep` via the Bash tool instead.",
        "Glob" => " Glob is not available in this session — find files with `find` via the Bash tool instead.",
        _ => "",
    };
    let sep = if instead.is_empty() { "" } else { "." };
    format!("<tool_use_error>Error: No such tool available: {tool}{sep}{instead}</tool_use_error>")
}

/// What Claude remembers about a file the model has seen (`readFileState` entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileReadState {
    /// The content the model saw (LF line ends, no BOM).
    pub content: String,
    /// `floor(mtimeMs)` of the file when it was read or written.
    pub timestamp: i64,
    /// Read's `offset` (1 when not given); `None` after Write/Edit.
    pub offset: Option<i64>,
    /// Read's `limit`; `None` for whole reads and after Write/Edit.
    pub limit: Option<i64>,
    pub is_partial_view: bool,
    pub content_not_in_model_context: bool,
}

impl FileReadState {
    /// `fB`: the model saw the whole file in one piece.
    pub(crate) fn is_full(&self) -> bool {
        if self.offset.unwrap_or(1) > 1 || self.is_partial_view {
            return false;
        }
        match self.limit {
            None => true,
            Some(l) => {
                !self.content.is_empty() && (self.content.matches('\n').count() as i64) + 1 < l
            }
        }
    }

    /// `mQ`: full and in the model's context.
    pub(crate) fn in_context(&self) -> bool {
        self.is_full() && !self.content_not_in_model_context
    }
}

/// The mutable per-session state of the tools.
#[derive(Debug, Clone, Default)]
pub struct SessionState {
    /// Keyed by the resolved (workspace-confined, canonical) path.
    pub read_files: HashMap<PathBuf, FileReadState>,
    /// The keys of `read_files` in first-insertion order (Claude's `readFileState` is a
    /// JavaScript `Map`; Bash's "modified files" note lists them in that order).
    pub read_order: Vec<PathBuf>,
    /// The shell's current directory; `None` until the first call (then the start cwd).
    pub cwd: Option<PathBuf>,
    /// When the last call that may write files ended (see [`MTIME_SPACING`]).
    pub last_write: Option<Instant>,
}

/// The minimum time between two calls that may write files.
///
/// File timestamps come from the kernel's coarse clock (a few milliseconds per tick). The
/// original calls were separated by model round trips, a replay runs them back to back:
/// without spacing, two files written by consecutive calls could get the same mtime and
/// Grep (newest first) or Glob (oldest first) would order them differently from the
/// original run.
pub const MTIME_SPACING: std::time::Duration = std::time::Duration::from_millis(12);

impl SessionState {
    /// Record what the model now knows about a file (`readFileState.set`).
    pub fn remember(&mut self, path: PathBuf, state: FileReadState) {
        if !self.read_files.contains_key(&path) {
            self.read_order.push(path.clone());
        }
        self.read_files.insert(path, state);
    }
}

/// One Claude Code session's tools: configuration plus the state shared by its calls.
#[derive(Debug)]
pub struct ToolSession {
    config: ToolConfig,
    state: Mutex<SessionState>,
}

/// The result of a tool before it becomes a [`ToolOutcome`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Output {
    pub text: String,
    pub is_error: bool,
    /// The text came from the tool's result mapping (not a thrown error): Claude then
    /// replaces an empty text by "(<Tool> completed with no output)" and saves results
    /// over the tool's size threshold to a file.
    pub mapped: bool,
    pub native: Option<Value>,
    pub touched: Vec<PathBuf>,
    pub exit_code: Option<i32>,
}

impl Output {
    /// A successful result (`mapToolResultToToolResultBlockParam`).
    pub fn ok(text: impl Into<String>) -> Self {
        Output {
            text: text.into(),
            mapped: true,
            ..Default::default()
        }
    }

    /// A `validateInput` refusal: `<tool_use_error>…</tool_use_error>`, `is_error: true`
    /// (`chunk-bqhgd24a.js`, the `en` helper of the tool runner).
    pub fn validation(message: impl AsRef<str>) -> Self {
        Output {
            text: format!("<tool_use_error>{}</tool_use_error>", message.as_ref()),
            is_error: true,
            ..Default::default()
        }
    }

    /// An error thrown by the tool's `call`: the message as is (capped like `s9`/`cp` in
    /// `chunk-j4fv94pp.js`/`chunk-6bm6jz2w.js`), `is_error: true`.
    pub fn thrown(message: impl AsRef<str>) -> Self {
        Output {
            text: text::cap_error(message.as_ref()),
            is_error: true,
            ..Default::default()
        }
    }
}

/// What every tool gets.
pub(crate) struct Cx<'a> {
    pub exec: &'a ExecContext,
    pub config: &'a ToolConfig,
    pub state: &'a mut SessionState,
    pub call_id: &'a str,
}

impl Cx<'_> {
    /// A missing or wrong search path (Grep, Glob): thrown from the tool (bare text) from
    /// `versions::PATH_ERRORS_THROWN` on, refused by input validation before it.
    pub(crate) fn path_error(&self, message: String) -> Output {
        if self.config.behaviour.path_errors_thrown {
            Output::thrown(message)
        } else {
            Output::validation(message)
        }
    }
    /// Claude's current working directory (`ue()`): the shell cwd.
    pub fn cwd(&self) -> PathBuf {
        self.state.cwd.clone().unwrap_or_else(|| self.start_cwd())
    }

    /// The session's starting directory (`Ee()`).
    pub fn start_cwd(&self) -> PathBuf {
        self.config
            .cwd
            .clone()
            .unwrap_or_else(|| self.exec.workspace.clone())
    }

    /// `Ik`: expand `~` and resolve a relative path against the current directory
    /// (lexically, no symlinks).
    pub fn expand(&self, given: &str) -> PathBuf {
        let p = if given == "~" || given.starts_with("~/") {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/"));
            home.join(given.trim_start_matches('~').trim_start_matches('/'))
        } else {
            PathBuf::from(given)
        };
        let abs = if p.is_absolute() {
            p
        } else {
            self.cwd().join(p)
        };
        normalize_lexically(&abs)
    }

    /// The path a tool does I/O on: expanded, then confined to the workspace.
    pub fn confine(&self, given: &str) -> Result<PathBuf, ExecError> {
        let expanded = self.expand(given);
        crate::workspace::confine(&self.exec.workspace, &expanded)
    }

    /// [`Self::confine`] for a path the tool writes (no hard link to a file outside).
    pub fn confine_write(&self, given: &str) -> Result<PathBuf, ExecError> {
        let expanded = self.expand(given);
        crate::workspace::confine_for_write(&self.exec.workspace, &expanded)
    }

    /// Workspace-relative form of a confined path, for [`ToolOutcome::touched`].
    pub fn relative(&self, confined: &Path) -> PathBuf {
        let root = std::fs::canonicalize(&self.exec.workspace)
            .unwrap_or_else(|_| self.exec.workspace.clone());
        confined
            .strip_prefix(&root)
            .map(Path::to_path_buf)
            .unwrap_or_else(|_| confined.to_path_buf())
    }

    /// `y0t`: a path relative to the current directory unless that starts with `..`.
    pub fn display_relative(&self, path: &Path) -> String {
        let cwd = self.cwd();
        match relative_path(&cwd, path) {
            Some(rel) if !rel.starts_with("..") => {
                if rel.is_empty() {
                    ".".into()
                } else {
                    rel
                }
            }
            _ => path.to_string_lossy().into_owned(),
        }
    }
}

/// Lexical normalization: drop `.`, fold `..` (never above the root).
pub(crate) fn normalize_lexically(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                if out.parent().is_some() {
                    out.pop();
                }
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Node's `path.relative(from, to)` for absolute normalized paths ("" when equal).
pub(crate) fn relative_path(from: &Path, to: &Path) -> Option<String> {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from
        .iter()
        .zip(to.iter())
        .take_while(|(a, b)| a == b)
        .count();
    let mut parts: Vec<String> = Vec::new();
    for _ in common..from.len() {
        parts.push("..".into());
    }
    for c in &to[common..] {
        parts.push(c.as_os_str().to_string_lossy().into_owned());
    }
    Some(parts.join("/"))
}

/// `floor(mtimeMs)` of a file.
pub(crate) fn mtime_ms(path: &Path) -> std::io::Result<i64> {
    let meta = std::fs::metadata(path)?;
    let t = meta.modified()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Ok(d.as_millis() as i64)
}

pub(crate) fn io_error(tool: &str, source: std::io::Error) -> ExecError {
    ExecError::Io {
        tool: tool.to_string(),
        source,
    }
}

pub(crate) fn bad_input(tool: &str, message: impl Into<String>) -> ExecError {
    ExecError::BadInput {
        tool: tool.to_string(),
        message: message.into(),
    }
}

/// Required string field.
pub(crate) fn req_str<'v>(tool: &str, input: &'v Value, key: &str) -> Result<&'v str, ExecError> {
    match input.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(bad_input(tool, format!("`{key}` must be a string"))),
        None => Err(bad_input(tool, format!("`{key}` is required"))),
    }
}

/// Optional string field.
pub(crate) fn opt_str<'v>(
    tool: &str,
    input: &'v Value,
    key: &str,
) -> Result<Option<&'v str>, ExecError> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(bad_input(tool, format!("`{key}` must be a string"))),
    }
}

/// Optional boolean field.
pub(crate) fn opt_bool(tool: &str, input: &Value, key: &str) -> Result<Option<bool>, ExecError> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(bad_input(tool, format!("`{key}` must be a boolean"))),
    }
}

/// Optional integer field (JSON numbers with an integral value).
pub(crate) fn opt_int(tool: &str, input: &Value, key: &str) -> Result<Option<i64>, ExecError> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            if let Some(i) = n.as_i64() {
                Ok(Some(i))
            } else if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15) {
                Ok(Some(f as i64))
            } else {
                Err(bad_input(tool, format!("`{key}` must be an integer")))
            }
        }
        Some(_) => Err(bad_input(tool, format!("`{key}` must be a number"))),
    }
}

/// `TQ`: "<Tool> <field> cannot contain null bytes (\0). …" (`chunk-bqhgd24a.js`).
pub(crate) fn null_byte_check(tool: &str, fields: &[(&str, Option<&str>)]) -> Option<Output> {
    fields
        .iter()
        .find(|(_, v)| v.is_some_and(|s| s.contains('\0')))
        .map(|(k, _)| {
            Output::validation(format!(
                "{tool} {k} cannot contain null bytes (\\0). Remove the null byte and try again."
            ))
        })
}

impl ToolSession {
    pub fn new(config: ToolConfig) -> Self {
        ToolSession {
            config,
            state: Mutex::new(SessionState::default()),
        }
    }

    pub fn config(&self) -> &ToolConfig {
        &self.config
    }

    /// A copy of the current state (for tests and diagnostics).
    pub fn snapshot(&self) -> SessionState {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Re-execute one call. See the module docs.
    pub fn execute(&self, call: &ToolCall, ctx: &ExecContext) -> Result<ToolOutcome, ExecError> {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let writes = classify(&call.tool, &call.input) == ToolClass::Mutating;
        if writes {
            if let Some(last) = guard.last_write {
                let since = last.elapsed();
                if since < MTIME_SPACING {
                    std::thread::sleep(MTIME_SPACING - since);
                }
            }
        }
        let started = Instant::now();
        let result = self.execute_locked(call, ctx, &mut guard, started);
        if writes {
            guard.last_write = Some(Instant::now());
        }
        result
    }

    fn execute_locked(
        &self,
        call: &ToolCall,
        ctx: &ExecContext,
        guard: &mut SessionState,
        started: Instant,
    ) -> Result<ToolOutcome, ExecError> {
        let mut cx = Cx {
            exec: ctx,
            config: &self.config,
            state: guard,
            call_id: &call.call_id,
        };
        let input = &call.input;
        // Arguments that do not fit the tool: Claude answered with its argument error and ran
        // nothing (the parse refused such a call without that answer).
        if let Some(answer) = ARGUMENTS.recorded_answer(call) {
            return Ok(answer);
        }
        let unoffered = self.config.unoffered.contains(&call.call_id)
            || (matches!(call.tool.as_str(), "LS" | "MultiEdit")
                && !self.config.behaviour.legacy_tools);
        if unoffered {
            return Ok(ToolOutcome {
                observation: Observation {
                    text: no_such_tool(&call.tool),
                    is_error: true,
                    native: None,
                },
                exit_code: None,
                duration_ms: started.elapsed().as_millis() as u64,
                touched: Vec::new(),
            });
        }
        let out = match call.tool.as_str() {
            "Read" => read::run(input, &mut cx)?,
            "Write" => write::run(input, &mut cx)?,
            "Edit" => edit::run(input, &mut cx)?,
            "MultiEdit" => edit::run_multi(input, &mut cx)?,
            "Bash" => {
                if input.get("run_in_background").and_then(Value::as_bool) == Some(true) {
                    return Err(ExecError::Unsupported {
                        tool: call.tool.clone(),
                        reason: "run_in_background: its result names a random task id and output file, and the command keeps running across turns".into(),
                    });
                }
                bash::run(input, &mut cx)?
            }
            "Glob" => glob::run(input, &mut cx)?,
            "Grep" => grep::run(input, &mut cx)?,
            "LS" => ls::run(input, &mut cx)?,
            "NotebookEdit" => notebook::run(input, &mut cx)?,
            other => {
                let reason = match classify(other, input) {
                    ToolClass::NonRegenerable => {
                        "its observation cannot be regenerated (sub-agent, web, task or todo tool)"
                    }
                    _ => "not a Claude Code 2.1.332 tool this adapter can re-execute",
                };
                return Err(ExecError::Unsupported {
                    tool: other.to_string(),
                    reason: reason.into(),
                });
            }
        };
        let out = finish(&call.tool, out, &mut cx)?;
        Ok(ToolOutcome {
            observation: Observation {
                text: out.text,
                is_error: out.is_error,
                native: out.native,
            },
            exit_code: out.exit_code,
            duration_ms: started.elapsed().as_millis() as u64,
            touched: out.touched,
        })
    }

    /// Apply what Claude did between two model turns to the read-file state, from an
    /// `attachment` record of the session (call it for the chain's attachment records in
    /// file order, between batches). Handled: `edited_text_file` — Claude noticed that a
    /// file the model had read changed on disk, re-read it (as a Read would) and showed
    /// the model a snippet; the file then counts as freshly read.
    pub fn observe_attachment(&self, attachment: &Value, ctx: &ExecContext) {
        if attachment.get("type").and_then(Value::as_str) != Some("edited_text_file") {
            return;
        }
        let Some(name) = attachment.get("filename").and_then(Value::as_str) else {
            return;
        };
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let cx = Cx {
            exec: ctx,
            config: &self.config,
            state: &mut guard,
            call_id: "",
        };
        let Ok(path) = cx.confine(name) else { return };
        let (Ok(bytes), Ok(ts)) = (std::fs::read(&path), mtime_ms(&path)) else {
            return;
        };
        let content = read::select_lines(&read::decode_text(&bytes).0, 0, None).content;
        guard.remember(
            path,
            FileReadState {
                content,
                timestamp: ts,
                offset: Some(1),
                limit: None,
                is_partial_view: false,
                content_not_in_model_context: false,
            },
        );
    }

    /// Rebuild the state a call that is *not* re-executed left behind (crash resumption):
    /// a successful Read/Write/Edit/MultiEdit/NotebookEdit marks its file as read with its
    /// current content and mtime; a successful Bash with a `cd` cannot be replayed and is
    /// ignored. As with Claude's own resume, the file must not have changed since.
    pub fn seed(&self, call: &ToolCall, observation: &Observation, ctx: &ExecContext) {
        if observation.is_error {
            return;
        }
        let key = match call.tool.as_str() {
            "Read" | "Write" | "Edit" | "MultiEdit" => "file_path",
            "NotebookEdit" => "notebook_path",
            _ => return,
        };
        let Some(given) = call.input.get(key).and_then(Value::as_str) else {
            return;
        };
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let cx = Cx {
            exec: ctx,
            config: &self.config,
            state: &mut guard,
            call_id: &call.call_id,
        };
        let Ok(path) = cx.confine(given) else { return };
        let Ok(bytes) = std::fs::read(&path) else {
            return;
        };
        let Ok(ts) = mtime_ms(&path) else { return };
        let content = read::decode_text(&bytes).0.replace("\r\n", "\n");
        let (offset, limit) = if call.tool == "Read" {
            (
                Some(
                    call.input
                        .get("offset")
                        .and_then(Value::as_i64)
                        .unwrap_or(1),
                ),
                call.input.get("limit").and_then(Value::as_i64),
            )
        } else {
            (None, None)
        };
        guard.remember(
            path,
            FileReadState {
                content,
                timestamp: ts,
                offset,
                limit,
                is_partial_view: false,
                content_not_in_model_context: false,
            },
        );
    }
}

/// Post-processing every mapped result gets (`Pe` in `chunk-ety1djz5.js`): an empty text
/// becomes "(<Tool> completed with no output)"; a text over the tool's threshold is saved
/// to a file and replaced by a `<persisted-output>` preview.
fn finish(tool: &str, mut out: Output, cx: &mut Cx<'_>) -> Result<Output, ExecError> {
    if !out.mapped || out.native.is_some() {
        return Ok(out);
    }
    if out.text.trim().is_empty() {
        out.text = format!("({tool} completed with no output)");
        return Ok(out);
    }
    if let Some(limit) = text::persist_threshold(tool) {
        if out.text.encode_utf16().count() > limit {
            let dir = cx
                .config
                .tool_results_dir
                .clone()
                .unwrap_or_else(|| cx.exec.log_dir.join("tool-results"));
            out.text = text::persist(&out.text, &dir, cx.call_id).map_err(|e| io_error(tool, e))?;
        }
    }
    Ok(out)
}

/// The native `tool_result` block Claude Code writes for an observation.
///
/// A successful result comes from the tool's result mapping: keys `tool_use_id`, `type`,
/// `content`, and `is_error` only for Bash (its mapping always sets it, from
/// `interrupted`). A failed call (validation refusal or thrown error) is built by the tool
/// runner as `type`, `content`, `is_error: true`, `tool_use_id` (`chunk-bqhgd24a.js`).
pub fn tool_result_block(tool: &str, tool_use_id: &str, observation: &Observation) -> Value {
    let content = observation
        .native
        .clone()
        .unwrap_or_else(|| Value::String(observation.text.clone()));
    let mut m = serde_json::Map::new();
    if observation.is_error {
        m.insert("type".into(), Value::String("tool_result".into()));
        m.insert("content".into(), content);
        m.insert("is_error".into(), Value::Bool(true));
        m.insert("tool_use_id".into(), Value::String(tool_use_id.into()));
    } else {
        m.insert("tool_use_id".into(), Value::String(tool_use_id.into()));
        m.insert("type".into(), Value::String("tool_result".into()));
        m.insert("content".into(), content);
        if tool == "Bash" {
            m.insert("is_error".into(), Value::Bool(false));
        }
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classification() {
        assert_eq!(classify("Read", &json!({})), ToolClass::ReadOnly);
        assert_eq!(classify("Glob", &json!({})), ToolClass::ReadOnly);
        assert_eq!(classify("Grep", &json!({})), ToolClass::ReadOnly);
        assert_eq!(classify("LS", &json!({})), ToolClass::ReadOnly);
        assert_eq!(
            classify("Bash", &json!({"command": "ls"})),
            ToolClass::Mutating
        );
        assert_eq!(
            classify("Bash", &json!({"command": "ls", "run_in_background": true})),
            ToolClass::NonRegenerable
        );
        for t in ["Write", "Edit", "MultiEdit", "NotebookEdit"] {
            assert_eq!(classify(t, &json!({})), ToolClass::Mutating);
        }
        for t in [
            "Agent",
            "Task",
            "TaskOutput",
            "TaskCreate",
            "TaskUpdate",
            "TodoWrite",
            "WebFetch",
            "WebSearch",
        ] {
            assert_eq!(classify(t, &json!({})), ToolClass::NonRegenerable);
        }
        assert_eq!(classify("mcp__x__y", &json!({})), ToolClass::Unknown);
        assert_eq!(classify("Skill", &json!({})), ToolClass::Unknown);
    }

    #[test]
    fn result_block_shape() {
        let obs = Observation {
            text: "hi".into(),
            is_error: false,
            native: None,
        };
        assert_eq!(
            serde_json::to_string(&tool_result_block("Bash", "t1", &obs)).unwrap(),
            r#"{"tool_use_id":"t1","type":"tool_result","content":"hi","is_error":false}"#
        );
        assert_eq!(
            serde_json::to_string(&tool_result_block("Read", "t2", &obs)).unwrap(),
            r#"{"tool_use_id":"t2","type":"tool_result","content":"hi"}"#
        );
        let err = Observation {
            text: "Exit code 1".into(),
            is_error: true,
            native: None,
        };
        assert_eq!(
            serde_json::to_string(&tool_result_block("Bash", "t3", &err)).unwrap(),
            r#"{"type":"tool_result","content":"Exit code 1","is_error":true,"tool_use_id":"t3"}"#
        );
    }

    #[test]
    fn relative_paths() {
        assert_eq!(
            relative_path(Path::new("/a/b"), Path::new("/a/b/c/d")).unwrap(),
            "c/d"
        );
        assert_eq!(
            relative_path(Path::new("/a/b"), Path::new("/a/x")).unwrap(),
            "../x"
        );
        assert_eq!(
            relative_path(Path::new("/a/b"), Path::new("/a/b")).unwrap(),
            ""
        );
        assert_eq!(
            normalize_lexically(Path::new("/a/./b/../c")),
            PathBuf::from("/a/c")
        );
        assert_eq!(normalize_lexically(Path::new("/../x")), PathBuf::from("/x"));
    }
}
