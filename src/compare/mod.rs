//! Comparisons the result reports: the next action A(N+1) of the original run against the
//! first live action A′(N+1) of the continuation.

pub mod next_action;
