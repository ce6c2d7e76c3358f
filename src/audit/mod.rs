//! `pvisor journal audit`: offline verification and per-step report of a finished (or
//! interrupted) run from its state directory and output directory alone. No sandbox, no
//! network. A directory of many runs is audited in parallel with a fleet summary.

pub mod check;
pub mod compare;
pub mod fleet;
pub mod html;
pub mod reread;
pub mod text;

pub use check::{audit_run, AuditReport, Finding};
