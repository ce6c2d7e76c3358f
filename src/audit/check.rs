//! The checks and the per-step report of one run.

use std::path::{Path, PathBuf};

use journal_format::TailState;
use serde::Serialize;
use sha2::Digest;

use super::reread::{observation_of, CallReports, Timeline};
use crate::fold::{self, state::CallState, ReplayState};
use crate::journal::{read_events, resolve_path, BlobStore, StoredEvent};
use journal_format::event::WorkspaceCheckpointed;

pub const AUDIT_SCHEMA: &str = "pvisor.audit/v1";

/// A problem the audit found. `severity` is `error` (the run cannot be trusted as recorded)
/// or `warning`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub check: String,
    pub severity: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallReport {
    pub batch: u64,
    pub call: u64,
    pub call_id: String,
    pub tool: String,
    pub args_digest: String,
    pub exit_code: Option<i64>,
    pub is_error: Option<bool>,
    pub duration_ms: Option<u64>,
    /// `equal` | `equal_except_dynamic` | `differs` | `stale` | `in_doubt` | `not_compared`
    pub observation: String,
    pub observation_digest: Option<String>,
    pub diff: Option<String>,
    pub starts: u64,
    pub in_doubt_decisions: Vec<journal_format::event::InDoubtDecision>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepReport {
    pub n: u64,
    pub action_digest: String,
    pub tools: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Checks {
    pub integrity: String,
    pub order: String,
    pub budget: String,
    pub privacy: String,
    pub bridge: String,
    pub blobs: String,
    pub result_file: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditReport {
    pub schema_version: String,
    pub journal: String,
    pub ok: bool,
    pub events: u64,
    pub head: Option<String>,
    pub checks: Checks,
    pub findings: Vec<Finding>,
    pub run: serde_json::Value,
    /// One report per call, read again from the journal as the report is written (not held).
    pub calls: CallReports,
    pub steps: Vec<StepReport>,
    /// Live steps a resumed attempt replaced (kept in the journal, not counted).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub superseded_steps: Vec<StepReport>,
    /// Every event's line, read again from the journal as the report is written (not held).
    pub timeline: Timeline,
    pub duration_ms: Option<u64>,
    /// Host/time snapshots of the agent's session set to the live values before a start.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<journal_format::event::Neutralized>,
    /// Items the adapters' declared rules removed from model requests (kind, digest).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed_items: Vec<journal_format::event::RemovedItem>,
    /// Refused model requests, with their first difference and kept body.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused_requests: Vec<RefusedReport>,
    /// Workspace restores before an interrupted call or live step ran again.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub restores: Vec<journal_format::event::WorkspaceRestored>,
}

/// One refused model request, for the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RefusedReport {
    pub seq: u64,
    pub n: u64,
    pub reason: String,
    pub difference: Option<String>,
    /// The kept body (secrets redacted), when the run kept it.
    pub request_path: Option<String>,
    pub hint: String,
}

/// What to do about a refused request (one text: the difference itself says what differs).
const REFUSAL_HINT: &str = "the kept request shows what the agent sent and the rebuilt session what was expected; a host or date notice after O′N is drift the adapter did not neutralize (docs/agents/<agent>.md, \"Drift model\"); see docs/bridge.md";

fn finding(check: &str, severity: &str, message: impl Into<String>, seq: Option<u64>) -> Finding {
    Finding {
        check: check.into(),
        severity: severity.into(),
        message: message.into(),
        seq,
    }
}

/// Does any substring of `text` of `len` chars hash to `sha` (`sha256:<hex>`)?
fn contains_hashed(text: &str, len: usize, sha: &str) -> bool {
    if len == 0 {
        return false;
    }
    let idx: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect();
    if idx.len() <= len {
        return false;
    }
    let want = sha.strip_prefix("sha256:").unwrap_or(sha);
    for w in 0..idx.len() - len {
        let s = &text[idx[w]..idx[w + len]];
        if hex::encode(sha2::Sha256::digest(s.as_bytes())) == want {
            return true;
        }
    }
    false
}

fn text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name()
                    .map(|n| n != "blobs" && n != "agent-home")
                    .unwrap_or(true)
                {
                    text_files(&p, out);
                }
            } else if std::fs::metadata(&p)
                .map(|m| m.len() < 64 * 1024 * 1024)
                .unwrap_or(false)
            {
                out.push(p);
            }
        }
    }
}

/// Audit one run. `path` is its journal or state directory.
///
/// The journal is read once, event by event: each is folded, its export line searched for
/// the boundary prompt and the key; once a batch finishes, its calls' blobs and its
/// checkpoints are checked and the batch leaves the fold's state. No event and no call is
/// kept: the timeline and the call reports read the journal again when the report is
/// written. What the audit holds is the run's summary and its findings (one per problem).
pub fn audit_run(path: &Path) -> Result<AuditReport, crate::journal::JournalError> {
    let file = resolve_path(path)?;
    let state_dir = file.parent().map(PathBuf::from).unwrap_or_default();
    let mut findings = vec![];
    let mut pass = Pass::new(BlobStore::new(&state_dir));
    let scan = read_events(&file, |e| {
        pass.take(&e);
        Ok(())
    });
    let (integrity, head) = check_integrity(&scan, &mut findings);
    pass.finish();
    let order = match pass.order_failure.take() {
        Some(f) => {
            findings.push(f);
            "failed".to_string()
        }
        None => "ok".to_string(),
    };
    let Pass {
        state,
        events,
        in_journal,
        targets,
        blobs,
        missing,
        checkpoints,
        calls,
        ..
    } = pass;
    let budget = check_budget(&state, &mut findings);
    let bridge = check_bridge(&state, &blobs, &mut findings);
    let blob_status = blob_findings(&file, missing, checkpoints, &mut findings);
    let out_dir = state.request.as_ref().map(|r| PathBuf::from(&r.output_dir));
    let privacy = match &targets {
        Some(t) if !t.is_empty() => {
            check_privacy(&file, in_journal, t, out_dir.as_deref(), &mut findings)
        }
        _ => "ok".to_string(),
    };
    let derived = serde_json::to_value(fold::derive(&state)).unwrap_or_default();
    let result_file = check_result(&state, out_dir.as_deref(), &derived, &mut findings);
    let ok = !findings.iter().any(|f| f.severity == "error");
    // Nothing could be read: no other check had anything to look at.
    let unread = |v: String| {
        if events == 0 && integrity == "failed" {
            "not_checked".to_string()
        } else {
            v
        }
    };
    let (order, budget, privacy, bridge, blob_status) = (
        unread(order),
        unread(budget),
        unread(privacy),
        unread(bridge),
        unread(blob_status),
    );
    let duration_ms = match (state.first_at_ms, state.last_at_ms) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    Ok(AuditReport {
        schema_version: AUDIT_SCHEMA.into(),
        journal: file.display().to_string(),
        ok,
        events,
        head,
        checks: Checks {
            integrity,
            order,
            budget,
            privacy,
            bridge,
            blobs: blob_status,
            result_file,
        },
        findings,
        run: derived,
        calls: CallReports {
            journal: file.clone(),
            state_dir,
            events,
            count: calls.count,
            compared: calls.compared,
            compared_equal: calls.compared_equal,
        },
        steps: step_reports(&state.steps),
        superseded_steps: step_reports(&state.superseded_steps),
        timeline: Timeline {
            journal: file.clone(),
            events,
        },
        duration_ms,
        drift: drift(&state),
        removed_items: state.bridge.removed.clone(),
        refused_requests: refused_reports(&state, &blobs),
        restores: state.restores.clone(),
    })
}

/// What the privacy check looks for: the boundary prompt (its length in chars and SHA-256)
/// and the configured key's value.
#[derive(Default)]
struct Targets {
    prompt: Option<(usize, String)>,
    key: Option<String>,
}

impl Targets {
    fn of(state: &ReplayState) -> Targets {
        let request = state.request.as_ref();
        Targets {
            prompt: request
                .and_then(|r| r.boundary_prompt.as_ref())
                .map(|p| (p.length_chars as usize, p.sha256.clone())),
            key: request
                .and_then(|r| r.model.as_ref())
                .and_then(|m| m.api_key_env.clone())
                .and_then(|n| std::env::var(n).ok())
                .filter(|k| k.len() >= 8),
        }
    }

    fn is_empty(&self) -> bool {
        self.prompt.is_none() && self.key.is_none()
    }

    /// What a text shows: (the prompt's plaintext, the key).
    fn shown_in(&self, text: &str) -> (bool, bool) {
        (
            self.prompt
                .as_ref()
                .is_some_and(|(len, sha)| contains_hashed(text, *len, sha)),
            self.key.as_ref().is_some_and(|k| text.contains(k.as_str())),
        )
    }
}

/// The one pass over the journal's events.
struct Pass {
    state: ReplayState,
    events: u64,
    /// The first event the fold refused (nothing after it is folded).
    order_failure: Option<Finding>,
    /// Whether the journal, as exported, shows (the prompt, the key).
    in_journal: (bool, bool),
    /// Known once the run's request is folded (its first event).
    targets: Option<Targets>,
    line: Vec<u8>,
    blobs: BlobStore,
    /// The calls' blobs that could not be read or verified, in call order (whether the
    /// journal carries them is looked up at the end, for these alone).
    missing: Vec<MissingBlob>,
    /// The checkpoints' findings, by checkpoint.
    checkpoints: Vec<((u64, u64), Finding)>,
    calls: Counted,
}

/// A blob a call names whose file cannot be read or does not hash to its name.
struct MissingBlob {
    blob: String,
    batch: u64,
    call: u64,
    error: String,
}

#[derive(Default)]
struct Counted {
    count: u64,
    compared: u64,
    compared_equal: u64,
}

impl Pass {
    fn new(blobs: BlobStore) -> Pass {
        Pass {
            state: ReplayState::default(),
            events: 0,
            order_failure: None,
            in_journal: (false, false),
            targets: None,
            line: Vec::new(),
            blobs,
            missing: Vec::new(),
            checkpoints: Vec::new(),
            calls: Counted::default(),
        }
    }

    fn take(&mut self, e: &StoredEvent) {
        self.events += 1;
        if self.order_failure.is_none() {
            match fold::apply_streaming(&mut self.state, e) {
                Ok(Some(done)) => {
                    done.calls.iter().for_each(|c| self.check_call(c));
                    done.checkpoints
                        .iter()
                        .for_each(|c| self.check_checkpoint(c));
                }
                Ok(None) => {}
                Err(fe) => {
                    self.order_failure =
                        Some(finding("order", "error", fe.to_string(), Some(fe.seq)))
                }
            }
        }
        if self.targets.is_none() && self.state.request.is_some() {
            self.targets = Some(Targets::of(&self.state));
        }
        // The journal as exported, one event at a time (an exported line is one JSON object,
        // in which neither can span two lines).
        if let Some(t) = self.targets.as_ref().filter(|t| !t.is_empty()) {
            self.line.clear();
            let _ = crate::report::export::write_export_line(&mut self.line, e);
            let (p, k) = t.shown_in(&String::from_utf8_lossy(&self.line));
            self.in_journal = (self.in_journal.0 || p, self.in_journal.1 || k);
        }
    }

    /// The calls and checkpoints of the batch the run stopped in, and of the live steps.
    fn finish(&mut self) {
        let calls: Vec<CallState> = self.state.calls.values().cloned().collect();
        calls.iter().for_each(|c| self.check_call(c));
        let checkpoints: Vec<WorkspaceCheckpointed> =
            self.state.checkpoints.values().cloned().collect();
        checkpoints.iter().for_each(|c| self.check_checkpoint(c));
        self.checkpoints.sort_by_key(|(key, _)| *key);
    }

    /// A call: its observation and diff blobs; counted for the report.
    fn check_call(&mut self, c: &CallState) {
        let refs = c
            .finished
            .iter()
            .map(|f| f.observation_blob.clone())
            .chain(c.compared.iter().filter_map(|x| x.diff_blob.clone()));
        for r in refs {
            if let Err(e) = self.blobs.get_verified(&r) {
                self.missing.push(MissingBlob {
                    blob: r,
                    batch: c.batch,
                    call: c.call,
                    error: e.to_string(),
                });
            }
        }
        let observation = observation_of(c);
        self.calls.count += 1;
        if matches!(observation, "equal" | "equal_except_dynamic" | "differs") {
            self.calls.compared += 1;
            self.calls.compared_equal += (observation != "differs") as u64;
        }
    }

    fn check_checkpoint(&mut self, c: &WorkspaceCheckpointed) {
        if let Err(e) = check_checkpoint(&self.blobs, &c.manifest_blob) {
            let at = if c.batch == 0 {
                format!("live step {}", c.call)
            } else {
                format!("batch {} call {}", c.batch, c.call)
            };
            self.checkpoints.push((
                (c.batch, c.call),
                finding(
                    "blobs",
                    "error",
                    format!("workspace checkpoint before {at}: {e}"),
                    None,
                ),
            ));
        }
    }
}

/// integrity: how the read ended. Returns the status and the head.
fn check_integrity(
    scan: &Result<journal_format::ScanReport, crate::journal::JournalError>,
    findings: &mut Vec<Finding>,
) -> (String, Option<String>) {
    match scan {
        Ok(rep) => match rep.tail {
            TailState::Clean { .. } => ("ok".to_string(), Some(rep.head.to_hex())),
            TailState::Torn { offset, len } => {
                findings.push(finding("integrity", "warning", format!("torn tail of {len} bytes at byte offset {offset} (an interrupted append; recovered when the run is resumed)"), Some(rep.last_seq + 1)));
                ("torn_tail".into(), Some(rep.head.to_hex()))
            }
        },
        Err(e) => {
            let seq = match e {
                crate::journal::JournalError::Damaged { source, .. } => source.seq(),
                crate::journal::JournalError::Decode { seq, .. } => Some(*seq),
                _ => None,
            };
            findings.push(finding("integrity", "error", e.to_string(), seq));
            ("failed".into(), None)
        }
    }
}

/// budget: live steps within the live budget, every batch up to the boundary replayed.
fn check_budget(state: &ReplayState, findings: &mut Vec<Finding>) -> String {
    let mut budget = "ok".to_string();
    if let Some(b) = &state.boundary {
        if let Some(live) = b.live_budget {
            if state.steps.len() as u64 > live {
                findings.push(finding(
                    "budget",
                    "error",
                    format!(
                        "{} live steps exceed the budget of {live}",
                        state.steps.len()
                    ),
                    None,
                ));
                budget = "failed".into();
            }
        }
        if state.phase.is_terminal()
            && state.failure.is_none()
            && state.batches_done != b.after_step
            && state.mode() != Some(journal_format::event::Mode::PrepareOnly)
        {
            findings.push(finding(
                "budget",
                "error",
                format!(
                    "{} batches replayed, boundary is {}",
                    state.batches_done, b.after_step
                ),
                None,
            ));
            budget = "failed".into();
        }
    }
    budget
}

/// bridge receipts: no refusal, the first request validated, every live step validated,
/// the boundary prompt injected once.
fn check_bridge(state: &ReplayState, blobs: &BlobStore, findings: &mut Vec<Finding>) -> String {
    let mut bridge = "not_applicable".to_string();
    if !state.continuations.is_empty() || state.bridge.started.is_some() {
        bridge = "ok".into();
        for r in &state.bridge.refusals {
            let kept = r
                .blob
                .as_ref()
                .map(|b| {
                    format!(
                        "; request kept (secrets redacted) at {}",
                        blobs.path_of(b).display()
                    )
                })
                .unwrap_or_default();
            findings.push(finding(
                "bridge",
                "error",
                format!(
                    "request {} refused: {}{kept}",
                    r.n,
                    r.difference.as_deref().unwrap_or(&r.reason)
                ),
                Some(r.seq),
            ));
            bridge = "failed".into();
        }
        if state.bridge.first_request_ok != Some(true) && !state.steps.is_empty() {
            findings.push(finding(
                "bridge",
                "error",
                "no receipt shows the first continuation request ending at O′N",
                None,
            ));
            bridge = "failed".into();
        }
        if (state.steps.len() as u64) > state.bridge.validated {
            findings.push(finding(
                "bridge",
                "error",
                format!(
                    "{} live steps but only {} validated requests: a request bypassed validation",
                    state.steps.len(),
                    state.bridge.validated
                ),
                None,
            ));
            bridge = "failed".into();
        }
        let requested = state
            .request
            .as_ref()
            .and_then(|r| r.boundary_prompt.as_ref())
            .is_some();
        if requested && !state.steps.is_empty() && state.bridge.injections != 1 {
            findings.push(finding(
                "bridge",
                "error",
                format!(
                    "boundary prompt injected {} times (expected exactly once)",
                    state.bridge.injections
                ),
                None,
            ));
            bridge = "failed".into();
        }
    }
    bridge
}

/// blobs: every observation and diff blob, then every workspace checkpoint. A call's blob
/// whose file fails is a warning when the journal carries its content (format 1.6; the fold
/// checked it), an error otherwise.
fn blob_findings(
    file: &Path,
    missing: Vec<MissingBlob>,
    checkpoints: Vec<((u64, u64), Finding)>,
    findings: &mut Vec<Finding>,
) -> String {
    let mut blob_status = "ok".to_string();
    let carried = carried_among(file, &missing);
    for m in missing {
        let (r, e) = (&m.blob, &m.error);
        if carried.contains(r.as_str()) {
            findings.push(finding(
                "blobs",
                "warning",
                format!("the file of blob {r} (batch {} call {}): {e}; the journal holds its content, and resuming the run writes the file back", m.batch, m.call),
                None,
            ));
            continue;
        }
        findings.push(finding(
            "blobs",
            "error",
            format!("blob {r} of batch {} call {}: {e}", m.batch, m.call),
            None,
        ));
        blob_status = "failed".into();
    }
    for (_, f) in checkpoints {
        findings.push(f);
        blob_status = "failed".into();
    }
    blob_status
}

/// Which of the missing blobs the journal carries (read again only when one is missing).
fn carried_among(file: &Path, missing: &[MissingBlob]) -> std::collections::HashSet<String> {
    let mut carried = std::collections::HashSet::new();
    if missing.is_empty() {
        return carried;
    }
    let wanted: std::collections::HashSet<&str> = missing.iter().map(|m| m.blob.as_str()).collect();
    let _ = read_events(file, |e| {
        if let journal_format::Event::BlobStored(b) = &e.event {
            if wanted.contains(b.blob.as_str()) {
                carried.insert(b.blob.clone());
            }
        }
        Ok(())
    });
    carried
}

/// A workspace checkpoint: the manifest and every pack it names.
fn check_checkpoint(blobs: &BlobStore, manifest_blob: &str) -> Result<(), String> {
    let m = crate::workspace::checkpoint::load_manifest(blobs, manifest_blob)
        .map_err(|e| e.to_string())?;
    let packs: std::collections::BTreeSet<&String> = m
        .entries
        .values()
        .filter_map(|e| match e {
            crate::workspace::checkpoint::Entry::File { pack, .. } => Some(pack),
            _ => None,
        })
        .collect();
    for p in packs {
        blobs
            .get_verified(p)
            .map_err(|e| format!("pack {p}: {e}"))?;
    }
    Ok(())
}

/// privacy: the boundary prompt (by its hash) and the configured key's value appear neither
/// in the journal (as exported) nor in the output directory's text files.
fn check_privacy(
    file: &Path,
    in_journal: (bool, bool),
    targets: &Targets,
    out_dir: Option<&Path>,
    findings: &mut Vec<Finding>,
) -> String {
    let mut files = vec![file.to_path_buf()];
    if let Some(o) = out_dir {
        text_files(o, &mut files);
    }
    let mut privacy = "ok".to_string();
    for f in &files {
        let (has_prompt, has_key) = if f.as_path() == file {
            in_journal
        } else {
            targets.shown_in(
                &std::fs::read(f)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default(),
            )
        };
        if has_prompt {
            findings.push(finding(
                "privacy",
                "error",
                format!("the boundary prompt's plaintext appears in {}", f.display()),
                None,
            ));
            privacy = "failed".into();
        }
        if has_key {
            findings.push(finding(
                "privacy",
                "error",
                format!("the API key appears in {}", f.display()),
                None,
            ));
            privacy = "failed".into();
        }
    }
    privacy
}

/// result: result.json must equal the fold (`derived`); run_finished's digest should match.
/// Returns the result file's status.
fn check_result(
    state: &ReplayState,
    out_dir: Option<&Path>,
    derived: &serde_json::Value,
    findings: &mut Vec<Finding>,
) -> String {
    let mut result_file = "absent".to_string();
    if let Some(o) = out_dir {
        if let Ok(b) = std::fs::read(o.join("result.json")) {
            match serde_json::from_slice::<serde_json::Value>(&b) {
                Ok(v) if &v == derived => result_file = "matches_fold".into(),
                Ok(_) => {
                    findings.push(finding(
                        "result",
                        "error",
                        "result.json differs from the result folded from the journal",
                        None,
                    ));
                    result_file = "differs".into();
                }
                Err(e) => {
                    findings.push(finding(
                        "result",
                        "error",
                        format!("result.json does not parse: {e}"),
                        None,
                    ));
                    result_file = "invalid".into();
                }
            }
        }
    }
    if let Some(f) = &state.finished {
        let d = crate::engine::result_digest(state);
        if d != f.result_digest {
            findings.push(finding(
                "result",
                "warning",
                "run_finished's result digest differs from the fold's result",
                None,
            ));
        }
    }
    result_file
}

fn step_reports(steps: &[journal_format::event::ContinuationStep]) -> Vec<StepReport> {
    steps
        .iter()
        .map(|s| StepReport {
            n: s.n,
            action_digest: s.action_digest.clone(),
            tools: s.tools.clone(),
        })
        .collect()
}

/// The neutralized snapshots of every continuation start, without repeats.
fn drift(state: &ReplayState) -> Vec<journal_format::event::Neutralized> {
    let mut d: Vec<journal_format::event::Neutralized> = Vec::new();
    for c in &state.continuations {
        for n in &c.neutralized {
            if !d.contains(n) {
                d.push(n.clone());
            }
        }
    }
    d
}

fn refused_reports(state: &ReplayState, blobs: &BlobStore) -> Vec<RefusedReport> {
    state
        .bridge
        .refusals
        .iter()
        .map(|r| RefusedReport {
            seq: r.seq,
            n: r.n,
            reason: r.reason.clone(),
            difference: r.difference.clone(),
            request_path: r
                .blob
                .as_ref()
                .map(|b| blobs.path_of(b).display().to_string()),
            hint: REFUSAL_HINT.into(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn hashed_substring_search() {
        let sha = crate::digest::sha256("héllo".as_bytes());
        assert!(super::contains_hashed("say héllo there", 5, &sha));
        assert!(!super::contains_hashed("say hello there", 5, &sha));
    }
}
