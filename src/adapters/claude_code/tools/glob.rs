//! Glob (`mG` in `chunk-bqhgd24a.js`: `call`, `UNn`/`eJr`, `dJr`, and its
//! `mapToolResultToToolResultBlockParam`).
//!
//! Claude 2.1.332 runs `rg --files --null --glob <pattern> --no-ignore --hidden
//! --sort=modified` in the search directory and takes the first 100 paths. Reproduced with
//! the `ignore` crate (ripgrep's own walker and glob engine): gitignore-style globs (a
//! pattern without `/` matches a name at any depth), hidden files included, ignore files
//! not honoured, symlinks not followed, oldest modification first; equal times keep the
//! walk's directory order (`read_dir`, as ripgrep's single-threaded sorted walk), so they
//! match the original only on a workspace created the same way on the same file system.
//!
//! Text: the paths, relative to the current directory when inside it (absolute otherwise),
//! one per line; "No files found" when none; after 100 paths:
//! `(Showing 100 of N matching files; N-100 more are not listed. Narrow the pattern or path to see the rest.)`.
//!
//! Errors (thrown): `Directory does not exist: <path>. Note: your current working directory is <cwd>.`,
//! `Path is not a directory: <path>`.

use super::{null_byte_check, opt_str, req_str, Cx, Output};
use crate::error::ExecError;
use ignore::overrides::OverrideBuilder;
use ignore::WalkBuilder;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

const TOOL: &str = "Glob";
const LIMIT: usize = 100;

fn is_glob_char(c: char) -> bool {
    matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '!')
}

/// `pSt`: an absolute pattern is split into its literal directory and the rest.
fn split_absolute(pattern: &str) -> Option<(PathBuf, String)> {
    if !pattern.starts_with('/') {
        return None;
    }
    let parts: Vec<&str> = pattern.split('/').collect();
    let mut dir = PathBuf::from("/");
    let mut i = 1;
    while i + 1 < parts.len() && !parts[i].chars().any(is_glob_char) {
        dir.push(parts[i]);
        i += 1;
    }
    Some((dir, parts[i..].join("/")))
}

pub(crate) fn run(input: &Value, cx: &mut Cx<'_>) -> Result<Output, ExecError> {
    let pattern = req_str(TOOL, input, "pattern")?;
    let path = opt_str(TOOL, input, "path")?;
    if let Some(out) = null_byte_check(TOOL, &[("pattern", Some(pattern)), ("path", path)]) {
        return Ok(out);
    }
    let (search_dir, rel_pattern) = match split_absolute(pattern) {
        Some((d, p)) => (d, p),
        None => (
            path.map(|p| cx.expand(p)).unwrap_or_else(|| cx.cwd()),
            pattern.to_string(),
        ),
    };
    if let Some(p) = path {
        if split_absolute(pattern).is_none() {
            match std::fs::metadata(&search_dir) {
                Err(_) => {
                    return Ok(cx.path_error(format!(
                    "Directory does not exist: {p}. Note: your current working directory is {}.",
                    cx.cwd().display()
                )))
                }
                Ok(m) if !m.is_dir() => {
                    return Ok(cx.path_error(format!("Path is not a directory: {p}")))
                }
                _ => {}
            }
        }
    }
    let root = cx.confine(&search_dir.to_string_lossy())?;
    if !root.is_dir() {
        return Ok(Output::ok("No files found"));
    }
    let files = match list(&root, &rel_pattern) {
        Ok(f) => f,
        Err(msg) => {
            return Err(ExecError::Unsupported {
                tool: TOOL.into(),
                reason: msg,
            })
        }
    };
    if files.is_empty() {
        return Ok(Output::ok("No files found"));
    }
    let total = files.len();
    // Paths are shown as the lexical spelling under the search directory.
    let lexical_root = super::normalize_lexically(&search_dir);
    let mut lines: Vec<String> = files
        .iter()
        .take(LIMIT)
        .map(|p| {
            let rel = p.strip_prefix(&root).unwrap_or(p);
            cx.display_relative(&lexical_root.join(rel))
        })
        .collect();
    if total > LIMIT {
        lines.push(format!(
            "(Showing {LIMIT} of {total} matching files; {} more are not listed. Narrow the pattern or path to see the rest.)",
            total - LIMIT
        ));
    }
    Ok(Output::ok(lines.join("\n")))
}

/// Files under `root` matching the ripgrep glob, oldest first.
pub(crate) fn list(root: &Path, pattern: &str) -> Result<Vec<PathBuf>, String> {
    let mut ob = OverrideBuilder::new(root);
    ob.add(pattern)
        .map_err(|e| format!("glob pattern not reproduced: {e}"))?;
    let overrides = ob
        .build()
        .map_err(|e| format!("glob pattern not reproduced: {e}"))?;
    let walker = WalkBuilder::new(root)
        .standard_filters(false)
        .hidden(false)
        .follow_links(false)
        .overrides(overrides)
        .build();
    let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
    for entry in walker.flatten() {
        // Without --follow ripgrep lists regular files only (a symlink's own type is not
        // "file"), so links are skipped like in `rg --files`.
        if entry.depth() > 0 && entry.file_type().is_some_and(|t| t.is_file()) {
            let mtime = std::fs::symlink_metadata(entry.path())
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            found.push((mtime, entry.into_path()));
        }
    }
    // ripgrep walks single-threaded in directory order (`read_dir`) when sorting, then
    // sorts stably by modification time: equal times keep the directory order.
    found.sort_by_key(|a| a.0);
    Ok(found.into_iter().map(|(_, p)| p).collect())
}
