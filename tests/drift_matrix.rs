//! The drift matrix: replays on another host and another day, with the real agent CLIs.
//!
//! Every case runs `pvisor replay` from the command line in a private mount namespace
//! (`unshare --mount`) where a fresh directory is bound at the recording's original path, so
//! no other run using that path at the same time can collide with it, and checks that the
//! first request the model receives equals the original run's request N+1 (declared dynamic
//! fields aside):
//!
//! - (a) the fixtures as recorded (another host, another day than this machine's);
//! - (b) the agent under libfaketime 3 days ahead and 1 day back (Claude: the notice it then
//!   adds is removed by the declared rule and journaled);
//! - (c) another `TZ` for pvisor (the agent's own zone rules apply);
//! - (d) the recorded host facts edited to values that surely differ from this host
//!   (Claude: kernel `9.9.9-drift`; Codex: a stored zone of `Pacific/Kiritimati` and an old
//!   date), which the continuation sets back to this host's (journaled as `neutralized`);
//! - (e) Claude: a crash right after the first live step, resumed 3 days later, ends with the
//!   same result as the uninterrupted run.

#[path = "support/claude.rs"]
mod claude;
#[path = "support/codex.rs"]
mod codex;
#[path = "support/ns.rs"]
mod ns;

use ns::Case;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const PVISOR: &str = env!("CARGO_BIN_EXE_pvisor");

fn main_requests(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "main")
        .collect()
}

/// The facts a result must share with the uninterrupted run's.
fn outcome(r: &Value) -> Value {
    serde_json::json!({
        "phase": r["phase"], "quality": r["quality"], "agent_status": r["agent_status"],
        "after_step": r["after_step"], "replayed_tool_calls": r["replayed_tool_calls"],
        "prefix_model_turns": r["prefix_model_turns"], "continued_steps": r["continued_steps"],
        "failure": r["failure"],
        "first_request_ends_at_boundary": r["metadata"]["bridge"]["first_request_ends_at_boundary"],
    })
}

// ---------------------------------------------------------------------------------------------
// Claude Code: five-step recording, boundary 2, budget 4 (2 live steps).

const CLAUDE_WORK: &str = "/tmp/pvisor-rec-five-step/work";

fn claude_args(case: &Case, id: &str, trajectory: &Path, entry: &Path) -> Vec<String> {
    let rec = claude::recorded_dir().join("five-step");
    [
        "replay",
        "--agent",
        "claude-code",
        "--run-id",
        id,
        "--after-step",
        "2",
        "--max-steps",
        "4",
        "--trajectory",
        &trajectory.display().to_string(),
        "--workspace",
        CLAUDE_WORK,
        "--state-dir",
        &case.root.path().join("state").display().to_string(),
        "--output-dir",
        &case.root.path().join("out").display().to_string(),
        "--agent-entrypoint",
        &entry.display().to_string(),
        "--model-script",
        &rec.join("script.json").display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Run one Claude case and check request 1 (and 2) against the original requests 3 (and 4).
fn claude_case(case: &mut Case, id: &str, trajectory: &Path) -> (Value, String) {
    let entry = case.wrap(&claude::claude_entrypoint());
    let (code, r, err) = case.pvisor(&claude_args(case, id, trajectory, &entry), |_| {});
    assert_eq!(code, 0, "{id}: {r}\n{err}");
    let rec = claude::recorded_dir().join("five-step");
    let got = main_requests(&case.state(id).join("logs/scripted-model.jsonl"));
    let orig = main_requests(&rec.join("requests.jsonl"));
    assert_eq!(
        got[0]["body"]["messages"], orig[2]["body"]["messages"],
        "{id}: request 1 must be the original request N+1"
    );
    assert_eq!(
        got[0]["body"]["system"], orig[2]["body"]["system"],
        "{id}: system prompt"
    );
    assert_eq!(
        got[0]["body"]["tools"], orig[2]["body"]["tools"],
        "{id}: tools"
    );
    assert_eq!(
        claude::parallel_results_unordered(&got[1]["body"]["messages"]),
        claude::parallel_results_unordered(&orig[3]["body"]["messages"]),
        "{id}: request 2 equals the original too (live parallel results in completion order)"
    );
    assert_eq!(r["agent_status"], "max_steps", "{id}: {r}");
    (r, case.export(id))
}

#[test]
fn claude_as_recorded_another_tz_and_edited_host_facts() {
    let session = claude::recorded_dir().join("five-step/session.jsonl");
    // (a) as recorded: this machine's kernel and date differ from the recording's.
    let mut a = Case::new(CLAUDE_WORK);
    let (_, export) = claude_case(&mut a, "as-recorded", &session);
    assert!(
        !export.contains("claude:date_change_notice"),
        "same clock for pvisor and claude: nothing to remove"
    );
    if pvisor::adapters::claude_code::drift::utc_date_today() != "2026-11-30" {
        assert!(
            export.contains("claude:date"),
            "the recording's date (2026-11-30) was set to today: {export}"
        );
    }
    // (c) another TZ for pvisor: Claude runs with its own TZ (UTC), nothing changes.
    let mut c = Case::new(CLAUDE_WORK);
    c.env.push(("TZ".into(), "Pacific/Kiritimati".into()));
    claude_case(&mut c, "other-tz", &session);
    // (d) the recorded kernel edited to a value that surely differs from this host's; the
    // model-visible `rendered` text is left as recorded.
    let mut d = Case::new(CLAUDE_WORK);
    let edited = d.root.path().join("session-drift.jsonl");
    let text = std::fs::read_to_string(&session).unwrap();
    let re = regex::Regex::new(r#""osVersion":"[^"]*""#).unwrap();
    assert!(re.is_match(&text));
    std::fs::write(
        &edited,
        re.replace_all(&text, r#""osVersion":"Linux 9.9.9-drift""#)
            .as_ref(),
    )
    .unwrap();
    let (_, export) = claude_case(&mut d, "edited-facts", &edited);
    assert!(
        export.contains("Linux 9.9.9-drift"),
        "the edited kernel was neutralized and journaled: {export}"
    );
    // The audit lists what was set.
    let audit = Command::new(PVISOR)
        .args(["journal", "audit"])
        .arg(d.state("edited-facts"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&audit.stdout);
    assert!(audit.status.success(), "{text}");
    assert!(
        text.contains("claude:environment.osVersion: Linux 9.9.9-drift -> Linux "),
        "{text}"
    );
}

#[test]
fn claude_three_days_later_and_one_day_back() {
    let session = claude::recorded_dir().join("five-step/session.jsonl");
    for (id, ft) in [("plus-3d", "+3d"), ("minus-1d", "-1d")] {
        let mut case = Case::new(CLAUDE_WORK);
        case.set_faketime(Some(ft));
        let (_, export) = claude_case(&mut case, id, &session);
        assert!(export.contains("claude:date_change_notice"), "{id}: claude's clock differs from pvisor's: its notice was removed by the declared rule");
    }
}

#[test]
fn claude_crash_after_a_live_step_resumed_three_days_later() {
    let session = claude::recorded_dir().join("five-step/session.jsonl");
    // The uninterrupted run.
    let mut whole = Case::new(CLAUDE_WORK);
    let (reference, export) = claude_case(&mut whole, "whole", &session);
    // The crash comes right after request 2 was validated: live step 1 is complete in
    // Claude's session (its tool results were sent), step 2 not yet answered.
    let seq = export
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| {
            e["event"] == "bridge_request_validated"
                && e["data"]["n"] == 2
                && e["data"]["side"] != true
        })
        .and_then(|e| e["seq"].as_u64())
        .expect("a validated request 2");
    let mut case = Case::new(CLAUDE_WORK);
    let entry = case.wrap(&claude::claude_entrypoint());
    case.env
        .push(("PVISOR_FAILPOINT".into(), format!("after-event:{seq}")));
    let (code, _, err) = case.pvisor(&claude_args(&case, "crash", &session, &entry), |_| {});
    assert_ne!(code, 0, "the failpoint stops the run: {err}");
    case.env.clear();
    // Resumed three days later (pvisor and claude).
    case.set_faketime(Some("+3d"));
    // Claude writes its transcript lazily: step 1's tool calls may have run without their
    // results stored, so they are in doubt; the workspace is restored to the checkpoint
    // taken before they were released, and the step runs again (no consent needed).
    let args: Vec<String> = [
        "replay",
        "--resume-journal",
        &case.state("crash").display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (code, resumed, err) = case.pvisor(&args, |_| {});
    assert_eq!(code, 0, "{resumed}\n{err}");
    assert_eq!(
        outcome(&resumed),
        outcome(&reference),
        "the resumed run ends as the uninterrupted one"
    );
}

// ---------------------------------------------------------------------------------------------
// Codex: the genuine rollout, boundary 1, budget 3.

const CODEX_WORK: &str = "/tmp/realagent-codex.BU6ewi/work";

fn codex_rollout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex/genuine/rollout-final.jsonl")
}

fn codex_case(case: &mut Case, id: &str, trajectory: &Path) -> String {
    let entry = case.wrap(&codex::codex_entrypoint());
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex/five-step/script.json");
    let args: Vec<String> = [
        "replay",
        "--agent",
        "codex",
        "--run-id",
        id,
        "--after-step",
        "1",
        "--max-steps",
        "3",
        "--trajectory",
        &trajectory.display().to_string(),
        "--workspace",
        CODEX_WORK,
        "--state-dir",
        &case.root.path().join("state").display().to_string(),
        "--output-dir",
        &case.root.path().join("out").display().to_string(),
        "--agent-entrypoint",
        &entry.display().to_string(),
        "--model-script",
        &script.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (code, r, err) = case.pvisor(&args, |_| {});
    assert_eq!(code, 0, "{id}: {r}\n{err}");
    assert_eq!(
        r["metadata"]["bridge"]["first_request_ends_at_boundary"], true,
        "{id}: {r}"
    );
    assert_eq!(
        r["metadata"]["bridge"]["rejected_model_requests"], 0,
        "{id}: {r}"
    );
    let got = main_requests(&case.state(id).join("logs/scripted-model.jsonl"));
    let orig = codex::main_requests(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/codex/genuine/requests-run1.jsonl"),
    );
    if !orig.is_empty() {
        let n = got[0]["body"]["input"]
            .as_array()
            .map(Vec::len)
            .unwrap_or(0);
        let want = orig
            .iter()
            .find(|q| q["body"]["input"].as_array().map(Vec::len) == Some(n));
        if let Some(w) = want {
            assert_eq!(
                codex::masked(&got[0]["body"])["input"],
                codex::masked(&w["body"])["input"],
                "{id}: request 1 must be the original request N+1"
            );
        }
    }
    case.export(id)
}

#[test]
fn codex_as_recorded_another_tz_and_edited_host_facts() {
    let rollout = codex_rollout();
    let mut a = Case::new(CODEX_WORK);
    codex_case(&mut a, "as-recorded", &rollout);
    let mut c = Case::new(CODEX_WORK);
    c.env.push(("TZ".into(), "Asia/Tokyo".into()));
    codex_case(&mut c, "other-tz", &rollout);
    // (d) the stored zone and date edited (never model-visible): Codex takes the zone name
    // from /etc/localtime and the date from its TZ; both are set to what it will see.
    let mut d = Case::new(CODEX_WORK);
    let edited = d.root.path().join("rollout-drift.jsonl");
    let tz = regex::Regex::new(r#""timezone":\s*"[^"]*""#).unwrap();
    let date = regex::Regex::new(r#""current_date":\s*"[^"]*""#).unwrap();
    let text: String = std::fs::read_to_string(&rollout)
        .unwrap()
        .lines()
        .map(|l| {
            let ws = l.contains("\"type\":\"world_state\"");
            let l = if ws {
                tz.replace_all(l, r#""timezone":"Pacific/Kiritimati""#)
                    .into_owned()
            } else {
                l.to_string()
            };
            let l = if ws {
                date.replace_all(&l, r#""current_date":"2020-01-01""#)
                    .into_owned()
            } else {
                l
            };
            l + "\n"
        })
        .collect();
    assert!(
        text.contains("Pacific/Kiritimati"),
        "the rollout has a world_state zone to edit"
    );
    std::fs::write(&edited, text).unwrap();
    let export = codex_case(&mut d, "edited-facts", &edited);
    assert!(
        export.contains("codex:timezone") && export.contains("Pacific/Kiritimati"),
        "{export}"
    );
}
