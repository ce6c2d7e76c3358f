//! The adapter conformance kit: what a fixture declares, and the shared machinery every
//! check uses (running `pvisor` at the recording's path in a private mount namespace,
//! finding the original request that followed a boundary, comparing requests).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::ns::Case;

/// An edit of a trajectory's text.
pub type TextEdit = fn(&str) -> String;

/// One recorded session of one adapter, with everything the checks need.
pub struct Fixture {
    /// `<agent>/<recording>`, for messages.
    pub name: String,
    /// The agent name on the command line.
    pub agent: &'static str,
    /// The native trajectory.
    pub trajectory: PathBuf,
    /// The recording's workspace path (the replay runs there, in its own namespace).
    pub original_cwd: PathBuf,
    /// Fill a fresh workspace as it was before the recorded run.
    pub seed: std::sync::Arc<dyn Fn(&Path) + Send + Sync>,
    /// The model script the recording played (its later turns drive the continuation).
    pub script: PathBuf,
    /// The original main requests, in order (the scripted server's logs).
    pub originals: Vec<Value>,
    /// The agent CLI (installed when missing; never skipped).
    pub entrypoint: fn() -> PathBuf,
    /// The request body without its declared dynamic fields (ids of a fresh home, turn
    /// metadata, wall times), so that the rest can be compared byte for byte.
    pub mask: fn(&Value) -> Value,
    /// Recorded host/time facts edited to values that surely differ from this host's:
    /// `(label, edit of the trajectory text)`; the continuation must neutralize them.
    pub host_fact_edits: Vec<(&'static str, TextEdit)>,
    /// Whether the agent goes on after scripted turn `k` (`None`: past the script's end, where
    /// the server plays a plain text turn): two such turns after a boundary exhaust a budget of
    /// two live steps. Most agents go on only after a reply that calls tools ([`calls_tools`]).
    pub goes_on: fn(Option<&Value>) -> bool,
    /// A well-formed record with one field of the wrong type: `(edit of the trajectory
    /// text, the field path the error must name)`.
    pub field_damage: (TextEdit, &'static str),
    /// Records of the native input that rebuild rewrites by design (OpenHands'
    /// `base_state.json`: status and head pointer), left out of the byte-identity check.
    pub rewritten: fn(&str) -> bool,
    /// The trajectory without the records that authenticate what the agent saw (Claude's
    /// recorded requests hash every message it sent): what a user who edits a recorded
    /// observation removes too, or the session is refused as not the one the agent sent.
    pub unsigned: TextEdit,
    /// Boundaries where the recording's user went on with a new prompt (a conversation that
    /// ended and was resumed): the continuation there is given that prompt, and request 1
    /// must equal the original resume request.
    pub prompts: Vec<(usize, String)>,
}

/// The trajectory as it is (nothing in it authenticates the observations).
pub fn as_is(text: &str) -> String {
    text.to_string()
}

/// No record is rewritten by rebuild.
pub fn rewrites_nothing(_: &str) -> bool {
    false
}

impl Fixture {
    pub fn plan(&self) -> pvisor::kit::Plan {
        let adapter = (pvisor::adapters::registry()
            .get(self.agent)
            .expect("registered")
            .make)();
        adapter
            .parse(&self.trajectory, &self.input())
            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }

    /// The bytes the adapter parses (a folder input in its canonical byte form).
    pub fn input(&self) -> Vec<u8> {
        let adapter = (pvisor::adapters::registry()
            .get(self.agent)
            .expect("registered")
            .make)();
        adapter
            .read_input(&self.trajectory)
            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }

    /// The input as text.
    pub fn input_text(&self) -> String {
        String::from_utf8(self.input()).unwrap()
    }

    /// A replay case at the recording's path.
    pub fn case(&self) -> Case {
        Case::new(&self.original_cwd.display().to_string())
    }

    /// `pvisor replay` of `trajectory` (default: the fixture's) at boundary `n`.
    pub fn replay(
        &self,
        case: &Case,
        id: &str,
        n: usize,
        trajectory: Option<&Path>,
        extra: &[String],
    ) -> Ran {
        let args = self.replay_args(case, id, n, trajectory, extra);
        let (code, result, stderr) = case.pvisor(&args, |w| (self.seed)(w));
        Ran {
            code,
            result,
            stderr,
        }
    }

    /// The arguments of [`Fixture::replay`].
    pub fn replay_args(
        &self,
        case: &Case,
        id: &str,
        n: usize,
        trajectory: Option<&Path>,
        extra: &[String],
    ) -> Vec<String> {
        let mut args: Vec<String> = [
            "replay",
            "--agent",
            self.agent,
            "--run-id",
            id,
            "--after-step",
            &n.to_string(),
            "--trajectory",
            &trajectory.unwrap_or(&self.trajectory).display().to_string(),
            "--workspace",
            &self.original_cwd.display().to_string(),
            "--state-dir",
            &case.root.path().join("state").display().to_string(),
            "--output-dir",
            &case.root.path().join("out").display().to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().cloned());
        args
    }

    pub fn resume(&self, case: &Case, id: &str) -> Ran {
        let (code, result, stderr) = case.pvisor(&self.resume_args(case, id), |w| (self.seed)(w));
        Ran {
            code,
            result,
            stderr,
        }
    }

    /// The arguments of [`Fixture::resume`].
    pub fn resume_args(&self, case: &Case, id: &str) -> Vec<String> {
        vec![
            "replay".to_string(),
            "--resume-journal".into(),
            case.state(id).display().to_string(),
        ]
    }

    /// Flags of a continuation with `budget` live steps after boundary `n` (with the
    /// fixture's boundary prompt for `n`, if it has one).
    pub fn continue_args(
        &self,
        plan: &pvisor::kit::Plan,
        n: usize,
        budget: usize,
        entry: &Path,
    ) -> Vec<String> {
        let max = plan.batches.loaded().unwrap()[n - 1].model_turn + budget;
        let mut args = vec![
            "--max-steps".into(),
            max.to_string(),
            "--agent-entrypoint".into(),
            entry.display().to_string(),
            "--model-script".into(),
            self.script.display().to_string(),
        ];
        if let Some((_, p)) = self.prompts.iter().find(|(b, _)| *b == n) {
            args.extend(["--boundary-user-prompt".to_string(), p.clone()]);
        }
        args
    }

    /// The original main request that followed batch `n`: the first that carries the
    /// result of the batch's last call.
    pub fn original_after(&self, plan: &pvisor::kit::Plan, n: usize) -> &Value {
        let batches = plan.batches.loaded().unwrap();
        let id = &batches[n - 1].calls.last().unwrap().call_id;
        // Agents whose results carry no call id (mini-swe-agent 1.x: plain user messages):
        // the request after model turn t is the (t+1)-th main request.
        self.originals
            .iter()
            .find(|r| carries_result(&r["body"], id))
            .or_else(|| {
                (!self.originals.iter().any(|r| r.to_string().contains(id)))
                    .then(|| {
                        self.originals
                            .get(plan.batches.loaded().unwrap()[n - 1].model_turn)
                    })
                    .flatten()
            })
            .unwrap_or_else(|| panic!("{}: no original request carries {id}", self.name))
    }

    /// Whether the agent goes on after scripted turn `k` (0-based over the whole run).
    pub fn turn_goes_on(&self, k: usize) -> bool {
        let s: Value = serde_json::from_slice(&std::fs::read(&self.script).unwrap()).unwrap();
        (self.goes_on)(s["turns"].get(k))
    }
}

/// A scripted turn that calls tools (the agent goes on after it).
pub fn calls_tools(turn: Option<&Value>) -> bool {
    turn.and_then(|t| t["tool_calls"].as_array())
        .is_some_and(|a| !a.is_empty())
}

pub struct Ran {
    pub code: i32,
    pub result: Value,
    pub stderr: String,
}

impl Ran {
    pub fn ok(&self, label: &str) -> &Value {
        assert_eq!(self.code, 0, "{label}: {}\n{}", self.result, self.stderr);
        &self.result
    }
}

/// Does a request body hold the result of call `id` (any protocol)?
#[allow(unused_imports)]
pub use pvisor::certify::check::carries_result;

/// The main requests of a scripted-model log file.
pub fn main_requests(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "main")
        .collect()
}

/// The result folded again from the run's journal.
pub fn refold(state: &Path) -> Value {
    let (_, evs, _) = pvisor::journal::Journal::open_dir(state).unwrap();
    serde_json::to_value(pvisor::fold::derive(&pvisor::fold::fold(&evs).unwrap())).unwrap()
}

/// Every file under `dir` with its mtime and bytes.
pub fn file_states(dir: &Path) -> Vec<(String, std::time::SystemTime, Vec<u8>)> {
    crate::claude::file_states(dir)
}

/// Paths where two JSON values differ.
pub fn differences(a: &Value, b: &Value) -> Vec<String> {
    let mut out = vec![];
    crate::claude::diff_paths(a, b, String::new(), &mut out);
    out
}

/// The facts an interrupted-and-resumed run must share with the uninterrupted one.
#[allow(unused_imports)]
pub use pvisor::certify::check::outcome;

/// `bytes` with one byte flipped (bit 5), every `every` bytes: damaged inputs for parsers
/// (used by the single-adapter e2e tests that include this kit).
#[allow(dead_code)]
pub fn byte_flips(bytes: &[u8], every: usize) -> impl Iterator<Item = Vec<u8>> + '_ {
    (0..bytes.len()).step_by(every.max(1)).map(move |i| {
        let mut b = bytes.to_vec();
        b[i] ^= 0x20;
        b
    })
}
