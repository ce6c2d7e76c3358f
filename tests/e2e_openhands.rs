//! OpenHands beyond the conformance kit (which drives the genuine and recorded conversations
//! through all three modes, every boundary, the drift matrix and the kill subset): what the
//! continued store holds, what is left behind, and refusals before anything runs. The real
//! SDK (1.34.0, installed by `pvisor agents install openhands`) against the scripted model
//! server.

#[path = "support/claude.rs"]
mod claude;
#[allow(dead_code)]
#[path = "conformance/kit.rs"]
mod kit;
#[path = "support/ns.rs"]
mod ns;
#[path = "support/openhands.rs"]
mod openhands;
#[path = "conformance/openhands.rs"]
mod openhands_sdk;

use kit::Fixture;
use serde_json::Value;

fn fixture(name: &str) -> Fixture {
    openhands_sdk::fixtures()
        .into_iter()
        .find(|f| f.name == format!("openhands/{name}"))
        .unwrap()
}

fn artifact(r: &Value, role: &str) -> std::path::PathBuf {
    r["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["role"] == role)
        .and_then(|a| a["path"].as_str())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| panic!("no {role} artifact in {r}"))
}

/// Every file below `dir` (relative path → bytes).
fn files(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    openhands::walk(dir)
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| {
            (
                p.strip_prefix(dir).unwrap().display().to_string(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}

/// The genuine user's resume, replayed: after the `finish` batch with the user's next prompt,
/// the SDK continues the rebuilt store to `finished`. The continued store starts with the
/// rebuilt events, holds the prompt once as a user message, never the bridge key, and the
/// workspace ends as the genuine one did. No tmux server of the run is left.
#[test]
fn the_genuine_resume_continues_to_the_genuine_workspace() {
    let f = fixture("genuine");
    let plan = f.plan();
    let n = plan.max_boundary();
    let (_, prompt) = f.prompts[0].clone();
    let case = f.case();
    let entry = case.wrap(&(f.entrypoint)());
    // The fixture's prompt is at its last boundary: continue_args passes it.
    let args = f.continue_args(&plan, n, 4, &entry);
    assert!(args.contains(&prompt));
    let r = f.replay(&case, "g", n, None, &args);
    let r = r.ok("genuine resume").clone();
    assert_eq!(r["agent_status"], "completed", "{r}");
    assert_eq!(r["continued_steps"], 2, "{r}");
    let rebuilt = std::fs::read_to_string(artifact(&r, "reconstructed_native_session")).unwrap();
    let continued = std::fs::read_to_string(artifact(&r, "continued_native_session")).unwrap();
    let (rb, ct): (Vec<&str>, Vec<&str>) = (rebuilt.lines().collect(), continued.lines().collect());
    assert_eq!(
        ct[1..rb.len()],
        rb[1..],
        "the continued store starts with the rebuilt events"
    );
    let base: Value = serde_json::from_str(ct[0]).unwrap();
    assert_eq!(base["execution_status"], "finished");
    assert_eq!(base["agent"]["llm"]["api_key"], "**********");
    let users: Vec<Value> = ct[rb.len()..]
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "MessageEvent" && e["source"] == "user")
        .collect();
    assert_eq!(users.len(), 1);
    assert_eq!(
        users[0]["llm_message"]["content"][0]["text"],
        prompt.as_str()
    );
    // No key reaches the store: every `api_key` in it is the SDK's redacted form.
    let keys = continued.matches("\"api_key\":").count();
    assert!(keys >= 2, "the agent's and the condenser's LLM");
    assert_eq!(
        continued.matches("\"api_key\":\"**********\"").count(),
        keys
    );
    // The workspace ends as the genuine one (a.txt, notes.txt with its third line).
    let ws = case.fresh().join(f.original_cwd.file_name().unwrap());
    let want = files(&openhands::fixtures_dir().join("genuine/workspace-after"));
    assert_eq!(files(&ws), want);
    // The run's tmux server (its own socket below the state dir) is gone.
    let tmux = case.state("g").join("openhands/tmux");
    let ls = std::process::Command::new("tmux")
        .args(["-L", "openhands", "ls"])
        .env("TMUX_TMPDIR", &tmux)
        .output()
        .unwrap();
    assert!(
        !ls.status.success(),
        "a tmux server of the run is left: {}",
        String::from_utf8_lossy(&ls.stdout)
    );
}

/// A conversation whose agent has a tool pvisor does not replay is refused before anything
/// runs, naming the tool; prepare-only still writes the cut store.
#[test]
fn an_agent_with_a_tool_pvisor_does_not_replay_is_refused_before_anything_runs() {
    let f = fixture("genuine");
    let case = f.case();
    let text = f.input_text();
    let changed = text.replacen(
        r#"{"name":"task_tracker","params":{}}"#,
        r#"{"name":"task_tracker","params":{}},{"name":"browser_tool_set","params":{}}"#,
        1,
    );
    assert_ne!(changed, text);
    let bad = case.root.path().join("browser.jsonl");
    std::fs::write(&bad, changed).unwrap();
    let r = f.replay(&case, "b", 2, Some(&bad), &["--replay-only".into()]);
    assert_eq!(r.code, 11, "{}\n{}", r.result, r.stderr);
    let msg = r.result["failure"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("browser_tool_set"), "{msg}");
    assert_eq!(r.result["replayed_tool_calls"], 0);
    let r = f.replay(&case, "p", 2, Some(&bad), &["--prepare-only".into()]);
    r.ok("prepare-only");
}

/// A Python without the SDK given as the entrypoint is named as such before any action runs.
#[test]
fn a_python_without_the_sdk_is_refused_before_any_action_runs() {
    let f = fixture("genuine");
    let case = f.case();
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .expect("a system python3");
    let r = f.replay(
        &case,
        "np",
        2,
        None,
        &[
            "--replay-only".into(),
            "--agent-entrypoint".into(),
            python.into(),
        ],
    );
    assert_ne!(r.code, 0, "{}", r.result);
    let msg = r.result["failure"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("openhands-sdk"), "{msg}\n{}", r.stderr);
    assert_eq!(r.result["replayed_tool_calls"], 0);
    assert!(r.stderr.contains("\nhint: "), "{}", r.stderr);
}

/// A continuation killed after its second live step (the SDK had stored the first step's
/// action and result) resumes from the SDK's own store, cut after its last complete turn,
/// and ends as the uninterrupted run does; the resumed store holds each live turn once.
#[test]
fn a_continuation_killed_after_live_steps_resumes_to_the_same_outcome() {
    let f = fixture("mixed");
    let plan = f.plan();
    let n = 2;
    let whole_case = f.case();
    let entry = whole_case.wrap(&(f.entrypoint)());
    let args = f.continue_args(&plan, n, 3, &entry);
    let whole = f
        .replay(&whole_case, "w", n, None, &args)
        .ok("whole")
        .clone();
    assert_eq!(whole["agent_status"], "max_steps", "{whole}");
    let mut steps = vec![];
    pvisor::journal::read_events(&whole_case.state("w").join("journal.pvj"), |e| {
        if matches!(e.event, journal_format::Event::ContinuationStep(_)) {
            steps.push(e.seq);
        }
        Ok(())
    })
    .unwrap();
    assert!(steps.len() >= 2, "{steps:?}");
    let mut case = f.case();
    let entry = case.wrap(&(f.entrypoint)());
    case.env.push((
        "PVISOR_FAILPOINT".into(),
        format!("after-event:{}", steps[1]),
    ));
    let r = f.replay(&case, "k", n, None, &f.continue_args(&plan, n, 3, &entry));
    assert_ne!(r.code, 0, "the failpoint stops the run");
    case.env.clear();
    let resumed = f.resume(&case, "k").ok("resumed").clone();
    assert_eq!(kit::outcome(&resumed), kit::outcome(&whole));
    assert_eq!(kit::refold(&case.state("k")), resumed, "fold == result");
    let continued =
        std::fs::read_to_string(artifact(&resumed, "continued_native_session")).unwrap();
    let calls: Vec<String> = continued
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "ActionEvent")
        .filter_map(|e| e["tool_call_id"].as_str().map(str::to_string))
        .collect();
    let unique: std::collections::BTreeSet<&String> = calls.iter().collect();
    assert_eq!(
        unique.len(),
        calls.len(),
        "a live turn stored twice: {calls:?}"
    );
}
