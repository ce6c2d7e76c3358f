//! The continuation step: probe the agent, start the upstream (scripted or real), run the
//! real agent through the bridge, journaling every fact before it takes effect.

use std::path::PathBuf;
use std::time::Duration;

use journal_format::event::*;
use journal_format::Event;

use super::failure::RunError;
use super::recorder::Recorder;
use crate::adapter::{Adapter, ContinueRequest, RebuiltSession};
use crate::bridge::{BridgeConfig, Upstream, UpstreamMode};
use crate::continuation::{run_continuation, ContinuationSpec};
use crate::request::{ModelProtocol, ReplayRequest};

/// The agent executable: `--agent-entrypoint`, else the agent's command on PATH.
pub fn entrypoint(req: &ReplayRequest, default_cmd: &str) -> Result<PathBuf, RunError> {
    if let Some(p) = &req.agent_entrypoint {
        if !p.is_file() {
            return Err(RunError::Configuration(format!("--agent-entrypoint {} does not exist", p.display())));
        }
        return Ok(p.clone());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|d| d.join(default_cmd)).find(|p| p.is_file()).ok_or_else(|| {
        RunError::Configuration(format!("no `{default_cmd}` on PATH; pass --agent-entrypoint (scripts/install-agents.sh {} installs the pinned version)", req.agent))
    })
}

/// `<entrypoint> --version`, checked against the capability table.
pub fn probe_version(req: &ReplayRequest, entry: &std::path::Path) -> Result<String, RunError> {
    let out = std::process::Command::new(entry).arg("--version").stdin(std::process::Stdio::null()).output().map_err(|e| RunError::Configuration(format!("cannot run {} --version: {e}", entry.display())))?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let cap = crate::adapters::capabilities::lookup(&req.agent).ok_or_else(|| RunError::UnsupportedAgent(req.agent.clone()))?;
    if !cap.accepts(&v) {
        return Err(RunError::UnsupportedVersion(format!("{} reports version `{v}`; the {} adapter supports {}", entry.display(), req.agent, cap.accepted.join(", "))));
    }
    Ok(v)
}

fn default_command(agent: &str) -> &'static str {
    match agent {
        "claude-code" => "claude",
        "codex" => "codex",
        "opencode" => "opencode",
        "pi" => "pi",
        _ => "agent",
    }
}

pub fn run(rec: &mut Recorder, adapter: &dyn Adapter, req: &ReplayRequest, rebuilt: &RebuiltSession) -> Result<(), RunError> {
    if !rec.state.continuations.is_empty() {
        return Err(RunError::Continuation(format!(
            "the continuation of this run was interrupted after {} live steps; resuming a live continuation is not supported yet (the replayed prefix and the reconstructed session in {} are intact)",
            rec.state.steps.len(),
            req.output_dir.join("native").display()
        )));
    }
    if req.boundary_user_prompt.is_none() && rec.state.request.as_ref().and_then(|r| r.boundary_prompt.as_ref()).is_some() {
        return Err(RunError::Configuration("this run has a boundary prompt that is not injected yet: pass the same --boundary-user-prompt again (it is never stored)".into()));
    }
    let entry = entrypoint(req, default_command(&req.agent))?;
    let version = probe_version(req, &entry)?;
    let budget = rec.state.boundary.as_ref().and_then(|b| b.live_budget);
    let continued_artifact = req.output_dir.join("native").join(format!("continued-session.{}", req.trajectory.extension().and_then(|e| e.to_str()).unwrap_or("jsonl")));
    let mut agent = adapter.continuation(&ContinueRequest { entrypoint: &entry, rebuilt, workspace: &req.workspace, state_dir: &req.state_dir, continued_artifact: &continued_artifact, model: req.model.model.clone() })?;
    std::fs::create_dir_all(req.state_dir.join("logs")).map_err(|e| RunError::Internal(format!("{}: {e}", req.state_dir.join("logs").display())))?;
    let mut spec = ContinuationSpec::new(budget);
    spec.agent_version = Some(version);
    spec.log_dir = Some(req.state_dir.join("logs"));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(|e| RunError::Internal(format!("tokio runtime: {e}")))?;
    let outcome = rt.block_on(async {
        // The upstream: the built-in scripted model on 127.0.0.1, or the configured URL.
        let mut _server = None;
        let upstream = if let Some(script) = &req.model.script {
            let s = crate::model::Script::from_path(script).map_err(|e| RunError::Configuration(format!("--model-script {}: {e}", script.display())))?;
            let s = s.substitute(&[("CWD", &req.workspace.display().to_string())]);
            let key = crate::bridge::random_key();
            let server = crate::model::start(s, crate::model::ServerOptions { api_key: Some(key.clone()), log_path: Some(req.state_dir.join("logs/scripted-model.jsonl")), ..Default::default() })
                .await
                .map_err(|e| RunError::Internal(format!("scripted model server: {e}")))?;
            let base = server.base_url();
            _server = Some(server);
            Upstream { base_url: base, mode: UpstreamMode::Native, api_key: Some(key), model: req.model.model.clone(), response_timeout: Duration::from_secs(300) }
        } else {
            let base = req.model.base_url.clone().unwrap_or_default();
            let key = req.model.api_key_env.as_ref().and_then(|n| std::env::var(n).ok());
            let mode = match req.model.protocol {
                Some(ModelProtocol::OpenaiChat) => UpstreamMode::OpenAiChat,
                _ => UpstreamMode::Native,
            };
            Upstream { base_url: base, mode, api_key: key, model: req.model.model.clone(), response_timeout: Duration::from_secs(600) }
        };
        let cfg = BridgeConfig {
            // The runner sets both from the agent (`ContinuationAgent::protocol/transport_rule`).
            protocol: agent.protocol(),
            transport: agent.transport_rule(),
            prefix: rebuilt.prefix.clone(),
            boundary_prompt: req.boundary_user_prompt.clone(),
            disable_thinking: req.disable_thinking,
            max_steps: budget,
            upstream,
            key: None,
            port: 0,
        };
        run_continuation(&mut agent, &spec, cfg, |ev: Event| rec.record(ev).map(|_| ()).map_err(|e| e.to_string())).await.map_err(RunError::from)
    })?;
    if outcome.status == AgentStatus::Failed {
        return Err(RunError::Continuation(outcome.message.unwrap_or_else(|| format!("the agent failed (exit code {:?}, signal {:?})", outcome.exit_code, outcome.signal))));
    }
    let c = outcome.continued.ok_or_else(|| RunError::Continuation("the agent finished but its continued session is missing".into()))?;
    rec.record(Event::SessionWritten(SessionWritten { role: SessionRole::Continued, path: c.artifact_path.display().to_string(), digest: c.digest, records: c.records }))?;
    Ok(())
}
