//! `pvisor journal audit`: snapshots of the text and JSON reports on the golden journal,
//! tamper detection, privacy and result checks on real run directories, the fleet view.

#[path = "support/fake.rs"]
mod fake;

use std::process::Command;

use fake::{Env, TRAJ};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pvisor"))
}

fn audit(args: &[&str], path: &std::path::Path) -> (i32, String) {
    let out = bin()
        .args(["journal", "audit"])
        .args(args)
        .arg(path)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn reports_on_the_golden_journal_match_their_snapshots() {
    // a relative path keeps the snapshot independent of the checkout location
    let p = std::path::Path::new("journal-format/vectors/complete.pvj");
    let (code, text) = audit(&[], p);
    assert_eq!(
        code, 66,
        "the golden journal has no blob store beside it: the blob check fails"
    );
    insta::assert_snapshot!("audit_complete_text", text);
    let (_, json) = audit(&["--format", "json"], p);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["schema_version"], "pvisor.audit/v1");
    insta::assert_json_snapshot!("audit_complete_json", v);
}

#[test]
fn a_run_directory_audits_clean_and_its_result_matches_the_fold() {
    let env = Env::new(TRAJ);
    let mut f = env.fields(3);
    f.boundary_user_prompt = Some("Please double-check the tests first.".into());
    let out = env.run(f);
    assert_eq!(out.exit_code, 0);
    let state = env.root.join("state/r");
    let (code, text) = audit(&[], &state);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("verdict: OK")
            && text.contains("result.json=matches_fold")
            && text.contains("privacy=ok"),
        "{text}"
    );
    assert!(
        text.contains("-old") && text.contains("+two"),
        "the differing observation's diff is shown: {text}"
    );
    // the prompt's plaintext leaking into an output file is caught
    std::fs::write(
        env.root.join("out/r/notes.txt"),
        "the user said: Please double-check the tests first. ok",
    )
    .unwrap();
    let (code, text) = audit(&[], &state);
    assert_eq!(code, 66);
    assert!(
        text.contains("[error] privacy") && text.contains("notes.txt"),
        "{text}"
    );
    std::fs::remove_file(env.root.join("out/r/notes.txt")).unwrap();
    // a result.json edited after the run is caught
    let rp = env.root.join("out/r/result.json");
    let r = std::fs::read_to_string(&rp)
        .unwrap()
        .replace("\"verified\"", "\"degraded\"");
    std::fs::write(&rp, r).unwrap();
    let (code, text) = audit(&[], &state);
    assert_eq!(code, 66);
    assert!(text.contains("result.json differs"), "{text}");
}

/// An observation blob whose file an operating-system crash lost is only a warning when the
/// journal carries its content (format 1.6).
#[test]
fn a_lost_blob_file_the_journal_carries_is_a_warning() {
    let env = Env::new(TRAJ);
    assert_eq!(env.run(env.fields(2)).exit_code, 0);
    let state = env.root.join("state/r");
    let mut carried = vec![];
    let mut named = vec![];
    pvisor::journal::read_events(&state.join("journal.pvj"), |e| {
        match &e.event {
            journal_format::Event::BlobStored(b) => carried.push(b.blob.clone()),
            journal_format::Event::ToolCallFinished(f) => named.push(f.observation_blob.clone()),
            _ => {}
        }
        Ok(())
    })
    .unwrap();
    let blob = named.first().expect("a finished call").clone();
    assert!(
        carried.contains(&blob),
        "the observation is carried by the journal"
    );
    let path = pvisor::journal::BlobStore::new(&state).path_of(&blob);
    std::fs::remove_file(&path).unwrap();
    let (code, text) = audit(&[], &state);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("[warning] blobs") && text.contains("the journal holds its content"),
        "{text}"
    );
}

#[test]
fn tampering_with_recomputed_checksums_is_caught_by_the_chain() {
    let env = Env::new(TRAJ);
    assert_eq!(env.run(env.fields(2)).exit_code, 0);
    let jp = env.root.join("state/r/journal.pvj");
    let mut b = std::fs::read(&jp).unwrap();
    // find the record with seq 6 and flip one payload byte, then fix its CRCs
    let mut off = 48usize;
    for _ in 0..5 {
        let len = u32::from_le_bytes(b[off..off + 4].try_into().unwrap()) as usize;
        off += 64 + len;
    }
    let len = u32::from_le_bytes(b[off..off + 4].try_into().unwrap()) as usize;
    b[off + 28 + len / 2] ^= 0x20;
    let seed = journal_format::FileHeader::decode(&b[..48])
        .unwrap()
        .journal_id
        .crc_seed();
    let end = off + 64 + len;
    let crc = crc32c::crc32c_append(seed, &b[off..end - 4]);
    b[end - 4..end].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&jp, &b).unwrap();
    let (code, text) = audit(&[], &env.root.join("state/r"));
    assert_eq!(code, 66);
    assert!(
        text.contains("hash chain broken at sequence number 6") && text.contains("(seq 6)"),
        "{text}"
    );
}

#[test]
fn a_folder_of_runs_gets_a_fleet_summary() {
    let env = Env::new(TRAJ);
    for (id, after) in [("a", 1), ("b", 2), ("c", 3)] {
        let mut f = env.fields(after);
        f.run_id = Some(id.into());
        assert_eq!(env.run(f).exit_code, 0);
    }
    let mut f = env.fields(9);
    f.run_id = Some("d".into());
    assert_eq!(env.run(f).exit_code, 10);
    assert!(
        !env.root.join("state/d").exists() && !env.root.join("out/d").exists(),
        "a run its validation refused leaves no directory"
    );
    let (code, json) = audit(
        &["--format", "json", "--jobs", "3"],
        &env.root.join("state"),
    );
    assert_eq!(code, 0, "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let s = &v["summary"];
    assert_eq!(s["runs"], 3);
    assert_eq!(s["phases"]["replayed"], 3);
    // 1+2+... calls: a has c1,c2 equal; b adds c3; c adds c4 (differs) => 3 of 4 equal in c
    let rate = s["observation_equality_rate"].as_f64().unwrap();
    assert!((rate - 8.0 / 9.0).abs() < 1e-9, "{rate}");
    assert!(s["duration_ms"]["p50"].is_u64());
    assert_eq!(s["by_agent"]["fake"]["runs"], 3);
    assert_eq!(s["by_boundary"]["3"]["observations_compared"], 4);
    assert_eq!(s["by_boundary"]["3"]["observation_equality_rate"], 0.75);
    assert!(s["slowest"].as_array().unwrap().len() >= 3);
    let (_, text) = audit(&[], &env.root.join("state"));
    assert!(
        text.contains("fleet audit") && text.contains("3 runs"),
        "{text}"
    );
    // the HTML fleet page links each run's own page, written beside it
    let page = env.root.join("fleet.html");
    let st = bin()
        .args(["journal", "audit", "--format", "html", "-o"])
        .arg(&page)
        .arg(env.root.join("state"))
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(0));
    let h = std::fs::read_to_string(&page).unwrap();
    assert!(
        h.contains("id=\"rates-by_agent\"")
            && h.contains("id=\"rates-by_boundary\"")
            && h.contains("75.0%"),
        "{h}"
    );
    let link = regex::Regex::new(r#"href="(fleet\.html\.runs/[^"]+)""#).unwrap();
    let links: Vec<String> = link.captures_iter(&h).map(|c| c[1].to_string()).collect();
    assert_eq!(links.len(), 3, "one page per run: {h}");
    for l in links {
        let run = std::fs::read_to_string(env.root.join(&l)).unwrap();
        assert!(run.contains("id=\"transcript\""), "{l}");
    }
}

#[test]
fn the_html_report_is_self_contained() {
    let env = Env::new(TRAJ);
    assert_eq!(env.run(env.fields(3)).exit_code, 0);
    let out = env.root.join("audit.html");
    let st = bin()
        .args(["journal", "audit", "--format", "html", "-o"])
        .arg(&out)
        .arg(env.root.join("state/r"))
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(0));
    let h = std::fs::read_to_string(&out).unwrap();
    assert!(h.starts_with("<!doctype html>"));
    assert!(
        !h.contains("http://")
            && !h.contains("https://")
            && !h.contains("<script src")
            && !h.contains("<link"),
        "no external assets"
    );
    // the differing call: its arguments, the recorded and regenerated observations side by
    // side, and their diff
    let rest = &h[h.find("id=\"call-3-0\"").expect("call 3.0 has an anchor")..];
    let call = &rest[..rest[1..]
        .find("id=\"call-")
        .map(|e| e + 1)
        .unwrap_or(rest.len())];
    assert!(h.contains("<div class=\"call differs\" id=\"call-3-0\">"));
    assert!(
        call.contains("&quot;path&quot;: &quot;b.txt&quot;"),
        "the arguments are shown"
    );
    assert!(
        call.contains("<pre class=\"obs recorded\">old</pre>")
            && call.contains("<pre class=\"obs regenerated\">two</pre>"),
        "side by side: {call}"
    );
    assert!(call.contains("<pre class=\"diff\">") && call.contains("class=\"line-ins\""));
    // the equal calls say so instead of repeating the text twice
    assert!(h.contains("identical to the recorded one"));
    // every event is in the timeline with its payload, and a finding would link to it
    assert!(h.contains("id=\"ev-1\" data-event=\"run_requested\""));
    assert!(h.contains("<summary>payload</summary>"));
    insta::assert_snapshot!("audit_html_outline", outline(&h));
}

/// The structure of an HTML report: its sections, headings and anchored elements, in order
/// (no times, digests or paths: what a change to the page's layout changes).
fn outline(h: &str) -> String {
    let re =
        regex::Regex::new(r#"<(h[1-4]|section|div|table|tr|p|pre|details)( [^>]*)?>"#).unwrap();
    let id = regex::Regex::new(r#"id="([^"]*)""#).unwrap();
    let class = regex::Regex::new(r#"class="([^"]*)""#).unwrap();
    let mut out = String::new();
    for m in re.captures_iter(h) {
        let tag = &m[1];
        let attrs = m.get(2).map(|a| a.as_str()).unwrap_or("");
        let id = id.captures(attrs).map(|c| c[1].to_string());
        // timeline rows are one per event: their count is asserted elsewhere
        if tag == "tr" && id.as_deref().is_some_and(|i| i.starts_with("ev-")) {
            continue;
        }
        if tag == "tr" || (tag == "pre" && attrs.contains("payload")) {
            continue;
        }
        let class = class.captures(attrs).map(|c| c[1].to_string());
        if id.is_none() && class.is_none() && !tag.starts_with('h') && tag != "section" {
            continue;
        }
        out.push_str(tag);
        if let Some(i) = id {
            out.push_str(&format!(" #{i}"));
        }
        if let Some(c) = class {
            out.push_str(&format!(" .{}", c.replace(' ', ".")));
        }
        out.push('\n');
    }
    out
}

/// Chromium, installed with apt when missing (never skipped: a missing browser fails).
fn chromium() -> std::path::PathBuf {
    for c in ["chromium", "chromium-browser"] {
        for d in ["/usr/bin", "/usr/local/bin"] {
            let p = std::path::Path::new(d).join(c);
            if p.is_file() {
                return p;
            }
        }
    }
    let st = Command::new("sh")
        .args([
            "-c",
            "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium",
        ])
        .status()
        .expect("apt-get");
    assert!(
        st.success() && std::path::Path::new("/usr/bin/chromium").is_file(),
        "chromium is required and `apt-get install -y chromium` failed"
    );
    "/usr/bin/chromium".into()
}

#[test]
fn the_html_report_renders_in_headless_chromium() {
    let env = Env::new(TRAJ);
    assert_eq!(env.run(env.fields(3)).exit_code, 0);
    let (code, html) = audit(&["--format", "html"], &env.root.join("state/r"));
    assert_eq!(code, 0);
    let report = env.root.join("report.html");
    // the page opens at the boundary's event, wherever the journal has it
    let boundary = html
        .split("<tr id=\"ev-")
        .find_map(|r| {
            let (seq, rest) = r.split_once('"')?;
            rest.starts_with(" data-event=\"boundary_validated\"")
                .then(|| seq.to_string())
        })
        .expect("the timeline has the boundary");
    std::fs::write(&report, &html).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}#ev-{boundary}", report.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    screenshot(&report, "audit-replayed-run.png");
    assert!(
        out.status.success() && dom.contains("</html>"),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // the verdict, the checks table and a diff, as the browser parsed them
    assert!(dom.contains("id=\"verdict\" class=\"verdict ok\""), "{dom}");
    assert!(
        dom.contains("id=\"checks\"") && dom.contains("privacy"),
        "{dom}"
    );
    assert!(
        dom.contains(">old</pre>") && dom.contains(">two</pre>") && dom.contains("line-ins"),
        "the observation diff is in the rendered page: {dom}"
    );
    // the page's script ran: the timeline filter counted the rows, the linked event is marked
    assert!(
        dom.contains("shown</span>"),
        "the timeline filter ran: {dom}"
    );
    assert!(
        dom.contains(&format!(
            "<tr id=\"ev-{boundary}\" data-event=\"boundary_validated\" class=\"hl\">"
        )),
        "{dom}"
    );
}

/// A screenshot of a report, kept as a test artifact in `target/test-artifacts/`.
fn screenshot(report: &std::path::Path, name: &str) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1280,2400",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", dir.join(name).display()))
        .arg(format!("file://{}", report.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success() && dir.join(name).is_file(),
        "chromium took no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn journal_diff_finds_where_two_runs_part() {
    let env = Env::new(TRAJ);
    for id in ["a", "b"] {
        let mut f = env.fields(3);
        f.run_id = Some(id.into());
        assert_eq!(env.run(f).exit_code, 0);
    }
    let diff = |x: &str, y: &str, fmt: &str| {
        let out = bin()
            .args(["journal", "diff", "--format", fmt])
            .arg(env.root.join("state").join(x))
            .arg(env.root.join("state").join(y))
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, text) = diff("a", "b", "text");
    assert_eq!(code, 0, "two runs of the same replay are the same: {text}");
    assert!(
        text.contains("observations: 4 of 4 equal")
            && text.contains("verdict: the runs are the same"),
        "{text}"
    );
    // the same session with batch 2 writing another text: its call and the read after it part
    std::fs::write(
        env.root.join("t2.jsonl"),
        TRAJ.replace(r#""text":"two""#, r#""text":"three""#),
    )
    .unwrap();
    let mut f = env.fields(3);
    f.run_id = Some("c".into());
    f.trajectory = Some(env.root.join("t2.jsonl"));
    assert_eq!(env.run(f).exit_code, 0);
    let (code, json) = diff("a", "c", "json");
    assert_eq!(code, 67, "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["schema_version"], "pvisor.journal-diff/v1");
    assert_eq!(v["same_source"], false);
    assert_eq!(v["first_tool_call"]["at"], "batch 2 call 0");
    assert_eq!(v["first_observation"]["at"], "batch 3 call 0");
    let d = v["first_observation"]["diff"].as_str().unwrap();
    assert!(d.contains("-two") && d.contains("+three"), "{d}");
    assert_eq!(v["observations_equal"], 3);
    let (code, html) = diff("a", "c", "html");
    assert_eq!(code, 67);
    assert!(
        html.starts_with("<!doctype html>")
            && html.contains("first differ at <b>batch 3 call 0</b>")
    );
}

#[test]
fn a_reader_that_closes_the_pipe_ends_the_report_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let st = bin()
        .args(["journal", "stress"])
        .arg(&run)
        .args(["--batches", "1000"])
        .output()
        .unwrap();
    assert!(st.status.success(), "{st:?}");
    for format in ["text", "json"] {
        let mut child = bin()
            .args(["journal", "audit", "--format", format])
            .arg(&run)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // the reader goes away before reading (a report of this run is beyond a pipe's buffer)
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{format}: {err}");
        // the verdict, not a crash (a stress run's blobs are all present: it passes)
        assert_eq!(out.status.code(), Some(0), "{format}: {err}");
    }
}
