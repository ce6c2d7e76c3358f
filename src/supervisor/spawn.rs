//! Starting a tool command without copying pvisor's page tables.
//!
//! `std::process::Command` with a `pre_exec` hook (which [`super::groups::die_with_parent`]
//! needs for `PR_SET_PDEATHSIG`) starts the child with `fork`: the kernel copies every page
//! table entry of pvisor, and the child's `execve` unmaps them again. With a resident set of
//! 100 MiB that was a third of pvisor's CPU time per tool call. [`spawn_leader`] starts the
//! child the way `posix_spawn` does, with `clone(CLONE_VM | CLONE_VFORK)`: the child runs on
//! its own small stack in pvisor's memory until its `execve`, while the calling thread
//! waits. Between the two it only makes system calls on data prepared beforehand (no
//! allocation, no lock): reset signal handlers and mask, arm `PR_SET_PDEATHSIG` (and exit if
//! pvisor already died), become a process-group leader, install stdin/stdout/stderr, change
//! directory, `execve`. An `execve` that fails reports its errno through a close-on-exec
//! pipe, so the caller gets the same `io::Error` as from `Command::spawn`.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What [`spawn_leader`] starts.
pub struct Leader<'a> {
    pub program: &'a OsStr,
    pub args: &'a [OsString],
    pub cwd: &'a Path,
    /// The whole environment of the child.
    pub env: Vec<(OsString, OsString)>,
    pub stdin: RawFd,
    pub stdout: RawFd,
    pub stderr: RawFd,
}

/// Everything the child touches, prepared before the clone.
struct ChildArgs {
    path: CString,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    cwd: CString,
    fds: [RawFd; 3],
    parent: libc::pid_t,
    mask: libc::sigset_t,
    report: RawFd,
}

fn cstring(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "nul byte in argument"))
}

/// `program` found as `Command` finds it: a path when it has a slash, else the first
/// executable file of that name in the `PATH` the child gets (pvisor's when unset).
fn resolve(program: &OsStr, env: &[(OsString, OsString)]) -> io::Result<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        let p = dir.join(program);
        if let Ok(m) = std::fs::metadata(&p) {
            use std::os::unix::fs::PermissionsExt;
            if m.is_file() && m.permissions().mode() & 0o111 != 0 {
                return Ok(p);
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: not found in PATH", program.to_string_lossy()),
    ))
}

/// Start `l` as the leader of a new process group that dies with the calling thread
/// (`PR_SET_PDEATHSIG`). Returns its pid; the caller reaps it.
pub fn spawn_leader(l: &Leader) -> io::Result<libc::pid_t> {
    let path = cstring(resolve(l.program, &l.env)?.as_os_str().as_bytes())?;
    let mut owned = vec![cstring(l.program.as_bytes())?];
    for a in l.args {
        owned.push(cstring(a.as_bytes())?);
    }
    let argv0: Vec<*const libc::c_char> = owned
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let env_owned: Vec<CString> = l
        .env
        .iter()
        .map(|(k, v)| {
            let mut b = k.as_bytes().to_vec();
            b.push(b'=');
            b.extend_from_slice(v.as_bytes());
            cstring(&b)
        })
        .collect::<io::Result<_>>()?;
    let envp: Vec<*const libc::c_char> = env_owned
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let (report_r, report_w) = {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two fds into the array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both fds were just created and are owned here.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    };
    // SAFETY: sigset_t is plain data, filled by sigfillset / pthread_sigmask.
    let (mut all, mut old): (libc::sigset_t, libc::sigset_t) =
        unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    let args = ChildArgs {
        path,
        argv: argv0,
        envp,
        cwd: cstring(l.cwd.as_os_str().as_bytes())?,
        fds: [l.stdin, l.stdout, l.stderr],
        parent: std::process::id() as libc::pid_t,
        mask: old,
        report: report_w.as_raw_fd(),
    };
    let mut args = args;
    let mut stack = vec![0u8; 64 * 1024];
    // SAFETY: the stack is ours and outlives the child's use of it (CLONE_VFORK suspends
    // this thread until the child's execve or exit); the child only reads `args`, which
    // outlive the clone too; every signal is blocked across the clone so that no handler
    // of pvisor runs on the child's stack.
    let pid = unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        args.mask = old;
        let top = stack.as_mut_ptr().add(stack.len()) as usize & !15;
        let pid = libc::clone(
            child,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &mut args as *mut ChildArgs as *mut libc::c_void,
        );
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        pid
    };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    drop(report_w);
    let mut errno = [0u8; 4];
    let n = loop {
        // SAFETY: reading into a 4-byte buffer we own.
        let n = unsafe { libc::read(report_r.as_raw_fd(), errno.as_mut_ptr().cast(), 4) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        break n;
    };
    drop(stack);
    if n == 4 {
        let mut status = 0;
        // SAFETY: reaping the child that failed to exec.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)));
    }
    Ok(pid)
}

/// The child, between clone and execve: system calls only.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the ChildArgs the parent keeps alive while this runs; every call below
    // is an async-signal-safe system call wrapper.
    unsafe {
        let a = &*(arg as *const ChildArgs);
        let fail = |a: &ChildArgs| -> ! {
            let e = (*libc::__errno_location()).to_ne_bytes();
            libc::write(a.report, e.as_ptr().cast(), 4);
            libc::_exit(127)
        };
        // Handlers pvisor installed must not run here; what pvisor ignores (SIGPIPE, which
        // the Rust runtime ignores) is restored to the default, as `Command` does.
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        for sig in 1..libc::SIGRTMAX() {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            let mut cur: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut cur) == 0
                && (cur.sa_sigaction != libc::SIG_DFL
                    && (cur.sa_sigaction != libc::SIG_IGN || sig == libc::SIGPIPE))
            {
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        if libc::getppid() != a.parent {
            libc::_exit(1); // pvisor died before the signal was armed
        }
        if libc::setpgid(0, 0) != 0 {
            fail(a);
        }
        for (target, &fd) in a.fds.iter().enumerate() {
            let target = target as RawFd;
            if fd == target {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
            } else if libc::dup2(fd, target) < 0 {
                fail(a);
            }
        }
        if libc::chdir(a.cwd.as_ptr()) != 0 {
            fail(a);
        }
        libc::sigprocmask(libc::SIG_SETMASK, &a.mask, std::ptr::null_mut());
        libc::execve(a.path.as_ptr(), a.argv.as_ptr(), a.envp.as_ptr());
        fail(a)
    }
}

/// The environment a child gets: pvisor's, without `remove`, with `set` on top.
pub fn child_env(remove: &[OsString], set: &[(OsString, OsString)]) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| !remove.contains(k) && !set.iter().any(|(s, _)| s == k))
        .collect();
    for (k, v) in set {
        env.retain(|(e, _)| e != k); // the last setting of a variable wins, as with `Command`
        env.push((k.clone(), v.clone()));
    }
    env
}

/// Start `spec` (its program, arguments, directory and environment, the run's mark when it
/// has a process list) as a group leader with stdin `/dev/null` and the given output fds.
pub fn spawn_spec(
    spec: &super::CommandSpec,
    stdout: RawFd,
    stderr: RawFd,
) -> io::Result<libc::pid_t> {
    let stdin = std::fs::File::open("/dev/null")?;
    let mut set = spec.env.clone();
    if let Some(dir) = &spec.groups {
        set.push((
            super::groups::MARK_VAR.into(),
            super::groups::mark_of(dir).into(),
        ));
    }
    spawn_leader(&Leader {
        program: &spec.program,
        args: &spec.args,
        cwd: &spec.cwd,
        env: child_env(&spec.env_remove, &set),
        stdin: stdin.as_raw_fd(),
        stdout,
        stderr,
    })
}

/// Reap child `pid`: its exit code, or 128 + the signal that ended it. `hang`: wait for it;
/// otherwise `None` while it runs.
pub fn reap(pid: libc::pid_t, hang: bool) -> Option<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, if hang { 0 } else { libc::WNOHANG }) };
        if r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if r != pid {
            return None;
        }
        return Some(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            128 + libc::WTERMSIG(status)
        });
    }
}
