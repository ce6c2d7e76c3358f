//! A damaged kept prefix is never accepted silently. For every mutation of a real session
//! (truncation, a changed byte, a changed character of a text, a deleted field, a field of
//! another type, a duplicated, dropped or swapped line), either the parse or the rebuild is a
//! trajectory error naming the line and the field, or the replay's model-visible prefix is
//! byte-identical to the undamaged session's: the messages the first continuation request
//! must carry (with the observations a replay regenerates: a damaged recorded observation is
//! replaced, and the comparison names the difference), the calls a replay runs (tool and
//! arguments), and what the agent takes from the session into every request (Codex's base
//! instructions; Claude Code's system prompt and tool list). A change to what the native
//! format writes once, repeats nowhere and hashes nowhere cannot be seen (see
//! [`unverifiable`]): such mutations are counted apart.
//!
//! Sessions of the pinned versions of every adapter: Claude Code 2.1.332, Codex 0.149.0, Pi
//! 0.83.0, OpenCode 1.17.11 (its export), mini-swe-agent 2.4.6 and 1.17.5, OpenHands SDK
//! 1.34.0 (the conversation folder in its one-file canonical form, whose prefix the SDK itself
//! renders: it is installed when missing). The formats that write one JSON document (OpenCode,
//! mini-swe-agent) are mutated as documents: a value of the document, or an element of one of
//! its lists dropped, duplicated or swapped, stands for a line. A fixed seed: every suite run
//! checks the same corpus; `PVISOR_DAMAGED_SEED` and `PVISOR_DAMAGED_MUTATIONS` give a fresh,
//! longer one.

#[path = "support/recording.rs"]
mod recording;

use pvisor::kit::{Adapter, Observation, Plan, RebuildRequest};
use rand::{Rng, SeedableRng};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const SEED: u64 = 20261203;

/// The corpus seed: [`SEED`], or `PVISOR_DAMAGED_SEED` for a fresh corpus.
fn seed() -> u64 {
    std::env::var("PVISOR_DAMAGED_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEED)
}
/// Mutations per session.
const PER_SESSION: usize = 400;
/// Mutations per OpenHands conversation: its prefix is the SDK's own rendering, one Python
/// start per accepted mutation, so fewer, and only at the last boundary the damaged store
/// offers (which holds every kept event before it).
const PER_OPENHANDS_SESSION: usize = 30;

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(p)
}

/// What the model sees of a session rebuilt at boundary `n`, or why it was refused.
#[derive(Debug, Clone, PartialEq)]
struct Visible {
    prefix: Vec<Value>,
    calls: Vec<(String, Value)>,
    extras: Vec<Value>,
}

/// What the agent takes from its session file into every request: Codex's `session_meta`
/// base instructions; Claude Code's last prompt snapshot (system prompt, tools).
fn extras(agent: &str, session: &str) -> Vec<Value> {
    session
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| match agent {
            "codex" => {
                (v["type"] == "session_meta").then(|| v["payload"]["base_instructions"].clone())
            }
            "claude-code" => {
                (v["attachment"]["type"] == "prompt_snapshot").then(|| v["attachment"].clone())
            }
            // The others build their instructions and tools themselves at every start, or
            // keep them in a record the prefix holds (mini-swe-agent's system message,
            // OpenHands' system prompt event).
            _ => None,
        })
        // Claude Code resumes against its last prompt snapshot (a tool list that differs from
        // it is announced to the model).
        .next()
        .into_iter()
        .collect()
}

/// The observations a replay of batches 1..=n splices in: what re-running each call gives,
/// which for a faithful replay is the undamaged session's recorded observation of that call
/// (`fresh`); a call it does not know gets its own recorded one.
fn visible(
    adapter: &dyn Adapter,
    path: &Path,
    plan: &Plan,
    n: usize,
    dir: &Path,
    fresh: &BTreeMap<String, Observation>,
    entry: Option<&Path>,
) -> Result<Visible, String> {
    let observations: BTreeMap<String, Observation> = plan.batches.loaded().unwrap()[..n]
        .iter()
        .flat_map(|b| &b.calls)
        .filter_map(|c| {
            fresh
                .get(&c.call_id)
                .or(c.original.as_ref())
                .map(|o| (c.call_id.clone(), o.clone()))
        })
        .collect();
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let state = dir.join(format!("state-{n}"));
    let req = RebuildRequest {
        source: path,
        plan,
        after_step: n,
        observations: pvisor::kit::Observations::Fresh(&observations),
        workspace: &work,
        state_dir: &state,
        artifact_path: &dir.join(format!("artifact-{n}")),
        touch_workspace: false,
        agent_entrypoint: entry,
        for_continuation: true,
    };
    let rebuilt = adapter.rebuild(&req).map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(&rebuilt.artifact_path).unwrap_or_default();
    // An item's optional field missing or `null` is the same item to the agent (Codex reads
    // both as absent and sends `null`).
    let prefix = rebuilt
        .prefix
        .into_iter()
        .map(|mut m| {
            if let Some(o) = m.as_object_mut() {
                o.retain(|_, x| !x.is_null());
            }
            m
        })
        .collect();
    Ok(Visible {
        prefix,
        calls: plan.batches.loaded().unwrap()[..n]
            .iter()
            .flat_map(|b| &b.calls)
            .map(|c| (c.tool.clone(), c.input.clone()))
            .collect(),
        extras: extras(adapter.name(), &text),
    })
}

/// A random leaf path of a JSON value (object keys and array indices).
fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                leaves(
                    x,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                )
            }
            out.push(at);
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                leaves(x, format!("{at}/{i}"), out)
            }
            out.push(at);
        }
        _ => out.push(at),
    }
}

/// One mutation of the session text, and what it was: of one record (line) for the formats
/// that write one JSON object per line, of one value of the document for those that write one
/// JSON document (an element of one of its lists stands for a line).
fn mutate(text: &str, doc: bool, rng: &mut rand::rngs::StdRng) -> (String, String) {
    if doc && rng.gen_range(0..8) >= 2 {
        return mutate_doc(text, rng);
    }
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let n = lines.len();
    let i = rng.gen_range(0..n);
    let join = |l: &[String]| l.iter().map(|x| format!("{x}\n")).collect::<String>();
    match rng.gen_range(0..8) {
        0 => {
            let at = rng.gen_range(0..text.len());
            let at = (0..=at)
                .rev()
                .find(|k| text.is_char_boundary(*k))
                .unwrap_or(0);
            (text[..at].to_string(), format!("truncated at byte {at}"))
        }
        1 => {
            let mut b = text.as_bytes().to_vec();
            let at = rng.gen_range(0..b.len());
            b[at] ^= 1 << rng.gen_range(0..7);
            (
                String::from_utf8_lossy(&b).into_owned(),
                format!("byte {at} changed"),
            )
        }
        2 => {
            lines.insert(i, lines[i].clone());
            (join(&lines), format!("line {} duplicated", i + 1))
        }
        3 => {
            lines.remove(i);
            (join(&lines), format!("line {} dropped", i + 1))
        }
        4 if i + 1 < n => {
            lines.swap(i, i + 1);
            (
                join(&lines),
                format!("lines {} and {} swapped", i + 1, i + 2),
            )
        }
        k => {
            let Ok(mut v) = serde_json::from_str::<Value>(&lines[i]) else {
                return (text.to_string(), "nothing".into());
            };
            let Some(what) = mutate_value(&mut v, k, rng) else {
                return (text.to_string(), "nothing".into());
            };
            lines[i] = serde_json::to_string(&v).unwrap();
            (join(&lines), format!("line {}: {what}", i + 1))
        }
    }
}

/// One mutation of a JSON document: of a value (kinds 5–7 as for a line), or an element of
/// one of its lists duplicated, dropped or swapped with the next. Written back in the
/// document's own layout (pretty-printed or not).
fn mutate_doc(text: &str, rng: &mut rand::rngs::StdRng) -> (String, String) {
    let Ok(mut v) = serde_json::from_str::<Value>(text) else {
        return (text.to_string(), "nothing".into());
    };
    let k = rng.gen_range(2..8);
    let what = if k < 5 {
        let mut paths = vec![];
        leaves(&v, String::new(), &mut paths);
        let lists: Vec<String> = paths
            .into_iter()
            .filter(|p| {
                v.pointer(p)
                    .and_then(Value::as_array)
                    .is_some_and(|a| !a.is_empty())
            })
            .collect();
        if lists.is_empty() {
            return (text.to_string(), "nothing".into());
        }
        let p = lists[rng.gen_range(0..lists.len())].clone();
        let a = v.pointer_mut(&p).unwrap().as_array_mut().unwrap();
        let i = rng.gen_range(0..a.len());
        match k {
            2 => {
                a.insert(i, a[i].clone());
                format!("element {p}/{i} duplicated")
            }
            3 => {
                a.remove(i);
                format!("element {p}/{i} dropped")
            }
            _ if i + 1 < a.len() => {
                a.swap(i, i + 1);
                format!("elements {p}/{i} and {} swapped", i + 1)
            }
            _ => return (text.to_string(), "nothing".into()),
        }
    } else {
        match mutate_value(&mut v, k, rng) {
            Some(w) => w,
            None => return (text.to_string(), "nothing".into()),
        }
    };
    let out = if text.trim_start().starts_with("{\n") || text.starts_with("{\n") {
        serde_json::to_string_pretty(&v).unwrap()
    } else {
        serde_json::to_string(&v).unwrap()
    };
    (out, what)
}

/// Kind 5: a field deleted; 6: a field of another type; 7: a character of a text changed.
fn mutate_value(v: &mut Value, k: usize, rng: &mut rand::rngs::StdRng) -> Option<String> {
    let mut paths = vec![];
    leaves(v, String::new(), &mut paths);
    paths.retain(|p| !p.is_empty());
    if paths.is_empty() {
        return None;
    }
    let p = paths[rng.gen_range(0..paths.len())].clone();
    Some(match k {
        5 => {
            let (parent, key) = p.rsplit_once('/').unwrap();
            match v.pointer_mut(parent) {
                Some(Value::Object(o)) => {
                    o.shift_remove(&key.replace("~1", "/").replace("~0", "~"));
                }
                Some(Value::Array(a)) => {
                    if let Ok(k) = key.parse::<usize>() {
                        if k < a.len() {
                            a.remove(k);
                        }
                    }
                }
                _ => {}
            }
            format!("field {p} deleted")
        }
        6 => {
            let x = v.pointer_mut(&p).unwrap();
            *x = match x {
                Value::String(_) => Value::from(12345),
                Value::Number(_) | Value::Bool(_) | Value::Null => Value::from("oops"),
                Value::Array(_) => serde_json::json!({}),
                Value::Object(_) => Value::from("oops"),
            };
            format!("field {p} of another type")
        }
        _ => {
            let x = v.pointer_mut(&p).unwrap();
            if let Value::String(s) = x {
                if let Some((at, c)) = s.char_indices().nth(s.chars().count() / 2) {
                    let new = if c == 'e' { 'a' } else { 'e' };
                    s.replace_range(at..at + c.len_utf8(), &new.to_string());
                }
            }
            format!("text of {p} changed")
        }
    })
}

/// Whether a change to `path` of the record `line` (of the document, for a one-document
/// format) is one the native format gives no way to see: written once, repeated by no other
/// record, hashed nowhere.
/// - Codex 0.149: the base instructions, the developer and environment-context messages,
///   item ids, statuses and encrypted reasoning, the text of an `apply_patch` input, the
///   arguments of an `update_plan` call (no event repeats a plan), and a command's arguments
///   other than the command line and its directory ([`command_unchanged`]).
/// - Claude Code 2.1.332 hashes every message it sends and its system prompt and tools:
///   nothing but the flags of a prompt snapshot, which it writes only when their condition
///   holds (so a snapshot without one is one Claude writes too).
/// - Pi 0.83: the content of user and assistant messages (texts, thinking, a call's
///   arguments), but not a call's id and tool, which its result repeats.
/// - OpenCode 1.17: the texts of text and reasoning parts, a call's id and the values of its
///   arguments, and a text, reasoning or tool part, or a whole step (an assistant message),
///   dropped or repeated (OpenCode chains nothing from one step or part to the next).
/// - OpenHands SDK 1.34: the system prompt, the texts of messages and thoughts, and a call's
///   `security_risk` argument.
/// - mini-swe-agent: the system and task messages' text (rendered from templates with values
///   the trajectory does not keep), the text of a format error (rendered by Jinja from the
///   kept template, which this project does not render), and `provider_specific_fields`.
fn unverifiable(agent: &str, line: &Value, damaged: &Value, path: &str) -> bool {
    let under = |prefix: &str| path == prefix || path.starts_with(&format!("{prefix}/"));
    match agent {
        "codex" => {
            let p = &line["payload"];
            (line["type"] == "session_meta" && under("/payload/base_instructions"))
                || (line["type"] == "response_item"
                    && ([
                        "/payload/id",
                        "/payload/status",
                        "/payload/encrypted_content",
                    ]
                    .iter()
                    .any(|f| under(f))
                        || (p["type"] == "message"
                            && (p["role"] == "developer"
                                || p["content"][0]["text"]
                                    .as_str()
                                    .is_some_and(|t| t.starts_with('<'))))
                        || (p["type"] == "custom_tool_call" && under("/payload/input"))
                        || (p["type"] == "function_call"
                            && p["name"] == "update_plan"
                            && under("/payload/arguments"))
                        || (p["type"] == "function_call"
                            && p["name"] == "exec_command"
                            && under("/payload/arguments")
                            && command_unchanged(line, damaged))))
        }
        "claude-code" => {
            line["attachment"]["type"] == "prompt_snapshot"
                && damaged.pointer(path).is_none()
                && path
                    .strip_prefix("/attachment/")
                    .is_some_and(|k| CONDITIONAL_FLAGS.contains(&k))
        }
        "pi-agent" => {
            let role = &line["message"]["role"];
            (role == "user" || role == "assistant")
                && under("/message/content")
                && !(path.ends_with("/id") || path.ends_with("/name"))
        }
        "openhands" => {
            under("/system_prompt/text")
                || under("/llm_message/content")
                || under("/thought")
                || under("/reasoning_content")
                || (path == "/tool_call/arguments" && security_risk_only(line, damaged))
        }
        "opencode" => {
            let seg: Vec<&str> = path.split('/').skip(1).collect();
            let msg = |i: &str| i.parse::<usize>().ok().map(|i| &line["messages"][i]);
            match seg[..] {
                ["messages", i] => msg(i).is_some_and(|m| m["info"]["role"] == "assistant"),
                ["messages", i, "parts", k, ref rest @ ..] => {
                    let Some(p) =
                        msg(i).and_then(|m| k.parse::<usize>().ok().map(|k| &m["parts"][k]))
                    else {
                        return false;
                    };
                    matches!(
                        (p["type"].as_str().unwrap_or(""), rest),
                        ("text" | "reasoning", [] | ["text", ..])
                            | ("tool", [] | ["callID"] | ["state", "input", ..])
                    )
                }
                _ => false,
            }
        }
        "mini-swe-agent" => {
            let Some((i, rest)) = path
                .strip_prefix("/messages/")
                .and_then(|p| p.split_once('/'))
                .and_then(|(i, rest)| Some((i.parse::<usize>().ok()?, rest)))
            else {
                return false;
            };
            let messages = line["messages"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let after_unparsed_reply = i > 0
                && messages[i]["role"] == "user"
                && messages[i - 1]["role"] == "assistant"
                && messages[i - 1].pointer("/extra/actions").is_none()
                && messages[i - 1]["content"]
                    .as_str()
                    .is_some_and(|c| c.matches("```").count() != 2);
            (i <= 1 && rest == "content")
                || rest.starts_with("provider_specific_fields")
                || (rest == "content"
                    && (after_unparsed_reply
                        || messages[i].pointer("/extra/interrupt_type").is_some()))
        }
        _ => false,
    }
}

/// The flags of a Claude Code prompt snapshot that Claude writes each on its own condition
/// (`...x !== void 0 && {flag: x}` in 2.1.332's JavaScript), so that any may be absent.
/// (`toolChangeHeader` and `inlineTools` are written together, and checked so.)
const CONDITIONAL_FLAGS: [&str; 3] = ["systemTurns", "keptReminders", "toolResultSafeguards"];

/// Whether two OpenCode exports differ only in the order of keys inside calls' arguments
/// (`state.input`, at any depth), which nothing else records.
fn argument_order_only(x: &Value, y: &Value) -> bool {
    fn sort_all(v: &mut Value) {
        match v {
            Value::Object(o) => {
                o.sort_keys();
                o.values_mut().for_each(sort_all);
            }
            Value::Array(a) => a.iter_mut().for_each(sort_all),
            _ => {}
        }
    }
    fn sorted_inputs(v: &Value) -> Value {
        let mut v = v.clone();
        for m in v["messages"].as_array_mut().into_iter().flatten() {
            for p in m["parts"].as_array_mut().into_iter().flatten() {
                if let Some(input) = p.pointer_mut("/state/input") {
                    sort_all(input);
                }
            }
        }
        v
    }
    serde_json::to_string(&sorted_inputs(x)).ok() == serde_json::to_string(&sorted_inputs(y)).ok()
}

/// The JSON value of the JSON text at `pointer` (a call's arguments), if it is one.
fn json_text_at(v: &Value, pointer: &str) -> Option<Value> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .and_then(|a| serde_json::from_str(a).ok())
}

/// Whether a Codex `exec_command` call's arguments (a JSON text) still say the same command:
/// the same `cmd`, `workdir`, `shell` and `login` (what its `item_completed` event shows, as
/// the command line and its directory). Its other arguments (the output budget,
/// `yield_time_ms`, `tty`, a key Codex's argument struct does not name and so ignores) are
/// repeated by no event.
fn command_unchanged(before: &Value, after: &Value) -> bool {
    let args = |v: &Value| json_text_at(v, "/payload/arguments");
    match (args(before), args(after)) {
        (Some(a @ Value::Object(_)), Some(b @ Value::Object(_))) => {
            ["cmd", "workdir", "shell", "login"]
                .iter()
                .all(|k| a.get(k) == b.get(k))
        }
        _ => false,
    }
}

/// Whether an OpenHands call's arguments (`/tool_call/arguments`, a JSON text) differ only in
/// `security_risk` between the undamaged and the damaged event.
fn security_risk_only(before: &Value, after: &Value) -> bool {
    let args = |v: &Value| json_text_at(v, "/tool_call/arguments");
    match (args(before), args(after)) {
        (Some(Value::Object(mut a)), Some(Value::Object(mut b))) => {
            a.remove("security_risk");
            b.remove("security_risk");
            a == b
        }
        _ => false,
    }
}

/// Whether a mutation changed only what the format cannot show (see [`unverifiable`]): one
/// line, still JSON, every difference in such a field.
fn only_unverifiable(agent: &str, text: &str, damaged: &str, doc: bool) -> bool {
    let (a, b): (Vec<&str>, Vec<&str>) = if doc {
        (vec![text], vec![damaged])
    } else {
        (text.lines().collect(), damaged.lines().collect())
    };
    if a.len() != b.len() {
        return false;
    }
    let changed: Vec<(&str, &str)> = a.into_iter().zip(b).filter(|(x, y)| x != y).collect();
    let [(x, y)] = changed[..] else {
        return false;
    };
    let (Ok(x), Ok(y)) = (
        serde_json::from_str::<Value>(x),
        serde_json::from_str::<Value>(y),
    ) else {
        return false;
    };
    if agent == "opencode" && doc && argument_order_only(&x, &y) {
        return true;
    }
    // JSON pointers (`/payload/content/0`) of the differences.
    let paths: Vec<String> = pvisor::certify::check::differences(&x, &y)
        .into_iter()
        .map(|p| p.replace('[', "/").replace(']', ""))
        .collect();
    !paths.is_empty()
        && paths.iter().all(|p| match (x.pointer(p), y.pointer(p)) {
            // A list that lost or gained one element: whether that element's absence or
            // repetition can be seen.
            (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() != b.len() => {
                let (long, short) = if a.len() > b.len() { (a, b) } else { (b, a) };
                one_more(long, short)
                    .is_some_and(|k| unverifiable(agent, &x, &y, &format!("{p}/{k}")))
            }
            _ => unverifiable(agent, &x, &y, p),
        })
}

/// The index of the one element `long` has more than `short`, when that is the only
/// difference.
fn one_more(long: &[Value], short: &[Value]) -> Option<usize> {
    if long.len() != short.len() + 1 {
        return None;
    }
    let k = long
        .iter()
        .zip(short)
        .position(|(x, y)| x != y)
        .unwrap_or(short.len());
    (long[k + 1..] == short[k..]).then_some(k)
}

/// Where a one-record mutation changed the record (its first JSON paths), for the report.
fn changed_at(text: &str, damaged: &str, doc: bool) -> String {
    let pairs: Vec<(&str, &str)> = if doc {
        vec![(text, damaged)]
    } else {
        text.lines()
            .zip(damaged.lines())
            .filter(|(a, b)| a != b)
            .take(1)
            .collect()
    };
    match pairs[..] {
        [(a, b)] => match (
            serde_json::from_str::<Value>(a),
            serde_json::from_str::<Value>(b),
        ) {
            (Ok(a), Ok(b)) => {
                let d = pvisor::certify::check::differences(&a, &b);
                format!(
                    " (at {})",
                    d.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
                )
            }
            _ => String::new(),
        },
        _ => String::new(),
    }
}

/// Mutations per session of `agent`; `PVISOR_DAMAGED_MUTATIONS` sets another count for a
/// longer campaign.
fn mutations(agent: &str) -> usize {
    if let Some(n) = std::env::var("PVISOR_DAMAGED_MUTATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        return n;
    }
    match agent {
        "openhands" => PER_OPENHANDS_SESSION,
        _ => PER_SESSION,
    }
}

/// Run the corpus over one session; returns the silent acceptances.
fn corpus(agent: &str, session: &Path, seed: u64) -> (usize, usize, Vec<String>) {
    let adapter = (pvisor::adapters::registry().get(agent).unwrap().make)();
    // The session's bytes as its adapter reads them (a conversation folder in its one-file
    // canonical form), mutated as text.
    let text = String::from_utf8(adapter.read_input(session).unwrap()).unwrap();
    let doc = serde_json::from_str::<Value>(&text).is_ok();
    let name = match session.is_dir() {
        true => std::ffi::OsString::from("conversation.bundle"),
        false => session.file_name().unwrap().to_owned(),
    };
    let dir = tempfile::tempdir().unwrap();
    let (plan, _) = adapter.parse_path(session).unwrap();
    let max = plan.max_boundary();
    let fresh: BTreeMap<String, Observation> = plan
        .batches
        .loaded()
        .unwrap()
        .iter()
        .flat_map(|b| &b.calls)
        .filter_map(|c| c.original.clone().map(|o| (c.call_id.clone(), o)))
        .collect();
    // OpenHands renders its prefix with the SDK itself.
    let sdk = agent == "openhands";
    let entry = sdk.then(|| recording::install("openhands"));
    let mut wanted: BTreeMap<usize, Visible> = BTreeMap::new();
    let mut want = |n: usize| -> Visible {
        wanted
            .entry(n)
            .or_insert_with(|| {
                visible(
                    adapter.as_ref(),
                    session,
                    &plan,
                    n,
                    &dir.path().join("orig"),
                    &fresh,
                    entry.as_deref(),
                )
                .unwrap()
            })
            .clone()
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut silent = vec![];
    let mut refused = 0;
    let mut unseen = 0;
    for k in 0..mutations(agent) {
        let (damaged, what) = mutate(&text, doc, &mut rng);
        if damaged == text {
            continue;
        }
        let case = dir.path().join(format!("m{k}"));
        std::fs::create_dir_all(&case).unwrap();
        let path = case.join(&name);
        std::fs::write(&path, &damaged).unwrap();
        let damaged_plan = match adapter.parse_path(&path) {
            Ok((p, _)) => p,
            Err(e) => {
                assert_eq!(e.path, path, "{what}: {e}");
                refused += 1;
                continue;
            }
        };
        let plan = damaged_plan;
        let top = plan.max_boundary().min(max);
        let boundaries = match sdk {
            true => (top.max(1)..=top).collect::<Vec<_>>(),
            false => (1..=top).collect(),
        };
        for n in boundaries {
            let want_n = want(n);
            // A call of a tool the adapter does not know is refused before anything runs.
            let unknown = plan.batches.loaded().unwrap()[..n]
                .iter()
                .flat_map(|b| &b.calls)
                .any(|c| adapter.classify(c) == pvisor::kit::ToolClass::Unknown);
            if unknown {
                refused += 1;
                break;
            }
            match visible(
                adapter.as_ref(),
                &path,
                &plan,
                n,
                &case,
                &fresh,
                entry.as_deref(),
            ) {
                Err(_) => {
                    refused += 1;
                    break;
                }
                Ok(got) if got == want_n => {}
                Ok(_) if only_unverifiable(agent, &text, &damaged, doc) => {
                    unseen += 1;
                    break;
                }
                Ok(got) => {
                    let part = if got.prefix != want_n.prefix {
                        "the messages"
                    } else if got.calls != want_n.calls {
                        "the calls"
                    } else {
                        "the instructions or tools"
                    };
                    silent.push(format!(
                        "{}: {what}: N={n}: {part} changed{}",
                        session.display(),
                        changed_at(&text, &damaged, doc)
                    ));
                    break;
                }
            }
        }
    }
    (refused, unseen, silent)
}

fn check(agent: &str, sessions: &[&str]) {
    let mut all = vec![];
    let (mut refused, mut unseen) = (0, 0);
    for (i, s) in sessions.iter().enumerate() {
        let (r, u, silent) = corpus(agent, &fixture(s), seed() + i as u64);
        refused += r;
        unseen += u;
        all.extend(silent);
    }
    eprintln!(
        "{agent}: {} mutations, {refused} refused, {unseen} changed only what the format cannot show, {} accepted silently",
        mutations(agent) * sessions.len(),
        all.len()
    );
    assert!(
        all.is_empty(),
        "{agent}: {} damaged sessions accepted with another model-visible prefix:\n{}",
        all.len(),
        all.join("\n")
    );
}

#[test]
fn damaged_claude_sessions_are_refused_or_unchanged() {
    check(
        "claude-code",
        &[
            "claude/recorded/five-step/session.jsonl",
            "claude/recorded/parallel-order-2.1.332/session.jsonl",
            "claude/recorded/search-errors/session.jsonl",
        ],
    );
}

#[test]
fn damaged_codex_rollouts_are_refused_or_unchanged() {
    check(
        "codex",
        &[
            "codex/genuine/rollout-final.jsonl",
            "codex/recorded/patches/rollout.jsonl",
            "codex/recorded/commands/rollout.jsonl",
        ],
    );
}

#[test]
fn damaged_pi_sessions_are_refused_or_unchanged() {
    check(
        "pi-agent",
        &[
            "pi/recorded/tools/session.jsonl",
            "pi/recorded/errors/session.jsonl",
            "pi/genuine/session-final.jsonl",
        ],
    );
}

#[test]
fn damaged_opencode_exports_are_refused_or_unchanged() {
    check(
        "opencode",
        &[
            "opencode/recorded/tools/export.json",
            "opencode/recorded/errors/export.json",
            "opencode/genuine/export.json",
        ],
    );
}

#[test]
fn damaged_mini_swe_agent_trajectories_are_refused_or_unchanged() {
    check(
        "mini-swe-agent",
        &[
            "mini-swe-agent/recorded/v2-tools/mini.traj.json",
            "mini-swe-agent/recorded/v2-text/mini.traj.json",
            "mini-swe-agent/recorded/v1-tools/mini.traj.json",
            "mini-swe-agent/genuine-2.4.6/mini.traj.json",
            "mini-swe-agent/genuine-1.17.5/mini.traj.json",
        ],
    );
}

#[test]
fn damaged_openhands_conversations_are_refused_or_unchanged() {
    check(
        "openhands",
        &[
            "openhands/recorded/mixed/native-final",
            "openhands/genuine/native-final",
        ],
    );
}
