//! A companion runner: a helper process of an adapter (a runner in the agent's own language,
//! loaded into the real agent's entrypoint) that takes one JSON request per line on stdin and
//! answers each with one JSON line on stdout carrying the request's `id` back. Its stderr goes
//! to a log file whose tail explains a failure. A runner that cannot start, dies, or answers
//! out of protocol is an error naming what happened, never a panic; dropping it kills it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

/// The exact process of a companion runner.
#[derive(Debug, Clone)]
pub struct CompanionCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The complete environment (nothing is inherited).
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub stderr_log: PathBuf,
    /// The runner's name in messages (`the mini-swe-agent runner`).
    pub name: String,
    /// The run's list of running process groups (`supervisor::groups`), if any.
    pub groups: Option<PathBuf>,
}

/// A running companion.
pub struct Companion {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
    cmd: CompanionCommand,
}

impl Companion {
    pub fn start(cmd: CompanionCommand) -> Result<Companion, String> {
        if let Some(d) = cmd.stderr_log.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        let err = std::fs::File::create(&cmd.stderr_log)
            .map_err(|e| format!("{}: {e}", cmd.stderr_log.display()))?;
        let mut command = Command::new(&cmd.program);
        command
            .args(&cmd.args)
            .current_dir(&cmd.cwd)
            .env_clear()
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err))
            .process_group(0);
        crate::supervisor::groups::die_with_parent(&mut command, cmd.groups.as_deref());
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {} ({}): {e}", cmd.name, cmd.program.display()))?;
        if let Some(d) = &cmd.groups {
            crate::supervisor::groups::register(d, child.id());
        }
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(format!("{}: no pipes", cmd.name));
        };
        Ok(Companion {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            next: 1,
            cmd,
        })
    }

    /// The last 1,500 characters of the runner's stderr.
    pub fn stderr_tail(&self) -> String {
        log_tail(&self.cmd.stderr_log)
    }

    /// One request (an `id` is added); its answer, which must carry the same `id`.
    pub fn call(&mut self, mut request: Value) -> Result<Value, String> {
        let id = self.next;
        self.next += 1;
        request["id"] = json!(id);
        let name = self.cmd.name.clone();
        if let Err(e) = self
            .stdin
            .write_all(format!("{request}\n").as_bytes())
            .and_then(|_| self.stdin.flush())
        {
            return Err(format!(
                "{name} stopped reading: {e}; {}",
                self.stderr_tail()
            ));
        }
        let mut answer = String::new();
        match self.stdout.read_line(&mut answer) {
            Ok(0) | Err(_) => {
                let status = self.child.try_wait().ok().flatten();
                return Err(format!(
                    "{name} ended without answering (status {status:?}): {}",
                    self.stderr_tail()
                ));
            }
            Ok(_) => {}
        }
        let v: Value = serde_json::from_str(&answer)
            .map_err(|e| format!("{name} answered out of protocol ({e}): {}", answer.trim()))?;
        if v["id"] != json!(id) {
            return Err(format!("{name} answered request {} for {id}", v["id"]));
        }
        Ok(v)
    }
}

/// The last 1,500 characters of a helper's log (what explains its failure).
pub fn log_tail(path: &std::path::Path) -> String {
    let t = std::fs::read_to_string(path).unwrap_or_default();
    let t = t.trim();
    let start = t
        .char_indices()
        .rev()
        .nth(1500)
        .map(|(i, _)| i)
        .unwrap_or(0);
    t[start..].to_string()
}

impl Drop for Companion {
    fn drop(&mut self) {
        // Its whole process group: a command it runs must not outlive it.
        unsafe {
            libc::killpg(self.child.id() as i32, libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(d) = &self.cmd.groups {
            crate::supervisor::groups::unregister(d, self.child.id());
        }
    }
}

/// The final report a runner prints as its last stdout line in continue mode
/// (`{"type":"pvisor_end","ok":…}`): kept by the continuation's `observe_stdout`, checked by
/// its `verdict`.
#[derive(Debug, Clone, Default)]
pub struct EndReport(Option<Value>);

impl EndReport {
    /// Keep `line` if it is the report; true once it is.
    pub fn observe(&mut self, line: &str) -> bool {
        match serde_json::from_str::<Value>(line) {
            Ok(v) if v["type"] == "pvisor_end" => {
                self.0 = Some(v);
                true
            }
            _ => false,
        }
    }

    /// The report of a runner (`who`) that reported `ok` and exited 0, or why not.
    pub fn checked(&self, exit: &crate::runner::ExitInfo, who: &str) -> Result<&Value, String> {
        let Some(end) = &self.0 else {
            return Err(format!(
                "{who} ended without its final report (exit {:?}, signal {:?})",
                exit.code, exit.signal
            ));
        };
        if end["ok"] != true {
            return Err(format!(
                "{who} failed: {}",
                end["error"].as_str().unwrap_or("")
            ));
        }
        if exit.code != Some(0) {
            return Err(format!("{who} exited with {:?}", exit.code));
        }
        Ok(end)
    }
}

/// The model name for litellm's OpenAI provider (the bridge speaks Chat Completions): a
/// provider-qualified name as given, a bare one as `openai/<name>`.
pub fn litellm_openai_model(m: &str) -> String {
    if m.contains('/') {
        m.to_string()
    } else {
        format!("openai/{m}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn sh(script: &str, dir: &Path) -> CompanionCommand {
        CompanionCommand {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: dir.to_path_buf(),
            stderr_log: dir.join(format!(
                "err-{}.log",
                blake3::hash(script.as_bytes()).to_hex()
            )),
            name: "the test runner".into(),
            groups: None,
        }
    }

    #[test]
    fn answers_carry_the_id_and_failures_are_named() {
        let d = tempfile::tempdir().unwrap();
        // Echoes each request back (its id included).
        let mut c = Companion::start(sh("while read l; do echo \"$l\"; done", d.path())).unwrap();
        let a = c.call(json!({"op": "x"})).unwrap();
        assert_eq!((a["op"].clone(), a["id"].clone()), (json!("x"), json!(1)));
        let mut dead = Companion::start(sh("echo oops >&2; exit 3", d.path())).unwrap();
        let e = dead.call(json!({})).unwrap_err();
        // It may be gone before the request is written (the pipe is broken) or after.
        assert!(
            (e.contains("ended without answering") || e.contains("stopped reading"))
                && e.contains("oops"),
            "{e}"
        );
        let mut wrong = Companion::start(sh("read l; echo '{\"id\": 9}'", d.path())).unwrap();
        assert!(wrong
            .call(json!({}))
            .unwrap_err()
            .contains("answered request 9 for 1"));
        let mut noise = Companion::start(sh("read l; echo banner", d.path())).unwrap();
        assert!(noise
            .call(json!({}))
            .unwrap_err()
            .contains("out of protocol"));
    }
}
