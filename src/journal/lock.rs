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
            let holder = holder.trim().to_string();
            // A holder that has not written its pid yet (it just took the lock), or that is not
            // pvisor: the kernel's lock table names it.
            let holder = if holder.starts_with("pid ") {
                holder
            } else {
                match holder_pid(&file) {
                    Some(pid) => format!("pid {pid}"),
                    None => "a process whose pid the kernel does not show".to_string(),
                }
            };
            let holder = format!("{holder}, lock file {}", path.display());
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

/// The pid holding a `flock` on `file`, from `/proc/locks` (`N: FLOCK ADVISORY WRITE <pid>
/// <major>:<minor>:<inode> 0 EOF`, device numbers in hex).
fn holder_pid(file: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let m = file.metadata().ok()?;
    let dev = m.dev();
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let want = format!("{major:02x}:{minor:02x}:{}", m.ino());
    let table = std::fs::read_to_string("/proc/locks").ok()?;
    table.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // `1: FLOCK ADVISORY WRITE 123 fd:01:456 0 EOF` (a blocked waiter has `->` first).
        let i = f.iter().position(|x| *x == "FLOCK")?;
        (f.get(i + 4) == Some(&want.as_str()))
            .then(|| f.get(i + 3)?.parse().ok())
            .flatten()
    })
}

impl Drop for LockFile {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A holder that wrote nothing into the lock file (not pvisor, or between taking the lock
    /// and writing its pid) is still named by its pid.
    #[test]
    fn the_holder_is_named_by_its_pid_even_when_it_wrote_none() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("journal.lock");
        let held = File::create(&path).unwrap();
        held.lock_exclusive().unwrap();
        match LockFile::acquire(&path) {
            Err(JournalError::Locked { holder, .. }) => {
                assert!(
                    holder.starts_with(&format!("pid {}", std::process::id())),
                    "{holder}"
                );
            }
            other => panic!("not refused: {other:?}"),
        }
        drop(held);
        // A process another test forks in parallel holds a copy of the descriptor until it
        // execs (close-on-exec): the lock is released then.
        let start = std::time::Instant::now();
        let mine = loop {
            match LockFile::acquire(&path) {
                Ok(l) => break l,
                Err(_) if start.elapsed() < std::time::Duration::from_secs(5) => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => panic!("the lock was not released: {e}"),
            }
        };
        let again = LockFile::acquire(&path).unwrap_err().to_string();
        assert!(
            again.contains(&format!("pid {}", std::process::id())),
            "{again}"
        );
        drop(mine);
    }
}
