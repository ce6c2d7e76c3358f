//! The Node runner (`runner.mjs`, embedded here and written into the run's state dir): Pi's
//! own tool implementations and SDK, driven over JSON lines, inside the real Pi entrypoint
//! (`<pi> --version` with the runner preloaded: [`command_env`]). A runner that cannot start,
//! dies or answers out of protocol is an executor error, never a panic.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::kit::companion::{Companion, CompanionCommand};

/// The runner script.
pub const SCRIPT: &str = include_str!("runner.mjs");

/// Write the runner into `dir` (named by its digest, so a run never executes a stale copy).
pub fn materialize(dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let name = format!(
        "runner-{}.mjs",
        &blake3::hash(SCRIPT.as_bytes()).to_hex()[..12]
    );
    let path = dir.join(name);
    if std::fs::read(&path).ok().as_deref() != Some(SCRIPT.as_bytes()) {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, SCRIPT)?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(path)
}

/// The arguments Pi's entrypoint gets: the runner takes over before Pi's CLI reads them; an
/// entrypoint that does not load it prints its version instead.
pub const ARGS: &[&str] = &["--version"];

/// The environment that makes Pi's entrypoint run the runner with `config`.
pub fn command_env(script: &Path, config: &Value) -> Vec<(String, String)> {
    vec![
        (
            "NODE_OPTIONS".into(),
            format!("--import=file://{}", script.display()),
        ),
        ("PVISOR_PI_RUNNER".into(), config.to_string()),
    ]
}

/// A running `runner.mjs` in tools mode (a [`Companion`]).
pub struct ToolProcess {
    inner: Companion,
}

/// What Pi's agent loop would store for one call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolAnswer {
    pub content: Value,
    pub details: Option<Value>,
    pub is_error: bool,
}

impl ToolProcess {
    /// Start the runner in tools mode inside `entrypoint` with exactly `env` (plus the
    /// runner's), its stderr into `stderr_path`.
    pub fn start(
        entrypoint: &Path,
        script: &Path,
        env: &[(String, String)],
        cwd: &Path,
        stderr_path: &Path,
        groups: Option<std::path::PathBuf>,
    ) -> Result<ToolProcess, String> {
        let mut env = env.to_vec();
        env.extend(command_env(script, &json!({"mode": "tools"})));
        let inner = Companion::start(CompanionCommand {
            program: entrypoint.to_path_buf(),
            args: ARGS.iter().map(|a| a.to_string()).collect(),
            env,
            cwd: cwd.to_path_buf(),
            stderr_log: stderr_path.to_path_buf(),
            name: "the Pi runner (Pi's Node CLI, which loads it from NODE_OPTIONS)".into(),
            groups,
        })?;
        Ok(ToolProcess { inner })
    }

    /// One call: its answer, or why there is none.
    pub fn call(&mut self, request: Value) -> Result<ToolAnswer, String> {
        let v = self.inner.call(request)?;
        if let Some(p) = v.get("protocolError") {
            return Err(format!(
                "the Pi runner failed: {}",
                p.as_str().unwrap_or("")
            ));
        }
        let content = v
            .get("content")
            .cloned()
            .filter(Value::is_array)
            .ok_or_else(|| format!("the Pi runner's answer has no content array: {v}"))?;
        Ok(ToolAnswer {
            content,
            details: v.get("details").cloned(),
            is_error: v.get("isError").and_then(Value::as_bool).unwrap_or(false),
        })
    }
}
