//! No orphans: a replay SIGKILLed while a tool command runs leaves nothing that runs beside the
//! resumed call. The command's shell dies with pvisor (`PR_SET_PDEATHSIG`); what it started in
//! its process group (a background job) is ended by the resumed attempt before anything runs
//! again (`supervisor::groups`). Codex's `exec_command` on the genuine rollout, its first
//! command replaced by a slow one with a background job that would write a file later.

#[path = "support/ns.rs"]
mod ns;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

const WORK: &str = "/tmp/realagent-codex.BU6ewi/work";

#[test]
fn a_killed_replay_leaves_no_process_beside_the_resumed_call() {
    let rollout = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/codex/genuine/rollout-final.jsonl");
    let text = std::fs::read_to_string(&rollout).unwrap();
    let slow =
        r#"(sleep 6; echo late > late.txt) & echo $! > bg.pid; sleep 3; echo hi > a.txt && ls"#;
    // The command as it stands inside the rollout's JSON-encoded `arguments` string.
    let encoded = serde_json::to_string(&serde_json::to_string(slow).unwrap()).unwrap();
    let encoded = &encoded[1..encoded.len() - 1];
    let changed = text.replacen(
        r#"{\"cmd\": \"echo hi > a.txt && ls\""#,
        &format!(r#"{{\"cmd\": {encoded}"#),
        1,
    );
    // And in the record of the command Codex ran, which the parse checks the call against.
    let changed = changed.replacen(
        r#""command":["/bin/bash","-lc","echo hi > a.txt && ls"]"#,
        &format!(
            r#""command":["/bin/bash","-lc",{}]"#,
            serde_json::to_string(slow).unwrap()
        ),
        1,
    );
    assert_ne!(changed, text);
    let case = ns::Case::new(WORK);
    let traj = case.root.path().join("slow.jsonl");
    std::fs::write(&traj, changed).unwrap();
    let state = case.root.path().join("state");
    let args: Vec<String> = [
        "replay",
        "--agent",
        "codex",
        "--run-id",
        "o",
        "--after-step",
        "1",
        "--replay-only",
        "--trajectory",
        &traj.display().to_string(),
        "--workspace",
        WORK,
        "--state-dir",
        &state.display().to_string(),
        "--output-dir",
        &case.root.path().join("out").display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // The first attempt, in its own mount namespace, killed while the command sleeps.
    let fresh = case.fresh();
    let started = Instant::now();
    let mut child = case
        .command(&args, |_| {})
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid_file = fresh.join("work/bg.pid");
    while !pid_file.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the command never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    // SIGKILL pvisor itself (bash exec'd it: the child's pid is pvisor's).
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    child.wait().unwrap();
    let bg: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        Path::new(&format!("/proc/{bg}")).exists(),
        "the background job of the killed attempt is still running before the resume"
    );
    // The resumed attempt ends it first, then re-runs the call.
    let (code, result, stderr) = case.pvisor(
        &[
            "replay".to_string(),
            "--resume-journal".into(),
            state.join("o").display().to_string(),
        ],
        |_| {},
    );
    assert_eq!(code, 0, "{result}\n{stderr}");
    assert!(stderr.contains("ended 1 process group"), "{stderr}");
    let alive = std::fs::read_to_string(format!("/proc/{bg}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false);
    assert!(
        !alive,
        "the killed attempt's background job survived the resume"
    );
    // Past the moment the first attempt's job would have written its file: nothing wrote it.
    while started.elapsed() < Duration::from_secs(8) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !fresh.join("work/late.txt").exists(),
        "a process of the killed attempt ran on"
    );
}
