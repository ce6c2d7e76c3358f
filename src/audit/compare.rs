//! `pvisor journal diff A B`: two runs of the same session (two models continuing from one
//! boundary, a run before and after an edit of the trajectory, a run and its re-run on
//! another machine) side by side: where their replayed observations, their model requests
//! and their live actions first diverge, and how their outcomes differ.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use journal_format::Event;
use serde::Serialize;

use crate::fold::{self, ReplayState};
use crate::journal::{read_events, resolve_path, BlobStore, JournalError};

pub const DIFF_SCHEMA: &str = "pvisor.journal-diff/v1";

/// One run as the diff sees it.
struct Side {
    journal: PathBuf,
    state: ReplayState,
    blobs: BlobStore,
    /// Main model requests: n -> request digest.
    requests: BTreeMap<u64, String>,
}

fn load(path: &Path) -> Result<Side, JournalError> {
    let journal = resolve_path(path)?;
    let state_dir = journal.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut state = ReplayState::default();
    let mut requests = BTreeMap::new();
    read_events(&journal, |e| {
        if let Event::BridgeRequestValidated(v) = &e.event {
            if !v.side {
                requests
                    .entry(v.n)
                    .or_insert_with(|| v.request_digest.clone());
            }
        }
        // A journal whose order the fold rejects is compared up to that event.
        let _ = fold::apply(&mut state, &e);
        Ok(())
    })?;
    Ok(Side {
        journal,
        blobs: BlobStore::new(&state_dir),
        state,
        requests,
    })
}

/// Where the two runs first part, for one kind of thing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Divergence {
    /// `observation` | `request` | `action` | `tool_call`
    pub kind: String,
    /// `batch 3 call 0`, `request 2`, `live step 1`.
    pub at: String,
    pub a: Option<String>,
    pub b: Option<String>,
    /// For observations: a line diff of the two texts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDiff {
    pub schema_version: String,
    pub a: String,
    pub b: String,
    /// Whether both are runs of the same source file (same bytes).
    pub same_source: bool,
    /// Fields of the two results that differ: name -> [a, b].
    pub outcome: BTreeMap<String, [serde_json::Value; 2]>,
    pub observations_compared: u64,
    pub observations_equal: u64,
    pub first_observation: Option<Divergence>,
    pub first_tool_call: Option<Divergence>,
    pub requests_compared: u64,
    pub first_request: Option<Divergence>,
    pub actions_compared: u64,
    pub first_action: Option<Divergence>,
}

impl RunDiff {
    /// Nothing differs.
    pub fn same(&self) -> bool {
        self.outcome.is_empty()
            && self.first_observation.is_none()
            && self.first_tool_call.is_none()
            && self.first_request.is_none()
            && self.first_action.is_none()
    }
}

fn observation_text(side: &Side, blob: &str) -> Option<String> {
    let b = side.blobs.get(blob).ok()?;
    Some(
        serde_json::from_slice::<serde_json::Value>(&b)
            .ok()
            .and_then(|v| v["text"].as_str().map(String::from))
            .unwrap_or_else(|| String::from_utf8_lossy(&b).into_owned()),
    )
}

fn line_diff(a: &str, b: &str) -> String {
    similar::TextDiff::configure()
        .timeout(std::time::Duration::from_millis(500))
        .diff_lines(a, b)
        .unified_diff()
        .context_radius(3)
        .header("a", "b")
        .to_string()
}

/// Compare two runs (state directories or journals).
pub fn diff_runs(a: &Path, b: &Path) -> Result<RunDiff, JournalError> {
    let (a, b) = (load(a)?, load(b)?);
    let same_source = match (&a.state.parsed, &b.state.parsed) {
        (Some(x), Some(y)) => x.source_sha256 == y.source_sha256,
        _ => false,
    };
    // outcomes: every top-level result field but those that name the run itself
    let (ra, rb) = (
        serde_json::to_value(fold::derive(&a.state)).unwrap_or_default(),
        serde_json::to_value(fold::derive(&b.state)).unwrap_or_default(),
    );
    let mut outcome = BTreeMap::new();
    for k in [
        "phase",
        "quality",
        "agent_status",
        "after_step",
        "replayed_tool_calls",
        "prefix_model_turns",
        "continued_steps",
        "failure",
    ] {
        if ra[k] != rb[k] {
            outcome.insert(k.to_string(), [ra[k].clone(), rb[k].clone()]);
        }
    }
    for k in ["observations", "bridge"] {
        if ra["metadata"][k] != rb["metadata"][k] {
            outcome.insert(
                format!("metadata.{k}"),
                [ra["metadata"][k].clone(), rb["metadata"][k].clone()],
            );
        }
    }
    // replayed calls, in (batch, call) order
    let (mut compared, mut equal) = (0, 0);
    let (mut first_observation, mut first_tool_call) = (None, None);
    for (key, ca) in &a.state.calls {
        let Some(cb) = b.state.calls.get(key) else {
            continue;
        };
        let at = format!("batch {} call {}", key.0, key.1);
        if first_tool_call.is_none() && (ca.tool != cb.tool || ca.args_digest != cb.args_digest) {
            first_tool_call = Some(Divergence {
                kind: "tool_call".into(),
                at: at.clone(),
                a: Some(format!("{} {}", ca.tool, ca.args_digest)),
                b: Some(format!("{} {}", cb.tool, cb.args_digest)),
                diff: None,
            });
        }
        let (Some(fa), Some(fb)) = (&ca.finished, &cb.finished) else {
            continue;
        };
        compared += 1;
        if fa.observation_digest == fb.observation_digest {
            equal += 1;
            continue;
        }
        if first_observation.is_none() {
            let (ta, tb) = (
                observation_text(&a, &fa.observation_blob),
                observation_text(&b, &fb.observation_blob),
            );
            first_observation = Some(Divergence {
                kind: "observation".into(),
                at,
                a: Some(fa.observation_digest.clone()),
                b: Some(fb.observation_digest.clone()),
                diff: match (&ta, &tb) {
                    (Some(x), Some(y)) => Some(line_diff(x, y)),
                    _ => None,
                },
            });
        }
    }
    // main model requests by number; a request only one run sent is a divergence too
    let mut first_request = None;
    let mut requests_compared = 0;
    let ns: std::collections::BTreeSet<u64> = a
        .requests
        .keys()
        .chain(b.requests.keys())
        .copied()
        .collect();
    for n in ns {
        let (x, y) = (a.requests.get(&n), b.requests.get(&n));
        if x.is_some() && y.is_some() {
            requests_compared += 1;
        }
        if x != y {
            first_request = Some(Divergence {
                kind: "request".into(),
                at: format!("request {n}"),
                a: x.cloned(),
                b: y.cloned(),
                diff: None,
            });
            break;
        }
    }
    // live steps
    let mut first_action = None;
    let mut actions_compared = 0;
    for i in 0..a.state.steps.len().max(b.state.steps.len()) {
        let (x, y) = (a.state.steps.get(i), b.state.steps.get(i));
        if x.is_some() && y.is_some() {
            actions_compared += 1;
        }
        let show = |s: Option<&journal_format::event::ContinuationStep>| {
            s.map(|s| format!("{} [{}]", s.action_digest, s.tools.join(", ")))
        };
        if x.map(|s| &s.action_digest) != y.map(|s| &s.action_digest) {
            first_action = Some(Divergence {
                kind: "action".into(),
                at: format!("live step {}", i + 1),
                a: show(x),
                b: show(y),
                diff: None,
            });
            break;
        }
    }
    Ok(RunDiff {
        schema_version: DIFF_SCHEMA.into(),
        a: a.journal.display().to_string(),
        b: b.journal.display().to_string(),
        same_source,
        outcome,
        observations_compared: compared,
        observations_equal: equal,
        first_observation,
        first_tool_call,
        requests_compared,
        first_request,
        actions_compared,
        first_action,
    })
}

fn divergence_text(title: &str, d: &Option<Divergence>, compared: u64, s: &mut String) {
    match d {
        None => s.push_str(&format!("{title}: same ({compared} compared)\n")),
        Some(d) => {
            s.push_str(&format!("{title}: first differ at {}\n", d.at));
            s.push_str(&format!("  a: {}\n", d.a.as_deref().unwrap_or("(none)")));
            s.push_str(&format!("  b: {}\n", d.b.as_deref().unwrap_or("(none)")));
            if let Some(x) = &d.diff {
                for l in x.lines() {
                    s.push_str(&format!("  {l}\n"));
                }
            }
        }
    }
}

/// The diff as text.
pub fn text(d: &RunDiff) -> String {
    let mut s = format!("a: {}\nb: {}\n", d.a, d.b);
    if !d.same_source {
        s.push_str("note: the two runs replayed different source files\n");
    }
    if d.outcome.is_empty() {
        s.push_str("outcome: same\n");
    } else {
        s.push_str("outcome:\n");
        for (k, [x, y]) in &d.outcome {
            s.push_str(&format!("  {k}: {x} | {y}\n"));
        }
    }
    s.push_str(&format!(
        "observations: {} of {} equal\n",
        d.observations_equal, d.observations_compared
    ));
    divergence_text(
        "tool calls",
        &d.first_tool_call,
        d.observations_compared,
        &mut s,
    );
    divergence_text(
        "observations",
        &d.first_observation,
        d.observations_compared,
        &mut s,
    );
    divergence_text(
        "model requests",
        &d.first_request,
        d.requests_compared,
        &mut s,
    );
    divergence_text("live actions", &d.first_action, d.actions_compared, &mut s);
    s.push_str(if d.same() {
        "verdict: the runs are the same\n"
    } else {
        "verdict: the runs differ\n"
    });
    s
}

/// The diff as a self-contained HTML page.
pub fn html(d: &RunDiff) -> String {
    use super::html::esc;
    let mut h = format!(
        "<header class=\"top\"><h1>Journal diff</h1><p id=\"verdict\" class=\"verdict {}\">{}</p></header><main><dl class=\"kv\"><dt>a</dt><dd><code>{}</code></dd><dt>b</dt><dd><code>{}</code></dd><dt>source</dt><dd>{}</dd></dl>",
        if d.same() { "ok" } else { "bad" },
        if d.same() { "The runs are the same" } else { "The runs differ" },
        esc(&d.a),
        esc(&d.b),
        if d.same_source { "the same file" } else { "<span class=\"warn\">different files</span>" }
    );
    h.push_str("<section id=\"outcome\"><h2>Outcome</h2>");
    if d.outcome.is_empty() {
        h.push_str("<p class=\"ok\">same</p>");
    } else {
        h.push_str("<table><tr><th>field</th><th>a</th><th>b</th></tr>");
        for (k, [x, y]) in &d.outcome {
            h.push_str(&format!(
                "<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code></td></tr>",
                esc(k),
                esc(&x.to_string()),
                esc(&y.to_string())
            ));
        }
        h.push_str("</table>");
    }
    h.push_str("</section>");
    for (id, title, dv, n) in [
        (
            "tool-calls",
            "Tool calls",
            &d.first_tool_call,
            d.observations_compared,
        ),
        (
            "observations",
            "Observations",
            &d.first_observation,
            d.observations_compared,
        ),
        (
            "requests",
            "Model requests",
            &d.first_request,
            d.requests_compared,
        ),
        (
            "actions",
            "Live actions",
            &d.first_action,
            d.actions_compared,
        ),
    ] {
        h.push_str(&format!("<section id=\"{id}\"><h2>{title}</h2>"));
        match dv {
            None => h.push_str(&format!("<p class=\"ok\">same ({n} compared)</p>")),
            Some(x) => {
                h.push_str(&format!(
                    "<p class=\"bad\">first differ at <b>{}</b></p><div class=\"sbs\"><div><h4>a</h4><pre>{}</pre></div><div><h4>b</h4><pre>{}</pre></div></div>",
                    esc(&x.at),
                    esc(x.a.as_deref().unwrap_or("(none)")),
                    esc(x.b.as_deref().unwrap_or("(none)"))
                ));
                if let Some(t) = &x.diff {
                    h.push_str(&format!("<pre class=\"diff\">{}</pre>", esc(t)));
                }
            }
        }
        h.push_str("</section>");
    }
    h.push_str("</main>");
    super::html::document("pvisor journal diff", &h)
}
