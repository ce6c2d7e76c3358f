//! Read (`w0` in `chunk-bqhgd24a.js`: `validateInput`, `fqi` → `M4o` → `Uzt` → `gQe`/`qAo`
//! for text, and the `"text"` case of `mapToolResultToToolResultBlockParam`).
//!
//! Output for text files: every selected line as `<number>\t<line>` (`f0t`/`gQn` in
//! `chunk-xygbzv11.js`), joined by `\n`, numbered from `offset` (1 by default). The whole
//! file is read when no `limit` is given (2.1.332 has no 2000-line default cap in code and
//! no long-line truncation); line ends `\r\n` become `\n` and a BOM is dropped. A file that
//! ends with a newline shows a last, empty numbered line (`3\t` in the recorded session).
//!
//! Reminders instead of content:
//! - empty file: `<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>`
//! - offset past the end: `<system-reminder>Warning: the file exists but is shorter than the
//!   provided offset (N). The file has M lines.</system-reminder>`
//!
//! Errors (thrown, so plain text with `is_error`):
//! - missing: `File does not exist. Note: your current working directory is <cwd>.` plus
//!   ` Did you mean <path>?` when a sibling with another extension, or the same relative
//!   path under the cwd, exists (`bLe`, `ort`);
//! - over 256 KB without `limit`: `File content (<size>) exceeds maximum allowed size
//!   (256KB). Use offset and limit parameters … To read it anyway, … allow_large: true …`.
//!
//! Not reproduced (refused): images, PDFs, notebooks, `allow_large`, and text whose token
//! estimate is over the 25000-token cap (Claude then asks the token-count API; the page it
//! shows or the error it raises names that exact count).
//!
//! State: a successful read records the content and `floor(mtime)` in the read-file
//! state; that is what later Write/Edit calls check.

use super::text::format_size;
use super::{
    io_error, null_byte_check, opt_bool, opt_int, opt_str, req_str, Cx, FileReadState, Output,
};
use crate::error::ExecError;
use serde_json::Value;
use std::path::Path;

const TOOL: &str = "Read";
/// `N7t`: default `maxSizeBytes` for reads without `limit`.
const MAX_SIZE_BYTES: u64 = 262_144;
/// `aVl` (`chunk-7fr0bdgx.js`), appended by `B8e` when the turn still has room for a larger
/// read — the case in the recorded sessions; with the context nearly full Claude appends
/// a different sentence (not reproduced: it depends on the live context size).
const ALLOW_LARGE_HINT: &str = " To read it anyway, up to what still fits in your context, call Read again with allow_large: true \u{2014} only if you genuinely need all of it or the user asked for the whole file.";
/// `esa`: default `maxTokens`.
const MAX_TOKENS: usize = 25_000;

/// Binary extensions Read refuses (`jge`, `chunk-tpsa0fat.js`); images and PDFs are read
/// by other paths.
const BINARY_EXTENSIONS: &[&str] = &[
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".webp", ".tiff", ".tif", ".heic", ".heif",
    ".avif", ".mp4", ".mov", ".avi", ".mkv", ".webm", ".wmv", ".flv", ".m4v", ".mpeg", ".mpg",
    ".mp3", ".wav", ".ogg", ".flac", ".aac", ".m4a", ".wma", ".aiff", ".opus", ".zip", ".tar",
    ".gz", ".bz2", ".7z", ".rar", ".xz", ".z", ".tgz", ".iso", ".zst", ".lz4", ".whl", ".exe",
    ".dll", ".so", ".dylib", ".bin", ".o", ".a", ".obj", ".lib", ".app", ".msi", ".deb", ".rpm",
    ".dmg", ".apk", ".pdf", ".doc", ".docx", ".docm", ".dotx", ".dotm", ".xls", ".xlsx", ".xlsm",
    ".xlsb", ".xltx", ".xltm", ".ppt", ".pptx", ".pptm", ".ppsx", ".ppsm", ".potx", ".potm",
    ".odt", ".ods", ".odp", ".numbers", ".epub", ".ttf", ".otf", ".woff", ".woff2", ".eot", ".pyc",
    ".pyo", ".class", ".jar", ".war", ".ear", ".node", ".wasm", ".rlib", ".sqlite", ".sqlite3",
    ".db", ".mdb", ".idx", ".parquet", ".feather", ".npy", ".npz", ".pickle", ".psd", ".ai",
    ".eps", ".sketch", ".fig", ".xd", ".blend", ".3ds", ".max", ".swf", ".fla", ".lockb", ".dat",
    ".data",
];
const IMAGE_EXTENSIONS: &[&str] = &["png", "jpg", "jpeg", "gif", "webp"];

/// Why a file is not plain UTF-8 text (`sSt`, `chunk-hb5wfhke.js`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotText {
    NotUtf8,
    Nul,
    Utf16Be,
}

impl NotText {
    /// The clause of `e[t]` in `chunk-qznjcrwt.js`.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            NotText::NotUtf8 => "is not valid UTF-8: it uses a legacy encoding such as Windows-1252, Shift-JIS or GBK, or it is binary",
            NotText::Nul => "has NUL bytes in its first 8 KB: binary data, UTF-16/UTF-32 without a byte-order mark, or text with embedded NULs",
            NotText::Utf16Be => "is UTF-16 big-endian (it starts FE FF), which these tools cannot write",
        }
    }

    /// `D8l`: the note Read appends after the content.
    pub(crate) fn read_note(self) -> String {
        let extra = if self == NotText::NotUtf8 {
            " Its undecodable bytes show above as U+FFFD."
        } else {
            ""
        };
        format!(
            "[This file {}.{extra} Edit and Write will refuse it: change it with a shell command that keeps its encoding, or ask the user whether to convert it to UTF-8.]",
            self.describe()
        )
    }

    /// `VXn`: the refusal of Edit and Write.
    pub(crate) fn write_refusal(self) -> String {
        format!(
            "File {}. These tools write UTF-8 (or UTF-16LE behind its byte-order mark) and never convert a file's encoding on their own, so nothing was written. If the file is text, make the change with a shell command that reads and writes it in its own encoding (iconv, or PowerShell Get-Content/Set-Content -Encoding), or ask the user whether to convert it to UTF-8 first. To replace the whole file with new UTF-8 text anyway, delete it first, then Write it.",
            self.describe()
        )
    }
}

/// Decode file bytes the way Claude does: UTF-16LE behind its BOM, UTF-8 otherwise
/// (lossy), with the reason the bytes are not clean text. A UTF-8 BOM is kept (callers
/// strip it where Claude does).
pub(crate) fn decode_text(bytes: &[u8]) -> (String, Option<NotText>) {
    if bytes.len() >= 2 && bytes[0] == 0xFF && bytes[1] == 0xFE {
        let units: Vec<u16> = bytes[2..]
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], *c.get(1).unwrap_or(&0)]))
            .collect();
        return (String::from_utf16_lossy(&units), None);
    }
    let not_text = if bytes.len() >= 2 && bytes[0] == 0xFE && bytes[1] == 0xFF {
        Some(NotText::Utf16Be)
    } else if bytes[..bytes.len().min(8192)].contains(&0) {
        Some(NotText::Nul)
    } else if std::str::from_utf8(bytes).is_err() {
        Some(NotText::NotUtf8)
    } else {
        None
    };
    (String::from_utf8_lossy(bytes).into_owned(), not_text)
}

/// The selected lines of a text (`qAo` + the fast path of `gQe`).
pub(crate) struct Selection {
    /// Selected lines joined by `\n` (trailing `\r` of each line removed).
    pub content: String,
    /// Number of selected lines.
    pub line_count: usize,
    /// Lines in the whole file (`count("\n") + 1`).
    pub total_lines: usize,
}

/// Select lines `[start, start + limit)` (0-based) of `text`; the whole text when
/// `start == 0` and `limit` is `None`.
pub(crate) fn select_lines(text: &str, start: usize, limit: Option<usize>) -> Selection {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if start == 0 && limit.is_none() {
        let mut c = text.replace("\r\n", "\n");
        if c.ends_with('\r') {
            c.pop();
        }
        let n = c.matches('\n').count() + 1;
        return Selection {
            content: c,
            line_count: n,
            total_lines: n,
        };
    }
    let end = limit.map_or(usize::MAX, |l| start.saturating_add(l));
    let mut selected: Vec<&str> = Vec::new();
    let mut total = 0usize;
    for (i, line) in text.split('\n').enumerate() {
        if i >= start && i < end {
            selected.push(line.strip_suffix('\r').unwrap_or(line));
        }
        total = i + 1;
    }
    Selection {
        content: selected.join("\n"),
        line_count: selected.len(),
        total_lines: total,
    }
}

/// `f0t`: number the lines of `content` from `start`.
pub(crate) fn number_lines(content: &str, start: i64, tab_aware: bool) -> String {
    if content.is_empty() {
        return String::new();
    }
    let sep = if tab_aware && (content.starts_with('\t') || content.contains("\n\t")) {
        ':'
    } else {
        '\t'
    };
    let mut out = String::with_capacity(content.len() + content.len() / 8);
    for (i, line) in content.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let line = line.strip_suffix('\r').unwrap_or(line);
        out.push_str(&(start + i as i64).to_string());
        out.push(sep);
        out.push_str(line);
    }
    out
}

/// `Czo` + `bLe`/`ort`: the "File does not exist" message.
pub(crate) fn missing_file_message(cx: &Cx<'_>, path: &Path) -> String {
    let cwd = cx.cwd();
    let mut m = format!(
        "File does not exist. Note: your current working directory is {}.",
        cwd.display()
    );
    if let Some(s) = suggest_under_cwd(&cwd, path) {
        m.push_str(&format!(" Did you mean {s}?"));
    } else if let Some(s) = similar_file(path) {
        m.push_str(&format!(" Did you mean {s}?"));
    }
    m
}

/// `bLe`: a path in a sibling tree of the cwd whose counterpart under the cwd exists.
fn suggest_under_cwd(cwd: &Path, path: &Path) -> Option<String> {
    let parent = cwd.parent()?;
    if !path.starts_with(parent) || path.starts_with(cwd) || path == cwd {
        return None;
    }
    let rel = path.strip_prefix(parent).ok()?;
    let candidate = cwd.join(rel);
    candidate.exists().then(|| candidate.display().to_string())
}

/// `ort` (findSimilarFile): a file in the same directory with the same stem and another
/// extension; returns its name.
fn similar_file(path: &Path) -> Option<String> {
    let dir = path.parent()?;
    let stem = path.file_stem()?.to_string_lossy().into_owned();
    let ext_ok = |name: &str| -> bool {
        match name.rfind('.') {
            None | Some(0) => true,
            Some(i) => {
                let e = &name[i..];
                e.len() <= 33
                    && e[1..]
                        .chars()
                        .all(|c| c.is_alphanumeric() || "_+~#-".contains(c))
            }
        }
    };
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let p = Path::new(&name);
        let s = p
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if s == stem && ext_ok(&name) && dir.join(&name) != path {
            return Some(name);
        }
    }
    None
}

fn extension_of(path: &str) -> String {
    let base = path.rsplit('/').next().unwrap_or(path);
    match base.rfind('.') {
        Some(i) if i > 0 => base[i..].to_lowercase(),
        _ => String::new(),
    }
}

/// Rough token count (`lzn`/`Wl`: characters / 4, or / 2 for JSON files).
fn estimate_tokens(text: &str, ext: &str) -> usize {
    let per = match ext {
        ".json" | ".jsonl" | ".jsonc" => 2.0,
        _ => 4.0,
    };
    (super::text::js_len(text) as f64 / per).round() as usize
}

pub(crate) fn run(input: &Value, cx: &mut Cx<'_>) -> Result<Output, ExecError> {
    let file_path = req_str(TOOL, input, "file_path")?;
    let offset = opt_int(TOOL, input, "offset")?;
    let limit = opt_int(TOOL, input, "limit")?;
    let pages = opt_str(TOOL, input, "pages")?;
    let allow_large = opt_bool(TOOL, input, "allow_large")?.unwrap_or(false);
    if offset.is_some_and(|o| o < 0) {
        return Err(super::bad_input(TOOL, "`offset` must be 0 or more"));
    }
    if limit.is_some_and(|l| l <= 0) {
        return Err(super::bad_input(TOOL, "`limit` must be more than 0"));
    }
    if let Some(out) = null_byte_check(TOOL, &[("file_path", Some(file_path))]) {
        return Ok(out);
    }
    let ext = extension_of(file_path);
    if ext == ".pdf" || pages.is_some() {
        return Err(ExecError::Unsupported {
            tool: TOOL.into(),
            reason: "PDF reads are not reproduced".into(),
        });
    }
    if IMAGE_EXTENSIONS.contains(&ext.trim_start_matches('.')) {
        return Err(ExecError::Unsupported {
            tool: TOOL.into(),
            reason: "image reads are not reproduced".into(),
        });
    }
    if ext == ".ipynb" {
        return Err(ExecError::Unsupported {
            tool: TOOL.into(),
            reason: "notebook reads are not reproduced".into(),
        });
    }
    if BINARY_EXTENSIONS.contains(&ext.as_str()) {
        let hint = if cx.config.behaviour.read_binary_skill_hint {
            "Use a skill for this file type if one is available, or a shell command or script that can read the format."
        } else {
            "Please use appropriate tools for binary file analysis."
        };
        return Ok(Output::validation(format!(
            "This tool cannot read binary files. The file appears to be a binary {ext} file. {hint}"
        )));
    }
    if allow_large {
        return Err(ExecError::Unsupported {
            tool: TOOL.into(),
            reason: "allow_large reads depend on the context room left in the turn".into(),
        });
    }

    let path = cx.confine(file_path)?;
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Output::thrown(missing_file_message(
                cx,
                &cx.expand(file_path),
            )));
        }
        Err(e) => return Err(io_error(TOOL, e)),
    };
    if meta.is_dir() {
        return Ok(Output::thrown(format!(
            "EISDIR: illegal operation on a directory, read '{}'",
            cx.expand(file_path).display()
        )));
    }
    if !meta.is_file() {
        return Err(ExecError::Unsupported {
            tool: TOOL.into(),
            reason: "reading devices, FIFOs and sockets is not reproduced".into(),
        });
    }
    if limit.is_none() && meta.len() > MAX_SIZE_BYTES {
        return Ok(Output::thrown(format!(
            "File content ({}) exceeds maximum allowed size ({}). Use offset and limit parameters to read specific portions of the file, or search for specific content instead of reading the whole file.{}",
            format_size(meta.len()),
            format_size(MAX_SIZE_BYTES),
            if cx.config.behaviour.read_allow_large {
                ALLOW_LARGE_HINT
            } else {
                ""
            }
        )));
    }
    let bytes = std::fs::read(&path).map_err(|e| io_error(TOOL, e))?;
    let mtime = super::mtime_ms(&path).map_err(|e| io_error(TOOL, e))?;
    let (text, not_text) = decode_text(&bytes);

    // `offset` as given (1 by default); lines start at index offset-1 (0 stays 0).
    let start_line = offset.unwrap_or(1);
    let start = if start_line == 0 {
        0
    } else {
        (start_line - 1) as usize
    };
    let sel = select_lines(&text, start, limit.map(|l| l as usize));

    let tokens = estimate_tokens(&sel.content, &ext);
    // Up to MAX_TOKENS/4 Claude trusts its estimate; above, it asks the API. The estimate
    // runs low for dense code, so only a margin below the cap is taken as certain.
    if tokens > MAX_TOKENS * 4 / 5 {
        return Err(ExecError::Unsupported {
            tool: TOOL.into(),
            reason: format!(
                "about {tokens} tokens: over Claude's 25000-token read cap, where its output depends on the token-count API"
            ),
        });
    }

    cx.state.remember(
        path.clone(),
        FileReadState {
            content: sel.content.clone(),
            timestamp: mtime,
            offset: Some(start_line),
            limit,
            is_partial_view: false,
            content_not_in_model_context: false,
        },
    );

    let body = if !sel.content.is_empty() {
        number_lines(&sel.content, start_line, cx.config.tab_aware_separator)
    } else if sel.line_count >= 1 && sel.total_lines > 1 {
        format!("{start_line}\t")
    } else if sel.line_count >= 1 || sel.total_lines == 0 {
        "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>"
            .to_string()
    } else {
        format!(
            "<system-reminder>Warning: the file exists but is shorter than the provided offset ({start_line}). The file has {} lines.</system-reminder>",
            sel.total_lines
        )
    };
    let mut text_out = body;
    if let Some(nt) = not_text.filter(|_| cx.config.behaviour.read_not_text_note) {
        // `Iqi`: each note after a blank line.
        text_out.push_str("\n\n");
        text_out.push_str(&nt.read_note());
    }
    Ok(Output::ok(text_out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbering_matches_recorded_session() {
        let sel = select_lines("line one\nline two\n", 0, None);
        assert_eq!(
            number_lines(&sel.content, 1, false),
            "1\tline one\n2\tline two\n3\t"
        );
        assert_eq!(sel.line_count, 3);
    }

    #[test]
    fn crlf_and_bom() {
        let sel = select_lines("\u{feff}a\r\nb\r\n", 0, None);
        assert_eq!(sel.content, "a\nb\n");
        let sel = select_lines("a\r\nb\r\nc", 1, Some(1));
        assert_eq!(sel.content, "b");
        assert_eq!(sel.total_lines, 3);
    }

    #[test]
    fn offsets_and_limits() {
        let text = "1\n2\n3\n4\n5\n";
        let sel = select_lines(text, 1, Some(2));
        assert_eq!(
            (sel.content.as_str(), sel.line_count, sel.total_lines),
            ("2\n3", 2, 6)
        );
        assert_eq!(number_lines(&sel.content, 2, false), "2\t2\n3\t3");
        let sel = select_lines(text, 10, Some(5));
        assert_eq!(
            (sel.content.as_str(), sel.line_count, sel.total_lines),
            ("", 0, 6)
        );
        let sel = select_lines(text, 5, None);
        assert_eq!((sel.content.as_str(), sel.line_count), ("", 1));
        let sel = select_lines("", 0, None);
        assert_eq!(
            (sel.content.as_str(), sel.line_count, sel.total_lines),
            ("", 1, 1)
        );
    }

    #[test]
    fn tab_aware_separator() {
        assert_eq!(number_lines("a\n\tb", 1, true), "1:a\n2:\tb");
        assert_eq!(number_lines("a\n\tb", 1, false), "1\ta\n2\t\tb");
        assert_eq!(number_lines("a\nb", 1, true), "1\ta\n2\tb");
    }

    #[test]
    fn not_text_detection() {
        assert_eq!(decode_text(b"abc").1, None);
        assert_eq!(decode_text(b"a\0c").1, Some(NotText::Nul));
        assert_eq!(decode_text(b"a\xffc").1, Some(NotText::NotUtf8));
        assert_eq!(decode_text(b"\xfe\xff\0a").1, Some(NotText::Utf16Be));
        assert_eq!(decode_text(b"\xff\xfea\0b\0").0, "ab");
    }
}
