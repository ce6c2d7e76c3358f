//! A fleet's progress, folded from the journals of its manifest's runs: nothing else is
//! consulted (no scheduler state), so it is right whatever ran the tasks.

use std::collections::BTreeMap;

use super::manifest::Manifest;
use crate::fold::Phase;

/// Where one task stands.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// No journal with a run request yet.
    Pending,
    /// A process holds the journal's lock.
    Running,
    /// Started, not finished, and nobody holds the lock: the next attempt resumes it.
    Interrupted,
    /// Finished without a failure (`phase`, `quality` as in the result).
    Done {
        phase: Option<String>,
        quality: Option<String>,
    },
    /// Finished with a failure of this category.
    Failed { category: String },
    /// The journal cannot be read or folded.
    Unreadable { why: String },
}

impl TaskState {
    pub fn key(&self) -> String {
        match self {
            TaskState::Pending => "pending".into(),
            TaskState::Running => "running".into(),
            TaskState::Interrupted => "interrupted".into(),
            TaskState::Done { .. } => "done".into(),
            TaskState::Failed { category } => format!("failed:{category}"),
            TaskState::Unreadable { .. } => "unreadable".into(),
        }
    }
}

/// The state of the run at `state_dir` (`<state root>/<run id>`).
pub fn task_state(state_dir: &std::path::Path) -> TaskState {
    let journal = state_dir.join("journal.pvj");
    if !journal.is_file() {
        return TaskState::Pending;
    }
    let mut events = Vec::new();
    if let Err(e) = crate::journal::read_events(&journal, |e| {
        events.push(e);
        Ok(())
    }) {
        return TaskState::Unreadable { why: e.to_string() };
    }
    let s = match crate::fold::fold(&events) {
        Ok(s) => s,
        Err(e) => return TaskState::Unreadable { why: e.to_string() },
    };
    if s.phase == Phase::Empty {
        return TaskState::Pending;
    }
    if !s.phase.is_terminal() {
        return if locked(&state_dir.join("journal.lock")) {
            TaskState::Running
        } else {
            TaskState::Interrupted
        };
    }
    let r = crate::fold::derive(&s);
    match r.failure {
        Some(f) => TaskState::Failed {
            category: f.category.to_string(),
        },
        None => TaskState::Done {
            phase: r.phase,
            quality: r.quality,
        },
    }
}

/// Whether another process holds the journal's lock (a live attempt).
fn locked(path: &std::path::Path) -> bool {
    use fs2::FileExt;
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
    else {
        return false;
    };
    match f.try_lock_exclusive() {
        Ok(()) => {
            let _ = fs2::FileExt::unlock(&f);
            false
        }
        Err(_) => true,
    }
}

/// Every task of `m` with its run id and state, in manifest order.
pub fn tasks(m: &Manifest) -> Vec<(String, TaskState)> {
    (0..m.lines.len())
        .map(|i| match m.request(i) {
            Ok(r) => (r.run_id.clone(), task_state(&r.state_dir)),
            Err(e) => (
                m.lines[i].1.run_id.clone().unwrap_or_default(),
                TaskState::Unreadable { why: e.to_string() },
            ),
        })
        .collect()
}

/// Counts by state key (`pending`, `running`, `interrupted`, `done`, `failed:<category>`,
/// `unreadable`).
pub fn counts(tasks: &[(String, TaskState)]) -> BTreeMap<String, usize> {
    let mut c = BTreeMap::new();
    for (_, t) in tasks {
        *c.entry(t.key()).or_insert(0) += 1;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_journal_is_pending_and_counts_add_up() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(task_state(&d.path().join("nope")), TaskState::Pending);
        let t = vec![
            ("a".to_string(), TaskState::Pending),
            (
                "b".to_string(),
                TaskState::Failed {
                    category: "trajectory_error".into(),
                },
            ),
            ("c".to_string(), TaskState::Pending),
        ];
        let c = counts(&t);
        assert_eq!(c["pending"], 2);
        assert_eq!(c["failed:trajectory_error"], 1);
    }
}
