//! Canonical forms shared by rebuild (which computes the expected prefix) and the bridge
//! (which checks requests against it).
//!
//! * Canonical JSON = object keys sorted (by UTF-16 code units, like JavaScript's default
//!   sort), no whitespace, strings escaped like `JSON.stringify` (non-ASCII kept as is).
//!   For the ASCII keys of the model protocols this is byte-identical to Python's
//!   `json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`.
//! * Canonical Anthropic message = the message with every `cache_control` key removed
//!   (recursively) and a message-level string `content` turned into one text block
//!   (`"s"` → `[{"type":"text","text":"s"}]`). Claude Code 2.1.332 sends the same message
//!   either way depending on where its cache breakpoint sits; the API treats them the same.
//!   This is also the form Claude Code hashes in its own `api-request` records
//!   (`sha256` of the canonical JSON), which rebuild uses as a self-check.

use serde_json::Value;

/// Canonical JSON text of `v` (sorted keys, compact).
pub fn to_canonical_string(v: &Value) -> String {
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

/// Remove every `cache_control` key, at any depth.
pub fn strip_cache_control(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("cache_control");
            for (_, child) in map.iter_mut() {
                strip_cache_control(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_cache_control),
        _ => {}
    }
}

/// The canonical form of one Anthropic Messages `messages[]` entry.
pub fn canonical_anthropic_message(m: &Value) -> Value {
    let mut m = m.clone();
    strip_cache_control(&mut m);
    if let Some(obj) = m.as_object_mut() {
        if let Some(Value::String(s)) = obj.get("content") {
            let block = serde_json::json!([{"type": "text", "text": s}]);
            obj.insert("content".into(), block);
        }
    }
    m
}

/// `blake3:<hex>` of bytes.
pub fn blake3_digest(bytes: &[u8]) -> String {
    format!("blake3:{}", blake3::hash(bytes).to_hex())
}

/// `blake3:<hex>` of the canonical JSON of one (already canonical) message.
pub fn message_digest(m: &Value) -> String {
    blake3_digest(to_canonical_string(m).as_bytes())
}

/// `blake3:<hex>` of the canonical JSON of a message list (the prefix digest).
pub fn prefix_digest(messages: &[Value]) -> String {
    blake3_digest(to_canonical_string(&Value::Array(messages.to_vec())).as_bytes())
}

/// Hex SHA-256 of the canonical JSON: the hash Claude Code 2.1.332 writes into its
/// `api-request` records (`tail`) and `api-request-blob` records (`hash`).
pub fn claude_message_sha256(m: &Value) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(to_canonical_string(m).as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorted_compact() {
        let v = json!({"b": 1, "a": [true, null, {"d": "x\ny", "c": 2.5}], "é": "ü"});
        assert_eq!(
            to_canonical_string(&v),
            r#"{"a":[true,null,{"c":2.5,"d":"x\ny"}],"b":1,"é":"ü"}"#
        );
    }

    #[test]
    fn message_canonical_form() {
        let a = json!({"role": "system", "content": "hello"});
        let b = json!({"role": "system", "content": [{"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}]});
        assert_eq!(
            canonical_anthropic_message(&a),
            canonical_anthropic_message(&b)
        );
        assert_eq!(
            message_digest(&canonical_anthropic_message(&a)),
            message_digest(&canonical_anthropic_message(&b))
        );
    }

    #[test]
    fn control_characters_escape_like_javascript() {
        assert_eq!(
            to_canonical_string(&json!("\u{1}\t/\u{7f}")),
            "\"\\u0001\\t/\u{7f}\""
        );
    }
}
