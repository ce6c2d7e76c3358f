//! The scripted model server over real HTTP on 127.0.0.1: exact event sequences of each
//! protocol, history-derived turn selection, side requests, auth and the request log.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use pvisor::scripted::{
    start, Protocol, RequestKind, Script, ServerHandle, ServerOptions, ToolCallSpec, Turn,
};
use serde_json::{json, Value};
use std::net::SocketAddr;

// ------------------------------------------------------------------ helpers

struct Reply {
    status: u16,
    headers: hyper::HeaderMap,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
    /// `(event name or "", data)` of every SSE event.
    fn sse(&self) -> Vec<(String, String)> {
        assert!(self.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"));
        self.body
            .split("\n\n")
            .filter(|c| !c.trim().is_empty())
            .map(|chunk| {
                let mut event = String::new();
                let mut data = String::new();
                for line in chunk.lines() {
                    if let Some(e) = line.strip_prefix("event: ") {
                        event = e.to_string();
                    } else if let Some(d) = line.strip_prefix("data: ") {
                        data = d.to_string();
                    } else {
                        panic!("unexpected SSE line {line:?}");
                    }
                }
                (event, data)
            })
            .collect()
    }
    /// SSE events with JSON data.
    fn sse_json(&self) -> Vec<(String, Value)> {
        self.sse()
            .into_iter()
            .map(|(e, d)| {
                (
                    e,
                    serde_json::from_str(&d).unwrap_or_else(|_| Value::String(d)),
                )
            })
            .collect()
    }
}

async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Reply {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut b = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let bytes = body.map(|v| Bytes::from(v.to_string())).unwrap_or_default();
    if body.is_some() {
        b = b.header("content-type", "application/json");
    }
    let resp = sender
        .send_request(b.body(Full::new(bytes)).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        headers,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

async fn post(addr: SocketAddr, path: &str, body: &Value) -> Reply {
    request(addr, "POST", path, &[], Some(body)).await
}

fn script() -> Script {
    Script::new(vec![
        Turn {
            error: None,
            thinking: Some("Plan it.".into()),
            text: Some("Running two commands.".into()),
            tool_calls: vec![
                ToolCallSpec::new("Bash", json!({"command": "ls"})),
                ToolCallSpec::new("Read", json!({"file_path": "/w/a.txt"})),
            ],
        },
        Turn {
            error: None,
            tool_calls: vec![ToolCallSpec::new(
                "Edit",
                json!({"old_string": "a", "new_string": "b"}),
            )],
            ..Default::default()
        },
        Turn::text("All done."),
    ])
}

async fn server_with(script: Script, opts: ServerOptions) -> ServerHandle {
    start(script, opts).await.unwrap()
}

/// One delta per block (chunk_chars 0) keeps the exact sequences short.
fn one_chunk() -> ServerOptions {
    ServerOptions {
        chunk_chars: 0,
        ..Default::default()
    }
}

fn tools() -> Value {
    json!([{"name": "Bash", "input_schema": {"type": "object"}}])
}

/// An Anthropic request whose history holds `n` assistant turns.
fn anthropic_body(n: usize, stream: bool) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "go"})];
    for t in 0..n {
        messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": format!("turn {t}")},
                                                              {"type": "tool_use", "id": format!("toolu_pv_t{t:03}_0"), "name": "Bash", "input": {}}]}));
        messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("toolu_pv_t{t:03}_0"), "content": "ok"}]}));
    }
    json!({"model": "claude-test-1", "max_tokens": 1000, "stream": stream, "tools": tools(), "messages": messages})
}

// ------------------------------------------------------------------ Anthropic

#[tokio::test]
async fn anthropic_stream_exact_event_sequence() {
    let s = server_with(script(), one_chunk()).await;
    let r = post(s.addr(), "/v1/messages?beta=true", &anthropic_body(0, true)).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["request-id"], "req_pv_1");
    let ev = r.sse_json();
    let shape: Vec<String> = ev
        .iter()
        .map(|(name, d)| {
            assert_eq!(d["type"], name.as_str(), "event name equals data.type");
            match name.as_str() {
                "content_block_start" => {
                    format!("{name}:{}", d["content_block"]["type"].as_str().unwrap())
                }
                "content_block_delta" => format!("{name}:{}", d["delta"]["type"].as_str().unwrap()),
                _ => name.clone(),
            }
        })
        .collect();
    assert_eq!(
        shape,
        [
            "message_start",
            "ping",
            "content_block_start:thinking",
            "content_block_delta:thinking_delta",
            "content_block_delta:signature_delta",
            "content_block_stop",
            "content_block_start:text",
            "content_block_delta:text_delta",
            "content_block_stop",
            "content_block_start:tool_use",
            "content_block_delta:input_json_delta",
            "content_block_delta:input_json_delta",
            "content_block_stop",
            "content_block_start:tool_use",
            "content_block_delta:input_json_delta",
            "content_block_delta:input_json_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    let start = &ev[0].1["message"];
    assert_eq!(start["id"], "msg_pv_t000");
    assert_eq!(start["model"], "claude-test-1");
    assert_eq!(start["role"], "assistant");
    assert_eq!(start["content"], json!([]));
    assert_eq!(start["stop_reason"], Value::Null);
    assert!(start["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(
        ev[2].1["content_block"],
        json!({"type": "thinking", "thinking": "", "signature": ""})
    );
    assert_eq!(ev[3].1["delta"]["thinking"], "Plan it.");
    assert_eq!(ev[4].1["delta"]["signature"], "pvsig_t000");
    assert_eq!(ev[7].1["delta"]["text"], "Running two commands.");
    assert_eq!(ev[9].1["index"], 2);
    assert_eq!(
        ev[9].1["content_block"],
        json!({"type": "tool_use", "id": "toolu_pv_t000_0", "name": "Bash", "input": {}})
    );
    assert_eq!(ev[10].1["delta"]["partial_json"], "");
    assert_eq!(ev[11].1["delta"]["partial_json"], r#"{"command":"ls"}"#);
    assert_eq!(ev[13].1["content_block"]["id"], "toolu_pv_t000_1");
    assert_eq!(ev[13].1["index"], 3);
    assert_eq!(
        ev[17].1["delta"],
        json!({"stop_reason": "tool_use", "stop_sequence": null})
    );
    assert!(ev[17].1["usage"]["output_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn anthropic_stream_chunks_reassemble() {
    let long = "x".repeat(50) + "é" + &"y".repeat(20);
    let sc = Script::new(vec![Turn {
        text: Some(long.clone()),
        tool_calls: vec![ToolCallSpec::new(
            "Write",
            json!({"file_path": "/w/f", "content": "a\nb\n".repeat(20)}),
        )],
        ..Default::default()
    }]);
    let s = server_with(
        sc,
        ServerOptions {
            chunk_chars: 16,
            ..Default::default()
        },
    )
    .await;
    let ev = post(s.addr(), "/v1/messages", &anthropic_body(0, true))
        .await
        .sse_json();
    let text: String = ev
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "text_delta")
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, long);
    assert_eq!(
        ev.iter()
            .filter(|(_, d)| d["delta"]["type"] == "text_delta")
            .count(),
        5
    );
    let json_text: String = ev
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "input_json_delta")
        .map(|(_, d)| d["delta"]["partial_json"].as_str().unwrap())
        .collect();
    let input: Value = serde_json::from_str(&json_text).unwrap();
    assert_eq!(input["content"], "a\nb\n".repeat(20));
}

#[tokio::test]
async fn anthropic_non_streaming_message() {
    let s = server_with(script(), ServerOptions::default()).await;
    let r = post(s.addr(), "/v1/messages", &anthropic_body(0, false)).await;
    assert_eq!(r.status, 200);
    assert!(r.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let m = r.json();
    assert_eq!(m["id"], "msg_pv_t000");
    assert_eq!(m["type"], "message");
    assert_eq!(m["stop_reason"], "tool_use");
    assert_eq!(
        m["content"],
        json!([
            {"type": "thinking", "thinking": "Plan it.", "signature": "pvsig_t000"},
            {"type": "text", "text": "Running two commands."},
            {"type": "tool_use", "id": "toolu_pv_t000_0", "name": "Bash", "input": {"command": "ls"}},
            {"type": "tool_use", "id": "toolu_pv_t000_1", "name": "Read", "input": {"file_path": "/w/a.txt"}}
        ])
    );
    let m = post(s.addr(), "/v1/messages", &anthropic_body(2, false))
        .await
        .json();
    assert_eq!(m["content"], json!([{"type": "text", "text": "All done."}]));
    assert_eq!(m["stop_reason"], "end_turn");
}

#[tokio::test]
async fn turn_is_derived_from_history_not_from_a_counter() {
    let s = server_with(script(), ServerOptions::default()).await;
    // Out of order, repeated: each answer depends on the history only.
    for n in [1usize, 0, 1, 2, 0] {
        let m = post(s.addr(), "/v1/messages", &anthropic_body(n, false))
            .await
            .json();
        assert_eq!(m["id"], format!("msg_pv_t{n:03}"));
    }
    let m = post(s.addr(), "/v1/messages", &anthropic_body(1, false))
        .await
        .json();
    assert_eq!(m["content"][0]["id"], "toolu_pv_t001_0");
    assert_eq!(m["content"][0]["name"], "Edit");
    assert_eq!(m["stop_reason"], "tool_use");

    // Claude Code's mid-conversation `role: system` messages do not count; two consecutive
    // assistant messages are one turn.
    let body = json!({"model": "m", "max_tokens": 10, "tools": tools(), "messages": [
        {"role": "user", "content": "go"}, {"role": "system", "content": "env"},
        {"role": "assistant", "content": "a"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "ok"}]},
        {"role": "system", "content": "note"}]});
    assert_eq!(
        post(s.addr(), "/v1/messages", &body).await.json()["id"],
        "msg_pv_t001"
    );

    // Past the end: a plain "(script exhausted)" end_turn, flagged in the log.
    let m = post(s.addr(), "/v1/messages", &anthropic_body(7, false))
        .await
        .json();
    assert_eq!(
        m["content"],
        json!([{"type": "text", "text": "(script exhausted)"}])
    );
    assert_eq!(m["stop_reason"], "end_turn");
    let log = s.requests();
    let turns: Vec<Option<usize>> = log.iter().map(|r| r.turn).collect();
    assert_eq!(
        turns,
        [
            Some(1),
            Some(0),
            Some(1),
            Some(2),
            Some(0),
            Some(1),
            Some(1),
            Some(7)
        ]
    );
    assert!(log.last().unwrap().exhausted);
    assert!(log[..7]
        .iter()
        .all(|r| !r.exhausted && r.kind == RequestKind::Main));
}

#[tokio::test]
async fn count_tokens_and_probes() {
    let s = server_with(script(), ServerOptions::default()).await;
    let r = post(
        s.addr(),
        "/v1/messages/count_tokens?beta=true",
        &anthropic_body(0, false),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.json()["input_tokens"].as_u64().unwrap() > 0);

    let r = request(s.addr(), "HEAD", "/", &[], None).await;
    assert_eq!(r.status, 200);
    let r = request(s.addr(), "GET", "/", &[], None).await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    let r = request(s.addr(), "HEAD", "/api/hello", &[], None).await;
    assert_eq!(r.status, 200);
    let r = request(s.addr(), "GET", "/v1/models", &[], None).await;
    assert_eq!(r.json()["data"][0]["id"], "pvisor-scripted");
    let r = request(s.addr(), "GET", "/v1/nothing", &[], None).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["type"], "error");
    let r = request(
        s.addr(),
        "POST",
        "/v1/messages",
        &[("content-type", "application/json")],
        None,
    )
    .await;
    assert_eq!(r.status, 400);

    let kinds: Vec<RequestKind> = s.requests().iter().map(|r| r.kind).collect();
    assert_eq!(kinds[0], RequestKind::CountTokens);
    assert_eq!(kinds[1..], [RequestKind::Other; 6]);
    // No main request consumed anything: the next one is still turn 0.
    assert_eq!(
        post(s.addr(), "/v1/messages", &anthropic_body(0, false))
            .await
            .json()["id"],
        "msg_pv_t000"
    );
}

#[tokio::test]
async fn side_requests_do_not_consume_turns() {
    let mut sc = script();
    sc.side_text = Some("A title".into());
    sc.side = vec![pvisor::scripted::SideRule {
        matches: "isNewTopic".into(),
        text: r#"{"isNewTopic": true}"#.into(),
    }];
    let s = server_with(sc, ServerOptions::default()).await;
    // No tools -> side.
    let body = json!({"model": "claude-haiku", "max_tokens": 50, "messages": [{"role": "user", "content": "Summarize"}]});
    let m = post(s.addr(), "/v1/messages", &body).await.json();
    assert_eq!(m["content"], json!([{"type": "text", "text": "A title"}]));
    assert_eq!(m["id"], "msg_pv_side");
    assert_eq!(m["stop_reason"], "end_turn");
    // Rule match, even with tools.
    let mut body = anthropic_body(1, true);
    body["system"] = json!("Answer with isNewTopic JSON");
    let ev = post(s.addr(), "/v1/messages", &body).await.sse_json();
    let text: String = ev
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "text_delta")
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, r#"{"isNewTopic": true}"#);
    // The main conversation still starts at turn 0.
    let m = post(s.addr(), "/v1/messages", &anthropic_body(0, false))
        .await
        .json();
    assert_eq!(m["id"], "msg_pv_t000");
    let log = s.requests();
    assert_eq!(
        log.iter().map(|r| r.kind).collect::<Vec<_>>(),
        [RequestKind::Side, RequestKind::Side, RequestKind::Main]
    );
    assert_eq!(log[0].turn, None);
    assert_eq!(
        log[0].answer.as_ref().unwrap().text.as_deref(),
        Some("A title")
    );

    // With no_tools_is_side false, a tool-less request is a main request.
    let mut sc = script();
    sc.no_tools_is_side = false;
    let s = server_with(sc, ServerOptions::default()).await;
    let m = post(
        s.addr(),
        "/v1/messages",
        &json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}),
    )
    .await
    .json();
    assert_eq!(m["id"], "msg_pv_t000");
}

#[tokio::test]
async fn api_key_is_enforced_when_set() {
    let s = server_with(
        script(),
        ServerOptions {
            api_key: Some("sekret".into()),
            ..Default::default()
        },
    )
    .await;
    let body = anthropic_body(0, false);
    let r = post(s.addr(), "/v1/messages", &body).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["type"], "authentication_error");
    let r = request(
        s.addr(),
        "POST",
        "/v1/messages",
        &[("x-api-key", "wrong")],
        Some(&body),
    )
    .await;
    assert_eq!(r.status, 401);
    let r = request(
        s.addr(),
        "POST",
        "/v1/messages",
        &[("x-api-key", "sekret")],
        Some(&body),
    )
    .await;
    assert_eq!(r.status, 200);
    let r = request(
        s.addr(),
        "POST",
        "/v1/chat/completions",
        &[("authorization", "Bearer sekret")],
        Some(&chat_body(0, false)),
    )
    .await;
    assert_eq!(r.status, 200);
    let r = request(
        s.addr(),
        "POST",
        "/v1/responses",
        &[("authorization", "Bearer nope")],
        Some(&responses_body(0, false)),
    )
    .await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["code"], "invalid_api_key");
    let log = s.requests();
    assert_eq!(
        log.iter().map(|r| r.status).collect::<Vec<_>>(),
        [401, 401, 200, 200, 401]
    );
    assert_eq!(log[2].headers["x-api-key"], "<redacted>");
    assert_eq!(log[3].headers["authorization"], "<redacted>");
    assert_eq!(log[0].kind, RequestKind::Other);
}

#[tokio::test]
async fn request_log_file_has_one_json_line_per_request() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("requests.jsonl");
    let s = server_with(
        script(),
        ServerOptions {
            log_path: Some(path.clone()),
            ..Default::default()
        },
    )
    .await;
    request(
        s.addr(),
        "POST",
        "/v1/messages?beta=true",
        &[("x-api-key", "k"), ("anthropic-version", "2023-06-01")],
        Some(&anthropic_body(1, true)),
    )
    .await;
    post(
        s.addr(),
        "/v1/messages",
        &json!({"model": "m", "max_tokens": 5, "messages": []}),
    )
    .await;
    s.shutdown().await;
    let lines: Vec<Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    let l = &lines[0];
    assert_eq!(l["seq"], 1);
    assert_eq!(l["method"], "POST");
    assert_eq!(l["path"], "/v1/messages?beta=true");
    assert_eq!(l["headers"]["x-api-key"], "<redacted>");
    assert_eq!(l["headers"]["anthropic-version"], "2023-06-01");
    assert!(l["headers"].get("host").is_none());
    assert_eq!(l["body"], anthropic_body(1, true));
    assert_eq!(l["kind"], "main");
    assert_eq!(l["protocol"], "anthropic");
    assert_eq!(l["stream"], true);
    assert_eq!(l["turn"], 1);
    assert_eq!(l["tool_call_ids"], json!(["toolu_pv_t001_0"]));
    assert_eq!(l["answer"]["tool_calls"][0]["name"], "Edit");
    assert_eq!(l["status"], 200);
    assert_eq!(lines[1]["kind"], "side");
    assert!(lines[1].get("turn").is_none());
    // The in-memory log and the file agree.
    let parsed: pvisor::scripted::LoggedRequest = serde_json::from_value(lines[0].clone()).unwrap();
    assert_eq!(parsed.turn, Some(1));
}

#[tokio::test]
async fn binds_loopback_only_and_given_port() {
    let s = server_with(script(), ServerOptions::default()).await;
    assert!(s.addr().ip().is_loopback());
    assert_eq!(
        s.base_url(),
        format!("http://127.0.0.1:{}", s.addr().port())
    );
    let port = s.addr().port();
    s.shutdown().await;
    // After shutdown the port is free again and can be asked for explicitly.
    let s = server_with(
        script(),
        ServerOptions {
            port,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(s.addr().port(), port);
    assert_eq!(
        post(s.addr(), "/v1/messages", &anthropic_body(0, false))
            .await
            .status,
        200
    );
}

// ------------------------------------------------------------------ OpenAI Responses

fn responses_body(n: usize, stream: bool) -> Value {
    let mut input = vec![
        json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "skills"}]}),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}),
    ];
    for t in 0..n {
        input.push(json!({"type": "reasoning", "summary": [], "encrypted_content": null}));
        input.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "t"}]}));
        input.push(json!({"type": "function_call", "call_id": format!("call_pv_t{t:03}_0"), "name": "exec_command", "arguments": "{}"}));
        input.push(json!({"type": "function_call_output", "call_id": format!("call_pv_t{t:03}_0"), "output": "ok"}));
    }
    json!({"model": "gpt-test", "instructions": "x", "input": input, "tools": [{"type": "function", "name": "exec_command"}],
           "stream": stream, "store": false})
}

fn codex_script() -> Script {
    Script::new(vec![
        Turn {
            error: None,
            thinking: Some("Think.".into()),
            text: Some("Hi.".into()),
            tool_calls: vec![
                ToolCallSpec::new("exec_command", json!({"cmd": "ls"})),
                ToolCallSpec {
                    name: "apply_patch".into(),
                    input: json!("*** Begin Patch\n*** End Patch\n"),
                    custom: true,
                },
            ],
        },
        Turn::text("Done."),
    ])
}

#[tokio::test]
async fn responses_stream_exact_event_sequence() {
    let s = server_with(codex_script(), one_chunk()).await;
    let r = post(s.addr(), "/v1/responses", &responses_body(0, true)).await;
    assert_eq!(r.status, 200);
    let ev = r.sse_json();
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.custom_tool_call_input.delta",
            "response.custom_tool_call_input.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    for (i, (name, d)) in ev.iter().enumerate() {
        assert_eq!(d["type"], name.as_str());
        assert_eq!(d["sequence_number"], i);
    }
    assert_eq!(ev[0].1["response"]["id"], "resp_pv_t000");
    assert_eq!(ev[0].1["response"]["status"], "in_progress");
    assert_eq!(
        ev[7].1["item"],
        json!({"id": "rs_pv_t000", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Think."}]})
    );
    assert_eq!(ev[10].1["delta"], "Hi.");
    assert_eq!(
        ev[13].1["item"]["content"],
        json!([{"type": "output_text", "text": "Hi.", "annotations": []}])
    );
    assert_eq!(ev[14].1["item"]["call_id"], "call_pv_t000_0");
    assert_eq!(ev[14].1["item"]["arguments"], "");
    assert_eq!(ev[15].1["delta"], r#"{"cmd":"ls"}"#);
    assert_eq!(
        ev[17].1["item"],
        json!({"id": "fc_pv_t000_0", "type": "function_call", "status": "completed", "call_id": "call_pv_t000_0",
               "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"})
    );
    assert_eq!(ev[17].1["output_index"], 2);
    assert_eq!(
        ev[21].1["item"],
        json!({"id": "ctc_pv_t000_1", "type": "custom_tool_call", "status": "completed", "call_id": "call_pv_t000_1",
               "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch\n"})
    );
    let done = &ev[22].1["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"].as_array().unwrap().len(), 4);
    assert!(done["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(
        done["usage"]["total_tokens"].as_u64().unwrap(),
        done["usage"]["input_tokens"].as_u64().unwrap()
            + done["usage"]["output_tokens"].as_u64().unwrap()
    );
}

#[tokio::test]
async fn responses_turn_from_input_items_and_non_streaming() {
    let s = server_with(codex_script(), ServerOptions::default()).await;
    let r = post(s.addr(), "/responses", &responses_body(1, false))
        .await
        .json();
    assert_eq!(r["id"], "resp_pv_t001");
    assert_eq!(r["object"], "response");
    assert_eq!(
        r["output"],
        json!([{"id": "msg_pv_t001", "type": "message", "status": "completed", "role": "assistant",
                                    "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}])
    );
    let r = post(s.addr(), "/v1/responses", &responses_body(5, false))
        .await
        .json();
    assert_eq!(r["output"][0]["content"][0]["text"], "(script exhausted)");
    // A string input has no history.
    let r = post(
        s.addr(),
        "/v1/responses",
        &json!({"model": "m", "input": "hi", "tools": [{"type": "function", "name": "f"}]}),
    )
    .await
    .json();
    assert_eq!(r["id"], "resp_pv_t000");
    let log = s.requests();
    assert!(log
        .iter()
        .all(|r| r.protocol == Some(Protocol::OpenaiResponses)));
    assert_eq!(
        log.iter().map(|r| r.turn).collect::<Vec<_>>(),
        [Some(1), Some(5), Some(0)]
    );
    assert_eq!(log[2].tool_call_ids, ["call_pv_t000_0", "call_pv_t000_1"]);
}

#[tokio::test]
async fn responses_code_mode_without_tools_key_is_main() {
    // Codex code mode: no `tools` key, tools travel in an `additional_tools` input item.
    let s = server_with(codex_script(), ServerOptions::default()).await;
    let body = json!({"model": "gpt-5.6-sol", "stream": false, "input": [
        {"type": "additional_tools", "role": "developer", "tools": []},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}]});
    assert_eq!(
        post(s.addr(), "/v1/responses", &body).await.json()["id"],
        "resp_pv_t000"
    );
    assert_eq!(s.requests()[0].kind, RequestKind::Main);
}

// ------------------------------------------------------------------ OpenAI Chat Completions

fn chat_body(n: usize, stream: bool) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": "sys"}),
        json!({"role": "user", "content": "go"}),
    ];
    for t in 0..n {
        let id = format!("call_pv_t{t:03}_0");
        messages.push(json!({"role": "assistant", "content": null,
                             "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": "ok"}));
    }
    json!({"model": "fake-model", "messages": messages, "stream": stream, "stream_options": {"include_usage": true},
           "tools": [{"type": "function", "function": {"name": "bash"}}]})
}

#[tokio::test]
async fn chat_stream_exact_chunks() {
    let s = server_with(script(), one_chunk()).await;
    let r = post(s.addr(), "/v1/chat/completions", &chat_body(0, true)).await;
    assert_eq!(r.status, 200);
    let ev = r.sse();
    assert!(
        ev.iter().all(|(name, _)| name.is_empty()),
        "chat chunks have no event: line"
    );
    assert_eq!(ev.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = ev[..ev.len() - 1]
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk" && c["id"] == "chatcmpl-pv-t000"));
    let deltas: Vec<Value> = chunks
        .iter()
        .filter(|c| !c["choices"].as_array().unwrap().is_empty())
        .map(|c| c["choices"][0]["delta"].clone())
        .collect();
    assert_eq!(
        deltas,
        [
            json!({"role": "assistant", "content": ""}),
            json!({"reasoning_content": "Plan it."}),
            json!({"content": "Running two commands."}),
            json!({"tool_calls": [{"index": 0, "id": "call_pv_t000_0", "type": "function", "function": {"name": "Bash", "arguments": ""}}]}),
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"command\":\"ls\"}"}}]}),
            json!({"tool_calls": [{"index": 1, "id": "call_pv_t000_1", "type": "function", "function": {"name": "Read", "arguments": ""}}]}),
            json!({"tool_calls": [{"index": 1, "function": {"arguments": "{\"file_path\":\"/w/a.txt\"}"}}]}),
            json!({}),
        ]
    );
    let finishes: Vec<Value> = chunks
        .iter()
        .filter(|c| !c["choices"].as_array().unwrap().is_empty())
        .map(|c| c["choices"][0]["finish_reason"].clone())
        .collect();
    assert_eq!(finishes.last().unwrap(), "tool_calls");
    assert!(finishes[..finishes.len() - 1].iter().all(Value::is_null));
    // include_usage: one usage chunk with empty choices before [DONE].
    let usage = &chunks[chunks.len() - 1];
    assert_eq!(usage["choices"], json!([]));
    assert!(usage["usage"]["prompt_tokens"].as_u64().unwrap() > 0);

    // Without include_usage there is no usage chunk; the final turn ends with "stop".
    let mut body = chat_body(2, true);
    body.as_object_mut().unwrap().remove("stream_options");
    let ev = post(s.addr(), "/chat/completions", &body).await.sse();
    assert_eq!(ev.len(), 4, "{ev:?}"); // role, content, finish, [DONE]
    let fin: Value = serde_json::from_str(&ev[2].1).unwrap();
    assert_eq!(fin["choices"][0]["finish_reason"], "stop");
    let c: Value = serde_json::from_str(&ev[1].1).unwrap();
    assert_eq!(c["choices"][0]["delta"]["content"], "All done.");
}

#[tokio::test]
async fn chat_non_streaming_and_turns() {
    let s = server_with(script(), ServerOptions::default()).await;
    let r = post(s.addr(), "/v1/chat/completions", &chat_body(1, false))
        .await
        .json();
    assert_eq!(r["id"], "chatcmpl-pv-t001");
    assert_eq!(r["object"], "chat.completion");
    assert_eq!(r["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        r["choices"][0]["message"],
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_pv_t001_0", "type": "function",
               "function": {"name": "Edit", "arguments": "{\"old_string\":\"a\",\"new_string\":\"b\"}"}}]})
    );
    let r = post(s.addr(), "/v1/chat/completions", &chat_body(0, false))
        .await
        .json();
    assert_eq!(r["choices"][0]["message"]["reasoning_content"], "Plan it.");
    assert_eq!(
        r["choices"][0]["message"]["content"],
        "Running two commands."
    );
    let r = post(s.addr(), "/v1/chat/completions", &chat_body(2, false))
        .await
        .json();
    assert_eq!(r["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        r["usage"]["total_tokens"],
        r["usage"]["prompt_tokens"].as_u64().unwrap()
            + r["usage"]["completion_tokens"].as_u64().unwrap()
    );
    assert_eq!(
        s.requests().iter().map(|r| r.turn).collect::<Vec<_>>(),
        [Some(1), Some(0), Some(2)]
    );
}

#[tokio::test]
async fn concurrent_requests_are_all_logged() {
    let s = server_with(script(), ServerOptions::default()).await;
    let addr = s.addr();
    let mut tasks = Vec::new();
    for n in 0..8usize {
        tasks.push(tokio::spawn(async move {
            post(addr, "/v1/messages", &anthropic_body(n % 3, false))
                .await
                .json()
        }));
    }
    for (n, t) in tasks.into_iter().enumerate() {
        assert_eq!(t.await.unwrap()["id"], format!("msg_pv_t{:03}", n % 3));
    }
    let mut seqs: Vec<u64> = s.requests().iter().map(|r| r.seq).collect();
    seqs.sort();
    assert_eq!(seqs, (1..=8).collect::<Vec<u64>>());
}

#[tokio::test]
async fn script_file_round_trip_with_vars() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.json");
    std::fs::write(
        &p,
        r#"{"turns":[{"tool_calls":[{"name":"Read","input":{"file_path":"${CWD}/a.txt"}}]}]}"#,
    )
    .unwrap();
    let sc = Script::from_path(&p)
        .unwrap()
        .substitute(&[("CWD", "/work")]);
    let s = server_with(sc, ServerOptions::default()).await;
    let m = post(s.addr(), "/v1/messages", &anthropic_body(0, false))
        .await
        .json();
    assert_eq!(m["content"][0]["input"]["file_path"], "/work/a.txt");
    assert!(Script::from_path(dir.path().join("missing.json")).is_err());
}
