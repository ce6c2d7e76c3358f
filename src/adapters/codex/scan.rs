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
    sha256: Option<crate::digest::Sha256Behind>,
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
        self.sha256 = Some(crate::digest::Sha256Behind::new());
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
        self.sha256.map(crate::digest::Sha256Behind::finish)
    }
}

/// Whether the whole parse of a line could refuse what the head's skipping of the fields it
/// does not read accepts (serde_json skips those without reading them): a number beyond
/// `f64` ("number out of range"), a `\u` escape of a surrogate (a lone one cannot be read
/// into a string), or nesting deep enough for the recursion limit. Such a line is parsed
/// whole. Codex writes none of these; a damaged file may hold them.
pub fn whole_parse_may_differ(text: &[u8]) -> bool {
    let mut depth = 0usize;
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                i += 1;
                loop {
                    let Some(k) = memchr::memchr2(b'"', b'\\', text.get(i..).unwrap_or(&[])) else {
                        // Unterminated: both parses refuse it.
                        return false;
                    };
                    i += k;
                    if text[i] == b'"' {
                        i += 1;
                        break;
                    }
                    if text.get(i + 1) == Some(&b'u')
                        && matches!(text.get(i + 2), Some(b'd' | b'D'))
                        && matches!(
                            text.get(i + 3),
                            Some(b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
                        )
                    {
                        return true;
                    }
                    i += 2;
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < text.len()
                    && matches!(text[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    i += 1;
                }
                let number = &text[start..i];
                if (number.len() > 300 || number.iter().any(|b| matches!(b, b'e' | b'E')))
                    && !std::str::from_utf8(number)
                        .ok()
                        .and_then(|s| s.parse::<f64>().ok())
                        .is_some_and(f64::is_finite)
                {
                    return true;
                }
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > 100 {
                    return true;
                }
                i += 1;
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            _ => i += 1,
        }
    }
    false
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
    pub payload: Option<Obj<PayloadHead<'a>>>,
    /// Codex 0.149 numbers every line.
    #[serde(default)]
    pub ordinal: Option<u64>,
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
    /// (`item_completed`) The turn, and the item as far as the cross-check reads it.
    #[serde(borrow, default)]
    pub turn_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub item: Option<Obj<ItemHead<'a>>>,
}

/// The fields of a completed item the cross-check reads ([`super::integrity`]).
#[derive(Deserialize)]
pub struct ItemHead<'a> {
    #[serde(rename = "type", borrow, default)]
    pub ty: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub content: Option<Vec<Obj<PartHead<'a>>>>,
    #[serde(borrow, default)]
    pub summary_text: Option<Vec<Option<Cow<'a, str>>>>,
    #[serde(borrow, default)]
    pub command: Option<Vec<Option<Cow<'a, str>>>>,
}

/// A content part: its `type` and `text`.
#[derive(Deserialize)]
pub struct PartHead<'a> {
    #[serde(rename = "type", borrow, default)]
    pub ty: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub text: Option<Cow<'a, str>>,
}

impl<'a> Head<'a> {
    /// The head of a JSON object line; `None` when the line is not an object or a field the
    /// head reads has another type (the caller then parses the line whole).
    pub fn of(text: &'a [u8]) -> Option<Head<'a>> {
        // A derived struct also accepts a JSON array: only objects are looked at here.
        let first = text.iter().find(|b| !b.is_ascii_whitespace())?;
        if *first != b'{' || whole_parse_may_differ(text) {
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

/// A `T` read from a JSON object only. A derived struct also reads a JSON array, its fields by
/// position, where the whole parse finds no key: every struct under a line's head or typed
/// reading is wrapped in this, so that such a line goes to the whole parse.
pub struct Obj<T>(pub T);

impl<T> std::ops::Deref for Obj<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for V<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData)).map(Obj)
    }
}

/// A string, borrowed from the line when it holds no escape.
pub struct BStr<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for BStr<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(s))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(s.to_string()))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(s))
            }
        }
        d.deserialize_str(V).map(BStr)
    }
}

impl BStr<'_> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A field that may be absent but, when present, is a string (not `null`).
fn present_str<'de: 'a, 'a, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<BStr<'a>>, D::Error> {
    BStr::deserialize(d).map(Some)
}

/// A part of a message's content or of a reasoning summary, as the cross-check accepts it: a
/// string `type`, and a `text` that is absent or a string.
#[derive(Deserialize)]
pub struct PartTyped<'a> {
    #[serde(rename = "type", borrow)]
    pub ty: BStr<'a>,
    #[serde(default, borrow, deserialize_with = "present_str")]
    pub text: Option<BStr<'a>>,
}

/// `internal_chat_message_metadata_passthrough`, as far as it is read.
#[derive(Deserialize)]
pub struct Passthrough<'a> {
    #[serde(default, borrow)]
    pub turn_id: Option<BStr<'a>>,
}

/// A message item with exactly the keys Codex 0.149.0 writes and the types the cross-check
/// accepts ([`super::integrity`], `shape`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageTyped<'a> {
    #[serde(rename = "type", borrow)]
    pub ty: BStr<'a>,
    #[serde(default, borrow)]
    pub id: Option<BStr<'a>>,
    #[serde(borrow)]
    pub role: BStr<'a>,
    #[serde(borrow)]
    pub content: Vec<Obj<PartTyped<'a>>>,
    #[serde(default, rename = "end_turn")]
    _end_turn: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "phase")]
    _phase: Option<serde::de::IgnoredAny>,
    #[serde(default, borrow, rename = "internal_chat_message_metadata_passthrough")]
    pub passthrough: Option<Obj<Passthrough<'a>>>,
}

/// A reasoning item, likewise.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReasoningTyped<'a> {
    #[serde(rename = "type", borrow)]
    pub ty: BStr<'a>,
    #[serde(default, borrow)]
    pub id: Option<BStr<'a>>,
    #[serde(borrow)]
    pub summary: Vec<Obj<PartTyped<'a>>>,
    /// Read only for its shape: null, or parts like the summary's.
    #[serde(default, borrow, rename = "content")]
    _content: Option<Vec<Obj<PartTyped<'a>>>>,
    #[serde(default, borrow, rename = "encrypted_content")]
    _encrypted_content: Option<BStr<'a>>,
    #[serde(default, rename = "internal_chat_message_metadata_passthrough")]
    _passthrough: Option<serde::de::IgnoredAny>,
}

/// A wrapped line `{"type":"response_item","payload":…}` read into a typed payload.
#[derive(Deserialize)]
pub struct ItemLine<'a, P> {
    #[serde(rename = "type", borrow)]
    pub ty: BStr<'a>,
    #[serde(default)]
    pub ordinal: Option<u64>,
    pub payload: Obj<P>,
}

/// A message or a reasoning item's line, typed.
pub enum ModelItem<'a> {
    Message(ItemLine<'a, MessageTyped<'a>>),
    Reasoning(ItemLine<'a, ReasoningTyped<'a>>),
}

impl<'a> ModelItem<'a> {
    /// The line as a `response_item` of type `ty` (`message` or `reasoning`) that the whole
    /// parse would accept as it is: `None` for anything else (another line type or payload
    /// type, a key Codex does not write, a field of another type, a duplicate key, what only
    /// the whole parse refuses), which the caller reads whole.
    pub fn of(text: &'a [u8], ty: &str) -> Option<ModelItem<'a>> {
        let first = text.iter().find(|b| !b.is_ascii_whitespace())?;
        if *first != b'{' || whole_parse_may_differ(text) {
            return None;
        }
        let item = match ty {
            "message" => ModelItem::Message(serde_json::from_slice(text).ok()?),
            "reasoning" => ModelItem::Reasoning(serde_json::from_slice(text).ok()?),
            _ => return None,
        };
        let (line_ty, payload_ty) = match &item {
            ModelItem::Message(l) => (l.ty.as_str(), l.payload.ty.as_str()),
            ModelItem::Reasoning(l) => (l.ty.as_str(), l.payload.ty.as_str()),
        };
        (line_ty == "response_item" && payload_ty == ty).then_some(item)
    }

    pub fn ordinal(&self) -> Option<u64> {
        match self {
            ModelItem::Message(l) => l.ordinal,
            ModelItem::Reasoning(l) => l.ordinal,
        }
    }

    /// The message's role (none for reasoning).
    pub fn role(&self) -> Option<&str> {
        match self {
            ModelItem::Message(l) => Some(l.payload.role.as_str()),
            ModelItem::Reasoning(_) => None,
        }
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

    proptest::proptest! {
        /// Any bytes: the look-ahead never panics, and a head is only given for a line the
        /// whole parse reads too.
        #[test]
        fn heads_only_of_lines_the_whole_parse_reads(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200), tail in "[\\\\\"{}\\[\\]0-9eE.+-]{0,12}") {
            let mut line = br#"{"type":"event_msg","payload":{"type":"x","v":"#.to_vec();
            line.extend_from_slice(&bytes);
            line.extend_from_slice(tail.as_bytes());
            let _ = whole_parse_may_differ(&line);
            if Head::of(&line).is_some() {
                proptest::prop_assert!(serde_json::from_slice::<serde_json::Value>(&line).is_ok());
            }
        }
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
        // What the whole parse refuses though a skipping scan accepts it.
        assert!(Head::of(br#"{"type":"event_msg","n":1e999}"#).is_none());
        assert!(Head::of(br#"{"type":"event_msg","s":"\ud800 alone"}"#).is_none());
        let deep = format!(
            r#"{{"type":"event_msg","x":{}1{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert!(Head::of(deep.as_bytes()).is_none());
        // Numbers in range, uuids and escaped backslashes are not mistaken for them.
        assert!(
            Head::of(br#"{"type":"event_msg","n":1.5e300,"id":"7e91-85a6","p":"a\\ud800"}"#)
                .is_some()
        );
    }
}
