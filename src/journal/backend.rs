//! Storage backends under the journal store: the real file, and an in-memory backend that
//! keeps the "written" and the "durable" images apart so tests can build the file a crash
//! at any sync point would leave (as redb's crash backend and SpacetimeDB's memory repo do).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// What the store needs from the bytes underneath it.
pub trait Storage {
    /// Current length of the written image.
    fn len(&self) -> io::Result<u64>;
    /// Whether nothing was written yet.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// A streaming reader over the written image, from offset 0.
    fn reader(&self) -> io::Result<Box<dyn Read + '_>>;
    /// Read `buf.len()` bytes at `offset` (short only at the end).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize>;
    /// Append bytes to the end (not yet durable).
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Make everything appended so far durable (fdatasync).
    fn sync(&mut self) -> io::Result<()>;
    /// Cut the image to `len` bytes (not yet durable until `sync`).
    fn truncate(&mut self, len: u64) -> io::Result<()>;
    /// A human name for messages.
    fn describe(&self) -> String;
}

/// The journal file on disk.
pub struct FileStorage {
    file: File,
    path: PathBuf,
}

impl FileStorage {
    /// Open (creating if missing) for reading and appending. Creating the file also fsyncs
    /// its directory so the new name survives a crash.
    pub fn open(path: &Path) -> io::Result<Self> {
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        if !existed {
            sync_dir(path.parent().unwrap_or(Path::new(".")))?;
        }
        Ok(FileStorage {
            file,
            path: path.to_path_buf(),
        })
    }
    /// Open read-only (verify, show, export, audit never write).
    pub fn open_read_only(path: &Path) -> io::Result<ReadOnlyFile> {
        Ok(ReadOnlyFile {
            file: File::open(path)?,
            path: path.to_path_buf(),
        })
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Fsync a directory (after creating or renaming an entry in it).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl Storage for FileStorage {
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
    fn reader(&self) -> io::Result<Box<dyn Read + '_>> {
        let mut f = self.file.try_clone()?;
        f.seek(SeekFrom::Start(0))?;
        Ok(Box::new(io::BufReader::with_capacity(256 * 1024, f)))
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let mut n = 0;
        while n < buf.len() {
            let k = self.file.read_at(&mut buf[n..], offset + n as u64)?;
            if k == 0 {
                break;
            }
            n += k;
        }
        Ok(n)
    }
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.seek(SeekFrom::End(0))?;
        self.file.write_all(bytes)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    fn describe(&self) -> String {
        self.path.display().to_string()
    }
}

/// A read-only view of a journal file.
pub struct ReadOnlyFile {
    file: File,
    path: PathBuf,
}

impl ReadOnlyFile {
    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn reader(&self) -> io::Result<impl Read + '_> {
        let mut f = self.file.try_clone()?;
        f.seek(SeekFrom::Start(0))?;
        Ok(io::BufReader::with_capacity(256 * 1024, f))
    }
}

/// In-memory backend: `written` is what the process wrote, `durable` what a crash keeps for
/// sure. `fail_sync_at` makes the n-th sync (0-based) fail, to test that a failed fsync
/// poisons the store.
#[derive(Debug, Clone, Default)]
pub struct MemStorage {
    pub written: Vec<u8>,
    pub durable: Vec<u8>,
    pub syncs: usize,
    pub fail_sync_at: Option<usize>,
    /// Every durable image, one per completed sync (crash-at-each-sync-point tests).
    pub history: Vec<Vec<u8>>,
}

impl MemStorage {
    pub fn new() -> Self {
        Self::default()
    }
    /// A backend whose written and durable images are `bytes` (as if reopened after a crash).
    pub fn from_image(bytes: Vec<u8>) -> Self {
        MemStorage {
            written: bytes.clone(),
            durable: bytes,
            ..Default::default()
        }
    }
}

impl Storage for MemStorage {
    fn len(&self) -> io::Result<u64> {
        Ok(self.written.len() as u64)
    }
    fn reader(&self) -> io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(&self.written[..]))
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let off = (offset as usize).min(self.written.len());
        let n = buf.len().min(self.written.len() - off);
        buf[..n].copy_from_slice(&self.written[off..off + n]);
        Ok(n)
    }
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.written.extend_from_slice(bytes);
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        let n = self.syncs;
        self.syncs += 1;
        if self.fail_sync_at == Some(n) {
            return Err(io::Error::other("injected fsync failure"));
        }
        self.durable = self.written.clone();
        self.history.push(self.durable.clone());
        Ok(())
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.written.truncate(len as usize);
        Ok(())
    }
    fn describe(&self) -> String {
        "<memory>".into()
    }
}
