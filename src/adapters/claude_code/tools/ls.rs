//! LS — not a tool of Claude Code 2.1.332 (removed in 2.0), kept for sessions recorded by
//! older versions. Follows the 1.x `LSTool` (`listDirectory`, `createFileTree`,
//! `printTree`); approximate, there is no 2.1.332 source to check it against.
//!
//! Text: a tree rooted at the current directory,
//! ```text
//! - /abs/cwd/
//!   - src/
//!     - main.rs
//!   - README.md
//!
//! NOTE: do any of the files above seem malicious? If so, you MUST refuse to continue work.
//! ```
//! breadth-first listing of `path`, entries relative to the cwd and sorted, hidden entries
//! and `__pycache__` skipped, at most 1000 entries (then a leading notice).

use super::{opt_str, req_str, Cx, Output};
use crate::error::ExecError;
use serde_json::Value;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

const TOOL: &str = "LS";
const MAX_FILES: usize = 1000;

fn skip(path: &Path) -> bool {
    let s = path.to_string_lossy();
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        || s.contains("__pycache__/")
}

struct Node {
    name: String,
    dir: bool,
    children: Vec<Node>,
}

fn insert(level: &mut Vec<Node>, parts: &[&str], is_dir_entry: bool) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    if first.is_empty() {
        return insert(level, rest, is_dir_entry);
    }
    let last = rest.iter().all(|p| p.is_empty());
    let idx = match level.iter().position(|n| n.name == *first) {
        Some(i) => i,
        None => {
            level.push(Node {
                name: first.to_string(),
                dir: !last || is_dir_entry,
                children: Vec::new(),
            });
            level.len() - 1
        }
    };
    if !last {
        insert(&mut level[idx].children, rest, is_dir_entry);
    }
}

fn print(tree: &[Node], prefix: &str, out: &mut String) {
    for n in tree {
        out.push_str(&format!(
            "{prefix}- {}{}\n",
            n.name,
            if n.dir { "/" } else { "" }
        ));
        if !n.children.is_empty() {
            print(&n.children, &format!("{prefix}  "), out);
        }
    }
}

pub(crate) fn run(input: &Value, cx: &mut Cx<'_>) -> Result<Output, ExecError> {
    let path = req_str(TOOL, input, "path")?;
    let _ignore = input.get("ignore");
    let _ = opt_str(TOOL, input, "description")?;
    let root = cx.confine(path)?;
    let cwd = cx.cwd();
    let cwd_real = std::fs::canonicalize(&cwd).unwrap_or_else(|_| cwd.clone());
    let mut results: Vec<(String, bool)> = Vec::new();
    let mut queue: VecDeque<PathBuf> = VecDeque::from([root.clone()]);
    'walk: while let Some(dir) = queue.pop_front() {
        if results.len() > MAX_FILES {
            break;
        }
        if dir != root && skip(&dir) {
            continue;
        }
        if dir != root {
            results.push((
                super::relative_path(&cwd_real, &dir).unwrap_or_default() + "/",
                true,
            ));
        }
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                queue.push_back(p);
            } else {
                if skip(&p) {
                    continue;
                }
                results.push((
                    super::relative_path(&cwd_real, &p).unwrap_or_default(),
                    false,
                ));
                if results.len() > MAX_FILES {
                    break 'walk;
                }
            }
        }
    }
    results.sort();
    let mut tree: Vec<Node> = Vec::new();
    for (p, is_dir) in &results {
        let parts: Vec<&str> = p.split('/').collect();
        insert(&mut tree, &parts, *is_dir);
    }
    let mut out = format!("- {}/\n", cwd.display());
    print(&tree, "  ", &mut out);
    out.push_str("\nNOTE: do any of the files above seem malicious? If so, you MUST refuse to continue work.");
    if results.len() > MAX_FILES {
        out = format!(
            "There are more than {MAX_FILES} files in the repository. Use the LS tool (passing a specific path), Bash tool, and other tools to explore nested directories. The first {MAX_FILES} files and directories are included below:\n\n{out}"
        );
    }
    Ok(Output::ok(out))
}
