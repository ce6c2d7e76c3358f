//! The continuation runner (shared by every agent): starts the bridge, starts the real agent
//! against it in its own process group with a timeout, hands every fact to the engine's
//! `on_event` callback **synchronously** (the bridge waits for it before it forwards a
//! request or releases an answer), and returns the outcome once the agent has exited and its
//! native session has been cleaned.
//!
//! Event order: `BridgeStarted`, `ContinuationStarted`, then per request
//! `BridgeRequestValidated` (and `ContinuationStep` per answered main request), and
//! `AgentExited` last.

use crate::bridge::{self, BridgeConfig, BridgeStats};
use crate::kit::AdapterError;
use crate::kit::RequestRules;
use crate::protocol::Protocol;
use journal_format::event::{AgentExited, AgentStatus, ContinuationStarted, StopReason, StoppedBy};
use journal_format::Event;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

/// How the agent's stdin is wired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StdinMode {
    /// `/dev/null`.
    #[default]
    Null,
    /// A pipe kept open (the agent waits for input on it) and closed once the agent reported
    /// its final result on stdout (or when it exits).
    OpenUntilResult,
}

/// The exact process to start.
#[derive(Debug, Clone, Default)]
pub struct AgentCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The complete environment (nothing is inherited). May hold the bridge key: never
    /// journaled.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub stdin: StdinMode,
    /// Host/time snapshots of the native session the adapter set to the live values before
    /// this start (journaled with `continuation_started`).
    pub neutralized: Vec<journal_format::event::Neutralized>,
    /// When set, the agent's stdout goes to this file (which the runner tails) instead of a
    /// pipe: for agents that block-buffer a piped stdout and would report nothing until they
    /// exit.
    pub stdout_file: Option<PathBuf>,
}

/// Watchdogs the runner keeps over one agent (declared by its adapter).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Watchdogs {
    /// Interrupt the agent (SIGINT to its process group) when it asks for a model reply
    /// beyond the live step budget, instead of answering it with an error: for agents that
    /// record such an error in their session or retry it. The bridge holds the request
    /// unanswered; the name is the key of the watchdog's entry in the result's metadata.
    pub step_budget: Option<String>,
    /// Stop the agent (SIGTERM, then SIGKILL) when it has written nothing to stdout or
    /// stderr and made no model request for this long: `(name, limit)`.
    pub idle: Option<(String, Duration)>,
}
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
}

/// The agent's status as its adapter reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentVerdict {
    pub status: AgentStatus,
    pub message: Option<String>,
}

/// The cleaned native session after the continuation (`continued` artifact).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ContinuedSession {
    pub session_id: String,
    /// The agent's own file (cleaned in place).
    pub native_path: PathBuf,
    /// The artifact copy.
    pub artifact_path: PathBuf,
    /// `blake3:<hex>` of the cleaned file.
    pub digest: String,
    pub records: u64,
    /// Transport records removed from the appended part (by type).
    pub removed: Vec<String>,
}

/// Where the receipt of a cleaned continued session is kept: beside its artifact.
pub fn receipt_path(artifact: &Path) -> PathBuf {
    let mut name = artifact.file_name().unwrap_or_default().to_os_string();
    name.push(".receipt.json");
    artifact.with_file_name(name)
}

/// Write the receipt of `c` durably before `agent_exited` is journaled: a run interrupted
/// after that event records the continued session from it, without cleaning the agent's
/// session a second time (a cleaning is not repeatable for every agent: Codex and OpenCode
/// look for a nonce of the process that started the agent).
fn write_receipt(c: &ContinuedSession) -> Result<(), AdapterError> {
    let path = receipt_path(&c.artifact_path);
    let tmp = path.with_extension("json.tmp");
    let io = |source| AdapterError::Io {
        path: path.clone(),
        source,
    };
    let bytes = serde_json::to_vec_pretty(c).expect("a receipt serializes");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(&bytes).map_err(io)?;
        f.sync_all().map_err(io)?;
    }
    std::fs::rename(&tmp, &path).map_err(io)
}

/// The receipt of the continued session at `artifact`, when it is there and the artifact
/// still has the digest it names.
pub fn read_receipt(artifact: &Path) -> Option<ContinuedSession> {
    let c: ContinuedSession =
        serde_json::from_slice(&std::fs::read(receipt_path(artifact)).ok()?).ok()?;
    let bytes = std::fs::read(&c.artifact_path).ok()?;
    (c.artifact_path == artifact && crate::digest::blake3(&bytes) == c.digest).then_some(c)
}

/// What an agent adapter provides to the runner.
pub trait ContinuationAgent: Send {
    /// The protocol the agent speaks to the bridge.
    fn protocol(&self) -> Protocol;
    /// The runner's watchdogs for this agent (default: none; the bridge answers a request
    /// beyond the budget with an error the agent does not retry).
    fn watchdogs(&self) -> Watchdogs {
        Watchdogs::default()
    }
    /// Exactly what this agent's resume inserts into its requests, and how they compare.
    fn request_rules(&self) -> Arc<dyn RequestRules>;
    /// The command resuming the rebuilt session against the bridge with `budget` live steps.
    fn command(
        &mut self,
        bridge_url: &str,
        bridge_key: &str,
        budget: Option<u64>,
    ) -> Result<AgentCommand, AdapterError>;
    /// One stdout line; returns true once the agent reported its final result.
    fn observe_stdout(&mut self, line: &str) -> bool;
    /// The agent's status from what it reported, its exit and the bridge's counters.
    fn verdict(&self, exit: &ExitInfo, bridge: &BridgeStats, budget: Option<u64>) -> AgentVerdict;
    /// After exit: clean the native session of transport items, check it is the same
    /// session with its prefix unchanged, write the `continued` artifact.
    fn finish(&mut self) -> Result<Option<ContinuedSession>, AdapterError>;
    /// Before a resumed attempt (after a crash): read the agent's own session, remove the
    /// transport records earlier attempts left, and find its complete live turns and an
    /// interrupted last turn. With `write`, the session is rewritten cleaned and cut after
    /// the last complete turn (so the agent resumes there); without, nothing is changed.
    fn resume(&mut self, _write: bool) -> Result<ResumeInfo, AdapterError> {
        Err(AdapterError::Unsupported(
            "this agent's continuation cannot be resumed after a crash".into(),
        ))
    }
}

/// What a resumed attempt finds in the agent's session (see [`ContinuationAgent::resume`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResumeInfo {
    /// The live turns after the rebuilt prefix, up to the last complete one, as canonical
    /// messages in the agent's protocol (the bridge's longer prefix is rebuilt prefix + this).
    pub live: Vec<serde_json::Value>,
    /// Complete live model turns (each one's tool calls all have results).
    pub complete_turns: u64,
    /// The interrupted turn after them, if any: its tool calls `(call_id, tool, input)`
    /// (empty when it held only text, e.g. a final answer the run could not record).
    pub interrupted: Option<Vec<(String, String, serde_json::Value)>>,
}

impl<T: ContinuationAgent + ?Sized> ContinuationAgent for Box<T> {
    fn protocol(&self) -> Protocol {
        (**self).protocol()
    }
    fn watchdogs(&self) -> Watchdogs {
        (**self).watchdogs()
    }
    fn request_rules(&self) -> Arc<dyn RequestRules> {
        (**self).request_rules()
    }
    fn command(
        &mut self,
        bridge_url: &str,
        bridge_key: &str,
        budget: Option<u64>,
    ) -> Result<AgentCommand, AdapterError> {
        (**self).command(bridge_url, bridge_key, budget)
    }
    fn observe_stdout(&mut self, line: &str) -> bool {
        (**self).observe_stdout(line)
    }
    fn verdict(&self, exit: &ExitInfo, bridge: &BridgeStats, budget: Option<u64>) -> AgentVerdict {
        (**self).verdict(exit, bridge, budget)
    }
    fn finish(&mut self) -> Result<Option<ContinuedSession>, AdapterError> {
        (**self).finish()
    }
    fn resume(&mut self, write: bool) -> Result<ResumeInfo, AdapterError> {
        (**self).resume(write)
    }
}

/// Run parameters.
#[derive(Debug, Clone)]
pub struct ContinuationSpec {
    /// Live steps (`max_steps − prefix model turns`); `None` = unbounded.
    pub budget: Option<u64>,
    /// Wall-clock limit for the agent process.
    pub timeout: Duration,
    /// 1 for the first start, 2+ when resumed after a crash.
    pub attempt: u64,
    /// A later attempt that starts the agent again from the rebuilt session (an agent that
    /// cannot resume its own session), journaled as `continuation_started.from_boundary`.
    pub from_boundary: bool,
    /// The probed agent version, for the journal.
    pub agent_version: Option<String>,
    /// When set, the agent's stdout/stderr are written there (`agent-stdout.log`,
    /// `agent-stderr.log`).
    pub log_dir: Option<PathBuf>,
    /// Once the bridge refused a request (it is latched: every later request fails too), the
    /// agent gets this long to report the error and exit before its process group is
    /// terminated (agents retry some 4xx, e.g. Claude retries 401 ten times with backoff).
    pub failure_grace: Duration,
    /// The run's list of running process groups (`supervisor::groups`): the agent's group
    /// is listed while it runs.
    pub groups: Option<PathBuf>,
}

impl ContinuationSpec {
    /// Defaults: no budget, 1 h timeout, attempt 1, 5 s failure grace.
    pub fn new(budget: Option<u64>) -> ContinuationSpec {
        ContinuationSpec {
            budget,
            timeout: Duration::from_secs(3600),
            attempt: 1,
            from_boundary: false,
            agent_version: None,
            log_dir: None,
            failure_grace: Duration::from_secs(5),
            groups: None,
        }
    }
}

/// The result of a continuation.
#[derive(Debug, Clone)]
pub struct ContinuationOutcome {
    pub status: AgentStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub message: Option<String>,
    /// Live steps answered through the bridge.
    pub steps: u64,
    pub bridge: BridgeStats,
    pub continued: Option<ContinuedSession>,
}

const TAIL_BYTES: usize = 64 * 1024;

/// How long an agent interrupted by the step-budget watchdog has to exit before SIGKILL.
const INTERRUPT_GRACE: Duration = Duration::from_secs(10);

fn push_tail(tail: &mut VecDeque<u8>, bytes: &[u8]) {
    tail.extend(bytes);
    while tail.len() > TAIL_BYTES {
        tail.pop_front();
    }
}

fn kill_group(pid: Option<u32>, sig: i32) {
    if let Some(pid) = pid {
        // SAFETY: kill(2) with a negative pid signals the process group we created.
        unsafe {
            libc::kill(-(pid as i32), sig);
        }
    }
}

/// The agent's process: exactly `cmd`'s program, arguments, environment and directory, in
/// its own process group, killed with pvisor.
fn agent_process(
    cmd: &AgentCommand,
    groups: Option<&Path>,
) -> Result<tokio::process::Command, AdapterError> {
    let mut command = tokio::process::Command::new(&cmd.program);
    match &cmd.stdout_file {
        Some(f) => {
            let file = std::fs::File::create(f).map_err(|source| AdapterError::Io {
                path: f.clone(),
                source,
            })?;
            command.stdout(Stdio::from(file));
        }
        None => {
            command.stdout(Stdio::piped());
        }
    }
    command
        .args(&cmd.args)
        .current_dir(&cmd.cwd)
        .env_clear()
        .envs(cmd.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(match cmd.stdin {
            StdinMode::Null => Stdio::null(),
            StdinMode::OpenUntilResult => Stdio::piped(),
        })
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // If pvisor dies (crash, SIGKILL) the agent must not live on against a dead bridge and
    // keep appending to its session while a resumed run reads it.
    crate::supervisor::groups::die_with_parent(command.as_std_mut(), groups);
    Ok(command)
}

/// The complete lines appended to a tailed stdout file since the last call.
struct Tail {
    file: Option<std::fs::File>,
    pending: Vec<u8>,
}

impl Tail {
    fn open(path: Option<&PathBuf>) -> Tail {
        Tail {
            file: path.and_then(|p| std::fs::File::open(p).ok()),
            pending: Vec::new(),
        }
    }
    /// New complete lines; with `last`, the unterminated rest too.
    fn lines(&mut self, last: bool) -> Vec<String> {
        use std::io::Read;
        let Some(f) = self.file.as_mut() else {
            return Vec::new();
        };
        let mut buf = [0u8; 65536];
        while let Ok(k) = f.read(&mut buf) {
            if k == 0 {
                break;
            }
            self.pending.extend_from_slice(&buf[..k]);
        }
        let mut out = Vec::new();
        while let Some(i) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=i).collect();
            out.push(String::from_utf8_lossy(&line[..line.len() - 1]).into_owned());
        }
        if last && !self.pending.is_empty() {
            out.push(String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned());
        }
        out
    }
}

/// The agent's stdout and stderr logs, when the spec asks for them.
fn open_logs(spec: &ContinuationSpec) -> (Option<std::fs::File>, Option<std::fs::File>) {
    let out_log = spec.log_dir.as_ref().and_then(|d| {
        std::fs::create_dir_all(d).ok()?;
        std::fs::File::create(d.join("agent-stdout.log")).ok()
    });
    let err_log = spec
        .log_dir
        .as_ref()
        .and_then(|d| std::fs::File::create(d.join("agent-stderr.log")).ok());
    (out_log, err_log)
}

/// The agent's own verdict, overridden by what the runner and the bridge know: a timeout, the
/// live step budget used up, a refused continuation.
fn overriding_verdict(
    mut verdict: AgentVerdict,
    timed_out: bool,
    stopped_by: Option<&StoppedBy>,
    stats: &BridgeStats,
    spec: &ContinuationSpec,
) -> AgentVerdict {
    if let Some(w) = stopped_by {
        verdict = match w.reason {
            StopReason::StepBudget => AgentVerdict {
                status: AgentStatus::MaxSteps,
                message: Some(format!(
                    "live step budget of {} used; the agent was interrupted ({}) when it asked for another model reply",
                    w.steps, w.signal
                )),
            },
            StopReason::Idle => AgentVerdict {
                status: AgentStatus::Failed,
                message: Some(format!(
                    "the agent wrote nothing and made no model request for {} s; it was stopped",
                    w.idle_seconds.unwrap_or(0)
                )),
            },
        };
    } else if timed_out {
        verdict = AgentVerdict {
            status: AgentStatus::Failed,
            message: Some(format!(
                "the agent did not finish within {} s",
                spec.timeout.as_secs()
            )),
        };
    } else if stats.budget_refused && spec.budget == Some(stats.steps) {
        // The bridge refused the request beyond the budget (agents without a turn limit of
        // their own, e.g. Codex): the budget stopped the agent.
        verdict = AgentVerdict {
            status: AgentStatus::MaxSteps,
            message: Some(format!(
                "live step budget of {} used; the bridge refused the next model request",
                stats.steps
            )),
        };
    } else if let Some(f) = &stats.failure {
        verdict = AgentVerdict {
            status: AgentStatus::Failed,
            message: Some(format!("bridge refused the continuation: {f}")),
        };
    }
    verdict
}

/// The last 2000 characters of the agent's stderr, trimmed; `None` when it is empty.
fn stderr_message(err_tail: &VecDeque<u8>) -> Option<String> {
    let tail = String::from_utf8_lossy(&err_tail.iter().copied().collect::<Vec<_>>())
        .trim()
        .to_string();
    if tail.is_empty() {
        return None;
    }
    Some(
        tail.chars()
            .rev()
            .take(2000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect(),
    )
}

/// Run one continuation. `bridge_cfg` supplies the prefix, boundary prompt, thinking switch
/// and upstream; the runner sets the agent's protocol, transport rule and the budget.
/// `on_event` is called synchronously for every fact, in order; an `Err` stops the agent and
/// fails the continuation (nothing is forwarded without its fact being recorded).
pub async fn run_continuation<A, E, F>(
    agent: &mut A,
    spec: &ContinuationSpec,
    mut bridge_cfg: BridgeConfig,
    mut on_event: F,
) -> Result<ContinuationOutcome, AdapterError>
where
    A: ContinuationAgent,
    E: std::fmt::Display,
    F: FnMut(Event) -> Result<(), E>,
{
    if spec.budget == Some(0) {
        return Err(AdapterError::Continuation(
            "the live step budget is 0: a continuation needs at least one step".into(),
        ));
    }
    let journal =
        |r: Result<(), E>| r.map_err(|e| AdapterError::Continuation(format!("journal: {e}")));
    bridge_cfg.protocol = agent.protocol();
    bridge_cfg.rules = agent.request_rules();
    bridge_cfg.max_steps = spec.budget;
    let watchdogs = agent.watchdogs();
    bridge_cfg.hold_beyond_budget = watchdogs.step_budget.is_some();
    let (bridge, mut notices) = bridge::start(bridge_cfg)
        .await
        .map_err(|e| AdapterError::Continuation(e.to_string()))?;
    journal(on_event(Event::BridgeStarted(bridge.started_event())))?;

    let cmd = agent.command(&bridge.base_url(), bridge.key(), spec.budget)?;
    let mut argv = vec![cmd.program.to_string_lossy().into_owned()];
    argv.extend(cmd.args.iter().cloned());
    journal(on_event(Event::ContinuationStarted(ContinuationStarted {
        command: argv,
        agent_version: spec.agent_version.clone(),
        budget: spec.budget,
        attempt: spec.attempt.max(1),
        neutralized: cmd.neutralized.clone(),
        from_boundary: spec.from_boundary,
    })))?;

    let mut command = agent_process(&cmd, spec.groups.as_deref())?;
    let mut child = command.spawn().map_err(|e| {
        AdapterError::Continuation(format!("cannot start {}: {e}", cmd.program.display()))
    })?;
    let pid = child.id();
    if let Some(p) = pid {
        bridge.set_agent_process_group(p); // process_group(0): its pgid is its pid
        if let Some(d) = &spec.groups {
            crate::supervisor::groups::register(d, p);
        }
    }
    let mut stdin = child.stdin.take();
    let piped = child.stdout.take();
    let mut stdout_open = piped.is_some();
    let mut stdout = piped.map(|p| BufReader::new(p).lines());
    let mut tail = Tail::open(cmd.stdout_file.as_ref());
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut last_activity = tokio::time::Instant::now();
    let idle_limit = watchdogs.idle.as_ref().map(|(_, d)| *d);
    let mut stopped_by: Option<StoppedBy> = None;
    let mut interrupted_at: Option<tokio::time::Instant> = None;
    let mut stderr = child.stderr.take().expect("piped stderr");
    let (mut out_log, mut err_log) = open_logs(spec);
    let mut err_tail: VecDeque<u8> = VecDeque::new();

    let deadline = tokio::time::Instant::now() + spec.timeout;
    let mut exit: Option<std::process::ExitStatus> = None;
    let mut timed_out = false;
    let mut refused_at: Option<tokio::time::Instant> = None;
    let mut stopped_after_refusal = false;
    let mut journal_error: Option<AdapterError> = None;
    let mut stderr_open = true;
    let mut errbuf = vec![0u8; 8192];
    while exit.is_none() || stdout_open || stderr_open {
        tokio::select! {
            Some(n) = notices.recv() => {
                last_activity = tokio::time::Instant::now();
                let beyond_budget = matches!(&n.event, Event::BridgeRequestValidated(v) if v.budget_exhausted);
                // A refused model request latches the bridge: the agent gets a grace to exit.
                // (A keyless request is a side request the bridge answered: not a refusal;
                // the budget's end is not one either.)
                if matches!(&n.event, Event::BridgeRequestValidated(v) if !v.ok && !v.side && !v.budget_exhausted) && refused_at.is_none() {
                    refused_at = Some(tokio::time::Instant::now() + spec.failure_grace);
                }
                if beyond_budget && stopped_by.is_none() {
                    if let Some(name) = &watchdogs.step_budget {
                        stopped_by = Some(StoppedBy {
                            name: name.clone(),
                            reason: StopReason::StepBudget,
                            signal: "SIGINT".into(),
                            steps: bridge.stats().steps,
                            budget: spec.budget,
                            idle_seconds: None,
                        });
                        kill_group(pid, libc::SIGINT);
                        interrupted_at = Some(tokio::time::Instant::now() + INTERRUPT_GRACE);
                    }
                }
                match on_event(n.event.clone()) {
                    Ok(()) => n.ack(true),
                    Err(e) => {
                        n.ack(false);
                        if journal_error.is_none() {
                            journal_error = Some(AdapterError::Continuation(format!("journal: {e}")));
                            kill_group(pid, libc::SIGKILL);
                        }
                    }
                }
            }
            line = async { stdout.as_mut().expect("piped").next_line().await }, if stdout_open => match line {
                Ok(Some(l)) => {
                    last_activity = tokio::time::Instant::now();
                    if let Some(f) = out_log.as_mut() {
                        use std::io::Write;
                        let _ = writeln!(f, "{l}");
                    }
                    if agent.observe_stdout(&l) {
                        stdin.take();
                    }
                }
                _ => stdout_open = false,
            },
            _ = tick.tick(), if cmd.stdout_file.is_some() && exit.is_none() => {
                for l in tail.lines(false) {
                    last_activity = tokio::time::Instant::now();
                    if let Some(f) = out_log.as_mut() {
                        use std::io::Write;
                        let _ = writeln!(f, "{l}");
                    }
                    if agent.observe_stdout(&l) {
                        stdin.take();
                    }
                }
            }
            _ = tokio::time::sleep_until(last_activity + idle_limit.unwrap_or(Duration::ZERO)), if idle_limit.is_some() && stopped_by.is_none() && exit.is_none() => {
                let (name, limit) = watchdogs.idle.clone().expect("idle watchdog");
                stopped_by = Some(StoppedBy {
                    name,
                    reason: StopReason::Idle,
                    signal: "SIGTERM".into(),
                    steps: bridge.stats().steps,
                    budget: spec.budget,
                    idle_seconds: Some(limit.as_secs()),
                });
                kill_group(pid, libc::SIGTERM);
                interrupted_at = Some(tokio::time::Instant::now() + Duration::from_secs(2));
            }
            _ = tokio::time::sleep_until(interrupted_at.unwrap_or(deadline)), if interrupted_at.is_some() && exit.is_none() => {
                interrupted_at = None;
                kill_group(pid, libc::SIGKILL);
            }
            r = stderr.read(&mut errbuf), if stderr_open => match r {
                Ok(0) | Err(_) => stderr_open = false,
                Ok(k) => {
                    last_activity = tokio::time::Instant::now();
                    push_tail(&mut err_tail, &errbuf[..k]);
                    if let Some(f) = err_log.as_mut() {
                        use std::io::Write;
                        let _ = f.write_all(&errbuf[..k]);
                    }
                }
            },
            st = child.wait(), if exit.is_none() => {
                exit = Some(st.map_err(|e| AdapterError::Continuation(format!("wait for the agent: {e}")))?);
                stdin.take();
                // Leftover children (background shells) go with the group.
                kill_group(pid, libc::SIGKILL);
                if let (Some(d), Some(p)) = (&spec.groups, pid) {
                    crate::supervisor::groups::unregister(d, p);
                }
            }
            _ = tokio::time::sleep_until(refused_at.unwrap_or(deadline)), if refused_at.is_some() && !stopped_after_refusal && exit.is_none() => {
                stopped_after_refusal = true;
                kill_group(pid, libc::SIGTERM);
                tokio::time::sleep(Duration::from_secs(2)).await;
                kill_group(pid, libc::SIGKILL);
            }
            _ = tokio::time::sleep_until(deadline), if !timed_out && exit.is_none() => {
                timed_out = true;
                kill_group(pid, libc::SIGTERM);
                tokio::time::sleep(Duration::from_secs(2)).await;
                kill_group(pid, libc::SIGKILL);
            }
        }
    }
    // What the agent wrote to its stdout file after the last tick.
    for l in tail.lines(true) {
        if let Some(f) = out_log.as_mut() {
            use std::io::Write;
            let _ = writeln!(f, "{l}");
        }
        agent.observe_stdout(&l);
    }
    // Facts still queued (a request cut short by the exit).
    while let Ok(n) = notices.try_recv() {
        let ok = on_event(n.event.clone()).is_ok();
        n.ack(ok);
    }
    let stats = bridge.stats();
    bridge.shutdown().await;
    if let Some(e) = journal_error {
        return Err(e);
    }

    let status = exit.expect("loop ends after exit");
    use std::os::unix::process::ExitStatusExt;
    let info = ExitInfo {
        code: status.code(),
        signal: status.signal(),
        timed_out,
    };
    let mut verdict = overriding_verdict(
        agent.verdict(&info, &stats, spec.budget),
        timed_out,
        stopped_by.as_ref(),
        &stats,
        spec,
    );
    let continued = match agent.finish().and_then(|c| {
        if let Some(c) = &c {
            write_receipt(c)?;
        }
        Ok(c)
    }) {
        Ok(c) => c,
        Err(e) => {
            if verdict.status != AgentStatus::Failed {
                verdict = AgentVerdict {
                    status: AgentStatus::Failed,
                    message: Some(e.to_string()),
                };
            }
            None
        }
    };
    if verdict.status == AgentStatus::Failed && verdict.message.is_none() {
        verdict.message = stderr_message(&err_tail);
    }
    journal(on_event(Event::AgentExited(AgentExited {
        status: verdict.status,
        code: info.code.map(i64::from),
        signal: info.signal.map(i64::from),
        message: verdict.message.clone(),
        stopped_by,
    })))?;
    Ok(ContinuationOutcome {
        status: verdict.status,
        exit_code: info.code,
        signal: info.signal,
        message: verdict.message,
        steps: stats.steps,
        bridge: stats,
        continued,
    })
}
