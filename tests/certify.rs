//! `pvisor certify` through the command line, with the REAL pinned agent CLIs against the
//! scripted model server (127.0.0.1): generated tasks recorded by the CLI, replayed at every
//! boundary in the three modes, and a certificate (docs/certify.md). A fixed case count and
//! seed, so that every suite run checks the same tasks.

#[allow(clippy::duplicate_mod)]
#[path = "support/recording.rs"]
mod recording;

use serde_json::Value;
use std::path::Path;

/// Cases per agent in the suite (each is recorded once and replayed at every boundary in
/// three modes, plus a killed and resumed continuation), and turns per case at most.
const CASES: &str = "10";
const MAX_TURNS: &str = "4";
/// The agents whose every CLI start costs seconds (Node or Python start-up, SDK imports) run
/// fewer and shorter cases, so that the suite stays well inside CI's time.
const FEW_CASES: &str = "5";
const FEW_TURNS: &str = "3";
const SEED: &str = "20261203";

fn certify(args: &[&str], work: &Path) -> (i32, Value, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .arg("certify")
        .args(args)
        .args(["--json", "--work-dir"])
        .arg(work)
        .env("PVISOR_AGENTS_DIR", recording::agents_dir())
        .env_remove("PVISOR_FAILPOINT")
        .output()
        .expect("run pvisor certify");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let v = serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn certified(agent: &str, cases: &str, max_turns: &str) {
    let entry = recording::install(agent);
    let work = tempfile::tempdir().unwrap();
    let (code, cert, stderr) = certify(
        &[
            "--agent",
            agent,
            "--agent-entrypoint",
            &entry.display().to_string(),
            "--cases",
            cases,
            "--seed",
            SEED,
            "--max-turns",
            max_turns,
        ],
        work.path(),
    );
    assert_eq!(code, 0, "{agent}: {cert:#}\n{stderr}");
    assert_eq!(cert["schema"], "pvisor.certificate/v1");
    assert_eq!(cert["certified"], true);
    assert_eq!(cert["cases"].to_string(), cases);
    let boundaries = cert["boundaries"].as_u64().unwrap();
    assert!(boundaries >= cases.parse().unwrap(), "{cert}");
    for (p, at_least) in [
        ("prepare_only_untouched", boundaries),
        ("observations_equal", boundaries),
        ("first_requests_equal", boundaries),
        ("folds_equal", 3 * boundaries),
        ("resumes_equal", cases.parse().unwrap()),
    ] {
        assert_eq!(cert[p]["held"], cert[p]["of"], "{agent} {p}: {cert}");
        assert!(
            cert[p]["of"].as_u64().unwrap() >= at_least,
            "{agent} {p}: {cert}"
        );
    }
    assert!(cert["agent_version"].as_str().unwrap().contains(
        &pvisor::adapters::registry()
            .get(agent)
            .unwrap()
            .pinned
            .to_string()
    ));
    // Every case passed: nothing is left in the work folder.
    assert_eq!(std::fs::read_dir(work.path()).unwrap().count(), 0);
    regressions(agent, &entry);
}

/// The smallest failing tasks earlier campaigns found (`tests/certify-regressions/<agent>/`),
/// run again with `--case`: each must hold.
fn regressions(agent: &str, entry: &Path) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/certify-regressions")
        .join(agent);
    let mut cases: Vec<String> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().display().to_string())
        .filter(|p| p.ends_with(".json"))
        .collect();
    if cases.is_empty() {
        return;
    }
    cases.sort();
    let mut args = vec![
        "--agent".to_string(),
        agent.into(),
        "--agent-entrypoint".into(),
    ];
    args.push(entry.display().to_string());
    for c in &cases {
        args.extend(["--case".to_string(), c.clone()]);
    }
    let work = tempfile::tempdir().unwrap();
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, cert, stderr) = certify(&refs, work.path());
    assert_eq!(code, 0, "{agent} regressions: {cert:#}\n{stderr}");
    assert_eq!(cert["cases"].as_u64(), Some(cases.len() as u64));
}

#[test]
fn claude_code_is_certified() {
    certified("claude-code", CASES, MAX_TURNS);
}

#[test]
fn codex_is_certified() {
    certified("codex", CASES, MAX_TURNS);
}

#[test]
fn opencode_is_certified() {
    certified("opencode", FEW_CASES, FEW_TURNS);
}

#[test]
fn pi_is_certified() {
    certified("pi-agent", FEW_CASES, FEW_TURNS);
}

#[test]
fn mini_swe_agent_is_certified() {
    certified("mini-swe-agent", FEW_CASES, FEW_TURNS);
}

#[test]
fn openhands_is_certified() {
    certified("openhands", FEW_CASES, FEW_TURNS);
}

/// A CLI that behaves differently after the recording (a wrapper that asks for another model
/// from its second start on) fails the certificate on the first requests, and the failing
/// case is kept with its task, which `--case` runs again.
#[test]
fn a_cli_that_changes_after_recording_is_not_certified() {
    let real = recording::install("codex");
    let dir = tempfile::tempdir().unwrap();
    let wrapper = dir.path().join("codex");
    let mark = dir.path().join("started-once");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then exec '{real}' \"$@\"; fi\n\
             if [ -e '{mark}' ]; then exec '{real}' -c 'model=\"gpt-5.4\"' \"$@\"; fi\n\
             touch '{mark}'\nexec '{real}' \"$@\"\n",
            real = real.display(),
            mark = mark.display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&wrapper)
        .status()
        .unwrap();
    let work = dir.path().join("work");
    let (code, cert, stderr) = certify(
        &[
            "--agent",
            "codex",
            "--agent-entrypoint",
            &wrapper.display().to_string(),
            "--cases",
            "1",
            "--seed",
            SEED,
            "--max-shrink-iters",
            "0",
        ],
        &work,
    );
    assert_eq!(
        code,
        pvisor::outcome::exit::CERTIFY_FAILED,
        "{cert}\n{stderr}"
    );
    assert_eq!(cert["certified"], false);
    assert_eq!(
        cert["observations_equal"]["held"],
        cert["observations_equal"]["of"]
    );
    assert!(
        cert["first_requests_equal"]["held"].as_u64() < cert["first_requests_equal"]["of"].as_u64(),
        "{cert}"
    );
    let failing = &cert["smallest_failing_case"];
    let reason = failing["reason"].as_str().unwrap();
    // Asked for another model, Codex's first request is not the original one: the bridge
    // refuses it, or it differs from the original request N+1.
    assert!(reason.starts_with("continuation N="), "{reason}");
    let folder = Path::new(failing["folder"].as_str().unwrap());
    let task = folder.join("task.json");
    assert!(task.is_file() && folder.join("requests.jsonl").is_file());
    // The kept task runs again with `--case`; with the real CLI it holds.
    let again = dir.path().join("again");
    let (code, cert, stderr) = certify(
        &[
            "--agent",
            "codex",
            "--agent-entrypoint",
            &real.display().to_string(),
            "--case",
            &task.display().to_string(),
        ],
        &again,
    );
    assert_eq!(code, 0, "{cert}\n{stderr}");
    assert_eq!(cert["cases"], 1);
}
