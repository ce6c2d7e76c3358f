//! The replay request: one normalized value built from flags, a TOML `[replay]` table
//! (`--config`) or a versioned JSON request (`--request`), then validated (spec §3).
//!
//! The boundary prompt's plaintext lives only in memory: the journal stores
//! [`ReplayRequest::canonical_json`], which replaces it by its length and SHA-256.

use std::path::{Path, PathBuf};

use journal_format::event::{Mode, ModelUpstream, PromptFacts, UpstreamProtocol};
use serde::{Deserialize, Serialize};
use sha2::Digest;

pub const REQUEST_SCHEMA: &str = "pvisor.replay-request/v1";

pub use crate::protocol::Protocol;

/// Every field of a request, all optional, as the three sources spell them (snake_case).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<String>,
    pub agent: Option<String>,
    pub trajectory: Option<PathBuf>,
    pub after_step: Option<u64>,
    pub agent_entrypoint: Option<PathBuf>,
    pub workspace: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub output_dir: Option<PathBuf>,
    pub run_id: Option<String>,
    pub session_id: Option<String>,
    pub max_steps: Option<u64>,
    pub prepare_only: Option<bool>,
    pub replay_only: Option<bool>,
    pub allow_stale_observations: Option<bool>,
    pub disable_thinking: Option<bool>,
    pub boundary_user_prompt: Option<String>,
    pub model_base_url: Option<String>,
    pub model_protocol: Option<Protocol>,
    pub model_api_key_env: Option<String>,
    pub model: Option<String>,
    pub model_script: Option<PathBuf>,
    /// Accept re-running a mutating tool call whose outcome is in doubt after a crash.
    pub accept_at_least_once: Option<bool>,
    /// Take no workspace checkpoints (an interrupted mutating call then needs
    /// `accept_at_least_once`).
    pub no_checkpoints: Option<bool>,
    /// Run in a private mount namespace with the run's own copy of the workspace bound at
    /// its path (`crate::workspace::isolate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolate: Option<bool>,
    /// With `isolate`: the directory the run's workspace copy starts from [default: what the
    /// host has at the workspace path].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_seed: Option<PathBuf>,
    /// With `isolate` (implies it): a network namespace of the run's own, with only its
    /// loopback interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolate_network: Option<bool>,
}

impl RequestFields {
    /// Fill unset fields from `other` (flags override config files).
    pub fn or(self, other: RequestFields) -> RequestFields {
        macro_rules! pick { ($($f:ident),*) => { RequestFields { $( $f: self.$f.or(other.$f), )* } } }
        pick!(
            schema_version,
            agent,
            trajectory,
            after_step,
            agent_entrypoint,
            workspace,
            state_dir,
            output_dir,
            run_id,
            session_id,
            max_steps,
            prepare_only,
            replay_only,
            allow_stale_observations,
            disable_thinking,
            boundary_user_prompt,
            model_base_url,
            model_protocol,
            model_api_key_env,
            model,
            model_script,
            accept_at_least_once,
            no_checkpoints,
            isolate,
            workspace_seed,
            isolate_network
        )
    }
    pub fn is_empty(&self) -> bool {
        *self == RequestFields::default()
    }
}

/// A TOML config file: `[replay]` with the same keys in snake_case.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlFile {
    replay: RequestFields,
}

/// Why a request is refused (category `configuration_error`, exit 2).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    pub message: String,
    pub hint: Option<String>,
}

fn rerr(message: impl Into<String>, hint: Option<&str>) -> RequestError {
    RequestError {
        message: message.into(),
        hint: hint.map(String::from),
    }
}

pub fn load_toml(path: &Path) -> Result<RequestFields, RequestError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| rerr(format!("cannot read config {}: {e}", path.display()), None))?;
    let f: TomlFile = toml::from_str(&text).map_err(|e| {
        rerr(
            format!("{}: {}", path.display(), e.message().trim()),
            Some("the file needs a [replay] table whose keys are the flag names in snake_case"),
        )
    })?;
    Ok(relative_to(
        f.replay,
        path.parent().unwrap_or(Path::new(".")),
    ))
}

pub fn load_json(path: &Path) -> Result<RequestFields, RequestError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| rerr(format!("cannot read request {}: {e}", path.display()), None))?;
    let f: RequestFields = serde_json::from_str(&text).map_err(|e| {
        rerr(
            format!("{}:{}:{}: {e}", path.display(), e.line(), e.column()),
            Some("see docs/cli.md for the JSON request schema"),
        )
    })?;
    match f.schema_version.as_deref() {
        Some(REQUEST_SCHEMA) => Ok(f),
        Some(other) => Err(rerr(
            format!(
                "{}: schema_version `{other}` is not supported",
                path.display()
            ),
            Some(&format!("use \"schema_version\": \"{REQUEST_SCHEMA}\"")),
        )),
        None => Err(rerr(
            format!("{}: schema_version is missing", path.display()),
            Some(&format!("add \"schema_version\": \"{REQUEST_SCHEMA}\"")),
        )),
    }
}

/// Relative paths in a config file are relative to the file.
pub fn relative_to(mut f: RequestFields, base: &Path) -> RequestFields {
    for p in [
        &mut f.trajectory,
        &mut f.agent_entrypoint,
        &mut f.workspace,
        &mut f.state_dir,
        &mut f.output_dir,
        &mut f.model_script,
        &mut f.workspace_seed,
    ]
    .into_iter()
    .flatten()
    {
        if p.is_relative() {
            *p = base.join(&*p);
        }
    }
    f
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub protocol: Option<Protocol>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub model: Option<String>,
    pub script: Option<PathBuf>,
}

/// A validated request.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayRequest {
    pub agent: String,
    pub trajectory: PathBuf,
    pub after_step: u64,
    pub agent_entrypoint: Option<PathBuf>,
    pub workspace: PathBuf,
    pub state_dir: PathBuf,
    pub output_dir: PathBuf,
    pub run_id: String,
    pub session_id: Option<String>,
    pub max_steps: Option<u64>,
    pub mode: Mode,
    pub allow_stale_observations: bool,
    pub disable_thinking: bool,
    pub boundary_user_prompt: Option<String>,
    pub model: ModelConfig,
    pub accept_at_least_once: bool,
    /// Take no workspace checkpoints before mutating calls.
    pub no_checkpoints: bool,
    /// Run in a private mount namespace with the run's own copy of the workspace
    /// (`--isolate`).
    pub isolate: bool,
    /// Where that copy starts from (`--workspace-seed`; default: the workspace path).
    pub workspace_seed: Option<PathBuf>,
    /// The run's own network namespace with only loopback (`--isolate-network`).
    pub isolate_network: bool,
}

fn abs(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|c| c.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

pub fn new_run_id() -> String {
    let t = time::OffsetDateTime::now_utc();
    let r: u32 = rand::random();
    format!(
        "run-{:04}{:02}{:02}T{:02}{:02}{:02}Z-{r:08x}",
        t.year(),
        t.month() as u8,
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

impl ReplayRequest {
    /// Validate fields into a request. Paths become absolute; the run's state and output
    /// directories are `<state_dir>/<run_id>` and `<output_dir>/<run_id>`.
    pub fn from_fields(f: RequestFields) -> Result<ReplayRequest, RequestError> {
        let agent = f
            .agent
            .ok_or_else(|| rerr("--agent is required", Some("e.g. --agent claude-code")))?;
        let trajectory = f.trajectory.ok_or_else(|| {
            rerr(
                "--trajectory is required",
                Some("the agent's native session file"),
            )
        })?;
        let after_step = f.after_step.ok_or_else(|| {
            rerr(
                "--after-step is required",
                Some("the number of complete tool-call batches to replay"),
            )
        })?;
        if after_step == 0 {
            return Err(rerr(
                "--after-step must be at least 1",
                Some("the boundary counts complete tool-call batches"),
            ));
        }
        let prepare_only = f.prepare_only.unwrap_or(false);
        let replay_only = f.replay_only.unwrap_or(false);
        if prepare_only && replay_only {
            return Err(rerr(
                "--prepare-only and --replay-only exclude each other",
                None,
            ));
        }
        let mode = if prepare_only {
            Mode::PrepareOnly
        } else if replay_only {
            Mode::ReplayOnly
        } else {
            Mode::Continue
        };
        if let Some(m) = f.max_steps {
            if m == 0 {
                return Err(rerr("--max-steps must be positive", None));
            }
        }
        if let Some(p) = &f.boundary_user_prompt {
            if p.is_empty() {
                return Err(rerr(
                    "--boundary-user-prompt is empty",
                    Some("omit it to continue from the boundary alone"),
                ));
            }
        }
        let run_id = f.run_id.unwrap_or_else(new_run_id);
        if run_id.is_empty() || run_id.contains('/') || run_id.starts_with('.') {
            return Err(rerr(
                format!("--run-id `{run_id}` is not a valid directory name"),
                None,
            ));
        }
        let workspace = abs(&f.workspace.unwrap_or_else(|| PathBuf::from(".")));
        let state_root = abs(&f
            .state_dir
            .unwrap_or_else(|| PathBuf::from(".pvisor/state")));
        let out_root = abs(&f
            .output_dir
            .unwrap_or_else(|| PathBuf::from(".pvisor/output")));
        // A continuation without any model upstream is refused by the engine's checks made
        // before anything runs, after the trajectory's (the order a user fixes them in).
        if f.model_script.is_some() && f.model_base_url.is_some() {
            return Err(rerr(
                "--model-script and --model-base-url exclude each other",
                None,
            ));
        }
        if let Some(env) = &f.model_api_key_env {
            if std::env::var_os(env).is_none() && mode == Mode::Continue {
                return Err(rerr(
                    format!("--model-api-key-env names `{env}`, which is not set"),
                    Some("export the key in that variable; pvisor never stores it"),
                ));
            }
        }
        Ok(ReplayRequest {
            agent,
            trajectory: abs(&trajectory),
            after_step,
            agent_entrypoint: f.agent_entrypoint.map(|p| abs(&p)),
            workspace,
            state_dir: state_root.join(&run_id),
            output_dir: out_root.join(&run_id),
            run_id,
            session_id: f.session_id,
            max_steps: f.max_steps,
            mode,
            allow_stale_observations: f.allow_stale_observations.unwrap_or(false),
            disable_thinking: f.disable_thinking.unwrap_or(false),
            boundary_user_prompt: f.boundary_user_prompt,
            model: ModelConfig {
                protocol: f.model_protocol,
                base_url: f.model_base_url,
                api_key_env: f.model_api_key_env,
                model: f.model,
                script: f.model_script.map(|p| abs(&p)),
            },
            accept_at_least_once: f.accept_at_least_once.unwrap_or(false),
            no_checkpoints: f.no_checkpoints.unwrap_or(false),
            isolate: f.isolate.unwrap_or(false)
                || f.workspace_seed.is_some()
                || f.isolate_network == Some(true),
            isolate_network: f.isolate_network.unwrap_or(false),
            workspace_seed: f.workspace_seed.map(|p| abs(&p)),
        })
    }

    pub fn prompt_facts(&self) -> Option<PromptFacts> {
        self.boundary_user_prompt.as_ref().map(|p| prompt_facts(p))
    }

    pub fn model_upstream(&self) -> ModelUpstream {
        let script_digest = self
            .model
            .script
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .map(|b| format!("blake3:{}", blake3::hash(&b).to_hex()));
        ModelUpstream {
            protocol: match (&self.model.script, self.model.protocol) {
                (Some(_), _) => UpstreamProtocol::Scripted,
                (None, Some(Protocol::Anthropic)) => UpstreamProtocol::Anthropic,
                (None, Some(Protocol::OpenaiResponses)) => UpstreamProtocol::OpenaiResponses,
                (None, Some(Protocol::OpenaiChat)) => UpstreamProtocol::OpenaiChat,
                (None, None) => UpstreamProtocol::Native,
            },
            base_url: self.model.base_url.clone(),
            model: self.model.model.clone(),
            api_key_env: self.model.api_key_env.clone(),
            script_digest,
        }
    }

    /// The request as stored in the journal: the prompt plaintext replaced by its facts.
    pub fn canonical_json(&self) -> String {
        let facts = self.prompt_facts();
        let mut v = serde_json::json!({
            "schema_version": REQUEST_SCHEMA,
            "agent": self.agent,
            "trajectory": self.trajectory,
            "after_step": self.after_step,
            "agent_entrypoint": self.agent_entrypoint,
            "workspace": self.workspace,
            "state_dir": self.state_dir,
            "output_dir": self.output_dir,
            "run_id": self.run_id,
            "session_id": self.session_id,
            "max_steps": self.max_steps,
            "mode": self.mode,
            "allow_stale_observations": self.allow_stale_observations,
            "disable_thinking": self.disable_thinking,
            "boundary_user_prompt": facts.map(|f| serde_json::json!({"length_chars": f.length_chars, "sha256": f.sha256})),
            "model": {
                "protocol": self.model.protocol,
                "base_url": self.model.base_url,
                "api_key_env": self.model.api_key_env,
                "model": self.model.model,
                "script": self.model.script,
            },
            "accept_at_least_once": self.accept_at_least_once,
            "no_checkpoints": self.no_checkpoints,
        });
        // Only when set: the canonical form of every other request stays as it was.
        if self.isolate {
            v["isolate"] = true.into();
        }
        if let Some(seed) = &self.workspace_seed {
            v["workspace_seed"] = seed.display().to_string().into();
        }
        if self.isolate_network {
            v["isolate_network"] = true.into();
        }
        v.to_string()
    }

    /// Rebuild a request from its journaled canonical form (resume). The prompt plaintext
    /// must be supplied again (it is never stored); its SHA-256 must match.
    pub fn from_canonical(
        json: &str,
        prompt: Option<String>,
    ) -> Result<ReplayRequest, RequestError> {
        let v: serde_json::Value = serde_json::from_str(json)
            .map_err(|e| rerr(format!("journaled request does not parse: {e}"), None))?;
        let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(String::from);
        let p = |k: &str| v.get(k).and_then(|x| x.as_str()).map(PathBuf::from);
        let b = |k: &str| v.get(k).and_then(|x| x.as_bool()).unwrap_or(false);
        let mode: Mode = serde_json::from_value(v["mode"].clone())
            .map_err(|e| rerr(format!("journaled mode: {e}"), None))?;
        let want = v
            .get("boundary_user_prompt")
            .and_then(|x| x.get("sha256"))
            .and_then(|x| x.as_str())
            .map(String::from);
        let prompt = match (want, prompt) {
            (None, None) => None,
            (None, Some(_)) => return Err(rerr("this run was started without a boundary prompt; --boundary-user-prompt cannot be added on resume", None)),
            (Some(w), Some(p)) if prompt_facts(&p).sha256 == w => Some(p),
            (Some(_), Some(_)) => return Err(rerr("--boundary-user-prompt differs from the one this run was started with (SHA-256 mismatch)", Some("pass the same prompt text again"))),
            (Some(_), None) => None, // needed only if the prompt is not injected yet; the engine checks
        };
        let m = &v["model"];
        Ok(ReplayRequest {
            agent: s("agent").unwrap_or_default(),
            trajectory: p("trajectory").unwrap_or_default(),
            after_step: v["after_step"].as_u64().unwrap_or(0),
            agent_entrypoint: p("agent_entrypoint"),
            workspace: p("workspace").unwrap_or_default(),
            state_dir: p("state_dir").unwrap_or_default(),
            output_dir: p("output_dir").unwrap_or_default(),
            run_id: s("run_id").unwrap_or_default(),
            session_id: s("session_id"),
            max_steps: v["max_steps"].as_u64(),
            mode,
            allow_stale_observations: b("allow_stale_observations"),
            disable_thinking: b("disable_thinking"),
            boundary_user_prompt: prompt,
            model: ModelConfig {
                protocol: serde_json::from_value(m["protocol"].clone()).ok().flatten(),
                base_url: m["base_url"].as_str().map(String::from),
                api_key_env: m["api_key_env"].as_str().map(String::from),
                model: m["model"].as_str().map(String::from),
                script: m["script"].as_str().map(PathBuf::from),
            },
            accept_at_least_once: b("accept_at_least_once"),
            no_checkpoints: b("no_checkpoints"),
            isolate: b("isolate"),
            workspace_seed: p("workspace_seed"),
            isolate_network: b("isolate_network"),
        })
    }
}

pub fn prompt_facts(p: &str) -> PromptFacts {
    PromptFacts {
        length_chars: p.chars().count() as u64,
        sha256: format!("sha256:{}", hex::encode(sha2::Sha256::digest(p.as_bytes()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> RequestFields {
        RequestFields {
            agent: Some("claude-code".into()),
            trajectory: Some("/t.jsonl".into()),
            after_step: Some(2),
            replay_only: Some(true),
            run_id: Some("r1".into()),
            ..Default::default()
        }
    }

    #[test]
    fn canonical_form_never_holds_the_prompt() {
        let mut f = base();
        f.boundary_user_prompt = Some("secret words".into());
        let r = ReplayRequest::from_fields(f).unwrap();
        let c = r.canonical_json();
        assert!(!c.contains("secret words"));
        assert!(c.contains(&prompt_facts("secret words").sha256));
        let back = ReplayRequest::from_canonical(&c, Some("secret words".into())).unwrap();
        assert_eq!(back, r);
        assert!(ReplayRequest::from_canonical(&c, Some("other".into())).is_err());
    }

    #[test]
    fn validation_refuses_contradictions() {
        let mut f = base();
        f.prepare_only = Some(true);
        assert!(ReplayRequest::from_fields(f).is_err());
        let mut f = base();
        f.after_step = Some(0);
        assert!(ReplayRequest::from_fields(f).is_err());
    }

    #[test]
    fn toml_and_json_forms() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("r.toml");
        std::fs::write(&t, "[replay]\nagent = \"claude-code\"\ntrajectory = \"s.jsonl\"\nafter_step = 3\nreplay_only = true\n").unwrap();
        let f = load_toml(&t).unwrap();
        assert_eq!(f.trajectory.unwrap(), d.path().join("s.jsonl"));
        std::fs::write(&t, "[replay]\nagent = \"x\"\nbogus = 1\n").unwrap();
        assert!(load_toml(&t).unwrap_err().message.contains("bogus"));
        let j = d.path().join("r.json");
        std::fs::write(&j, format!("{{\"schema_version\":\"{REQUEST_SCHEMA}\",\"agent\":\"claude-code\",\"after_step\":1}}")).unwrap();
        assert_eq!(load_json(&j).unwrap().after_step, Some(1));
        std::fs::write(&j, "{\"agent\":\"claude-code\"}").unwrap();
        assert!(load_json(&j).is_err());
    }
}
