//! Exit codes: stable, documented in `docs/cli.md`. Replay failure categories keep the codes
//! of the result protocol; journal commands have their own range.

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

/// The exit code of a replay failure category.
pub fn for_category(category: &str) -> i32 {
    match category {
        "configuration_error" => CONFIGURATION,
        "trajectory_error" => TRAJECTORY,
        "unsupported_agent" | "unsupported_version" => UNSUPPORTED,
        "workspace_error" => WORKSPACE,
        "executor_error" => EXECUTOR,
        "ambiguous_execution" => AMBIGUOUS_EXECUTION,
        "continuation_error"
        | "model_rate_limit"
        | "model_internal_error"
        | "model_connection_error" => CONTINUATION,
        "journal_error" => JOURNAL_CORRUPT,
        _ => INTERNAL,
    }
}
