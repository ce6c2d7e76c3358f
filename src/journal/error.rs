//! Store errors. Recovery is a `match` on these variants: `Locked` → another process owns
//! the run; `Damaged` → stop and report (never auto-repair mid-file damage); `TooNew` /
//! `NotWritable` → upgrade pvisor; `Poisoned` → a sync failed, the run must fail.

use journal_format::{DecodeError, ScanError};
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path} is locked by another process ({holder})")]
    Locked { path: PathBuf, holder: String },
    #[error("i/o error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("journal {path}: {source}")]
    Damaged {
        path: PathBuf,
        #[source]
        source: ScanError,
    },
    #[error(
        "journal {path} has format {major}.{minor}, newer than this pvisor reads ({}.{})",
        journal_format::FORMAT_MAJOR,
        journal_format::FORMAT_MINOR
    )]
    TooNew {
        path: PathBuf,
        major: u16,
        minor: u16,
    },
    #[error("journal {path} has format {major}.{minor}; this pvisor ({}.{}) may read it but must not append to it", journal_format::FORMAT_MAJOR, journal_format::FORMAT_MINOR)]
    NotWritable {
        path: PathBuf,
        major: u16,
        minor: u16,
    },
    #[error("journal {path}: event {seq} at byte offset {offset} does not decode: {source}")]
    Decode {
        path: PathBuf,
        seq: u64,
        offset: u64,
        #[source]
        source: DecodeError,
    },
    #[error("journal {path}: a previous fsync failed; the journal accepts no more writes (reopen it to see what is durable)")]
    Poisoned { path: PathBuf },
    #[error("journal {path}: fsync failed: {source}")]
    SyncFailed {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("journal {path}: event too large: {source}")]
    TooLarge {
        path: PathBuf,
        #[source]
        source: DecodeError,
    },
    #[error("{path} is not a journal file nor a run state directory holding one")]
    NotFound { path: PathBuf },
}

impl JournalError {
    pub fn from_scan(path: PathBuf, e: ScanError) -> Self {
        match e {
            ScanError::TooNew { major, minor } => JournalError::TooNew { path, major, minor },
            ScanError::Io { message, .. } => JournalError::Io {
                path,
                source: std::io::Error::other(message),
            },
            other => JournalError::Damaged {
                path,
                source: other,
            },
        }
    }
}
