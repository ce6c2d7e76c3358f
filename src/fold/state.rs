//! The replay state: everything the fold derives from the journal. Nothing else in pvisor
//! holds state that matters; the engine, the result, progress and audit read this.

use journal_format::event::*;
use serde::Serialize;
use std::collections::BTreeMap;

/// The phase state machine:
/// `empty → requested → parsed → validated → prepared → replaying(k) → replayed →
/// continuing → continued → finished`, or `failed` from any non-terminal phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "phase", content = "batch")]
pub enum Phase {
    Empty,
    Requested,
    Parsed,
    Validated,
    Prepared,
    /// Inside batch k (started, not finished).
    Replaying(u64),
    /// Between batches: batch k finished, the next not started.
    BatchDone(u64),
    Replayed,
    Continuing,
    Continued,
    Finished,
    Failed,
}

impl Phase {
    pub fn name(&self) -> String {
        match self {
            Phase::Replaying(k) => format!("replaying batch {k}"),
            Phase::BatchDone(k) => format!("batch {k} done"),
            other => serde_json::to_value(other)
                .ok()
                .and_then(|v| v.get("phase").and_then(|p| p.as_str()).map(String::from))
                .unwrap_or_default(),
        }
    }
    pub fn is_terminal(&self) -> bool {
        matches!(self, Phase::Finished | Phase::Failed)
    }
}

/// What the journal says about one tool call of the prefix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallState {
    pub batch: u64,
    pub call: u64,
    pub call_id: String,
    pub tool: String,
    pub class: CallClass,
    pub args_digest: String,
    /// Times a `tool_call_started` was recorded (>1 after an in-doubt re-run).
    pub starts: u64,
    pub finished: Option<ToolCallFinished>,
    pub compared: Option<ObservationCompared>,
    pub in_doubt_decisions: Vec<InDoubtDecision>,
}

impl CallState {
    /// In-doubt decisions that allow a re-run (`stopped` does not).
    pub fn accepted_decisions(&self) -> usize {
        self.in_doubt_decisions
            .iter()
            .filter(|d| d.allows_rerun())
            .count()
    }
    /// Started without a recorded outcome.
    pub fn in_doubt(&self) -> bool {
        self.starts > 0 && self.finished.is_none()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BridgeState {
    /// The first bridge start (its prefix is the rebuilt prefix).
    pub started: Option<BridgeStarted>,
    /// Bridges of resumed continuation attempts (longer prefixes).
    pub restarts: Vec<BridgeStarted>,
    pub validated: u64,
    pub rejected: u64,
    pub side_requests: u64,
    pub injections: u64,
    /// Whether main request 1 was validated as ending at O′N.
    pub first_request_ok: Option<bool>,
    /// Requests beyond the live step budget (answered so the agent stops; not errors).
    pub budget_stops: u64,
    /// Every refused request: why, its first difference and its kept body.
    pub refusals: Vec<Refused>,
    /// Items the adapters' declared rules removed from requests.
    pub removed: Vec<journal_format::event::RemovedItem>,
}

/// One refused model request.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Refused {
    pub seq: u64,
    /// The main request count when it was refused.
    pub n: u64,
    pub reason: String,
    pub difference: Option<String>,
    /// The blob holding its body (secrets redacted).
    pub blob: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Progress {
    pub batches_total: u64,
    pub batches_done: u64,
    pub calls_total: u64,
    pub calls_done: u64,
    pub live_steps: u64,
    pub live_budget: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayState {
    pub phase: Phase,
    pub request: Option<RunRequested>,
    pub parsed: Option<TrajectoryParsed>,
    pub boundary: Option<BoundaryValidated>,
    /// Keyed by (batch, call).
    pub calls: BTreeMap<(u64, u64), CallState>,
    /// Workspace digest after each finished batch.
    pub batch_digests: BTreeMap<u64, String>,
    pub sessions: BTreeMap<String, SessionWritten>,
    pub bridge: BridgeState,
    pub continuations: Vec<ContinuationStarted>,
    pub steps: Vec<ContinuationStep>,
    /// Steps recorded since the last `continuation_started`.
    pub steps_this_attempt: u64,
    /// Steps a resumed attempt asked again (see the fold), in journal order.
    pub superseded_steps: Vec<ContinuationStep>,
    /// In-doubt decisions about interrupted live steps.
    pub live_in_doubt: Vec<InDoubtResolved>,
    /// Workspace checkpoints, keyed by (batch, call); batch 0 = live step `call`. The first
    /// one journaled for a key is kept (it precedes every start of that call).
    pub checkpoints: BTreeMap<(u64, u64), WorkspaceCheckpointed>,
    /// Restores of the workspace to a checkpoint, in journal order.
    pub restores: Vec<WorkspaceRestored>,
    pub agent_exit: Option<AgentExited>,
    pub failure: Option<RunFailed>,
    pub finished: Option<RunFinished>,
    pub recoveries: Vec<Recovered>,
    pub resumes: u64,
    /// The run is stopped on an in-doubt mutating call until a resume accepts a re-run.
    pub blocked: Option<String>,
    pub last_seq: u64,
    pub events: u64,
    pub first_at_ms: Option<u64>,
    pub last_at_ms: Option<u64>,
}

impl Default for ReplayState {
    fn default() -> Self {
        ReplayState {
            phase: Phase::Empty,
            request: None,
            parsed: None,
            boundary: None,
            calls: BTreeMap::new(),
            batch_digests: BTreeMap::new(),
            sessions: BTreeMap::new(),
            bridge: BridgeState::default(),
            continuations: Vec::new(),
            steps: Vec::new(),
            steps_this_attempt: 0,
            superseded_steps: Vec::new(),
            live_in_doubt: Vec::new(),
            checkpoints: BTreeMap::new(),
            restores: Vec::new(),
            agent_exit: None,
            failure: None,
            finished: None,
            recoveries: Vec::new(),
            resumes: 0,
            blocked: None,
            last_seq: 0,
            events: 0,
            first_at_ms: None,
            last_at_ms: None,
        }
    }
}

impl ReplayState {
    /// The index of the next batch a `batches_listed` must list, while the parse's summaries
    /// are still incomplete (format 1.7).
    pub fn batches_to_list(&self) -> Option<u64> {
        let p = self.parsed.as_ref()?;
        let listed = p.batches.len() as u64;
        (p.batch_count? > listed).then_some(listed + 1)
    }
    pub fn mode(&self) -> Option<Mode> {
        self.request.as_ref().map(|r| r.mode)
    }
    pub fn after_step(&self) -> u64 {
        self.request.as_ref().map(|r| r.after_step).unwrap_or(0)
    }
    pub fn progress(&self) -> Progress {
        let after = self.after_step();
        let calls_total = self
            .parsed
            .as_ref()
            .map(|p| {
                p.batches
                    .iter()
                    .take(after as usize)
                    .map(|b| b.calls.len() as u64)
                    .sum()
            })
            .unwrap_or(0);
        Progress {
            batches_total: after,
            batches_done: self.batch_digests.len() as u64,
            calls_total,
            calls_done: self.calls.values().filter(|c| c.finished.is_some()).count() as u64,
            live_steps: self.steps.len() as u64,
            live_budget: self.boundary.as_ref().and_then(|b| b.live_budget),
        }
    }
    /// The call that started and has no outcome, if any (at most one: calls run one at a time).
    pub fn in_doubt(&self) -> Option<&CallState> {
        self.calls.values().find(|c| c.in_doubt())
    }
    pub fn any_stale(&self) -> bool {
        self.calls
            .values()
            .any(|c| c.finished.as_ref().map(|f| f.stale).unwrap_or(false))
    }
}
