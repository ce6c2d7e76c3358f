//! What the bridge adds to a model request: a validated first request (the rebuilt prefix
//! plus Claude Code's resume block, cleaned by the declared rules, validated, forwarded and
//! streamed back) against the same request sent straight to the scripted upstream, in the same
//! run. Reports the added latency at p50 and p99 for the whole streamed response and for its
//! first byte, then a criterion bench of one validated request.
//!
//!   cargo bench --bench bridge                 # ratios, then criterion
//!   cargo bench --bench bridge -- --ratios-only

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, Criterion};
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use pvisor::adapters::claude_code::request_rules::{ClaudeRequestRules, DEFAULT_RESUME_TEXT};
use pvisor::bridge::{self, BridgeConfig, Upstream};
use pvisor::protocol::Protocol;
use pvisor::scripted::{start, Script, ServerOptions};
use serde_json::{json, Value};

// The allocator of the `pvisor` binary (src/main.rs), so the bench measures what users run.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

fn script() -> Script {
    Script::from_json_str(
        r#"{"turns": [
            {"text": "one", "tool_calls": [{"name": "Bash", "input": {"command": "ls"}}]},
            {"text": "two", "tool_calls": [{"name": "Read", "input": {"file_path": "/x"}}]},
            {"text": "three"}
        ]}"#,
    )
    .unwrap()
}

/// A prefix of `turns` tool round trips with outputs of `out_len` bytes: a realistic request
/// size for the validation to hash and compare.
fn prefix(turns: usize, out_len: usize) -> Vec<Value> {
    let mut v = vec![json!({"role": "user", "content": [{"type": "text", "text": "task"}]})];
    for i in 0..turns {
        let id = format!("toolu_pv_t{i:03}_0");
        v.push(json!({"role": "assistant", "content": [{"type": "text", "text": "one"}, {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}]}));
        v.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "x".repeat(out_len)}]}));
    }
    v
}

fn first_request(prefix: &[Value]) -> Value {
    let mut msgs = prefix.to_vec();
    let last = msgs.len() - 1;
    msgs[last]["content"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "text", "text": DEFAULT_RESUME_TEXT, "cache_control": {"type": "ephemeral"}}));
    json!({
        "model": "claude-opus-5-5", "max_tokens": 1000, "stream": true,
        "system": [{"type": "text", "text": "sys"}],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": msgs
    })
}

fn config(upstream: &str, prefix: Vec<Value>) -> BridgeConfig {
    BridgeConfig {
        protocol: Protocol::Anthropic,
        rules: Arc::new(ClaudeRequestRules::new(DEFAULT_RESUME_TEXT)),
        prefix,
        boundary_prompt: None,
        disable_thinking: false,
        max_steps: None,
        upstream: Upstream {
            base_url: upstream.into(),
            protocol: Protocol::Anthropic,
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

/// (time to the first body byte, time to the whole response) of one streamed request.
async fn timed(client: &HttpClient, base: &str, key: &str, body: &Bytes) -> (Duration, Duration) {
    let t0 = Instant::now();
    let req = Request::post(format!("{base}/v1/messages?beta=true"))
        .header("x-api-key", key)
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .body(Full::new(body.clone()))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let mut body = resp.into_body();
    let mut first = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.unwrap();
        if first.is_none() && frame.data_ref().is_some_and(|d| !d.is_empty()) {
            first = Some(t0.elapsed());
        }
    }
    let total = t0.elapsed();
    (first.unwrap_or(total), total)
}

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Alternate direct and bridged requests `n` times (a fresh bridge for each: its first
/// request is the validated one), return the added latency samples in ms (first byte, total).
async fn samples(n: usize, turns: usize, out_len: usize) -> (Vec<f64>, Vec<f64>) {
    let up = start(
        script(),
        ServerOptions {
            api_key: Some("upstream-key".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let p = prefix(turns, out_len);
    let body = Bytes::from(first_request(&p).to_string());
    let (mut first, mut total) = (vec![], vec![]);
    for _ in 0..n {
        let (b, rx) = bridge::start(config(&up.base_url(), p.clone()))
            .await
            .unwrap();
        let (_events, _t) = bridge::auto_ack(rx);
        let (df, dt) = timed(&client, &up.base_url(), "upstream-key", &body).await;
        let (bf, bt) = timed(&client, &b.base_url(), b.key(), &body).await;
        first.push((bf.as_secs_f64() - df.as_secs_f64()) * 1e3);
        total.push((bt.as_secs_f64() - dt.as_secs_f64()) * 1e3);
        b.shutdown().await;
    }
    up.shutdown().await;
    (first, total)
}

fn ratios() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for (turns, out_len, label) in [
        (2, 100, "small prefix (2 turns)"),
        (40, 4000, "40 turns, 160 KB of outputs"),
    ] {
        let (first, total) = rt.block_on(samples(200, turns, out_len));
        println!(
            "bridge added latency, {label}: first byte p50 {:.3} ms p99 {:.3} ms; whole response p50 {:.3} ms p99 {:.3} ms (200 paired requests)",
            pct(first.clone(), 0.5),
            pct(first, 0.99),
            pct(total.clone(), 0.5),
            pct(total, 0.99)
        );
    }
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let up = rt
        .block_on(start(
            script(),
            ServerOptions {
                api_key: Some("upstream-key".into()),
                ..Default::default()
            },
        ))
        .unwrap();
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let p = prefix(2, 100);
    let body = Bytes::from(first_request(&p).to_string());
    let mut g = c.benchmark_group("bridge");
    g.sample_size(30);
    g.bench_function("direct_request", |b| {
        b.iter(|| rt.block_on(timed(&client, &up.base_url(), "upstream-key", &body)))
    });
    g.bench_function("validated_first_request", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let (br, rx) = bridge::start(config(&up.base_url(), p.clone()))
                        .await
                        .unwrap();
                    let (_events, _t) = bridge::auto_ack(rx);
                    spent += timed(&client, &br.base_url(), br.key(), &body).await.1;
                    br.shutdown().await;
                }
                spent
            })
        })
    });
    g.finish();
}

criterion_group!(group, benches);

fn main() {
    ratios();
    if std::env::args().any(|a| a == "--ratios-only") {
        return;
    }
    group();
    Criterion::default().configure_from_args().final_summary();
}
