//! Run failures: each variant is a result-protocol category with a stable exit code.

use crate::adapter::AdapterError;
use crate::error::{ExecError, TrajectoryError};
use crate::journal::JournalError;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Configuration(String),
    #[error("{0}")]
    Trajectory(#[from] TrajectoryError),
    #[error("{0}")]
    UnsupportedAgent(String),
    #[error("{0}")]
    UnsupportedVersion(String),
    #[error("{0}")]
    Workspace(String),
    #[error("batch {batch} call {call} ({tool}): {source}")]
    Executor {
        batch: u64,
        call: u64,
        tool: String,
        #[source]
        source: ExecError,
    },
    #[error("{0}")]
    ExecutorRefused(String),
    #[error("{0}")]
    AmbiguousExecution(String),
    #[error("{0}")]
    Continuation(String),
    #[error("{0}")]
    Journal(#[from] JournalError),
    #[error("{0}")]
    Internal(String),
}

impl RunError {
    pub fn category(&self) -> &'static str {
        match self {
            RunError::Configuration(_) => "configuration_error",
            RunError::Trajectory(_) => "trajectory_error",
            RunError::UnsupportedAgent(_) => "unsupported_agent",
            RunError::UnsupportedVersion(_) => "unsupported_version",
            RunError::Workspace(_) => "workspace_error",
            RunError::Executor {
                source: ExecError::OutsideWorkspace { .. },
                ..
            } => "workspace_error",
            RunError::Executor { .. } | RunError::ExecutorRefused(_) => "executor_error",
            RunError::AmbiguousExecution(_) => "ambiguous_execution",
            RunError::Continuation(m) => classify_model(m),
            RunError::Journal(_) => "internal_error",
            RunError::Internal(_) => "internal_error",
        }
    }
    pub fn retryable(&self) -> bool {
        matches!(
            self.category(),
            "model_rate_limit" | "model_internal_error" | "model_connection_error"
        )
    }
}

/// Model failures are told apart by what the agent printed.
fn classify_model(m: &str) -> &'static str {
    let l = m.to_ascii_lowercase();
    if l.contains("rate limit") || l.contains("too many requests") || l.contains("status 429") {
        "model_rate_limit"
    } else if l.contains("internal server error")
        || l.contains("status 500")
        || l.contains("status 502")
        || l.contains("status 503")
    {
        "model_internal_error"
    } else if l.contains("connection refused")
        || l.contains("connection reset")
        || l.contains("timed out")
        || l.contains("could not resolve host")
    {
        "model_connection_error"
    } else {
        "continuation_error"
    }
}

impl From<AdapterError> for RunError {
    fn from(e: AdapterError) -> Self {
        match e {
            AdapterError::Trajectory(t) => RunError::Trajectory(t),
            AdapterError::Io { .. } => RunError::Internal(e.to_string()),
            AdapterError::Unsupported(m) => RunError::UnsupportedAgent(m),
            AdapterError::Continuation(m) => RunError::Continuation(m),
        }
    }
}
