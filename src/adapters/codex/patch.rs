//! Codex's `apply_patch` (the `*** Begin Patch` grammar of `codex-rs/apply-patch`):
//! parse, verify (compute every new file content before touching the disk), apply, and the
//! texts Codex 0.149.0 shows the model.
//!
//! Texts (present in the 0.149.0 binary, confirmed on the genuine rollouts where exercised):
//! - success: `Success. Updated the following files:\n` then `A <path>\n` / `M <path>\n` /
//!   `D <path>\n` (added, then modified, then deleted; paths as written in the patch);
//! - parse errors (the freeform tool goes through Codex's verified parse, so they carry the
//!   same prefix): `apply_patch verification failed: invalid patch: <msg>` and
//!   `apply_patch verification failed: invalid hunk at line <n>, <msg>` (the latter recorded
//!   in `tests/fixtures/codex/recorded/patches`);
//! - verification errors: `apply_patch verification failed: <msg>` with
//!   `Failed to find context '<ctx>' in <abs path>` or
//!   `Failed to find expected lines in <abs path>:\n<old lines>`.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq)]
pub enum Hunk {
    Add {
        path: String,
        contents: String,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        chunks: Vec<Chunk>,
    },
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Chunk {
    pub context: Option<String>,
    pub old: Vec<String>,
    pub new: Vec<String>,
    pub eof: bool,
}

/// A parse error, rendered as Codex renders it.
#[derive(Debug, Clone, PartialEq)]
pub enum ParseError {
    InvalidPatch(String),
    InvalidHunk { message: String, line_number: usize },
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::InvalidPatch(m) => write!(f, "invalid patch: {m}"),
            ParseError::InvalidHunk {
                message,
                line_number,
            } => write!(f, "invalid hunk at line {line_number}, {message}"),
        }
    }
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const EOF_MARKER: &str = "*** End of File";

/// Parse a patch (lenient about a `<<EOF … EOF` heredoc wrapper, as Codex is).
pub fn parse(patch: &str) -> Result<Vec<Hunk>, ParseError> {
    let mut lines: Vec<&str> = patch.trim().lines().collect();
    if lines.len() >= 4 {
        let first = lines[0].trim();
        if matches!(first, "<<EOF" | "<<'EOF'" | "<<\"EOF\"")
            && lines[lines.len() - 1].trim().ends_with("EOF")
        {
            lines = lines[1..lines.len() - 1].to_vec();
        }
    }
    if lines.first().map(|l| l.trim()) != Some(BEGIN) {
        return Err(ParseError::InvalidPatch(
            "The first line of the patch must be '*** Begin Patch'".into(),
        ));
    }
    if lines.last().map(|l| l.trim()) != Some(END) || lines.len() < 2 {
        return Err(ParseError::InvalidPatch(
            "The last line of the patch must be '*** End Patch'".into(),
        ));
    }
    let body = &lines[1..lines.len() - 1];
    let mut hunks = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let line_number = i + 2;
        let l = body[i].trim();
        if let Some(p) = l.strip_prefix(ADD) {
            let mut contents = String::new();
            i += 1;
            while i < body.len() {
                match body[i].strip_prefix('+') {
                    Some(rest) => {
                        contents.push_str(rest);
                        contents.push('\n');
                        i += 1;
                    }
                    None => break,
                }
            }
            hunks.push(Hunk::Add {
                path: p.to_string(),
                contents,
            });
        } else if let Some(p) = l.strip_prefix(DELETE) {
            hunks.push(Hunk::Delete {
                path: p.to_string(),
            });
            i += 1;
        } else if let Some(p) = l.strip_prefix(UPDATE) {
            i += 1;
            let mut move_to = None;
            if i < body.len() {
                if let Some(m) = body[i].trim().strip_prefix(MOVE) {
                    move_to = Some(m.to_string());
                    i += 1;
                }
            }
            let mut chunks: Vec<Chunk> = Vec::new();
            while i < body.len() {
                let raw = body[i];
                let t = raw.trim();
                if t.starts_with("*** ") && t != EOF_MARKER {
                    break;
                }
                if t == "@@" || t.starts_with("@@ ") {
                    let ctx = t.strip_prefix("@@ ").map(str::to_string);
                    chunks.push(Chunk {
                        context: ctx,
                        ..Default::default()
                    });
                    i += 1;
                    continue;
                }
                if t == EOF_MARKER {
                    match chunks.last_mut() {
                        Some(c) => c.eof = true,
                        None => {
                            return Err(ParseError::InvalidHunk {
                                message: "Update hunk does not contain any lines".into(),
                                line_number: i + 2,
                            })
                        }
                    }
                    i += 1;
                    continue;
                }
                if chunks.is_empty() {
                    if chunks.is_empty()
                        && !(raw.starts_with(' ')
                            || raw.starts_with('+')
                            || raw.starts_with('-')
                            || raw.is_empty())
                    {
                        return Err(ParseError::InvalidHunk {
                            message: format!("Expected update hunk to start with a @@ context marker, got: '{raw}'"),
                            line_number: i + 2,
                        });
                    }
                    chunks.push(Chunk::default());
                }
                let c = chunks.last_mut().expect("pushed");
                if raw.is_empty() {
                    c.old.push(String::new());
                    c.new.push(String::new());
                } else if let Some(r) = raw.strip_prefix(' ') {
                    c.old.push(r.to_string());
                    c.new.push(r.to_string());
                } else if let Some(r) = raw.strip_prefix('+') {
                    c.new.push(r.to_string());
                } else if let Some(r) = raw.strip_prefix('-') {
                    c.old.push(r.to_string());
                } else {
                    return Err(ParseError::InvalidHunk {
                        message: format!(
                            "Unexpected line found in update hunk: '{raw}'. Every line should either start with ' ' (context line), '+' (added line), or '-' (removed line)"
                        ),
                        line_number: i + 2,
                    });
                }
                i += 1;
            }
            if chunks.iter().all(|c| c.old.is_empty() && c.new.is_empty()) && move_to.is_none() {
                return Err(ParseError::InvalidHunk {
                    message: format!("Update file hunk for path '{p}' is empty"),
                    line_number,
                });
            }
            hunks.push(Hunk::Update {
                path: p.to_string(),
                move_to,
                chunks,
            });
        } else {
            return Err(ParseError::InvalidHunk {
                message: format!(
                    "'{l}' is not a valid hunk header. Valid hunk headers: '*** Add File: {{path}}', '*** Delete File: {{path}}', '*** Update File: {{path}}'"
                ),
                line_number,
            });
        }
    }
    Ok(hunks)
}

fn normalise(s: &str) -> String {
    s.trim()
        .chars()
        .map(|c| match c {
            '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}'
            | '\u{2212}' => '-',
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{00A0}' | '\u{2002}' | '\u{2003}' | '\u{2004}' | '\u{2005}' | '\u{2006}'
            | '\u{2007}' | '\u{2008}' | '\u{2009}' | '\u{200A}' | '\u{202F}' | '\u{205F}'
            | '\u{3000}' => ' ',
            c => c,
        })
        .collect()
}

/// Codex's `seek_sequence`: exact, then trailing-whitespace-insensitive, then
/// whitespace-insensitive, then punctuation-normalised; at end of file first.
pub fn seek(lines: &[String], pattern: &[String], start: usize, eof: bool) -> Option<usize> {
    if pattern.is_empty() {
        return Some(start);
    }
    if pattern.len() > lines.len() {
        return None;
    }
    let last = lines.len() - pattern.len();
    let from = if eof { last } else { start };
    type LineEq<'a> = &'a dyn Fn(&str, &str) -> bool;
    let passes: [LineEq; 4] = [
        &|a, b| a == b,
        &|a, b| a.trim_end() == b.trim_end(),
        &|a, b| a.trim() == b.trim(),
        &|a, b| normalise(a) == normalise(b),
    ];
    for eq in passes {
        for i in from.min(last + 1)..=last {
            if lines[i..i + pattern.len()]
                .iter()
                .zip(pattern)
                .all(|(a, b)| eq(a, b))
            {
                return Some(i);
            }
        }
    }
    None
}

/// New content of an updated file.
pub fn derive(original: &str, abs: &Path, chunks: &[Chunk]) -> Result<String, String> {
    let mut lines: Vec<String> = original.split('\n').map(str::to_string).collect();
    if lines.last().map(|l| l.is_empty()) == Some(true) {
        lines.pop();
    }
    let mut repl: Vec<(usize, usize, Vec<String>)> = Vec::new();
    let mut idx = 0;
    for c in chunks {
        if let Some(ctx) = &c.context {
            match seek(&lines, std::slice::from_ref(ctx), idx, false) {
                Some(i) => idx = i + 1,
                None => {
                    return Err(format!(
                        "Failed to find context '{ctx}' in {}",
                        abs.display()
                    ))
                }
            }
        }
        if c.old.is_empty() {
            repl.push((lines.len(), 0, c.new.clone()));
            continue;
        }
        let mut pat = c.old.clone();
        let mut new = c.new.clone();
        let mut found = seek(&lines, &pat, idx, c.eof);
        if found.is_none() && pat.last().map(|s| s.is_empty()) == Some(true) {
            pat.pop();
            if new.last().map(|s| s.is_empty()) == Some(true) {
                new.pop();
            }
            found = seek(&lines, &pat, idx, c.eof);
        }
        match found {
            Some(i) => {
                repl.push((i, pat.len(), new));
                idx = i + pat.len();
            }
            None => {
                return Err(format!(
                    "Failed to find expected lines in {}:\n{}",
                    abs.display(),
                    c.old.join("\n")
                ))
            }
        }
    }
    repl.sort_by_key(|r| r.0);
    for (start, len, new) in repl.into_iter().rev() {
        let end = (start + len).min(lines.len());
        lines.splice(start.min(lines.len())..end, new);
    }
    if lines.last().map(|l| !l.is_empty()).unwrap_or(true) {
        lines.push(String::new());
    }
    Ok(lines.join("\n"))
}

/// A verified change, ready to write.
#[derive(Debug, Clone)]
enum Change {
    Add {
        abs: PathBuf,
        contents: String,
    },
    Delete {
        abs: PathBuf,
    },
    Update {
        abs: PathBuf,
        dest: Option<PathBuf>,
        contents: String,
    },
}

/// The result of `apply_patch`, as Codex reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum PatchOutcome {
    /// Applied: the summary (stdout) text; the patch tool frames it with exit code/wall time.
    Applied {
        stdout: String,
        touched: Vec<PathBuf>,
    },
    /// Applying failed after verification (an i/o error): stderr text, exit code 1.
    Failed {
        stderr: String,
        touched: Vec<PathBuf>,
    },
    /// Refused before anything was written: the text the model sees.
    Rejected(String),
}

/// Verify and apply a patch relative to `cwd`. `resolve` maps a patch path to the absolute
/// path (confinement is the caller's business).
pub fn apply(
    patch: &str,
    cwd: &Path,
    resolve: &dyn Fn(&str) -> Result<PathBuf, String>,
) -> PatchOutcome {
    let hunks = match parse(patch) {
        Ok(h) => h,
        Err(e) => return PatchOutcome::Rejected(format!("apply_patch verification failed: {e}")),
    };
    if hunks.is_empty() {
        return PatchOutcome::Rejected("patch rejected: empty patch".into());
    }
    let _ = cwd;
    let mut changes = Vec::new();
    let (mut added, mut modified, mut deleted) = (Vec::new(), Vec::new(), Vec::new());
    for h in &hunks {
        match h {
            Hunk::Add { path, contents } => {
                let abs = match resolve(path) {
                    Ok(p) => p,
                    Err(e) => {
                        return PatchOutcome::Rejected(format!(
                            "apply_patch verification failed: {e}"
                        ))
                    }
                };
                changes.push(Change::Add {
                    abs,
                    contents: contents.clone(),
                });
                added.push(path.clone());
            }
            Hunk::Delete { path } => {
                let abs = match resolve(path) {
                    Ok(p) => p,
                    Err(e) => {
                        return PatchOutcome::Rejected(format!(
                            "apply_patch verification failed: {e}"
                        ))
                    }
                };
                if let Err(e) = read_text(&abs) {
                    return PatchOutcome::Rejected(format!(
                        "apply_patch verification failed: Failed to read {}: {e}",
                        abs.display()
                    ));
                }
                changes.push(Change::Delete { abs });
                deleted.push(path.clone());
            }
            Hunk::Update {
                path,
                move_to,
                chunks,
            } => {
                let abs = match resolve(path) {
                    Ok(p) => p,
                    Err(e) => {
                        return PatchOutcome::Rejected(format!(
                            "apply_patch verification failed: {e}"
                        ))
                    }
                };
                let original = match read_text(&abs) {
                    Ok(s) => s,
                    Err(e) => {
                        return PatchOutcome::Rejected(format!(
                        "apply_patch verification failed: Failed to read file to update {}: {e}",
                        abs.display()
                    ))
                    }
                };
                let contents = match derive(&original, &abs, chunks) {
                    Ok(c) => c,
                    Err(e) => {
                        return PatchOutcome::Rejected(format!(
                            "apply_patch verification failed: {e}"
                        ))
                    }
                };
                let dest = match move_to {
                    Some(m) => match resolve(m) {
                        Ok(p) => Some(p),
                        Err(e) => {
                            return PatchOutcome::Rejected(format!(
                                "apply_patch verification failed: {e}"
                            ))
                        }
                    },
                    None => None,
                };
                changes.push(Change::Update {
                    abs,
                    dest,
                    contents,
                });
                modified.push(move_to.clone().unwrap_or_else(|| path.clone()));
            }
        }
    }
    let mut touched = Vec::new();
    for c in changes {
        let r = match &c {
            Change::Add { abs, contents } => {
                touched.push(abs.clone());
                abs.parent()
                    .map(std::fs::create_dir_all)
                    .transpose()
                    .and_then(|_| std::fs::write(abs, contents))
            }
            Change::Delete { abs } => {
                touched.push(abs.clone());
                std::fs::remove_file(abs)
            }
            Change::Update {
                abs,
                dest: Some(d),
                contents,
            } => {
                touched.push(abs.clone());
                touched.push(d.clone());
                d.parent()
                    .map(std::fs::create_dir_all)
                    .transpose()
                    .and_then(|_| std::fs::write(d, contents))
                    .and_then(|_| std::fs::remove_file(abs))
            }
            Change::Update {
                abs,
                dest: None,
                contents,
            } => {
                touched.push(abs.clone());
                std::fs::write(abs, contents)
            }
        };
        if let Err(e) = r {
            return PatchOutcome::Failed {
                stderr: format!("{e}\n"),
                touched,
            };
        }
    }
    let mut out = String::from("Success. Updated the following files:\n");
    for p in added {
        out.push_str(&format!("A {p}\n"));
    }
    for p in modified {
        out.push_str(&format!("M {p}\n"));
    }
    for p in deleted {
        out.push_str(&format!("D {p}\n"));
    }
    PatchOutcome::Applied {
        stdout: out,
        touched,
    }
}

/// A file's text as Codex reads it (the bytes, then UTF-8): an I/O error, or for bytes that
/// are not UTF-8 `invalid utf-8 sequence of 1 bytes from index 3` (not the `stream did not
/// contain valid UTF-8` of a read into a string).
fn read_text(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_and_errors() {
        let d = tempfile::tempdir().unwrap();
        let r = |p: &str| Ok(d.path().join(p));
        let add = "*** Begin Patch\n*** Add File: notes.txt\n+line one\n+line two\n*** End Patch\n";
        assert_eq!(
            apply(add, d.path(), &r),
            PatchOutcome::Applied {
                stdout: "Success. Updated the following files:\nA notes.txt\n".into(),
                touched: vec![d.path().join("notes.txt")]
            }
        );
        let upd = "*** Begin Patch\n*** Update File: notes.txt\n@@\n line one\n-line two\n+line 2 (edited)\n*** End Patch\n";
        assert!(
            matches!(apply(upd, d.path(), &r), PatchOutcome::Applied { ref stdout, .. } if stdout == "Success. Updated the following files:\nM notes.txt\n")
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("notes.txt")).unwrap(),
            "line one\nline 2 (edited)\n"
        );
        match apply(upd, d.path(), &r) {
            PatchOutcome::Rejected(t) => assert_eq!(t, format!("apply_patch verification failed: Failed to find expected lines in {}:\nline one\nline two", d.path().join("notes.txt").display())),
            o => panic!("{o:?}"),
        }
        assert_eq!(apply("garbage", d.path(), &r), PatchOutcome::Rejected("apply_patch verification failed: invalid patch: The first line of the patch must be '*** Begin Patch'".into()));
    }
}
