//! What the HTML report shows beyond the audit's own report, read from the run's journal and
//! blob store (and the continued native session, parsed by the run's adapter): every
//! event's payload and time, the plan's arguments and recorded observations, the regenerated
//! observations, the bridge's receipts and the kept bodies of refused requests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use journal_format::event::{BridgeRequestValidated, InnerCallFinished, SessionRole};
use journal_format::Event;

use crate::journal::{read_events, BlobStore};
use crate::kit::Plan;

/// One event for the timeline.
pub struct TimelineEvent {
    pub seq: u64,
    pub at_ms: u64,
    pub name: &'static str,
    pub summary: String,
    /// The event's fields as JSON (the export's `data`).
    pub payload: serde_json::Value,
}

/// A regenerated observation, from its blob.
pub struct Regenerated {
    pub text: String,
    pub blob_path: PathBuf,
}

/// The continuation as the agent recorded it in its own session after the run.
pub struct Continued {
    pub path: PathBuf,
    pub plan: Result<Plan, String>,
}

#[derive(Default)]
pub struct Detail {
    pub events: Vec<TimelineEvent>,
    pub plan: Option<Plan>,
    pub regenerated: BTreeMap<(u64, u64), Regenerated>,
    pub receipts: Vec<(u64, BridgeRequestValidated)>,
    pub continued: Option<Continued>,
    /// The kept (redacted) bodies of refused requests, by the receipt's seq.
    pub refused_bodies: BTreeMap<u64, String>,
    /// The inner calls (code-mode `tools.*`) of each call's latest attempt, with their
    /// `{input, result}` blob when it is readable.
    pub inner: BTreeMap<(u64, u64), Vec<InnerCall>>,
    /// The audit's call reports, read again from the journal.
    pub calls: Vec<crate::audit::check::CallReport>,
    /// Why they could not be (the journal changed since the audit).
    pub calls_error: Option<String>,
}

/// One inner call's event and its `{input, result}` blob, when readable.
pub type InnerCall = (InnerCallFinished, Option<serde_json::Value>);

impl Detail {
    /// Read what the page needs. Anything unreadable is simply absent: the audit's findings
    /// already say why.
    pub fn load(journal: &Path) -> Detail {
        let state_dir = journal.parent().map(Path::to_path_buf).unwrap_or_default();
        let blobs = BlobStore::new(&state_dir);
        let mut d = Detail::default();
        let mut agent = None;
        let mut continued_path = None;
        let _ = read_events(journal, |e| {
            match &e.event {
                Event::RunRequested(r) => agent = Some(r.agent.clone()),
                Event::TrajectoryParsed(t) => {
                    d.plan = blobs
                        .get(&t.plan_blob)
                        .ok()
                        .and_then(|b| serde_json::from_slice::<Plan>(&b).ok());
                }
                Event::ToolCallStarted(c) => {
                    d.inner.remove(&(c.batch, c.call));
                }
                Event::InnerCallFinished(i) => {
                    let body = blobs
                        .get(&i.blob)
                        .ok()
                        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
                    d.inner
                        .entry((i.batch, i.call))
                        .or_default()
                        .push((i.clone(), body));
                }
                Event::ToolCallFinished(f) => {
                    if let Ok(b) = blobs.get(&f.observation_blob) {
                        let text = serde_json::from_slice::<serde_json::Value>(&b)
                            .ok()
                            .and_then(|v| v["text"].as_str().map(String::from))
                            .unwrap_or_else(|| String::from_utf8_lossy(&b).into_owned());
                        d.regenerated.insert(
                            (f.batch, f.call),
                            Regenerated {
                                text,
                                blob_path: blobs.path_of(&f.observation_blob),
                            },
                        );
                    }
                }
                Event::BridgeRequestValidated(v) => {
                    if let Some(b) = &v.refused_request_blob {
                        if let Ok(body) = blobs.get(b) {
                            d.refused_bodies
                                .insert(e.seq, pretty(&String::from_utf8_lossy(&body)));
                        }
                    }
                    d.receipts.push((e.seq, v.clone()));
                }
                Event::SessionWritten(w) if w.role == SessionRole::Continued => {
                    continued_path = Some(PathBuf::from(&w.path));
                }
                _ => {}
            }
            d.events.push(TimelineEvent {
                seq: e.seq,
                at_ms: e.at_ms,
                name: e.event.name(),
                summary: crate::report::summary(&e.event),
                payload: crate::report::export::export_line(&e)["data"].clone(),
            });
            Ok(())
        });
        if let (Some(agent), Some(path)) = (agent, continued_path) {
            d.continued = Some(Continued {
                plan: parse_with(&agent, &path),
                path,
            });
        }
        d
    }

    /// The time of the first event named `name`.
    pub fn first(&self, name: &str) -> Option<u64> {
        self.events.iter().find(|e| e.name == name).map(|e| e.at_ms)
    }
    /// The time of the last event named `name`.
    pub fn last(&self, name: &str) -> Option<u64> {
        self.events
            .iter()
            .rev()
            .find(|e| e.name == name)
            .map(|e| e.at_ms)
    }
}

/// A JSON body pretty-printed (as is when it is not JSON).
fn pretty(s: &str) -> String {
    serde_json::from_str::<serde_json::Value>(s)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| s.to_string())
}

/// Parse the continued native session with the run's adapter.
fn parse_with(agent: &str, path: &Path) -> Result<Plan, String> {
    let registry = crate::adapters::registry();
    let entry = registry.get(agent).map_err(|e| e.to_string())?;
    (entry.make)()
        .parse_path(path)
        .map(|(plan, _)| plan)
        .map_err(|e| e.to_string())
}
