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
    // (agent | boundary) -> [runs, observations compared, equal, first requests seen, ending at O′N]
    let mut by_agent: BTreeMap<String, [u64; 5]> = BTreeMap::new();
    let mut by_boundary: BTreeMap<u64, [u64; 5]> = BTreeMap::new();
    let mut timed: Vec<(u64, String, String)> = vec![];
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
                let (rc, re) = (r.calls.compared, r.calls.compared_equal);
                compared += rc;
                equal += re;
                let first = &r.run["metadata"]["bridge"]["first_request_ends_at_boundary"];
                let add = |m: &mut [u64; 5]| {
                    m[0] += 1;
                    m[1] += rc;
                    m[2] += re;
                    if let Some(b) = first.as_bool() {
                        m[3] += 1;
                        m[4] += b as u64;
                    }
                };
                let agent = r.run["agent"]["type"]
                    .as_str()
                    .or(r.run["agent"].as_str())
                    .unwrap_or("unknown")
                    .to_string();
                add(by_agent.entry(agent).or_default());
                add(by_boundary
                    .entry(r.run["after_step"].as_u64().unwrap_or(0))
                    .or_default());
                if let Some(d) = r.duration_ms {
                    durations.push(d);
                    timed.push((
                        d,
                        r.run["run_id"].as_str().unwrap_or("-").to_string(),
                        p.display().to_string(),
                    ));
                }
            }
        }
    }
    durations.sort();
    timed.sort_by_key(|t| std::cmp::Reverse(t.0));
    let rates = |m: &[u64; 5]| {
        serde_json::json!({
            "runs": m[0],
            "observations_compared": m[1],
            "observation_equality_rate": ratio(m[2], m[1]),
            "first_requests": m[3],
            "first_request_equality_rate": ratio(m[4], m[3]),
        })
    };
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
        "by_agent": by_agent.iter().map(|(k, m)| (k.clone(), rates(m))).collect::<serde_json::Map<_, _>>(),
        "by_boundary": by_boundary.iter().map(|(k, m)| (k.to_string(), rates(m))).collect::<serde_json::Map<_, _>>(),
        "slowest": timed.iter().take(10).map(|(d, id, p)| serde_json::json!({"run_id": id, "path": p, "duration_ms": d})).collect::<Vec<_>>(),
        "problem_runs": failed_runs,
    })
}

fn ratio(a: u64, b: u64) -> serde_json::Value {
    if b == 0 {
        serde_json::Value::Null
    } else {
        serde_json::json!(a as f64 / b as f64)
    }
}
