//! Bash (`yi` in `chunk-bqhgd24a.js`: `call`, `AJi`, `mapToolResultToToolResultBlockParam`;
//! exit-code meaning in `yQo`/`z2t`; error text in `s9`/`$Cr` of `chunk-j4fv94pp.js`).
//!
//! How Claude runs a command: `bash -c '<setup> && eval <command> && pwd -P >| <cwd file>'`
//! with stdin closed and stdout and stderr sent to the *same* file (one interleaved
//! stream). The working directory is the session's current directory; after a command that
//! succeeded, the new `pwd -P` becomes the current directory when it is inside the start
//! directory, otherwise the shell goes back there and "Shell cwd was reset to <dir>" is
//! added to the output.
//!
//! Result (success, or a non-zero exit a command treats as normal — `grep`/`rg`/`egrep`/
//! `fgrep` 1 = no match, `find` 1, `diff` 1, `test`/`[` 1, `git diff`/`git grep` 1):
//! the output with leading blank lines and trailing whitespace removed, then the notes, one
//! per line; empty output becomes "(Bash completed with no output)"; `is_error: false`.
//!
//! Result (other non-zero exit): `Exit code <n>\n<output>` (the whole text trimmed), capped
//! at 10000 characters around "... [N characters truncated] ...", `is_error: true`.
//!
//! Output over 30000 characters is saved to a file and shown as a `<persisted-output>`
//! preview (the file path differs from the original run's).
//!
//! A command still running at its timeout (default 120 s, max 600 s) is moved to the
//! background by Claude, with a random task id in the result: not reproducible, so the
//! replay kills the process group and reports an error instead.
//!
//! Not reproduced: Claude's shell snapshot (aliases and functions from the user's
//! profile) and the sandbox; the command gets the inherited environment plus
//! `CLAUDECODE=1` and `GIT_EDITOR=true`.

use super::{io_error, opt_int, opt_str, req_str, Cx, Output};
use crate::error::ExecError;
use crate::supervisor::{self, CommandSpec};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

const TOOL: &str = "Bash";
const DEFAULT_TIMEOUT_MS: i64 = 120_000;
const MAX_TIMEOUT_MS: i64 = 600_000;

/// Single-quote a string for bash.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The first word of the last simple command (`nb(e).at(-1)` then `V9i`): split on the
/// top-level `&&`, `||`, `;`, `|` and newlines, ignoring quoted text.
pub(crate) fn last_command_word(command: &str) -> (String, Vec<String>) {
    let mut segments: Vec<String> = vec![String::new()];
    let chars: Vec<char> = command.chars().collect();
    let (mut sq, mut dq) = (false, false);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if sq {
            if c == '\'' {
                sq = false;
            }
            segments.last_mut().map(|s| s.push(c));
        } else if dq {
            if c == '\\' && i + 1 < chars.len() {
                segments.last_mut().map(|s| {
                    s.push(c);
                    s.push(chars[i + 1])
                });
                i += 2;
                continue;
            }
            if c == '"' {
                dq = false;
            }
            segments.last_mut().map(|s| s.push(c));
        } else if c == '\'' {
            sq = true;
            segments.last_mut().map(|s| s.push(c));
        } else if c == '"' {
            dq = true;
            segments.last_mut().map(|s| s.push(c));
        } else if c == ';' || c == '\n' || c == '|' || (c == '&' && i + 1 < chars.len() && chars[i + 1] == '&') {
            if (c == '|' || c == '&') && i + 1 < chars.len() && chars[i + 1] == c {
                i += 1;
            }
            segments.push(String::new());
        } else {
            segments.last_mut().map(|s| s.push(c));
        }
        i += 1;
    }
    let last = segments.iter().rev().find(|s| !s.trim().is_empty()).cloned().unwrap_or_default();
    let words: Vec<String> = last.split_whitespace().map(str::to_owned).collect();
    (words.first().cloned().unwrap_or_default(), words)
}

/// `z2t`: whether a non-zero exit is an error for this command.
pub(crate) fn exit_is_error(command: &str, code: i32) -> bool {
    let (first, words) = last_command_word(command);
    let semantic = |code: i32| code >= 2;
    if first == "git" {
        // `Y2t`: the git subcommand, skipping options (and the values of -C / -c).
        let mut i = 1;
        while i < words.len() {
            let w = &words[i];
            if w.starts_with('-') {
                if w == "-C" || w == "-c" {
                    i += 1;
                }
                i += 1;
                continue;
            }
            if w == "diff" || w == "grep" {
                return semantic(code);
            }
            break;
        }
        return code != 0;
    }
    match first.as_str() {
        "grep" | "rg" | "egrep" | "fgrep" | "find" | "diff" | "test" | "[" => semantic(code),
        _ => code != 0,
    }
}

/// `Fkr`-like cleanup of the success text: drop leading blank lines, trim the end.
fn clean_stdout(s: &str) -> String {
    let mut rest = s;
    loop {
        let trimmed = rest.trim_start_matches(|c: char| c.is_whitespace() && c != '\n');
        if let Some(after) = trimmed.strip_prefix('\n') {
            rest = after;
        } else {
            break;
        }
    }
    rest.trim_end().to_string()
}

fn within(dir: &Path, root: &Path) -> bool {
    dir == root || dir.starts_with(root)
}

pub(crate) fn run(input: &Value, cx: &mut Cx<'_>) -> Result<Output, ExecError> {
    let command = req_str(TOOL, input, "command")?;
    let _description = opt_str(TOOL, input, "description")?;
    let timeout_ms = opt_int(TOOL, input, "timeout")?.unwrap_or(DEFAULT_TIMEOUT_MS).clamp(1, MAX_TIMEOUT_MS);
    if command.contains('\0') {
        return Ok(Output::thrown("Bash command cannot contain null bytes (\\0). Remove the null byte and try again."));
    }
    let cwd = cx.cwd();
    let start = cx.start_cwd();
    // The shell cwd must stay in the workspace (it always does: it only moves inside the
    // start directory, which the same-path rule puts at the workspace).
    let run_dir = crate::workspace::confine(&cx.exec.workspace, &cwd)?;
    let cwd_path = cwd_file_path();
    let _cleanup = RemoveOnDrop(cwd_path.clone());
    let script = format!("eval {} < /dev/null && pwd -P >| {}", shell_quote(command), shell_quote(&cwd_path.to_string_lossy()));
    let mut spec = CommandSpec::new("/bin/bash", &run_dir).arg("-c").arg(script);
    spec.merge_stderr = true;
    spec.timeout = Some(Duration::from_millis(timeout_ms as u64));
    spec.log_path = Some(cx.exec.log_dir.join(format!("{}.bash.log", sanitize(cx.call_id))));
    spec.capture_head = 8 << 20;
    spec.capture_tail = 1 << 20;
    spec.env.push(("CLAUDECODE".into(), "1".into()));
    spec.env.push(("GIT_EDITOR".into(), "true".into()));
    for (k, v) in &cx.config.bash_env {
        spec.env.push((k.into(), v.into()));
    }
    let outcome = supervisor::run(&spec).map_err(|e| io_error(TOOL, e))?;
    if outcome.timed_out {
        return Err(io_error(
            TOOL,
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("command still running after its {timeout_ms} ms timeout (Claude moves it to the background with a random task id; not reproducible)"),
            ),
        ));
    }
    let code = outcome.shell_status();
    let output = String::from_utf8_lossy(&outcome.stdout.joined()).into_owned();

    // Where the shell ended up.
    let mut notes: Vec<String> = Vec::new();
    let new_cwd = std::fs::read_to_string(&cwd_path).ok().map(|s| PathBuf::from(s.trim_end_matches('\n')));
    if let Some(new_cwd) = new_cwd.filter(|p| !p.as_os_str().is_empty()) {
        let root = std::fs::canonicalize(&start).unwrap_or_else(|_| start.clone());
        if within(&new_cwd, &root) {
            if new_cwd != std::fs::canonicalize(&cwd).unwrap_or_else(|_| cwd.clone()) {
                cx.state.cwd = Some(new_cwd);
            }
        } else {
            cx.state.cwd = Some(start.clone());
            notes.push(format!("Shell cwd was reset to {}", start.display()));
        }
    }

    let is_error = code != 0 && exit_is_error(command, code);
    if is_error {
        // HA → $Cr: ["Exit code N", stderr (= output + notes), stdout ("")].filter.join("\n")
        let mut stderr = output.clone();
        for n in &notes {
            stderr = format!("{}\n\n{n}", stderr.trim_end());
        }
        let text = [format!("Exit code {code}"), stderr].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join("\n");
        let mut out = Output::thrown(text);
        out.exit_code = Some(code);
        return Ok(out);
    }
    let mut parts: Vec<String> = Vec::new();
    let stdout = clean_stdout(&output);
    if !stdout.is_empty() {
        parts.push(stdout);
    }
    let stderr = notes.join("\n");
    if !stderr.trim().is_empty() {
        parts.push(stderr.trim().to_string());
    }
    let mut out = Output::ok(parts.join("\n"));
    out.exit_code = Some(code);
    Ok(out)
}

/// A fresh path for the `pwd -P` of one command.
fn cwd_file_path() -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    std::env::temp_dir().join(format!("pvisor-claude-cwd-{}-{nanos}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)))
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn sanitize(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_command() {
        assert_eq!(last_command_word("echo hi > a.txt && ls").0, "ls");
        assert_eq!(last_command_word("cat x | grep foo").0, "grep");
        assert_eq!(last_command_word("echo 'a && b'").0, "echo");
        assert_eq!(last_command_word("a; b || c").0, "c");
    }

    #[test]
    fn exit_meanings() {
        assert!(!exit_is_error("grep foo bar", 1));
        assert!(exit_is_error("grep foo bar", 2));
        assert!(!exit_is_error("cd x && git diff --stat", 1));
        assert!(!exit_is_error("git -C repo grep x", 1));
        assert!(exit_is_error("git status", 1));
        assert!(!exit_is_error("test -f x", 1));
        assert!(exit_is_error("false", 1));
        assert!(exit_is_error("ls nope", 2));
    }

    #[test]
    fn stdout_cleanup() {
        assert_eq!(clean_stdout("\n\n  \nhi\n\n"), "hi");
        assert_eq!(clean_stdout("  x\n"), "  x");
    }
}
