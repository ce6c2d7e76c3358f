//! `pvisor replay`: flags, TOML and JSON request forms, and the result on stdout.

use std::path::PathBuf;

use clap::Args;

use super::error::CliError;
use super::exit;
use crate::engine::{self, Start};
use crate::fold::result::early_failure;
use crate::protocol::Protocol;
use crate::request::{self, ReplayRequest, RequestFields};

#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
  # replay the first 3 tool-call batches, rebuild the session, stop before the model
  pvisor replay --agent claude-code --trajectory session.jsonl --after-step 3 --replay-only

  # build the native prefix only (no tool runs, no agent needed)
  pvisor replay --agent claude-code --trajectory session.jsonl --after-step 3 --prepare-only

  # replay, then let the real agent continue against the built-in scripted model (the
  # pinned CLI `pvisor agents install claude-code` installed, or --agent-entrypoint PATH)
  pvisor replay --agent claude-code --trajectory session.jsonl --after-step 3 \\
      --max-steps 8 --model-script turns.json

  # the same request from a file, and resuming an interrupted run
  pvisor replay --config replay.toml
  pvisor replay --resume-journal .pvisor/state/run-123

The result is one JSON line on stdout (schema sandbox-playback.result/v3), also written to
<output-dir>/<run-id>/result.json. Exit codes: docs/cli.md.")]
pub struct ReplayArgs {
    /// Agent whose trajectory is replayed (claude-code, codex, opencode, pi-agent, mini-swe-agent, openhands).
    #[arg(long)]
    pub agent: Option<String>,
    /// The agent's native trajectory (session) file.
    #[arg(long)]
    pub trajectory: Option<PathBuf>,
    /// Boundary N: replay the first N complete tool-call batches.
    #[arg(long)]
    pub after_step: Option<u64>,
    /// Exact agent executable for the continuation (its version is probed).
    #[arg(long)]
    pub agent_entrypoint: Option<PathBuf>,
    /// The sandbox workspace the tools run in [default: current directory].
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// Root of run state directories (journal, blobs) [default: .pvisor/state].
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Root of run output directories (result, artifacts) [default: .pvisor/output].
    #[arg(long)]
    pub output_dir: Option<PathBuf>,
    /// Run id (a directory name) [default: generated].
    #[arg(long)]
    pub run_id: Option<String>,
    /// Native session id to use where the agent allows choosing it.
    #[arg(long)]
    pub session_id: Option<String>,
    /// Total action budget, the replayed prefix included.
    #[arg(long)]
    pub max_steps: Option<u64>,
    /// Validate and build the native prefix with the original observations; run nothing.
    #[arg(long)]
    pub prepare_only: bool,
    /// Replay and rebuild, but send no model request.
    #[arg(long)]
    pub replay_only: bool,
    /// Reuse original observations that cannot be regenerated (result: degraded).
    #[arg(long)]
    pub allow_stale_observations: bool,
    /// Take no workspace checkpoints before mutating calls (saves their time and space on a
    /// huge workspace; an interrupted mutating call then stops with exit 31).
    #[arg(long)]
    pub no_checkpoints: bool,
    /// Disable extended thinking in continuation requests.
    #[arg(long)]
    pub disable_thinking: bool,
    /// One user message added after O′N before the first live inference (never stored in plain text).
    #[arg(long)]
    pub boundary_user_prompt: Option<String>,
    /// Model upstream URL for the continuation.
    #[arg(long)]
    pub model_base_url: Option<String>,
    /// Model upstream protocol.
    #[arg(long, value_enum)]
    pub model_protocol: Option<Protocol>,
    /// Name of the environment variable holding the upstream API key.
    #[arg(long)]
    pub model_api_key_env: Option<String>,
    /// Model name sent upstream.
    #[arg(long)]
    pub model: Option<String>,
    /// Built-in scripted upstream: a JSON list of assistant turns (docs/model-script.md).
    #[arg(long)]
    pub model_script: Option<PathBuf>,
    /// TOML file with a [replay] table (keys: these flags in snake_case).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Versioned JSON request (schema pvisor.replay-request/v1).
    #[arg(long)]
    pub request: Option<PathBuf>,
    /// Continue an interrupted run from its journal (file or state directory).
    #[arg(long, conflicts_with_all = ["agent", "trajectory", "after_step", "config", "request", "prepare_only", "replay_only", "max_steps", "run_id", "workspace", "state_dir", "output_dir"])]
    pub resume_journal: Option<PathBuf>,
    /// On resume: re-run a mutating call whose outcome is in doubt (at-least-once).
    #[arg(long)]
    pub accept_at_least_once: bool,
    /// Run in a private mount namespace with the run's own copy of the workspace bound at
    /// its path, so replays of the same session run side by side (docs/fleet.md).
    #[arg(long)]
    pub isolate: bool,
    /// With --isolate: the directory the run's workspace copy starts from [default: what the
    /// host has at the workspace path].
    #[arg(long)]
    pub workspace_seed: Option<PathBuf>,
    /// With --isolate (implies it): the run in a network namespace of its own with only a
    /// loopback interface: tools and the agent reach nothing outside it. The model must then
    /// be --model-script (served inside), or the run --replay-only.
    #[arg(long)]
    pub isolate_network: bool,
    /// Run task --index of a fleet manifest (pvisor.fleet/v1; docs/fleet.md): a finished run
    /// prints its result and runs nothing, an interrupted one resumes, a new one starts.
    #[arg(long, conflicts_with_all = ["agent", "trajectory", "after_step", "config", "request", "resume_journal", "run_id"])]
    pub manifest: Option<PathBuf>,
    /// The manifest task (0-based) [default: $SLURM_ARRAY_TASK_ID, else $JOB_COMPLETION_INDEX].
    #[arg(long, requires = "manifest")]
    pub index: Option<usize>,
    /// Show no progress on stderr (progress is shown only when stderr is a terminal).
    #[arg(long, short)]
    pub quiet: bool,
    /// Progress as JSON Lines on stderr (`{"progress": {phase, batches_done, batches_total,
    /// calls_done, calls_total, live_steps, live_budget}}`), for machines.
    #[arg(long = "progress-json", alias = "json", conflicts_with = "quiet")]
    pub progress_json: bool,
}

impl ReplayArgs {
    fn fields(&self) -> RequestFields {
        let t = |b: bool| if b { Some(true) } else { None };
        RequestFields {
            schema_version: None,
            agent: self.agent.clone(),
            trajectory: self.trajectory.clone(),
            after_step: self.after_step,
            agent_entrypoint: self.agent_entrypoint.clone(),
            workspace: self.workspace.clone(),
            state_dir: self.state_dir.clone(),
            output_dir: self.output_dir.clone(),
            run_id: self.run_id.clone(),
            session_id: self.session_id.clone(),
            max_steps: self.max_steps,
            prepare_only: t(self.prepare_only),
            replay_only: t(self.replay_only),
            allow_stale_observations: t(self.allow_stale_observations),
            no_checkpoints: t(self.no_checkpoints),
            disable_thinking: t(self.disable_thinking),
            boundary_user_prompt: self.boundary_user_prompt.clone(),
            model_base_url: self.model_base_url.clone(),
            model_protocol: self.model_protocol,
            model_api_key_env: self.model_api_key_env.clone(),
            model: self.model.clone(),
            model_script: self.model_script.clone(),
            accept_at_least_once: t(self.accept_at_least_once),
            isolate: t(self.isolate),
            workspace_seed: self.workspace_seed.clone(),
            isolate_network: t(self.isolate_network),
        }
    }
}

fn print(result: &crate::fold::ReplayResult) {
    println!("{}", serde_json::to_string(result).unwrap_or_default());
}

/// The start of task `--index` of a fleet manifest: resumed when its run id already has a
/// journal (a finished run then prints its result and runs nothing), started otherwise.
fn manifest_start(args: &ReplayArgs, path: &std::path::Path) -> Result<Start, CliError> {
    use crate::fleet::manifest::{task_index, Manifest};
    let fail = |e: crate::fleet::manifest::ManifestError| {
        print(&early_failure(
            journal_format::event::FailureCategory::ConfigurationError,
            &e.to_string(),
            None,
            None,
            None,
        ));
        CliError::new(exit::CONFIGURATION, e.to_string(), e.hint)
    };
    let m = Manifest::load(path).map_err(fail)?;
    let index = task_index(args.index).map_err(|e| {
        CliError::new(
            exit::CONFIGURATION,
            e,
            Some("docs/fleet.md: the task index of a fleet replay".to_string()),
        )
    })?;
    let mut req = m.request(index).map_err(fail)?;
    // Flags given beside --manifest apply to this task too.
    if args.accept_at_least_once {
        req.accept_at_least_once = true;
    }
    let journal = req.state_dir.join("journal.pvj");
    let mut started = false;
    if journal.is_file() {
        let _ = crate::journal::read_events(&journal, |e| {
            started |= matches!(e.event, journal_format::Event::RunRequested(_));
            Ok(())
        });
    }
    Ok(if started {
        Start::Resume {
            path: journal,
            boundary_user_prompt: req.boundary_user_prompt.clone(),
            accept_at_least_once: req.accept_at_least_once,
        }
    } else {
        Start::Fresh(Box::new(req))
    })
}

pub fn run(args: ReplayArgs) -> Result<i32, CliError> {
    use crate::engine::progress;
    progress::set_mode(if args.quiet {
        progress::Mode::Quiet
    } else if args.progress_json {
        progress::Mode::Json
    } else {
        progress::Mode::Auto
    });
    let start = if let Some(m) = args.manifest.clone() {
        manifest_start(&args, &m)?
    } else if let Some(path) = args.resume_journal.clone() {
        Start::Resume {
            path,
            boundary_user_prompt: args.boundary_user_prompt.clone(),
            accept_at_least_once: args.accept_at_least_once,
        }
    } else {
        let mut fields = args.fields();
        let loaded = match (&args.config, &args.request) {
            (Some(_), Some(_)) => Err(request::RequestError {
                message: "--config and --request exclude each other".into(),
                hint: None,
            }),
            (Some(c), None) => request::load_toml(c).map(Some),
            (None, Some(r)) => request::load_json(r).map(Some),
            (None, None) => Ok(None),
        };
        let req = loaded.and_then(|l| {
            if let Some(l) = l {
                fields = fields.or(l);
            }
            fields.schema_version = None;
            ReplayRequest::from_fields(fields)
        });
        match req {
            Ok(r) => Start::Fresh(Box::new(r)),
            Err(e) => {
                print(&early_failure(
                    journal_format::event::FailureCategory::ConfigurationError,
                    &e.message,
                    args.run_id.clone(),
                    None,
                    None,
                ));
                return Err(CliError::new(exit::CONFIGURATION, e.message, e.hint));
            }
        }
    };
    let out = engine::run(start, &crate::adapters::registry());
    print(&out.result);
    if let Some(f) = &out.result.failure {
        eprintln!(
            "{}",
            CliError::new(
                out.exit_code,
                format!("{}: {}", f.category, f.message),
                out.hint.clone()
            )
            .render()
        );
    }
    Ok(out.exit_code)
}
