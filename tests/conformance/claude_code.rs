//! Claude Code fixtures of the conformance kit: sessions recorded with the real 2.1.332.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::claude;
use crate::kit::{main_requests, Fixture};

fn seed(w: &Path, name: &str) {
    claude::copy_tree(
        &claude::recorded_dir().join(name).join("workspace-before"),
        w,
    );
    claude::set_mtimes(w, claude::SEED_MTIME);
}

/// The device id of a fresh `~/.claude.json` is the one declared dynamic field.
fn mask(body: &Value) -> Value {
    pvisor::adapters::claude_code::record::masked(body)
}

/// The recorded kernel edited to a value that surely differs from this host's (the
/// model-visible `rendered` text stays as recorded).
fn edited_kernel(text: &str) -> String {
    regex::Regex::new(r#""osVersion":"[^"]*""#)
        .unwrap()
        .replace_all(text, r#""osVersion":"Linux 9.9.9-drift""#)
        .into_owned()
}

/// The session without Claude's `api-request` records (the hashes of every message it sent).
fn without_recorded_requests(text: &str) -> String {
    text.lines()
        .filter(|l| !l.contains(r#""type":"api-request","#))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The first tool call's `input` object turned into a string (the JSON stays well formed).
fn string_input(text: &str) -> String {
    text.replacen(r#""input":{"#, r#""input":"oops","was":{"#, 1)
}

pub fn fixtures() -> Vec<Fixture> {
    [
        "five-step",
        "search-errors",
        "edits",
        "parallel-order-2.1.332",
    ]
    .into_iter()
    .map(|name| {
        let dir = claude::recorded_dir().join(name);
        let meta: Value =
            serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
        let mut originals = main_requests(&dir.join("requests.jsonl"));
        originals.extend(main_requests(&dir.join("requests-resume.jsonl")));
        Fixture {
            name: format!("claude-code/{name}"),
            agent: "claude-code",
            trajectory: dir.join("session.jsonl"),
            original_cwd: PathBuf::from(meta["cwd"].as_str().unwrap()),
            seed: std::sync::Arc::new(move |w: &Path| seed(w, name)),
            script: dir.join("script.json"),
            originals,
            entrypoint: claude::claude_entrypoint,
            mask,
            host_fact_edits: vec![("kernel 9.9.9-drift", edited_kernel)],
            goes_on: crate::kit::calls_tools,
            field_damage: (string_input, ".input"),
            unsigned: without_recorded_requests,
            rewritten: crate::kit::rewrites_nothing,
            prompts: vec![],
        }
    })
    .collect()
}
