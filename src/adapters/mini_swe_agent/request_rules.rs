//! What the continuation does to mini's Chat Completions requests, for the bridge: nothing.
//! The runner hands mini the rebuilt messages and calls `agent.step()`, so request 1 is the
//! original request N+1 byte for byte (the `tools` of 2.x included; 1.x sends none). With a
//! boundary prompt, the runner appends it as mini's next `user` message, where it stays in
//! every later request: the bridge checks it there
//! ([`crate::kit::RequestRules::boundary_prompt_in_history`]).

/// mini's rules.
pub type MiniRules = crate::kit::rules::OwnPrompt;
