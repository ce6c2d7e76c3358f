//! The audit report as one self-contained HTML file (no external assets): summary, checks,
//! findings, per-call table with collapsible diffs, continuation steps, and the timeline.

use super::check::AuditReport;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub fn render(r: &AuditReport) -> String {
    let run = &r.run;
    let mut h = String::new();
    h.push_str("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>pvisor audit</title><style>");
    h.push_str("body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;font-size:.9em}.ok{color:#176d2c}.bad{color:#b00020}.warn{color:#9a6700}pre{background:#f6f8fa;padding:.6em;overflow:auto}code{font-size:.9em}summary{cursor:pointer}");
    h.push_str("</style></head><body>");
    h.push_str(&format!(
        "<h1>Audit of run <code id=\"run-id\">{}</code></h1>",
        esc(run["run_id"].as_str().unwrap_or("-"))
    ));
    h.push_str(&format!(
        "<p id=\"verdict\" class=\"{}\"><strong>{}</strong></p>",
        if r.ok { "ok" } else { "bad" },
        if r.ok {
            "Verdict: OK"
        } else {
            "Verdict: FAILED"
        }
    ));
    h.push_str(&format!(
        "<p>Journal <code>{}</code>, {} events, head <code>{}</code></p>",
        esc(&r.journal),
        r.events,
        esc(r.head.as_deref().unwrap_or("-"))
    ));
    h.push_str("<h2>Run</h2><table>");
    for k in [
        "agent",
        "after_step",
        "phase",
        "quality",
        "agent_status",
        "replayed_tool_calls",
        "prefix_model_turns",
        "continued_steps",
        "failure",
    ] {
        h.push_str(&format!(
            "<tr><th>{k}</th><td>{}</td></tr>",
            esc(&match &run[k] {
                serde_json::Value::String(s) => s.clone(),
                v => v.to_string(),
            })
        ));
    }
    h.push_str("</table><h2>Checks</h2><table id=\"checks\">");
    let c = &r.checks;
    for (k, v) in [
        ("integrity", &c.integrity),
        ("order", &c.order),
        ("budget", &c.budget),
        ("privacy", &c.privacy),
        ("bridge", &c.bridge),
        ("blobs", &c.blobs),
        ("result.json", &c.result_file),
    ] {
        let cls = if v == "ok" || v == "matches_fold" || v == "not_applicable" || v == "absent" {
            "ok"
        } else {
            "bad"
        };
        h.push_str(&format!(
            "<tr><th>{k}</th><td class=\"{cls}\">{}</td></tr>",
            esc(v)
        ));
    }
    h.push_str("</table>");
    if !r.findings.is_empty() {
        h.push_str("<h2>Findings</h2><ul id=\"findings\">");
        for f in &r.findings {
            h.push_str(&format!(
                "<li class=\"{}\">[{}] {}: {}{}</li>",
                if f.severity == "error" { "bad" } else { "warn" },
                esc(&f.severity),
                esc(&f.check),
                esc(&f.message),
                f.seq.map(|q| format!(" (seq {q})")).unwrap_or_default()
            ));
        }
        h.push_str("</ul>");
    }
    h.push_str("<h2>Replayed tool calls</h2><table id=\"calls\"><tr><th>batch</th><th>call</th><th>tool</th><th>call id</th><th>args</th><th>exit</th><th>ms</th><th>observation</th></tr>");
    for c in &r.calls {
        let obs = match &c.diff {
            Some(d) => format!(
                "<details><summary>{}</summary><pre>{}</pre></details>",
                esc(&c.observation),
                esc(d)
            ),
            None => esc(&c.observation),
        };
        h.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{obs}</td></tr>",
            c.batch,
            c.call,
            esc(&c.tool),
            esc(&c.call_id),
            esc(&c.args_digest[..c.args_digest.len().min(19)]),
            c.exit_code.map(|x| x.to_string()).unwrap_or_else(|| "-".into()),
            c.duration_ms.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
        ));
    }
    h.push_str("</table>");
    if !r.steps.is_empty() {
        h.push_str("<h2>Continuation steps</h2><table id=\"steps\"><tr><th>step</th><th>action digest</th><th>tools</th></tr>");
        for s in &r.steps {
            h.push_str(&format!(
                "<tr><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                s.n,
                esc(&s.action_digest),
                esc(&s.tools.join(", "))
            ));
        }
        h.push_str("</table>");
    }
    h.push_str("<h2>Timeline</h2><details id=\"timeline\"><summary>");
    h.push_str(&format!("{} events</summary><table><tr><th>seq</th><th>time</th><th>event</th><th>summary</th></tr>", r.timeline.len()));
    for t in &r.timeline {
        h.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            t["seq"],
            esc(t["at"].as_str().unwrap_or("")),
            esc(t["event"].as_str().unwrap_or("")),
            esc(t["summary"].as_str().unwrap_or(""))
        ));
    }
    h.push_str("</table></details></body></html>\n");
    h
}
