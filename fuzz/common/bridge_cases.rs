//! The bridge request check (`pvisor::bridge::validate::check`) of every adapter, each
//! against an expected prefix taken from a request its real CLI sent (the committed request
//! logs): what the `bridge_validate` fuzz target and its smoke in the test suite run.
//! An input is one selector byte (the adapter, and whether request 1 or a later one) and the
//! request's conversation list (`messages` / `input`), put in the rest of the request the
//! prefix was taken from (its tools left out: the check does not read them, and the inputs
//! stay small enough to fuzz fast).

use pvisor::bridge::validate::{canonical_prefix, check, Expected};
use pvisor::bridge::{BridgeConfig, Protocol, Upstream};
use serde_json::Value;
use std::sync::Arc;

/// `(adapter, protocol, request log under tests/fixtures)`.
pub const CASES: &[(&str, Protocol, &str)] = &[
    (
        "claude-code",
        Protocol::Anthropic,
        "claude/recorded/five-step/requests.jsonl",
    ),
    (
        "codex",
        Protocol::OpenaiResponses,
        "codex/genuine/requests-run1.jsonl",
    ),
    (
        "opencode",
        Protocol::OpenaiChat,
        "opencode/genuine/requests-run1.jsonl",
    ),
    (
        "pi-agent",
        Protocol::Anthropic,
        "pi/genuine/requests-run1.jsonl",
    ),
    (
        "mini-swe-agent",
        Protocol::OpenaiChat,
        "mini-swe-agent/genuine-2.4.6/requests-run1.jsonl",
    ),
    (
        "openhands",
        Protocol::OpenaiChat,
        "openhands/genuine/requests-run1.jsonl",
    ),
];

/// The resume text the rules look for (as the continuations make one).
pub const NONCE: &str = "PVISOR-RESUME-0123456789abcdef01234567";

fn rules(agent: &str) -> Arc<dyn pvisor::kit::RequestRules> {
    use pvisor::adapters::*;
    match agent {
        "claude-code" => Arc::new(claude_code::request_rules::ClaudeRequestRules::new(NONCE)),
        "codex" => Arc::new(codex::request_rules::CodexRequestRules {
            prompt: NONCE.into(),
            instructions: None,
        }),
        "opencode" => Arc::new(opencode::request_rules::OpenCodeRules::new(NONCE)),
        "pi-agent" => Arc::new(pi::request_rules::PiRules { prompt: false }),
        "mini-swe-agent" => Arc::new(mini_swe_agent::request_rules::MiniRules { prompt: false }),
        _ => Arc::new(openhands::request_rules::OpenHandsRules { prompt: false }),
    }
}

/// The main request bodies of a committed request log.
pub fn bodies(root: &std::path::Path, log: &str) -> Vec<Value> {
    std::fs::read_to_string(root.join(log))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "main")
        .map(|r| r["body"].clone())
        .collect()
}

/// One adapter's check, its expected prefix the conversation of the second main request of
/// its log (the first that carries a tool result), without the agent's generated head.
pub struct Validator {
    cfg: BridgeConfig,
    expected: Expected,
    /// The request the prefix was taken from, without its conversation list and tools: the
    /// body a fuzzed list is put in (the adapter's rules compare some of its fields with the
    /// messages).
    template: serde_json::Map<String, Value>,
}

impl Validator {
    pub fn new(root: &std::path::Path, case: usize) -> Validator {
        let (agent, protocol, log) = CASES[case % CASES.len()];
        let rules = rules(agent);
        let all = bodies(root, log);
        let mut list = all
            .get(1)
            .or(all.first())
            .and_then(|b| b.get(protocol.list_key()))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut template = all
            .get(1)
            .or(all.first())
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        template.remove(protocol.list_key());
        template.remove("tools");
        let head = rules.generated_head(&list).min(list.len());
        list.drain(..head);
        let mut cfg = BridgeConfig {
            protocol,
            rules,
            prefix: list,
            boundary_prompt: None,
            disable_thinking: false,
            max_steps: None,
            upstream: Upstream {
                base_url: "http://127.0.0.1:9".into(),
                protocol,
                api_key: None,
                model: None,
                response_timeout: std::time::Duration::from_secs(1),
            },
            key: None,
            port: 0,
            resume: None,
            refused_blobs: None,
            hold_beyond_budget: false,
        };
        cfg.prefix = canonical_prefix(&cfg);
        let expected = Expected::new(&cfg);
        Validator {
            cfg,
            expected,
            template,
        }
    }

    /// Check `body` as request 1 (`later`: as a request after a live step). `Ok` = accepted.
    /// (Used by the smoke in `tests/parser_smoke.rs`; the fuzz target checks values.)
    #[allow(dead_code)]
    pub fn check(&self, body: &[u8], later: bool) -> Result<(), String> {
        let mut v: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        check(&self.cfg, &self.expected, 1, later as u64, &mut v)
            .map(|_| ())
            .map_err(|r| r.reason)
    }

    /// [`Validator::check`] of a body holding the conversation list `list` (JSON).
    pub fn check_list(&self, list: &[u8], later: bool) -> Result<(), String> {
        let list: Value = serde_json::from_slice(list).map_err(|e| e.to_string())?;
        let mut body = self.template.clone();
        body.insert(self.cfg.protocol.list_key().into(), list);
        check(
            &self.cfg,
            &self.expected,
            1,
            later as u64,
            &mut Value::Object(body),
        )
        .map(|_| ())
        .map_err(|r| r.reason)
    }
}
