//! One module per agent. Each has the same parts: `parse`, `tools`, `rebuild`, `continuation`.
//! [`capabilities`] is the table of agents, versions and what each adapter can do.

pub mod capabilities;
pub mod claude_code;
pub mod codex;

use crate::adapter::Adapter;

/// Why an agent cannot be used.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum UnsupportedAgent {
    #[error("unknown agent `{0}`; known agents: {1}")]
    Unknown(String, String),
    #[error("agent `{agent}` is known but its adapter cannot {what} yet")]
    NotYet { agent: String, what: &'static str },
}

/// The adapter for an agent name.
pub fn by_name(name: &str) -> Result<Box<dyn Adapter>, UnsupportedAgent> {
    match name {
        "claude-code" => Ok(Box::new(claude_code::agent::ClaudeCode::default())),
        "codex" => Ok(Box::new(codex::agent::Codex::default())),
        _ => match capabilities::lookup(name) {
            Some(c) => Err(UnsupportedAgent::NotYet {
                agent: c.agent.into(),
                what: "replay",
            }),
            None => Err(UnsupportedAgent::Unknown(
                name.into(),
                capabilities::TABLE
                    .iter()
                    .map(|c| c.agent)
                    .collect::<Vec<_>>()
                    .join(", "),
            )),
        },
    }
}
