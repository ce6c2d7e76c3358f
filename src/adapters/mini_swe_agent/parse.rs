//! A mini-swe-agent trajectory (one JSON document, as `json.dumps(indent=2)` writes it) →
//! [`Parsed`] and the plan.
//!
//! Batches are the actions of one assistant message: 2.x's `bash` tool calls, each answered
//! by its `tool` message; 1.x's single fenced action (the configured `action_regex`),
//! answered by the next `user` message. Model turns count every model reply: assistant
//! messages, and 2.x's format errors (a `user` message with `extra.interrupt_type:
//! "FormatError"`: mini keeps the error, not the reply). A 1.x reply with zero or several
//! blocks is a format-error turn: history, no batch. The reply whose command submitted ends
//! the trajectory: its batch is kept for the audit but never complete, so never a boundary.
//! Every error names the file, the line and the field.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::versions::{self, Format};
use crate::error::TrajectoryError;
use crate::kit::{Batch, Locator, Observation, Plan, ToolCall};

/// The recorded configuration the runner and the checks need.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    pub agent_type: String,
    pub model_type: String,
    pub environment_type: String,
    pub model_name: String,
    /// `info.config.environment.cwd` ("" = the process's cwd).
    pub cwd: String,
}

/// Where one batch stands in `messages`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// The assistant message.
    pub assistant: usize,
    /// Its observation messages, one per call, in call order.
    pub observations: Vec<usize>,
    /// The command of each call, as mini executes it: a string, or whatever JSON value the
    /// model sent (mini passes it to its environment as it is, which answers with its own
    /// error for anything but a string).
    pub commands: Vec<Value>,
}

/// The parse the adapter keeps in the plan.
#[derive(Debug, Clone)]
pub struct Parsed {
    pub path: PathBuf,
    pub format: Format,
    pub version: String,
    /// The whole document, in its key order.
    pub doc: Value,
    pub config: Config,
    pub sites: Vec<Site>,
    plan: Plan,
}

impl Parsed {
    pub fn plan(&self) -> &Plan {
        &self.plan
    }
    pub fn messages(&self) -> &[Value] {
        self.doc["messages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
    /// The index of the last message of batch `n` (1-based), i.e. where the cut goes.
    pub fn boundary_message(&self, n: usize) -> Option<usize> {
        let s = self.sites.get(n.checked_sub(1)?)?;
        s.observations.last().copied()
    }
}

/// The file being parsed, for errors that name the line of a field.
pub struct Ctx<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Ctx<'_> {
    pub fn err(&self, field: &str, message: impl Into<String>) -> TrajectoryError {
        let line = crate::kit::json_lines::line_of_field(self.text, field).unwrap_or(0);
        TrajectoryError::new(self.path, line, field, message)
    }
    fn str_at<'v>(&self, v: &'v Value, field: &str) -> Result<&'v str, TrajectoryError> {
        v.as_str()
            .ok_or_else(|| self.err(field, format!("must be a string, found {}", kind(v))))
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parse a trajectory file's bytes.
pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<Parsed, TrajectoryError> {
    let text = crate::error::utf8_text(path, bytes, "the trajectory")?;
    let cx = Ctx { path, text };
    let doc: Value = serde_json::from_str(text).map_err(|e| {
        TrajectoryError::new(
            path,
            e.line(),
            "trajectory",
            format!("not a JSON document (mini writes one with json.dumps): {e}"),
        )
    })?;
    if !doc.is_object() {
        return Err(cx.err("trajectory", "must be a JSON object"));
    }
    let fmt = doc.get("trajectory_format").ok_or_else(|| {
        cx.err(
            "trajectory_format",
            "missing: not a mini-swe-agent trajectory (1.x writes \"mini-swe-agent-1\", 2.x \"mini-swe-agent-1.1\")",
        )
    })?;
    let fmt = cx.str_at(fmt, "trajectory_format")?;
    let format = Format::from_name(fmt).ok_or_else(|| {
        cx.err(
            "trajectory_format",
            format!("unknown format `{fmt}` (1.x writes \"mini-swe-agent-1\", 2.x \"mini-swe-agent-1.1\")"),
        )
    })?;
    let version = match doc.pointer("/info/mini_version") {
        Some(v) => cx.str_at(v, "info.mini_version")?.to_string(),
        None => {
            return Err(cx.err(
                "info.mini_version",
                "missing: the mini version is needed to replay with its own environment",
            ))
        }
    };
    if let Some(c) = versions::capability(&version) {
        if c.format != format {
            return Err(cx.err(
                "trajectory_format",
                format!(
                    "`{fmt}` is not what mini {version} writes (`{}`)",
                    c.format.name()
                ),
            ));
        }
    }
    let config = config(&cx, &doc)?;
    let messages = match doc.get("messages") {
        Some(Value::Array(a)) => a,
        Some(v) => return Err(cx.err("messages", format!("must be an array, found {}", kind(v)))),
        None => return Err(cx.err("messages", "missing")),
    };
    for (i, m) in messages.iter().enumerate() {
        if !m.is_object() {
            return Err(cx.err(
                &format!("messages[{i}]"),
                format!("must be an object, found {}", kind(m)),
            ));
        }
        let role = m.get("role").unwrap_or(&Value::Null);
        cx.str_at(role, &format!("messages[{i}].role"))?;
        if let Some(c) = m.get("content") {
            // Text everywhere but in multimodal user content (a list of parts).
            if !(c.is_string() || c.is_array() || c.is_null()) {
                return Err(cx.err(
                    &format!("messages[{i}].content"),
                    format!("must be a string, found {}", kind(c)),
                ));
            }
        }
    }
    let exit_status = doc
        .pointer("/info/exit_status")
        .and_then(Value::as_str)
        .unwrap_or("");
    let (batches, sites, turns) = match format {
        Format::V1_1 => walk_v2(&cx, messages)?,
        Format::V1 => walk_v1(&cx, messages, &doc, exit_status)?,
    };
    super::integrity::check(&cx, &doc, messages, format, &sites, turns)?;
    let plan = Plan {
        agent: super::NAME.into(),
        recorded_version: Some(version.clone()),
        session_id: Some(session_id(path, &doc)),
        original_cwd: (!config.cwd.is_empty()).then(|| PathBuf::from(&config.cwd)),
        batches: batches.into(),
        model_turns: turns,
        native: Default::default(),
    };
    Ok(Parsed {
        path: path.to_path_buf(),
        format,
        version,
        doc,
        config,
        sites,
        plan,
    })
}

/// mini trajectories have no id: the file's name and a digest of its first two messages
/// (system and task: the same for a trajectory, its rebuilt cuts and its continuations).
pub fn session_id(path: &Path, doc: &Value) -> String {
    let stem = path
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or("trajectory")
        .trim_end_matches(".json")
        .trim_end_matches(".traj");
    let head: Vec<&Value> = doc["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .take(2)
        .collect();
    let d = blake3::hash(serde_json::to_string(&head).unwrap_or_default().as_bytes()).to_hex();
    format!("{stem}-{}", &d[..12])
}

fn config(cx: &Ctx, doc: &Value) -> Result<Config, TrajectoryError> {
    let get = |field: &str, ptr: &str, default: &str| -> Result<String, TrajectoryError> {
        match doc.pointer(ptr) {
            None | Some(Value::Null) => Ok(default.to_string()),
            Some(v) => cx.str_at(v, field).map(str::to_string),
        }
    };
    match doc.pointer("/info/config") {
        Some(Value::Object(_)) => {}
        Some(v) => {
            return Err(cx.err(
                "info.config",
                format!("must be an object, found {}", kind(v)),
            ))
        }
        None => {
            return Err(cx.err(
                "info.config",
                "missing: mini's agent, model and environment configuration is needed to replay",
            ))
        }
    }
    let mut c = Config {
        agent_type: get(
            "info.config.agent_type",
            "/info/config/agent_type",
            "minisweagent.agents.interactive.InteractiveAgent",
        )?,
        model_type: get(
            "info.config.model_type",
            "/info/config/model_type",
            "minisweagent.models.litellm_model.LitellmModel",
        )?,
        environment_type: get(
            "info.config.environment_type",
            "/info/config/environment_type",
            "minisweagent.environments.local.LocalEnvironment",
        )?,
        model_name: get(
            "info.config.model.model_name",
            "/info/config/model/model_name",
            "",
        )?,
        cwd: get(
            "info.config.environment.cwd",
            "/info/config/environment/cwd",
            "",
        )?,
    };
    for (f, p) in [
        ("info.config.agent", "/info/config/agent"),
        ("info.config.model", "/info/config/model"),
        ("info.config.environment", "/info/config/environment"),
    ] {
        match doc.pointer(p) {
            Some(Value::Object(_)) => {}
            Some(v) => return Err(cx.err(f, format!("must be an object, found {}", kind(v)))),
            None => return Err(cx.err(f, "missing")),
        }
    }
    if c.cwd == "." {
        c.cwd.clear();
    }
    Ok(c)
}

fn observation_of(m: &Value) -> Observation {
    let text = m
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Observation {
        is_error: is_error(m),
        text,
        native: Some(m.clone()),
    }
}

/// mini has no error flag: a non-zero return code (2.x: `extra.returncode`; 1.x: the
/// `<returncode>` the observation starts with, none for a timeout) is the error.
pub fn is_error(m: &Value) -> bool {
    if let Some(rc) = m.pointer("/extra/returncode") {
        return rc.as_i64() != Some(0);
    }
    let t = m.get("content").and_then(Value::as_str).unwrap_or("");
    !t.starts_with("<returncode>0</returncode>")
}

fn is_format_error(m: &Value) -> bool {
    m.pointer("/extra/interrupt_type").and_then(Value::as_str) == Some("FormatError")
}

/// The model turns of `messages` (what mini counts as `api_calls`): replies, and 2.x format
/// errors (mini keeps the error, not the reply).
pub fn model_turns(messages: &[Value]) -> usize {
    messages.iter().filter(|m| is_model_turn(m)).count()
}

fn is_model_turn(m: &Value) -> bool {
    m["role"] == "assistant" || (m["role"] == "user" && is_format_error(m))
}

type Walk = (Vec<Batch>, Vec<Site>, usize);

fn walk_v2(cx: &Ctx, messages: &[Value]) -> Result<Walk, TrajectoryError> {
    let (mut batches, mut sites, mut turns) = (vec![], vec![], 0usize);
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        if is_model_turn(m) {
            turns += 1;
        }
        if m["role"] != "assistant" {
            i += 1;
            continue;
        }
        let actions = m.pointer("/extra/actions").and_then(Value::as_array);
        let calls_v = match m.get("tool_calls") {
            Some(Value::Array(a)) if !a.is_empty() => a,
            None | Some(Value::Null) | Some(Value::Array(_)) => {
                // A text-based model (`LitellmTextbasedModel`): the parsed actions, answered
                // by `user` observation messages.
                if let Some(acts) = actions.filter(|a| !a.is_empty()) {
                    let (batch, site, next) =
                        text_batch(cx, messages, i, acts, turns, batches.len() + 1)?;
                    batches.push(batch);
                    sites.push(site);
                    i = next;
                } else {
                    i += 1;
                }
                continue;
            }
            Some(v) => {
                return Err(cx.err(
                    &format!("messages[{i}].tool_calls"),
                    format!("must be an array, found {}", kind(v)),
                ))
            }
        };
        let mut calls = vec![];
        let mut commands = vec![];
        for (k, tc) in calls_v.iter().enumerate() {
            let f = format!("messages[{i}].tool_calls[{k}]");
            let id = cx.str_at(tc.get("id").unwrap_or(&Value::Null), &format!("{f}.id"))?;
            let name = cx.str_at(
                tc.pointer("/function/name").unwrap_or(&Value::Null),
                &format!("{f}.function.name"),
            )?;
            let args = cx.str_at(
                tc.pointer("/function/arguments").unwrap_or(&Value::Null),
                &format!("{f}.function.arguments"),
            )?;
            let input: Value = serde_json::from_str(args).map_err(|e| {
                cx.err(&format!("{f}.function.arguments"), format!("not JSON: {e}"))
            })?;
            let from_args = input.get("command").filter(|c| !c.is_null());
            // What mini ran: its parsed action (the same command, unless the file was edited).
            let command = match actions.and_then(|a| a.get(k)) {
                Some(a) => {
                    let field = format!("messages[{i}].extra.actions[{k}].command");
                    let c = match a.get("command") {
                        None | Some(Value::Null) => {
                            return Err(cx.err(&field, "must be present (mini's parsed action)"))
                        }
                        Some(c) => c,
                    };
                    if from_args.is_some_and(|x| x != c) {
                        return Err(
                            cx.err(&field, "differs from the tool call's `command` argument")
                        );
                    }
                    c.clone()
                }
                None => match (name, from_args) {
                    ("bash", Some(c)) => c.clone(),
                    _ => {
                        return Err(cx.err(
                            &format!("{f}.function"),
                            "mini's only tool is `bash`, with a `command`",
                        ))
                    }
                },
            };
            commands.push(command);
            calls.push(ToolCall {
                call_id: id.to_string(),
                tool: name.to_string(),
                input,
                original: None,
                locator: Locator {
                    line: crate::kit::json_lines::line_of_field(cx.text, &f).unwrap_or(0),
                    native_id: Some(id.to_string()),
                },
            });
        }
        let mut observations = vec![];
        let mut j = i + 1;
        for call in calls.iter_mut() {
            let Some(o) = messages.get(j) else { break };
            if o["role"].as_str() != Some("tool") {
                break;
            }
            let tid = o.get("tool_call_id").and_then(Value::as_str);
            if tid != Some(call.call_id.as_str()) {
                return Err(cx.err(
                    &format!("messages[{j}].tool_call_id"),
                    format!(
                        "answers {tid:?}, but the next call of messages[{i}] is {}",
                        call.call_id
                    ),
                ));
            }
            call.original = Some(observation_of(o));
            observations.push(j);
            j += 1;
        }
        let submitted = messages.get(j).is_some_and(|e| {
            e["role"].as_str() == Some("exit")
                && e.pointer("/extra/exit_status").and_then(Value::as_str) == Some("Submitted")
        });
        let complete = !calls.is_empty() && observations.len() == calls.len() && !submitted;
        if !calls.is_empty() {
            batches.push(Batch {
                index: batches.len() + 1,
                model_turn: turns,
                locator: Locator {
                    line: crate::kit::json_lines::line_of_field(cx.text, &format!("messages[{i}]"))
                        .unwrap_or(0),
                    native_id: None,
                },
                complete,
                calls,
            });
            sites.push(Site {
                assistant: i,
                observations,
                commands,
            });
        }
        i = j.max(i + 1);
    }
    Ok((batches, sites, turns))
}

/// The batch of a text-based 2.x reply: its `extra.actions`, each answered by the next
/// `user` message (format errors aside); returns the index after its observations.
fn text_batch(
    cx: &Ctx,
    messages: &[Value],
    i: usize,
    actions: &[Value],
    turn: usize,
    index: usize,
) -> Result<(Batch, Site, usize), TrajectoryError> {
    let mut calls = vec![];
    let mut commands = vec![];
    for (k, a) in actions.iter().enumerate() {
        let f = format!("messages[{i}].extra.actions[{k}].command");
        let c = cx.str_at(a.get("command").unwrap_or(&Value::Null), &f)?;
        let id = format!("mini-m{i}-{k}");
        commands.push(Value::String(c.to_string()));
        calls.push(ToolCall {
            call_id: id.clone(),
            tool: "bash".into(),
            input: serde_json::json!({ "command": c }),
            original: None,
            locator: Locator {
                line: crate::kit::json_lines::line_of_field(cx.text, &f).unwrap_or(0),
                native_id: Some(id),
            },
        });
    }
    let mut observations = vec![];
    let mut j = i + 1;
    for call in calls.iter_mut() {
        match messages.get(j) {
            Some(o) if o["role"].as_str() == Some("user") && !is_format_error(o) => {
                call.original = Some(observation_of(o));
                observations.push(j);
                j += 1;
            }
            _ => break,
        }
    }
    let submitted = messages.get(j).is_some_and(|e| {
        e["role"].as_str() == Some("exit")
            && e.pointer("/extra/exit_status").and_then(Value::as_str) == Some("Submitted")
    });
    let batch = Batch {
        index,
        model_turn: turn,
        locator: Locator {
            line: crate::kit::json_lines::line_of_field(cx.text, &format!("messages[{i}]"))
                .unwrap_or(0),
            native_id: None,
        },
        complete: observations.len() == calls.len() && !submitted,
        calls,
    };
    let site = Site {
        assistant: i,
        observations,
        commands,
    };
    Ok((batch, site, j.max(i + 1)))
}

/// A Python `re` pattern as mini compiles its action regexes (DOTALL), in Rust syntax.
pub(super) fn dotall(pat: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(pat)
        .dot_matches_new_line(true)
        .build()
}

/// The configured 1.x action regex.
fn action_regex(cx: &Ctx, doc: &Value) -> Result<regex::Regex, TrajectoryError> {
    let pat = match doc.pointer("/info/config/agent/action_regex") {
        None | Some(Value::Null) => r"```bash\s*\n(.*?)\n```",
        Some(v) => cx.str_at(v, "info.config.agent.action_regex")?,
    };
    dotall(pat).map_err(|e| {
        cx.err(
            "info.config.agent.action_regex",
            format!("cannot be used: {e}"),
        )
    })
}

fn walk_v1(
    cx: &Ctx,
    messages: &[Value],
    doc: &Value,
    exit_status: &str,
) -> Result<Walk, TrajectoryError> {
    let re = action_regex(cx, doc)?;
    let (mut batches, mut sites, mut turns) = (vec![], vec![], 0usize);
    let last_assistant = messages
        .iter()
        .rposition(|m| m["role"].as_str() == Some("assistant"));
    for (i, m) in messages.iter().enumerate() {
        if m["role"].as_str() != Some("assistant") {
            continue;
        }
        turns += 1;
        let content = m.get("content").and_then(Value::as_str).unwrap_or("");
        let found: Vec<&str> = re
            .captures_iter(content)
            .map(|c| c.get(1).or_else(|| c.get(0)).map_or("", |g| g.as_str()))
            .collect();
        if found.len() != 1 {
            continue; // a format-error turn: history, never a boundary
        }
        let command = found[0].trim().to_string();
        let id = format!("mini-m{i}");
        let next = messages
            .get(i + 1)
            .filter(|o| o["role"].as_str() == Some("user"));
        // The submitting reply: its next message is the submission, not an observation.
        let submitted =
            exit_status == "Submitted" && Some(i) == last_assistant && messages.len() == i + 2;
        let f = format!("messages[{i}]");
        let call = ToolCall {
            call_id: id.clone(),
            tool: "bash".into(),
            input: serde_json::json!({ "command": command }),
            original: next.filter(|_| !submitted).map(observation_of),
            locator: Locator {
                line: crate::kit::json_lines::line_of_field(cx.text, &f).unwrap_or(0),
                native_id: Some(id),
            },
        };
        let observations: Vec<usize> = if call.original.is_some() {
            vec![i + 1]
        } else {
            vec![]
        };
        batches.push(Batch {
            index: batches.len() + 1,
            model_turn: turns,
            locator: call.locator.clone(),
            complete: !observations.is_empty(),
            calls: vec![call],
        });
        sites.push(Site {
            assistant: i,
            observations,
            commands: vec![Value::String(command)],
        });
    }
    Ok((batches, sites, turns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fixture(rel: &str) -> (PathBuf, Vec<u8>) {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/mini-swe-agent")
            .join(rel);
        let b = std::fs::read(&p).unwrap();
        (p, b)
    }

    #[test]
    fn v2_batches_are_the_tool_calls_of_one_reply_and_the_submit_is_no_boundary() {
        let (p, b) = fixture("genuine-2.4.6/mini.traj.json");
        let parsed = parse_bytes(&p, &b).unwrap();
        let plan = parsed.plan();
        assert_eq!(parsed.format, Format::V1_1);
        let sizes: Vec<usize> = plan
            .batches
            .in_memory()
            .unwrap()
            .iter()
            .map(|b| b.calls.len())
            .collect();
        assert_eq!(sizes, [1, 1, 2, 1, 1]);
        assert_eq!(plan.max_boundary(), 4);
        assert!(!plan.batches.in_memory().unwrap()[4].complete);
        assert_eq!(parsed.boundary_message(3), Some(8));
    }

    #[test]
    fn v1_format_error_turns_are_history() {
        let (p, b) = fixture("genuine-1.17.5/mini.traj.json");
        let parsed = parse_bytes(&p, &b).unwrap();
        let plan = parsed.plan();
        assert_eq!(parsed.format, Format::V1);
        assert_eq!(plan.model_turns, 6);
        let turns: Vec<usize> = plan
            .batches
            .in_memory()
            .unwrap()
            .iter()
            .map(|b| b.model_turn)
            .collect();
        assert_eq!(
            turns,
            [1, 2, 4, 5, 6],
            "turn 3 (two blocks) is a format error"
        );
        assert_eq!(plan.max_boundary(), 4);
        assert_eq!(
            plan.batches.in_memory().unwrap()[2].calls[0].input["command"],
            "cat notes.txt && cat a.txt"
        );
    }

    /// The model sent `{"command": 7501}`: mini runs the value as it is (its environment
    /// answers with its own error), so the parse keeps it; an action that is not the call's
    /// argument is a changed trajectory.
    #[test]
    fn a_command_of_another_type_is_kept_as_sent() {
        let (p, b) = fixture("genuine-2.4.6/mini.traj.json");
        let mut doc: Value = serde_json::from_slice(&b).unwrap();
        let i = doc["messages"]
            .as_array()
            .unwrap()
            .iter()
            .position(|m| m["tool_calls"].is_array())
            .unwrap();
        let m = &mut doc["messages"][i];
        m["tool_calls"][0]["function"]["arguments"] = json!("{\"command\":7501}");
        m["extra"]["response"]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] =
            json!("{\"command\":7501}");
        m["extra"]["actions"][0]["command"] = json!(7501);
        let bytes = serde_json::to_vec_pretty(&doc).unwrap();
        let parsed = parse_bytes(&p, &bytes).unwrap();
        assert_eq!(parsed.sites[0].commands[0], json!(7501));
        assert_eq!(
            parsed.plan().batches.in_memory().unwrap()[0].calls[0].input["command"],
            json!(7501)
        );
        doc["messages"][i]["extra"]["actions"][0]["command"] = json!("7501");
        let bytes = serde_json::to_vec_pretty(&doc).unwrap();
        let e = parse_bytes(&p, &bytes).unwrap_err().to_string();
        assert!(
            e.contains(&format!("messages[{i}].extra.actions[0].command")) && e.contains("differs"),
            "{e}"
        );
    }
}
