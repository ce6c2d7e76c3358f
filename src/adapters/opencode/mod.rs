//! OpenCode adapter (supported version: [`SUPPORTED_VERSION`]).
//!
//! - [`parse`]: any of OpenCode's session forms → [`session::Session`] → plan: the store
//!   ([`store`], `opencode.db` with its WAL), `opencode export` JSON, or the
//!   `opencode run --format=json` event stream. One step is one batch. [`integrity`]: the
//!   order, ids, roles, part types and step reasons an export or the store must keep.
//! - [`tools`]: re-execution of bash, read, write, edit, glob, grep, todowrite (and the
//!   `invalid` stand-in) with OpenCode's own output texts ([`js`] for the JavaScript
//!   semantics they depend on, [`collate`] for its directory order).
//! - [`rebuild`]: the export cut after batch N with fresh tool states, and the Chat
//!   Completions prefix OpenCode will send for it.
//! - [`request_rules`], [`continuation`]: `opencode import` + `opencode run --session`
//!   through the bridge, with the step-budget and idle watchdogs; [`clock`] keeps the
//!   agent's new ids after the recorded ones when its clock is behind the recording's.
//! - [`record`]: recording sessions with the real CLI for `pvisor certify`.
//! - [`agent`]: the [`crate::kit::Adapter`] implementation.
//!
//! Texts were read in the JavaScript of the 1.17.11 binary (npm `opencode-ai`) and checked
//! against the real CLI; see `docs/agents/opencode.md`.

pub mod agent;
pub mod clock;
pub mod collate;
pub mod continuation;
pub mod ids;
pub mod integrity;
pub mod js;
pub mod parse;
pub mod rebuild;
pub mod record;
pub mod request_rules;
pub mod session;
pub mod store;
pub mod tools;

/// The OpenCode version whose tool outputs this adapter reproduces.
pub const SUPPORTED_VERSION: &str = "1.17.11";

use crate::kit::registry::{AgentEntry, Capabilities, Helper, Install, Package, VersionRange};

/// The registry entry of the OpenCode adapter.
pub const ENTRY: AgentEntry = AgentEntry {
    name: "opencode",
    pinned: SUPPORTED_VERSION,
    versions: &[VersionRange::exactly(SUPPORTED_VERSION)],
    continue_versions: &[VersionRange::exactly(SUPPORTED_VERSION)],
    install: Install {
        package: Package::Npm {
            package: "opencode-ai",
            bin: "opencode",
        },
        // glob and grep run ripgrep, which OpenCode would download from GitHub.
        helpers: &[Helper {
            package: "ripgrep",
            version: "15.1.0",
            bin: "rg",
            source: crate::kit::registry::HelperSource::PyPI,
        }],
        post_install: None,
    },
    versioning: crate::kit::registry::Versioning::Flag,
    command: "opencode",
    capabilities: Capabilities {
        replay: true,
        continue_live: true,
        resume_live: false,
        boundary_prompt: true,
    },
    docs: "docs/agents/opencode.md",
    make: || Box::new(agent::OpenCode),
};

pub use parse::{parse_bytes, Parsed};
