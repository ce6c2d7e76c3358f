//! Human and machine renderings of journal events (timeline lines, JSON Lines export).

pub mod export;
pub mod summary;

pub use summary::summary;
