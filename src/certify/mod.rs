//! `pvisor certify`: proves that the agent CLI a user has installed still replays
//! faithfully. Generated tasks ([`task`]) are played by the scripted model to the **real**
//! agent CLI ([`record`]), which writes a genuine native session; each session is then
//! replayed at every boundary in the three modes and its properties checked ([`check`]).
//! The first task that fails is shrunk (proptest) to the smallest that still fails, and saved.
//! The outcome is a [`Certificate`].

pub mod check;
pub mod record;
pub mod task;

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use serde::Serialize;
use std::cell::RefCell;
use std::path::{Path, PathBuf};

pub use check::{Count, Tally};
pub use task::Task;

/// What a certification runs.
#[derive(Debug, Clone)]
pub struct Options {
    pub agent: String,
    /// The agent CLI to certify.
    pub entrypoint: PathBuf,
    /// The `pvisor` executable whose replays are checked (this one, as a user runs it).
    pub pvisor: PathBuf,
    /// Generated tasks.
    pub cases: u32,
    pub seed: u64,
    /// Tool-calling turns per task at most.
    pub max_turns: usize,
    /// Re-runs allowed to shrink a failing task.
    pub max_shrink_iters: u32,
    /// Where cases run (a fresh folder per case below it) and what is kept.
    pub work_dir: PathBuf,
    /// Keep every case's folder (recording, journals, outputs), not only a failing one.
    pub keep: bool,
    /// Run these saved tasks (regression cases) instead of generated ones.
    pub tasks: Vec<Task>,
}

/// The smallest failing case.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// What did not hold.
    pub reason: String,
    /// The task (`task.json` in `folder`).
    pub task: Task,
    /// The case folder kept for inspection: the task, its script, the recording, journals.
    pub folder: PathBuf,
}

/// The outcome of a certification.
#[derive(Debug, Clone, Serialize)]
pub struct Certificate {
    pub agent: String,
    /// What the CLI reports (`--version`).
    pub agent_version: String,
    pub pvisor_version: String,
    pub seed: u64,
    #[serde(flatten)]
    pub tally: Tally,
    /// Whether every property held on every case.
    pub certified: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smallest_failing_case: Option<Failure>,
}

/// Why a certification could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum CertifyError {
    #[error("the `{0}` adapter cannot record sessions with its CLI, so it cannot be certified")]
    NoRecorder(String),
    #[error("{0}")]
    Setup(String),
}

/// One case: record the task, parse the session, check it. `Err` is what did not hold.
fn run_case(
    opts: &Options,
    rt: &tokio::runtime::Runtime,
    adapter: &dyn crate::kit::Adapter,
    recorder: &dyn crate::kit::recorder::Recorder,
    task: &Task,
    root: &Path,
    tally: &mut Tally,
) -> Result<(), String> {
    std::fs::create_dir_all(root).map_err(|e| format!("create {}: {e}", root.display()))?;
    std::fs::write(
        root.join("task.json"),
        serde_json::to_string_pretty(task).unwrap_or_default() + "\n",
    )
    .map_err(|e| format!("write the task: {e}"))?;
    let rec = record::record(rt, recorder, &opts.entrypoint, task, root)?;
    let (plan, _) = adapter
        .parse_path(&rec.trajectory)
        .map_err(|e| format!("the recorded session does not parse: {e}"))?;
    if plan.max_boundary() != task.turns.len() {
        return Err(format!(
            "the recorded session has {} complete batches, the task {} tool-calling turns",
            plan.max_boundary(),
            task.turns.len()
        ));
    }
    tally.tool_calls += plan.batches.calls_before(plan.batches.len());
    let batches = plan
        .batches
        .loaded()
        .map_err(|e| format!("the recorded session's plan: {e}"))?;
    let digest = blake3::hash(serde_json::to_string(task).unwrap_or_default().as_bytes());
    let pick = u64::from_le_bytes(digest.as_bytes()[..8].try_into().unwrap_or([0; 8]));
    let extra = recorder.workspace_files();
    let seed = |w: &Path| task.seed(w, &extra);
    let mask = |b: &serde_json::Value| recorder.mask_request(b);
    check::Case {
        agent: &opts.agent,
        entrypoint: &opts.entrypoint,
        pvisor: &opts.pvisor,
        root,
        recording: &rec,
        seed: &seed,
        mask: &mask,
        // The adapter's own declaration (`Adapter::streams_interleave`) for a call of the task.
        interleaved: batches
            .iter()
            .flat_map(|b| &b.calls)
            .any(|c| adapter.streams_interleave(c)),
        pick,
    }
    .check(&plan, tally)
}

/// Run the certification.
pub fn certify(
    opts: &Options,
    registry: &crate::kit::Registry,
    progress: &dyn Fn(&str),
) -> Result<Certificate, CertifyError> {
    let entry = registry
        .get(&opts.agent)
        .map_err(|e| CertifyError::Setup(e.to_string()))?;
    let adapter = (entry.make)();
    let recorder = adapter
        .recorder()
        .ok_or_else(|| CertifyError::NoRecorder(opts.agent.clone()))?;
    let agent_version = entry
        .version_of(&opts.entrypoint)
        .map_err(CertifyError::Setup)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CertifyError::Setup(format!("tokio runtime: {e}")))?;
    std::fs::create_dir_all(&opts.work_dir)
        .map_err(|e| CertifyError::Setup(format!("create {}: {e}", opts.work_dir.display())))?;

    // Cases are counted until the first failure; the runs after it shrink that case.
    let tally = RefCell::new(Tally::default());
    let failing = RefCell::new(None::<(String, PathBuf)>);
    let attempt = RefCell::new(0usize);
    let one = |task: Task| -> Result<(), TestCaseError> {
        let i = {
            let mut a = attempt.borrow_mut();
            *a += 1;
            *a
        };
        let shrinking = failing.borrow().is_some();
        let root = opts.work_dir.join(format!("case-{i}"));
        progress(&format!(
            "{} {i}: {} turns, {} calls",
            if shrinking {
                "shrinking, attempt"
            } else {
                "case"
            },
            task.turns.len(),
            task.calls()
        ));
        // Shrinking runs count in a tally of their own, thrown away.
        let mut discarded = Tally::default();
        let mut counted = tally.borrow_mut();
        let into = if shrinking {
            &mut discarded
        } else {
            counted.cases += 1;
            &mut *counted
        };
        let res = run_case(
            opts,
            &rt,
            adapter.as_ref(),
            recorder.as_ref(),
            &task,
            &root,
            into,
        );
        drop(counted);
        match res {
            Ok(()) => {
                if !opts.keep {
                    let _ = std::fs::remove_dir_all(&root);
                }
                Ok(())
            }
            Err(reason) => {
                progress(&format!("  does not hold: {}", first_line(&reason)));
                let previous = failing.borrow_mut().replace((reason.clone(), root));
                if let Some((_, old)) = previous {
                    if !opts.keep {
                        let _ = std::fs::remove_dir_all(old);
                    }
                }
                Err(TestCaseError::fail(reason))
            }
        }
    };
    let outcome = if opts.tasks.is_empty() {
        let config = Config {
            cases: opts.cases,
            max_shrink_iters: opts.max_shrink_iters,
            failure_persistence: None,
            rng_algorithm: RngAlgorithm::ChaCha,
            ..Config::default()
        };
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&opts.seed.to_le_bytes());
        let mut runner =
            TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
        match runner.run(&task::task(opts.max_turns).boxed(), one) {
            Ok(()) => None,
            Err(TestError::Fail(why, task)) => {
                // A panic is a failure proptest caught before the case could record it.
                if failing.borrow().is_none() {
                    let root = opts.work_dir.join(format!("case-{}", attempt.borrow()));
                    failing.replace(Some((why.to_string(), root)));
                }
                Some(task)
            }
            Err(TestError::Abort(why)) => return Err(CertifyError::Setup(why.to_string())),
        }
    } else {
        opts.tasks
            .iter()
            .find(|t| one((*t).clone()).is_err())
            .cloned()
    };
    let smallest_failing_case = outcome.map(|task| {
        let (reason, folder) = failing.borrow_mut().take().unwrap_or_default();
        Failure {
            reason,
            task,
            folder,
        }
    });
    let tally = tally.into_inner();
    Ok(Certificate {
        agent: opts.agent.clone(),
        agent_version,
        pvisor_version: env!("CARGO_PKG_VERSION").into(),
        seed: opts.seed,
        certified: smallest_failing_case.is_none() && tally.all() && tally.cases > 0,
        tally,
        smallest_failing_case,
    })
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

impl Certificate {
    /// The certificate as text.
    pub fn text(&self) -> String {
        let t = &self.tally;
        let row = |name: &str, c: Count| format!("  {name:<28}{:>5}/{}\n", c.held, c.of);
        let mut s = format!(
            "pvisor certify {}: {} ({})\nseed {}, {} cases, {} boundaries, {} tool calls\n",
            self.pvisor_version,
            self.agent,
            self.agent_version,
            self.seed,
            t.cases,
            t.boundaries,
            t.tool_calls
        );
        s += &row("prepare-only untouched", t.prepare_only_untouched);
        s += &row("observations equal", t.observations_equal);
        s += &row("first requests equal", t.first_requests_equal);
        s += &row("results = fold(journal)", t.folds_equal);
        s += &row("resumes equal", t.resumes_equal);
        match &self.smallest_failing_case {
            None if self.certified => s += "certified: every property held on every case\n",
            None => s += "NOT certified: no case ran\n",
            Some(f) => {
                s += &format!(
                    "NOT certified. Smallest failing case ({} turns, {} calls), kept in {}:\n{}\n",
                    f.task.turns.len(),
                    f.task.calls(),
                    f.folder.display(),
                    f.reason
                );
            }
        }
        s
    }
}
