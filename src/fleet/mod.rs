//! Replays by the thousand: a manifest of replay requests (`manifest`), each run as task `i`
//! of a scheduler's job array (`pvisor replay --manifest F --index i`, idempotent by run
//! id), the Slurm array script (`slurm`), and the fleet's progress folded from its journals
//! (`status`). docs/fleet.md has the contract.

pub mod manifest;
pub mod slurm;
pub mod status;
