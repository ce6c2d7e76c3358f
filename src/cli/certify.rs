//! `pvisor certify`: run the property suite against an installed agent CLI and print a
//! certificate (docs/certify.md).

use std::path::PathBuf;

use super::error::CliError;
use super::exit;
use crate::certify::{certify, CertifyError, Options, Task};

#[derive(Debug, clap::Args)]
pub struct CertifyArgs {
    /// The agent to certify (`pvisor agents` lists them).
    #[arg(long)]
    pub agent: String,
    /// The agent CLI to certify (default: the pinned installation, else the agent's command
    /// on PATH).
    #[arg(long, value_name = "PATH")]
    pub agent_entrypoint: Option<PathBuf>,
    /// Generated tasks to run.
    #[arg(long, default_value_t = 8)]
    pub cases: u32,
    /// Seed of the task generator: the same seed generates the same tasks.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Tool-calling turns per task, at most.
    #[arg(long, default_value_t = 3)]
    pub max_turns: usize,
    /// Re-runs allowed to shrink a failing task to the smallest that still fails.
    #[arg(long, default_value_t = 16)]
    pub max_shrink_iters: u32,
    /// Run these saved tasks (`task.json` of a kept case) instead of generated ones.
    #[arg(long = "case", value_name = "TASK_JSON")]
    pub cases_from: Vec<PathBuf>,
    /// Where the cases run (default: a new folder in the temporary directory). A failing
    /// case's folder is kept.
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Keep every case's folder.
    #[arg(long)]
    pub keep: bool,
    /// Print the certificate as JSON (schema `pvisor.certificate/v1`) instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: CertifyArgs, registry: &crate::kit::Registry) -> Result<i32, CliError> {
    let config = |m: String, hint: &str| CliError::new(exit::CONFIGURATION, m, Some(hint.into()));
    let entry = registry
        .get(&a.agent)
        .map_err(|e| config(e.to_string(), "`pvisor agents` lists the agents"))?;
    let entrypoint =
        crate::install::resolve(a.agent_entrypoint.as_deref(), entry).map_err(|e| {
            config(
                e,
                "pass --agent-entrypoint, or install the pinned CLI with `pvisor agents install`",
            )
        })?;
    let mut tasks = vec![];
    for p in &a.cases_from {
        let text = std::fs::read_to_string(p)
            .map_err(|e| config(format!("--case {}: {e}", p.display()), "pass a task.json"))?;
        let t: Task = serde_json::from_str(&text).map_err(|e| {
            config(
                format!("--case {}: line {}: {e}", p.display(), e.line()),
                "a task.json is what certify keeps in a failing case's folder",
            )
        })?;
        tasks.push(t);
    }
    let fresh = a.work_dir.is_none();
    let work_dir = a.work_dir.clone().unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        std::env::temp_dir().join(format!("pvisor-certify-{}-{nanos}", std::process::id()))
    });
    let pvisor = std::env::current_exe()
        .map_err(|e| CliError::new(exit::INTERNAL, format!("this executable: {e}"), None))?;
    let opts = Options {
        agent: a.agent.clone(),
        entrypoint,
        pvisor,
        cases: a.cases,
        seed: a.seed,
        max_turns: a.max_turns,
        max_shrink_iters: a.max_shrink_iters,
        work_dir: work_dir.clone(),
        keep: a.keep,
        tasks,
    };
    let progress = |m: &str| eprintln!("certify: {m}");
    let cert = certify(&opts, registry, &progress).map_err(|e| match e {
        CertifyError::NoRecorder(_) => CliError::new(
            exit::UNSUPPORTED,
            e.to_string(),
            Some("`pvisor agents` shows which adapters can be certified".into()),
        ),
        CertifyError::Setup(m) => CliError::new(exit::CONFIGURATION, m, None),
    })?;
    if a.json {
        let mut v = serde_json::to_value(&cert).unwrap_or_default();
        v["schema"] = "pvisor.certificate/v1".into();
        println!("{v}");
    } else {
        print!("{}", cert.text());
    }
    if fresh && cert.certified && !a.keep {
        let _ = std::fs::remove_dir_all(&work_dir);
    }
    Ok(if cert.certified {
        exit::OK
    } else {
        exit::CERTIFY_FAILED
    })
}
