//! OpenCode 1.17.11 beyond the conformance kit (which drives every OpenCode fixture as
//! `opencode export` JSON): the two other input forms through the CLI, the refusal of a
//! continuation the event stream cannot support, the agent clock behind the recording's,
//! and damaged inputs of every form. Real `opencode` against the scripted model server.

#[path = "support/claude.rs"]
mod claude;
#[allow(dead_code)]
#[path = "conformance/kit.rs"]
mod kit;
#[path = "support/ns.rs"]
mod ns;
#[path = "support/opencode.rs"]
mod opencode;
#[path = "conformance/opencode_cli.rs"]
mod opencode_cli;

use std::path::PathBuf;

use kit::{differences, main_requests, refold, Fixture};
use serde_json::Value;

fn recorded() -> Vec<Fixture> {
    opencode_cli::fixtures()
        .into_iter()
        .filter(|f| f.name != "opencode/genuine")
        .collect()
}

fn form(f: &Fixture, file: &str) -> PathBuf {
    f.trajectory.with_file_name(file)
}

/// The stdout events and the store replay every boundary's observations like the export.
#[test]
fn events_and_store_forms_replay_the_recorded_observations() {
    for f in recorded() {
        let plan = f.plan();
        let n = plan.max_boundary();
        for file in ["stdout.jsonl", "opencode.db"] {
            let case = f.case();
            let r = f.replay(
                &case,
                "r",
                n,
                Some(&form(&f, file)),
                &["--replay-only".into()],
            );
            let label = format!("{} {file}", f.name);
            let r = r.ok(&label).clone();
            assert_eq!(r["phase"], "replayed", "{label}");
            assert_eq!(
                r["metadata"]["observations"]["different"], 0,
                "{label}: {r}"
            );
            let calls: usize = plan
                .batches
                .in_memory()
                .unwrap()
                .iter()
                .map(|b| b.calls.len())
                .sum();
            assert_eq!(r["replayed_tool_calls"], calls as u64, "{label}");
            assert_eq!(refold(&case.state("r")), r, "{label}");
            let prepared = r["artifacts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["role"] == "prepared_native_session")
                .expect("a prepared session");
            assert!(
                prepared["path"].as_str().unwrap().ends_with(".json"),
                "{label}: every form is rebuilt as an export: {prepared}"
            );
        }
    }
}

/// A continuation from the store sends the original next request; from 1.17.11's event
/// stream (no `user` event: the prompt is unknown) it is refused before anything runs.
#[test]
fn store_continues_and_events_without_a_prompt_are_refused_up_front() {
    let f = &recorded()[0];
    let plan = f.plan();
    let n = 1;
    let entry = (f.entrypoint)();

    let case = f.case();
    let db = form(f, "opencode.db");
    let r = f.replay(
        &case,
        "s",
        n,
        Some(&db),
        &f.continue_args(&plan, n, 1, &entry),
    );
    let r = r.ok("store").clone();
    assert_eq!(r["phase"], "continued", "{r}");
    let got = main_requests(&case.state("s").join("logs/scripted-model.jsonl"));
    let orig = f.original_after(&plan, n);
    let d = differences(&(f.mask)(&orig["body"]), &(f.mask)(&got[0]["body"]));
    assert!(d.is_empty(), "store: request 1 differs at {d:?}");

    let case = f.case();
    let events = form(f, "stdout.jsonl");
    let r = f.replay(
        &case,
        "e",
        n,
        Some(&events),
        &f.continue_args(&plan, n, 1, &entry),
    );
    assert_eq!(r.code, 11, "{}\n{}", r.result, r.stderr);
    let msg = r.result["failure"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("user"), "the refusal says why: {msg}");
    assert_eq!(
        r.result["replayed_tool_calls"], 0,
        "nothing ran: {}",
        r.result
    );
    assert!(
        !case.state("e").join("logs/scripted-model.jsonl").exists()
            || main_requests(&case.state("e").join("logs/scripted-model.jsonl")).is_empty(),
        "no model request"
    );
}

/// The agent's clock a day behind the recording: the session is imported moved back (the
/// journal says so), request 1 is still the original, and the continued session keeps the
/// recorded ids.
#[test]
fn an_agent_clock_behind_the_recording_keeps_new_ids_after_the_recorded_ones() {
    let f = &recorded()[0];
    let plan = f.plan();
    let n = plan.max_boundary();
    let mut case = f.case();
    // A day before the newest recorded message, whatever today is.
    let orig: Value = serde_json::from_slice(&std::fs::read(&f.trajectory).unwrap()).unwrap();
    let newest = orig["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["info"]["time"]["created"].as_i64())
        .max()
        .unwrap();
    let at = time::OffsetDateTime::from_unix_timestamp(newest / 1000 - 86_400).unwrap();
    let fmt = time::macros::format_description!("@[year]-[month]-[day] [hour]:[minute]:[second]");
    case.set_faketime(Some(&at.format(&fmt).unwrap()));
    let entry = case.wrap(&(f.entrypoint)());
    let r = f.replay(&case, "c", n, None, &f.continue_args(&plan, n, 1, &entry));
    let r = r.ok("clock").clone();
    assert_eq!(r["phase"], "continued", "{r}");
    let got = main_requests(&case.state("c").join("logs/scripted-model.jsonl"));
    let d = differences(
        &(f.mask)(&f.original_after(&plan, n)["body"]),
        &(f.mask)(&got[0]["body"]),
    );
    assert!(d.is_empty(), "request 1 differs at {d:?}");
    let journal = case.export("c");
    assert!(
        journal.contains("opencode:message_clock"),
        "the move is journaled: {journal}"
    );
    let continued = r["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["role"] == "continued_native_session")
        .expect("a continued session");
    let cont: Value =
        serde_json::from_slice(&std::fs::read(continued["path"].as_str().unwrap()).unwrap())
            .unwrap();
    let orig: Value = serde_json::from_slice(&std::fs::read(&f.trajectory).unwrap()).unwrap();
    let k = plan.batches.in_memory().unwrap()[n - 1].model_turn;
    let ids = |v: &Value| -> Vec<String> {
        v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["info"]["id"].as_str().unwrap().to_string())
            .collect()
    };
    let (c, o) = (ids(&cont), ids(&orig));
    assert!(c.len() > k, "the continuation added messages: {c:?}");
    assert_eq!(c[..k], o[..k], "the recorded prefix keeps its ids");
    let known: std::collections::HashSet<&String> = o.iter().collect();
    for m in cont["messages"].as_array().unwrap().iter().skip(k) {
        if let Some(p) = m["info"]["parentID"].as_str() {
            assert!(
                known.contains(&p.to_string()) || c.contains(&p.to_string()),
                "parentID {p} points into the session"
            );
        }
    }
}

/// Truncated and bit-flipped inputs of every form: an error naming the file, or a plan;
/// never a panic.
#[test]
fn damaged_inputs_of_every_form_never_panic() {
    let adapter = (pvisor::adapters::registry().get("opencode").unwrap().make)();
    let f = &recorded()[0];
    let dir = std::env::temp_dir().join(format!("pvisor-opencode-damage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["export.json", "stdout.jsonl", "opencode.db"] {
        let path = form(f, file);
        let bytes = std::fs::read(&path).unwrap();
        let every = (bytes.len() / 300).max(1);
        let mut errors = 0;
        let mut cases: Vec<Vec<u8>> = (0..bytes.len())
            .step_by(every)
            .map(|cut| bytes[..cut].to_vec())
            .collect();
        cases.extend(kit::byte_flips(&bytes, every * 3));
        for (i, b) in cases.iter().enumerate() {
            let p: PathBuf = if file == "opencode.db" {
                let p = dir.join(format!("{i}.db"));
                std::fs::write(&p, b).unwrap();
                p
            } else {
                path.clone()
            };
            let got =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| adapter.parse(&p, b)));
            match got {
                Err(_) => panic!("{file}: a damaged input (case {i}) panicked"),
                Ok(Err(e)) => {
                    errors += 1;
                    assert!(e.path == p, "{file}: the error names the file: {e}");
                }
                Ok(Ok(_)) => {}
            }
        }
        assert!(errors > 0, "{file}: no damaged case was refused");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
