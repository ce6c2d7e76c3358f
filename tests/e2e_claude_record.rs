//! End to end with the REAL Claude Code CLI (pinned 2.1.332, installed by
//! `scripts/install-agents.sh claude-code`) against the scripted model server.
//!
//! These tests never skip: a failed install fails them.
//!
//! Re-record the committed sessions under `tests/fixtures/claude/recorded/` with
//! `PVISOR_RECORD=1 cargo test --test e2e_claude_record record_fixtures -- --ignored --nocapture`.

#[path = "support/claude.rs"]
mod claude;

use claude::*;
use pvisor::scripted::{Protocol, RequestKind};
use serde_json::Value;

fn tmp_root(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("pvisor-e2e-{name}-"))
        .tempdir()
        .unwrap()
}

/// Checks shared by every recorded task, run afresh in a temp dir.
fn check_task_run(name: &str, run: &TaskRun) {
    let task = &run.task;
    let script = &run.script;
    // The server saw exactly the scripted number of main requests, turns 0..n in order,
    // all over the Anthropic protocol with streaming, none exhausted.
    let main1 = run.run1.main_requests();
    assert_eq!(
        main1.len(),
        task.run1_turns,
        "{name}: main requests of run 1\n{}",
        run.run1.describe()
    );
    for (i, r) in main1.iter().enumerate() {
        assert_eq!(r.turn, Some(i), "{name}: run 1 request {i}");
        assert_eq!(r.protocol, Some(Protocol::Anthropic));
        assert!(r.stream, "{name}: claude streams");
        assert!(!r.exhausted, "{name}: script exhausted in run 1");
        assert_eq!(r.status, 200);
        assert_eq!(r.headers["x-api-key"], "<redacted>");
    }
    assert!(
        run.run1.requests.iter().all(|r| r.status == 200),
        "{name}: a request failed\n{}",
        run.run1.describe()
    );

    // The native session file holds the scripted tool calls with the server's ids, each
    // answered by a tool_result.
    let sf = session_file(&run.home, &run.work, &run.run1.session_id);
    let lines = read_jsonl(&sf);
    let total_turns = task.run1_turns + task.resume_turns;
    let expected = expected_tool_uses(script, 0..total_turns);
    assert_eq!(
        session_tool_uses(&lines),
        expected,
        "{name}: tool_use blocks in {}",
        sf.display()
    );
    let results = session_tool_results(&lines);
    for (id, _) in &expected {
        assert!(
            results.iter().any(|(rid, _, _)| rid == id),
            "{name}: no tool_result for {id}"
        );
    }
    // The final text of run 1 reached stdout's result.
    let final_text = script.turns[task.run1_turns - 1].text.clone().unwrap();
    assert_eq!(
        run.run1.result().unwrap()["result"],
        Value::String(final_text),
        "{name}"
    );

    if let Some(resume) = &run.resume {
        assert_eq!(
            resume.session_id, run.run1.session_id,
            "{name}: resume keeps the session id"
        );
        let main2 = resume.main_requests();
        assert_eq!(
            main2.len(),
            task.resume_turns,
            "{name}: main requests of the resume\n{}",
            resume.describe()
        );
        for (i, r) in main2.iter().enumerate() {
            // A fresh server process: the turn comes from the history alone.
            assert_eq!(
                r.turn,
                Some(task.run1_turns + i),
                "{name}: resume request {i}"
            );
        }
        let final_text = script.turns[total_turns - 1].text.clone().unwrap();
        assert_eq!(
            resume.result().unwrap()["result"],
            Value::String(final_text),
            "{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_five_step_and_resume() {
    let root = tmp_root("five-step");
    let run = run_task(&recorded_dir().join("five-step"), root.path(), None).await;
    check_task_run("five-step", &run);
    let w = &run.work;
    assert_eq!(std::fs::read_to_string(w.join("a.txt")).unwrap(), "hi\n");
    assert_eq!(
        std::fs::read_to_string(w.join("notes.txt")).unwrap(),
        "line one\nline 2 (edited)\nline three\n"
    );

    // Run 1: the parallel Read + Bash turn is one assistant message with two tool_use blocks,
    // and the next request carries both results in one user message.
    let main1 = run.run1.main_requests();
    let msgs = main1[3].body["messages"].as_array().unwrap();
    let last = &msgs[msgs.len() - 1];
    let ids: Vec<&str> = last["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["tool_use_id"].as_str())
        .collect();
    assert_eq!(ids, ["toolu_pv_t002_0", "toolu_pv_t002_1"]);
    // No side requests in -p mode.
    assert!(
        run.run1
            .requests
            .iter()
            .all(|r| r.kind == RequestKind::Main),
        "{}",
        run.run1.describe()
    );
}

fn result_of<'a>(results: &'a [(String, Value, bool)], id: &str) -> &'a (String, Value, bool) {
    results
        .iter()
        .find(|(rid, _, _)| rid == id)
        .unwrap_or_else(|| panic!("no tool_result for {id}"))
}

/// The workspace after the run equals the committed `workspace-after/` of the recording.
fn check_workspace_after(name: &str, run: &TaskRun) {
    let expected = recorded_dir().join(name).join("workspace-after");
    assert_eq!(
        list_files(&run.work),
        list_files(&expected),
        "{name}: workspace files"
    );
    for f in list_files(&expected) {
        assert_eq!(
            std::fs::read(run.work.join(&f)).unwrap(),
            std::fs::read(expected.join(&f)).unwrap(),
            "{name}: {f} differs from the recording"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_search_tools_and_failing_commands() {
    let root = tmp_root("search-errors");
    let run = run_task(&recorded_dir().join("search-errors"), root.path(), None).await;
    check_task_run("search-errors", &run);
    check_workspace_after("search-errors", &run);
    // Glob and Grep are offered only with --allowedTools Glob Grep.
    let tools: Vec<&str> = run.run1.main_requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        tools.contains(&"Glob") && tools.contains(&"Grep"),
        "{tools:?}"
    );
    let lines = read_jsonl(&session_file(&run.home, &run.work, &run.run1.session_id));
    // The thinking block of turn 0 is kept with its signature.
    let thinking: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "assistant")
        .flat_map(|l| l["message"]["content"].as_array().unwrap().iter())
        .filter(|b| b["type"] == "thinking")
        .collect();
    assert_eq!(thinking.len(), 1);
    assert_eq!(thinking[0]["signature"], "pvsig_t000");
    let results = session_tool_results(&lines);
    let (_, grep, _) = result_of(&results, "toolu_pv_t000_1");
    assert_eq!(
        grep.as_str().unwrap().lines().count(),
        3,
        "Grep -n content over *.py: {grep}"
    );
    assert!(grep.as_str().unwrap().contains("src/app.py:5:"));
    let (_, ls, ls_err) = result_of(&results, "toolu_pv_t001_0");
    assert!(
        *ls_err && ls.as_str().unwrap().starts_with("Exit code 2"),
        "{ls}"
    );
    let (_, cat, cat_err) = result_of(&results, "toolu_pv_t002_0");
    assert!(
        *cat_err && cat.as_str().unwrap().starts_with("Exit code 1"),
        "{cat}"
    );
    // grep's exit 1 means "no match": Claude does not flag it as an error.
    let (_, _, grep_err) = result_of(&results, "toolu_pv_t003_0");
    assert!(!*grep_err);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_edits_read_ranges_and_unknown_tool() {
    let root = tmp_root("edits");
    let run = run_task(&recorded_dir().join("edits"), root.path(), None).await;
    check_task_run("edits", &run);
    check_workspace_after("edits", &run);
    let lines = read_jsonl(&session_file(&run.home, &run.work, &run.run1.session_id));
    let results = session_tool_results(&lines);
    let (_, read, _) = result_of(&results, "toolu_pv_t000_0");
    assert_eq!(read, "2\thost = localhost\n3\tport = 8080\n4\tdebug = true");
    // Claude Code 2.1.332 has no LS tool.
    let (_, ls, ls_err) = result_of(&results, "toolu_pv_t004_0");
    assert!(
        *ls_err && ls.as_str().unwrap().contains("No such tool available: LS"),
        "{ls}"
    );
}

/// Re-record the committed sessions (at their fixed paths `/tmp/pvisor-rec-<name>`).
/// `PVISOR_RECORD=1 cargo test --test e2e_claude_record record_fixtures -- --ignored --nocapture`
/// (`PVISOR_RECORD=five-step,edits` records only those).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "re-records tests/fixtures/claude/recorded; run with PVISOR_RECORD=1 and --ignored"]
async fn record_fixtures() {
    let Ok(which) = std::env::var("PVISOR_RECORD") else {
        panic!("set PVISOR_RECORD=1 (all) or PVISOR_RECORD=name,name to re-record");
    };
    let mut names: Vec<String> = std::fs::read_dir(recorded_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("task.json").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    if which != "1" {
        let wanted: Vec<&str> = which.split(',').collect();
        names.retain(|n| wanted.contains(&n.as_str()));
    }
    for name in names {
        eprintln!("recording {name}");
        record(&name).await;
    }
}
