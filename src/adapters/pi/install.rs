//! Pi's installation: the npm package and the Node.js it needs, side by side in one prefix,
//! and how a run finds both from an entrypoint.

use std::path::{Path, PathBuf};

/// After `npm install` in `prefix` (and the `node` helper in `<prefix>/bin`): the entrypoint
/// `node_modules/.bin/pi` runs Pi's CLI with that node, whatever node is on PATH.
pub fn entrypoint_with_its_node(prefix: &Path) -> Result<(), String> {
    let bin = prefix.join("node_modules/.bin/pi");
    let cli = prefix
        .join("node_modules")
        .join(super::PACKAGE)
        .join("dist/cli.js");
    if !cli.is_file() {
        return Err(format!("{} is missing after npm install", cli.display()));
    }
    let script = format!(
        "#!/bin/sh\n# Written by `pvisor agents install`: Pi {} needs Node >= 22.19, installed beside it.\nhere=\"$(cd \"$(dirname \"$0\")/../..\" && pwd)\"\nexec \"$here/bin/node\" \"$here/node_modules/{}/dist/cli.js\" \"$@\"\n",
        super::SUPPORTED_VERSION,
        super::PACKAGE
    );
    let _ = std::fs::remove_file(&bin);
    std::fs::write(&bin, script).map_err(|e| format!("{}: {e}", bin.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("{}: {e}", bin.display()))
}

/// The Pi entrypoint a run uses: the one it was given (`--agent-entrypoint`), else the
/// pinned installation of `pvisor agents install`, else `pi` on PATH.
pub fn entrypoint(given: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    let root = crate::install::agents_root();
    let pinned = crate::install::entrypoint(
        &crate::install::prefix(&root, &super::ENTRY, super::SUPPORTED_VERSION),
        &super::ENTRY,
    );
    if pinned.is_file() {
        return Ok(pinned);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("pi"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "no Pi entrypoint: run `pvisor agents install {}` (Pi {} with the Node >= 22.19 it needs) or pass --agent-entrypoint",
                super::NAME,
                super::SUPPORTED_VERSION
            )
        })
}
