//! Fleets: `--isolate` (replays of one session side by side on one machine), manifest tasks
//! run by index (idempotent by run id: done prints, interrupted resumes, new starts), and a
//! real Slurm job array on 127.0.0.1 (`scripts/slurm-local.sh` starts munged, slurmctld and
//! slurmd; it installs them from Debian when missing) with a task requeued and a task
//! SIGKILLed while they run: the fleet ends with every result equal to the same replay run
//! alone, and a workspace equal to its workspace.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

const PVISOR: &str = env!("CARGO_BIN_EXE_pvisor");
/// The recording's workspace path: every replay of it runs there.
const CWD: &str = "/tmp/pvisor-rec-five-step/work";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn session() -> PathBuf {
    root().join("tests/fixtures/claude/recorded/five-step/session.jsonl")
}

fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, Value, String) {
    let out = Command::new(PVISOR)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let v = serde_json::from_str(stdout.lines().last().unwrap_or("null")).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What must be equal between two replays of the same request.
fn outcome(r: &Value) -> Value {
    serde_json::json!({
        "phase": r["phase"], "quality": r["quality"], "after_step": r["after_step"],
        "replayed_tool_calls": r["replayed_tool_calls"], "failure": r["failure"],
        "observations": r["metadata"]["observations"],
    })
}

/// Every file under `dir` (relative path, bytes).
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                v.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    v.sort();
    v
}

/// The run's own workspace copy (`--isolate`).
fn isolated(state_root: &Path, run_id: &str) -> PathBuf {
    state_root.join(run_id).join("isolated/workspace")
}

fn replay_args(d: &Path, run_id: &str, n: usize) -> Vec<String> {
    [
        "replay",
        "--agent",
        "claude-code",
        "--trajectory",
        &session().display().to_string(),
        "--after-step",
        &n.to_string(),
        "--replay-only",
        "--isolate",
        "--workspace",
        CWD,
        "--workspace-seed",
        &d.join("seed").display().to_string(),
        "--state-dir",
        &d.join("state").display().to_string(),
        "--output-dir",
        &d.join("out").display().to_string(),
        "--run-id",
        run_id,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn seed(d: &Path) {
    std::fs::create_dir_all(d.join("seed")).unwrap();
    std::fs::write(
        d.join("seed/README"),
        "the workspace before the recorded run\n",
    )
    .unwrap();
}

#[test]
fn isolated_replays_of_one_session_run_side_by_side_with_equal_results() {
    let d = tempfile::tempdir().unwrap();
    seed(d.path());
    let host = |p: &Path| if p.is_dir() { files(p) } else { vec![] };
    let before = host(Path::new(CWD));
    let children: Vec<_> = (0..3)
        .map(|i| {
            Command::new(PVISOR)
                .args(replay_args(d.path(), &format!("i{i}"), 3))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let results: Vec<Value> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
        })
        .collect();
    for r in &results {
        assert_eq!(r["phase"], "replayed", "{r}");
        assert_eq!(outcome(r), outcome(&results[0]));
    }
    let first = files(&isolated(&d.path().join("state"), "i0"));
    assert!(first.iter().any(|(p, _)| p == "notes.txt"), "{first:?}");
    assert!(
        first.iter().any(|(p, _)| p == "README"),
        "the seed was copied"
    );
    for i in 1..3 {
        assert_eq!(
            files(&isolated(&d.path().join("state"), &format!("i{i}"))),
            first
        );
    }
    // Nothing reached the host's directory at the original path; /tmp was the run's own.
    assert_eq!(host(Path::new(CWD)), before);
    let tmp = d.path().join("state/i0/isolated/tmp");
    assert!(tmp.is_dir(), "the run's private /tmp");
    assert!(
        tmp.join(d.path().file_name().unwrap()).is_dir(),
        "the host's /tmp entry holding the run's state is bound again inside it"
    );
}

/// A manifest over `lines` (run id, boundary), in `d`.
fn manifest(d: &Path, lines: &[(String, usize)]) -> PathBuf {
    let mut text = serde_json::json!({
        "schema_version": "pvisor.fleet/v1",
        "defaults": {
            "agent": "claude-code", "trajectory": session(), "replay_only": true,
            "isolate": true, "workspace": CWD, "workspace_seed": "seed",
            "state_dir": "state", "output_dir": "out",
        }
    })
    .to_string();
    text.push('\n');
    for (id, n) in lines {
        text.push_str(&serde_json::json!({"run_id": id, "after_step": n}).to_string());
        text.push('\n');
    }
    let p = d.join("fleet.jsonl");
    std::fs::write(&p, text).unwrap();
    p
}

fn events(journal: &Path) -> Vec<String> {
    let mut v = Vec::new();
    pvisor::journal::read_events(journal, |e| {
        v.push(e.event.name().to_string());
        Ok(())
    })
    .unwrap();
    v
}

#[test]
fn a_manifest_task_is_idempotent_by_run_id() {
    let d = tempfile::tempdir().unwrap();
    seed(d.path());
    let m = manifest(d.path(), &[("a".into(), 2), ("b".into(), 2)]);
    let m = m.display().to_string();
    let (code, first, err) = run(&["replay", "--manifest", &m, "--index", "0"], &[]);
    assert_eq!(code, 0, "{first}\n{err}");
    let journal = d.path().join("state/a/journal.pvj");
    let before = events(&journal);
    // Done: the same task again prints the same result and runs nothing.
    let (code, again, _) = run(&["replay", "--manifest", &m, "--index", "0"], &[]);
    assert_eq!(code, 0);
    assert_eq!(outcome(&again), outcome(&first));
    assert_eq!(events(&journal), before, "a finished run appends nothing");
    // Interrupted (a failpoint after the first tool call started), then the same task
    // again: it resumes from its journal. The index comes from the scheduler's variable.
    let (code, _, _) = run(
        &["replay", "--manifest", &m],
        &[
            ("SLURM_ARRAY_TASK_ID", "1"),
            ("PVISOR_FAILPOINT", "after-event:6"),
        ],
    );
    assert_ne!(code, 0);
    let (_, status, _) = run(&["fleet", "status", &m, "--json"], &[]);
    assert_eq!(status["counts"]["interrupted"], 1, "{status}");
    assert_eq!(status["counts"]["done"], 1, "{status}");
    let (code, resumed, err) = run(
        &["replay", "--manifest", &m],
        &[("JOB_COMPLETION_INDEX", "1")],
    );
    assert_eq!(code, 0, "{resumed}\n{err}");
    assert_eq!(outcome(&resumed), outcome(&first));
    assert!(events(&d.path().join("state/b/journal.pvj")).contains(&"resumed".to_string()));
    assert_eq!(
        files(&isolated(&d.path().join("state"), "b")),
        files(&isolated(&d.path().join("state"), "a"))
    );
    let (_, status, _) = run(&["fleet", "status", &m, "--json"], &[]);
    assert_eq!(status["counts"]["done"], 2, "{status}");
    // --watch follows until every task ended (here at once), then prints the counts
    let out = Command::new(PVISOR)
        .args(["fleet", "status", &m, "--watch", "--interval", "0.1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("2/2 ended (2 done)"),
        "{text}"
    );
    // Errors name the manifest line and field.
    std::fs::write(
        d.path().join("bad.jsonl"),
        "{\"schema_version\":\"pvisor.fleet/v1\"}\n{\"after_step\":1}\n",
    )
    .unwrap();
    let bad = d.path().join("bad.jsonl").display().to_string();
    let (code, _, err) = run(&["replay", "--manifest", &bad, "--index", "0"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("bad.jsonl:2: run_id"), "{err}");
    let (code, _, err) = run(&["replay", "--manifest", &m], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("no task index"), "{err}");
}

/// Start the one-machine cluster; returns its `SLURM_CONF`.
fn slurm() -> String {
    let out = Command::new(root().join("scripts/slurm-local.sh"))
        .arg("start")
        .output()
        .expect("scripts/slurm-local.sh runs");
    assert!(
        out.status.success(),
        "the local Slurm cluster did not start: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("export SLURM_CONF="))
        .expect("slurm-local.sh prints SLURM_CONF")
        .to_string()
}

/// The job's array tasks in `states` (squeue's default: pending, running, completing).
fn squeue(conf: &str, job: &str, states: Option<&str>) -> Vec<String> {
    let mut cmd = Command::new("squeue");
    cmd.env("SLURM_CONF", conf)
        .args(["-h", "-r", "-j", job, "-o", "%i"]);
    if let Some(s) = states {
        cmd.args(["-t", s]);
    }
    let out = cmd.output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The job id `pvisor fleet submit` reports on stderr.
fn job_id(stderr: &str) -> String {
    stderr
        .split("Slurm job ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .expect("the job id is printed")
        .to_string()
}

fn wait_for(conf: &str, job: &str, limit: Duration) {
    let t = Instant::now();
    while !squeue(conf, job, None).is_empty() {
        assert!(
            t.elapsed() < limit,
            "Slurm job {job} still queued after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The slow session of the fleet test: its first batch runs `sleep 1.5` and `sleep 0.5` in
/// parallel, so a task of it is still running when the test kills it.
fn slow() -> (PathBuf, &'static str, PathBuf) {
    let d = root().join("tests/fixtures/claude/recorded/parallel-order-2.1.332");
    (
        d.join("session.jsonl"),
        "/tmp/pvisor-rec-parallel-order-2.1.332/work",
        d.join("workspace-before"),
    )
}

/// The state of `run_id` in `fleet status`.
fn state_of(m: &str, run_id: &str) -> Value {
    let (_, status, _) = run(&["fleet", "status", m, "--json"], &[]);
    status["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["run_id"] == run_id)
        .map(|t| t["state"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn a_slurm_job_array_replays_a_manifest_with_requeued_and_killed_tasks() {
    let conf = slurm();
    let d = tempfile::tempdir().unwrap();
    seed(d.path());
    let (slow_session, slow_cwd, slow_seed) = slow();
    // 30 tasks: four or five replays of each of five boundaries of the fast session and six
    // of the slow one, all of a session at the same original path.
    let boundaries = [1usize, 2, 3, 4, 5];
    let lines: Vec<(String, Option<usize>)> = (0..30)
        .map(|i| match i % 5 {
            4 => (format!("slow{i:02}"), None),
            k => (
                format!("t{i:02}"),
                Some(boundaries[(i / 5 + k) % boundaries.len()]),
            ),
        })
        .collect();
    let mut text = serde_json::json!({
        "schema_version": "pvisor.fleet/v1",
        "defaults": {
            "agent": "claude-code", "trajectory": session(), "replay_only": true,
            "isolate": true, "workspace": CWD, "workspace_seed": "seed",
            "state_dir": "state", "output_dir": "out",
        }
    })
    .to_string();
    text.push('\n');
    for (id, n) in &lines {
        let line = match n {
            Some(n) => serde_json::json!({"run_id": id, "after_step": n}),
            None => serde_json::json!({
                "run_id": id, "after_step": 1, "trajectory": slow_session,
                "workspace": slow_cwd, "workspace_seed": slow_seed,
            }),
        };
        text.push_str(&line.to_string());
        text.push('\n');
    }
    let m = d.path().join("fleet.jsonl");
    std::fs::write(&m, text).unwrap();
    let m = m.display().to_string();
    // Each distinct replay run alone (tasks 0..5 cover the fast boundaries, task 4 the slow
    // session): what every task of the same request must end as.
    let mut want = std::collections::HashMap::new();
    for (i, (id, n)) in lines.iter().enumerate().take(10) {
        if want.contains_key(n) {
            continue;
        }
        let alone = d.path().join("alone");
        std::fs::create_dir_all(&alone).unwrap();
        let (code, r, err) = run(
            &["replay", "--manifest", &m, "--index", &i.to_string()],
            &[],
        );
        assert_eq!(code, 0, "{r}\n{err}");
        // Its state moves aside: the fleet runs that task again from nothing.
        let state = d.path().join("state").join(id);
        std::fs::rename(&state, alone.join(id)).unwrap();
        std::fs::remove_dir_all(d.path().join("out").join(id)).unwrap();
        want.insert(
            *n,
            (
                outcome(&r),
                files(&alone.join(id).join("isolated/workspace")),
            ),
        );
    }
    let env = [("SLURM_CONF", conf.as_str())];
    let (code, _, err) = run(
        &["fleet", "submit", &m, "--max-parallel", "2", "--requeue"],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    let job = std::fs::read_to_string(format!("{m}.sbatch")).unwrap();
    assert!(job.contains("#SBATCH --array=0-29%2"), "{job}");
    let out = Command::new(PVISOR)
        .args(["fleet", "submit", &m, "--dry-run"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("--index \"$SLURM_ARRAY_TASK_ID\""));
    let id = job_id(&err);
    // While it runs: a slow task requeued by Slurm, and slow tasks SIGKILLed until one is
    // caught in the middle of its replay (its journal started, not finished).
    let t = Instant::now();
    let (mut requeued, mut killed) = (None, None);
    while killed.is_none() && t.elapsed() < Duration::from_secs(300) {
        for task in squeue(&conf, &id, Some("R")) {
            let index: usize = match task.rsplit('_').next().and_then(|x| x.parse().ok()) {
                Some(i) => i,
                None => continue,
            };
            let run_id = &lines[index].0;
            if lines[index].1.is_some() || killed.is_some() {
                continue;
            }
            if requeued.is_none() {
                let ok = Command::new("scontrol")
                    .env("SLURM_CONF", &conf)
                    .args(["requeue", &task])
                    .status()
                    .unwrap()
                    .success();
                if ok {
                    // Slurm holds a requeued task back for a while (its begin time); let it
                    // start again at once.
                    let _ = Command::new("scontrol")
                        .env("SLURM_CONF", &conf)
                        .args(["update", &format!("jobid={task}"), "starttime=now"])
                        .status();
                    requeued = Some(run_id.clone());
                }
                continue;
            }
            if requeued.as_ref() == Some(run_id) {
                continue;
            }
            let hit = Command::new("pkill")
                .args([
                    "-KILL",
                    "-f",
                    &format!("replay --manifest {m} --index {index}$"),
                ])
                .status()
                .unwrap()
                .success();
            std::thread::sleep(Duration::from_millis(300));
            if hit && state_of(&m, run_id) == "interrupted" {
                killed = Some(run_id.clone());
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("requeued {requeued:?}, killed in the middle of its replay: {killed:?}");
    let killed = killed.expect("a slow task was SIGKILLed in the middle of its replay");
    wait_for(&conf, &id, Duration::from_secs(600));
    // A SIGKILLed task failed in Slurm's eyes: the same submission again finishes the fleet
    // (done tasks print their result and run nothing).
    let (_, status, _) = run(&["fleet", "status", &m, "--json"], &[]);
    assert_eq!(status["counts"]["interrupted"], 1, "{status}");
    let (code, _, err) = run(&["fleet", "submit", &m, "--max-parallel", "2"], &env);
    assert_eq!(code, 0, "{err}");
    let id2 = job_id(&err);
    wait_for(&conf, &id2, Duration::from_secs(600));
    let (_, status, _) = run(&["fleet", "status", &m, "--json"], &[]);
    assert_eq!(status["counts"]["done"], 30, "{status}");
    for (i, (run_id, n)) in lines.iter().enumerate() {
        let r: Value = serde_json::from_slice(
            &std::fs::read(d.path().join("out").join(run_id).join("result.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(outcome(&r), want[n].0, "task {i} ({run_id})");
        assert_eq!(
            files(&isolated(&d.path().join("state"), run_id)),
            want[n].1,
            "task {i} ({run_id}): its workspace differs from the run alone's"
        );
    }
    let journal = |id: &str| d.path().join("state").join(id).join("journal.pvj");
    assert!(
        events(&journal(&killed)).contains(&"resumed".to_string()),
        "the killed task resumed from its journal"
    );
    // The fleet report folds every journal under the state root.
    let (code, _, err) = run(
        &[
            "journal",
            "audit",
            &d.path().join("state").display().to_string(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
}
