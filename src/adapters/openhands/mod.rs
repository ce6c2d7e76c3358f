//! OpenHands adapter (`--agent openhands`): conversations of the OpenHands SDK (1.34, the
//! agent the current OpenHands runs), stored as `base_state.json` + `events/event-NNNNN-<id>.json`.
//!
//! - [`versions`]: the capability table (SDK release → pinned libraries, tools).
//! - [`store`]: a conversation folder read as one canonical byte form (what pvisor parses,
//!   digests and writes as artifacts): `base_state.json`, then one line per event.
//! - [`parse`]: that form → plan; one LLM response's `ActionEvent`s are one batch, each
//!   answered by the result event carrying its `tool_call_id`. [`integrity`]: the event
//!   chain, calls against what the model sent, results against their actions, responses
//!   against the statistics.
//! - [`tools`], [`runner`]: every action re-executed by OpenHands' **own** tools (terminal in
//!   tmux, file_editor, task_tracker, think, finish) in the Python companion runner
//!   (`runner.py`), started with the Python of the installed SDK.
//! - [`rebuild`]: the conversation cut after batch N with the fresh observation events, status
//!   `idle`, `leaf_event_id` at the boundary; the Chat Completions prefix is the SDK's own
//!   rendering of that store (the runner's messages mode).
//! - [`request_rules`], [`continuation`]: the SDK's own reload (`Conversation(…,
//!   conversation_id=…)`) and `run()` through the Chat Completions bridge; the budget is the
//!   SDK's `max_iteration_per_run`.
//! - [`record`]: recording conversations with the real SDK for `pvisor certify`
//!   (`record.py`).
//! - [`agent`]: the [`crate::kit::Adapter`] implementation.

pub mod agent;
pub mod continuation;
pub mod integrity;
pub mod parse;
pub mod rebuild;
pub mod record;
pub mod request_rules;
pub mod runner;
pub mod store;
pub mod tools;
pub mod versions;

/// The adapter's name on the command line.
pub const NAME: &str = "openhands";
/// The SDK version `pvisor agents install openhands` installs.
pub const PINNED: &str = "1.34.0";
/// The PyPI package.
pub const PACKAGE: &str = "openhands-sdk";

use crate::kit::registry::{AgentEntry, Capabilities, Install, Package, Versioning};

/// The registry entry. The "entrypoint" is the Python of the SDK's virtual environment
/// (`<venv>/bin/python`): OpenHands has no CLI of its own in this form; the runner is the
/// program it runs.
pub const ENTRY: AgentEntry = AgentEntry {
    name: NAME,
    pinned: PINNED,
    versions: versions::PROVEN,
    continue_versions: versions::PROVEN,
    install: Install {
        package: Package::PyPI {
            package: PACKAGE,
            bin: "python",
            python: versions::RELEASES[0].python,
            python_below: Some(versions::RELEASES[0].python_below),
            with: versions::RELEASES[0].with,
        },
        helpers: &[],
        post_install: None,
    },
    versioning: Versioning::PerSession {
        probe: runner::probe_version,
    },
    command: "python3",
    capabilities: Capabilities {
        replay: true,
        continue_live: true,
        resume_live: true,
        boundary_prompt: true,
    },
    docs: "docs/agents/openhands.md",
    make: || Box::new(agent::OpenHands),
};
