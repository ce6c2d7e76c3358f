//! The journal as the engine uses it: every append is durable before the step that depends
//! on it acts, and is folded into the state at once. Also the crash failpoint.

use journal_format::Event;

use super::failure::RunError;
use crate::fold::{self, ReplayState};
use crate::journal::{BlobStore, Durability, Journal, StoredEvent};

/// Environment variable: `PVISOR_FAILPOINT=after-event:K` aborts the process right after
/// event K (its sequence number) is durable; `before-event:K` aborts right before event K is
/// appended (the step it records has acted, nothing acknowledges it: e.g. a tool call that
/// ran to completion without its `tool_call_finished`). Used by the kill-anywhere tests.
pub const FAILPOINT_ENV: &str = "PVISOR_FAILPOINT";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failpoint {
    After(u64),
    Before(u64),
}

fn failpoint_from_env() -> Option<Failpoint> {
    let v = std::env::var(FAILPOINT_ENV).ok()?;
    if let Some(n) = v.strip_prefix("after-event:") {
        return n.parse().ok().map(Failpoint::After);
    }
    v.strip_prefix("before-event:")
        .and_then(|n| n.parse().ok())
        .map(Failpoint::Before)
}

pub struct Recorder {
    pub journal: Journal,
    pub state: ReplayState,
    pub blobs: BlobStore,
    failpoint: Option<Failpoint>,
}

impl Recorder {
    pub fn new(journal: Journal, state: ReplayState, blobs: BlobStore) -> Self {
        let failpoint = failpoint_from_env();
        Recorder {
            journal,
            state,
            blobs,
            failpoint,
        }
    }

    /// Append durably, fold, and honour the failpoint.
    pub fn record(&mut self, event: Event) -> Result<StoredEvent, RunError> {
        if self.failpoint == Some(Failpoint::Before(self.journal.last_seq() + 1)) {
            eprintln!(
                "pvisor: failpoint before-event:{} reached, aborting",
                (self.journal.last_seq() + 1)
            );
            std::process::abort();
        }
        let stored = self.journal.append(event, Durability::Sync)?;
        fold::apply(&mut self.state, &stored).map_err(|e| {
            RunError::Internal(format!("the engine produced an illegal event: {e}"))
        })?;
        if self.failpoint == Some(Failpoint::After(stored.seq)) {
            eprintln!(
                "pvisor: failpoint after-event:{} reached, aborting",
                stored.seq
            );
            std::process::abort();
        }
        super::progress::update(&self.state);
        Ok(stored)
    }

    /// Store bytes in the blob store (durable before any event names them).
    pub fn blob(&self, bytes: &[u8]) -> Result<String, RunError> {
        self.blobs.put(bytes).map_err(|e| {
            RunError::Internal(format!("blob store {}: {e}", self.blobs.root().display()))
        })
    }
}
