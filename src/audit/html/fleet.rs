//! The fleet report as one HTML page: counts by phase, quality, agent status and failure
//! category; observation-equality and first-request-equality rates per agent and per
//! boundary; the slowest runs; every run with its verdict and a link to its own page.

use std::path::PathBuf;

use super::page::{chip, document, esc};
use crate::audit::check::AuditReport;

/// `summary`: [`crate::audit::fleet::summarize`]'s value. `links`: for each run (same order as
/// `all`), the relative address of its own page, when the pages were written.
pub fn render(
    root: &str,
    summary: &serde_json::Value,
    all: &[(PathBuf, Result<AuditReport, String>)],
    links: &[Option<String>],
) -> String {
    let mut h = format!(
        "<header class=\"top\"><h1>Fleet audit of <code>{}</code></h1><p id=\"verdict\" class=\"verdict {}\">{} runs, {} pass every check, {} unreadable</p><nav><a href=\"#counts\">counts</a><a href=\"#rates\">rates</a><a href=\"#slowest\">slowest</a><a href=\"#runs\">runs</a></nav></header><main>",
        esc(root),
        if summary["audits_ok"] == summary["runs"] { "ok" } else { "bad" },
        summary["runs"],
        summary["audits_ok"],
        summary["unreadable"]
    );
    h.push_str("<section id=\"counts\"><h2>Counts</h2><div class=\"sbs\">");
    for (k, title) in [
        ("phases", "phase"),
        ("qualities", "quality"),
        ("agent_statuses", "agent status"),
        ("failure_categories", "failure category"),
    ] {
        h.push_str(&format!(
            "<table id=\"count-{k}\"><tr><th>{title}</th><th>runs</th></tr>"
        ));
        if let Some(m) = summary[k].as_object() {
            for (name, n) in m {
                h.push_str(&format!("<tr><td>{}</td><td>{n}</td></tr>", esc(name)));
            }
        }
        h.push_str("</table>");
    }
    h.push_str("</div></section><section id=\"rates\"><h2>Equality rates</h2>");
    for (k, title) in [("by_agent", "agent"), ("by_boundary", "boundary")] {
        h.push_str(&format!("<table id=\"rates-{k}\"><tr><th>{title}</th><th>runs</th><th>observation equality</th><th>observations compared</th><th>first request ends at O′N</th><th>first requests</th></tr>"));
        if let Some(m) = summary[k].as_object() {
            for (name, v) in m {
                h.push_str(&format!(
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(name),
                    v["runs"],
                    pct(&v["observation_equality_rate"]),
                    v["observations_compared"],
                    pct(&v["first_request_equality_rate"]),
                    v["first_requests"]
                ));
            }
        }
        h.push_str("</table>");
    }
    h.push_str("</section><section id=\"slowest\"><h2>Slowest runs</h2><table><tr><th>run</th><th>ms</th><th>state directory</th></tr>");
    if let Some(s) = summary["slowest"].as_array() {
        for x in s {
            h.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
                esc(x["run_id"].as_str().unwrap_or("-")),
                x["duration_ms"],
                esc(x["path"].as_str().unwrap_or(""))
            ));
        }
    }
    h.push_str("</table></section><section id=\"runs\"><h2>Runs</h2><table><tr><th>verdict</th><th>run</th><th>agent</th><th>boundary</th><th>phase</th><th>quality</th><th>agent status</th><th>report</th></tr>");
    for (i, (p, r)) in all.iter().enumerate() {
        let link = links
            .get(i)
            .and_then(|l| l.as_ref())
            .map(|l| format!("<a href=\"{}\">report</a>", esc(l)))
            .unwrap_or_else(|| "-".into());
        match r {
            Ok(r) => {
                let run = &r.run;
                h.push_str(&format!(
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{link}</td></tr>",
                    if r.ok { chip("ok", "ok") } else { chip("failed", "bad") },
                    esc(run["run_id"].as_str().unwrap_or("-")),
                    esc(run["agent"]["type"].as_str().unwrap_or("-")),
                    run["after_step"],
                    esc(run["phase"].as_str().unwrap_or("-")),
                    esc(run["quality"].as_str().unwrap_or("-")),
                    esc(run["agent_status"].as_str().unwrap_or("-")),
                ));
            }
            Err(e) => h.push_str(&format!(
                "<tr><td>{}</td><td colspan=\"6\"><code>{}</code>: {}</td><td>-</td></tr>",
                chip("unreadable", "bad"),
                esc(&p.display().to_string()),
                esc(e)
            )),
        }
    }
    h.push_str("</table></section></main>");
    document(&format!("pvisor fleet audit · {root}"), &h)
}

fn pct(v: &serde_json::Value) -> String {
    v.as_f64()
        .map(|x| format!("{:.1}%", x * 100.0))
        .unwrap_or_else(|| "-".into())
}
