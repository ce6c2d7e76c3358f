//! Claude Code rebuild against the recorded genuine sessions (no agent needed): for every
//! boundary, the rendered prefix equals the messages of the request Claude really sent next.

#[path = "support/claude_plan.rs"]
mod claude_plan;

use claude_plan::*;
use pvisor::adapters::claude_code::rebuild::{
    escaped_project_dir, rebuild, rebuild_lines, render_messages, ClaudeHome,
};
use pvisor::kit::{Observation, RebuildRequest};
use pvisor::protocol::anthropic::canonical_message as canonical_anthropic_message;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn recorded(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude/recorded")
        .join(name)
}

fn all_requests(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for f in ["requests.jsonl", "requests-resume.jsonl"] {
        if let Ok(t) = std::fs::read_to_string(dir.join(f)) {
            out.extend(
                t.lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap())
                    .filter(|r| r["kind"] == "main"),
            );
        }
    }
    out
}

/// The first main request that carries the result of `call_id`.
fn request_after(reqs: &[Value], call_id: &str) -> Value {
    reqs.iter()
        .find(|r| {
            r["body"]["messages"].as_array().unwrap().iter().any(|m| {
                m["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|b| b["tool_use_id"] == call_id)
            })
        })
        .unwrap_or_else(|| panic!("no request carries {call_id}"))
        .clone()
}

fn canonical_messages(req: &Value) -> Vec<Value> {
    req["body"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(canonical_anthropic_message)
        .collect()
}

#[test]
fn prefix_equals_the_next_recorded_request_at_every_boundary() {
    for name in ["five-step", "search-errors", "edits"] {
        let dir = recorded(name);
        let source = dir.join("session.jsonl");
        let plan = plan_from_session(&source);
        let reqs = all_requests(&dir);
        assert!(
            plan.max_boundary() >= 4,
            "{name}: {} batches",
            plan.batches.len()
        );
        for n in 1..=plan.max_boundary() {
            let obs = original_observations(&plan, n);
            let r = rebuild_lines(&source, &plan, n, &obs)
                .unwrap_or_else(|e| panic!("{name} N={n}: {e}"));
            let last_call = &plan.batches.in_memory().unwrap()[n - 1]
                .calls
                .last()
                .unwrap()
                .call_id;
            let expected = canonical_messages(&request_after(&reqs, last_call));
            assert_eq!(
                r.prefix.len(),
                expected.len(),
                "{name} N={n}: message count"
            );
            for (i, (a, b)) in r.prefix.iter().zip(&expected).enumerate() {
                assert_eq!(a, b, "{name} N={n}: message {i}");
            }
            assert_eq!(r.prefix, r.original_prefix);
            assert!(r.replaced.is_empty());
        }
    }
}

#[test]
fn rebuilt_session_is_a_clean_cut() {
    let dir = recorded("five-step");
    let source = dir.join("session.jsonl");
    let plan = plan_from_session(&source);
    let n = 3;
    let r = rebuild_lines(&source, &plan, n, &original_observations(&plan, n)).unwrap();
    let lines: Vec<Value> = r
        .text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Ends with the batch-3 results; unchanged lines are byte-identical to the source.
    let src: Vec<&str> = std::fs::read_to_string(&source)
        .unwrap()
        .lines()
        .map(String::from)
        .collect::<Vec<_>>()
        .leak()
        .iter()
        .map(|s| s.as_str())
        .collect();
    for l in r.text.lines() {
        assert!(
            src.contains(&l),
            "a line was rewritten although nothing changed"
        );
    }
    let last = lines.last().unwrap();
    assert_eq!(
        last["message"]["content"][0]["tool_use_id"],
        "toolu_pv_t002_1"
    );
    for l in &lines {
        assert_ne!(l["type"], "cost-state");
        if l["type"] == "assistant" {
            assert!(["msg_pv_t000", "msg_pv_t001", "msg_pv_t002"]
                .contains(&l["message"]["id"].as_str().unwrap()));
        }
    }
    // uuid / parentUuid consistency.
    let uuids: Vec<&str> = lines.iter().filter_map(|l| l["uuid"].as_str()).collect();
    for l in &lines {
        if let Some(p) = l["parentUuid"].as_str() {
            assert!(uuids.contains(&p), "dangling parent {p}");
        }
        if l["type"] == "last-prompt" {
            assert!(uuids.contains(&l["leafUuid"].as_str().unwrap()));
        }
    }
    assert_eq!(r.session_id, "e8a2467a-ba83-4554-be3e-e274fa2053bf");
    assert_eq!(r.records as usize, lines.len());
}

#[test]
fn fresh_observation_is_spliced_and_rendered() {
    let dir = recorded("five-step");
    let source = dir.join("session.jsonl");
    let plan = plan_from_session(&source);
    let n = 3;
    let mut obs = original_observations(&plan, n);
    obs.insert(
        "toolu_pv_t002_1".into(),
        Observation {
            text: "EDITED-OBS bye".into(),
            is_error: false,
            native: None,
        },
    );
    obs.insert(
        "toolu_pv_t000_0".into(),
        Observation {
            text: "Exit code 1\nboom".into(),
            is_error: true,
            native: None,
        },
    );
    let r = rebuild_lines(&source, &plan, n, &obs).unwrap();
    assert_eq!(r.replaced, ["toolu_pv_t000_0", "toolu_pv_t002_1"]);
    let last = r.prefix.last().unwrap();
    assert_eq!(last["content"][1]["content"], "EDITED-OBS bye");
    assert_eq!(last["content"][1]["is_error"], false);
    assert_eq!(r.prefix[3]["content"][0]["content"], "Exit code 1\nboom");
    assert_eq!(r.prefix[3]["content"][0]["is_error"], true);
    // Only those two messages differ from the original prefix.
    let diff: Vec<usize> = (0..r.prefix.len())
        .filter(|&i| r.prefix[i] != r.original_prefix[i])
        .collect();
    assert_eq!(diff, [3, 7]);
    // The records carry the new text and no stale toolUseResult.
    for l in r
        .text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
    {
        let c = &l["message"]["content"][0];
        if c["tool_use_id"] == "toolu_pv_t002_1" {
            assert_eq!(c["content"], "EDITED-OBS bye");
            assert!(l.get("toolUseResult").is_none());
        }
        if c["tool_use_id"] == "toolu_pv_t002_0" {
            assert!(
                l.get("toolUseResult").is_some(),
                "unchanged result keeps its metadata"
            );
        }
    }
}

#[test]
fn rebuild_writes_session_artifact_and_mtimes() {
    let dir = recorded("five-step");
    let source = dir.join("session.jsonl");
    let plan = plan_from_session(&source);
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("work");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "line one\nline two\n").unwrap();
    std::fs::write(ws.join("a.txt"), "hi\n").unwrap();
    let state = tmp.path().join("state");
    let artifact = tmp.path().join("out/native/reconstructed.jsonl");
    let obs = original_observations(&plan, 3);
    let mut plan2 = plan.clone();
    plan2.original_cwd = Some(PathBuf::from("/tmp/pvisor-rec-five-step/work"));
    let req = RebuildRequest {
        source: &source,
        plan: &plan2,
        after_step: 3,
        observations: pvisor::kit::Observations::Fresh(&obs),
        workspace: &ws,
        state_dir: &state,
        artifact_path: &artifact,
        touch_workspace: true,
        agent_entrypoint: None,
        for_continuation: true,
    };
    let s = rebuild(&req).unwrap();
    let home = ClaudeHome::new(&state);
    let real = std::fs::canonicalize(&ws).unwrap();
    assert_eq!(
        s.native_path,
        home.config_dir
            .join("projects")
            .join(escaped_project_dir(&real).unwrap())
            .join(format!("{}.jsonl", s.session_id))
    );
    let bytes = std::fs::read(&s.native_path).unwrap();
    assert_eq!(bytes, std::fs::read(&artifact).unwrap());
    assert_eq!(
        s.digest,
        format!("blake3:{}", blake3::hash(&bytes).to_hex())
    );
    // notes.txt was last named by the Read of batch 3 (assistant record at 01:53:02.784Z);
    // a.txt is never named by a file tool and keeps its mtime.
    let m = std::fs::metadata(ws.join("notes.txt"))
        .unwrap()
        .modified()
        .unwrap();
    let secs = m.duration_since(std::time::UNIX_EPOCH).unwrap();
    assert_eq!(secs.as_millis(), 1796003582784);
    let a = std::fs::metadata(ws.join("a.txt"))
        .unwrap()
        .modified()
        .unwrap();
    assert!(a.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() > 1796003582);
}

#[test]
fn project_dir_escaping() {
    assert_eq!(
        escaped_project_dir(Path::new("/tmp/pvisor-rec-five-step/work")).unwrap(),
        "-tmp-pvisor-rec-five-step-work"
    );
    assert_eq!(
        escaped_project_dir(Path::new("/home/u/my_proj.x")).unwrap(),
        "-home-u-my-proj-x"
    );
    assert!(escaped_project_dir(Path::new(&format!("/{}", "a".repeat(230)))).is_err());
}

#[test]
fn incomplete_or_missing_boundary_is_refused() {
    let dir = recorded("edits");
    let source = dir.join("session.jsonl");
    let plan = plan_from_session(&source);
    assert!(rebuild_lines(&source, &plan, 0, &original_observations(&plan, 0)).is_err());
    let n = plan.batches.len() + 1;
    assert!(rebuild_lines(&source, &plan, n, &Default::default()).is_err());
    // A missing observation is refused.
    let mut obs = original_observations(&plan, 2);
    obs.remove("toolu_pv_t000_0");
    assert!(rebuild_lines(&source, &plan, 2, &obs).is_err());
    let _ = render_messages(&[]);
}
