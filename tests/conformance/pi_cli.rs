//! Pi fixtures of the conformance kit: the genuine 0.83.0 session (written elsewhere) and the
//! recordings of `tests/fixtures/pi/recorded/`, all as v3 session files (the event-stream
//! form is checked in `tests/e2e_pi.rs`).

use std::path::{Path, PathBuf};

use crate::kit::{main_requests, Fixture};
use crate::pi;

/// The first tool call's `arguments` object turned into a number (the JSON stays well
/// formed).
fn numeric_arguments(text: &str) -> String {
    text.replacen(r#""arguments":{"#, r#""arguments":7,"was":{"#, 1)
}

fn seed_from(before: PathBuf) -> std::sync::Arc<dyn Fn(&Path) + Send + Sync> {
    std::sync::Arc::new(move |w: &Path| pi::copy_dir(&before, w))
}

pub fn fixtures() -> Vec<Fixture> {
    let g = pi::genuine_dir();
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(g.join("meta.json")).unwrap()).unwrap();
    let mut genuine = main_requests(&g.join("requests-run1.jsonl"));
    genuine.extend(main_requests(&g.join("requests-resume.jsonl")));
    let mut v = vec![Fixture {
        name: "pi-agent/genuine".into(),
        agent: "pi-agent",
        trajectory: g.join("session-final.jsonl"),
        original_cwd: PathBuf::from(meta["cwd"].as_str().unwrap()),
        // The genuine run started in an empty directory (no such folder: nothing copied).
        seed: seed_from(g.join("workspace-before")),
        script: g.join("script.json"),
        originals: genuine,
        entrypoint: pi::pi_entrypoint,
        mask: pi::masked,
        host_fact_edits: vec![],
        goes_on: crate::kit::calls_tools,
        field_damage: (numeric_arguments, ".arguments"),
        unsigned: crate::kit::as_is,
        rewritten: crate::kit::rewrites_nothing,
        prompts: vec![],
    }];
    for name in pi::recorded_names() {
        let dir = pi::recorded_dir().join(&name);
        v.push(Fixture {
            name: format!("pi-agent/{name}"),
            agent: "pi-agent",
            trajectory: dir.join("session.jsonl"),
            original_cwd: pi::fixed_work(&name),
            seed: seed_from(dir.join("workspace-before")),
            script: dir.join("script.json"),
            originals: main_requests(&dir.join("requests.jsonl")),
            entrypoint: pi::pi_entrypoint,
            mask: pi::masked,
            host_fact_edits: vec![],
            goes_on: crate::kit::calls_tools,
            field_damage: (numeric_arguments, ".arguments"),
            unsigned: crate::kit::as_is,
            rewritten: crate::kit::rewrites_nothing,
            prompts: vec![],
        });
    }
    v
}
