//! The genuine Claude Code 2.1.332 session (tests/fixtures/claude): parse it, re-execute
//! every batch in a fresh workspace at the original path, and compare the regenerated
//! observations with the originals byte for byte.

use pvisor::adapters::claude_code::{self, tools};
use pvisor::kit::{ExecContext, ToolClass};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

const SESSION: &str =
    "tests/fixtures/claude/native-run1/bb060794-24b9-4e25-8e25-e714a6132171.jsonl";
/// The original run's working directory; the product expects the replay workspace at the
/// same path (absolute paths in tool inputs and outputs name it).
const ORIGINAL_CWD: &str = "/tmp/realagent-claude.GJgznB/work";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(SESSION)
}

#[test]
fn parses_the_genuine_session() {
    let parsed = claude_code::parse_file(&fixture()).expect("parse");
    let plan = parsed.plan();
    assert_eq!(plan.agent, "claude-code");
    assert_eq!(plan.recorded_version.as_deref(), Some("2.1.332"));
    assert_eq!(
        plan.session_id.as_deref(),
        Some("bb060794-24b9-4e25-8e25-e714a6132171")
    );
    assert_eq!(plan.original_cwd.as_deref(), Some(Path::new(ORIGINAL_CWD)));
    let ids: Vec<Vec<&str>> = plan
        .batches
        .in_memory()
        .unwrap()
        .iter()
        .map(|b| b.calls.iter().map(|c| c.call_id.as_str()).collect())
        .collect();
    assert_eq!(
        ids,
        vec![
            vec!["toolu_fake_t000_0"],
            vec!["toolu_fake_t001_0"],
            vec!["toolu_fake_t002_0", "toolu_fake_t002_1"],
            vec!["toolu_fake_t003_0"]
        ]
    );
    let tools: Vec<Vec<&str>> = plan
        .batches
        .in_memory()
        .unwrap()
        .iter()
        .map(|b| b.calls.iter().map(|c| c.tool.as_str()).collect())
        .collect();
    assert_eq!(
        tools,
        vec![
            vec!["Bash"],
            vec!["Write"],
            vec!["Read", "Bash"],
            vec!["Edit"]
        ]
    );
    assert!(plan.batches.in_memory().unwrap().iter().all(|b| b.complete));
    assert_eq!(
        plan.batches
            .in_memory()
            .unwrap()
            .iter()
            .map(|b| b.index)
            .collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    assert_eq!(
        plan.batches
            .in_memory()
            .unwrap()
            .iter()
            .map(|b| b.model_turn)
            .collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    assert_eq!(plan.max_boundary(), 4);
    // Five assistant messages: four with tools and the final text turn.
    assert_eq!(plan.model_turns, 5);
    let last = parsed.assistant_messages.last().unwrap();
    assert_eq!(last.message_id, "msg_fake_t004_005");
    let tip = parsed.tip().unwrap();
    assert_eq!(tip.line, 45);
    assert_eq!(tip.value["message"]["content"][0]["text"], "Done: created a.txt (contains \"hi\"), wrote notes.txt, read it back and edited its second line.");
    // Locators: batch 3 starts at line 33 (its text block), the Read tool_use is line 34.
    assert_eq!(plan.batches.in_memory().unwrap()[2].locator.line, 33);
    assert_eq!(
        plan.batches.in_memory().unwrap()[2]
            .locator
            .native_id
            .as_deref(),
        Some("msg_fake_t002_003")
    );
    assert_eq!(
        plan.batches.in_memory().unwrap()[2].calls[0].locator.line,
        34
    );
    // The Read result (line 38) hangs off the Read tool_use line, off the parentUuid chain
    // of the tip; it is re-attached.
    let read = parsed.call("toolu_fake_t002_0").unwrap();
    assert_eq!(parsed.records[read.result_record.unwrap()].line, 38);
    assert!(parsed.on_chain(read.result_record.unwrap()));
    // Observations as the model saw them.
    let obs = |b: usize, c: usize| {
        plan.batches.in_memory().unwrap()[b].calls[c]
            .original
            .clone()
            .unwrap()
    };
    assert_eq!(obs(0, 0).text, "a.txt");
    assert_eq!(obs(2, 0).text, "1\tline one\n2\tline two\n3\t");
    assert_eq!(obs(2, 1).text, "hi");
    assert!(!obs(3, 0).is_error);
    // Records: metadata lines are kept verbatim with their line numbers.
    assert_eq!(parsed.records.len(), 47);
    assert_eq!(parsed.records[0].kind, "queue-operation");
    assert!(parsed.records.iter().all(|r| !r.is_sidechain));
    for b in plan.batches.in_memory().unwrap().iter() {
        for c in &b.calls {
            assert_ne!(tools::classify(&c.tool, &c.input), ToolClass::Unknown);
        }
    }
}

#[test]
fn recorded_observations_are_what_the_model_was_sent() {
    let parsed = claude_code::parse_file(&fixture()).unwrap();
    let requests = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude/requests-run1.jsonl"),
    )
    .unwrap();
    let last: Value = serde_json::from_str(requests.lines().last().unwrap()).unwrap();
    let mut sent = std::collections::HashMap::new();
    for m in last["body"]["messages"].as_array().unwrap() {
        if let Some(blocks) = m["content"].as_array() {
            for b in blocks {
                if b["type"] == "tool_result" {
                    sent.insert(b["tool_use_id"].as_str().unwrap().to_string(), b.clone());
                }
            }
        }
    }
    for b in parsed.plan().batches.in_memory().unwrap().iter() {
        for c in &b.calls {
            let o = c.original.as_ref().unwrap();
            let s = &sent[&c.call_id];
            assert_eq!(s["content"].as_str().unwrap(), o.text, "{}", c.call_id);
            // The rebuilt block has Claude's shape (cache_control aside).
            let mut s = s.clone();
            s.as_object_mut().unwrap().remove("cache_control");
            assert_eq!(
                tools::tool_result_block(&c.tool, &c.call_id, o),
                s,
                "{}",
                c.call_id
            );
        }
    }
}

/// Serializes the tests that use the fixed original path, also across test processes.
fn original_path_lock() -> (std::sync::MutexGuard<'static, ()>, std::fs::File) {
    use fs2::FileExt;
    static L: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let g = L.lock().unwrap_or_else(|e| e.into_inner());
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/tmp/realagent-claude.GJgznB.lock")
        .unwrap();
    f.lock_exclusive().unwrap();
    (g, f)
}

#[test]
fn replays_every_batch_byte_for_byte_at_the_original_path() {
    let _g = original_path_lock();
    let parsed = claude_code::parse_file(&fixture()).unwrap();
    let ws = PathBuf::from(ORIGINAL_CWD);
    if ws.exists() {
        std::fs::remove_dir_all(&ws).unwrap();
    }
    std::fs::create_dir_all(&ws).unwrap();
    let logs = tempfile::tempdir().unwrap();
    let ctx = ExecContext {
        workspace: ws.clone(),
        log_dir: logs.path().to_path_buf(),
        state_dir: logs.path().to_path_buf(),
        timeout: Duration::from_secs(60),
        agent_entrypoint: None,
    };
    let session = tools::ToolSession::new(tools::ToolConfig::for_session(&parsed));
    for batch in parsed.plan().batches.in_memory().unwrap().iter() {
        for call in &batch.calls {
            let out = session
                .execute(call, &ctx)
                .unwrap_or_else(|e| panic!("{}: {e}", call.call_id));
            let orig = call.original.as_ref().unwrap();
            assert_eq!(
                out.observation.text, orig.text,
                "batch {} call {}",
                batch.index, call.call_id
            );
            assert_eq!(
                out.observation.is_error, orig.is_error,
                "batch {} call {}",
                batch.index, call.call_id
            );
            assert_eq!(out.observation.native, orig.native);
            match call.tool.as_str() {
                "Write" | "Edit" => assert_eq!(out.touched, vec![PathBuf::from("notes.txt")]),
                _ => assert!(out.touched.is_empty()),
            }
            if call.tool == "Bash" {
                assert_eq!(out.exit_code, Some(0));
            }
        }
    }
    // The workspace ends as run 1 left it (the fixture's workspace/ is the state after the
    // later resume, which appended "line three").
    let expected = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude/workspace");
    assert_eq!(
        std::fs::read(ws.join("a.txt")).unwrap(),
        std::fs::read(expected.join("a.txt")).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "line one\nline 2 (edited)\n"
    );
    std::fs::remove_dir_all(&ws).unwrap();
}

#[test]
fn edit_without_the_read_state_loses_the_file_state_suffix() {
    // Replaying only batch 4 (a crash resumed after batch 3, without seeding): the Edit
    // still applies (bypassPermissions skips the read guard) but Claude would not claim the
    // file state is current. Seeding from the completed calls restores the original text.
    let _g = original_path_lock();
    let parsed = claude_code::parse_file(&fixture()).unwrap();
    let ws = PathBuf::from(ORIGINAL_CWD);
    let logs = tempfile::tempdir().unwrap();
    let ctx = ExecContext {
        workspace: ws.clone(),
        log_dir: logs.path().to_path_buf(),
        state_dir: logs.path().to_path_buf(),
        timeout: Duration::from_secs(60),
        agent_entrypoint: None,
    };
    let edit = &parsed.plan().batches.in_memory().unwrap()[3].calls[0];
    let read = &parsed.plan().batches.in_memory().unwrap()[2].calls[0];
    let setup = |ws: &Path| {
        if ws.exists() {
            std::fs::remove_dir_all(ws).unwrap();
        }
        std::fs::create_dir_all(ws).unwrap();
        std::fs::write(ws.join("a.txt"), "hi\n").unwrap();
        std::fs::write(ws.join("notes.txt"), "line one\nline two\n").unwrap();
    };

    setup(&ws);
    let session = tools::ToolSession::new(tools::ToolConfig::for_session(&parsed));
    let out = session.execute(edit, &ctx).unwrap();
    assert_eq!(
        out.observation.text,
        "The file /tmp/realagent-claude.GJgznB/work/notes.txt has been updated successfully."
    );

    setup(&ws);
    let session = tools::ToolSession::new(tools::ToolConfig::for_session(&parsed));
    session.seed(read, read.original.as_ref().unwrap(), &ctx);
    let out = session.execute(edit, &ctx).unwrap();
    assert_eq!(out.observation.text, edit.original.as_ref().unwrap().text);

    std::fs::remove_dir_all(&ws).unwrap();
}
