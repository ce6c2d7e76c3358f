//! OpenCode's output limits: at most 2000 lines and 51200 bytes reach the model; the full
//! text is saved to `<data>/tool-output/tool_<id>` and the cut says where.

use super::{Env, Produced};
use crate::error::ExecError;

pub const MAX_LINES: usize = 2000;
pub const MAX_BYTES: usize = 51200;

/// Save the full text where OpenCode does; returns the path.
pub fn save(env: &Env, tool: &str, text: &str) -> Result<String, ExecError> {
    let dir = env.data_dir.join("tool-output");
    let io = |source| ExecError::Io {
        tool: tool.to_string(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    let path = dir.join(super::super::ids::ascending("tool", None));
    std::fs::write(&path, text).map_err(io)?;
    Ok(path.display().to_string())
}

/// `Truncate.output` with the head kept (every tool that does not cut its own output). The
/// build agent may use the task tool, so the hint names it.
pub fn generic(env: &Env, tool: &str, mut p: Produced) -> Result<Produced, ExecError> {
    let text = &p.output;
    let lines: Vec<&str> = text.split('\n').collect();
    let bytes = text.len();
    if lines.len() <= MAX_LINES && bytes <= MAX_BYTES {
        p.metadata["truncated"] = false.into();
        return Ok(p);
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut used = 0usize;
    let mut by_bytes = false;
    for (r, l) in lines.iter().enumerate() {
        if r >= MAX_LINES {
            break;
        }
        let cost = l.len() + usize::from(r > 0);
        if used + cost > MAX_BYTES {
            by_bytes = true;
            break;
        }
        kept.push(l);
        used += cost;
    }
    let (n, unit) = if by_bytes {
        (bytes - used, "bytes")
    } else {
        (lines.len() - kept.len(), "lines")
    };
    let path = save(env, tool, text)?;
    let hint = format!(
        "The tool call succeeded but the output was truncated. Full output saved to: {path}\nUse the Task tool to have explore agent process this file with Grep and Read (with offset/limit). Do NOT read the full file yourself - delegate to save context."
    );
    p.output = format!(
        "{}\n\n...{n} {unit} truncated...\n\n{hint}",
        kept.join("\n")
    );
    p.metadata["truncated"] = true.into();
    p.metadata["outputPath"] = path.into();
    Ok(p)
}

/// bash's own cut: the last 2000 lines within 51200 bytes; a last line longer than the
/// byte limit alone keeps its tail (from a character boundary). `(text, cut)`.
pub fn tail(text: &str) -> (String, bool) {
    let lines: Vec<&str> = text.split('\n').collect();
    if lines.len() <= MAX_LINES && text.len() <= MAX_BYTES {
        return (text.to_string(), false);
    }
    let mut kept: Vec<String> = Vec::new();
    let mut used = 0usize;
    for l in lines.iter().rev() {
        if kept.len() >= MAX_LINES {
            break;
        }
        let cost = l.len() + usize::from(!kept.is_empty());
        if used + cost > MAX_BYTES {
            if kept.is_empty() {
                let b = l.as_bytes();
                let mut start = b.len().saturating_sub(MAX_BYTES);
                while start < b.len() && (b[start] & 0xC0) == 0x80 {
                    start += 1;
                }
                kept.push(String::from_utf8_lossy(&b[start..]).into_owned());
            }
            break;
        }
        kept.push(l.to_string());
        used += cost;
    }
    kept.reverse();
    (kept.join("\n"), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_keeps_the_tail() {
        let text: String = (1..=30000).map(|i| format!("{i}\n")).collect();
        let (t, cut) = tail(&text);
        assert!(cut);
        assert!(t.starts_with("28002\n"), "{}", &t[..20]);
        assert!(t.ends_with("30000\n"));
        // One oversized line after the final newline: the empty last element is kept, then
        // the loop stops (OpenCode shows `(no output)`).
        let (t, cut) = tail(&format!("{}\n", "q".repeat(60000)));
        assert!(cut);
        assert_eq!(t, "");
    }
}
