//! The journal as the engine uses it: every append is durable before the step that depends
//! on it acts, and is folded into the state at once. Also the crash failpoint.

use journal_format::Event;

use super::failure::RunError;
use crate::fold::{self, ReplayState};
use crate::journal::{BlobStore, Durability, Journal, StoredEvent};

/// Environment variable: `PVISOR_FAILPOINT=after-event:K` aborts the process right after
/// event K (its sequence number) is durable. Used by the kill-anywhere tests.
pub const FAILPOINT_ENV: &str = "PVISOR_FAILPOINT";

pub struct Recorder {
    pub journal: Journal,
    pub state: ReplayState,
    pub blobs: BlobStore,
    failpoint: Option<u64>,
}

impl Recorder {
    pub fn new(journal: Journal, state: ReplayState, blobs: BlobStore) -> Self {
        let failpoint = std::env::var(FAILPOINT_ENV)
            .ok()
            .and_then(|v| v.strip_prefix("after-event:").and_then(|n| n.parse().ok()));
        Recorder {
            journal,
            state,
            blobs,
            failpoint,
        }
    }

    /// Append durably, fold, and honour the failpoint.
    pub fn record(&mut self, event: Event) -> Result<StoredEvent, RunError> {
        let stored = self.journal.append(event, Durability::Sync)?;
        fold::apply(&mut self.state, &stored).map_err(|e| {
            RunError::Internal(format!("the engine produced an illegal event: {e}"))
        })?;
        if self.failpoint == Some(stored.seq) {
            eprintln!(
                "pvisor: failpoint after-event:{} reached, aborting",
                stored.seq
            );
            std::process::abort();
        }
        Ok(stored)
    }

    /// Store bytes in the blob store (durable before any event names them).
    pub fn blob(&self, bytes: &[u8]) -> Result<String, RunError> {
        self.blobs.put(bytes).map_err(|e| {
            RunError::Internal(format!("blob store {}: {e}", self.blobs.root().display()))
        })
    }
}
