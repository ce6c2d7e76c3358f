//! Decide the next step from the folded state alone. Fresh runs and resumed runs go through
//! this same function: resumption is not a second code path.

use journal_format::event::{Mode, SessionRole};

use crate::fold::{Phase, ReplayState};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Journal the request (`run_requested`).
    Request,
    /// Parse the trajectory (`trajectory_parsed`).
    Parse,
    /// List the next batch summaries of a long trajectory, from this batch (`batches_listed`).
    ListBatches(u64),
    /// Check the boundary, tools and budget (`boundary_validated`).
    Validate,
    /// Write the prepared native prefix with the original observations.
    Prepare,
    StartBatch(u64),
    /// A call started by an earlier process has no outcome: apply the in-doubt policy.
    ResolveInDoubt(u64, u64),
    /// Start, execute and finish call i of batch k.
    RunCall(u64, u64),
    /// Compare the fresh observation of a finished call with the original.
    Compare(u64, u64),
    FinishBatch(u64),
    /// Rebuild the native session with the fresh observations.
    Rebuild,
    /// Start (or resume) the continuation with the real agent.
    Continue,
    /// Clean and write the continued native session.
    WriteContinued,
    /// Append `run_finished`.
    Finish,
    /// Nothing left to do.
    Done,
}

pub fn decide(s: &ReplayState) -> Step {
    let mode = s.mode();
    match s.phase {
        Phase::Empty => Step::Request,
        Phase::Requested => Step::Parse,
        Phase::Parsed => match s.batches_to_list() {
            Some(first) => Step::ListBatches(first),
            None => Step::Validate,
        },
        Phase::Validated => Step::Prepare,
        Phase::Prepared if mode == Some(Mode::PrepareOnly) => Step::Finish,
        Phase::Prepared => Step::StartBatch(1),
        Phase::Replaying(k) => {
            let n_calls = s.parsed.as_ref().and_then(|p| p.calls_of(k)).unwrap_or(0);
            for i in 0..n_calls {
                match s.calls.get(&(k, i)) {
                    None => return Step::RunCall(k, i),
                    Some(c) if c.in_doubt() && c.accepted_decisions() < c.starts as usize => {
                        return Step::ResolveInDoubt(k, i)
                    }
                    Some(c) if c.in_doubt() => return Step::RunCall(k, i),
                    Some(c) if c.compared.is_none() => return Step::Compare(k, i),
                    Some(_) => {}
                }
            }
            Step::FinishBatch(k)
        }
        Phase::BatchDone(k) if k < s.after_step() => Step::StartBatch(k + 1),
        Phase::BatchDone(_) => Step::Rebuild,
        Phase::Replayed if mode == Some(Mode::ReplayOnly) => Step::Finish,
        Phase::Replayed | Phase::Continuing => Step::Continue,
        Phase::Continued if !s.sessions.contains_key("continued") => Step::WriteContinued,
        Phase::Continued => Step::Finish,
        Phase::Finished | Phase::Failed => Step::Done,
    }
}

/// The role name of a session-written event, for lookups.
pub fn role_key(r: SessionRole) -> &'static str {
    match r {
        SessionRole::Prepared => "prepared",
        SessionRole::Reconstructed => "reconstructed",
        SessionRole::Continued => "continued",
    }
}
