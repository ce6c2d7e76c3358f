//! Every documented exit code (`pvisor::outcome::exit`, docs/cli.md) is produced by the
//! command line where the docs say, with the failure category and a hint.

#[path = "support/claude.rs"]
mod claude;
#[path = "support/ns.rs"]
mod ns;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use pvisor::outcome::exit;
use serde_json::Value;

const PVISOR: &str = env!("CARGO_BIN_EXE_pvisor");
const WORK: &str = "/tmp/pvisor-rec-five-step/work";

fn five_step() -> PathBuf {
    claude::recorded_dir().join("five-step")
}

struct Ran {
    code: i32,
    result: Value,
    stderr: String,
}

/// The first error message (with its hint) seen for each exit code, for the snapshot.
static MESSAGES: std::sync::Mutex<std::collections::BTreeMap<i32, String>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// The `error:`/`hint:` lines of stderr with what varies between runs replaced: temporary
/// paths, digests, process ids, times.
fn normalized(stderr: &str) -> String {
    let rules = [
        (r"/tmp/[^\s:'`,)]+", "[TMP]"),
        (r"(blake3|sha256):[0-9a-f]{8,}", "$1:[HEX]"),
        (r"\b[0-9a-f]{32,}\b", "[HEX]"),
        (r"pid \d+", "pid [PID]"),
        (r"\d+(\.\d+)? ?(ms|s)\b", "[TIME]"),
    ];
    let mut lines: Vec<String> = stderr
        .lines()
        .filter(|l| l.starts_with("error:") || l.starts_with("hint:"))
        .map(String::from)
        .collect();
    for (re, to) in rules {
        let re = regex::Regex::new(re).unwrap();
        for l in &mut lines {
            *l = re.replace_all(l, to).into_owned();
        }
    }
    lines.join("\n")
}

fn remember(code: i32, stderr: &str) {
    if code != 0 {
        let m = normalized(stderr);
        if !m.is_empty() {
            MESSAGES.lock().unwrap().entry(code).or_insert(m);
        }
    }
}

fn run(args: &[&str]) -> Ran {
    let out = Command::new(PVISOR).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    remember(
        out.status.code().unwrap_or(-1),
        &String::from_utf8_lossy(&out.stderr),
    );
    Ran {
        code: out.status.code().unwrap_or(-1),
        result: serde_json::from_str(stdout.lines().last().unwrap_or("null"))
            .unwrap_or(Value::Null),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `pvisor replay --agent claude-code …` of `trajectory` at the recording's path (in a
/// private mount namespace), with `extra` flags.
fn replay_ns(case: &ns::Case, id: &str, trajectory: &Path, after: &str, extra: &[&str]) -> Ran {
    let mut args: Vec<String> = [
        "replay",
        "--agent",
        "claude-code",
        "--run-id",
        id,
        "--after-step",
        after,
        "--trajectory",
        &trajectory.display().to_string(),
        "--workspace",
        WORK,
        "--state-dir",
        &case.root.path().join("state").display().to_string(),
        "--output-dir",
        &case.root.path().join("out").display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let (code, result, stderr) = case.pvisor(&args, |_| {});
    remember(code, &stderr);
    Ran {
        code,
        result,
        stderr,
    }
}

fn resume_ns(case: &ns::Case, id: &str) -> Ran {
    let args: Vec<String> = vec![
        "replay".into(),
        "--resume-journal".into(),
        case.state(id).display().to_string(),
    ];
    let (code, result, stderr) = case.pvisor(&args, |_| {});
    remember(code, &stderr);
    Ran {
        code,
        result,
        stderr,
    }
}

/// The documented failure: code, category, and a `hint:` line.
fn expect(r: &Ran, code: i32, category: &str, label: &str) {
    assert_eq!(r.code, code, "{label}: {}\n{}", r.result, r.stderr);
    if !category.is_empty() {
        assert_eq!(
            r.result["failure"]["category"], category,
            "{label}: {}",
            r.result
        );
    }
    if code != 0 {
        assert!(
            r.stderr.contains("\nhint: "),
            "{label}: no hint: {}",
            r.stderr
        );
    }
}

/// Cut a journal right after the first event `pred` picks.
fn cut_after(state: &Path, pred: impl Fn(&journal_format::Event) -> bool) {
    let jp = state.join("journal.pvj");
    let mut offsets = vec![];
    let mut end = None;
    pvisor::journal::read_events(&jp, |e| {
        offsets.push(e.offset);
        if end.is_none() && pred(&e.event) {
            end = Some(offsets.len());
        }
        Ok(())
    })
    .unwrap();
    let b = std::fs::read(&jp).unwrap();
    std::fs::write(&jp, &b[..offsets[end.unwrap()] as usize]).unwrap();
}

/// Cut a journal right after the `tool_call_started` of (batch, call).
fn cut_after_start(state: &Path, batch: u64, call: u64) {
    cut_after(
        state,
        |e| matches!(e, journal_format::Event::ToolCallStarted(s) if s.batch == batch && s.call == call),
    )
}

#[test]
fn every_documented_exit_code_is_produced() {
    let mut seen = BTreeSet::new();
    let session = five_step().join("session.jsonl");
    let s = session.display().to_string();
    let tmp = tempfile::tempdir().unwrap();

    // 0: prepare-only needs nothing but the session.
    let case = ns::Case::new(WORK);
    let r = replay_ns(&case, "ok", &session, "2", &["--prepare-only"]);
    expect(&r, exit::OK, "", "0");
    assert_eq!(r.result["phase"], "prepared");
    seen.insert(r.code);

    // 2: a request without an agent.
    let r = run(&["replay", "--trajectory", &s, "--after-step", "1"]);
    expect(&r, exit::CONFIGURATION, "configuration_error", "2");
    seen.insert(r.code);

    // 10: a damaged record, named by file, line and field.
    let bad = tmp.path().join("bad.jsonl");
    let mut text = std::fs::read_to_string(&session).unwrap();
    let third = text.match_indices('\n').nth(2).unwrap().0;
    text.insert_str(third + 1, "{\"type\": \"user\", not json\n");
    std::fs::write(&bad, text).unwrap();
    let case = ns::Case::new(WORK);
    let r = replay_ns(&case, "traj", &bad, "2", &["--prepare-only"]);
    expect(&r, exit::TRAJECTORY, "trajectory_error", "10");
    let msg = r.result["failure"]["message"].as_str().unwrap();
    assert!(msg.contains("bad.jsonl:4"), "{msg}");
    seen.insert(r.code);

    // 10 as well: a session of another agent; the hint names the agent it parses as.
    let r = run(&[
        "replay",
        "--agent",
        "codex",
        "--trajectory",
        &s,
        "--after-step",
        "1",
        "--prepare-only",
        "--state-dir",
        &tmp.path().join("s10b").display().to_string(),
        "--output-dir",
        &tmp.path().join("o10b").display().to_string(),
    ]);
    expect(
        &r,
        exit::TRAJECTORY,
        "trajectory_error",
        "10 (another agent's session)",
    );
    assert!(
        r.stderr
            .contains("hint: the trajectory looks like another agent's: pass --agent claude-code"),
        "{}",
        r.stderr
    );

    // 11: an agent pvisor does not know.
    let r = run(&[
        "replay",
        "--agent",
        "nope",
        "--trajectory",
        &s,
        "--after-step",
        "1",
        "--prepare-only",
        "--state-dir",
        &tmp.path().join("s11").display().to_string(),
        "--output-dir",
        &tmp.path().join("o11").display().to_string(),
    ]);
    expect(&r, exit::UNSUPPORTED, "unsupported_agent", "11");
    seen.insert(r.code);

    // 30: a tool the adapter does not know, refused before anything runs.
    let unknown = tmp.path().join("unknown-tool.jsonl");
    // The call renamed, not the tool list Claude hashed (`api-request-shape`).
    std::fs::write(
        &unknown,
        std::fs::read_to_string(&session)
            .unwrap()
            .lines()
            .map(|l| {
                if l.contains("\"type\":\"assistant\"") {
                    l.replace("\"name\":\"Write\"", "\"name\":\"mcp__frob\"")
                } else {
                    l.to_string()
                }
            })
            .map(|l| l + "\n")
            .collect::<String>(),
    )
    .unwrap();
    let case = ns::Case::new(WORK);
    let r = replay_ns(&case, "exec", &unknown, "3", &["--replay-only"]);
    expect(&r, exit::EXECUTOR, "executor_error", "30");
    assert!(
        claude::list_files(&case.fresh().join("work")).is_empty(),
        "nothing ran"
    );
    seen.insert(r.code);

    // 31: without checkpoints, a mutating call in doubt stops the resumed run.
    let case = ns::Case::new(WORK);
    let r = replay_ns(
        &case,
        "amb",
        &session,
        "2",
        &["--replay-only", "--no-checkpoints"],
    );
    expect(&r, exit::OK, "", "31 setup");
    cut_after_start(&case.state("amb"), 2, 0);
    let r = resume_ns(&case, "amb");
    expect(&r, exit::AMBIGUOUS_EXECUTION, "ambiguous_execution", "31");
    seen.insert(r.code);

    // 20: a workspace changed behind pvisor's back is refused before anything re-runs.
    let case = ns::Case::new(WORK);
    let r = replay_ns(&case, "ws", &session, "3", &["--replay-only"]);
    expect(&r, exit::OK, "", "20 setup");
    cut_after(
        &case.state("ws"),
        |e| matches!(e, journal_format::Event::BatchFinished(b) if b.batch == 2),
    );
    // notes.txt, which batch 2's Write left, changed since.
    std::fs::write(case.fresh().join("work/notes.txt"), "changed\n").unwrap();
    let r = resume_ns(&case, "ws");
    expect(&r, exit::WORKSPACE, "workspace_error", "20");
    seen.insert(r.code);

    // 40: the model answers the first continuation request (turn 3: after the two
    // replayed replies) with a 400.
    let script = tmp.path().join("error-script.json");
    std::fs::write(
        &script,
        r#"{"turns": [{"text": "replayed"}, {"text": "replayed"},
                      {"error": {"status": 400, "message": "scripted refusal"}}]}"#,
    )
    .unwrap();
    let entry = claude::claude_entrypoint().display().to_string();
    let case = ns::Case::new(WORK);
    let r = replay_ns(
        &case,
        "cont",
        &session,
        "2",
        &[
            "--max-steps",
            "6",
            "--agent-entrypoint",
            &entry,
            "--model-script",
            &script.display().to_string(),
        ],
    );
    expect(&r, exit::CONTINUATION, "continuation_error", "40");
    seen.insert(r.code);

    // 50: an observation blob the rebuild needs is gone and cannot be written back (pvisor's
    // own store damaged).
    let case = ns::Case::new(WORK);
    let r = replay_ns(
        &case,
        "int",
        &session,
        "2",
        &["--replay-only", "--no-checkpoints"],
    );
    expect(&r, exit::OK, "", "50 setup");
    let st = case.state("int");
    let jp = st.join("journal.pvj");
    let mut offsets = vec![];
    let mut cut = None;
    let mut blobs = vec![];
    pvisor::journal::read_events(&jp, |e| {
        offsets.push(e.offset);
        match &e.event {
            journal_format::Event::SessionWritten(w)
                if w.role == journal_format::event::SessionRole::Reconstructed =>
            {
                cut = Some(offsets.len() - 1)
            }
            journal_format::Event::ToolCallFinished(f) => blobs.push(f.observation_blob.clone()),
            _ => {}
        }
        Ok(())
    })
    .unwrap();
    let b = std::fs::read(&jp).unwrap();
    std::fs::write(&jp, &b[..offsets[cut.unwrap()] as usize]).unwrap();
    // The journal carries small blobs (format 1.6) and a resume writes a lost file back:
    // a directory in the file's place cannot be replaced.
    for blob in blobs {
        let store = pvisor::journal::BlobStore::new(&st);
        let _ = std::fs::remove_file(store.path_of(&blob));
        std::fs::create_dir_all(store.path_of(&blob).join("in-the-way")).unwrap();
    }
    let r = resume_ns(&case, "int");
    expect(&r, exit::INTERNAL, "internal_error", "50");
    seen.insert(r.code);

    // 60–63: `journal verify` on the golden vectors; a damaged journal on resume.
    let vectors = Path::new(env!("CARGO_MANIFEST_DIR")).join("journal-format/vectors");
    for (name, code) in [
        ("torn-tail", exit::JOURNAL_TORN_TAIL),
        ("bitflip", exit::JOURNAL_CORRUPT),
        ("forked", exit::JOURNAL_FORKED),
        ("newer-major", exit::JOURNAL_TOO_NEW),
    ] {
        let v = vectors.join(format!("{name}.pvj"));
        let r = run(&["journal", "verify", &v.display().to_string()]);
        assert_eq!(r.code, code, "verify {name}: {}", r.stderr);
        seen.insert(r.code);
        if code != exit::JOURNAL_TORN_TAIL {
            let d = tmp.path().join(format!("resume-{name}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::copy(&v, d.join("journal.pvj")).unwrap();
            let r = run(&["replay", "--resume-journal", &d.display().to_string()]);
            assert_eq!(r.code, code, "resume {name}: {}", r.stderr);
            assert!(r.stderr.contains("\nhint: "), "{}", r.stderr);
        }
    }

    // 64: another process holds the run's journal.
    let case = ns::Case::new(WORK);
    let r = replay_ns(&case, "lock", &session, "1", &["--prepare-only"]);
    expect(&r, exit::OK, "", "64 setup");
    let lock_path = case.state("lock").join("journal.lock");
    let held = std::fs::OpenOptions::new()
        .write(true)
        .open(&lock_path)
        .unwrap();
    fs2::FileExt::lock_exclusive(&held).unwrap();
    let r = run(&[
        "replay",
        "--resume-journal",
        &case.state("lock").display().to_string(),
    ]);
    expect(&r, exit::JOURNAL_LOCKED, "journal_error", "64");
    seen.insert(r.code);
    drop(held);

    // 65: intact records whose order breaks the phase machine.
    let d = tmp.path().join("illegal");
    std::fs::create_dir_all(&d).unwrap();
    {
        use journal_format::event::*;
        use journal_format::header::{FileHeader, JournalId};
        use journal_format::{Encoder, Event};
        let h = FileHeader::new(JournalId([7; 16]), 1);
        let mut bytes = h.encode().to_vec();
        let mut enc = Encoder::new(&h);
        for e in [
            Event::BatchStarted(BatchStarted { batch: 1, calls: 1 }),
            Event::RunFinished(RunFinished {
                result_digest: String::new(),
            }),
        ] {
            bytes.extend(enc.encode(&e, 1).unwrap());
        }
        std::fs::write(d.join("journal.pvj"), bytes).unwrap();
    }
    // The default verify checks the records only (intact); --deep folds them.
    let r = run(&["journal", "verify", &d.display().to_string()]);
    assert_eq!(r.code, exit::OK, "verify: {}", r.stderr);
    let r = run(&["journal", "verify", "--deep", &d.display().to_string()]);
    assert_eq!(
        r.code,
        exit::JOURNAL_ILLEGAL_ORDER,
        "verify --deep: {}",
        r.stderr
    );
    let r = run(&["replay", "--resume-journal", &d.display().to_string()]);
    assert_eq!(r.code, exit::JOURNAL_ILLEGAL_ORDER, "resume: {}", r.stderr);
    seen.insert(r.code);

    // 66: an audit that fails (the golden journal has no blob store beside it).
    let r = run(&[
        "journal",
        "audit",
        &vectors.join("complete.pvj").display().to_string(),
    ]);
    assert_eq!(r.code, exit::AUDIT_FAILED);
    seen.insert(r.code);

    // 67: `journal diff` of two different runs (0 for a run and itself).
    let a = vectors.join("complete.pvj").display().to_string();
    let b = vectors.join("complete-1.4.pvj").display().to_string();
    assert_eq!(run(&["journal", "diff", &a, &a]).code, exit::OK);
    let r = run(&["journal", "diff", &a, &b]);
    assert_eq!(r.code, exit::RUNS_DIFFER);
    seen.insert(r.code);

    // 68: `certify` of an "agent" that answers --version as the pinned Codex and records
    // nothing (the recording of the first task fails: the certificate names it).
    let fake = tempfile::tempdir().unwrap();
    let entry = fake.path().join("codex");
    std::fs::write(
        &entry,
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'codex-cli 0.149.0'; exit 0; fi\nexit 0\n",
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&entry)
        .status()
        .unwrap();
    let r = run(&[
        "certify",
        "--agent",
        "codex",
        "--agent-entrypoint",
        &entry.display().to_string(),
        "--cases",
        "1",
        "--max-shrink-iters",
        "0",
        "--work-dir",
        &fake.path().join("work").display().to_string(),
    ]);
    assert_eq!(r.code, exit::CERTIFY_FAILED, "{}", r.stderr);
    seen.insert(r.code);

    let all: BTreeSet<i32> = exit::ALL.iter().copied().collect();
    assert_eq!(seen, all, "codes not produced: {:?}", all.difference(&seen));

    // Every failing code has been seen with its message and one-line hint (but 66, 67 and
    // 68, whose report is the output, and 60, a torn tail `journal verify` reports on stdout).
    let messages = MESSAGES.lock().unwrap().clone();
    for code in exit::ALL
        .iter()
        .filter(|c| ![0, 60, 66, 67, 68].contains(*c))
    {
        let m = messages
            .get(code)
            .unwrap_or_else(|| panic!("no message for exit {code}"));
        assert!(
            m.contains("error: ") && m.contains("\nhint: "),
            "exit {code}: {m}"
        );
    }
    let text: String = messages
        .iter()
        .map(|(c, m)| format!("== exit {c} ==\n{m}\n"))
        .collect();
    insta::assert_snapshot!("exit_code_messages", text);
}
