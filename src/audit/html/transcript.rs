//! The transcript: the replayed prefix turn by turn (each call's arguments, the recorded and
//! the regenerated observation side by side, their diff), the boundary, and the
//! continuation as the agent's own session recorded it.

use std::collections::BTreeMap;

use super::detail::Detail;
use super::diff;
use super::page::{block, chip, esc};
use crate::audit::check::{AuditReport, CallReport};
use crate::kit::{Batch, Plan};

fn status_class(observation: &str) -> &'static str {
    match observation {
        "equal" | "equal_except_dynamic" => "ok",
        "differs" => "bad",
        _ => "warn",
    }
}

fn args(input: &serde_json::Value) -> String {
    let text = serde_json::to_string_pretty(input).unwrap_or_default();
    block(&text, "args", None)
}

/// The replayed prefix: batches 1..=after_step, grouped by model turn.
pub fn prefix(r: &AuditReport, d: &Detail) -> String {
    let mut h = String::from("<section id=\"transcript\"><h2>Transcript up to the boundary</h2>");
    if let Some(e) = &d.calls_error {
        h.push_str(&format!(
            "<p class=\"warn\">The call reports could not be read again: {}</p>",
            esc(e)
        ));
    }
    let calls: BTreeMap<(u64, u64), &CallReport> =
        d.calls.iter().map(|c| ((c.batch, c.call), c)).collect();
    let after = r.run["after_step"].as_u64().unwrap_or(0);
    let Some(plan) = &d.plan else {
        h.push_str("<p class=\"warn\">The plan blob is not readable: only the journal's per-call summary is shown.</p>");
        for c in &d.calls {
            h.push_str(&call(c.batch, c.call, &c.tool, None, None, Some(c), d));
        }
        h.push_str("</section>");
        return h;
    };
    let mut turn = 0;
    for b in plan.batches.range(0..after as usize) {
        let b = match b {
            Ok(b) => b,
            Err(e) => {
                h.push_str(&format!("<p class=\"mut\">{}</p>", esc(&e.to_string())));
                break;
            }
        };
        if b.model_turn != turn {
            if turn != 0 {
                h.push_str("</div>");
            }
            turn = b.model_turn;
            h.push_str(&format!(
                "<div class=\"turn\" id=\"turn-{turn}\"><h3>Model turn {turn}</h3>"
            ));
        }
        h.push_str(&format!(
            "<p class=\"mut\">batch {} · {} call{} · <code>{}</code></p>",
            b.index,
            b.calls.len(),
            if b.calls.len() == 1 { "" } else { "s" },
            esc(&locator(&b))
        ));
        for (i, tc) in b.calls.iter().enumerate() {
            let key = (b.index as u64, i as u64);
            h.push_str(&call(
                key.0,
                key.1,
                &tc.tool,
                Some(&tc.input),
                tc.original.as_ref().map(|o| (o.text.as_str(), o.is_error)),
                calls.get(&key).copied(),
                d,
            ));
        }
    }
    if turn != 0 {
        h.push_str("</div>");
    }
    if after == 0 {
        h.push_str("<p class=\"mut\">No batch is replayed (boundary 0).</p>");
    }
    h.push_str("</section>");
    h
}

fn locator(b: &Batch) -> String {
    serde_json::to_value(&b.locator)
        .ok()
        .map(|v| match v {
            serde_json::Value::String(s) => s,
            serde_json::Value::Object(m) => m
                .iter()
                .map(|(k, v)| match v {
                    serde_json::Value::String(s) => format!("{k} {s}"),
                    v => format!("{k} {v}"),
                })
                .collect::<Vec<_>>()
                .join(", "),
            v => v.to_string(),
        })
        .unwrap_or_default()
}

/// One replayed call.
fn call(
    batch: u64,
    n: u64,
    tool: &str,
    input: Option<&serde_json::Value>,
    recorded: Option<(&str, bool)>,
    report: Option<&CallReport>,
    d: &Detail,
) -> String {
    let status = report.map(|c| c.observation.as_str()).unwrap_or("not_run");
    let mut h = format!(
        "<div class=\"call {status}\" id=\"call-{batch}-{n}\"><div><strong>{}</strong> {}",
        esc(tool),
        chip(&status.replace('_', " "), status_class(status))
    );
    if let Some(c) = report {
        h.push_str(&format!(" <code class=\"mut\">{}</code>", esc(&c.call_id)));
        if let Some(x) = c.exit_code {
            h.push_str(&format!(" · exit {x}"));
        }
        if let Some(e) = c.is_error {
            h.push_str(&format!(
                " · is_error {}",
                if e {
                    "<b class=\"bad\">true</b>"
                } else {
                    "false"
                }
            ));
        }
        if let Some(ms) = c.duration_ms {
            h.push_str(&format!(" · {ms} ms"));
        }
        if c.starts > 1 {
            h.push_str(&format!(
                " · <span class=\"warn\">started {} times (re-run after an interruption)</span>",
                c.starts
            ));
        }
    }
    h.push_str("</div>");
    if let Some(i) = input {
        h.push_str("<details class=\"args\"><summary>arguments</summary>");
        h.push_str(&args(i));
        h.push_str("</details>");
    }
    if let Some(inner) = d.inner.get(&(batch, n)) {
        h.push_str(&format!(
            "<h4>the {} tool call(s) this call's code made</h4><ol class=\"inner\">",
            inner.len()
        ));
        for (i, body) in inner {
            h.push_str(&format!(
                "<li><strong>{}</strong> {} · {} ms",
                esc(&i.tool),
                if i.ok {
                    chip("resolved", "ok")
                } else {
                    chip("rejected", "warn")
                },
                i.duration_ms
            ));
            if !i.touched.is_empty() {
                h.push_str(&format!(" · wrote {}", esc(&i.touched.join(", "))));
            }
            if let Some(b) = body {
                h.push_str("<details class=\"args\"><summary>input and result</summary>");
                h.push_str(&args(&b["input"]));
                h.push_str(&block(b["result"].as_str().unwrap_or(""), "obs", None));
                h.push_str("</details>");
            }
            h.push_str("</li>");
        }
        h.push_str("</ol>");
    }
    let regenerated = d.regenerated.get(&(batch, n));
    match (recorded, regenerated) {
        (Some((rec, rec_err)), Some(reg)) if rec == reg.text => {
            h.push_str(&format!(
                "<h4 class=\"mut\">observation (identical to the recorded one{})</h4>",
                if rec_err { ", flagged as an error" } else { "" }
            ));
            h.push_str(&block(
                rec,
                "obs",
                Some(&reg.blob_path.display().to_string()),
            ));
        }
        (Some((rec, _)), Some(reg)) => {
            h.push_str("<div class=\"sbs\"><div><h4>recorded</h4>");
            h.push_str(&block(rec, "obs recorded", None));
            h.push_str("</div><div><h4>regenerated</h4>");
            h.push_str(&block(
                &reg.text,
                "obs regenerated",
                Some(&reg.blob_path.display().to_string()),
            ));
            h.push_str("</div></div><h4>difference</h4>");
            h.push_str(&diff::render(
                rec,
                &reg.text,
                status == "equal_except_dynamic",
            ));
        }
        (None, Some(reg)) => {
            h.push_str("<h4 class=\"mut\">regenerated (no recorded observation)</h4>");
            h.push_str(&block(
                &reg.text,
                "obs regenerated",
                Some(&reg.blob_path.display().to_string()),
            ));
        }
        (Some((rec, _)), None) => {
            h.push_str("<h4 class=\"mut\">recorded (not regenerated in this run)</h4>");
            h.push_str(&block(rec, "obs recorded", None));
        }
        (None, None) => {}
    }
    if let Some(c) = report {
        for dcs in &c.in_doubt_decisions {
            h.push_str(&format!(
                "<p class=\"warn\">in-doubt decision: {}</p>",
                esc(&serde_json::to_string(dcs).unwrap_or_default())
            ));
        }
    }
    h.push_str("</div>");
    h
}

/// The continuation: live steps as the journal counts them, and the agent's own record of
/// what it did after the boundary.
pub fn continuation(r: &AuditReport, d: &Detail) -> String {
    let mut h = String::from("<section id=\"continuation\"><h2>Continuation</h2>");
    if r.steps.is_empty() && d.continued.is_none() && d.receipts.is_empty() {
        h.push_str("<p class=\"mut\">This run did not continue with the agent.</p></section>");
        return h;
    }
    h.push_str(
        "<table id=\"steps\"><tr><th>live step</th><th>tools</th><th>action digest</th></tr>",
    );
    for s in &r.steps {
        h.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            s.n,
            esc(&s.tools.join(", ")),
            esc(&s.action_digest)
        ));
    }
    h.push_str("</table>");
    if !r.superseded_steps.is_empty() {
        h.push_str(&format!("<p class=\"warn\">{} live step(s) of an interrupted attempt were asked again and are superseded (kept in the journal, not counted).</p>", r.superseded_steps.len()));
    }
    if let Some(c) = &d.continued {
        h.push_str(&format!(
            "<h3>After the boundary, as the agent recorded it</h3><p class=\"mut\">from <code>{}</code></p>",
            esc(&c.path.display().to_string())
        ));
        match &c.plan {
            Ok(plan) => h.push_str(&continued_batches(plan, r)),
            Err(e) => h.push_str(&format!(
                "<p class=\"warn\">the continued session could not be read: {}</p>",
                esc(e)
            )),
        }
    }
    h.push_str("</section>");
    h
}

fn continued_batches(plan: &Plan, r: &AuditReport) -> String {
    let after = r.run["after_step"].as_u64().unwrap_or(0) as usize;
    let live = match plan
        .batches
        .range(after..plan.batches.len())
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(live) => live,
        Err(e) => return format!("<p class=\"mut\">{}</p>", esc(&e.to_string())),
    };
    if live.is_empty() {
        return "<p class=\"mut\">The agent made no tool call after the boundary.</p>".into();
    }
    let mut h = String::new();
    for b in live {
        h.push_str(&format!(
            "<div class=\"turn\" id=\"live-turn-{}\"><h3>Model turn {} <span class=\"mut\">(live)</span></h3>",
            b.model_turn, b.model_turn
        ));
        for tc in &b.calls {
            h.push_str(&format!(
                "<div class=\"call live\"><div><strong>{}</strong> <code class=\"mut\">{}</code></div>",
                esc(&tc.tool),
                esc(&tc.call_id)
            ));
            h.push_str("<details class=\"args\"><summary>arguments</summary>");
            h.push_str(&args(&tc.input));
            h.push_str("</details>");
            match &tc.original {
                Some(o) => {
                    h.push_str(&format!(
                        "<h4 class=\"mut\">observation{}</h4>",
                        if o.is_error { " (error)" } else { "" }
                    ));
                    h.push_str(&block(&o.text, "obs", None));
                }
                None => h.push_str("<p class=\"mut\">no result recorded</p>"),
            }
            h.push_str("</div>");
        }
        h.push_str("</div>");
    }
    h
}
