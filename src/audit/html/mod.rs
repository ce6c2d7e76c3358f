//! The audit report of one run as one self-contained HTML page (no external asset, works from
//! `file://`): a header (verdict, agent, boundary, mode, quality, agent status, time per
//! phase), the checks and the hash chain, findings linked to the events that prove them, the
//! transcript up to the boundary with recorded and regenerated observations side by side and
//! their character diff, the boundary, the continuation, the bridge's receipts, refused
//! requests with their first difference and kept body, and a filterable timeline of every
//! event with its payload.

mod detail;
mod diff;
pub mod fleet;
mod page;
mod transcript;

use detail::Detail;
use page::{block, chip, short};
pub use page::{document, esc};

use super::check::AuditReport;

/// The page of one run. Reads the run's journal and blobs again for what the report itself
/// does not carry (payloads, arguments, observations).
pub fn render(r: &AuditReport) -> String {
    let mut d = Detail::load(std::path::Path::new(&r.journal));
    match r.calls.collect() {
        Ok(calls) => d.calls = calls,
        Err(e) => d.calls_error = Some(e.to_string()),
    }
    render_with(r, &d)
}

fn render_with(r: &AuditReport, d: &Detail) -> String {
    let run_id = r.run["run_id"].as_str().unwrap_or("-");
    let mut b = String::new();
    b.push_str(&header(r, run_id));
    b.push_str("<main>");
    b.push_str(&summary(r, d));
    b.push_str(&checks(r));
    b.push_str(&findings(r));
    b.push_str(&transcript::prefix(r, d));
    b.push_str(&boundary(r));
    b.push_str(&transcript::continuation(r, d));
    b.push_str(&receipts(r, d));
    b.push_str(&refused(r, d));
    b.push_str(&recovery(r));
    b.push_str(&timeline(d));
    b.push_str("</main>");
    page::document(&format!("pvisor audit · {run_id}"), &b)
}

fn text_of(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "-".into(),
        serde_json::Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

fn header(r: &AuditReport, run_id: &str) -> String {
    format!(
        "<header class=\"top\"><h1>Run <code id=\"run-id\">{}</code></h1><p id=\"verdict\" class=\"verdict {}\">{}</p><nav><a href=\"#summary\">summary</a><a href=\"#checks\">checks</a><a href=\"#findings\">findings</a><a href=\"#transcript\">transcript</a><a href=\"#boundary\">boundary</a><a href=\"#continuation\">continuation</a><a href=\"#receipts\">bridge receipts</a><a href=\"#timeline\">timeline</a></nav></header>",
        esc(run_id),
        if r.ok { "ok" } else { "bad" },
        if r.ok {
            "Verdict: OK — every check passed"
        } else {
            "Verdict: FAILED — see the findings"
        }
    )
}

fn summary(r: &AuditReport, d: &Detail) -> String {
    let run = &r.run;
    let agent = &run["agent"];
    let agent_text = match agent {
        serde_json::Value::Object(_) => format!(
            "{} {}",
            text_of(&agent["type"]),
            agent["version"].as_str().unwrap_or("")
        ),
        _ => d
            .events
            .iter()
            .find(|e| e.name == "run_requested")
            .map(|e| text_of(&e.payload["agent"]))
            .unwrap_or_else(|| "-".into()),
    };
    let failure = match &run["failure"] {
        serde_json::Value::Object(f) => format!(
            "{}: {}",
            f.get("category").map(text_of).unwrap_or_default(),
            f.get("message").map(text_of).unwrap_or_default()
        ),
        _ => String::new(),
    };
    let max = d
        .events
        .iter()
        .find(|e| e.name == "boundary_validated")
        .and_then(|e| e.payload["max_boundary"].as_u64());
    let mut h = String::from("<section id=\"summary\"><h2>Summary</h2><dl class=\"kv\">");
    let mut kv = |k: &str, v: String| {
        h.push_str(&format!("<dt>{k}</dt><dd>{v}</dd>"));
    };
    kv("agent", esc(&agent_text));
    kv(
        "boundary",
        format!(
            "after batch {}{} · {} replayed tool calls · {} model turns in the prefix",
            text_of(&run["after_step"]),
            max.map(|m| format!(" (of at most {m})"))
                .unwrap_or_default(),
            text_of(&run["replayed_tool_calls"]),
            text_of(&run["prefix_model_turns"])
        ),
    );
    kv("mode", esc(&text_of(&run["metadata"]["mode"])));
    kv("phase", esc(&text_of(&run["phase"])));
    kv("quality", esc(&text_of(&run["quality"])));
    kv("agent status", esc(&text_of(&run["agent_status"])));
    kv("live steps", esc(&text_of(&run["continued_steps"])));
    if !failure.is_empty() {
        kv(
            "failure",
            format!("<span class=\"bad\">{}</span>", esc(&failure)),
        );
    }
    kv("timings", phase_times(r, d));
    h.push_str("</dl></section>");
    h
}

/// Time spent per phase, from the events' timestamps.
fn phase_times(r: &AuditReport, d: &Detail) -> String {
    let spans = [
        (
            "parse",
            d.first("run_requested"),
            d.last("boundary_validated"),
        ),
        ("replay", d.first("batch_started"), d.last("batch_finished")),
        (
            "rebuild",
            d.last("batch_finished").or(d.last("boundary_validated")),
            d.first("session_written"),
        ),
        (
            "continuation",
            d.first("continuation_started"),
            d.last("agent_exited"),
        ),
    ];
    let mut parts: Vec<String> = spans
        .iter()
        .filter_map(|(n, a, b)| match (a, b) {
            (Some(a), Some(b)) if b >= a => Some(format!("{n} {} ms", b - a)),
            _ => None,
        })
        .collect();
    if let Some(t) = r.duration_ms {
        parts.push(format!("total {t} ms"));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        esc(&parts.join(" · "))
    }
}

fn checks(r: &AuditReport) -> String {
    let c = &r.checks;
    let mut h = String::from("<section><h2>Checks</h2><table id=\"checks\">");
    for (k, v, what) in [
        (
            "integrity",
            &c.integrity,
            "header, checksums, sequence and hash chain of every record",
        ),
        ("order", &c.order, "the events follow the phase machine"),
        (
            "budget",
            &c.budget,
            "live steps within the budget; every batch up to the boundary replayed",
        ),
        (
            "privacy",
            &c.privacy,
            "neither the boundary prompt nor the API key is stored",
        ),
        (
            "bridge",
            &c.bridge,
            "every model request validated; the first ends at the boundary",
        ),
        (
            "blobs",
            &c.blobs,
            "every observation, diff and checkpoint blob matches its digest",
        ),
        (
            "result.json",
            &c.result_file,
            "the result file equals the result folded from the journal",
        ),
    ] {
        let cls = match v.as_str() {
            "ok" | "matches_fold" | "not_applicable" | "absent" => "ok",
            "not_checked" => "mut",
            _ => "bad",
        };
        h.push_str(&format!(
            "<tr><th>{k}</th><td class=\"{cls}\">{}</td><td class=\"mut\">{what}</td></tr>",
            esc(v)
        ));
    }
    h.push_str(&format!(
        "</table><p id=\"chain\">Hash chain: {} events, head <code>{}</code> — {}</p></section>",
        r.events,
        esc(r.head.as_deref().unwrap_or("-")),
        match c.integrity.as_str() {
            "ok" => "<span class=\"ok\">intact</span>",
            "torn_tail" =>
                "<span class=\"warn\">intact up to a torn tail (recovered on resume)</span>",
            _ => "<span class=\"bad\">broken</span>",
        }
    ));
    h
}

fn findings(r: &AuditReport) -> String {
    let mut h = String::from("<section id=\"findings\"><h2>Findings</h2>");
    if r.findings.is_empty() {
        h.push_str("<p class=\"ok\">None.</p></section>");
        return h;
    }
    h.push_str("<ul>");
    for f in &r.findings {
        let evidence = f
            .seq
            .map(|q| format!(" — <a href=\"#ev-{q}\">event {q}</a>"))
            .unwrap_or_default();
        let refused = if f.check == "bridge" {
            r.refused_requests
                .iter()
                .find(|x| Some(x.seq) == f.seq)
                .map(|x| {
                    format!(
                        " — <a href=\"#refused-{}\">refused request {}</a>",
                        x.seq, x.n
                    )
                })
                .unwrap_or_default()
        } else {
            String::new()
        };
        h.push_str(&format!(
            "<li class=\"{}\">{} <b>{}</b>: {}{evidence}{refused}</li>",
            if f.severity == "error" { "bad" } else { "warn" },
            chip(
                &f.severity,
                if f.severity == "error" { "bad" } else { "warn" }
            ),
            esc(&f.check),
            esc(&f.message)
        ));
    }
    h.push_str("</ul></section>");
    h
}

fn boundary(r: &AuditReport) -> String {
    format!(
        "<div id=\"boundary\">Boundary — after batch {}: the replay ends here; what follows is the agent's own continuation</div>",
        text_of(&r.run["after_step"])
    )
}

fn receipts(r: &AuditReport, d: &Detail) -> String {
    let mut h = String::from("<section id=\"receipts\"><h2>Bridge receipts</h2>");
    if d.receipts.is_empty() {
        h.push_str("<p class=\"mut\">No model request went through the bridge.</p></section>");
        return h;
    }
    h.push_str("<table><tr><th>event</th><th>request</th><th>outcome</th><th>prefix digest</th><th>removed transport items</th><th>boundary prompt injected</th></tr>");
    for (seq, v) in &d.receipts {
        let outcome = if v.ok {
            chip("validated", "ok")
        } else if v.budget_exhausted {
            chip("beyond the step budget", "warn")
        } else {
            format!(
                "{} <a href=\"#refused-{seq}\">why</a>",
                chip("refused", "bad")
            )
        };
        let removed = if !v.removed_items.is_empty() {
            v.removed_items
                .iter()
                .map(|i| format!("{} <code>{}</code>", esc(&i.kind), esc(&short(&i.digest))))
                .collect::<Vec<_>>()
                .join("<br>")
        } else if !v.removed.is_empty() {
            esc(&v.removed.join(", "))
        } else {
            "-".into()
        };
        h.push_str(&format!(
            "<tr><td><a href=\"#ev-{seq}\">{seq}</a></td><td>{}{}</td><td>{outcome}</td><td><code>{}</code></td><td>{removed}</td><td>{}</td></tr>",
            v.n,
            if v.side { " (side)" } else { "" },
            esc(&short(&v.prefix_digest)),
            if v.boundary_prompt_injected { "yes" } else { "no" }
        ));
    }
    h.push_str(&format!(
        "</table><p class=\"mut\">first request ends at the boundary: {}</p></section>",
        esc(&text_of(
            &r.run["metadata"]["bridge"]["first_request_ends_at_boundary"]
        ))
    ));
    h
}

fn refused(r: &AuditReport, d: &Detail) -> String {
    if r.refused_requests.is_empty() {
        return String::new();
    }
    let mut h = String::from("<section id=\"refused\"><h2>Refused requests</h2>");
    for x in &r.refused_requests {
        h.push_str(&format!(
            "<div class=\"refused\" id=\"refused-{}\"><p><b>Request {}</b> (event <a href=\"#ev-{}\">{}</a>): {}</p>",
            x.seq,
            x.n,
            x.seq,
            x.seq,
            esc(&x.reason)
        ));
        if let Some(diff) = &x.difference {
            h.push_str("<h4>first difference from the expected request</h4>");
            h.push_str(&block(diff, "difference", None));
        }
        if let Some(body) = d.refused_bodies.get(&x.seq) {
            h.push_str(&format!(
                "<details><summary>the request as the agent sent it (secrets redacted), {} bytes</summary>",
                body.len()
            ));
            h.push_str(&block(body, "body", x.request_path.as_deref()));
            h.push_str("</details>");
        }
        if let Some(p) = &x.request_path {
            h.push_str(&format!(
                "<p class=\"mut\">kept at <code>{}</code></p>",
                esc(p)
            ));
        }
        h.push_str(&format!(
            "<p class=\"mut\">hint: {}</p></div>",
            esc(&x.hint)
        ));
    }
    h.push_str("</section>");
    h
}

/// Restores, neutralized drift and removed items: what the run did to stay exact.
fn recovery(r: &AuditReport) -> String {
    let mut h = String::new();
    if !r.restores.is_empty() {
        h.push_str("<section id=\"restores\"><h2>Workspace restores</h2><table><tr><th>before</th><th>files written</th><th>paths removed</th><th>checkpoint</th></tr>");
        for x in &r.restores {
            let at = if x.batch == 0 {
                format!("live step {}", x.call)
            } else {
                format!("batch {} call {}", x.batch, x.call)
            };
            h.push_str(&format!(
                "<tr><td>{at}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
                x.written,
                x.removed,
                esc(&short(&x.manifest_blob))
            ));
        }
        h.push_str("</table></section>");
    }
    if !r.drift.is_empty() {
        h.push_str("<section id=\"drift\"><h2>Host and date snapshots set to live values</h2><table><tr><th>fact</th><th>recorded</th><th>live</th></tr>");
        for n in &r.drift {
            h.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&n.fact),
                esc(&n.recorded),
                esc(&n.live)
            ));
        }
        h.push_str("</table></section>");
    }
    h
}

fn timeline(d: &Detail) -> String {
    let start = d.events.first().map(|e| e.at_ms).unwrap_or(0);
    let mut names: Vec<&str> = d.events.iter().map(|e| e.name).collect();
    names.sort();
    names.dedup();
    let mut h = format!(
        "<section><h2>Timeline</h2><div id=\"timeline-controls\"><input id=\"tl-q\" type=\"search\" placeholder=\"filter events (text)\"> <select id=\"tl-kind\"><option value=\"\">every event</option>{}</select> <span id=\"tl-count\" class=\"mut\"></span></div><table id=\"timeline\"><thead><tr><th>seq</th><th>+ms</th><th>event</th><th>summary and payload</th></tr></thead><tbody>",
        names
            .iter()
            .map(|n| format!("<option>{n}</option>"))
            .collect::<String>()
    );
    for e in &d.events {
        let payload = serde_json::to_string_pretty(&e.payload).unwrap_or_default();
        h.push_str(&format!(
            "<tr id=\"ev-{}\" data-event=\"{}\"><td>{}</td><td title=\"{}\">{}</td><td>{}</td><td>{}<details><summary>payload</summary>{}</details></td></tr>",
            e.seq,
            e.name,
            e.seq,
            esc(&crate::report::export::rfc3339(e.at_ms)),
            e.at_ms.saturating_sub(start),
            e.name,
            esc(&e.summary),
            block(&payload, "payload", None)
        ));
    }
    h.push_str("</tbody></table></section>");
    h
}
