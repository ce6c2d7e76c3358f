//! The bridge's HTTP side: hyper 1 server on 127.0.0.1, hyper client to the upstream.

use super::sse::SseScanner;
use super::validate::{Expected, Refusal};
use super::{translate, BridgeConfig, BridgeNotice, BridgeStats, Protocol};
use crate::digest::{blake3 as blake3_digest, prefix_digest};
use crate::protocol::route_name;
use bytes::Bytes;
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use journal_format::event::{BridgeRequestValidated, ContinuationStep, RemovedItem};
use journal_format::Event;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// Request bodies above this are refused (and latch failure).
const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, Default)]
struct State {
    failure: Option<String>,
    main: u64,
    steps: u64,
    side: u64,
    upstream: u64,
    in_flight: bool,
    injected: bool,
    budget_refused: bool,
    unauthenticated: u64,
    upstream_failure: Option<super::UpstreamFailure>,
}

pub(super) struct Shared {
    pub(super) cfg: BridgeConfig,
    key: String,
    /// What every main request is checked against.
    pub(super) expected: Expected,
    pub(super) prefix_digest: String,
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    state: Mutex<State>,
    notices: mpsc::UnboundedSender<BridgeNotice>,
    /// The agent's process group once the runner started it (0 before).
    pub(super) agent_group: std::sync::atomic::AtomicU32,
}

impl Shared {
    pub(super) fn new(
        cfg: BridgeConfig,
        key: String,
        notices: mpsc::UnboundedSender<BridgeNotice>,
    ) -> Shared {
        let mut cfg = cfg;
        cfg.prefix = super::validate::canonical_prefix(&cfg);
        let pd = prefix_digest(&cfg.prefix);
        let expected = Expected::new(&cfg);
        // http:// and https:// upstreams; TLS by rustls (ring) with the webpki root store.
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(std::sync::Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .expect("the ring provider supports the default TLS versions")
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(https);
        Shared {
            cfg,
            key,
            expected,
            prefix_digest: pd,
            client,
            state: Mutex::new(State::default()),
            notices,
            agent_group: std::sync::atomic::AtomicU32::new(0),
        }
    }

    pub(super) fn stats(&self) -> BridgeStats {
        let s = self.state.lock().unwrap();
        BridgeStats {
            main_requests: s.main,
            steps: s.steps,
            side_requests: s.side,
            upstream_requests: s.upstream,
            failure: s.failure.clone(),
            boundary_prompt_injected: s.injected,
            budget_refused: s.budget_refused,
            upstream_failure: s.upstream_failure,
        }
    }

    pub(super) fn latch(&self, reason: String) {
        let mut s = self.state.lock().unwrap();
        if s.failure.is_none() {
            s.failure = Some(reason);
        }
    }

    fn failure(&self) -> Option<String> {
        self.state.lock().unwrap().failure.clone()
    }

    /// Hand a fact to the caller and wait for its acknowledgement.
    async fn notify(&self, event: Event) -> bool {
        let (tx, rx) = oneshot::channel();
        if self.notices.send(BridgeNotice { event, ack: tx }).is_err() {
            return false;
        }
        rx.await.unwrap_or(false)
    }

    async fn notify_validation(&self, v: BridgeRequestValidated) -> bool {
        let ok = v.ok;
        let acked = self.notify(Event::BridgeRequestValidated(v)).await;
        if !acked {
            self.latch("the journal did not acknowledge a bridge validation".into());
        }
        acked && ok
    }

    fn validated(
        &self,
        n: u64,
        digest: String,
        removed: Vec<RemovedItem>,
        injected: bool,
        side: bool,
    ) -> BridgeRequestValidated {
        BridgeRequestValidated {
            n,
            request_digest: digest,
            prefix_digest: self.prefix_digest.clone(),
            removed: removed.iter().map(|r| r.kind.clone()).collect(),
            boundary_prompt_injected: injected,
            ok: true,
            reason: None,
            side,
            removed_items: removed,
            ..Default::default()
        }
    }

    /// Keep a refused request's body (secrets redacted) in the run's blob store.
    fn keep_refused(&self, body: &[u8]) -> Option<String> {
        let dir = self.cfg.refused_blobs.as_ref()?;
        let mut secrets: Vec<&str> = vec![self.key.as_str()];
        secrets.extend(self.cfg.upstream.api_key.as_deref());
        secrets.extend(self.cfg.boundary_prompt.as_deref());
        let redacted = super::difference::redact(body, &secrets);
        crate::journal::BlobStore::new(dir).put(&redacted).ok()
    }
}

pub(super) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) {
    crate::serve::accept_loop(
        listener,
        move |peer, req| handle(shared.clone(), peer, req),
        stop,
    )
    .await
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn error_response(
    protocol: Protocol,
    status: StatusCode,
    kind: &str,
    message: &str,
) -> Response<Body> {
    let body = protocol.error_body(kind, &format!("pvisor bridge: {message}"));
    let mut r = Response::new(full(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// The comparison form of one conversation item: the adapter's rules over the protocol's
/// canonical form.
pub(crate) fn canonical_for(cfg: &BridgeConfig, m: &Value) -> Value {
    cfg.rules.canonical(cfg.protocol, m)
}

fn authorized(key: &str, h: &HeaderMap) -> bool {
    let x = h.get("x-api-key").and_then(|v| v.to_str().ok());
    let bearer = h
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    x == Some(key) || bearer == Some(key)
}

/// Refuse one request: latch, report, answer 4xx.
async fn refuse(
    sh: &Shared,
    status: StatusCode,
    kind: &str,
    reason: String,
    n: u64,
    digest: String,
) -> Response<Body> {
    refuse_kept(sh, status, kind, Refusal::new(n, reason), digest, None).await
}

/// How many keyless requests are journaled; later ones are answered the same way, unrecorded
/// (a local process cannot grow the journal without bound).
const UNAUTHENTICATED_JOURNALED: u64 = 32;

/// A request without the per-run key did not come from the agent pvisor started, or is a
/// keyless reachability probe (Claude Code 2.1.220 sends `HEAD /api/hello` without its API
/// key). It is answered here and never forwarded: a `HEAD`/`GET` probe gets `200` with no
/// body, anything else `401`. It is journaled as a side request, so it neither counts as a
/// model request nor fails the continuation: no local process can break a run this way.
async fn unauthenticated(
    sh: &Shared,
    peer: crate::serve::Peer,
    method: &Method,
    path: &str,
    n: u64,
) -> Response<Body> {
    let probe = *method == Method::HEAD || *method == Method::GET;
    // The agent pvisor started, with a wrong key: a misconfiguration, the run fails (no other
    // process can be in the agent's process group).
    if !probe {
        let group = sh.agent_group.load(std::sync::atomic::Ordering::SeqCst);
        let from_agent = group != 0
            && super::peer::peer_pid(peer.local, peer.remote).and_then(super::peer::process_group)
                == Some(group);
        if from_agent {
            return refuse(
                sh,
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                format!("{method} {path}: the agent sent a missing or wrong bridge key"),
                n,
                String::new(),
            )
            .await;
        }
    }
    let count = {
        let mut s = sh.state.lock().unwrap();
        s.unauthenticated += 1;
        s.unauthenticated
    };
    let reason = if probe {
        format!("{method} {path}: keyless reachability probe, answered by the bridge")
    } else {
        format!("{method} {path}: missing or wrong bridge key, not forwarded")
    };
    if count <= UNAUTHENTICATED_JOURNALED {
        let v = BridgeRequestValidated {
            n,
            prefix_digest: sh.prefix_digest.clone(),
            ok: probe,
            reason: Some(reason.clone()),
            side: true,
            ..Default::default()
        };
        let _ = sh.notify(Event::BridgeRequestValidated(v)).await;
    }
    if probe {
        Response::new(full(String::new()))
    } else {
        error_response(
            sh.cfg.protocol,
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            &reason,
        )
    }
}

/// Refuse one request and keep its body (redacted) when given.
async fn refuse_kept(
    sh: &Shared,
    status: StatusCode,
    kind: &str,
    r: Refusal,
    digest: String,
    body: Option<&[u8]>,
) -> Response<Body> {
    let reason = report_refusal(sh, r, digest, body).await;
    error_response(sh.cfg.protocol, status, kind, &reason)
}

/// Latch (unless it is the budget's end), keep the body when given, and journal the
/// refusal. Returns the reason as reported.
async fn report_refusal(sh: &Shared, r: Refusal, digest: String, body: Option<&[u8]>) -> String {
    let reason = match &r.difference {
        Some(d) => format!("{}: {d}", r.reason),
        None => r.reason.clone(),
    };
    if !r.budget {
        sh.latch(reason.clone());
    }
    let v = BridgeRequestValidated {
        n: r.n,
        request_digest: digest,
        prefix_digest: sh.prefix_digest.clone(),
        boundary_prompt_injected: false,
        ok: false,
        reason: Some(reason.clone()),
        side: false,
        refused_request_blob: body.and_then(|b| sh.keep_refused(b)),
        difference: r.difference,
        budget_exhausted: r.budget,
        ..Default::default()
    };
    let _ = sh.notify(Event::BridgeRequestValidated(v)).await;
    reason
}

/// How long a request beyond the budget is held when the runner interrupts the agent.
const HOLD_BEYOND_BUDGET: std::time::Duration = std::time::Duration::from_secs(60);

/// The answer to a request beyond the live step budget: an error the agent does not retry,
/// in its protocol's shape, so that it stops at once.
fn budget_stop_response(protocol: Protocol) -> Response<Body> {
    let body = protocol.budget_stop_body("pvisor bridge: the live step budget is used up");
    let mut r = Response::new(full(body.to_string()));
    *r.status_mut() = StatusCode::BAD_REQUEST;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

async fn handle(
    sh: Arc<Shared>,
    peer: crate::serve::Peer,
    req: Request<Incoming>,
) -> Response<Body> {
    let method = req.method().clone();
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let headers = req.headers().clone();
    let main_so_far = sh.state.lock().unwrap().main;

    if !authorized(&sh.key, &headers) {
        return unauthenticated(&sh, peer, &method, &path, main_so_far).await;
    }
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return refuse(
                &sh,
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                format!("cannot read the request body: {e}"),
                main_so_far,
                String::new(),
            )
            .await
        }
    };
    let digest = blake3_digest(&body);
    if let Some(f) = sh.failure() {
        return refuse(
            &sh,
            StatusCode::FORBIDDEN,
            "permission_error",
            format!("bridge failed earlier ({f})"),
            main_so_far,
            digest,
        )
        .await;
    }
    if body.len() > MAX_REQUEST_BYTES {
        return refuse(
            &sh,
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            "request body too large".into(),
            main_so_far,
            digest,
        )
        .await;
    }
    let name = route_name(&path).trim_end_matches('/').to_string();
    match (&method, name.as_str()) {
        (&Method::HEAD, _) | (&Method::GET, _) => {
            side(sh, method, path, headers, body, digest).await
        }
        (&Method::POST, "/messages/count_tokens") => {
            side(sh, method, path, headers, body, digest).await
        }
        (&Method::POST, route) if Protocol::of_route(route).is_some() => {
            if route != sh.cfg.protocol.model_route() {
                return refuse(
                    &sh,
                    StatusCode::NOT_FOUND,
                    "not_found_error",
                    format!("unexpected request {method} {path} for this agent's protocol"),
                    main_so_far,
                    digest,
                )
                .await;
            }
            let parsed: Option<Value> = serde_json::from_slice(&body).ok().filter(Value::is_object);
            let Some(v) = parsed else {
                return refuse(
                    &sh,
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "model request body is not a JSON object".into(),
                    main_so_far,
                    digest,
                )
                .await;
            };
            if sh.cfg.protocol.is_main(&v) {
                main(sh, path, headers, v, body, digest).await
            } else {
                side(sh, method, path, headers, body, digest).await
            }
        }
        _ => {
            refuse(
                &sh,
                StatusCode::NOT_FOUND,
                "not_found_error",
                format!("unexpected request {method} {path}"),
                main_so_far,
                digest,
            )
            .await
        }
    }
}

/// Headers forwarded upstream: everything but hop-by-hop, length, host, the agent's key and
/// `accept-encoding` (the bridge reads the answer).
fn upstream_headers(h: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (k, v) in h {
        let n = k.as_str();
        if matches!(
            n,
            "host"
                | "content-length"
                | "x-api-key"
                | "authorization"
                | "accept-encoding"
                | "connection"
                | "transfer-encoding"
                | "keep-alive"
                | "proxy-authorization"
                | "te"
                | "upgrade"
        ) {
            continue;
        }
        out.append(k.clone(), v.clone());
    }
    out
}

fn response_headers(h: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (k, v) in h {
        if matches!(
            k.as_str(),
            "content-length" | "connection" | "transfer-encoding" | "keep-alive"
        ) {
            continue;
        }
        out.append(k.clone(), v.clone());
    }
    out
}

async fn send_upstream(
    sh: &Shared,
    method: Method,
    url: &str,
    mut headers: HeaderMap,
    body: Bytes,
) -> Result<Response<Incoming>, String> {
    if let Some(k) = &sh.cfg.upstream.api_key {
        let (name, value) = sh.cfg.upstream.protocol.auth_header(k);
        headers.insert(
            name,
            HeaderValue::from_str(&value)
                .map_err(|_| "the upstream key is not a valid header value".to_string())?,
        );
    }
    let mut req = Request::builder().method(method).uri(url);
    *req.headers_mut().unwrap() = headers;
    let req = req
        .body(Full::new(body))
        .map_err(|e| format!("cannot build the upstream request: {e}"))?;
    sh.state.lock().unwrap().upstream += 1;
    let failed = |f: super::UpstreamFailure| sh.state.lock().unwrap().upstream_failure = Some(f);
    match tokio::time::timeout(sh.cfg.upstream.response_timeout, sh.client.request(req)).await {
        Ok(Ok(r)) => {
            if r.status().as_u16() == 429 {
                failed(super::UpstreamFailure::RateLimit);
            } else if r.status().is_server_error() {
                failed(super::UpstreamFailure::ServerError);
            }
            Ok(r)
        }
        Ok(Err(e)) => {
            failed(super::UpstreamFailure::Connection);
            Err(format!("upstream request failed: {e}"))
        }
        Err(_) => {
            failed(super::UpstreamFailure::Connection);
            Err("upstream did not answer in time".into())
        }
    }
}

/// A side request: reported, then forwarded as is (translated mode: answered locally).
async fn side(
    sh: Arc<Shared>,
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Bytes,
    digest: String,
) -> Response<Body> {
    let n = {
        let mut s = sh.state.lock().unwrap();
        s.side += 1;
        s.main
    };
    if !sh
        .notify_validation(sh.validated(n, digest, Vec::new(), false, true))
        .await
    {
        return error_response(
            sh.cfg.protocol,
            StatusCode::FORBIDDEN,
            "permission_error",
            "the journal did not acknowledge the request",
        );
    }
    if sh.cfg.upstream.protocol != sh.cfg.protocol {
        return match route_name(&path) {
            "/messages/count_tokens" => {
                let mut r =
                    Response::new(full(json!({"input_tokens": body.len() / 4}).to_string()));
                r.headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                r
            }
            "/messages" => match serde_json::from_slice::<Value>(&body) {
                Ok(v) => translated(&sh, v, None).await,
                Err(_) => error_response(
                    sh.cfg.protocol,
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "not JSON",
                ),
            },
            _ => Response::new(full("ok")),
        };
    }
    let url = format!("{}{}", sh.cfg.upstream.base_url, path);
    match send_upstream(&sh, method, &url, upstream_headers(&headers), body).await {
        Ok(resp) => {
            let (parts, incoming) = resp.into_parts();
            let mut r = Response::new(
                incoming
                    .map_err(|e| std::io::Error::other(e.to_string()))
                    .boxed_unsync(),
            );
            *r.status_mut() = parts.status;
            *r.headers_mut() = response_headers(&parts.headers);
            r
        }
        Err(e) => error_response(sh.cfg.protocol, StatusCode::BAD_GATEWAY, "api_error", &e),
    }
}

/// What validation produced for a main request.
struct Prepared {
    n: u64,
    body: Value,
    removed: Vec<RemovedItem>,
    injected: bool,
}

/// Validate a main request against the prefix and build the body to forward.
fn prepare(sh: &Shared, mut body: Value) -> Result<Prepared, Refusal> {
    let (n, steps) = {
        let mut s = sh.state.lock().unwrap();
        s.main += 1;
        if s.in_flight {
            return Err(Refusal::new(
                s.main,
                "a main request arrived while another one was still being answered",
            ));
        }
        (s.main, s.steps)
    };
    let cfg = &sh.cfg;
    if let Some(max) = cfg.max_steps {
        if steps >= max {
            let mut s = sh.state.lock().unwrap();
            if s.failure.is_none() {
                s.budget_refused = true;
            }
            drop(s);
            let mut r = Refusal::new(n, format!("the live step budget ({max}) is used up; the agent asked for another model reply"));
            r.budget = true;
            return Err(r);
        }
    }
    let super::validate::Checked {
        head,
        mut msgs,
        removed,
        plen,
        agent_prompt,
    } = super::validate::check(cfg, &sh.expected, n, steps, &mut body)?;
    let key = cfg.protocol.list_key();
    // The boundary prompt joins the conversation once, with request 1; the agent never
    // stores it in its own history, so later requests carry it again at the same position.
    // The journal's `boundary_prompt_injected` marks the request that first carried it.
    let mut injected = false;
    if agent_prompt.is_some() {
        let before = cfg
            .resume
            .as_ref()
            .is_some_and(|r| r.prompt_injected_before);
        injected = !sh.state.lock().unwrap().injected && !before;
    } else if let Some(p) = &cfg.boundary_prompt {
        let m = cfg.protocol.user_message(p);
        let at = cfg
            .resume
            .as_ref()
            .map(|r| r.boundary_at.min(plen))
            .unwrap_or(plen);
        msgs.insert(at, m);
        let before = cfg
            .resume
            .as_ref()
            .is_some_and(|r| r.prompt_injected_before);
        injected = !sh.state.lock().unwrap().injected && !before;
    }
    body[key] = Value::Array(head.into_iter().chain(msgs).collect());
    if cfg.disable_thinking {
        cfg.protocol.disable_thinking(&mut body);
    }
    if cfg.upstream.protocol == cfg.protocol {
        if let Some(m) = &cfg.upstream.model {
            body["model"] = json!(m);
        }
    }
    {
        let mut s = sh.state.lock().unwrap();
        s.in_flight = true;
        s.injected |= cfg.boundary_prompt.is_some();
    }
    Ok(Prepared {
        n,
        body,
        removed,
        injected,
    })
}

fn done(sh: &Shared) {
    sh.state.lock().unwrap().in_flight = false;
}

async fn main(
    sh: Arc<Shared>,
    path: String,
    headers: HeaderMap,
    body: Value,
    raw: Bytes,
    digest: String,
) -> Response<Body> {
    let p = match prepare(&sh, body) {
        Ok(p) => p,
        Err(r) => {
            // A request beyond the budget is the expected end, not a difference: not kept,
            // and answered so that the agent stops at once.
            if r.budget {
                report_refusal(&sh, r, digest, None).await;
                if sh.cfg.hold_beyond_budget {
                    // The runner interrupts the agent on this fact; the request stays
                    // unanswered until then (bounded, should the agent ignore it).
                    tokio::time::sleep(HOLD_BEYOND_BUDGET).await;
                }
                return budget_stop_response(sh.cfg.protocol);
            }
            return refuse_kept(
                &sh,
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_request_error",
                r,
                digest,
                Some(&raw[..]),
            )
            .await;
        }
    };
    let out = serde_json::to_vec(&p.body).expect("JSON values serialize");
    let v = sh.validated(
        p.n,
        blake3_digest(&out),
        p.removed.clone(),
        p.injected,
        false,
    );
    if !sh.notify_validation(v).await {
        done(&sh);
        return error_response(
            sh.cfg.protocol,
            StatusCode::FORBIDDEN,
            "permission_error",
            "the journal did not acknowledge the request",
        );
    }
    if sh.cfg.upstream.protocol != sh.cfg.protocol {
        let r = translated(&sh, p.body, Some(())).await;
        done(&sh);
        return r;
    }
    let url = format!("{}{}", sh.cfg.upstream.base_url, path);
    let resp = match send_upstream(
        &sh,
        Method::POST,
        &url,
        upstream_headers(&headers),
        Bytes::from(out),
    )
    .await
    {
        Ok(r) => r,
        Err(e) => {
            done(&sh);
            return error_response(sh.cfg.protocol, StatusCode::BAD_GATEWAY, "api_error", &e);
        }
    };
    let (parts, incoming) = resp.into_parts();
    let sse = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let success = parts.status.is_success();
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(32);
    tokio::spawn(pump(sh.clone(), incoming, tx, sse, success));
    let stream =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) });
    let mut r = Response::new(BodyExt::boxed_unsync(StreamBody::new(stream)));
    *r.status_mut() = parts.status;
    *r.headers_mut() = response_headers(&parts.headers);
    r
}

/// Stream the upstream answer to the agent. Bytes pass through as they arrive, except that
/// from the first tool call on (or, for a non-SSE answer, everything) they are held until
/// the step has been acknowledged: the agent cannot act on a reply the journal lacks.
async fn pump(
    sh: Arc<Shared>,
    mut incoming: Incoming,
    tx: mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>,
    sse: bool,
    success: bool,
) {
    let mut hasher = blake3::Hasher::new();
    let mut scanner = SseScanner::default();
    let mut tools: Vec<String> = Vec::new();
    let mut held: Vec<Bytes> = Vec::new();
    let mut holding = !sse && success;
    let mut agent_gone = false;
    loop {
        match incoming.frame().await {
            None => break,
            Some(Err(e)) => {
                let _ = tx
                    .send(Err(std::io::Error::other(format!(
                        "upstream stream broke: {e}"
                    ))))
                    .await;
                done(&sh);
                return;
            }
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                hasher.update(&data);
                if sse && success {
                    for ev in scanner.feed(&data) {
                        if let Some(name) = sh.cfg.protocol.tool_start(&ev) {
                            tools.push(name);
                            holding = true;
                        }
                    }
                }
                if holding {
                    held.push(data);
                } else if !agent_gone && tx.send(Ok(Frame::data(data))).await.is_err() {
                    agent_gone = true;
                }
            }
        }
    }
    if success {
        if !sse {
            let all: Vec<u8> = held.iter().flat_map(|b| b.iter().copied()).collect();
            if let Ok(v) = serde_json::from_slice::<Value>(&all) {
                tools = sh.cfg.protocol.answer_tools(&v);
            }
        }
        let n = {
            let mut s = sh.state.lock().unwrap();
            s.steps += 1;
            s.steps + sh.cfg.resume.as_ref().map(|r| r.steps_before).unwrap_or(0)
        };
        let step = ContinuationStep {
            n,
            action_digest: format!("blake3:{}", hasher.finalize().to_hex()),
            tools,
        };
        if !sh.notify(Event::ContinuationStep(step)).await {
            sh.latch("the journal did not acknowledge a continuation step".into());
            let _ = tx
                .send(Err(std::io::Error::other(
                    "pvisor bridge: step not journaled",
                )))
                .await;
            done(&sh);
            return;
        }
    }
    for data in held {
        if agent_gone || tx.send(Ok(Frame::data(data))).await.is_err() {
            break;
        }
    }
    done(&sh);
}

/// Translated mode: one buffered Chat Completions call. `main` = Some for main requests
/// (a step is reported before the answer is released).
async fn translated(sh: &Shared, body: Value, main: Option<()>) -> Response<Body> {
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let agent_model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let chat = match translate::anthropic_to_chat(&body, sh.cfg.upstream.model.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            sh.latch(e.clone());
            return error_response(
                sh.cfg.protocol,
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_request_error",
                &e,
            );
        }
    };
    let url = format!("{}/chat/completions", sh.cfg.upstream.base_url);
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let resp = match send_upstream(
        sh,
        Method::POST,
        &url,
        headers,
        Bytes::from(chat.to_string()),
    )
    .await
    {
        Ok(r) => r,
        Err(e) => return error_response(sh.cfg.protocol, StatusCode::BAD_GATEWAY, "api_error", &e),
    };
    let status = resp.status();
    let bytes =
        match tokio::time::timeout(sh.cfg.upstream.response_timeout, resp.into_body().collect())
            .await
        {
            Ok(Ok(b)) => b.to_bytes(),
            _ => {
                return error_response(
                    sh.cfg.protocol,
                    StatusCode::BAD_GATEWAY,
                    "api_error",
                    "upstream answer incomplete",
                )
            }
        };
    if !status.is_success() {
        let kind = if status.as_u16() == 429 {
            "rate_limit_error"
        } else {
            "api_error"
        };
        return error_response(
            sh.cfg.protocol,
            status,
            kind,
            &format!("upstream answered {status}"),
        );
    }
    let message = match serde_json::from_slice::<Value>(&bytes)
        .map_err(|e| e.to_string())
        .and_then(|v| translate::chat_to_anthropic(&v, &agent_model))
    {
        Ok(m) => m,
        Err(e) => {
            sh.latch(format!("untranslatable upstream answer: {e}"));
            return error_response(sh.cfg.protocol, StatusCode::BAD_GATEWAY, "api_error", &e);
        }
    };
    let (out, ctype) = if stream {
        (
            translate::anthropic_sse(&message),
            "text/event-stream; charset=utf-8",
        )
    } else {
        (
            serde_json::to_vec(&message).expect("JSON"),
            "application/json",
        )
    };
    if main.is_some() {
        let n = {
            let mut s = sh.state.lock().unwrap();
            s.steps += 1;
            s.steps + sh.cfg.resume.as_ref().map(|r| r.steps_before).unwrap_or(0)
        };
        let step = ContinuationStep {
            n,
            action_digest: blake3_digest(&out),
            tools: crate::protocol::anthropic::answer_tools(&message),
        };
        if !sh.notify(Event::ContinuationStep(step)).await {
            sh.latch("the journal did not acknowledge a continuation step".into());
            return error_response(
                sh.cfg.protocol,
                StatusCode::FORBIDDEN,
                "permission_error",
                "step not journaled",
            );
        }
    }
    let mut r = Response::new(full(out));
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    r
}
