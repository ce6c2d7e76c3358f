//! Workspace path confinement.
//!
//! [`confine`] resolves a path the way the kernel would when the file is opened (following
//! every symlink of the part that exists, then applying the rest lexically) and refuses the
//! result unless it lies inside the canonical workspace.

use crate::error::ExecError;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

/// How many symlinks may be followed while resolving one path (the kernel's own limit).
const MAX_SYMLINK_HOPS: usize = 40;

/// Resolve `path` inside `workspace` and return its canonical absolute form.
///
/// - A relative `path` is resolved against `workspace`.
/// - The nearest existing ancestor is canonicalized (symlinks followed); the components
///   that do not exist yet are appended lexically (`..` pops one level).
/// - A dangling symlink on the way is followed to its target (writing through it would
///   create the target), so it cannot be used to escape either.
/// - The result must be the workspace itself or lie below it; otherwise
///   [`ExecError::OutsideWorkspace`].
///
/// The workspace must exist.
pub fn confine(workspace: &Path, path: &Path) -> Result<PathBuf, ExecError> {
    let io_err = |source: io::Error| ExecError::Io {
        tool: "confine".into(),
        source,
    };
    let root = std::fs::canonicalize(workspace).map_err(io_err)?;
    let full = if path.is_absolute() {
        path.to_path_buf()
    } else {
        workspace.join(path)
    };
    let resolved = resolve(&full).map_err(io_err)?;
    if resolved.starts_with(&root) {
        Ok(resolved)
    } else {
        Err(ExecError::OutsideWorkspace {
            path: path.to_path_buf(),
            workspace: workspace.to_path_buf(),
        })
    }
}

/// [`confine`] for a path a tool writes: also refuses a regular file with more hard links
/// than the workspace holds (a link planted by an earlier command, e.g. `ln /etc/x f`, would
/// let the write change a file outside the workspace). A file whose every link lies inside
/// the workspace is written as usual.
pub fn confine_for_write(workspace: &Path, path: &Path) -> Result<PathBuf, ExecError> {
    use std::os::unix::fs::MetadataExt;
    let resolved = confine(workspace, path)?;
    let Ok(meta) = std::fs::symlink_metadata(&resolved) else {
        return Ok(resolved);
    };
    if !meta.is_file() || meta.nlink() <= 1 {
        return Ok(resolved);
    }
    let root = std::fs::canonicalize(workspace).map_err(|source| ExecError::Io {
        tool: "confine".into(),
        source,
    })?;
    let inside = links_below(&root, meta.dev(), meta.ino(), meta.nlink());
    if inside >= meta.nlink() {
        return Ok(resolved);
    }
    Err(ExecError::OutsideWorkspace {
        path: path.to_path_buf(),
        workspace: workspace.to_path_buf(),
    })
}

/// How many directory entries below `root` name the inode `(dev, ino)` (stops at `want`).
fn links_below(root: &Path, dev: u64, ino: u64, want: u64) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut found = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            if m.is_dir() {
                if m.dev() == dev {
                    stack.push(e.path());
                }
            } else if m.dev() == dev && m.ino() == ino {
                found += 1;
                if found >= want {
                    return found;
                }
            }
        }
    }
    found
}

/// Physical resolution of an absolute path whose tail may not exist.
fn resolve(full: &Path) -> io::Result<PathBuf> {
    let mut current = full.to_path_buf();
    let mut hops = 0usize;
    'outer: loop {
        // Peel components off the end until an existing prefix canonicalizes.
        let mut rest: Vec<OsString> = Vec::new();
        let mut probe = current.clone();
        loop {
            match std::fs::canonicalize(&probe) {
                Ok(base) => {
                    let mut out = base;
                    for comp in rest.iter().rev() {
                        if comp == ".." {
                            out.pop();
                        } else if comp != "." {
                            out.push(comp);
                        }
                    }
                    return Ok(out);
                }
                Err(e)
                    if e.kind() == io::ErrorKind::NotFound
                        || e.raw_os_error() == Some(libc::ENOTDIR) =>
                {
                    // A dangling symlink exists but does not canonicalize: follow it.
                    if let Ok(meta) = std::fs::symlink_metadata(&probe) {
                        if meta.file_type().is_symlink() {
                            hops += 1;
                            if hops > MAX_SYMLINK_HOPS {
                                return Err(io::Error::other("too many levels of symbolic links"));
                            }
                            let target = std::fs::read_link(&probe)?;
                            let parent = probe
                                .parent()
                                .map(Path::to_path_buf)
                                .unwrap_or_else(|| PathBuf::from("/"));
                            let mut next = if target.is_absolute() {
                                target
                            } else {
                                parent.join(target)
                            };
                            for comp in rest.iter().rev() {
                                next.push(comp);
                            }
                            current = next;
                            continue 'outer;
                        }
                    }
                    match probe.components().next_back() {
                        Some(Component::Normal(name)) => rest.push(name.to_os_string()),
                        Some(Component::ParentDir) => rest.push(OsString::from("..")),
                        Some(Component::CurDir) => rest.push(OsString::from(".")),
                        // Root or prefix that does not exist: nothing more to peel.
                        _ => return Err(e),
                    }
                    if !probe.pop() {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn ws() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        (dir, root)
    }

    #[test]
    fn relative_and_absolute_inside() {
        let (_d, root) = ws();
        std::fs::write(root.join("a.txt"), "x").unwrap();
        assert_eq!(
            confine(&root, Path::new("a.txt")).unwrap(),
            root.join("a.txt")
        );
        assert_eq!(
            confine(&root, &root.join("a.txt")).unwrap(),
            root.join("a.txt")
        );
        assert_eq!(confine(&root, Path::new(".")).unwrap(), root);
    }

    #[test]
    fn missing_tail_is_resolved_lexically() {
        let (_d, root) = ws();
        assert_eq!(
            confine(&root, Path::new("new/dir/f.txt")).unwrap(),
            root.join("new/dir/f.txt")
        );
        assert_eq!(
            confine(&root, Path::new("new/../g.txt")).unwrap(),
            root.join("g.txt")
        );
    }

    #[test]
    fn dotdot_cannot_escape() {
        let (_d, root) = ws();
        assert!(matches!(
            confine(&root, Path::new("../x")),
            Err(ExecError::OutsideWorkspace { .. })
        ));
        assert!(matches!(
            confine(&root, Path::new("new/../../x")),
            Err(ExecError::OutsideWorkspace { .. })
        ));
        assert!(matches!(
            confine(&root, Path::new("/etc/passwd")),
            Err(ExecError::OutsideWorkspace { .. })
        ));
    }

    #[test]
    fn symlink_escape_refused() {
        let (_d, root) = ws();
        let outside = tempfile::tempdir().unwrap();
        symlink(outside.path(), root.join("link")).unwrap();
        assert!(matches!(
            confine(&root, Path::new("link/secret")),
            Err(ExecError::OutsideWorkspace { .. })
        ));
        assert!(matches!(
            confine(&root, Path::new("link")),
            Err(ExecError::OutsideWorkspace { .. })
        ));
        // A symlink that stays inside is fine.
        std::fs::create_dir(root.join("sub")).unwrap();
        symlink(root.join("sub"), root.join("inside")).unwrap();
        assert_eq!(
            confine(&root, Path::new("inside/f")).unwrap(),
            root.join("sub/f")
        );
    }

    #[test]
    fn dangling_symlink_escape_refused() {
        let (_d, root) = ws();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("not-yet");
        symlink(&target, root.join("dangling")).unwrap();
        assert!(matches!(
            confine(&root, Path::new("dangling")),
            Err(ExecError::OutsideWorkspace { .. })
        ));
        symlink("../../../../../../../../tmp/zzz-nowhere", root.join("rel")).unwrap();
        assert!(matches!(
            confine(&root, Path::new("rel/f")),
            Err(ExecError::OutsideWorkspace { .. })
        ));
        // A dangling symlink pointing inside resolves inside.
        symlink("later.txt", root.join("soon")).unwrap();
        assert_eq!(
            confine(&root, Path::new("soon")).unwrap(),
            root.join("later.txt")
        );
    }

    #[test]
    fn symlink_loop_is_an_error_not_a_hang() {
        let (_d, root) = ws();
        symlink("b", root.join("a")).unwrap();
        symlink("a", root.join("b")).unwrap();
        assert!(confine(&root, Path::new("a/x")).is_err());
    }

    #[test]
    fn workspace_given_through_symlink() {
        let (_d, root) = ws();
        let holder = tempfile::tempdir().unwrap();
        let alias = holder.path().join("alias");
        symlink(&root, &alias).unwrap();
        assert_eq!(confine(&alias, Path::new("f")).unwrap(), root.join("f"));
        assert_eq!(confine(&alias, &alias.join("f")).unwrap(), root.join("f"));
    }

    #[test]
    fn a_write_through_a_hard_link_to_a_file_outside_is_refused() {
        let outside = tempfile::tempdir().unwrap();
        let (_d, w) = ws();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "keep").unwrap();
        std::fs::hard_link(&secret, w.join("planted")).unwrap();
        assert!(matches!(
            confine_for_write(&w, Path::new("planted")),
            Err(ExecError::OutsideWorkspace { .. })
        ));
        // Reading it is still confined the usual way (the entry is inside).
        assert!(confine(&w, Path::new("planted")).is_ok());
        // Two links that both live in the workspace: an ordinary file to write.
        std::fs::write(w.join("a"), "x").unwrap();
        std::fs::create_dir(w.join("sub")).unwrap();
        std::fs::hard_link(w.join("a"), w.join("sub/b")).unwrap();
        assert!(confine_for_write(&w, Path::new("a")).is_ok());
        assert!(confine_for_write(&w, Path::new("new-file")).is_ok());
    }
}
