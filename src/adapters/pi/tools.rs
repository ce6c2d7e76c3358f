//! Pi's four built-in tools — read, bash, edit, write — re-executed by Pi's own
//! implementations in the Node runner ([`super::runner`]), with the environment Pi gives
//! them. Writes outside the workspace are refused before the runner sees them. Any other
//! tool is unknown: refused before anything runs.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::error::ExecError;
use crate::kit::{ExecContext, Observation, ToolCall, ToolClass, ToolOutcome};

/// The tools Pi 0.83.0 offers by default (its active tools).
pub const TOOLS: &[&str] = &["read", "bash", "edit", "write"];

pub fn classify(call: &ToolCall) -> ToolClass {
    match call.tool.as_str() {
        "read" => ToolClass::ReadOnly,
        "bash" | "edit" | "write" => ToolClass::Mutating,
        _ => ToolClass::Unknown,
    }
}

/// The path a call names, resolved as Pi resolves it (`@` prefix dropped, `~` = HOME,
/// relative to the cwd).
fn resolve(cwd: &Path, home: &Path, p: &str) -> PathBuf {
    let p = p.strip_prefix('@').unwrap_or(p);
    if p == "~" {
        return home.to_path_buf();
    }
    if let Some(rest) = p.strip_prefix("~/") {
        return home.join(rest);
    }
    cwd.join(p)
}

/// The bash output's full-output file (`<tmpdir>/pi-bash-<16 hex>.log`) is named at random.
pub fn mask_dynamic(call: &ToolCall, text: &str) -> String {
    if call.tool != "bash" {
        return text.to_string();
    }
    mask_full_output_file(text)
}

/// `text` with the name of every bash full-output file replaced by `<full output file>`.
pub fn mask_full_output_file(text: &str) -> String {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re =
        RE.get_or_init(|| regex::Regex::new(r"[^\s\]]*pi-bash-[0-9a-f]{16}\.log").expect("valid"));
    re.replace_all(text, "<full output file>").into_owned()
}

/// The facts of the session a tool call sees (bash gets them as `PI_*` variables).
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    pub session_id: String,
    pub session_file: PathBuf,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub thinking_level: Option<String>,
}

/// One replay process's tool runner: the Node runner is started at the first call.
pub struct Runner {
    ctx: ExecContext,
    call_ctx: CallContext,
    entrypoint: PathBuf,
    process: Option<super::runner::ToolProcess>,
}

impl Runner {
    /// Finds the Pi entrypoint first, so that a missing Pi is refused before any tool runs.
    pub fn new(ctx: &ExecContext, call_ctx: CallContext) -> Result<Runner, String> {
        let entrypoint = crate::install::resolve(ctx.agent_entrypoint.as_deref(), &super::ENTRY)?;
        Ok(Runner {
            ctx: ctx.clone(),
            call_ctx,
            entrypoint,
            process: None,
        })
    }

    fn home(&self) -> PathBuf {
        super::rebuild::home_dir(&self.ctx.state_dir)
    }

    fn process(&mut self, tool: &str) -> Result<&mut super::runner::ToolProcess, ExecError> {
        if self.process.is_none() {
            let fail = |m: String| ExecError::Unsupported {
                tool: tool.to_string(),
                reason: m,
            };
            let dir = self.ctx.state_dir.join("pi");
            let script = super::runner::materialize(&dir)
                .map_err(|e| fail(format!("{}: {e}", dir.display())))?;
            let env = super::rebuild::agent_env(&self.ctx.state_dir);
            let p = super::runner::ToolProcess::start(
                &self.entrypoint,
                &script,
                &env,
                &self.ctx.workspace,
                &self.ctx.log_dir.join("pi-tools-runner.stderr.log"),
                Some(crate::supervisor::groups::dir_of(&self.ctx.state_dir)),
            )
            .map_err(fail)?;
            self.process = Some(p);
        }
        Ok(self.process.as_mut().expect("started"))
    }
}

impl crate::kit::ToolRunner for Runner {
    fn execute(&mut self, call: &ToolCall) -> Result<ToolOutcome, ExecError> {
        if !TOOLS.contains(&call.tool.as_str()) {
            return Err(ExecError::Unsupported {
                tool: call.tool.clone(),
                reason: "Pi 0.83.0's tools are read, bash, edit and write".into(),
            });
        }
        let started = std::time::Instant::now();
        let mut touched = vec![];
        if matches!(call.tool.as_str(), "write" | "edit") {
            if let Some(p) = call.input.get("path").and_then(Value::as_str) {
                let full = resolve(&self.ctx.workspace, &self.home(), p);
                let inside =
                    crate::workspace::confine::confine_for_write(&self.ctx.workspace, &full)?;
                if let Ok(rel) = inside
                    .strip_prefix(std::fs::canonicalize(&self.ctx.workspace).unwrap_or_default())
                {
                    touched.push(rel.to_path_buf());
                }
            }
        }
        let c = &self.call_ctx;
        let request = json!({
            "tool": call.tool,
            "args": call.input,
            "cwd": self.ctx.workspace,
            "toolCallId": call.call_id,
            "timeoutMs": self.ctx.timeout.as_millis() as u64,
            "ctx": {
                "sessionId": c.session_id,
                "sessionFile": c.session_file,
                "provider": c.provider,
                "model": c.model,
                "thinkingLevel": c.thinking_level,
            },
        });
        let tool = call.tool.clone();
        let answer = self
            .process(&tool)?
            .call(request)
            .map_err(|m| ExecError::Io {
                tool: tool.clone(),
                source: std::io::Error::other(m),
            });
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                // A dead runner is restarted for the next call.
                self.process = None;
                return Err(e);
            }
        };
        let mut native = json!({"content": answer.content});
        if let Some(d) = answer.details {
            native["details"] = d;
        }
        Ok(ToolOutcome {
            observation: Observation {
                text: super::parse::result_text(&native["content"]),
                is_error: answer.is_error,
                native: Some(native),
            },
            exit_code: None,
            duration_ms: started.elapsed().as_millis() as u64,
            touched,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_as_pi_resolves_them() {
        let (cwd, home) = (Path::new("/w"), Path::new("/h"));
        assert_eq!(resolve(cwd, home, "a.txt"), PathBuf::from("/w/a.txt"));
        assert_eq!(resolve(cwd, home, "@a.txt"), PathBuf::from("/w/a.txt"));
        assert_eq!(resolve(cwd, home, "~/x"), PathBuf::from("/h/x"));
        assert_eq!(resolve(cwd, home, "/etc/x"), PathBuf::from("/etc/x"));
    }

    #[test]
    fn the_full_output_file_name_is_masked() {
        let call = ToolCall {
            call_id: "c".into(),
            tool: "bash".into(),
            input: json!({}),
            original: None,
            locator: Default::default(),
        };
        assert_eq!(
            mask_dynamic(
                &call,
                "[Showing lines 1-2 of 9. Full output: /tmp/pi-bash-0123456789abcdef.log]"
            ),
            "[Showing lines 1-2 of 9. Full output: <full output file>]"
        );
    }
}
