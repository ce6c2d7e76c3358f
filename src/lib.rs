//! `pvisor`: replay an AI coding agent's native trajectory in a fresh sandbox, rebuild the
//! agent's own context from fresh observations, and continue with the real agent.
//!
//! Data flows one way: native file → an adapter parses a plan of batches → the engine loop
//! (fold the journal → decide → perform → append) → the adapter rebuilds the native session
//! → the runner starts the real agent through the bridge → result = fold(journal). See
//! `docs/architecture.md`.
//!
//! Module map (one owner per behaviour):
//! - [`kit`]: what every adapter implements and is given: plan types, the `Adapter`,
//!   `ToolRunner` and `RequestRules` traits, the agent registry.
//! - [`adapters`]: one folder per agent (parse, tools, rebuild, request rules, continuation)
//!   and the list of registry entries.
//! - [`engine`]: the one loop, fresh runs and resumes alike; preflight, checkpoints.
//! - [`fold`]: the only code that computes status: events → state → result.
//! - [`journal`]: the crash-safe store (lock, torn-tail recovery, durable appends, blobs).
//! - [`runner`]: runs the real agent CLI against the bridge, journaling every fact.
//! - [`bridge`]: the fail-closed local model bridge between a continued agent and its upstream.
//! - [`protocol`]: the model wire protocols (Anthropic Messages, OpenAI Responses, Chat).
//! - [`scripted`]: the scripted model server the real agent CLIs run against offline.
//! - [`compare`]: observation and next-action comparison.
//! - [`workspace`]: path confinement of file tools, workspace checkpoints.
//! - [`supervisor`]: the process runner every tool uses (group, timeout, log, bounded capture).
//! - [`outcome`]: the failure taxonomy, exit codes and result/request schemas (stable).
//! - [`request`]: the replay request (flags, TOML, JSON).
//! - [`audit`], [`report`]: offline audit, timelines and exports.
//! - [`install`]: installing pinned agent CLIs from the registry.
//! - [`digest`]: canonical JSON and digests.
//! - [`cli`]: the thin command line over all of the above.

pub mod adapters;
pub mod audit;
pub mod bridge;
pub mod certify;
pub mod cli;
pub mod compare;
pub mod digest;
pub mod engine;
pub mod error;
pub mod fleet;
pub mod fold;
pub mod install;
pub mod journal;
pub mod kit;
pub mod outcome;
pub mod protocol;
pub mod report;
pub mod request;
pub mod runner;
pub mod scripted;
pub mod serve;
pub mod supervisor;
pub mod workspace;
