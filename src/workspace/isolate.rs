//! `--isolate`: the whole run — tools, the agent CLI, its runners — in a private mount
//! namespace where the run's own copy of the workspace is bound at the original path. Replays
//! of the same session (the same original path) then run side by side on one machine, and
//! nothing another run does to that path reaches this one.
//!
//! The copy is `<state>/isolated/workspace`, on the filesystem of the state directory (not a
//! tmpfs: directory order shows in Glob and `ls` output). `/tmp` is the run's own
//! `<state>/isolated/tmp`, with the host's `/tmp` entries the run itself needs (its state and
//! output directories, trajectory, agent) bound again inside it. A fresh run fills it from what the
//! host has at the workspace path (nothing when the path does not exist), once; a resumed run
//! binds the same copy again, so the journal's workspace checks see what the earlier attempt
//! left. The namespace is entered by the process itself before it starts any thread or
//! child: every process it starts inherits it.

use std::path::{Path, PathBuf};

/// Why a run cannot be isolated.
#[derive(Debug, thiserror::Error)]
pub enum IsolateError {
    #[error("cannot create a private mount namespace ({0}); run as root, or allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)")]
    Namespace(std::io::Error),
    #[error("cannot create a network namespace with only loopback ({0}); run as root, or allow unprivileged user namespaces")]
    Network(std::io::Error),
    #[error("cannot bind {from} at {to}: {source}")]
    Bind {
        from: PathBuf,
        to: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot copy the workspace {from} into {to}: {why}")]
    Copy {
        from: PathBuf,
        to: PathBuf,
        why: String,
    },
}

/// The run's own copy of the workspace.
pub fn copy_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("isolated").join("workspace")
}

/// Enter a private mount namespace with the run's copy of the workspace bound at
/// `workspace` and a private `/tmp`. The copy is made from `seed` (the host's directory
/// there, or another one) the first time; an interrupted copy is made again. `keep`: paths
/// the run needs (its state and output directories, the trajectory, the agent): the entries
/// of the host's `/tmp` that hold them are bound again inside the private one. Must be
/// called before the process starts threads or children.
pub fn enter(
    workspace: &Path,
    seed: &Path,
    state_dir: &Path,
    keep: &[&Path],
    network: bool,
) -> Result<PathBuf, IsolateError> {
    let copy = copy_dir(state_dir);
    if !copy.is_dir() {
        fill(seed, &copy)?;
    }
    let tmp = state_dir.join("isolated").join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|source| IsolateError::Bind {
        from: tmp.clone(),
        to: "/tmp".into(),
        source,
    })?;
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777));
    }
    unshare_mounts()?;
    if network {
        unshare_network()?;
    }
    // The host's /tmp entries the run needs, as detached copies of their mounts taken before
    // /tmp is covered, attached again inside the private /tmp.
    let mut held: Vec<(PathBuf, bool, std::os::fd::OwnedFd)> = Vec::new();
    for p in keep.iter().chain([&state_dir]) {
        let Some(top) = top_of_tmp(p) else { continue };
        if held.iter().any(|(t, _, _)| *t == top) || !top.exists() {
            continue;
        }
        let fd = clone_tree(&top)?;
        held.push((top.clone(), top.is_dir(), fd));
    }
    bind(&tmp, Path::new("/tmp"))?;
    for (top, dir, fd) in &held {
        let made = if *dir {
            std::fs::create_dir_all(top)
        } else {
            std::fs::File::create(top).map(|_| ())
        };
        made.map_err(|source| IsolateError::Bind {
            from: top.clone(),
            to: top.clone(),
            source,
        })?;
        attach(fd, top)?;
    }
    std::fs::create_dir_all(workspace).map_err(|source| IsolateError::Bind {
        from: copy.clone(),
        to: workspace.to_path_buf(),
        source,
    })?;
    bind(&copy, workspace)?;
    Ok(copy)
}

/// A network namespace of the run's own whose only interface, loopback, is up: 127.0.0.1
/// works (the bridge, the scripted model), nothing else is reachable.
fn unshare_network() -> Result<(), IsolateError> {
    // SAFETY: unshare of this thread's network namespace, then two ioctls on a socket this
    // function owns and closes, with an `ifreq` it initialises.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNET) != 0 {
            return Err(IsolateError::Network(std::io::Error::last_os_error()));
        }
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(IsolateError::Network(std::io::Error::last_os_error()));
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        let mut rc = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req);
        if rc == 0 {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            rc = libc::ioctl(fd, libc::SIOCSIFFLAGS, &req);
        }
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if rc != 0 {
            return Err(IsolateError::Network(err));
        }
    }
    Ok(())
}

/// Whether this process can isolate runs: root, or unprivileged user namespaces allowed.
pub fn available() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let max = read("/proc/sys/user/max_user_namespaces")
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0);
    max > 0 && read("/proc/sys/kernel/unprivileged_userns_clone").is_none_or(|v| v == "1")
}

/// `/tmp/<entry>` when `p` lies under `/tmp` (the entry of the host's `/tmp` holding it).
fn top_of_tmp(p: &Path) -> Option<PathBuf> {
    let rest = p.strip_prefix("/tmp").ok()?;
    let first = rest.components().next()?;
    Some(Path::new("/tmp").join(first))
}

/// Copy `from` (if it exists) to `to` with modes, times and links (`cp -a`, reflinks where
/// the filesystem has them), through a temporary name so that a copy is whole or absent.
fn fill(from: &Path, to: &Path) -> Result<(), IsolateError> {
    let err = |why: String| IsolateError::Copy {
        from: from.to_path_buf(),
        to: to.to_path_buf(),
        why,
    };
    let tmp = to.with_extension("partial");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| err(e.to_string()))?;
    if from.is_dir() {
        let out = std::process::Command::new("cp")
            .arg("-a")
            .arg("--reflink=auto")
            .arg(format!("{}/.", from.display()))
            .arg(&tmp)
            .output()
            .map_err(|e| err(format!("cp: {e}")))?;
        if !out.status.success() {
            return Err(err(String::from_utf8_lossy(&out.stderr).trim().to_string()));
        }
    }
    std::fs::rename(&tmp, to).map_err(|e| err(e.to_string()))
}

fn cstr(p: &Path) -> std::ffi::CString {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes()).expect("paths hold no NUL")
}

/// A private mount namespace (as root), or a user namespace owning one (unprivileged), with
/// every mount private so nothing bound here shows outside.
fn unshare_mounts() -> Result<(), IsolateError> {
    // SAFETY: unshare and mount are plain syscalls on this thread's namespaces.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            let first = std::io::Error::last_os_error();
            let (uid, gid) = (libc::geteuid(), libc::getegid());
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
                return Err(IsolateError::Namespace(first));
            }
            // The user namespace maps the caller to itself: files keep their owner.
            let _ = std::fs::write("/proc/self/setgroups", "deny");
            std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))
                .map_err(IsolateError::Namespace)?;
            std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))
                .map_err(IsolateError::Namespace)?;
        }
        let root = cstr(Path::new("/"));
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(IsolateError::Namespace(std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// A detached copy of the mount tree at `path` (`open_tree(OPEN_TREE_CLONE | AT_RECURSIVE)`).
fn clone_tree(path: &Path) -> Result<std::os::fd::OwnedFd, IsolateError> {
    use std::os::fd::FromRawFd;
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    const AT_RECURSIVE: libc::c_uint = 0x8000;
    let p = cstr(path);
    // SAFETY: open_tree returns a new file descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            p.as_ptr(),
            OPEN_TREE_CLONE | AT_RECURSIVE | libc::O_CLOEXEC as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(IsolateError::Bind {
            from: path.to_path_buf(),
            to: path.to_path_buf(),
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: a fresh descriptor this function owns.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// Attach the detached tree `fd` at `to` (`move_mount`).
fn attach(fd: &std::os::fd::OwnedFd, to: &Path) -> Result<(), IsolateError> {
    use std::os::fd::AsRawFd;
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;
    let (empty, t) = (cstr(Path::new("")), cstr(to));
    // SAFETY: move_mount of a detached tree onto an existing path.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if rc != 0 {
        return Err(IsolateError::Bind {
            from: to.to_path_buf(),
            to: to.to_path_buf(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

fn bind(from: &Path, to: &Path) -> Result<(), IsolateError> {
    let (f, t) = (cstr(from), cstr(to));
    // SAFETY: a bind mount between two existing directories.
    let rc = unsafe {
        libc::mount(
            f.as_ptr(),
            t.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(IsolateError::Bind {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_is_whole_and_keeps_times_and_modes() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        std::fs::create_dir_all(src.join("sub")).unwrap();
        std::fs::write(src.join("sub/f.txt"), "x").unwrap();
        let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        std::fs::File::options()
            .write(true)
            .open(src.join("sub/f.txt"))
            .unwrap()
            .set_modified(t)
            .unwrap();
        let to = d.path().join("state/isolated/workspace");
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        fill(&src, &to).unwrap();
        assert_eq!(std::fs::read(to.join("sub/f.txt")).unwrap(), b"x");
        let m = std::fs::metadata(to.join("sub/f.txt")).unwrap();
        assert_eq!(m.modified().unwrap(), t);
        assert!(!to.with_extension("partial").exists());
        // A workspace path that does not exist gives an empty copy.
        let empty = d.path().join("state2/isolated/workspace");
        std::fs::create_dir_all(empty.parent().unwrap()).unwrap();
        fill(&d.path().join("missing"), &empty).unwrap();
        assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    }
}
