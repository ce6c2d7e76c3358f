//! The Node runner (`runner.mjs`, embedded here and written into the run's state dir): Pi's
//! own tool implementations and SDK, driven over JSON lines, inside the real Pi entrypoint
//! (`<pi> --version` with the runner preloaded: [`command_env`]). A runner that cannot start,
//! dies or answers out of protocol is an executor error, never a panic.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

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

/// A running `runner.mjs` in tools mode.
pub struct ToolProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
    stderr_path: PathBuf,
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
    ) -> Result<ToolProcess, String> {
        if let Some(d) = stderr_path.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        let err = std::fs::File::create(stderr_path)
            .map_err(|e| format!("{}: {e}", stderr_path.display()))?;
        let mut child = Command::new(entrypoint)
            .args(ARGS)
            .current_dir(cwd)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .envs(command_env(script, &json!({"mode": "tools"})))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", entrypoint.display()))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(ToolProcess {
            child,
            stdin,
            stdout,
            next: 1,
            stderr_path: stderr_path.to_path_buf(),
        })
    }

    fn stderr_tail(&self) -> String {
        let t = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
        let t = t.trim();
        let start = t
            .char_indices()
            .rev()
            .nth(1500)
            .map(|(i, _)| i)
            .unwrap_or(0);
        t[start..].to_string()
    }

    /// One call: `request` gets an `id`; the answer must carry it back.
    pub fn call(&mut self, mut request: Value) -> Result<ToolAnswer, String> {
        let id = self.next;
        self.next += 1;
        request["id"] = json!(id);
        let line = format!("{request}\n");
        if let Err(e) = self
            .stdin
            .write_all(line.as_bytes())
            .and_then(|_| self.stdin.flush())
        {
            return Err(format!(
                "the Pi runner stopped reading: {e}; {}",
                self.stderr_tail()
            ));
        }
        let mut answer = String::new();
        match self.stdout.read_line(&mut answer) {
            Ok(0) | Err(_) => {
                let status = self.child.try_wait().ok().flatten();
                return Err(format!(
                    "the Pi runner ended without answering (status {status:?}): {}",
                    self.stderr_tail()
                ));
            }
            Ok(_) => {}
        }
        let v: Value = serde_json::from_str(&answer).map_err(|e| {
            format!(
                "the Pi entrypoint answered out of protocol ({e}: {}); it must be Pi's Node CLI, which loads the runner from NODE_OPTIONS",
                answer.trim()
            )
        })?;
        if v["id"] != json!(id) {
            return Err(format!(
                "the Pi runner answered request {} for {id}",
                v["id"]
            ));
        }
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
            .ok_or_else(|| {
                format!(
                    "the Pi runner's answer has no content array: {}",
                    answer.trim()
                )
            })?;
        Ok(ToolAnswer {
            content,
            details: v.get("details").cloned(),
            is_error: v.get("isError").and_then(Value::as_bool).unwrap_or(false),
        })
    }
}

impl Drop for ToolProcess {
    fn drop(&mut self) {
        // Closing stdin ends the runner once its queue is done; don't leave it behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
