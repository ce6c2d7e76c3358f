//! The sandbox workspace: path confinement for file tools.
//!
//! Every path a re-executed tool reads or writes goes through [`confine`] first, so a
//! trajectory can never make replay touch anything outside the workspace (through `..`,
//! absolute paths or symlinks, dangling ones included).

pub mod confine;

pub use confine::confine;
