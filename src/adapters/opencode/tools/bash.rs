//! `bash {command, timeout?, workdir?}`: `<shell> -c <command>` in the instance directory
//! (or `workdir`), stdout and stderr in one stream in arrival order; the exit code is only
//! in the metadata. Output beyond 2000 lines / 51200 bytes keeps its tail, and the full
//! output is saved (`...output truncated...`). A timeout appends a `<shell_metadata>` note.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use super::truncate::{self, MAX_BYTES};
use super::{invalid, string_param, Env, Produced};
use crate::error::ExecError;
use crate::kit::ExecContext;
use crate::supervisor::{self, CommandSpec};

const TOOL: &str = "bash";
/// OpenCode's default timeout (`OPENCODE_EXPERIMENTAL_BASH_DEFAULT_TIMEOUT_MS` aside).
const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// The metadata preview keeps this many UTF-16 units of the end.
const PREVIEW: usize = 30_000;

fn io(source: std::io::Error) -> ExecError {
    ExecError::Io {
        tool: TOOL.into(),
        source,
    }
}

/// The shell OpenCode picks: `$SHELL` unless it is fish or nu, else bash on PATH, else sh.
fn shell() -> PathBuf {
    if let Some(s) = std::env::var_os("SHELL").map(PathBuf::from) {
        let name = s.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !matches!(name, "fish" | "nu") && s.is_file() {
            return s;
        }
    }
    for dir in std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
    {
        if dir.join("bash").is_file() {
            return dir.join("bash");
        }
    }
    PathBuf::from("/bin/sh")
}

/// `…` + the last 30000 UTF-16 units, for `metadata.output`.
fn preview(s: &str) -> String {
    let units: Vec<u16> = s.encode_utf16().collect();
    if units.len() <= PREVIEW {
        return s.to_string();
    }
    format!(
        "...\n\n{}",
        String::from_utf16_lossy(&units[units.len() - PREVIEW..])
    )
}

pub(super) fn timeout_of(input: &Value) -> Result<u64, Produced> {
    match input.get("timeout") {
        None | Some(Value::Null) => Ok(DEFAULT_TIMEOUT_MS),
        Some(Value::Number(n)) => {
            let shown = super::super::js::number(n);
            match n.as_f64() {
                Some(x) if x.fract() != 0.0 => Err(invalid(
                    TOOL,
                    &format!("Expected an integer, got {shown}\n  at [\"timeout\"]"),
                )),
                Some(x) if x <= 0.0 => Err(invalid(
                    TOOL,
                    &format!("Expected a value greater than 0, got {shown}\n  at [\"timeout\"]"),
                )),
                Some(x) => Ok(x as u64),
                None => Ok(DEFAULT_TIMEOUT_MS),
            }
        }
        Some(v) => Err(invalid(
            TOOL,
            &format!(
                "Expected number, got {}\n  at [\"timeout\"]",
                super::super::js::stringify(v, 0)
            ),
        )),
    }
}

pub fn run(
    env: &Env,
    ctx: &ExecContext,
    call_id: &str,
    input: &Value,
) -> Result<(Produced, Option<i32>, Vec<PathBuf>), ExecError> {
    let command = match string_param(TOOL, input, "command") {
        Ok(c) => c.to_string(),
        Err(p) => return Ok((p, None, vec![])),
    };
    let timeout_ms = match timeout_of(input) {
        Ok(t) => t,
        Err(p) => return Ok((p, None, vec![])),
    };
    let cwd = match input.get("workdir").and_then(Value::as_str) {
        Some(w) => env.resolve(w),
        None => env.directory.clone(),
    };
    if !cwd.exists() {
        return Ok((
            Produced::err(format!("NotFound: FileSystem.access ({})", cwd.display())),
            None,
            vec![],
        ));
    }
    let cwd = super::confined(ctx, &cwd)?;
    let mut spec = CommandSpec::new(shell(), &cwd)
        .listed_in(crate::supervisor::groups::dir_of(&ctx.state_dir))
        .arg("-c")
        .arg(&command);
    spec.merge_stderr = true;
    spec.timeout = Some(
        Duration::from_millis(timeout_ms + 100).min(ctx.timeout.max(Duration::from_millis(1))),
    );
    let log = ctx.log_dir.join(format!(
        "{}.bash.log",
        call_id.replace(
            |c: char| !c.is_ascii_alphanumeric() && c != '_' && c != '-',
            "_"
        )
    ));
    std::fs::create_dir_all(&ctx.log_dir).map_err(io)?;
    spec.log_path = Some(log.clone());
    spec.capture_head = 4 * MAX_BYTES;
    spec.capture_tail = 4 * MAX_BYTES;
    for (k, v) in super::super::rebuild::agent_env_vars(&env.home) {
        spec.env.push((k.into(), v.into()));
    }
    spec.env.push(("AGENT".into(), "1".into()));
    spec.env.push(("OPENCODE".into(), "1".into()));
    spec.env
        .push(("OPENCODE_PID".into(), std::process::id().to_string().into()));
    let outcome = supervisor::run(&spec).map_err(io)?;
    let exit = if outcome.timed_out {
        None
    } else {
        outcome.code
    };
    let full: String = if outcome.stdout.truncated() {
        String::from_utf8_lossy(&std::fs::read(&log).map_err(io)?).into_owned()
    } else {
        String::from_utf8_lossy(&outcome.stdout.joined()).into_owned()
    };
    // OpenCode keeps at most 2 × 51200 bytes of the latest chunks; chunks are not
    // reproducible, so the tail of the full output stands for them.
    let dropped = full.len() > 2 * MAX_BYTES;
    let kept: &str = if dropped {
        let mut start = full.len() - 2 * MAX_BYTES;
        while !full.is_char_boundary(start) {
            start += 1;
        }
        &full[start..]
    } else {
        &full
    };
    let (text, cut) = truncate::tail(kept);
    let truncated = dropped || cut;
    let saved = if full.len() > MAX_BYTES || cut {
        Some(truncate::save(env, TOOL, &full)?)
    } else {
        None
    };
    let mut out = if text.is_empty() {
        "(no output)".to_string()
    } else {
        text
    };
    if truncated {
        if let Some(path) = &saved {
            out = format!("...output truncated...\n\nFull output saved to: {path}\n\n{out}");
        }
    }
    if outcome.timed_out {
        out.push_str(&format!("\n\n<shell_metadata>\nshell tool terminated command after exceeding timeout {timeout_ms} ms. If this command is expected to take longer and is not waiting for interactive input, retry with a larger timeout value in milliseconds.\n</shell_metadata>"));
    }
    let mut metadata = json!({
        "output": if full.is_empty() { preview(&out) } else { preview(&full) },
        "exit": exit,
        "truncated": truncated,
    });
    if let (true, Some(p)) = (truncated, &saved) {
        metadata["outputPath"] = json!(p);
    }
    Ok((Produced::ok(out, command, metadata), exit, vec![]))
}
