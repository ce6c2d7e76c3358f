//! A fake adapter for engine-level tests (unit level: the acceptance tests of real adapters
//! use the real agent CLIs).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use pvisor::engine::{self, Start};
use pvisor::error::{ExecError, TrajectoryError};
use pvisor::kit::*;
use pvisor::request::{ReplayRequest, RequestFields};

/// Fake trajectory: one JSON line per batch: `{"calls":[{"id","tool","input","result"}]}`.
/// Tools: `write {path,text}` (mutating, appends to a marker file too), `read {path}`,
/// `web` (non-regenerable).
pub struct Fake;

impl Adapter for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }
    /// A folder input (a session of several files, like a conversation store): its `*.line`
    /// files in name order, one line each.
    fn read_input(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        if !path.is_dir() {
            return std::fs::read(path);
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "line"))
            .collect();
        files.sort();
        let mut out = vec![];
        for f in files {
            out.extend(std::fs::read(f)?);
            out.push(b'\n');
        }
        Ok(out)
    }
    fn parse(&self, path: &Path, bytes: &[u8]) -> Result<Plan, TrajectoryError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| TrajectoryError::new(path, 0, "file", "not UTF-8"))?;
        let mut batches = vec![];
        for (i, line) in text.lines().enumerate() {
            let v: serde_json::Value = serde_json::from_str(line)
                .map_err(|e| TrajectoryError::new(path, i + 1, "line", e.to_string()))?;
            let calls = v["calls"]
                .as_array()
                .ok_or_else(|| TrajectoryError::new(path, i + 1, "calls", "missing"))?;
            let calls: Vec<ToolCall> = calls
                .iter()
                .map(|c| ToolCall {
                    call_id: c["id"].as_str().unwrap_or_default().into(),
                    tool: c["tool"].as_str().unwrap_or_default().into(),
                    input: c["input"].clone(),
                    original: c
                        .get("result")
                        .and_then(|r| r.as_str())
                        .map(|r| Observation {
                            text: r.into(),
                            is_error: false,
                            native: None,
                        }),
                    locator: Locator {
                        line: i + 1,
                        native_id: None,
                    },
                })
                .collect();
            let complete = calls.iter().all(|c| c.original.is_some());
            batches.push(Batch {
                index: i + 1,
                calls,
                model_turn: i + 1,
                locator: Locator {
                    line: i + 1,
                    native_id: None,
                },
                complete,
            });
        }
        Ok(Plan {
            agent: "fake".into(),
            recorded_version: None,
            session_id: Some("s1".into()),
            original_cwd: None,
            model_turns: batches.len() + 1,
            native: Default::default(),
            batches: batches.into(),
        })
    }
    fn classify(&self, call: &ToolCall) -> ToolClass {
        match call.tool.as_str() {
            "write" => ToolClass::Mutating,
            "read" => ToolClass::ReadOnly,
            "web" => ToolClass::NonRegenerable,
            _ => ToolClass::Unknown,
        }
    }
    fn tool_runner(
        &self,
        _plan: &Plan,
        ctx: &ExecContext,
        _completed: &[(ToolCall, Observation)],
    ) -> Result<Box<dyn ToolRunner>, AdapterError> {
        Ok(Box::new(FakeTools(ctx.clone())))
    }
    fn rebuild(&self, req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
        rebuild(req)
    }
}

struct FakeTools(ExecContext);

impl ToolRunner for FakeTools {
    fn execute(&mut self, call: &ToolCall) -> Result<ToolOutcome, ExecError> {
        let ctx = &self.0;
        let p = ctx
            .workspace
            .join(call.input["path"].as_str().unwrap_or("x"));
        let marker = ctx.workspace.join(".marker");
        let mut m = std::fs::read_to_string(&marker).unwrap_or_default();
        m.push_str(&format!("{}\n", call.call_id));
        std::fs::write(&marker, m).unwrap();
        let text = match call.tool.as_str() {
            "write" => {
                std::fs::write(&p, call.input["text"].as_str().unwrap_or("")).map_err(|e| {
                    ExecError::Io {
                        tool: "write".into(),
                        source: e,
                    }
                })?;
                "ok".to_string()
            }
            _ => std::fs::read_to_string(&p).unwrap_or_else(|_| "missing".into()),
        };
        Ok(ToolOutcome {
            observation: Observation {
                text,
                is_error: false,
                native: None,
            },
            exit_code: Some(0),
            duration_ms: 1,
            touched: if call.tool == "write" {
                vec![PathBuf::from(call.input["path"].as_str().unwrap())]
            } else {
                vec![]
            },
        })
    }
}

fn rebuild(req: &RebuildRequest) -> Result<RebuiltSession, AdapterError> {
    {
        let observations = req.observation_map()?;
        let body = serde_json::to_vec(&*observations).unwrap();
        std::fs::create_dir_all(req.state_dir).unwrap();
        std::fs::write(req.artifact_path, &body).map_err(|e| AdapterError::Io {
            path: req.artifact_path.into(),
            source: e,
        })?;
        Ok(RebuiltSession {
            native_path: req.artifact_path.into(),
            artifact_path: req.artifact_path.into(),
            digest: pvisor::digest::blake3(&body),
            records: observations.len() as u64,
            session_id: "s1".into(),
            prefix: vec![],
        })
    }
}

/// The registry entry of the fake adapter (replay only).
pub const FAKE: AgentEntry = AgentEntry {
    name: "fake",
    pinned: "1.0.0",
    versions: &[VersionRange::exactly("1.0.0")],
    continue_versions: &[],
    install: pvisor::kit::registry::Install {
        package: pvisor::kit::registry::Package::Npm {
            package: "fake",
            bin: "fake",
        },
        helpers: &[],
        post_install: None,
    },
    versioning: pvisor::kit::registry::Versioning::Flag,
    command: "fake",
    capabilities: Capabilities {
        replay: true,
        continue_live: false,
        resume_live: false,
        boundary_prompt: false,
    },
    docs: "tests/support/fake.rs",
    make: || Box::new(Fake),
};

pub fn registry() -> Registry {
    Registry::new(vec![FAKE])
}

pub const TRAJ: &str = r#"{"calls":[{"id":"c1","tool":"write","input":{"path":"a.txt","text":"hi"},"result":"ok"},{"id":"c2","tool":"read","input":{"path":"a.txt"},"result":"hi"}]}
{"calls":[{"id":"c3","tool":"write","input":{"path":"b.txt","text":"two"},"result":"ok"}]}
{"calls":[{"id":"c4","tool":"read","input":{"path":"b.txt"},"result":"old"}]}
{"calls":[{"id":"c5","tool":"read","input":{"path":"zzz"}}]}
"#;

pub struct Env {
    pub _d: tempfile::TempDir,
    pub root: PathBuf,
}

impl Env {
    pub fn new(traj: &str) -> Env {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().to_path_buf();
        std::fs::create_dir_all(root.join("ws")).unwrap();
        std::fs::write(root.join("t.jsonl"), traj).unwrap();
        Env { _d: d, root }
    }
    pub fn fields(&self, after: u64) -> RequestFields {
        RequestFields {
            agent: Some("fake".into()),
            trajectory: Some(self.root.join("t.jsonl")),
            after_step: Some(after),
            workspace: Some(self.root.join("ws")),
            state_dir: Some(self.root.join("state")),
            output_dir: Some(self.root.join("out")),
            run_id: Some("r".into()),
            replay_only: Some(true),
            ..Default::default()
        }
    }
    pub fn run(&self, f: RequestFields) -> engine::Outcome {
        engine::run(
            Start::Fresh(Box::new(ReplayRequest::from_fields(f).unwrap())),
            &registry(),
        )
    }
    pub fn resume(&self, accept: bool) -> engine::Outcome {
        engine::run(
            Start::Resume {
                path: self.root.join("state/r"),
                boundary_user_prompt: None,
                accept_at_least_once: accept,
            },
            &registry(),
        )
    }
    pub fn marker(&self) -> String {
        std::fs::read_to_string(self.root.join("ws/.marker")).unwrap_or_default()
    }
    pub fn refold(&self) -> serde_json::Value {
        let (_, evs, _) = pvisor::journal::Journal::open_dir(&self.root.join("state/r")).unwrap();
        serde_json::to_value(pvisor::fold::derive(&pvisor::fold::fold(&evs).unwrap())).unwrap()
    }
}
