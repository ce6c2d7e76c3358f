//! Library errors. Each variant of [`ReplayError`] mirrors a recovery decision, and maps to
//! one failure category of the result protocol with a stable exit code (see `docs/cli.md`).

use std::path::PathBuf;

/// A trajectory that cannot be parsed or planned. Names file, line and field.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
#[error("{path}:{line}: {field}: {message}")]
pub struct TrajectoryError {
    pub path: PathBuf,
    /// 1-based line (0 when the error concerns the whole file).
    pub line: usize,
    /// The field (JSON path or record kind) at fault.
    pub field: String,
    pub message: String,
}

impl TrajectoryError {
    pub fn new(
        path: impl Into<PathBuf>,
        line: usize,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        TrajectoryError {
            path: path.into(),
            line,
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A tool call that could not be executed (not: a tool that ran and reported an error,
/// which is an observation like any other).
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("path {path} is outside the workspace {workspace}")]
    OutsideWorkspace { path: PathBuf, workspace: PathBuf },
    #[error("tool `{tool}` is not supported: {reason}")]
    Unsupported { tool: String, reason: String },
    #[error("invalid input for tool `{tool}`: {message}")]
    BadInput { tool: String, message: String },
    #[error("i/o error running `{tool}`: {source}")]
    Io {
        tool: String,
        #[source]
        source: std::io::Error,
    },
}
