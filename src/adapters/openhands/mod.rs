//! OpenHands SDK adapter — UNDER CONSTRUCTION (issue 13): not in the registry yet, so no
//! run can select it. What exists: the input side, tested on the genuine 1.34 store.
//!
//! - [`store`]: a conversation store folder (`base_state.json` + `events/event-NNNNN-<id>.json`)
//!   read as one canonical byte form ([`crate::kit::Adapter::read_input`]): one line per file,
//!   `base_state.json` first, then the events in index order.
//! - [`parse`]: that form → plan; one LLM response's `ActionEvent`s (`llm_response_id`) are one
//!   batch, each answered by the `ObservationEvent` / `AgentErrorEvent` with its `tool_call_id`.
//!
//! Still to build (see `NOTES.md` and the prototype `runner.py` beside this file): the tools
//! through the runner, the cut store and Chat Completions prefix (the model-visible tool text
//! comes from the SDK's own converter: ask the runner), the continuation with `run()`, the
//! registry entry (openhands-sdk, openhands-tools 1.34.0 with litellm 1.84.1 and openai 2.33.0
//! pinned, Python 3.12), fixtures recorded with the real SDK, and docs/agents/openhands.md.

pub mod parse;
pub mod store;

/// The SDK version whose store format this adapter reads.
pub const SUPPORTED_VERSION: &str = "1.34.0";
