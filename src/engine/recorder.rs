//! The journal as the engine uses it: every append is durable before the step that depends
//! on it acts, and is folded into the state at once. Also the crash failpoint.
//!
//! Group commit: an event that only acknowledges what already happened (a finished call,
//! its comparison, the end of a batch) is [`Recorder::record_deferred`]: appended and folded
//! at once, made durable by the next [`Recorder::record`] (or the drop), which precedes the next action
//! (the next call's `tool_call_started` is durable before its tool runs). A replay-only batch
//! of one call thus costs one journal fdatasync instead of six. The journal on disk is still
//! always a prefix of what was appended: a crash loses at most the acknowledgements since the
//! last synced event, and the resumed run treats their call as interrupted (in doubt), the
//! same as a crash while the tool ran. Blobs stay durable before any event names them.

use journal_format::event::BlobStored;
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

/// The largest blob the journal carries itself (format 1.6 `blob_stored`); larger ones are
/// files synced on their own.
pub const HELD_BLOB_MAX: usize = 64 * 1024;

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

    /// Append durably (with every deferred event before it), fold, and honour the failpoint.
    pub fn record(&mut self, event: Event) -> Result<StoredEvent, RunError> {
        self.append(event, Durability::Sync)
    }

    /// Append and fold now; durable with the next [`Recorder::record`] or when the recorder is
    /// dropped (see the module note for which events may wait).
    pub fn record_deferred(&mut self, event: Event) -> Result<StoredEvent, RunError> {
        self.append(event, Durability::Buffered)
    }

    fn append(&mut self, event: Event, durability: Durability) -> Result<StoredEvent, RunError> {
        if self.failpoint == Some(Failpoint::Before(self.journal.last_seq() + 1)) {
            eprintln!(
                "pvisor: failpoint before-event:{} reached, aborting",
                (self.journal.last_seq() + 1)
            );
            std::process::abort();
        }
        let stored = self.journal.append(event, durability)?;
        fold::apply(&mut self.state, &stored).map_err(|e| {
            RunError::Internal(format!("the engine produced an illegal event: {e}"))
        })?;
        if self.failpoint == Some(Failpoint::After(stored.seq)) {
            self.journal.commit()?; // "after event K is durable", deferred or not
            eprintln!(
                "pvisor: failpoint after-event:{} reached, aborting",
                stored.seq
            );
            std::process::abort();
        }
        super::progress::update(&self.state);
        Ok(stored)
    }

    /// Store a blob written by `write` as it is made (a large one never held in memory).
    pub fn blob_written(
        &mut self,
        write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<String, RunError> {
        let io = |e: std::io::Error| {
            RunError::Internal(format!("blob store {}: {e}", self.blobs.root().display()))
        };
        // A journal of a format before 1.6 carries no blob: every blob is a durable file.
        let hold = if self.journal.header().minor < 6 {
            0
        } else {
            HELD_BLOB_MAX
        };
        let mut w = self.blobs.writer(hold);
        write(&mut w).map_err(io)?;
        match w.finish().map_err(io)? {
            crate::journal::blobs::Written::Held(bytes) => self.blob(&bytes),
            crate::journal::blobs::Written::Stored(name) => Ok(name),
        }
    }

    /// Store bytes in the blob store, durable before any event names them: a small blob is
    /// carried by the journal itself (`blob_stored`, deferred: it is durable with the event
    /// that names it, which follows it), its file an unsynced copy; a larger one is a file
    /// synced on its own.
    pub fn blob(&mut self, bytes: &[u8]) -> Result<String, RunError> {
        let io = |e: std::io::Error| {
            RunError::Internal(format!("blob store {}: {e}", self.blobs.root().display()))
        };
        if bytes.len() > HELD_BLOB_MAX || self.journal.header().minor < 6 {
            return self.blobs.put(bytes).map_err(io);
        }
        let name = self.blobs.put_copy(bytes).map_err(io)?;
        // Carried at every store, even when an earlier event carried the same content: the
        // events of a run are then the same in number and order whatever its outputs (two
        // equal observations in one run and not in another), so sequence numbers line up
        // between runs of one session (failpoints, `journal diff`).
        self.record_deferred(Event::BlobStored(BlobStored {
            blob: name.clone(),
            bytes: bytes.to_vec(),
        }))?;
        Ok(name)
    }
}

impl Drop for Recorder {
    /// A run that returns early (an error already journaled or not) keeps what it appended:
    /// deferred events are facts, made durable here at the latest.
    fn drop(&mut self) {
        let _ = self.journal.commit();
    }
}

/// Write back every blob file whose content the journal carries (`blob_stored`) and whose
/// file is missing or does not hold it. Returns how many were written.
pub fn restore_held_blobs(events: &[StoredEvent], blobs: &BlobStore) -> Result<usize, RunError> {
    let mut written = 0;
    for e in events {
        if let Event::BlobStored(b) = &e.event {
            if blobs.restore_copy(&b.blob, &b.bytes).map_err(|err| {
                RunError::Internal(format!(
                    "blob store {}: cannot write back blob {} that the journal carries: {err}",
                    blobs.root().display(),
                    b.blob
                ))
            })? {
                written += 1;
            }
        }
    }
    if written > 0 {
        eprintln!("[pvisor] wrote back {written} blob file(s) the journal carries");
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fold::ReplayState;
    use journal_format::event::RunFailed;

    fn open(dir: &std::path::Path) -> (Journal, Vec<StoredEvent>) {
        let (j, evs, _) = Journal::open_dir(dir).unwrap();
        (j, evs)
    }

    /// A deferred event (here a blob's content) is folded at once and durable with the next
    /// synced one.
    #[test]
    fn deferred_events_become_durable_with_the_next_synced_one() {
        let d = tempfile::tempdir().unwrap();
        let (j, _) = open(d.path());
        let mut rec = Recorder::new(j, ReplayState::default(), BlobStore::new(d.path()));
        let name = rec.blob(b"observation").unwrap();
        assert_eq!(rec.state.last_seq, 1, "the content is journaled first");
        assert_eq!(name, blake3::hash(b"observation").to_hex().as_str());
        // Not durable yet: a reader of the file sees nothing.
        assert_eq!(open_read(d.path()), 0);
        rec.record(Event::RunFailed(RunFailed {
            category: journal_format::event::FailureCategory::ConfigurationError,
            message: "x".into(),
            retryable: false,
        }))
        .unwrap();
        assert_eq!(
            open_read(d.path()),
            2,
            "the synced append carries the deferred one"
        );
    }

    fn open_read(dir: &std::path::Path) -> usize {
        let mut n = 0;
        crate::journal::read_events(&dir.join("journal.pvj"), |_| {
            n += 1;
            Ok(())
        })
        .unwrap();
        n
    }

    /// The file of a blob the journal carries is written back when missing or damaged (an
    /// operating-system crash lost the unsynced copy), and left alone when intact.
    #[test]
    fn held_blob_files_are_written_back_from_the_journal() {
        let d = tempfile::tempdir().unwrap();
        let (j, _) = open(d.path());
        let blobs = BlobStore::new(d.path());
        let mut rec = Recorder::new(j, ReplayState::default(), blobs.clone());
        let a = rec.blob(b"first").unwrap();
        let b = rec.blob(b"second").unwrap();
        assert_eq!(rec.blob(b"first").unwrap(), a);
        assert_eq!(
            rec.state.last_seq, 3,
            "one blob_stored per store, whatever the content"
        );
        drop(rec); // commits
        let (_j, evs) = open(d.path());
        assert_eq!(restore_held_blobs(&evs, &blobs).unwrap(), 0);
        std::fs::remove_file(blobs.path_of(&a)).unwrap();
        std::fs::write(blobs.path_of(&b), b"").unwrap();
        assert_eq!(restore_held_blobs(&evs, &blobs).unwrap(), 2);
        assert_eq!(blobs.get_verified(&a).unwrap(), b"first");
        assert_eq!(blobs.get_verified(&b).unwrap(), b"second");
    }
}
