//! A long-running command the caller polls (Codex's unified exec: `exec_command` starts it,
//! `write_stdin` polls it later): the same guarantees as [`super::run`] — own process
//! group, the whole group killed when the command exits, at its deadline or when the session
//! is dropped; the merged output goes to a 0600 log file in full and is kept in memory only
//! up to a bound (the unread part; an overflow keeps its head and tail and says how much was
//! dropped).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::CommandSpec;

/// Unread output kept in memory at most (head and tail halves).
pub const MAX_UNREAD: usize = 8 << 20;

#[derive(Default)]
struct Buffer {
    unread: Vec<u8>,
    /// Bytes dropped from the middle of the unread output since the last read.
    dropped: u64,
    eof: bool,
}

impl Buffer {
    fn push(&mut self, bytes: &[u8]) {
        self.unread.extend_from_slice(bytes);
        if self.unread.len() > MAX_UNREAD {
            let keep = MAX_UNREAD / 2;
            let cut = self.unread.len() - MAX_UNREAD;
            self.unread.drain(keep..keep + cut);
            self.dropped += cut as u64;
        }
    }
}

pub struct Session {
    /// The leader; reaped once its exit was seen (`exit` is set then).
    pid: i32,
    pgid: i32,
    groups: Option<std::path::PathBuf>,
    /// The unread output, and a condvar the reader notifies at the end of the output.
    buf: Arc<(Mutex<Buffer>, Condvar)>,
    /// Readable once the leader exited (see [`super::pidfd`]).
    exit_fd: Option<std::os::fd::OwnedFd>,
    started: Instant,
    deadline: Option<Instant>,
    exit: Option<i32>,
    timed_out: bool,
}

/// Start `spec` with stdout and stderr merged into one stream (stdin: `/dev/null`).
pub fn spawn(spec: &CommandSpec) -> io::Result<Session> {
    let (r, w) = super::pipe()?;
    let w2 = w.try_clone()?;
    let pid = super::spawn::spawn_spec(spec, w.as_raw_fd(), w2.as_raw_fd())?;
    drop((w, w2));
    if let Some(d) = &spec.groups {
        super::groups::register(d, pid as u32);
    }
    let mut log = match &spec.log_path {
        Some(p) => {
            if let Some(dir) = p.parent() {
                std::fs::create_dir_all(dir)?;
            }
            use std::os::unix::fs::OpenOptionsExt;
            Some(
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(p)?,
            )
        }
        None => None,
    };
    let buf = Arc::new((Mutex::new(Buffer::default()), Condvar::new()));
    let b2 = buf.clone();
    std::thread::spawn(move || {
        let mut f = File::from(r);
        let mut chunk = [0u8; 8192];
        loop {
            match f.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if let Some(l) = log.as_mut() {
                        let _ = l.write_all(&chunk[..n]);
                    }
                    b2.0.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(&chunk[..n]);
                }
            }
        }
        b2.0.lock().unwrap_or_else(|e| e.into_inner()).eof = true;
        b2.1.notify_all();
    });
    let pgid = pid;
    Ok(Session {
        exit_fd: super::pidfd(pgid),
        pid,
        pgid,
        groups: spec.groups.clone(),
        buf,
        started: Instant::now(),
        deadline: spec.timeout.map(|t| Instant::now() + t),
        exit: None,
        timed_out: false,
    })
}

/// What one poll returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poll {
    /// The exit status (the shell convention: code, or 128 + signal) once it exited.
    pub exit: Option<i32>,
    /// Output since the previous poll (an overflow's middle replaced by a note), bytes that
    /// are not UTF-8 replaced by U+FFFD.
    pub output: String,
    /// How many bytes the command wrote since the previous poll, as written.
    pub raw_len: usize,
    /// The session's deadline passed and its group was killed.
    pub timed_out: bool,
}

impl Session {
    pub fn started(&self) -> Instant {
        self.started
    }

    fn poll_exit(&mut self) -> Option<i32> {
        if self.exit.is_none() {
            self.exit = super::spawn::reap(self.pid, false);
        }
        self.exit
    }

    /// Wait until the command exits (its output drained) or `yield_for` passes; then
    /// return what it printed since the last poll.
    pub fn wait(&mut self, yield_for: Duration) -> Poll {
        let until = Instant::now() + yield_for;
        loop {
            if self.deadline.is_some_and(|d| Instant::now() >= d) && self.exit.is_none() {
                super::killpg(self.pgid, libc::SIGKILL);
                self.timed_out = true;
            }
            if let Some(code) = self.poll_exit() {
                // Its output ends when the last writer closes the pipe (at most the grace).
                let drain = Instant::now() + super::DRAIN_GRACE;
                let (lock, cv) = &*self.buf;
                let mut b = lock.lock().unwrap_or_else(|e| e.into_inner());
                while !b.eof {
                    let left = drain.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    b = cv
                        .wait_timeout(b, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                drop(b);
                // Anything it left running in its group goes with it.
                super::killpg(self.pgid, libc::SIGKILL);
                let (output, raw_len) = self.take();
                return Poll {
                    exit: Some(code),
                    output,
                    raw_len,
                    timed_out: self.timed_out,
                };
            }
            let now = Instant::now();
            if now >= until {
                let (output, raw_len) = self.take();
                return Poll {
                    exit: None,
                    output,
                    raw_len,
                    timed_out: false,
                };
            }
            // Sleep until the leader exits, the yield time ends or the deadline comes.
            let mut left = until - now;
            if let Some(d) = self.deadline {
                left = left.min(d.saturating_duration_since(now));
            }
            match &self.exit_fd {
                Some(fd) => super::wait_readable(fd, left),
                None => std::thread::sleep(left.min(Duration::from_millis(2))),
            }
        }
    }

    /// The unread output as text, and how many bytes it was as written.
    fn take(&mut self) -> (String, usize) {
        let mut b = self.buf.0.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = std::mem::take(&mut b.unread);
        let dropped = std::mem::take(&mut b.dropped);
        let raw_len = bytes.len() + dropped as usize;
        if dropped == 0 {
            return (String::from_utf8_lossy(&bytes).into_owned(), raw_len);
        }
        let half = bytes.len() / 2;
        let text = format!(
            "{}\n[… {dropped} bytes not kept in memory; the full output is in the log …]\n{}",
            String::from_utf8_lossy(&bytes[..half]),
            String::from_utf8_lossy(&bytes[half..])
        );
        (text, raw_len)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        super::killpg(self.pgid, libc::SIGKILL);
        if self.exit.is_none() {
            super::spawn::reap(self.pid, true);
        }
        if let Some(d) = &self.groups {
            super::groups::unregister(d, self.pgid as u32);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, dir: &std::path::Path) -> CommandSpec {
        CommandSpec::new("/bin/sh", dir).arg("-c").arg(script)
    }

    #[test]
    fn polls_until_exit_and_kills_leftovers() {
        let d = tempfile::tempdir().unwrap();
        let mut spec = sh("echo a; sleep 0.3; echo b; sleep 100 &", d.path());
        spec.log_path = Some(d.path().join("log"));
        let mut s = spawn(&spec).unwrap();
        let p = s.wait(Duration::from_millis(100));
        assert_eq!((p.exit, p.output.as_str()), (None, "a\n"));
        let p = s.wait(Duration::from_secs(5));
        assert_eq!(p.exit, Some(0));
        assert_eq!(p.output, "b\n");
        assert_eq!(
            std::fs::read_to_string(d.path().join("log")).unwrap(),
            "a\nb\n"
        );
    }

    #[test]
    fn the_deadline_kills_the_group() {
        let d = tempfile::tempdir().unwrap();
        let mut spec = sh("sleep 30", d.path());
        spec.timeout = Some(Duration::from_millis(200));
        let mut s = spawn(&spec).unwrap();
        let t0 = Instant::now();
        let p = s.wait(Duration::from_secs(10));
        assert!(p.timed_out && p.exit == Some(128 + libc::SIGKILL), "{p:?}");
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn unread_output_is_bounded() {
        let mut b = Buffer::default();
        for _ in 0..(MAX_UNREAD / 1000 + 10) {
            b.push(&[b'x'; 1000]);
        }
        assert!(b.unread.len() <= MAX_UNREAD);
        assert!(b.dropped > 0);
    }
}
