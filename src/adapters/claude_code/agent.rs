//! The [`Adapter`] implementation for Claude Code: parse, tools, rebuild and continuation
//! behind the one interface the engine drives.

use std::path::Path;
use std::sync::Mutex;

use super::{continuation::ClaudeContinuation, parse, rebuild, tools};
use crate::adapter::*;
use crate::compare::next_action::Action;
use crate::error::{ExecError, TrajectoryError};

#[derive(Default)]
pub struct ClaudeCode {
    /// The parsed session of the run (tools need its settings and its attachments).
    session: Mutex<Option<parse::ParsedSession>>,
    /// Index of the next chain record whose attachments are not yet applied.
    next_record: Mutex<usize>,
}

impl ClaudeCode {
    fn apply_attachments_before(&self, line: usize, ctx: &ExecContext) {
        let guard = self.session.lock().unwrap_or_else(|e| e.into_inner());
        let Some(parsed) = guard.as_ref() else { return };
        let mut next = self.next_record.lock().unwrap_or_else(|e| e.into_inner());
        let session = tools::session_for(&ctx.workspace);
        for &i in parsed
            .chain
            .iter()
            .filter(|&&i| parsed.records[i].line < line)
        {
            if i >= *next && parsed.records[i].kind == "attachment" {
                session.observe_attachment(&parsed.records[i].value["attachment"], ctx);
            }
        }
        if let Some(m) = parsed
            .chain
            .iter()
            .copied()
            .filter(|&i| parsed.records[i].line < line)
            .max()
        {
            *next = (*next).max(m + 1);
        }
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

fn nth_reply(path: &Path, n: usize) -> Option<Action> {
    let parsed = parse::parse_file(path).ok()?;
    let m = parsed
        .assistant_messages
        .iter()
        .filter(|m| !m.synthetic)
        .nth(n)?;
    Some(action_of(&parsed, m))
}

impl Adapter for ClaudeCode {
    fn name(&self) -> &'static str {
        "claude-code"
    }

    fn parse(&self, path: &Path, bytes: &[u8]) -> Result<Plan, TrajectoryError> {
        let parsed = parse::parse_bytes(path, bytes)?;
        let plan = parsed.plan().clone();
        *self.session.lock().unwrap_or_else(|e| e.into_inner()) = Some(parsed);
        Ok(plan)
    }

    fn classify(&self, call: &ToolCall) -> ToolClass {
        tools::classify(&call.tool, &call.input)
    }

    fn execute(&self, call: &ToolCall, ctx: &ExecContext) -> Result<ToolOutcome, ExecError> {
        tools::execute(call, ctx)
    }

    fn rebuild(&self, req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
        rebuild::rebuild(req)
    }

    fn rebuild_for_resume(&self, req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
        rebuild::rebuild_artifact_only(req)
    }

    fn begin_replay(
        &self,
        _plan: &Plan,
        ctx: &ExecContext,
        completed: &[(ToolCall, Observation)],
    ) -> Result<(), AdapterError> {
        let config = {
            let guard = self.session.lock().unwrap_or_else(|e| e.into_inner());
            let parsed = guard.as_ref().ok_or_else(|| {
                AdapterError::Unsupported("the session must be parsed before tools run".into())
            })?;
            tools::ToolConfig::for_session(parsed)
        };
        *self.next_record.lock().unwrap_or_else(|e| e.into_inner()) = 0;
        let session = tools::begin_session(&ctx.workspace, config);
        for (call, obs) in completed {
            self.apply_attachments_before(call.locator.line, ctx);
            session.seed(call, obs, ctx);
        }
        Ok(())
    }

    fn before_batch(&self, batch: &Batch, ctx: &ExecContext) {
        self.apply_attachments_before(batch.locator.line, ctx);
    }

    fn continuation(
        &self,
        req: &ContinueRequest,
    ) -> Result<Box<dyn crate::continuation::ContinuationAgent>, AdapterError> {
        let mut c = ClaudeContinuation::new(
            req.entrypoint,
            req.rebuilt,
            req.workspace,
            req.state_dir,
            req.continued_artifact,
        )?;
        c.model = req.model.clone();
        // Claude Code 2.1.332 offers Glob and Grep only when allowed explicitly: a session
        // that called them was started with `--allowedTools Glob Grep`, and its tool list
        // (part of every request) must be the same when it continues.
        let used: Vec<String> = {
            let guard = self.session.lock().unwrap_or_else(|e| e.into_inner());
            guard
                .as_ref()
                .map(|p| p.calls.iter().map(|c| c.tool.clone()).collect())
                .unwrap_or_default()
        };
        let extra: Vec<&str> = ["Glob", "Grep"]
            .into_iter()
            .filter(|t| used.iter().any(|u| u == t))
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
        source: &Path,
        after_step: usize,
        continued: Option<&Path>,
    ) -> (Option<Action>, Option<Action>) {
        let turns = self
            .session
            .lock()
            .ok()
            .and_then(|g| {
                g.as_ref().map(|p| {
                    p.plan()
                        .batches
                        .get(after_step.wrapping_sub(1))
                        .map(|b| b.model_turn)
                })
            })
            .flatten()
            .or_else(|| {
                parse::parse_file(source).ok().and_then(|p| {
                    p.plan()
                        .batches
                        .get(after_step.wrapping_sub(1))
                        .map(|b| b.model_turn)
                })
            });
        let Some(n) = turns else { return (None, None) };
        (
            nth_reply(source, n),
            continued.and_then(|c| nth_reply(c, n)),
        )
    }
}
