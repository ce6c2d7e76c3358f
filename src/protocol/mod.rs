//! The model wire protocols, one type end to end: what an agent speaks to the bridge, what
//! the upstream speaks, what the scripted model server answers, and what a request names.
//!
//! Each protocol owns its routing (which path is a model request), the conversation list
//! of a request and its canonical form (what the bridge compares with the expected
//! prefix), what makes a request a *main* model request, how a tool call shows in an
//! answer (streamed or not), the shape of an error and of the budget stop, the upstream
//! auth header, and the boundary-prompt message. Agent specifics (what a resume inserts)
//! are the adapters' (`crate::kit::RequestRules`).

pub mod anthropic;
pub mod chat;
pub mod responses;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A model wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// Anthropic Messages (`POST /v1/messages`): Claude Code, Pi.
    Anthropic,
    /// OpenAI Responses (`POST /v1/responses`, the `input` item list): Codex CLI.
    #[serde(alias = "responses")]
    OpenaiResponses,
    /// OpenAI Chat Completions (`POST /v1/chat/completions`): OpenCode, litellm-based agents.
    #[serde(alias = "chat")]
    OpenaiChat,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [
        Protocol::Anthropic,
        Protocol::OpenaiResponses,
        Protocol::OpenaiChat,
    ];

    /// The name used in flags, requests and the journal.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Anthropic => "anthropic",
            Protocol::OpenaiResponses => "openai-responses",
            Protocol::OpenaiChat => "openai-chat",
        }
    }

    pub fn from_name(s: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The model route, after any `/v1` prefix and without the query.
    pub fn model_route(self) -> &'static str {
        match self {
            Protocol::Anthropic => "/messages",
            Protocol::OpenaiResponses => "/responses",
            Protocol::OpenaiChat => "/chat/completions",
        }
    }

    /// The protocol whose model route a request path names (`/v1/messages?beta=true`).
    pub fn of_route(route: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.model_route() == route)
    }

    /// The key of the conversation list in a request body.
    pub fn list_key(self) -> &'static str {
        match self {
            Protocol::Anthropic | Protocol::OpenaiChat => "messages",
            Protocol::OpenaiResponses => "input",
        }
    }

    /// Whether a model request is a main request of the agent's conversation (side
    /// requests: titles, token counts, tool-less auxiliary calls).
    pub fn is_main(self, body: &Value) -> bool {
        match self {
            Protocol::Anthropic => anthropic::is_main(body),
            Protocol::OpenaiResponses => responses::is_main(body),
            Protocol::OpenaiChat => chat::is_main(body),
        }
    }

    /// The canonical form of one conversation item, as compared with the expected prefix.
    pub fn canonical_message(self, m: &Value) -> Value {
        match self {
            Protocol::Anthropic => anthropic::canonical_message(m),
            Protocol::OpenaiResponses => m.clone(),
            Protocol::OpenaiChat => chat::canonical_message(m),
        }
    }

    /// One user message carrying `text`, as inserted after O′N for a boundary prompt.
    pub fn user_message(self, text: &str) -> Value {
        match self {
            Protocol::Anthropic => {
                serde_json::json!({"role": "user", "content": [{"type": "text", "text": text}]})
            }
            Protocol::OpenaiResponses => {
                serde_json::json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
            }
            Protocol::OpenaiChat => serde_json::json!({"role": "user", "content": text}),
        }
    }

    /// An error body in this protocol's shape.
    pub fn error_body(self, kind: &str, message: &str) -> Value {
        match self {
            Protocol::Anthropic => {
                serde_json::json!({"type": "error", "error": {"type": kind, "message": message}})
            }
            Protocol::OpenaiResponses | Protocol::OpenaiChat => {
                serde_json::json!({"error": {"message": message, "type": kind, "code": Value::Null, "param": Value::Null}})
            }
        }
    }

    /// The answer to a request beyond the live step budget: a 400 error an agent does not
    /// retry, so that it stops at once.
    pub fn budget_stop_body(self, message: &str) -> Value {
        match self {
            Protocol::Anthropic => self.error_body("invalid_request_error", message),
            Protocol::OpenaiResponses | Protocol::OpenaiChat => {
                serde_json::json!({"error": {"message": message, "type": "invalid_request_error", "code": "pvisor_step_budget_exhausted", "param": Value::Null}})
            }
        }
    }

    /// The header carrying an API key to an upstream of this protocol.
    pub fn auth_header(self, key: &str) -> (&'static str, String) {
        match self {
            Protocol::Anthropic => ("x-api-key", key.to_string()),
            Protocol::OpenaiResponses | Protocol::OpenaiChat => {
                ("authorization", format!("Bearer {key}"))
            }
        }
    }

    /// The tool named by a streamed event when a tool call starts in it.
    pub fn tool_start(self, event: &Value) -> Option<String> {
        match self {
            Protocol::Anthropic => anthropic::tool_start(event),
            Protocol::OpenaiResponses => responses::tool_start(event),
            Protocol::OpenaiChat => chat::tool_start(event),
        }
    }

    /// The tools called by a whole (non-streamed) answer.
    pub fn answer_tools(self, answer: &Value) -> Vec<String> {
        match self {
            Protocol::Anthropic => anthropic::answer_tools(answer),
            Protocol::OpenaiResponses => responses::answer_tools(answer),
            Protocol::OpenaiChat => chat::answer_tools(answer),
        }
    }

    /// Turn extended thinking off in a request body (`--disable-thinking`).
    pub fn disable_thinking(self, body: &mut Value) {
        if self == Protocol::Anthropic {
            anthropic::disable_thinking(body)
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A request path's route name: the part after `/v1` (when present), without the query.
pub fn route_name(path: &str) -> &str {
    let p = path.split('?').next().unwrap_or("");
    p.strip_prefix("/v1").unwrap_or(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_routes_and_serde_agree() {
        for p in Protocol::ALL {
            assert_eq!(Protocol::from_name(p.name()), Some(p));
            assert_eq!(Protocol::of_route(p.model_route()), Some(p));
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
        }
        let old: Protocol = serde_json::from_str("\"responses\"").unwrap();
        assert_eq!(old, Protocol::OpenaiResponses);
        assert_eq!(route_name("/v1/messages?beta=true"), "/messages");
        assert_eq!(route_name("/chat/completions"), "/chat/completions");
    }
}
