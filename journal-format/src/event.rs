//! The event schema: every step of a replay's lifecycle, in the order a run appends them.
//!
//! Each event is a record `kind` (u16, stable forever) plus a payload: the MessagePack
//! encoding (rmp-serde, *named* fields, so fields are self-describing) of the body struct.
//!
//! Evolution rules (see SPEC.md §7):
//! - a new optional field (`#[serde(default)]`) is a minor version bump;
//! - a new event kind is a minor version bump; readers that do not know it decode it as
//!   [`Event::Unknown`] and the fold refuses it (data is never skipped silently);
//! - removing or retyping a field, or reusing a kind number, is a major bump.
//!
//! Privacy rule: no event carries the boundary prompt's plaintext, an API key, or the body of
//! a model request or response: only lengths and digests. Large payloads (observations,
//! diffs, plans) go to the content-addressed blob store and events hold their BLAKE3 hash.
//!
//! Digest conventions: `sha256:<hex>` for digests users compare with other tools (source
//! trajectory, boundary prompt), `blake3:<hex>` for everything else; blob references are the
//! bare BLAKE3 hex that names the blob file.

use serde::{Deserialize, Serialize};

use crate::error::DecodeError;

/// How the run was asked to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Validate and build the native prefix with the original observations; run nothing.
    PrepareOnly,
    /// Replay the prefix and rebuild the native session; send no model request.
    ReplayOnly,
    /// Replay, rebuild, then continue with the real agent.
    Continue,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PromptFacts {
    /// Length in Unicode scalar values.
    pub length_chars: u64,
    /// `sha256:<hex>` of the UTF-8 bytes.
    pub sha256: String,
}

/// How a replayed call may be treated (the adapter's classification).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallClass {
    /// Only reads the workspace: safe to run again after a crash.
    ReadOnly,
    /// Changes the workspace or the world.
    Mutating,
    /// Its observation cannot be regenerated (sub-agent, web…).
    NonRegenerable,
    /// Not known to the adapter.
    Unknown,
}

impl CallClass {
    pub fn as_str(self) -> &'static str {
        match self {
            CallClass::ReadOnly => "read_only",
            CallClass::Mutating => "mutating",
            CallClass::NonRegenerable => "non_regenerable",
            CallClass::Unknown => "unknown",
        }
    }
}

/// What was decided about a call (or live step) that started before a crash and has no
/// recorded outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InDoubtDecision {
    /// A read-only call runs again.
    RerunReadOnly,
    /// (1.2) The workspace was restored to the call's checkpoint; it runs again, once.
    RerunRestored,
    /// Runs again under `--accept-at-least-once` (it may have run twice).
    RerunAccepted,
    /// Not run again; the run stops (exit 31) until a later resume accepts a re-run.
    Stopped,
}

impl InDoubtDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            InDoubtDecision::RerunReadOnly => "rerun_read_only",
            InDoubtDecision::RerunRestored => "rerun_restored",
            InDoubtDecision::RerunAccepted => "rerun_accepted",
            InDoubtDecision::Stopped => "stopped",
        }
    }
    /// Whether the decision allows the call to run again.
    pub fn allows_rerun(self) -> bool {
        self != InDoubtDecision::Stopped
    }
}

/// The failure categories of the result protocol (each with a stable exit code, see
/// `pvisor::outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureCategory {
    ConfigurationError,
    TrajectoryError,
    UnsupportedAgent,
    UnsupportedVersion,
    WorkspaceError,
    ExecutorError,
    AmbiguousExecution,
    ContinuationError,
    ModelRateLimit,
    ModelInternalError,
    ModelConnectionError,
    JournalError,
    InternalError,
}

impl FailureCategory {
    pub const ALL: [FailureCategory; 13] = [
        FailureCategory::ConfigurationError,
        FailureCategory::TrajectoryError,
        FailureCategory::UnsupportedAgent,
        FailureCategory::UnsupportedVersion,
        FailureCategory::WorkspaceError,
        FailureCategory::ExecutorError,
        FailureCategory::AmbiguousExecution,
        FailureCategory::ContinuationError,
        FailureCategory::ModelRateLimit,
        FailureCategory::ModelInternalError,
        FailureCategory::ModelConnectionError,
        FailureCategory::JournalError,
        FailureCategory::InternalError,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCategory::ConfigurationError => "configuration_error",
            FailureCategory::TrajectoryError => "trajectory_error",
            FailureCategory::UnsupportedAgent => "unsupported_agent",
            FailureCategory::UnsupportedVersion => "unsupported_version",
            FailureCategory::WorkspaceError => "workspace_error",
            FailureCategory::ExecutorError => "executor_error",
            FailureCategory::AmbiguousExecution => "ambiguous_execution",
            FailureCategory::ContinuationError => "continuation_error",
            FailureCategory::ModelRateLimit => "model_rate_limit",
            FailureCategory::ModelInternalError => "model_internal_error",
            FailureCategory::ModelConnectionError => "model_connection_error",
            FailureCategory::JournalError => "journal_error",
            FailureCategory::InternalError => "internal_error",
        }
    }
    /// Failures a later retry of the same request may not meet again.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            FailureCategory::ModelRateLimit
                | FailureCategory::ModelInternalError
                | FailureCategory::ModelConnectionError
        )
    }
}

impl std::fmt::Display for FailureCategory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The model source of a continuation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum UpstreamProtocol {
    #[default]
    Anthropic,
    OpenaiResponses,
    OpenaiChat,
    /// pvisor's built-in scripted model (`--model-script`).
    Scripted,
    /// The agent's own protocol (no `--model-protocol` given).
    Native,
}

impl UpstreamProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamProtocol::Anthropic => "anthropic",
            UpstreamProtocol::OpenaiResponses => "openai-responses",
            UpstreamProtocol::OpenaiChat => "openai-chat",
            UpstreamProtocol::Scripted => "scripted",
            UpstreamProtocol::Native => "native",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ModelUpstream {
    pub protocol: UpstreamProtocol,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    /// The name of the environment variable holding the key (never the key).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// `blake3:<hex>` of the model script, for a scripted upstream.
    #[serde(default)]
    pub script_digest: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRequested {
    pub run_id: String,
    /// `blake3:<hex>` of the canonical request (which itself holds only the prompt digest).
    pub request_digest: String,
    /// The canonical request (JSON, prompt plaintext replaced by its facts), so that a resume
    /// reruns exactly what was asked.
    pub request_json: String,
    pub agent: String,
    #[serde(default)]
    pub agent_version: Option<String>,
    #[serde(default)]
    pub agent_entrypoint: Option<String>,
    pub mode: Mode,
    pub after_step: u64,
    #[serde(default)]
    pub max_steps: Option<u64>,
    #[serde(default)]
    pub boundary_prompt: Option<PromptFacts>,
    pub source_path: String,
    pub workspace: String,
    pub state_dir: String,
    pub output_dir: String,
    pub pvisor_version: String,
    #[serde(default)]
    pub model: Option<ModelUpstream>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallSummary {
    pub call_id: String,
    pub tool: String,
    /// `blake3:<hex>` of the canonical JSON arguments.
    pub args_digest: String,
    pub class: CallClass,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchSummary {
    pub index: u64,
    pub model_turn: u64,
    /// Native locator, e.g. `line:34`.
    pub locator: String,
    pub calls: Vec<CallSummary>,
    pub complete: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrajectoryParsed {
    pub source_path: String,
    /// `sha256:<hex>` of the source file bytes.
    pub source_sha256: String,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub recorded_version: Option<String>,
    pub model_turns: u64,
    /// The batches, or the first of them when `batch_count` says there are more.
    pub batches: Vec<BatchSummary>,
    /// Blob holding the full plan (JSON).
    pub plan_blob: String,
    /// (1.7) The number of batches of the trajectory, when larger than `batches`: the others
    /// follow in `batches_listed` events, in order, before `boundary_validated`. Absent when
    /// `batches` holds them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_count: Option<u64>,
}

/// (1.7) The next batch summaries of a trajectory too long for one `trajectory_parsed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchesListed {
    /// The index of the first batch listed here (1-based, one past the last listed before).
    pub first: u64,
    pub batches: Vec<BatchSummary>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundaryValidated {
    pub after_step: u64,
    /// Tool calls in batches 1..=after_step.
    pub prefix_tool_calls: u64,
    /// Model replies up to and including batch `after_step`.
    pub prefix_model_turns: u64,
    pub max_boundary: u64,
    /// Live steps the continuation may take (`max_steps - prefix_model_turns`), if budgeted.
    #[serde(default)]
    pub live_budget: Option<u64>,
    /// Calls whose original observation will be reused (allowed stale): `batch:call` ids.
    #[serde(default)]
    pub stale_calls: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchStarted {
    pub batch: u64,
    pub calls: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallStarted {
    pub batch: u64,
    /// 0-based position in the batch.
    pub call: u64,
    pub call_id: String,
    pub tool: String,
    pub args_digest: String,
    pub class: CallClass,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallFinished {
    pub batch: u64,
    pub call: u64,
    pub call_id: String,
    #[serde(default)]
    pub exit_code: Option<i64>,
    pub is_error: bool,
    pub duration_ms: u64,
    /// `blake3:<hex>` of the observation text.
    pub observation_digest: String,
    /// Blob holding the observation (JSON: text, is_error, native).
    pub observation_blob: String,
    pub observation_len: u64,
    /// The original observation was reused (allowed stale), not regenerated.
    #[serde(default)]
    pub stale: bool,
    /// Workspace-relative paths the call wrote, when known.
    #[serde(default)]
    pub touched: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservationCompared {
    pub batch: u64,
    pub call: u64,
    pub call_id: String,
    pub equal: bool,
    /// Equal once the declared dynamic fields are masked.
    #[serde(default)]
    pub equal_masked: bool,
    #[serde(default)]
    pub diff_digest: Option<String>,
    #[serde(default)]
    pub diff_blob: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchFinished {
    pub batch: u64,
    /// `blake3:<hex>` over (path, content digest) of every path the completed batches touched.
    pub workspace_digest: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionRole {
    Prepared,
    Reconstructed,
    Continued,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionWritten {
    pub role: SessionRole,
    pub path: String,
    pub digest: String,
    /// Messages/records in the session file.
    #[serde(default)]
    pub records: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BridgeStarted {
    /// Always a 127.0.0.1 address.
    pub listen: String,
    pub protocol: String,
    pub upstream: String,
    /// `blake3:<hex>` of the canonical prefix the first request must carry.
    pub prefix_digest: String,
    pub prefix_items: u64,
}

/// One item the bridge removed from a request by an adapter's declared rule (format 1.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RemovedItem {
    /// The rule's name for the item (`claude:date_change_notice`, `claude:resume_text_block`…).
    pub kind: String,
    /// `blake3:<hex>` of the removed item's canonical JSON.
    pub digest: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct BridgeRequestValidated {
    /// 1-based count of main (non-side) requests.
    pub n: u64,
    pub request_digest: String,
    pub prefix_digest: String,
    /// Which transport items were removed (names like `claude:resume_text_block`).
    pub removed: Vec<String>,
    pub boundary_prompt_injected: bool,
    /// The request matched the expected prefix and (for n = 1) ended at O′N.
    pub ok: bool,
    #[serde(default)]
    pub reason: Option<String>,
    /// A side request (title generation, token count) forwarded without prefix validation.
    #[serde(default)]
    pub side: bool,
    /// Format 1.1: what was removed, with digests (same order as `removed`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed_items: Vec<RemovedItem>,
    /// Format 1.1: for a refused request, the blob holding its body as the agent sent it,
    /// with every secret (API keys, the per-run bridge key, the boundary prompt) replaced by
    /// `[redacted]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_request_blob: Option<String>,
    /// Format 1.1: for a refused request, the first difference from what was expected, in
    /// words (e.g. "1 message after O′N: role=system, text begins `# Environment…`").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difference: Option<String>,
    /// Format 1.1: a main request beyond the live step budget, answered so that the agent
    /// stops (`ok` is false, but it is the budget's end, not an error).
    #[serde(default, skip_serializing_if = "is_false")]
    pub budget_exhausted: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One host or time snapshot in the agent's native session that was set to what the agent
/// observes at continuation time, so that it announces no change (format 1.1). Only
/// snapshots the model never sees are changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Neutralized {
    /// `<agent>:<snapshot field>` (`claude:environment.osVersion`, `claude:date`…).
    pub fact: String,
    /// The value the recorded session held.
    pub recorded: String,
    /// The value written (what the agent observes now).
    pub live: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ContinuationStarted {
    pub command: Vec<String>,
    #[serde(default)]
    pub agent_version: Option<String>,
    /// Live steps allowed.
    #[serde(default)]
    pub budget: Option<u64>,
    /// 1 for the first start, 2+ when resumed after a crash.
    #[serde(default)]
    pub attempt: u64,
    /// Format 1.1: host/time snapshots set to the live values before the agent started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub neutralized: Vec<Neutralized>,
    /// Format 1.4: this attempt starts the agent again from the rebuilt session (the
    /// boundary), not from the agent's own session of the earlier attempts: an agent that
    /// cannot resume its session after a crash. Every earlier live step is superseded and the
    /// workspace was restored to the checkpoint of the first live step that ran tools.
    #[serde(default, skip_serializing_if = "is_false")]
    pub from_boundary: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinuationStep {
    /// 1-based live step number.
    pub n: u64,
    pub action_digest: String,
    #[serde(default)]
    pub tools: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    NotStarted,
    Completed,
    MaxSteps,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentExited {
    pub status: AgentStatus,
    #[serde(default)]
    pub code: Option<i64>,
    #[serde(default)]
    pub signal: Option<i64>,
    #[serde(default)]
    pub message: Option<String>,
    /// Set when a watchdog of the runner stopped the agent (format 1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<StoppedBy>,
}

/// Why a runner watchdog stopped the agent (format 1.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The live step budget was reached and the agent asked for one more model reply.
    StepBudget,
    /// The agent wrote nothing for the idle limit.
    Idle,
}

/// A runner watchdog that stopped the agent (format 1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoppedBy {
    /// The adapter's name for this watchdog: the key of its entry in the result's
    /// `metadata` (e.g. `opencode_step_budget`).
    pub name: String,
    pub reason: StopReason,
    /// The signal sent to the agent's process group (`SIGINT`, `SIGTERM`).
    pub signal: String,
    /// Live steps answered when it fired.
    pub steps: u64,
    #[serde(default)]
    pub budget: Option<u64>,
    /// The idle limit, for `idle`.
    #[serde(default)]
    pub idle_seconds: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovered {
    pub offset: u64,
    pub length: u64,
    pub quarantine_path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InDoubtResolved {
    pub batch: u64,
    pub call: u64,
    pub call_id: String,
    pub tool: String,
    pub decision: InDoubtDecision,
}

/// A snapshot of the workspace taken right before a call that changes it runs (format 1.2):
/// `manifest_blob` lists every file, directory and symlink under the workspace with its
/// content blob, mode and modification time. A resumed run restores it before it runs the
/// call again, so the workspace sees the call's effects once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceCheckpointed {
    /// The batch (≥ 1) of a replayed call, or 0 for a live continuation step.
    pub batch: u64,
    /// The call index in the batch, or the live step number when `batch` is 0.
    pub call: u64,
    /// Blob of the manifest (JSON, `pvisor.workspace-manifest/v1`).
    pub manifest_blob: String,
    /// Files, directories and symlinks listed.
    pub entries: u64,
    /// Bytes of file content stored for the first time by this checkpoint.
    pub new_bytes: u64,
    /// Files listed without their content (over the size cap): a restore that would need
    /// them is impossible, and the in-doubt policy decides instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unstored: Vec<String>,
}

/// The workspace was restored to a checkpoint before an in-doubt call or live step ran
/// again (format 1.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceRestored {
    pub batch: u64,
    pub call: u64,
    pub manifest_blob: String,
    /// Files written back (content or metadata).
    pub written: u64,
    /// Paths removed (created after the checkpoint).
    pub removed: u64,
}

/// (1.5) A tool call made by the code of a call rather than by the model (the `tools.*`
/// calls of a Codex code-mode `exec` cell), written when it finished, before the enclosing
/// call's `tool_call_finished`. Several may be journaled for one call; they belong to the
/// attempt of that call started last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InnerCallFinished {
    /// The enclosing call.
    pub batch: u64,
    pub call: u64,
    /// 1-based number of the inner call within the replay process.
    pub seq: u64,
    pub tool: String,
    /// `blake3:<hex>` of the inner call's input (JSON).
    pub input_digest: String,
    /// Blob holding `{"input", "result"}` (JSON): what the code passed and what it received.
    pub blob: String,
    /// False when the code received a rejection (an error text) instead of a result.
    pub ok: bool,
    pub duration_ms: u64,
    /// Workspace-relative paths it wrote, when known.
    #[serde(default)]
    pub touched: Vec<String>,
}

/// (1.6) The content of a small blob, carried by the journal so that it is durable with the
/// journal's own fdatasync (a new blob file costs a file and a directory sync of its own).
/// Appended right before the event that names the blob, at every store of it. The blob file
/// is still written, as the copy readers open; after an operating-system crash it may be
/// missing or incomplete, and the next attempt of the run writes it again from this event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobStored {
    /// The blob's name: the BLAKE3 hex of `bytes`.
    pub blob: String,
    #[serde(with = "serde_bytes")]
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resumed {
    /// The sequence number of the last event before this resumption.
    pub from_seq: u64,
    pub pvisor_version: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFinished {
    /// `blake3:<hex>` of the result JSON the fold produced when the run ended.
    pub result_digest: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFailed {
    pub category: FailureCategory,
    pub message: String,
    pub retryable: bool,
}

macro_rules! events {
    ($( $kind:literal => $name:ident ($body:ty) ),* $(,)?) => {
        /// One journal event. The number is the record `kind`, stable forever.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Event {
            $( $name($body), )*
            /// A kind this reader does not know (written by a newer minor version).
            Unknown { kind: u16, payload: Vec<u8> },
        }

        impl Event {
            pub fn kind(&self) -> u16 {
                match self { $( Event::$name(_) => $kind, )* Event::Unknown { kind, .. } => *kind }
            }
            /// The snake_case name used in exports and reports.
            pub fn name(&self) -> &'static str {
                match self { $( Event::$name(_) => kind_name($kind), )* Event::Unknown { .. } => "unknown" }
            }
            pub fn encode_payload(&self) -> Vec<u8> {
                match self {
                    $( Event::$name(b) => rmp_serde::to_vec_named(b).expect("event bodies always encode"), )*
                    Event::Unknown { payload, .. } => payload.clone(),
                }
            }
            pub fn decode(kind: u16, payload: &[u8]) -> Result<Event, DecodeError> {
                match kind {
                    $( $kind => rmp_serde::from_slice::<$body>(payload)
                        .map(Event::$name)
                        .map_err(|e| DecodeError::Payload { kind, message: e.to_string() }), )*
                    _ => Ok(Event::Unknown { kind, payload: payload.to_vec() }),
                }
            }
            /// The body as a JSON value (for exports and reports).
            pub fn body_json(&self) -> serde_json::Value {
                match self {
                    $( Event::$name(b) => serde_json::to_value(b).unwrap_or(serde_json::Value::Null), )*
                    Event::Unknown { .. } => serde_json::Value::Null,
                }
            }
            /// The body, to serialize as it is (what [`Event::body_json`] holds, written
            /// without building the value first; an unknown kind is a unit, JSON `null`).
            pub fn body(&self) -> EventBody<'_> {
                EventBody(self)
            }
        }

        /// An event's body as a [`Serialize`] (see [`Event::body`]).
        pub struct EventBody<'a>(&'a Event);

        impl Serialize for EventBody<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self.0 {
                    $( Event::$name(b) => b.serialize(s), )*
                    Event::Unknown { .. } => s.serialize_unit(),
                }
            }
        }

        /// Every known kind with its name.
        pub const KINDS: &[(u16, &str)] = &[ $( ($kind, kind_name($kind)) ),* ];
    };
}

const fn kind_name(kind: u16) -> &'static str {
    match kind {
        1 => "run_requested",
        2 => "trajectory_parsed",
        3 => "boundary_validated",
        4 => "batch_started",
        5 => "tool_call_started",
        6 => "tool_call_finished",
        7 => "observation_compared",
        8 => "batch_finished",
        9 => "session_written",
        10 => "bridge_started",
        11 => "bridge_request_validated",
        12 => "continuation_started",
        13 => "continuation_step",
        14 => "agent_exited",
        15 => "recovered",
        16 => "in_doubt_resolved",
        17 => "resumed",
        18 => "run_finished",
        19 => "run_failed",
        20 => "workspace_checkpointed",
        21 => "workspace_restored",
        22 => "inner_call_finished",
        23 => "blob_stored",
        24 => "batches_listed",
        _ => "unknown",
    }
}

events! {
    1 => RunRequested(Box<RunRequested>),
    2 => TrajectoryParsed(TrajectoryParsed),
    3 => BoundaryValidated(BoundaryValidated),
    4 => BatchStarted(BatchStarted),
    5 => ToolCallStarted(ToolCallStarted),
    6 => ToolCallFinished(ToolCallFinished),
    7 => ObservationCompared(ObservationCompared),
    8 => BatchFinished(BatchFinished),
    9 => SessionWritten(SessionWritten),
    10 => BridgeStarted(BridgeStarted),
    11 => BridgeRequestValidated(BridgeRequestValidated),
    12 => ContinuationStarted(ContinuationStarted),
    13 => ContinuationStep(ContinuationStep),
    14 => AgentExited(AgentExited),
    15 => Recovered(Recovered),
    16 => InDoubtResolved(InDoubtResolved),
    17 => Resumed(Resumed),
    18 => RunFinished(RunFinished),
    19 => RunFailed(RunFailed),
    20 => WorkspaceCheckpointed(WorkspaceCheckpointed),
    21 => WorkspaceRestored(WorkspaceRestored),
    22 => InnerCallFinished(InnerCallFinished),
    23 => BlobStored(BlobStored),
    24 => BatchesListed(BatchesListed),
}
