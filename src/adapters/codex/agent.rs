//! The [`Adapter`] implementation for Codex CLI 0.149.0. State travels in values: the
//! parsed rollout in the plan's [`Native`], running unified exec sessions in the
//! [`CodexTools`] runner (killed when it is dropped).

use std::path::Path;

use super::{code_mode, parse, rebuild, tools};
use crate::compare::next_action::Action;
use crate::error::{ExecError, TrajectoryError};
use crate::kit::*;
use serde_json::Value;

#[derive(Default)]
pub struct Codex;

/// Codex's tools for one replay process (unified exec sessions and code-mode cells live
/// between calls).
pub struct CodexTools {
    sessions: std::sync::Arc<tools::Sessions>,
    cells: code_mode::Cells,
    ctx: ExecContext,
}

impl CodexTools {
    pub fn new(ctx: &ExecContext) -> Self {
        let sessions = std::sync::Arc::new(tools::Sessions::default());
        CodexTools {
            cells: code_mode::Cells::new(sessions.clone(), ctx),
            sessions,
            ctx: ctx.clone(),
        }
    }
}

impl ToolRunner for CodexTools {
    fn execute(&mut self, call: &ToolCall) -> Result<ToolOutcome, ExecError> {
        self.execute_observed(call, &mut |_| {})
    }

    fn execute_observed(
        &mut self,
        call: &ToolCall,
        on_inner: &mut dyn FnMut(InnerCall),
    ) -> Result<ToolOutcome, ExecError> {
        if let Some(r) = tools::refusal(call) {
            return Err(ExecError::Unsupported {
                tool: call.tool.clone(),
                reason: r,
            });
        }
        match call.tool.as_str() {
            "exec" => self.cells.exec(call, on_inner),
            "wait" => self.cells.wait(call, on_inner),
            _ => self.sessions.execute(call, &self.ctx),
        }
    }
}

/// One model reply (its items, read again from the byte range `reply` of the rollout at
/// `path`) as an [`Action`]; `None` when the file cannot be read.
fn action_of(path: &Path, era: parse::Era, reply: &std::ops::Range<u64>) -> Option<Action> {
    use std::io::{Read, Seek};
    let mut f = std::fs::File::open(path).ok()?;
    f.seek(std::io::SeekFrom::Start(reply.start)).ok()?;
    let mut bytes = vec![];
    f.take(reply.end.saturating_sub(reply.start))
        .read_to_end(&mut bytes)
        .ok()?;
    let items: Vec<Value> = bytes
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .filter_map(|value| {
            // Line numbers only matter for a bare file's meta line, which is never in a reply.
            parse::RolloutLine { line: 0, value }
                .response_item(era)
                .filter(|it| parse::is_reply_item(it))
                .cloned()
        })
        .collect();
    Some(action_of_items(&items))
}

/// The [`Action`] of a reply's items.
fn action_of_items(items: &[Value]) -> Action {
    let mut a = Action::default();
    for it in items {
        match it.get("type").and_then(Value::as_str) {
            Some("message") => {
                for c in it["content"].as_array().into_iter().flatten() {
                    a.text
                        .push_str(c.get("text").and_then(Value::as_str).unwrap_or(""));
                }
            }
            Some("reasoning") => {
                for c in it["summary"].as_array().into_iter().flatten() {
                    a.reasoning
                        .push_str(c.get("text").and_then(Value::as_str).unwrap_or(""));
                }
            }
            Some("function_call") => {
                let args = it["arguments"]
                    .as_str()
                    .and_then(|s| serde_json::from_str(s).ok())
                    .unwrap_or(Value::Null);
                a.tools
                    .push((it["name"].as_str().unwrap_or("").to_string(), args));
            }
            Some("custom_tool_call") => a.tools.push((
                it["name"].as_str().unwrap_or("").to_string(),
                it["input"].clone(),
            )),
            Some("local_shell_call") => a.tools.push(("local_shell".into(), it["action"].clone())),
            _ => {}
        }
    }
    a
}

impl Adapter for Codex {
    fn name(&self) -> &'static str {
        "codex"
    }

    fn parse(&self, path: &Path, bytes: &[u8]) -> Result<Plan, TrajectoryError> {
        Ok(parse::parse_bytes(path, bytes)?.into_plan())
    }

    /// The rollout is read once, line by line (it may be gigabytes).
    fn parse_path(&self, path: &Path) -> Result<(Plan, String), TrajectoryError> {
        let (parsed, sha) = parse::parse_file_hashed(path)?;
        Ok((parsed.into_plan(), sha))
    }

    fn classify(&self, call: &ToolCall) -> ToolClass {
        match tools::refusal(call) {
            Some(_) if tools::classify(call) != ToolClass::NonRegenerable => ToolClass::Unknown,
            _ => tools::classify(call),
        }
    }

    fn refusal(&self, call: &ToolCall) -> Option<String> {
        tools::refusal(call)
    }

    fn mask_dynamic(&self, _call: &ToolCall, text: &str) -> String {
        tools::mask_dynamic(text)
    }

    fn rebuild(&self, req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
        rebuild::rebuild(req)
    }

    /// Codex keeps state of the earlier attempt in its home (thread database, history): the
    /// home is emptied, so the agent starts as the first attempt did.
    fn rebuild_for_restart(&self, req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
        let home = rebuild::codex_home(req.state_dir);
        match std::fs::remove_dir_all(&home) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(AdapterError::Io {
                    path: home,
                    source: e,
                })
            }
            _ => {}
        }
        rebuild::rebuild(req)
    }

    fn tool_runner(
        &self,
        plan: &Plan,
        ctx: &ExecContext,
        completed: &[(ToolCall, Observation)],
    ) -> Result<Box<dyn ToolRunner>, AdapterError> {
        // A unified exec session still running at a crash cannot be re-attached: refuse
        // resumption when a completed call left one open (cells: `Cells::after`).
        for (call, obs) in completed {
            if call.tool == "exec_command"
                && obs
                    .text
                    .lines()
                    .any(|l| l.starts_with("Process running with session ID "))
            {
                return Err(AdapterError::Unsupported(format!(
                    "call {} left a unified exec session running before the crash; it cannot be re-attached",
                    call.call_id
                )));
            }
        }
        // Code-mode cells need their Node: a missing one is refused before any call runs.
        let mut code_mode = false;
        for b in plan.batches.iter() {
            if b?
                .calls
                .iter()
                .any(|c| matches!(c.tool.as_str(), "exec" | "wait"))
            {
                code_mode = true;
                break;
            }
        }
        if code_mode {
            code_mode::host::find_node(ctx.agent_entrypoint.as_deref())
                .map_err(AdapterError::Unsupported)?;
        }
        let mut tools = CodexTools::new(ctx);
        tools
            .cells
            .after(completed)
            .map_err(AdapterError::Unsupported)?;
        Ok(Box::new(tools))
    }

    fn continuation(
        &self,
        req: &ContinueRequest,
    ) -> Result<Box<dyn crate::runner::ContinuationAgent>, AdapterError> {
        let mut c = super::continuation::CodexContinuation::new(
            req.entrypoint,
            req.rebuilt,
            req.workspace,
            req.state_dir,
            req.continued_artifact,
        )?;
        c.model = req.model.clone();
        if let Ok(p) = std::env::var("PATH") {
            c.path_env = p;
        }
        Ok(Box::new(c))
    }

    fn next_actions(
        &self,
        plan: &Plan,
        after_step: usize,
        continued: Option<&Path>,
    ) -> (Option<Action>, Option<Action>) {
        let Some(p) = plan.native.get::<parse::ParsedRollout>() else {
            return (None, None);
        };
        let Some(b) = plan.batches.shape(after_step.wrapping_sub(1)) else {
            return (None, None);
        };
        let n = b.model_turn; // the next reply is replies[n] (0-based)
        let orig = p.replies.get(n).and_then(|r| action_of(&p.path, p.era, r));
        let cont = continued
            .and_then(|c| parse::parse_file(c).ok())
            .and_then(|c| c.replies.get(n).and_then(|r| action_of(&c.path, c.era, r)));
        (orig, cont)
    }

    fn recorder(&self) -> Option<Box<dyn crate::kit::recorder::Recorder>> {
        Some(Box::new(super::record::CodexRecorder))
    }
}
