//! `pvisor fleet`: submit a manifest as a scheduler job array, and fold its journals into
//! progress (docs/fleet.md).

use std::path::PathBuf;

use clap::Subcommand;

use super::error::CliError;
use super::exit;
use crate::fleet::{manifest::Manifest, slurm, status};

#[derive(Debug, Subcommand)]
pub enum FleetCmd {
    /// Submit every replay of a manifest as one Slurm job array (the script is written
    /// beside the manifest as `<manifest>.sbatch`); prints the job id.
    Submit {
        manifest: PathBuf,
        /// The scheduler (only `slurm`; Kubernetes and Ray use the same contract, docs/fleet.md).
        #[arg(long, default_value = "slurm")]
        engine: String,
        #[arg(long)]
        partition: Option<String>,
        /// At most K replays at once.
        #[arg(long, value_name = "K")]
        max_parallel: Option<usize>,
        /// Per-task time limit, in Slurm's format (e.g. 30:00).
        #[arg(long)]
        time: Option<String>,
        /// Let Slurm requeue preempted or failed tasks (they resume from their journals).
        #[arg(long)]
        requeue: bool,
        /// Write the script and print it; submit nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Progress of a manifest's replays, folded from their journals: pending, running,
    /// interrupted, done, failed by category.
    Status {
        manifest: PathBuf,
        /// One JSON object (schema pvisor.fleet-status/v1) with every task.
        #[arg(long)]
        json: bool,
        /// Follow the fleet until every task has ended, with a progress bar on stderr
        /// (re-folded every --interval seconds), then print the counts.
        #[arg(long)]
        watch: bool,
        #[arg(long, default_value_t = 2.0)]
        interval: f64,
    },
}

/// Tasks that ended (done or failed) out of all.
fn ended(counts: &std::collections::BTreeMap<String, usize>) -> usize {
    counts.get("done").copied().unwrap_or(0)
        + counts
            .iter()
            .filter(|(k, _)| k.starts_with("failed:"))
            .map(|(_, v)| v)
            .sum::<usize>()
}

/// Re-fold the fleet until every task ended, showing a bar on stderr.
fn watch(m: &Manifest, interval: f64) {
    let total = m.lines.len() as u64;
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(st) = indicatif::ProgressStyle::with_template(
        "[fleet] {bar:30} {pos}/{len} ended {msg} ({elapsed})",
    ) {
        bar.set_style(st);
    }
    loop {
        let counts = status::counts(&status::tasks(m));
        let n = ended(&counts) as u64;
        bar.set_position(n);
        bar.set_message(format!(
            "· {} done · {} running",
            counts.get("done").copied().unwrap_or(0),
            counts.get("running").copied().unwrap_or(0)
        ));
        if n >= total {
            break;
        }
        std::thread::sleep(std::time::Duration::from_secs_f64(interval.max(0.1)));
    }
    bar.finish_and_clear();
}

fn load(path: &std::path::Path) -> Result<Manifest, CliError> {
    Manifest::load(path)
        .map_err(|e| CliError::new(exit::CONFIGURATION, e.to_string(), e.hint.clone()))
}

pub fn run(cmd: FleetCmd) -> Result<i32, CliError> {
    match cmd {
        FleetCmd::Submit {
            manifest,
            engine,
            partition,
            max_parallel,
            time,
            requeue,
            dry_run,
        } => {
            if engine != "slurm" {
                return Err(CliError::new(
                    exit::CONFIGURATION,
                    format!("--engine {engine}: pvisor submits to `slurm` only"),
                    Some("for Kubernetes Indexed Jobs or Ray, run `pvisor replay --manifest M --index I` per task (docs/fleet.md)".to_string()),
                ));
            }
            let m = load(&manifest)?;
            // Every task must be a valid request before anything is submitted.
            for i in 0..m.lines.len() {
                m.request(i).map_err(|e| {
                    CliError::new(exit::CONFIGURATION, e.to_string(), e.hint.clone())
                })?;
            }
            let manifest = std::path::absolute(&manifest).unwrap_or(manifest);
            let me = std::env::current_exe().map_err(|e| {
                CliError::new(
                    exit::INTERNAL,
                    format!("cannot find pvisor itself: {e}"),
                    None,
                )
            })?;
            let opts = slurm::ArrayOptions {
                partition,
                max_parallel,
                time,
                requeue,
            };
            let text = slurm::script(&me, &manifest, m.lines.len(), &opts);
            if dry_run {
                super::output::emit(&None, &text)?;
                return Ok(exit::OK);
            }
            let (path, id) = slurm::submit(&text, &manifest).map_err(|e| {
                CliError::new(
                    exit::CONFIGURATION,
                    e,
                    Some("is Slurm running here (sinfo)? `scripts/slurm-local.sh start` starts a one-machine cluster".to_string()),
                )
            })?;
            eprintln!(
                "submitted {} replay(s) as Slurm job {id} ({})",
                m.lines.len(),
                path.display()
            );
            println!("{id}");
            Ok(exit::OK)
        }
        FleetCmd::Status {
            manifest,
            json,
            watch: follow,
            interval,
        } => {
            let m = load(&manifest)?;
            if follow {
                watch(&m, interval);
            }
            let tasks = status::tasks(&m);
            let counts = status::counts(&tasks);
            if json {
                let v = serde_json::json!({
                    "schema_version": "pvisor.fleet-status/v1",
                    "manifest": manifest,
                    "total": tasks.len(),
                    "counts": counts,
                    "tasks": tasks.iter().map(|(id, t)| serde_json::json!({"run_id": id, "state": t})).collect::<Vec<_>>(),
                });
                println!("{v}");
            } else {
                let done = counts.get("done").copied().unwrap_or(0);
                let ended = ended(&counts);
                let width = 30;
                let filled = (ended * width).checked_div(tasks.len()).unwrap_or(0);
                println!(
                    "[{}{}] {ended}/{} ended ({done} done)",
                    "#".repeat(filled),
                    "-".repeat(width - filled),
                    tasks.len()
                );
                for (k, v) in &counts {
                    println!("{k:<28} {v}");
                }
            }
            Ok(exit::OK)
        }
    }
}
