//! The script a [scripted model server](super::server) plays: a list of assistant turns.
//!
//! # Format (JSON)
//!
//! ```json
//! {
//!   "name": "five-step",
//!   "turns": [
//!     {"text": "I'll create a.txt.",
//!      "tool_calls": [{"name": "Bash", "input": {"command": "echo hi > a.txt && ls"}}]},
//!     {"thinking": "Both reads are independent.",
//!      "tool_calls": [{"name": "Read", "input": {"file_path": "${CWD}/notes.txt"}},
//!                     {"name": "Bash", "input": {"command": "cat a.txt"}}]},
//!     {"text": "Done."}
//!   ],
//!   "side_text": "Scripted session",
//!   "side": [{"match": "isNewTopic", "text": "{\"isNewTopic\": true, \"title\": \"Scripted\"}"}],
//!   "no_tools_is_side": true
//! }
//! ```
//!
//! * `turns[i]` is the assistant reply played when the request's history already holds `i`
//!   assistant turns (see [`super::server`]). Each turn has an optional `thinking`, an optional
//!   `text` and zero or more `tool_calls`, emitted in that order.
//! * A tool call has a `name` and an `input` (alias `arguments`, the JSON object the tool gets).
//!   `"custom": true` with a string `input` makes it a free-form tool call (OpenAI Responses
//!   `custom_tool_call`, e.g. Codex's `apply_patch`).
//! * [`Turn::stop_reason`]: `tool_use` when the turn has tool calls, else `end_turn`.
//! * When the script is exhausted the server plays [`Turn::exhausted`]: the plain text
//!   `(script exhausted)` with `end_turn`, so that the agent stops cleanly.
//! * Side requests (title/topic generation, summaries) never consume a turn. A request is a
//!   side request when its body contains one of the `side[].match` substrings, or (with
//!   `no_tools_is_side`, the default) when it offers no tools. It is answered with the text of
//!   the first matching rule, else `side_text`.
//! * Strings may hold `${VAR}` placeholders, filled by [`Script::substitute`] (e.g. `${CWD}` for
//!   absolute paths in the workspace).
//!
//! The earlier Python server's keys are accepted as aliases: `aux` (= `side`),
//! `aux_default_text` (= `side_text`), `no_tools_is_aux` (= `no_tools_is_side`).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// Text of the turn played once the script has no turn left.
pub const EXHAUSTED_TEXT: &str = "(script exhausted)";

/// Default answer to a side request when no `side` rule matches and no `side_text` is given.
pub const DEFAULT_SIDE_TEXT: &str = "Scripted session";

/// A whole script: the assistant turns plus the rules for side requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// A label, for logs only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Model ids listed by `GET /v1/models` (informational; answers echo the request's model).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// The assistant turns, in order.
    pub turns: Vec<Turn>,
    /// Answer to a side request that matches no `side` rule.
    #[serde(
        default,
        alias = "aux_default_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub side_text: Option<String>,
    /// Substring rules that classify a request as a side request, with their answers.
    #[serde(default, alias = "aux", skip_serializing_if = "Vec::is_empty")]
    pub side: Vec<SideRule>,
    /// Treat a request that offers no tools as a side request (default `true`). Set it to
    /// `false` for agents whose real requests carry no `tools` key.
    #[serde(default = "default_true", alias = "no_tools_is_aux")]
    pub no_tools_is_side: bool,
}

fn default_true() -> bool {
    true
}

/// One side-request rule: a request whose raw body contains `match` is answered with `text`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SideRule {
    #[serde(rename = "match")]
    pub matches: String,
    pub text: String,
}

/// One assistant turn: optional thinking, optional text, zero or more tool calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Answer this turn with an HTTP error instead of a reply (to exercise an agent's and
    /// pvisor's handling of model failures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ScriptedError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallSpec>,
}

/// A scripted HTTP error: the status and an error body in the request's protocol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedError {
    pub status: u16,
    /// The error type (`invalid_request_error`, `rate_limit_error`, `api_error`…).
    #[serde(default = "default_error_type", rename = "type")]
    pub kind: String,
    #[serde(default = "default_error_message")]
    pub message: String,
}

fn default_error_type() -> String {
    "invalid_request_error".into()
}

fn default_error_message() -> String {
    "scripted error".into()
}

/// One scripted tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallSpec {
    pub name: String,
    /// The tool input: a JSON object (function tools) or a string (custom tools).
    #[serde(default = "empty_object", alias = "arguments")]
    pub input: Value,
    /// A free-form (custom) tool call whose `input` is a string.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub custom: bool,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// Why a turn ends, in Anthropic terms (OpenAI Chat: `tool_calls` / `stop`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    ToolUse,
    EndTurn,
}

impl StopReason {
    /// The Anthropic `stop_reason` string.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::ToolUse => "tool_use",
            StopReason::EndTurn => "end_turn",
        }
    }
}

/// Errors loading a script.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("cannot read script {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid script{}: {source}", .path.as_deref().map(|p| format!(" {p}")).unwrap_or_default())]
    Json {
        path: Option<String>,
        #[source]
        source: serde_json::Error,
    },
}

impl Script {
    /// A script with these turns and default side-request rules.
    pub fn new(turns: Vec<Turn>) -> Self {
        Script {
            name: None,
            models: Vec::new(),
            turns,
            side_text: None,
            side: Vec::new(),
            no_tools_is_side: true,
        }
    }

    /// Parse a script from JSON text.
    pub fn from_json_str(text: &str) -> Result<Self, ScriptError> {
        serde_json::from_str(text).map_err(|source| ScriptError::Json { path: None, source })
    }

    /// Read and parse a script file.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Self, ScriptError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Io {
            path: path.display().to_string(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| ScriptError::Json {
            path: Some(path.display().to_string()),
            source,
        })
    }

    /// A copy with every `${NAME}` placeholder in every string (turns, side rules) replaced by
    /// its value. Unknown placeholders are left as they are.
    pub fn substitute(&self, vars: &[(&str, &str)]) -> Script {
        let value = serde_json::to_value(self).expect("script serializes");
        let value = substitute_value(value, vars);
        serde_json::from_value(value).expect("substituted script deserializes")
    }

    /// The turn played at `index`, or [`Turn::exhausted`] past the end. The flag tells
    /// whether the script was exhausted.
    pub fn turn(&self, index: usize) -> (Turn, bool) {
        match self.turns.get(index) {
            Some(t) => (t.clone(), false),
            None => (Turn::exhausted(), true),
        }
    }

    /// The answer for a side request whose raw body is `raw`, if it matches a `side` rule.
    pub fn side_rule_text(&self, raw: &str) -> Option<&str> {
        self.side
            .iter()
            .find(|r| raw.contains(&r.matches))
            .map(|r| r.text.as_str())
    }

    /// The answer to a side request that matches no rule.
    pub fn default_side_text(&self) -> &str {
        self.side_text.as_deref().unwrap_or(DEFAULT_SIDE_TEXT)
    }
}

fn substitute_value(v: Value, vars: &[(&str, &str)]) -> Value {
    match v {
        Value::String(s) => Value::String(substitute_str(&s, vars)),
        Value::Array(a) => Value::Array(a.into_iter().map(|x| substitute_value(x, vars)).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, x)| (k, substitute_value(x, vars)))
                .collect(),
        ),
        other => other,
    }
}

/// Replace every `${NAME}` of `vars` in `s`.
pub fn substitute_str(s: &str, vars: &[(&str, &str)]) -> String {
    let mut out = s.to_string();
    for (name, value) in vars {
        out = out.replace(&format!("${{{name}}}"), value);
    }
    out
}

impl Turn {
    /// A turn with only text.
    pub fn text(text: impl Into<String>) -> Self {
        Turn {
            text: Some(text.into()),
            ..Default::default()
        }
    }

    /// The turn played once the script is exhausted.
    pub fn exhausted() -> Self {
        Turn::text(EXHAUSTED_TEXT)
    }

    /// `tool_use` when the turn has tool calls, else `end_turn`.
    pub fn stop_reason(&self) -> StopReason {
        if self.tool_calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        }
    }
}

impl ToolCallSpec {
    /// A function tool call with a JSON input.
    pub fn new(name: impl Into<String>, input: Value) -> Self {
        ToolCallSpec {
            name: name.into(),
            input,
            custom: false,
        }
    }

    /// The input as a JSON object, for protocols whose tool calls take objects only (a string
    /// input becomes `{"input": "<string>"}`).
    pub fn input_object(&self) -> Value {
        match &self.input {
            Value::Object(_) => self.input.clone(),
            Value::Null => empty_object(),
            other => serde_json::json!({ "input": other }),
        }
    }

    /// The input as the text of a free-form tool call (a string input verbatim, else JSON).
    pub fn input_text(&self) -> String {
        match &self.input {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

/// Deterministic ids for the content a turn produces. They depend only on the turn index
/// (and the call index), so a retried or resumed request gets the same ids, and ids never
/// repeat within one conversation. Side requests use the tag `side` instead of `t003`.
pub mod ids {
    /// The tag of a turn: `t003`.
    pub fn tag(turn: usize) -> String {
        format!("t{turn:03}")
    }
    /// Anthropic `tool_use` id: `toolu_pv_t003_0`.
    pub fn anthropic_tool(turn: usize, call: usize) -> String {
        anthropic_tool_tag(&tag(turn), call)
    }
    /// Anthropic message id: `msg_pv_t003`.
    pub fn anthropic_message(turn: usize) -> String {
        message_tag(&tag(turn))
    }
    /// OpenAI `call_id` (Responses and Chat Completions): `call_pv_t003_0`.
    pub fn openai_call(turn: usize, call: usize) -> String {
        openai_call_tag(&tag(turn), call)
    }
    /// Responses item id of a function/custom tool call: `fc_pv_t003_0` / `ctc_pv_t003_0`.
    pub fn responses_call_item(turn: usize, call: usize, custom: bool) -> String {
        responses_call_item_tag(&tag(turn), call, custom)
    }
    /// Responses message item id: `msg_pv_t003` (same as the Anthropic message id).
    pub fn responses_message(turn: usize) -> String {
        message_tag(&tag(turn))
    }
    /// Responses reasoning item id: `rs_pv_t003`.
    pub fn responses_reasoning(turn: usize) -> String {
        reasoning_tag(&tag(turn))
    }
    /// Responses response id: `resp_pv_t003`.
    pub fn response(turn: usize) -> String {
        response_tag(&tag(turn))
    }
    /// Chat Completions id: `chatcmpl-pv-t003`.
    pub fn chat_completion(turn: usize) -> String {
        chat_completion_tag(&tag(turn))
    }
    /// Fake thinking signature of a turn: `pvsig_t003` (opaque to clients, sent back verbatim).
    pub fn thinking_signature(turn: usize) -> String {
        signature_tag(&tag(turn))
    }

    pub(crate) fn anthropic_tool_tag(tag: &str, call: usize) -> String {
        format!("toolu_pv_{tag}_{call}")
    }
    pub(crate) fn message_tag(tag: &str) -> String {
        format!("msg_pv_{tag}")
    }
    pub(crate) fn openai_call_tag(tag: &str, call: usize) -> String {
        format!("call_pv_{tag}_{call}")
    }
    pub(crate) fn responses_call_item_tag(tag: &str, call: usize, custom: bool) -> String {
        if custom {
            format!("ctc_pv_{tag}_{call}")
        } else {
            format!("fc_pv_{tag}_{call}")
        }
    }
    pub(crate) fn reasoning_tag(tag: &str) -> String {
        format!("rs_pv_{tag}")
    }
    pub(crate) fn response_tag(tag: &str) -> String {
        format!("resp_pv_{tag}")
    }
    pub(crate) fn chat_completion_tag(tag: &str) -> String {
        format!("chatcmpl-pv-{tag}")
    }
    pub(crate) fn signature_tag(tag: &str) -> String {
        format!("pvsig_{tag}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_new_and_legacy_keys() {
        let s = Script::from_json_str(
            r#"{"turns":[{"text":"a","tool_calls":[{"name":"Bash","arguments":{"command":"ls ${CWD}"}}]},{"text":"b"}],
                "aux":[{"match":"isNewTopic","text":"T"}],"aux_default_text":"D","no_tools_is_aux":false}"#,
        )
        .unwrap();
        assert_eq!(s.turns.len(), 2);
        assert_eq!(s.turns[0].stop_reason(), StopReason::ToolUse);
        assert_eq!(s.turns[1].stop_reason(), StopReason::EndTurn);
        assert!(!s.no_tools_is_side);
        assert_eq!(s.side_rule_text("x isNewTopic y"), Some("T"));
        assert_eq!(s.default_side_text(), "D");
        let s = s.substitute(&[("CWD", "/w")]);
        assert_eq!(s.turns[0].tool_calls[0].input["command"], "ls /w");
        assert_eq!(s.turn(5), (Turn::exhausted(), true));
    }

    #[test]
    fn rejects_unknown_keys() {
        assert!(Script::from_json_str(r#"{"turns":[{"txt":"a"}]}"#).is_err());
    }
}
