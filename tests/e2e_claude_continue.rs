//! End to end with the REAL Claude Code CLI (pinned 2.1.332, installed by
//! `scripts/install-agents.sh claude-code`; never skipped): rebuild a recorded session at
//! every boundary, reset the workspace at the recorded cwd to the boundary state, run the
//! real `claude` resume through the bridge in front of the scripted model server, and check
//! the wire.
//!
//! Declared dynamic fields when comparing with the original run's requests: none once the
//! original `userID` is carried over (`metadata.user_id.device_id` otherwise). The bridge puts
//! the cache breakpoint back where Claude had it, so even `cache_control` placement matches.

#[path = "support/claude.rs"]
mod claude;
#[path = "support/claude_plan.rs"]
mod claude_plan;

use claude_plan::*;
use journal_format::event::AgentStatus;
use journal_format::Event;
use pvisor::adapters::claude_code::continuation::{ClaudeContinuation, ResumeText};
use pvisor::adapters::claude_code::rebuild::rebuild;
use pvisor::bridge::{BridgeConfig, Upstream};
use pvisor::kit::NoInserts;
use pvisor::kit::{Observation, Plan, RebuildRequest, RebuiltSession};
use pvisor::protocol::Protocol;
use pvisor::runner::{run_continuation, ContinuationOutcome, ContinuationSpec};
use pvisor::scripted::{start, LoggedRequest, Script, ServerOptions};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

const UPSTREAM_KEY: &str = "pvisor-upstream-key";

/// Serializes runs that use one recorded cwd (also across test processes).
struct CwdLock(#[allow(dead_code)] std::fs::File);

fn lock_cwd(name: &str) -> CwdLock {
    use fs2::FileExt;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(format!("/tmp/pvisor-rec-{name}.lock"))
        .unwrap();
    f.lock_exclusive().unwrap();
    CwdLock(f)
}

struct Setup {
    name: String,
    rec: PathBuf,
    plan: Plan,
    n: usize,
    work: PathBuf,
    state: tempfile::TempDir,
    session: RebuiltSession,
    script: Script,
    task: claude::Task,
    _lock: CwdLock,
}

/// Rebuild `name` at boundary `n` (observations: the originals, with `edits` applied).
fn setup(name: &str, n: usize, edits: &[(&str, &str)]) -> Setup {
    let lock = lock_cwd(name);
    let rec = claude::recorded_dir().join(name);
    let source = rec.join("session.jsonl");
    let plan = plan_from_session(&source);
    let work = plan.original_cwd.clone().unwrap();
    assert_eq!(work, PathBuf::from(format!("/tmp/pvisor-rec-{name}/work")));
    reset_workspace(&rec, &work, &plan, n);
    let state = tempfile::Builder::new()
        .prefix("pvisor-cont-")
        .tempdir()
        .unwrap();
    let mut obs = original_observations(&plan, n);
    for (id, text) in edits {
        obs.insert(
            id.to_string(),
            Observation {
                text: text.to_string(),
                is_error: false,
                native: None,
            },
        );
    }
    let artifact = state.path().join("out/native/reconstructed.jsonl");
    let session = rebuild(&RebuildRequest {
        source: &source,
        plan: &plan,
        after_step: n,
        observations: pvisor::kit::Observations::Fresh(&obs),
        workspace: &work,
        state_dir: &state.path().join("state"),
        artifact_path: &artifact,
        touch_workspace: true,
        agent_entrypoint: None,
        for_continuation: true,
    })
    .unwrap_or_else(|e| panic!("{name} N={n}: rebuild: {e}"));
    let script = Script::from_path(rec.join("script.json"))
        .unwrap()
        .substitute(&[("CWD", &work.to_string_lossy())]);
    let task = claude::Task::load(&rec);
    Setup {
        name: name.into(),
        rec,
        plan,
        n,
        work,
        state,
        session,
        script,
        task,
        _lock: lock,
    }
}

#[derive(Default)]
struct Opts {
    budget: Option<u64>,
    prompt: Option<String>,
    default_text: bool,
    keep_user_id: bool,
    extra_env: Vec<(String, String)>,
    chat: bool,
    /// Another local process posts a keyless model request to the bridge as it starts.
    intruder: bool,
}

struct Run {
    outcome: ContinuationOutcome,
    events: Vec<Event>,
    upstream: Vec<LoggedRequest>,
    claude: ClaudeContinuation,
}

async fn run(s: &Setup, o: Opts) -> Run {
    let server = start(
        s.script.clone(),
        ServerOptions {
            api_key: Some(UPSTREAM_KEY.into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let cfg = BridgeConfig {
        protocol: Protocol::Anthropic,
        rules: std::sync::Arc::new(NoInserts),
        prefix: s.session.prefix.clone(),
        boundary_prompt: o.prompt.clone(),
        disable_thinking: false,
        max_steps: None,
        upstream: Upstream {
            base_url: if o.chat {
                format!("{}/v1", server.base_url())
            } else {
                server.base_url()
            },
            protocol: if o.chat {
                Protocol::OpenaiChat
            } else {
                Protocol::Anthropic
            },
            api_key: Some(UPSTREAM_KEY.into()),
            model: None,
            response_timeout: Duration::from_secs(60),
        },
        key: None,
        port: 0,
        resume: None,
        refused_blobs: None,
        hold_beyond_budget: false,
    };
    let state = s.state.path().join("state");
    let mut c = ClaudeContinuation::new(
        &claude::claude_entrypoint(),
        &s.session,
        &s.work,
        &state,
        &s.state.path().join("out/native/continued.jsonl"),
    )
    .unwrap();
    c.extra_args = s.task.args.clone();
    if o.default_text {
        c.resume_text = ResumeText::Default;
    }
    if o.keep_user_id {
        let cj: Value =
            serde_json::from_str(&std::fs::read_to_string(s.rec.join("claude.json")).unwrap())
                .unwrap();
        c.user_id = Some(cj["userID"].as_str().unwrap().into());
    }
    c.extra_env = o.extra_env;
    let spec = ContinuationSpec {
        timeout: Duration::from_secs(180),
        agent_version: Some("2.1.332".into()),
        log_dir: Some(s.state.path().join("logs")),
        ..ContinuationSpec::new(o.budget)
    };
    let mut events = Vec::new();
    let intruder = o.intruder;
    let outcome = run_continuation(&mut c, &spec, cfg, |e| {
        if let (true, Event::BridgeStarted(b)) = (intruder, &e) {
            let addr = b.listen.clone();
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut t = std::net::TcpStream::connect(addr.as_str()).unwrap();
                let body = r#"{"model":"x","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"t"}]}"#;
                let req = format!("POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
                t.write_all(req.as_bytes()).unwrap();
                let mut out = String::new();
                let _ = t.read_to_string(&mut out);
                assert!(out.starts_with("HTTP/1.1 401"), "{out}");
            });
        }
        events.push(e);
        Ok::<(), std::convert::Infallible>(())
    })
    .await
    .unwrap_or_else(|e| panic!("{} N={}: {e}", s.name, s.n));
    let upstream = server.requests();
    server.shutdown().await;
    Run {
        outcome,
        events,
        upstream,
        claude: c,
    }
}

fn describe(s: &Setup, r: &Run) -> String {
    let logs = s.state.path().join("logs");
    format!(
        "{} N={}: outcome {:?}\nevents {:#?}\nstdout:\n{}\nstderr:\n{}",
        s.name,
        s.n,
        r.outcome,
        r.events,
        std::fs::read_to_string(logs.join("agent-stdout.log")).unwrap_or_default(),
        std::fs::read_to_string(logs.join("agent-stderr.log")).unwrap_or_default()
    )
}

/// The original run's main requests (run 1, then the resume run if any).
fn original_requests(rec: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for f in ["requests.jsonl", "requests-resume.jsonl"] {
        if let Ok(t) = std::fs::read_to_string(rec.join(f)) {
            out.extend(
                t.lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap())
                    .filter(|r| r["kind"] == "main"),
            );
        }
    }
    out
}

/// The first original main request carrying the result of `call_id`.
fn original_after(rec: &Path, call_id: &str) -> (usize, Vec<Value>) {
    let all = original_requests(rec);
    let i = all
        .iter()
        .position(|r| {
            r["body"]["messages"].as_array().unwrap().iter().any(|m| {
                m["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|b| b["tool_use_id"] == call_id)
            })
        })
        .unwrap();
    (i, all)
}

fn mains(r: &Run) -> Vec<&LoggedRequest> {
    r.upstream
        .iter()
        .filter(|q| q.kind == pvisor::scripted::RequestKind::Main)
        .collect()
}

fn body_diff(original: &Value, got: &Value) -> Vec<String> {
    let mut out = Vec::new();
    claude::diff_paths(original, got, String::new(), &mut out);
    out
}

/// Event order and shapes that every run must satisfy.
fn check_events(s: &Setup, r: &Run) {
    let names: Vec<&str> = r.events.iter().map(|e| e.name()).collect();
    assert_eq!(names.first(), Some(&"bridge_started"), "{}", describe(s, r));
    assert_eq!(names.get(1), Some(&"continuation_started"));
    assert_eq!(names.last(), Some(&"agent_exited"));
    let Event::BridgeStarted(b) = &r.events[0] else {
        unreachable!()
    };
    assert!(b.listen.starts_with("127.0.0.1:"));
    assert_eq!(b.prefix_items as usize, s.session.prefix.len());
    let Event::ContinuationStarted(c) = &r.events[1] else {
        unreachable!()
    };
    assert!(
        !c.command.iter().any(|a| a.starts_with("pvb-")),
        "the key never appears in the command"
    );
    // Every step follows its validation.
    let mut validated = 0;
    let mut steps = 0;
    for e in &r.events {
        match e {
            Event::BridgeRequestValidated(v) if !v.side && v.ok => validated += 1,
            Event::ContinuationStep(st) => {
                steps += 1;
                assert_eq!(st.n, steps);
                assert!(steps <= validated);
                assert!(st.action_digest.starts_with("blake3:"));
            }
            _ => {}
        }
    }
    assert_eq!(steps, r.outcome.steps);
}

/// The continued session: same id, prefix byte-identical, no transport records left,
/// consistent parents, first live record hangs off the boundary.
fn check_continued(s: &Setup, r: &Run) {
    let c = r
        .outcome
        .continued
        .as_ref()
        .unwrap_or_else(|| panic!("no continued session\n{}", describe(s, r)));
    let text = std::fs::read_to_string(&c.artifact_path).unwrap();
    assert_eq!(text, std::fs::read_to_string(&c.native_path).unwrap());
    let rebuilt =
        std::fs::read_to_string(s.state.path().join("out/native/reconstructed.jsonl")).unwrap();
    // Byte for byte, except the host/time snapshots Claude compares on resume, which the
    // continuation set to this host before it started (model-visible text unchanged).
    // Both sides are set to the same facts, so a date that changed since the run does not
    // matter.
    let facts = pvisor::adapters::claude_code::drift::HostFacts::observe(&s.work);
    let (rebuilt, _) = pvisor::adapters::claude_code::drift::neutralize(&rebuilt, &facts);
    let (continued, _) = pvisor::adapters::claude_code::drift::neutralize(&text, &facts);
    assert!(continued.starts_with(&rebuilt), "prefix unchanged");
    assert!(
        c.removed.iter().any(|t| t == "user"),
        "the resume record was removed: {:?}",
        c.removed
    );
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let prefix_n = rebuilt.lines().count();
    let uuids: Vec<&str> = lines.iter().filter_map(|l| l["uuid"].as_str()).collect();
    let last_prefix_uuid = lines[..prefix_n]
        .iter()
        .rev()
        .find_map(|l| l["uuid"].as_str())
        .unwrap();
    let mut first_live = true;
    for l in &lines[prefix_n..] {
        assert_ne!(l["type"], "queue-operation");
        if let Some(sid) = l["sessionId"].as_str() {
            assert_eq!(sid, s.session.session_id);
        }
        assert!(
            l.get("isMeta").is_none()
                || l["message"]["content"]
                    .to_string()
                    .find("PVISOR-RESUME")
                    .is_none()
        );
        assert!(
            !l.to_string().contains("PVISOR-RESUME-"),
            "nonce left in {l}"
        );
        if let Some(p) = l["parentUuid"].as_str() {
            assert!(uuids.contains(&p), "dangling parent {p}");
        }
        if l["type"] == "assistant" && first_live {
            assert_eq!(
                l["parentUuid"], last_prefix_uuid,
                "the first live reply follows the boundary"
            );
            first_live = false;
        }
    }
    assert_eq!(c.session_id, s.session.session_id);
    assert_eq!(c.records as usize, lines.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_request_equals_the_original_at_every_boundary() {
    for name in ["five-step", "search-errors", "edits"] {
        let batches = plan_from_session(&claude::recorded_dir().join(name).join("session.jsonl"))
            .max_boundary();
        for n in 1..=batches {
            let s = setup(name, n, &[]);
            let r = run(
                &s,
                Opts {
                    budget: Some(2),
                    keep_user_id: true,
                    ..Default::default()
                },
            )
            .await;
            check_events(&s, &r);
            let last_call = s.plan.batches.in_memory().unwrap()[n - 1]
                .calls
                .last()
                .unwrap()
                .call_id
                .clone();
            let (i, orig) = original_after(&s.rec, &last_call);
            let m = mains(&r);
            assert!(!m.is_empty(), "{}", describe(&s, &r));
            // (a) The first request after the bridge is the original request N+1, byte for
            // byte in every field (userID carried over, cache breakpoint restored), headers too.
            let d = body_diff(&orig[i]["body"], &m[0].body);
            assert!(
                d.is_empty(),
                "{name} N={n}: first request differs from the original at {d:?}\n{}",
                describe(&s, &r)
            );
            let mut h1 = orig[i]["headers"].as_object().unwrap().clone();
            let mut h2 = serde_json::to_value(&m[0].headers)
                .unwrap()
                .as_object()
                .unwrap()
                .clone();
            // The bridge drops `accept-encoding` (it reads the answer stream) and the
            // hop-by-hop `connection`; everything else is forwarded as Claude sent it.
            for h in [&mut h1, &mut h2] {
                h.remove("accept-encoding");
                h.remove("connection");
            }
            assert_eq!(h1, h2.clone(), "{name} N={n}: headers");
            assert_eq!(m[0].turn, orig[i]["turn"].as_u64().map(|t| t as usize));
            // The second request carries the live step's fresh tool result: it equals the
            // original's too (Claude's file-read state survived the rebuild: no "modified on
            // disk" note, same Edit/Read texts). Results of parallel live calls arrive in the
            // order the tools finished, which no replay controls.
            if m.len() > 1
                && i + 1 < orig.len()
                && orig[i + 1]["turn"].as_u64() == Some(orig[i]["turn"].as_u64().unwrap() + 1)
            {
                let norm = |b: &Value| {
                    let mut b = b.clone();
                    b["messages"] = claude::parallel_results_unordered(&b["messages"]);
                    b
                };
                let d = body_diff(&norm(&orig[i + 1]["body"]), &norm(&m[1].body));
                assert!(
                    d.is_empty(),
                    "{name} N={n}: second request differs at {d:?}\n{}",
                    describe(&s, &r)
                );
            }
            // Status: two live steps allowed.
            let replies_with_tools = (0..2)
                .take_while(|k| {
                    s.script
                        .turns
                        .get(n + k)
                        .is_some_and(|t| !t.tool_calls.is_empty())
                })
                .count();
            let expected = if replies_with_tools == 2 {
                AgentStatus::MaxSteps
            } else {
                AgentStatus::Completed
            };
            assert_eq!(r.outcome.status, expected, "{}", describe(&s, &r));
            assert_eq!(r.outcome.steps as usize, m.len());
            check_continued(&s, &r);
            eprintln!(
                "{name} N={n}: ok ({} live steps, {:?})",
                r.outcome.steps, r.outcome.status
            );
        }
    }
}

/// Another local process sends the bridge a model request without the key while the real
/// agent runs: it gets a 401, reaches nothing, is journaled as a side request, and the run
/// goes on exactly as without it (its first request still ends at the boundary).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_request_from_another_process_changes_nothing() {
    let s = setup("five-step", 3, &[]);
    let r = run(
        &s,
        Opts {
            budget: Some(2),
            intruder: true,
            ..Default::default()
        },
    )
    .await;
    check_events(&s, &r);
    // The recorded turns after batch 3: the Edit, then the final answer.
    assert_eq!(
        r.outcome.status,
        AgentStatus::Completed,
        "{}",
        describe(&s, &r)
    );
    assert_eq!(r.outcome.steps, 2);
    assert!(r.outcome.bridge.failure.is_none());
    let v: Vec<_> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::BridgeRequestValidated(v) => Some(v.clone()),
            _ => None,
        })
        .collect();
    assert!(
        v.iter().any(|x| x.side
            && !x.ok
            && x.reason
                .as_deref()
                .unwrap_or("")
                .contains("missing or wrong bridge key")),
        "{v:?}"
    );
    let first_main = v.iter().find(|x| !x.side).unwrap();
    assert!(first_main.ok && first_main.n == 1, "{first_main:?}");
    assert_eq!(
        mains(&r).len(),
        2,
        "only the agent's two requests reached the upstream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edited_observation_reaches_the_model_and_device_id_is_the_only_dynamic_field() {
    let s = setup("five-step", 3, &[("toolu_pv_t002_1", "EDITED-OBS bye")]);
    let r = run(
        &s,
        Opts {
            budget: Some(1),
            default_text: true,
            ..Default::default()
        },
    )
    .await;
    check_events(&s, &r);
    let (i, orig) = original_after(&s.rec, "toolu_pv_t002_1");
    let m = mains(&r);
    assert_eq!(
        m[0].body["messages"][7]["content"][1]["content"],
        "EDITED-OBS bye",
        "{}",
        describe(&s, &r)
    );
    let mut d = body_diff(&orig[i]["body"], &m[0].body);
    d.sort();
    // Without the original userID, device_id is new: the one declared dynamic field.
    assert_eq!(
        d,
        ["/messages[7]/content[1]/content", "/metadata/user_id"],
        "{}",
        describe(&s, &r)
    );
    let uid = |b: &Value| {
        serde_json::from_str::<Value>(b["metadata"]["user_id"].as_str().unwrap()).unwrap()
    };
    assert_eq!(
        uid(&orig[i]["body"])["session_id"],
        uid(&m[0].body)["session_id"]
    );
    assert_ne!(
        uid(&orig[i]["body"])["device_id"],
        uid(&m[0].body)["device_id"]
    );
    // Claude's own default resume text was the transport item here.
    let v: Vec<_> = r
        .events
        .iter()
        .filter_map(|e| {
            if let Event::BridgeRequestValidated(v) = e {
                Some(v)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(v[0].removed, ["claude:resume_text_block"]);
    assert_eq!(r.outcome.status, AgentStatus::MaxSteps);
    check_continued(&s, &r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boundary_prompt_appears_once_right_after_the_boundary() {
    let s = setup("five-step", 3, &[]);
    let prompt = "Before editing, double-check a.txt.";
    let r = run(
        &s,
        Opts {
            budget: Some(2),
            prompt: Some(prompt.into()),
            keep_user_id: true,
            ..Default::default()
        },
    )
    .await;
    check_events(&s, &r);
    let m = mains(&r);
    assert_eq!(m.len(), 2, "{}", describe(&s, &r));
    let plen = s.session.prefix.len();
    for q in &m {
        let msgs = q.body["messages"].as_array().unwrap();
        assert_eq!(
            msgs[plen],
            serde_json::json!({"role": "user", "content": [{"type": "text", "text": prompt}]})
        );
        assert_eq!(
            q.body.to_string().matches(prompt).count(),
            1,
            "exactly once"
        );
        // Right after O′N: the boundary tool results are the message before it.
        assert_eq!(
            msgs[plen - 1]["content"][1]["tool_use_id"],
            "toolu_pv_t002_1"
        );
    }
    assert_eq!(m[0].body["messages"].as_array().unwrap().len(), plen + 1);
    let v: Vec<_> = r
        .events
        .iter()
        .filter_map(|e| {
            if let Event::BridgeRequestValidated(v) = e {
                Some(v.clone())
            } else {
                None
            }
        })
        .collect();
    // Injected once (request 1); carried again by later requests, never re-counted.
    assert!(v.iter().all(|v| v.ok));
    assert_eq!(v.iter().filter(|v| v.boundary_prompt_injected).count(), 1);
    assert!(v[0].boundary_prompt_injected);
    // The prompt never reaches the native session or the events.
    let cont =
        std::fs::read_to_string(&r.outcome.continued.as_ref().unwrap().artifact_path).unwrap();
    assert!(!cont.contains(prompt));
    assert!(!format!("{:?}", r.events).contains(prompt));
    check_continued(&s, &r);
}

/// The agent itself without the bridge key (a misconfiguration): its requests come from the
/// agent's process group, so the bridge answers 401, latches, and the run fails at once
/// (another process's keyless request is ignored instead: see below).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_key_gets_401_and_fails_the_run() {
    let s = setup("five-step", 2, &[]);
    let r = run(
        &s,
        Opts {
            budget: Some(2),
            extra_env: vec![("ANTHROPIC_API_KEY".into(), "not-the-bridge-key".into())],
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        r.outcome.status,
        AgentStatus::Failed,
        "{}",
        describe(&s, &r)
    );
    assert!(
        r.upstream.is_empty(),
        "nothing reached the upstream: {:?}",
        r.upstream
    );
    let f = r.outcome.bridge.failure.as_deref().unwrap();
    assert!(
        f.contains("the agent sent a missing or wrong bridge key"),
        "{f}"
    );
    let v: Vec<_> = r
        .events
        .iter()
        .filter_map(|e| {
            if let Event::BridgeRequestValidated(v) = e {
                Some(v.clone())
            } else {
                None
            }
        })
        .collect();
    assert!(!v.is_empty() && v.iter().all(|v| !v.ok));
    assert!(
        v.iter().any(|v| !v.side),
        "the agent's refused request is a main refusal"
    );
    assert_eq!(r.outcome.steps, 0);
    // Claude retries a 401 (ten times, with backoff): the runner stops it after the grace.
    assert!(
        r.outcome.message.as_deref().unwrap().contains("bridge key"),
        "{}",
        describe(&s, &r)
    );
    let out = std::fs::read_to_string(s.state.path().join("logs/agent-stdout.log")).unwrap();
    assert!(out.contains("\"error_status\":401"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_prefix_latches_and_claude_gets_a_4xx() {
    let s = setup("five-step", 3, &[]);
    // Someone edits an observation in the native session after the rebuild: Claude sends a
    // prefix that is not the validated one.
    let text = std::fs::read_to_string(&s.session.native_path).unwrap();
    assert!(text.contains(r#""content":"a.txt""#));
    std::fs::write(
        &s.session.native_path,
        text.replace(r#""content":"a.txt""#, r#""content":"a.txt TAMPERED""#),
    )
    .unwrap();
    let r = run(
        &s,
        Opts {
            budget: Some(2),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        r.outcome.status,
        AgentStatus::Failed,
        "{}",
        describe(&s, &r)
    );
    assert!(
        r.upstream.is_empty(),
        "no request reached the upstream: {:?}",
        r.upstream.iter().map(|q| &q.path).collect::<Vec<_>>()
    );
    let f = r.outcome.bridge.failure.clone().unwrap();
    assert!(f.contains("message 3 differs"), "{f}");
    let res = r
        .claude
        .result_event()
        .unwrap_or_else(|| panic!("{}", describe(&s, &r)));
    assert_eq!(res["is_error"], true);
    // Claude got the 422 (retried once, then got 403 from the latched bridge).
    assert!(
        res["result"].as_str().unwrap().contains("pvisor bridge"),
        "{res}"
    );
    assert!(
        res["api_error_status"]
            .as_u64()
            .is_some_and(|s| (400..500).contains(&s)),
        "{res}"
    );
    check_events(&s, &r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_stops_the_agent_with_max_steps() {
    let s = setup("five-step", 1, &[]);
    let r = run(
        &s,
        Opts {
            budget: Some(1),
            ..Default::default()
        },
    )
    .await;
    check_events(&s, &r);
    assert_eq!(
        r.outcome.status,
        AgentStatus::MaxSteps,
        "{}",
        describe(&s, &r)
    );
    assert_eq!(mains(&r).len(), 1, "exactly one live model request");
    assert_eq!(r.outcome.steps, 1);
    let res = r.claude.result_event().unwrap();
    assert_eq!(res["subtype"], "error_max_turns");
    assert_eq!(res["num_turns"], 2);
    assert_eq!(r.outcome.exit_code, Some(1));
    // The step's action ran (a live step = one model reply and its tool calls).
    assert_eq!(
        std::fs::read_to_string(s.work.join("notes.txt")).unwrap(),
        "line one\nline two\n"
    );
    let Some(Event::AgentExited(x)) = r.events.last() else {
        panic!()
    };
    assert_eq!(x.status, AgentStatus::MaxSteps);
    check_continued(&s, &r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_chat_translation_upstream() {
    let s = setup("five-step", 3, &[]);
    let r = run(
        &s,
        Opts {
            budget: Some(3),
            chat: true,
            ..Default::default()
        },
    )
    .await;
    check_events(&s, &r);
    assert_eq!(
        r.outcome.status,
        AgentStatus::Completed,
        "{}",
        describe(&s, &r)
    );
    let m = mains(&r);
    assert_eq!(m.len(), 2);
    assert!(m.iter().all(|q| q.path == "/v1/chat/completions"));
    assert_eq!(m[0].turn, Some(3));
    assert_eq!(
        std::fs::read_to_string(s.work.join("notes.txt")).unwrap(),
        "line one\nline 2 (edited)\n"
    );
    check_continued(&s, &r);
}
