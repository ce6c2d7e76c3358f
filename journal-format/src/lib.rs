//! The on-disk format of the `pvisor replay` journal.
//!
//! A journal is one file: a 48-byte [`header`] followed by framed [`record`]s. Each record
//! carries one [`event::Event`] encoded with MessagePack (rmp-serde, named fields). Integrity
//! (CRC-32C seeded with the journal id) and tamper evidence (a BLAKE3 hash chain) are
//! separate. The byte-level specification is `SPEC.md` beside this crate; this crate is its
//! reference codec, and `vectors/` holds golden files for every format version.
//!
//! This crate does no I/O policy (locking, fsync, quarantine); that is the store's job in the
//! `pvisor` crate. It only encodes, decodes and classifies bytes.

pub mod encoder;
pub mod error;
pub mod event;
pub mod header;
pub mod reader;
pub mod record;

pub use encoder::Encoder;
pub use error::{DecodeError, ScanError};
pub use event::Event;
pub use header::{FileHeader, JournalId};
pub use reader::{RecordReader, ScanReport, TailState};
pub use record::{ChainHash, RecordFrame};

/// Current format major version. Readers refuse a file whose major is greater.
///
/// Changelog of format versions (newest last):
/// - 1.0: initial format. 48-byte header; record = 28-byte framed header (len, kind,
///   flags, seq, at_ms, header CRC), MessagePack payload, 32-byte BLAKE3 chain hash,
///   4-byte record CRC; event kinds 1..=19.
/// - 1.1: optional fields `continuation_started.neutralized`,
///   `bridge_request_validated.removed_items`, `.refused_request_blob`, `.difference` and
///   `.budget_exhausted`
///   (absent when empty, so 1.0 events encode as before).
/// - 1.2: event kinds 20 `workspace_checkpointed` and 21 `workspace_restored`; the in-doubt
///   decision `rerun_restored`.
/// - 1.3: optional `agent_exited.stopped_by`; 1.4: optional
///   `continuation_started.from_boundary`.
/// - 1.5: event kind 22 `inner_call_finished` (a tool call made by a call's own code).
/// - 1.6: event kind 23 `blob_stored` (a small blob carried by the journal).
/// - 1.7: event kind 24 `batches_listed` and optional `trajectory_parsed.batch_count`: the
///   batch summaries of a long trajectory in bounded events.
pub const FORMAT_MAJOR: u16 = 1;
/// Current format minor version. Writers refuse to append to a file whose minor is greater
/// (an older writer would drop data a newer one relies on).
pub const FORMAT_MINOR: u16 = 7;

/// Hard cap on a record payload. Checked before any allocation.
pub const MAX_PAYLOAD: u32 = 16 * 1024 * 1024;
