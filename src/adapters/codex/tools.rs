//! Re-execution of Codex CLI 0.149.0's tools with Codex's own observation texts.
//!
//! | tool | kind | output text |
//! |---|---|---|
//! | `exec_command` | function | `Chunk ID: <6 hex>\nWall time: <s.4> seconds\n` then `Process exited with code <n>\n` or `Process running with session ID <id>\n`, then `Original token count: <ceil(bytes/4)>\nOutput:\n<output>` |
//! | `write_stdin` | function | same framing, output produced since the previous poll |
//! | `shell` (argv), `shell_command`, `local_shell_call` | function | freeform `Exit code: <n>\nWall time: <s.1> seconds\n[Total output lines: <n>\n]Output:\n<output>`, or the structured JSON string `{"output":…,"metadata":{"exit_code":…,"duration_seconds":…}}` when the original observation used it |
//! | `apply_patch` (freeform or JSON `{input}`) | custom / function | success framed as `Exit code: 0\nWall time: <s.1> seconds\nOutput:\nSuccess. Updated the following files:\n…`; verification/parse failures as the bare error text |
//! | `update_plan` | function | `Plan updated` |
//! | `exec` (code mode: a JavaScript cell calling `tools.*`) | custom | run by [`super::code_mode`]: `Script completed\nWall time <s.1> seconds\nOutput:\n` then one item per `text()` |
//! | `wait` (code mode: poll a yielded cell) | function | the same framing, with what the cell produced since |
//!
//! Dynamic fields (produced fresh, masked by [`mask_dynamic`]): the chunk id, every wall time,
//! `duration_seconds`. Unified exec sessions that outlive their yield time are kept running
//! under the ORIGINAL session id so that later `write_stdin` calls address them.

use crate::error::ExecError;
use crate::kit::{ExecContext, Observation, ToolCall, ToolClass, ToolOutcome};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::supervisor::session::{Poll, Session};
use crate::supervisor::CommandSpec;

use super::patch::{self, PatchOutcome};

/// Environment Codex sets for the commands it runs (unified exec).
pub const EXEC_ENV: &[(&str, &str)] = &[
    ("NO_COLOR", "1"),
    ("TERM", "dumb"),
    ("LANG", "C.UTF-8"),
    ("LC_CTYPE", "C.UTF-8"),
    ("LC_ALL", "C.UTF-8"),
    ("COLORTERM", ""),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("GH_PAGER", "cat"),
    ("CODEX_CI", "1"),
];

/// `exec_command` yield time bounds and default (ms).
pub const MIN_YIELD_MS: u64 = 250;
pub const MAX_YIELD_MS: u64 = 30_000;
pub const DEFAULT_EXEC_YIELD_MS: u64 = 10_000;
pub const DEFAULT_WRITE_STDIN_YIELD_MS: u64 = 250;
pub const DEFAULT_MAX_OUTPUT_TOKENS: usize = 10_000;
/// Default timeout of `shell` / `shell_command` (ms).
pub const DEFAULT_SHELL_TIMEOUT_MS: u64 = 10_000;

/// How a call may be treated.
pub fn classify(call: &ToolCall) -> ToolClass {
    match call.tool.as_str() {
        "update_plan" => ToolClass::ReadOnly,
        "exec_command" | "write_stdin" | "shell" | "shell_command" | "local_shell"
        | "apply_patch" | "exec" | "wait" => ToolClass::Mutating,
        "view_image" | "web_search" | "request_user_input" | "spawn_agent" | "send_input"
        | "wait_agent" | "close_agent" => ToolClass::NonRegenerable,
        _ => ToolClass::Unknown,
    }
}

/// Why a call cannot be re-executed, checked before any tool of the replay runs.
pub fn refusal(call: &ToolCall) -> Option<String> {
    match call.tool.as_str() {
        "exec" => super::code_mode::refusal(&call.input),
        "exec_command" if call.input.get("tty").and_then(Value::as_bool) == Some(true) => {
            Some("exec_command with tty=true runs in a PTY (CRLF output, echo); it is not re-executed faithfully".into())
        }
        _ if classify(call) == ToolClass::Unknown => Some(format!("unknown Codex tool `{}`: tool semantics never change silently", call.tool)),
        _ => None,
    }
}

/// The observation text with dynamic fields masked.
pub fn mask_dynamic(text: &str) -> String {
    use std::sync::OnceLock;
    static RES: OnceLock<Vec<(regex::Regex, &'static str)>> = OnceLock::new();
    let res = RES.get_or_init(|| {
        vec![
            (
                regex::Regex::new(r"(?m)^Chunk ID: [0-9a-f]+$").unwrap(),
                "Chunk ID: <dynamic>",
            ),
            (
                regex::Regex::new(r"(?m)^Wall time:? [0-9]+(\.[0-9]+)? seconds$").unwrap(),
                "Wall time: <dynamic> seconds",
            ),
            (
                regex::Regex::new(r#""duration_seconds":[0-9]+(\.[0-9]+)?"#).unwrap(),
                "\"duration_seconds\":<dynamic>",
            ),
            // A code-mode cell that prints a unified exec result as JSON (`text(r)`).
            (
                regex::Regex::new(r#""chunk_id":"[0-9a-f]+""#).unwrap(),
                "\"chunk_id\":\"<dynamic>\"",
            ),
            (
                regex::Regex::new(r#""wall_time_seconds":[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?"#)
                    .unwrap(),
                "\"wall_time_seconds\":<dynamic>",
            ),
            (
                regex::Regex::new(r#""session_id":[0-9]+"#).unwrap(),
                "\"session_id\":<dynamic>",
            ),
        ]
    });
    let mut s = text.to_string();
    for (re, rep) in res {
        s = re.replace_all(&s, *rep).into_owned();
    }
    s
}

/// Codex's approximate token count: ceil(bytes / 4).
pub fn approx_tokens(s: &str) -> usize {
    s.len().div_ceil(4)
}

/// Middle truncation to a token budget (4 bytes per token), on char boundaries.
pub fn truncate_middle(s: &str, max_tokens: usize) -> String {
    let budget = max_tokens.saturating_mul(4);
    if s.len() <= budget {
        return s.to_string();
    }
    let half = budget / 2;
    let mut head_end = half.min(s.len());
    while !s.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = s.len() - (budget - half);
    while !s.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let removed = approx_tokens(&s[head_end..tail_start]);
    format!(
        "{}…{removed} tokens truncated…{}",
        &s[..head_end],
        &s[tail_start..]
    )
}

fn random_chunk_id() -> String {
    use rand::Rng;
    let n: u32 = rand::thread_rng().gen_range(0..0x100_0000);
    format!("{n:06x}")
}

/// The unified exec response text. `raw_len`: the bytes the command wrote, on which Codex
/// counts the original tokens (`output` is their text, invalid UTF-8 replaced).
pub fn format_unified(
    wall: Duration,
    exit: Option<i32>,
    session: Option<&str>,
    output: &str,
    raw_len: usize,
    max_tokens: usize,
) -> String {
    let mut s = Vec::new();
    s.push(format!("Chunk ID: {}", random_chunk_id()));
    s.push(format!("Wall time: {:.4} seconds", wall.as_secs_f64()));
    if let Some(c) = exit {
        s.push(format!("Process exited with code {c}"));
    }
    if let Some(id) = session {
        s.push(format!("Process running with session ID {id}"));
    }
    s.push(format!("Original token count: {}", raw_len.div_ceil(4)));
    s.push("Output:".into());
    if output.len() > max_tokens.saturating_mul(4) {
        // Recorded (tests/fixtures/codex/recorded/commands, `max_output_tokens: 60`): a
        // warning and the line count precede the middle-truncated output.
        s.push(truncated_block(output, max_tokens));
    } else {
        s.push(output.to_string());
    }
    s.join("\n")
}

/// Codex's freeform exec text (`format_exec_output_for_model_freeform`).
pub fn format_freeform(exit: i32, wall: Duration, content: &str) -> String {
    let secs = ((wall.as_secs_f32()) * 10.0).round() / 10.0;
    let total = content.lines().count();
    let formatted = truncate_middle(content, DEFAULT_MAX_OUTPUT_TOKENS);
    let mut s = vec![
        format!("Exit code: {exit}"),
        format!("Wall time: {secs} seconds"),
    ];
    if total != formatted.lines().count() {
        s.push(format!("Total output lines: {total}"));
    }
    s.push("Output:".into());
    s.push(formatted);
    s.join("\n")
}

/// Codex's structured exec text (older models): a JSON string.
pub fn format_structured(exit: i32, wall: Duration, content: &str) -> String {
    let secs = ((wall.as_secs_f32()) * 10.0).round() / 10.0;
    serde_json::json!({"output": truncate_middle(content, DEFAULT_MAX_OUTPUT_TOKENS), "metadata": {"exit_code": exit, "duration_seconds": secs}}).to_string()
}

// ---------------------------------------------------------------- unified exec sessions

/// Start `argv` in `cwd` under the process supervisor (own group, merged output, the full
/// output logged under `ctx.log_dir`, bounded in memory, killed at `ctx.timeout`).
fn spawn_merged(
    argv: &[String],
    cwd: &Path,
    tool: &str,
    ctx: &ExecContext,
    call_id: &str,
) -> Result<Session, ExecError> {
    let mut spec = CommandSpec::new(&argv[0], cwd)
        .listed_in(crate::supervisor::groups::dir_of(&ctx.state_dir));
    spec.args = argv[1..].iter().map(Into::into).collect();
    spec.env = EXEC_ENV.iter().map(|(k, v)| (k.into(), v.into())).collect();
    spec.timeout = Some(ctx.timeout);
    spec.log_path = Some(ctx.log_dir.join(format!("{}.log", sanitize(call_id))));
    crate::supervisor::session::spawn(&spec).map_err(|e| ExecError::Io {
        tool: tool.into(),
        source: e,
    })
}

/// A call id as a file name.
fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Live unified exec sessions of one replay, by the session id the model saw.
#[derive(Default)]
pub struct Sessions {
    live: Mutex<HashMap<String, Session>>,
}

fn session_id_in(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        l.strip_prefix("Process running with session ID ")
            .map(|s| s.trim().to_string())
    })
}

fn bad(tool: &str, m: impl Into<String>) -> ExecError {
    ExecError::BadInput {
        tool: tool.into(),
        message: m.into(),
    }
}

/// The working directory of a call: the workspace, or `workdir` inside it (relative to it,
/// or absolute); a directory outside the workspace is refused, nothing runs.
fn resolve_dir(ctx: &ExecContext, workdir: Option<&str>, tool: &str) -> Result<PathBuf, ExecError> {
    match workdir {
        None | Some("") => Ok(ctx.workspace.clone()),
        Some(w) => {
            let p = Path::new(w);
            let p = if p.is_absolute() {
                p.to_path_buf()
            } else {
                ctx.workspace.join(p)
            };
            let p = crate::workspace::confine::confine(&ctx.workspace, &p)?;
            if !p.is_dir() {
                return Err(bad(
                    tool,
                    format!("workdir {} is not a directory", p.display()),
                ));
            }
            Ok(p)
        }
    }
}

fn user_shell() -> String {
    std::env::var("SHELL")
        .ok()
        .filter(|s| Path::new(s).exists())
        .unwrap_or_else(|| {
            if Path::new("/bin/bash").exists() {
                "/bin/bash".into()
            } else {
                "/bin/sh".into()
            }
        })
}

fn clamp_yield(v: Option<u64>, default: u64) -> u64 {
    v.unwrap_or(default).clamp(MIN_YIELD_MS, MAX_YIELD_MS)
}

/// What a unified exec call (`exec_command`, `write_stdin`) produced, before Codex frames it:
/// as text for a classic call ([`Unified::text`]), as a JSON object for a code-mode cell
/// ([`Unified::code_mode_result`]).
#[derive(Debug, Clone)]
pub struct Unified {
    pub wall: Duration,
    pub exit: Option<i32>,
    /// The session id the model sees while the process runs on.
    pub session: Option<String>,
    pub output: String,
    /// How many bytes the command wrote (Codex counts its tokens on them, before the bytes
    /// that are not UTF-8 become U+FFFD in `output`).
    pub raw_len: usize,
    /// `max_output_tokens` as given (`None`: Codex's default for text, untruncated in code mode).
    pub max_tokens: Option<usize>,
}

impl Unified {
    pub fn text(&self) -> String {
        format_unified(
            self.wall,
            self.exit,
            self.session.as_deref(),
            &self.output,
            self.raw_len,
            self.max_tokens.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS),
        )
    }

    /// Codex's `UnifiedExecCodeModeResult`: fixed key order, optional keys left out, the
    /// raw output unless the call gave `max_output_tokens`.
    pub fn code_mode_result(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("chunk_id".into(), Value::from(random_chunk_id()));
        m.insert(
            "wall_time_seconds".into(),
            serde_json::Number::from_f64(self.wall.as_secs_f64())
                .map(Value::Number)
                .unwrap_or(Value::from(0)),
        );
        if let Some(c) = self.exit {
            m.insert("exit_code".into(), Value::from(c));
        }
        if let Some(id) = &self.session {
            m.insert(
                "session_id".into(),
                id.parse::<i64>()
                    .map(Value::from)
                    .unwrap_or_else(|_| Value::from(id.clone())),
            );
        }
        m.insert(
            "original_token_count".into(),
            Value::from(self.raw_len.div_ceil(4)),
        );
        let output = match self.max_tokens {
            Some(max) if self.output.len() > max.saturating_mul(4) => {
                truncated_block(&self.output, max)
            }
            _ => self.output.clone(),
        };
        m.insert("output".into(), Value::from(output));
        Value::Object(m)
    }
}

/// Codex's truncation notice followed by the middle-truncated output.
pub fn truncated_block(output: &str, max_tokens: usize) -> String {
    format!(
        "Warning: truncated output (original token count: {})\nTotal output lines: {}\n\n{}",
        approx_tokens(output),
        output.lines().count(),
        truncate_middle(output, max_tokens)
    )
}

fn text_outcome(text: String, exit_code: Option<i32>, wall: Duration) -> ToolOutcome {
    ToolOutcome {
        observation: Observation {
            text,
            is_error: false,
            native: None,
        },
        exit_code,
        duration_ms: wall.as_millis() as u64,
        touched: vec![],
    }
}

impl Sessions {
    /// Start a unified exec command; a session still running at its yield time is kept.
    /// `session_id` names it when the recording did (`None`: a fresh id).
    pub fn exec_command_unified(
        &self,
        call: &ToolCall,
        ctx: &ExecContext,
        session_id: Option<String>,
    ) -> Result<Unified, ExecError> {
        let t = "exec_command";
        let a = &call.input;
        let cmd = a
            .get("cmd")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(t, "missing string `cmd`"))?;
        let shell = a
            .get("shell")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(user_shell);
        let login = a.get("login").and_then(Value::as_bool).unwrap_or(true);
        let cwd = resolve_dir(ctx, a.get("workdir").and_then(Value::as_str), t)?;
        let yield_ms = clamp_yield(
            a.get("yield_time_ms").and_then(Value::as_u64),
            DEFAULT_EXEC_YIELD_MS,
        );
        let max_tokens = a
            .get("max_output_tokens")
            .and_then(Value::as_u64)
            .map(|v| v as usize);
        let argv = vec![
            shell,
            if login { "-lc" } else { "-c" }.to_string(),
            cmd.to_string(),
        ];
        let mut s = spawn_merged(&argv, &cwd, t, ctx, &call.call_id)?;
        let Poll {
            exit,
            output: out,
            raw_len,
            ..
        } = s.wait(Duration::from_millis(yield_ms));
        let wall = s.started().elapsed();
        let sid = match exit {
            Some(_) => None,
            None => Some(
                session_id.unwrap_or_else(|| format!("{}", 1000 + rand::random::<u16>() as u32)),
            ),
        };
        if let Some(id) = &sid {
            self.live.lock().unwrap().insert(id.clone(), s);
        }
        Ok(Unified {
            wall,
            exit,
            session: sid,
            output: out,
            raw_len,
            max_tokens,
        })
    }

    fn exec_command(&self, call: &ToolCall, ctx: &ExecContext) -> Result<ToolOutcome, ExecError> {
        let recorded = call.original.as_ref().and_then(|o| session_id_in(&o.text));
        let u = self.exec_command_unified(call, ctx, recorded)?;
        Ok(text_outcome(u.text(), u.exit, u.wall))
    }

    /// Poll (or write to) a running unified exec session. `Err(text)`: Codex's failure text.
    pub fn write_stdin_unified(
        &self,
        call: &ToolCall,
    ) -> Result<Result<Unified, String>, ExecError> {
        let t = "write_stdin";
        let a = &call.input;
        let id = match a.get("session_id") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => return Err(bad(t, "missing `session_id`")),
        };
        let chars = a.get("chars").and_then(Value::as_str).unwrap_or("");
        let yield_ms = clamp_yield(
            a.get("yield_time_ms").and_then(Value::as_u64),
            DEFAULT_WRITE_STDIN_YIELD_MS,
        );
        let max_tokens = a
            .get("max_output_tokens")
            .and_then(Value::as_u64)
            .map(|v| v as usize);
        let mut live = self.live.lock().unwrap();
        let Some(s) = live.get_mut(&id) else {
            return Ok(Err(format!("write_stdin failed: Unknown process id {id}")));
        };
        if !chars.is_empty() {
            return Ok(Err("write_stdin failed: stdin is closed for this session; rerun exec_command with tty=true to keep stdin open".to_string()));
        }
        let start = Instant::now();
        let Poll {
            exit,
            output: out,
            raw_len,
            ..
        } = s.wait(Duration::from_millis(yield_ms));
        let wall = start.elapsed();
        if exit.is_some() {
            live.remove(&id);
        }
        Ok(Ok(Unified {
            wall,
            exit,
            session: exit.is_none().then_some(id),
            output: out,
            raw_len,
            max_tokens,
        }))
    }

    fn write_stdin(&self, call: &ToolCall) -> Result<ToolOutcome, ExecError> {
        Ok(match self.write_stdin_unified(call)? {
            Ok(u) => text_outcome(u.text(), u.exit, u.wall),
            Err(text) => text_outcome(text, None, Duration::ZERO),
        })
    }
}

/// Run argv to completion with a timeout, merged output (shell / shell_command / local_shell).
fn run_to_end(
    argv: &[String],
    cwd: &Path,
    timeout_ms: u64,
    tool: &str,
    call: &ToolCall,
    ctx: &ExecContext,
) -> Result<ToolOutcome, ExecError> {
    if argv.is_empty() {
        return Err(bad(tool, "empty command"));
    }
    let original = call.original.as_ref();
    let mut s = spawn_merged(argv, cwd, tool, ctx, &call.call_id)?;
    let Poll {
        exit, output: out, ..
    } = s.wait(Duration::from_millis(timeout_ms));
    let wall = s.started().elapsed();
    let (code, content) = match exit {
        Some(c) => (c, out),
        None => {
            drop(s);
            (
                124,
                format!("command timed out after {timeout_ms} milliseconds\n{out}"),
            )
        }
    };
    let structured = original
        .map(|o| o.text.starts_with("{\"output\":"))
        .unwrap_or(false);
    let text = if structured {
        format_structured(code, wall, &content)
    } else {
        format_freeform(code, wall, &content)
    };
    Ok(ToolOutcome {
        observation: Observation {
            text,
            is_error: false,
            native: None,
        },
        exit_code: Some(code),
        duration_ms: wall.as_millis() as u64,
        touched: vec![],
    })
}

fn string_array(v: Option<&Value>, tool: &str) -> Result<Vec<String>, ExecError> {
    match v {
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad(tool, "`command` must be an array of strings"))
            })
            .collect(),
        _ => Err(bad(tool, "`command` must be an array of strings")),
    }
}

/// Apply the patch of an `apply_patch` call (freeform text, or JSON `{input}`): the outcome,
/// its wall time and the workspace-relative paths it wrote.
fn run_patch(
    call: &ToolCall,
    ctx: &ExecContext,
) -> Result<(PatchOutcome, Duration, Vec<PathBuf>), ExecError> {
    let text = match &call.input {
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .get("input")
            .or_else(|| o.get("patch"))
            .and_then(Value::as_str)
            .ok_or_else(|| bad("apply_patch", "missing string `input`"))?
            .to_string(),
        _ => return Err(bad("apply_patch", "input must be the patch text")),
    };
    let cwd = resolve_dir(
        ctx,
        call.input.get("workdir").and_then(Value::as_str),
        "apply_patch",
    )?;
    let ws = ctx.workspace.clone();
    let resolve = |p: &str| -> Result<PathBuf, String> {
        let joined = if Path::new(p).is_absolute() {
            PathBuf::from(p)
        } else {
            cwd.join(p)
        };
        crate::workspace::confine::confine_for_write(&ws, &joined).map_err(|e| e.to_string())
    };
    let start = Instant::now();
    let outcome = patch::apply(&text, &cwd, &resolve);
    let wall = start.elapsed();
    let touched = match &outcome {
        PatchOutcome::Applied { touched, .. } | PatchOutcome::Failed { touched, .. } => touched
            .iter()
            .filter_map(|p| p.strip_prefix(&ctx.workspace).ok().map(Path::to_path_buf))
            .collect(),
        PatchOutcome::Rejected(_) => vec![],
    };
    Ok((outcome, wall, touched))
}

fn apply_patch(call: &ToolCall, ctx: &ExecContext) -> Result<ToolOutcome, ExecError> {
    let (outcome, wall, touched) = run_patch(call, ctx)?;
    let (text, code) = match outcome {
        PatchOutcome::Applied { stdout, .. } => (format_freeform(0, wall, &stdout), Some(0)),
        PatchOutcome::Failed { stderr, .. } => (format_freeform(1, wall, &stderr), Some(1)),
        PatchOutcome::Rejected(t) => (t, None),
    };
    Ok(ToolOutcome {
        touched,
        ..text_outcome(text, code, wall)
    })
}

/// `apply_patch` called from a code-mode cell: `Ok` (the cell sees `{}`) with the paths
/// written, or the rejection text the cell's promise rejects with.
pub fn apply_patch_in_cell(
    call: &ToolCall,
    ctx: &ExecContext,
) -> Result<(Result<(), String>, Vec<PathBuf>), ExecError> {
    let (outcome, _, touched) = run_patch(call, ctx)?;
    Ok(match outcome {
        PatchOutcome::Applied { .. } => (Ok(()), touched),
        PatchOutcome::Failed { stderr, .. } => (Err(stderr), touched),
        PatchOutcome::Rejected(t) => (Err(t), touched),
    })
}

pub fn update_plan(call: &ToolCall) -> Result<ToolOutcome, ExecError> {
    let plan = call
        .input
        .get("plan")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("update_plan", "missing `plan` array"))?;
    for p in plan {
        let ok = p.get("step").and_then(Value::as_str).is_some()
            && matches!(
                p.get("status").and_then(Value::as_str),
                Some("pending" | "in_progress" | "completed")
            );
        if !ok {
            return Err(bad(
                "update_plan",
                "every plan item needs `step` and a status pending|in_progress|completed",
            ));
        }
    }
    Ok(ToolOutcome {
        observation: Observation {
            text: "Plan updated".into(),
            is_error: false,
            native: None,
        },
        exit_code: None,
        duration_ms: 0,
        touched: vec![],
    })
}

/// The argument types of Codex's function tools (what its argument structs deserialize;
/// arguments they do not name are not checked here). Freeform tools take a string.
pub fn arg_types(tool: &str) -> Option<&'static [crate::kit::args::Arg]> {
    use crate::kit::args::Ty::*;
    Some(match tool {
        "exec_command" => &[
            ("cmd", Str, true),
            ("workdir", Str, false),
            ("shell", Str, false),
            ("login", Bool, false),
            ("tty", Bool, false),
            ("yield_time_ms", Int, false),
            ("max_output_tokens", Int, false),
        ],
        "write_stdin" => &[
            ("session_id", Int, true),
            ("chars", Str, false),
            ("yield_time_ms", Int, false),
            ("max_output_tokens", Int, false),
        ],
        "shell" | "local_shell" => &[("command", Strs, true), ("timeout_ms", Int, false)],
        "shell_command" => &[("command", Str, true), ("timeout_ms", Int, false)],
        "update_plan" => &[("plan", Array, true), ("explanation", Str, false)],
        _ => return None,
    })
}

/// Whether a recorded output is Codex's answer to arguments its tool could not read, given
/// without running anything (`failed to parse function arguments: invalid type: …`).
pub fn is_argument_error(_tool: &str, obs: &Observation) -> bool {
    obs.text.starts_with("failed to parse function arguments")
}

/// Codex's argument rules (`crate::kit::args`).
pub const ARGUMENTS: crate::kit::args::Rules = crate::kit::args::Rules {
    types: arg_types,
    is_answer: is_argument_error,
};

/// The recorded answer of Codex's exec policy to a command it refused without running it
/// (`exec_command failed for `<argv>`: CreateProcess { message: "Rejected(\"… rejected: rm -f
/// style commands are not permitted…\")" }`, under the `never` approval policy of
/// `--dangerously-bypass-approvals-and-sandbox`). The refusal is the policy's decision on the
/// recorded command under the recorded approval policy, which the same Codex makes the same
/// way: the replay does not run the command either and answers the recorded text.
pub fn policy_rejection(call: &ToolCall) -> Option<Observation> {
    if !matches!(
        call.tool.as_str(),
        "exec_command" | "shell" | "shell_command" | "local_shell"
    ) {
        return None;
    }
    let o = call.original.as_ref()?;
    let refused = o.text.starts_with(&format!("{} failed", call.tool))
        && o.text.contains("CreateProcess { message: \"Rejected(");
    refused.then(|| o.clone())
}

impl Sessions {
    /// Execute one call.
    pub fn execute(&self, call: &ToolCall, ctx: &ExecContext) -> Result<ToolOutcome, ExecError> {
        if let Some(r) = refusal(call) {
            return Err(ExecError::Unsupported {
                tool: call.tool.clone(),
                reason: r,
            });
        }
        // Arguments Codex could not read: it answered so and ran nothing (the parse refused
        // such a call without that answer).
        if let Some(answer) = ARGUMENTS.recorded_answer(call) {
            return Ok(answer);
        }
        if let Some(obs) = policy_rejection(call) {
            return Ok(ToolOutcome {
                observation: obs,
                exit_code: None,
                duration_ms: 0,
                touched: vec![],
            });
        }
        let a = &call.input;
        let timeout = |a: &Value| {
            a.get("timeout_ms")
                .and_then(Value::as_u64)
                .unwrap_or(DEFAULT_SHELL_TIMEOUT_MS)
        };
        match call.tool.as_str() {
            "exec_command" => self.exec_command(call, ctx),
            "write_stdin" => self.write_stdin(call),
            "shell" => {
                let argv = string_array(a.get("command"), "shell")?;
                let cwd = resolve_dir(ctx, a.get("workdir").and_then(Value::as_str), "shell")?;
                run_to_end(&argv, &cwd, timeout(a), "shell", call, ctx)
            }
            "local_shell" => {
                let argv = string_array(a.get("command"), "local_shell")?;
                let cwd = resolve_dir(
                    ctx,
                    a.get("working_directory").and_then(Value::as_str),
                    "local_shell",
                )?;
                run_to_end(&argv, &cwd, timeout(a), "local_shell", call, ctx)
            }
            "shell_command" => {
                let cmd = a
                    .get("command")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("shell_command", "missing string `command`"))?;
                let login = a.get("login").and_then(Value::as_bool).unwrap_or(true);
                let cwd = resolve_dir(
                    ctx,
                    a.get("workdir").and_then(Value::as_str),
                    "shell_command",
                )?;
                let argv = vec![
                    user_shell(),
                    if login { "-lc" } else { "-c" }.to_string(),
                    cmd.to_string(),
                ];
                run_to_end(&argv, &cwd, timeout(a), "shell_command", call, ctx)
            }
            "apply_patch" => apply_patch(call, ctx),
            "update_plan" => update_plan(call),
            other => Err(ExecError::Unsupported {
                tool: other.into(),
                reason: "not re-executable".into(),
            }),
        }
    }

    /// Kill every live session (end of replay).
    pub fn clear(&self) {
        self.live.lock().unwrap().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command Codex's policy refused is answered with the recorded refusal, not run.
    #[test]
    fn a_policy_refusal_is_answered_as_recorded_and_nothing_runs() {
        let refusal = "exec_command failed for `/bin/bash -lc \"rm -f x; ls\"`: CreateProcess { message: \"Rejected(\\\"`/bin/bash -lc \\\\\\\"rm -f x; ls\\\\\\\"` rejected: rm -f style commands are not permitted. Use a safer approach\\\")\" }";
        let call = |text: &str| ToolCall {
            call_id: "c1".into(),
            tool: "exec_command".into(),
            input: serde_json::json!({"cmd": "rm -f x; ls"}),
            original: Some(Observation {
                text: text.into(),
                is_error: false,
                native: None,
            }),
            locator: Default::default(),
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x"), "keep").unwrap();
        let ctx = ExecContext {
            workspace: dir.path().to_path_buf(),
            log_dir: dir.path().join("logs"),
            state_dir: dir.path().join("state"),
            timeout: Duration::from_secs(10),
            agent_entrypoint: None,
        };
        let out = Sessions::default().execute(&call(refusal), &ctx).unwrap();
        assert_eq!(out.observation.text, refusal);
        assert!(dir.path().join("x").exists(), "the refused command ran");
        assert!(policy_rejection(&call("Chunk ID: 1\nOutput:\n")).is_none());
    }

    #[test]
    fn masks_a_code_mode_result_printed_as_json() {
        let a = r#"{"chunk_id":"8f0d39","wall_time_seconds":6.75e-6,"session_id":71089,"original_token_count":2,"output":"hi\n"}"#;
        let b = r#"{"chunk_id":"00aa11","wall_time_seconds":0.25,"session_id":45569,"original_token_count":2,"output":"hi\n"}"#;
        assert_eq!(mask_dynamic(a), mask_dynamic(b));
        assert_ne!(mask_dynamic(a), mask_dynamic(&b.replace("hi", "ho")));
    }

    #[test]
    fn masks() {
        let a = "Chunk ID: d54f7c\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 2\nOutput:\na.txt\n";
        let b = "Chunk ID: 00aa11\nWall time: 0.0123 seconds\nProcess exited with code 0\nOriginal token count: 2\nOutput:\na.txt\n";
        assert_eq!(mask_dynamic(a), mask_dynamic(b));
        assert_eq!(
            mask_dynamic("Exit code: 0\nWall time: 0 seconds\nOutput:\nx"),
            mask_dynamic("Exit code: 0\nWall time: 0.1 seconds\nOutput:\nx")
        );
        assert_ne!(mask_dynamic(a), mask_dynamic(&a.replace("a.txt", "b.txt")));
    }

    #[test]
    fn unified_truncation_as_recorded() {
        // tests/fixtures/codex/recorded/commands: `seq 1 2000` with max_output_tokens 60.
        let out: String = (1..=2000).map(|i| format!("{i}\n")).collect();
        let t = format_unified(Duration::ZERO, Some(0), None, &out, out.len(), 60);
        let body = t.split_once("Output:\n").unwrap().1;
        assert!(body.starts_with("Warning: truncated output (original token count: 2224)\nTotal output lines: 2000\n\n1\n2\n"), "{body}");
        assert!(body.contains("43\n…2164 tokens truncated…1977\n"), "{body}");
        assert!(!format_unified(Duration::ZERO, Some(0), None, "a\n", 2, 60).contains("Warning"));
    }

    #[test]
    fn freeform_zero() {
        assert_eq!(
            format_freeform(0, Duration::from_millis(3), "ok\n"),
            "Exit code: 0\nWall time: 0 seconds\nOutput:\nok\n"
        );
        assert_eq!(
            format_freeform(2, Duration::from_millis(260), "x"),
            "Exit code: 2\nWall time: 0.3 seconds\nOutput:\nx"
        );
    }
}
