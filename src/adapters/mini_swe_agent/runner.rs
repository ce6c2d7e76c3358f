//! The companion runner (`runner.py`, with `sitecustomize.py` that loads it): embedded here,
//! written into the run's state dir, and started as the **real** mini entrypoint with that
//! folder on `PYTHONPATH` and its configuration in `PVISOR_MINI_RUNNER` — so it runs in the
//! entrypoint's own interpreter and virtual environment (mini, litellm and their versions),
//! under any wrapper around it (libfaketime, a container). Its protocol is in
//! `docs/agents/mini-swe-agent.md`.
//!
//! Which mini: `--agent-entrypoint` when given, else the installation of the version the
//! trajectory records (`pvisor agents install mini-swe-agent@<version>`); the runner reports
//! its version and a different one is refused before any command runs.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The runner.
pub const RUNNER: &str = include_str!("runner.py");
/// The shim Python imports at start-up, which hands over to the runner.
pub const SHIM: &str = include_str!("sitecustomize.py");

/// The arguments the entrypoint gets: the runner takes over before mini's CLI reads them (an
/// entrypoint that does not load it prints mini's banner and an error, out of protocol).
pub const ARGS: &[&str] = &["--version"];

/// Write the runner and its shim into `<dir>/preload-<digest>/` (named by their digest, so
/// that a run never loads a stale copy); returns that folder.
pub fn materialize(dir: &Path) -> std::io::Result<PathBuf> {
    let mut h = blake3::Hasher::new();
    h.update(RUNNER.as_bytes());
    h.update(SHIM.as_bytes());
    let folder = dir.join(format!("preload-{}", &h.finalize().to_hex()[..12]));
    std::fs::create_dir_all(&folder)?;
    for (name, text) in [("runner.py", RUNNER), ("sitecustomize.py", SHIM)] {
        let p = folder.join(name);
        if std::fs::read(&p).ok().as_deref() != Some(text.as_bytes()) {
            let tmp = folder.join(format!(".{name}.tmp"));
            std::fs::write(&tmp, text)?;
            std::fs::rename(&tmp, &p)?;
        }
    }
    Ok(folder)
}

/// The environment of the runner (and of every command mini runs through it): the user's
/// basics, an own `HOME` below the state dir, mini's and litellm's offline switches, and the
/// preload. `PYTHONPATH` and `PVISOR_MINI_RUNNER` are removed by the shim before anything runs.
pub fn env(state_dir: &Path, preload: &Path, config: &Value) -> Vec<(String, String)> {
    let home = state_dir.join("mini/home");
    let _ = std::fs::create_dir_all(&home);
    // mini's global config dir (its `.env`): private to the run, kept with its state (a
    // temporary one made by the runner would outlive a runner that is killed); the runner
    // sets `MSWEA_GLOBAL_CONFIG_DIR` from it and keeps it out of the commands' environment.
    let config_dir = state_dir.join("mini/config");
    let _ = std::fs::create_dir_all(&config_dir);
    let mut env = vec![
        ("HOME".to_string(), home.display().to_string()),
        (
            "PVISOR_MINI_CONFIG_DIR".to_string(),
            config_dir.display().to_string(),
        ),
        ("LITELLM_LOCAL_MODEL_COST_MAP".into(), "True".into()),
        ("MSWEA_CONFIGURED".into(), "true".into()),
    ];
    for k in [
        "PATH", "LANG", "LC_ALL", "TZ", "USER", "TMPDIR", "SHELL", "TERM",
    ] {
        if let Ok(v) = std::env::var(k) {
            env.push((k.into(), v));
        }
    }
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    }
    if let Ok(v) = std::env::var("PYTHONPATH") {
        env.push(("PVISOR_MINI_PYTHONPATH".into(), v));
    }
    env.push(("PYTHONPATH".into(), preload.display().to_string()));
    env.push(("PVISOR_MINI_RUNNER".into(), config.to_string()));
    env
}

/// The mini entrypoint for a session recorded by `version`: `given`, else that version's
/// installation, else `mini` on PATH.
pub fn entrypoint_for(given: Option<&Path>, version: &str) -> Result<PathBuf, String> {
    if let Some(p) = given {
        return crate::install::resolve(Some(p), &super::ENTRY);
    }
    if let Some(p) = crate::install::installed(&super::ENTRY, version) {
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("mini"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "no mini {version} (the version this trajectory records): run `pvisor agents install {}@{version}`, or pass --agent-entrypoint",
                super::NAME
            )
        })
}

/// The version of the mini behind `entrypoint`, as its runner reports it (mini's CLI has
/// no `--version`): the shim in version mode prints `{"version": …}` and exits.
pub fn probe_version(entrypoint: &Path) -> Result<String, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let preload = materialize(dir.path()).map_err(|e| e.to_string())?;
    let out = std::process::Command::new(entrypoint)
        .args(ARGS)
        .current_dir(dir.path())
        .env_clear()
        .envs(env(
            dir.path(),
            &preload,
            &serde_json::json!({"mode": "version"}),
        ))
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", entrypoint.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .and_then(|v| v["version"].as_str().map(str::to_string))
        .ok_or_else(|| {
            format!(
                "{} did not report a mini-swe-agent version (is it mini's entrypoint?): {}",
                entrypoint.display(),
                String::from_utf8_lossy(&out.stderr)
                    .trim()
                    .chars()
                    .take(400)
                    .collect::<String>()
            )
        })
}
