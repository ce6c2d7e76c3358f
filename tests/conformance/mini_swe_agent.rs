//! mini-swe-agent fixtures of the conformance kit: the genuine 2.4.6 and 1.17.5 trajectories
//! (written elsewhere) and the recordings of `tests/fixtures/mini-swe-agent/recorded/`, each
//! run with the real mini of the version it records.

use std::path::{Path, PathBuf};

use crate::kit::{main_requests, Fixture};
use crate::mini;

/// The first assistant message's `role` turned into a number (the JSON stays well formed).
fn numeric_role(text: &str) -> String {
    text.replacen(r#""role": "assistant""#, r#""role": 7"#, 1)
}

fn seed_from(before: PathBuf) -> std::sync::Arc<dyn Fn(&Path) + Send + Sync> {
    std::sync::Arc::new(move |w: &Path| mini::copy_dir(&before, w))
}

fn entrypoint_of(version: &str) -> fn() -> PathBuf {
    match version {
        "1.17.5" => mini::mini_1175,
        "2.4.6" => mini::mini_246,
        v => panic!("no recording support for mini {v}"),
    }
}

pub fn fixtures() -> Vec<Fixture> {
    let mut v = vec![];
    for (name, dir) in [
        ("genuine", "genuine-2.4.6"),
        ("genuine-1.17.5", "genuine-1.17.5"),
    ] {
        let g = mini::fixtures_dir().join(dir);
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(g.join("meta.json")).unwrap()).unwrap();
        let trajectory = g.join("mini.traj.json");
        v.push(Fixture {
            name: format!("mini-swe-agent/{name}"),
            agent: "mini-swe-agent",
            entrypoint: entrypoint_of(&mini::version_of(&trajectory)),
            trajectory,
            original_cwd: PathBuf::from(meta["cwd"].as_str().unwrap()),
            // The genuine runs started in an empty directory (no such folder: nothing copied).
            seed: seed_from(g.join("workspace-before")),
            script: g.join("script.json"),
            originals: main_requests(&g.join("requests-run1.jsonl")),
            mask: mini::masked,
            host_fact_edits: vec![],
            goes_on: mini::goes_on,
            field_damage: (numeric_role, ".role"),
            unsigned: crate::kit::as_is,
            rewritten: is_model_call_count,
            prompts: vec![],
        });
    }
    for name in mini::recorded_names() {
        let dir = mini::recorded_dir().join(&name);
        let trajectory = dir.join("mini.traj.json");
        v.push(Fixture {
            name: format!("mini-swe-agent/{name}"),
            agent: "mini-swe-agent",
            entrypoint: entrypoint_of(&mini::version_of(&trajectory)),
            trajectory,
            original_cwd: mini::fixed_work(&name),
            seed: seed_from(dir.join("workspace-before")),
            script: dir.join("script.json"),
            originals: main_requests(&dir.join("requests.jsonl")),
            mask: mini::masked,
            host_fact_edits: vec![],
            goes_on: mini::goes_on,
            field_damage: (numeric_role, ".role"),
            unsigned: crate::kit::as_is,
            rewritten: is_model_call_count,
            prompts: vec![],
        });
    }
    v
}

/// The line of `info.model_stats.api_calls`, which a cut trajectory counts anew (as mini's own
/// save after that turn does).
fn is_model_call_count(line: &str) -> bool {
    line.trim_start().starts_with("\"api_calls\": ")
}
