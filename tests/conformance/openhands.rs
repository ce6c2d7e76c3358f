//! OpenHands fixtures of the conformance kit: the genuine SDK 1.34 conversation (written
//! elsewhere; its user resumed it after `finish` with a new prompt) and the recordings of
//! `tests/fixtures/openhands/recorded/`, each replayed and continued with the real SDK.

use std::path::{Path, PathBuf};

use crate::kit::{main_requests, Fixture};
use crate::openhands;

/// The first `tool_call_id` of an action turned into a number (the JSON stays well formed).
fn numeric_call_id(text: &str) -> String {
    text.replacen(
        r#""tool_call_id":"call"#,
        r#""tool_call_id":7,"was":"call"#,
        1,
    )
}

/// `base_state.json`, the first line of the canonical form: rebuilt with status `idle`, the
/// leaf at the boundary, this run's paths and the cut statistics.
fn is_base_state(line: &str) -> bool {
    line.contains(r#""execution_status":"#) && line.contains(r#""persistence_dir":"#)
}

fn seed_from(before: PathBuf) -> std::sync::Arc<dyn Fn(&Path) + Send + Sync> {
    std::sync::Arc::new(move |w: &Path| openhands::copy_dir(&before, w))
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

pub fn fixtures() -> Vec<Fixture> {
    let g = openhands::fixtures_dir().join("genuine");
    let meta = json(&g.join("meta.json"));
    let trajectory = g.join("native-run1");
    let last = {
        let adapter = (pvisor::adapters::registry().get("openhands").unwrap().make)();
        let bytes = adapter.read_input(&trajectory).unwrap();
        adapter.parse(&trajectory, &bytes).unwrap().max_boundary()
    };
    let mut originals = main_requests(&g.join("requests-run1.jsonl"));
    originals.extend(main_requests(&g.join("requests-resume.jsonl")));
    let mut v = vec![Fixture {
        name: "openhands/genuine".into(),
        agent: "openhands",
        entrypoint: openhands::openhands,
        trajectory,
        original_cwd: PathBuf::from(meta["cwd"].as_str().unwrap()),
        // The genuine run started in an empty directory (no such folder: nothing copied).
        seed: seed_from(g.join("workspace-before")),
        script: g.join("script.json"),
        originals,
        mask: openhands::masked,
        host_fact_edits: vec![],
        goes_on: openhands::goes_on,
        field_damage: (numeric_call_id, "event.tool_call_id"),
        unsigned: crate::kit::as_is,
        rewritten: is_base_state,
        prompts: vec![(last, meta["prompt2"].as_str().unwrap().to_string())],
    }];
    for name in openhands::recorded_names() {
        let dir = openhands::recorded_dir().join(&name);
        let meta = json(&dir.join("meta.json"));
        let trajectory = dir.join("native-run1");
        let adapter = (pvisor::adapters::registry().get("openhands").unwrap().make)();
        let last = adapter
            .parse(&trajectory, &adapter.read_input(&trajectory).unwrap())
            .unwrap()
            .max_boundary();
        v.push(Fixture {
            name: format!("openhands/{name}"),
            agent: "openhands",
            entrypoint: openhands::openhands,
            trajectory,
            original_cwd: openhands::fixed_work(&name),
            seed: seed_from(dir.join("workspace-before")),
            script: dir.join("script.json"),
            originals: main_requests(&dir.join("requests.jsonl")),
            mask: openhands::masked,
            host_fact_edits: vec![],
            goes_on: openhands::goes_on,
            field_damage: (numeric_call_id, "event.tool_call_id"),
            unsigned: crate::kit::as_is,
            rewritten: is_base_state,
            prompts: vec![(last, meta["resume_prompt"].as_str().unwrap().to_string())],
        });
    }
    v
}
