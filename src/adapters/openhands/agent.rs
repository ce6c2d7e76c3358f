//! The [`Adapter`] implementation for OpenHands SDK conversations. State travels in values:
//! the parsed store in the plan's [`Native`], the companion runner in the [`tools::Runner`].

use std::path::Path;

use journal_format::event::Mode;
use serde_json::Value;

use super::{continuation, parse, rebuild, tools, versions};
use crate::compare::next_action::Action;
use crate::error::TrajectoryError;
use crate::kit::*;

#[derive(Default)]
pub struct OpenHands;

/// The model reply that follows event index `from` (its actions, or an agent message).
fn reply_after(events: &[Value], from: usize) -> Option<Action> {
    let first = events.iter().enumerate().skip(from).find(|(_, e)| {
        e["kind"] == "ActionEvent" || (e["kind"] == "MessageEvent" && e["source"] == "agent")
    })?;
    let (i, e) = first;
    let text_of = |parts: &Value| {
        parts
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("")
    };
    let mut a = Action::default();
    if e["kind"] == "MessageEvent" {
        a.text = text_of(&e["llm_message"]["content"]);
        return Some(a);
    }
    a.text = text_of(&e["thought"]);
    let response = e["llm_response_id"].clone();
    for ev in events[i..]
        .iter()
        .take_while(|x| x["kind"] == "ActionEvent" && x["llm_response_id"] == response)
    {
        let args = ev["tool_call"]["arguments"].as_str().unwrap_or("{}");
        a.tools.push((
            ev["tool_name"].as_str().unwrap_or("").to_string(),
            serde_json::from_str(args).unwrap_or(Value::Null),
        ));
    }
    Some(a)
}

impl Adapter for OpenHands {
    fn name(&self) -> &'static str {
        super::NAME
    }

    fn read_input(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        super::store::read(path)
    }

    fn parse(&self, path: &Path, bytes: &[u8]) -> Result<Plan, TrajectoryError> {
        let parsed = parse::parse_bytes(path, bytes)?;
        Ok(parsed.plan().clone().carrying(parsed))
    }

    fn check_plan(&self, plan: &Plan, _after_step: usize, mode: Mode) -> Result<(), AdapterError> {
        let Some(p) = plan.native.get::<parse::Parsed>() else {
            return Ok(());
        };
        if mode == Mode::PrepareOnly {
            return Ok(());
        }
        let agent = &p.base_state["agent"];
        let kind = agent["kind"].as_str().unwrap_or("Agent");
        if kind != "Agent" {
            return Err(AdapterError::Unsupported(format!(
                "the conversation's agent is `{kind}`; pvisor replays the SDK's `Agent`"
            )));
        }
        let unknown: Vec<&str> = agent["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .filter(|n| !versions::TOOLS.contains(n))
            .collect();
        if !unknown.is_empty() {
            return Err(AdapterError::Unsupported(format!(
                "the conversation's agent has tools pvisor does not replay: {} (replayed: {}, {})",
                unknown.join(", "),
                versions::TOOLS.join(", "),
                versions::BUILTIN_TOOLS.join(", ")
            )));
        }
        if agent
            .get("mcp_config")
            .is_some_and(|m| !m.is_null() && m != &Value::Object(Default::default()))
        {
            return Err(AdapterError::Unsupported(
                "the conversation's agent uses MCP servers, which pvisor does not replay".into(),
            ));
        }
        Ok(())
    }

    fn session_extension(&self, _source: &Path) -> String {
        "jsonl".into()
    }

    fn classify(&self, call: &ToolCall) -> ToolClass {
        tools::classify(call)
    }

    fn tool_runner(
        &self,
        plan: &Plan,
        ctx: &ExecContext,
        completed: &[(ToolCall, Observation)],
    ) -> Result<Box<dyn ToolRunner>, AdapterError> {
        let p = plan.native.get::<parse::Parsed>().ok_or_else(|| {
            AdapterError::Unsupported("the plan carries no OpenHands store".into())
        })?;
        let cwd = tools::terminal_cwd_after(completed, &ctx.workspace);
        Ok(Box::new(
            tools::Runner::new(ctx, p, cwd).map_err(AdapterError::Unsupported)?,
        ))
    }

    fn mask_dynamic(&self, _call: &ToolCall, text: &str) -> String {
        parse::mask_dynamic(text)
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
        Ok(Box::new(continuation::OpenHandsContinuation::new(
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
        let Some(end) = p.boundary_event(after_step) else {
            return (None, None);
        };
        let orig = reply_after(&p.events, end + 1);
        let cont = continued
            .and_then(|c| std::fs::read(c).ok().map(|b| (c.to_path_buf(), b)))
            .and_then(|(c, b)| parse::parse_bytes(&c, &b).ok())
            .and_then(|c| reply_after(&c.events, end + 1));
        (orig, cont)
    }

    fn recorder(&self) -> Option<Box<dyn crate::kit::recorder::Recorder>> {
        Some(Box::new(super::record::OpenHandsRecorder))
    }
}
