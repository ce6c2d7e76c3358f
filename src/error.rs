//! Library errors. Each variant of [`ReplayError`] mirrors a recovery decision, and maps to
//! one failure category of the result protocol with a stable exit code (see `docs/cli.md`).

use std::path::{Path, PathBuf};

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

/// `bytes` as text, or the error naming the line where invalid UTF-8 starts.
pub fn utf8_text<'a>(path: &Path, bytes: &'a [u8], what: &str) -> Result<&'a str, TrajectoryError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        TrajectoryError::new(path, line, "line", format!("{what} is not valid UTF-8"))
    })
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
