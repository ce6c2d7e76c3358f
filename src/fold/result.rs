//! The `sandbox-playback.result/v3` object, derived from the folded state and nothing else.
//! The schema is documented in `docs/result-protocol.md`.

use journal_format::event::{AgentStatus, FailureCategory, Mode};
use serde::{Deserialize, Serialize};

use super::state::{Phase, ReplayState};

pub const RESULT_SCHEMA: &str = "sandbox-playback.result/v3";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentInfo {
    #[serde(rename = "type")]
    pub kind: String,
    pub version: Option<String>,
    pub entrypoint: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Artifact {
    pub role: String,
    pub format: String,
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub category: FailureCategory,
    pub message: String,
}

/// The result protocol object. One shape for every outcome, early failures included.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayResult {
    pub schema_version: String,
    /// Furthest phase completed: `prepared` | `replayed` | `continued`, or null.
    pub phase: Option<String>,
    /// `verified` | `degraded`, or null when nothing was prepared.
    pub quality: Option<String>,
    pub agent_status: String,
    pub run_id: Option<String>,
    pub agent: Option<AgentInfo>,
    pub after_step: Option<u64>,
    pub replayed_tool_calls: u64,
    pub prefix_model_turns: u64,
    pub continued_steps: u64,
    pub state_dir: Option<String>,
    pub output_dir: Option<String>,
    pub artifacts: Vec<Artifact>,
    pub failure: Option<Failure>,
    pub retryable: bool,
    pub metadata: serde_json::Value,
}

/// Output-dir file names of the standard artifacts.
pub mod files {
    pub const RESULT: &str = "result.json";
    pub const PLAN: &str = "plan.json";
    pub const JOURNAL_EXPORT: &str = "journal.jsonl";
    pub const OBSERVATIONS: &str = "observation-comparison.json";
    pub const NEXT_ACTION: &str = "next-action-comparison.json";
}

fn status_name(s: AgentStatus) -> &'static str {
    match s {
        AgentStatus::NotStarted => "not_started",
        AgentStatus::Completed => "completed",
        AgentStatus::MaxSteps => "max_steps",
        AgentStatus::Failed => "failed",
    }
}

/// An early failure: nothing could be journaled (bad flags, unreadable state dir…).
pub fn early_failure(
    category: FailureCategory,
    message: &str,
    run_id: Option<String>,
    state_dir: Option<String>,
    output_dir: Option<String>,
) -> ReplayResult {
    ReplayResult {
        schema_version: RESULT_SCHEMA.into(),
        phase: None,
        quality: None,
        agent_status: "not_started".into(),
        run_id,
        agent: None,
        after_step: None,
        replayed_tool_calls: 0,
        prefix_model_turns: 0,
        continued_steps: 0,
        state_dir,
        output_dir,
        artifacts: vec![],
        failure: Some(Failure {
            category,
            message: message.into(),
        }),
        retryable: false,
        metadata: serde_json::json!({}),
    }
}

/// Derive the result from the state. Pure.
pub fn derive(s: &ReplayState) -> ReplayResult {
    let req = s.request.as_ref();
    let blocked = s
        .blocked
        .as_ref()
        .filter(|_| !s.phase.is_terminal())
        .map(|m| Failure {
            category: FailureCategory::AmbiguousExecution,
            message: m.clone(),
        });
    let failed = s.failure.is_some() || blocked.is_some();
    let has = |role: &str| s.sessions.contains_key(role);
    let phase = if has("continued") || s.agent_exit.is_some() {
        Some("continued")
    } else if has("reconstructed") {
        Some("replayed")
    } else if has("prepared") {
        Some("prepared")
    } else {
        None
    };
    // A failed continuation never reports `continued`: the furthest *completed* phase.
    let phase = if failed
        && phase == Some("continued")
        && s.agent_exit
            .as_ref()
            .map(|a| a.status == AgentStatus::Failed)
            .unwrap_or(true)
    {
        Some("replayed")
    } else {
        phase
    };
    let quality = phase.map(|_| {
        if failed || s.any_stale() {
            "degraded"
        } else {
            "verified"
        }
    });
    let continued = !s.continuations.is_empty();
    let agent_status = match (&s.agent_exit, continued, failed) {
        (Some(a), _, false) => status_name(a.status),
        (Some(_), _, true) => "failed",
        (None, true, true) => "failed",
        (None, true, false) => "not_started",
        (None, false, _) => "not_started",
    };
    let out = req.map(|r| r.output_dir.clone());
    let mut artifacts = Vec::new();
    let agent = req.map(|r| r.agent.clone()).unwrap_or_default();
    let native_fmt = |role: &str| format!("{agent}/native/{role}");
    if let Some(o) = &out {
        let join = |f: &str| format!("{}/{}", o.trim_end_matches('/'), f);
        if s.parsed.is_some() {
            artifacts.push(Artifact {
                role: "plan".into(),
                format: "pvisor/plan-v1".into(),
                path: join(files::PLAN),
            });
        }
        for role in ["prepared", "reconstructed", "continued"] {
            if let Some(w) = s.sessions.get(role) {
                artifacts.push(Artifact {
                    role: format!("{role}_native_session"),
                    format: native_fmt(role),
                    path: w.path.clone(),
                });
            }
        }
        if s.phase.is_terminal() {
            artifacts.push(Artifact {
                role: "journal_export".into(),
                format: "pvisor/journal-jsonl-v1".into(),
                path: join(files::JOURNAL_EXPORT),
            });
            if s.tally.finished > 0 || !s.calls.is_empty() {
                artifacts.push(Artifact {
                    role: "observation_comparison".into(),
                    format: "pvisor/observation-comparison-v1".into(),
                    path: join(files::OBSERVATIONS),
                });
            }
            if !s.steps.is_empty() {
                artifacts.push(Artifact {
                    role: "next_action_comparison".into(),
                    format: "pvisor/next-action-comparison-v1".into(),
                    path: join(files::NEXT_ACTION),
                });
            }
        }
    }
    let t = &s.tally;
    let (equal, equal_masked, differ, stale) = (t.equal, t.equal_masked, t.differ, t.stale);
    let bp = req.and_then(|r| r.boundary_prompt.clone());
    let injected = s.bridge.injections > 0;
    let mut bpj = serde_json::json!({ "requested": bp.is_some(), "injected": injected, "injection_count": s.bridge.injections });
    if let Some(p) = &bp {
        bpj["sha256"] = p.sha256.clone().into();
        bpj["length"] = p.length_chars.into();
        if injected {
            bpj["position"] = "after_boundary_observation".into();
        } else {
            bpj["reason"] = match req.map(|r| r.mode) {
                Some(Mode::PrepareOnly) => "prepare_only",
                Some(Mode::ReplayOnly) => "replay_only",
                _ => "not_injected",
            }
            .into();
        }
    }
    let metadata = serde_json::json!({
        "boundary_user_prompt": bpj,
        "input_condition": if injected { "boundary_user_prompt_appended" } else { "replayed_boundary_only" },
        "mode": req.map(|r| serde_json::to_value(r.mode).unwrap_or_default()),
        "lineage": {
            "source_path": s.parsed.as_ref().map(|p| p.source_path.clone()),
            "source_sha256": s.parsed.as_ref().map(|p| p.source_sha256.clone()),
            "native_session_id": s.parsed.as_ref().and_then(|p| p.session_id.clone()),
            "recorded_agent_version": s.parsed.as_ref().and_then(|p| p.recorded_version.clone()),
            "pvisor_version": req.map(|r| r.pvisor_version.clone()),
        },
        "model": req.and_then(|r| r.model.clone()),
        "observations": { "equal": equal, "equal_except_dynamic": equal_masked, "different": differ, "stale_reused": stale },
        "bridge": { "validated_model_requests": s.bridge.validated, "rejected_model_requests": s.bridge.rejected, "side_requests": s.bridge.side_requests, "first_request_ends_at_boundary": s.bridge.first_request_ok },
        "journal": { "events": s.events, "last_seq": s.last_seq, "recoveries": s.recoveries.len(), "resumes": s.resumes },
    });
    let mut metadata = metadata;
    // A runner watchdog that stopped the agent, under the adapter's name for it.
    if let Some(w) = s.agent_exit.as_ref().and_then(|a| a.stopped_by.as_ref()) {
        metadata[w.name.as_str()] = serde_json::json!({
            "reason": w.reason,
            "signal": w.signal,
            "steps": w.steps,
            "budget": w.budget,
            "idle_seconds": w.idle_seconds,
        });
    }
    let retryable = s.failure.as_ref().map(|f| f.retryable).unwrap_or(false);
    ReplayResult {
        schema_version: RESULT_SCHEMA.into(),
        phase: phase.map(String::from),
        quality: quality.map(String::from),
        agent_status: agent_status.into(),
        run_id: req.map(|r| r.run_id.clone()),
        agent: req.map(|r| AgentInfo {
            kind: r.agent.clone(),
            version: r
                .agent_version
                .clone()
                .or_else(|| s.continuations.last().and_then(|c| c.agent_version.clone())),
            entrypoint: r.agent_entrypoint.clone(),
        }),
        after_step: req.map(|r| r.after_step),
        replayed_tool_calls: s.tally.finished - s.tally.stale,
        prefix_model_turns: s
            .boundary
            .as_ref()
            .map(|b| b.prefix_model_turns)
            .unwrap_or(0),
        continued_steps: s.steps.len() as u64,
        state_dir: req.map(|r| r.state_dir.clone()),
        output_dir: out,
        artifacts,
        failure: s
            .failure
            .as_ref()
            .map(|f| Failure {
                category: f.category,
                message: f.message.clone(),
            })
            .or(blocked),
        retryable,
        metadata,
    }
}

impl ReplayResult {
    /// True when the run reached the end its mode asked for.
    pub fn succeeded(&self) -> bool {
        self.failure.is_none()
    }
}

/// Whether a state is complete (nothing left for the engine to do).
pub fn is_done(s: &ReplayState) -> bool {
    matches!(s.phase, Phase::Finished | Phase::Failed)
}
