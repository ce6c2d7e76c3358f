//! `pvisor agents`: the supported agents, their proven versions and capabilities; and
//! `pvisor agents install` for their pinned (or another proven) version.

use clap::Subcommand;
use serde_json::json;

use super::error::CliError;
use super::exit;
use crate::kit::registry::{AgentEntry, Package, Registry};

#[derive(Debug, clap::Args)]
pub struct AgentsArgs {
    #[command(subcommand)]
    pub command: Option<AgentsCmd>,
    /// Print the list as JSON (schema `pvisor.agents/v1`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum AgentsCmd {
    /// Install agent CLIs: `claude-code` (the pinned version) or `claude-code@2.1.286` (another
    /// proven one) into `$PVISOR_AGENTS_DIR` (default `~/.cache/pvisor/agents`); prints the
    /// entrypoint (one agent) or `<agent>\t<entrypoint>` lines.
    Install {
        #[arg(required = true, value_name = "AGENT[@VERSION]")]
        agents: Vec<String>,
    },
}

fn package_text(a: &AgentEntry) -> String {
    match a.install.package {
        Package::Npm { package, .. } => format!("npm {package}"),
        Package::PyPI {
            package,
            python,
            python_below,
            with,
            ..
        } => {
            let below = python_below.map(|b| format!(", < {b}")).unwrap_or_default();
            let with = if with.is_empty() {
                String::new()
            } else {
                format!(" + {}", with.join(" "))
            };
            format!("PyPI {package}{with} (Python >= {python}{below})")
        }
    }
}

/// How a continuation interrupted by a crash goes on: the agent resumes its own session
/// (`session`), or starts again from the boundary (`restart`); `-` without a continuation.
fn live_recovery(c: crate::kit::registry::Capabilities) -> &'static str {
    match (c.continue_live, c.resume_live) {
        (false, _) => "-",
        (true, true) => "session",
        (true, false) => "restart",
    }
}

fn entry_json(a: &AgentEntry) -> serde_json::Value {
    let c = a.capabilities;
    json!({
        "name": a.name,
        "pinned": a.pinned,
        "replays": a.versions.iter().map(|r| json!({"low": r.low, "high": r.high})).collect::<Vec<_>>(),
        "continues": a.continue_versions.iter().map(|r| json!({"low": r.low, "high": r.high})).collect::<Vec<_>>(),
        "package": package_text(a),
        "command": a.command,
        "capabilities": {
            "replay": c.replay, "continue": c.continue_live, "resume_live": c.resume_live,
            "live_crash_recovery": live_recovery(c),
            "boundary_prompt": c.boundary_prompt,
        },
        "docs": a.docs,
    })
}

pub fn run(args: AgentsArgs, registry: &Registry) -> Result<i32, CliError> {
    match args.command {
        None => {
            if args.json {
                let v = json!({
                    "schema_version": "pvisor.agents/v1",
                    "agents": registry.entries().iter().map(entry_json).collect::<Vec<_>>(),
                });
                println!("{v}");
                return Ok(exit::OK);
            }
            let yes = |b: bool| if b { "yes" } else { "no" };
            let w = registry
                .entries()
                .iter()
                .map(|a| a.name.len())
                .chain([5])
                .max()
                .unwrap_or(5);
            println!(
                "{:<w$} {:<9} {:<22} {:<22} {:<8} {:<8} {:<7} package",
                "agent", "pinned", "replays", "continues", "continue", "resume", "prompt"
            );
            for a in registry.entries() {
                let c = a.capabilities;
                println!(
                    "{:<w$} {:<9} {:<22} {:<22} {:<8} {:<8} {:<7} {}",
                    a.name,
                    a.pinned,
                    a.versions_text(),
                    a.continue_versions_text(),
                    yes(c.continue_live),
                    live_recovery(c),
                    yes(c.boundary_prompt),
                    package_text(a)
                );
            }
            Ok(exit::OK)
        }
        Some(AgentsCmd::Install { agents }) => {
            let root = crate::install::agents_root();
            let mut lines = Vec::new();
            for spec in &agents {
                let (name, version) = match spec.split_once('@') {
                    Some((n, v)) => (n, Some(v)),
                    None => (spec.as_str(), None),
                };
                let a = registry.get(name).map_err(|e| {
                    CliError::new(
                        exit::UNSUPPORTED,
                        e.to_string(),
                        Some("`pvisor agents` lists the supported agents".into()),
                    )
                })?;
                let v = version.unwrap_or(a.pinned);
                if !a.replays(v) {
                    return Err(CliError::new(
                        exit::UNSUPPORTED,
                        format!(
                            "{name} {v} is not a proven version (replays {}, continues {})",
                            a.versions_text(),
                            a.continue_versions_text()
                        ),
                        Some(format!(
                            "install the pinned one: pvisor agents install {name}"
                        )),
                    ));
                }
                let exe = crate::install::install(&root, a, v).map_err(|e| {
                    CliError::new(
                        exit::CONFIGURATION,
                        format!("installing {name}@{v}: {e}"),
                        Some("the npm registry and PyPI must be reachable; the output above says what failed".into()),
                    )
                })?;
                lines.push((name.to_string(), exe));
            }
            if lines.len() == 1 {
                println!("{}", lines[0].1.display());
            } else {
                for (n, e) in lines {
                    println!("{n}\t{}", e.display());
                }
            }
            Ok(exit::OK)
        }
    }
}
