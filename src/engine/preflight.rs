//! Checks made before anything is journaled and before any tool runs: everything a run will
//! need later that the user can fix with an option (the agent executable and its version,
//! the model upstream, the boundary prompt a resumed run must be given again). A failure here
//! leaves the journal as it was, so the same command with the right options goes on.

use journal_format::event::Mode;

use super::continue_step::{probe, AgentProbe};
use super::failure::RunError;
use crate::fold::ReplayState;
use crate::request::ReplayRequest;

/// Check `req` against what the journal (`state`, empty for a fresh run) already holds.
/// Returns the probed agent when the run will continue (the continuation uses it: the
/// version is probed once per process).
pub fn check(req: &ReplayRequest, state: &ReplayState) -> Result<Option<AgentProbe>, RunError> {
    if req.mode != Mode::Continue || state.phase.is_terminal() {
        return Ok(None);
    }
    boundary_prompt(req, state)?;
    model_upstream(req)?;
    probe(req).map(Some)
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
        crate::model::Script::from_path(script).map_err(|e| {
            RunError::Configuration(format!("--model-script {}: {e}", script.display()))
        })?;
        return Ok(());
    }
    if req.model.base_url.as_deref().is_none_or(str::is_empty) {
        return Err(RunError::Configuration(
            "continuing needs a model: pass --model-script FILE (the built-in scripted model) or --model-base-url URL; --replay-only stops before any model request".into(),
        ));
    }
    Ok(())
}
