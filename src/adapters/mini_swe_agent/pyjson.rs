//! Python's `json.dumps(value, indent=2)` (the way mini writes its trajectory), so that a
//! rebuilt trajectory is byte-identical where its messages are: `ensure_ascii` escapes
//! (`\uXXXX`, surrogate pairs beyond the BMP), `", "`-free item separators with newlines,
//! `": "` after keys, `[]`/`{}` for empty containers, and floats as Python's `repr` writes
//! them (shortest round-trip digits; exponent form below 1e-4 and from 1e16, as `1e-05`,
//! `1e+16`). Key order is the document's (serde_json's `preserve_order`).

use serde_json::{Number, Value};

/// `value` as `json.dumps(value, indent=2)` writes it.
pub fn dumps(value: &Value) -> String {
    let mut out = String::new();
    write(&mut out, value, 0);
    out
}

fn indent(out: &mut String, level: usize) {
    out.push('\n');
    for _ in 0..level * 2 {
        out.push(' ');
    }
}

fn write(out: &mut String, v: &Value, level: usize) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => string(out, s),
        Value::Array(a) if a.is_empty() => out.push_str("[]"),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(out, level + 1);
                write(out, x, level + 1);
            }
            indent(out, level);
            out.push(']');
        }
        Value::Object(o) if o.is_empty() => out.push_str("{}"),
        Value::Object(o) => {
            out.push('{');
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(out, level + 1);
                string(out, k);
                out.push_str(": ");
                write(out, x, level + 1);
            }
            indent(out, level);
            out.push('}');
        }
    }
}

/// A JSON string with Python's `ensure_ascii` escapes.
fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

/// A number as Python writes it (integers as they are; floats as `repr(float)`).
fn number(n: &Number) -> String {
    if n.is_f64() {
        n.as_f64().map(float_repr).unwrap_or_else(|| n.to_string())
    } else {
        n.to_string()
    }
}

/// Python's `repr(x)` of a finite float.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // Shortest round-trip digits and the decimal exponent: `d.ddde<exp>`.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if x < 0.0 { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let n = digits.len() as i32;
        let body = if exp < 0 {
            format!("0.{}{}", "0".repeat((-exp - 1) as usize), digits)
        } else if exp + 1 >= n {
            format!("{}{}.0", digits, "0".repeat((exp + 1 - n) as usize))
        } else {
            let (a, b) = digits.split_at((exp + 1) as usize);
            format!("{a}.{b}")
        };
        format!("{sign}{body}")
    } else {
        let (first, rest) = digits.split_at(1);
        let m = if rest.is_empty() {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        let es = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{es}{:02}", exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_as_python_repr() {
        for (x, py) in [
            (0.006071999999999999, "0.006071999999999999"),
            (1796185092.3357065, "1796185092.3357065"),
            (1e-05, "1e-05"),
            (0.0001, "0.0001"),
            (9.81e-05, "9.81e-05"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (5.0, "5.0"),
            (-2.5, "-2.5"),
            (123.456, "123.456"),
            (1.5e300, "1.5e+300"),
            (0.1, "0.1"),
        ] {
            assert_eq!(float_repr(x), py, "{x}");
        }
    }

    #[test]
    fn documents_as_json_dumps_indent_2() {
        let v: Value = serde_json::from_str(
            r#"{"info": {"a": [], "b": {}, "c": [1, 2.0, null, true]}, "s": "é😀\u007f'<x>\"\\\n\t\u0001"}"#,
        )
        .unwrap();
        assert_eq!(
            dumps(&v),
            "{\n  \"info\": {\n    \"a\": [],\n    \"b\": {},\n    \"c\": [\n      1,\n      2.0,\n      null,\n      true\n    ]\n  },\n  \"s\": \"\\u00e9\\ud83d\\ude00\\u007f'<x>\\\"\\\\\\n\\t\\u0001\"\n}"
        );
        assert_eq!(dumps(&json!([])), "[]");
    }
}
