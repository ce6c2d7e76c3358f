//! Reading a rollout line by line in constant memory, and a cheap look at each line.
//!
//! [`LineReader`] yields one line at a time from any reader (with its 1-based number and byte
//! range, and the SHA-256 of everything read when asked), so neither the parse nor the
//! rebuild holds the file. [`Head`] deserializes only the few fields that decide what a
//! wrapped line is (its `type`, and its payload's `type`, `role`, `call_id`, `model`, `cwd`)
//! without allocating for the rest; a line the head cannot describe (a call, an output, a
//! field of an unexpected type, a duplicate key…) is parsed whole, so every decision about
//! the file is still made by the full parse's rules.

use serde::Deserialize;
use sha2::Digest;
use std::borrow::Cow;
use std::io::BufRead;

/// One line of the file, borrowed from the reader's buffer.
pub struct RawLine<'a> {
    /// 1-based line number.
    pub number: usize,
    /// Byte offset of the line's first byte.
    pub start: u64,
    /// Byte offset just past the line's newline (or the end of the file).
    pub end: u64,
    /// The line without its newline and without a trailing `\r`.
    pub text: &'a [u8],
    /// The file ended without a newline after this line.
    pub last_unterminated: bool,
}

/// Reads lines one at a time.
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    number: usize,
    offset: u64,
    sha256: Option<sha2::Sha256>,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(inner: R) -> Self {
        LineReader {
            inner,
            buf: Vec::with_capacity(64 * 1024),
            number: 0,
            offset: 0,
            sha256: None,
        }
    }

    /// Also compute the SHA-256 of every byte read.
    pub fn hashing(mut self) -> Self {
        self.sha256 = Some(sha2::Sha256::new());
        self
    }

    /// The next line, or `None` at the end of the file.
    pub fn next_line(&mut self) -> std::io::Result<Option<RawLine<'_>>> {
        self.buf.clear();
        let n = self.inner.read_until(b'\n', &mut self.buf)?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(h) = self.sha256.as_mut() {
            h.update(&self.buf);
        }
        self.number += 1;
        let start = self.offset;
        self.offset += n as u64;
        let terminated = self.buf.last() == Some(&b'\n');
        let mut text = &self.buf[..];
        if terminated {
            text = &text[..text.len() - 1];
        }
        if let Some(t) = text.strip_suffix(b"\r") {
            text = t;
        }
        Ok(Some(RawLine {
            number: self.number,
            start,
            end: self.offset,
            text,
            last_unterminated: !terminated,
        }))
    }

    /// `sha256:<hex>` of everything read so far (when [`Self::hashing`]).
    pub fn sha256(self) -> Option<String> {
        self.sha256
            .map(|h| format!("sha256:{}", hex::encode(h.finalize())))
    }
}

/// Whether a line is blank (spaces, tabs, `\r`, `\n` only).
pub fn is_blank(text: &[u8]) -> bool {
    text.iter().all(|b| b.is_ascii_whitespace())
}

/// The fields of a wrapped line (`{timestamp, type, payload}`) that decide its role.
#[derive(Deserialize)]
pub struct Head<'a> {
    #[serde(rename = "type", borrow, default)]
    pub ty: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub payload: Option<PayloadHead<'a>>,
}

/// The fields of a payload that decide its role.
#[derive(Deserialize)]
pub struct PayloadHead<'a> {
    #[serde(rename = "type", borrow, default)]
    pub ty: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub role: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub call_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub cwd: Option<Cow<'a, str>>,
}

impl<'a> Head<'a> {
    /// The head of a JSON object line; `None` when the line is not an object or a field the
    /// head reads has another type (the caller then parses the line whole).
    pub fn of(text: &'a [u8]) -> Option<Head<'a>> {
        // A derived struct also accepts a JSON array: only objects are looked at here.
        let first = text.iter().find(|b| !b.is_ascii_whitespace())?;
        if *first != b'{' {
            return None;
        }
        serde_json::from_slice(text).ok()
    }

    /// The line type (`session_meta`, `response_item`, `event_msg`, …).
    pub fn line_type(&self) -> &str {
        self.ty.as_deref().unwrap_or("")
    }

    /// The payload's `type`.
    pub fn payload_type(&self) -> Option<&str> {
        self.payload.as_ref()?.ty.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_carry_numbers_ranges_and_the_file_hash() {
        let src = b"{\"a\":1}\r\n\n{\"b\":2}";
        let mut r = LineReader::new(&src[..]).hashing();
        let mut seen = vec![];
        while let Some(l) = r.next_line().unwrap() {
            seen.push((
                l.number,
                l.start,
                l.end,
                String::from_utf8(l.text.to_vec()).unwrap(),
                l.last_unterminated,
            ));
        }
        assert_eq!(
            seen,
            vec![
                (1, 0, 9, "{\"a\":1}".to_string(), false),
                (2, 9, 10, String::new(), false),
                (3, 10, 17, "{\"b\":2}".to_string(), true),
            ]
        );
        assert_eq!(r.sha256().unwrap(), crate::digest::sha256(src));
    }

    #[test]
    fn the_head_declines_what_it_cannot_describe() {
        let h = Head::of(br#"{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"x":"\u00e9"}]}}"#).unwrap();
        assert_eq!(h.line_type(), "response_item");
        assert_eq!(h.payload_type(), Some("message"));
        assert_eq!(h.payload.unwrap().role.as_deref(), Some("assistant"));
        // Not an object, a wrong-typed field, a duplicate key: parsed whole by the caller.
        assert!(Head::of(br#"["type","x"]"#).is_none());
        assert!(Head::of(br#"{"type":7}"#).is_none());
        assert!(Head::of(br#"{"type":"a","type":"b"}"#).is_none());
        assert!(Head::of(br#"{"type":"response_item","payload":{"role":1}}"#).is_none());
        assert!(Head::of(br#"{"type":"response_item"} x"#).is_none());
    }
}
