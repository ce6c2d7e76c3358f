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

/// The SHA-256 of bytes handed over as they are read, computed on another thread (given
/// blocks of [`Sha256Behind::BLOCK`] bytes), so that a reader does not wait for it; on one
/// thread when none can be started. `finish` gives `sha256:<hex>`, as [`sha256`] does.
pub struct Sha256Behind {
    block: Vec<u8>,
    worker: Option<(
        std::sync::mpsc::SyncSender<Vec<u8>>,
        std::thread::JoinHandle<sha2::Sha256>,
    )>,
    inline: sha2::Sha256,
}

impl Sha256Behind {
    const BLOCK: usize = 256 * 1024;

    pub fn new() -> Sha256Behind {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(4);
        let worker = std::thread::Builder::new()
            .name("sha256".into())
            .spawn(move || {
                let mut h = sha2::Sha256::new();
                for block in rx {
                    h.update(&block);
                }
                h
            })
            .ok()
            .map(|handle| (tx, handle));
        Sha256Behind {
            block: Vec::with_capacity(if worker.is_some() { Self::BLOCK } else { 0 }),
            worker,
            inline: sha2::Sha256::new(),
        }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        if self.worker.is_none() {
            self.inline.update(bytes);
            return;
        }
        self.block.extend_from_slice(bytes);
        if self.block.len() >= Self::BLOCK {
            self.hand_over();
        }
    }

    fn hand_over(&mut self) {
        let block = std::mem::replace(&mut self.block, Vec::with_capacity(Self::BLOCK));
        if let Some((tx, _)) = &self.worker {
            if let Err(std::sync::mpsc::SendError(block)) = tx.send(block) {
                // The thread ends early only if hashing panicked: its panic is raised here.
                if let Some((_, handle)) = self.worker.take() {
                    self.inline = handle.join().expect("SHA-256 hashing does not panic");
                }
                self.inline.update(&block);
            }
        }
    }

    /// `sha256:<hex>` of every byte given.
    pub fn finish(mut self) -> String {
        if !self.block.is_empty() {
            self.hand_over();
        }
        let h = match self.worker.take() {
            Some((tx, handle)) => {
                drop(tx);
                handle.join().expect("SHA-256 hashing does not panic")
            }
            None => self.inline,
        };
        format!("sha256:{}", hex::encode(h.finalize()))
    }
}

impl Default for Sha256Behind {
    fn default() -> Self {
        Sha256Behind::new()
    }
}

/// Canonical JSON text of `v`.
pub fn canonical_json(v: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(v, &mut out).expect("writing to memory cannot fail");
    String::from_utf8(out).expect("JSON text of a Value is UTF-8")
}

/// Writes the canonical JSON of `v` to `out` as it goes (no intermediate text: a digest
/// streams it into the hasher).
fn write_canonical<W: std::io::Write + ?Sized>(v: &Value, out: &mut W) -> std::io::Result<()> {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.write_all(b"{")?;
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                // serde_json escapes exactly like JSON.stringify: \" \\ \b \f \n \r \t,
                // other control characters as \u00xx, everything else verbatim.
                serde_json::to_writer(&mut *out, k)?;
                out.write_all(b":")?;
                write_canonical(&map[k.as_str()], out)?;
            }
            out.write_all(b"}")
        }
        Value::Array(items) => write_canonical_list(items, out),
        scalar => Ok(serde_json::to_writer(&mut *out, scalar)?),
    }
}

/// Writes the canonical JSON of a list of values (a JSON array).
fn write_canonical_list<W: std::io::Write + ?Sized>(
    items: &[Value],
    out: &mut W,
) -> std::io::Result<()> {
    out.write_all(b"[")?;
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_canonical(item, out)?;
    }
    out.write_all(b"]")
}

/// `blake3:<hex>` of what `write` writes, hashed as it is written (no intermediate text).
fn streamed_blake3(write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>) -> String {
    let mut hasher = blake3::Hasher::new();
    {
        // Buffered: the hasher is fastest on large updates, the writer makes many small ones.
        let mut out = std::io::BufWriter::with_capacity(16 * 1024, &mut hasher);
        write(&mut out)
            .and_then(|()| std::io::Write::flush(&mut out))
            .expect("hashing cannot fail");
    }
    format!("blake3:{}", hasher.finalize().to_hex())
}

/// `blake3:<hex>` of the canonical JSON of a value.
pub fn json_digest(v: &Value) -> String {
    streamed_blake3(|out| write_canonical(v, out))
}

/// Whether two values have the same canonical JSON text, found without writing it: objects
/// are equal with the same keys (canonical JSON sorts them), numbers only with the same text
/// (`1` and `1.0`, `0.0` and `-0.0` differ, as their texts do).
pub fn canonically_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => {
            x.is_f64() == y.is_f64()
                && x.as_u64() == y.as_u64()
                && x.as_i64() == y.as_i64()
                && x.as_f64().map(f64::to_bits) == y.as_f64().map(f64::to_bits)
        }
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| canonically_equal(v, w))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| canonically_equal(v, w)))
        }
        _ => false,
    }
}

/// `blake3:<hex>` of one conversation message (its canonical JSON).
pub fn message_digest(m: &Value) -> String {
    json_digest(m)
}

/// `blake3:<hex>` of a conversation prefix (a list of canonical items): the digest of the
/// list's canonical JSON, written item by item without copying the list.
pub fn prefix_digest(messages: &[Value]) -> String {
    streamed_blake3(|out| write_canonical_list(messages, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Small values from a small alphabet, so that equal pairs are frequent.
    fn small_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            prop::sample::select(vec![
                json!(0),
                json!(1),
                json!(-1),
                json!(1.0),
                json!(0.0),
                json!(-0.0),
                json!(u64::MAX),
                json!(1.5e300),
            ]),
            "[ab\"\u{1}é]{0,2}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::vec(("[ab]{1}", inner), 0..3)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn canonical_equality_is_equality_of_the_canonical_texts(a in small_value(), b in small_value()) {
            proptest::prop_assert_eq!(
                canonically_equal(&a, &b),
                canonical_json(&a) == canonical_json(&b),
                "{} / {}", canonical_json(&a), canonical_json(&b)
            );
            proptest::prop_assert!(canonically_equal(&a, &a));
        }
    }

    #[test]
    fn canonical_equality_ignores_key_order_only() {
        let a = json!({"a": 1, "b": [1.0, "x"]});
        let b: Value = serde_json::from_str(r#"{"b": [1.0, "x"], "a": 1}"#).unwrap();
        assert!(canonically_equal(&a, &b));
        assert!(!canonically_equal(&a, &json!({"a": 1, "b": [1, "x"]})));
        assert!(!canonically_equal(&json!(0.0), &json!(-0.0)));
        assert!(!canonically_equal(&a, &json!({"a": 1})));
    }

    #[test]
    fn streamed_digests_equal_the_digest_of_the_canonical_text() {
        let v = json!({"b": [1.5, -0.0, 1e300, "q\"\u{1}é"], "a": {"z": null, "y": true}});
        assert_eq!(json_digest(&v), blake3(canonical_json(&v).as_bytes()));
        let list = vec![v.clone(), json!("x"), json!([])];
        assert_eq!(
            prefix_digest(&list),
            blake3(canonical_json(&Value::Array(list.clone())).as_bytes())
        );
        assert_eq!(prefix_digest(&[]), blake3(b"[]"));
    }

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
