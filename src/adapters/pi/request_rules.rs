//! What Pi 0.83.0's SDK continuation does to its Anthropic requests, for the bridge:
//!
//! * `agent.continue()` inserts nothing: request 1 is byte-identical to the original request
//!   N+1 (measured; only the `Host` header differs), `cache_control` on the last tool
//!   result as Pi puts it.
//! * With a boundary prompt, the continuation is one `session.prompt(P)`: Pi stores P as a
//!   user message right after O′N and sends it in every request (with the `cache_control`
//!   moved onto it): the bridge checks it is there instead of inserting it
//!   ([`RequestRules::boundary_prompt_in_history`]).
//! * The system prompt is outside `messages` (Anthropic `system`): not compared.

/// Pi's rules: nothing inserted, the boundary prompt in its history.
pub type PiRules = crate::kit::rules::OwnPrompt;
