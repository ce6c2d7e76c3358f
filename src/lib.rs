//! `pvisor`: replay an AI coding agent's native trajectory in a fresh sandbox, rebuild the
//! agent's own context from fresh observations, and continue with the real agent.
//!
//! Module map (one owner per behaviour):
//! - [`adapter`]: the agent-neutral plan types and adapter interface.
//! - [`adapters`]: one module per agent (parse, tools, rebuild, continue).
//! - [`error`]: library errors whose variants mirror recovery decisions.
//! - [`workspace`]: path confinement of file tools to the sandbox workspace.
//! - [`supervisor`]: process-group supervisor for the commands tools run.

pub mod adapter;
pub mod adapters;
pub mod error;
pub mod supervisor;
pub mod workspace;
