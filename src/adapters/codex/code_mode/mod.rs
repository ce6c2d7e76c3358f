//! Codex code mode (0.149.0's default model `gpt-5.6-sol`): the model's only tools are
//! `exec`, whose input is JavaScript calling `tools.exec_command(…)` and friends, and `wait`,
//! which polls a cell still running after its yield time.
//!
//! - [`cell`]: the pragma and Codex's exact output framing;
//! - [`host`]: the Node process that runs cells, each in a worker of its own with a bare
//!   realm (`host.mjs`);
//! - this module: [`Cells`], one replay's cells: it sends a cell to the host, runs every
//!   `tools.*` call the cell makes with pvisor's own Codex tools (in parallel, as Codex does),
//!   reports each as an [`InnerCall`](crate::kit::InnerCall), and frames the answer.
//!
//! Why Node: Codex runs cells in V8 (rusty_v8, through its `codex-code-mode-host`); the error
//! texts the model sees (`TypeError: … is not a function\n    at exec_main.mjs:1:13`,
//! JSON cycle messages, syntax errors) are V8's own, which no other engine reproduces.

pub mod cell;
pub mod host;

use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::time::Instant;

use serde_json::{json, Value};

use super::tools::{self, Sessions};
use crate::error::ExecError;
use crate::kit::{ExecContext, InnerCall, Observation, ToolCall, ToolOutcome};
use cell::Status;
use host::{Event, Host};

/// The `tools.*` of a cell in 0.149.0 (with the fixture's config), and how each takes input.
/// Only the first four are replayed; the others are refused before anything runs.
pub const CELL_TOOLS: &[(&str, &str)] = &[
    ("apply_patch", "freeform"),
    ("create_goal", "function"),
    ("exec_command", "function"),
    ("get_goal", "function"),
    ("update_goal", "function"),
    ("update_plan", "function"),
    ("view_image", "function"),
    ("write_stdin", "function"),
];

/// Why an `exec` input cannot be replayed faithfully, checked before anything runs.
pub fn refusal(input: &Value) -> Option<String> {
    use std::sync::OnceLock;
    static RES: OnceLock<Vec<(regex::Regex, &'static str)>> = OnceLock::new();
    let Some(src) = input.as_str() else {
        return Some("a code-mode `exec` input must be JavaScript text".into());
    };
    let res = RES.get_or_init(|| {
        vec![
            (
                regex::Regex::new(r"\b(notify|audio|generatedImage)\s*\(").unwrap(),
                "calls a code-mode output helper pvisor does not replay (`notify` adds a second output to the call; `audio`/`generatedImage` produce media)",
            ),
            (
                regex::Regex::new(r#"tools\s*(\.\s*|\[\s*["'`])(create_goal|get_goal|update_goal|view_image)\b"#).unwrap(),
                "calls a tool whose result depends on the live session (goals carry wall-clock times; view_image's encoding is not reproduced)",
            ),
            (
                regex::Regex::new(r"\btty\s*:\s*true\b").unwrap(),
                "runs a command with tty=true (PTY output: CRLF, echo), which pvisor does not reproduce",
            ),
            (
                regex::Regex::new(r"\bALL_TOOLS\b").unwrap(),
                "reads ALL_TOOLS, whose tool descriptions pvisor does not reproduce",
            ),
        ]
    });
    res.iter()
        .find(|(re, _)| re.is_match(src))
        .map(|(re, why)| {
            let m = re.find(src).map(|m| m.as_str()).unwrap_or("");
            format!("this code-mode cell {why} (`{m}`)")
        })
}

/// The cells of one replay process and the host that runs them (started at the first cell).
pub struct Cells {
    sessions: Arc<Sessions>,
    ctx: ExecContext,
    host: Option<Host>,
    events: (mpsc::Sender<Event>, mpsc::Receiver<Event>),
    /// The last cell id given (Codex counts from 1 in each process).
    last_id: u64,
    /// Nested calls run so far (their numbering in the journal).
    seq: u64,
}

impl Cells {
    /// A resumed replay: the cells the completed calls ran took their ids in the earlier
    /// process, so the counter goes on from there (Codex's ids count per process). A cell
    /// those calls left running died with that process and cannot be re-attached: `Err`
    /// names the call that left it.
    pub fn after(&mut self, completed: &[(ToolCall, Observation)]) -> Result<(), String> {
        let mut running = std::collections::BTreeMap::new();
        for (call, obs) in completed {
            let yielded = cell::recorded_cell_id(&obs.text);
            match call.tool.as_str() {
                "exec" if cell::parse_source(call.input.as_str().unwrap_or("")).is_ok() => {
                    self.last_id = match yielded.as_deref().and_then(|i| i.parse().ok()) {
                        Some(n) => n,
                        None => self.last_id + 1,
                    };
                }
                "wait" => {}
                _ => continue,
            }
            match (yielded, cell_id_arg(&call.input)) {
                (Some(id), _) => {
                    running.insert(id, call.call_id.clone());
                }
                (None, Some(id)) => {
                    running.remove(&id);
                }
                (None, None) => {}
            }
        }
        match running.into_values().next() {
            Some(call_id) => Err(format!(
                "call {call_id} left a code-mode cell running before the crash; it cannot be re-attached"
            )),
            None => Ok(()),
        }
    }

    pub fn new(sessions: Arc<Sessions>, ctx: &ExecContext) -> Cells {
        Cells {
            sessions,
            ctx: ctx.clone(),
            host: None,
            events: mpsc::channel(),
            last_id: 0,
            seq: 0,
        }
    }

    fn host(&mut self) -> Result<&mut Host, ExecError> {
        if self.host.is_none() {
            let fail = |reason: String| ExecError::Unsupported {
                tool: "exec".into(),
                reason,
            };
            let node = host::find_node(self.ctx.agent_entrypoint.as_deref()).map_err(fail)?;
            let dir = self.ctx.state_dir.join("codex");
            let script =
                host::materialize(&dir).map_err(|e| fail(format!("{}: {e}", dir.display())))?;
            let h = Host::start(
                &node,
                &script,
                &self.ctx.workspace,
                &self.ctx.log_dir.join("codex-code-mode-host.stderr.log"),
                Some(&crate::supervisor::groups::dir_of(&self.ctx.state_dir)),
                self.events.0.clone(),
            )
            .map_err(fail)?;
            self.host = Some(h);
        }
        Ok(self.host.as_mut().expect("started"))
    }

    /// Run an `exec` call: its output as Codex writes it.
    pub fn exec(
        &mut self,
        call: &ToolCall,
        on_inner: &mut dyn FnMut(InnerCall),
    ) -> Result<ToolOutcome, ExecError> {
        let start = Instant::now();
        let input = call.input.as_str().unwrap_or("");
        let src = match cell::parse_source(input) {
            Ok(s) => s,
            Err(text) => return Ok(outcome(Value::from(text), start, vec![])),
        };
        // The recorded output names the cell when it yielded; otherwise Codex's counter.
        let id = match call
            .original
            .as_ref()
            .and_then(|o| cell::recorded_cell_id(&o.text))
        {
            Some(id) => {
                if let Ok(n) = id.parse::<u64>() {
                    self.last_id = n;
                }
                id
            }
            None => {
                self.last_id += 1;
                self.last_id.to_string()
            }
        };
        let tools: Vec<Value> = CELL_TOOLS
            .iter()
            .map(|(n, k)| json!({"name": n, "kind": k}))
            .collect();
        self.host()?
            .send(&json!({"op": "exec", "cell": id, "source": src.js, "yield_ms": src.yield_ms, "tools": tools}))
            .map_err(|e| host_error(&call.tool, e))?;
        let (status, items, touched) = self.until_status(&call.call_id, &id, on_inner)?;
        Ok(outcome(
            cell::output(&id, &status, items, start.elapsed(), src.max_output_tokens),
            start,
            touched,
        ))
    }

    /// Run a `wait` call (`{cell_id, yield_time_ms?, terminate?}`).
    pub fn wait(
        &mut self,
        call: &ToolCall,
        on_inner: &mut dyn FnMut(InnerCall),
    ) -> Result<ToolOutcome, ExecError> {
        let start = Instant::now();
        let a = &call.input;
        let id = cell_id_arg(a).ok_or_else(|| ExecError::BadInput {
            tool: "wait".into(),
            message: "missing `cell_id`".into(),
        })?;
        let yield_ms = a
            .get("yield_time_ms")
            .and_then(Value::as_u64)
            .unwrap_or(cell::DEFAULT_WAIT_YIELD_MS);
        let terminate = a.get("terminate").and_then(Value::as_bool).unwrap_or(false);
        let max = a
            .get("max_tokens")
            .and_then(Value::as_u64)
            .map(|n| n as usize);
        self.host()?
            .send(&json!({"op": "wait", "cell": id, "yield_ms": yield_ms, "terminate": terminate}))
            .map_err(|e| host_error(&call.tool, e))?;
        let (status, items, touched) = self.until_status(&call.call_id, &id, on_inner)?;
        Ok(outcome(
            cell::output(&id, &status, items, start.elapsed(), max),
            start,
            touched,
        ))
    }

    /// Serve the host (nested tool calls, in parallel) until it answers for `cell`.
    fn until_status(
        &mut self,
        call_id: &str,
        cell_id: &str,
        on_inner: &mut dyn FnMut(InnerCall),
    ) -> Result<(Status, Vec<Value>, Vec<PathBuf>), ExecError> {
        let mut touched = vec![];
        loop {
            let ev =
                self.events.1.recv().map_err(|_| {
                    host_error("exec", "the code-mode host's channel closed".into())
                })?;
            match ev {
                Event::HostGone => {
                    let tail = self
                        .host
                        .take()
                        .map(|h| h.stderr_tail())
                        .unwrap_or_default();
                    return Err(host_error(
                        "exec",
                        format!("the code-mode host ended: {tail}"),
                    ));
                }
                Event::ToolFailed(e) => return Err(e),
                Event::ToolDone {
                    cell,
                    id,
                    answer,
                    record,
                } => {
                    touched.extend(record.touched.iter().cloned());
                    on_inner(record);
                    let (ok, value) = match answer {
                        Ok(v) => (true, v),
                        Err(e) => (false, e),
                    };
                    self.host()?
                        .send(&json!({"op": "tool_result", "cell": cell, "id": id, "ok": ok, "value": value}))
                        .map_err(|e| host_error("exec", e))?;
                }
                Event::Host(m) => match m["op"].as_str() {
                    Some("out_of_protocol") => {
                        return Err(host_error(
                            "exec",
                            format!(
                                "the code-mode host answered out of protocol: {}",
                                m["error"]
                            ),
                        ))
                    }
                    Some("tool") => self.spawn_tool(call_id, &m),
                    Some("status") if m["cell"].as_str() == Some(cell_id) => {
                        let items = m["items"].as_array().cloned().unwrap_or_default();
                        let status = match m["status"].as_str() {
                            Some("completed") => Status::Completed,
                            Some("yielded") => Status::Yielded,
                            Some("terminated") => Status::Terminated,
                            Some("missing") => Status::Missing,
                            _ => Status::Failed(m["error"].as_str().unwrap_or("").to_string()),
                        };
                        return Ok((status, items, touched));
                    }
                    _ => {}
                },
            }
        }
    }

    /// Run one `tools.*` call of a cell on a thread of its own.
    fn spawn_tool(&mut self, call_id: &str, m: &Value) {
        self.seq += 1;
        let seq = self.seq;
        let cell = m["cell"].as_str().unwrap_or("").to_string();
        let id = m["id"].as_u64().unwrap_or(0);
        let tool = m["tool"].as_str().unwrap_or("").to_string();
        let raw = m["input"].as_str().unwrap_or("").to_string();
        let input = if m["kind"] == "freeform" {
            Value::from(raw)
        } else {
            serde_json::from_str(&raw).unwrap_or(Value::Null)
        };
        let nested = ToolCall {
            call_id: format!("{call_id}.{seq}"),
            tool: tool.clone(),
            input: input.clone(),
            original: None,
            locator: Default::default(),
        };
        let sessions = self.sessions.clone();
        let ctx = self.ctx.clone();
        let tx = self.events.0.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            let ev = match run_in_cell(&sessions, &nested, &ctx) {
                Ok((answer, touched)) => Event::ToolDone {
                    cell,
                    id,
                    record: InnerCall {
                        seq,
                        tool,
                        input,
                        ok: answer.is_ok(),
                        result: match &answer {
                            Ok(v) | Err(v) => v.clone(),
                        },
                        duration_ms: start.elapsed().as_millis() as u64,
                        touched,
                    },
                    answer,
                },
                Err(e) => Event::ToolFailed(e),
            };
            let _ = tx.send(ev);
        });
    }
}

/// The `cell_id` argument of a `wait` call (a string of digits, or a number).
fn cell_id_arg(input: &Value) -> Option<String> {
    match input.get("cell_id")? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn host_error(tool: &str, message: String) -> ExecError {
    ExecError::Unsupported {
        tool: tool.into(),
        reason: message,
    }
}

fn outcome(output: Value, start: Instant, touched: Vec<PathBuf>) -> ToolOutcome {
    let obs = match &output {
        Value::String(s) => Observation {
            text: s.clone(),
            is_error: false,
            native: None,
        },
        _ => super::parse::observation_of(&output).unwrap_or(Observation {
            text: String::new(),
            is_error: false,
            native: Some(output.clone()),
        }),
    };
    ToolOutcome {
        observation: obs,
        exit_code: None,
        duration_ms: start.elapsed().as_millis() as u64,
        touched,
    }
}

/// One `tools.*` call with Codex's code-mode results: `Ok(JSON text)` resolves the cell's
/// promise, `Err(text)` rejects it with that string.
fn run_in_cell(
    sessions: &Sessions,
    call: &ToolCall,
    ctx: &ExecContext,
) -> Result<(Result<String, String>, Vec<PathBuf>), ExecError> {
    let reject = |e: ExecError| -> Result<(Result<String, String>, Vec<PathBuf>), ExecError> {
        match e {
            ExecError::BadInput { message, .. } => Ok((Err(message), vec![])),
            other => Err(other),
        }
    };
    match call.tool.as_str() {
        "exec_command" => match sessions.exec_command_unified(call, ctx, None) {
            Ok(u) => Ok((Ok(u.code_mode_result().to_string()), vec![])),
            Err(e) => reject(e),
        },
        "write_stdin" => match sessions.write_stdin_unified(call) {
            Ok(Ok(u)) => Ok((Ok(u.code_mode_result().to_string()), vec![])),
            Ok(Err(text)) => Ok((Err(text), vec![])),
            Err(e) => reject(e),
        },
        "apply_patch" => match tools::apply_patch_in_cell(call, ctx) {
            Ok((r, touched)) => Ok((r.map(|()| "{}".to_string()), touched)),
            Err(e) => reject(e),
        },
        "update_plan" => match tools::update_plan(call) {
            Ok(_) => Ok((Ok("{}".into()), vec![])),
            Err(e) => reject(e),
        },
        other => Err(ExecError::Unsupported {
            tool: other.into(),
            reason: format!("the code-mode tool `{other}` is not replayed by pvisor"),
        }),
    }
}
