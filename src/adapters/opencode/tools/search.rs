//! `glob {pattern, path?}` and `grep {pattern, path?, include?}` through ripgrep with the
//! exact arguments OpenCode passes (ripgrep 15.1.0, as OpenCode downloads it; the PyPI
//! package `ripgrep` provides it offline). Results come in ripgrep's walk order, at most 100.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use super::{opt_string, string_param, Env, Produced};
use crate::error::ExecError;
use crate::kit::ExecContext;

const LIMIT: usize = 100;

/// The `rg` OpenCode would use: on PATH, else the one `pvisor agents install opencode` put
/// beside the CLI.
pub fn ripgrep() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("rg"))
        .find(|p| p.is_file());
    on_path.or_else(|| crate::install::helper(&super::super::ENTRY, "rg"))
}

struct Rg {
    lines: Vec<String>,
    code: Option<i32>,
    stderr: String,
}

fn run_rg(
    tool: &str,
    cwd: &Path,
    args: &[String],
    limit: usize,
) -> Result<Result<Rg, Produced>, ExecError> {
    let Some(rg) = ripgrep() else {
        return Err(ExecError::Unsupported {
            tool: tool.into(),
            reason: "ripgrep (`rg`) is not installed: OpenCode's glob and grep run it (`pvisor agents install opencode` installs it)".into(),
        });
    };
    let out = match Command::new(rg)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) => o,
        Err(_) => return Ok(Err(Produced::err("ripgrep execution failed"))),
    };
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split('\n')
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .take(limit + 1)
        .collect();
    Ok(Ok(Rg {
        lines,
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }))
}

/// The items of a ripgrep run, or OpenCode's error for it.
fn items(r: Rg, pattern_errors: bool) -> Result<(Vec<String>, bool), Produced> {
    if r.lines.len() > LIMIT {
        return Ok((r.lines[..LIMIT].to_vec(), true));
    }
    let invalid =
        r.stderr.contains("regex parse error") || r.stderr.contains("error parsing regex");
    match r.code {
        Some(2) if pattern_errors && invalid => Err(Produced::err(r.stderr.trim().to_string())),
        Some(0) | Some(2) => Ok((r.lines, false)),
        Some(1) => Ok((vec![], false)),
        Some(c) => Err(Produced::err(if r.stderr.trim().is_empty() {
            format!("ripgrep failed with code {c}")
        } else {
            r.stderr.trim().to_string()
        })),
        None => Err(Produced::err("ripgrep execution failed")),
    }
}

fn clean(p: &str) -> String {
    let mut s = p;
    while let Some(r) = s.strip_prefix("./").or_else(|| s.strip_prefix(".\\")) {
        s = r;
    }
    s.trim_start_matches(['/', '\\']).replace('\\', "/")
}

pub fn glob(env: &Env, ctx: &ExecContext, input: &Value) -> Result<Produced, ExecError> {
    let params = (|| {
        Ok::<_, Produced>((
            string_param("glob", input, "pattern")?,
            opt_string("glob", input, "path")?,
        ))
    })();
    let (pattern, path) = match params {
        Ok(p) => p,
        Err(p) => return Ok(p),
    };
    let dir = env.resolve(path.unwrap_or(&env.directory.display().to_string()));
    if std::fs::metadata(&dir).is_ok_and(|m| m.is_file()) {
        return Ok(Produced::err(format!(
            "glob path must be a directory: {}",
            dir.display()
        )));
    }
    let real = super::confined(ctx, &dir)?;
    let args: Vec<String> = vec![
        "--no-config".into(),
        "--files".into(),
        format!("--glob={pattern}"),
        "--glob=!**/.git/**".into(),
        ".".into(),
    ];
    let (found, _) = match run_rg("glob", &real, &args, LIMIT)?.and_then(|r| items(r, false)) {
        Ok(x) => x,
        Err(p) => return Ok(p),
    };
    let truncated = found.len() == LIMIT;
    let mut out: Vec<String> = Vec::new();
    if found.is_empty() {
        out.push("No files found".into());
    } else {
        out.extend(
            found
                .iter()
                .map(|f| dir.join(clean(f)).display().to_string()),
        );
        if truncated {
            out.push(String::new());
            out.push(format!("(Results are truncated: showing first {LIMIT} results. Consider using a more specific path or pattern.)"));
        }
    }
    Ok(Produced::ok(
        out.join("\n"),
        env.title_of(&dir),
        json!({"count": found.len(), "truncated": truncated}),
    ))
}

pub fn grep(env: &Env, ctx: &ExecContext, input: &Value) -> Result<Produced, ExecError> {
    let params = (|| {
        Ok::<_, Produced>((
            string_param("grep", input, "pattern")?,
            opt_string("grep", input, "path")?,
            opt_string("grep", input, "include")?,
        ))
    })();
    let (pattern, path, include) = match params {
        Ok(p) => p,
        Err(p) => return Ok(p),
    };
    let none = || {
        Produced::ok(
            "No files found",
            pattern,
            json!({"matches": 0, "truncated": false}),
        )
    };
    if pattern.is_empty() {
        return Ok(Produced::err("pattern is required"));
    }
    let target = match path {
        Some(p) if p.starts_with('/') => super::normalize(Path::new(p)),
        Some(p) => super::normalize(&env.directory.join(p)),
        None => env.directory.clone(),
    };
    // A file path searches the whole directory it is in.
    let dir = if std::fs::metadata(&target).is_ok_and(|m| m.is_dir()) {
        target
    } else {
        target.parent().map(Path::to_path_buf).unwrap_or(target)
    };
    let real = super::confined(ctx, &dir)?;
    let mut args: Vec<String> = vec![
        "--no-config".into(),
        "--json".into(),
        "--hidden".into(),
        "--no-messages".into(),
    ];
    if let Some(i) = include {
        args.push(format!("--glob={i}"));
    }
    args.extend([
        "--glob=!**/.git/**".into(),
        "--".into(),
        pattern.to_string(),
        ".".into(),
    ]);
    // Only `match` records count toward the limit.
    let r = match run_rg("grep", &real, &args, usize::MAX - 1)? {
        Ok(r) => r,
        Err(p) => return Ok(p),
    };
    let mut matches = Vec::new();
    for l in &r.lines {
        let Ok(v) = serde_json::from_str::<Value>(l) else {
            return Ok(Produced::err("Invalid ripgrep JSON output"));
        };
        if v.get("type").and_then(Value::as_str) != Some("match") {
            continue;
        }
        let (Some(p), Some(text), Some(line)) = (
            v.pointer("/data/path/text").and_then(Value::as_str),
            v.pointer("/data/lines/text").and_then(Value::as_str),
            v.pointer("/data/line_number").and_then(Value::as_u64),
        ) else {
            return Ok(Produced::err("Invalid ripgrep match output"));
        };
        let text = if super::super::js::len16(text) > 2000 {
            format!("{}...", super::super::js::prefix16(text, 2000))
        } else {
            text.to_string()
        };
        matches.push((dir.join(clean(p)).display().to_string(), line, text));
        if matches.len() > LIMIT {
            break;
        }
    }
    let over = matches.len() > LIMIT;
    let rg = Rg {
        lines: vec![],
        code: r.code,
        stderr: r.stderr,
    };
    if !over {
        if let Err(p) = items(rg, true) {
            return Ok(p);
        }
    }
    matches.truncate(LIMIT);
    if matches.is_empty() {
        return Ok(none());
    }
    let truncated = matches.len() == LIMIT;
    let mut out = vec![format!(
        "Found {} matches{}",
        matches.len(),
        if truncated {
            " (more matches available)"
        } else {
            ""
        }
    )];
    let mut current = String::new();
    for (p, line, text) in &matches {
        if *p != current {
            if !current.is_empty() {
                out.push(String::new());
            }
            current = p.clone();
            out.push(format!("{p}:"));
        }
        out.push(format!("  Line {line}: {text}"));
    }
    if truncated {
        out.push(String::new());
        out.push("(Results truncated. Consider using a more specific path or pattern.)".into());
    }
    Ok(Produced::ok(
        out.join("\n"),
        pattern,
        json!({"matches": matches.len(), "truncated": truncated}),
    ))
}
