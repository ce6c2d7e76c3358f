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

/// What the fold keeps of the parse: the trajectory's identity and, per batch, only its
/// number of calls (the summaries themselves stay in the journal; a million-batch listing
/// costs the state 4 MB, not the listing's size).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parsed {
    pub source_path: String,
    /// `sha256:<hex>` of the source file bytes.
    pub source_sha256: String,
    pub session_id: Option<String>,
    pub recorded_version: Option<String>,
    pub model_turns: u64,
    pub plan_blob: String,
    /// The trajectory's number of batches (listed or still to be listed).
    pub batch_count: u64,
    /// The number of calls of each batch listed so far, batch 1 first.
    pub calls_per_batch: Vec<u32>,
}

impl Parsed {
    pub(super) fn of(t: &TrajectoryParsed) -> Parsed {
        let mut p = Parsed {
            source_path: t.source_path.clone(),
            source_sha256: t.source_sha256.clone(),
            session_id: t.session_id.clone(),
            recorded_version: t.recorded_version.clone(),
            model_turns: t.model_turns,
            plan_blob: t.plan_blob.clone(),
            batch_count: t.batch_count.unwrap_or(t.batches.len() as u64),
            calls_per_batch: Vec::new(),
        };
        p.list(&t.batches);
        p
    }
    pub(super) fn list(&mut self, batches: &[BatchSummary]) {
        self.calls_per_batch
            .extend(batches.iter().map(|b| b.calls.len() as u32));
    }
    /// Batches listed so far.
    pub fn listed(&self) -> u64 {
        self.calls_per_batch.len() as u64
    }
    /// The number of calls of batch `k` (1-based), if listed.
    pub fn calls_of(&self, k: u64) -> Option<u64> {
        let i = usize::try_from(k.checked_sub(1)?).ok()?;
        self.calls_per_batch.get(i).map(|&n| n as u64)
    }
}

/// Counts over every call the journal finished or compared, kept as the fold goes: they
/// stay right when a streaming reader takes finished batches' calls out of the state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CallTally {
    pub finished: u64,
    /// Finished with the recorded observation reused (`stale`).
    pub stale: u64,
    /// Compared equal to the recorded observation.
    pub equal: u64,
    /// Compared equal, or equal once the declared dynamic fields are masked.
    pub equal_masked: u64,
    /// Compared different even with the dynamic fields masked.
    pub differ: u64,
}

/// What a streaming reader takes out of the state once batch `batch` finished
/// ([`ReplayState::take_finished_batch`]): no later event refers to it. It holds the
/// batches up to `batch` not taken before (one batch when taken after each).
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedBatch {
    pub batch: u64,
    /// Their calls, in (batch, call) order.
    pub calls: Vec<CallState>,
    /// The workspace checkpoints taken before their calls, in (batch, call) order.
    pub checkpoints: Vec<WorkspaceCheckpointed>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayState {
    pub phase: Phase,
    pub request: Option<RunRequested>,
    pub parsed: Option<Parsed>,
    pub boundary: Option<BoundaryValidated>,
    /// Keyed by (batch, call). A streaming reader takes each finished batch's calls out
    /// ([`ReplayState::take_finished_batch`]); `tally` counts them all.
    pub calls: BTreeMap<(u64, u64), CallState>,
    pub tally: CallTally,
    /// Batches finished.
    pub batches_done: u64,
    /// The last finished batch and the workspace digest it left.
    pub last_batch_digest: Option<(u64, String)>,
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
            tally: CallTally::default(),
            batches_done: 0,
            last_batch_digest: None,
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
        let listed = p.listed();
        (p.batch_count > listed).then_some(listed + 1)
    }
    pub fn mode(&self) -> Option<Mode> {
        self.request.as_ref().map(|r| r.mode)
    }
    pub fn after_step(&self) -> u64 {
        self.request.as_ref().map(|r| r.after_step).unwrap_or(0)
    }
    pub fn progress(&self) -> Progress {
        let after = self.after_step() as usize;
        let calls_total = self
            .parsed
            .as_ref()
            .map(|p| {
                p.calls_per_batch
                    .iter()
                    .take(after)
                    .map(|&n| n as u64)
                    .sum()
            })
            .unwrap_or(0);
        Progress {
            batches_total: after as u64,
            batches_done: self.batches_done,
            calls_total,
            calls_done: self.tally.finished,
            live_steps: self.steps.len() as u64,
            live_budget: self.boundary.as_ref().and_then(|b| b.live_budget),
        }
    }
    /// The call that started and has no outcome, if any (at most one: calls run one at a time).
    pub fn in_doubt(&self) -> Option<&CallState> {
        self.calls.values().find(|c| c.in_doubt())
    }
    pub fn any_stale(&self) -> bool {
        self.tally.stale > 0
    }
    /// Take batch `k`'s calls and checkpoints out of the state, once it finished: what a
    /// reader that streams the journal (audit, show, verify) does after each
    /// `batch_finished`, so that its memory does not grow with the run. The fold needs
    /// nothing of a finished batch again; `tally` and `batches_done` still count it. The
    /// engine keeps them (the rebuild reads every call).
    pub fn take_finished_batch(&mut self, k: u64) -> FinishedBatch {
        let later = self.calls.split_off(&(k + 1, 0));
        let calls = std::mem::replace(&mut self.calls, later)
            .into_values()
            .collect();
        let keys: Vec<(u64, u64)> = self
            .checkpoints
            .range((1, 0)..(k + 1, 0))
            .map(|(key, _)| *key)
            .collect();
        let checkpoints = keys
            .iter()
            .filter_map(|key| self.checkpoints.remove(key))
            .collect();
        FinishedBatch {
            batch: k,
            calls,
            checkpoints,
        }
    }
}
