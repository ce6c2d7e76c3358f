//! The [`Adapter`] implementation for mini-swe-agent 1.x and 2.x. State travels in values:
//! the parsed trajectory in the plan's [`Native`], the companion runner in the
//! [`tools::Runner`].

use std::path::Path;

use journal_format::event::Mode;
use serde_json::Value;

use super::{continuation, parse, rebuild, tools};
use crate::compare::next_action::Action;
use crate::error::TrajectoryError;
use crate::kit::*;

#[derive(Default)]
pub struct MiniSweAgent;

/// The agent, model and environment classes the runner can drive.
const ENVIRONMENTS: &[&str] = &["minisweagent.environments.local.LocalEnvironment"];
const MODELS: &[&str] = &[
    "minisweagent.models.litellm_model.LitellmModel",
    "minisweagent.models.litellm_textbased_model.LitellmTextbasedModel",
];

/// One model reply as an [`Action`] (2.x tool calls; 1.x fenced actions stay in the text).
fn action_of(m: &Value) -> Action {
    let mut a = Action {
        text: m["content"].as_str().unwrap_or("").to_string(),
        ..Default::default()
    };
    for tc in m["tool_calls"].as_array().into_iter().flatten() {
        let args = tc["function"]["arguments"].as_str().unwrap_or("{}");
        a.tools.push((
            tc["function"]["name"].as_str().unwrap_or("").to_string(),
            serde_json::from_str(args).unwrap_or(Value::Null),
        ));
    }
    a
}

fn reply_after(messages: &[Value], after: usize) -> Option<Action> {
    messages
        .iter()
        .skip(after + 1)
        .find(|m| m["role"] == "assistant")
        .map(action_of)
}

impl Adapter for MiniSweAgent {
    fn name(&self) -> &'static str {
        super::NAME
    }

    fn parse(&self, path: &Path, bytes: &[u8]) -> Result<Plan, TrajectoryError> {
        let parsed = parse::parse_bytes(path, bytes)?;
        Ok(parsed.plan().clone().carrying(parsed))
    }

    fn check_plan(&self, plan: &Plan, _after_step: usize, mode: Mode) -> Result<(), AdapterError> {
        let Some(p) = plan.native.get::<parse::Parsed>() else {
            return Ok(());
        };
        let c = &p.config;
        if mode != Mode::PrepareOnly && !ENVIRONMENTS.contains(&c.environment_type.as_str()) {
            return Err(AdapterError::Unsupported(format!(
                "the trajectory ran in `{}`; pvisor replays mini's LocalEnvironment only (its sandbox is the replay's own)",
                c.environment_type
            )));
        }
        if mode == Mode::Continue && !MODELS.contains(&c.model_type.as_str()) {
            return Err(AdapterError::Unsupported(format!(
                "the trajectory's model class is `{}`; pvisor continues mini's LitellmModel and LitellmTextbasedModel (Chat Completions) only",
                c.model_type
            )));
        }
        Ok(())
    }

    fn classify(&self, call: &ToolCall) -> ToolClass {
        tools::classify(call)
    }

    fn tool_runner(
        &self,
        plan: &Plan,
        ctx: &ExecContext,
        _completed: &[(ToolCall, Observation)],
    ) -> Result<Box<dyn ToolRunner>, AdapterError> {
        let p = plan.native.get::<parse::Parsed>().ok_or_else(|| {
            AdapterError::Unsupported("the plan carries no mini trajectory".into())
        })?;
        Ok(Box::new(
            tools::Runner::new(ctx, tools::Session::of(p)).map_err(AdapterError::Unsupported)?,
        ))
    }

    fn rebuild(&self, req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
        rebuild::rebuild(req)
    }

    fn rebuild_for_resume(&self, req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
        rebuild::rebuild_for_resume(req)
    }

    fn continuation(
        &self,
        req: &ContinueRequest,
    ) -> Result<Box<dyn crate::runner::ContinuationAgent>, AdapterError> {
        Ok(Box::new(continuation::MiniContinuation::new(
            req.entrypoint,
            req.rebuilt,
            req.workspace,
            req.state_dir,
            req.continued_artifact,
            req.model.as_deref(),
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
        let Some(end) = p.boundary_message(after_step) else {
            return (None, None);
        };
        let orig = reply_after(p.messages(), end);
        let cont = continued
            .and_then(|c| std::fs::read(c).ok().map(|b| (c.to_path_buf(), b)))
            .and_then(|(c, b)| parse::parse_bytes(&c, &b).ok())
            .and_then(|c| reply_after(c.messages(), end));
        (orig, cont)
    }

    fn recorder(&self) -> Option<Box<dyn crate::kit::recorder::Recorder>> {
        Some(Box::new(super::record::MiniRecorder))
    }
}
