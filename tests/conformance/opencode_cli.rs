//! OpenCode fixtures of the conformance kit: the genuine 1.17.11 session and the recordings
//! of `tests/fixtures/opencode/recorded/` (all as `opencode export` JSON; the store and the
//! event-stream forms are checked in `tests/e2e_opencode.rs`).

use std::path::{Path, PathBuf};

use crate::kit::{main_requests, Fixture};
use crate::opencode;

/// The first tool part's `callID` turned into a number (the JSON stays well formed).
fn numeric_call_id(text: &str) -> String {
    text.replacen(r#""callID": ""#, r#""callID": 7, "was": ""#, 1)
}

fn seed_from(before: PathBuf) -> std::sync::Arc<dyn Fn(&Path) + Send + Sync> {
    std::sync::Arc::new(move |w: &Path| {
        opencode::copy_dir(&before, w);
        if !w.join("opencode.json").exists() {
            std::fs::write(
                w.join("opencode.json"),
                opencode::opencode_json("http://127.0.0.1:9"),
            )
            .unwrap();
        }
    })
}

pub fn fixtures() -> Vec<Fixture> {
    let g = opencode::genuine_dir();
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(g.join("meta.json")).unwrap()).unwrap();
    let mut genuine = main_requests(&g.join("requests-run1.jsonl"));
    genuine.extend(main_requests(&g.join("requests-resume.jsonl")));
    let mut v = vec![Fixture {
        name: "opencode/genuine".into(),
        agent: "opencode",
        trajectory: g.join("export.json"),
        original_cwd: PathBuf::from(meta["cwd"].as_str().unwrap()),
        seed: seed_from(g.join("workspace-before")),
        script: g.join("script.json"),
        originals: genuine,
        entrypoint: opencode::opencode_entrypoint,
        mask: opencode::masked,
        host_fact_edits: vec![],
        goes_on: crate::kit::calls_tools,
        field_damage: (numeric_call_id, ".callID"),
        unsigned: crate::kit::as_is,
        rewritten: crate::kit::rewrites_nothing,
        prompts: vec![],
    }];
    for name in opencode::recorded_names() {
        let dir = opencode::recorded_dir().join(&name);
        v.push(Fixture {
            name: format!("opencode/{name}"),
            agent: "opencode",
            trajectory: dir.join("export.json"),
            original_cwd: opencode::fixed_work(&name),
            seed: seed_from(dir.join("workspace-before")),
            script: dir.join("script.json"),
            originals: main_requests(&dir.join("requests.jsonl")),
            entrypoint: opencode::opencode_entrypoint,
            mask: opencode::masked,
            host_fact_edits: vec![],
            goes_on: crate::kit::calls_tools,
            field_damage: (numeric_call_id, ".callID"),
            unsigned: crate::kit::as_is,
            rewritten: crate::kit::rewrites_nothing,
            prompts: vec![],
        });
    }
    v
}
