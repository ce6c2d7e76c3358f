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
