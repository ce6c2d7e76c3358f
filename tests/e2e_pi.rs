//! Pi 0.83.0 beyond the conformance kit (which drives every Pi fixture as a v3 session
//! file): the `--mode json` event form in all three modes, the boundary prompt sent by Pi's
//! own `prompt()`, request 1's headers, the refusal of a tool Pi does not offer, and damaged
//! inputs. Real `pi` (its SDK, inside its own entrypoint) against the scripted model server.

#[path = "support/claude.rs"]
mod claude;
#[allow(dead_code)]
#[path = "conformance/kit.rs"]
mod kit;
#[path = "support/ns.rs"]
mod ns;
#[path = "support/pi.rs"]
mod pi;
#[path = "conformance/pi_cli.rs"]
mod pi_cli;

use std::path::PathBuf;

use kit::{differences, main_requests, refold, Fixture};
use serde_json::Value;

fn fixture(name: &str) -> Fixture {
    pi_cli::fixtures()
        .into_iter()
        .find(|f| f.name == format!("pi-agent/{name}"))
        .unwrap()
}

/// The event stream next to a fixture's session file.
fn events_of(f: &Fixture) -> PathBuf {
    let dir = f.trajectory.parent().unwrap();
    if dir.join("stdout.jsonl").is_file() {
        dir.join("stdout.jsonl")
    } else {
        dir.join("stdout-run1.jsonl")
    }
}

/// `--mode json` events work in every mode: prepare-only, replay-only (every observation
/// regenerated), and a continuation whose request 1 is the original request N+1.
#[test]
fn the_event_stream_works_in_all_three_modes() {
    for name in ["genuine", "tools", "errors"] {
        let f = fixture(name);
        let events = events_of(&f);
        let adapter = (pvisor::adapters::registry().get("pi-agent").unwrap().make)();
        let plan = adapter
            .parse(&events, &std::fs::read(&events).unwrap())
            .unwrap();
        let n = plan.max_boundary();
        assert!(n >= 3, "{name}: {n}");

        let case = f.case();
        let r = f.replay(&case, "p", n, Some(&events), &["--prepare-only".into()]);
        assert_eq!(r.ok(name)["phase"], "prepared");

        let case = f.case();
        let r = f.replay(&case, "r", n, Some(&events), &["--replay-only".into()]);
        let r = r.ok(name).clone();
        assert_eq!(r["phase"], "replayed", "{name}");
        assert_eq!(r["metadata"]["observations"]["different"], 0, "{name}: {r}");
        let calls: usize = plan.batches.in_memory().unwrap()[..n]
            .iter()
            .map(|b| b.calls.len())
            .sum();
        assert_eq!(r["replayed_tool_calls"], calls as u64);

        // The event form has no model/thinking entries: continue where they are the
        // recording's (Pi's defaults).
        let k = n.min(2);
        let case = f.case();
        let entry = (f.entrypoint)();
        let r = f.replay(
            &case,
            "c",
            k,
            Some(&events),
            &f.continue_args(&plan, k, 1, &entry),
        );
        let r = r.ok(name).clone();
        assert_eq!(r["phase"], "continued", "{name}: {r}");
        assert_eq!(refold(&case.state("c")), r, "{name}");
        let got = main_requests(&case.state("c").join("logs/scripted-model.jsonl"));
        let d = differences(
            &(f.mask)(&f.original_after(&plan, k)["body"]),
            &(f.mask)(&got[0]["body"]),
        );
        assert!(d.is_empty(), "{name}: request 1 differs at {d:?}");
    }
}

/// Headers of request 1 are the original's, but for the connection's own and
/// `accept-encoding`, which the bridge drops (it reads the answer: docs/bridge.md).
#[test]
fn request_one_headers_are_the_originals() {
    let f = fixture("genuine");
    let plan = f.plan();
    let case = f.case();
    let entry = (f.entrypoint)();
    let r = f.replay(&case, "c", 1, None, &f.continue_args(&plan, 1, 1, &entry));
    r.ok("genuine");
    let got = main_requests(&case.state("c").join("logs/scripted-model.jsonl"));
    let orig = f.original_after(&plan, 1);
    let keep = |h: &Value| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = h
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.as_str().unwrap_or("").to_string()))
            .filter(|(k, _)| {
                ![
                    "host",
                    "content-length",
                    "x-api-key",
                    "connection",
                    "accept-encoding",
                ]
                .contains(&k.as_str())
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(keep(&orig["headers"]), keep(&got[0]["headers"]));
}

/// With a boundary prompt, Pi itself sends it (one `prompt()`): right after O′N, once, in
/// every request; it is in the continued session as Pi's own user message, and the prompt
/// file is gone after the run.
#[test]
fn a_boundary_prompt_is_pis_own_next_prompt() {
    let f = fixture("tools");
    let plan = f.plan();
    let n = 2;
    let case = f.case();
    let entry = (f.entrypoint)();
    let p = "Also say which files you touched.";
    let mut args = f.continue_args(&plan, n, 2, &entry);
    args.extend(["--boundary-user-prompt".into(), p.into()]);
    let r = f.replay(&case, "b", n, None, &args);
    let r = r.ok("boundary").clone();
    assert_eq!(
        r["metadata"]["boundary_user_prompt"]["injected"], true,
        "{r}"
    );
    assert_eq!(
        r["metadata"]["input_condition"],
        "boundary_user_prompt_appended"
    );
    let got = main_requests(&case.state("b").join("logs/scripted-model.jsonl"));
    assert!(!got.is_empty());
    let orig = (f.mask)(&f.original_after(&plan, n)["body"]);
    let plen = orig["messages"].as_array().unwrap().len();
    for (i, g) in got.iter().enumerate() {
        let msgs = g["body"]["messages"].as_array().unwrap();
        let at = &msgs[plen];
        assert_eq!(at["role"], "user", "request {i}");
        assert_eq!(
            at["content"][0]["text"], p,
            "request {i}: P right after O′N"
        );
        let count = g["body"].to_string().matches(p).count();
        assert_eq!(count, 1, "request {i}: P exactly once");
    }
    // Request 1 is the original N+1 plus P.
    let mut first = (f.mask)(&got[0]["body"]);
    first["messages"].as_array_mut().unwrap().remove(plen);
    let strip = |v: &Value| pvisor::protocol::Protocol::Anthropic.canonical_message(v);
    let a: Vec<Value> = orig["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(strip)
        .collect();
    let b: Vec<Value> = first["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(strip)
        .collect();
    assert_eq!(a, b);
    let continued = r["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["role"] == "continued_native_session")
        .unwrap();
    let text = std::fs::read_to_string(continued["path"].as_str().unwrap()).unwrap();
    assert_eq!(text.matches(p).count(), 1, "Pi stored P once");
    assert!(!case.state("b").join("pi/boundary-prompt.txt").exists());
}

/// A session that calls a tool Pi 0.83.0 does not offer by default is refused before
/// anything runs, naming the tool.
#[test]
fn a_tool_pi_does_not_offer_is_refused_before_anything_runs() {
    let f = fixture("tools");
    let case = f.case();
    let text = std::fs::read_to_string(&f.trajectory).unwrap();
    let changed = text.replacen(r#""name":"bash""#, r#""name":"grep""#, 1);
    assert_ne!(changed, text);
    let bad = case.root.path().join("with-grep.jsonl");
    std::fs::write(&bad, changed).unwrap();
    let r = f.replay(&case, "g", 1, Some(&bad), &["--replay-only".into()]);
    assert_ne!(r.code, 0, "{}", r.result);
    let msg = r.result["failure"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("grep"), "the tool is named: {msg}");
    assert_eq!(r.result["replayed_tool_calls"], 0, "{}", r.result);
    let work = case.fresh().join(f.original_cwd.file_name().unwrap());
    assert!(!work.join("src").exists(), "nothing ran in the workspace");
}

/// Truncated and bit-flipped session files and event streams: an error naming the file, or
/// a plan; never a panic.
#[test]
fn damaged_inputs_of_both_forms_never_panic() {
    let adapter = (pvisor::adapters::registry().get("pi-agent").unwrap().make)();
    for name in ["genuine", "tools", "errors"] {
        let f = fixture(name);
        for path in [f.trajectory.clone(), events_of(&f)] {
            let bytes = std::fs::read(&path).unwrap();
            let every = (bytes.len() / 400).max(1);
            let mut cases: Vec<Vec<u8>> = (0..bytes.len())
                .step_by(every)
                .map(|c| bytes[..c].to_vec())
                .collect();
            cases.extend(kit::byte_flips(&bytes, every));
            let mut errors = 0;
            for (i, b) in cases.iter().enumerate() {
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    adapter.parse(&path, b)
                })) {
                    Err(_) => panic!("{}: damaged case {i} panicked", path.display()),
                    Ok(Err(e)) => {
                        errors += 1;
                        assert_eq!(e.path, path);
                    }
                    Ok(Ok(_)) => {}
                }
            }
            assert!(
                errors > 0,
                "{}: no damaged case was refused",
                path.display()
            );
        }
    }
}
