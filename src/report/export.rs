//! JSON Lines export: one event per line, `{"seq","at_ms","at","kind","event","data"}`.
//!
//! Text/bytes rule (as ripgrep's JSON output): a value that is valid UTF-8 is written as a
//! JSON string; bytes that are not (only the payload of an event kind unknown to this
//! version) are written as `{"bytes": "<standard base64>"}`, and `data` is then
//! `{"bytes": …}` instead of an object of fields. The content a `blob_stored` event carries
//! follows the same rule: `{"blob", "len", "text"}`, or `{"blob", "len", "bytes": base64}`
//! when it is not UTF-8.

use base64::Engine;
use journal_format::Event;

use crate::journal::StoredEvent;

pub fn rfc3339(ms: u64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Write the export line of `e` and its newline: the text of [`export_line`], serialized
/// straight from the event (a large event is not first built as a JSON value).
pub fn write_export_line(w: &mut impl std::io::Write, e: &StoredEvent) -> std::io::Result<()> {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        seq: u64,
        at_ms: u64,
        at: String,
        kind: u16,
        event: &'static str,
        data: journal_format::event::EventBody<'a>,
    }
    match &e.event {
        Event::Unknown { .. } | Event::BlobStored(_) => {
            serde_json::to_writer(&mut *w, &export_line(e))?
        }
        other => serde_json::to_writer(
            &mut *w,
            &Line {
                seq: e.seq,
                at_ms: e.at_ms,
                at: rfc3339(e.at_ms),
                kind: other.kind(),
                event: other.name(),
                data: other.body(),
            },
        )?,
    }
    w.write_all(b"\n")
}

pub fn export_line(e: &StoredEvent) -> serde_json::Value {
    let data = match &e.event {
        Event::Unknown { payload, .. } => {
            serde_json::json!({ "bytes": base64::engine::general_purpose::STANDARD.encode(payload) })
        }
        Event::BlobStored(b) => {
            let mut v = serde_json::json!({ "blob": b.blob, "len": b.bytes.len() });
            match std::str::from_utf8(&b.bytes) {
                Ok(t) => v["text"] = t.into(),
                Err(_) => {
                    v["bytes"] = base64::engine::general_purpose::STANDARD
                        .encode(&b.bytes)
                        .into()
                }
            }
            v
        }
        other => other.body_json(),
    };
    serde_json::json!({
        "seq": e.seq,
        "at_ms": e.at_ms,
        "at": rfc3339(e.at_ms),
        "kind": e.event.kind(),
        "event": e.event.name(),
        "data": data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line written straight from the event is the text of its JSON value, for every kind
    /// of the golden journals (unknown kinds and carried blobs included).
    #[test]
    fn written_lines_are_the_values_text() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("journal-format/vectors");
        let mut kinds = std::collections::BTreeSet::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("pvj") {
                continue;
            }
            let _ = crate::journal::read_events(&path, |e| {
                let mut written = vec![];
                write_export_line(&mut written, &e).unwrap();
                assert_eq!(
                    String::from_utf8(written).unwrap(),
                    format!("{}\n", export_line(&e)),
                    "{} seq {}",
                    path.display(),
                    e.seq
                );
                kinds.insert(e.event.kind());
                Ok(())
            });
        }
        assert!(kinds.len() >= 20, "{kinds:?}");
    }
}
