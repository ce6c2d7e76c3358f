//! The canonical form of a conversation store ([`super::store`]) → plan. Line 1 is
//! `base_state.json`, then one event per line. One LLM response's `ActionEvent`s (the same
//! `llm_response_id`, consecutive) are one batch; each call is answered by the
//! `ObservationEvent`, `AgentErrorEvent` or `UserRejectObservation` carrying its
//! `tool_call_id`. An agent `MessageEvent` (a reply without tool calls) is a model turn
//! without a batch. A batch missing a result is the torn end, never a boundary. The stored
//! observation text (`observation.content[].text`) is what replays compare; the text the model
//! sees is rendered from it by the SDK (the runner asks the SDK for it). Errors name the file,
//! the line of the canonical form and the field.

use std::path::Path;

use serde_json::Value;

use crate::error::TrajectoryError;
use crate::kit::{Batch, Locator, Observation, Plan, ToolCall};

/// The parse the adapter keeps in the plan.
#[derive(Debug, Clone)]
pub struct Parsed {
    pub base_state: Value,
    /// Every event, in index order.
    pub events: Vec<Value>,
    /// Every event's bytes as stored (one line of the canonical form), in index order.
    pub raw: Vec<String>,
    /// Per batch: the indices (in `events`) of its actions and of their results.
    pub sites: Vec<(Vec<usize>, Vec<usize>)>,
    plan: Plan,
}

impl Parsed {
    pub fn plan(&self) -> &Plan {
        &self.plan
    }
    /// Every call's id with its recorded `ActionEvent`, in plan order.
    pub fn actions(&self) -> impl Iterator<Item = (&str, &Value)> {
        // The OpenHands parse builds its plan in memory (`Batches::from` a Vec), never spilled.
        debug_assert!(!self.plan.batches.spilled());
        self.plan
            .batches
            .in_memory()
            .unwrap_or(&[])
            .iter()
            .zip(&self.sites)
            .flat_map(|(batch, (actions, _))| batch.calls.iter().zip(actions))
            .filter_map(|(c, &i)| Some((c.call_id.as_str(), self.events.get(i)?)))
    }
    /// The conversation id (`base_state.id`).
    pub fn conversation_id(&self) -> &str {
        self.base_state["id"].as_str().unwrap_or("")
    }
    /// The index of the last event of batch `n` (1-based): where a cut goes.
    pub fn boundary_event(&self, n: usize) -> Option<usize> {
        self.sites.get(n.checked_sub(1)?)?.1.iter().max().copied()
    }
}

fn kind(v: &Value) -> &str {
    v.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// The header OpenHands puts before an error result's content.
pub const ERROR_HEADER: &str = "[An error occurred during execution.]\n";

fn texts(parts: Option<&Value>) -> String {
    match parts {
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    }
}

/// The text the model sees for a result event, as the SDK renders it from the stored event
/// (`to_llm_content`): the error header, the content, and for the terminal its metadata lines
/// (prefix/suffix, working directory, Python interpreter, exit code). Only the 30,000-char
/// truncation of very long terminal output (whose notice names a file) is not applied.
pub fn stored_text(event: &Value) -> String {
    match kind(event) {
        "ObservationEvent" => {
            let obs = &event["observation"];
            let mut out = String::new();
            if obs["is_error"] == true {
                out.push_str(ERROR_HEADER);
            }
            let content = texts(obs.get("content"));
            if obs["kind"] != "TerminalObservation" {
                return out + &content;
            }
            let m = &obs["metadata"];
            let s = |k: &str| m[k].as_str().unwrap_or("");
            out.push_str(s("prefix"));
            out.push_str(&content);
            out.push_str(s("suffix"));
            if !s("working_dir").is_empty() {
                out.push_str(&format!(
                    "\n[Current working directory: {}]",
                    s("working_dir")
                ));
            }
            if !s("py_interpreter_path").is_empty() {
                out.push_str(&format!(
                    "\n[Python interpreter: {}]",
                    s("py_interpreter_path")
                ));
            }
            match m["exit_code"].as_i64() {
                Some(-1) => {}
                Some(c) => out.push_str(&format!("\n[Command finished with exit code {c}]")),
                None => {}
            }
            out
        }
        "AgentErrorEvent" => texts(event.get("error")),
        "UserRejectObservation" => texts(event.get("rejection_reason")),
        _ => texts(event.pointer("/observation/content")),
    }
}

/// The observation text with the declared dynamic facts left out: the `[Python interpreter:
/// …]` line, which names the interpreter the sandbox's `PATH` finds (or is absent when it finds
/// none): a fact of the machine, not of the run; the path of the terminal's tmux socket
/// (`<TMUX_TMPDIR>/tmux-<uid>/openhands`, named in the error of a shell that exited), which is
/// the run's own folder; and the random part of the file editor's temporary file
/// (`.<name>.<8 random>.tmp`, named when the atomic write fails).
pub fn mask_dynamic(text: &str) -> String {
    static SOCKET: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    static TEMP: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let socket =
        SOCKET.get_or_init(|| regex::Regex::new(r"/\S*/tmux-[0-9]+/openhands\b").expect("valid"));
    let temp = TEMP
        .get_or_init(|| regex::Regex::new(r"(/\.[^/'\n]+\.)[a-z0-9_]{8}(\.tmp)\b").expect("valid"));
    let kept = text
        .split('\n')
        .filter(|l| !(l.starts_with("[Python interpreter: ") && l.ends_with(']')))
        .collect::<Vec<_>>()
        .join("\n");
    let kept = socket.replace_all(&kept, "<tmux socket>");
    temp.replace_all(&kept, "${1}<random>${2}").into_owned()
}

/// The observation of a result event (recorded, or fresh from the runner).
pub fn observation_of(event: &Value) -> Observation {
    let is_error = match kind(event) {
        "ObservationEvent" => event
            .pointer("/observation/is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        _ => true,
    };
    Observation {
        text: stored_text(event),
        is_error,
        native: Some(event.clone()),
    }
}

/// Field `f` of an event as a string, or the error naming its line and field.
fn string_field<'a>(
    path: &Path,
    line: usize,
    ev: &'a Value,
    f: &str,
) -> Result<&'a str, TrajectoryError> {
    ev.get(f)
        .and_then(Value::as_str)
        .ok_or_else(|| TrajectoryError::new(path, line, format!("event.{f}"), "must be a string"))
}

/// The folder name of conversation `id` (its UUID as 32 hex digits, as the SDK names it).
pub fn conversation_hex(id: &str) -> Option<String> {
    let hex: String = id.chars().filter(|c| *c != '-').collect();
    (hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()) && id.len() <= 36)
        .then(|| hex.to_ascii_lowercase())
}

const RESULTS: &[&str] = &[
    "ObservationEvent",
    "AgentErrorEvent",
    "UserRejectObservation",
];

pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<Parsed, TrajectoryError> {
    let text = crate::error::utf8_text(path, bytes, "the conversation store")?;
    let err = |line: usize, field: &str, m: String| TrajectoryError::new(path, line, field, m);
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, first) = lines
        .next()
        .ok_or_else(|| err(1, "base_state", "empty: no base_state.json".into()))?;
    let base_state: Value =
        serde_json::from_str(first).map_err(|e| err(1, "base_state", format!("not JSON: {e}")))?;
    if !base_state.get("agent").is_some_and(Value::is_object) {
        return Err(err(
            1,
            "base_state.agent",
            "missing: not an OpenHands conversation store".into(),
        ));
    }
    let id_ok = base_state
        .get("id")
        .and_then(Value::as_str)
        .is_some_and(|id| conversation_hex(id).is_some());
    if !id_ok {
        return Err(err(
            1,
            "base_state.id",
            "must be the conversation's UUID".into(),
        ));
    }
    let mut events = vec![];
    let mut raw = vec![];
    let mut line_of = vec![];
    for (i, l) in lines {
        let v: Value =
            serde_json::from_str(l).map_err(|e| err(i + 1, "event", format!("not JSON: {e}")))?;
        for f in ["id", "kind"] {
            if !v.get(f).is_some_and(Value::is_string) {
                return Err(err(i + 1, &format!("event.{f}"), "must be a string".into()));
            }
        }
        events.push(v);
        raw.push(l.to_string());
        line_of.push(i + 1);
    }
    super::integrity::check(path, &base_state, &events, &line_of)?;
    let (mut batches, mut sites, mut turns) = (vec![], vec![], 0usize);
    let mut i = 0;
    while i < events.len() {
        let e = &events[i];
        match kind(e) {
            "MessageEvent" if e["source"] == "agent" => {
                turns += 1;
                i += 1;
                continue;
            }
            "ActionEvent" => {}
            _ => {
                i += 1;
                continue;
            }
        }
        turns += 1;
        let response = e
            .get("llm_response_id")
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut actions = vec![];
        while i < events.len()
            && kind(&events[i]) == "ActionEvent"
            && (actions.is_empty()
                || events[i].get("llm_response_id").and_then(Value::as_str) == response.as_deref())
        {
            actions.push(i);
            i += 1;
        }
        let mut calls = vec![];
        for &a in &actions {
            let ev = &events[a];
            let line = line_of[a];
            let id = string_field(path, line, ev, "tool_call_id")?.to_string();
            let tool = string_field(path, line, ev, "tool_name")?.to_string();
            let input = match ev.pointer("/tool_call/arguments") {
                Some(Value::String(s)) => {
                    serde_json::from_str(s).unwrap_or(Value::String(s.clone()))
                }
                Some(v) => v.clone(),
                None => ev.get("action").cloned().unwrap_or(Value::Null),
            };
            calls.push(ToolCall {
                call_id: id.clone(),
                tool,
                input,
                original: None,
                locator: Locator {
                    line,
                    native_id: Some(id),
                },
            });
        }
        let mut results = vec![];
        for call in calls.iter_mut() {
            let found = events[i..]
                .iter()
                .position(|r| {
                    RESULTS.contains(&kind(r))
                        && r.get("tool_call_id").and_then(Value::as_str)
                            == Some(call.call_id.as_str())
                })
                .map(|k| i + k);
            if let Some(r) = found {
                call.original = Some(observation_of(&events[r]));
                results.push(r);
            }
        }
        let complete = results.len() == calls.len();
        batches.push(Batch {
            index: batches.len() + 1,
            model_turn: turns,
            locator: Locator {
                line: line_of[actions[0]],
                native_id: response,
            },
            complete,
            calls,
        });
        if let Some(&last) = results.iter().max() {
            i = i.max(last + 1);
        }
        sites.push((actions, results));
    }
    let plan = Plan {
        agent: "openhands".into(),
        recorded_version: None,
        session_id: base_state
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_string),
        original_cwd: base_state
            .pointer("/workspace/working_dir")
            .and_then(Value::as_str)
            .map(std::path::PathBuf::from),
        batches: batches.into(),
        model_turns: turns,
        native: Default::default(),
    };
    Ok(Parsed {
        base_state,
        events,
        raw,
        sites,
        plan,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn genuine(which: &str) -> (PathBuf, Vec<u8>) {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/openhands/genuine")
            .join(which);
        let b = super::super::store::read(&p).unwrap();
        (p, b)
    }

    #[test]
    fn the_tmux_socket_of_the_run_is_masked() {
        let a = "x\nOriginal tmux error: list-windows: no server running on \
                 /tmp/c/agent-home/tmux/tmux-0/openhands";
        let b = "x\nOriginal tmux error: list-windows: no server running on \
                 /tmp/c/state/r1/openhands/tmux/tmux-0/openhands";
        assert_eq!(mask_dynamic(a), mask_dynamic(b));
        assert!(mask_dynamic(a).ends_with("running on <tmux socket>"));
        assert_ne!(
            mask_dynamic(a),
            mask_dynamic("x\nOriginal tmux error: other")
        );
    }

    #[test]
    fn the_random_name_of_the_editors_temporary_file_is_masked() {
        let e = |r: &str| {
            format!("Ran into [Errno 2] No such file or directory: '/w/dir/.b.txt.{r}.tmp' while trying to write to /w/dir/b.txt")
        };
        assert_eq!(mask_dynamic(&e("rs0jlv1_")), mask_dynamic(&e("8i2gt4uc")));
        // A name with spaces and letters that are not ASCII.
        let f = |r: &str| format!("No such file or directory: '/w/dir/sub/.ünï code.txt.{r}.tmp'");
        assert_eq!(mask_dynamic(&f("arvta61w")), mask_dynamic(&f("8i2gt4uc")));
        assert!(mask_dynamic(&e("rs0jlv1_")).contains("'/w/dir/.b.txt.<random>.tmp'"));
        assert_ne!(
            mask_dynamic(&e("rs0jlv1_")),
            mask_dynamic(&e("rs0jlv1_").replace("/w/dir/b.txt", "/w/dir/c.txt"))
        );
    }

    #[test]
    fn batches_are_one_llm_response_and_results_pair_by_call_id() {
        let (p, b) = genuine("native-run1");
        let parsed = parse_bytes(&p, &b).unwrap();
        let plan = parsed.plan();
        let sizes: Vec<usize> = plan
            .batches
            .in_memory()
            .unwrap()
            .iter()
            .map(|b| b.calls.len())
            .collect();
        assert_eq!(sizes, [1, 1, 2, 1, 1]);
        assert_eq!(plan.max_boundary(), 5);
        assert_eq!(
            plan.session_id.as_deref(),
            Some("22b9fc3d-ce30-4d2b-8b3c-154c2bfa0130")
        );
        let c = &plan.batches.in_memory().unwrap()[0].calls[0];
        assert_eq!(
            (c.tool.as_str(), c.input["command"].as_str()),
            ("terminal", Some("echo hi > a.txt && ls"))
        );
        assert_eq!(
            c.original.as_ref().unwrap().text,
            "a.txt\n[The command completed with exit code 0.]\n[Current working directory: /tmp/realagent-openhands.5Ibe9q/work]\n[Python interpreter: /tmp/oh-venv/bin/python]\n[Command finished with exit code 0]"
        );
        assert_eq!(
            mask_dynamic(&c.original.as_ref().unwrap().text),
            "a.txt\n[The command completed with exit code 0.]\n[Current working directory: /tmp/realagent-openhands.5Ibe9q/work]\n[Command finished with exit code 0]"
        );
        assert_eq!(parsed.boundary_event(3), Some(9));
        // The resumed conversation: a user message, one more batch, a final agent message.
        let (p, b) = genuine("native-final");
        let plan = parse_bytes(&p, &b).unwrap().plan().clone();
        assert_eq!(plan.batches.len(), 6);
        assert_eq!(plan.model_turns, 7);
    }

    #[test]
    fn damaged_lines_name_line_and_field() {
        let (p, b) = genuine("native-run1");
        let text = String::from_utf8(b).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines[4] = "{\"kind\": broken".into();
        let e = parse_bytes(&p, lines.join("\n").as_bytes()).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (5, "event"));
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines[3] = lines[3].replacen("\"tool_call_id\":\"", "\"tool_call_id\":7,\"was\":\"", 1);
        let e = parse_bytes(&p, lines.join("\n").as_bytes()).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (4, "event.tool_call_id"), "{e}");
    }
}
