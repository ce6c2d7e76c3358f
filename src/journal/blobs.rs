//! Content-addressed blob store beside the journal: `blobs/<2 hex>/<62 hex>`, named by the
//! BLAKE3 hash of the content. Written temp → fsync → rename → fsync dir, so a blob name
//! that exists always holds its full content; an event referring to a blob is appended only
//! after the blob is durable. A small blob whose content the journal carries (`blob_stored`,
//! see the engine's recorder) is written without syncs ([`BlobStore::put_copy`]): the
//! journal is its durable copy, the file the one readers open.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct BlobStore {
    root: PathBuf,
}

/// Write a file atomically and durably.
pub fn write_atomic(target: &Path, bytes: &[u8]) -> io::Result<()> {
    write_renamed(target, true, |f| f.write_all(bytes))
}

/// Write a file atomically and durably from `write`, as it is made (never held whole).
pub fn write_atomic_with(
    target: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    write_renamed(target, true, |f| {
        let mut w = io::BufWriter::with_capacity(1 << 20, f);
        write(&mut w)?;
        w.flush()
    })
}

/// Write a temporary file beside `target` with `write` and rename it into place, so that no
/// process ever sees a partial `target`; with `durable`, synced first and the directory after.
/// A write that fails leaves no temporary file.
fn write_renamed(
    target: &Path,
    durable: bool,
    write: impl FnOnce(&mut fs::File) -> io::Result<()>,
) -> io::Result<()> {
    let dir = target.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        target
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("blob"),
        std::process::id()
    ));
    let done = (|| {
        let mut f = fs::File::create(&tmp)?;
        write(&mut f)?;
        if durable {
            f.sync_all()?;
        }
        drop(f);
        fs::rename(&tmp, target)?;
        if durable {
            super::backend::sync_dir(dir)?;
        }
        Ok(())
    })();
    if done.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    done
}

impl BlobStore {
    pub fn new(state_dir: &Path) -> Self {
        BlobStore {
            root: state_dir.join("blobs"),
        }
    }
    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn path_of(&self, hash: &str) -> PathBuf {
        let (a, b) = hash.split_at(2.min(hash.len()));
        self.root.join(a).join(b)
    }
    /// Store bytes; returns the BLAKE3 hex name. Idempotent.
    pub fn put(&self, bytes: &[u8]) -> io::Result<String> {
        let hash = blake3::hash(bytes).to_hex().to_string();
        let p = self.path_of(&hash);
        if p.is_file() {
            return Ok(hash);
        }
        write_atomic(&p, bytes)?;
        Ok(hash)
    }
    /// Store bytes whose durable copy is elsewhere (the journal): renamed into place but not
    /// synced. Returns the BLAKE3 hex name.
    pub fn put_copy(&self, bytes: &[u8]) -> io::Result<String> {
        let hash = blake3::hash(bytes).to_hex().to_string();
        let p = self.path_of(&hash);
        if !p.is_file() {
            write_renamed(&p, false, |f| f.write_all(bytes))?;
        }
        Ok(hash)
    }
    /// Make the file of blob `hash` hold `bytes` again, durably, unless it already does (the
    /// journal carried them; an operating-system crash lost or truncated the unsynced copy).
    /// Returns whether it was written.
    pub fn restore_copy(&self, hash: &str, bytes: &[u8]) -> io::Result<bool> {
        if self.get_verified(hash).is_ok() {
            return Ok(false);
        }
        write_atomic(&self.path_of(hash), bytes)?;
        Ok(true)
    }
    /// A blob written as it is made (see [`BlobWriter`]): kept in memory while it is at most
    /// `hold` bytes, in a temporary file of the store beyond.
    pub fn writer(&self, hold: usize) -> BlobWriter<'_> {
        BlobWriter {
            store: self,
            hold,
            hash: blake3::Hasher::new(),
            held: Vec::new(),
            file: None,
        }
    }
    pub fn get(&self, hash: &str) -> io::Result<Vec<u8>> {
        fs::read(self.path_of(hash))
    }
    /// Read and check the content matches its name.
    pub fn get_verified(&self, hash: &str) -> io::Result<Vec<u8>> {
        let b = self.get(hash)?;
        if blake3::hash(&b).to_hex().as_str() != hash {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("blob {hash} does not match its content"),
            ));
        }
        Ok(b)
    }
}

/// A blob written as it is made, hashed as it goes: its bytes are held in memory up to the
/// writer's limit, then spooled to a temporary file beside the store's blobs, which
/// [`BlobWriter::finish`] makes durable and renames into place (a killed process leaves at
/// most a `.spool.tmp-*` file, never a partial blob).
pub struct BlobWriter<'s> {
    store: &'s BlobStore,
    hold: usize,
    hash: blake3::Hasher,
    held: Vec<u8>,
    file: Option<(io::BufWriter<fs::File>, PathBuf)>,
}

/// What a [`BlobWriter`] made.
pub enum Written {
    /// At most the limit: the bytes, for the caller to store (the journal may carry them).
    Held(Vec<u8>),
    /// Beyond it: stored durably under this name.
    Stored(String),
}

impl Write for BlobWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.hash.update(buf);
        if self.file.is_none() && self.held.len() + buf.len() > self.hold {
            fs::create_dir_all(&self.store.root)?;
            static SPOOLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = SPOOLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let tmp = self
                .store
                .root
                .join(format!(".spool.tmp-{}-{n}", std::process::id()));
            let mut f = io::BufWriter::with_capacity(1 << 20, fs::File::create(&tmp)?);
            f.write_all(&self.held)?;
            self.held = Vec::new();
            self.file = Some((f, tmp));
        }
        match &mut self.file {
            Some((f, _)) => f.write_all(buf)?,
            None => self.held.extend_from_slice(buf),
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.file {
            Some((f, _)) => f.flush(),
            None => Ok(()),
        }
    }
}

impl BlobWriter<'_> {
    pub fn finish(mut self) -> io::Result<Written> {
        let Some((f, tmp)) = self.file.take() else {
            return Ok(Written::Held(std::mem::take(&mut self.held)));
        };
        let done = (|| {
            let f = f.into_inner().map_err(|e| e.into_error())?;
            f.sync_all()?;
            let hash = self.hash.finalize().to_hex().to_string();
            let p = self.store.path_of(&hash);
            if p.is_file() {
                fs::remove_file(&tmp)?;
                return Ok(hash);
            }
            let dir = p.parent().unwrap_or(Path::new("."));
            fs::create_dir_all(dir)?;
            fs::rename(&tmp, &p)?;
            super::backend::sync_dir(dir)?;
            Ok(hash)
        })();
        if done.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        done.map(Written::Stored)
    }
}

impl Drop for BlobWriter<'_> {
    /// A writer dropped unfinished (an error while writing) removes its spool file.
    fn drop(&mut self) {
        if let Some((_, tmp)) = self.file.take() {
            let _ = fs::remove_file(tmp);
        }
    }
}
