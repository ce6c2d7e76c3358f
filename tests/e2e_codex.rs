//! End to end with the REAL Codex CLI (pinned 0.149.0, installed by
//! `scripts/install-agents.sh codex`) against the scripted server's OpenAI Responses endpoint:
//! reasoning, messages, parallel function calls, free-form `apply_patch` custom tool calls, and
//! `codex exec resume` against a fresh server process. Never skips: a failed install fails it.

#[path = "support/codex.rs"]
mod codex;

use codex::codex_entrypoint;
use pvisor::scripted::{start, Protocol, RequestKind, Script, ServerOptions};
use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

async fn run_codex(
    entry: &Path,
    script: &Script,
    home: &Path,
    work: &Path,
    args: &[&str],
) -> (String, Vec<pvisor::scripted::LoggedRequest>) {
    let server = start(
        script.clone(),
        ServerOptions {
            api_key: Some("pvisor-codex-key".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let codex_home = home.join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model = \"gpt-5.5\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\nname = \"Fake\"\n\
             base_url = \"{}/v1\"\nwire_api = \"responses\"\nenv_key = \"FAKE_API_KEY\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    let child = tokio::process::Command::new(entry)
        .args(args)
        .current_dir(work)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .env("CODEX_HOME", &codex_home)
        .env("FAKE_API_KEY", "pvisor-codex-key")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(240), child.wait_with_output())
        .await
        .expect("codex timed out")
        .unwrap();
    let requests = server.requests();
    server.shutdown().await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "codex {args:?} failed: {}\n{stdout}\n{}\n{:?}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        requests
            .iter()
            .map(|r| (&r.path, r.kind, r.turn, r.status))
            .collect::<Vec<_>>()
    );
    (stdout, requests)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_responses_five_step_and_resume() {
    let entry = codex_entrypoint();
    let root = tempfile::Builder::new()
        .prefix("pvisor-e2e-codex-")
        .tempdir()
        .unwrap();
    let home = root.path().join("home");
    let work = root.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let script = Script::from_path(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex/five-step/script.json"),
    )
    .unwrap()
    .substitute(&[("CWD", &work.to_string_lossy())]);

    let (stdout, requests) = run_codex(
        &entry,
        &script,
        &home,
        &work,
        &[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "Create a.txt with 'hi', write notes.txt, read both files, then edit notes.txt.",
        ],
    )
    .await;
    let main: Vec<_> = requests
        .iter()
        .filter(|r| r.kind == RequestKind::Main)
        .collect();
    assert_eq!(
        main.iter().map(|r| r.turn).collect::<Vec<_>>(),
        (0..5).map(Some).collect::<Vec<_>>()
    );
    assert!(main
        .iter()
        .all(|r| r.protocol == Some(Protocol::OpenaiResponses) && r.stream && r.status == 200));
    assert_eq!(
        std::fs::read_to_string(work.join("notes.txt")).unwrap(),
        "line one\nline 2 (edited)\n"
    );
    // The function_call_output items of the parallel turn come back with our call ids.
    let input = main[3].body["input"].as_array().unwrap();
    let outputs: Vec<&str> = input
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .filter_map(|i| i["call_id"].as_str())
        .collect();
    assert!(
        outputs.contains(&"call_pv_t002_0") && outputs.contains(&"call_pv_t002_1"),
        "{outputs:?}"
    );
    assert!(input
        .iter()
        .any(|i| i["type"] == "custom_tool_call_output" && i["call_id"] == "call_pv_t001_0"));
    let thread_id = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "thread.started")
        .and_then(|v| v["thread_id"].as_str().map(String::from))
        .expect("thread.started");

    // Resume against a brand-new server process: the turn comes from the history alone.
    let (stdout, requests) = run_codex(
        &entry,
        &script,
        &home,
        &work,
        &[
            "exec",
            "resume",
            &thread_id,
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "Now append a third line to notes.txt and show the file.",
        ],
    )
    .await;
    let turns: Vec<_> = requests
        .iter()
        .filter(|r| r.kind == RequestKind::Main)
        .map(|r| r.turn)
        .collect();
    assert_eq!(turns, [Some(5), Some(6)]);
    assert_eq!(
        std::fs::read_to_string(work.join("notes.txt")).unwrap(),
        "line one\nline 2 (edited)\nline three\n"
    );
    assert!(stdout.contains("notes.txt now has three lines"), "{stdout}");
}
