//! Run failures: each variant is a result-protocol category with a stable exit code.

use crate::error::{ExecError, TrajectoryError};
use crate::journal::JournalError;
use crate::kit::AdapterError;
use journal_format::event::FailureCategory;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Configuration(String),
    /// An input the user gave is wrong (found by the checks made before anything runs),
    /// with the one thing to do about it.
    #[error("{message}")]
    Input { message: String, hint: String },
    #[error("{0}")]
    Trajectory(#[from] TrajectoryError),
    /// The trajectory is not this agent's, but it parses as `agent`'s session.
    #[error("{error} (the file parses as a `{agent}` session)")]
    TrajectoryOfAnotherAgent {
        error: TrajectoryError,
        agent: &'static str,
    },
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
    /// The model upstream failed (the bridge saw it: status 429 / 5xx, no connection).
    #[error("{message}")]
    Model { kind: ModelFailure, message: String },
    #[error("{0}")]
    Journal(#[from] JournalError),
    /// The journal's events are intact but break the phase machine.
    #[error("{0}")]
    JournalOrder(String),
    #[error("{0}")]
    Internal(String),
}

impl RunError {
    pub fn category(&self) -> FailureCategory {
        use FailureCategory as C;
        match self {
            RunError::Configuration(_) | RunError::Input { .. } => C::ConfigurationError,
            RunError::Trajectory(_) | RunError::TrajectoryOfAnotherAgent { .. } => {
                C::TrajectoryError
            }
            RunError::UnsupportedAgent(_) => C::UnsupportedAgent,
            RunError::UnsupportedVersion(_) => C::UnsupportedVersion,
            RunError::Workspace(_) => C::WorkspaceError,
            RunError::Executor {
                source: ExecError::OutsideWorkspace { .. },
                ..
            } => C::WorkspaceError,
            RunError::Executor { .. } | RunError::ExecutorRefused(_) => C::ExecutorError,
            RunError::AmbiguousExecution(_) => C::AmbiguousExecution,
            RunError::Continuation(_) => C::ContinuationError,
            RunError::Model { kind, .. } => kind.category(),
            RunError::Journal(_) | RunError::JournalOrder(_) => C::JournalError,
            RunError::Internal(_) => C::InternalError,
        }
    }
    pub fn retryable(&self) -> bool {
        self.category().retryable()
    }
    /// The documented exit code: the category's, or for a journal problem the code of what
    /// is wrong with the journal.
    pub fn exit_code(&self) -> i32 {
        use crate::journal::JournalError as J;
        use crate::outcome::exit;
        match self {
            RunError::Journal(j) => match j {
                J::Locked { .. } => exit::JOURNAL_LOCKED,
                J::TooNew { .. } | J::NotWritable { .. } => exit::JOURNAL_TOO_NEW,
                J::Damaged {
                    source: journal_format::ScanError::Forked { .. },
                    ..
                } => exit::JOURNAL_FORKED,
                J::Damaged { .. } | J::Decode { .. } => exit::JOURNAL_CORRUPT,
                J::NotFound { .. } => exit::CONFIGURATION,
                _ => exit::INTERNAL,
            },
            RunError::JournalOrder(_) => exit::JOURNAL_ILLEGAL_ORDER,
            e => exit::for_category(e.category()),
        }
    }
    /// The one-line hint for this failure.
    pub fn hint(&self) -> String {
        use crate::journal::JournalError as J;
        match self {
            RunError::Journal(J::Locked { .. }) => "another pvisor holds this run's journal (its pid is in the message): wait for it to finish or stop it; the lock is released when its process exits".into(),
            RunError::Journal(J::TooNew { .. } | J::NotWritable { .. }) => "use the pvisor version that wrote this journal, or a newer one".into(),
            RunError::Journal(J::NotFound { .. }) => "pass the journal file (journal.pvj) or the run's state directory".into(),
            RunError::JournalOrder(_) => "the journal's events are intact but out of order for the phase machine: `pvisor journal verify` names the sequence number; keep the file and start a new run".into(),
            RunError::Input { hint, .. } => hint.clone(),
            RunError::TrajectoryOfAnotherAgent { agent, .. } => {
                format!("the trajectory looks like another agent's: pass --agent {agent}")
            }
            RunError::Trajectory(t) if t.field == "after_step" => "choose --after-step from 0 to the last complete batch the message names".into(),
            RunError::Trajectory(t) if t.line == 0 && t.message.contains("cannot read") => "check the --trajectory path: it must name the agent's native session file (or its session folder)".into(),
            e => crate::outcome::hint(e.category()).into(),
        }
    }
}

/// What a model upstream did wrong (from the bridge's facts, not from the agent's words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelFailure {
    RateLimit,
    Internal,
    Connection,
}

impl ModelFailure {
    pub fn category(self) -> FailureCategory {
        match self {
            ModelFailure::RateLimit => FailureCategory::ModelRateLimit,
            ModelFailure::Internal => FailureCategory::ModelInternalError,
            ModelFailure::Connection => FailureCategory::ModelConnectionError,
        }
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

impl From<crate::kit::SpillError> for RunError {
    /// The plan's spill file failed to read back (an I/O error of the temporary directory).
    fn from(e: crate::kit::SpillError) -> Self {
        RunError::Internal(e.to_string())
    }
}
