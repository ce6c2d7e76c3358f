//! The engine: one loop — fold the journal → decide the next step → perform it → append its
//! event — for fresh runs and `--resume-journal` alike.

pub mod checkpoints;
pub mod continue_step;
pub mod decide;
pub mod failure;
pub mod outputs;
pub mod perform;
pub mod preflight;
pub mod progress;
pub mod recorder;

use std::path::PathBuf;

use journal_format::event::*;
use journal_format::Event;

pub use decide::{decide, Step};
pub use failure::RunError;
use recorder::Recorder;

use crate::fold::{self, result, ReplayResult};
use crate::journal::{resolve_path, BlobStore, Journal};
use crate::kit::{Adapter, AgentEntry, Plan, Registry};
use crate::request::ReplayRequest;

/// How a run starts.
pub enum Start {
    Fresh(Box<ReplayRequest>),
    /// Continue an interrupted run. The boundary prompt, if the run has one and it is not
    /// injected yet, must be given again (it is never stored).
    Resume {
        path: PathBuf,
        boundary_user_prompt: Option<String>,
        accept_at_least_once: bool,
    },
}

pub struct Outcome {
    pub result: ReplayResult,
    pub exit_code: i32,
    /// A one-line hint for the failure, if any.
    pub hint: Option<String>,
}

fn early(e: &RunError, req: Option<&ReplayRequest>) -> Outcome {
    let r = result::early_failure(
        e.category(),
        &e.to_string(),
        req.map(|r| r.run_id.clone()),
        req.map(|r| r.state_dir.display().to_string()),
        req.map(|r| r.output_dir.display().to_string()),
    );
    Outcome {
        exit_code: e.exit_code(),
        hint: Some(e.hint()),
        result: r,
    }
}

/// Run to the end (or the first failure) and materialize the outputs, with the adapters of
/// `registry` (the CLI passes every supported agent; tests pass fakes).
pub fn run(start: Start, registry: &Registry) -> Outcome {
    // A fresh run's inputs are checked before its directories exist: a run refused here
    // leaves nothing behind.
    let mut checked = None;
    if let Start::Fresh(req) = &start {
        let agent = match registry.get(&req.agent) {
            Ok(a) => a,
            Err(e) => return early(&RunError::UnsupportedAgent(e.to_string()), None),
        };
        match preflight::check(req, &fold::ReplayState::default(), agent) {
            Ok(p) => checked = Some(p),
            Err(e) => return early(&e, None),
        }
    }
    let (req, journal, events) = match open(start) {
        Ok(x) => x,
        Err(f) => {
            let (e, req) = *f;
            return early(&e, req.as_ref());
        }
    };
    // `--isolate`: everything from here on runs in the run's private mount namespace.
    if req.isolate {
        let seed = req.workspace_seed.as_deref().unwrap_or(&req.workspace);
        let agents = crate::install::agents_root();
        let exe = std::env::current_exe().unwrap_or_default();
        let mut keep = vec![
            req.state_dir.as_path(),
            req.output_dir.as_path(),
            req.trajectory.as_path(),
            agents.as_path(),
            exe.as_path(),
        ];
        keep.extend(req.agent_entrypoint.as_deref());
        keep.extend(req.model.script.as_deref());
        if let Err(e) = crate::workspace::isolate::enter(
            &req.workspace,
            seed,
            &req.state_dir,
            &keep,
            req.isolate_network,
        ) {
            return early(&RunError::Workspace(e.to_string()), Some(&req));
        }
    }
    let state = match fold::fold(&events) {
        Ok(s) => s,
        Err(e) => {
            return early(
                &RunError::JournalOrder(format!("journal {}: {e}", journal.path().display())),
                Some(&req),
            )
        }
    };
    let agent = match registry.get(&req.agent) {
        Ok(a) => *a,
        Err(e) => {
            // (a resumed run's journal names an agent this build lacks) journal the failure
            // so the run's directory says why
            let mut rec = Recorder::new(journal, state, BlobStore::new(&req.state_dir));
            let err = RunError::UnsupportedAgent(e.to_string());
            if rec.state.phase == fold::Phase::Empty {
                let _ = rec.record(perform::request_event(&req, None));
            }
            return finish_failed(&mut rec, None, &req, err);
        }
    };
    let adapter = (agent.make)();
    // Options the run will need are checked before anything is journaled or run.
    let probe = match checked {
        Some(p) => p,
        None => match preflight::check(&req, &state, &agent) {
            Ok(p) => p,
            Err(e) => return early(&e, Some(&req)),
        },
    };
    let mut rec = Recorder::new(journal, state, BlobStore::new(&req.state_dir));
    // Processes an earlier attempt of this run left (the rest of a group whose leader died
    // with it, a command the agent detached) end before anything runs again. A journal with
    // no run request had no attempt that started anything: no scan of every process.
    let ended = if rec.state.phase == fold::Phase::Empty {
        vec![]
    } else {
        crate::supervisor::groups::end_left_over(&crate::supervisor::groups::dir_of(&req.state_dir))
    };
    if !ended.is_empty() {
        eprintln!(
            "[pvisor] ended {} process group(s) or process(es) an earlier attempt of this run left running: {ended:?}",
            ended.len()
        );
    }
    // A journal holding no run request yet (new, or recovered from a creation that was
    // interrupted inside its header) starts the run afresh: nothing to resume.
    if rec.state.phase != fold::Phase::Empty && !rec.state.phase.is_terminal() {
        // Blob files whose content the journal carries are written again where an
        // operating-system crash lost the unsynced copy, before anything reads them.
        if let Err(e) = recorder::restore_held_blobs(&events, &rec.blobs) {
            return early(&e, Some(&req));
        }
        drop(events);
        // Nothing is re-executed on a workspace that no longer holds what the completed
        // batches left: refused (not journaled, so the run stays resumable once restored).
        if let Err(paths) = perform::check_workspace(&rec.state, &rec.blobs, &req.workspace) {
            let e = RunError::Workspace(format!(
                "the workspace {} differs from what the journal says the completed batches left ({} path(s)): {}",
                req.workspace.display(),
                paths.len(),
                paths.join("; ")
            ));
            return early(&e, Some(&req));
        }
        let from = rec.state.last_seq;
        if let Err(e) = rec.record(Event::Resumed(Resumed {
            from_seq: from,
            pvisor_version: env!("CARGO_PKG_VERSION").into(),
        })) {
            return finish_failed(&mut rec, Some(adapter.as_ref()), &req, e);
        }
    }
    let done = drive(&mut rec, adapter.as_ref(), &agent, &req, probe);
    progress::finish();
    match done {
        Ok(()) => conclude(&mut rec, Some(adapter.as_ref()), &req, None),
        Err(e) => finish_failed(&mut rec, Some(adapter.as_ref()), &req, e),
    }
}

/// An opened run: its request, journal and events.
type Opened = (ReplayRequest, Journal, Vec<crate::journal::StoredEvent>);
/// Why a run could not be opened, with its request when known.
type OpenFailure = Box<(RunError, Option<ReplayRequest>)>;

fn open(start: Start) -> Result<Opened, OpenFailure> {
    match start {
        Start::Fresh(req) => {
            for d in [&req.state_dir, &req.output_dir] {
                std::fs::create_dir_all(d).map_err(|e| {
                    Box::new((
                        RunError::Configuration(format!("cannot create {}: {e}", d.display())),
                        Some((*req).clone()),
                    ))
                })?;
            }
            let (j, events, _) = Journal::open_dir(&req.state_dir)
                .map_err(|e| Box::new((RunError::from(e), Some((*req).clone()))))?;
            if events
                .iter()
                .any(|e| matches!(e.event, Event::RunRequested(_)))
            {
                return Err(Box::new((
                    RunError::Configuration(format!(
                        "run id `{}` already has a journal in {}",
                        req.run_id,
                        req.state_dir.display()
                    )),
                    Some(*req),
                )));
            }
            Ok((*req, j, events))
        }
        Start::Resume {
            path,
            boundary_user_prompt,
            accept_at_least_once,
        } => {
            let file = resolve_path(&path)
                .map_err(|e| Box::new((RunError::Configuration(e.to_string()), None)))?;
            let dir = file.parent().map(PathBuf::from).unwrap_or_default();
            let (j, events, _) =
                Journal::open_dir(&dir).map_err(|e| Box::new((RunError::from(e), None)))?;
            // Intact records in an order the phase machine refuses: said before anything else.
            if let Err(e) = fold::fold(&events) {
                return Err(Box::new((
                    RunError::JournalOrder(format!("journal {}: {e}", j.path().display())),
                    None,
                )));
            }
            let requested = events.iter().find_map(|e| match &e.event {
                Event::RunRequested(r) => Some(r.clone()),
                _ => None,
            });
            let Some(r) = requested else {
                return Err(Box::new((
                    RunError::Configuration(format!(
                        "{} holds no run request: nothing to resume (a run whose start was interrupted before its request was durable: run the original command again, with the same --run-id)",
                        file.display()
                    )),
                    None,
                )));
            };
            let mut req = ReplayRequest::from_canonical(&r.request_json, boundary_user_prompt)
                .map_err(|e| Box::new((RunError::Configuration(e.message), None)))?;
            req.accept_at_least_once |= accept_at_least_once;
            Ok((req, j, events))
        }
    }
}

fn load_plan(rec: &Recorder, adapter: &dyn Adapter, req: &ReplayRequest) -> Result<Plan, RunError> {
    let (plan, sha) = perform::parse_source(adapter, req)?;
    if let Some(p) = &rec.state.parsed {
        if p.source_sha256 != sha {
            return Err(crate::error::TrajectoryError::new(&req.trajectory, 0, "file", format!("the trajectory changed since this run parsed it ({} then, {sha} now); a resumed run must replay the same source", p.source_sha256)).into());
        }
    }
    Ok(plan)
}

fn drive(
    rec: &mut Recorder,
    adapter: &dyn Adapter,
    agent: &AgentEntry,
    req: &ReplayRequest,
    probe: Option<continue_step::AgentProbe>,
) -> Result<(), RunError> {
    let mut plan: Option<Plan> = None;
    let mut rebuilt: Option<crate::kit::RebuiltSession> = None;
    let mut tools: Option<Box<dyn crate::kit::ToolRunner>> = None;
    let mut batch_ready: Option<u64> = None;
    let mut checkpoints = checkpoints::Checkpoints::new(req, rec);
    loop {
        let step = decide(&rec.state);
        if matches!(step, Step::Done) {
            return Ok(());
        }
        if plan.is_none() && !matches!(step, Step::Request | Step::Parse | Step::Finish) {
            plan = Some(load_plan(rec, adapter, req)?);
        }
        match step {
            Step::Request => {
                rec.record(perform::request_event(req, None))?;
            }
            Step::Parse => plan = Some(perform::parse(rec, adapter, req)?),
            Step::ListBatches(first) => {
                perform::list_batches(rec, adapter, plan.as_ref().unwrap(), first)?
            }
            Step::Validate => perform::validate(rec, adapter, agent, req, plan.as_ref().unwrap())?,
            Step::Prepare => {
                let p = plan.as_ref().unwrap();
                let obs = crate::kit::Observations::Originals;
                perform::write_session(rec, adapter, req, p, obs, SessionRole::Prepared)?;
            }
            Step::StartBatch(k) => {
                let n = plan
                    .as_ref()
                    .unwrap()
                    .batches
                    .shape(k as usize - 1)
                    .map_or(0, |s| s.calls) as u64;
                rec.record_deferred(Event::BatchStarted(BatchStarted { batch: k, calls: n }))?;
            }
            Step::ResolveInDoubt(k, i) => {
                let c = rec.state.calls[&(k, i)].clone();
                let decision = if c.class == crate::kit::ToolClass::ReadOnly {
                    InDoubtDecision::RerunReadOnly
                } else if checkpoints.restore(rec, k, i)? {
                    InDoubtDecision::RerunRestored
                } else if req.accept_at_least_once {
                    InDoubtDecision::RerunAccepted
                } else {
                    InDoubtDecision::Stopped
                };
                let already_stopped =
                    c.in_doubt_decisions.last() == Some(&InDoubtDecision::Stopped);
                if !(decision == InDoubtDecision::Stopped && already_stopped) {
                    rec.record(Event::InDoubtResolved(InDoubtResolved {
                        batch: k,
                        call: i,
                        call_id: c.call_id.clone(),
                        tool: c.tool.clone(),
                        decision,
                    }))?;
                }
                if decision == InDoubtDecision::Stopped {
                    return Err(RunError::AmbiguousExecution(
                        rec.state.blocked.clone().unwrap_or_default(),
                    ));
                }
            }
            Step::RunCall(k, i) => {
                let p = plan.as_ref().unwrap();
                if tools.is_none() {
                    let completed = perform::completed_calls(rec, p)?;
                    tools =
                        Some(adapter.tool_runner(p, &perform::exec_context(req), &completed)?);
                }
                let runner = tools.as_mut().expect("created above");
                let batch = p.batches.at(k as usize - 1)?;
                if batch_ready != Some(k) {
                    runner.before_batch(&batch);
                    batch_ready = Some(k);
                }
                let call = batch
                    .calls
                    .get(i as usize)
                    .ok_or_else(|| RunError::JournalOrder(format!("batch {k} has no call {i}")))?;
                if adapter.classify(call) == crate::kit::ToolClass::Mutating {
                    checkpoints.before(rec, k, i)?;
                }
                perform::run_call(rec, runner.as_mut(), adapter, call, k, i)?
            }
            Step::Compare(k, i) => perform::compare(rec, adapter, plan.as_ref().unwrap(), k, i)?,
            Step::FinishBatch(k) => perform::finish_batch(rec, req, k)?,
            Step::Rebuild => {
                // The tools are done: processes they left running (shell sessions) end here.
                tools = None;
                let obs = perform::fresh_observations(rec)?;
                rebuilt = Some(perform::write_session(
                    rec,
                    adapter,
                    req,
                    plan.as_ref().unwrap(),
                    crate::kit::Observations::Fresh(&obs),
                    SessionRole::Reconstructed,
                )?);
            }
            Step::Continue => {
                // An agent that cannot resume its own session is started again from the
                // boundary: the continuation step writes its session again itself.
                let restart =
                    !rec.state.continuations.is_empty() && !agent.capabilities.resume_live;
                let session = match rebuilt.take() {
                    Some(s) => Some(s),
                    None if restart => None,
                    None => Some(perform::rebuild_again(
                        rec,
                        adapter,
                        req,
                        plan.as_ref().unwrap(),
                    )?),
                };
                let probe = match &probe {
                    Some(p) => p.clone(),
                    None => preflight::probe(req, agent)?,
                };
                let p = plan.as_ref().unwrap();
                continue_step::run(rec, adapter, req, p, session, &probe, &mut checkpoints)?;
            }
            Step::WriteContinued => {
                let p = plan.as_ref().unwrap();
                continue_step::write_continued(rec, adapter, req, p, agent)?;
            }
            Step::Finish => {
                let digest = final_result_digest(&rec.state);
                rec.record(Event::RunFinished(RunFinished {
                    result_digest: digest,
                }))?;
            }
            Step::Done => unreachable!(),
        }
    }
}

/// The digest `run_finished` carries: of the result the fold derives once it is applied.
fn final_result_digest(state: &fold::ReplayState) -> String {
    let mut s = state.clone();
    let ev = crate::journal::StoredEvent {
        seq: s.last_seq + 1,
        at_ms: 0,
        offset: 0,
        event: Event::RunFinished(RunFinished {
            result_digest: String::new(),
        }),
    };
    if fold::apply(&mut s, &ev).is_err() {
        return String::new();
    }
    result_digest(&s)
}

/// The digest of a finished state's result, ignoring the digest `run_finished` carries.
pub fn result_digest(s: &fold::ReplayState) -> String {
    let mut s = s.clone();
    s.finished = Some(RunFinished {
        result_digest: String::new(),
    });
    crate::digest::json_digest(&serde_json::to_value(result::derive(&s)).unwrap_or_default())
}

fn finish_failed(
    rec: &mut Recorder,
    adapter: Option<&dyn Adapter>,
    req: &ReplayRequest,
    e: RunError,
) -> Outcome {
    let hint = Some(e.hint());
    let journaled = match &e {
        // An in-doubt stop is journaled as a decision, and the run stays resumable.
        RunError::AmbiguousExecution(_) => true,
        // A journal that cannot be written cannot record its own failure.
        RunError::Journal(_) => false,
        _ => rec
            .record(Event::RunFailed(RunFailed {
                category: e.category(),
                message: e.to_string(),
                retryable: e.retryable(),
            }))
            .is_ok(),
    };
    if !journaled {
        let mut o = early(&e, Some(req));
        o.hint = hint;
        return o;
    }
    let rejected = rejected_before_running(rec, &e);
    let mut o = conclude(rec, adapter, req, hint);
    if rejected {
        remove_run_dirs(req);
        o.result.state_dir = None;
        o.result.output_dir = None;
        o.result.artifacts.clear();
    }
    o
}

/// A fresh run refused by the validation of its inputs (an unreadable or malformed
/// trajectory, a boundary out of range, an agent or version it cannot use) before anything
/// ran: its only attempt, nothing started. Such a run leaves no directory behind; the
/// result on stdout and the exit code say why.
fn rejected_before_running(rec: &Recorder, e: &RunError) -> bool {
    use journal_format::event::FailureCategory as C;
    matches!(
        e.category(),
        C::ConfigurationError | C::TrajectoryError | C::UnsupportedAgent | C::UnsupportedVersion
    ) && rec.state.resumes == 0
        && rec.state.calls.is_empty()
        && rec.state.batches_done == 0
        && rec.state.sessions.is_empty()
        && rec.state.continuations.is_empty()
}

/// Remove a rejected run's state directory and what it wrote in its output directory (the
/// output directory itself when nothing else is in it).
fn remove_run_dirs(req: &ReplayRequest) {
    use crate::fold::result::files;
    let _ = std::fs::remove_dir_all(&req.state_dir);
    for f in [
        files::RESULT,
        files::PLAN,
        files::JOURNAL_EXPORT,
        files::OBSERVATIONS,
        files::NEXT_ACTION,
    ] {
        let _ = std::fs::remove_file(req.output_dir.join(f));
    }
    let _ = std::fs::remove_dir(req.output_dir.join("native"));
    let _ = std::fs::remove_dir(&req.output_dir);
}

fn conclude(
    rec: &mut Recorder,
    adapter: Option<&dyn Adapter>,
    req: &ReplayRequest,
    hint: Option<String>,
) -> Outcome {
    let res = result::derive(&rec.state);
    if let Err(m) = outputs::write_all(rec, adapter, req, &res) {
        eprintln!("pvisor: warning: writing outputs: {m}");
    }
    let code = res
        .failure
        .as_ref()
        .map(|f| crate::outcome::exit::for_category(f.category))
        .unwrap_or(0);
    Outcome {
        result: res,
        exit_code: code,
        hint,
    }
}
