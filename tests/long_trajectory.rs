//! A trajectory too long for one `trajectory_parsed` event (format 1.7): its batch summaries
//! are journaled in bounded `batches_listed` events, a run killed between them resumes and
//! lists the rest, and the prepared session is the source's prefix byte for byte.
//!
//! The rollout is the genuine Codex session's header followed by copies of its first batch
//! with fresh call ids (as `benches/scale.rs` generates them).

use std::path::{Path, PathBuf};
use std::process::Command;

use journal_format::Event;
use serde_json::Value;

const PVISOR: &str = env!("CARGO_BIN_EXE_pvisor");
const BATCHES: usize = 12_000;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex/genuine/rollout-final.jsonl")
}

/// Write a rollout of `batches` one-call batches; returns its bytes.
fn rollout(path: &Path, batches: usize) -> Vec<u8> {
    let text = std::fs::read_to_string(fixture()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    // Codex numbers its lines: the copies are numbered on.
    let mut ordinal = 0u64;
    let mut put = |out: &mut String, line: &str| {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["ordinal"] = ordinal.into();
        ordinal += 1;
        out.push_str(&serde_json::to_string(&v).unwrap());
        out.push('\n');
    };
    for l in &lines[..8] {
        put(&mut out, l);
    }
    for i in 0..batches {
        for l in &lines[8..16] {
            put(&mut out, &l.replace("_t000", &format!("_b{i:07}")));
        }
    }
    std::fs::write(path, &out).unwrap();
    out.into_bytes()
}

fn events(journal: &Path) -> Vec<Event> {
    let mut evs = vec![];
    pvisor::journal::read_events(journal, |e| {
        evs.push(e.event);
        Ok(())
    })
    .unwrap();
    evs
}

#[test]
fn a_long_trajectory_is_listed_in_bounded_events_and_resumes_between_them() {
    let root = tempfile::tempdir().unwrap();
    let src = root.path().join("rollout.jsonl");
    let bytes = rollout(&src, BATCHES);
    let work = root.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let run = |id: &str, failpoint: Option<&str>| {
        let mut c = Command::new(PVISOR);
        c.args(["replay", "--agent", "codex", "--trajectory"])
            .arg(&src)
            .args(["--after-step", &BATCHES.to_string(), "--prepare-only"])
            .arg("--workspace")
            .arg(&work)
            .arg("--state-dir")
            .arg(root.path().join("state"))
            .arg("--output-dir")
            .arg(root.path().join("out"))
            .args(["--run-id", id]);
        if let Some(f) = failpoint {
            c.env("PVISOR_FAILPOINT", f);
        }
        c.output().unwrap()
    };
    // Killed right after trajectory_parsed: the summaries after the first event are missing.
    let killed = run("long", Some("after-event:2"));
    assert!(
        !killed.status.success(),
        "the failpoint did not stop the run"
    );
    let journal = root.path().join("state/long/journal.pvj");
    let evs = events(&journal);
    let Some(Event::TrajectoryParsed(t)) = evs.last() else {
        panic!("the journal ends at {:?}", evs.last().map(Event::name));
    };
    assert_eq!(t.batch_count, Some(BATCHES as u64));
    assert!(t.batches.len() < BATCHES, "{}", t.batches.len());
    // Resumed: the rest is listed, in order, and the run completes.
    let resumed = Command::new(PVISOR)
        .args(["replay", "--resume-journal"])
        .arg(root.path().join("state/long"))
        .output()
        .unwrap();
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let result: Value = serde_json::from_slice(&resumed.stdout).unwrap();
    assert_eq!(result["phase"], "prepared");
    assert_eq!(result["prefix_model_turns"], BATCHES as u64);
    let evs = events(&journal);
    let mut listed: Vec<u64> = vec![];
    let mut max_payload = 0;
    for e in &evs {
        max_payload = max_payload.max(e.encode_payload().len());
        match e {
            Event::TrajectoryParsed(t) => listed.extend(t.batches.iter().map(|b| b.index)),
            Event::BatchesListed(l) => {
                assert_eq!(l.first, listed.len() as u64 + 1);
                listed.extend(l.batches.iter().map(|b| b.index));
            }
            _ => {}
        }
    }
    assert_eq!(listed, (1..=BATCHES as u64).collect::<Vec<_>>());
    assert!(
        evs.iter().filter(|e| e.kind() == 24).count() >= 2,
        "the summaries should need several events"
    );
    assert!(max_payload < 2 << 20, "an event of {max_payload} bytes");
    // The prepared session is the source up to the last batch's output (its token count
    // line is after the cut).
    let prepared =
        std::fs::read(root.path().join("out/long/native/prepared-session.jsonl")).unwrap();
    assert!(bytes.starts_with(&prepared));
    let text = std::str::from_utf8(&prepared).unwrap();
    assert!(text
        .lines()
        .last()
        .unwrap()
        .contains("function_call_output"));
    // Offline checks read the chunked journal.
    let verify = Command::new(PVISOR)
        .args(["journal", "audit"])
        .arg(root.path().join("state/long"))
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
}

/// A plan spilled to its file (`PVISOR_PLAN_BUDGET=0`: every batch) prepares and replays the
/// same run as a plan held in memory: the same journaled plan and summaries, the same
/// prepared and reconstructed sessions, the same observations.
#[test]
fn a_spilled_plan_runs_as_a_plan_in_memory() {
    let root = tempfile::tempdir().unwrap();
    let src = root.path().join("rollout.jsonl");
    rollout(&src, 300);
    let run = |id: &str, budget: Option<&str>, mode: &str, n: usize| {
        let work = root.path().join(format!("work-{id}"));
        std::fs::create_dir_all(&work).unwrap();
        let mut c = Command::new(PVISOR);
        c.args(["replay", "--agent", "codex", "--trajectory"])
            .arg(&src)
            .args(["--after-step", &n.to_string(), mode])
            .arg("--workspace")
            .arg(&work)
            .arg("--state-dir")
            .arg(root.path().join("state"))
            .arg("--output-dir")
            .arg(root.path().join("out"))
            .args(["--run-id", id]);
        match budget {
            Some(b) => c.env("PVISOR_PLAN_BUDGET", b),
            None => c.env_remove("PVISOR_PLAN_BUDGET"),
        };
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{id}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let result: Value = serde_json::from_slice(&out.stdout).unwrap();
        result
    };
    let read = |id: &str, file: &str| {
        std::fs::read(root.path().join("out").join(id).join(file))
            .unwrap_or_else(|e| panic!("{id}/{file}: {e}"))
    };
    // What the journal says of the plan: its blob and every summary.
    let plan_facts = |id: &str| {
        let mut facts = vec![];
        for e in events(&root.path().join("state").join(id).join("journal.pvj")) {
            match e {
                Event::TrajectoryParsed(t) => {
                    facts.push(serde_json::to_string(&(&t.plan_blob, &t.batches)).unwrap())
                }
                Event::BatchesListed(l) => facts.push(serde_json::to_string(&l.batches).unwrap()),
                _ => {}
            }
        }
        facts
    };
    for (mode, n) in [("--prepare-only", 250), ("--replay-only", 12)] {
        let tag = &mode[2..4];
        let (mem, spill) = (format!("{tag}-mem"), format!("{tag}-spill"));
        let a = run(&mem, None, mode, n);
        let b = run(&spill, Some("0"), mode, n);
        for key in [
            "phase",
            "quality",
            "after_step",
            "replayed_tool_calls",
            "prefix_model_turns",
        ] {
            assert_eq!(a[key], b[key], "{mode}: {key}");
        }
        assert_eq!(a["metadata"]["observations"], b["metadata"]["observations"]);
        assert_eq!(plan_facts(&mem), plan_facts(&spill), "{mode}");
        assert!(
            read(&mem, "plan.json") == read(&spill, "plan.json"),
            "{mode}: plan.json"
        );
        if mode == "--prepare-only" {
            let s = "native/prepared-session.jsonl";
            assert!(read(&mem, s) == read(&spill, s), "{mode}: {s}");
        } else {
            // Fresh outputs carry what changes from run to run (wall time, chunk id): the
            // other lines are the same, and as many.
            let s = "native/reconstructed-session.jsonl";
            let (a, b) = (read(&mem, s), read(&spill, s));
            let (a, b) = (String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
            assert_eq!(a.lines().count(), b.lines().count(), "{mode}: {s}");
            let outputs = a
                .lines()
                .filter(|l| l.contains("function_call_output"))
                .count();
            assert_eq!(outputs, n, "{mode}: {s}");
            for (x, y) in a.lines().zip(b.lines()) {
                if !x.contains("function_call_output") {
                    assert!(x == y, "{mode}: {s}: {x:.200} vs {y:.200}");
                }
            }
        }
    }
    // The plan lists every batch, the last one too.
    let plan: Value = serde_json::from_slice(&read("pr-spill", "plan.json")).unwrap();
    assert_eq!(plan["batches"].as_array().unwrap().len(), 300);
    assert_eq!(plan["batches"][299]["index"], 300);
}

/// The budget is what decides: with every batch to spill and a temporary directory that
/// cannot hold the spill file, the parse fails and says where; within the budget, the same
/// run needs no file.
#[test]
fn the_spill_file_goes_to_the_temporary_directory() {
    let root = tempfile::tempdir().unwrap();
    let src = root.path().join("rollout.jsonl");
    rollout(&src, 20);
    let work = root.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let missing = root.path().join("no-such-dir");
    let run = |id: &str, budget: &str| {
        Command::new(PVISOR)
            .args(["replay", "--agent", "codex", "--trajectory"])
            .arg(&src)
            .args(["--after-step", "10", "--prepare-only", "--workspace"])
            .arg(&work)
            .arg("--state-dir")
            .arg(root.path().join("state"))
            .arg("--output-dir")
            .arg(root.path().join("out"))
            .args(["--run-id", id])
            .env("PVISOR_PLAN_BUDGET", budget)
            .env("TMPDIR", &missing)
            .output()
            .unwrap()
    };
    let spilled = run("spill", "0");
    let err = String::from_utf8_lossy(&spilled.stderr);
    assert!(!spilled.status.success(), "{err}");
    assert!(
        err.contains("cannot spill the plan") && err.contains("no-such-dir"),
        "{err}"
    );
    let held = run("held", "1000000");
    assert!(
        held.status.success(),
        "{}",
        String::from_utf8_lossy(&held.stderr)
    );
}
