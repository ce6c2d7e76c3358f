//! Installing Claude Code (`pvisor agents install claude-code`): the npm package ships the
//! native binary as an optional dependency (`@anthropic-ai/claude-code-<platform>`); its
//! postinstall script (`install.cjs`) hard-links it over the `bin/claude.exe` stub. npm 11
//! warns that the script is "not yet covered by allowScripts" but runs it; should a future
//! npm skip it, it is run here.

use std::path::Path;

/// After `npm install` in `prefix`: make sure `bin/claude.exe` is the native binary.
pub fn link_native_binary(prefix: &Path) -> Result<(), String> {
    let pkg = prefix.join("node_modules/@anthropic-ai/claude-code");
    let exe = pkg.join("bin/claude.exe");
    let size = std::fs::metadata(&exe).map(|m| m.len()).unwrap_or(0);
    if size >= 1_000_000 || !exe.exists() {
        return Ok(());
    }
    let out = std::process::Command::new("node")
        .arg("install.cjs")
        .current_dir(&pkg)
        .output()
        .map_err(|e| format!("cannot run node install.cjs in {}: {e}", pkg.display()))?;
    if !out.status.success() {
        return Err(format!(
            "install.cjs (native binary link) failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}
