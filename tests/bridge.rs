//! The fail-closed bridge against the scripted model server (and a slow hand-made upstream
//! for the streaming checks). No agent involved: requests are built by hand.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use journal_format::Event;
use pvisor::adapters::claude_code::request_rules::{
    ClaudeRequestRules, DEFAULT_RESUME_TEXT as CLAUDE_DEFAULT_RESUME_TEXT,
};
use pvisor::bridge::{self, BridgeConfig, Upstream};
use pvisor::protocol::Protocol;
use pvisor::scripted::{start, RequestKind, Script, ServerOptions};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

fn script() -> Script {
    Script::from_json_str(
        r#"{"turns": [
            {"text": "one", "tool_calls": [{"name": "Bash", "input": {"command": "ls"}}]},
            {"text": "two", "tool_calls": [{"name": "Read", "input": {"file_path": "/x"}}]},
            {"text": "three"},
            {"text": "four"}
        ]}"#,
    )
    .unwrap()
}

fn prefix() -> Vec<Value> {
    vec![
        json!({"role": "user", "content": [{"type": "text", "text": "task"}]}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "one"}, {"type": "tool_use", "id": "toolu_pv_t000_0", "name": "Bash", "input": {"command": "ls"}}]}),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_pv_t000_0", "content": "a.txt"}]}),
    ]
}

/// What claude sends first: the prefix, cache breakpoint moved to the appended resume block.
fn first_request(text: &str) -> Value {
    let mut msgs = prefix();
    msgs[2]["content"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}));
    json!({
        "model": "claude-opus-5-5", "max_tokens": 1000, "stream": true,
        "system": [{"type": "text", "text": "sys"}],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "messages": msgs
    })
}

fn config(upstream: &str, upstream_protocol: Protocol) -> BridgeConfig {
    BridgeConfig {
        protocol: Protocol::Anthropic,
        rules: Arc::new(ClaudeRequestRules::new(CLAUDE_DEFAULT_RESUME_TEXT)),
        prefix: prefix(),
        boundary_prompt: None,
        disable_thinking: false,
        max_steps: None,
        upstream: Upstream {
            base_url: upstream.into(),
            protocol: upstream_protocol,
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

async fn post(base: &str, path: &str, key: &str, body: &Value) -> (StatusCode, String) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let req = Request::post(format!("{base}{path}"))
        .header("x-api-key", key)
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn validations(events: &[Event]) -> Vec<journal_format::event::BridgeRequestValidated> {
    events
        .iter()
        .filter_map(|e| {
            if let Event::BridgeRequestValidated(v) = e {
                Some(v.clone())
            } else {
                None
            }
        })
        .collect()
}

fn steps(events: &[Event]) -> Vec<journal_format::event::ContinuationStep> {
    events
        .iter()
        .filter_map(|e| {
            if let Event::ContinuationStep(v) = e {
                Some(v.clone())
            } else {
                None
            }
        })
        .collect()
}

#[tokio::test]
async fn first_request_is_cleaned_validated_and_streamed_through() {
    let up = start(
        script(),
        ServerOptions {
            api_key: Some("upstream-key".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let (b, rx) = bridge::start(config(&up.base_url(), Protocol::Anthropic))
        .await
        .unwrap();
    let (events, _t) = bridge::auto_ack(rx);
    let (st, body) = post(
        &b.base_url(),
        "/v1/messages?beta=true",
        b.key(),
        &first_request(CLAUDE_DEFAULT_RESUME_TEXT),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert!(body.contains("event: message_stop"));
    // Upstream got exactly the prefix, the cache breakpoint back on the last tool_result.
    let got = up.main_requests();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].path, "/v1/messages?beta=true");
    let msgs = got[0].body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3);
    assert_eq!(
        msgs[2]["content"],
        json!([{"type": "tool_result", "tool_use_id": "toolu_pv_t000_0", "content": "a.txt", "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(got[0].turn, Some(1));
    assert_eq!(got[0].headers["anthropic-version"], "2023-06-01");
    let ev = events.lock().unwrap().clone();
    let v = validations(&ev);
    assert_eq!(v.len(), 1);
    assert!(v[0].ok && !v[0].side && v[0].n == 1);
    assert_eq!(v[0].removed, ["claude:resume_text_block"]);
    let s = steps(&ev);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].tools, ["Read"]);
    assert_eq!(
        s[0].action_digest,
        format!("blake3:{}", blake3::hash(body.as_bytes()).to_hex())
    );
    // Ordering: validation before the step.
    assert!(
        matches!(ev[0], Event::BridgeRequestValidated(_))
            && matches!(ev[1], Event::ContinuationStep(_))
    );

    // Request 2 carries the resume block in the middle of its history; it is removed again.
    let mut req2 = first_request(CLAUDE_DEFAULT_RESUME_TEXT);
    let m = req2["messages"].as_array_mut().unwrap();
    m.push(json!({"role": "assistant", "content": [{"type": "text", "text": "two"}, {"type": "tool_use", "id": "toolu_pv_t001_0", "name": "Read", "input": {"file_path": "/x"}}]}));
    m.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_pv_t001_0", "content": "x"}]}));
    let (st, _) = post(&b.base_url(), "/v1/messages", b.key(), &req2).await;
    assert_eq!(st, StatusCode::OK);
    let got = up.main_requests();
    assert_eq!(got[1].body["messages"].as_array().unwrap().len(), 5);
    assert!(!got[1].body.to_string().contains(CLAUDE_DEFAULT_RESUME_TEXT));
    assert_eq!(b.stats().steps, 2);
    assert!(b.stats().failure.is_none());
    b.shutdown().await;
    up.shutdown().await;
}

#[tokio::test]
async fn a_keyless_request_is_401_never_forwarded_and_does_not_fail_the_run() {
    let up = start(script(), ServerOptions::default()).await.unwrap();
    let (b, rx) = bridge::start(config(&up.base_url(), Protocol::Anthropic))
        .await
        .unwrap();
    let (events, _t) = bridge::auto_ack(rx);
    // Another local process (wrong key) sends a model request first.
    let (st, _) = post(
        &b.base_url(),
        "/v1/messages",
        "wrong",
        &first_request(CLAUDE_DEFAULT_RESUME_TEXT),
    )
    .await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    assert!(up.requests().is_empty(), "nothing reaches the upstream");
    assert!(b.stats().failure.is_none(), "the run is not failed by it");
    // The agent's own request is still request 1 and goes through.
    let (st, body) = post(
        &b.base_url(),
        "/v1/messages",
        b.key(),
        &first_request(CLAUDE_DEFAULT_RESUME_TEXT),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    let v = validations(&events.lock().unwrap());
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(v[0].side && !v[0].ok, "{:?}", v[0]);
    assert!(v[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("missing or wrong bridge key"));
    assert!(!v[1].side && v[1].ok && v[1].n == 1, "{:?}", v[1]);
    assert!(b.stats().failure.is_none());
}

#[tokio::test]
async fn tampered_prefix_or_extra_message_latches() {
    let up = start(script(), ServerOptions::default()).await.unwrap();
    for case in ["tampered", "extra", "missing-results", "nonce-elsewhere"] {
        let mut cfg = config(&up.base_url(), Protocol::Anthropic);
        let mut req = first_request(CLAUDE_DEFAULT_RESUME_TEXT);
        match case {
            "tampered" => req["messages"][2]["content"][0]["content"] = json!("a.txt EDITED"),
            "extra" => req["messages"]
                .as_array_mut()
                .unwrap()
                .push(json!({"role": "user", "content": "please continue"})),
            "missing-results" => {
                req["messages"].as_array_mut().unwrap().pop();
            }
            _ => {
                cfg.rules = Arc::new(ClaudeRequestRules::new("PVISOR-NONCE-1234"));
                req = first_request("PVISOR-NONCE-1234");
                req["system"][0]["text"] = json!("sys PVISOR-NONCE-1234");
            }
        }
        let (b, rx) = bridge::start(cfg).await.unwrap();
        let (events, _t) = bridge::auto_ack(rx);
        let (st, body) = post(&b.base_url(), "/v1/messages", b.key(), &req).await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{case}: {body}");
        let (st, _) = post(
            &b.base_url(),
            "/v1/messages",
            b.key(),
            &first_request(CLAUDE_DEFAULT_RESUME_TEXT),
        )
        .await;
        assert_eq!(st, StatusCode::FORBIDDEN, "{case}: latched");
        let v = validations(&events.lock().unwrap());
        assert!(!v[0].ok);
        let reason = v[0].reason.clone().unwrap();
        match case {
            "tampered" => {
                assert!(reason.contains("message 2 differs"), "{reason}");
                let d = v[0].difference.clone().unwrap();
                assert!(
                    d.starts_with("request 1, message 2 (role="),
                    "the first difference is named: {d}"
                );
            }
            "extra" => {
                assert!(reason.contains("does not end at the boundary"), "{reason}");
                let d = v[0].difference.clone().unwrap();
                assert!(
                    d.contains("after O′N: role="),
                    "the extra message is described: {d}"
                );
            }
            "missing-results" => assert!(reason.contains("fewer than"), "{reason}"),
            _ => assert!(reason.contains("nonce"), "{reason}"),
        }
        b.shutdown().await;
    }
    assert!(up.requests().is_empty(), "no request reached the upstream");
}

#[tokio::test]
async fn boundary_prompt_thinking_budget_and_side_requests() {
    let up = start(
        script(),
        ServerOptions {
            api_key: Some("upstream-key".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mut cfg = config(&up.base_url(), Protocol::Anthropic);
    cfg.boundary_prompt = Some("Now also check b.txt.".into());
    cfg.disable_thinking = true;
    cfg.max_steps = Some(1);
    let (b, rx) = bridge::start(cfg).await.unwrap();
    let (events, _t) = bridge::auto_ack(rx);
    let (st, body) = post(
        &b.base_url(),
        "/v1/messages/count_tokens",
        b.key(),
        &json!({"messages": [], "model": "m"}),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    let (st, _) = post(
        &b.base_url(),
        "/v1/messages",
        b.key(),
        &first_request(CLAUDE_DEFAULT_RESUME_TEXT),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let main = up.main_requests();
    let msgs = main[0].body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 4);
    assert_eq!(
        msgs[3],
        json!({"role": "user", "content": [{"type": "text", "text": "Now also check b.txt."}]})
    );
    assert_eq!(main[0].body["thinking"], json!({"type": "disabled"}));
    assert!(main[0].body.get("context_management").is_none());
    assert_eq!(
        up.requests()
            .iter()
            .filter(|r| r.kind == RequestKind::CountTokens)
            .count(),
        1
    );
    // The budget is one step: another main request latches.
    let mut req2 = first_request(CLAUDE_DEFAULT_RESUME_TEXT);
    req2["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "assistant", "content": "x"}));
    req2["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "user", "content": "y"}));
    let (st, body) = post(&b.base_url(), "/v1/messages", b.key(), &req2).await;
    // The budget's end: a non-retryable 400, journaled as budget_exhausted, no latch.
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(body.contains("budget"), "{body}");
    assert!(b.stats().failure.is_none() && b.stats().budget_refused);
    let v = validations(&events.lock().unwrap());
    assert!(v[0].side && v[0].ok);
    assert!(v[1].boundary_prompt_injected && v[1].ok);
    assert!(!v[2].ok && v[2].budget_exhausted);
    assert!(b.stats().boundary_prompt_injected);
}

#[tokio::test]
async fn openai_chat_translation_mode() {
    let up = start(
        script(),
        ServerOptions {
            api_key: Some("upstream-key".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mut cfg = config(&format!("{}/v1", up.base_url()), Protocol::OpenaiChat);
    cfg.upstream.model = Some("open-model".into());
    let (b, rx) = bridge::start(cfg).await.unwrap();
    let (events, _t) = bridge::auto_ack(rx);
    let (st, body) = post(
        &b.base_url(),
        "/v1/messages",
        b.key(),
        &first_request(CLAUDE_DEFAULT_RESUME_TEXT),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert!(
        body.contains("\"type\":\"tool_use\"") && body.contains("\"name\":\"Read\""),
        "{body}"
    );
    let main = up.main_requests();
    assert_eq!(main[0].path, "/v1/chat/completions");
    assert_eq!(main[0].body["model"], "open-model");
    assert_eq!(main[0].turn, Some(1));
    let s = steps(&events.lock().unwrap());
    assert_eq!(s[0].tools, ["Read"]);
}

/// A hand-made upstream that streams part of an answer, then waits for a signal.
async fn slow_upstream(release: tokio::sync::oneshot::Receiver<()>) -> String {
    use hyper::body::Frame;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let release = std::sync::Arc::new(tokio::sync::Mutex::new(Some(release)));
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let svc = hyper::service::service_fn(move |_req: Request<hyper::body::Incoming>| {
            let release = release.clone();
            async move {
                let (tx, rx) =
                    tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(8);
                tokio::spawn(async move {
                    let ev = |t: &str, d: Value| {
                        Ok(Frame::data(Bytes::from(format!(
                            "event: {t}\ndata: {d}\n\n"
                        ))))
                    };
                    tx.send(ev("message_start", json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "model": "x", "stop_reason": null, "usage": {"input_tokens": 1, "output_tokens": 0}}}))).await.unwrap();
                    tx.send(ev(
                        "content_block_start",
                        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                    ))
                    .await
                    .unwrap();
                    tx.send(ev(
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "EARLY"}}),
                    ))
                    .await
                    .unwrap();
                    let r = release.lock().await.take().unwrap();
                    r.await.unwrap();
                    tx.send(ev(
                        "content_block_stop",
                        json!({"type": "content_block_stop", "index": 0}),
                    ))
                    .await
                    .unwrap();
                    tx.send(ev("content_block_start", json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_x", "name": "Bash", "input": {}}}))).await.unwrap();
                    tx.send(ev("content_block_delta", json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"command\":\"ls\"}"}}))).await.unwrap();
                    tx.send(ev(
                        "content_block_stop",
                        json!({"type": "content_block_stop", "index": 1}),
                    ))
                    .await
                    .unwrap();
                    tx.send(ev(
                        "message_delta",
                        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}}),
                    ))
                    .await
                    .unwrap();
                    tx.send(ev("message_stop", json!({"type": "message_stop"})))
                        .await
                        .unwrap();
                });
                let stream = futures_util::stream::unfold(rx, |mut rx| async move {
                    rx.recv().await.map(|x| (x, rx))
                });
                let mut r = hyper::Response::new(http_body_util::StreamBody::new(stream));
                r.headers_mut()
                    .insert("content-type", "text/event-stream".parse().unwrap());
                Ok::<_, std::convert::Infallible>(r)
            }
        });
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
            .await;
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn answers_stream_through_and_tool_calls_wait_for_the_journal() {
    let (release_tx, release_rx) = tokio::sync::oneshot::channel();
    let base = slow_upstream(release_rx).await;
    let (b, mut rx) = bridge::start(config(&base, Protocol::Anthropic))
        .await
        .unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let req = Request::post(format!("{}/v1/messages", b.base_url()))
        .header("x-api-key", b.key())
        .body(Full::new(Bytes::from(
            first_request(CLAUDE_DEFAULT_RESUME_TEXT).to_string(),
        )))
        .unwrap();
    let fut = tokio::spawn(async move { client.request(req).await.unwrap() });
    // The validation must be acknowledged before anything is forwarded.
    let n1 = rx.recv().await.unwrap();
    assert!(matches!(n1.event, Event::BridgeRequestValidated(ref v) if v.ok));
    n1.ack(true);
    let resp = fut.await.unwrap();
    let mut body = resp.into_body();
    // Text arrives while the upstream is still answering (no full buffering).
    let mut seen = String::new();
    while !seen.contains("EARLY") {
        let f = tokio::time::timeout(Duration::from_secs(5), body.frame())
            .await
            .expect("early bytes arrive")
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&f.into_data().unwrap()));
    }
    release_tx.send(()).unwrap();
    // The step is reported; until it is acknowledged the tool call is not released.
    let n2 = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap();
    let Event::ContinuationStep(ref step) = n2.event else {
        panic!("{:?}", n2.event)
    };
    assert_eq!(step.tools, ["Bash"]);
    let held = tokio::time::timeout(Duration::from_millis(300), body.frame()).await;
    if let Ok(Some(Ok(f))) = &held {
        let s = String::from_utf8_lossy(f.data_ref().unwrap()).into_owned();
        assert!(
            !s.contains("tool_use"),
            "tool call released before the step was journaled: {s}"
        );
    }
    n2.ack(true);
    let rest = body.collect().await.unwrap().to_bytes();
    let rest = String::from_utf8_lossy(&rest);
    assert!(
        rest.contains("\"name\":\"Bash\"") && rest.contains("message_stop"),
        "{rest}"
    );
    b.shutdown().await;
}

#[tokio::test]
async fn an_https_upstream_is_spoken_to_over_tls() {
    // A plaintext server behind an https:// URL: the bridge must attempt a TLS handshake
    // (and fail closed), never fall back to plaintext.
    let up = start(
        script(),
        ServerOptions {
            api_key: Some("upstream-key".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let https = up.base_url().replacen("http://", "https://", 1);
    let (b, rx) = bridge::start(config(&https, Protocol::Anthropic))
        .await
        .unwrap();
    let (_events, _t) = bridge::auto_ack(rx);
    let (st, body) = post(
        &b.base_url(),
        "/v1/messages?beta=true",
        b.key(),
        &first_request(CLAUDE_DEFAULT_RESUME_TEXT),
    )
    .await;
    assert!(st.is_server_error() || st.is_client_error(), "{st} {body}");
    assert_eq!(
        up.main_requests().len(),
        0,
        "nothing reached the plaintext upstream as a request"
    );
    // a bad scheme is refused at start
    assert!(
        bridge::start(config("ftp://127.0.0.1:1", Protocol::Anthropic))
            .await
            .is_err()
    );
}

/// The bridge records how the upstream failed (429 → rate limit, 5xx → server error), so a
/// failed continuation is categorized from facts, not from the agent's words.
#[tokio::test]
async fn upstream_failures_are_recorded_by_kind() {
    for (status, want) in [
        (429, bridge::UpstreamFailure::RateLimit),
        (503, bridge::UpstreamFailure::ServerError),
    ] {
        let s = Script::from_json_str(&format!(
            r#"{{"turns": [{{"text": "one"}}, {{"error": {{"status": {status}, "type": "api_error"}}}}]}}"#
        ))
        .unwrap();
        let up = start(s, ServerOptions::default()).await.unwrap();
        let (b, rx) = bridge::start(config(&up.base_url(), Protocol::Anthropic))
            .await
            .unwrap();
        let (_events, _t) = bridge::auto_ack(rx);
        let (st, _) = post(
            &b.base_url(),
            "/v1/messages",
            b.key(),
            &first_request(CLAUDE_DEFAULT_RESUME_TEXT),
        )
        .await;
        assert_eq!(st.as_u16(), status);
        assert_eq!(b.stats().upstream_failure, Some(want), "{status}");
        assert_eq!(b.stats().steps, 0);
    }
    // A connection that cannot be made.
    let (b, rx) = bridge::start(config("http://127.0.0.1:9", Protocol::Anthropic))
        .await
        .unwrap();
    let (_events, _t) = bridge::auto_ack(rx);
    post(
        &b.base_url(),
        "/v1/messages",
        b.key(),
        &first_request(CLAUDE_DEFAULT_RESUME_TEXT),
    )
    .await;
    assert_eq!(
        b.stats().upstream_failure,
        Some(bridge::UpstreamFailure::Connection)
    );
}
