//! Canonical JSON and digests (the one place for both).
//!
//! * Digests: `blake3:<hex>` for everything pvisor compares itself, `sha256:<hex>` for what
//!   users compare with other tools (source trajectory, boundary prompt).
//! * Canonical JSON = object keys sorted by UTF-16 code units (JavaScript's default sort),
//!   no whitespace, strings escaped like `JSON.stringify` (non-ASCII kept as is). For the
//!   ASCII keys of the model protocols this is byte-identical to Python's
//!   `json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`.

use serde_json::Value;
use sha2::Digest;

/// `blake3:<hex>` of bytes.
pub fn blake3(bytes: &[u8]) -> String {
    format!("blake3:{}", blake3::hash(bytes).to_hex())
}

/// `sha256:<hex>` of bytes.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// Canonical JSON text of `v`.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_canonical(&map[k.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::String(s) => write_string(s, out),
        other => out.push_str(&other.to_string()),
    }
}

fn write_string(s: &str, out: &mut String) {
    // serde_json escapes exactly like JSON.stringify: \" \\ \b \f \n \r \t, other control
    // characters as \u00xx, everything else verbatim.
    out.push_str(&serde_json::to_string(s).expect("strings always serialize"));
}

/// `blake3:<hex>` of the canonical JSON of a value.
pub fn json_digest(v: &Value) -> String {
    blake3(canonical_json(v).as_bytes())
}

/// `blake3:<hex>` of one (already canonical) conversation item.
pub fn message_digest(m: &Value) -> String {
    json_digest(m)
}

/// `blake3:<hex>` of a conversation prefix (a list of canonical items).
pub fn prefix_digest(messages: &[Value]) -> String {
    blake3(canonical_json(&Value::Array(messages.to_vec())).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorted_compact() {
        let v = json!({"b": 1, "a": [true, null, {"d": "x\ny", "c": 2.5}], "é": "ü"});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":[true,null,{"c":2.5,"d":"x\ny"}],"b":1,"é":"ü"}"#
        );
    }

    #[test]
    fn keys_sort_by_utf16_like_javascript() {
        // U+10000 (surrogates D800 DC00) sorts before U+FF61 in UTF-16 code units, after it
        // in UTF-8 bytes (F0… > EF…).
        let v = json!({"\u{ff61}": 2, "\u{10000}": 1});
        assert_eq!(canonical_json(&v), "{\"\u{10000}\":1,\"\u{ff61}\":2}");
    }

    #[test]
    fn control_characters_escape_like_javascript() {
        assert_eq!(
            canonical_json(&json!("\u{1}\t/\u{7f}")),
            "\"\\u0001\\t/\u{7f}\""
        );
    }
}
