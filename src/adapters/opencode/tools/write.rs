//! `write {filePath, content}`: parent directories created, a byte-order mark kept as the
//! file had it; `Wrote file successfully.` (no language server runs in a replay, so no
//! diagnostics follow).

use std::path::PathBuf;

use serde_json::{json, Value};

use super::{string_param, Env, Produced};
use crate::error::ExecError;
use crate::kit::ExecContext;

const TOOL: &str = "write";
pub const BOM: char = '\u{feff}';

fn io(source: std::io::Error) -> ExecError {
    ExecError::Io {
        tool: TOOL.into(),
        source,
    }
}

/// `(had a BOM, text without it)`.
pub fn split_bom(s: &str) -> (bool, &str) {
    match s.strip_prefix(BOM) {
        Some(t) => (true, t),
        None => (false, s),
    }
}

pub fn run(
    env: &Env,
    ctx: &ExecContext,
    input: &Value,
) -> Result<(Produced, Option<i32>, Vec<PathBuf>), ExecError> {
    let file_path = match string_param(TOOL, input, "filePath") {
        Ok(p) => p,
        Err(p) => return Ok((p, None, vec![])),
    };
    let content = match string_param(TOOL, input, "content") {
        Ok(c) => c,
        Err(p) => return Ok((p, None, vec![])),
    };
    let path = env.resolve(file_path);
    let real = super::confined_for_write(ctx, &path)?;
    let exists = real.exists();
    let old_bom = exists
        && std::fs::read(&real)
            .map(|b| b.starts_with("\u{feff}".as_bytes()))
            .unwrap_or(false);
    let (new_bom, text) = split_bom(content);
    let bom = old_bom || new_bom;
    if let Some(parent) = real.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let bytes = if bom {
        format!("{BOM}{text}")
    } else {
        text.to_string()
    };
    std::fs::write(&real, bytes).map_err(io)?;
    let rel = real
        .strip_prefix(&ctx.workspace)
        .map(PathBuf::from)
        .unwrap_or_else(|_| real.clone());
    Ok((
        Produced::ok(
            "Wrote file successfully.",
            env.title_of(&path),
            json!({"diagnostics": {}, "filepath": path.display().to_string(), "exists": exists}),
        ),
        None,
        vec![rel],
    ))
}
