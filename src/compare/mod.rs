//! Comparisons the result reports: each fresh observation against the original one
//! ([`observation`]), and the next action A(N+1) of the original run against the first live
//! action A′(N+1) of the continuation ([`next_action`]); output merged from two pipes, whose
//! lines may interleave in another order ([`interleave`]).

pub mod interleave;
pub mod next_action;
pub mod observation;
