//! The adapter conformance kit: one test binary, every registered adapter on its fixtures,
//! through the command line, with the real agent CLI against the scripted model server
//! (127.0.0.1). Each replay runs at the recording's path in a private mount namespace.
//!
//! Checks, for every fixture:
//! - parse → rebuild keeps the native records it does not change byte-identical;
//! - a boundary is never inside a batch, and one beyond the last complete batch is a
//!   trajectory error naming `after_step`;
//! - `--prepare-only` runs nothing and leaves the workspace (names, bytes, mtimes) untouched;
//! - `--replay-only` regenerates observations equal to the recorded ones (declared dynamic
//!   fields aside), and fold(journal) is the printed result;
//! - the continuation with the real CLI sends, at every boundary (of the primary sessions;
//!   the first and last of the others), a first request equal to the original request N+1
//!   except the declared dynamic fields; a budget of two live steps ends in `max_steps` when
//!   both scripted replies call tools;
//! - the drift matrix (on the primary sessions): the agent 3 days ahead and 1 day back
//!   (libfaketime), another TZ for pvisor, the recorded host facts edited — the first request
//!   is still the original one;
//! - a kill subset: failpoints in the replay, at the rebuild and during the continuation,
//!   and random SIGKILLs, resumed (a continuation 3 days later) to the uninterrupted run's
//!   outcome and workspace — an adapter that cannot resume its agent's own session starts
//!   the agent again from the boundary (`continuation_started.from_boundary`);
//! - a damaged record is a trajectory error naming its line; a well-formed record with a
//!   field of the wrong type is one naming its line and field.
//!
//! Each check is one trial per adapter (`<adapter>::<check>`, a libtest-mimic harness). The primary sessions are
//! each adapter's genuine ones (recorded by the real CLI on another machine and day).
//! `PVISOR_CONFORMANCE_FULL=1` runs the whole matrix on every fixture.
//!
//! Adding an adapter: one line in [`ADAPTERS`] and its fixtures module
//! (docs/adding-an-agent.md).

#[path = "support/claude.rs"]
mod claude;
#[path = "support/codex.rs"]
mod codex;
#[path = "support/kills.rs"]
mod kills;
#[path = "support/mini.rs"]
mod mini;
#[path = "support/ns.rs"]
mod ns;
#[path = "support/opencode.rs"]
mod opencode;
#[path = "support/openhands.rs"]
mod openhands;
#[path = "support/pi.rs"]
mod pi;

#[path = "conformance/claude_code.rs"]
mod claude_code;
#[path = "conformance/codex_cli.rs"]
mod codex_cli;
#[path = "conformance/kit.rs"]
mod kit;
#[path = "conformance/mini_swe_agent.rs"]
mod mini_swe_agent;
#[path = "conformance/opencode_cli.rs"]
mod opencode_cli;
#[path = "conformance/openhands.rs"]
mod openhands_sdk;
#[path = "conformance/pi_cli.rs"]
mod pi_cli;

use kit::{differences, file_states, main_requests, outcome, refold, Fixture};
use serde_json::Value;

type Fixtures = fn() -> Vec<Fixture>;

/// Every registered adapter with its fixtures.
const ADAPTERS: &[(&str, Fixtures)] = &[
    ("claude-code", claude_code::fixtures),
    ("codex", codex_cli::fixtures),
    ("opencode", opencode_cli::fixtures),
    ("pi-agent", pi_cli::fixtures),
    ("mini-swe-agent", mini_swe_agent::fixtures),
    ("openhands", openhands_sdk::fixtures),
];

/// The fixtures of one adapter of [`ADAPTERS`].
fn fixtures(agent: &str) -> Vec<Fixture> {
    let (_, f) = ADAPTERS
        .iter()
        .find(|(n, _)| *n == agent)
        .expect("an adapter of the kit");
    f()
}

/// `PVISOR_CONFORMANCE_FULL=1`: the whole matrix — the continuation at every boundary of
/// every fixture, the drift matrix on every fixture, every kind of random kill and every
/// failpoint on every session of the kill subset (with `PVISOR_KILL_FULL=1` semantics).
fn full_matrix() -> bool {
    std::env::var("PVISOR_CONFORMANCE_FULL").is_ok_and(|v| v == "1")
}

/// An adapter's fixtures, each marked whether it is one of the adapter's primary sessions:
/// the genuine ones (recorded by the real CLI on another machine and day), or the first
/// fixture when the adapter has none. They are continued at every boundary, run the drift
/// matrix and form the kill subset.
fn marked_primary(all: Vec<Fixture>) -> Vec<(Fixture, bool)> {
    let genuine = |f: &Fixture| f.name.contains("/genuine");
    let any = all.iter().any(genuine);
    all.into_iter()
        .enumerate()
        .map(|(i, f)| {
            let primary = if any { genuine(&f) } else { i == 0 };
            (f, primary)
        })
        .collect()
}

/// A check of the kit, run on one adapter's fixtures.
type Check = fn(&str);

/// Every check, the longest first (the harness starts trials in order).
const CHECKS: &[(&str, Check)] = &[
    (
        "kill_subset_resumes_to_the_same_result",
        kill_subset_resumes_to_the_same_result,
    ),
    (
        "continuation_sends_the_original_next_request_at_every_boundary",
        continuation_sends_the_original_next_request_at_every_boundary,
    ),
    (
        "replay_only_regenerates_the_recorded_observations",
        replay_only_regenerates_the_recorded_observations,
    ),
    (
        "drift_matrix_another_day_zone_and_host",
        drift_matrix_another_day_zone_and_host,
    ),
    (
        "prepare_only_runs_nothing_and_touches_nothing",
        prepare_only_runs_nothing_and_touches_nothing,
    ),
    (
        "parse_and_rebuild_keep_untouched_records_byte_identical",
        parse_and_rebuild_keep_untouched_records_byte_identical,
    ),
    (
        "the_boundary_is_never_inside_a_batch",
        the_boundary_is_never_inside_a_batch,
    ),
    (
        "a_damaged_record_is_a_trajectory_error_naming_its_line",
        a_damaged_record_is_a_trajectory_error_naming_its_line,
    ),
    (
        "a_field_of_the_wrong_type_is_a_trajectory_error_naming_line_and_field",
        a_field_of_the_wrong_type_is_a_trajectory_error_naming_line_and_field,
    ),
];

/// One trial per adapter and check, named `<adapter>::<check>`: `cargo test --test conformance
/// opencode::` runs one adapter's checks, `… continuation` one check on every adapter.
/// Most of a trial's time is the agent CLIs' own waits (startup, polling, timers), not CPU,
/// so four trials run at once by default (`--test-threads N` to change it). Trials start
/// longest first: the checks in [`CHECKS`] order, adapters in reverse registration order
/// (the Python agents, registered last, are the slowest).
fn main() {
    let mut args = libtest_mimic::Arguments::from_args();
    args.test_threads.get_or_insert(4);
    let mut trials = vec![libtest_mimic::Trial::test(
        "every_registered_adapter_is_in_the_kit",
        || {
            every_registered_adapter_is_in_the_kit();
            Ok(())
        },
    )];
    for (check, run) in CHECKS {
        for (agent, _) in ADAPTERS.iter().rev() {
            trials.push(libtest_mimic::Trial::test(
                format!("{agent}::{check}"),
                move || {
                    run(agent);
                    Ok(())
                },
            ));
        }
    }
    libtest_mimic::run(&args, trials).exit();
}

fn every_registered_adapter_is_in_the_kit() {
    let registered: Vec<&str> = pvisor::adapters::AGENTS.iter().map(|a| a.name).collect();
    let kit: Vec<&str> = ADAPTERS.iter().map(|(n, _)| *n).collect();
    assert_eq!(registered, kit);
    for (name, f) in ADAPTERS {
        assert!(!f().is_empty(), "{name} has no fixture");
    }
}

fn prepared_artifact(r: &Value) -> std::path::PathBuf {
    r["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["role"] == "prepared_native_session")
        .and_then(|a| a["path"].as_str())
        .map(std::path::PathBuf::from)
        .expect("a prepared session artifact")
}

fn parse_and_rebuild_keep_untouched_records_byte_identical(agent: &str) {
    for f in fixtures(agent) {
        let plan = f.plan();
        let n = plan.max_boundary();
        let case = f.case();
        let r = f.replay(&case, "rt", n, None, &["--prepare-only".into()]);
        let r = r.ok(&f.name).clone();
        let source = f.input_text();
        let lines: std::collections::HashSet<&str> = source.lines().collect();
        let prepared = std::fs::read_to_string(prepared_artifact(&r)).unwrap();
        for (i, l) in prepared
            .lines()
            .enumerate()
            .filter(|(_, l)| !(f.rewritten)(l))
        {
            assert!(
                lines.contains(l),
                "{} N={n}: prepared record {} is not a byte-identical record of the source: {}",
                f.name,
                i + 1,
                &l[..l.len().min(200)]
            );
        }
        eprintln!(
            "{}: {} records kept byte for byte",
            f.name,
            prepared.lines().count()
        );
    }
}

fn the_boundary_is_never_inside_a_batch(agent: &str) {
    for f in fixtures(agent) {
        let plan = f.plan();
        let max = plan.max_boundary();
        assert!(max >= 1, "{}", f.name);
        assert!(plan.batches.loaded().unwrap()[..max]
            .iter()
            .all(|b| b.complete && !b.calls.is_empty()));
        assert!(
            plan.batches
                .loaded()
                .unwrap()
                .windows(2)
                .all(|w| w[0].model_turn < w[1].model_turn),
            "{}: a batch is the calls of one model reply",
            f.name
        );
        let case = f.case();
        let r = f.replay(&case, "beyond", max + 1, None, &["--prepare-only".into()]);
        assert_eq!(r.code, 10, "{}: {}", f.name, r.result);
        let msg = r.result["failure"]["message"].as_str().unwrap();
        assert!(msg.contains("after_step"), "{}: {msg}", f.name);
    }
}

fn prepare_only_runs_nothing_and_touches_nothing(agent: &str) {
    for f in fixtures(agent) {
        for n in 1..=f.plan().max_boundary() {
            let case = f.case();
            let ws = case.fresh().join(f.original_cwd.file_name().unwrap());
            std::fs::create_dir_all(&ws).unwrap();
            (f.seed)(&ws);
            let before = file_states(&ws);
            let r = f.replay(&case, "p", n, None, &["--prepare-only".into()]);
            let r = r.ok(&format!("{} N={n}", f.name)).clone();
            assert_eq!(r["phase"], "prepared");
            assert_eq!(r["replayed_tool_calls"], 0);
            assert!(
                file_states(&ws) == before,
                "{} N={n}: prepare-only touched the workspace",
                f.name
            );
            assert_eq!(refold(&case.state("p")), r, "{} N={n}", f.name);
        }
    }
}

fn replay_only_regenerates_the_recorded_observations(agent: &str) {
    for f in fixtures(agent) {
        let plan = f.plan();
        for n in 1..=plan.max_boundary() {
            let case = f.case();
            let r = f.replay(&case, "r", n, None, &["--replay-only".into()]);
            let r = r.ok(&format!("{} N={n}", f.name)).clone();
            assert_eq!(r["phase"], "replayed");
            let cmp =
                std::fs::read_to_string(case.root.path().join("out/r/observation-comparison.json"))
                    .unwrap_or_default();
            assert_eq!(
                r["metadata"]["observations"]["different"], 0,
                "{} N={n}: {cmp}",
                f.name
            );
            let calls: usize = plan.batches.loaded().unwrap()[..n]
                .iter()
                .map(|b| b.calls.len())
                .sum();
            assert_eq!(r["replayed_tool_calls"], calls as u64);
            assert_eq!(refold(&case.state("r")), r, "{} N={n}", f.name);
        }
    }
}

/// Continue at boundary `n` with two live steps in `case`, and check request 1.
fn continue_and_check(
    f: &Fixture,
    case: &ns::Case,
    id: &str,
    n: usize,
    trajectory: Option<&std::path::Path>,
) -> Value {
    let plan = f.plan();
    let entry = case.wrap(&(f.entrypoint)());
    let args = f.continue_args(&plan, n, 2, &entry);
    let r = f.replay(case, id, n, trajectory, &args);
    let label = format!("{} N={n} {id}", f.name);
    let r = r.ok(&label).clone();
    assert_eq!(r["phase"], "continued", "{label}");
    assert_eq!(
        r["metadata"]["bridge"]["first_request_ends_at_boundary"], true,
        "{label}: {r}"
    );
    let got = main_requests(&case.state(id).join("logs/scripted-model.jsonl"));
    let orig = f.original_after(&plan, n);
    let d = differences(&(f.mask)(&orig["body"]), &(f.mask)(&got[0]["body"]));
    assert!(
        d.is_empty(),
        "{label}: request 1 differs from the original request N+1 at {d:?}: {}{}",
        d.iter()
            .take(3)
            .map(|p| format!(
                "\n  {p}: {} vs {}",
                at(&orig["body"], p),
                at(&got[0]["body"], p)
            ))
            .collect::<String>(),
        replay_report(case, id)
    );
    r
}

/// What a failed comparison needs to be understood from a CI log alone: the replayed calls
/// whose observation differs from the recorded one, and the end of the runners' logs.
fn replay_report(case: &ns::Case, id: &str) -> String {
    let mut out = String::new();
    let cmp = case
        .root
        .path()
        .join(format!("out/{id}/observation-comparison.json"));
    if let Ok(v) = serde_json::from_str::<Value>(&std::fs::read_to_string(&cmp).unwrap_or_default())
    {
        for c in v["calls"].as_array().into_iter().flatten() {
            if c["equal_except_dynamic"] != true {
                let diff: String = c["diff"]
                    .as_str()
                    .unwrap_or("")
                    .chars()
                    .take(1500)
                    .collect();
                out += &format!(
                    "\n  replayed call {}/{} ({}) differs:\n{diff}",
                    c["batch"], c["call"], c["tool"]
                );
            }
        }
    }
    let logs = case.state(id).join("logs");
    for e in std::fs::read_dir(&logs).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(25).collect();
        if !tail.is_empty() {
            out += &format!(
                "\n  end of {}:\n    {}",
                e.path().display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n    ")
            );
        }
    }
    out
}

/// The value at a path of [`differences`] (`/messages[3]/content`), shortened for a message.
fn at(v: &Value, path: &str) -> String {
    let pointer = path.replace('[', "/").replace(']', "");
    let s = v.pointer(&pointer).unwrap_or(&Value::Null).to_string();
    s.chars().take(400).collect()
}

/// Every boundary of the primary sessions ([`marked_primary`]); the first and last of the other fixtures
/// (recorded to cover tools, whose every boundary `--replay-only` and `--prepare-only` run);
/// `PVISOR_CONFORMANCE_FULL=1`: every boundary of every fixture.
fn continuation_sends_the_original_next_request_at_every_boundary(agent: &str) {
    for (f, primary) in marked_primary(fixtures(agent)) {
        let plan = f.plan();
        let max = plan.max_boundary();
        let every = full_matrix() || primary;
        for n in (1..=max).filter(|n| every || *n == 1 || *n == max) {
            let case = f.case();
            let r = continue_and_check(&f, &case, "c", n, None);
            assert_eq!(
                refold(&case.state("c")),
                r,
                "{} N={n}: fold != result",
                f.name
            );
            let prefix = plan.batches.loaded().unwrap()[n - 1].model_turn;
            let both_call_tools = f.turn_goes_on(prefix) && f.turn_goes_on(prefix + 1);
            let want = if both_call_tools {
                "max_steps"
            } else {
                "completed"
            };
            assert_eq!(r["agent_status"], want, "{} N={n}: {r}", f.name);
            let steps = r["continued_steps"].as_u64().unwrap();
            assert!(
                (1..=2).contains(&steps),
                "{} N={n}: {steps} live steps",
                f.name
            );
            eprintln!("{} N={n}: continued ({want}, {steps} live steps)", f.name);
        }
    }
}

/// On each adapter's primary sessions ([`marked_primary`]): the drift surface is how the adapter handles the
/// agent's environment for a version, the same for every session of that version
/// (`PVISOR_CONFORMANCE_FULL=1`: every fixture).
fn drift_matrix_another_day_zone_and_host(agent: &str) {
    for (f, primary) in marked_primary(fixtures(agent)) {
        if !(primary || full_matrix()) {
            continue;
        }
        let n = f.plan().max_boundary().div_ceil(2);
        // (b) the agent 3 days ahead, 1 day back.
        for ft in ["+3d", "-1d"] {
            let mut case = f.case();
            case.set_faketime(Some(ft));
            continue_and_check(&f, &case, &format!("ft{ft}"), n, None);
        }
        // (c) another zone for pvisor.
        let mut case = f.case();
        case.env.push(("TZ".into(), "Pacific/Kiritimati".into()));
        continue_and_check(&f, &case, "tz", n, None);
        // (d) the recorded host facts edited to values that surely differ from this host's.
        for (label, edit) in &f.host_fact_edits {
            let case = f.case();
            let edited = case.root.path().join("edited-trajectory");
            let text = f.input_text();
            let changed = edit(&text);
            assert_ne!(
                changed, text,
                "{}: the edit `{label}` changed nothing",
                f.name
            );
            std::fs::write(&edited, changed).unwrap();
            continue_and_check(&f, &case, "edited", n, Some(&edited));
            let audit = std::process::Command::new(env!("CARGO_BIN_EXE_pvisor"))
                .args(["journal", "audit"])
                .arg(case.state("edited"))
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&audit.stdout);
            assert!(audit.status.success(), "{}: {text}", f.name);
            assert!(
                text.contains("host/time snapshots set to this host"),
                "{} `{label}`: the neutralized facts are listed: {text}",
                f.name
            );
        }
        eprintln!("{} N={n}: drift matrix ok", f.name);
    }
}

/// The sequence number of the first event `pred` picks in the run `id` of `case`.
fn seq_of(case: &ns::Case, id: &str, mut pred: impl FnMut(&journal_format::Event) -> bool) -> u64 {
    let mut seq = None;
    pvisor::journal::read_events(&case.state(id).join("journal.pvj"), |e| {
        if seq.is_none() && pred(&e.event) {
            seq = Some(e.seq);
        }
        Ok(())
    })
    .unwrap();
    seq.expect("the event is in the uninterrupted run")
}

fn kill_subset_resumes_to_the_same_result(agent: &str) {
    use journal_format::event::SessionRole;
    use journal_format::Event;
    let full = kills::full() || full_matrix();
    // The subset is every adapter's primary sessions, numbered across adapters (the number
    // picks the kind of kill and the failpoint a session runs, below).
    let subset = ADAPTERS
        .iter()
        .flat_map(|(_, f)| marked_primary(f()))
        .filter_map(|(f, primary)| primary.then_some(f))
        .enumerate()
        .filter(|(_, f)| f.agent == agent);
    for (fi, f) in subset {
        let agent = *pvisor::adapters::registry().get(f.agent).unwrap();
        let plan = f.plan();
        let n = plan.max_boundary().div_ceil(2);
        let whole_case = f.case();
        let started = std::time::Instant::now();
        let whole = continue_and_check(&f, &whole_case, "whole", n, None);
        let took = started.elapsed();
        let cont = |case: &ns::Case| f.continue_args(&plan, n, 2, &case.wrap(&(f.entrypoint)()));
        let run = KillRun {
            label: "continue",
            n,
            trajectory: None,
            extra: &cont,
        };
        // One kind of random kill per session, a different one for each session in turn
        // (every kind over three sessions); a full campaign runs all three on every session.
        let kind = |k: usize| full || k == fi % 3;
        if kind(0) {
            random_kills(&f, &run, &whole, &whole_case, took);
        }
        // A --replay-only run, killed and resumed as such.
        if kind(1) {
            let only_case = f.case();
            let replay_only = |_: &ns::Case| vec!["--replay-only".to_string()];
            let run = KillRun {
                label: "replay-only",
                n,
                trajectory: None,
                extra: &replay_only,
            };
            let started = std::time::Instant::now();
            let only = f
                .replay(&only_case, "whole", n, None, &replay_only(&only_case))
                .ok(&format!("{} replay-only", f.name))
                .clone();
            assert_eq!(only["phase"], "replayed", "{}: {only}", f.name);
            random_kills(&f, &run, &only, &only_case, started.elapsed());
        }
        // A continuation of a trajectory whose recorded observation was edited: the
        // regenerated one differs, is stored with its diff and goes into the rebuilt session.
        if kind(2) {
            let edited_case = f.case();
            let edited = edited_case.root.path().join("edited-trajectory");
            std::fs::write(&edited, edit_an_observation(&f, &plan, n)).unwrap();
            let run = KillRun {
                label: "edited observation",
                n,
                trajectory: Some(&edited),
                extra: &cont,
            };
            let started = std::time::Instant::now();
            let whole_edited = f
                .replay(&edited_case, "whole", n, Some(&edited), &cont(&edited_case))
                .ok(&format!("{} edited observation", f.name))
                .clone();
            assert_eq!(whole_edited["phase"], "continued", "{}", f.name);
            assert!(
                whole_edited["metadata"]["observations"]["different"]
                    .as_u64()
                    .unwrap()
                    >= 1,
                "{}: the edited observation differs from the regenerated one: {whole_edited}",
                f.name
            );
            random_kills(&f, &run, &whole_edited, &edited_case, started.elapsed());
        }
        let work = |case: &ns::Case| case.fresh().join(f.original_cwd.file_name().unwrap());
        let want = contents(&work(&whole_case));
        let nth_step = |k: usize| {
            let mut seen = 0;
            seq_of(&whole_case, "whole", |e| {
                matches!(e, Event::ContinuationStep(_)) && {
                    seen += 1;
                    seen == k
                }
            })
        };
        let points: Vec<(&str, u64)> = vec![
            (
                "a call of the prefix started",
                seq_of(&whole_case, "whole", |e| {
                    matches!(e, Event::ToolCallStarted(_))
                }),
            ),
            (
                "the session rebuilt",
                seq_of(
                    &whole_case,
                    "whole",
                    |e| matches!(e, Event::SessionWritten(w) if w.role == SessionRole::Reconstructed),
                ),
            ),
            ("live step 1 released to the agent", nth_step(1)),
            ("live step 2 released (step 1's tools ran)", nth_step(2)),
            (
                "the agent exited, its session not yet recorded",
                seq_of(&whole_case, "whole", |e| matches!(e, Event::AgentExited(_))),
            ),
        ];
        let live_from = points[2].1;
        let exited = points[4].1;
        // The suite runs one of the five failpoints per session, a different one for each
        // session in turn (all five over five sessions); PVISOR_KILL_FULL runs every one.
        let chosen = |i: usize| full || i == fi % 5;
        for (what, seq) in points
            .into_iter()
            .enumerate()
            .filter(|(i, _)| chosen(*i))
            .map(|(_, p)| p)
        {
            let mut case = f.case();
            let entry = case.wrap(&(f.entrypoint)());
            case.env
                .push(("PVISOR_FAILPOINT".into(), format!("after-event:{seq}")));
            let r = f.replay(&case, "k", n, None, &f.continue_args(&plan, n, 2, &entry));
            assert_ne!(
                r.code, 0,
                "{} ({what}): the failpoint stops the run",
                f.name
            );
            case.env.clear();
            // Resumed three days later.
            case.set_faketime(Some("+3d"));
            let r = f.resume(&case, "k");
            let resumed = r.ok(&format!("{} ({what})", f.name)).clone();
            assert_eq!(
                outcome(&resumed),
                outcome(&whole),
                "{} ({what}): the resumed run ends as the uninterrupted one",
                f.name
            );
            assert!(
                contents(&work(&case)) == want,
                "{} ({what}): the workspace differs from the uninterrupted run's",
                f.name
            );
            // An agent that cannot resume its own session was started again from the
            // boundary; one that can was not.
            let mut restarts = 0;
            pvisor::journal::read_events(&case.state("k").join("journal.pvj"), |e| {
                if matches!(&e.event, Event::ContinuationStarted(c) if c.from_boundary) {
                    restarts += 1;
                }
                Ok(())
            })
            .unwrap();
            let restarted = (live_from..exited).contains(&seq) && !agent.capabilities.resume_live;
            assert_eq!(
                restarts,
                usize::from(restarted),
                "{} ({what}): attempts started again from the boundary",
                f.name
            );
            eprintln!(
                "{} ({what}): resumed 3 days later to the same outcome and workspace{}",
                f.name,
                if restarted {
                    " (the agent started again from the boundary)"
                } else {
                    ""
                }
            );
        }
    }
}

/// What [`random_kills`] runs: a label, the boundary, the trajectory (the fixture's when
/// `None`) and the mode flags for a case.
struct KillRun<'a> {
    label: &'a str,
    n: usize,
    trajectory: Option<&'a std::path::Path>,
    extra: &'a dyn Fn(&ns::Case) -> Vec<String>,
}

/// The fixture's trajectory with a recorded observation of batches 1..=n edited: in every
/// place the file holds the observation's whole text as one JSON string (escaped once, as
/// records store it), a word of it (3+ ASCII letters, not a JSON key or a whole string of it) is
/// upper-cased. The JSON stays well formed and the regenerated observation differs from the
/// recorded one. The records that authenticate observations are removed first
/// (`Fixture::unsigned`). Adapter-agnostic; panics when no observation fits, so such a
/// fixture fails loudly.
fn edit_an_observation(f: &Fixture, plan: &pvisor::kit::Plan, n: usize) -> String {
    let text = (f.unsigned)(&f.input_text());
    let words = regex::Regex::new(r"[A-Za-z]{3,}").unwrap();
    for call in plan.batches.loaded().unwrap()[..n]
        .iter()
        .flat_map(|b| &b.calls)
    {
        let Some(o) = &call.original else { continue };
        // The observation's text, or one text item of a structured observation (a code-mode
        // cell's `text()` output), as a whole JSON string, quotes included: the records that
        // hold it (and their mirrors), never a command that happens to contain its text.
        let mut texts = vec![o.text.clone()];
        if let Some(items) = o.native.as_ref().and_then(|v| v.as_array()) {
            texts.extend(
                items
                    .iter()
                    .filter_map(|i| i.get("text").and_then(|t| t.as_str()))
                    .filter(|t| !t.starts_with("Script "))
                    .map(str::to_string),
            );
        }
        for t in texts {
            let esc = serde_json::to_string(&t).unwrap();
            if !text.contains(&esc) {
                continue;
            }
            let Some(w) = words.find_iter(&t).map(|m| m.as_str()).find(|w| {
                !t.contains(&format!("\"{w}\"")) && !w.chars().all(|c| c.is_ascii_uppercase())
            }) else {
                continue;
            };
            let whole = regex::Regex::new(&format!(r"\b{w}\b")).unwrap();
            let edited = whole.replace_all(&esc, w.to_ascii_uppercase().as_str());
            eprintln!(
                "{}: the recorded observation of {} edited: `{w}` upper-cased",
                f.name, call.call_id
            );
            return text.replace(&esc, &edited);
        }
    }
    panic!("{}: no recorded observation to edit", f.name)
}

/// The paths whose content differs between two workspaces, with both contents (short).
fn workspace_difference(want: &[(String, Vec<u8>)], got: &[(String, Vec<u8>)]) -> String {
    let w: std::collections::BTreeMap<_, _> = want.iter().cloned().collect();
    let g: std::collections::BTreeMap<_, _> = got.iter().cloned().collect();
    let short = |b: Option<&Vec<u8>>| match b {
        None => "(absent)".to_string(),
        Some(b) => format!("{:?}", String::from_utf8_lossy(&b[..b.len().min(200)])),
    };
    w.keys()
        .chain(g.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|p| w.get(*p) != g.get(*p))
        .map(|p| format!("\n  {p}: want {} got {}", short(w.get(p)), short(g.get(p))))
        .collect()
}

/// Every file of a workspace with its content.
fn contents(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    file_states(dir)
        .into_iter()
        .map(|(p, _, bytes)| (p, bytes))
        .collect()
}

/// SIGKILLs at random instants (before 95% of `took`) of the continuation `whole`, the first
/// resume killed too now and then, the rest resumed three days later until done: each must
/// end as the uninterrupted run, with the same workspace (an effect that ran twice would show).
/// One kill per adapter in the suite; `PVISOR_KILL_FULL=1` runs `PVISOR_KILLS` (default 40)
/// per adapter, `PVISOR_KILL_SEED` repeats a sequence, `PVISOR_KILL_KEEP=1` keeps the cases'
/// directories.
fn random_kills(
    f: &Fixture,
    run: &KillRun,
    whole: &Value,
    whole_case: &ns::Case,
    took: std::time::Duration,
) {
    let (n, label) = (run.n, run.label);
    let kills = kills::count(1, 40);
    let mut rng = kills::Rng::from_env();
    eprintln!("{} {label}: random kills, seed {}", f.name, rng.seed());
    let mut next = move || rng.next();
    let work = |case: &ns::Case| case.fresh().join(f.original_cwd.file_name().unwrap());
    let want = contents(&work(whole_case));
    let (mut equal, mut late) = (0, 0);
    let keep = std::env::var("PVISOR_KILL_KEEP").is_ok_and(|v| v == "1");
    for k in 1..=kills {
        let mut case = f.case();
        if keep {
            // PVISOR_KILL_KEEP=1 keeps every case's state, output and workspace.
            case.root.disable_cleanup(true);
            eprintln!(
                "{} {label} kill {k}: keeping {}",
                f.name,
                case.root.path().display()
            );
        }
        let cont = (run.extra)(&case);
        let args = f.replay_args(&case, "k", n, run.trajectory, &cont);
        let at =
            std::time::Duration::from_millis(next() % (took.as_millis() as u64 * 19 / 20).max(1));
        if !kill_after(&case, f, &args, at) {
            late += 1;
            continue;
        }
        // Resumed three days later; the first resume is killed too, one time in three.
        case.set_faketime(Some("+3d"));
        if next() % 3 == 0 {
            let at = std::time::Duration::from_millis(next() % (took.as_millis() as u64).max(1));
            kill_after(&case, f, &f.resume_args(&case, "k"), at);
        }
        let mut r = f.resume(&case, "k");
        if r.code == 2
            && (r.stderr.contains("holds no run request")
                || r.stderr
                    .contains("not a journal file nor a run state directory"))
        {
            // Killed before the run request was durable: the same command starts it.
            r = f.replay(&case, "k", n, run.trajectory, &cont);
        }
        let got = r
            .ok(&format!("{} {label} kill {k} at {at:?}", f.name))
            .clone();
        assert_eq!(
            outcome(&got),
            outcome(whole),
            "{} {label} kill {k} at {at:?}: the resumed run ends as the uninterrupted one",
            f.name
        );
        let got_files = contents(&work(&case));
        assert!(
            got_files == want,
            "{} {label} kill {k} at {at:?}: the workspace differs from the uninterrupted run's: {}",
            f.name,
            workspace_difference(&want, &got_files)
        );
        equal += 1;
        eprintln!(
            "{} {label} kill {k} at {at:?}: resumed to the same outcome and workspace",
            f.name
        );
    }
    eprintln!(
        "{} {label}: {kills} kill(s): {equal} equal, {late} after the end",
        f.name
    );
}

/// Run `pvisor <args>` in `case` and SIGKILL it after `at`; false when it ended first.
fn kill_after(case: &ns::Case, f: &Fixture, args: &[String], at: std::time::Duration) -> bool {
    let mut child = case
        .command(args, |w| (f.seed)(w))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + at;
    while std::time::Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let ended = child.try_wait().unwrap().is_some();
    let _ = child.kill();
    let _ = child.wait();
    !ended
}

fn a_damaged_record_is_a_trajectory_error_naming_its_line(agent: &str) {
    for f in fixtures(agent) {
        let text = f.input_text();
        let mut lines: Vec<&str> = text.lines().collect();
        lines[2] = "{\"type\": broken";
        let case = f.case();
        let bad = case.root.path().join("damaged");
        std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
        let r = f.replay(&case, "d", 1, Some(&bad), &["--prepare-only".into()]);
        assert_eq!(r.code, 10, "{}: {}", f.name, r.result);
        let msg = r.result["failure"]["message"].as_str().unwrap();
        assert!(msg.contains("damaged:3:"), "{}: {msg}", f.name);
        assert!(r.stderr.contains("\nhint: "), "{}", r.stderr);
    }
}

fn a_field_of_the_wrong_type_is_a_trajectory_error_naming_line_and_field(agent: &str) {
    for f in fixtures(agent) {
        let (edit, field) = f.field_damage;
        let text = f.input_text();
        let damaged = edit(&text);
        assert_ne!(damaged, text, "{}: the damage edit matched nothing", f.name);
        let line = text
            .lines()
            .zip(damaged.lines())
            .position(|(a, b)| a != b)
            .unwrap()
            + 1;
        let case = f.case();
        let bad = case.root.path().join("damaged");
        std::fs::write(&bad, damaged).unwrap();
        let r = f.replay(&case, "d", 1, Some(&bad), &["--prepare-only".into()]);
        assert_eq!(r.code, 10, "{}: {}", f.name, r.result);
        let msg = r.result["failure"]["message"].as_str().unwrap();
        assert!(
            msg.contains(&format!("damaged:{line}:")),
            "{}: {msg}",
            f.name
        );
        assert!(
            msg.contains(field),
            "{}: {field} not named in {msg}",
            f.name
        );
        assert!(
            r.result["replayed_tool_calls"] == 0,
            "{}: nothing runs",
            f.name
        );
    }
}
