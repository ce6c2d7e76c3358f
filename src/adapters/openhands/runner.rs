//! The companion runner (`runner.py`): embedded here, written into the run's state dir and
//! started with the Python of the installed SDK (`pvisor agents install openhands`, or
//! `--agent-entrypoint <venv>/bin/python`, which may be a wrapper such as libfaketime's that
//! ends in `exec python "$@"`). Its modes: tools (JSON lines, one call per line), messages
//! (the Chat Completions prefix of a store), continue (the SDK's own `run()`), version.
//!
//! Everything OpenHands writes outside the workspace goes below the run's state dir: its
//! `HOME` (`.openhands/`, `.bash_history`), `TMPDIR` (file_editor's undo history) and the
//! tmux server of the terminal tool (`TMUX_TMPDIR`: OpenHands names its socket `openhands`,
//! shared by every run of the user otherwise). [`kill_tmux`] ends that server, which outlives
//! a killed runner.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The runner.
pub const RUNNER: &str = include_str!("runner.py");

/// Write the runner into `<dir>/runner-<digest>.py` (named by its digest, so that a run
/// never starts a stale copy); returns its path.
pub fn materialize(dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let digest = blake3::hash(RUNNER.as_bytes()).to_hex();
    let path = dir.join(format!("runner-{}.py", &digest[..12]));
    if std::fs::read(&path).ok().as_deref() != Some(RUNNER.as_bytes()) {
        let tmp = dir.join(format!(".runner-{}.tmp", std::process::id()));
        std::fs::write(&tmp, RUNNER)?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(path)
}

/// The folder of OpenHands' files for a run: `<state>/openhands`.
pub fn home_of(state_dir: &Path) -> PathBuf {
    state_dir.join("openhands")
}

/// The tmux folder of a run (`TMUX_TMPDIR`): below the state dir unless that path is too long
/// for a socket address (108 bytes), then a folder in /tmp named by the state dir's digest.
pub fn tmux_dir(state_dir: &Path) -> PathBuf {
    let d = home_of(state_dir).join("tmux");
    if d.as_os_str().len() <= 70 {
        return d;
    }
    let h = blake3::hash(state_dir.as_os_str().as_encoded_bytes()).to_hex();
    std::env::temp_dir().join(format!("pvisor-tmux-{}", &h[..16]))
}

/// End the run's tmux server (its shells and their jobs), if one runs.
pub fn kill_tmux(state_dir: &Path) {
    let dir = tmux_dir(state_dir);
    if !dir.exists() {
        return;
    }
    let _ = std::process::Command::new("tmux")
        .args(["-L", "openhands", "kill-server"])
        .env("TMUX_TMPDIR", &dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// The environment of the runner and of every command its tools run: the user's basics, an
/// own `HOME`, `TMPDIR` and `TMUX_TMPDIR` below the state dir, litellm's offline price list,
/// no banner, and the runner's configuration (removed by the runner before anything runs).
pub fn env(state_dir: &Path, config: &Value) -> Vec<(String, String)> {
    let oh = home_of(state_dir);
    let (home, tmp, tmux) = (oh.join("home"), oh.join("tmp"), tmux_dir(state_dir));
    for d in [&home, &tmp, &tmux] {
        let _ = std::fs::create_dir_all(d);
    }
    let mut env = vec![
        ("HOME".to_string(), home.display().to_string()),
        ("TMPDIR".into(), tmp.display().to_string()),
        ("TMUX_TMPDIR".into(), tmux.display().to_string()),
        ("LITELLM_LOCAL_MODEL_COST_MAP".into(), "True".into()),
        ("OPENHANDS_SUPPRESS_BANNER".into(), "1".into()),
    ];
    for k in ["PATH", "LANG", "LC_ALL", "TZ", "USER", "SHELL", "TERM"] {
        if let Ok(v) = std::env::var(k) {
            env.push((k.into(), v));
        }
    }
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    }
    env.push(("PVISOR_OPENHANDS_RUNNER".into(), config.to_string()));
    env
}

/// The SDK's Python for a run: `given` (`--agent-entrypoint`), else the pinned installation.
pub fn entrypoint_for(given: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = given {
        return crate::install::resolve(Some(p), &super::ENTRY);
    }
    crate::install::installed(&super::ENTRY, super::PINNED).ok_or_else(|| {
        format!(
            "the OpenHands SDK {} is not installed: run `pvisor agents install {}`, or pass --agent-entrypoint <venv>/bin/python",
            super::PINNED,
            super::NAME
        )
    })
}

/// The `openhands-sdk` version importable by the Python at `entrypoint`.
pub fn probe_version(entrypoint: &Path) -> Result<String, String> {
    let out = std::process::Command::new(entrypoint)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('openhands-sdk'))",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", entrypoint.display()))?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() && crate::kit::registry::numbers(&v).is_some() {
        return Ok(v);
    }
    Err(format!(
        "{} has no openhands-sdk (is it the Python of the SDK's venv? `pvisor agents install {}` makes one): {}",
        entrypoint.display(),
        super::NAME,
        String::from_utf8_lossy(&out.stderr)
            .trim()
            .lines()
            .last()
            .unwrap_or("")
    ))
}

/// Run the runner once in a one-shot mode (`messages`) and return its final JSON line.
pub fn one_shot(
    entrypoint: &Path,
    state_dir: &Path,
    cwd: &Path,
    config: &Value,
) -> Result<Value, String> {
    let dir = home_of(state_dir);
    let script = materialize(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let log = state_dir.join("logs/openhands-messages.stderr.log");
    if let Some(d) = log.parent() {
        let _ = std::fs::create_dir_all(d);
    }
    let err = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let out = std::process::Command::new(entrypoint)
        .arg(&script)
        .current_dir(cwd)
        .env_clear()
        .envs(env(state_dir, config))
        .stdin(std::process::Stdio::null())
        .stderr(err)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", entrypoint.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok());
    match last {
        Some(v) if v["ok"] == true => Ok(v),
        Some(v) => Err(v["error"].as_str().unwrap_or("failed").to_string()),
        None => Err(format!(
            "the OpenHands runner printed no result (exit {:?}; see {})",
            out.status.code(),
            log.display()
        )),
    }
}
