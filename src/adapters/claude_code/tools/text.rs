//! Text helpers shared by the tools, each a port of a Claude Code 2.1.332 function.

use std::io;
use std::path::Path;

/// JavaScript `Number.prototype.toFixed(1)`: round half up on the exact binary value.
pub(crate) fn to_fixed_1(x: f64) -> String {
    let y = x * 10.0;
    let f = y.floor();
    let n = if y - f >= 0.5 { f + 1.0 } else { f };
    let s = format!("{:.1}", n / 10.0);
    s
}

/// `pn` (`chunk-dd1t9gxb.js`): human file size — "N bytes", "x.yKB", "x.yMB", "x.yGB",
/// with a trailing ".0" removed.
pub(crate) fn format_size(bytes: u64) -> String {
    let kb = bytes as f64 / 1024.0;
    if kb < 1.0 {
        return format!("{bytes} bytes");
    }
    let strip = |s: String| s.strip_suffix(".0").map(str::to_owned).unwrap_or(s);
    if kb < 1024.0 {
        return format!("{}KB", strip(to_fixed_1(kb)));
    }
    let mb = kb / 1024.0;
    if mb < 1024.0 {
        return format!("{}MB", strip(to_fixed_1(mb)));
    }
    format!("{}GB", strip(to_fixed_1(mb / 1024.0)))
}

/// Length in UTF-16 code units (JavaScript `String.length`).
pub(crate) fn js_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// The longest prefix of `s` with at most `units` UTF-16 code units (never splits a char).
pub(crate) fn js_prefix(s: &str, units: usize) -> &str {
    let mut n = 0usize;
    for (i, c) in s.char_indices() {
        let w = c.len_utf16();
        if n + w > units {
            return &s[..i];
        }
        n += w;
    }
    s
}

/// The longest suffix of `s` with at most `units` UTF-16 code units.
pub(crate) fn js_suffix(s: &str, units: usize) -> &str {
    let mut n = 0usize;
    for (i, c) in s.char_indices().rev() {
        let w = c.len_utf16();
        if n + w > units {
            return &s[i + c.len_utf8()..];
        }
        n += w;
    }
    s
}

/// `cp(e, 10000)` (`chunk-6bm6jz2w.js`): error messages longer than 10000 + 1024 characters
/// keep their first 5000 and last 5000 characters around
/// "\n\n... [N characters truncated] ...\n\n".
pub(crate) fn cap_error(message: &str) -> String {
    let message = message.trim();
    let message = if message.is_empty() {
        "Command failed with no output"
    } else {
        message
    };
    const KEEP: usize = 10_000;
    const SLACK: usize = 1024;
    let len = js_len(message);
    if len <= KEEP + SLACK {
        return message.to_string();
    }
    let head = js_prefix(message, KEEP / 2);
    let tail = js_suffix(message, KEEP - KEEP / 2);
    let dropped = len - js_len(head) - js_len(tail);
    format!("{head}\n\n... [{dropped} characters truncated] ...\n\n{tail}")
}

/// A tool's `maxResultSizeChars` after the global cap (`l3` with `mw = 50000`,
/// `chunk-ety1djz5.js`/`chunk-15nrt7te.js`): results longer than this are saved to a file.
/// Read has no limit; Bash uses `BASH_MAX_OUTPUT_LENGTH` (30000).
pub(crate) fn persist_threshold(tool: &str) -> Option<usize> {
    match tool {
        "Read" => None,
        "Bash" => Some(30_000),
        "Grep" => Some(20_000),
        "Glob" | "Write" | "Edit" | "MultiEdit" | "NotebookEdit" | "LS" => Some(50_000),
        _ => Some(50_000),
    }
}

/// `h$e(e, 2000)`: the preview of a persisted result — the first 2000 characters, cut at
/// the last newline when that keeps more than half.
pub(crate) fn preview(text: &str, limit: usize) -> (&str, bool) {
    if js_len(text) <= limit {
        return (text, false);
    }
    let head = js_prefix(text, limit);
    let cut = match head.rfind('\n') {
        Some(i) if js_len(&head[..i]) as f64 > limit as f64 * 0.5 => &head[..i],
        _ => head,
    };
    (cut, true)
}

/// `BEe` (`chunk-ety1djz5.js`): save `text` as `<dir>/<call id>.txt` and return the
/// `<persisted-output>` block the model sees instead.
pub(crate) fn persist(text: &str, dir: &Path, call_id: &str) -> io::Result<String> {
    std::fs::create_dir_all(dir)?;
    let name: String = call_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("{name}.txt"));
    std::fs::write(&path, text)?;
    let (pre, more) = preview(text, 2000);
    Ok(format!(
        "<persisted-output>\nOutput too large ({}). Full output saved to: {}\n\nPreview (first {}):\n{}{}</persisted-output>",
        format_size(js_len(text) as u64),
        path.display(),
        format_size(2000),
        pre,
        if more { "\n...\n" } else { "\n" }
    ))
}

/// `x(n, word)`: "file"/"files".
pub(crate) fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        word.to_string()
    } else {
        format!("{word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_like_javascript() {
        assert_eq!(format_size(500), "500 bytes");
        assert_eq!(format_size(1024), "1KB");
        assert_eq!(format_size(2000), "2KB");
        assert_eq!(format_size(262_144), "256KB");
        assert_eq!(format_size(1536), "1.5KB");
        assert_eq!(format_size(300 * 1024 + 51), "300KB");
        assert_eq!(format_size(6_900_000), "6.6MB");
        assert_eq!(to_fixed_1(1.25), "1.3");
        assert_eq!(to_fixed_1(0.05), "0.1");
    }

    #[test]
    fn error_cap() {
        let short = "x".repeat(11_024);
        assert_eq!(cap_error(&short), short);
        let long = format!("{}{}", "a".repeat(6000), "b".repeat(6000));
        let capped = cap_error(&long);
        assert!(capped.starts_with(&"a".repeat(5000)));
        assert!(capped.contains("\n\n... [2000 characters truncated] ...\n\n"));
        assert!(capped.ends_with(&"b".repeat(5000)));
        assert_eq!(cap_error("  "), "Command failed with no output");
    }

    #[test]
    fn previews() {
        let t = format!("{}\n{}", "a".repeat(1500), "b".repeat(1000));
        let (p, more) = preview(&t, 2000);
        assert!(more);
        assert_eq!(p, "a".repeat(1500));
        let c = "c".repeat(3000);
        let (p, _) = preview(&c, 2000);
        assert_eq!(p.len(), 2000);
    }
}
