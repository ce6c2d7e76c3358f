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
//! [`unverifiable`]): such mutations are counted apart. Sessions of the pinned versions (Claude
//! Code 2.1.332, Codex 0.149.0). A fixed seed: every suite run checks the same fresh corpus.

use pvisor::kit::{Adapter, Observation, Plan, RebuildRequest};
use rand::{Rng, SeedableRng};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const SEED: u64 = 20261203;
/// Mutations per session.
const PER_SESSION: usize = 400;

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(p)
}

/// What the model sees of a session rebuilt at boundary `n`, or why it was refused.
#[derive(Debug, PartialEq)]
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
            _ => (v["attachment"]["type"] == "prompt_snapshot").then(|| v["attachment"].clone()),
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
) -> Result<Visible, String> {
    let observations: BTreeMap<String, Observation> = plan.batches[..n]
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
        observations: &observations,
        workspace: &work,
        state_dir: &state,
        artifact_path: &dir.join(format!("artifact-{n}")),
        touch_workspace: false,
        agent_entrypoint: None,
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
        calls: plan.batches[..n]
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

/// One mutation of the session text, and what it was.
fn mutate(text: &str, rng: &mut rand::rngs::StdRng) -> (String, String) {
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
            let mut paths = vec![];
            leaves(&v, String::new(), &mut paths);
            paths.retain(|p| !p.is_empty());
            if paths.is_empty() {
                return (text.to_string(), "nothing".into());
            }
            let p = paths[rng.gen_range(0..paths.len())].clone();
            let what = match k {
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
                    format!("line {} field {p} deleted", i + 1)
                }
                6 => {
                    let x = v.pointer_mut(&p).unwrap();
                    *x = match x {
                        Value::String(_) => Value::from(12345),
                        Value::Number(_) | Value::Bool(_) | Value::Null => Value::from("oops"),
                        Value::Array(_) => serde_json::json!({}),
                        Value::Object(_) => Value::from("oops"),
                    };
                    format!("line {} field {p} of another type", i + 1)
                }
                _ => {
                    let x = v.pointer_mut(&p).unwrap();
                    if let Value::String(s) = x {
                        if let Some((at, c)) = s.char_indices().nth(s.chars().count() / 2) {
                            let new = if c == 'e' { 'a' } else { 'e' };
                            s.replace_range(at..at + c.len_utf8(), &new.to_string());
                        }
                    }
                    format!("line {} text of {p} changed", i + 1)
                }
            };
            lines[i] = serde_json::to_string(&v).unwrap();
            (join(&lines), what)
        }
    }
}

/// Whether a change to `path` of the record `line` is one the native format gives no way to
/// see: written once, repeated by no other record, hashed nowhere. Codex 0.149: the base
/// instructions, the developer and environment-context messages, item ids, statuses and
/// encrypted reasoning, the text of an `apply_patch` input. Claude Code 2.1.332 hashes every
/// message it sends and its system prompt and tools: nothing.
fn unverifiable(agent: &str, line: &Value, path: &str) -> bool {
    if agent != "codex" {
        return false;
    }
    let p = &line["payload"];
    let under = |prefix: &str| path == prefix || path.starts_with(&format!("{prefix}/"));
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
                || (p["type"] == "custom_tool_call" && under("/payload/input"))))
}

/// Whether a mutation changed only what the format cannot show (see [`unverifiable`]): one
/// line, still JSON, every difference in such a field.
fn only_unverifiable(agent: &str, text: &str, damaged: &str) -> bool {
    let (a, b): (Vec<&str>, Vec<&str>) = (text.lines().collect(), damaged.lines().collect());
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
    // JSON pointers (`/payload/content/0`) of the differences.
    let paths: Vec<String> = pvisor::certify::check::differences(&x, &y)
        .into_iter()
        .map(|p| p.replace('[', "/").replace(']', ""))
        .collect();
    !paths.is_empty() && paths.iter().all(|p| unverifiable(agent, &x, p))
}

/// Run the corpus over one session; returns the silent acceptances.
fn corpus(agent: &str, session: &Path, seed: u64) -> (usize, usize, Vec<String>) {
    let adapter = (pvisor::adapters::registry().get(agent).unwrap().make)();
    let text = std::fs::read_to_string(session).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (plan, _) = adapter.parse_path(session).unwrap();
    let max = plan.max_boundary();
    let fresh: BTreeMap<String, Observation> = plan
        .batches
        .iter()
        .flat_map(|b| &b.calls)
        .filter_map(|c| c.original.clone().map(|o| (c.call_id.clone(), o)))
        .collect();
    let want: Vec<Visible> = (1..=max)
        .map(|n| {
            visible(
                adapter.as_ref(),
                session,
                &plan,
                n,
                &dir.path().join("orig"),
                &fresh,
            )
            .unwrap()
        })
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut silent = vec![];
    let mut refused = 0;
    let mut unseen = 0;
    for k in 0..PER_SESSION {
        let (damaged, what) = mutate(&text, &mut rng);
        if damaged == text {
            continue;
        }
        let case = dir.path().join(format!("m{k}"));
        std::fs::create_dir_all(&case).unwrap();
        let path = case.join(session.file_name().unwrap());
        std::fs::write(&path, &damaged).unwrap();
        let plan = match adapter.parse_path(&path) {
            Ok((p, _)) => p,
            Err(e) => {
                assert_eq!(e.path, path, "{what}: {e}");
                refused += 1;
                continue;
            }
        };
        for n in 1..=plan.max_boundary().min(max) {
            // A call of a tool the adapter does not know is refused before anything runs.
            let unknown = plan.batches[..n]
                .iter()
                .flat_map(|b| &b.calls)
                .any(|c| adapter.classify(c) == pvisor::kit::ToolClass::Unknown);
            if unknown {
                refused += 1;
                break;
            }
            match visible(adapter.as_ref(), &path, &plan, n, &case, &fresh) {
                Err(_) => {
                    refused += 1;
                    break;
                }
                Ok(got) if got == want[n - 1] => {}
                Ok(_) if only_unverifiable(agent, &text, &damaged) => {
                    unseen += 1;
                    break;
                }
                Ok(got) => {
                    let part = if got.prefix != want[n - 1].prefix {
                        "the messages"
                    } else if got.calls != want[n - 1].calls {
                        "the calls"
                    } else {
                        "the instructions or tools"
                    };
                    silent.push(format!(
                        "{}: {what}: N={n}: {part} changed",
                        session.display()
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
        let (r, u, silent) = corpus(agent, &fixture(s), SEED + i as u64);
        refused += r;
        unseen += u;
        all.extend(silent);
    }
    eprintln!(
        "{agent}: {} mutations, {refused} refused, {unseen} changed only what the format cannot show, {} accepted silently",
        PER_SESSION * sessions.len(),
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
