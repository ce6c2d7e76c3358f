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

use serde_json::Value;

use crate::kit::{Removed, RequestRules, RuleRefusal};

#[derive(Debug, Clone, Default)]
pub struct PiRules {
    /// The continuation runs `prompt(P)` with the boundary prompt.
    pub prompt: bool,
}

impl RequestRules for PiRules {
    fn remove_inserted(&self, _: &mut Vec<Value>, _: usize) -> Result<Vec<Removed>, RuleRefusal> {
        Ok(Vec::new())
    }

    fn boundary_prompt_in_history(&self) -> bool {
        self.prompt
    }
}
