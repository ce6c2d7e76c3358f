//! The properties checked on one recorded case, through the command line as a user runs it
//! (`pvisor replay` as a child process), at every boundary:
//!
//! - `--prepare-only` runs nothing and leaves the workspace (names, bytes, mtimes) untouched;
//! - `--replay-only` regenerates observations equal to the recorded ones (declared dynamic
//!   fields aside) and replays every call of batches 1..=N;
//! - the continuation with the real CLI sends a first request equal to the original request
//!   N+1 except the declared dynamic fields, and ends at the boundary;
//! - every run's result is fold(journal);
//!
//! and once per case, a continuation killed right after a journal event chosen from the
//! case resumes (`--resume-journal`) to the uninterrupted run's outcome.

use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

use super::record::Recording;
use crate::kit::Plan;

/// How many of a property's checks held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Count {
    pub held: usize,
    pub of: usize,
}

impl Count {
    fn add(&mut self, held: bool) {
        self.of += 1;
        self.held += held as usize;
    }
    pub fn all(&self) -> bool {
        self.held == self.of
    }
}

/// The checks of every case so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub cases: usize,
    pub boundaries: usize,
    pub tool_calls: usize,
    pub prepare_only_untouched: Count,
    pub observations_equal: Count,
    pub first_requests_equal: Count,
    pub folds_equal: Count,
    pub resumes_equal: Count,
}

impl Tally {
    pub fn all(&self) -> bool {
        [
            self.prepare_only_untouched,
            self.observations_equal,
            self.first_requests_equal,
            self.folds_equal,
            self.resumes_equal,
        ]
        .iter()
        .all(Count::all)
    }
}

/// What one case runs with.
pub struct Case<'a> {
    pub agent: &'a str,
    pub entrypoint: &'a Path,
    pub pvisor: &'a Path,
    pub root: &'a Path,
    pub recording: &'a Recording,
    pub seed: &'a dyn Fn(&Path) -> std::io::Result<()>,
    pub mask: &'a dyn Fn(&Value) -> Value,
    /// Tool results may interleave stdout and stderr in another order
    /// ([`crate::compare::interleave::two_streams`]).
    pub interleaved: bool,
    /// Picks the event after which the resumed run is killed (from the case's own digest).
    pub pick: u64,
}

/// One `pvisor` run: exit code, the result (last line of stdout), stderr.
struct Ran {
    code: i32,
    result: Value,
    stderr: String,
}

impl Case<'_> {
    fn state(&self, id: &str) -> PathBuf {
        self.root.join("state").join(id)
    }

    fn pvisor(&self, args: &[String], failpoint: Option<String>) -> Ran {
        let home = self.root.join("replay-home");
        let _ = std::fs::create_dir_all(&home);
        let mut cmd = std::process::Command::new(self.pvisor);
        cmd.args(args)
            .env("HOME", &home)
            .env_remove(crate::engine::recorder::FAILPOINT_ENV)
            .stdin(std::process::Stdio::null());
        if let Some(f) = failpoint {
            cmd.env(crate::engine::recorder::FAILPOINT_ENV, f);
        }
        match cmd.output() {
            Ok(out) => {
                let stdout = String::from_utf8_lossy(&out.stdout);
                Ran {
                    code: out.status.code().unwrap_or(-1),
                    result: serde_json::from_str(stdout.lines().last().unwrap_or("{}"))
                        .unwrap_or(Value::Null),
                    stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                }
            }
            Err(e) => Ran {
                code: -1,
                result: Value::Null,
                stderr: format!("cannot run {}: {e}", self.pvisor.display()),
            },
        }
    }

    /// A fresh workspace at the recording's path, as it was before the recorded run.
    fn reset(&self) -> Result<(), String> {
        let work = &self.recording.work;
        let _ = std::fs::remove_dir_all(work);
        (self.seed)(work).map_err(|e| format!("seed {}: {e}", work.display()))
    }

    fn replay_args(&self, id: &str, n: usize, extra: &[String]) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "replay".into(),
            "--agent".into(),
            self.agent.into(),
            "--run-id".into(),
            id.into(),
            "--after-step".into(),
            n.to_string(),
            "--trajectory".into(),
            self.recording.trajectory.display().to_string(),
            "--workspace".into(),
            self.recording.work.display().to_string(),
            "--state-dir".into(),
            self.root.join("state").display().to_string(),
            "--output-dir".into(),
            self.root.join("out").display().to_string(),
        ];
        a.extend(extra.iter().cloned());
        a
    }

    fn continue_flags(&self, plan: &Plan, n: usize) -> Vec<String> {
        vec![
            "--max-steps".into(),
            (plan.batches.shape(n - 1).map_or(0, |s| s.model_turn) + 1).to_string(),
            "--agent-entrypoint".into(),
            self.entrypoint.display().to_string(),
            "--model-script".into(),
            self.recording.script.display().to_string(),
        ]
    }

    /// Run the whole property suite on this case, adding to `tally`; the first property that
    /// does not hold ends the case with its description.
    pub fn check(&self, plan: &Plan, tally: &mut Tally) -> Result<(), String> {
        let originals: Vec<Value> = read_lines(&self.recording.requests)
            .into_iter()
            .filter(|r| r["kind"] == "main")
            .collect();
        let max = plan.max_boundary();
        for n in 1..=max {
            tally.boundaries += 1;
            self.prepare_only(n, tally)?;
            self.replay_only(plan, n, tally)?;
            self.continuation(plan, n, &originals, tally, &format!("c{n}"))?;
        }
        self.resume(plan, &originals, tally)
    }

    fn ran_ok(&self, ran: &Ran, label: &str) -> Result<(), String> {
        if ran.code == 0 {
            return Ok(());
        }
        let why = match ran.result["failure"]["message"].as_str() {
            Some(m) => format!("{}: {m}", ran.result["failure"]["category"]),
            None => {
                let tail: Vec<&str> = ran.stderr.lines().rev().take(8).collect();
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            }
        };
        Err(format!("{label}: exit {}: {why}", ran.code))
    }

    fn fold_equals(&self, id: &str, result: &Value, tally: &mut Tally) -> Result<(), String> {
        let refolded = refold(&self.state(id));
        let held = refolded.as_ref() == Ok(result);
        tally.folds_equal.add(held);
        if held {
            Ok(())
        } else {
            Err(format!(
                "{id}: the printed result is not fold(journal): {}",
                match refolded {
                    Ok(v) => differences(result, &v).join(", "),
                    Err(e) => e,
                }
            ))
        }
    }

    fn prepare_only(&self, n: usize, tally: &mut Tally) -> Result<(), String> {
        self.reset()?;
        let before = file_states(&self.recording.work);
        let id = format!("p{n}");
        let ran = self.pvisor(&self.replay_args(&id, n, &["--prepare-only".into()]), None);
        self.ran_ok(&ran, &format!("prepare-only N={n}"))?;
        let untouched = ran.result["phase"] == "prepared"
            && ran.result["replayed_tool_calls"] == 0
            && file_states(&self.recording.work) == before;
        tally.prepare_only_untouched.add(untouched);
        if !untouched {
            return Err(format!(
                "prepare-only N={n} ran a call or touched the workspace: {}",
                ran.result
            ));
        }
        self.fold_equals(&id, &ran.result, tally)
    }

    fn replay_only(&self, plan: &Plan, n: usize, tally: &mut Tally) -> Result<(), String> {
        self.reset()?;
        let id = format!("r{n}");
        let ran = self.pvisor(&self.replay_args(&id, n, &["--replay-only".into()]), None);
        self.ran_ok(&ran, &format!("replay-only N={n}"))?;
        let calls = plan.batches.calls_before(n);
        let equal = ran.result["phase"] == "replayed"
            && ran.result["metadata"]["observations"]["different"] == 0
            && ran.result["replayed_tool_calls"] == calls as u64;
        tally.observations_equal.add(equal);
        if !equal {
            let cmp = std::fs::read_to_string(
                self.root
                    .join("out")
                    .join(&id)
                    .join("observation-comparison.json"),
            )
            .unwrap_or_default();
            return Err(format!(
                "replay-only N={n}: the regenerated observations differ from the recorded ones: {}",
                differing_calls(&cmp)
            ));
        }
        self.fold_equals(&id, &ran.result, tally)
    }

    /// Continue at `n`; checks request 1 against the original request N+1. Returns the
    /// result.
    fn continuation(
        &self,
        plan: &Plan,
        n: usize,
        originals: &[Value],
        tally: &mut Tally,
        id: &str,
    ) -> Result<Value, String> {
        self.reset()?;
        let ran = self.pvisor(
            &self.replay_args(id, n, &self.continue_flags(plan, n)),
            None,
        );
        if ran.code != 0 {
            // A continuation that fails sends no request the run accepts as the first.
            tally.first_requests_equal.add(false);
        }
        self.ran_ok(&ran, &format!("continuation N={n}"))?;
        let got = read_lines(&self.state(id).join("logs/scripted-model.jsonl"))
            .into_iter()
            .find(|r| r["kind"] == "main");
        let orig = original_after(plan, n, originals);
        let diff = match (&orig, &got) {
            (Some(o), Some(g)) => {
                let (o, g) = ((self.mask)(&o["body"]), (self.mask)(&g["body"]));
                differences(&o, &g)
                    .into_iter()
                    .filter(|p| !(self.interleaved && interleaved_at(&o, &g, p)))
                    .collect()
            }
            (None, _) => vec!["(no original request carries the batch's last result)".into()],
            (_, None) => vec!["(the continued agent sent no main request)".into()],
        };
        let equal = diff.is_empty()
            && ran.result["phase"] == "continued"
            && ran.result["metadata"]["bridge"]["first_request_ends_at_boundary"] == true;
        tally.first_requests_equal.add(equal);
        if !equal {
            return Err(format!(
                "continuation N={n}: request 1 differs from the original request N+1 at {}{}",
                diff.iter().take(5).cloned().collect::<Vec<_>>().join(", "),
                diff.first()
                    .map(|p| format!(
                        "\n  {p}: {} vs {}",
                        at(orig.as_ref().map(|o| &o["body"]), p),
                        at(got.as_ref().map(|g| &g["body"]), p)
                    ))
                    .unwrap_or_default()
            ));
        }
        self.fold_equals(id, &ran.result, tally)?;
        Ok(ran.result)
    }

    /// A continuation killed right after a journal event chosen by the case, resumed.
    fn resume(&self, plan: &Plan, originals: &[Value], tally: &mut Tally) -> Result<(), String> {
        let max = plan.max_boundary();
        if max == 0 {
            return Ok(());
        }
        let n = 1 + (self.pick as usize) % max;
        let whole = self.continuation(plan, n, originals, tally, "whole")?;
        let events = crate::journal::Journal::open_dir(&self.state("whole"))
            .map(|(_, evs, _)| evs.len() as u64)
            .map_err(|e| format!("open the journal of the whole run: {e}"))?;
        // After event 2 .. events-1: the run has started and has not finished.
        let k = 2 + (self.pick / 7) % events.saturating_sub(2).max(1);
        self.reset()?;
        let killed = self.pvisor(
            &self.replay_args("killed", n, &self.continue_flags(plan, n)),
            Some(format!("after-event:{k}")),
        );
        let resumed = if killed.code == 0 {
            killed
        } else {
            self.pvisor(
                &[
                    "replay".into(),
                    "--resume-journal".into(),
                    self.state("killed").display().to_string(),
                ],
                None,
            )
        };
        self.ran_ok(&resumed, &format!("resume after event {k} (N={n})"))?;
        let (a, b) = (outcome(&whole), outcome(&resumed.result));
        let equal = a == b;
        tally.resumes_equal.add(equal);
        if !equal {
            return Err(format!(
                "continuation N={n} killed after event {k} and resumed: its outcome differs at {}",
                differences(&a, &b).join(", ")
            ));
        }
        self.fold_equals("killed", &resumed.result, tally)
    }
}

/// The facts an interrupted-and-resumed run shares with the uninterrupted one. (`equal`, byte
/// for byte, depends on dynamic fields matching by chance, a code-mode `Wall time 0.0` twice;
/// `equal_except_dynamic` includes it and is what must hold.)
pub fn outcome(r: &Value) -> Value {
    serde_json::json!({
        "phase": r["phase"], "quality": r["quality"], "agent_status": r["agent_status"],
        "after_step": r["after_step"], "replayed_tool_calls": r["replayed_tool_calls"],
        "prefix_model_turns": r["prefix_model_turns"], "continued_steps": r["continued_steps"],
        "failure": r["failure"],
        "first_request_ends_at_boundary": r["metadata"]["bridge"]["first_request_ends_at_boundary"],
        "observations": {
            "equal_except_dynamic": r["metadata"]["observations"]["equal_except_dynamic"],
            "different": r["metadata"]["observations"]["different"],
            "stale_reused": r["metadata"]["observations"]["stale_reused"],
        },
    })
}

/// The original main request that followed batch `n`: the first that carries the result of
/// the batch's last call (or, for agents whose results carry no call id, the request after
/// the batch's model turn).
pub fn original_after(plan: &Plan, n: usize, originals: &[Value]) -> Option<Value> {
    let b = plan.batches.get(n.checked_sub(1)?).ok()??;
    let id = &b.calls.last()?.call_id;
    originals
        .iter()
        .find(|r| carries_result(&r["body"], id))
        .or_else(|| {
            (!originals
                .iter()
                .any(|r| r.to_string().contains(id.as_str())))
            .then(|| originals.get(b.model_turn))
            .flatten()
        })
        .cloned()
}

/// Does a request body hold the result of call `id` (an Anthropic `tool_result`, a Responses
/// `*_output` item, a Chat `tool` message)?
pub fn carries_result(v: &Value, id: &str) -> bool {
    match v {
        Value::Object(o) => {
            let ty = o.get("type").and_then(Value::as_str).unwrap_or("");
            let hit = (ty == "tool_result"
                && o.get("tool_use_id").and_then(Value::as_str) == Some(id))
                || (ty.ends_with("_output")
                    && o.get("call_id").and_then(Value::as_str) == Some(id))
                || (o.get("role").and_then(Value::as_str) == Some("tool")
                    && o.get("tool_call_id").and_then(Value::as_str) == Some(id));
            hit || o.values().any(|x| carries_result(x, id))
        }
        Value::Array(a) => a.iter().any(|x| carries_result(x, id)),
        _ => false,
    }
}

/// Paths (`/messages[3]/content`) where two JSON values differ.
pub fn differences(a: &Value, b: &Value) -> Vec<String> {
    fn walk(a: &Value, b: &Value, path: String, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                    match (x.get(k), y.get(k)) {
                        (Some(p), Some(q)) => walk(p, q, format!("{path}/{k}"), out),
                        _ => out.push(format!("{path}/{k}")),
                    }
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (p, q)) in x.iter().zip(y).enumerate() {
                    walk(p, q, format!("{path}[{i}]"), out);
                }
            }
            _ if a == b => {}
            _ => out.push(path),
        }
    }
    let mut out = vec![];
    walk(a, b, String::new(), &mut out);
    out
}

/// Whether both values at a path of [`differences`] are texts holding the same two streams
/// interleaved differently.
fn interleaved_at(a: &Value, b: &Value, path: &str) -> bool {
    let pointer = path.replace('[', "/").replace(']', "");
    match (a.pointer(&pointer), b.pointer(&pointer)) {
        (Some(Value::String(x)), Some(Value::String(y))) => {
            crate::compare::interleave::two_streams(x, y)
        }
        _ => false,
    }
}

/// The value at a path of [`differences`], shortened for a message.
fn at(v: Option<&Value>, path: &str) -> String {
    let pointer = path.replace('[', "/").replace(']', "");
    let s = v
        .and_then(|v| v.pointer(&pointer))
        .unwrap_or(&Value::Null)
        .to_string();
    s.chars().take(300).collect()
}

/// The result folded again from a run's journal.
pub fn refold(state: &Path) -> Result<Value, String> {
    let (_, evs, _) = crate::journal::Journal::open_dir(state).map_err(|e| e.to_string())?;
    let st = crate::fold::fold(&evs).map_err(|e| e.to_string())?;
    serde_json::to_value(crate::fold::derive(&st)).map_err(|e| e.to_string())
}

/// Every file below `dir` with its mtime and bytes, sorted by path.
pub fn file_states(dir: &Path) -> Vec<(PathBuf, Option<std::time::SystemTime>, Vec<u8>)> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                out.push((p.clone(), None, vec![]));
                stack.push(p);
            } else {
                let m = e.metadata().ok().and_then(|m| m.modified().ok());
                out.push((p.clone(), m, std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The calls of an `observation-comparison.json` whose observation differs, with the start
/// of their diff.
fn differing_calls(comparison: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(comparison) else {
        return "(no observation comparison)".into();
    };
    v["calls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["equal_except_dynamic"] != true)
        .map(|c| {
            let diff: String = c["diff"].as_str().unwrap_or("").chars().take(600).collect();
            format!(
                "\n  batch {} call {} ({}):\n{diff}",
                c["batch"], c["call"], c["tool"]
            )
        })
        .collect()
}
