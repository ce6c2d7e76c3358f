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
//! Read state: a command that only prints a file (`cat`, `nl`, `head`, `tail`, `sed -n
//! 'a,bp'`, a lone `grep`/`rg` on one file; `qQo`/`ELi`) records it as read, so a later Edit
//! behaves as after a Read; after a file-rewriting command (`sed -i`, formatters, `--fix`;
//! `RJi`) the read files whose mtime moved are listed in
//! "[This command modified N files you've previously read: … Call Read before editing.]"
//! (Claude lists them in the order its parallel `stat` calls complete; here: first-read
//! order).
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
    let segments = split_commands(command, true);
    let last = segments
        .iter()
        .rev()
        .find(|s| !s.trim().is_empty())
        .cloned()
        .unwrap_or_default();
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
    let timeout_ms = opt_int(TOOL, input, "timeout")?
        .unwrap_or(DEFAULT_TIMEOUT_MS)
        .clamp(1, MAX_TIMEOUT_MS);
    if command.contains('\0') {
        return Ok(Output::thrown(
            "Bash command cannot contain null bytes (\\0). Remove the null byte and try again.",
        ));
    }
    let cwd = cx.cwd();
    let start = cx.start_cwd();
    // The shell cwd must stay in the workspace (it always does: it only moves inside the
    // start directory, which the same-path rule puts at the workspace).
    let run_dir = crate::workspace::confine(&cx.exec.workspace, &cwd)?;
    let cwd_path = cwd_file_path();
    let _cleanup = RemoveOnDrop(cwd_path.clone());
    let script = format!(
        "eval {} < /dev/null && pwd -P >| {}",
        shell_quote(command),
        shell_quote(&cwd_path.to_string_lossy())
    );
    let mut spec = CommandSpec::new("/bin/bash", &run_dir)
        .listed_in(crate::supervisor::groups::dir_of(&cx.exec.state_dir))
        .arg("-c")
        .arg(script);
    spec.merge_stderr = true;
    // Claude's own limit, unless the replay's per-call limit is shorter (then the command
    // is killed and the call fails rather than running on).
    spec.timeout = Some(
        Duration::from_millis(timeout_ms as u64).min(cx.exec.timeout.max(Duration::from_millis(1))),
    );
    spec.log_path = Some(
        cx.exec
            .log_dir
            .join(format!("{}.bash.log", sanitize(cx.call_id))),
    );
    spec.capture_head = 8 << 20;
    spec.capture_tail = 1 << 20;
    spec.env.push(("CLAUDECODE".into(), "1".into()));
    spec.env.push(("GIT_EDITOR".into(), "true".into()));
    for (k, v) in &cx.config.bash_env {
        spec.env.push((k.into(), v.into()));
    }
    // `C = Math.floor(Date.now() / 1000) * 1000`: the start, floored to the second.
    let started_floor_ms = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        * 1000) as i64;
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
    let new_cwd = std::fs::read_to_string(&cwd_path)
        .ok()
        .map(|s| PathBuf::from(s.trim_end_matches('\n')));
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
        let text = [format!("Exit code {code}"), stderr]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
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
    if let Some(hint) = stale_read_hint(command, cx, started_floor_ms) {
        parts.push(hint);
    }
    // `qQo`: a command that only printed a file (cat, head, tail, sed -n, grep …) puts it
    // in the read-file state. The output is compared only when it was small enough to be
    // shown inline.
    let shown = clean_output_for_tracking(&output);
    let inline = (shown.encode_utf16().count() <= 30_000).then_some(shown.as_str());
    track_reads(command, code, inline, cx);
    let mut out = Output::ok(parts.join("\n"));
    out.exit_code = Some(code);
    Ok(out)
}

/// `Fkr`: from the line of the first non-blank character to the end of the line of the last.
fn clean_output_for_tracking(s: &str) -> String {
    let end = s.trim_end().len();
    if end == 0 {
        return String::new();
    }
    let lead = s.len() - s.trim_start().len();
    let start = s[..lead].rfind('\n').map_or(0, |i| i + 1);
    let stop = s[end..].find('\n').map_or(s.len(), |i| end + i);
    s[start..stop].to_string()
}

/// `mP`: split a simple command into words (quotes and backslashes as in the shell).
fn shell_words(s: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return None,
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x @ ('"' | '\\' | '$' | '`')) => cur.push(x),
                            Some(x) => {
                                cur.push('\\');
                                cur.push(x)
                            }
                            None => return None,
                        },
                        Some(x) => cur.push(x),
                        None => return None,
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(x) = chars.next() {
                    cur.push(x);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Some(words)
}

/// A file a command printed (`ELi`'s parsers `M8i`, `D8i`, `L8i`, `N8i`, `W8i`).
#[derive(Debug, Clone, PartialEq)]
struct PrintedFile {
    path: String,
    start: Option<usize>,
    end: Option<usize>,
    tail: Option<usize>,
    numbered: bool,
    requires_exit_zero: bool,
    not_in_context: bool,
}

impl PrintedFile {
    fn whole(path: String) -> Self {
        PrintedFile {
            path,
            start: None,
            end: None,
            tail: None,
            numbered: false,
            requires_exit_zero: false,
            not_in_context: false,
        }
    }
}

fn parse_sed(w: &[String]) -> Option<PrintedFile> {
    if w.first()? != "sed" {
        return None;
    }
    let (mut quiet, mut script, mut file) = (false, None::<&String>, None::<&String>);
    for a in &w[1..] {
        if a.starts_with('-') {
            if a.starts_with("--") {
                if a == "--in-place" || a.starts_with("--in-place=") || a == "--expression" {
                    return None;
                }
                if a == "--quiet" || a == "--silent" {
                    quiet = true;
                }
            } else {
                if a.contains('i') || a == "-e" {
                    return None;
                }
                if a.contains('n') {
                    quiet = true;
                }
            }
            continue;
        }
        if script.is_none() {
            script = Some(a);
        } else if file.is_none() {
            file = Some(a);
        } else {
            return None;
        }
    }
    let (script, file) = (script?, file?);
    if !quiet {
        return None;
    }
    let body = script.strip_suffix('p')?;
    let (a, b) = match body.split_once(',') {
        Some((a, b)) => (a, b),
        None => (body, body),
    };
    let all_digits = |x: &str| !x.is_empty() && x.bytes().all(|c| c.is_ascii_digit());
    if !all_digits(a) || !all_digits(b) {
        return None;
    }
    Some(PrintedFile {
        start: a.parse().ok(),
        end: b.parse().ok(),
        ..PrintedFile::whole(file.clone())
    })
}

fn parse_cat(w: &[String]) -> Option<PrintedFile> {
    let allowed: &[&str] = match w.first()?.as_str() {
        "cat" => &["-n", "--number"],
        "nl" => &[],
        "bat" | "batcat" => &["-n", "--number", "-p", "--plain"],
        _ => return None,
    };
    let mut file = None;
    for a in &w[1..] {
        if a.starts_with('-') && a != "-" {
            if !allowed.contains(&a.as_str()) {
                return None;
            }
            continue;
        }
        if file.is_some() {
            return None;
        }
        file = Some(a.clone());
    }
    let file = file.filter(|f| f != "-")?;
    let numbered = w[0] == "nl" || w.iter().any(|a| a == "-n" || a == "--number");
    Some(PrintedFile {
        numbered,
        ..PrintedFile::whole(file)
    })
}

/// `GQo`: the line count and file of head/tail.
fn head_tail_args(w: &[String]) -> Option<(usize, String)> {
    let mut count: Option<usize> = None;
    let mut file: Option<String> = None;
    let digits = |x: &str| !x.is_empty() && x.bytes().all(|c| c.is_ascii_digit());
    let mut i = 1;
    while i < w.len() {
        let a = &w[i];
        if a == "-n" || a == "--lines" {
            i += 1;
            let v = w.get(i)?;
            if !digits(v) {
                return None;
            }
            count = v.parse().ok();
        } else if let Some(v) = a.strip_prefix("--lines=") {
            if !digits(v) {
                return None;
            }
            count = v.parse().ok();
        } else if a.len() > 2 && a.starts_with("-n") && digits(&a[2..]) {
            count = a[2..].parse().ok();
        } else if a.len() > 1 && a.starts_with('-') && digits(&a[1..]) {
            count = a[1..].parse().ok();
        } else if a.starts_with('-') {
            return None;
        } else {
            if file.is_some() {
                return None;
            }
            file = Some(a.clone());
        }
        i += 1;
    }
    let file = file.filter(|f| f != "-")?;
    let count = count.unwrap_or(10);
    (count != 0).then_some((count, file))
}

fn parse_grep(w: &[String]) -> Option<PrintedFile> {
    let rg = w.first()? == "rg";
    if !rg && !["grep", "egrep", "fgrep"].contains(&w[0].as_str()) {
        return None;
    }
    let short_ok = |a: &str, set: &str| {
        a.len() > 1 && a[1..].chars().all(|c| set.contains(c)) && !a.starts_with("--")
    };
    let long_grep = [
        "--line-number",
        "--ignore-case",
        "--word-regexp",
        "--line-regexp",
        "--extended-regexp",
        "--fixed-strings",
        "--basic-regexp",
        "--perl-regexp",
        "--with-filename",
        "--no-filename",
        "--color=never",
        "--color=auto",
    ];
    let long_rg = [
        "--ignore-case",
        "--smart-case",
        "--case-sensitive",
        "--word-regexp",
        "--line-regexp",
        "--fixed-strings",
        "--line-number",
        "--no-line-number",
        "--with-filename",
        "--no-filename",
        "--multiline",
        "--pcre2",
    ];
    let digits = |x: &str| !x.is_empty() && x.bytes().all(|c| c.is_ascii_digit());
    let (mut pattern, mut file) = (None::<&String>, None::<&String>);
    let mut i = 1;
    while i < w.len() {
        let a = &w[i];
        if a.starts_with('-') && a != "-" {
            if a == "-A"
                || a == "-B"
                || a == "-C"
                || (rg && (a == "--after-context" || a == "--before-context" || a == "--context"))
            {
                i += 1;
                if !w.get(i).is_some_and(|v| digits(v)) {
                    return None;
                }
            } else if (a.len() > 2 && ["-A", "-B", "-C"].contains(&&a[..2]) && digits(&a[2..]))
                || ["--after-context=", "--before-context=", "--context="]
                    .iter()
                    .any(|p| a.strip_prefix(p).is_some_and(digits))
                || (if rg {
                    short_ok(a, "iSswxFnNHUP")
                } else {
                    short_ok(a, "niwxEFGPHh")
                })
                || (if rg {
                    long_rg.contains(&a.as_str())
                } else {
                    long_grep.contains(&a.as_str())
                })
            {
            } else {
                return None;
            }
        } else if pattern.is_none() {
            pattern = Some(a);
        } else if file.is_none() {
            file = Some(a);
        } else {
            return None;
        }
        i += 1;
    }
    let (_, file) = (pattern?, file?);
    if file == "-" || file.contains(['*', '?', '[', '{']) {
        return None;
    }
    Some(PrintedFile {
        requires_exit_zero: true,
        not_in_context: true,
        ..PrintedFile::whole(file.clone())
    })
}

/// `ELi`: the files a command only printed.
fn printed_files(command: &str) -> Vec<PrintedFile> {
    if command.contains(['|', '<', '>']) {
        return Vec::new();
    }
    let segments = split_simple_commands(command);
    if segments.is_empty() {
        return Vec::new();
    }
    let n = segments.len();
    let mut out = Vec::new();
    for seg in &segments {
        let Some(w) = shell_words(seg) else {
            return Vec::new();
        };
        let found = parse_sed(&w)
            .or_else(|| parse_cat(&w))
            .or_else(|| {
                (w.first().map(String::as_str) == Some("head"))
                    .then(|| head_tail_args(&w))
                    .flatten()
                    .map(|(c, f)| PrintedFile {
                        start: Some(1),
                        end: Some(c),
                        ..PrintedFile::whole(f)
                    })
            })
            .or_else(|| {
                (w.first().map(String::as_str) == Some("tail"))
                    .then(|| head_tail_args(&w))
                    .flatten()
                    .map(|(c, f)| PrintedFile {
                        tail: Some(c),
                        ..PrintedFile::whole(f)
                    })
            })
            .or_else(|| if n == 1 { parse_grep(&w) } else { None });
        match found {
            Some(f) => out.push(f),
            None => {
                let t = seg.trim_start();
                let benign = ["echo", "printf", "true", ":"].iter().any(|b| {
                    t.strip_prefix(b).is_some_and(|rest| {
                        rest.is_empty()
                            || !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_')
                    })
                });
                if n > 1 && !benign {
                    return Vec::new();
                }
            }
        }
    }
    out
}

/// `G8i`: the part of the file the command printed, with Read's offset/limit.
fn printed_part(content: &str, f: &PrintedFile) -> Option<(String, Option<i64>, Option<i64>)> {
    if let Some(t) = f.tail {
        let mut lines: Vec<&str> = content.split('\n').collect();
        if lines.last() == Some(&"") {
            lines.pop();
        }
        if lines.is_empty() {
            return None;
        }
        let k = t.min(lines.len());
        let c = lines.len() - k + 1;
        return Some((lines[c - 1..].join("\n"), Some(c as i64), Some(k as i64)));
    }
    let Some(start) = f.start else {
        return Some((content.to_string(), None, None));
    };
    let lines: Vec<&str> = content.split('\n').collect();
    let g = start.max(1);
    let h = f.end.unwrap_or(g).max(g);
    if g > lines.len() {
        return None;
    }
    Some((
        lines[g - 1..h.min(lines.len())].join("\n"),
        Some(g as i64),
        Some((h - g + 1) as i64),
    ))
}

/// `z8i`: the printed part appears in the output (or, for numbered listings, once the
/// line numbers are stripped).
fn output_shows(output: &str, part: &str, numbered: bool) -> bool {
    let mut g = part;
    loop {
        let t = g.trim_start_matches(|c: char| c.is_whitespace() && c != '\n');
        match t.strip_prefix('\n') {
            Some(rest) => g = rest,
            None => break,
        }
    }
    let g = g.trim_end();
    let h = output.replace("\r\n", "\n");
    if h.contains(g) {
        return true;
    }
    numbered
        && h.split('\n')
            .map(|l| {
                let t = l.trim_start_matches([' ', '\t']);
                let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
                if digits > 0 && t[digits..].starts_with([' ', '\t']) {
                    t[digits + 1..].to_string()
                } else if l.trim_matches([' ', '\t']).is_empty() {
                    String::new()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
            .contains(g)
}

fn track_reads(command: &str, code: i32, output: Option<&str>, cx: &mut Cx<'_>) {
    for f in printed_files(command) {
        if f.path.len() > 4096 || (f.requires_exit_zero && code != 0) {
            continue;
        }
        let Ok(path) = cx.confine(&f.path) else {
            continue;
        };
        if cx.state.read_files.contains_key(&path) {
            continue;
        }
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if !meta.is_file() || meta.len() > 10_485_760 {
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let text = super::write::normalize(&String::from_utf8_lossy(&bytes));
        let Some((part, offset, limit)) = printed_part(&text, &f) else {
            continue;
        };
        if part.trim().is_empty() && !text.trim().is_empty() {
            continue;
        }
        if let Some(out) = output {
            if !f.not_in_context && !output_shows(out, &part, f.numbered) {
                continue;
            }
        }
        let Ok(ts) = super::mtime_ms(&path) else {
            continue;
        };
        cx.state.remember(
            path,
            super::FileReadState {
                content: part,
                timestamp: ts,
                offset,
                limit,
                is_partial_view: false,
                content_not_in_model_context: f.not_in_context || output.is_none(),
            },
        );
    }
}

/// The simple commands of a command line, split at top-level `&&`, `||`, `;` and newlines.
fn split_simple_commands(command: &str) -> Vec<String> {
    split_commands(command, false)
        .into_iter()
        .filter(|s| !s.trim().is_empty())
        .collect()
}

/// Split a command line at top-level `&&`, `||`, `;`, newlines and, with `pipes`, single `|`,
/// ignoring quoted text (segments may be empty).
fn split_commands(command: &str, pipes: bool) -> Vec<String> {
    let mut segments: Vec<String> = vec![String::new()];
    let chars: Vec<char> = command.chars().collect();
    let (mut sq, mut dq) = (false, false);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let cur = segments.last_mut().expect("non-empty");
        if sq {
            if c == '\'' {
                sq = false;
            }
            cur.push(c);
        } else if dq {
            if c == '\\' && i + 1 < chars.len() {
                cur.push(c);
                cur.push(chars[i + 1]);
                i += 2;
                continue;
            }
            if c == '"' {
                dq = false;
            }
            cur.push(c);
        } else if c == '\'' {
            sq = true;
            cur.push(c);
        } else if c == '"' {
            dq = true;
            cur.push(c);
        } else if c == ';' || c == '\n' || ((c == '&' || c == '|') && chars.get(i + 1) == Some(&c))
        {
            if c == '&' || c == '|' {
                i += 1;
            }
            segments.push(String::new());
        } else if pipes && c == '|' {
            segments.push(String::new());
        } else {
            cur.push(c);
        }
        i += 1;
    }
    segments
}

/// `vJi`: commands that typically rewrite files in place (formatters, `sed -i`, `--fix`…).
/// Versions before `BASH_SED_I_NOTE` lack the `sed -i` alternative.
const SED_I: &str = r"\bg?sed\b.*\s-[a-zA-Z]*i|";
const REWRITERS: &str = r"--write|--fix|--in-place|--auto-correct|\bg?sed\b.*\s-[a-zA-Z]*i|\brun\s+format\b|\brun\s+fix\b|\b(yarn|pnpm)\s+format\b|\blint:file\b|\blint:fix\b|\bblack\b|\bisort\b|\bruff\s+format\b|\bcargo\s+(fmt|fix)\b|\brustfmt\b|\bgo\s+fmt\b|\bterraform\s+fmt\b|\bdprint\s+fmt\b|\bswiftformat\b|\bphpcbf\b";

/// `RJi` + the `staleReadFileStateHint` of `yi.call`: after a file-rewriting command, the
/// files the model has read whose mtime moved past both the command's start (floored to
/// the second) and the read.
fn stale_read_hint(command: &str, cx: &Cx<'_>, started_floor_ms: i64) -> Option<String> {
    static RE: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    static RE_NO_SED: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let re = if cx.config.behaviour.bash_sed_i_note {
        RE.get_or_init(|| regex::Regex::new(REWRITERS).ok())
    } else {
        RE_NO_SED.get_or_init(|| regex::Regex::new(&REWRITERS.replacen(SED_I, "", 1)).ok())
    }
    .as_ref()?;
    if !re.is_match(command) {
        return None;
    }
    let modified: Vec<&PathBuf> = cx
        .state
        .read_order
        .iter()
        .filter(|p| {
            let Some(st) = cx.state.read_files.get(*p) else {
                return false;
            };
            super::mtime_ms(p).is_ok_and(|m| m > started_floor_ms && m > st.timestamp)
        })
        .collect();
    if modified.is_empty() {
        return None;
    }
    let cwd = cx.cwd();
    let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
    let shown: Vec<String> = modified
        .iter()
        .take(5)
        .map(|p| {
            super::relative_path(&cwd, p)
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| p.display().to_string())
        })
        .collect();
    let more = if modified.len() > 5 {
        format!(" and {} more", modified.len() - 5)
    } else {
        String::new()
    };
    Some(format!(
        "[This command modified {} {} you've previously read: {}{more}. Call Read before editing.]",
        modified.len(),
        super::text::plural(modified.len(), "file"),
        shown.join(", ")
    ))
}

/// A fresh path for the `pwd -P` of one command.
fn cwd_file_path() -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::env::temp_dir().join(format!(
        "pvisor-claude-cwd-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
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
    fn printed_file_parsers() {
        let one = |c: &str| printed_files(c);
        assert_eq!(one("cat a.txt"), vec![PrintedFile::whole("a.txt".into())]);
        assert!(one("cat -n 'my file'")[0].numbered);
        assert_eq!(one("head -n 5 x")[0].end, Some(5));
        assert_eq!(one("head x")[0].end, Some(10));
        assert_eq!(one("tail -3 x")[0].tail, Some(3));
        assert_eq!(one("sed -n '2,4p' x")[0].start, Some(2));
        assert!(one("sed -i 's/a/b/' x").is_empty());
        assert!(one("cat x | grep y").is_empty());
        assert!(one("cd sub && cat x").is_empty());
        assert_eq!(one("echo hi && cat x").len(), 1);
        assert!(one("grep -n foo x")[0].not_in_context);
        assert!(one("grep foo x && cat y").is_empty());
        assert!(one("grep foo *.rs").is_empty());
        assert_eq!(
            shell_words("a 'b c' \"d\\\"e\" f\\ g").unwrap(),
            vec!["a", "b c", "d\"e", "f g"]
        );
    }

    #[test]
    fn printed_parts() {
        let f = PrintedFile {
            tail: Some(2),
            ..PrintedFile::whole("x".into())
        };
        assert_eq!(
            printed_part("a\nb\nc\n", &f),
            Some(("b\nc".into(), Some(2), Some(2)))
        );
        let f = PrintedFile {
            start: Some(1),
            end: Some(2),
            ..PrintedFile::whole("x".into())
        };
        assert_eq!(
            printed_part("a\nb\nc\n", &f),
            Some(("a\nb".into(), Some(1), Some(2)))
        );
        assert!(output_shows("  1\ta\n  2\tb", "a\nb", true));
        assert!(!output_shows("  1\ta\n  2\tb", "a\nb", false));
    }

    #[test]
    fn stdout_cleanup() {
        assert_eq!(clean_stdout("\n\n  \nhi\n\n"), "hi");
        assert_eq!(clean_stdout("  x\n"), "  x");
    }
}
