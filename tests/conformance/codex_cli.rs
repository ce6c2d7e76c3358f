//! Codex fixtures of the conformance kit: the genuine 0.149.0 rollouts (classic tools, and
//! code mode) and every recording under `tests/fixtures/codex/recorded/` (one in code mode).

use std::path::{Path, PathBuf};

use crate::codex;
use crate::kit::{main_requests, Fixture};

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The stored (never model-visible) zone and date edited: Codex takes the zone name from
/// /etc/localtime and the date from its TZ; both must be set to what it will see.
fn edited_zone_and_date(text: &str) -> String {
    let tz = regex::Regex::new(r#""timezone":\s*"[^"]*""#).unwrap();
    let date = regex::Regex::new(r#""current_date":\s*"[^"]*""#).unwrap();
    text.split_inclusive('\n')
        .map(|l| {
            if l.contains("\"type\":\"world_state\"") {
                let l = tz.replace_all(l, r#""timezone":"Pacific/Kiritimati""#);
                date.replace_all(&l, r#""current_date":"2020-01-01""#)
                    .into_owned()
            } else {
                l.to_string()
            }
        })
        .collect()
}

/// The first function call's `arguments` string turned into a number (the JSON stays well
/// formed).
fn numeric_arguments(text: &str) -> String {
    text.replacen(r#""arguments":""#, r#""arguments":7,"was":""#, 1)
}

/// The first custom tool call's `input` turned into a number (code-mode `exec` cells).
fn numeric_input(text: &str) -> String {
    text.replacen(r#""input":""#, r#""input":7,"was":""#, 1)
}

pub fn fixtures() -> Vec<Fixture> {
    let g = manifest().join("tests/fixtures/codex/genuine");
    let mut genuine = main_requests(&g.join("requests-run1.jsonl"));
    genuine.extend(main_requests(&g.join("requests-resume.jsonl")));
    let mut v = vec![Fixture {
        name: "codex/genuine".into(),
        agent: "codex",
        trajectory: g.join("rollout-final.jsonl"),
        original_cwd: PathBuf::from("/tmp/realagent-codex.BU6ewi/work"),
        seed: std::sync::Arc::new(|_: &Path| {}),
        script: manifest().join("tests/fixtures/codex/five-step/script.json"),
        originals: genuine,
        entrypoint: codex::codex_entrypoint,
        mask: codex::masked,
        host_fact_edits: vec![(
            "zone Pacific/Kiritimati, date 2020-01-01",
            edited_zone_and_date,
        )],
        goes_on: crate::kit::calls_tools,
        field_damage: (numeric_arguments, "payload.arguments"),
        unsigned: crate::kit::as_is,
        rewritten: crate::kit::rewrites_nothing,
        prompts: vec![],
    }];
    // The genuine code-mode session (default model `gpt-5.6-sol`: `exec` cells only).
    let cm = manifest().join("tests/fixtures/codex/codemode");
    let mut cm_requests = main_requests(&cm.join("requests-run1.jsonl"));
    cm_requests.extend(main_requests(&cm.join("requests-resume.jsonl")));
    v.push(Fixture {
        name: "codex/genuine-codemode".into(),
        agent: "codex",
        trajectory: cm.join("rollout-final.jsonl"),
        original_cwd: PathBuf::from("/tmp/realagent-codex.a9ckkB/work"),
        seed: std::sync::Arc::new(|_: &Path| {}),
        script: cm.join("script.json"),
        originals: cm_requests,
        entrypoint: codex::codex_entrypoint,
        mask: codex::masked,
        host_fact_edits: vec![(
            "zone Pacific/Kiritimati, date 2020-01-01",
            edited_zone_and_date,
        )],
        goes_on: crate::kit::calls_tools,
        field_damage: (numeric_input, "payload.input"),
        unsigned: crate::kit::as_is,
        rewritten: crate::kit::rewrites_nothing,
        prompts: vec![],
    });
    // Every recording under tests/fixtures/codex/recorded/ is a fixture.
    for name in codex::recorded_names() {
        let dir = codex::recorded_dir().join(&name);
        let before = dir.join("workspace-before");
        v.push(Fixture {
            name: format!("codex/{name}"),
            agent: "codex",
            trajectory: dir.join("rollout.jsonl"),
            original_cwd: codex::fixed_work(&name),
            seed: std::sync::Arc::new(move |w: &Path| {
                if before.is_dir() {
                    codex::copy_dir(&before, w)
                }
            }),
            script: dir.join("script.json"),
            originals: main_requests(&dir.join("requests.jsonl")),
            entrypoint: codex::codex_entrypoint,
            mask: codex::masked,
            host_fact_edits: vec![],
            goes_on: crate::kit::calls_tools,
            field_damage: if name.starts_with("codemode") {
                (numeric_input, "payload.input")
            } else {
                (numeric_arguments, "payload.arguments")
            },
            unsigned: crate::kit::as_is,
            rewritten: crate::kit::rewrites_nothing,
            prompts: vec![],
        });
    }
    v
}
