//! The parts of the audit report that grow with the run — the timeline (one line per event)
//! and the call reports (one per tool call) — read again from the journal as the report is
//! written, so that the report never holds them. Each checks that it reads what the audit
//! read: a journal that lost events in between fails the report instead of shortening it.

use std::convert::Infallible;
use std::path::PathBuf;

use serde::Serialize;

use super::check::CallReport;
use crate::fold::{self, state::CallState, ReplayState};
use crate::journal::{read_events, BlobStore};

#[derive(Debug, thiserror::Error)]
pub enum RereadError<E> {
    #[error("{0}")]
    Visit(E),
    /// The journal lost events between the audit and the writing of its report.
    #[error(
        "{journal}: {read} {what} could be read again for the report, the audit read {audited}"
    )]
    Changed {
        journal: PathBuf,
        what: &'static str,
        read: u64,
        audited: u64,
    },
}

/// A re-read part's error as the serializer's (the writing of the report fails with it).
fn ser_error<E: serde::ser::Error>(e: RereadError<E>) -> E {
    match e {
        RereadError::Visit(e) => e,
        changed => E::custom(changed.to_string()),
    }
}

/// The timeline of the report: one line per event (seq, time, name, summary).
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub(super) journal: PathBuf,
    /// How many events the audit read: the timeline has exactly these.
    pub(super) events: u64,
}

/// One event of the timeline.
#[derive(Debug, Serialize)]
pub struct TimelineLine<'a> {
    pub seq: u64,
    pub at: String,
    pub event: &'static str,
    pub summary: &'a str,
}

impl Timeline {
    /// Visit each line, in order; stops at the first error `f` returns.
    pub fn for_each<E>(
        &self,
        mut f: impl FnMut(TimelineLine<'_>) -> Result<(), E>,
    ) -> Result<(), RereadError<E>> {
        let mut seen = 0u64;
        let mut failed = None;
        let _ = read_events(&self.journal, |e| {
            if failed.is_none() && seen < self.events {
                seen += 1;
                let summary = crate::report::summary(&e.event);
                let line = TimelineLine {
                    seq: e.seq,
                    at: crate::report::export::rfc3339(e.at_ms),
                    event: e.event.name(),
                    summary: &summary,
                };
                if let Err(err) = f(line) {
                    failed = Some(err);
                }
            }
            Ok(())
        });
        match failed {
            Some(e) => Err(RereadError::Visit(e)),
            None if seen < self.events => Err(RereadError::Changed {
                journal: self.journal.clone(),
                what: "events",
                read: seen,
                audited: self.events,
            }),
            None => Ok(()),
        }
    }
}

impl Serialize for Timeline {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.events as usize))?;
        self.for_each(|line| seq.serialize_element(&line))
            .map_err(ser_error)?;
        seq.end()
    }
}

/// The report of every tool call, in (batch, call) order: the journal is folded again as the
/// audit folded it, each batch's reports made when it finishes and then forgotten.
#[derive(Debug, Clone, PartialEq)]
pub struct CallReports {
    pub(super) journal: PathBuf,
    pub(super) state_dir: PathBuf,
    /// The events the audit read (and folded up to its first refused one).
    pub(super) events: u64,
    /// The calls the audit counted: the reports are exactly these.
    pub count: u64,
    /// Calls whose observation was compared (`equal`, `equal_except_dynamic`, `differs`).
    pub compared: u64,
    /// Of those, the ones equal (with or without masking the dynamic fields).
    pub compared_equal: u64,
}

impl CallReports {
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Visit each report, in order; stops at the first error `f` returns.
    pub fn for_each<E>(
        &self,
        mut f: impl FnMut(CallReport) -> Result<(), E>,
    ) -> Result<(), RereadError<E>> {
        let blobs = BlobStore::new(&self.state_dir);
        let mut state = ReplayState::default();
        let (mut seen, mut made, mut folding) = (0u64, 0u64, true);
        let mut failed = None;
        let mut visit = |c: &CallState, failed: &mut Option<E>| {
            if failed.is_none() {
                made += 1;
                if let Err(e) = f(report(c, &blobs)) {
                    *failed = Some(e);
                }
            }
        };
        let _ = read_events(&self.journal, |e| {
            if seen < self.events {
                seen += 1;
                if folding {
                    match fold::apply_streaming(&mut state, &e) {
                        Ok(Some(done)) => done.calls.iter().for_each(|c| visit(c, &mut failed)),
                        Ok(None) => {}
                        Err(_) => folding = false,
                    }
                }
            }
            Ok(())
        });
        state.calls.values().for_each(|c| visit(c, &mut failed));
        if let Some(e) = failed {
            return Err(RereadError::Visit(e));
        }
        let changed = |what, read, audited| RereadError::Changed {
            journal: self.journal.clone(),
            what,
            read,
            audited,
        };
        if seen < self.events {
            return Err(changed("events", seen, self.events));
        }
        if made != self.count {
            return Err(changed("tool calls", made, self.count));
        }
        Ok(())
    }

    /// Every report, in order.
    pub fn collect(&self) -> Result<Vec<CallReport>, RereadError<Infallible>> {
        let mut all = Vec::with_capacity(self.count.min(1 << 16) as usize);
        self.for_each(|c| {
            all.push(c);
            Ok::<(), Infallible>(())
        })?;
        Ok(all)
    }
}

impl Serialize for CallReports {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.count as usize))?;
        self.for_each(|c| seq.serialize_element(&c))
            .map_err(ser_error)?;
        seq.end()
    }
}

/// How a call's observation came out.
pub fn observation_of(c: &CallState) -> &'static str {
    match (&c.finished, &c.compared) {
        (None, _) => "in_doubt",
        (Some(f), _) if f.stale => "stale",
        (Some(_), Some(x)) if x.equal => "equal",
        (Some(_), Some(x)) if x.equal_masked => "equal_except_dynamic",
        (Some(_), Some(_)) => "differs",
        (Some(_), None) => "not_compared",
    }
}

/// One call's report, with its observation's comparison outcome and diff.
fn report(c: &CallState, blobs: &BlobStore) -> CallReport {
    CallReport {
        batch: c.batch,
        call: c.call,
        call_id: c.call_id.clone(),
        tool: c.tool.clone(),
        args_digest: c.args_digest.clone(),
        exit_code: c.finished.as_ref().and_then(|f| f.exit_code),
        is_error: c.finished.as_ref().map(|f| f.is_error),
        duration_ms: c.finished.as_ref().map(|f| f.duration_ms),
        observation: observation_of(c).into(),
        observation_digest: c.finished.as_ref().map(|f| f.observation_digest.clone()),
        diff: c
            .compared
            .as_ref()
            .and_then(|x| x.diff_blob.as_ref())
            .and_then(|b| blobs.get(b).ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned()),
        starts: c.starts,
        in_doubt_decisions: c.in_doubt_decisions.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(name: &str) -> PathBuf {
        PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/journal-format/vectors"
        ))
        .join(name)
    }

    /// Cut the end of the journal's last record (as if it was lost after the audit).
    fn lose_the_last_record(journal: &std::path::Path) {
        let len = std::fs::metadata(journal).unwrap().len();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(journal)
            .unwrap();
        f.set_len(len - 8).unwrap();
    }

    #[test]
    fn the_timeline_is_read_again_when_written_and_refuses_a_journal_that_lost_events() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("journal.pvj");
        std::fs::copy(vector("complete.pvj"), &journal).unwrap();
        let r = crate::audit::audit_run(&journal).unwrap();
        assert!(r.events > 10, "{}", r.events);
        let v = serde_json::to_value(&r).unwrap();
        let lines = v["timeline"].as_array().unwrap();
        assert_eq!(lines.len() as u64, r.events);
        assert_eq!(lines[0]["seq"], 1);
        assert_eq!(lines[0]["event"], "run_requested");
        assert_eq!(lines.last().unwrap()["seq"], r.events);
        // the journal loses its last record after the audit: the report is not written short
        lose_the_last_record(&journal);
        let e = serde_json::to_string(&r).unwrap_err().to_string();
        assert!(e.contains("could be read again"), "{e}");
    }

    #[test]
    fn the_call_reports_read_again_are_those_of_the_whole_fold() {
        for v in [
            "complete.pvj",
            "complete-1.2.pvj",
            "complete-1.6.pvj",
            "complete-1.7.pvj",
        ] {
            let dir = tempfile::tempdir().unwrap();
            let journal = dir.path().join("journal.pvj");
            std::fs::copy(vector(v), &journal).unwrap();
            let r = crate::audit::audit_run(&journal).unwrap();
            let mut events = vec![];
            read_events(&journal, |e| {
                events.push(e);
                Ok(())
            })
            .unwrap();
            let whole = fold::fold(&events).unwrap();
            let blobs = BlobStore::new(dir.path());
            let want: Vec<CallReport> = whole.calls.values().map(|c| report(c, &blobs)).collect();
            assert!(!want.is_empty(), "{v}");
            assert_eq!(r.calls.count, want.len() as u64, "{v}");
            assert_eq!(r.calls.collect().unwrap(), want, "{v}");
            // the journal loses its last record after the audit: the reports are not short
            lose_the_last_record(&journal);
            let e = r.calls.collect().unwrap_err().to_string();
            assert!(e.contains("could be read again"), "{v}: {e}");
        }
    }
}
