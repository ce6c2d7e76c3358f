//! The [`Adapter`] implementation for Pi 0.83.0. State travels in values: the parsed session
//! in the plan's [`Native`], the Node runner in the [`tools::Runner`].

use std::path::Path;

use journal_format::event::Mode;
use serde_json::Value;

use super::{continuation, parse, rebuild, tools};
use crate::compare::next_action::Action;
use crate::error::TrajectoryError;
use crate::kit::*;

#[derive(Default)]
pub struct Pi;

/// One assistant message as an [`Action`].
fn action_of(m: &Value) -> Action {
    let mut a = Action::default();
    for b in m["content"].as_array().into_iter().flatten() {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => a.text.push_str(b["text"].as_str().unwrap_or("")),
            Some("thinking") => a.reasoning.push_str(b["thinking"].as_str().unwrap_or("")),
            Some("toolCall") => a.tools.push((
                b["name"].as_str().unwrap_or("").to_string(),
                b.get("arguments").cloned().unwrap_or(Value::Null),
            )),
            _ => {}
        }
    }
    a
}

/// The first assistant message after entry `after`.
fn reply_after(s: &super::session::Session, after: usize) -> Option<Action> {
    s.entries
        .iter()
        .skip(after + 1)
        .find(|e| e.role() == "assistant")
        .and_then(|e| e.message().map(action_of))
}

impl Adapter for Pi {
    fn name(&self) -> &'static str {
        super::NAME
    }

    fn parse(&self, path: &Path, bytes: &[u8]) -> Result<Plan, TrajectoryError> {
        let parsed = parse::parse_bytes(path, bytes)?;
        Ok(parsed.plan().clone().carrying(parsed))
    }

    fn check_plan(&self, plan: &Plan, after_step: usize, mode: Mode) -> Result<(), AdapterError> {
        let Some(p) = plan.native.get::<parse::Parsed>() else {
            return Ok(());
        };
        if mode != Mode::Continue || after_step == 0 || after_step > p.sites.len() {
            return Ok(());
        }
        let cut = rebuild::cut(p, after_step, &Default::default());
        match rebuild::continue_refusal(&cut) {
            Some(why) => Err(AdapterError::Unsupported(format!(
                "this session cannot be continued: {why}"
            ))),
            None => Ok(()),
        }
    }

    fn classify(&self, call: &ToolCall) -> ToolClass {
        tools::classify(call)
    }

    fn mask_dynamic(&self, call: &ToolCall, text: &str) -> String {
        tools::mask_dynamic(call, text)
    }

    /// Pi's bash reads stdout and stderr from two pipes and appends each chunk as it comes.
    fn streams_interleave(&self, call: &ToolCall) -> bool {
        call.tool == "bash"
    }

    fn tool_runner(
        &self,
        plan: &Plan,
        ctx: &ExecContext,
        _completed: &[(ToolCall, Observation)],
    ) -> Result<Box<dyn ToolRunner>, AdapterError> {
        let mut call_ctx = tools::CallContext::default();
        if let Some(p) = plan.native.get::<parse::Parsed>() {
            let s = &p.session;
            call_ctx.session_id = s.id().to_string();
            call_ctx.session_file = rebuild::session_path(&ctx.state_dir, s, &ctx.workspace);
            if let Some((provider, model)) = s.model() {
                call_ctx.provider = Some(provider);
                call_ctx.model = Some(model);
            }
            call_ctx.thinking_level = Some(
                s.thinking_level()
                    .unwrap_or(rebuild::DEFAULT_THINKING)
                    .to_string(),
            );
        }
        Ok(Box::new(
            tools::Runner::new(ctx, call_ctx).map_err(AdapterError::Unsupported)?,
        ))
    }

    fn rebuild(&self, req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
        rebuild::rebuild(req)
    }

    fn continuation(
        &self,
        req: &ContinueRequest,
    ) -> Result<Box<dyn crate::runner::ContinuationAgent>, AdapterError> {
        Ok(Box::new(continuation::PiContinuation::new(
            req.entrypoint,
            req.rebuilt,
            req.workspace,
            req.state_dir,
            req.continued_artifact,
            req.boundary_prompt,
        )?))
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
        let Some(end) = p.boundary_entry(after_step) else {
            return (None, None);
        };
        let orig = reply_after(&p.session, end);
        let cont = continued
            .and_then(|c| std::fs::read(c).ok().map(|b| (c.to_path_buf(), b)))
            .and_then(|(c, b)| parse::parse_bytes(&c, &b).ok())
            .and_then(|c| {
                // The continued file: the rebuilt entries, then the live ones.
                let k = c.session.entries.iter().position(|e| {
                    e.id() == p.session.entries.get(end).map(|x| x.id()).unwrap_or("")
                })?;
                reply_after(&c.session, k)
            });
        (orig, cont)
    }

    fn recorder(&self) -> Option<Box<dyn crate::kit::recorder::Recorder>> {
        Some(Box::new(super::record::PiRecorder))
    }
}
