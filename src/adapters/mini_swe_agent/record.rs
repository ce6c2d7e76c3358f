//! Recording mini-swe-agent 2.x trajectories with the real CLI against the scripted model
//! (`pvisor certify`): `mini -y --exit-immediately -c mini.yaml` (tool calling) in a fresh
//! `HOME`, litellm pointed at the scripted model; every step of a generated task is mini's one
//! tool, `bash`, and the run ends with mini's submission command.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

use crate::kit::recorder::{base_env, shell_quoted as quoted, RecordRequest, Recorder, Step};
use crate::scripted::{ToolCallSpec, Turn};

pub struct MiniRecorder;

/// The model name the recording asks litellm for (an OpenAI-compatible endpoint).
const MODEL: &str = "openai/fake-model";

/// The command that makes mini submit (its first output line).
pub const SUBMIT: &str = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT";

fn bash(command: Value) -> ToolCallSpec {
    ToolCallSpec {
        name: "bash".into(),
        input: json!({ "command": command }),
        custom: false,
    }
}

/// The model registry litellm is given (prices of the fake model, so mini counts a cost).
fn registry() -> Value {
    let model = json!({
        "max_tokens": 8192, "max_input_tokens": 128000, "max_output_tokens": 8192,
        "input_cost_per_token": 1e-06, "output_cost_per_token": 4e-06,
        "litellm_provider": "openai", "mode": "chat",
    });
    json!({ MODEL: model, "fake-model": model })
}

impl Recorder for MiniRecorder {
    fn calls(&self, step: &Step, _work: &Path) -> Vec<ToolCallSpec> {
        vec![match step {
            Step::Run { cmd } => bash(json!(cmd)),
            Step::Write { path, content } => bash(json!(format!(
                "mkdir -p \"$(dirname {p})\" && printf '%s' {} > {p}",
                quoted(content),
                p = quoted(path)
            ))),
            Step::Read { path } => bash(json!(format!("cat {}", quoted(path)))),
            Step::Edit { path, old, new } => bash(json!(format!(
                "OLD={} NEW={} perl -0777 -i -pe 's/\\Q$ENV{{OLD}}\\E/$ENV{{NEW}}/' {} && echo edited",
                quoted(old),
                quoted(new),
                quoted(path)
            ))),
            Step::Delete { path } => bash(json!(format!("rm {}", quoted(path)))),
            Step::Search { pattern } => {
                bash(json!(format!("grep -rn -- {} . | sort", quoted(pattern))))
            }
            Step::List { glob } => bash(json!(format!("find . -name {} | sort", quoted(glob)))),
            Step::Malformed { number } => bash(json!(number)),
        }]
    }

    fn last_turn(&self) -> Turn {
        Turn {
            text: Some("Done.".into()),
            tool_calls: vec![bash(json!(SUBMIT))],
            ..Default::default()
        }
    }

    fn command(&self, req: &RecordRequest) -> Result<std::process::Command, String> {
        let reg = req.home.join("litellm-registry.json");
        std::fs::write(&reg, registry().to_string())
            .map_err(|e| format!("write {}: {e}", reg.display()))?;
        let traj = req.home.join("mini.traj.json");
        let mut cmd = std::process::Command::new(req.entrypoint);
        cmd.args([
            "-y",
            "--exit-immediately",
            "-m",
            MODEL,
            "-t",
            req.prompt,
            "-o",
        ])
        .arg(&traj)
        .args(["-c", "mini.yaml"])
        .current_dir(req.work)
        .env_clear()
        .envs(base_env(req.home))
        .envs([
            ("OPENAI_BASE_URL", format!("{}/v1", req.base_url)),
            ("OPENAI_API_KEY", req.api_key.to_string()),
            ("LITELLM_LOCAL_MODEL_COST_MAP", "True".into()),
            ("MSWEA_CONFIGURED", "true".into()),
            ("LITELLM_MODEL_REGISTRY_PATH", reg.display().to_string()),
        ]);
        Ok(cmd)
    }

    fn session(&self, req: &RecordRequest, _stdout: &str) -> Result<PathBuf, String> {
        let traj = req.home.join("mini.traj.json");
        if traj.is_file() {
            Ok(traj)
        } else {
            Err(format!("mini wrote no trajectory {}", traj.display()))
        }
    }

    /// mini's requests carry no per-run field.
    fn mask_request(&self, body: &Value) -> Value {
        body.clone()
    }
}
