//! The [`Adapter`] implementation for OpenCode 1.17.11. State travels in values: the parsed
//! session in the plan's [`Native`], the instruction files the model has seen in the
//! [`tools::Runner`].

use std::path::Path;

use journal_format::event::Mode;
use serde_json::Value;

use super::{continuation, parse, rebuild, tools};
use crate::compare::next_action::Action;
use crate::error::TrajectoryError;
use crate::kit::*;

#[derive(Default)]
pub struct OpenCode;

/// One step's model reply (text, reasoning, tool calls) as an [`Action`].
fn action_of(parts: &[Value]) -> Action {
    let mut a = Action::default();
    for p in parts {
        match p.get("type").and_then(Value::as_str) {
            Some("text") => a
                .text
                .push_str(p.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("reasoning") => a
                .reasoning
                .push_str(p.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool") => a.tools.push((
                p.get("tool")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                p.pointer("/state/input").cloned().unwrap_or(Value::Null),
            )),
            _ => {}
        }
    }
    a
}

/// The `n`-th assistant message after message `after` (0-based), as an action.
fn reply_after(session: &super::session::Session, after: usize, n: usize) -> Option<Action> {
    session
        .messages
        .iter()
        .skip(after + 1)
        .filter(|m| m.role() == "assistant")
        .nth(n)
        .map(|m| action_of(&m.parts))
}

impl Adapter for OpenCode {
    fn name(&self) -> &'static str {
        "opencode"
    }

    fn parse(&self, path: &Path, bytes: &[u8]) -> Result<Plan, TrajectoryError> {
        let parsed = parse::parse_bytes(path, bytes)?;
        Ok(parsed.plan().clone().carrying(parsed))
    }

    fn check_plan(&self, plan: &Plan, after_step: usize, mode: Mode) -> Result<(), AdapterError> {
        let Some(p) = plan.native.get::<parse::Parsed>() else {
            return Ok(());
        };
        if mode != Mode::Continue {
            return Ok(());
        }
        let cut = rebuild::cut_session(p, after_step, &Default::default());
        if let Some(why) = rebuild::prefix_refusal(&cut) {
            return Err(AdapterError::Unsupported(format!(
                "this session cannot be continued: {why}"
            )));
        }
        let dir = plan.original_cwd.clone().unwrap_or_default();
        if let Some(why) = continuation::provider_refusal(&cut, &dir) {
            return Err(AdapterError::Unsupported(format!(
                "this session cannot be continued: {why}"
            )));
        }
        Ok(())
    }

    /// Every rebuilt session is an `opencode export` JSON, whatever the input form.
    fn session_extension(&self, _source: &Path) -> String {
        "json".into()
    }

    fn classify(&self, call: &ToolCall) -> ToolClass {
        tools::classify(call)
    }

    fn mask_dynamic(&self, call: &ToolCall, text: &str) -> String {
        tools::mask_dynamic(call, text)
    }

    fn tool_runner(
        &self,
        _plan: &Plan,
        ctx: &ExecContext,
        completed: &[(ToolCall, Observation)],
    ) -> Result<Box<dyn ToolRunner>, AdapterError> {
        Ok(Box::new(tools::Runner::new(ctx, completed)))
    }

    fn rebuild(&self, req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
        rebuild::rebuild(req)
    }

    fn continuation(
        &self,
        req: &ContinueRequest,
    ) -> Result<Box<dyn crate::runner::ContinuationAgent>, AdapterError> {
        let mut c = continuation::OpenCodeContinuation::new(
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
        let Some(p) = plan.native.get::<parse::Parsed>() else {
            return (None, None);
        };
        let Some(&(mi, _)) = p.step_ends.get(after_step.wrapping_sub(1)) else {
            return (None, None);
        };
        let orig = reply_after(&p.session, mi, 0);
        let cont = continued
            .and_then(|c| std::fs::read(c).ok().map(|b| (c.to_path_buf(), b)))
            .and_then(|(c, b)| parse::parse_bytes(&c, &b).ok())
            .and_then(|c| reply_after(&c.session, mi, 0));
        (orig, cont)
    }

    fn recorder(&self) -> Option<Box<dyn crate::kit::recorder::Recorder>> {
        Some(Box::new(super::record::OpenCodeRecorder))
    }
}
