//! Content-addressed blob store beside the journal: `blobs/<2 hex>/<62 hex>`, named by the
//! BLAKE3 hash of the content. Written temp → fsync → rename → fsync dir, so a blob name
//! that exists always holds its full content; an event referring to a blob is appended only
//! after the blob is durable.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct BlobStore {
    root: PathBuf,
}

/// Write a file atomically and durably.
pub fn write_atomic(target: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = target.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        target
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("blob"),
        std::process::id()
    ));
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, target)?;
    super::backend::sync_dir(dir)
}

impl BlobStore {
    pub fn new(state_dir: &Path) -> Self {
        BlobStore {
            root: state_dir.join("blobs"),
        }
    }
    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn path_of(&self, hash: &str) -> PathBuf {
        let (a, b) = hash.split_at(2.min(hash.len()));
        self.root.join(a).join(b)
    }
    /// Store bytes; returns the BLAKE3 hex name. Idempotent.
    pub fn put(&self, bytes: &[u8]) -> io::Result<String> {
        let hash = blake3::hash(bytes).to_hex().to_string();
        let p = self.path_of(&hash);
        if p.is_file() {
            return Ok(hash);
        }
        write_atomic(&p, bytes)?;
        Ok(hash)
    }
    pub fn get(&self, hash: &str) -> io::Result<Vec<u8>> {
        fs::read(self.path_of(hash))
    }
    /// Read and check the content matches its name.
    pub fn get_verified(&self, hash: &str) -> io::Result<Vec<u8>> {
        let b = self.get(hash)?;
        if blake3::hash(&b).to_hex().as_str() != hash {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("blob {hash} does not match its content"),
            ));
        }
        Ok(b)
    }
}
