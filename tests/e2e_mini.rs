//! mini-swe-agent beyond the conformance kit (which drives every fixture of both versions
//! through all three modes, every boundary, the drift matrix and the kill subset): the
//! boundary prompt as mini's own next user message, the continued trajectory in the original
//! format, the mini of the session's own version, and refusals before anything runs. Real
//! `mini` 2.4.6 and 1.17.5 (the companion runner inside their own entrypoints) against the
//! scripted model server.

#[path = "support/claude.rs"]
mod claude;
#[allow(dead_code)]
#[path = "conformance/kit.rs"]
mod kit;
#[path = "support/mini.rs"]
mod mini;
#[path = "conformance/mini_swe_agent.rs"]
mod mini_swe_agent;
#[path = "support/ns.rs"]
mod ns;

use kit::{main_requests, Fixture};
use serde_json::Value;

fn fixture(name: &str) -> Fixture {
    mini_swe_agent::fixtures()
        .into_iter()
        .find(|f| f.name == format!("mini-swe-agent/{name}"))
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

fn json_of(p: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// With a boundary prompt, the runner appends it as mini's next `user` message: right after
/// O′N, once, in every request (both versions); the continued trajectory keeps it once, and
/// the prompt file is gone after the run.
#[test]
fn a_boundary_prompt_is_minis_next_user_message() {
    for name in ["v2-tools", "v1-tools"] {
        let f = fixture(name);
        let plan = f.plan();
        let n = 2;
        let case = f.case();
        let entry = (f.entrypoint)();
        let p = "Also say which files you touched.";
        let mut args = f.continue_args(&plan, n, 2, &entry);
        args.extend(["--boundary-user-prompt".into(), p.into()]);
        let r = f.replay(&case, "b", n, None, &args);
        let r = r.ok(name).clone();
        assert_eq!(
            r["metadata"]["boundary_user_prompt"]["injected"], true,
            "{name}: {r}"
        );
        let got = main_requests(&case.state("b").join("logs/scripted-model.jsonl"));
        assert!(!got.is_empty(), "{name}");
        let orig = &f.original_after(&plan, n)["body"];
        let plen = orig["messages"].as_array().unwrap().len();
        for (i, g) in got.iter().enumerate() {
            let msgs = g["body"]["messages"].as_array().unwrap();
            assert_eq!(
                msgs[plen],
                serde_json::json!({"role": "user", "content": p}),
                "{name} request {i}"
            );
            assert_eq!(
                g["body"].to_string().matches(p).count(),
                1,
                "{name} request {i}: once"
            );
        }
        let mut first = got[0]["body"].clone();
        first["messages"].as_array_mut().unwrap().remove(plen);
        assert_eq!(&first, orig, "{name}: request 1 is the original N+1 plus P");
        let text = std::fs::read_to_string(artifact(&r, "continued_native_session")).unwrap();
        assert_eq!(text.matches(p).count(), 1, "{name}: mini stored P once");
        assert!(!case.state("b").join("mini/boundary-prompt.txt").exists());
    }
}

/// The continued trajectory is what mini itself writes: the original format, the rebuilt
/// messages unchanged at its start, the live turns after them, mini's own `LimitsExceeded`
/// when the budget ends it, and the recorded `step_limit` in its configuration.
#[test]
fn the_continued_trajectory_is_in_the_original_format() {
    for name in ["v2-tools", "v1-tools"] {
        let f = fixture(name);
        let plan = f.plan();
        let n = 3;
        let case = f.case();
        let entry = (f.entrypoint)();
        let r = f.replay(&case, "c", n, None, &f.continue_args(&plan, n, 2, &entry));
        let r = r.ok(name).clone();
        assert_eq!(r["agent_status"], "max_steps", "{name}: {r}");
        let original = json_of(&f.trajectory);
        let rebuilt = json_of(&artifact(&r, "reconstructed_native_session"));
        let continued = json_of(&artifact(&r, "continued_native_session"));
        assert_eq!(
            continued["trajectory_format"], original["trajectory_format"],
            "{name}"
        );
        assert_eq!(
            continued["info"]["mini_version"],
            original["info"]["mini_version"]
        );
        assert_eq!(continued["info"]["exit_status"], "LimitsExceeded", "{name}");
        assert_eq!(
            continued["info"]["config"]["agent"]["step_limit"],
            original["info"]["config"]["agent"]["step_limit"],
            "{name}: the recorded step_limit is saved back"
        );
        let k = rebuilt["messages"].as_array().unwrap().len();
        let msgs = continued["messages"].as_array().unwrap();
        assert_eq!(
            &msgs[..k],
            &rebuilt["messages"].as_array().unwrap()[..],
            "{name}"
        );
        let live_replies = msgs[k..]
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count();
        assert_eq!(live_replies, 2, "{name}: two live model replies");
        // The rebuilt trajectory keeps the recorded system and task messages byte for byte.
        assert_eq!(
            rebuilt["messages"].as_array().unwrap()[..2],
            original["messages"].as_array().unwrap()[..2]
        );
    }
}

/// A 1.17.5 trajectory is never run by another mini: given 2.4.6's entrypoint, or with no
/// 1.17.5 installed, the run is refused before any command runs, naming what to install.
#[test]
fn a_session_runs_only_with_the_mini_of_its_own_version() {
    let f = fixture("v1-tools");
    let plan = f.plan();
    // Another version's entrypoint: continue is refused in preflight, replay-only by the runner.
    let case = f.case();
    let other = mini::mini_246();
    let r = f.replay(&case, "o", 2, None, &f.continue_args(&plan, 2, 2, &other));
    assert_ne!(r.code, 0, "{}", r.result);
    assert!(
        r.stderr.contains("2.4.6") && r.stderr.contains("1.17.5"),
        "{}",
        r.stderr
    );
    let case = f.case();
    let args = vec![
        "--replay-only".to_string(),
        "--agent-entrypoint".into(),
        other.display().to_string(),
    ];
    let r = f.replay(&case, "o2", 2, None, &args);
    assert_ne!(r.code, 0, "{}", r.result);
    let msg = r.result["failure"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("mini-swe-agent@1.17.5"), "{msg}");
    assert_eq!(r.result["replayed_tool_calls"], 0);
    let work = case.fresh().join(f.original_cwd.file_name().unwrap());
    assert!(!work.join("a.txt").exists(), "nothing ran in the workspace");
    // No installation of 1.17.5 at all (an empty agents dir, no `mini` on PATH).
    let mut case = f.case();
    let empty = case.root.path().join("no-agents");
    case.env
        .push(("PVISOR_AGENTS_DIR".into(), empty.display().to_string()));
    case.env.push(("PATH".into(), "/usr/bin:/bin".into()));
    let r = f.replay(&case, "n", 2, None, &["--replay-only".into()]);
    assert_ne!(r.code, 0, "{}", r.result);
    let msg = r.result["failure"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("pvisor agents install mini-swe-agent@1.17.5"),
        "{msg}"
    );
}

/// A trajectory recorded in another environment (docker) is refused before anything runs
/// in replay-only and continue modes; prepare-only still rebuilds it.
#[test]
fn an_environment_other_than_local_is_refused_before_anything_runs() {
    let f = fixture("v2-tools");
    let case = f.case();
    let text = std::fs::read_to_string(&f.trajectory).unwrap();
    let changed = text.replacen(
        "minisweagent.environments.local.LocalEnvironment",
        "minisweagent.environments.docker.DockerEnvironment",
        1,
    );
    assert_ne!(changed, text);
    let bad = case.root.path().join("docker.traj.json");
    std::fs::write(&bad, changed).unwrap();
    let r = f.replay(&case, "d", 2, Some(&bad), &["--replay-only".into()]);
    assert_eq!(r.code, 11, "{}\n{}", r.result, r.stderr);
    let msg = r.result["failure"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("DockerEnvironment"), "{msg}");
    assert_eq!(r.result["replayed_tool_calls"], 0);
    let r = f.replay(&case, "p", 2, Some(&bad), &["--prepare-only".into()]);
    r.ok("prepare-only");
}

/// A trajectory recorded with another litellm provider (`anthropic/…`) is continued through
/// the Chat Completions bridge with litellm's OpenAI provider: request 1 is the original N+1
/// but for `model`, which names the bare model.
#[test]
fn a_model_of_another_provider_is_continued_through_the_chat_bridge() {
    let f = fixture("v2-tools");
    let plan = f.plan();
    let n = 2;
    let case = f.case();
    let text = std::fs::read_to_string(&f.trajectory).unwrap();
    let changed = text.replace(
        r#""model_name": "openai/fake-model""#,
        r#""model_name": "anthropic/claude-sonnet-4-5""#,
    );
    assert_ne!(changed, text);
    let edited = case.root.path().join("anthropic.traj.json");
    std::fs::write(&edited, changed).unwrap();
    let entry = (f.entrypoint)();
    let r = f.replay(
        &case,
        "a",
        n,
        Some(&edited),
        &f.continue_args(&plan, n, 2, &entry),
    );
    let r = r.ok("another provider").clone();
    assert_eq!(
        r["metadata"]["bridge"]["first_request_ends_at_boundary"], true,
        "{r}"
    );
    let got = main_requests(&case.state("a").join("logs/scripted-model.jsonl"));
    let mut want = f.original_after(&plan, n)["body"].clone();
    want["model"] = "claude-sonnet-4-5".into();
    assert_eq!(got[0]["body"], want);
}

/// A continuation killed after its second live step resumes from mini's own saved
/// trajectory (2.x saves after every step; 1.x only at the end, so its live turns are asked
/// again) and ends as the uninterrupted run does.
#[test]
fn a_continuation_killed_after_live_steps_resumes_to_the_same_outcome() {
    for name in ["v2-tools", "v1-tools"] {
        let f = fixture(name);
        let plan = f.plan();
        let n = 1;
        let whole_case = f.case();
        let entry = whole_case.wrap(&(f.entrypoint)());
        let args = f.continue_args(&plan, n, 3, &entry);
        let whole = f.replay(&whole_case, "w", n, None, &args).ok(name).clone();
        let mut steps = vec![];
        pvisor::journal::read_events(&whole_case.state("w").join("journal.pvj"), |e| {
            if matches!(e.event, journal_format::Event::ContinuationStep(_)) {
                steps.push(e.seq);
            }
            Ok(())
        })
        .unwrap();
        assert!(steps.len() >= 2, "{name}: {steps:?}");
        let mut case = f.case();
        let entry = case.wrap(&(f.entrypoint)());
        case.env.push((
            "PVISOR_FAILPOINT".into(),
            format!("after-event:{}", steps[1]),
        ));
        let r = f.replay(&case, "k", n, None, &f.continue_args(&plan, n, 3, &entry));
        assert_ne!(r.code, 0, "{name}: the failpoint stops the run");
        case.env.clear();
        let resumed = f.resume(&case, "k");
        let resumed = resumed.ok(&format!("{name} resumed")).clone();
        assert_eq!(kit::outcome(&resumed), kit::outcome(&whole), "{name}");
        assert_eq!(
            kit::refold(&case.state("k")),
            resumed,
            "{name}: fold == result"
        );
    }
}
