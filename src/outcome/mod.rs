//! What a run hands to its caller, in one small, stable place (changes in
//! [`CHANGELOG.md`](CHANGELOG.md)): the failure taxonomy with each category's exit code and
//! one-line hint, every exit code, and the versioned schemas of the result and the request.
//! A harness that drives pvisor needs nothing else to interpret a run.

pub mod exit;

pub use crate::fold::result::{ReplayResult, RESULT_SCHEMA};
pub use crate::request::REQUEST_SCHEMA;
pub use journal_format::event::FailureCategory;

/// The one-line hint printed with a failure of `category`.
pub fn hint(category: FailureCategory) -> &'static str {
    use FailureCategory::*;
    match category {
        ConfigurationError => "see `pvisor replay --help` and docs/cli.md",
        TrajectoryError => "the message names the file, line and field at fault; pvisor never guesses past a damaged record",
        UnsupportedAgent | UnsupportedVersion => "`pvisor agents` lists the supported agents, their proven versions and what each can do",
        WorkspaceError => "run inside the fresh sandbox, with the workspace at the same path as the original run",
        ExecutorError => "unknown and non-regenerable tools are refused before anything runs (--allow-stale-observations reuses non-regenerable ones)",
        AmbiguousExecution => "inspect the workspace; resume with --accept-at-least-once to re-run the call, or start a new run in a fresh sandbox",
        ContinuationError => "`pvisor journal audit` on the run's state directory shows every refused model request with its first difference and the kept request (secrets redacted)",
        ModelRateLimit | ModelInternalError | ModelConnectionError => "the model upstream failed; the run is retryable: resume it with --resume-journal",
        JournalError => "`pvisor journal verify` on the state directory says what is wrong",
        InternalError => "a bug in pvisor: please report it with the run's journal (`pvisor journal export`)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_category_has_a_documented_code_and_a_hint() {
        for c in FailureCategory::ALL {
            assert!(exit::ALL.contains(&exit::for_category(c)), "{c}");
            assert!(!hint(c).is_empty());
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
    }
}
