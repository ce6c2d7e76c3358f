//! The JavaScript semantics OpenCode's outputs depend on: `JSON.stringify` (key order with
//! integer-like keys first, number formatting, optional indentation), `String.prototype.trim`,
//! UTF-16 lengths, and the `$` patterns of `String.prototype.replaceAll`.

use serde_json::Value;

/// `JSON.stringify(v)` (compact) or `JSON.stringify(v, null, indent)`.
pub fn stringify(v: &Value, indent: usize) -> String {
    let mut out = String::new();
    write_value(&mut out, v, indent, 0);
    out
}

/// Is `k` an array index in JavaScript's sense (`0`, `7`, `42`: no sign, no leading zero,
/// below 2^32 − 1)? Such keys come first in an object's own-key order, ascending.
fn is_index(k: &str) -> bool {
    if k.is_empty() || (k.len() > 1 && k.starts_with('0')) || !k.bytes().all(|b| b.is_ascii_digit())
    {
        return false;
    }
    k.parse::<u64>().is_ok_and(|n| n < u32::MAX as u64)
}

fn write_value(out: &mut String, v: &Value, indent: usize, depth: usize) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => out.push_str(&Value::String(s.clone()).to_string()),
        Value::Array(a) => {
            if a.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent, depth + 1);
                write_value(out, x, indent, depth + 1);
            }
            newline(out, indent, depth);
            out.push(']');
        }
        Value::Object(m) => {
            if m.is_empty() {
                out.push_str("{}");
                return;
            }
            let mut keys: Vec<&String> = m.keys().filter(|k| is_index(k)).collect();
            keys.sort_by_key(|k| k.parse::<u64>().unwrap_or(0));
            keys.extend(m.keys().filter(|k| !is_index(k)));
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent, depth + 1);
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                if indent > 0 {
                    out.push(' ');
                }
                write_value(out, &m[k.as_str()], indent, depth + 1);
            }
            newline(out, indent, depth);
            out.push('}');
        }
    }
}

fn newline(out: &mut String, indent: usize, depth: usize) {
    if indent > 0 {
        out.push('\n');
        out.push_str(&" ".repeat(indent * depth));
    }
}

/// A number as JavaScript prints it: integers plainly, others in the shortest form that
/// reads back, with an exponent below 1e-6 and from 1e21 on (`1e+21`, `1.5e-7`).
pub fn number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let x = n.as_f64().unwrap_or(0.0);
    js_double(x)
}

fn js_double(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    if !x.is_finite() {
        return "null".into();
    }
    // Shortest round-trip digits and exponent from Rust's `{:e}` (`1.5e-7`).
    let e = format!("{:e}", x.abs());
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let k = digits.len() as i32;
    let n = exp + 1; // the decimal point sits after n digits
    let sign = if x < 0.0 { "-" } else { "" };
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let es = if e >= 0 {
            format!("+{e}")
        } else {
            e.to_string()
        };
        if k == 1 {
            format!("{digits}e{es}")
        } else {
            format!("{}.{}e{es}", &digits[..1], &digits[1..])
        }
    };
    format!("{sign}{body}")
}

/// JavaScript's whitespace and line terminators (what `trim` and `\s` match).
pub fn is_js_space(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}

/// `String.prototype.trim`.
pub fn trim(s: &str) -> &str {
    s.trim_matches(is_js_space)
}

/// `s.length`: UTF-16 code units.
pub fn len16(s: &str) -> usize {
    s.encode_utf16().count()
}

/// `s.substring(0, n)` in UTF-16 units (a cut inside a surrogate pair keeps the whole char
/// out, as no lone surrogate can live in a Rust string).
pub fn prefix16(s: &str, n: usize) -> &str {
    let mut units = 0;
    for (i, c) in s.char_indices() {
        let w = c.len_utf16();
        if units + w > n {
            return &s[..i];
        }
        units += w;
    }
    s
}

/// The replacement text of `replaceAll(pattern, replacement)` for one match (`$$`, `$&`,
/// `` $` ``, `$'`; a string pattern has no groups, so `$1` stays as written).
pub fn substitution(replacement: &str, matched: &str, before: &str, after: &str) -> String {
    let mut out = String::with_capacity(replacement.len());
    let mut it = replacement.chars().peekable();
    while let Some(c) = it.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        match it.peek() {
            Some('$') => {
                out.push('$');
                it.next();
            }
            Some('&') => {
                out.push_str(matched);
                it.next();
            }
            Some('`') => {
                out.push_str(before);
                it.next();
            }
            Some('\'') => {
                out.push_str(after);
                it.next();
            }
            _ => out.push('$'),
        }
    }
    out
}

/// `haystack.replaceAll(needle, replacement)` with a string needle.
pub fn replace_all(haystack: &str, needle: &str, replacement: &str) -> String {
    if needle.is_empty() {
        return haystack.to_string();
    }
    let mut out = String::new();
    let mut last = 0;
    for (i, m) in haystack.match_indices(needle) {
        out.push_str(&haystack[last..i]);
        out.push_str(&substitution(
            replacement,
            m,
            &haystack[..i],
            &haystack[i + m.len()..],
        ));
        last = i + m.len();
    }
    out.push_str(&haystack[last..]);
    out
}

/// `JSON.stringify` of a string: the same escapes as serde_json (`\"`, `\\`, `\b`, `\f`,
/// `\n`, `\r`, `\t`, other controls as `\u00xx`).
pub fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stringify_follows_javascript() {
        let v: Value =
            serde_json::from_str(r#"{"b":1,"10":"x","a":[1.5,1e-7,1e21,2.0],"2":null}"#).unwrap();
        assert_eq!(
            stringify(&v, 0),
            r#"{"2":null,"10":"x","b":1,"a":[1.5,1e-7,1e+21,2]}"#
        );
        let todos = json!([{"content": "first", "status": "in_progress"}]);
        assert_eq!(
            stringify(&todos, 2),
            "[\n  {\n    \"content\": \"first\",\n    \"status\": \"in_progress\"\n  }\n]"
        );
        assert_eq!(stringify(&json!([]), 2), "[]");
        assert_eq!(js_double(0.1), "0.1");
        assert_eq!(js_double(123456.789), "123456.789");
        assert_eq!(js_double(-0.000001), "-0.000001");
        assert_eq!(js_double(1e-7), "1e-7");
    }

    #[test]
    fn replace_all_interprets_dollar_patterns() {
        assert_eq!(replace_all("a-b-a", "a", "[$&]"), "[a]-b-[a]");
        assert_eq!(replace_all("x", "x", "$$1"), "$1");
        assert_eq!(replace_all("x", "x", "$1"), "$1");
    }

    #[test]
    fn utf16_helpers() {
        assert_eq!(len16("a😀"), 3);
        assert_eq!(prefix16("a😀b", 2), "a");
        assert_eq!(trim("\u{feff} x \n"), "x");
    }
}
