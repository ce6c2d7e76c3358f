//! `--isolate`: the whole run — tools, the agent CLI, its runners — in a private mount
//! namespace where the run's own copy of the workspace is bound at the original path. Replays
//! of the same session (the same original path) then run side by side on one machine, and
//! nothing another run does to that path reaches this one.
//!
//! The copy is `<state>/isolated/workspace`, on the filesystem of the state directory (not a
//! tmpfs: directory order shows in Glob and `ls` output). A fresh run fills it from what the
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
/// `workspace`. The copy is made from `seed` (the host's directory there, or another one)
/// the first time; an interrupted copy is made again. Must be called before the process
/// starts threads or children.
pub fn enter(workspace: &Path, seed: &Path, state_dir: &Path) -> Result<PathBuf, IsolateError> {
    let copy = copy_dir(state_dir);
    if !copy.is_dir() {
        fill(seed, &copy)?;
    }
    unshare_mounts()?;
    std::fs::create_dir_all(workspace).map_err(|source| IsolateError::Bind {
        from: copy.clone(),
        to: workspace.to_path_buf(),
        source,
    })?;
    bind(&copy, workspace)?;
    Ok(copy)
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
