//! mini-swe-agent adapter (`--agent mini-swe-agent`): 2.x trajectories
//! (`trajectory_format: "mini-swe-agent-1.1"`, a `bash` tool, several calls per reply) and
//! 1.x ones (`"mini-swe-agent-1"`, one fenced ```` ```bash ```` block per reply).
//!
//! - [`versions`]: the capability table: which trajectory format each mini version writes.
//! - [`parse`]: the trajectory (one pretty-printed JSON document) → plan; one assistant
//!   message's actions are one batch; a 1.x reply with zero or several blocks is a format-error
//!   turn (history, never a boundary); the submitting reply ends the trajectory and is never
//!   a boundary.
//! - [`integrity`]: what a trajectory repeats about itself (the response beside each reply,
//!   the model-call count, the parsed actions, the order of messages and timestamps),
//!   checked so that a damaged prefix is refused.
//! - [`tools`], [`runner`]: every action re-executed by mini's **own** environment and
//!   templates, in the Python companion runner (`runner.py`) preloaded into the real mini
//!   entrypoint (`sitecustomize.py`), one JSON line per call.
//! - [`rebuild`]: the trajectory cut after batch N with the fresh observation messages,
//!   written as mini writes it ([`pyjson`]: Python's `json.dumps(indent=2)`), and the Chat
//!   Completions prefix mini sends for it.
//! - [`request_rules`], [`continuation`]: mini's own agent loop (`agent.step()`) in the
//!   runner, through the Chat Completions bridge; the budget is mini's own `step_limit`.
//! - [`record`]: recording 2.x trajectories with the real CLI for `pvisor certify`.
//! - [`agent`]: the [`crate::kit::Adapter`] implementation.

pub mod agent;
pub mod continuation;
pub mod integrity;
pub mod parse;
pub mod pyjson;
pub mod rebuild;
pub mod record;
pub mod request_rules;
pub mod runner;
pub mod tools;
pub mod versions;

/// The adapter's name on the command line.
pub const NAME: &str = "mini-swe-agent";
/// The version `pvisor agents install mini-swe-agent` installs.
pub const PINNED: &str = "2.4.6";
/// The PyPI package.
pub const PACKAGE: &str = "mini-swe-agent";

use crate::kit::registry::{AgentEntry, Capabilities, Install, Package, Versioning};

/// The registry entry of the mini-swe-agent adapter. Both proven versions install side by
/// side (`pvisor agents install mini-swe-agent@1.17.5`); a run uses the installation of the
/// version its trajectory records ([`runner::entrypoint_for`]).
pub const ENTRY: AgentEntry = AgentEntry {
    name: NAME,
    pinned: PINNED,
    versions: versions::PROVEN,
    continue_versions: versions::PROVEN,
    install: Install {
        package: Package::PyPI {
            package: PACKAGE,
            bin: "mini",
            python: "3.10",
            python_below: None,
            // What the fixtures were recorded with (mini pins neither; a newer litellm may
            // change request bodies).
            with: &["litellm==1.110.2", "openai==3.57.0"],
        },
        helpers: &[],
        post_install: None,
    },
    versioning: Versioning::PerSession {
        probe: runner::probe_version,
    },
    command: "mini",
    capabilities: Capabilities {
        replay: true,
        continue_live: true,
        resume_live: true,
        boundary_prompt: true,
    },
    docs: "docs/agents/mini-swe-agent.md",
    make: || Box::new(agent::MiniSweAgent),
};
