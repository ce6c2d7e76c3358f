//! The fail-closed bridge in the OpenAI Responses protocol (Codex), with requests taken from
//! the genuine Codex 0.149.0 run (`tests/fixtures/codex/genuine/requests-run1.jsonl`) and the
//! scripted model server as upstream.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use journal_format::Event;
use pvisor::adapters::codex::request_rules::CodexRequestRules;
use pvisor::bridge::{self, BridgeConfig, Upstream};
use pvisor::kit::{Adapter, Observation, RebuildRequest};
use pvisor::protocol::Protocol;
use pvisor::scripted::{start, Script, ServerOptions};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

const NONCE: &str = "pvisor-codex-resume-0123456789abcdef";

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/codex")
        .join(p)
}

fn original_requests() -> Vec<Value> {
    std::fs::read_to_string(fixture("genuine/requests-run1.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The session's `base_instructions.text` (what the continuation gives the bridge).
fn base_instructions(rollout: &str) -> Option<String> {
    let text = std::fs::read_to_string(fixture(rollout)).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    first["payload"]["base_instructions"]["text"]
        .as_str()
        .map(String::from)
}

/// The rebuilt prefix at boundary `n` with the original observations.
fn prefix(n: usize) -> Vec<Value> {
    prefix_of("genuine/rollout-run1.jsonl", n)
}

fn prefix_of(rollout: &str, n: usize) -> Vec<Value> {
    let path = fixture(rollout);
    let a = pvisor::adapters::codex::agent::Codex;
    let plan = a.parse(&path, &std::fs::read(&path).unwrap()).unwrap();
    let obs: BTreeMap<String, Observation> = plan
        .batches
        .loaded()
        .unwrap()
        .iter()
        .flat_map(|b| {
            b.calls
                .iter()
                .map(|c| (c.call_id.clone(), c.original.clone().unwrap()))
        })
        .collect();
    let state = tempfile::tempdir().unwrap();
    let art = state.path().join("a.jsonl");
    a.rebuild(&RebuildRequest {
        source: &path,
        plan: &plan,
        after_step: n,
        observations: pvisor::kit::Observations::Fresh(&obs),
        workspace: state.path(),
        state_dir: state.path(),
        artifact_path: &art,
        touch_workspace: true,
        agent_entrypoint: None,
        for_continuation: true,
    })
    .unwrap()
    .prefix
}

fn skills() -> Value {
    json!({"type": "message", "id": "msg_x", "role": "developer", "content": [{"type": "input_text", "text": "<skills_instructions>\n## Skills\n…"}]})
}

fn nonce() -> Value {
    json!({"type": "message", "id": "msg_y", "role": "user", "content": [{"type": "input_text", "text": NONCE}]})
}

fn config(
    upstream: &str,
    prefix: Vec<Value>,
    max_steps: Option<u64>,
    prompt: Option<&str>,
) -> BridgeConfig {
    BridgeConfig {
        protocol: Protocol::OpenaiResponses,
        rules: std::sync::Arc::new(CodexRequestRules {
            prompt: NONCE.into(),
            instructions: base_instructions("genuine/rollout-run1.jsonl"),
        }),
        prefix,
        boundary_prompt: prompt.map(str::to_string),
        disable_thinking: false,
        max_steps,
        upstream: Upstream {
            base_url: upstream.into(),
            protocol: Protocol::OpenaiResponses,
            api_key: Some("upstream-key".into()),
            model: None,
            response_timeout: Duration::from_secs(10),
        },
        key: None,
        port: 0,
        resume: None,
        refused_blobs: None,
        hold_beyond_budget: false,
    }
}

async fn post(base: &str, key: &str, body: &Value) -> (StatusCode, String) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let req = Request::post(format!("{base}/v1/responses"))
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn upstream_script() -> Script {
    Script::from_path(fixture("five-step/script.json"))
        .unwrap()
        .substitute(&[("CWD", "/tmp/x")])
}

#[tokio::test]
async fn codex_resume_request_is_cleaned_validated_and_ends_at_the_boundary() {
    let reqs = original_requests();
    let n = 3;
    let p = prefix(n);
    let up = start(
        upstream_script(),
        ServerOptions {
            api_key: Some("upstream-key".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let (b, rx) = bridge::start(config(&up.base_url(), p.clone(), Some(1), None))
        .await
        .unwrap();
    let (events, _t) = bridge::auto_ack(rx);
    // What codex exec resume sends from a different CODEX_HOME path: the prefix, the skills
    // developer item, the nonce prompt.
    let mut body = reqs[n]["body"].clone();
    let mut input = body["input"].as_array().unwrap().clone();
    assert_eq!(input, p);
    input.push(skills());
    input.push(nonce());
    body["input"] = Value::Array(input);
    let (st, text) = post(&b.base_url(), b.key(), &body).await;
    assert_eq!(st, StatusCode::OK, "{text}");
    assert!(text.contains("response.completed"), "{text}");
    let got = up.main_requests();
    assert_eq!(got.len(), 1);
    // Upstream received exactly the original request N+1 (the request ends at O′N).
    assert_eq!(got[0].body, reqs[n]["body"]);
    let evs = events.lock().unwrap().clone();
    let v: Vec<_> = evs
        .iter()
        .filter_map(|e| {
            if let Event::BridgeRequestValidated(v) = e {
                Some(v.clone())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(v.len(), 1);
    assert!(v[0].ok);
    assert_eq!(
        v[0].removed,
        vec![
            "codex:skills_instructions".to_string(),
            "codex:resume_prompt".to_string()
        ]
    );
    let steps: Vec<_> = evs
        .iter()
        .filter_map(|e| {
            if let Event::ContinuationStep(s) = e {
                Some(s.clone())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(steps.len(), 1);
    // The budget (1 live step) is used up: the next request is refused.
    let mut next = body.clone();
    next["input"].as_array_mut().unwrap().push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]}));
    let (st, _) = post(&b.base_url(), b.key(), &next).await;
    assert_eq!(st, 400, "the budget's end: an error Codex does not retry");
    assert!(b.stats().budget_refused && b.stats().failure.is_none());
}

#[tokio::test]
async fn a_changed_prefix_item_or_a_misplaced_nonce_is_refused() {
    let reqs = original_requests();
    let p = prefix(2);
    let up = start(
        upstream_script(),
        ServerOptions {
            api_key: Some("upstream-key".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let (b, rx) = bridge::start(config(&up.base_url(), p.clone(), None, None))
        .await
        .unwrap();
    let (_events, _t) = bridge::auto_ack(rx);
    let mut body = reqs[2]["body"].clone();
    let input = body["input"].as_array_mut().unwrap();
    let last = input.len() - 1;
    input[last]["output"] = json!("EDITED");
    input.push(nonce());
    let (st, text) = post(&b.base_url(), b.key(), &body).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{text}");
    assert!(up.main_requests().is_empty());

    let (b, rx) = bridge::start(config(&up.base_url(), p, None, None))
        .await
        .unwrap();
    let (_events, _t) = bridge::auto_ack(rx);
    let mut body = reqs[2]["body"].clone();
    body["input"].as_array_mut().unwrap().insert(1, nonce());
    let (st, _) = post(&b.base_url(), b.key(), &body).await;
    assert!(st.is_client_error());
    assert!(up.main_requests().is_empty());
}

#[tokio::test]
async fn boundary_prompt_is_added_once_after_the_boundary() {
    let reqs = original_requests();
    let p = prefix(1);
    let up = start(
        upstream_script(),
        ServerOptions {
            api_key: Some("upstream-key".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let (b, rx) = bridge::start(config(
        &up.base_url(),
        p.clone(),
        None,
        Some("Say hi first."),
    ))
    .await
    .unwrap();
    let (_events, _t) = bridge::auto_ack(rx);
    let mut body = reqs[1]["body"].clone();
    body["input"].as_array_mut().unwrap().push(nonce());
    let (st, text) = post(&b.base_url(), b.key(), &body).await;
    assert_eq!(st, StatusCode::OK, "{text}");
    let got = up.main_requests();
    let input = got[0].body["input"].as_array().unwrap();
    assert_eq!(input.len(), p.len() + 1);
    assert_eq!(
        input[p.len()],
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hi first."}]})
    );
    assert_eq!(got[0].body.to_string().matches("Say hi first.").count(), 1);
}

/// Code mode (responses-lite): Codex's requests begin with its `additional_tools` item and
/// the base instructions as a developer message. Both are its generated head (forwarded
/// as they are); a developer message that is not the session's instructions is part of the
/// checked prefix, so the request is refused.
#[tokio::test]
async fn a_code_mode_request_is_validated_after_its_generated_head() {
    let reqs: Vec<Value> = std::fs::read_to_string(fixture("codemode/requests-run1.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let n = 3;
    let p = prefix_of("codemode/rollout-run1.jsonl", n);
    let up = start(
        upstream_script(),
        ServerOptions {
            api_key: Some("upstream-key".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mut cfg = config(&up.base_url(), p.clone(), Some(2), None);
    cfg.rules = std::sync::Arc::new(CodexRequestRules {
        prompt: NONCE.into(),
        instructions: base_instructions("codemode/rollout-run1.jsonl"),
    });
    let (b, rx) = bridge::start(cfg).await.unwrap();
    let (_events, _t) = bridge::auto_ack(rx);
    let original = reqs[n]["body"].clone();
    let input = original["input"].as_array().unwrap().clone();
    assert_eq!(input[0]["type"], "additional_tools");
    assert_eq!(&input[2..], &p[..], "head of 2, then the prefix");
    let mut body = original.clone();
    let mut resumed = input.clone();
    resumed.push(skills());
    resumed.push(nonce());
    body["input"] = Value::Array(resumed.clone());
    let (st, text) = post(&b.base_url(), b.key(), &body).await;
    assert_eq!(st, StatusCode::OK, "{text}");
    assert_eq!(
        up.main_requests()[0].body,
        original,
        "upstream got request N+1"
    );
    // Other instructions than the session's: not the generated head, so checked and refused.
    let mut other = body.clone();
    other["input"][1]["content"][0]["text"] = Value::from("You are someone else.");
    let (st, text) = post(&b.base_url(), b.key(), &other).await;
    assert_ne!(st, StatusCode::OK, "{text}");
}
