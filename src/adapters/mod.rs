//! One folder per agent, each with the same parts (`parse`, `tools`, `rebuild`,
//! `request_rules`, `continuation`) and its registry [`AgentEntry`]; [`registry`] lists them.
//! Adding an agent: its folder, one line below, fixtures, docs (`docs/adding-an-agent.md`).

pub mod claude_code;
pub mod codex;
pub mod mini_swe_agent;
pub mod opencode;
pub mod openhands;
pub mod pi;

use crate::kit::registry::{AgentEntry, Registry};

/// Every agent pvisor supports.
pub const AGENTS: &[AgentEntry] = &[
    claude_code::ENTRY,
    codex::ENTRY,
    opencode::ENTRY,
    pi::ENTRY,
    mini_swe_agent::ENTRY,
    openhands::ENTRY,
];

/// The registry the CLI gives the engine.
pub fn registry() -> Registry {
    Registry::new(AGENTS.to_vec())
}
