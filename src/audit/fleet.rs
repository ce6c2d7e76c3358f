//! Audit a directory of many runs in parallel and aggregate them: the fleet view.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::check::{audit_run, AuditReport};

/// Every run state directory (holding `journal.pvj`) below `root`, up to 4 levels deep.
pub fn find_runs(root: &Path) -> Vec<PathBuf> {
    fn walk(d: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        if d.join(crate::journal::JOURNAL_FILE).is_file() {
            out.push(d.to_path_buf());
            return;
        }
        if depth == 0 {
            return;
        }
        if let Ok(rd) = std::fs::read_dir(d) {
            let mut subs: Vec<PathBuf> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            subs.sort();
            for s in subs {
                walk(&s, depth - 1, out);
            }
        }
    }
    let mut out = vec![];
    walk(root, 4, &mut out);
    out
}

/// Audit every run with `workers` threads.
pub fn audit_all(runs: &[PathBuf], workers: usize) -> Vec<(PathBuf, Result<AuditReport, String>)> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::with_capacity(runs.len()));
    std::thread::scope(|s| {
        for _ in 0..workers.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(p) = runs.get(i) else { break };
                let r = audit_run(p).map_err(|e| e.to_string());
                results.lock().unwrap().push((i, p.clone(), r));
            });
        }
    });
    let mut v = results.into_inner().unwrap();
    v.sort_by_key(|x| x.0);
    v.into_iter().map(|(_, p, r)| (p, r)).collect()
}

fn pct(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    Some(sorted[i])
}

/// The aggregated summary.
pub fn summarize(all: &[(PathBuf, Result<AuditReport, String>)]) -> serde_json::Value {
    let count = |k: &str, m: &mut BTreeMap<String, u64>| *m.entry(k.to_string()).or_default() += 1;
    let (mut phases, mut qualities, mut statuses, mut failures) = (
        BTreeMap::new(),
        BTreeMap::new(),
        BTreeMap::new(),
        BTreeMap::new(),
    );
    let (mut ok, mut unreadable, mut equal, mut compared) = (0u64, 0u64, 0u64, 0u64);
    let mut durations = vec![];
    let mut failed_runs = vec![];
    for (p, r) in all {
        match r {
            Err(e) => {
                unreadable += 1;
                failed_runs.push(serde_json::json!({"path": p, "error": e}));
            }
            Ok(r) => {
                if r.ok {
                    ok += 1;
                } else {
                    failed_runs.push(serde_json::json!({"path": p, "findings": r.findings}));
                }
                count(r.run["phase"].as_str().unwrap_or("none"), &mut phases);
                count(r.run["quality"].as_str().unwrap_or("none"), &mut qualities);
                count(
                    r.run["agent_status"].as_str().unwrap_or("none"),
                    &mut statuses,
                );
                if let Some(c) = r.run["failure"]["category"].as_str() {
                    count(c, &mut failures);
                }
                for c in &r.calls {
                    if c.observation != "in_doubt"
                        && c.observation != "not_compared"
                        && c.observation != "stale"
                    {
                        compared += 1;
                        if c.observation == "equal" || c.observation == "equal_except_dynamic" {
                            equal += 1;
                        }
                    }
                }
                if let Some(d) = r.duration_ms {
                    durations.push(d);
                }
            }
        }
    }
    durations.sort();
    serde_json::json!({
        "schema_version": "pvisor.audit-fleet/v1",
        "runs": all.len(),
        "audits_ok": ok,
        "unreadable": unreadable,
        "phases": phases,
        "qualities": qualities,
        "agent_statuses": statuses,
        "failure_categories": failures,
        "observation_equality_rate": if compared == 0 { serde_json::Value::Null } else { serde_json::json!(equal as f64 / compared as f64) },
        "observations_compared": compared,
        "duration_ms": { "p50": pct(&durations, 0.5), "p95": pct(&durations, 0.95) },
        "problem_runs": failed_runs,
    })
}
