//! Words for why a request was refused: the first difference between what the bridge
//! expected and what the agent sent, short enough for one stderr line and the audit, precise
//! enough that a user can tell the cause without re-running anything. Also the redaction of
//! a refused request body before it is kept.

use serde_json::Value;

/// The longest excerpt of a value shown.
const EXCERPT: usize = 80;

/// A short, one-line excerpt of `s` in backticks (newlines shown as `⏎`).
pub fn excerpt(s: &str) -> String {
    let flat: String = s.chars().map(|c| if c == '\n' { '⏎' } else { c }).collect();
    let mut it = flat.chars();
    let head: String = it.by_ref().take(EXCERPT).collect();
    if it.next().is_some() {
        format!("`{head}…`")
    } else {
        format!("`{head}`")
    }
}

/// The first text of a message (a string content, or the first block with `text`).
fn first_text(m: &Value) -> Option<&str> {
    match m.get("content") {
        Some(Value::String(s)) => Some(s),
        Some(Value::Array(a)) => a.iter().find_map(|b| b.get("text").and_then(Value::as_str)),
        _ => m.get("text").and_then(Value::as_str),
    }
}

/// One message described: `role=system, text begins `…``, or its type for non-messages.
pub fn describe_message(m: &Value) -> String {
    let role = m.get("role").and_then(Value::as_str);
    let ty = m.get("type").and_then(Value::as_str);
    let mut parts = vec![];
    match (role, ty) {
        (Some(r), _) => parts.push(format!("role={r}")),
        (None, Some(t)) => parts.push(format!("type={t}")),
        _ => parts.push("an item without role or type".into()),
    }
    match first_text(m) {
        Some(t) => parts.push(format!("text begins {}", excerpt(t))),
        None => {
            if let Some(Value::Array(a)) = m.get("content") {
                let kinds: Vec<&str> = a
                    .iter()
                    .filter_map(|b| b.get("type").and_then(Value::as_str))
                    .collect();
                parts.push(format!("blocks [{}]", kinds.join(", ")));
            }
        }
    }
    parts.join(", ")
}

/// The messages after the boundary, described (the first two, and how many more).
pub fn describe_extra(extra: &[Value]) -> String {
    let mut s: Vec<String> = extra.iter().take(2).map(describe_message).collect();
    if extra.len() > 2 {
        s.push(format!("and {} more", extra.len() - 2));
    }
    s.join("; ")
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => excerpt(s),
        other => excerpt(&other.to_string()),
    }
}

/// The first place (JSON pointer) where `got` differs from `want`, with both values.
pub fn first_difference(want: &Value, got: &Value) -> String {
    fn walk(path: &mut String, want: &Value, got: &Value) -> Option<String> {
        match (want, got) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, va) in a {
                    let len = path.len();
                    path.push('/');
                    path.push_str(k);
                    let r = match b.get(k) {
                        None => Some(format!("{path} is missing (expected {})", show(va))),
                        Some(vb) => walk(path, va, vb),
                    };
                    if r.is_some() {
                        return r;
                    }
                    path.truncate(len);
                }
                b.keys()
                    .find(|k| !a.contains_key(*k))
                    .map(|k| format!("{path}/{k} is unexpected ({})", show(&b[k])))
            }
            (Value::Array(a), Value::Array(b)) => {
                for (i, (va, vb)) in a.iter().zip(b).enumerate() {
                    let len = path.len();
                    path.push_str(&format!("/{i}"));
                    if let Some(r) = walk(path, va, vb) {
                        return Some(r);
                    }
                    path.truncate(len);
                }
                (a.len() != b.len())
                    .then(|| format!("{path} has {} item(s), expected {}", b.len(), a.len()))
            }
            (a, b) if a == b => None,
            (a, b) => Some(format!(
                "{} is {}, expected {}",
                if path.is_empty() { "/" } else { path.as_str() },
                show(b),
                show(a)
            )),
        }
    }
    walk(&mut String::new(), want, got).unwrap_or_else(|| "no difference".into())
}

/// The request body with every secret replaced by `[redacted]` (as it appears in JSON text,
/// escaped). Secrets shorter than 4 characters are not searched (they would match anywhere).
pub fn redact(body: &[u8], secrets: &[&str]) -> Vec<u8> {
    let mut text = String::from_utf8_lossy(body).into_owned();
    for s in secrets.iter().filter(|s| s.chars().count() >= 4) {
        let escaped = serde_json::to_string(s).unwrap_or_default();
        let inner = &escaped[1..escaped.len().saturating_sub(1)];
        for needle in [*s, inner] {
            if !needle.is_empty() && text.contains(needle) {
                text = text.replace(needle, "[redacted]");
            }
        }
    }
    text.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_environment_block_after_the_boundary_is_named() {
        let extra = vec![
            json!({"role": "system", "content": [{"type": "text", "text": "<system-reminder>\n# Environment\nYou have been invoked"}]}),
        ];
        assert_eq!(
            describe_extra(&extra),
            "role=system, text begins `<system-reminder>⏎# Environment⏎You have been invoked`"
        );
    }

    #[test]
    fn first_difference_points_at_the_field() {
        let want = json!({"role": "user", "content": [{"type": "tool_result", "content": "a\nb"}]});
        let got = json!({"role": "user", "content": [{"type": "tool_result", "content": "a\nc"}]});
        assert_eq!(
            first_difference(&want, &got),
            "/content/0/content is `a⏎c`, expected `a⏎b`"
        );
        let got = json!({"role": "user", "content": [{"type": "tool_result", "content": "a\nb"}, {"type": "text", "text": "x"}]});
        assert_eq!(
            first_difference(&want, &got),
            "/content has 2 item(s), expected 1"
        );
        assert_eq!(first_difference(&want, &want), "no difference");
    }

    #[test]
    fn secrets_never_survive_redaction() {
        let body = serde_json::to_vec(&json!({"messages": [{"role": "user", "content": "say \"hi\"\nplease"}], "k": "sk-secret-1"})).unwrap();
        let out =
            String::from_utf8(redact(&body, &["say \"hi\"\nplease", "sk-secret-1", "ab"])).unwrap();
        assert!(
            !out.contains("sk-secret-1") && !out.contains("please"),
            "{out}"
        );
        assert_eq!(out.matches("[redacted]").count(), 2);
    }
}
