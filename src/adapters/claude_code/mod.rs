//! Claude Code adapter (supported versions: [`versions`], pinned [`SUPPORTED_VERSION`]).
//!
//! - [`parse`]: session JSONL → [`parse::ParsedSession`] → [`crate::kit::Plan`].
//! - [`rebuild`]: the native session with fresh observations, in an isolated config dir.
//! - [`continuation`]: resuming the rebuilt session with the real `claude` through the bridge.
//! - [`drift`]: the host/time snapshots Claude compares on resume, set to the live host.
//! - [`record`]: recording sessions with the real `claude` (`pvisor certify`).
//! - [`agent`]: the [`crate::kit::Adapter`] implementation tying the parts together.
//! - [`tools`]: re-execution of Claude Code's native tools, producing the exact
//!   `tool_result.content` texts Claude Code 2.1.332 sends to the model.
//!
//! The texts reproduced by `tools` were read in the bundled JavaScript of the npm package
//! `@anthropic-ai/claude-code@2.1.332` (native build for linux-x64; the module names cited in
//! comments, e.g. `chunk-bqhgd24a.js`, are the Bun-bundled modules of that binary).
//! See `docs/agents/claude-code.md` for the tool table and known differences.

pub mod agent;
pub mod continuation;
pub mod drift;
pub mod install;
pub mod integrity;
pub mod parse;
pub mod rebuild;
pub mod record;
pub mod request_rules;
pub mod tools;
pub mod versions;

/// The pinned Claude Code version (the newest of [`versions`]' supported range).
pub const SUPPORTED_VERSION: &str = "2.1.332";

pub use parse::{parse, parse_bytes, parse_file, ParsedSession};

use crate::kit::registry::{AgentEntry, Capabilities, Install, Package};

/// The registry entry of the Claude Code adapter.
pub const ENTRY: AgentEntry = AgentEntry {
    name: "claude-code",
    pinned: SUPPORTED_VERSION,
    versions: &[versions::RANGE],
    continue_versions: &[versions::CONTINUE_RANGE],
    install: Install {
        package: Package::Npm {
            package: "@anthropic-ai/claude-code",
            bin: "claude",
        },
        helpers: &[],
        post_install: Some(install::link_native_binary),
    },
    versioning: crate::kit::registry::Versioning::Flag,
    command: "claude",
    capabilities: Capabilities {
        replay: true,
        continue_live: true,
        resume_live: true,
        boundary_prompt: true,
    },
    docs: "docs/agents/claude-code.md",
    make: || Box::new(agent::ClaudeCode),
};
pub use tools::classify;
