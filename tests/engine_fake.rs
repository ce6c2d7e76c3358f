//! The engine loop with a fake adapter: fold = result, prepare-only purity, in-doubt policy,
//! resume.

#[path = "support/fake.rs"]
mod fake;

use std::collections::BTreeMap;

use fake::{Env, TRAJ};
use pvisor::kit::Observation;

#[test]
fn replay_only_run_result_equals_the_fold_of_its_journal() {
    let env = Env::new(TRAJ);
    let out = env.run(env.fields(3));
    assert_eq!(out.exit_code, 0, "{:?}", out.result.failure);
    let r = serde_json::to_value(&out.result).unwrap();
    assert_eq!(r["phase"], "replayed");
    assert_eq!(r["quality"], "verified");
    assert_eq!(r["replayed_tool_calls"], 4);
    assert_eq!(r["prefix_model_turns"], 3);
    assert_eq!(r["metadata"]["observations"]["equal"], 3);
    assert_eq!(
        r["metadata"]["observations"]["different"], 1,
        "c4 read 'two' where the original said 'old'"
    );
    assert_eq!(env.refold(), r);
    let on_disk: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.root.join("out/r/result.json")).unwrap())
            .unwrap();
    assert_eq!(on_disk, r);
    let cmp: serde_json::Value = serde_json::from_slice(
        &std::fs::read(env.root.join("out/r/observation-comparison.json")).unwrap(),
    )
    .unwrap();
    let c4 = &cmp["calls"][3];
    assert_eq!(c4["equal"], false);
    assert!(
        c4["diff"].as_str().unwrap().contains("-old")
            && c4["diff"].as_str().unwrap().contains("+two")
    );
    assert_eq!(env.marker(), "c1\nc2\nc3\nc4\n");
    // resuming a finished run does nothing more
    let again = env.resume(false);
    assert_eq!(again.exit_code, 0);
    assert_eq!(env.marker(), "c1\nc2\nc3\nc4\n");
}

#[test]
fn prepare_only_runs_no_tool() {
    let env = Env::new(TRAJ);
    let mut f = env.fields(2);
    f.replay_only = None;
    f.prepare_only = Some(true);
    let out = env.run(f);
    assert_eq!(out.exit_code, 0);
    assert_eq!(out.result.phase.as_deref(), Some("prepared"));
    assert_eq!(
        std::fs::read_dir(env.root.join("ws")).unwrap().count(),
        0,
        "the workspace must be untouched"
    );
    let prepared: BTreeMap<String, Observation> = serde_json::from_slice(
        &std::fs::read(env.root.join("out/r/native/prepared-session.jsonl")).unwrap(),
    )
    .unwrap();
    assert_eq!(prepared["c2"].text, "hi");
}

#[test]
fn an_incomplete_or_missing_boundary_is_a_trajectory_error() {
    let env = Env::new(TRAJ);
    let out = env.run(env.fields(4));
    assert_eq!(out.exit_code, 10);
    let f = out.result.failure.unwrap();
    assert_eq!(f.category.as_str(), "trajectory_error");
    assert!(
        f.message.contains("t.jsonl:4") && f.message.contains("after_step"),
        "{}",
        f.message
    );
    assert_eq!(env.marker(), "", "nothing runs");
}

#[test]
fn non_regenerable_tools_are_refused_unless_stale_is_allowed() {
    let env = Env::new(
        r#"{"calls":[{"id":"w1","tool":"web","input":{},"result":"page"}]}
{"calls":[{"id":"c2","tool":"write","input":{"path":"a.txt","text":"x"},"result":"ok"}]}
"#,
    );
    let out = env.run(env.fields(2));
    assert_eq!(out.exit_code, 30);
    assert!(out
        .result
        .failure
        .as_ref()
        .unwrap()
        .message
        .contains("cannot be regenerated"));
    assert_eq!(env.marker(), "");
    let mut f = env.fields(2);
    f.allow_stale_observations = Some(true);
    f.run_id = Some("r2".into());
    let out = env.run(f);
    assert_eq!(out.exit_code, 0, "{:?}", out.result.failure);
    assert_eq!(out.result.quality.as_deref(), Some("degraded"));
    assert_eq!(out.result.replayed_tool_calls, 1);
}

/// Cut the journal right after the `tool_call_started` of (batch, call).
fn cut_after_start(env: &Env, batch: u64, call: u64) {
    let jp = env.root.join("state/r/journal.pvj");
    let mut end = None;
    let mut offsets = vec![];
    pvisor::journal::read_events(&jp, |e| {
        offsets.push(e.offset);
        if let journal_format::Event::ToolCallStarted(s) = &e.event {
            if s.batch == batch && s.call == call {
                end = Some(offsets.len());
            }
        }
        Ok(())
    })
    .unwrap();
    let cut = offsets[end.unwrap()];
    let b = std::fs::read(&jp).unwrap();
    std::fs::write(&jp, &b[..cut as usize]).unwrap();
    let _ = std::fs::remove_dir_all(env.root.join("out/r"));
}

#[test]
fn an_in_doubt_mutating_call_is_restored_and_runs_once() {
    let env = Env::new(TRAJ);
    assert_eq!(env.run(env.fields(3)).exit_code, 0);
    cut_after_start(&env, 2, 0); // c3 (write) started, outcome lost; its effects landed
    assert_eq!(env.marker(), "c1\nc2\nc3\nc4\n");
    std::fs::write(env.root.join("ws/stray.txt"), "made after the checkpoint").unwrap();
    let out = env.resume(false);
    assert_eq!(out.exit_code, 0, "{:?}", out.result.failure);
    assert_eq!(out.result.phase.as_deref(), Some("replayed"));
    // The workspace went back to the checkpoint taken before c3 (its marker lines and the
    // stray file undone), then c3 and c4 ran: every effect is in the workspace once.
    assert_eq!(env.marker(), "c1\nc2\nc3\nc4\n");
    assert!(!env.root.join("ws/stray.txt").exists());
    let (_, evs, _) = pvisor::journal::Journal::open_dir(&env.root.join("state/r")).unwrap();
    let state = pvisor::fold::fold(&evs).unwrap();
    assert_eq!(
        state.calls[&(2, 0)].in_doubt_decisions,
        vec![journal_format::event::InDoubtDecision::RerunRestored]
    );
    assert_eq!(state.restores.len(), 1);
    assert_eq!(env.refold(), serde_json::to_value(&out.result).unwrap());
}

#[test]
fn without_checkpoints_an_in_doubt_mutating_call_stops_until_at_least_once_is_accepted() {
    let env = Env::new(TRAJ);
    let mut f = env.fields(3);
    f.no_checkpoints = Some(true);
    assert_eq!(env.run(f).exit_code, 0);
    cut_after_start(&env, 2, 0); // c3 (write) started, outcome lost
    let out = env.resume(false);
    assert_eq!(out.exit_code, 31);
    let f = out.result.failure.clone().unwrap();
    assert_eq!(f.category.as_str(), "ambiguous_execution");
    assert!(
        f.message.contains("batch 2 call 0") && f.message.contains("c3"),
        "{}",
        f.message
    );
    assert_eq!(
        env.refold(),
        serde_json::to_value(&out.result).unwrap(),
        "the stop is in the journal"
    );
    // still stopped without consent, and no duplicate decision is journaled
    assert_eq!(env.resume(false).exit_code, 31);
    let out = env.resume(true);
    assert_eq!(out.exit_code, 0, "{:?}", out.result.failure);
    assert_eq!(out.result.phase.as_deref(), Some("replayed"));
    assert_eq!(
        env.marker(),
        "c1\nc2\nc3\nc4\nc3\nc4\n",
        "c3 re-run at least once, c4 run after it; c1, c2 never again"
    );
    assert_eq!(env.refold(), serde_json::to_value(&out.result).unwrap());
}

#[test]
fn an_in_doubt_read_only_call_is_rerun_automatically() {
    let env = Env::new(TRAJ);
    assert_eq!(env.run(env.fields(3)).exit_code, 0);
    cut_after_start(&env, 1, 1); // c2 (read) in doubt
    let out = env.resume(false);
    assert_eq!(out.exit_code, 0, "{:?}", out.result.failure);
    assert_eq!(env.marker(), "c1\nc2\nc3\nc4\nc2\nc3\nc4\n");
}

#[test]
fn a_changed_source_is_refused_on_resume() {
    let env = Env::new(TRAJ);
    assert_eq!(env.run(env.fields(3)).exit_code, 0);
    cut_after_start(&env, 2, 0);
    std::fs::write(env.root.join("t.jsonl"), TRAJ.replace("two", "TWO")).unwrap();
    let out = env.resume(true);
    assert_eq!(out.exit_code, 10);
    assert!(out
        .result
        .failure
        .unwrap()
        .message
        .contains("changed since this run parsed it"));
}

#[test]
fn an_unknown_agent_is_refused_before_the_run_has_a_directory() {
    let env = Env::new(TRAJ);
    let mut f = env.fields(1);
    f.agent = Some("nope".into());
    let out = env.run(f);
    assert_eq!(out.exit_code, 11);
    assert_eq!(
        out.result.failure.as_ref().unwrap().category.as_str(),
        "unsupported_agent"
    );
    assert!(!env.root.join("state/r").exists() && !env.root.join("out/r").exists());
}

/// The registry entry's capabilities are enforced before anything is journaled or run.
#[test]
fn what_an_adapter_cannot_do_is_refused_before_anything_runs() {
    let env = Env::new(TRAJ);
    let mut f = env.fields(2);
    f.replay_only = None; // continue: the fake adapter cannot
    f.model_script = Some(env.root.join("none.json"));
    let out = env.run(f);
    assert_eq!(out.exit_code, 11, "{:?}", out.result.failure);
    let msg = out.result.failure.unwrap().message;
    assert!(msg.contains("cannot continue"), "{msg}");
    assert_eq!(env.marker(), "", "nothing ran");
    assert!(
        !env.root.join("state/r/journal.pvj").exists()
            || pvisor::journal::Journal::open_dir(&env.root.join("state/r"))
                .unwrap()
                .1
                .is_empty(),
        "nothing was journaled"
    );
    // A boundary prompt of a replay-only run is never injected: accepted.
    let mut f = env.fields(2);
    f.boundary_user_prompt = Some("go on".into());
    assert_eq!(env.run(f).exit_code, 0);
}

/// An adapter whose sessions are folders reads them through `Adapter::read_input`: the run
/// parses that canonical form, its lineage digests it, and a resumed run refuses a folder that
/// changed since.
#[test]
fn a_folder_input_is_read_through_the_adapter() {
    let env = Env::new(TRAJ);
    let dir = env.root.join("t.jsonl");
    std::fs::remove_file(&dir).unwrap();
    std::fs::create_dir(&dir).unwrap();
    for (i, l) in TRAJ.lines().enumerate() {
        std::fs::write(dir.join(format!("{i:03}.line")), l).unwrap();
    }
    std::fs::write(dir.join("notes.txt"), "ignored").unwrap();
    let mut f = env.fields(3);
    f.prepare_only = Some(true);
    f.replay_only = None;
    let out = env.run(f);
    assert_eq!(out.exit_code, 0, "{:?}", out.result.failure);
    let r = serde_json::to_value(&out.result).unwrap();
    assert_eq!(r["phase"], "prepared");
    let canonical: String = TRAJ.lines().map(|l| format!("{l}\n")).collect();
    assert_eq!(
        r["metadata"]["lineage"]["source_sha256"],
        pvisor::digest::sha256(canonical.as_bytes())
    );
    // A fresh run of the folder replays; once a file changed, resuming it is refused.
    let env = Env::new(TRAJ);
    let dir = env.root.join("t.jsonl");
    std::fs::remove_file(&dir).unwrap();
    std::fs::create_dir(&dir).unwrap();
    for (i, l) in TRAJ.lines().enumerate() {
        std::fs::write(dir.join(format!("{i:03}.line")), l).unwrap();
    }
    let out = env.run(env.fields(3));
    assert_eq!(out.exit_code, 0, "{:?}", out.result.failure);
    cut_after_start(&env, 2, 0); // interrupted inside the prefix
    let last = TRAJ.lines().last().unwrap().replace("zzz", "yyy");
    std::fs::write(dir.join("004.line"), last).unwrap();
    let out = env.resume(false);
    assert_eq!(out.exit_code, 10, "{:?}", out.result.failure);
    let msg = out.result.failure.unwrap().message;
    assert!(msg.contains("the trajectory changed"), "{msg}");
}

/// A journal whose creation was interrupted inside its 48-byte header (torn at any length, or
/// zeroed) holds no acknowledged record: resuming it says there is nothing to resume, and the
/// run started again with its options completes, recovering the header like a torn tail. A
/// full-length header of garbage is refused with the journal's documented code.
#[test]
fn a_journal_torn_inside_its_header_never_blocks_its_run_id() {
    let env = Env::new(TRAJ);
    let out = env.run(env.fields(3));
    assert_eq!(out.exit_code, 0, "{:?}", out.result.failure);
    let journal = env.root.join("state/r/journal.pvj");
    let header = std::fs::read(&journal).unwrap()[..48].to_vec();
    for len in [0usize, 1, 7, 20, 47] {
        let _ = std::fs::remove_dir_all(env.root.join("state"));
        let _ = std::fs::remove_dir_all(env.root.join("out"));
        std::fs::create_dir_all(env.root.join("state/r")).unwrap();
        std::fs::write(&journal, &header[..len]).unwrap();
        let r = env.resume(false);
        assert_eq!(r.exit_code, 2, "len {len}: {:?}", r.result.failure);
        let again = env.run(env.fields(3));
        assert_eq!(again.exit_code, 0, "len {len}: {:?}", again.result.failure);
        assert_eq!(
            serde_json::to_value(&again.result).unwrap()["phase"],
            "replayed",
            "len {len}"
        );
        assert_eq!(env.refold(), serde_json::to_value(&again.result).unwrap());
    }
    // A header-sized file of zeroed or garbage blocks (no record after it) is recovered too.
    for (label, bytes) in [("zeroed", vec![0u8; 48]), ("garbage", vec![0x5au8; 48])] {
        let _ = std::fs::remove_dir_all(env.root.join("state"));
        let _ = std::fs::remove_dir_all(env.root.join("out"));
        std::fs::create_dir_all(env.root.join("state/r")).unwrap();
        std::fs::write(&journal, &bytes).unwrap();
        let r = env.run(env.fields(3));
        assert_eq!(r.exit_code, 0, "{label}: {:?}", r.result.failure);
    }
    // Records after a damaged header: corruption, refused with its documented code.
    let mut bytes = std::fs::read(&journal).unwrap();
    bytes[..8].copy_from_slice(&[0u8; 8]);
    std::fs::write(&journal, &bytes).unwrap();
    let r = env.resume(false);
    assert_eq!(r.exit_code, 61, "{:?}", r.result.failure);
}
