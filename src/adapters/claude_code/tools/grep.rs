//! Grep (`hG` in `chunk-bqhgd24a.js`: `SJr` builds the ripgrep command and shapes its
//! output; `AJr`/`ABe` turn `rg --json` events into lines; the result mapping writes the
//! headers).
//!
//! Claude runs ripgrep with `--hidden --no-follow --glob !.git --glob !.svn --glob !.hg
//! --glob !.bzr --glob !.jj --glob !.sl --max-columns 500` plus, per mode, `-l` /
//! `-c -H` / `--json -n`, and `-U --multiline-dotall`, `-i`, `-o`, `-C`/`-B`/`-A`,
//! `--type`, `--glob` (the `glob` input split on white space, then on commas unless it has
//! braces). Reproduced with the `ignore` crate (ripgrep's walker: .gitignore/.ignore/
//! .rgignore honoured, hidden files searched, ripgrep's default `--type` table) and the
//! `regex` crate (ripgrep's regex engine), matching line by line (whole file with `(?s)` in
//! multiline mode).
//!
//! Texts:
//! - `files_with_matches` (default): `Found N file(s)[ limit: L[, offset: O]]\n<paths>`,
//!   newest modification first; "No files found".
//! - `content`: `<path>:<n>:<line>` for matches, `<path>-<n>-<line>` for context lines
//!   (`<n>:<line>` when searching one file; no numbers with `-n: false`), files in path
//!   order, `--` between non-adjacent groups when context is asked for, lines over 500
//!   characters shown as `[Omitted long matching line]`; "No matches found".
//! - `count`: `<path>:<count>` lines then `\n\nFound X total occurrence(s) across Y file(s).`
//! - More than `head_limit` (default 250) lines/entries: the first ones and
//!   `[Showing results with pagination = limit: 250]` (content) or the header suffix.
//!
//! Paths are relative to the current directory. Not reproduced (refused): an invalid
//! regex or unknown `--type` (ripgrep's own error text). Approximate: binary files
//! (searched up to their first NUL byte), ordering of equal modification times (Claude
//! breaks ties with `localeCompare`, here: case-insensitive then byte order).

use super::text::plural;
use super::{bad_input, null_byte_check, opt_bool, opt_int, opt_str, req_str, Cx, Output};
use crate::error::ExecError;
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use ignore::WalkBuilder;
use regex::bytes::{Regex, RegexBuilder};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

const TOOL: &str = "Grep";
const DEFAULT_HEAD_LIMIT: i64 = 250;
const VCS_DIRS: &[&str] = &[".git", ".svn", ".hg", ".bzr", ".jj", ".sl"];
const MAX_LINE: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Files,
    Content,
    Count,
}

struct Options {
    before: usize,
    after: usize,
    context_breaks: bool,
    line_numbers: bool,
    only_matching: bool,
    multiline: bool,
}

/// One output line of a file before it is prefixed with the path:
/// (line number, separator ':' or '-', text) or a `--` break.
#[derive(Debug, Clone, PartialEq)]
enum Line {
    Text { n: usize, sep: char, text: String },
    Break,
    Binary(usize),
}

/// `gSt`: apply `offset` and `head_limit` (0 = unlimited); returns the kept items and the
/// limit when it cut something.
fn paginate<T: Clone>(
    items: &[T],
    head_limit: Option<i64>,
    offset: usize,
) -> (Vec<T>, Option<i64>) {
    if head_limit == Some(0) {
        return (items.iter().skip(offset).cloned().collect(), None);
    }
    let limit = head_limit.unwrap_or(DEFAULT_HEAD_LIMIT).max(0) as usize;
    let kept: Vec<T> = items.iter().skip(offset).take(limit).cloned().collect();
    let cut = items.len().saturating_sub(offset) > limit;
    (kept, cut.then_some(limit as i64))
}

/// `hSt`: "limit: L, offset: O".
fn pagination(limit: Option<i64>, offset: usize) -> String {
    let mut parts = Vec::new();
    if let Some(l) = limit {
        parts.push(format!("limit: {l}"));
    }
    if offset > 0 {
        parts.push(format!("offset: {offset}"));
    }
    parts.join(", ")
}

/// Split the `glob` input like Claude: on white space, then on commas unless braced.
fn split_globs(glob: &str) -> Vec<String> {
    let mut out = Vec::new();
    for tok in glob.split_whitespace() {
        if tok.contains('{') && tok.contains('}') {
            out.push(tok.to_string());
        } else {
            out.extend(tok.split(',').filter(|s| !s.is_empty()).map(str::to_owned));
        }
    }
    out
}

fn omit_long(text: String, matching: bool) -> String {
    if text.encode_utf16().count() > MAX_LINE {
        if matching {
            "[Omitted long matching line]"
        } else {
            "[Omitted long context line]"
        }
        .to_string()
    } else {
        text
    }
}

/// Lines of one file for content mode (ripgrep's match/context events → `ABe`).
fn content_lines(data: &[u8], re: &Regex, o: &Options) -> Vec<Line> {
    let mut starts = vec![0usize];
    for (i, &b) in data.iter().enumerate() {
        if b == b'\n' && i + 1 < data.len() {
            starts.push(i + 1);
        }
    }
    let line_of = |pos: usize| match starts.binary_search(&pos) {
        Ok(i) => i,
        Err(i) => i.saturating_sub(1),
    };
    let line_text = |i: usize| -> &[u8] {
        let s = starts[i];
        let e = starts.get(i + 1).copied().unwrap_or(data.len());
        let l = &data[s..e];
        l.strip_suffix(b"\n").unwrap_or(l)
    };
    let decode = |b: &[u8]| -> String {
        let s = String::from_utf8_lossy(b).into_owned();
        s.strip_suffix('\r').map(str::to_owned).unwrap_or(s)
    };
    // Matched line ranges (first, last) and, for -o, the matches.
    let mut matched: Vec<(usize, usize)> = Vec::new();
    let mut only: Vec<(usize, String)> = Vec::new();
    if o.multiline {
        for m in re.find_iter(data) {
            if m.start() == m.end() && m.start() == data.len() && data.ends_with(b"\n") {
                continue;
            }
            let first = line_of(m.start());
            let last = line_of(if m.end() > m.start() {
                m.end() - 1
            } else {
                m.start()
            });
            matched.push((first, last));
            if o.only_matching {
                for (k, part) in String::from_utf8_lossy(m.as_bytes())
                    .split('\n')
                    .enumerate()
                {
                    only.push((
                        first + k,
                        part.strip_suffix('\r').unwrap_or(part).to_string(),
                    ));
                }
            }
        }
    } else {
        for i in 0..starts.len() {
            let l = line_text(i);
            if i + 1 == starts.len() && l.is_empty() && data.ends_with(b"\n") {
                continue;
            }
            let mut any = false;
            for m in re.find_iter(l) {
                any = true;
                if o.only_matching && m.start() != m.end() {
                    only.push((i, decode(m.as_bytes())));
                }
            }
            if any {
                matched.push((i, i));
            }
        }
    }
    let mut out: Vec<Line> = Vec::new();
    if matched.is_empty() {
        return out;
    }
    if o.only_matching {
        let mut last: Option<usize> = None;
        for (n, text) in only {
            if o.context_breaks && last.is_some_and(|l| n > l + 1) {
                out.push(Line::Break);
            }
            out.push(Line::Text {
                n: n + 1,
                sep: ':',
                text: omit_long(text, true),
            });
            last = Some(n);
        }
        return out;
    }
    // Merge matched ranges with their context, like ripgrep's printer.
    let total = if data.ends_with(b"\n") {
        starts
            .len()
            .saturating_sub(if line_text(starts.len() - 1).is_empty() {
                1
            } else {
                0
            })
    } else {
        starts.len()
    };
    let is_match = {
        let mut v = vec![false; starts.len()];
        for &(a, b) in &matched {
            v[a..=b.min(starts.len() - 1)].fill(true);
        }
        v
    };
    let mut shown = vec![false; starts.len()];
    for &(a, b) in &matched {
        let lo = a.saturating_sub(o.before);
        let hi = (b + o.after).min(total.saturating_sub(1).max(b));
        shown[lo..=hi.min(starts.len() - 1)].fill(true);
    }
    let mut last: Option<usize> = None;
    for i in 0..starts.len() {
        if !shown[i] {
            continue;
        }
        if o.context_breaks && last.is_some_and(|l| i > l + 1) {
            out.push(Line::Break);
        }
        let m = is_match[i];
        out.push(Line::Text {
            n: i + 1,
            sep: if m { ':' } else { '-' },
            text: omit_long(decode(line_text(i)), m),
        });
        last = Some(i);
    }
    out
}

fn count_matching_lines(data: &[u8], re: &Regex, multiline: bool) -> usize {
    let o = Options {
        before: 0,
        after: 0,
        context_breaks: false,
        line_numbers: false,
        only_matching: false,
        multiline,
    };
    content_lines(data, re, &o)
        .iter()
        .filter(|l| matches!(l, Line::Text { sep: ':', .. }))
        .count()
}

fn has_match(data: &[u8], re: &Regex, multiline: bool) -> bool {
    if multiline {
        return re.is_match(data);
    }
    data.split(|&b| b == b'\n').any(|l| re.is_match(l))
}

/// Data ripgrep searches: everything before the first NUL byte (ripgrep stops there for
/// files it found by walking), and that offset.
fn searchable(data: &[u8]) -> (&[u8], Option<usize>) {
    match data.iter().position(|&b| b == 0) {
        None => (data, None),
        Some(p) => {
            let line_start = data[..p]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1);
            (&data[..line_start], Some(p))
        }
    }
}

/// JavaScript `localeCompare` approximated: case-insensitive first, then byte order.
fn locale_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    a.to_lowercase()
        .cmp(&b.to_lowercase())
        .then_with(|| a.cmp(b))
}

/// The order ripgrep's parallel walker prints files in, for a small tree (Grep before
/// `versions::GREP_SORTED` does not sort): each worker pushes a directory's entries on a
/// LIFO stack in `read_dir` order and pops the top, so entries come out in reverse
/// directory order and a directory's subtree where that directory falls. (On trees large
/// enough for the second worker to steal work the order is not deterministic, in Claude
/// Code either.) `files` are the files to search; the result is the same set.
fn ripgrep_walk_order(root: &Path, files: Vec<PathBuf>) -> Vec<PathBuf> {
    use std::collections::HashSet;
    let wanted: HashSet<PathBuf> = files.iter().cloned().collect();
    let mut dirs: HashSet<PathBuf> = HashSet::new();
    for f in &files {
        let mut d = f.parent();
        while let Some(p) = d {
            if !dirs.insert(p.to_path_buf()) || p == root {
                break;
            }
            d = p.parent();
        }
    }
    let mut out = Vec::with_capacity(files.len());
    let mut stack: Vec<PathBuf> = Vec::new();
    let push_dir = |d: &Path, stack: &mut Vec<PathBuf>| {
        if let Ok(rd) = std::fs::read_dir(d) {
            stack.extend(rd.flatten().map(|e| e.path()));
        }
    };
    push_dir(root, &mut stack);
    while let Some(p) = stack.pop() {
        if wanted.contains(&p) {
            out.push(p);
        } else if dirs.contains(&p) {
            push_dir(&p, &mut stack);
        }
    }
    if out.len() != files.len() {
        // A file the walker did not reach again (changed meanwhile): keep the set.
        let seen: HashSet<PathBuf> = out.iter().cloned().collect();
        out.extend(files.into_iter().filter(|f| !seen.contains(f)));
    }
    out
}

/// Before `versions::GREP_JSON_LINES`: ripgrep's whole output, trimmed, split into lines,
/// a trailing `\r` removed from each, empty lines dropped.
fn legacy_output_lines(stdout: &str) -> Vec<String> {
    stdout
        .trim()
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Node's `path.relative(cwd, p)` (p resolved against the cwd), kept as `p` when it starts
/// with `..` (Claude's `RYt`).
fn legacy_relative(cx: &Cx<'_>, p: &str) -> String {
    let cwd = cx.cwd();
    let abs = super::normalize_lexically(&cwd.join(p));
    match super::relative_path(&cwd, &abs) {
        Some(rel) if !rel.starts_with("..") => rel,
        _ => p.to_string(),
    }
}

pub(crate) fn run(input: &Value, cx: &mut Cx<'_>) -> Result<Output, ExecError> {
    let pattern = req_str(TOOL, input, "pattern")?;
    let path = opt_str(TOOL, input, "path")?;
    let glob = opt_str(TOOL, input, "glob")?;
    let ftype = opt_str(TOOL, input, "type")?;
    let mode = match opt_str(TOOL, input, "output_mode")? {
        None | Some("files_with_matches") => Mode::Files,
        Some("content") => Mode::Content,
        Some("count") => Mode::Count,
        Some(other) => return Err(bad_input(TOOL, format!("unknown output_mode {other:?}"))),
    };
    let b = opt_int(TOOL, input, "-B")?;
    let a = opt_int(TOOL, input, "-A")?;
    let c = opt_int(TOOL, input, "-C")?;
    let context = opt_int(TOOL, input, "context")?;
    let line_numbers = opt_bool(TOOL, input, "-n")?.unwrap_or(true);
    let case_insensitive = opt_bool(TOOL, input, "-i")?.unwrap_or(false);
    let only_matching = opt_bool(TOOL, input, "-o")?.unwrap_or(false) && mode == Mode::Content;
    let head_limit = opt_int(TOOL, input, "head_limit")?;
    let offset = opt_int(TOOL, input, "offset")?;
    let multiline = opt_bool(TOOL, input, "multiline")?.unwrap_or(false);

    if let Some(out) = null_byte_check(
        TOOL,
        &[
            ("pattern", Some(pattern)),
            ("path", path),
            ("glob", glob),
            ("type", ftype),
        ],
    ) {
        return Ok(out);
    }
    for (name, v) in [("head_limit", head_limit), ("offset", offset)] {
        if let Some(v) = v {
            if v < 0 {
                let extra = if name == "head_limit" {
                    " Pass 0 for unlimited."
                } else {
                    ""
                };
                return Ok(Output::validation(format!(
                    "{name} must be a whole number of 0 or more, got {v}.{extra}"
                )));
            }
        }
    }
    let offset = offset.unwrap_or(0) as usize;

    let target = path.map(|p| cx.expand(p)).unwrap_or_else(|| cx.cwd());
    if let Some(p) = path {
        if std::fs::symlink_metadata(&target).is_err() {
            return Ok(cx.path_error(format!(
                "Path does not exist: {p}. Note: your current working directory is {}.",
                cx.cwd().display()
            )));
        }
    }
    let real_target = cx.confine(&target.to_string_lossy())?;
    let is_dir = real_target.is_dir();

    // Context: `context || (-C ?? context)`, else -B / -A.
    let ctx_n = context.filter(|&v| v != 0).or(c.or(context));
    let (before, after) = match ctx_n {
        Some(n) if n != 0 => (n.max(0) as usize, n.max(0) as usize),
        _ => (
            b.unwrap_or(0).max(0) as usize,
            a.unwrap_or(0).max(0) as usize,
        ),
    };
    let context_breaks =
        [context, c, b, a].iter().any(|v| v.is_some_and(|x| x > 0)) && mode == Mode::Content;
    let opts = Options {
        before,
        after,
        context_breaks,
        line_numbers,
        only_matching,
        multiline,
    };

    let mut rb = RegexBuilder::new(pattern);
    rb.case_insensitive(case_insensitive)
        .multi_line(true)
        .dot_matches_new_line(multiline)
        .size_limit(100 << 20);
    let re = match rb.build() {
        Ok(r) => r,
        Err(e) => {
            return Err(ExecError::Unsupported {
                tool: TOOL.into(),
                reason: format!(
                    "ripgrep would reject the pattern; its error text is not reproduced ({e})"
                ),
            })
        }
    };

    // Files to search.
    let files: Vec<PathBuf> = if is_dir {
        let mut ob = OverrideBuilder::new(&real_target);
        for d in VCS_DIRS {
            ob.add(&format!("!{d}"))
                .map_err(|e| bad_input(TOOL, e.to_string()))?;
        }
        if let Some(g) = glob {
            for pat in split_globs(g) {
                if ob.add(&pat).is_err() {
                    return Err(ExecError::Unsupported {
                        tool: TOOL.into(),
                        reason: format!("glob {pat:?}: ripgrep's error text is not reproduced"),
                    });
                }
            }
        }
        let overrides = ob.build().map_err(|e| bad_input(TOOL, e.to_string()))?;
        let mut wb = WalkBuilder::new(&real_target);
        wb.hidden(false)
            .follow_links(false)
            .overrides(overrides)
            .add_custom_ignore_filename(".rgignore");
        if let Some(t) = ftype {
            let mut tb = TypesBuilder::new();
            tb.add_defaults();
            tb.select(t);
            match tb.build() {
                Ok(types) => {
                    wb.types(types);
                }
                Err(_) => {
                    return Err(ExecError::Unsupported {
                        tool: TOOL.into(),
                        reason: format!(
                            "unknown --type {t:?}: ripgrep's error text is not reproduced"
                        ),
                    })
                }
            }
        }
        let mut v: Vec<PathBuf> = wb
            .build()
            .flatten()
            .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
            .map(|e| e.into_path())
            .collect();
        v.sort();
        if !cx.config.behaviour.grep_sorted {
            v = ripgrep_walk_order(&real_target, v);
        }
        v
    } else {
        vec![real_target.clone()]
    };

    // Shown path for a file: the lexical spelling under the target, relative to the cwd.
    let lexical_target = super::normalize_lexically(&target);
    let show = |p: &Path| -> String {
        let rel = p.strip_prefix(&real_target).unwrap_or(p);
        let lex = if rel.as_os_str().is_empty() {
            lexical_target.clone()
        } else {
            lexical_target.join(rel)
        };
        cx.display_relative(&lex)
    };

    // The path ripgrep prints for a file it walked from the absolute search path.
    let absolute = |p: &Path| -> String {
        let rel = p.strip_prefix(&real_target).unwrap_or(p);
        if rel.as_os_str().is_empty() {
            lexical_target.to_string_lossy().into_owned()
        } else {
            lexical_target.join(rel).to_string_lossy().into_owned()
        }
    };

    match mode {
        Mode::Files => {
            let mut hits: Vec<(SystemTime, PathBuf)> = Vec::new();
            for f in &files {
                let Ok(data) = std::fs::read(f) else { continue };
                let (data, _) = if is_dir {
                    searchable(&data)
                } else {
                    (&data[..], None)
                };
                if has_match(data, &re, multiline) {
                    let t = std::fs::metadata(f)
                        .and_then(|m| m.modified())
                        .unwrap_or(SystemTime::UNIX_EPOCH);
                    hits.push((t, f.clone()));
                }
            }
            hits.sort_by(|x, y| {
                y.0.cmp(&x.0)
                    .then_with(|| locale_cmp(&x.1.to_string_lossy(), &y.1.to_string_lossy()))
                    .then_with(|| x.1.cmp(&y.1))
            });
            let total = hits.len();
            let (kept, applied) = paginate(&hits, head_limit, offset);
            if kept.is_empty() {
                if offset > 0 && total > 0 {
                    return Ok(Output::ok(format!(
                        "No entries at this offset. [Showing results with pagination = {}]",
                        pagination(applied, offset)
                    )));
                }
                return Ok(Output::ok("No files found"));
            }
            let pg = pagination(applied, offset);
            let names: Vec<String> = kept.iter().map(|(_, p)| show(p)).collect();
            let n = names.len();
            Ok(Output::ok(format!(
                "Found {n} {}{}\n{}",
                plural(n, "file"),
                if pg.is_empty() {
                    String::new()
                } else {
                    format!(" {pg}")
                },
                names.join("\n")
            )))
        }
        Mode::Count => {
            let mut rows: Vec<(PathBuf, usize)> = Vec::new();
            for f in &files {
                let Ok(data) = std::fs::read(f) else { continue };
                let (data, _) = if is_dir {
                    searchable(&data)
                } else {
                    (&data[..], None)
                };
                let n = count_matching_lines(data, &re, multiline);
                if n > 0 {
                    rows.push((f.clone(), n));
                }
            }
            let matches: usize = rows.iter().map(|r| r.1).sum();
            let nfiles = rows.len();
            if cx.config.behaviour.grep_sorted {
                rows.sort_by(|x, y| x.0.as_os_str().cmp(y.0.as_os_str()));
            }
            let (kept, applied) = paginate(&rows, head_limit, offset);
            let lines: Vec<String> = if cx.config.behaviour.grep_json_lines {
                kept.iter()
                    .map(|(p, n)| format!("{}:{n}", show(p)))
                    .collect()
            } else {
                // `rg -c -H` prints the path it walked (under the absolute search path);
                // the part before the last `:` is made relative.
                kept.iter()
                    .map(|(p, n)| format!("{}:{n}", legacy_relative(cx, &absolute(p))))
                    .collect()
            };
            let pg = pagination(applied, offset);
            let body = if !lines.is_empty() {
                lines.join("\n")
            } else if matches > 0 {
                "No entries at this offset".to_string()
            } else {
                "No matches found".to_string()
            };
            Ok(Output::ok(format!(
                "{body}\n\nFound {matches} total {} across {nfiles} {}.{}",
                if matches == 1 {
                    "occurrence"
                } else {
                    "occurrences"
                },
                plural(nfiles, "file"),
                if pg.is_empty() {
                    String::new()
                } else {
                    format!(" with pagination = {pg}")
                }
            )))
        }
        Mode::Content => {
            let mut groups: Vec<(String, Vec<Line>)> = Vec::new();
            for f in &files {
                let Ok(data) = std::fs::read(f) else { continue };
                let (slice, binary) = if is_dir {
                    searchable(&data)
                } else {
                    (&data[..], None)
                };
                let mut lines = content_lines(slice, &re, &opts);
                if let (Some(off), false) = (binary, lines.is_empty()) {
                    lines.push(Line::Binary(off));
                }
                if !lines.is_empty() {
                    groups.push((f.to_string_lossy().into_owned(), lines));
                }
            }
            if cx.config.behaviour.grep_sorted {
                groups.sort_by(|x, y| x.0.encode_utf16().cmp(y.0.encode_utf16()));
            }
            let legacy = !cx.config.behaviour.grep_json_lines;
            let mut all: Vec<String> = Vec::new();
            for (p, lines) in &groups {
                // Before `GREP_JSON_LINES`, lines are ripgrep's plain text, paths absolute
                // (made relative below, after pagination).
                let shown = if legacy {
                    absolute(Path::new(p))
                } else {
                    show(Path::new(p))
                };
                if opts.context_breaks
                    && !all.is_empty()
                    && all.last().map(String::as_str) != Some("--")
                {
                    all.push("--".into());
                }
                for l in lines {
                    let s = match l {
                        Line::Break => "--".to_string(),
                        Line::Binary(off) => {
                            let t = format!(
                                "binary file matches (found \"\\0\" byte around offset {off})"
                            );
                            if is_dir {
                                format!("{shown}:{t}")
                            } else {
                                t
                            }
                        }
                        Line::Text { n, sep, text } => {
                            let rest = if opts.line_numbers {
                                format!("{n}{sep}{text}")
                            } else {
                                text.clone()
                            };
                            if is_dir {
                                format!("{shown}{sep}{rest}")
                            } else {
                                rest
                            }
                        }
                    };
                    all.push(s);
                }
            }
            if all.last().map(String::as_str) == Some("--") {
                all.pop();
            }
            if legacy {
                all = legacy_output_lines(&all.join("\n"));
            }
            let total = all.len();
            let (mut kept, applied) = paginate(&all, head_limit, offset);
            if legacy {
                for l in kept.iter_mut() {
                    if let Some(g) = l.find(':').filter(|&g| g > 0) {
                        *l = format!("{}{}", legacy_relative(cx, &l[..g]), &l[g..]);
                    }
                }
            }
            let pg = pagination(applied, offset);
            let body = if !kept.is_empty() {
                kept.join("\n")
            } else if offset > 0 && total > 0 {
                "No entries at this offset".to_string()
            } else {
                "No matches found".to_string()
            };
            let text = if pg.is_empty() {
                body
            } else {
                format!("{body}\n\n[Showing results with pagination = {pg}]")
            };
            Ok(Output::ok(text))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(before: usize, after: usize) -> Options {
        Options {
            before,
            after,
            context_breaks: before + after > 0,
            line_numbers: true,
            only_matching: false,
            multiline: false,
        }
    }

    #[test]
    fn lines_with_context() {
        let re = Regex::new("b|e").unwrap();
        let data = b"a\nb\nc\nd\ne\nf\n";
        let got = content_lines(data, &re, &opts(0, 0));
        assert_eq!(
            got,
            vec![
                Line::Text {
                    n: 2,
                    sep: ':',
                    text: "b".into()
                },
                Line::Text {
                    n: 5,
                    sep: ':',
                    text: "e".into()
                }
            ]
        );
        let got = content_lines(data, &re, &opts(1, 0));
        assert_eq!(got.len(), 5);
        assert_eq!(got[2], Line::Break);
        assert_eq!(
            got[1],
            Line::Text {
                n: 2,
                sep: ':',
                text: "b".into()
            }
        );
        assert_eq!(
            got[0],
            Line::Text {
                n: 1,
                sep: '-',
                text: "a".into()
            }
        );
    }

    #[test]
    fn multiline_spans() {
        let re = RegexBuilder::new("b.c")
            .dot_matches_new_line(true)
            .build()
            .unwrap();
        let o = Options {
            multiline: true,
            ..opts(0, 0)
        };
        let got = content_lines(b"a\nb\nc\nd\n", &re, &o);
        assert_eq!(
            got,
            vec![
                Line::Text {
                    n: 2,
                    sep: ':',
                    text: "b".into()
                },
                Line::Text {
                    n: 3,
                    sep: ':',
                    text: "c".into()
                }
            ]
        );
    }

    #[test]
    fn glob_splitting() {
        assert_eq!(
            split_globs("*.ts,*.tsx *.{js,jsx}"),
            vec!["*.ts", "*.tsx", "*.{js,jsx}"]
        );
    }

    #[test]
    fn pages() {
        let items: Vec<u32> = (0..300).collect();
        let (k, l) = paginate(&items, None, 0);
        assert_eq!((k.len(), l), (250, Some(250)));
        let (k, l) = paginate(&items, Some(0), 10);
        assert_eq!((k.len(), l), (290, None));
        assert_eq!(pagination(Some(250), 5), "limit: 250, offset: 5");
    }

    #[test]
    fn long_lines_omitted() {
        let re = Regex::new("x").unwrap();
        let line = "x".repeat(501);
        let got = content_lines(line.as_bytes(), &re, &opts(0, 0));
        assert_eq!(
            got,
            vec![Line::Text {
                n: 1,
                sep: ':',
                text: "[Omitted long matching line]".into()
            }]
        );
    }
}
