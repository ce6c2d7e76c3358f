//! The scripted model server: hyper 1 on 127.0.0.1, playing a [`Script`].
//!
//! # Endpoints
//!
//! | request | answer |
//! | --- | --- |
//! | `POST /v1/messages` (any query, e.g. `?beta=true`) | Anthropic Messages: SSE when `stream` is true, else a JSON message |
//! | `POST /v1/messages/count_tokens` | `{"input_tokens": N}` (N ≈ body bytes / 4) |
//! | `POST /v1/responses` | OpenAI Responses: SSE when `stream` is true, else a JSON response |
//! | `POST /v1/chat/completions` | OpenAI Chat Completions: SSE chunks + `[DONE]` when `stream` is true, else JSON |
//! | `GET /v1/models` | a minimal model list |
//! | any `HEAD`; `GET /`, `/health`, `/api/hello` | `200 ok` (reachability probes; Claude Code sends `HEAD /api/hello`) |
//! | anything else | 404 with an Anthropic-style error body |
//!
//! The `/v1` prefix is optional (`/chat/completions` works too).
//!
//! # Turn selection
//!
//! The turn played is derived from the request alone (see [`super::history`]): the number of
//! assistant turns already in `messages` / `input`. Side requests (see [`Script`]) get the
//! script's side text and do not consume a turn.
//!
//! # Request log
//!
//! Every request is kept in memory ([`ServerHandle::requests`]) and, when
//! [`ServerOptions::log_path`] is set, appended to that file as one JSON line
//! ([`LoggedRequest`]).

use super::anthropic;
use super::history;
use super::openai;
use super::script::{ids, Script, Turn};
use super::wire::{estimate_tokens, Reply, SseEvent};
use super::ModelError;
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::convert::Infallible;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Options of [`start`].
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Port on 127.0.0.1; 0 (the default) picks a free one.
    pub port: u16,
    /// Append every request as one JSON line to this file (created if missing).
    pub log_path: Option<PathBuf>,
    /// When set, requests must carry this key (`x-api-key` or `Authorization: Bearer`);
    /// others get 401.
    pub api_key: Option<String>,
    /// Maximum characters per streamed text/thinking/argument delta (0 = one delta). Default 32.
    pub chunk_chars: usize,
    /// Model name reported when the request names none. Default `pvisor-scripted`.
    pub default_model: String,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            port: 0,
            log_path: None,
            api_key: None,
            chunk_chars: 32,
            default_model: "pvisor-scripted".into(),
        }
    }
}

/// How a request was classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// A model request that played a scripted turn.
    Main,
    /// An auxiliary model request (title, topic, summary…): answered with the side text.
    Side,
    /// `POST /v1/messages/count_tokens`.
    CountTokens,
    /// Probes, model lists, unknown paths, rejected or malformed requests.
    Other,
}

pub use crate::protocol::Protocol;

/// One logged request (one line of the log file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedRequest {
    /// 1-based arrival number in this server process.
    pub seq: u64,
    /// Arrival time, Unix milliseconds.
    pub ts_ms: u64,
    pub method: String,
    /// Path and query, as sent (`/v1/messages?beta=true`).
    pub path: String,
    /// Request headers (lower-case names) except `host` and `content-length`;
    /// `authorization` and `x-api-key` are `<redacted>`.
    pub headers: Map<String, Value>,
    /// The body parsed as JSON; a non-JSON body as a string; no body as `null`.
    pub body: Value,
    pub kind: RequestKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    /// Whether the answer was streamed (SSE).
    #[serde(default)]
    pub stream: bool,
    /// The scripted turn played (main requests only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<usize>,
    /// True when the script had no turn left and `(script exhausted)` was played.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exhausted: bool,
    /// The turn that was answered (main and side requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Turn>,
    /// Ids of the tool calls in the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_call_ids: Vec<String>,
    /// HTTP status of the answer.
    pub status: u16,
}

struct State {
    script: Script,
    opts: ServerOptions,
    seq: AtomicU64,
    log: Mutex<Vec<LoggedRequest>>,
    log_file: Mutex<Option<std::fs::File>>,
}

/// A running server. Dropping it stops the server (without waiting); prefer
/// [`ServerHandle::shutdown`].
pub struct ServerHandle {
    addr: SocketAddr,
    state: Arc<State>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl ServerHandle {
    /// The bound address (always 127.0.0.1).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (no trailing slash, no `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.state.log.lock().unwrap().clone()
    }

    /// The requests of kind [`RequestKind::Main`].
    pub fn main_requests(&self) -> Vec<LoggedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.kind == RequestKind::Main)
            .collect()
    }

    /// The request log file, when one was configured.
    pub fn log_path(&self) -> Option<&std::path::Path> {
        self.state.opts.log_path.as_deref()
    }

    /// Stop accepting, close open connections and wait for the server task.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// Bind 127.0.0.1 (port from `opts`, 0 = any) and serve `script` until shut down.
pub async fn start(script: Script, opts: ServerOptions) -> Result<ServerHandle, ModelError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, opts.port))
        .await
        .map_err(|source| ModelError::Bind {
            port: opts.port,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ModelError::Bind {
        port: opts.port,
        source,
    })?;
    let log_file = match &opts.log_path {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|source| ModelError::Log {
                    path: p.clone(),
                    source,
                })?,
        ),
        None => None,
    };
    let state = Arc::new(State {
        script,
        opts,
        seq: AtomicU64::new(0),
        log: Mutex::new(Vec::new()),
        log_file: Mutex::new(log_file),
    });
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(accept_loop(listener, state.clone(), stop_rx));
    Ok(ServerHandle {
        addr,
        state,
        stop,
        task: Some(task),
    })
}

async fn accept_loop(listener: TcpListener, state: Arc<State>, stop: watch::Receiver<bool>) {
    crate::serve::accept_loop(
        listener,
        move |_peer, req| {
            let st = state.clone();
            async move {
                match handle(st, req).await {
                    Ok(r) => r,
                    Err(never) => match never {},
                }
            }
        },
        stop,
    )
    .await
}

type Body = BoxBody<Bytes, Infallible>;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

fn json_response(status: StatusCode, v: &Value, request_id: &str) -> Response<Body> {
    let mut resp = Response::new(full(v.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(h) = HeaderValue::from_str(request_id) {
        resp.headers_mut().insert("request-id", h);
    }
    resp
}

fn sse_response(events: Vec<SseEvent>, request_id: &str) -> Response<Body> {
    let frames = events
        .into_iter()
        .map(|e| Ok::<_, Infallible>(Frame::data(e.to_bytes())));
    let body = StreamBody::new(futures_util::stream::iter(frames)).boxed();
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    h.insert("cache-control", HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(request_id) {
        h.insert("request-id", v);
    }
    resp
}

/// What the router decided, before logging.
struct Outcome {
    response: Response<Body>,
    kind: RequestKind,
    protocol: Option<Protocol>,
    stream: bool,
    turn: Option<usize>,
    exhausted: bool,
    answer: Option<Turn>,
    tool_call_ids: Vec<String>,
}

impl Outcome {
    fn other(response: Response<Body>) -> Self {
        Outcome {
            response,
            kind: RequestKind::Other,
            protocol: None,
            stream: false,
            turn: None,
            exhausted: false,
            answer: None,
            tool_call_ids: Vec::new(),
        }
    }
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let seq = state.seq.fetch_add(1, Ordering::SeqCst) + 1;
    let ts_ms = now_ms();
    let method = req.method().clone();
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let headers = log_headers(req.headers());
    let authorized = check_auth(&state.opts, req.headers());
    let raw = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let body: Value = if raw.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&raw)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&raw).into_owned()))
    };
    let request_id = format!("req_pv_{seq}");

    let outcome = route(&state, &method, &path, &raw, &body, authorized, &request_id);
    let entry = LoggedRequest {
        seq,
        ts_ms,
        method: method.to_string(),
        path,
        headers,
        body,
        kind: outcome.kind,
        protocol: outcome.protocol,
        stream: outcome.stream,
        turn: outcome.turn,
        exhausted: outcome.exhausted,
        answer: outcome.answer,
        tool_call_ids: outcome.tool_call_ids,
        status: outcome.response.status().as_u16(),
    };
    record(&state, entry);
    Ok(outcome.response)
}

fn record(state: &State, entry: LoggedRequest) {
    if let Some(f) = state.log_file.lock().unwrap().as_mut() {
        if let Ok(line) = serde_json::to_string(&entry) {
            let _ = writeln!(f, "{line}");
            let _ = f.flush();
        }
    }
    state.log.lock().unwrap().push(entry);
}

fn log_headers(h: &hyper::HeaderMap) -> Map<String, Value> {
    let mut out = Map::new();
    for name in h.keys() {
        let n = name.as_str();
        if n == "host" || n == "content-length" {
            continue;
        }
        let value = if n == "authorization" || n == "x-api-key" {
            "<redacted>".to_string()
        } else {
            h.get_all(name)
                .iter()
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.insert(n.to_string(), Value::String(value));
    }
    out
}

fn check_auth(opts: &ServerOptions, h: &hyper::HeaderMap) -> bool {
    let Some(key) = &opts.api_key else {
        return true;
    };
    let x = h.get("x-api-key").and_then(|v| v.to_str().ok());
    let bearer = h
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    x == Some(key.as_str()) || bearer == Some(key.as_str())
}

/// The route of a request path (query stripped, optional `/v1` prefix removed).
fn route_name(path: &str) -> &str {
    let p = path.split('?').next().unwrap_or("");
    let p = p.trim_end_matches('/');
    p.strip_prefix("/v1").unwrap_or(p)
}

fn route(
    state: &State,
    method: &Method,
    path: &str,
    raw: &[u8],
    body: &Value,
    authorized: bool,
    request_id: &str,
) -> Outcome {
    let name = route_name(path);
    // Reachability probes: any HEAD (Claude Code sends `HEAD /api/hello` unless
    // CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC is set), and GET on `/`, `/health`, `/api/hello`.
    if *method == Method::HEAD
        || (*method == Method::GET && matches!(name, "" | "/health" | "/api/hello"))
    {
        let mut r = Response::new(full(if *method == Method::HEAD { "" } else { "ok" }));
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        return Outcome::other(r);
    }
    let protocol = match name {
        "/messages" | "/messages/count_tokens" => Protocol::Anthropic,
        "/responses" => Protocol::OpenaiResponses,
        "/chat/completions" => Protocol::OpenaiChat,
        _ => Protocol::Anthropic,
    };
    if !authorized {
        let body = match protocol {
            Protocol::Anthropic => anthropic::error("authentication_error", "invalid x-api-key"),
            _ => openai::error(
                "invalid_request_error",
                "invalid_api_key",
                "Incorrect API key provided.",
            ),
        };
        let mut o = Outcome::other(json_response(StatusCode::UNAUTHORIZED, &body, request_id));
        o.protocol = Some(protocol);
        return o;
    }
    match (method, name) {
        (&Method::GET, "/models") => {
            let models: Vec<String> = if state.script.models.is_empty() {
                vec![state.opts.default_model.clone()]
            } else {
                state.script.models.clone()
            };
            let data: Vec<Value> = models
                .iter()
                .map(|m| json!({"id": m, "object": "model", "type": "model", "display_name": m, "created": 0, "created_at": "1970-01-01T00:00:00Z", "owned_by": "pvisor"}))
                .collect();
            let v = json!({"object": "list", "data": data, "has_more": false,
                           "first_id": models.first(), "last_id": models.last()});
            Outcome::other(json_response(StatusCode::OK, &v, request_id))
        }
        (&Method::POST, "/messages/count_tokens") => {
            let v = json!({"input_tokens": estimate_tokens(raw)});
            let mut o = Outcome::other(json_response(StatusCode::OK, &v, request_id));
            o.kind = RequestKind::CountTokens;
            o.protocol = Some(Protocol::Anthropic);
            o
        }
        (&Method::POST, "/messages" | "/responses" | "/chat/completions") => {
            if !body.is_object() {
                let msg = "request body is not a JSON object";
                let err = match protocol {
                    Protocol::Anthropic => anthropic::error("invalid_request_error", msg),
                    _ => openai::error("invalid_request_error", "invalid_json", msg),
                };
                let mut o =
                    Outcome::other(json_response(StatusCode::BAD_REQUEST, &err, request_id));
                o.protocol = Some(protocol);
                return o;
            }
            model_request(state, protocol, raw, body, request_id)
        }
        _ => {
            let err = anthropic::error("not_found_error", &format!("no route for {method} {path}"));
            Outcome::other(json_response(StatusCode::NOT_FOUND, &err, request_id))
        }
    }
}

fn is_side(script: &Script, protocol: Protocol, raw: &[u8], body: &Value) -> Option<String> {
    let text = String::from_utf8_lossy(raw);
    if let Some(t) = script.side_rule_text(&text) {
        return Some(t.to_string());
    }
    if script.no_tools_is_side {
        let no_tools = match body.get("tools") {
            None | Some(Value::Null) => true,
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        };
        // Codex code mode sends its tools as an `additional_tools` input item.
        let extra_tools = protocol == Protocol::OpenaiResponses
            && body
                .get("input")
                .and_then(Value::as_array)
                .is_some_and(|items| {
                    items
                        .iter()
                        .any(|i| i.get("type").and_then(Value::as_str) == Some("additional_tools"))
                });
        if no_tools && !extra_tools {
            return Some(script.default_side_text().to_string());
        }
    }
    None
}

fn model_request(
    state: &State,
    protocol: Protocol,
    raw: &[u8],
    body: &Value,
    request_id: &str,
) -> Outcome {
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(&state.opts.default_model)
        .to_string();
    let side = is_side(&state.script, protocol, raw, body);
    let (turn, index, exhausted, kind) = match side {
        Some(text) => (Turn::text(text), None, false, RequestKind::Side),
        None => {
            let index = match protocol {
                Protocol::Anthropic => history::anthropic_turns(body),
                Protocol::OpenaiResponses => history::responses_turns(body),
                Protocol::OpenaiChat => history::chat_turns(body),
            };
            let (t, exhausted) = state.script.turn(index);
            (
                request_placeholders(t, raw),
                Some(index),
                exhausted,
                RequestKind::Main,
            )
        }
    };
    let tag = index.map(ids::tag).unwrap_or_else(|| "side".to_string());
    let reply = Reply {
        turn,
        tag,
        model,
        input_tokens: estimate_tokens(raw),
        chunk_chars: state.opts.chunk_chars,
        created: now_ms() / 1000,
    };
    let tool_call_ids: Vec<String> = (0..reply.turn.tool_calls.len())
        .map(|i| match protocol {
            Protocol::Anthropic => ids::anthropic_tool_tag(&reply.tag, i),
            _ => ids::openai_call_tag(&reply.tag, i),
        })
        .collect();
    if let Some(e) = &reply.turn.error {
        let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
        return Outcome {
            response: json_response(
                status,
                &protocol.error_body(&e.kind, &e.message),
                request_id,
            ),
            kind,
            protocol: Some(protocol),
            stream,
            turn: index,
            exhausted,
            answer: Some(reply.turn),
            tool_call_ids: vec![],
        };
    }
    let response = match (protocol, stream) {
        (Protocol::Anthropic, true) => sse_response(anthropic::events(&reply), request_id),
        (Protocol::Anthropic, false) => {
            json_response(StatusCode::OK, &anthropic::message(&reply), request_id)
        }
        (Protocol::OpenaiResponses, true) => {
            sse_response(openai::responses_events(&reply), request_id)
        }
        (Protocol::OpenaiResponses, false) => {
            json_response(StatusCode::OK, &openai::response(&reply), request_id)
        }
        (Protocol::OpenaiChat, true) => {
            let include_usage = body
                .pointer("/stream_options/include_usage")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            sse_response(openai::chat_events(&reply, include_usage), request_id)
        }
        (Protocol::OpenaiChat, false) => {
            json_response(StatusCode::OK, &openai::chat_completion(&reply), request_id)
        }
    };
    Outcome {
        response,
        kind,
        protocol: Some(protocol),
        stream,
        turn: index,
        exhausted,
        answer: Some(reply.turn),
        tool_call_ids,
    }
}

/// Placeholders filled from the request itself (not known when the script is written):
/// `${LAST_SESSION_ID}` = the last `Process running with session ID <n>` in the request
/// (Codex's unified exec session ids are random). A string that is exactly the placeholder
/// becomes the number. Left as is when the request has none.
pub fn request_placeholders(turn: Turn, raw: &[u8]) -> Turn {
    const PH: &str = "${LAST_SESSION_ID}";
    const MARK: &str = "Process running with session ID ";
    let body = String::from_utf8_lossy(raw);
    let Some(pos) = body.rfind(MARK) else {
        return turn;
    };
    let id: String = body[pos + MARK.len()..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    if id.is_empty() {
        return turn;
    }
    fn fill(v: Value, id: &str) -> Value {
        match v {
            Value::String(s) if s == "${LAST_SESSION_ID}" => id
                .parse::<u64>()
                .map(Value::from)
                .unwrap_or(Value::String(id.to_string())),
            Value::String(s) => Value::String(s.replace("${LAST_SESSION_ID}", id)),
            Value::Array(a) => Value::Array(a.into_iter().map(|x| fill(x, id)).collect()),
            Value::Object(o) => {
                Value::Object(o.into_iter().map(|(k, x)| (k, fill(x, id))).collect())
            }
            other => other,
        }
    }
    if !serde_json::to_string(&turn)
        .map(|s| s.contains(PH))
        .unwrap_or(false)
    {
        return turn;
    }
    let v = fill(serde_json::to_value(&turn).expect("turn serializes"), &id);
    serde_json::from_value(v).expect("filled turn deserializes")
}

#[cfg(test)]
mod placeholder_tests {
    use super::*;

    #[test]
    fn last_session_id_comes_from_the_request() {
        let t: Turn = serde_json::from_value(serde_json::json!({"tool_calls": [{"name": "write_stdin", "input": {"session_id": "${LAST_SESSION_ID}", "chars": "id ${LAST_SESSION_ID}"}}]})).unwrap();
        let raw = br#"{"input":[{"output":"Process running with session ID 111\n"},{"output":"Process running with session ID 27008\nOutput:"}]}"#;
        let f = request_placeholders(t.clone(), raw);
        assert_eq!(
            f.tool_calls[0].input,
            serde_json::json!({"session_id": 27008, "chars": "id 27008"})
        );
        assert_eq!(request_placeholders(t.clone(), b"{}"), t);
    }
}
