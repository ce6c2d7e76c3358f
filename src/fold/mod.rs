//! The fold: the only code that computes status. `fold(journal) → ReplayState → result`.

pub mod apply;
pub mod result;
pub mod state;

pub use apply::{apply, apply_streaming, fold, FoldError};
pub use result::{derive, ReplayResult};
pub use state::{Phase, ReplayState};
