//! Kill-anywhere: crash `pvisor replay` at every journaled event (failpoint) and at random
//! instants (SIGKILL) of a full replay-and-continue run with the REAL Claude Code CLI and the
//! scripted model, then `--resume-journal` until done, and check that the final result equals
//! an uninterrupted run's, that no acknowledged event was lost, and that no completed tool
//! call ran twice (double executions are only allowed where the journal shows an in-doubt
//! call re-run under `--accept-at-least-once`).
//!
//! Normal test run: a representative subset (~a dozen failpoints, a few kills).
//! Full harness: `PVISOR_KILL_FULL=1 cargo test --test kill_anywhere -- --nocapture`
//! (every event k, and `PVISOR_KILLS` random SIGKILLs, default 50). See docs/reliability.md.

#[path = "support/claude.rs"]
mod claude;
#[path = "support/kills.rs"]
mod kills;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fs2::FileExt;
use journal_format::Event;
use serde_json::{json, Value};

const AFTER_STEP: &str = "5";
const MAX_STEPS: &str = "12";
const LIVE_STEPS: usize = 3;
/// The live step that edits a file instead of running a command.
const EDIT_STEP: usize = 2;

struct Harness {
    rec: PathBuf,
    work: PathBuf,
    root: tempfile::TempDir,
    script: PathBuf,
    marker: PathBuf,
    entry: PathBuf,
    _lock: std::fs::File,
}

/// What must be equal to the uninterrupted run.
#[derive(Debug, Clone, PartialEq)]
struct Facts {
    phase: Value,
    quality: Value,
    agent_status: Value,
    continued_steps: Value,
    observations: BTreeMap<(u64, u64), String>,
    steps: Vec<(u64, Vec<String>)>,
    /// The tool results of the live part, as Claude stored them in its continued session.
    live_results: Vec<String>,
    /// Every file of the workspace at the end, with its content.
    workspace: BTreeMap<String, String>,
}

struct Finished {
    facts: Facts,
    resumes: usize,
    accepted: bool,
}

fn setup() -> Harness {
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/tmp/pvisor-rec-five-step.lock")
        .unwrap();
    lock.lock_exclusive().unwrap();
    let rec = claude::recorded_dir().join("five-step");
    let meta: Value =
        serde_json::from_slice(&std::fs::read(rec.join("meta.json")).unwrap()).unwrap();
    let work = PathBuf::from(meta["cwd"].as_str().unwrap());
    let mut root = tempfile::tempdir().unwrap();
    // PVISOR_KILL_KEEP=1 keeps the runs' state and output dirs for inspection.
    if std::env::var("PVISOR_KILL_KEEP").is_ok_and(|v| v == "1") {
        root.disable_cleanup(true);
        eprintln!("keeping {}", root.path().display());
    }
    let marker = root.path().join("live.marker");
    // The recorded turns for the prefix, then live steps whose Bash commands leave a trace
    // outside the journal: a double execution shows as a repeated marker line.
    let mut script: Value =
        serde_json::from_slice(&std::fs::read(rec.join("script.json")).unwrap()).unwrap();
    let mut turns: Vec<Value> = script["turns"].as_array().unwrap()[..6].to_vec();
    for i in 1..=LIVE_STEPS {
        if i == EDIT_STEP {
            // An Edit of a file Claude has seen: re-run after its effect landed, Claude would
            // note "changed on disk" (and the Edit would fail) unless the workspace is
            // restored first.
            turns.push(json!({"text": format!("Live step {i}."), "tool_calls": [{"name": "Edit", "input": {"file_path": work.join("notes.txt").display().to_string(), "old_string": "line three", "new_string": "line 3 (live)"}}]}));
            continue;
        }
        turns.push(json!({"text": format!("Live step {i}."), "tool_calls": [{"name": "Bash", "input": {"command": format!("echo live-{i} >> {} && echo step-{i} >> live.txt", marker.display()), "description": format!("live step {i}")}}]}));
    }
    turns.push(json!({"text": "All live steps done."}));
    script["turns"] = Value::Array(turns);
    script["name"] = json!("kill-anywhere");
    let sp = root.path().join("script.json");
    std::fs::write(&sp, serde_json::to_vec_pretty(&script).unwrap()).unwrap();
    Harness {
        rec,
        work,
        script: sp,
        marker,
        entry: claude::claude_entrypoint(),
        root,
        _lock: lock,
    }
}

impl Harness {
    fn reset(&self) {
        let _ = std::fs::remove_dir_all(&self.work);
        claude::copy_tree(&self.rec.join("workspace-before"), &self.work);
        claude::set_mtimes(&self.work, claude::SEED_MTIME);
        let _ = std::fs::remove_file(&self.marker);
    }
    fn state(&self, id: &str) -> PathBuf {
        self.root.path().join("state").join(id)
    }
    fn fresh_cmd(&self, id: &str) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_pvisor"));
        c.args([
            "replay",
            "--agent",
            "claude-code",
            "--run-id",
            id,
            "--after-step",
            AFTER_STEP,
            "--max-steps",
            MAX_STEPS,
        ])
        .arg("--trajectory")
        .arg(self.rec.join("session.jsonl"))
        .arg("--workspace")
        .arg(&self.work)
        .arg("--state-dir")
        .arg(self.root.path().join("state"))
        .arg("--output-dir")
        .arg(self.root.path().join("out"))
        .arg("--agent-entrypoint")
        .arg(&self.entry)
        .arg("--model-script")
        .arg(&self.script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        c
    }
    /// Events as `(seq, at_ms, debug form)`, read-only (a torn tail ends the list).
    fn events(&self, id: &str) -> Vec<(u64, u64, String)> {
        let mut out = vec![];
        let _ = pvisor::journal::read_events(
            &self.state(id).join(pvisor::journal::JOURNAL_FILE),
            |e| {
                out.push((e.seq, e.at_ms, format!("{:?}", e.event)));
                Ok(())
            },
        );
        out
    }
    fn decoded(&self, id: &str) -> Vec<pvisor::journal::StoredEvent> {
        let mut out = vec![];
        pvisor::journal::read_events(&self.state(id).join(pvisor::journal::JOURNAL_FILE), |e| {
            out.push(e);
            Ok(())
        })
        .unwrap();
        out
    }
    fn facts(&self, id: &str, result: &Value) -> Facts {
        let evs = self.decoded(id);
        let mut observations = BTreeMap::new();
        for e in &evs {
            if let Event::ToolCallFinished(f) = &e.event {
                observations.insert((f.batch, f.call), f.observation_digest.clone());
            }
        }
        let state = pvisor::fold::fold(&evs).unwrap();
        let prefix_ids: Vec<String> = evs
            .iter()
            .filter_map(|e| match &e.event {
                Event::ToolCallFinished(f) => Some(f.call_id.clone()),
                _ => None,
            })
            .collect();
        let continued = result["artifacts"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["role"] == "continued_native_session")
            .and_then(|a| a["path"].as_str())
            .map(PathBuf::from);
        let live_results = continued
            .map(|p| claude::read_jsonl(&p))
            .unwrap_or_default()
            .iter()
            .filter(|r| r["type"] == "user")
            .flat_map(|r| {
                r["message"]["content"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter(|b| b["type"] == "tool_result")
            .filter(|b| !prefix_ids.iter().any(|id| b["tool_use_id"] == id.as_str()))
            .map(|b| b["content"].to_string())
            .collect();
        let workspace = claude::list_files(&self.work)
            .into_iter()
            .map(|f| {
                let c = String::from_utf8_lossy(&std::fs::read(self.work.join(&f)).unwrap())
                    .into_owned();
                (f, c)
            })
            .collect();
        Facts {
            phase: result["phase"].clone(),
            quality: result["quality"].clone(),
            agent_status: result["agent_status"].clone(),
            continued_steps: result["continued_steps"].clone(),
            observations,
            steps: state.steps.iter().map(|s| (s.n, s.tools.clone())).collect(),
            live_results,
            workspace,
        }
    }
    fn marker_counts(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for l in std::fs::read_to_string(&self.marker)
            .unwrap_or_default()
            .lines()
        {
            *m.entry(l.to_string()).or_insert(0) += 1;
        }
        m
    }

    /// `--resume-journal` until the run is done; `--accept-at-least-once` only after a stop
    /// with exit 31.
    fn resume_until_done(&self, id: &str, label: &str) -> Finished {
        let mut accept = false;
        let mut accepted = false;
        for i in 0..8 {
            let mut c = Command::new(env!("CARGO_BIN_EXE_pvisor"));
            c.args(["replay", "--resume-journal"]).arg(self.state(id));
            if accept {
                c.arg("--accept-at-least-once");
                accepted = true;
            }
            let out = c.stdin(Stdio::null()).output().unwrap();
            let code = out.status.code().unwrap_or(-1);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let r: Value =
                serde_json::from_str(stdout.lines().last().unwrap_or("{}")).unwrap_or(Value::Null);
            match code {
                0 => {
                    return Finished {
                        facts: self.facts(id, &r),
                        resumes: i + 1,
                        accepted,
                    }
                }
                31 => accept = true,
                _ => panic!(
                    "{label}: resume {} exited {code}: {r}\n{}",
                    i + 1,
                    String::from_utf8_lossy(&out.stderr)
                ),
            }
        }
        panic!("{label}: not done after 8 resumes");
    }

    /// Check one interrupted-and-resumed run against the baseline.
    fn check(
        &self,
        id: &str,
        label: &str,
        before: &[(u64, u64, String)],
        base: &Facts,
        done: &Finished,
    ) {
        let evs = self.decoded(id);
        // Every interrupted call or live step was undone by restoring its workspace
        // checkpoint and run again: the result is the uninterrupted run's, exactly.
        assert_eq!(
            &done.facts, base,
            "{label}: the final result differs from the uninterrupted run's"
        );
        assert!(
            !done.accepted,
            "{label}: the run stopped on an in-doubt call (exit 31) although it has a workspace checkpoint"
        );
        let after = self.events(id);
        assert!(
            after.len() >= before.len() && after[..before.len()] == *before,
            "{label}: an acknowledged event was lost or changed"
        );
        // Effects outside the workspace (the marker file) are not undone: live step i may
        // have run twice, but only where the journal shows it in doubt and re-run.
        let rerun_live: Vec<u64> = evs
            .iter()
            .filter_map(|e| match &e.event {
                Event::InDoubtResolved(d) if d.batch == 0 && d.decision.allows_rerun() => {
                    Some(d.call)
                }
                _ => None,
            })
            .collect();
        let counts = self.marker_counts();
        for i in (1..=LIVE_STEPS).filter(|&i| i != EDIT_STEP) {
            let n = counts.get(&format!("live-{i}")).copied().unwrap_or(0);
            assert!(n >= 1, "{label}: live step {i} never ran ({counts:?})");
            if n > 1 {
                assert!(rerun_live.iter().any(|&s| s as usize <= i), "{label}: live step {i} ran {n} times, but no in-doubt decision covers it ({rerun_live:?})");
            }
        }
        // Inside the workspace every effect happened once: each live step's line, and the
        // prefix's only non-idempotent call (batch 5: `echo 'line three' >> notes.txt`).
        let live = std::fs::read_to_string(self.work.join("live.txt")).unwrap_or_default();
        for i in (1..=LIVE_STEPS).filter(|&i| i != EDIT_STEP) {
            let n = live.lines().filter(|l| *l == format!("step-{i}")).count();
            assert_eq!(n, 1, "{label}: live.txt has step-{i} {n} times:\n{live}");
        }
        let notes = std::fs::read_to_string(self.work.join("notes.txt")).unwrap_or_default();
        assert_eq!(
            notes, "line one\nline 2 (edited)\nline 3 (live)\n",
            "{label}: notes.txt"
        );
        let audit = Command::new(env!("CARGO_BIN_EXE_pvisor"))
            .args(["journal", "audit"])
            .arg(self.state(id))
            .output()
            .unwrap();
        assert_eq!(
            audit.status.code(),
            Some(0),
            "{label}: audit: {}",
            String::from_utf8_lossy(&audit.stdout)
        );
    }
}

#[test]
fn kill_anywhere_and_resume() {
    let h = setup();
    // The uninterrupted run.
    h.reset();
    let t0 = Instant::now();
    let out = h.fresh_cmd("base").output().unwrap();
    let base_ms = t0.elapsed().as_millis() as u64;
    assert_eq!(
        out.status.code(),
        Some(0),
        "baseline: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    let base = h.facts("base", &r);
    assert_eq!(base.phase, "continued");
    assert_eq!(base.agent_status, "completed");
    assert_eq!(base.steps.len(), LIVE_STEPS + 1);
    let total = h.events("base").len() as u64;
    eprintln!(
        "baseline: {total} events, {base_ms} ms, {} live steps",
        base.steps.len()
    );

    // (a) a failpoint after every event k (the last one, run_finished, leaves nothing to do).
    let ks: Vec<u64> = if kills::full() {
        (1..total).collect()
    } else {
        // By meaning, in the baseline's journal: the request, a call mid-replay, the
        // non-idempotent Bash of batch 5 started, the rebuilt session, the bridge and the
        // agent started, each live step released to the agent (its tools then run), the
        // request after each live step, the agent's exit and the continued session.
        let evs = h.decoded("base");
        let seq_of = |pred: &dyn Fn(&Event) -> bool| -> Vec<u64> {
            evs.iter()
                .filter(|e| pred(&e.event))
                .map(|e| e.seq)
                .collect()
        };
        let mut v = vec![1];
        v.extend(seq_of(
            &|e| matches!(e, Event::ToolCallStarted(c) if c.batch == 2),
        ));
        v.extend(seq_of(
            &|e| matches!(e, Event::ToolCallStarted(c) if c.batch == 5),
        ));
        v.extend(seq_of(&|e| matches!(e, Event::SessionWritten(w) if w.role == journal_format::event::SessionRole::Reconstructed)));
        v.extend(seq_of(&|e| {
            matches!(e, Event::BridgeStarted(_) | Event::ContinuationStarted(_))
        }));
        v.extend(seq_of(&|e| matches!(e, Event::ContinuationStep(_))));
        v.extend(seq_of(
            &|e| matches!(e, Event::BridgeRequestValidated(r) if r.n >= 2),
        ));
        v.extend(seq_of(&|e| matches!(e, Event::AgentExited(_))));
        v.extend(seq_of(&|e| matches!(e, Event::SessionWritten(w) if w.role == journal_format::event::SessionRole::Continued)));
        v.sort();
        v.dedup();
        v.retain(|&k| k < total);
        v
    };
    // (a′) a failpoint right before each `tool_call_finished` of the prefix: the call ran to
    // completion, nothing acknowledges it (the window a SIGKILL hits at random).
    let finished_seqs: Vec<u64> = h
        .decoded("base")
        .iter()
        .filter(|e| matches!(e.event, Event::ToolCallFinished(_)))
        .map(|e| e.seq)
        .collect();
    let before_ks: Vec<u64> = if kills::full() {
        finished_seqs
    } else {
        // the non-idempotent Bash of batch 5 (the last prefix call)
        finished_seqs.last().copied().into_iter().collect()
    };
    // Aborted before `tool_call_finished`, the journal ends at the call's `tool_call_started`:
    // the events between (the observation's `blob_stored`) wait for the next synced one.
    let started_before = |k: u64| {
        h.decoded("base")
            .iter()
            .filter(|e| e.seq < k && matches!(e.event, Event::ToolCallStarted(_)))
            .map(|e| e.seq)
            .max()
            .expect("a started call before")
    };
    let points: Vec<(String, u64)> = ks
        .iter()
        .map(|&k| (format!("after-event:{k}"), k))
        .chain(
            before_ks
                .iter()
                .map(|&k| (format!("before-event:{k}"), started_before(k))),
        )
        .collect();
    let (mut stops31, mut doubles) = (0, 0);
    for (n, (point, journaled)) in points.iter().enumerate() {
        let id = format!("fp{n}");
        h.reset();
        let out = h
            .fresh_cmd(&id)
            .env("PVISOR_FAILPOINT", point)
            .output()
            .unwrap();
        assert!(
            !out.status.success(),
            "failpoint {point}: the run did not stop"
        );
        let before = h.events(&id);
        assert_eq!(
            before.len() as u64,
            *journaled,
            "failpoint {point}: the journal must end at event {journaled}"
        );
        let done = h.resume_until_done(&id, &format!("failpoint {point}"));
        h.check(&id, &format!("failpoint {point}"), &before, &base, &done);
        stops31 += done.accepted as usize;
        doubles += h.marker_counts().values().filter(|&&n| n > 1).count();
        eprintln!(
            "failpoint {point}: ok after {} resume(s){}",
            done.resumes,
            if done.accepted {
                " (exit 31, accepted)"
            } else {
                ""
            }
        );
    }
    eprintln!("failpoints: {} runs ok, {stops31} stopped with exit 31, {doubles} accounted double executions", points.len());

    // (b) SIGKILL at random instants.
    let kills = kills::count(4, 50);
    let mut rng = kills::Rng::from_env();
    let seed = rng.seed();
    eprintln!("SIGKILL seed {seed} (PVISOR_KILL_SEED={seed} repeats it)");
    let (mut landed, mut attempts, mut stops31, mut doubles) = (0, 0, 0, 0);
    while landed < kills && attempts < kills * 3 {
        attempts += 1;
        let id = format!("kill{attempts}");
        h.reset();
        let mut child = h
            .fresh_cmd(&id)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let at = Duration::from_millis(rng.next() % (base_ms + base_ms / 10 + 1));
        std::thread::sleep(at);
        if child.try_wait().unwrap().is_some() {
            continue; // finished before the kill
        }
        // SAFETY: kill(2) on our own child.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGKILL);
        }
        child.wait().unwrap();
        landed += 1;
        let mut before = h.events(&id);
        let label = format!(
            "SIGKILL {landed} at {} ms (after event {})",
            at.as_millis(),
            before.len()
        );
        if before.is_empty() {
            // Killed before `run_requested` was durable: nothing was acknowledged, so there is
            // nothing to resume (exit 2 says so) and the same command starts the run.
            let out = Command::new(env!("CARGO_BIN_EXE_pvisor"))
                .args(["replay", "--resume-journal"])
                .arg(h.state(&id))
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(2),
                "{label}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let out = h.fresh_cmd(&id).output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{label}: the run started again: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            before = h.events(&id)[..1].to_vec();
        }
        let done = h.resume_until_done(&id, &label);
        h.check(&id, &label, &before, &base, &done);
        stops31 += done.accepted as usize;
        doubles += h.marker_counts().values().filter(|&&n| n > 1).count();
        eprintln!(
            "{label}: ok after {} resume(s){}",
            done.resumes,
            if done.accepted {
                " (exit 31, accepted)"
            } else {
                ""
            }
        );
    }
    assert!(
        landed >= kills,
        "only {landed} of {kills} kills landed in {attempts} attempts"
    );
    eprintln!("SIGKILL: {landed} kills ok, {stops31} stopped with exit 31, {doubles} accounted double executions");
}

#[test]
fn a_changed_workspace_is_refused_on_resume_and_the_run_stays_resumable() {
    let h = setup();
    h.reset();
    // Event 27 is batch 4's `batch_finished` (the Edit of notes.txt).
    let out = h
        .fresh_cmd("ws")
        .env("PVISOR_FAILPOINT", "after-event:27")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let notes = h.work.join("notes.txt");
    let good = std::fs::read(&notes).unwrap();
    std::fs::write(&notes, "changed behind pvisor's back\n").unwrap();
    let events = h.events("ws").len();
    let out = Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args(["replay", "--resume-journal"])
        .arg(h.state("ws"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(20),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(r["failure"]["category"], "workspace_error");
    let msg = r["failure"]["message"].as_str().unwrap();
    assert!(msg.contains("notes.txt (journaled "), "{msg}");
    assert!(
        !msg.contains("a.txt"),
        "only the differing path is listed: {msg}"
    );
    assert_eq!(h.events("ws").len(), events, "a refusal is not journaled");
    // Restored, the same journal resumes to the end.
    std::fs::write(&notes, good).unwrap();
    let done = h.resume_until_done("ws", "restored workspace");
    assert_eq!(done.facts.phase, "continued");
}
