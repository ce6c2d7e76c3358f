//! The single-writer lock. An advisory `flock` on `journal.lock`: the OS releases it when the
//! holder dies, so a crashed run never leaves a stale lock. The holder writes its pid and
//! journal path into the file so a second writer can say who holds it.

use fs2::FileExt;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::error::JournalError;

#[derive(Debug)]
pub struct LockFile {
    file: File,
    #[allow(dead_code)]
    path: PathBuf,
}

impl LockFile {
    /// Take the lock or fail at once with the holder's identity.
    pub fn acquire(path: &Path) -> Result<LockFile, JournalError> {
        let io = |e| JournalError::Io {
            path: path.to_path_buf(),
            source: e,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io)?;
        if file.try_lock_exclusive().is_err() {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let holder = if holder.is_empty() {
                format!("lock file {}", path.display())
            } else {
                format!("{holder}, lock file {}", path.display())
            };
            return Err(JournalError::Locked {
                path: path.with_file_name(super::store::JOURNAL_FILE),
                holder,
            });
        }
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        let _ = write!(file, "pid {}", std::process::id());
        let _ = file.flush();
        Ok(LockFile {
            file,
            path: path.to_path_buf(),
        })
    }
}

impl Drop for LockFile {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}
