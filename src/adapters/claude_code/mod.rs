//! Claude Code 2.1.332.
pub mod continuation;
pub mod rebuild;
