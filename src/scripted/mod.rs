//! The project's scripted model server: plays a [`Script`] of assistant turns over the
//! Anthropic Messages, OpenAI Responses and OpenAI Chat Completions wire protocols, so that
//! the REAL agent CLIs can run offline against it (127.0.0.1 only).
//!
//! ```no_run
//! # async fn demo() -> Result<(), pvisor::scripted::ModelError> {
//! use pvisor::scripted::{start, Script, ServerOptions};
//! let script = Script::from_path("script.json")?.substitute(&[("CWD", "/tmp/work")]);
//! let server = start(script, ServerOptions::default()).await?;
//! // ANTHROPIC_BASE_URL=server.base_url() …
//! let main_requests = server.main_requests();
//! server.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! See `docs/model-script.md` for the script format, the protocols, how turns are chosen and
//! the request log format.

mod anthropic;
pub mod history;
mod openai;
pub mod script;
pub mod server;
mod wire;

pub use script::{
    ids, Script, ScriptError, SideRule, StopReason, ToolCallSpec, Turn, EXHAUSTED_TEXT,
};
pub use server::{start, LoggedRequest, Protocol, RequestKind, ServerHandle, ServerOptions};

use std::path::PathBuf;

/// Errors of the model server.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("cannot bind 127.0.0.1:{port}: {source}")]
    Bind {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open request log {path}: {source}")]
    Log {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Script(#[from] ScriptError),
}
