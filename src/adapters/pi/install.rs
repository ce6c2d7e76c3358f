//! Pi's installation: the npm package and the Node.js it needs, side by side in one prefix
//! (a run finds the entrypoint as for every agent: `crate::install::resolve`).

use std::path::Path;

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
