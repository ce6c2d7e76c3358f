//! The check of one main request against what the continuation expects, apart from the
//! HTTP side (so that it can be fuzzed on its own): the conversation list is present; what the
//! agent's resume inserted is exactly what its adapter declares and is taken out; no resume
//! nonce is left anywhere; the list starts with the expected prefix O₁…O′N, message by message
//! (canonical forms compared by digest); the boundary prompt the agent sends itself stands
//! right after O′N; request 1 ends at the boundary and later requests go beyond it.

use super::server::canonical_for;
use super::BridgeConfig;
use crate::digest::{canonically_equal, message_digest};
use journal_format::event::RemovedItem;
use serde_json::Value;

/// What every request of one continuation is checked against (computed once), besides the
/// canonical prefix itself (`cfg.prefix`).
#[derive(Debug, Clone)]
pub struct Expected {
    /// The canonical boundary prompt message when the agent sends it itself
    /// (`RequestRules::boundary_prompt_in_history`): it must stand right after O′N.
    pub agent_prompt: Option<Value>,
}

impl Expected {
    /// `cfg.prefix` must already be in canonical form ([`canonical_prefix`]).
    pub fn new(cfg: &BridgeConfig) -> Expected {
        Expected {
            agent_prompt: cfg
                .boundary_prompt
                .as_deref()
                .filter(|_| cfg.rules.boundary_prompt_in_history())
                .map(|p| canonical_for(cfg, &cfg.protocol.user_message(p))),
        }
    }
}

/// The expected prefix in the form requests are compared in.
pub fn canonical_prefix(cfg: &BridgeConfig) -> Vec<Value> {
    cfg.prefix.iter().map(|m| canonical_for(cfg, m)).collect()
}

/// Why a main request was refused.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub n: u64,
    pub reason: String,
    /// The first difference from the expected request, in words.
    pub difference: Option<String>,
    /// The request asks for a step beyond the live budget (the budget's end, not an error).
    pub budget: bool,
}

impl Refusal {
    pub fn new(n: u64, reason: impl Into<String>) -> Refusal {
        Refusal {
            n,
            reason: reason.into(),
            difference: None,
            budget: false,
        }
    }
    pub fn with(n: u64, reason: impl Into<String>, difference: String) -> Refusal {
        Refusal {
            n,
            reason: reason.into(),
            difference: Some(difference),
            budget: false,
        }
    }
}

/// A request that passed: its parts, the conversation list taken out of the body.
#[derive(Debug)]
pub struct Checked {
    /// The items the agent generates afresh for every request (its system prompt).
    pub head: Vec<Value>,
    /// The conversation after the head, without what the resume inserted.
    pub msgs: Vec<Value>,
    pub removed: Vec<RemovedItem>,
    /// The prefix length, the agent's own boundary prompt included.
    pub plen: usize,
    /// The digest of the boundary prompt the agent sends itself, if it does.
    pub agent_prompt: Option<String>,
}

/// Whether a key or a string anywhere in `v` contains `text` (a resume nonce: letters, digits
/// and dashes, which JSON writes as they are, so this is a search of the request's text
/// without writing it).
pub fn mentions(v: &Value, text: &str) -> bool {
    match v {
        Value::String(s) => s.contains(text),
        Value::Array(a) => a.iter().any(|x| mentions(x, text)),
        Value::Object(o) => o.iter().any(|(k, x)| k.contains(text) || mentions(x, text)),
        _ => false,
    }
}

fn removed_item(kind: &str, item: &Value) -> RemovedItem {
    RemovedItem {
        kind: kind.to_string(),
        digest: message_digest(item),
    }
}

/// Check main request `n` (after `steps` live steps) against `exp`. The conversation list
/// is taken out of `body`; the caller puts it back.
pub fn check(
    cfg: &BridgeConfig,
    exp: &Expected,
    n: u64,
    steps: u64,
    body: &mut Value,
) -> Result<Checked, Refusal> {
    let key = cfg.protocol.list_key();
    // The list is taken out of the body (not copied) and put back, cleaned, at the end.
    let mut msgs = match body.get_mut(key).map(Value::take) {
        Some(Value::Array(a)) => a,
        _ => return Err(Refusal::new(n, format!("the request has no `{key}` list"))),
    };
    let plen = cfg.prefix.len();
    // The items the agent generates afresh for every request (its system prompt) are
    // forwarded as they are and are not part of the prefix.
    let head_len = cfg.rules.generated_head(&msgs).min(msgs.len());
    let head: Vec<Value> = msgs.drain(..head_len).collect();
    // Exactly what the agent's resume inserted, by its adapter's declared rules.
    let refused = |r: crate::kit::RuleRefusal| match r.difference {
        Some(d) => Refusal::with(n, r.reason, format!("request {n} has {d}")),
        None => Refusal::new(n, r.reason),
    };
    let removed: Vec<RemovedItem> = cfg
        .rules
        .remove_inserted(&mut msgs, plen)
        .map_err(refused)?
        .iter()
        .map(|r| removed_item(&r.kind, &r.item))
        .collect();
    cfg.rules.check_request(body, &msgs).map_err(refused)?;
    // A resume nonce must not remain anywhere (object keys included).
    if let Some(t) = cfg.rules.forbidden_text() {
        if mentions(body, t) || head.iter().chain(&msgs).any(|m| mentions(m, t)) {
            return Err(Refusal::new(
                n,
                "the resume nonce appears elsewhere in the request",
            ));
        }
    }
    // Compared as values, which is the comparison of their canonical JSON texts without
    // writing and hashing them (`canonically_equal`).
    let canon: Vec<Value> = msgs.iter().map(|m| canonical_for(cfg, m)).collect();
    for (i, want) in cfg.prefix.iter().enumerate() {
        let Some(got) = canon.get(i) else {
            return Err(Refusal::with(
                n,
                format!(
                    "the request has {} messages, fewer than the {plen} of the expected prefix",
                    canon.len()
                ),
                format!(
                    "request {n} ends after message {}; the prefix continues with {}",
                    canon.len(),
                    super::difference::describe_message(&cfg.prefix[i])
                ),
            ));
        };
        if !canonically_equal(got, want) {
            return Err(Refusal::with(
                n,
                format!("message {i} differs from the expected prefix"),
                format!(
                    "request {n}, message {i} ({}): {}",
                    super::difference::describe_message(got),
                    super::difference::first_difference(&cfg.prefix[i], got)
                ),
            ));
        }
    }
    // A boundary prompt the agent sends itself stands right after O′N, in every request.
    let agent_prompt = exp.agent_prompt.as_ref();
    if let Some(want) = agent_prompt {
        if !canon
            .get(plen)
            .is_some_and(|got| canonically_equal(got, want))
        {
            return Err(Refusal::with(
                n,
                "the boundary prompt the agent was given is not right after O′N",
                format!(
                    "request {n}, message {plen}: {}",
                    canon
                        .get(plen)
                        .map(super::difference::describe_message)
                        .unwrap_or_else(|| "nothing".into())
                ),
            ));
        }
    }
    let plen = plen + usize::from(agent_prompt.is_some());
    if steps == 0 && canon.len() != plen {
        let k = canon.len() - plen;
        return Err(Refusal::with(
            n,
            format!("the first request does not end at the boundary: {k} message(s) after O′N"),
            format!(
                "request {n} has {k} message(s) after O′N: {}",
                super::difference::describe_extra(&canon[plen..])
            ),
        ));
    }
    if steps > 0 && canon.len() == plen {
        return Err(Refusal::new(
            n,
            "a later request carries no turn after the boundary",
        ));
    }
    Ok(Checked {
        head,
        msgs,
        removed,
        plen,
        agent_prompt: agent_prompt.map(message_digest),
    })
}
