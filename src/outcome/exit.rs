//! Exit codes: stable, documented in `docs/cli.md`. Replay failure categories keep the codes
//! of the result protocol; journal problems have their own range.

use journal_format::event::FailureCategory;

pub const OK: i32 = 0;
/// Bad flags or configuration (also clap usage errors).
pub const CONFIGURATION: i32 = 2;
pub const TRAJECTORY: i32 = 10;
pub const UNSUPPORTED: i32 = 11;
pub const WORKSPACE: i32 = 20;
pub const EXECUTOR: i32 = 30;
pub const AMBIGUOUS_EXECUTION: i32 = 31;
pub const CONTINUATION: i32 = 40;
pub const INTERNAL: i32 = 50;
/// `journal verify`: the journal ends in a torn tail that opening it for write would recover.
pub const JOURNAL_TORN_TAIL: i32 = 60;
/// `journal verify`: damage before the last record (checksum, hash chain, order, decoding).
pub const JOURNAL_CORRUPT: i32 = 61;
/// `journal verify`: a sequence number appears twice with different contents.
pub const JOURNAL_FORKED: i32 = 62;
/// The journal's format major version is newer than this pvisor.
pub const JOURNAL_TOO_NEW: i32 = 63;
/// The journal is held by another process.
pub const JOURNAL_LOCKED: i32 = 64;
/// The events are intact but their order breaks the phase machine.
pub const JOURNAL_ILLEGAL_ORDER: i32 = 65;

/// `journal audit`: at least one check failed.
pub const AUDIT_FAILED: i32 = 66;

/// `journal diff`: the two runs differ.
pub const RUNS_DIFFER: i32 = 67;

/// `certify`: a property did not hold on some case (the certificate names the smallest).
pub const CERTIFY_FAILED: i32 = 68;

/// The exit code of a replay failure category (a journal error's exact code depends on
/// what is wrong with the journal: [`crate::engine::RunError::exit_code`]).
pub fn for_category(category: FailureCategory) -> i32 {
    use FailureCategory::*;
    match category {
        ConfigurationError => CONFIGURATION,
        TrajectoryError => TRAJECTORY,
        UnsupportedAgent | UnsupportedVersion => UNSUPPORTED,
        WorkspaceError => WORKSPACE,
        ExecutorError => EXECUTOR,
        AmbiguousExecution => AMBIGUOUS_EXECUTION,
        ContinuationError | ModelRateLimit | ModelInternalError | ModelConnectionError => {
            CONTINUATION
        }
        JournalError => JOURNAL_CORRUPT,
        InternalError => INTERNAL,
    }
}

/// Every documented code (docs/cli.md).
pub const ALL: &[i32] = &[
    OK,
    CONFIGURATION,
    TRAJECTORY,
    UNSUPPORTED,
    WORKSPACE,
    EXECUTOR,
    AMBIGUOUS_EXECUTION,
    CONTINUATION,
    INTERNAL,
    JOURNAL_TORN_TAIL,
    JOURNAL_CORRUPT,
    JOURNAL_FORKED,
    JOURNAL_TOO_NEW,
    JOURNAL_LOCKED,
    JOURNAL_ILLEGAL_ORDER,
    AUDIT_FAILED,
    RUNS_DIFFER,
    CERTIFY_FAILED,
];
