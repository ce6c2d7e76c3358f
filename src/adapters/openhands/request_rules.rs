//! What the continuation does to OpenHands' Chat Completions requests, for the bridge:
//! nothing. The SDK reloads the rebuilt store and `run()` renders it, so request 1 is the
//! original request N+1 (the tools come from the live agent; the file_editor description names
//! the workspace). A boundary prompt is the SDK's own `send_message()`: one user message after
//! the last tool message, kept in every later request, where the bridge checks it
//! ([`crate::kit::RequestRules::boundary_prompt_in_history`]).

/// OpenHands' rules.
pub type OpenHandsRules = crate::kit::rules::OwnPrompt;
