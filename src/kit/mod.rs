//! The adapter interface: what every agent adapter provides to the engine.
//!
//! Data flows one way: native file → [`Adapter::parse`] → [`Plan`] of batches →
//! the engine executes each [`ToolCall`] through [`Adapter::execute`] → the adapter
//! rebuilds the native session from fresh observations → continuation.
//!
//! Every type here is agent-neutral; agent specifics live in `crate::adapters::<agent>`.

pub mod args;
pub mod batches;
pub mod companion;
pub mod json_lines;
pub mod recorder;
pub mod registry;
pub mod rules;

pub use batches::{Batches, Shape, SpillError};
pub use registry::{AgentEntry, Capabilities, Registry, UnsupportedAgent, VersionRange};
pub use rules::{NoInserts, OwnPrompt, Removed, RequestRules, RuleRefusal, TrailingUserMessage};

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where a piece of the plan came from in the native file (1-based line numbers).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Locator {
    /// 1-based line of the record that holds the item (0 when the format has no lines).
    pub line: usize,
    /// A native id that names the item (message id, uuid, call id…), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_id: Option<String>,
}

/// A model-visible observation, as the agent showed it to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The text the model saw (for structured content: the concatenated text parts).
    pub text: String,
    /// Whether the agent flagged the result as an error.
    pub is_error: bool,
    /// The native content value, verbatim (e.g. a `tool_result.content` array), when it
    /// is not plain text. Rebuild uses it when the observation is reused unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<serde_json::Value>,
}

/// One tool call of a batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The agent's call id (`toolu_…`, `call_…`).
    pub call_id: String,
    /// The tool name exactly as the agent spelled it.
    pub tool: String,
    /// The arguments exactly as recorded.
    pub input: serde_json::Value,
    /// The observation recorded in the original trajectory, if the call completed there.
    pub original: Option<Observation>,
    pub locator: Locator,
}

/// The tool calls of one model reply. Batches are numbered from 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    pub index: usize,
    pub calls: Vec<ToolCall>,
    /// The model turn (1-based count of assistant replies) that issued this batch.
    pub model_turn: usize,
    pub locator: Locator,
    /// True when every call of the batch has a recorded result in the original.
    pub complete: bool,
}

/// The adapter's own parse of the native trajectory, carried in the [`Plan`] (opaque to the
/// engine; never serialized): what the adapter's tools, rebuild and continuation need beyond
/// the batches, without any global or mutex-held state.
#[derive(Clone, Default)]
pub struct Native(Option<std::sync::Arc<dyn std::any::Any + Send + Sync>>);

impl Native {
    pub fn new<T: std::any::Any + Send + Sync>(value: T) -> Self {
        Native(Some(std::sync::Arc::new(value)))
    }
    pub fn get<T: std::any::Any>(&self) -> Option<&T> {
        self.0.as_ref().and_then(|a| a.downcast_ref::<T>())
    }
    /// A shared handle (for values that outlive the plan borrow, e.g. a tool runner).
    pub fn arc<T: std::any::Any + Send + Sync>(&self) -> Option<std::sync::Arc<T>> {
        self.0.clone()?.downcast::<T>().ok()
    }
}

impl std::fmt::Debug for Native {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Native(..)"
        } else {
            "Native(none)"
        })
    }
}

impl PartialEq for Native {
    /// The native parse is derived from the same bytes as the rest of the plan.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// What an adapter extracted from a native trajectory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub agent: String,
    /// The agent version recorded in the trajectory, when it records one.
    pub recorded_version: Option<String>,
    /// The native session id.
    pub session_id: Option<String>,
    /// The working directory the original run used, when recorded.
    pub original_cwd: Option<PathBuf>,
    /// In memory, or spilled to a file when the trajectory is long (see [`batches`]).
    pub batches: Batches,
    /// Number of model replies in the whole trajectory.
    pub model_turns: usize,
    /// The adapter's parse (see [`Native`]).
    #[serde(skip)]
    pub native: Native,
}

impl Plan {
    /// This plan carrying the adapter's own parse (see [`Native`]).
    pub fn carrying<T: std::any::Any + Send + Sync>(mut self, native: T) -> Plan {
        self.native = Native::new(native);
        self
    }

    /// The highest boundary that may be selected: the number of leading complete batches.
    pub fn max_boundary(&self) -> usize {
        self.batches.max_boundary()
    }
}

/// How a tool call may be treated by replay and by crash resumption (journaled as is).
pub use journal_format::event::CallClass as ToolClass;

/// The outcome of re-executing one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutcome {
    pub observation: Observation,
    /// Exit status of the underlying process, for tools that run one.
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// Workspace paths (relative) the call wrote, for the workspace digest.
    #[serde(default)]
    pub touched: Vec<PathBuf>,
}

/// Everything a tool needs to run in the sandbox.
#[derive(Debug, Clone)]
pub struct ExecContext {
    /// The workspace root; file tools are confined to it.
    pub workspace: PathBuf,
    /// Where full tool output logs go.
    pub log_dir: PathBuf,
    /// The run's state directory: an agent's isolated home lives below it (tools that save
    /// files there, e.g. full outputs, write them where the continued agent will look).
    pub state_dir: PathBuf,
    /// Per-call timeout.
    pub timeout: std::time::Duration,
    /// The agent executable the run was given (`--agent-entrypoint`), for adapters whose
    /// tools run the agent's own code.
    pub agent_entrypoint: Option<PathBuf>,
}

impl ExecContext {
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }
}

/// What rebuild needs: the plan, the boundary and the observations to splice in (fresh
/// ones after a replay; the originals for prepare-only).
#[derive(Debug, Clone)]
pub struct RebuildRequest<'a> {
    pub source: &'a Path,
    pub plan: &'a Plan,
    pub after_step: usize,
    /// The observations of batches 1..=after_step.
    pub observations: Observations<'a>,
    pub workspace: &'a Path,
    /// The run's state directory: isolated agent homes/config dirs live below it.
    pub state_dir: &'a Path,
    /// Where the native session artifact is copied for the user (output dir).
    pub artifact_path: &'a Path,
    /// Whether rebuild may set what the agent's resume reads from the workspace (Claude: the
    /// mtimes of the files its read state names). False for the prepared session: prepare-only
    /// and the prepare step before a replay never touch the workspace.
    pub touch_workspace: bool,
    /// The agent executable the run was given (`--agent-entrypoint`), for adapters whose
    /// rebuild asks the agent's own code (OpenHands renders its prefix with the SDK).
    pub agent_entrypoint: Option<&'a Path>,
    /// Whether the real agent will continue this session (`Continue` mode): only then is
    /// [`RebuiltSession::prefix`] used, so an adapter whose prefix is costly to compute may
    /// leave it empty otherwise.
    pub for_continuation: bool,
}

/// The observations a rebuild splices in.
#[derive(Debug, Clone, Copy)]
pub enum Observations<'a> {
    /// The ones the trajectory recorded (the prepared session): nothing is replaced.
    Originals,
    /// Per call id: the fresh ones of a replay (stale reuses are the originals).
    Fresh(&'a std::collections::BTreeMap<String, Observation>),
}

impl<'a> RebuildRequest<'a> {
    /// The observations of batches 1..=after_step by call id (the originals are gathered
    /// from the plan).
    pub fn observation_map(
        &self,
    ) -> Result<std::borrow::Cow<'a, std::collections::BTreeMap<String, Observation>>, SpillError>
    {
        use std::borrow::Cow;
        match self.observations {
            Observations::Fresh(m) => Ok(Cow::Borrowed(m)),
            Observations::Originals => {
                let mut m = std::collections::BTreeMap::new();
                for b in self.plan.batches.range(0..self.after_step) {
                    for c in &b?.calls {
                        if let Some(o) = &c.original {
                            m.insert(c.call_id.clone(), o.clone());
                        }
                    }
                }
                Ok(Cow::Owned(m))
            }
        }
    }
}

/// A native session written for the agent to resume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RebuiltSession {
    /// The session file the agent will read (inside the isolated home/config dir).
    pub native_path: PathBuf,
    /// The copy in the output dir.
    pub artifact_path: PathBuf,
    /// `blake3:<hex>` of the file bytes.
    pub digest: String,
    pub records: u64,
    pub session_id: String,
    /// The canonical message prefix (the model-visible conversation up to O′N, in the
    /// agent's API protocol) the first continuation request must carry.
    pub prefix: Vec<serde_json::Value>,
}

/// Errors of rebuild and continuation.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    #[error("{0}")]
    Trajectory(#[from] crate::error::TrajectoryError),
    #[error("i/o error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("unsupported: {0}")]
    Unsupported(String),
    #[error("continuation failed: {0}")]
    Continuation(String),
}

/// A tool call made by the code of a call, not by the model (the `tools.*` calls of a Codex
/// code-mode cell): journaled as its own event inside the call's batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InnerCall {
    /// 1-based, in the order the calls finished within the replay process.
    pub seq: u64,
    pub tool: String,
    pub input: serde_json::Value,
    /// Whether the call resolved (`false`: the cell's promise was rejected with `result`).
    pub ok: bool,
    /// What the cell received: the result's JSON text, or the rejection text.
    pub result: String,
    pub duration_ms: u64,
    /// Workspace-relative paths it wrote.
    #[serde(default)]
    pub touched: Vec<PathBuf>,
}

/// Re-executes the calls of one replay process with an agent's semantics and output format,
/// keeping the state its tools share across calls (files read, shell cwd, running shells).
pub trait ToolRunner: Send {
    /// Called before the calls of a batch execute.
    fn before_batch(&mut self, _batch: &Batch) {}
    /// Re-execute one call in the sandbox.
    fn execute(&mut self, call: &ToolCall) -> Result<ToolOutcome, crate::error::ExecError>;
    /// [`execute`](Self::execute), reporting each [`InnerCall`] the call makes as it ends.
    fn execute_observed(
        &mut self,
        call: &ToolCall,
        _on_inner: &mut dyn FnMut(InnerCall),
    ) -> Result<ToolOutcome, crate::error::ExecError> {
        self.execute(call)
    }
}

/// One agent's replay semantics. Every agent adapter implements the same parts: parse,
/// tools (classify + a [`ToolRunner`] with the agent's own output format), rebuild,
/// continue. State lives in the values it returns (the [`Plan`]'s [`Native`], the runner),
/// never in the adapter.
pub trait Adapter: Send + Sync {
    /// The agent name used on the command line (`claude-code`, `codex`, …).
    fn name(&self) -> &'static str;
    /// The bytes of the native input at `path`, which [`Adapter::parse`] parses and the
    /// journal's lineage digests: the file itself by default. An agent whose sessions are
    /// folders (a conversation store of several files) returns one canonical byte form of the
    /// folder here, so that a resumed run can check the source did not change.
    fn read_input(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        std::fs::read(path)
    }
    /// Parse a native trajectory into a plan of batches (its own parse in `plan.native`).
    fn parse(&self, path: &Path, bytes: &[u8]) -> Result<Plan, crate::error::TrajectoryError>;
    /// Read and parse the trajectory at `path`: the plan and the `sha256:<hex>` of the bytes
    /// parsed. By default the file is read whole ([`Self::read_input`]) and then parsed; an
    /// adapter whose files grow large reads them once, as a stream, instead.
    fn parse_path(&self, path: &Path) -> Result<(Plan, String), crate::error::TrajectoryError> {
        let bytes = self.read_input(path).map_err(|e| {
            crate::error::TrajectoryError::new(
                path,
                0,
                "file",
                format!("cannot read the trajectory: {e}"),
            )
        })?;
        let plan = self.parse(path, &bytes)?;
        Ok((plan, crate::digest::sha256(&bytes)))
    }
    /// Whether this plan can be rebuilt (and, in `Continue` mode, continued) at boundary
    /// `after_step`: checked before any tool runs. A refusal names what is missing.
    fn check_plan(
        &self,
        _plan: &Plan,
        _after_step: usize,
        _mode: journal_format::event::Mode,
    ) -> Result<(), AdapterError> {
        Ok(())
    }
    /// The file extension of the native sessions pvisor writes (prepared, reconstructed,
    /// continued): by default the trajectory's own.
    fn session_extension(&self, source: &Path) -> String {
        source
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("jsonl")
            .to_string()
    }
    /// How a call may be treated (refused, re-run after a crash…).
    fn classify(&self, call: &ToolCall) -> ToolClass;

    /// Why a call classified [`ToolClass::Unknown`] is not replayed, in words for the user
    /// (default: none beyond the tool being unknown).
    fn refusal(&self, _call: &ToolCall) -> Option<String> {
        None
    }
    /// The runner of this process's calls. `completed` holds the calls the journal says
    /// completed (in order) and their recorded observations, so that tools keeping state
    /// across calls can rebuild it after a crash.
    fn tool_runner(
        &self,
        plan: &Plan,
        ctx: &ExecContext,
        completed: &[(ToolCall, Observation)],
    ) -> Result<Box<dyn ToolRunner>, AdapterError>;
    /// The observation text with dynamic fields (wall times, chunk ids…) masked, so that
    /// comparisons report equality of the rest. Identity by default.
    fn mask_dynamic(&self, _call: &ToolCall, text: &str) -> String {
        text.to_owned()
    }
    /// Whether the call's text is stdout and stderr merged as they arrive from two pipes (so
    /// that the order in which their lines interleave is timing, a dynamic field). No by
    /// default.
    fn streams_interleave(&self, _call: &ToolCall) -> bool {
        false
    }
    /// Write the native session the agent will resume, with the given observations.
    fn rebuild(&self, req: &RebuildRequest) -> Result<RebuiltSession, AdapterError>;
    /// The session [`Adapter::rebuild`] writes, for a run resumed after its agent already
    /// continued that session: writes the artifact copy only, never the agent's native file
    /// (it holds the live turns now) nor anything in the workspace.
    fn rebuild_for_resume(&self, _req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
        Err(AdapterError::Unsupported(format!(
            "resuming a `{}` continuation is not implemented",
            self.name()
        )))
    }
    /// The session [`Adapter::rebuild`] writes, written again for an agent that cannot
    /// resume its own session after a crash and starts over from the boundary: whatever the
    /// earlier attempt left in the agent's isolated home must not change what it sends.
    fn rebuild_for_restart(&self, req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
        self.rebuild(req)
    }
    /// The continuation of a rebuilt session with the real agent.
    fn continuation(
        &self,
        _req: &ContinueRequest,
    ) -> Result<Box<dyn crate::runner::ContinuationAgent>, AdapterError> {
        Err(AdapterError::Unsupported(format!(
            "continuing `{}` is not implemented",
            self.name()
        )))
    }
    /// The model replies to compare: A(N+1) of the original trajectory, and A′(N+1), the
    /// first live reply in the continued session.
    fn next_actions(
        &self,
        _plan: &Plan,
        _after_step: usize,
        _continued: Option<&Path>,
    ) -> (
        Option<crate::compare::next_action::Action>,
        Option<crate::compare::next_action::Action>,
    ) {
        (None, None)
    }
    /// How to record this agent's sessions with its real CLI (`pvisor certify`), when the
    /// adapter can.
    fn recorder(&self) -> Option<Box<dyn recorder::Recorder>> {
        None
    }
}

/// What a continuation needs.
#[derive(Debug, Clone)]
pub struct ContinueRequest<'a> {
    pub plan: &'a Plan,
    pub entrypoint: &'a Path,
    pub rebuilt: &'a RebuiltSession,
    pub workspace: &'a Path,
    pub state_dir: &'a Path,
    /// Where the cleaned continued session is copied (output dir).
    pub continued_artifact: &'a Path,
    pub model: Option<String>,
    /// `--boundary-user-prompt`, for agents that send it themselves
    /// ([`RequestRules::boundary_prompt_in_history`]); the bridge inserts it otherwise.
    pub boundary_prompt: Option<&'a str>,
}
