//! `edit {filePath, oldString, newString, replaceAll?}` with OpenCode's nine replacers, tried
//! in order, each proposing spans of the file that stand for `oldString`: exact, line-trimmed,
//! block anchors (Levenshtein-similar middle lines), whitespace-normalized, indentation-
//! flexible, escape-normalized, trimmed boundaries, context-aware, every occurrence. A span
//! that occurs once is replaced by `newString` as written; line endings follow the file.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::write::{split_bom, BOM};
use super::{string_param, Env, Produced};
use crate::adapters::opencode::js;
use crate::error::ExecError;
use crate::kit::ExecContext;

const TOOL: &str = "edit";
const SINGLE_CANDIDATE_SIMILARITY: f64 = 0.65;
const MULTIPLE_CANDIDATES_SIMILARITY: f64 = 0.65;

const SAME: &str = "No changes to apply: oldString and newString are identical.";
const EMPTY_OLD: &str = "oldString cannot be empty when editing an existing file. Provide the exact text to replace, or use write for an intentional full-file replacement.";
const NOT_FOUND: &str = "Could not find oldString in the file. It must match exactly, including whitespace, indentation, and line endings.";
const MULTIPLE: &str = "Found multiple matches for oldString. Provide more surrounding context to make the match unique.";
const TOO_LARGE: &str = "Refusing replacement because the matched span is much larger than oldString. Re-read the file and provide the full exact oldString for the intended replacement.";

fn io(source: std::io::Error) -> ExecError {
    ExecError::Io {
        tool: TOOL.into(),
        source,
    }
}

pub fn run(
    env: &Env,
    ctx: &ExecContext,
    input: &Value,
) -> Result<(Produced, Option<i32>, Vec<PathBuf>), ExecError> {
    let params = (|| -> Result<(&str, &str, &str), Produced> {
        Ok((
            string_param(TOOL, input, "filePath")?,
            string_param(TOOL, input, "oldString")?,
            string_param(TOOL, input, "newString")?,
        ))
    })();
    let (file_path, old, new) = match params {
        Ok(p) => p,
        Err(p) => return Ok((p, None, vec![])),
    };
    let replace_all = input
        .get("replaceAll")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if file_path.is_empty() {
        return Ok((Produced::err("filePath is required"), None, vec![]));
    }
    if old == new {
        return Ok((Produced::err(SAME), None, vec![]));
    }
    let path = if file_path.starts_with('/') {
        super::normalize(std::path::Path::new(file_path))
    } else {
        super::normalize(&env.directory.join(file_path))
    };
    let real = super::confined_for_write(ctx, &path)?;
    let rel = real
        .strip_prefix(&ctx.workspace)
        .map(PathBuf::from)
        .unwrap_or_else(|_| real.clone());
    let (before, after) = if old.is_empty() {
        if real.exists() {
            return Ok((Produced::err(EMPTY_OLD), None, vec![]));
        }
        let (bom, text) = split_bom(new);
        if let Some(parent) = real.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(
            &real,
            if bom {
                format!("{BOM}{text}")
            } else {
                text.to_string()
            },
        )
        .map_err(io)?;
        (String::new(), text.to_string())
    } else {
        let meta = match std::fs::metadata(&real) {
            Ok(m) => m,
            Err(_) => {
                return Ok((
                    Produced::err(format!("File {} not found", path.display())),
                    None,
                    vec![],
                ))
            }
        };
        if meta.is_dir() {
            return Ok((
                Produced::err(format!(
                    "Path is a directory, not a file: {}",
                    path.display()
                )),
                None,
                vec![],
            ));
        }
        let raw = String::from_utf8_lossy(&std::fs::read(&real).map_err(io)?).into_owned();
        let (file_bom, content) = split_bom(&raw);
        let eol = if content.contains("\r\n") {
            "\r\n"
        } else {
            "\n"
        };
        let to_eol = |s: &str| {
            let lf = s.replace("\r\n", "\n");
            if eol == "\n" {
                lf
            } else {
                lf.replace('\n', "\r\n")
            }
        };
        let replaced = match replace(content, &to_eol(old), &to_eol(new), replace_all) {
            Ok(r) => r,
            Err(msg) => return Ok((Produced::err(msg), None, vec![])),
        };
        let (new_bom, text) = split_bom(&replaced);
        let bom = file_bom || new_bom;
        std::fs::write(
            &real,
            if bom {
                format!("{BOM}{text}")
            } else {
                text.to_string()
            },
        )
        .map_err(io)?;
        (content.replace("\r\n", "\n"), text.replace("\r\n", "\n"))
    };
    let patch = patch_of(&path.display().to_string(), &before, &after);
    let (additions, deletions) = line_counts(&before, &after);
    Ok((
        Produced::ok(
            "Edit applied successfully.",
            env.title_of(&path),
            json!({
                "diagnostics": {},
                "diff": patch,
                "filediff": {"file": path.display().to_string(), "patch": patch, "additions": additions, "deletions": deletions},
            }),
        ),
        None,
        vec![rel],
    ))
}

/// jsdiff's `createTwoFilesPatch(path, path, before, after)` (4 lines of context), with the
/// indentation common to its body lines removed, as OpenCode shows it.
fn patch_of(path: &str, before: &str, after: &str) -> String {
    let diff = similar::TextDiff::from_lines(before, after);
    let mut out = format!(
        "Index: {path}\n===================================================================\n--- {path}\n+++ {path}\n"
    );
    for hunk in diff.unified_diff().context_radius(4).iter_hunks() {
        let ops = hunk.ops();
        let (Some(first), Some(last)) = (ops.first(), ops.last()) else {
            continue;
        };
        let old = first.old_range().start..last.old_range().end;
        let new = first.new_range().start..last.new_range().end;
        let start = |r: &std::ops::Range<usize>| if r.is_empty() { r.start } else { r.start + 1 };
        out.push_str(&format!(
            "@@ -{},{} +{},{} @@\n",
            start(&old),
            old.len(),
            start(&new),
            new.len()
        ));
        for change in hunk.iter_changes() {
            let sign = match change.tag() {
                similar::ChangeTag::Equal => ' ',
                similar::ChangeTag::Delete => '-',
                similar::ChangeTag::Insert => '+',
            };
            let v = change.value();
            out.push(sign);
            out.push_str(v.strip_suffix('\n').unwrap_or(v));
            out.push('\n');
            if !v.ends_with('\n') {
                out.push_str("\\ No newline at end of file\n");
            }
        }
    }
    strip_common_indent(&out)
}

fn strip_common_indent(patch: &str) -> String {
    let body = |l: &str| {
        (l.starts_with('+') || l.starts_with('-') || l.starts_with(' '))
            && !l.starts_with("---")
            && !l.starts_with("+++")
    };
    let lines: Vec<&str> = patch.split('\n').collect();
    let indent = lines
        .iter()
        .filter(|l| body(l))
        .filter_map(|l| {
            let rest = &l[1..];
            (!js::trim(rest).is_empty())
                .then(|| rest.chars().take_while(|c| js::is_js_space(*c)).count())
        })
        .min()
        .unwrap_or(0);
    if indent == 0 {
        return patch.to_string();
    }
    lines
        .iter()
        .map(|l| {
            if body(l) {
                let (sign, rest) = l.split_at(1);
                format!("{sign}{}", rest.chars().skip(indent).collect::<String>())
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn line_counts(before: &str, after: &str) -> (usize, usize) {
    let diff = similar::TextDiff::from_lines(before, after);
    let mut add = 0;
    let mut del = 0;
    for c in diff.iter_all_changes() {
        match c.tag() {
            similar::ChangeTag::Insert => add += 1,
            similar::ChangeTag::Delete => del += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    (add, del)
}

/// `Ts`: the replacement, or OpenCode's error text.
pub fn replace(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<String, &'static str> {
    if old == new {
        return Err(SAME);
    }
    if old.is_empty() {
        return Err(EMPTY_OLD);
    }
    let mut none = true;
    let replacers: [fn(&str, &str) -> Vec<String>; 9] = [
        simple,
        line_trimmed,
        block_anchor,
        whitespace_normalized,
        indentation_flexible,
        escape_normalized,
        trimmed_boundary,
        context_aware,
        multi_occurrence,
    ];
    for r in replacers {
        for cand in r(content, old) {
            let Some(first) = content.find(&cand) else {
                continue;
            };
            none = false;
            if much_larger(&cand, old) {
                return Err(TOO_LARGE);
            }
            if replace_all {
                return Ok(js::replace_all(content, &cand, new));
            }
            if content.rfind(&cand) != Some(first) {
                continue;
            }
            return Ok(format!(
                "{}{new}{}",
                &content[..first],
                &content[first + cand.len()..]
            ));
        }
    }
    Err(if none { NOT_FOUND } else { MULTIPLE })
}

/// `as`: a candidate span much larger than `oldString`.
fn much_larger(span: &str, old: &str) -> bool {
    let r = old.split('\n').count();
    if span.split('\n').count() >= (r + 3).max(r * 2) {
        return true;
    }
    if r == 1 {
        return false;
    }
    let s = js::len16(js::trim(span));
    let o = js::len16(js::trim(old));
    s > (o + 500).max(o * 4)
}

/// The text of lines `start..=end` (no final newline).
fn span(lines: &[&str], start: usize, end: usize) -> String {
    lines[start..=end].join("\n")
}

fn search_lines(old: &str) -> Vec<&str> {
    let mut s: Vec<&str> = old.split('\n').collect();
    if s.last() == Some(&"") {
        s.pop();
    }
    s
}

fn simple(_: &str, old: &str) -> Vec<String> {
    vec![old.to_string()]
}

fn line_trimmed(content: &str, old: &str) -> Vec<String> {
    let lines: Vec<&str> = content.split('\n').collect();
    let search = search_lines(old);
    let mut out = Vec::new();
    if search.is_empty() || search.len() > lines.len() {
        return out;
    }
    for t in 0..=lines.len() - search.len() {
        if (0..search.len()).all(|y| js::trim(lines[t + y]) == js::trim(search[y])) {
            out.push(span(&lines, t, t + search.len() - 1));
        }
    }
    out
}

fn levenshtein(a: &str, b: &str) -> usize {
    let a: Vec<u16> = a.encode_utf16().collect();
    let b: Vec<u16> = b.encode_utf16().collect();
    if a.is_empty() || b.is_empty() {
        return a.len().max(b.len());
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn block_anchor(content: &str, old: &str) -> Vec<String> {
    let lines: Vec<&str> = content.split('\n').collect();
    if old.split('\n').count() < 3 {
        return vec![];
    }
    let search = search_lines(old);
    let first = js::trim(search[0]);
    let last = js::trim(search[search.len() - 1]);
    let n = search.len();
    let slack = (n as f64 * 0.25).floor().max(1.0) as usize;
    let mut cands: Vec<(usize, usize)> = Vec::new();
    for b in 0..lines.len() {
        if js::trim(lines[b]) != first {
            continue;
        }
        if let Some(o) = (b + 2..lines.len()).find(|&o| js::trim(lines[o]) == last) {
            let len = o - b + 1;
            if len.abs_diff(n) <= slack {
                cands.push((b, o));
            }
        }
    }
    let sim = |b: usize, o: usize, early: bool| -> f64 {
        let len = o - b + 1;
        let middle = (n.saturating_sub(2)).min(len.saturating_sub(2));
        if middle == 0 {
            return 1.0;
        }
        let mut h = 0.0;
        let mut u = 1;
        while u < n - 1 && u < len - 1 {
            let d = js::trim(lines[b + u]);
            let w = js::trim(search[u]);
            let t = js::len16(d).max(js::len16(w));
            if t > 0 {
                let contrib = 1.0 - levenshtein(d, w) as f64 / t as f64;
                if early {
                    h += contrib / middle as f64;
                    if h >= SINGLE_CANDIDATE_SIMILARITY {
                        break;
                    }
                } else {
                    h += contrib;
                }
            }
            u += 1;
        }
        if early {
            h
        } else {
            h / middle as f64
        }
    };
    match cands.len() {
        0 => vec![],
        1 => {
            let (b, o) = cands[0];
            if sim(b, o, true) >= SINGLE_CANDIDATE_SIMILARITY {
                vec![span(&lines, b, o)]
            } else {
                vec![]
            }
        }
        _ => {
            let mut best: Option<(usize, usize)> = None;
            let mut score = -1.0;
            for &(b, o) in &cands {
                let s = sim(b, o, false);
                if s > score {
                    score = s;
                    best = Some((b, o));
                }
            }
            match best {
                Some((b, o)) if score >= MULTIPLE_CANDIDATES_SIMILARITY => vec![span(&lines, b, o)],
                _ => vec![],
            }
        }
    }
}

fn ws_norm(s: &str) -> String {
    let re = regex::Regex::new(r"\s+").expect("valid regex");
    js::trim(&re.replace_all(s, " ")).to_string()
}

fn whitespace_normalized(content: &str, old: &str) -> Vec<String> {
    let target = ws_norm(old);
    let lines: Vec<&str> = content.split('\n').collect();
    let mut out = Vec::new();
    for l in &lines {
        let nl = ws_norm(l);
        if nl == target {
            out.push(l.to_string());
        } else if nl.contains(&target) {
            let words: Vec<String> = js::trim(old)
                .split_whitespace()
                .map(regex::escape)
                .collect();
            if !words.is_empty() {
                if let Ok(re) = regex::Regex::new(&words.join(r"\s+")) {
                    if let Some(m) = re.find(l) {
                        out.push(m.as_str().to_string());
                    }
                }
            }
        }
    }
    let n = old.split('\n').count();
    if n > 1 && n <= lines.len() {
        for y in 0..=lines.len() - n {
            let block = lines[y..y + n].join("\n");
            if ws_norm(&block) == target {
                out.push(block);
            }
        }
    }
    out
}

fn dedent(s: &str) -> String {
    let lines: Vec<&str> = s.split('\n').collect();
    let indents: Vec<usize> = lines
        .iter()
        .filter(|l| !js::trim(l).is_empty())
        .map(|l| l.chars().take_while(|c| js::is_js_space(*c)).count())
        .collect();
    let Some(&min) = indents.iter().min() else {
        return s.to_string();
    };
    lines
        .iter()
        .map(|l| {
            if js::trim(l).is_empty() {
                l.to_string()
            } else {
                l.chars().skip(min).collect()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn indentation_flexible(content: &str, old: &str) -> Vec<String> {
    let target = dedent(old);
    let lines: Vec<&str> = content.split('\n').collect();
    let n = old.split('\n').count();
    let mut out = Vec::new();
    if n <= lines.len() {
        for y in 0..=lines.len() - n {
            let block = lines[y..y + n].join("\n");
            if dedent(&block) == target {
                out.push(block);
            }
        }
    }
    out
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\\' {
            let rep = match it.peek() {
                Some('n') => Some('\n'),
                Some('t') => Some('\t'),
                Some('r') => Some('\r'),
                Some(&q @ ('\'' | '"' | '`' | '\\' | '\n' | '$')) => Some(q),
                _ => None,
            };
            if let Some(r) = rep {
                out.push(r);
                it.next();
                continue;
            }
        }
        out.push(c);
    }
    out
}

fn escape_normalized(content: &str, old: &str) -> Vec<String> {
    let target = unescape(old);
    let mut out = Vec::new();
    if content.contains(&target) {
        out.push(target.clone());
    }
    let lines: Vec<&str> = content.split('\n').collect();
    let n = target.split('\n').count();
    if n <= lines.len() {
        for y in 0..=lines.len() - n {
            let block = lines[y..y + n].join("\n");
            if unescape(&block) == target {
                out.push(block);
            }
        }
    }
    out
}

fn trimmed_boundary(content: &str, old: &str) -> Vec<String> {
    let t = js::trim(old);
    if t == old {
        return vec![];
    }
    let mut out = Vec::new();
    if content.contains(t) {
        out.push(t.to_string());
    }
    let lines: Vec<&str> = content.split('\n').collect();
    let n = old.split('\n').count();
    if n <= lines.len() {
        for y in 0..=lines.len() - n {
            let block = lines[y..y + n].join("\n");
            if js::trim(&block) == t {
                out.push(block);
            }
        }
    }
    out
}

fn context_aware(content: &str, old: &str) -> Vec<String> {
    if old.split('\n').count() < 3 {
        return vec![];
    }
    let search = search_lines(old);
    let lines: Vec<&str> = content.split('\n').collect();
    let first = js::trim(search[0]);
    let last = js::trim(search[search.len() - 1]);
    for y in 0..lines.len() {
        if js::trim(lines[y]) != first {
            continue;
        }
        if let Some(u) = (y + 2..lines.len()).find(|&u| js::trim(lines[u]) == last) {
            let block = &lines[y..=u];
            if block.len() == search.len() {
                let mut same = 0;
                let mut counted = 0;
                for o in 1..block.len() - 1 {
                    let c = js::trim(block[o]);
                    let h = js::trim(search[o]);
                    if !c.is_empty() || !h.is_empty() {
                        counted += 1;
                        if c == h {
                            same += 1;
                        }
                    }
                }
                if counted == 0 || same as f64 / counted as f64 >= 0.5 {
                    return vec![block.join("\n")];
                }
            }
        }
    }
    vec![]
}

fn multi_occurrence(content: &str, old: &str) -> Vec<String> {
    content.matches(old).map(|_| old.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replacers_in_order() {
        // Exact.
        assert_eq!(
            replace("a\nline two\n", "line two", "2", false).unwrap(),
            "a\n2\n"
        );
        // Twice: ambiguous.
        assert_eq!(replace("alpha alpha", "alpha", "A", false), Err(MULTIPLE));
        assert_eq!(replace("alpha alpha", "alpha", "A", true).unwrap(), "A A");
        // Line-trimmed, replaced verbatim (indentation not re-applied).
        assert_eq!(
            replace(
                "fn() {\n    if (x) {\n    doThing();\n    }\n}",
                "if (x) {\ndoThing();\n}",
                "if (y) {\n  other();\n}",
                false
            )
            .unwrap(),
            "fn() {\nif (y) {\n  other();\n}\n}"
        );
        // Whitespace-normalized.
        assert_eq!(
            replace("line one\nline two", "line   one", "LINE ONE", false).unwrap(),
            "LINE ONE\nline two"
        );
        // Block anchor with a similar middle line.
        assert_eq!(
            replace(
                "start\n  one\n  two\n  three\nend\n",
                "start\n  one\n  TWO\n  three\nend",
                "X",
                false
            )
            .unwrap(),
            "X\n"
        );
        assert_eq!(replace("abc", "zzz", "y", false), Err(NOT_FOUND));
        assert_eq!(replace("abc", "abc", "abc", false), Err(SAME));
        assert_eq!(replace("abc", "", "x", false), Err(EMPTY_OLD));
    }

    #[test]
    fn patch_looks_like_jsdiff() {
        let p = patch_of(
            "/w/notes.txt",
            "line one\nline two\n",
            "line one\nline 2 (edited)\n",
        );
        assert_eq!(
            p,
            "Index: /w/notes.txt\n===================================================================\n--- /w/notes.txt\n+++ /w/notes.txt\n@@ -1,2 +1,2 @@\n line one\n-line two\n+line 2 (edited)\n"
        );
    }
}
