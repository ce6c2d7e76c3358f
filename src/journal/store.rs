//! The journal store: one writer, append-only, durable before anything depends on it.
//!
//! Open protocol (crash windows are walked in `docs/journal-format.md`):
//! 1. take the exclusive lock (file backend: `journal.lock`, fs2 `try_lock_exclusive`);
//! 2. an empty or shorter-than-header file, or a header-sized one whose header is not a
//!    header (zeroed or garbage blocks: bad magic or checksum), is a journal whose creation
//!    was interrupted: its bytes (if any) are quarantined and a fresh header is written and
//!    synced;
//! 3. scan every record (checksums, sequence, hash chain); damage before the last record is
//!    a hard error naming sequence number and byte offset;
//! 4. a torn tail is copied to the quarantine file (synced), the journal is truncated at the
//!    last valid record and synced, and a `recovered` event is appended and synced.
//!
//! Writes: [`Journal::append`] with [`Durability::Sync`] returns only once the record is on
//! stable storage (fdatasync). [`Durability::Buffered`] appends without syncing (group
//! commit: call [`Journal::commit`] once for the group). A failed fsync is never retried: the
//! store is poisoned and every later append fails.

use std::io::Read;
use std::path::{Path, PathBuf};

use journal_format::event::Recovered;
use journal_format::{Encoder, Event, FileHeader, JournalId, RecordReader, TailState};

use super::backend::{FileStorage, Storage};
use super::error::JournalError;
use super::lock::LockFile;

/// One decoded event with its place in the journal.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    pub seq: u64,
    pub at_ms: u64,
    pub offset: u64,
    pub event: Event,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// fdatasync before returning.
    Sync,
    /// Kept in the process (flushed to the OS at 1 MiB); durable at the next `commit` or
    /// synced append. Lost if the process dies before that, like any unsynced write.
    Buffered,
}

/// What opening found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    Created,
    Intact,
    /// A torn tail was quarantined and a `recovered` event appended.
    Recovered {
        offset: u64,
        length: u64,
        quarantine: PathBuf,
    },
}

pub struct Journal<S: Storage = FileStorage> {
    storage: S,
    path: PathBuf,
    header: FileHeader,
    encoder: Encoder,
    poisoned: bool,
    /// Bytes appended but not yet synced.
    pending: bool,
    /// Buffered appends not yet handed to the OS (flushed at 1 MiB, on commit, on sync).
    buf: Vec<u8>,
    /// Length of the file including `buf`.
    len: u64,
    _lock: Option<LockFile>,
    clock: fn() -> u64,
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// File name of the journal inside a state directory.
pub const JOURNAL_FILE: &str = "journal.pvj";
pub const LOCK_FILE: &str = "journal.lock";

/// Resolve a user-given PATH: the journal file itself, or a state directory holding one.
pub fn resolve_path(path: &Path) -> Result<PathBuf, JournalError> {
    if path.is_dir() {
        let j = path.join(JOURNAL_FILE);
        if j.is_file() {
            return Ok(j);
        }
        return Err(JournalError::NotFound {
            path: path.to_path_buf(),
        });
    }
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    Err(JournalError::NotFound {
        path: path.to_path_buf(),
    })
}

impl Journal<FileStorage> {
    /// Open or create the journal of a state directory, taking its lock.
    pub fn open_dir(state_dir: &Path) -> Result<(Self, Vec<StoredEvent>, Opened), JournalError> {
        std::fs::create_dir_all(state_dir).map_err(|e| JournalError::Io {
            path: state_dir.to_path_buf(),
            source: e,
        })?;
        let lock = LockFile::acquire(&state_dir.join(LOCK_FILE))?;
        let path = state_dir.join(JOURNAL_FILE);
        let storage = FileStorage::open(&path).map_err(|e| JournalError::Io {
            path: path.clone(),
            source: e,
        })?;
        let quarantine = state_dir.join(format!("{JOURNAL_FILE}.torn"));
        let mut opened = Journal::open_with(storage, path, quarantine, now_ms)?;
        opened.0._lock = Some(lock);
        Ok(opened)
    }
}

fn quarantine_path(base: &Path) -> PathBuf {
    if !base.exists() {
        return base.to_path_buf();
    }
    for i in 1.. {
        let p = PathBuf::from(format!("{}.{i}", base.display()));
        if !p.exists() {
            return p;
        }
    }
    unreachable!()
}

/// Write quarantined bytes durably (temp → fsync → rename → fsync dir).
fn write_quarantine(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if target.as_os_str().is_empty() || target.starts_with("<memory>") {
        return Ok(());
    }
    super::blobs::write_atomic(target, bytes)
}

impl<S: Storage> Journal<S> {
    /// Open over any backend. `quarantine` names where torn bytes go (ignored when empty).
    pub fn open_with(
        mut storage: S,
        path: PathBuf,
        quarantine: PathBuf,
        clock: fn() -> u64,
    ) -> Result<(Self, Vec<StoredEvent>, Opened), JournalError> {
        let io = |e: std::io::Error| JournalError::Io {
            path: path.clone(),
            source: e,
        };
        let len = storage.len().map_err(io)?;
        const HEADER: u64 = journal_format::header::HEADER_LEN as u64;
        // A header-sized file whose header does not decode (zeroed or garbage blocks after a
        // crash during creation) holds no record either: recovered the same way. With records
        // after it, it is corruption (refused by the scan below).
        let torn_header = len == HEADER && {
            let mut b = [0u8; journal_format::header::HEADER_LEN];
            storage.read_at(0, &mut b).map_err(io)?;
            // Not a valid header of a newer format (that is refused as too new).
            matches!(
                FileHeader::decode(&b),
                Err(journal_format::DecodeError::BadMagic
                    | journal_format::DecodeError::HeaderChecksum)
            )
        };
        if len < HEADER || torn_header {
            // Creation interrupted (or a new file): nothing acknowledged can be here.
            let mut opened = Opened::Created;
            if len > 0 {
                let mut b = vec![0u8; len as usize];
                storage.read_at(0, &mut b).map_err(io)?;
                let q = quarantine_path(&quarantine);
                write_quarantine(&q, &b).map_err(io)?;
                storage.truncate(0).map_err(io)?;
                opened = Opened::Recovered {
                    offset: 0,
                    length: len,
                    quarantine: q,
                };
            }
            let header = FileHeader::new(JournalId(rand::random()), clock());
            storage.append(&header.encode()).map_err(io)?;
            storage.sync().map_err(|e| JournalError::SyncFailed {
                path: path.clone(),
                source: e,
            })?;
            let encoder = Encoder::new(&header);
            let len = storage.len().map_err(|e| JournalError::Io {
                path: path.clone(),
                source: e,
            })?;
            let mut j = Journal {
                storage,
                path,
                header,
                encoder,
                poisoned: false,
                pending: false,
                buf: Vec::new(),
                len,
                _lock: None,
                clock,
            };
            let mut events = Vec::new();
            if let Opened::Recovered {
                offset,
                length,
                quarantine,
            } = &opened
            {
                let ev = Event::Recovered(Recovered {
                    offset: *offset,
                    length: *length,
                    quarantine_path: quarantine.display().to_string(),
                });
                events.push(j.append(ev, Durability::Sync)?);
            }
            return Ok((j, events, opened));
        }
        let (header, events, last_seq, head, tail) = {
            let reader = storage.reader().map_err(io)?;
            let mut rr =
                RecordReader::open(reader).map_err(|e| JournalError::from_scan(path.clone(), e))?;
            let mut events = Vec::new();
            while let Some(rec) = rr
                .next_record()
                .map_err(|e| JournalError::from_scan(path.clone(), e))?
            {
                let event =
                    Event::decode(rec.kind, rec.payload()).map_err(|e| JournalError::Decode {
                        path: path.clone(),
                        seq: rec.seq,
                        offset: rec.offset,
                        source: e,
                    })?;
                events.push(StoredEvent {
                    seq: rec.seq,
                    at_ms: rec.at_ms,
                    offset: rec.offset,
                    event,
                });
            }
            (
                *rr.header(),
                events,
                rr.last_seq(),
                rr.head(),
                rr.tail().expect("tail set at end"),
            )
        };
        if !header.writable() {
            return Err(JournalError::NotWritable {
                path,
                major: header.major,
                minor: header.minor,
            });
        }
        let encoder = Encoder::resume(&header, last_seq, head);
        let mut j = Journal {
            storage,
            path,
            header,
            encoder,
            poisoned: false,
            pending: false,
            buf: Vec::new(),
            len,
            _lock: None,
            clock,
        };
        let mut events = events;
        let opened = match tail {
            TailState::Clean { .. } => Opened::Intact,
            TailState::Torn { offset, len } => {
                let mut b = vec![0u8; len as usize];
                let n = j
                    .storage
                    .read_at(offset, &mut b)
                    .map_err(|e| JournalError::Io {
                        path: j.path.clone(),
                        source: e,
                    })?;
                b.truncate(n);
                let q = quarantine_path(&quarantine);
                write_quarantine(&q, &b).map_err(|e| JournalError::Io {
                    path: q.clone(),
                    source: e,
                })?;
                j.storage.truncate(offset).map_err(|e| JournalError::Io {
                    path: j.path.clone(),
                    source: e,
                })?;
                j.len = offset;
                j.sync_now()?;
                let ev = Event::Recovered(Recovered {
                    offset,
                    length: len,
                    quarantine_path: q.display().to_string(),
                });
                events.push(j.append(ev, Durability::Sync)?);
                Opened::Recovered {
                    offset,
                    length: len,
                    quarantine: q,
                }
            }
        };
        Ok((j, events, opened))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn header(&self) -> &FileHeader {
        &self.header
    }
    pub fn last_seq(&self) -> u64 {
        self.encoder.next_seq() - 1
    }
    pub fn head_hex(&self) -> String {
        self.encoder.head().to_hex()
    }
    pub fn storage(&self) -> &S {
        &self.storage
    }
    pub fn into_storage(mut self) -> S {
        let _ = self.flush_buf();
        self.storage
    }

    fn flush_buf(&mut self) -> Result<(), JournalError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let r = self.storage.append(&self.buf);
        self.buf.clear();
        if let Err(e) = r {
            // A partial write may have reached the file: nothing more may be appended.
            self.poisoned = true;
            return Err(JournalError::Io {
                path: self.path.clone(),
                source: e,
            });
        }
        Ok(())
    }

    fn sync_now(&mut self) -> Result<(), JournalError> {
        self.flush_buf()?;
        if let Err(e) = self.storage.sync() {
            self.poisoned = true;
            return Err(JournalError::SyncFailed {
                path: self.path.clone(),
                source: e,
            });
        }
        self.pending = false;
        Ok(())
    }

    /// Append one event. With `Durability::Sync` it is on stable storage when this returns.
    pub fn append(
        &mut self,
        event: Event,
        durability: Durability,
    ) -> Result<StoredEvent, JournalError> {
        if self.poisoned {
            return Err(JournalError::Poisoned {
                path: self.path.clone(),
            });
        }
        let at_ms = (self.clock)();
        let offset = self.len;
        let mut enc = self.encoder.clone();
        let bytes = enc
            .encode(&event, at_ms)
            .map_err(|e| JournalError::TooLarge {
                path: self.path.clone(),
                source: e,
            })?;
        self.encoder = enc;
        self.len += bytes.len() as u64;
        self.pending = true;
        self.buf.extend_from_slice(&bytes);
        if self.buf.len() >= 1 << 20 {
            self.flush_buf()?;
        }
        if durability == Durability::Sync {
            self.sync_now()?;
        }
        Ok(StoredEvent {
            seq: self.encoder.next_seq() - 1,
            at_ms,
            offset,
            event,
        })
    }

    /// Make every buffered append durable (group commit).
    pub fn commit(&mut self) -> Result<(), JournalError> {
        if self.poisoned {
            return Err(JournalError::Poisoned {
                path: self.path.clone(),
            });
        }
        if self.pending {
            self.sync_now()?;
        }
        Ok(())
    }
}

/// Stream the events of a journal file read-only, in constant memory, calling `f` for each.
/// Returns the scan report. Never modifies the file (a torn tail is reported, not fixed).
pub fn read_events(
    path: &Path,
    mut f: impl FnMut(StoredEvent) -> Result<(), JournalError>,
) -> Result<journal_format::ScanReport, JournalError> {
    let file = FileStorage::open_read_only(path).map_err(|e| JournalError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    let reader = file.reader().map_err(|e| JournalError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    stream_events(reader, path, &mut f)
}

/// Check a journal file read-only without decoding its events: header, framing, checksums,
/// sequence and hash chain (what `pvisor journal verify` checks unless `--deep`).
pub fn scan_file(path: &Path) -> Result<journal_format::ScanReport, JournalError> {
    let io = |e| JournalError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let file = FileStorage::open_read_only(path).map_err(io)?;
    let reader = file.reader().map_err(io)?;
    RecordReader::open(reader)
        .and_then(|r| r.scan())
        .map_err(|e| JournalError::from_scan(path.to_path_buf(), e))
}

/// The same over any reader.
pub fn stream_events(
    reader: impl Read,
    path: &Path,
    f: &mut dyn FnMut(StoredEvent) -> Result<(), JournalError>,
) -> Result<journal_format::ScanReport, JournalError> {
    let mut rr =
        RecordReader::open(reader).map_err(|e| JournalError::from_scan(path.to_path_buf(), e))?;
    while let Some(rec) = rr
        .next_record()
        .map_err(|e| JournalError::from_scan(path.to_path_buf(), e))?
    {
        let event = Event::decode(rec.kind, rec.payload()).map_err(|e| JournalError::Decode {
            path: path.to_path_buf(),
            seq: rec.seq,
            offset: rec.offset,
            source: e,
        })?;
        f(StoredEvent {
            seq: rec.seq,
            at_ms: rec.at_ms,
            offset: rec.offset,
            event,
        })?;
    }
    Ok(journal_format::ScanReport {
        header: *rr.header(),
        records: rr.records(),
        last_seq: rr.last_seq(),
        head: rr.head(),
        tail: rr.tail().expect("set"),
    })
}
