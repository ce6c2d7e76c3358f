//! Write (`rN` in `chunk-bqhgd24a.js`: `validateInput`, `S7r`, `_7r`, `eBe`, and its
//! `mapToolResultToToolResultBlockParam`).
//!
//! Texts:
//! - new file (or an existing *empty* one — Claude tests the old content for truthiness):
//!   `File created successfully at: <file_path> (file state is current in your context — no need to Read it back)`
//! - existing file: `The file <file_path> has been updated successfully. (file state is current in your context — no need to Read it back)`
//!
//! `<file_path>` is the path exactly as the model wrote it.
//!
//! Refusals (`<tool_use_error>`): an existing file not read first (when the read guard
//! applies: "File has not been read yet. Read it first before writing to it."), a file
//! changed on disk since it was read ("File has been modified since read, either by the
//! user or by a linter. Read it again before attempting to write it."), a directory, a
//! non-regular file, null bytes in the path.
//!
//! The content is written as sent (LF), in the file's existing encoding, keeping an
//! existing BOM; parent directories are created.

use super::read::decode_text;
use super::{io_error, mtime_ms, null_byte_check, req_str, Cx, FileReadState, Output, ReadGuard};
use crate::error::ExecError;
use serde_json::Value;
use std::path::Path;

const TOOL: &str = "Write";

/// `AIs` (`chunk-gn2pq0x1.js`).
pub(crate) const FILE_STATE_CURRENT: &str =
    " (file state is current in your context \u{2014} no need to Read it back)";
/// `w9t` (`chunk-qznjcrwt.js`).
pub(crate) const NOT_READ_YET: &str =
    "File has not been read yet. Read it first before writing to it.";
/// `z6n()` (`chunk-x476z89f.js`).
pub(crate) const MODIFIED_SINCE_READ: &str =
    "File has been modified since read, either by the user or by a linter. Read it again before attempting to write it.";

/// `fA`: drop a BOM, turn CRLF into LF.
pub(crate) fn normalize(text: &str) -> String {
    text.strip_prefix('\u{feff}')
        .unwrap_or(text)
        .replace("\r\n", "\n")
}

/// How an existing file is encoded, to write it back the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    Utf8,
    Utf16Le,
}

pub(crate) struct Existing {
    /// Decoded text (BOM kept, line ends as on disk).
    pub raw: String,
    pub encoding: Encoding,
    /// `zCn`: CRLF when CRLF line ends outnumber LF ones in the first 4096 characters.
    pub crlf: bool,
    pub not_text: Option<super::read::NotText>,
}

pub(crate) fn read_existing(path: &Path) -> std::io::Result<Option<Existing>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let encoding = if bytes.starts_with(&[0xFF, 0xFE]) {
        Encoding::Utf16Le
    } else {
        Encoding::Utf8
    };
    let (raw, not_text) = decode_text(&bytes);
    let raw = if encoding == Encoding::Utf16Le {
        format!("\u{feff}{raw}")
    } else {
        raw
    };
    let head: String = raw.chars().take(4096).collect();
    let (mut crlf_n, mut lf_n) = (0usize, 0usize);
    let hb = head.as_bytes();
    for (i, &b) in hb.iter().enumerate() {
        if b == b'\n' {
            if i > 0 && hb[i - 1] == b'\r' {
                crlf_n += 1;
            } else {
                lf_n += 1;
            }
        }
    }
    Ok(Some(Existing {
        raw,
        encoding,
        crlf: crlf_n > lf_n,
        not_text,
    }))
}

/// Write `text` (LF line ends, optional leading BOM) in `encoding`, converting line ends
/// to CRLF when asked; returns the new `floor(mtime)`.
pub(crate) fn write_text(
    path: &Path,
    text: &str,
    encoding: Encoding,
    crlf: bool,
) -> std::io::Result<i64> {
    let text = if crlf {
        text.replace("\r\n", "\n").replace('\n', "\r\n")
    } else {
        text.to_string()
    };
    let bytes: Vec<u8> = match encoding {
        Encoding::Utf8 => text.into_bytes(),
        Encoding::Utf16Le => {
            let body = text.strip_prefix('\u{feff}').unwrap_or(&text);
            let mut v = vec![0xFF, 0xFE];
            for u in body.encode_utf16() {
                v.extend_from_slice(&u.to_le_bytes());
            }
            v
        }
    };
    std::fs::write(path, bytes)?;
    mtime_ms(path)
}

/// `IJt`: keep the BOM of the previous content.
pub(crate) fn keep_bom(previous: Option<&str>, text: &str) -> String {
    if !text.is_empty()
        && previous.is_some_and(|p| p.starts_with('\u{feff}'))
        && !text.starts_with('\u{feff}')
    {
        format!("\u{feff}{text}")
    } else {
        text.to_string()
    }
}

pub(crate) fn run(input: &Value, cx: &mut Cx<'_>) -> Result<Output, ExecError> {
    let file_path = req_str(TOOL, input, "file_path")?;
    let content = req_str(TOOL, input, "content")?;
    if let Some(out) = null_byte_check(TOOL, &[("file_path", Some(file_path))]) {
        return Ok(out);
    }
    let path = cx.confine_write(file_path)?;

    // validateInput
    match std::fs::metadata(&path) {
        Ok(meta) => {
            if meta.is_dir() && cx.config.behaviour.write_directory_check {
                return Ok(Output::validation(format!(
                    "{file_path} is a directory, not a file. To create a file inside it, include the file name in file_path."
                )));
            }
            // Before the directory check a directory passes this one (devices, FIFOs and
            // sockets only) and meets the read guard.
            if !meta.is_file() && !meta.is_dir() {
                return Ok(Output::validation(format!(
                    "{file_path} exists but is not a regular file (a device, FIFO or socket). Write only creates or overwrites regular files."
                )));
            }
            let mtime = mtime_ms(&path).map_err(|e| io_error(TOOL, e))?;
            let enforce = cx.config.read_guard == ReadGuard::Enforce
                || !cx.config.behaviour.write_guard_follows_permissions;
            match cx.state.read_files.get(&path) {
                None => {
                    if enforce {
                        return Ok(Output::validation(NOT_READ_YET));
                    }
                }
                Some(st) if st.is_partial_view => {
                    if enforce {
                        return Ok(Output::validation(NOT_READ_YET));
                    }
                }
                Some(st) => {
                    if mtime > st.timestamp {
                        let same = st.is_full()
                            && read_existing(&path)
                                .ok()
                                .flatten()
                                .is_some_and(|e| normalize(&e.raw) == st.content);
                        if !same {
                            return Ok(Output::validation(MODIFIED_SINCE_READ));
                        }
                    }
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error(TOOL, e)),
    }

    // call
    let existing = read_existing(&path).map_err(|e| io_error(TOOL, e))?;
    if let Some(nt) = existing.as_ref().and_then(|e| e.not_text) {
        return Ok(Output::thrown(nt.write_refusal()));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io_error(TOOL, e))?;
    }
    let previous = existing.as_ref().map(|e| e.raw.as_str());
    let to_write = keep_bom(previous, content);
    let encoding = existing.as_ref().map_or(Encoding::Utf8, |e| e.encoding);
    let ts = write_text(&path, &to_write, encoding, false).map_err(|e| io_error(TOOL, e))?;
    cx.state.remember(
        path.clone(),
        FileReadState {
            content: normalize(&to_write),
            timestamp: ts,
            offset: None,
            limit: None,
            is_partial_view: false,
            content_not_in_model_context: false,
        },
    );
    let updated = existing.as_ref().is_some_and(|e| !e.raw.is_empty());
    let text = if updated {
        format!("The file {file_path} has been updated successfully.{FILE_STATE_CURRENT}")
    } else {
        format!("File created successfully at: {file_path}{FILE_STATE_CURRENT}")
    };
    let mut out = Output::ok(text);
    out.touched.push(cx.relative(&path));
    Ok(out)
}
