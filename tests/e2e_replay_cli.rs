//! Acceptance: `pvisor replay --agent claude-code` from the command line, with the REAL
//! Claude Code CLI (installed by scripts/install-agents.sh) and the built-in scripted model
//! (`--model-script`), on genuine recorded sessions, at every boundary, in all three modes.

#[path = "support/claude.rs"]
mod claude;

use std::path::{Path, PathBuf};
use std::process::Command;

use fs2::FileExt;
use serde_json::Value;

struct CwdLock(#[allow(dead_code)] std::fs::File);

/// The recorded sessions use fixed workspace paths; tests touching one path take its lock.
fn lock_cwd(name: &str) -> CwdLock {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(format!("/tmp/pvisor-rec-{name}.lock"))
        .unwrap();
    f.lock_exclusive().unwrap();
    CwdLock(f)
}

struct Case {
    rec: PathBuf,
    work: PathBuf,
    root: tempfile::TempDir,
    _lock: CwdLock,
}

fn case(name: &str) -> Case {
    let lock = lock_cwd(name);
    let rec = claude::recorded_dir().join(name);
    let meta: Value =
        serde_json::from_slice(&std::fs::read(rec.join("meta.json")).unwrap()).unwrap();
    let work = PathBuf::from(meta["cwd"].as_str().unwrap());
    Case {
        rec,
        work,
        root: tempfile::tempdir().unwrap(),
        _lock: lock,
    }
}

impl Case {
    /// A fresh workspace at the original path, as before the recorded run.
    fn reset(&self) {
        let _ = std::fs::remove_dir_all(&self.work);
        claude::copy_tree(&self.rec.join("workspace-before"), &self.work);
        claude::set_mtimes(&self.work, claude::SEED_MTIME);
    }
    fn replay(&self, run_id: &str, after: usize, extra: &[&str]) -> (i32, Value, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_pvisor"))
            .args([
                "replay",
                "--agent",
                "claude-code",
                "--run-id",
                run_id,
                "--after-step",
                &after.to_string(),
            ])
            .arg("--trajectory")
            .arg(self.rec.join("session.jsonl"))
            .arg("--workspace")
            .arg(&self.work)
            .arg("--state-dir")
            .arg(self.root.path().join("state"))
            .arg("--output-dir")
            .arg(self.root.path().join("out"))
            .args(extra)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let v: Value = serde_json::from_str(stdout.lines().last().unwrap_or("{}"))
            .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
        (
            out.status.code().unwrap_or(-1),
            v,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
    fn state(&self, run_id: &str) -> PathBuf {
        self.root.path().join("state").join(run_id)
    }
    fn entry(&self) -> String {
        claude::claude_entrypoint().display().to_string()
    }
    fn script(&self) -> String {
        self.rec.join("script.json").display().to_string()
    }
}

fn main_requests(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "main")
        .collect()
}

#[test]
fn a_boundary_prompt_is_injected_once_and_never_stored() {
    let c = case("five-step");
    c.reset();
    let prompt = "Before going on, say which files exist. (pvisor-secret-7f3a)";
    let (code, r, err) = c.replay(
        "bp",
        2,
        &[
            "--max-steps",
            "4",
            "--agent-entrypoint",
            &c.entry(),
            "--model-script",
            &c.script(),
            "--boundary-user-prompt",
            prompt,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["metadata"]["boundary_user_prompt"]["injected"], true);
    assert_eq!(r["metadata"]["boundary_user_prompt"]["injection_count"], 1);
    assert_eq!(
        r["metadata"]["input_condition"],
        "boundary_user_prompt_appended"
    );
    let got = main_requests(&c.state("bp").join("logs/scripted-model.jsonl"));
    for (i, q) in got.iter().enumerate() {
        let text = q["body"]["messages"].to_string();
        assert_eq!(
            text.matches("pvisor-secret-7f3a").count(),
            1,
            "request {i} must carry the prompt exactly once"
        );
    }
    // the plaintext is nowhere in the journal, the result or the outputs
    let mut leaks = vec![];
    for dir in [c.state("bp"), c.root.path().join("out/bp")] {
        for f in claude::list_files(&dir) {
            if f.starts_with("logs/") {
                continue; // the scripted model's own request log holds request bodies by design
            }
            let b = std::fs::read(dir.join(&f)).unwrap();
            if String::from_utf8_lossy(&b).contains("pvisor-secret-7f3a") {
                leaks.push(f);
            }
        }
    }
    assert!(
        leaks.is_empty(),
        "boundary prompt plaintext found in {leaks:?}"
    );
    assert!(!r.to_string().contains("pvisor-secret-7f3a"));
    let audit = Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args(["journal", "audit"])
        .arg(c.state("bp"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&audit.stdout);
    assert_eq!(audit.status.code(), Some(0), "{text}");
    assert!(
        text.contains("privacy=ok") && text.contains("bridge=ok"),
        "{text}"
    );
}

#[test]
fn malformed_sessions_are_trajectory_errors_naming_the_line() {
    let c = case("five-step");
    let src = std::fs::read_to_string(c.rec.join("session.jsonl")).unwrap();
    let lines: Vec<&str> = src.lines().collect();
    let bad = c.root.path().join("bad.jsonl");
    let mut truncated = lines.clone();
    let cut = truncated[10].len() / 2;
    let half = &lines[10][..cut];
    truncated[10] = half;
    std::fs::write(&bad, truncated.join("\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args([
            "replay",
            "--agent",
            "claude-code",
            "--after-step",
            "1",
            "--replay-only",
            "--run-id",
            "bad",
        ])
        .arg("--trajectory")
        .arg(&bad)
        .arg("--workspace")
        .arg(c.root.path())
        .arg("--state-dir")
        .arg(c.root.path().join("state"))
        .arg("--output-dir")
        .arg(c.root.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(10));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["failure"]["category"], "trajectory_error");
    assert!(
        r["failure"]["message"]
            .as_str()
            .unwrap()
            .contains("bad.jsonl:11"),
        "{r}"
    );
}

/// The audit page of a run, rendered by headless Chromium (installed with apt when missing,
/// never skipped); the page is kept beside a screenshot in `target/test-artifacts/`.
fn rendered_audit(state: &Path, name: &str) -> (i32, String) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join(format!("{name}.html"));
    let st = Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args(["journal", "audit", "--format", "html", "-o"])
        .arg(&page)
        .arg(state)
        .status()
        .unwrap();
    let browser = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let ok = Command::new("sh")
                .args(["-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium"])
                .status()
                .unwrap()
                .success();
            assert!(ok, "chromium is required and `apt-get install -y chromium` failed");
            PathBuf::from("/usr/bin/chromium")
        });
    let profile = tempfile::tempdir().unwrap();
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--hide-scrollbars",
    ];
    let shot = Command::new(&browser)
        .args(common)
        .arg("--window-size=1280,3000")
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!(
            "--screenshot={}",
            dir.join(format!("{name}.png")).display()
        ))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        shot.status.success(),
        "{}",
        String::from_utf8_lossy(&shot.stderr)
    );
    let dom = Command::new(&browser)
        .args(common)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    assert!(dom.contains("</html>"), "chromium rendered nothing");
    (st.code().unwrap_or(-1), dom)
}

#[test]
fn the_audit_page_of_a_continued_and_of_a_refused_run_shows_what_happened() {
    let c = case("five-step");
    // continued: the real Claude Code continues after batch 2 with the scripted model
    c.reset();
    let (code, r, err) = c.replay(
        "page-ok",
        2,
        &[
            "--max-steps",
            "5",
            "--agent-entrypoint",
            &c.entry(),
            "--model-script",
            &c.script(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(r["continued_steps"].as_u64().unwrap() >= 1, "{r}");
    let (code, dom) = rendered_audit(&c.state("page-ok"), "audit-continued-run");
    assert_eq!(code, 0, "the continued run audits clean");
    assert!(
        dom.contains("claude-code 2.1.332"),
        "the header names the agent and its version"
    );
    assert!(dom.contains("id=\"boundary\"") && dom.contains("after batch 2"));
    assert!(dom.contains("id=\"call-1-0\"") && dom.contains("identical to the recorded one"));
    assert!(
        dom.contains("continuation "),
        "time spent per phase: continuation"
    );
    // the receipts: the first request validated, its prefix digest
    let receipts = &dom[dom.find("id=\"receipts\"").unwrap()..];
    assert!(receipts.contains("validated") && receipts.contains("blake3:"));
    assert!(dom.contains("first request ends at the boundary: true"));
    // what the agent did after the boundary, from its own session
    let cont = &dom[dom.find("id=\"continuation\"").unwrap()..dom.find("id=\"receipts\"").unwrap()];
    assert!(
        cont.contains("as the agent recorded it") && cont.contains("class=\"call live\""),
        "{cont}"
    );
    assert!(
        cont.contains("notes.txt"),
        "the live calls' arguments are shown"
    );

    // refused: an agent wrapper edits a recorded observation in the session pvisor wrote, so
    // the agent's first request is not the rebuilt prefix and the bridge refuses it
    c.reset();
    let real = c.entry();
    let wrapper = c.root.path().join("claude-tampering");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ncase \"$1\" in --version|-v) exec '{real}' \"$@\";; esac\nfind \"$CLAUDE_CONFIG_DIR/projects\" -name '*.jsonl' -exec sed -i 's/\"content\":\"a.txt\"/\"content\":\"a.txt TAMPERED\"/' {{}} +\nexec '{real}' \"$@\"\n"
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (code, r, err) = c.replay(
        "page-refused",
        2,
        &[
            "--max-steps",
            "5",
            "--agent-entrypoint",
            &wrapper.display().to_string(),
            "--model-script",
            &c.script(),
        ],
    );
    assert_ne!(code, 0, "a refused prefix fails the run: {r} {err}");
    let (code, dom) = rendered_audit(&c.state("page-refused"), "audit-refused-run");
    assert_eq!(code, 66, "the refused run fails the audit's bridge check");
    assert!(dom.contains("id=\"verdict\" class=\"verdict bad\""));
    let refused = &dom[dom
        .find("id=\"refused\"")
        .expect("a refused-requests section")..];
    assert!(
        refused.contains("first difference from the expected request"),
        "{refused}"
    );
    assert!(
        refused.contains("TAMPERED"),
        "the kept body or the difference shows the edit: {refused}"
    );
    assert!(
        refused.contains("[redacted]") || !refused.contains("x-api-key"),
        "secrets stay redacted"
    );
    // the finding links to the receipt that proves it
    let findings =
        &dom[dom.find("id=\"findings\"").unwrap()..dom.find("id=\"transcript\"").unwrap()];
    assert!(
        findings.contains("href=\"#refused-") && findings.contains("href=\"#ev-"),
        "{findings}"
    );
}

#[test]
fn progress_goes_to_stderr_as_json_lines_or_not_at_all() {
    let c = case("five-step");
    c.reset();
    let (code, r, err) = c.replay("progress", 3, &["--replay-only", "--progress-json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["phase"], "replayed", "stdout is the result alone");
    let lines: Vec<Value> = err
        .lines()
        .filter(|l| l.starts_with("{\"progress\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 6, "{err}");
    let last = &lines[lines.len() - 1]["progress"];
    assert_eq!(last["batches_done"], 3);
    assert_eq!(last["calls_done"], last["calls_total"]);
    assert!(lines.windows(2).all(|w| w[0] != w[1]), "no repeated line");
    // --quiet (and a stderr that is not a terminal) shows none
    c.reset();
    let (code, _, err) = c.replay("quiet", 3, &["--replay-only", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !err.contains("progress") && !err.contains("[pvisor] "),
        "{err}"
    );
}

/// `--isolate-network`: the whole run — the real agent and the tools it runs — in a network
/// namespace of its own with only loopback, where the bridge and the scripted model still
/// answer on 127.0.0.1.
#[test]
fn an_isolated_network_has_only_loopback_and_the_continuation_still_works() {
    let c = case("five-step");
    c.reset();
    let mut script: Value =
        serde_json::from_slice(&std::fs::read(c.rec.join("script.json")).unwrap()).unwrap();
    let turns = script["turns"].as_array_mut().unwrap();
    turns.truncate(2);
    turns.push(serde_json::json!({"text": "Checking the network.", "tool_calls": [{"name": "Bash",
        "input": {"command": "readlink /proc/self/ns/net; cat /proc/net/dev", "description": "Show the network"}}]}));
    turns.push(serde_json::json!({"text": "Done."}));
    let path = c.root.path().join("net-script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let (code, r, err) = c.replay(
        "net",
        2,
        &[
            "--max-steps",
            "5",
            "--isolate-network",
            "--agent-entrypoint",
            &c.entry(),
            "--model-script",
            &path.display().to_string(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["agent_status"], "completed", "{r}");
    let session =
        std::fs::read_to_string(c.root.path().join("out/net/native/continued-session.jsonl"))
            .unwrap();
    let result = session
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["toolUseResult"]["stdout"].as_str().map(String::from))
        .find(|s| s.contains("net:["))
        .unwrap_or_else(|| panic!("the probe ran: {session}"));
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    assert!(
        !result.contains(&ours.display().to_string()),
        "another network namespace: {result}"
    );
    let interfaces: Vec<&str> = result
        .lines()
        .filter_map(|l| l.split_once(':').map(|(name, _)| name.trim()))
        .filter(|n| !n.starts_with("net") && !n.contains('|'))
        .collect();
    assert_eq!(interfaces, ["lo"], "{result}");
    // a remote upstream cannot be reached from there: refused before anything runs
    c.reset();
    let (code, _, err) = c.replay(
        "net-remote",
        2,
        &[
            "--isolate-network",
            "--model-base-url",
            "http://127.0.0.1:9",
            "--agent-entrypoint",
            &c.entry(),
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--isolate-network") && err.contains("hint: use --model-script"),
        "{err}"
    );
    assert!(!c.root.path().join("state/net-remote").exists());
}
