//! Process supervisor: runs one command in its own process group, with a timeout, bounded
//! in-memory capture, a full log on disk, and cleanup of every background descendant.
//!
//! Guarantees of [`run`]:
//! - the command is the leader of a new process group ([`spawn::spawn_leader`]), so the whole
//!   tree can be signalled at once;
//! - on timeout the whole group gets SIGKILL;
//! - when the command itself exits, anything it left running in its group (`sleep 100 &`)
//!   is killed too, and reported in [`CommandOutcome::killed_background`]; a descendant
//!   that escaped the group (setsid) can only keep the pipe open for [`DRAIN_GRACE`];
//! - memory use is bounded: at most `capture_head + capture_tail` bytes per stream are kept,
//!   while the full output goes to the log file when one is given;
//! - the child is reaped only after its group was killed (`waitid(WNOWAIT)`), so a pid
//!   cannot be reused between exit and cleanup.
//!
//! The engine runs tools one at a time, so the API is synchronous; one call uses no thread.
//! [`session`] is the same for a command the caller polls while it runs (unified exec).

pub mod groups;
pub mod session;
pub mod spawn;

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use std::time::{Duration, Instant};

/// How long output is still drained after the command exited and its group was killed
/// (a descendant that escaped the group may still hold the pipe open).
pub const DRAIN_GRACE: Duration = Duration::from_millis(300);

/// Default bytes kept from the start / the end of each stream.
pub const DEFAULT_CAPTURE: usize = 1 << 20;

/// What to run.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    /// Extra variables set on top of the inherited environment.
    pub env: Vec<(OsString, OsString)>,
    /// Variables removed from the inherited environment.
    pub env_remove: Vec<OsString>,
    /// Kill the group after this long; `None` waits forever.
    pub timeout: Option<Duration>,
    /// Full output log (stdout then a marker then stderr, or the merged stream); created
    /// with mode 0600.
    pub log_path: Option<PathBuf>,
    /// Send stderr into the same pipe as stdout (one interleaved stream, like a terminal
    /// or `2>&1`). The merged stream is returned as `stdout`.
    pub merge_stderr: bool,
    pub capture_head: usize,
    pub capture_tail: usize,
    /// The run's list of running process groups ([`groups`]): the command's group is listed
    /// while it runs, so that a later attempt can end what a killed pvisor left.
    pub groups: Option<PathBuf>,
}

impl CommandSpec {
    pub fn new(program: impl Into<OsString>, cwd: impl Into<PathBuf>) -> Self {
        CommandSpec {
            program: program.into(),
            args: Vec::new(),
            cwd: cwd.into(),
            env: Vec::new(),
            env_remove: Vec::new(),
            timeout: None,
            log_path: None,
            merge_stderr: false,
            capture_head: DEFAULT_CAPTURE,
            capture_tail: DEFAULT_CAPTURE,
            groups: None,
        }
    }

    /// List the command's group in `dir` while it runs ([`groups`]).
    pub fn listed_in(mut self, dir: PathBuf) -> Self {
        self.groups = Some(dir);
        self
    }

    pub fn arg(mut self, a: impl Into<OsString>) -> Self {
        self.args.push(a.into());
        self
    }
}

/// The bounded capture of one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The first `capture_head` bytes.
    pub head: Vec<u8>,
    /// The last `capture_tail` bytes after the head (empty when nothing was dropped and
    /// everything fit in the head).
    pub tail: Vec<u8>,
    /// Total bytes the stream produced.
    pub total: u64,
}

impl Captured {
    /// True when bytes between head and tail were dropped.
    pub fn truncated(&self) -> bool {
        self.total > (self.head.len() + self.tail.len()) as u64
    }

    /// The whole stream when it was kept entirely.
    pub fn complete(&self) -> Option<Vec<u8>> {
        if self.truncated() {
            None
        } else {
            let mut v = self.head.clone();
            v.extend_from_slice(&self.tail);
            Some(v)
        }
    }

    /// Head and tail joined (lossy when truncated: the middle is missing).
    pub fn joined(&self) -> Vec<u8> {
        let mut v = self.head.clone();
        v.extend_from_slice(&self.tail);
        v
    }

    fn push(&mut self, data: &[u8], head_cap: usize, tail_cap: usize) {
        self.total += data.len() as u64;
        let mut data = data;
        if self.head.len() < head_cap {
            let n = (head_cap - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        if data.is_empty() || tail_cap == 0 {
            return;
        }
        self.tail.extend_from_slice(data);
        if self.tail.len() > tail_cap {
            let excess = self.tail.len() - tail_cap;
            self.tail.drain(..excess);
        }
    }
}

/// How the command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutcome {
    /// Exit code when the command exited normally.
    pub code: Option<i32>,
    /// Terminating signal otherwise.
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// Processes of the group were still alive after the command exited and were killed.
    pub killed_background: bool,
    pub duration: Duration,
    /// stdout, or the merged stream when `merge_stderr`.
    pub stdout: Captured,
    pub stderr: Captured,
    pub log_path: Option<PathBuf>,
}

impl CommandOutcome {
    /// The shell convention: the code, or 128 + signal.
    pub fn shell_status(&self) -> i32 {
        match (self.code, self.signal) {
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            _ => -1,
        }
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid 2-element array; pipe2 fills it on success.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain fcntl on an fd we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn killpg(pgid: i32, sig: i32) -> bool {
    // SAFETY: signalling a process group we created.
    unsafe { libc::killpg(pgid, sig) == 0 }
}

/// Non-reaping check whether `pid` has exited. Returns (code, signal) once it has.
fn peek_exit(pid: i32) -> io::Result<Option<(Option<i32>, Option<i32>)>> {
    // SAFETY: siginfo_t is plain data; waitid writes it.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let rc = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        if info.si_pid() == 0 {
            return Ok(None);
        }
        let status = info.si_status();
        match info.si_code {
            libc::CLD_EXITED => Ok(Some((Some(status), None))),
            _ => Ok(Some((None, Some(status)))),
        }
    }
}

struct Stream {
    fd: OwnedFd,
    open: bool,
    which: usize,
}

/// Run `spec` to completion (or timeout). See the module docs for the guarantees.
pub fn run(spec: &CommandSpec) -> io::Result<CommandOutcome> {
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

    let (out_r, out_w) = pipe()?;
    let (err_pair, err_w) = if spec.merge_stderr {
        (None, out_w.try_clone()?)
    } else {
        let (r, w) = pipe()?;
        (Some(r), w)
    };
    let started = Instant::now();
    // The leader dies with pvisor (PR_SET_PDEATHSIG) and is started without copying
    // pvisor's page tables (see `spawn`).
    let pid = spawn::spawn_spec(spec, out_w.as_raw_fd(), err_w.as_raw_fd())?;
    // The write ends now live only in the child.
    drop((out_w, err_w));
    if let Some(d) = &spec.groups {
        groups::register(d, pid as u32);
    }

    let mut streams = vec![Stream {
        fd: out_r,
        open: true,
        which: 0,
    }];
    if let Some(r) = err_pair {
        streams.push(Stream {
            fd: r,
            open: true,
            which: 1,
        });
    }
    for s in &streams {
        set_nonblocking(s.fd.as_raw_fd())?;
    }

    let mut captured = [Captured::default(), Captured::default()];
    let mut log_sections: [Vec<u8>; 1] = [Vec::new()]; // stderr buffered for the log when not merged
    let mut buf = vec![0u8; 64 * 1024];
    let mut exit: Option<(Option<i32>, Option<i32>)> = None;
    let mut exited_at: Option<Instant> = None;
    let mut timed_out = false;
    let mut killed_background = false;

    // The leader's exit wakes the loop at once (a pidfd), instead of a 10 ms tick.
    let exit_fd = pidfd(pid);
    loop {
        // Read whatever is available; wait for output, the leader's exit, the deadline or
        // the end of the drain grace, whichever comes first.
        let mut pfds: Vec<libc::pollfd> = streams
            .iter()
            .filter(|s| s.open)
            .map(|s| libc::pollfd {
                fd: s.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if let (None, Some(fd)) = (exit, &exit_fd) {
            pfds.push(libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let wait_ms: i32 = match (&exit_fd, exited_at, spec.timeout) {
            (None, _, _) => 10,
            (Some(_), Some(at), _) => ms_left(DRAIN_GRACE.saturating_sub(at.elapsed())),
            (Some(_), None, Some(t)) => ms_left(t.saturating_sub(started.elapsed())).min(250),
            (Some(_), None, None) => 250,
        };
        if !pfds.is_empty() {
            // SAFETY: pfds is a valid array of pollfd.
            let rc = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, wait_ms) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        } else if exit.is_none() {
            std::thread::sleep(Duration::from_millis(10));
        }
        for s in streams.iter_mut().filter(|s| s.open) {
            loop {
                // SAFETY: reading into our own buffer from an fd we own.
                let n = unsafe {
                    libc::read(
                        s.fd.as_raw_fd(),
                        buf.as_mut_ptr() as *mut libc::c_void,
                        buf.len(),
                    )
                };
                if n > 0 {
                    let data = &buf[..n as usize];
                    captured[s.which].push(data, spec.capture_head, spec.capture_tail);
                    if let Some(f) = log.as_mut() {
                        if s.which == 0 {
                            f.write_all(data)?;
                        } else {
                            // Keep stderr apart so the log reads stdout then stderr; bound it.
                            write_stderr_log(f, &mut log_sections[0], data)?;
                        }
                    }
                    continue;
                }
                if n == 0 {
                    s.open = false;
                    break;
                }
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => break,
                    io::ErrorKind::Interrupted => continue,
                    _ => {
                        s.open = false;
                        break;
                    }
                }
            }
        }

        if exit.is_none() {
            if let Some(st) = peek_exit(pid)? {
                // The leader is gone (not reaped yet): kill what it left in its group.
                if killpg(pid, 0) {
                    // Something besides the zombie leader may be alive; a zombie leader
                    // alone also answers signal 0, so look for other members.
                    if group_has_live_members(pid) {
                        killed_background = true;
                    }
                    killpg(pid, libc::SIGKILL);
                }
                exit = Some(st);
                exited_at = Some(Instant::now());
            } else if let Some(t) = spec.timeout {
                if started.elapsed() >= t {
                    timed_out = true;
                    killpg(pid, libc::SIGKILL);
                }
            }
        }
        if let Some(at) = exited_at {
            let all_closed = streams.iter().all(|s| !s.open);
            if all_closed || at.elapsed() >= DRAIN_GRACE {
                break;
            }
        }
    }

    // Reap the leader.
    spawn::reap(pid, true);
    if let Some(d) = &spec.groups {
        groups::unregister(d, pid as u32);
    }
    let duration = started.elapsed();
    if let Some(f) = log.as_mut() {
        if !log_sections[0].is_empty() {
            f.write_all(b"\n--- stderr ---\n")?;
            f.write_all(&log_sections[0])?;
        }
        f.flush()?;
    }
    let (code, signal) = exit.unwrap_or((None, Some(libc::SIGKILL)));
    let [stdout, stderr] = captured;
    Ok(CommandOutcome {
        code: if timed_out { None } else { code },
        signal: if timed_out {
            Some(libc::SIGKILL)
        } else {
            signal
        },
        timed_out,
        killed_background,
        duration,
        stdout,
        stderr,
        log_path: spec.log_path.clone(),
    })
}

/// Stderr kept for the log file, bounded at 64 MiB (the capture is bounded separately).
fn write_stderr_log(_f: &mut File, section: &mut Vec<u8>, data: &[u8]) -> io::Result<()> {
    const LIMIT: usize = 64 << 20;
    let room = LIMIT.saturating_sub(section.len());
    section.extend_from_slice(&data[..room.min(data.len())]);
    Ok(())
}

/// Whether any process other than the (zombie) leader belongs to process group `pgid`.
fn group_has_live_members(pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == pgid {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the parenthesised comm: state ppid pgrp ...
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if fields.len() > 2 && fields[2].parse::<i32>().ok() == Some(pgid) && fields[0] != "Z" {
            return true;
        }
    }
    false
}

/// A pidfd of `pid` (Linux 5.3 and later): readable once the process has exited. `None`
/// where the kernel has none; callers then poll on a short tick.
pub(crate) fn pidfd(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a non-negative result is a new fd we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Wait until `fd` is readable or `timeout` passes.
pub(crate) fn wait_readable(fd: &OwnedFd, timeout: Duration) {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms_left(timeout)) };
}

/// A poll timeout in whole milliseconds, at least 1.
fn ms_left(d: Duration) -> i32 {
    d.as_millis().clamp(1, i32::MAX as u128) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> CommandSpec {
        CommandSpec::new("/bin/bash", std::env::temp_dir())
            .arg("-c")
            .arg(script)
    }

    #[test]
    fn exit_code_and_output() {
        let out = run(&sh("echo out; echo err >&2; exit 3")).unwrap();
        assert_eq!(out.code, Some(3));
        assert_eq!(out.stdout.complete().unwrap(), b"out\n");
        assert_eq!(out.stderr.complete().unwrap(), b"err\n");
        assert!(!out.timed_out);
        assert!(!out.killed_background);
    }

    /// Started like `Command` starts a child: SIGPIPE back to the default (the Rust runtime
    /// ignores it in pvisor), no signal blocked, a parent-death signal, the run's
    /// mark; a program that does not exist is the same error as from `Command::spawn`.
    #[test]
    fn the_child_starts_clean() {
        let d = tempfile::tempdir().unwrap();
        let mut spec = CommandSpec::new("grep", d.path())
            .arg("-E")
            .arg(format!("^(SigIgn|SigBlk|PPid):|{}", groups::MARK_VAR));
        spec.args.push("/proc/self/status".into());
        spec.args.push("/proc/self/environ".into());
        spec.args.push("-a".into());
        spec.groups = Some(d.path().join("processes"));
        let out = run(&spec).unwrap();
        let text = String::from_utf8_lossy(&out.stdout.joined()).to_string();
        assert_eq!(out.code, Some(0), "{text}");
        // What pvisor's own parent had ignored stays ignored, as with `Command`.
        let ours = std::fs::read_to_string("/proc/self/status").unwrap();
        let ignored = |t: &str| {
            let hex = t
                .split("SigIgn:")
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap();
            u64::from_str_radix(hex, 16).unwrap()
        };
        let sigpipe = 1u64 << (libc::SIGPIPE - 1);
        assert_ne!(
            ignored(&ours) & sigpipe,
            0,
            "the Rust runtime ignores SIGPIPE"
        );
        assert_eq!(ignored(&text), ignored(&ours) & !sigpipe, "{text}");
        assert!(text.contains("SigBlk:\t0000000000000000"), "{text}");
        assert!(
            text.contains(&format!("PPid:\t{}", std::process::id())),
            "{text}"
        );
        assert!(
            text.contains(&groups::mark_of(spec.groups.as_ref().unwrap())),
            "{text}"
        );
        let e = run(&CommandSpec::new("no-such-program-here", d.path())).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let e = run(&CommandSpec::new(d.path(), d.path())).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EACCES), "{e}");
    }

    #[test]
    fn merged_stream_is_interleaved() {
        let mut spec = sh("echo a; echo b >&2; echo c");
        spec.merge_stderr = true;
        let out = run(&spec).unwrap();
        assert_eq!(out.stdout.complete().unwrap(), b"a\nb\nc\n");
        assert_eq!(out.stderr.total, 0);
    }

    #[test]
    fn timeout_kills_the_group() {
        let mut spec = sh("sleep 30 & sleep 30; echo never");
        spec.timeout = Some(Duration::from_millis(300));
        let t = Instant::now();
        let out = run(&spec).unwrap();
        assert!(out.timed_out);
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "took {:?}",
            t.elapsed()
        );
        assert_eq!(out.code, None);
        assert_eq!(out.signal, Some(libc::SIGKILL));
        assert_eq!(out.shell_status(), 137);
    }

    #[test]
    fn background_child_does_not_keep_it_alive() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("pid");
        let script = format!("sleep 100 & echo $! > {}; echo done", marker.display());
        let t = Instant::now();
        let out = run(&sh(&script)).unwrap();
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "took {:?}",
            t.elapsed()
        );
        assert_eq!(out.code, Some(0));
        assert_eq!(out.stdout.complete().unwrap(), b"done\n");
        assert!(out.killed_background);
        let pid: i32 = std::fs::read_to_string(&marker)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The background sleep is gone (possibly a zombie until init reaps it).
        std::thread::sleep(Duration::from_millis(100));
        let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                !s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(false);
        assert!(!alive, "background sleep {pid} still alive");
    }

    #[test]
    fn large_output_is_bounded_and_logged() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = sh("head -c 5000000 /dev/zero | tr '\\0' 'x'; echo END");
        spec.capture_head = 1000;
        spec.capture_tail = 1000;
        spec.log_path = Some(dir.path().join("logs/out.log"));
        let out = run(&spec).unwrap();
        assert_eq!(out.stdout.total, 5_000_004);
        assert!(out.stdout.truncated());
        assert_eq!(out.stdout.head.len(), 1000);
        assert_eq!(out.stdout.tail.len(), 1000);
        assert!(out.stdout.tail.ends_with(b"xEND\n"));
        assert_eq!(
            std::fs::metadata(dir.path().join("logs/out.log"))
                .unwrap()
                .len(),
            5_000_004
        );
    }

    #[test]
    fn env_and_cwd() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = CommandSpec::new("/bin/bash", dir.path())
            .arg("-c")
            .arg("echo $PV_X; pwd -P");
        spec.env.push(("PV_X".into(), "hello".into()));
        let out = run(&spec).unwrap();
        let text = String::from_utf8(out.stdout.complete().unwrap()).unwrap();
        let canon = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(text, format!("hello\n{}\n", canon.display()));
    }

    #[test]
    fn stdin_is_closed() {
        let out = run(&sh("cat; echo rc=$?")).unwrap();
        assert_eq!(out.stdout.complete().unwrap(), b"rc=0\n");
    }
}
