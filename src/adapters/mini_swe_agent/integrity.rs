//! What a mini-swe-agent trajectory guarantees about itself, checked before anything is
//! replayed, so that a damaged kept prefix is refused (naming the line and the field) rather
//! than replayed as another conversation.
//!
//! - **Order**: the system message first, the task second; then each reply followed by what
//!   answers it (2.x: one `tool` message per call, or one `user` observation per text action,
//!   or a format error; 1.x: one `user` message, and the limits exceeded may end it); the
//!   `exit` message last. A tool message that answers no call is refused, and so is a user
//!   message that answers nothing and repeats the message before it (a user's own message
//!   between turns, an interruption or a boundary prompt, is kept).
//! - **The reply mini received** (`extra.response.choices[0].message`, written beside every
//!   reply of a LiteLLM model): the reply's content, tool calls and function call are those of
//!   the response. When one reply carries its response, all must.
//! - **Counts**: `info.model_stats.api_calls` is the number of model turns (replies, and 2.x
//!   format errors); a 2.x reply has one parsed action per tool call, naming its call.
//!
//! Timestamps are not compared: a replayed trajectory holds fresh observations between recorded
//! replies. What mini writes once and repeats nowhere cannot be checked: the system and task messages'
//! text, an observation's text (a replay regenerates it and compares), and the fields the
//! response does not repeat (`provider_specific_fields`).

use std::collections::BTreeSet;

use serde_json::Value;

use super::parse::{Ctx, Site};
use super::versions::Format;
use crate::error::TrajectoryError;

const ROLES: &[&str] = &["system", "user", "assistant", "tool", "exit"];

/// All checks of a walked trajectory (`turns`: the model turns the walk counted).
pub fn check(
    cx: &Ctx,
    doc: &Value,
    messages: &[Value],
    format: Format,
    sites: &[Site],
    turns: usize,
) -> Result<(), TrajectoryError> {
    order(cx, messages, format, sites)?;
    responses(cx, messages)?;
    counts(cx, doc, messages, turns)?;
    text_actions(cx, doc, messages)
}

fn role(m: &Value) -> &str {
    m["role"].as_str().unwrap_or("")
}

fn order(
    cx: &Ctx,
    messages: &[Value],
    format: Format,
    sites: &[Site],
) -> Result<(), TrajectoryError> {
    let answers: BTreeSet<usize> = sites
        .iter()
        .flat_map(|s| s.observations.iter().copied())
        .collect();
    for (i, m) in messages.iter().enumerate() {
        let r = role(m);
        let field = format!("messages[{i}].role");
        if !ROLES.contains(&r) {
            return Err(cx.err(
                &field,
                format!("unknown role `{r}` (mini writes {})", ROLES.join(", ")),
            ));
        }
        if m.get("content").is_none() {
            return Err(cx.err(
                &format!("messages[{i}].content"),
                "missing (mini writes every message's content)",
            ));
        }
        for k in ["provider_specific_fields", "function_call"] {
            if m.get(k).is_some_and(|v| !(v.is_null() || v.is_object())) {
                return Err(cx.err(&format!("messages[{i}].{k}"), "must be an object or null"));
            }
        }
        let want = match i {
            0 => Some("system"),
            1 => Some("user"),
            _ => None,
        };
        if let Some(w) = want {
            if r != w {
                return Err(cx.err(&field, format!("`{r}`, where mini writes the {w} message")));
            }
            continue;
        }
        let ok = match r {
            "system" => false,
            // A reply is answered before the next one (a reply left without its answer is
            // the end).
            "assistant" => {
                // 2.x keeps a reply with the actions parsed from it (its step runs them).
                if format == Format::V1_1
                    && !m.pointer("/extra/actions").is_some_and(Value::is_array)
                {
                    return Err(cx.err(
                        &format!("messages[{i}].extra.actions"),
                        "a 2.x reply is kept with its parsed actions (an array)",
                    ));
                }
                role(&messages[i - 1]) != "assistant"
            }
            "exit" => i + 1 == messages.len(),
            "tool" => answers.contains(&i),
            // An answer: 2.x's observation of a text action, 1.x's message after a reply; an
            // interruption (a format error; the limits exceeded, last); or a message of the
            // user's between two turns (an interruption in interactive mode, a boundary
            // prompt), which never repeats the message before it.
            _ => {
                answers.contains(&i)
                    || (format == Format::V1 && role(&messages[i - 1]) == "assistant")
                    || m.pointer("/extra/interrupt_type").is_some()
                    || i + 1 == messages.len()
                    || messages[i - 1] != *m
            }
        };
        if !ok {
            return Err(cx.err(
                &field,
                match r {
                    "exit" => "an `exit` message before the end".to_string(),
                    "system" => "a second system message".to_string(),
                    _ => format!("a `{r}` message that answers no reply before it"),
                },
            ));
        }
    }
    Ok(())
}

fn responses(cx: &Ctx, messages: &[Value]) -> Result<(), TrajectoryError> {
    let with = |m: &Value| m.pointer("/extra/response").is_some();
    let replies: Vec<usize> = (0..messages.len())
        .filter(|&i| role(&messages[i]) == "assistant")
        .collect();
    let carried = replies.iter().any(|&i| with(&messages[i]));
    for &i in &replies {
        let m = &messages[i];
        if !carried {
            break;
        }
        let Some(r) = m.pointer("/extra/response/choices/0/message") else {
            return Err(cx.err(
                &format!("messages[{i}].extra.response"),
                "missing, where the other replies carry the response mini received",
            ));
        };
        for k in ["content", "tool_calls", "function_call"] {
            let norm = |v: Option<&Value>| match v {
                None | Some(Value::Null) => Value::Null,
                Some(Value::Array(a)) if a.is_empty() => Value::Null,
                Some(v) => v.clone(),
            };
            if norm(m.get(k)) != norm(r.get(k)) {
                return Err(cx.err(
                    &format!("messages[{i}].{k}"),
                    format!("differs from the response mini received (extra.response.choices[0].message.{k})"),
                ));
            }
        }
    }
    Ok(())
}

fn counts(cx: &Ctx, doc: &Value, messages: &[Value], turns: usize) -> Result<(), TrajectoryError> {
    if let Some(calls) = doc.pointer("/info/model_stats/api_calls") {
        let n = calls
            .as_u64()
            .ok_or_else(|| cx.err("info.model_stats.api_calls", "must be a number"))?;
        if n != turns as u64 {
            return Err(cx.err(
                "info.model_stats.api_calls",
                format!("{n} model calls, but the messages hold {turns} model turns"),
            ));
        }
    }
    for (i, m) in messages.iter().enumerate() {
        let (Some(calls), Some(actions)) = (
            m.get("tool_calls")
                .and_then(Value::as_array)
                .filter(|a| !a.is_empty()),
            m.pointer("/extra/actions").and_then(Value::as_array),
        ) else {
            continue;
        };
        if calls.len() != actions.len() {
            return Err(cx.err(
                &format!("messages[{i}].extra.actions"),
                format!(
                    "{} parsed actions for {} tool calls",
                    actions.len(),
                    calls.len()
                ),
            ));
        }
        for (k, (c, a)) in calls.iter().zip(actions).enumerate() {
            if let Some(id) = a.get("tool_call_id") {
                if Some(id) != c.get("id") {
                    return Err(cx.err(
                        &format!("messages[{i}].extra.actions[{k}].tool_call_id"),
                        "is not the id of the tool call it parses",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// 2.x text-based replies: the parsed actions are what the model's `action_regex` finds in
/// the reply (stripped, as mini parses them).
fn text_actions(cx: &Ctx, doc: &Value, messages: &[Value]) -> Result<(), TrajectoryError> {
    let Some(pat) = doc
        .pointer("/info/config/model/action_regex")
        .and_then(Value::as_str)
    else {
        return Ok(());
    };
    // A pattern Rust's regex cannot read is left unchecked (Python's `re` is wider).
    let Ok(re) = super::parse::dotall(pat) else {
        return Ok(());
    };
    for (i, m) in messages.iter().enumerate() {
        if role(m) != "assistant"
            || m.get("tool_calls")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
        {
            continue;
        }
        let Some(actions) = m.pointer("/extra/actions").and_then(Value::as_array) else {
            continue;
        };
        let content = m.get("content").and_then(Value::as_str).unwrap_or("");
        let found: Vec<&str> = re
            .captures_iter(content)
            .map(|c| {
                c.get(1)
                    .or_else(|| c.get(0))
                    .map_or("", |g| g.as_str())
                    .trim()
            })
            .collect();
        let parsed: Vec<Option<&str>> = actions
            .iter()
            .map(|a| a.get("command").and_then(Value::as_str))
            .collect();
        if parsed != found.iter().map(|f| Some(*f)).collect::<Vec<_>>() {
            return Err(cx.err(
                &format!("messages[{i}].extra.actions"),
                "are not the actions the model's action_regex finds in the reply's content",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::adapters::mini_swe_agent::parse::parse_bytes;
    use serde_json::Value;
    use std::path::Path;

    fn load(name: &str) -> (std::path::PathBuf, Value) {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/mini-swe-agent")
            .join(name);
        let v = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        (p, v)
    }

    fn parse(p: &Path, v: &Value) -> Result<(), String> {
        let text = serde_json::to_string_pretty(v).unwrap();
        parse_bytes(p, text.as_bytes())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn genuine_trajectories_pass_and_damage_names_the_field() {
        let (p, v) = load("recorded/v2-tools/mini.traj.json");
        parse(&p, &v).unwrap();
        let mut content = v.clone();
        content["messages"][2]["content"] = "Another reply.".into();
        assert!(parse(&p, &content)
            .unwrap_err()
            .contains("messages[2].content"));
        let mut count = v.clone();
        count["info"]["model_stats"]["api_calls"] = 9.into();
        assert!(parse(&p, &count).unwrap_err().contains("api_calls"));
        let mut repeated = v.clone();
        let tool = repeated["messages"][3].clone();
        repeated["messages"].as_array_mut().unwrap().insert(4, tool);
        assert!(parse(&p, &repeated).is_err());
        let (p1, v1) = load("genuine-1.17.5/mini.traj.json");
        parse(&p1, &v1).unwrap();
        let mut dropped = v1.clone();
        dropped["messages"].as_array_mut().unwrap().remove(3);
        assert!(parse(&p1, &dropped)
            .unwrap_err()
            .contains("messages[3].role"));
        let (pt, vt) = load("recorded/v2-text/mini.traj.json");
        parse(&pt, &vt).unwrap();
        let mut action = vt.clone();
        action["messages"][2]["extra"]["actions"][0]["command"] = "ls".into();
        assert!(parse(&pt, &action).unwrap_err().contains("extra.actions"));
    }
}
