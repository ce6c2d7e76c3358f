//! The Node process that runs code-mode cells ([`host.mjs`](./host.mjs)): started once per
//! replay process, in its own process group listed with the run's groups (it dies with the
//! run), speaking JSON lines. A reader thread turns its stdout into [`Event`]s on the same
//! channel the nested tool calls answer on, so one loop waits for both.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;

use serde_json::Value;

/// The cell host script, materialized under the run's state dir.
pub const SCRIPT: &str = include_str!("host.mjs");

/// What the code-mode loop waits for.
pub enum Event {
    /// One JSON line from the host.
    Host(Value),
    /// The host's stdout closed (it died).
    HostGone,
    /// A nested tool call finished: its answer for the cell and its record.
    ToolDone {
        cell: String,
        id: u64,
        answer: Result<String, String>,
        record: crate::kit::InnerCall,
    },
    /// A nested tool call could not run at all (bad input, refused tool): the run fails.
    ToolFailed(crate::error::ExecError),
}

pub struct Host {
    child: Child,
    stdin: ChildStdin,
    stderr_log: PathBuf,
}

/// Write the script under `dir` (named by its digest, rewritten only when it differs).
pub fn materialize(dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!(
        "code-mode-host-{}.mjs",
        &blake3::hash(SCRIPT.as_bytes()).to_hex()[..12]
    ));
    if std::fs::read(&path).ok().as_deref() != Some(SCRIPT.as_bytes()) {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, SCRIPT)?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(path)
}

/// Node's flags: ES modules in vm contexts, no warnings on stderr, and the permission model
/// (no file system beyond the script, no child processes, no addons: a cell reaches
/// nothing but its tools even if it escaped its realm).
pub fn node_args(script: &Path) -> Vec<String> {
    vec![
        "--experimental-vm-modules".into(),
        "--no-warnings".into(),
        "--permission".into(),
        "--allow-worker".into(),
        format!("--allow-fs-read={}", script.display()),
        script.display().to_string(),
    ]
}

impl Host {
    pub fn start(
        node: &Path,
        script: &Path,
        cwd: &Path,
        stderr_log: &Path,
        groups: Option<&Path>,
        events: mpsc::Sender<Event>,
    ) -> Result<Host, String> {
        if let Some(d) = stderr_log.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        let err = std::fs::File::create(stderr_log)
            .map_err(|e| format!("{}: {e}", stderr_log.display()))?;
        let mut cmd = Command::new(node);
        cmd.args(node_args(script))
            .current_dir(cwd)
            .env_clear()
            .env("LANG", "C.UTF-8")
            .env("TZ", std::env::var("TZ").unwrap_or_else(|_| "UTC".into()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err))
            .process_group(0);
        crate::supervisor::groups::die_with_parent(&mut cmd, groups);
        let mut child = cmd.spawn().map_err(|e| {
            format!(
                "cannot start the code-mode host ({} {}): {e}",
                node.display(),
                script.display()
            )
        })?;
        if let Some(d) = groups {
            crate::supervisor::groups::register(d, child.id());
        }
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err("the code-mode host has no pipes".into());
        };
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // A line out of protocol is reported, never skipped: a lost status would
                // leave the call waiting.
                let v = serde_json::from_str::<Value>(&line).unwrap_or_else(
                    |e| serde_json::json!({"op": "out_of_protocol", "error": e.to_string()}),
                );
                if events.send(Event::Host(v)).is_err() {
                    return;
                }
            }
            let _ = events.send(Event::HostGone);
        });
        Ok(Host {
            child,
            stdin,
            stderr_log: stderr_log.to_path_buf(),
        })
    }

    pub fn send(&mut self, v: &Value) -> Result<(), String> {
        self.stdin
            .write_all(format!("{v}\n").as_bytes())
            .and_then(|_| self.stdin.flush())
            .map_err(|e| {
                format!(
                    "the code-mode host stopped reading: {e}; {}",
                    self.stderr_tail()
                )
            })
    }

    /// The last 1,500 characters of the host's stderr.
    pub fn stderr_tail(&self) -> String {
        crate::kit::companion::log_tail(&self.stderr_log)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        unsafe {
            libc::killpg(self.child.id() as i32, libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Node that runs cells: `PVISOR_NODE`, else the Node installed beside the Codex
/// installation in use (`pvisor agents install codex` puts the pinned Node 22 there), else
/// the pinned installation's, else `node` on PATH (major version 22 or later).
pub fn find_node(agent_entrypoint: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("PVISOR_NODE").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("PVISOR_NODE={} is not a file", p.display()))
        };
    }
    if let Some(e) = agent_entrypoint {
        // <prefix>/node_modules/.bin/codex -> <prefix>/bin/node (an installation's layout only)
        let bin = e.parent();
        let modules = bin.and_then(Path::parent);
        if bin.and_then(Path::file_name).is_some_and(|n| n == ".bin")
            && modules
                .and_then(Path::file_name)
                .is_some_and(|n| n == "node_modules")
        {
            if let Some(prefix) = modules.and_then(Path::parent) {
                let n = crate::install::helper_dir(prefix).join("node");
                if n.is_file() {
                    return Ok(n);
                }
            }
        }
    }
    if let Some(n) = crate::install::helper(&super::super::ENTRY, "node") {
        return Ok(n);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for d in std::env::split_paths(&path) {
        let n = d.join("node");
        if !n.is_file() {
            continue;
        }
        let v = Command::new(&n).arg("--version").output();
        let major = v.ok().and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .trim_start_matches('v')
                .split('.')
                .next()
                .and_then(|m| m.parse::<u32>().ok())
        });
        if major.is_some_and(|m| m >= 22) {
            return Ok(n);
        }
    }
    Err("Codex code mode runs its JavaScript cells on Node >= 22: run `pvisor agents install codex` (it installs the pinned Node beside Codex), or set PVISOR_NODE".into())
}
