//! The engine loop with a fake adapter (unit level: the acceptance tests of real adapters use
//! the real agent CLIs). Checks fold = result, prepare-only purity, in-doubt policy, resume.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pvisor::adapter::*;
use pvisor::engine::{self, Start};
use pvisor::error::{ExecError, TrajectoryError};
use pvisor::request::{ReplayRequest, RequestFields};

/// Fake trajectory: one JSON line per batch: `{"calls":[{"id","tool","input","result"}]}`.
/// Tools: `write {path,text}` (mutating, appends to a marker file too), `read {path}`,
/// `web` (non-regenerable).
struct Fake;

impl Adapter for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn parse(&self, path: &Path, bytes: &[u8]) -> Result<Plan, TrajectoryError> {
        let text = std::str::from_utf8(bytes).map_err(|_| TrajectoryError::new(path, 0, "file", "not UTF-8"))?;
        let mut batches = vec![];
        for (i, line) in text.lines().enumerate() {
            let v: serde_json::Value = serde_json::from_str(line).map_err(|e| TrajectoryError::new(path, i + 1, "line", e.to_string()))?;
            let calls = v["calls"].as_array().ok_or_else(|| TrajectoryError::new(path, i + 1, "calls", "missing"))?;
            let calls: Vec<ToolCall> = calls
                .iter()
                .map(|c| ToolCall {
                    call_id: c["id"].as_str().unwrap_or_default().into(),
                    tool: c["tool"].as_str().unwrap_or_default().into(),
                    input: c["input"].clone(),
                    original: c.get("result").and_then(|r| r.as_str()).map(|r| Observation { text: r.into(), is_error: false, native: None }),
                    locator: Locator { line: i + 1, native_id: None },
                })
                .collect();
            let complete = calls.iter().all(|c| c.original.is_some());
            batches.push(Batch { index: i + 1, calls, model_turn: i + 1, locator: Locator { line: i + 1, native_id: None }, complete });
        }
        Ok(Plan { agent: "fake".into(), recorded_version: None, session_id: Some("s1".into()), original_cwd: None, model_turns: batches.len() + 1, batches })
    }
    fn classify(&self, call: &ToolCall) -> ToolClass {
        match call.tool.as_str() {
            "write" => ToolClass::Mutating,
            "read" => ToolClass::ReadOnly,
            "web" => ToolClass::NonRegenerable,
            _ => ToolClass::Unknown,
        }
    }
    fn execute(&self, call: &ToolCall, ctx: &ExecContext) -> Result<ToolOutcome, ExecError> {
        let p = ctx.workspace.join(call.input["path"].as_str().unwrap_or("x"));
        let marker = ctx.workspace.join(".marker");
        let mut m = std::fs::read_to_string(&marker).unwrap_or_default();
        m.push_str(&format!("{}\n", call.call_id));
        std::fs::write(&marker, m).unwrap();
        let text = match call.tool.as_str() {
            "write" => {
                std::fs::write(&p, call.input["text"].as_str().unwrap_or("")).map_err(|e| ExecError::Io { tool: "write".into(), source: e })?;
                "ok".to_string()
            }
            _ => std::fs::read_to_string(&p).unwrap_or_else(|_| "missing".into()),
        };
        Ok(ToolOutcome { observation: Observation { text, is_error: false, native: None }, exit_code: Some(0), duration_ms: 1, touched: if call.tool == "write" { vec![PathBuf::from(call.input["path"].as_str().unwrap())] } else { vec![] } })
    }
    fn rebuild(&self, req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
        let body = serde_json::to_vec(req.observations).unwrap();
        std::fs::create_dir_all(req.state_dir).unwrap();
        std::fs::write(req.artifact_path, &body).map_err(|e| AdapterError::Io { path: req.artifact_path.into(), source: e })?;
        Ok(RebuiltSession { native_path: req.artifact_path.into(), artifact_path: req.artifact_path.into(), digest: pvisor::digest::blake3(&body), records: req.observations.len() as u64, session_id: "s1".into(), prefix: vec![] })
    }
}

fn lookup(name: &str) -> Result<Box<dyn Adapter>, String> {
    if name == "fake" { Ok(Box::new(Fake)) } else { Err(format!("unknown agent `{name}`")) }
}

const TRAJ: &str = r#"{"calls":[{"id":"c1","tool":"write","input":{"path":"a.txt","text":"hi"},"result":"ok"},{"id":"c2","tool":"read","input":{"path":"a.txt"},"result":"hi"}]}
{"calls":[{"id":"c3","tool":"write","input":{"path":"b.txt","text":"two"},"result":"ok"}]}
{"calls":[{"id":"c4","tool":"read","input":{"path":"b.txt"},"result":"old"}]}
{"calls":[{"id":"c5","tool":"read","input":{"path":"zzz"}}]}
"#;

struct Env {
    _d: tempfile::TempDir,
    root: PathBuf,
}

impl Env {
    fn new(traj: &str) -> Env {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().to_path_buf();
        std::fs::create_dir_all(root.join("ws")).unwrap();
        std::fs::write(root.join("t.jsonl"), traj).unwrap();
        Env { _d: d, root }
    }
    fn fields(&self, after: u64) -> RequestFields {
        RequestFields {
            agent: Some("fake".into()),
            trajectory: Some(self.root.join("t.jsonl")),
            after_step: Some(after),
            workspace: Some(self.root.join("ws")),
            state_dir: Some(self.root.join("state")),
            output_dir: Some(self.root.join("out")),
            run_id: Some("r".into()),
            replay_only: Some(true),
            ..Default::default()
        }
    }
    fn run(&self, f: RequestFields) -> engine::Outcome {
        engine::run_with(Start::Fresh(ReplayRequest::from_fields(f).unwrap()), lookup)
    }
    fn resume(&self, accept: bool) -> engine::Outcome {
        engine::run_with(Start::Resume { path: self.root.join("state/r"), boundary_user_prompt: None, accept_at_least_once: accept }, lookup)
    }
    fn marker(&self) -> String {
        std::fs::read_to_string(self.root.join("ws/.marker")).unwrap_or_default()
    }
    fn refold(&self) -> serde_json::Value {
        let (_, evs, _) = pvisor::journal::Journal::open_dir(&self.root.join("state/r")).unwrap();
        serde_json::to_value(pvisor::fold::derive(&pvisor::fold::fold(&evs).unwrap())).unwrap()
    }
}

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
    assert_eq!(r["metadata"]["observations"]["different"], 1, "c4 read 'two' where the original said 'old'");
    assert_eq!(env.refold(), r);
    let on_disk: serde_json::Value = serde_json::from_slice(&std::fs::read(env.root.join("out/r/result.json")).unwrap()).unwrap();
    assert_eq!(on_disk, r);
    let cmp: serde_json::Value = serde_json::from_slice(&std::fs::read(env.root.join("out/r/observation-comparison.json")).unwrap()).unwrap();
    let c4 = &cmp["calls"][3];
    assert_eq!(c4["equal"], false);
    assert!(c4["diff"].as_str().unwrap().contains("-old") && c4["diff"].as_str().unwrap().contains("+two"));
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
    assert_eq!(std::fs::read_dir(env.root.join("ws")).unwrap().count(), 0, "the workspace must be untouched");
    let prepared: BTreeMap<String, Observation> = serde_json::from_slice(&std::fs::read(env.root.join("out/r/native/prepared-session.jsonl")).unwrap()).unwrap();
    assert_eq!(prepared["c2"].text, "hi");
}

#[test]
fn an_incomplete_or_missing_boundary_is_a_trajectory_error() {
    let env = Env::new(TRAJ);
    let out = env.run(env.fields(4));
    assert_eq!(out.exit_code, 10);
    let f = out.result.failure.unwrap();
    assert_eq!(f.category, "trajectory_error");
    assert!(f.message.contains("t.jsonl:4") && f.message.contains("after_step"), "{}", f.message);
    assert_eq!(env.marker(), "", "nothing runs");
}

#[test]
fn non_regenerable_tools_are_refused_unless_stale_is_allowed() {
    let env = Env::new(r#"{"calls":[{"id":"w1","tool":"web","input":{},"result":"page"}]}
{"calls":[{"id":"c2","tool":"write","input":{"path":"a.txt","text":"x"},"result":"ok"}]}
"#);
    let out = env.run(env.fields(2));
    assert_eq!(out.exit_code, 30);
    assert!(out.result.failure.as_ref().unwrap().message.contains("cannot be regenerated"));
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
fn an_in_doubt_mutating_call_stops_until_at_least_once_is_accepted() {
    let env = Env::new(TRAJ);
    assert_eq!(env.run(env.fields(3)).exit_code, 0);
    cut_after_start(&env, 2, 0); // c3 (write) started, outcome lost
    let out = env.resume(false);
    assert_eq!(out.exit_code, 31);
    let f = out.result.failure.clone().unwrap();
    assert_eq!(f.category, "ambiguous_execution");
    assert!(f.message.contains("batch 2 call 0") && f.message.contains("c3"), "{}", f.message);
    assert_eq!(env.refold(), serde_json::to_value(&out.result).unwrap(), "the stop is in the journal");
    // still stopped without consent, and no duplicate decision is journaled
    assert_eq!(env.resume(false).exit_code, 31);
    let out = env.resume(true);
    assert_eq!(out.exit_code, 0, "{:?}", out.result.failure);
    assert_eq!(out.result.phase.as_deref(), Some("replayed"));
    assert_eq!(env.marker(), "c1\nc2\nc3\nc4\nc3\nc4\n", "c3 re-run at least once, c4 run after it; c1, c2 never again");
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
    assert!(out.result.failure.unwrap().message.contains("changed since this run parsed it"));
}

#[test]
fn an_unknown_agent_is_journaled_as_unsupported() {
    let env = Env::new(TRAJ);
    let mut f = env.fields(1);
    f.agent = Some("nope".into());
    let out = env.run(f);
    assert_eq!(out.exit_code, 11);
    assert_eq!(out.result.failure.as_ref().unwrap().category, "unsupported_agent");
    assert_eq!(env.refold(), serde_json::to_value(&out.result).unwrap());
}
