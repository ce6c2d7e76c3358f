//! Recording a generated task with the real agent CLI against the scripted model
//! (127.0.0.1): the genuine native session the checks replay.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::task::{Task, PROMPT};
use crate::kit::recorder::{RecordRequest, Recorder};
use crate::scripted::{start, RequestKind, ServerOptions};

/// What a recording leaves in its case folder.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The native session, copied out of the agent's home.
    pub trajectory: PathBuf,
    /// The scripted model's request log (every request the agent sent).
    pub requests: PathBuf,
    /// The model script played (absolute paths), which the continuation plays too.
    pub script: PathBuf,
    /// The workspace the agent ran in (replays run at the same path).
    pub work: PathBuf,
}

/// How long one recording may take.
const TIMEOUT: Duration = Duration::from_secs(300);

/// Run `task` with the agent at `entry` in `root/{agent-home,work}`.
pub fn record(
    rt: &tokio::runtime::Runtime,
    recorder: &dyn Recorder,
    entry: &Path,
    task: &Task,
    root: &Path,
) -> Result<Recording, String> {
    let home = root.join("agent-home");
    let work = root.join("work");
    let _ = std::fs::remove_dir_all(&home);
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&home).map_err(|e| format!("create {}: {e}", home.display()))?;
    task.seed(&work, &recorder.workspace_files())
        .map_err(|e| format!("seed {}: {e}", work.display()))?;
    let script = task.script(recorder, &work);
    let script_path = root.join("script.json");
    let requests = root.join("requests.jsonl");
    let _ = std::fs::remove_file(&requests);
    std::fs::write(
        &script_path,
        serde_json::to_string_pretty(&script).unwrap_or_default() + "\n",
    )
    .map_err(|e| format!("write {}: {e}", script_path.display()))?;
    let api_key = recorder.api_key();
    let server = rt
        .block_on(start(
            script,
            ServerOptions {
                log_path: Some(requests.clone()),
                api_key: Some(api_key.into()),
                ..Default::default()
            },
        ))
        .map_err(|e| format!("scripted model: {e}"))?;
    let base_url = server.base_url();
    let req = RecordRequest {
        entrypoint: entry,
        home: &home,
        work: &work,
        base_url: &base_url,
        api_key,
        prompt: PROMPT,
    };
    let out = (|| {
        let mut cmd = recorder.command(&req)?;
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let _in_runtime = rt.enter();
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.kill_on_drop(true);
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", entry.display()))?;
        rt.block_on(async { tokio::time::timeout(TIMEOUT, child.wait_with_output()).await })
            .map_err(|_| format!("the agent did not finish within {} s", TIMEOUT.as_secs()))?
            .map_err(|e| format!("wait for the agent: {e}"))
    })();
    recorder.finished(&req);
    let logged = server.requests();
    rt.block_on(server.shutdown());
    let out = out?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let tail = |b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        let lines: Vec<&str> = s.lines().rev().take(15).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join("\n")
    };
    if !out.status.success() {
        return Err(format!(
            "the agent failed ({}) recording the task:\n{}",
            out.status,
            tail(&out.stderr)
        ));
    }
    if logged.iter().any(|r| r.exhausted) {
        return Err(format!(
            "the agent asked for more turns than the script has ({} main requests)",
            logged
                .iter()
                .filter(|r| r.kind == RequestKind::Main)
                .count()
        ));
    }
    let session = recorder.session(&req, &stdout)?;
    let trajectory = if session.is_dir() {
        // A conversation folder keeps its name (some agents' ids are the folder's name).
        let to = root
            .join("trajectory")
            .join(session.file_name().unwrap_or_default());
        copy_dir(&session, &to).map_err(|e| format!("copy {}: {e}", session.display()))?;
        to
    } else {
        let ext = session
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("jsonl");
        let to = root.join(format!("trajectory.{ext}"));
        std::fs::copy(&session, &to).map_err(|e| format!("copy {}: {e}", session.display()))?;
        to
    };
    Ok(Recording {
        trajectory,
        requests,
        script: script_path,
        work,
    })
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()))?;
        } else {
            std::fs::copy(&p, to.join(e.file_name()))?;
        }
    }
    Ok(())
}
