//! The fail-closed local model bridge between a continued agent and its model upstream
//! (shared by every agent; see `docs/bridge.md`).
//!
//! The agent is pointed at the bridge (`http://127.0.0.1:PORT`) with a per-run random key as
//! its API key. For every **main** model request the bridge
//! 1. checks the key: a request without it is answered by the bridge and never forwarded: a
//!    keyless reachability probe (`HEAD`/`GET`) gets 200; a request from the agent's own
//!    process group (a wrong key) 401 and the run fails; one from any other local process
//!    401, journaled as a side request, and the run goes on,
//! 2. removes exactly the items the agent's resume inserted (its adapter's
//!    [`crate::kit::RequestRules`]),
//! 3. canonicalizes the messages ([`canonical`]) and checks that `messages[0..len(prefix))`
//!    equal the expected prefix (per-message digests; the first differing index is reported),
//!    and that the first request **ends** at O′N,
//! 4. injects the boundary prompt (one user message right after O′N) when configured,
//! 5. applies `--disable-thinking`,
//! 6. reports a [`journal_format::event::BridgeRequestValidated`] and waits until the caller
//!    acknowledged it (the engine journals it durably) before anything is forwarded,
//! 7. forwards to the upstream in the native protocol, streaming the answer through as it
//!    arrives (or translates to OpenAI Chat Completions, buffered), and reports one
//!    [`journal_format::event::ContinuationStep`] per answered request (BLAKE3 of the answer
//!    bytes, tool names) — acknowledged before the part of the answer that carries tool calls
//!    reaches the agent.
//!
//! Side requests (`count_tokens`, probes, tool-less auxiliary `messages` calls) are forwarded
//! without prefix validation and reported with `side: true`. Anything unexpected latches the
//! bridge into failure: that request and every later one get a 4xx; there is never a direct
//! connection. The bridge keeps no request or response bodies, only digests.

pub mod difference;
mod peer;
mod server;
pub mod sse;
pub mod translate;
pub mod validate;

use journal_format::event::BridgeStarted;
use journal_format::Event;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

pub use crate::protocol::Protocol;

/// The model upstream.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// `http://host:port` for Anthropic (the request path, e.g. `/v1/messages?beta=true`, is
    /// appended); the base including `/v1` for OpenAI Chat (`/chat/completions` is appended).
    /// `http://` or `https://` (TLS by rustls with the webpki roots).
    pub base_url: String,
    /// The upstream's protocol: the agent's own (passed through, streamed), or OpenAI Chat
    /// Completions for an Anthropic agent (translated, buffered).
    pub protocol: Protocol,
    /// Sent as `x-api-key` (Anthropic) or `Authorization: Bearer` (OpenAI). Never logged.
    pub api_key: Option<String>,
    /// Replaces the request's `model`.
    pub model: Option<String>,
    /// Time allowed until the upstream's response head (translated mode: the whole answer).
    pub response_timeout: Duration,
}

/// Everything the bridge needs for one continuation.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// The protocol the agent speaks.
    pub protocol: Protocol,
    /// What the agent's resume inserts, how its items compare (from its adapter).
    pub rules: std::sync::Arc<dyn crate::kit::RequestRules>,
    /// The canonical expected prefix (system/env turns, task, A1, O′1 … AN, O′N).
    pub prefix: Vec<Value>,
    /// Injected as one user message right after O′N (plaintext never reported).
    pub boundary_prompt: Option<String>,
    pub disable_thinking: bool,
    /// Live step budget: a main request beyond it latches failure (the agent's own limit
    /// should stop it first).
    pub max_steps: Option<u64>,
    pub upstream: Upstream,
    /// The key the agent must present; `None` = a fresh random key.
    pub key: Option<String>,
    /// Port on 127.0.0.1; 0 = any free port.
    pub port: u16,
    /// Set when the continuation is resumed after a crash (attempt 2, 3…): `prefix` is then
    /// the longer prefix (rebuilt prefix + the live turns already in the agent's session).
    pub resume: Option<BridgeResume>,
    /// The run's state directory: a refused request's body is kept in its blob store
    /// (secrets redacted) and named by the journaled validation. `None`: not kept.
    pub refused_blobs: Option<std::path::PathBuf>,
    /// Hold a request beyond the live step budget unanswered (the runner interrupts the
    /// agent) instead of answering it with an error (`runner::Watchdogs::step_budget`).
    pub hold_beyond_budget: bool,
}

/// How the model upstream failed a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamFailure {
    /// HTTP 429.
    RateLimit,
    /// HTTP 5xx.
    ServerError,
    /// No connection, a broken one, or no answer in time.
    Connection,
}

/// A resumed continuation (see `docs/resume.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeResume {
    /// Where the boundary prompt goes: the length of the rebuilt prefix (right after O′N),
    /// not the end of the longer prefix.
    pub boundary_at: usize,
    /// The boundary prompt was already injected by an earlier attempt: later requests carry
    /// it again, but no receipt marks it injected a second time.
    pub prompt_injected_before: bool,
    /// Live steps already taken (the session's complete live turns): this attempt's steps
    /// are numbered from `steps_before + 1`.
    pub steps_before: u64,
}

/// Errors starting the bridge.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("bridge configuration: {0}")]
    Config(String),
    #[error("cannot bind 127.0.0.1:{port}: {source}")]
    Bind {
        port: u16,
        #[source]
        source: std::io::Error,
    },
}

/// One fact for the caller to journal. The bridge waits for [`BridgeNotice::ack`] before it
/// proceeds; acknowledging `false` (the journal refused) latches the bridge into failure.
#[derive(Debug)]
pub struct BridgeNotice {
    pub event: Event,
    ack: oneshot::Sender<bool>,
}

impl BridgeNotice {
    pub fn ack(self, ok: bool) {
        let _ = self.ack.send(ok);
    }
}

/// Counters, for the runner's verdict.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BridgeStats {
    /// Main requests seen (validated or not).
    pub main_requests: u64,
    /// Main requests answered by the upstream with a complete reply (= live steps).
    pub steps: u64,
    pub side_requests: u64,
    /// Requests that reached the upstream.
    pub upstream_requests: u64,
    /// Why the bridge latched into failure.
    pub failure: Option<String>,
    /// The boundary prompt was injected into at least one forwarded request.
    pub boundary_prompt_injected: bool,
    /// The first (latching) refusal was a main request beyond the live step budget: the
    /// budget stopped the agent (`agent_status = max_steps`), not a failure.
    pub budget_refused: bool,
    /// The last way the upstream failed a request, if it did (a failed continuation is then
    /// a model failure, retryable).
    pub upstream_failure: Option<UpstreamFailure>,
}

/// A running bridge.
pub struct BridgeHandle {
    addr: SocketAddr,
    key: String,
    shared: Arc<server::Shared>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl BridgeHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    /// `http://127.0.0.1:PORT` (the agent's base URL).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
    /// The per-run key the agent must present.
    pub fn key(&self) -> &str {
        &self.key
    }
    pub fn stats(&self) -> BridgeStats {
        self.shared.stats()
    }
    /// The `BridgeStarted` fact for the journal.
    pub fn started_event(&self) -> BridgeStarted {
        BridgeStarted {
            listen: self.addr.to_string(),
            protocol: self.shared.cfg.protocol.name().to_string(),
            upstream: format!(
                "{} {}",
                self.shared.cfg.upstream.protocol.name(),
                self.shared.cfg.upstream.base_url
            ),
            prefix_digest: self.shared.prefix_digest.clone(),
            prefix_items: self.shared.cfg.prefix.len() as u64,
        }
    }
    /// The agent's process group (the runner starts it in one of its own): a request without
    /// the key from it fails the run; from any other process it is answered 401 and ignored.
    pub fn set_agent_process_group(&self, pgid: u32) {
        self.shared
            .agent_group
            .store(pgid, std::sync::atomic::Ordering::SeqCst);
    }
    /// Latch the bridge into failure from outside (e.g. the runner saw the agent misbehave).
    pub fn fail(&self, reason: &str) {
        self.shared.latch(reason.to_string());
    }
    /// Stop accepting and close connections.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for BridgeHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// The digest the bridge journals (`bridge_started.prefix_digest`) for the first `n`
/// messages of `messages`, in the comparison form of `protocol` and `rules`; `None` when
/// there are fewer.
pub fn prefix_digest_of(
    protocol: Protocol,
    rules: &dyn crate::kit::RequestRules,
    messages: &[serde_json::Value],
    n: usize,
) -> Option<String> {
    let canon: Vec<serde_json::Value> = messages
        .iter()
        .take(n)
        .map(|m| rules.canonical(protocol, m))
        .collect();
    (canon.len() == n).then(|| crate::digest::prefix_digest(&canon))
}

/// A fresh random bridge key.
pub fn random_key() -> String {
    use rand::RngCore;
    let mut b = [0u8; 24];
    rand::thread_rng().fill_bytes(&mut b);
    format!("pvb-{}", hex::encode(b))
}

/// Start the bridge on 127.0.0.1. Facts arrive on the returned receiver; each must be
/// acknowledged (see [`BridgeNotice`]). Dropping the receiver makes every request fail.
pub async fn start(
    cfg: BridgeConfig,
) -> Result<(BridgeHandle, mpsc::UnboundedReceiver<BridgeNotice>), BridgeError> {
    let base = cfg.upstream.base_url.trim_end_matches('/').to_string();
    if !base.starts_with("http://") && !base.starts_with("https://") {
        return Err(BridgeError::Config(format!(
            "upstream {base:?}: the URL must start with http:// or https://"
        )));
    }
    let translated = cfg.upstream.protocol != cfg.protocol;
    if translated
        && !(cfg.protocol == Protocol::Anthropic && cfg.upstream.protocol == Protocol::OpenaiChat)
    {
        return Err(BridgeError::Config(format!(
            "an agent speaking {} can use an upstream of its own protocol, not {} (only Anthropic Messages is translated, to OpenAI Chat Completions)",
            cfg.protocol, cfg.upstream.protocol
        )));
    }
    let key = cfg.key.clone().unwrap_or_else(random_key);
    let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, cfg.port))
        .await
        .map_err(|source| BridgeError::Bind {
            port: cfg.port,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| BridgeError::Bind {
        port: cfg.port,
        source,
    })?;
    let (tx, rx) = mpsc::unbounded_channel();
    let mut cfg = cfg;
    cfg.upstream.base_url = base;
    let shared = Arc::new(server::Shared::new(cfg, key.clone(), tx));
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(server::accept_loop(listener, shared.clone(), stop_rx));
    Ok((
        BridgeHandle {
            addr,
            key,
            shared,
            stop,
            task: Some(task),
        },
        rx,
    ))
}

/// Acknowledge every notice (for callers that do not journal, e.g. tests) and collect the
/// events; the task ends when the bridge is gone.
pub fn auto_ack(
    mut rx: mpsc::UnboundedReceiver<BridgeNotice>,
) -> (Arc<Mutex<Vec<Event>>>, JoinHandle<()>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let ev = events.clone();
    let task = tokio::spawn(async move {
        while let Some(n) = rx.recv().await {
            ev.lock().unwrap().push(n.event.clone());
            n.ack(true);
        }
    });
    (events, task)
}
