//! The journal store: backends, single-writer lock, torn-tail recovery, durable appends,
//! streaming reads, and the content-addressed blob store. The byte format itself is the
//! `journal-format` crate.

pub mod backend;
pub mod blobs;
pub mod error;
pub mod lock;
pub mod store;

pub use backend::{FileStorage, MemStorage, Storage};
pub use blobs::BlobStore;
pub use error::JournalError;
pub use store::{
    read_events, resolve_path, scan_file, Durability, Journal, Opened, StoredEvent, JOURNAL_FILE,
};
