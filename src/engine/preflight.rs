//! Checks made before anything is journaled and before any tool runs: everything a run will
//! need later that the user can fix with an option — what the adapter can do (its registry
//! capabilities), the agent executable and its version, the model upstream, the boundary
//! prompt a resumed run must be given again. A failure here leaves the journal as it was, so
//! the same command with the right options goes on.

use std::path::{Path, PathBuf};

use journal_format::event::Mode;

use super::failure::RunError;
use crate::fold::ReplayState;
use crate::kit::AgentEntry;
use crate::request::ReplayRequest;

/// The agent executable and the version it reported (accepted by the registry entry).
#[derive(Debug, Clone)]
pub struct AgentProbe {
    pub entry: PathBuf,
    pub version: String,
    pub agent: AgentEntry,
}

/// Check `req` against the adapter's capabilities and what the journal (`state`, empty for
/// a fresh run) already holds. Returns the probed agent when the run will continue (the
/// continuation uses it: the version is probed once per process).
pub fn check(
    req: &ReplayRequest,
    state: &ReplayState,
    agent: &AgentEntry,
) -> Result<Option<AgentProbe>, RunError> {
    if state.phase == crate::fold::Phase::Empty {
        trajectory(req)?;
    }
    capabilities(req, agent)?;
    if req.mode != Mode::Continue || state.phase.is_terminal() {
        return Ok(None);
    }
    boundary_prompt(req, state)?;
    model_upstream(req)?;
    probe(req, agent).map(Some)
}

/// The trajectory must exist (its content is checked by the parse, which names the line).
fn trajectory(req: &ReplayRequest) -> Result<(), RunError> {
    match std::fs::metadata(&req.trajectory) {
        Ok(_) => Ok(()),
        Err(e) => Err(RunError::Input {
            message: format!("cannot read the trajectory {}: {e}", req.trajectory.display()),
            hint: "check the --trajectory path: it must name the agent's native session file (or its session folder)".into(),
        }),
    }
}

/// The run may only ask the adapter for what its registry entry says it can do.
fn capabilities(req: &ReplayRequest, agent: &AgentEntry) -> Result<(), RunError> {
    let caps = agent.capabilities;
    let cannot = |what: &'static str| {
        Err(RunError::UnsupportedAgent(format!(
            "the `{}` adapter cannot {what} ({}; `pvisor agents` lists what each adapter can do)",
            agent.name, agent.docs
        )))
    };
    if !caps.replay {
        return cannot("replay a session");
    }
    if req.mode == Mode::Continue && !caps.continue_live {
        return cannot("continue a session with the real agent yet: use --replay-only");
    }
    if req.mode == Mode::Continue && req.boundary_user_prompt.is_some() && !caps.boundary_prompt {
        return cannot("inject a boundary prompt");
    }
    Ok(())
}

/// The agent executable of the request: `--agent-entrypoint`, else the pinned version
/// installed by `pvisor agents install`, else the agent's command on PATH.
pub fn agent_executable(req: &ReplayRequest, agent: &AgentEntry) -> Result<PathBuf, RunError> {
    crate::install::resolve(req.agent_entrypoint.as_deref(), agent).map_err(|message| {
        RunError::Input {
            message,
            hint: format!(
                "install the pinned CLI with `pvisor agents install {}`, or pass --agent-entrypoint PATH",
                agent.name
            ),
        }
    })
}

/// The version `entry` reports, checked against the registry entry.
pub fn probe_version(entry: &Path, agent: &AgentEntry) -> Result<String, RunError> {
    let v = agent.version_of(entry).map_err(RunError::Configuration)?;
    if !agent.continues(&v) {
        return Err(RunError::UnsupportedVersion(format!(
            "{} reports version `{v}`; the {} adapter continues with {}",
            entry.display(),
            agent.name,
            agent.continue_versions_text()
        )));
    }
    Ok(v)
}

/// The version the trajectory records, for agents whose sessions run with their own version
/// (`Versioning::PerSession`); `None` when it cannot be read (the run reports why later).
fn recorded_version(req: &ReplayRequest, agent: &AgentEntry) -> Option<String> {
    (agent.make)()
        .parse_path(&req.trajectory)
        .ok()?
        .0
        .recorded_version
}

/// Find the agent executable and check its version. For an agent whose sessions run with
/// their own version, that is the installation of the recorded version (unless
/// `--agent-entrypoint` names one), and the version must be the recorded one.
pub fn probe(req: &ReplayRequest, agent: &AgentEntry) -> Result<AgentProbe, RunError> {
    let per_session = matches!(
        agent.versioning,
        crate::kit::registry::Versioning::PerSession { .. }
    );
    // An unproven recorded version is refused by validation, before any tool runs.
    let recorded = per_session
        .then(|| recorded_version(req, agent))
        .flatten()
        .filter(|v| agent.continues(v));
    // The installation of the recorded version was probed when it was found.
    if let (Some(v), None) = (&recorded, &req.agent_entrypoint) {
        let entry = crate::install::installed(agent, v).ok_or_else(|| {
            RunError::Configuration(format!(
                "the trajectory was recorded by {} {v}, which is not installed: run `pvisor agents install {}@{v}`, or pass --agent-entrypoint",
                agent.name, agent.name
            ))
        })?;
        return Ok(AgentProbe {
            entry,
            version: v.clone(),
            agent: *agent,
        });
    }
    let entry = agent_executable(req, agent)?;
    let version = probe_version(&entry, agent)?;
    if let Some(v) = recorded.filter(|v| *v != version) {
        return Err(RunError::UnsupportedVersion(format!(
            "{} is {} {version}, but the trajectory was recorded by {v}: pass that version's entrypoint, or run `pvisor agents install {}@{v}`",
            entry.display(),
            agent.name,
            agent.name
        )));
    }
    Ok(AgentProbe {
        entry,
        version,
        agent: *agent,
    })
}

/// A resumed run whose request had a boundary prompt needs the same text again (it is never
/// stored): its length and SHA-256 must match the journaled ones.
fn boundary_prompt(req: &ReplayRequest, state: &ReplayState) -> Result<(), RunError> {
    let Some(facts) = state
        .request
        .as_ref()
        .and_then(|r| r.boundary_prompt.as_ref())
    else {
        return Ok(());
    };
    match &req.boundary_user_prompt {
        None => Err(RunError::Configuration(format!(
            "this run was started with a boundary prompt ({} characters, {}), which is never stored: pass the same --boundary-user-prompt to resume it",
            facts.length_chars, facts.sha256
        ))),
        Some(p) if crate::digest::sha256(p.as_bytes()) != facts.sha256 => Err(RunError::Configuration(format!(
            "the --boundary-user-prompt given ({} characters, {}) is not the one this run was started with ({} characters, {})",
            p.chars().count(),
            crate::digest::sha256(p.as_bytes()),
            facts.length_chars,
            facts.sha256
        ))),
        Some(_) => Ok(()),
    }
}

/// Continuing needs a model: the scripted one (`--model-script`, which must load) or an
/// upstream URL.
fn model_upstream(req: &ReplayRequest) -> Result<(), RunError> {
    if let Some(script) = &req.model.script {
        crate::scripted::Script::from_path(script).map_err(|e| RunError::Input {
            message: format!("--model-script {}: {e}", script.display()),
            hint: "the script format is in docs/model-script.md".into(),
        })?;
        return Ok(());
    }
    if req.isolate_network && req.model.base_url.is_some() {
        return Err(RunError::Input {
            message: "--isolate-network leaves the run only its own loopback: the model upstream at --model-base-url cannot be reached from it".into(),
            hint: "use --model-script (the scripted model is served inside the run), or --replay-only, or drop --isolate-network".into(),
        });
    }
    if req.model.base_url.as_deref().is_none_or(str::is_empty) {
        return Err(RunError::Input {
            message: "continuing needs a model upstream".into(),
            hint: "pass --model-base-url URL (with --model-protocol and --model-api-key-env), or --model-script FILE for the built-in scripted model, or use --replay-only".into(),
        });
    }
    Ok(())
}
