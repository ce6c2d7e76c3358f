//! The command line: flags, subcommands, exit codes, error rendering. The binary is a thin
//! shell over this module.

pub mod agents;
pub mod certify;
pub mod error;
pub mod fleet;
pub use crate::outcome::exit;
pub mod journal;
pub mod model;
mod output;
pub mod replay;
pub mod stress;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "pvisor",
    version,
    about = "Replay an AI coding agent's trajectory in a fresh sandbox and continue it with the real agent"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replay a trajectory's first N tool-call batches in this sandbox, rebuild the agent's
    /// native session, and continue it with the real agent.
    Replay(Box<replay::ReplayArgs>),
    /// Inspect, verify and export replay journals.
    #[command(subcommand)]
    Journal(journal::JournalCmd),
    /// The built-in scripted model server.
    #[command(subcommand)]
    Model(model::ModelCmd),
    /// The supported agents (versions, capabilities), and installing their CLIs.
    Agents(agents::AgentsArgs),
    /// Prove an installed agent CLI still replays faithfully: generated tasks recorded with the
    /// real CLI, replayed at every boundary in every mode, a certificate printed.
    Certify(certify::CertifyArgs),
    /// Replays by the thousand: submit a manifest as a Slurm job array, and its progress.
    #[command(subcommand)]
    Fleet(fleet::FleetCmd),
}

/// Run the CLI; returns the process exit code.
pub fn main_with_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                exit::CONFIGURATION
            } else {
                exit::OK
            };
        }
    };
    let res = match cli.command {
        Command::Journal(cmd) => journal::run(cmd),
        Command::Replay(args) => replay::run(*args),
        Command::Model(cmd) => model::run(cmd),
        Command::Agents(args) => agents::run(args, &crate::adapters::registry()),
        Command::Fleet(cmd) => fleet::run(cmd),
        Command::Certify(args) => certify::run(args, &crate::adapters::registry()),
    };
    match res {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}", e.render());
            e.code
        }
    }
}
