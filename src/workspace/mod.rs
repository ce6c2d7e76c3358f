//! The sandbox workspace: path confinement for file tools, and checkpoints that make a
//! re-run of an interrupted call apply its workspace effects once ([`checkpoint`]).
//!
//! Every path a re-executed tool reads or writes goes through [`confine`] first, so a
//! trajectory can never make replay touch anything outside the workspace (through `..`,
//! absolute paths or symlinks, dangling ones included).

pub mod checkpoint;
pub mod confine;
pub mod isolate;

pub use confine::{confine, confine_for_write};
