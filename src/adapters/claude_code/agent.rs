//! The [`Adapter`] implementation for Claude Code: parse, tools, rebuild and continuation
//! behind the one interface the engine drives. State travels in values: the parsed session
//! in the plan's [`Native`], the tools' shared state in the [`ClaudeTools`] runner.

use std::path::Path;
use std::sync::Arc;

use super::{continuation::ClaudeContinuation, parse, rebuild, tools};
use crate::compare::next_action::Action;
use crate::error::{ExecError, TrajectoryError};
use crate::kit::*;

#[derive(Default)]
pub struct ClaudeCode;

fn parsed_of(plan: &Plan) -> Result<Arc<parse::ParsedSession>, AdapterError> {
    plan.native.arc::<parse::ParsedSession>().ok_or_else(|| {
        AdapterError::Unsupported("the plan does not come from the Claude Code parser".into())
    })
}

/// Claude's tools for one replay process: one [`tools::ToolSession`] (read-file state,
/// shell cwd), fed the session's between-turn attachments as the replay reaches them.
pub struct ClaudeTools {
    session: tools::ToolSession,
    parsed: Arc<parse::ParsedSession>,
    /// Index of the next chain record whose attachments are not yet applied.
    next_record: usize,
    ctx: ExecContext,
}

impl ClaudeTools {
    /// A runner for `parsed` (settings from the session: cwd, permission mode, version).
    pub fn new(parsed: Arc<parse::ParsedSession>, ctx: &ExecContext) -> Self {
        ClaudeTools {
            session: tools::ToolSession::new(tools::ToolConfig::for_session(&parsed)),
            parsed,
            next_record: 0,
            ctx: ctx.clone(),
        }
    }

    /// Apply the attachment records Claude chained before native line `line`.
    fn apply_attachments_before(&mut self, line: usize) {
        let parsed = &self.parsed;
        for &i in parsed
            .chain
            .iter()
            .filter(|&&i| parsed.records[i].line < line)
        {
            if i >= self.next_record && parsed.records[i].kind == "attachment" {
                self.session
                    .observe_attachment(&parsed.records[i].value["attachment"], &self.ctx);
            }
        }
        if let Some(m) = parsed
            .chain
            .iter()
            .copied()
            .filter(|&i| parsed.records[i].line < line)
            .max()
        {
            self.next_record = self.next_record.max(m + 1);
        }
    }

    /// Rebuild the tools' state from a call that completed before a crash.
    pub fn seed(&mut self, call: &ToolCall, observation: &Observation) {
        self.apply_attachments_before(call.locator.line);
        self.session.seed(call, observation, &self.ctx);
    }

    pub fn session(&self) -> &tools::ToolSession {
        &self.session
    }
}

impl ToolRunner for ClaudeTools {
    fn before_batch(&mut self, batch: &Batch) {
        self.apply_attachments_before(batch.locator.line);
    }
    fn execute(&mut self, call: &ToolCall) -> Result<ToolOutcome, ExecError> {
        self.session.execute(call, &self.ctx)
    }
}

/// One assistant reply (all records of one `message.id`) as an [`Action`].
fn action_of(parsed: &parse::ParsedSession, m: &parse::AssistantMessage) -> Action {
    let mut a = Action::default();
    for &i in &m.records {
        let content = parsed.records[i].value["message"]["content"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for b in content {
            match b["type"].as_str() {
                Some("text") => a.text.push_str(b["text"].as_str().unwrap_or("")),
                Some("thinking") => a.reasoning.push_str(b["thinking"].as_str().unwrap_or("")),
                Some("tool_use") => a.tools.push((
                    b["name"].as_str().unwrap_or("").to_string(),
                    b["input"].clone(),
                )),
                _ => {}
            }
        }
    }
    a
}

fn nth_reply(parsed: &parse::ParsedSession, n: usize) -> Option<Action> {
    let m = parsed
        .assistant_messages
        .iter()
        .filter(|m| !m.synthetic)
        .nth(n)?;
    Some(action_of(parsed, m))
}

impl Adapter for ClaudeCode {
    fn name(&self) -> &'static str {
        "claude-code"
    }

    fn parse(&self, path: &Path, bytes: &[u8]) -> Result<Plan, TrajectoryError> {
        let parsed = parse::parse_bytes(path, bytes)?;
        Ok(parsed.plan().clone().carrying(parsed))
    }

    fn classify(&self, call: &ToolCall) -> ToolClass {
        tools::classify(&call.tool, &call.input)
    }

    fn tool_runner(
        &self,
        plan: &Plan,
        ctx: &ExecContext,
        completed: &[(ToolCall, Observation)],
    ) -> Result<Box<dyn ToolRunner>, AdapterError> {
        let mut t = ClaudeTools::new(parsed_of(plan)?, ctx);
        for (call, obs) in completed {
            t.seed(call, obs);
        }
        Ok(Box::new(t))
    }

    fn rebuild(&self, req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
        rebuild::rebuild(req)
    }

    fn rebuild_for_resume(&self, req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
        rebuild::rebuild_artifact_only(req)
    }

    fn continuation(
        &self,
        req: &ContinueRequest,
    ) -> Result<Box<dyn crate::runner::ContinuationAgent>, AdapterError> {
        let mut c = ClaudeContinuation::new(
            req.entrypoint,
            req.rebuilt,
            req.workspace,
            req.state_dir,
            req.continued_artifact,
        )?;
        c.model = req.model.clone();
        // Claude Code 2.1.332 offers Glob and Grep only when allowed explicitly
        // (`--allowedTools Glob Grep`), and its tool list (part of every request) must be the
        // same when it continues: the tools of the session's last recorded tool list, or, for
        // sessions that record no tool list, the search tools it called.
        let parsed = parsed_of(req.plan)?;
        let named: Vec<String> = match super::tools::offered_tools(&parsed, parsed.records.len()) {
            Some(offered) => offered,
            None => parsed.calls.iter().map(|c| c.tool.clone()).collect(),
        };
        let extra: Vec<&str> = ["Glob", "Grep"]
            .into_iter()
            .filter(|t| named.iter().any(|u| u == t))
            .collect();
        if !extra.is_empty() {
            c.extra_args.push("--allowedTools".into());
            c.extra_args.extend(extra.iter().map(|s| s.to_string()));
        }
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
        let Some(n) = plan
            .batches
            .shape(after_step.wrapping_sub(1))
            .map(|b| b.model_turn)
        else {
            return (None, None);
        };
        let orig = parsed_of(plan).ok().and_then(|p| nth_reply(&p, n));
        let cont = continued
            .and_then(|c| parse::parse_file(c).ok())
            .and_then(|p| nth_reply(&p, n));
        (orig, cont)
    }

    fn recorder(&self) -> Option<Box<dyn crate::kit::recorder::Recorder>> {
        Some(Box::new(super::record::ClaudeRecorder))
    }
}
