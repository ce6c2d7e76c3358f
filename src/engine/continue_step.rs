//! The continuation step: probe the agent, start the upstream (scripted or real), run the
//! real agent through the bridge, journaling every fact before it takes effect.

use std::time::Duration;

use journal_format::event::*;
use journal_format::Event;

use super::failure::RunError;
use super::recorder::Recorder;
use crate::bridge::{BridgeConfig, BridgeResume, Upstream};
use crate::kit::{Adapter, ContinueRequest, RebuiltSession};
use crate::request::ReplayRequest;
use crate::runner::{run_continuation, ContinuationSpec};

/// The resumed attempt's view: the longer prefix, the step offset, the remaining budget.
struct Resumed {
    prefix: Vec<serde_json::Value>,
    steps_before: u64,
    budget: Option<u64>,
}

/// Decide, and journal, whether each live step in `in_doubt` (its tool calls may have run
/// when the run was interrupted) is asked again: read-only steps are; mutating ones when the
/// workspace was `restored` to the first one's checkpoint or the user accepts at-least-once
/// effects; otherwise the run stops (exit 31). `inputs` are the tool inputs of step `first`
/// when the agent's session holds them (others are classified by tool name).
fn resolve_in_doubt(
    rec: &mut Recorder,
    adapter: &dyn Adapter,
    req: &ReplayRequest,
    in_doubt: Vec<ContinuationStep>,
    inputs: &[(String, String, serde_json::Value)],
    first: u64,
    restored: bool,
) -> Result<(), RunError> {
    for st in in_doubt {
        let read_only = st.tools.iter().all(|name| {
            let input = inputs
                .iter()
                .find(|(_, n, _)| n == name)
                .map(|t| t.2.clone())
                .unwrap_or(serde_json::Value::Null);
            let call = crate::kit::ToolCall {
                call_id: String::new(),
                tool: name.clone(),
                input,
                original: None,
                locator: Default::default(),
            };
            adapter.classify(&call) == crate::kit::ToolClass::ReadOnly
        });
        let decision = if read_only {
            InDoubtDecision::RerunReadOnly
        } else if restored {
            InDoubtDecision::RerunRestored
        } else if req.accept_at_least_once {
            InDoubtDecision::RerunAccepted
        } else {
            InDoubtDecision::Stopped
        };
        let ids = if st.n == first {
            inputs
                .iter()
                .map(|t| t.0.as_str())
                .collect::<Vec<_>>()
                .join(",")
        } else {
            String::new()
        };
        let already = decision == InDoubtDecision::Stopped
            && rec
                .state
                .live_in_doubt
                .last()
                .is_some_and(|d| d.call == st.n && d.decision == InDoubtDecision::Stopped);
        if !already {
            rec.record(Event::InDoubtResolved(InDoubtResolved {
                batch: 0,
                call: st.n,
                call_id: ids,
                tool: st.tools.join(","),
                decision,
            }))?;
        }
        if decision == InDoubtDecision::Stopped {
            return Err(RunError::AmbiguousExecution(
                rec.state.blocked.clone().unwrap_or_default(),
            ));
        }
    }
    Ok(())
}

/// The journaled live steps after the first `kept` are asked again: the workspace goes back
/// to the checkpoint of the first of them that ran tools (taken before its tool calls were
/// released), which undoes whatever they did, so asking the model again applies them once;
/// each gets its in-doubt decision. `inputs`: the tool inputs of step `kept + 1`, when the
/// agent's session holds them.
fn undo_live_steps(
    rec: &mut Recorder,
    adapter: &dyn Adapter,
    req: &ReplayRequest,
    checkpoints: &mut super::checkpoints::Checkpoints,
    kept: u64,
    inputs: &[(String, String, serde_json::Value)],
) -> Result<(), RunError> {
    let in_doubt: Vec<_> = rec.state.steps[kept as usize..]
        .iter()
        .filter(|st| !st.tools.is_empty())
        .cloned()
        .collect();
    let restored = match in_doubt.first() {
        Some(first) => checkpoints.restore(rec, 0, first.n)?,
        None => false,
    };
    resolve_in_doubt(rec, adapter, req, in_doubt, inputs, kept + 1, restored)
}

/// Before attempt 2, 3… of an agent that cannot resume its own session: it starts over from
/// the rebuilt session (the boundary). Every earlier live step is asked again, so the
/// workspace goes back to the checkpoint of the first live step that ran tools (taken before
/// they were released), and each such step gets its in-doubt decision. The agent's native
/// session is written again as rebuilt.
fn prepare_restart(
    rec: &mut Recorder,
    adapter: &dyn Adapter,
    req: &ReplayRequest,
    plan: &crate::kit::Plan,
    checkpoints: &mut super::checkpoints::Checkpoints,
) -> Result<RebuiltSession, RunError> {
    undo_live_steps(rec, adapter, req, checkpoints, 0, &[])?;
    super::perform::rebuild_for_restart(rec, adapter, req, plan)
}

/// Before attempt 2, 3…: read the agent's own session (it holds the live turns of the earlier
/// attempts), apply the in-doubt policy to an interrupted turn, cut it, and check that the
/// longer prefix starts with the journaled rebuilt prefix.
fn prepare_resume(
    rec: &mut Recorder,
    adapter: &dyn Adapter,
    req: &ReplayRequest,
    rebuilt: &RebuiltSession,
    agent: &mut Box<dyn crate::runner::ContinuationAgent>,
    checkpoints: &mut super::checkpoints::Checkpoints,
) -> Result<Resumed, RunError> {
    let journaled = rec.state.steps.len() as u64;
    let info = agent.resume(false)?;
    let m = info.complete_turns;
    if m > journaled {
        return Err(RunError::Continuation(format!(
            "the agent's session holds {m} complete live turns but the journal has {journaled} steps; the session no longer matches the run"
        )));
    }
    // Steps m+1… were journaled (their replies may have reached the agent, the bridge releases
    // tool calls only after the step is durable) but are not complete turns of the session:
    // the agent may have run their tools and not stored the results yet (Claude writes its
    // transcript lazily). Asking the model again re-runs them: the in-doubt policy decides.
    let inputs: Vec<(String, String, serde_json::Value)> =
        info.interrupted.clone().unwrap_or_default();
    undo_live_steps(rec, adapter, req, checkpoints, m, &inputs)?;
    let info = agent.resume(true)?;
    let mut prefix = rebuilt.prefix.clone();
    prefix.extend(info.live.iter().cloned());
    // The longer prefix must start with the prefix the first bridge journaled.
    if let Some(first) = &rec.state.bridge.started {
        let n = first.prefix_items as usize;
        let d = crate::bridge::prefix_digest_of(
            agent.protocol(),
            agent.request_rules().as_ref(),
            &prefix,
            n,
        );
        if d.as_deref() != Some(first.prefix_digest.as_str()) {
            return Err(RunError::Continuation(format!(
                "the agent's session no longer starts with the journaled prefix ({} messages, {})",
                first.prefix_items, first.prefix_digest
            )));
        }
    }
    let live_budget = rec.state.boundary.as_ref().and_then(|b| b.live_budget);
    Ok(Resumed {
        prefix,
        steps_before: m,
        budget: live_budget.map(|b| b.saturating_sub(m)),
    })
}

pub use super::preflight::AgentProbe;

/// Where the cleaned continued session is copied for the user.
fn continued_artifact(adapter: &dyn Adapter, req: &ReplayRequest) -> std::path::PathBuf {
    req.output_dir.join("native").join(format!(
        "continued-session.{}",
        adapter.session_extension(&req.trajectory)
    ))
}

/// The adapter's continuation of `rebuilt` with the agent at `entry`.
fn continuation_agent(
    adapter: &dyn Adapter,
    req: &ReplayRequest,
    plan: &crate::kit::Plan,
    rebuilt: &RebuiltSession,
    entry: &std::path::Path,
) -> Result<Box<dyn crate::runner::ContinuationAgent>, RunError> {
    let continued_artifact = continued_artifact(adapter, req);
    Ok(adapter.continuation(&ContinueRequest {
        plan,
        entrypoint: entry,
        rebuilt,
        workspace: &req.workspace,
        state_dir: &req.state_dir,
        continued_artifact: &continued_artifact,
        model: req.model.model.clone(),
        boundary_prompt: req.boundary_user_prompt.as_deref(),
    })?)
}

/// Continue (or resume the continuation of) `rebuilt` with the agent `probe` found.
pub fn run(
    rec: &mut Recorder,
    adapter: &dyn Adapter,
    req: &ReplayRequest,
    plan: &crate::kit::Plan,
    rebuilt: Option<RebuiltSession>,
    probe: &AgentProbe,
    checkpoints: &mut super::checkpoints::Checkpoints,
) -> Result<(), RunError> {
    let version = probe.version.clone();
    let attempt = rec.state.continuations.len() as u64 + 1;
    // An agent that cannot resume its own session starts again from the boundary.
    let from_boundary = attempt > 1 && !probe.agent.capabilities.resume_live;
    let rebuilt = match rebuilt {
        _ if from_boundary => prepare_restart(rec, adapter, req, plan, checkpoints)?,
        Some(r) => r,
        None => super::perform::rebuild_again(rec, adapter, req, plan)?,
    };
    let rebuilt = &rebuilt;
    let mut agent = continuation_agent(adapter, req, plan, rebuilt, &probe.entry)?;
    let resumed = if attempt > 1 && !from_boundary {
        Some(prepare_resume(
            rec,
            adapter,
            req,
            rebuilt,
            &mut agent,
            checkpoints,
        )?)
    } else {
        None
    };
    let budget = match &resumed {
        Some(r) => r.budget,
        None => rec.state.boundary.as_ref().and_then(|b| b.live_budget),
    };
    if budget == Some(0) {
        // The budget was used up before the crash and every step's tools have results: the
        // agent would only have stopped at its turn limit.
        rec.record(Event::AgentExited(AgentExited { status: AgentStatus::MaxSteps, code: None, signal: None, message: Some("live step budget used before the run was interrupted; the agent was not started again".into()), stopped_by: None }))?;
        return write_continued(rec, adapter, req, plan, &probe.agent);
    }
    std::fs::create_dir_all(req.state_dir.join("logs")).map_err(|e| {
        RunError::Internal(format!("{}: {e}", req.state_dir.join("logs").display()))
    })?;
    let mut spec = ContinuationSpec::new(budget);
    spec.agent_version = Some(version);
    spec.attempt = attempt;
    spec.from_boundary = from_boundary;
    spec.log_dir = Some(req.state_dir.join("logs"));
    spec.groups = Some(crate::supervisor::groups::dir_of(&req.state_dir));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| RunError::Internal(format!("tokio runtime: {e}")))?;
    let outcome = rt.block_on(async {
        // The upstream: the built-in scripted model on 127.0.0.1, or the configured URL.
        let mut _server = None;
        let upstream = if let Some(script) = &req.model.script {
            let s = crate::scripted::Script::from_path(script).map_err(|e| {
                RunError::Configuration(format!("--model-script {}: {e}", script.display()))
            })?;
            let s = s.substitute(&[("CWD", &req.workspace.display().to_string())]);
            let key = crate::bridge::random_key();
            let server = crate::scripted::start(
                s,
                crate::scripted::ServerOptions {
                    api_key: Some(key.clone()),
                    log_path: Some(req.state_dir.join("logs/scripted-model.jsonl")),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| RunError::Internal(format!("scripted model server: {e}")))?;
            let base = server.base_url();
            _server = Some(server);
            Upstream {
                base_url: base,
                protocol: agent.protocol(),
                api_key: Some(key),
                model: req.model.model.clone(),
                response_timeout: Duration::from_secs(300),
            }
        } else {
            let base = req.model.base_url.clone().unwrap_or_default();
            let key = req
                .model
                .api_key_env
                .as_ref()
                .and_then(|n| std::env::var(n).ok());
            Upstream {
                base_url: base,
                protocol: req.model.protocol.unwrap_or(agent.protocol()),
                api_key: key,
                model: req.model.model.clone(),
                response_timeout: Duration::from_secs(600),
            }
        };
        let cfg = BridgeConfig {
            // The runner sets both from the agent (`ContinuationAgent::protocol/request_rules`).
            protocol: agent.protocol(),
            rules: agent.request_rules(),
            prefix: resumed
                .as_ref()
                .map(|r| r.prefix.clone())
                .unwrap_or_else(|| rebuilt.prefix.clone()),
            boundary_prompt: req.boundary_user_prompt.clone(),
            disable_thinking: req.disable_thinking,
            max_steps: budget,
            upstream,
            key: None,
            port: 0,
            resume: resumed.as_ref().map(|r| BridgeResume {
                boundary_at: rebuilt.prefix.len(),
                prompt_injected_before: rec.state.bridge.injections > 0,
                steps_before: r.steps_before,
            }),
            refused_blobs: Some(req.state_dir.clone()),
            hold_beyond_budget: false,
        };
        run_continuation(&mut agent, &spec, cfg, |ev: Event| {
            // A live step's tool calls reach the agent only after this returns: the
            // workspace is checkpointed first, so an interruption can be undone.
            if let Event::ContinuationStep(st) = &ev {
                if !st.tools.is_empty() {
                    checkpoints
                        .before(rec, 0, st.n)
                        .map_err(|e| e.to_string())?;
                }
            }
            rec.record(ev).map(|_| ()).map_err(|e| e.to_string())
        })
        .await
        .map_err(RunError::from)
    })?;
    if outcome.status == AgentStatus::Failed {
        let message = outcome.message.clone().unwrap_or_else(|| {
            format!(
                "the agent failed (exit code {:?}, signal {:?})",
                outcome.exit_code, outcome.signal
            )
        });
        // A model failure is what the bridge saw the upstream do, not what the agent said.
        use super::failure::ModelFailure as M;
        use crate::bridge::UpstreamFailure as U;
        let kind = match outcome.bridge.upstream_failure {
            _ if outcome.bridge.failure.is_some() => None,
            Some(U::RateLimit) => Some(M::RateLimit),
            Some(U::ServerError) => Some(M::Internal),
            Some(U::Connection) => Some(M::Connection),
            None => None,
        };
        return Err(match kind {
            Some(kind) => RunError::Model { kind, message },
            None => RunError::Continuation(message),
        });
    }
    let c = outcome.continued.ok_or_else(|| {
        RunError::Continuation("the agent finished but its continued session is missing".into())
    })?;
    rec.record(Event::SessionWritten(SessionWritten {
        role: SessionRole::Continued,
        path: c.artifact_path.display().to_string(),
        digest: c.digest,
        records: c.records,
    }))?;
    Ok(())
}

/// After `agent_exited` without the continued session recorded (a crash in between): record
/// the session the runner cleaned before that event, from its receipt; without one (a
/// journal of an older pvisor), clean the agent's session again (idempotent for agents that
/// resume their own session) and record it.
pub fn write_continued(
    rec: &mut Recorder,
    adapter: &dyn Adapter,
    req: &ReplayRequest,
    plan: &crate::kit::Plan,
    agent_entry: &crate::kit::AgentEntry,
) -> Result<(), RunError> {
    let artifact = continued_artifact(adapter, req);
    let c = match crate::runner::read_receipt(&artifact) {
        Some(c) => c,
        None => {
            let rebuilt = super::perform::rebuild_again(rec, adapter, req, plan)?;
            let entry = super::preflight::agent_executable(req, agent_entry)?;
            let mut agent = continuation_agent(adapter, req, plan, &rebuilt, &entry)?;
            agent.finish()?.ok_or_else(|| {
                RunError::Continuation("the agent's continued session is missing".into())
            })?
        }
    };
    rec.record(Event::SessionWritten(SessionWritten {
        role: SessionRole::Continued,
        path: c.artifact_path.display().to_string(),
        digest: c.digest,
        records: c.records,
    }))?;
    Ok(())
}
