//! Workspace checkpoints: exactly-once workspace effects for calls interrupted by a crash.
//!
//! Before a call that may change the workspace runs (a mutating tool call of the prefix, a
//! live step's tool calls), the engine takes a [`Checkpointer::take`]: a manifest of every
//! file, directory and symlink under the workspace (mode, modification time, content hash)
//! plus the content of the files that changed since the previous checkpoint, appended to one
//! *pack* blob (one fsync per checkpoint, whatever the number of files). Both are durable
//! before the event naming them is journaled, and that event before the call starts.
//!
//! When a resumed run finds the call in doubt (started, no outcome), [`restore`] puts the
//! workspace back exactly as the manifest lists it (content, modes, modification times;
//! paths created since are removed), so running the call again applies it once. Effects
//! outside the workspace (other directories, the network) are not undone.
//!
//! Files over [`MAX_STORED_FILE`] are listed without content (`unstored`); a restore that
//! finds one of them changed fails, and the engine falls back to the in-doubt policy.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::journal::BlobStore;

/// Files larger than this are listed but not stored.
pub const MAX_STORED_FILE: u64 = 64 << 20;

/// The manifest schema name.
pub const MANIFEST_SCHEMA: &str = "pvisor.workspace-manifest/v1";

/// One path under the workspace (relative, `/`-separated).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    File {
        mode: u32,
        mtime_ns: i64,
        len: u64,
        /// BLAKE3 hex of the content.
        hash: String,
        /// The pack blob holding the content, and where.
        pack: String,
        offset: u64,
        /// Change detection only (not restored).
        ino: u64,
        ctime_ns: i64,
    },
    /// Listed, content not stored (over the size cap).
    Unstored {
        mode: u32,
        mtime_ns: i64,
        len: u64,
        ino: u64,
        ctime_ns: i64,
    },
    Dir {
        mode: u32,
        mtime_ns: i64,
    },
    Symlink {
        target: String,
    },
    /// A FIFO, socket or device: left as it is.
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema: String,
    pub entries: BTreeMap<String, Entry>,
}

/// What one checkpoint stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    pub manifest_blob: String,
    pub entries: u64,
    pub new_bytes: u64,
    pub unstored: Vec<String>,
}

/// What a restore changed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Restored {
    pub written: u64,
    pub removed: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("workspace checkpoint: {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("workspace checkpoint manifest {blob}: {reason}")]
    BadManifest { blob: String, reason: String },
    /// The restore would need content that was never stored.
    #[error("cannot restore the workspace: {} changed since the checkpoint and its content was not stored (over {} MiB)", .paths.join(", "), MAX_STORED_FILE >> 20)]
    Unrestorable { paths: Vec<String> },
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> CheckpointError + '_ {
    move |source| CheckpointError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn mtime_ns(m: &fs::Metadata) -> i64 {
    m.mtime() * 1_000_000_000 + m.mtime_nsec()
}

fn ctime_ns(m: &fs::Metadata) -> i64 {
    m.ctime() * 1_000_000_000 + m.ctime_nsec()
}

/// Set a path's modification time (nanoseconds), leaving its access time (`utimensat`;
/// works on read-only files and directories the process owns).
fn set_mtime(path: &Path, ns: i64) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    let times = [
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        libc::timespec {
            tv_sec: ns.div_euclid(1_000_000_000) as libc::time_t,
            tv_nsec: ns.rem_euclid(1_000_000_000) as libc::c_long,
        },
    ];
    // SAFETY: `c` is a valid NUL-terminated path and `times` two initialized timespecs.
    let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Takes checkpoints of one workspace, re-reading only files that changed since the last one
/// (by size, modification time, inode and status-change time).
pub struct Checkpointer {
    workspace: PathBuf,
    /// Paths under the workspace that are never listed (the run's own state/output dirs).
    exclude: Vec<PathBuf>,
    known: HashMap<String, Entry>,
}

impl Checkpointer {
    pub fn new(workspace: &Path, exclude: &[PathBuf]) -> Self {
        let canon = |p: &Path| fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        Checkpointer {
            workspace: canon(workspace),
            exclude: exclude.iter().map(|p| canon(p)).collect(),
            known: HashMap::new(),
        }
    }

    /// Remember the files of a journaled manifest (after a restart), so that unchanged
    /// files are not stored again.
    pub fn seed(&mut self, blobs: &BlobStore, manifest_blob: &str) {
        if let Ok(m) = load_manifest(blobs, manifest_blob) {
            self.known.extend(
                m.entries
                    .into_iter()
                    .filter(|(_, e)| matches!(e, Entry::File { .. })),
            );
        }
    }

    /// Snapshot the workspace now. The pack and the manifest are durable when this returns.
    pub fn take(&mut self, blobs: &BlobStore) -> Result<Taken, CheckpointError> {
        let mut entries = BTreeMap::new();
        let mut pack = PackWriter::new(blobs)?;
        let mut unstored = Vec::new();
        let root = self.workspace.clone();
        self.walk(&root, &mut entries, &mut pack, &mut unstored)?;
        let (pack_name, new_bytes) = pack.finish()?;
        // Entries stored in this checkpoint's pack get its name.
        for e in entries.values_mut() {
            if let Entry::File { pack: p, .. } = e {
                if p.is_empty() {
                    *p = pack_name.clone().unwrap_or_default();
                }
            }
        }
        for (k, e) in &entries {
            if matches!(e, Entry::File { .. }) {
                self.known.insert(k.clone(), e.clone());
            }
        }
        let n = entries.len() as u64;
        let manifest = Manifest {
            schema: MANIFEST_SCHEMA.into(),
            entries,
        };
        let bytes = serde_json::to_vec(&manifest).expect("a manifest always serializes");
        let manifest_blob = blobs.put(&bytes).map_err(io_at(blobs.root()))?;
        Ok(Taken {
            manifest_blob,
            entries: n,
            new_bytes,
            unstored,
        })
    }

    fn walk(
        &self,
        dir: &Path,
        out: &mut BTreeMap<String, Entry>,
        pack: &mut PackWriter,
        unstored: &mut Vec<String>,
    ) -> Result<(), CheckpointError> {
        let rd = fs::read_dir(dir).map_err(io_at(dir))?;
        for e in rd {
            let e = e.map_err(io_at(dir))?;
            let path = e.path();
            if self.exclude.iter().any(|x| x == &path) {
                continue;
            }
            let rel = relative(&self.workspace, &path);
            let m = fs::symlink_metadata(&path).map_err(io_at(&path))?;
            let ft = m.file_type();
            if ft.is_symlink() {
                let t = fs::read_link(&path).map_err(io_at(&path))?;
                out.insert(
                    rel,
                    Entry::Symlink {
                        target: t.to_string_lossy().into_owned(),
                    },
                );
            } else if ft.is_dir() {
                out.insert(
                    rel,
                    Entry::Dir {
                        mode: m.permissions().mode(),
                        mtime_ns: mtime_ns(&m),
                    },
                );
                self.walk(&path, out, pack, unstored)?;
            } else if ft.is_file() {
                let entry = self.file_entry(&rel, &path, &m, pack)?;
                if matches!(entry, Entry::Unstored { .. }) {
                    unstored.push(rel.clone());
                }
                out.insert(rel, entry);
            } else {
                out.insert(rel, Entry::Other);
            }
        }
        Ok(())
    }

    fn file_entry(
        &self,
        rel: &str,
        path: &Path,
        m: &fs::Metadata,
        pack: &mut PackWriter,
    ) -> Result<Entry, CheckpointError> {
        let (mode, mt, len, ino, ct) = (
            m.permissions().mode(),
            mtime_ns(m),
            m.len(),
            m.ino(),
            ctime_ns(m),
        );
        if let Some(Entry::File {
            mode: km,
            mtime_ns: kt,
            len: kl,
            ino: ki,
            ctime_ns: kc,
            ..
        }) = self.known.get(rel)
        {
            if (*km, *kt, *kl, *ki, *kc) == (mode, mt, len, ino, ct) {
                return Ok(self.known[rel].clone());
            }
        }
        if len > MAX_STORED_FILE {
            return Ok(Entry::Unstored {
                mode,
                mtime_ns: mt,
                len,
                ino,
                ctime_ns: ct,
            });
        }
        let bytes = fs::read(path).map_err(io_at(path))?;
        let hash = blake3::hash(&bytes).to_hex().to_string();
        // Same content already stored (another path, or a rewrite with equal bytes).
        if let Some((pack_name, offset)) = self.known.values().find_map(|e| match e {
            Entry::File {
                hash: h,
                pack,
                offset,
                ..
            } if *h == hash && !pack.is_empty() => Some((pack.clone(), *offset)),
            _ => None,
        }) {
            return Ok(Entry::File {
                mode,
                mtime_ns: mt,
                len: bytes.len() as u64,
                hash,
                pack: pack_name,
                offset,
                ino,
                ctime_ns: ct,
            });
        }
        let offset = pack.append(&bytes)?;
        Ok(Entry::File {
            mode,
            mtime_ns: mt,
            len: bytes.len() as u64,
            hash,
            pack: String::new(),
            offset,
            ino,
            ctime_ns: ct,
        })
    }
}

fn relative(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .into_owned()
}

/// Content of new files, appended to a temp file and adopted into the blob store under the
/// BLAKE3 hash of the whole pack.
struct PackWriter {
    tmp: PathBuf,
    file: Option<fs::File>,
    hasher: blake3::Hasher,
    len: u64,
    blobs: BlobStore,
}

impl PackWriter {
    fn new(blobs: &BlobStore) -> Result<Self, CheckpointError> {
        fs::create_dir_all(blobs.root()).map_err(io_at(blobs.root()))?;
        Ok(PackWriter {
            tmp: blobs
                .root()
                .join(format!(".pack-{}.tmp", std::process::id())),
            file: None,
            hasher: blake3::Hasher::new(),
            len: 0,
            blobs: blobs.clone(),
        })
    }
    fn append(&mut self, bytes: &[u8]) -> Result<u64, CheckpointError> {
        if self.file.is_none() {
            self.file = Some(fs::File::create(&self.tmp).map_err(io_at(&self.tmp))?);
        }
        let f = self.file.as_mut().expect("created above");
        f.write_all(bytes).map_err(io_at(&self.tmp))?;
        self.hasher.update(bytes);
        let at = self.len;
        self.len += bytes.len() as u64;
        Ok(at)
    }
    /// The pack's blob name (None when nothing new was stored) and its size.
    fn finish(self) -> Result<(Option<String>, u64), CheckpointError> {
        let Some(f) = self.file else {
            return Ok((None, 0));
        };
        f.sync_all().map_err(io_at(&self.tmp))?;
        drop(f);
        let name = self.hasher.finalize().to_hex().to_string();
        let target = self.blobs.path_of(&name);
        let dir = target.parent().expect("blob paths have a parent");
        fs::create_dir_all(dir).map_err(io_at(dir))?;
        fs::rename(&self.tmp, &target).map_err(io_at(&target))?;
        crate::journal::backend::sync_dir(dir).map_err(io_at(dir))?;
        Ok((Some(name), self.len))
    }
}

/// Read and check a manifest blob.
pub fn load_manifest(blobs: &BlobStore, blob: &str) -> Result<Manifest, CheckpointError> {
    let bytes = blobs
        .get_verified(blob)
        .map_err(io_at(&blobs.path_of(blob)))?;
    let m: Manifest = serde_json::from_slice(&bytes).map_err(|e| CheckpointError::BadManifest {
        blob: blob.into(),
        reason: e.to_string(),
    })?;
    if m.schema != MANIFEST_SCHEMA {
        return Err(CheckpointError::BadManifest {
            blob: blob.into(),
            reason: format!("schema {}", m.schema),
        });
    }
    for k in m.entries.keys() {
        let p = Path::new(k);
        if k.is_empty()
            || p.is_absolute()
            || p.components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(CheckpointError::BadManifest {
                blob: blob.into(),
                reason: format!("path {k:?} is not inside the workspace"),
            });
        }
    }
    Ok(m)
}

/// Put `workspace` back to the manifest `blob` lists. Paths under `exclude` are left alone.
pub fn restore(
    workspace: &Path,
    exclude: &[PathBuf],
    blobs: &BlobStore,
    blob: &str,
) -> Result<Restored, CheckpointError> {
    let m = load_manifest(blobs, blob)?;
    let ws = fs::canonicalize(workspace).map_err(io_at(workspace))?;
    let exclude: Vec<PathBuf> = exclude
        .iter()
        .map(|p| fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .collect();
    // Unstored files must be as they were.
    let mut bad = Vec::new();
    for (k, e) in &m.entries {
        if let Entry::Unstored {
            mode,
            mtime_ns: t,
            len,
            ino,
            ctime_ns: c,
        } = e
        {
            let same = fs::symlink_metadata(ws.join(k)).is_ok_and(|x| {
                (
                    x.permissions().mode(),
                    mtime_ns(&x),
                    x.len(),
                    x.ino(),
                    ctime_ns(&x),
                ) == (*mode, *t, *len, *ino, *c)
            });
            if !same {
                bad.push(k.clone());
            }
        }
    }
    if !bad.is_empty() {
        return Err(CheckpointError::Unrestorable { paths: bad });
    }
    let mut r = Restored::default();
    // 1. Remove what the manifest does not list (or lists as another kind).
    let mut present = Vec::new();
    list(&ws, &ws, &exclude, &mut present)?;
    for (rel, ft) in present.iter().rev() {
        let keep = matches!(
            (m.entries.get(rel), ft),
            (Some(Entry::Dir { .. }), Kind::Dir)
                | (
                    Some(Entry::File { .. } | Entry::Unstored { .. }),
                    Kind::File
                )
                | (Some(Entry::Symlink { .. }), Kind::Symlink)
                | (Some(Entry::Other), Kind::Other)
        );
        if !keep {
            let p = ws.join(rel);
            if *ft == Kind::Dir {
                fs::remove_dir_all(&p).map_err(io_at(&p))?;
            } else {
                fs::remove_file(&p).map_err(io_at(&p))?;
            }
            r.removed += 1;
        }
    }
    // 2. Directories, then files and symlinks (BTreeMap order: parents first).
    for (rel, e) in &m.entries {
        let p = ws.join(rel);
        match e {
            Entry::Dir { .. } => {
                if !p.is_dir() {
                    fs::create_dir_all(&p).map_err(io_at(&p))?;
                }
            }
            Entry::File {
                mode,
                mtime_ns: t,
                len,
                hash,
                pack,
                offset,
                ..
            } => {
                let cur = fs::symlink_metadata(&p).ok();
                let same_content = cur.as_ref().is_some_and(|x| {
                    x.len() == *len
                        && fs::read(&p)
                            .map(|b| blake3::hash(&b).to_hex().to_string() == *hash)
                            .unwrap_or(false)
                });
                let same_meta = cur
                    .as_ref()
                    .is_some_and(|x| x.permissions().mode() == *mode && mtime_ns(x) == *t);
                if same_content && same_meta {
                    continue;
                }
                if !same_content {
                    let bytes = read_pack(blobs, pack, *offset, *len, hash)?;
                    let tmp = p.with_file_name(format!(
                        ".{}.pvisor-restore",
                        p.file_name().and_then(|n| n.to_str()).unwrap_or("f")
                    ));
                    fs::write(&tmp, &bytes).map_err(io_at(&tmp))?;
                    fs::rename(&tmp, &p).map_err(io_at(&p))?;
                }
                fs::set_permissions(&p, fs::Permissions::from_mode(*mode)).map_err(io_at(&p))?;
                set_mtime(&p, *t).map_err(io_at(&p))?;
                r.written += 1;
            }
            Entry::Symlink { target } => {
                let cur = fs::read_link(&p).ok();
                if cur.as_deref() != Some(Path::new(target)) {
                    let _ = fs::remove_file(&p);
                    std::os::unix::fs::symlink(target, &p).map_err(io_at(&p))?;
                    r.written += 1;
                }
            }
            Entry::Unstored { .. } | Entry::Other => {}
        }
    }
    // 3. Directory modes and times, deepest first (writing inside a directory moves its mtime).
    for (rel, e) in m.entries.iter().rev() {
        if let Entry::Dir { mode, mtime_ns: t } = e {
            let p = ws.join(rel);
            fs::set_permissions(&p, fs::Permissions::from_mode(*mode)).map_err(io_at(&p))?;
            set_mtime(&p, *t).map_err(io_at(&p))?;
        }
    }
    Ok(r)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

fn list(
    root: &Path,
    dir: &Path,
    exclude: &[PathBuf],
    out: &mut Vec<(String, Kind)>,
) -> Result<(), CheckpointError> {
    let mut names: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(io_at(dir))?
        .flatten()
        .map(|e| e.path())
        .collect();
    names.sort();
    for p in names {
        if exclude.iter().any(|x| x == &p) {
            continue;
        }
        let m = fs::symlink_metadata(&p).map_err(io_at(&p))?;
        let ft = m.file_type();
        let kind = if ft.is_symlink() {
            Kind::Symlink
        } else if ft.is_dir() {
            Kind::Dir
        } else if ft.is_file() {
            Kind::File
        } else {
            Kind::Other
        };
        out.push((relative(root, &p), kind));
        if kind == Kind::Dir {
            list(root, &p, exclude, out)?;
        }
    }
    Ok(())
}

fn read_pack(
    blobs: &BlobStore,
    pack: &str,
    offset: u64,
    len: u64,
    hash: &str,
) -> Result<Vec<u8>, CheckpointError> {
    let path = blobs.path_of(pack);
    let mut f = fs::File::open(&path).map_err(io_at(&path))?;
    f.seek(SeekFrom::Start(offset)).map_err(io_at(&path))?;
    let mut buf = vec![0u8; len as usize];
    f.read_exact(&mut buf).map_err(io_at(&path))?;
    if blake3::hash(&buf).to_hex().as_str() != hash {
        return Err(CheckpointError::BadManifest {
            blob: pack.into(),
            reason: format!("content at offset {offset} does not match its hash"),
        });
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn write(p: &Path, s: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    }

    #[test]
    fn restore_undoes_changes_creations_and_removals() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        let state = t.path().join("state");
        write(&ws.join("a.txt"), "one\n");
        write(&ws.join("sub/b.txt"), "two\n");
        std::os::unix::fs::symlink("a.txt", ws.join("link")).unwrap();
        let old = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        fs::File::options()
            .write(true)
            .open(ws.join("a.txt"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        let blobs = BlobStore::new(&state);
        let mut cp = Checkpointer::new(&ws, &[]);
        let taken = cp.take(&blobs).unwrap();
        assert_eq!(taken.entries, 4);
        assert_eq!(taken.new_bytes, 8);
        // A call changes, creates and removes.
        write(&ws.join("a.txt"), "changed\n");
        write(&ws.join("new/c.txt"), "three\n");
        fs::remove_file(ws.join("sub/b.txt")).unwrap();
        fs::set_permissions(ws.join("a.txt"), fs::Permissions::from_mode(0o600)).unwrap();
        let r = restore(&ws, &[], &blobs, &taken.manifest_blob).unwrap();
        assert!(r.removed >= 2 && r.written >= 2, "{r:?}");
        assert_eq!(fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
        assert_eq!(fs::read_to_string(ws.join("sub/b.txt")).unwrap(), "two\n");
        assert!(!ws.join("new").exists());
        let m = fs::metadata(ws.join("a.txt")).unwrap();
        assert_eq!(m.modified().unwrap(), old);
        assert_eq!(m.permissions().mode() & 0o777, 0o644);
        assert_eq!(fs::read_link(ws.join("link")).unwrap(), Path::new("a.txt"));
        // A second checkpoint stores nothing new for unchanged content.
        let again = cp.take(&blobs).unwrap();
        assert_eq!(again.new_bytes, 0, "{again:?}");
        assert_eq!(
            restore(&ws, &[], &blobs, &again.manifest_blob).unwrap(),
            Restored::default()
        );
    }

    #[test]
    fn excluded_paths_are_neither_listed_nor_removed() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        write(&ws.join("a.txt"), "a");
        let state = ws.join(".state");
        let blobs = BlobStore::new(&state);
        let mut cp = Checkpointer::new(&ws, std::slice::from_ref(&state));
        let taken = cp.take(&blobs).unwrap();
        assert_eq!(taken.entries, 1);
        let r = restore(
            &ws,
            std::slice::from_ref(&state),
            &blobs,
            &taken.manifest_blob,
        )
        .unwrap();
        assert_eq!(r, Restored::default());
        assert!(state.join("blobs").is_dir());
    }

    #[test]
    fn a_manifest_naming_a_path_outside_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let blobs = BlobStore::new(t.path());
        let m =
            serde_json::json!({"schema": MANIFEST_SCHEMA, "entries": {"../x": {"kind": "other"}}});
        let b = blobs.put(m.to_string().as_bytes()).unwrap();
        assert!(matches!(
            load_manifest(&blobs, &b),
            Err(CheckpointError::BadManifest { .. })
        ));
    }
}
