//! `pvisor`: replay an AI coding agent's native trajectory in a fresh sandbox, rebuild the
//! agent's own context from fresh observations, and continue with the real agent.
//!
//! Module map (one owner per behaviour):
//! - [`adapter`]: the agent-neutral plan types and adapter interface.
//! - [`adapters`]: one module per agent (parse, tools, rebuild, continue).
//! - [`error`]: library errors whose variants mirror recovery decisions.
//! - [`journal`]: the crash-safe store (lock, torn-tail recovery, durable appends, blobs).
//! - [`fold`]: the only code that computes status: events → state → result.
//! - [`report`]: timelines and exports of events.
//! - [`cli`]: flags, subcommands, exit codes.
//! - [`bridge`]: the fail-closed local model bridge between a continued agent and its upstream.
//! - [`continuation`]: the agent-neutral continuation runner (bridge + real agent + events).
//! - [`model`]: the scripted model server the real agent CLIs run against offline.
//! - [`protocol`]: the model wire protocols (Anthropic Messages, OpenAI Responses, Chat).
//! - [`outcome`]: the failure taxonomy, exit codes and result/request schemas (stable).
//! - [`workspace`]: path confinement of file tools to the sandbox workspace.
//! - [`supervisor`]: process-group supervisor for the commands tools run.

pub mod adapter;
pub mod adapters;
pub mod audit;
pub mod bridge;
pub mod cli;
pub mod compare;
pub mod continuation;
pub mod digest;
pub mod engine;
pub mod error;
pub mod fold;
pub mod install;
pub mod journal;
pub mod model;
pub mod outcome;
pub mod protocol;
pub mod report;
pub mod request;
pub mod serve;
pub mod supervisor;
pub mod workspace;
