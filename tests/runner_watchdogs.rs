//! The runner's idle watchdog, with a fake agent process (a shell that prints one line to its
//! stdout file and then waits): it is stopped after the declared silence, the fact is
//! journaled with the watchdog's name, and the lines it wrote were read.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use journal_format::event::{AgentStatus, StopReason};
use journal_format::Event;
use pvisor::bridge::{BridgeConfig, BridgeStats, Upstream};
use pvisor::kit::{AdapterError, NoInserts, RequestRules};
use pvisor::protocol::Protocol;
use pvisor::runner::{
    run_continuation, AgentCommand, AgentVerdict, ContinuationAgent, ContinuationSpec,
    ContinuedSession, ExitInfo, StdinMode, Watchdogs,
};

struct Quiet {
    stdout: PathBuf,
    seen: Vec<String>,
}

impl ContinuationAgent for Quiet {
    fn protocol(&self) -> Protocol {
        Protocol::OpenaiChat
    }
    fn watchdogs(&self) -> Watchdogs {
        Watchdogs {
            step_budget: None,
            idle: Some(("quiet_idle".into(), Duration::from_secs(1))),
        }
    }
    fn request_rules(&self) -> Arc<dyn RequestRules> {
        Arc::new(NoInserts)
    }
    fn command(&mut self, _: &str, _: &str, _: Option<u64>) -> Result<AgentCommand, AdapterError> {
        Ok(AgentCommand {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "echo started; exec sleep 30".into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: std::env::temp_dir(),
            stdin: StdinMode::Null,
            stdout_file: Some(self.stdout.clone()),
            ..Default::default()
        })
    }
    fn observe_stdout(&mut self, line: &str) -> bool {
        self.seen.push(line.to_string());
        false
    }
    fn verdict(&self, exit: &ExitInfo, _: &BridgeStats, _: Option<u64>) -> AgentVerdict {
        AgentVerdict {
            status: AgentStatus::Failed,
            message: Some(format!("exit {:?} signal {:?}", exit.code, exit.signal)),
        }
    }
    fn finish(&mut self) -> Result<Option<ContinuedSession>, AdapterError> {
        Ok(None)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_agent_is_stopped_by_the_idle_watchdog() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Quiet {
        stdout: dir.path().join("stdout.jsonl"),
        seen: vec![],
    };
    let cfg = BridgeConfig {
        protocol: Protocol::OpenaiChat,
        rules: Arc::new(NoInserts),
        prefix: vec![],
        boundary_prompt: None,
        disable_thinking: false,
        max_steps: None,
        upstream: Upstream {
            base_url: "http://127.0.0.1:9".into(),
            protocol: Protocol::OpenaiChat,
            api_key: None,
            model: None,
            response_timeout: Duration::from_secs(5),
        },
        key: None,
        port: 0,
        resume: None,
        refused_blobs: None,
        hold_beyond_budget: false,
    };
    let mut events = vec![];
    let t0 = Instant::now();
    let out = run_continuation(&mut agent, &ContinuationSpec::new(None), cfg, |e| {
        events.push(e);
        Ok::<(), String>(())
    })
    .await
    .unwrap();
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(20),
        "stopped long before `sleep 30` ends: {took:?}"
    );
    assert_eq!(
        agent.seen,
        vec!["started".to_string()],
        "the stdout file was read"
    );
    assert_eq!(out.status, AgentStatus::Failed);
    let exited = events
        .iter()
        .find_map(|e| match e {
            Event::AgentExited(x) => Some(x.clone()),
            _ => None,
        })
        .expect("agent_exited is journaled");
    let by = exited.stopped_by.expect("the watchdog is named");
    assert_eq!(by.name, "quiet_idle");
    assert_eq!(by.reason, StopReason::Idle);
    assert_eq!(by.signal, "SIGTERM");
    assert_eq!(by.idle_seconds, Some(1));
    assert_eq!(exited.signal, Some(15), "SIGTERM ended it");
}
