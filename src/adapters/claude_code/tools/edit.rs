//! Edit (`DC` in `chunk-bqhgd24a.js`: `validateInput`, `Z3i`, `nXi`, and its
//! `mapToolResultToToolResultBlockParam`; string matching in `chunk-6fmj6syj.js`) and
//! MultiEdit (no longer a tool in 2.1.332; kept for older sessions, see [`run_multi`]).
//!
//! Success texts (`<file_path>` as the model wrote it):
//! - `The file <file_path> has been updated successfully.<suffix>`
//! - with `replace_all`: `The file <file_path> has been updated. All occurrences were successfully replaced.<suffix>`
//!
//! `<suffix>` is " (file state is current in your context — no need to Read it back)" when
//! the model's last full Read (or Write/Edit) of the file matches the content being edited;
//! " (note: the file had been modified on disk since you last read it — the edit applied
//! cleanly, but the file contains other changes not in your context. Read it before edits
//! that depend on surrounding content.)" when the file changed on disk since and the edit
//! still applies (writing allowed without asking); empty otherwise (e.g. edited without a
//! full Read).
//!
//! Refusals (`<tool_use_error>`): "No changes to make: old_string and new_string are exactly
//! the same.", "File does not exist. Note: your current working directory is <cwd>.",
//! "Cannot create new file - file already exists.", "File is a Jupyter Notebook. Use the
//! NotebookEdit to edit this file.", "File has not been read yet. Read it first before
//! writing to it.", "File has been modified since read, …", "String to replace not found in
//! file.\nString: <old_string>", "Found N matches of the string to replace, but replace_all
//! is false. …\nString: <old_string>".
//!
//! Matching follows `Ydt`: the exact string, else the same text with curly quotes
//! normalized (and then `new_string` is given the file's quote style, `T0i`), else the
//! `\uXXXX`-unescaped string. The fourth fallback (non-ASCII `old_string` against a file
//! holding `\uXXXX` escapes) is not reproduced.

use super::read::missing_file_message;
use super::write::{
    keep_bom, normalize, read_existing, write_text, Encoding, FILE_STATE_CURRENT,
    MODIFIED_SINCE_READ, NOT_READ_YET,
};
use super::{
    bad_input, io_error, mtime_ms, null_byte_check, opt_bool, req_str, Cx, FileReadState, Output,
    ReadGuard,
};
use crate::error::ExecError;
use serde_json::Value;

const TOOL: &str = "Edit";

const STALE_NOTE: &str = " (note: the file had been modified on disk since you last read it \u{2014} the edit applied cleanly, but the file contains other changes not in your context. Read it before edits that depend on surrounding content.)";
const NOT_FOUND: &str = "String to replace not found in file.";
const ESCAPE_NOTE: &str = "\n(note: Edit also tried swapping \\uXXXX escapes and their characters; neither form matched, so the mismatch is likely elsewhere in old_string. Re-read the file and copy the exact surrounding text.)";
const ALREADY_EXISTS: &str = "Cannot create new file - file already exists.";
const NOTEBOOK: &str = "File is a Jupyter Notebook. Use the NotebookEdit to edit this file.";
const NOT_APPLIED: &str = "String not found in file. Failed to apply edit.";

const LSQUO: char = '\u{2018}';
const RSQUO: char = '\u{2019}';
const LDQUO: char = '\u{201C}';
const RDQUO: char = '\u{201D}';

/// `W`: curly quotes → straight quotes.
fn straighten(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            LSQUO | RSQUO => '\'',
            LDQUO | RDQUO => '"',
            c => c,
        })
        .collect()
}

fn has_u_escape(s: &str) -> bool {
    let b = s.as_bytes();
    b.windows(6)
        .any(|w| w[0] == b'\\' && w[1] == b'u' && w[2..].iter().all(|c| c.is_ascii_hexdigit()))
}

/// `k`: decode `\uXXXX` escapes (an escaped backslash `\\` is kept).
fn unescape_u(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '\\' && i + 1 < chars.len() && chars[i + 1] == '\\' {
            out.push('\\');
            out.push('\\');
            i += 2;
            continue;
        }
        if chars[i] == '\\' && i + 5 < chars.len() && chars[i + 1] == 'u' {
            let hex: String = chars[i + 2..(i + 6).min(chars.len())].iter().collect();
            if hex.len() == 4 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
                if let Some(c) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(c);
                    i += 6;
                    continue;
                }
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// `Ydt`: the text in `file` that `old` designates.
pub(crate) fn find_actual(file: &str, old: &str) -> Option<String> {
    if file.contains(old) {
        return Some(old.to_string());
    }
    let s_old = straighten(old);
    let s_file = straighten(file);
    if let Some(pos) = s_file.find(&s_old) {
        // Quote replacement keeps char counts; map the char offset back.
        let char_pos = s_file[..pos].chars().count();
        let n = old.chars().count();
        return Some(file.chars().skip(char_pos).take(n).collect());
    }
    if has_u_escape(old) {
        let u = unescape_u(old);
        if u != old && file.contains(&u) {
            return Some(u);
        }
    }
    None
}

fn opens_quote(chars: &[char], i: usize) -> bool {
    if i == 0 {
        return true;
    }
    matches!(
        chars[i - 1],
        ' ' | '\t' | '\n' | '\r' | '(' | '[' | '{' | '\u{2014}' | '\u{2013}'
    )
}

/// `T0i`: when the file's text used curly quotes where `old_string` had straight ones,
/// give `new_string` curly quotes too.
fn quote_style(old: &str, actual: &str, new: &str) -> String {
    if old == actual {
        return new.to_string();
    }
    let doubles = actual.contains(LDQUO) || actual.contains(RDQUO);
    let singles = actual.contains(LSQUO) || actual.contains(RSQUO);
    if !doubles && !singles {
        return new.to_string();
    }
    let mut chars: Vec<char> = new.chars().collect();
    if doubles {
        let snapshot = chars.clone();
        for (i, c) in chars.iter_mut().enumerate() {
            if *c == '"' {
                *c = if opens_quote(&snapshot, i) {
                    LDQUO
                } else {
                    RDQUO
                };
            }
        }
    }
    if singles {
        let snapshot = chars.clone();
        for (i, c) in chars.iter_mut().enumerate() {
            if *c == '\'' {
                let prev_letter = i > 0 && snapshot[i - 1].is_alphabetic();
                let next_letter = i + 1 < snapshot.len() && snapshot[i + 1].is_alphabetic();
                *c = if prev_letter && next_letter {
                    RSQUO
                } else if opens_quote(&snapshot, i) {
                    LSQUO
                } else {
                    RSQUO
                };
            }
        }
    }
    chars.into_iter().collect()
}

/// `OEr`: the `new_string` actually written (`fe` for escape styles is reproduced only for
/// the `\uXXXX`-unescaped case).
fn actual_new(old: &str, actual: &str, new: &str) -> String {
    let styled = quote_style(old, actual, new);
    if old != actual && has_u_escape(old) && unescape_u(old) == actual {
        return unescape_u(&styled);
    }
    styled
}

/// `DEr`: two non-overlapping occurrences.
fn occurs_twice(text: &str, needle: &str) -> bool {
    match text.find(needle) {
        Some(i) => text[i + needle.len()..].contains(needle),
        None => false,
    }
}

/// `R0i`: the "Found N matches" refusal.
fn ambiguity(text: &str, actual: &str, replace_all: bool, shown: &str) -> Option<String> {
    if replace_all || actual.is_empty() || !occurs_twice(text, actual) {
        return None;
    }
    let n = text.matches(actual).count();
    Some(format!(
        "Found {n} matches of the string to replace, but replace_all is false. To replace all occurrences, set replace_all to true. To replace only one occurrence, please provide more context to uniquely identify the instance.\nString: {shown}"
    ))
}

/// `IEr` (+ `Jbs`): replace the first or every occurrence; deleting a string that is not
/// newline-terminated also removes the newline after it.
fn apply(text: &str, old: &str, new: &str, all: bool) -> String {
    let target = if new.is_empty() && !old.ends_with('\n') && text.contains(&format!("{old}\n")) {
        format!("{old}\n")
    } else {
        old.to_string()
    };
    if all {
        text.replace(&target, new)
    } else {
        text.replacen(&target, new, 1)
    }
}

/// `eps`: accepted aliases of the input fields.
fn normalize_input(input: &Value) -> Value {
    let mut v = input.clone();
    if let Some(m) = v.as_object_mut() {
        if let Some(r) = m.remove("replace_name") {
            if !m.contains_key("replace_all") {
                m.insert(
                    "replace_all".into(),
                    Value::Bool(r == Value::Bool(true) || r == Value::String("true".into())),
                );
            }
        }
        for (alias, name) in [
            ("path", "file_path"),
            ("old_str", "old_string"),
            ("new_str", "new_string"),
        ] {
            if !m.contains_key(name) && m.get(alias).is_some_and(Value::is_string) {
                if let Some(x) = m.remove(alias) {
                    m.insert(name.into(), x);
                }
            }
        }
    }
    v
}

pub(crate) fn run(input: &Value, cx: &mut Cx<'_>) -> Result<Output, ExecError> {
    let input = normalize_input(input);
    let file_path = req_str(TOOL, &input, "file_path")?;
    let old = req_str(TOOL, &input, "old_string")?;
    let new = req_str(TOOL, &input, "new_string")?;
    let replace_all = opt_bool(TOOL, &input, "replace_all")?.unwrap_or(false);
    if let Some(out) = null_byte_check(TOOL, &[("file_path", Some(file_path))]) {
        return Ok(out);
    }
    if old == new {
        return Ok(Output::validation(
            "No changes to make: old_string and new_string are exactly the same.",
        ));
    }
    let path = cx.confine_write(file_path)?;
    match std::fs::metadata(&path) {
        Ok(m) if m.is_dir() => {
            return Err(ExecError::Unsupported { tool: TOOL.into(), reason: "editing a directory path is not reproduced".into() })
        }
        Ok(m) if !m.is_file() => {
            return Ok(Output::validation(format!(
                "{file_path} exists but is not a regular file (a device, FIFO or socket). Edit only changes regular files."
            )))
        }
        _ => {}
    }
    let existing = read_existing(&path).map_err(|e| io_error(TOOL, e))?;
    let Some(existing) = existing else {
        if old.is_empty() {
            return create(file_path, new, &path, cx);
        }
        return Ok(Output::validation(missing_file_message(
            cx,
            &cx.expand(file_path),
        )));
    };
    let content = normalize(&existing.raw);
    if old.is_empty() {
        if !content.trim().is_empty() {
            return Ok(Output::validation(ALREADY_EXISTS));
        }
    } else if file_path.ends_with(".ipynb") {
        return Ok(Output::validation(NOTEBOOK));
    }

    let guard_skipped = cx.config.read_guard == ReadGuard::Skip;
    let last = cx.state.read_files.get(&path).cloned();
    let applies = !old.is_empty()
        && find_actual(&content, old).is_some_and(|a| replace_all || !occurs_twice(&content, &a));
    let mtime = mtime_ms(&path).map_err(|e| io_error(TOOL, e))?;
    let mut stale = false;
    if !old.is_empty() {
        match &last {
            None => {
                if !guard_skipped {
                    return Ok(Output::validation(NOT_READ_YET));
                }
            }
            Some(st) => {
                if st.is_partial_view && !guard_skipped {
                    return Ok(Output::validation(NOT_READ_YET));
                }
                if mtime > st.timestamp {
                    let same = st.is_full() && st.content == content;
                    if !same {
                        if applies && guard_skipped {
                            stale = true;
                        } else {
                            return Ok(Output::validation(MODIFIED_SINCE_READ));
                        }
                    }
                }
            }
        }
        if let Some(nt) = existing.not_text {
            return Ok(Output::validation(nt.write_refusal()));
        }
        let Some(actual) = find_actual(&content, old) else {
            let note = if has_u_escape(old) || !old.is_ascii() {
                ESCAPE_NOTE
            } else {
                ""
            };
            return Ok(Output::validation(format!(
                "{NOT_FOUND}\nString: {old}{note}"
            )));
        };
        if let Some(msg) = ambiguity(&content, &actual, replace_all, old) {
            return Ok(Output::validation(msg));
        }
    }

    // call
    let (actual_old, actual_new_s) = if old.is_empty() {
        (String::new(), keep_bom(Some(&existing.raw), new))
    } else {
        let a = find_actual(&content, old).unwrap_or_else(|| old.to_string());
        let n = actual_new(old, &a, new);
        (a, n)
    };
    let updated = if old.is_empty() {
        actual_new_s.clone()
    } else {
        let u = apply(&content, &actual_old, &actual_new_s, replace_all);
        if u == content {
            return Ok(Output::thrown(NOT_APPLIED));
        }
        u
    };
    let bom = existing.raw.starts_with('\u{feff}') && existing.encoding == Encoding::Utf8;
    let to_write = if bom && !updated.starts_with('\u{feff}') {
        format!("\u{feff}{updated}")
    } else {
        updated.clone()
    };
    let ts = write_text(&path, &to_write, existing.encoding, existing.crlf)
        .map_err(|e| io_error(TOOL, e))?;
    let not_in_context = match &last {
        None => true,
        Some(st) => !st.in_context() || stale || st.content != content,
    };
    cx.state.remember(
        path.clone(),
        FileReadState {
            content: updated
                .strip_prefix('\u{feff}')
                .unwrap_or(&updated)
                .to_string(),
            timestamp: ts,
            offset: None,
            limit: None,
            is_partial_view: last.as_ref().is_some_and(|s| s.is_partial_view),
            content_not_in_model_context: not_in_context,
        },
    );
    let suffix = if stale {
        STALE_NOTE
    } else if not_in_context && cx.config.behaviour.edit_suffix_tracks_context {
        ""
    } else {
        FILE_STATE_CURRENT
    };
    let text = if replace_all {
        format!("The file {file_path} has been updated. All occurrences were successfully replaced.{suffix}")
    } else {
        format!("The file {file_path} has been updated successfully.{suffix}")
    };
    let mut out = Output::ok(text);
    out.touched.push(cx.relative(&path));
    Ok(out)
}

/// `old_string: ""` on a missing file creates it (with its parent directories).
fn create(
    file_path: &str,
    new: &str,
    path: &std::path::Path,
    cx: &mut Cx<'_>,
) -> Result<Output, ExecError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io_error(TOOL, e))?;
    }
    let ts = write_text(path, new, Encoding::Utf8, false).map_err(|e| io_error(TOOL, e))?;
    cx.state.remember(
        path.to_path_buf(),
        FileReadState {
            content: new.to_string(),
            timestamp: ts,
            offset: None,
            limit: None,
            is_partial_view: false,
            content_not_in_model_context: false,
        },
    );
    let mut out = Output::ok(format!(
        "The file {file_path} has been updated successfully.{FILE_STATE_CURRENT}"
    ));
    out.touched.push(cx.relative(path));
    Ok(out)
}

/// MultiEdit (removed before 2.1.332; older sessions): the edits are applied in order with
/// the rules of `M` in `chunk-6fmj6syj.js`; the result text follows the 1.x/2.0 tool:
/// `Applied N edit(s) to <file_path>:\n1. Replaced "<old…>" with "<new…>"` (each string cut
/// to 50 characters plus "..."). The read-guard rules are those of Edit. Approximate.
pub(crate) fn run_multi(input: &Value, cx: &mut Cx<'_>) -> Result<Output, ExecError> {
    const MTOOL: &str = "MultiEdit";
    let file_path = req_str(MTOOL, input, "file_path")?;
    let edits = input
        .get("edits")
        .and_then(Value::as_array)
        .ok_or_else(|| bad_input(MTOOL, "`edits` must be an array"))?;
    let mut parsed: Vec<(String, String, bool)> = Vec::new();
    for e in edits {
        let o = req_str(MTOOL, e, "old_string")?.to_string();
        let n = req_str(MTOOL, e, "new_string")?.to_string();
        let a = opt_bool(MTOOL, e, "replace_all")?.unwrap_or(false);
        parsed.push((o, n, a));
    }
    if parsed.is_empty() {
        return Err(bad_input(MTOOL, "`edits` is empty"));
    }
    let path = cx.confine_write(file_path)?;
    let existing = read_existing(&path).map_err(|e| io_error(MTOOL, e))?;
    let content = existing.as_ref().map(|e| normalize(&e.raw));
    let Some(content) = content else {
        if parsed[0].0.is_empty() {
            let (_, n, _) = &parsed[0];
            return create(file_path, n, &path, cx).map(|mut o| {
                o.text = multi_text(file_path, &parsed);
                o
            });
        }
        return Ok(Output::validation(missing_file_message(
            cx,
            &cx.expand(file_path),
        )));
    };
    if cx.config.read_guard == ReadGuard::Enforce && !cx.state.read_files.contains_key(&path) {
        return Ok(Output::validation(NOT_READ_YET));
    }
    let mut text = content.clone();
    let mut previous_new: Vec<String> = Vec::new();
    for (old, new, all) in &parsed {
        let trimmed_old = old.trim_end_matches('\n');
        if !trimmed_old.is_empty() && previous_new.iter().any(|n| n.contains(trimmed_old)) {
            return Ok(Output::thrown(
                "Cannot edit file: old_string is a substring of a new_string from a previous edit.",
            ));
        }
        if let Some(msg) = ambiguity(&text, old, *all, old) {
            return Ok(Output::thrown(msg));
        }
        let before = text.clone();
        text = if old.is_empty() {
            new.clone()
        } else {
            apply(&text, old, new, *all)
        };
        if text == before {
            return Ok(Output::thrown(NOT_APPLIED));
        }
        previous_new.push(new.clone());
    }
    if text == content {
        return Ok(Output::thrown(
            "Original and edited file match exactly. Failed to apply edit.",
        ));
    }
    let existing = existing.expect("checked above");
    let ts = write_text(
        &path,
        &keep_bom(Some(&existing.raw), &text),
        existing.encoding,
        existing.crlf,
    )
    .map_err(|e| io_error(MTOOL, e))?;
    cx.state.remember(
        path.clone(),
        FileReadState {
            content: text,
            timestamp: ts,
            offset: None,
            limit: None,
            is_partial_view: false,
            content_not_in_model_context: false,
        },
    );
    let mut out = Output::ok(multi_text(file_path, &parsed));
    out.touched.push(cx.relative(&path));
    Ok(out)
}

fn cut50(s: &str) -> String {
    let head: String = s.chars().take(50).collect();
    if s.chars().count() > 50 {
        format!("{head}...")
    } else {
        head
    }
}

fn multi_text(file_path: &str, edits: &[(String, String, bool)]) -> String {
    let n = edits.len();
    let lines: Vec<String> = edits
        .iter()
        .enumerate()
        .map(|(i, (o, nw, _))| {
            format!(
                "{}. Replaced \"{}\" with \"{}\"",
                i + 1,
                cut50(o),
                cut50(nw)
            )
        })
        .collect();
    format!(
        "Applied {n} edit{} to {file_path}:\n{}",
        if n == 1 { "" } else { "s" },
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_quote_normalized_matching() {
        assert_eq!(
            find_actual("say \u{201C}hi\u{201D} now", "\"hi\"").as_deref(),
            Some("\u{201C}hi\u{201D}")
        );
        assert_eq!(find_actual("abc", "b").as_deref(), Some("b"));
        assert_eq!(find_actual("abc", "x"), None);
        assert_eq!(
            find_actual("caf\u{e9}", "caf\\u00e9").as_deref(),
            Some("caf\u{e9}")
        );
    }

    #[test]
    fn new_string_takes_curly_quotes() {
        let actual = "\u{201C}hi\u{201D}";
        assert_eq!(
            quote_style("\"hi\"", actual, "\"bye\""),
            "\u{201C}bye\u{201D}"
        );
        let actual = "it\u{2019}s";
        assert_eq!(quote_style("it's", actual, "don't"), "don\u{2019}t");
    }

    #[test]
    fn deleting_a_line_takes_its_newline() {
        assert_eq!(apply("a\nb\nc\n", "b", "", false), "a\nc\n");
        assert_eq!(apply("a b a", "a", "x", false), "x b a");
        assert_eq!(apply("a b a", "a", "x", true), "x b x");
    }

    #[test]
    fn ambiguity_text() {
        let m = ambiguity("x x x", "x", false, "x").unwrap();
        assert!(
            m.starts_with("Found 3 matches of the string to replace, but replace_all is false.")
        );
        assert!(m.ends_with("\nString: x"));
        assert!(ambiguity("x x", "x", true, "x").is_none());
        assert!(ambiguity("xx", "xx", false, "xx").is_none());
    }

    #[test]
    fn aliases() {
        let v = normalize_input(
            &serde_json::json!({"path": "/a", "old_str": "x", "new_str": "y", "replace_name": "true"}),
        );
        assert_eq!(
            v,
            serde_json::json!({"file_path": "/a", "old_string": "x", "new_string": "y", "replace_all": true})
        );
    }
}
