//! What an OpenHands conversation store guarantees about itself, checked before anything is
//! replayed, so that a damaged kept prefix is refused (naming the line and the field) rather
//! than replayed as another conversation.
//!
//! - **The chain**: every event names the one before it (`parent_id`, written by the SDK
//!   1.34 for every event after the first), no id twice, and timestamps never go back: an
//!   event dropped, repeated or moved breaks it.
//! - **Calls**: an `ActionEvent`'s `tool_call` (the call the model sent) names its
//!   `tool_call_id` and `tool_name`, and the arguments it sent are the parsed action's (an
//!   argument the action lacks must be `null`: actions forbid other fields); a
//!   result (`ObservationEvent`, `AgentErrorEvent`, `UserRejectObservation`) answers an
//!   earlier action (`action_id`) with that action's call id and tool.
//! - **Responses**: the LLM responses the events come from (`llm_response_id`) are among
//!   those the conversation's statistics count, in the same order, each once.
//!
//! What the SDK writes once and repeats nowhere cannot be checked: the system prompt, the
//! texts of messages and thoughts, and the argument of a call neither the action nor the event
//! repeats (`security_risk`, which the event records as its analyzer's verdict).

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::error::TrajectoryError;

/// The kinds of event that answer a call.
const RESULTS: &[&str] = &[
    "ObservationEvent",
    "AgentErrorEvent",
    "UserRejectObservation",
];

fn kind(v: &Value) -> &str {
    v.get("kind").and_then(Value::as_str).unwrap_or("")
}

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// All checks of the events (`lines`: each event's line in the canonical form).
pub fn check(
    path: &Path,
    base_state: &Value,
    events: &[Value],
    lines: &[usize],
) -> Result<(), TrajectoryError> {
    let err = |i: usize, field: &str, m: String| TrajectoryError::new(path, lines[i], field, m);
    let chained = events.iter().any(|e| e.get("parent_id").is_some());
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        let id = str_of(e, "id").unwrap_or("");
        if let Some(j) = seen.insert(id, i) {
            return Err(err(
                i,
                "event.id",
                format!("event {id} appears twice (line {})", lines[j]),
            ));
        }
        if chained && i > 0 {
            let before = str_of(&events[i - 1], "id").unwrap_or("");
            if str_of(e, "parent_id") != Some(before) {
                return Err(err(
                    i,
                    "event.parent_id",
                    format!("the event before it is {before}: an event is missing, repeated or out of order"),
                ));
            }
        }
        if i > 0 {
            if let (Some(a), Some(b)) =
                (str_of(&events[i - 1], "timestamp"), str_of(e, "timestamp"))
            {
                if b < a {
                    return Err(err(
                        i,
                        "event.timestamp",
                        format!("{b} is earlier than the event before it ({a})"),
                    ));
                }
            }
        }
        match kind(e) {
            "ActionEvent" => action(e).map_err(|(f, m)| err(i, f, m))?,
            "MessageEvent" => {
                let m = e.get("llm_message");
                let ok = m.is_some_and(|m| {
                    m.get("role").is_some_and(Value::is_string)
                        && m.get("content")
                            .is_some_and(|c| c.is_array() || c.is_string())
                });
                if !ok {
                    return Err(err(
                        i,
                        "event.llm_message",
                        "a message event needs its llm_message with a role and a content".into(),
                    ));
                }
            }
            k if RESULTS.contains(&k) => {
                if let Some(a) = str_of(e, "action_id") {
                    let Some(&j) = seen
                        .get(a)
                        .filter(|&&j| j < i && kind(&events[j]) == "ActionEvent")
                    else {
                        return Err(err(
                            i,
                            "event.action_id",
                            format!("answers action {a}, which is not an earlier action"),
                        ));
                    };
                    for f in ["tool_call_id", "tool_name"] {
                        if e.get(f) != events[j].get(f) {
                            return Err(err(
                                i,
                                &format!("event.{f}"),
                                format!(
                                    "differs from that of the action it answers (line {})",
                                    lines[j]
                                ),
                            ));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    responses(base_state, events).map_err(|(i, m)| err(i, "event.llm_response_id", m))
}

/// An action against the call the model sent.
fn action(e: &Value) -> Result<(), (&'static str, String)> {
    let Some(call) = e.get("tool_call").filter(|c| !c.is_null()) else {
        return Ok(());
    };
    if call.get("id") != e.get("tool_call_id") {
        return Err((
            "event.tool_call_id",
            "is not the id of the tool call (tool_call.id)".into(),
        ));
    }
    if call.get("name") != e.get("tool_name") {
        return Err((
            "event.tool_name",
            "is not the tool the call names (tool_call.name)".into(),
        ));
    }
    // The SDK made the action from these arguments: they were a JSON object.
    let args = match call.get("arguments") {
        Some(Value::String(a)) => serde_json::from_str::<Value>(a).ok(),
        Some(v @ Value::Object(_)) => Some(v.clone()),
        _ => None,
    };
    let Some(args) = args.as_ref().and_then(Value::as_object) else {
        return Err((
            "event.tool_call.arguments",
            "the arguments of a call the SDK parsed into an action must be a JSON object".into(),
        ));
    };
    let Some(action) = e.get("action").and_then(Value::as_object) else {
        return Ok(());
    };
    for (k, sent) in args {
        // The SDK moves the call's summary onto the event.
        let parsed = match k.as_str() {
            "summary" => e.get("summary"),
            _ => action.get(k),
        };
        let Some(parsed) = parsed else {
            // An action has no field beyond its schema (pydantic `extra="forbid"`) and leaves
            // out only those that are `null`; `security_risk` is the event's own verdict.
            if sent.is_null() || k == "security_risk" {
                continue;
            }
            return Err((
                "event.tool_call.arguments",
                format!("`{k}` is not a field of the action the SDK made from the call"),
            ));
        };
        if !same_argument(sent, parsed) {
            return Err((
                "event.action",
                format!("`{k}` differs from the argument the model sent (tool_call.arguments)"),
            ));
        }
    }
    Ok(())
}

/// The SDK parses arguments leniently (pydantic): a number sent as a string, or a value
/// written to a field of another type, is the same argument.
fn same_argument(sent: &Value, parsed: &Value) -> bool {
    match (sent, parsed) {
        (a, b) if a == b => true,
        (Value::String(s), Value::Number(n)) | (Value::Number(n), Value::String(s)) => {
            s.trim() == n.to_string()
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => false,
    }
}

/// The events' responses in order, against the statistics' list of responses.
fn responses(base_state: &Value, events: &[Value]) -> Result<(), (usize, String)> {
    let Some(counted) = base_state
        .pointer("/stats/usage_to_metrics/agent/response_latencies")
        .and_then(Value::as_array)
    else {
        return Ok(());
    };
    let counted: Vec<&str> = counted
        .iter()
        .filter_map(|r| str_of(r, "response_id"))
        .collect();
    let mut at = 0;
    let mut last: Option<&str> = None;
    for (i, e) in events.iter().enumerate() {
        let Some(r) = str_of(e, "llm_response_id") else {
            continue;
        };
        if last == Some(r) {
            continue;
        }
        last = Some(r);
        match counted[at..].iter().position(|c| *c == r) {
            Some(k) => at += k + 1,
            None => {
                return Err((
                    i,
                    format!("response {r} is not among the responses the conversation's statistics count after the one before it"),
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::adapters::openhands::{parse::parse_bytes, store};
    use serde_json::Value;
    use std::path::Path;

    fn parse(p: &Path, lines: &[Value]) -> Result<(), String> {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        parse_bytes(p, text.as_bytes())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_genuine_conversation_passes_and_damage_names_the_field() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/openhands/recorded/mixed/native-final");
        let bytes = store::read(&p).unwrap();
        let lines: Vec<Value> = String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        parse(&p, &lines).unwrap();
        let action = lines
            .iter()
            .position(|e| e["kind"] == "ActionEvent")
            .unwrap();
        let mut dropped = lines.clone();
        dropped.remove(action);
        assert!(parse(&p, &dropped).unwrap_err().contains("event.parent_id"));
        let mut args = lines.clone();
        args[action]["action"]["command"] = "ls".into();
        assert!(parse(&p, &args).unwrap_err().contains("event.action"));
        // An argument renamed in the call the model sent: no field of the action has it.
        let mut renamed = lines.clone();
        let sent = renamed[action]["tool_call"]["arguments"]
            .as_str()
            .unwrap()
            .replacen("\"summary\"", "\"xummary\"", 1);
        assert!(sent.contains("xummary"));
        renamed[action]["tool_call"]["arguments"] = sent.into();
        let e = parse(&p, &renamed).unwrap_err();
        assert!(
            e.contains("tool_call.arguments") && e.contains("xummary"),
            "{e}"
        );
        let result = lines
            .iter()
            .position(|e| e["kind"] == "ObservationEvent")
            .unwrap();
        let mut tool = lines.clone();
        tool[result]["tool_name"] = "file_editor".into();
        assert!(parse(&p, &tool).unwrap_err().contains("event.tool_name"));
        let mut stats = lines.clone();
        stats[0]["stats"]["usage_to_metrics"]["agent"]["response_latencies"]
            .as_array_mut()
            .unwrap()
            .remove(0);
        assert!(parse(&p, &stats).unwrap_err().contains("llm_response_id"));
    }
}
