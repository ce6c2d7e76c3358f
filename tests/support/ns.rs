//! One `pvisor` run in a private mount namespace (`unshare --mount`) with a fresh directory
//! bound at the parent of a recording's original workspace path: tests that must replay at
//! the original path never collide with another run using that path at the same time.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
/// The pvisor under test: this build's, or `PVISOR_UNDER_TEST` (a copy a long campaign runs
/// while the tree is rebuilt).
fn pvisor_bin() -> String {
    std::env::var("PVISOR_UNDER_TEST").unwrap_or_else(|_| env!("CARGO_BIN_EXE_pvisor").into())
}

/// One replay to run in its own mount namespace.
pub struct Case {
    pub root: tempfile::TempDir,
    /// The recording's original workspace path (bound to a fresh directory).
    pub original: PathBuf,
    pub env: Vec<(String, String)>,
}

impl Case {
    pub fn new(original: &str) -> Case {
        Case {
            root: tempfile::tempdir().unwrap(),
            original: PathBuf::from(original),
            env: vec![],
        }
    }
    pub fn fresh(&self) -> PathBuf {
        self.root.path().join("fresh")
    }
    pub fn state(&self, id: &str) -> PathBuf {
        self.root.path().join("state").join(id)
    }
    /// `FAKETIME` for the agent (e.g. `+3d`), read by the wrapper at each start so that a
    /// resumed attempt can run on another day. (pvisor itself is not run under libfaketime:
    /// its children would inherit the preload and fail on its shared semaphore.)
    pub fn set_faketime(&mut self, ft: Option<&str>) {
        std::fs::write(self.root.path().join("faketime"), ft.unwrap_or("")).unwrap();
    }
    /// A wrapper around the agent that applies the case's `FAKETIME` (if any) at each start,
    /// to everything the agent starts except tmux: a tmux server under libfaketime vanishes
    /// about one start in three here (OpenHands' terminal then fails), so a `tmux` shim
    /// first on PATH starts the real one without it.
    pub fn wrap(&self, agent: &Path) -> PathBuf {
        assert!(Path::new(LIBFAKETIME).is_file(), "{LIBFAKETIME} is missing: install the Debian package `faketime` (scripts/test.sh does)");
        let w = self.root.path().join("agent-wrapper");
        let ft = self.root.path().join("faketime");
        if !ft.exists() {
            std::fs::write(&ft, "").unwrap();
        }
        let shims = self.root.path().join("shims");
        std::fs::create_dir_all(&shims).unwrap();
        let tmux = shims.join("tmux");
        std::fs::write(
            &tmux,
            format!(
                "#!/bin/sh\nunset LD_PRELOAD\nPATH=\"${{PATH#{}:}}\" exec tmux \"$@\"\n",
                shims.display()
            ),
        )
        .unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tmux, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(
            &w,
            format!(
                "#!/bin/bash\nft=\"$(cat {ft})\"\nif [ -n \"$ft\" ]; then export LD_PRELOAD={LIBFAKETIME} FAKETIME=\"$ft\" FAKETIME_DISABLE_SHM=1 FAKETIME_DONT_FAKE_MONOTONIC=1 PATH=\"{shims}:$PATH\"; fi\nexec {} \"$@\"\n",
                agent.display(),
                ft = ft.display(),
                shims = shims.display()
            ),
        )
        .unwrap();
        Command::new("chmod").arg("+x").arg(&w).status().unwrap();
        w
    }
    /// The command `pvisor <args>` inside a private mount namespace with `fresh` bound at
    /// the parent of the original workspace (so runs elsewhere that remove the workspace
    /// cannot reach it); `fresh_setup` fills a new workspace first.
    pub fn command(&self, args: &[String], fresh_setup: impl FnOnce(&Path)) -> Command {
        let parent = self.original.parent().unwrap();
        let fresh = self.fresh();
        if !fresh.exists() {
            std::fs::create_dir_all(fresh.join(self.original.file_name().unwrap())).unwrap();
            fresh_setup(&fresh.join(self.original.file_name().unwrap()));
        }
        std::fs::create_dir_all(parent).unwrap();
        // A HOME of the case's own: the login shells replayed tools start (Codex's
        // exec_command) read no profile of this machine's user, and nothing a killed run
        // leaves there (a stale `pyenv rehash` lock, which hangs every later login shell for
        // 60 s) reaches another case.
        let home = self.root.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let script = format!(
            "set -e\nmount --bind '{}' '{}'\nexec \"$@\"\n",
            fresh.display(),
            parent.display()
        );
        let mut cmd = Command::new("unshare");
        cmd.args([
            "--mount",
            "--propagation",
            "private",
            "--",
            "/bin/bash",
            "-c",
            &script,
            "pvisor-ns",
            &pvisor_bin(),
        ])
        .args(args)
        // Helpers installed beside the agents (OpenCode's ripgrep) are found there.
        .env(
            "PVISOR_AGENTS_DIR",
            Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/agents"),
        )
        .env("HOME", &home)
        .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        cmd
    }
    /// `pvisor <args>` in the case's namespace ([`Case::command`]): exit code, result, stderr.
    pub fn pvisor(&self, args: &[String], fresh_setup: impl FnOnce(&Path)) -> (i32, Value, String) {
        let out = self
            .command(args, fresh_setup)
            .output()
            .expect("unshare (util-linux) runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let v: Value =
            serde_json::from_str(stdout.lines().last().unwrap_or("{}")).unwrap_or(Value::Null);
        (out.status.code().unwrap_or(-1), v, stderr)
    }
    pub fn export(&self, id: &str) -> String {
        String::from_utf8(
            Command::new(pvisor_bin())
                .args(["journal", "export"])
                .arg(self.state(id))
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
    }
}
