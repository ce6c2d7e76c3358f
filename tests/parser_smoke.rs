//! The short smoke of the parser fuzz targets (`fuzz/fuzz_targets/parse_*.rs`, the long
//! campaigns are in docs/fuzzing.md): every registered adapter's parser, fed mutations of its
//! committed sessions — truncations, byte flips, dropped, duplicated and swapped lines —
//! never panics, and an error names the input file. Every registered adapter has a target.

use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            if !p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("workspace"))
            {
                walk(&p, out);
            }
        } else {
            out.push(p);
        }
    }
}

/// The committed native sessions of an adapter (what `fuzz/seed.sh` seeds its target with).
fn sessions(agent: &str) -> Vec<PathBuf> {
    let (dir, keep): (&str, fn(&str) -> bool) = match agent {
        "claude-code" => ("claude", |n| {
            n.ends_with(".jsonl")
                && !["requests", "stdout", "stderr"]
                    .iter()
                    .any(|x| n.contains(x))
        }),
        "codex" => ("codex", |n| {
            n.starts_with("rollout") && n.ends_with(".jsonl")
        }),
        "opencode" => ("opencode", |n| {
            n == "export.json" || (n.starts_with("stdout") && n.ends_with(".jsonl"))
        }),
        "pi-agent" => ("pi", |n| {
            (n.starts_with("session") || n.starts_with("stdout")) && n.ends_with(".jsonl")
        }),
        "mini-swe-agent" => ("mini-swe-agent", |n| n.ends_with(".traj.json")),
        // Conversation folders, read through the adapter (`Adapter::read_input`).
        "openhands" => {
            let mut all = vec![];
            walk(&fixtures().join("openhands"), &mut all);
            let mut convs: Vec<PathBuf> = all
                .iter()
                .filter(|p| p.file_name().is_some_and(|n| n == "base_state.json"))
                .filter_map(|p| p.parent().map(Path::to_path_buf))
                .collect();
            convs.sort();
            return convs;
        }
        other => panic!("no fixtures are known for `{other}`: add them here and a fuzz target"),
    };
    let mut all = vec![];
    walk(&fixtures().join(dir), &mut all);
    all.retain(|p| keep(&p.file_name().unwrap().to_string_lossy()));
    all.sort();
    all
}

/// A deterministic sample of mutations of `bytes` (at most about `n` of each kind).
fn mutations(bytes: &[u8], n: usize) -> Vec<Vec<u8>> {
    let mut out = vec![];
    let step = (bytes.len() / n).max(1);
    for cut in (0..bytes.len()).step_by(step) {
        out.push(bytes[..cut].to_vec());
    }
    for i in (step / 2..bytes.len()).step_by(step) {
        let mut b = bytes.to_vec();
        b[i] ^= 0x41;
        out.push(b);
    }
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    let lstep = (lines.len() / n).max(1);
    for i in (0..lines.len()).step_by(lstep) {
        let mut drop = lines.clone();
        drop.remove(i);
        out.push(drop.concat());
        let mut dup = lines.clone();
        dup.insert(i, lines[i]);
        out.push(dup.concat());
        if i + 1 < lines.len() {
            let mut swap = lines.clone();
            swap.swap(i, i + 1);
            out.push(swap.concat());
        }
    }
    out
}

#[test]
fn mutated_sessions_of_every_adapter_never_panic() {
    for entry in pvisor::adapters::AGENTS {
        let adapter = (entry.make)();
        let files = sessions(entry.name);
        assert!(!files.is_empty(), "{}: no committed session", entry.name);
        let (mut cases, mut refused) = (0, 0);
        for path in files {
            let bytes = adapter.read_input(&path).unwrap();
            for m in mutations(&bytes, 40) {
                cases += 1;
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    adapter.parse(&path, &m)
                })) {
                    Err(_) => panic!("{}: a mutation of {} panicked", entry.name, path.display()),
                    Ok(Err(e)) => {
                        refused += 1;
                        assert_eq!(e.path, path, "{}: the error names the file", entry.name);
                    }
                    Ok(Ok(_)) => {}
                }
            }
        }
        assert!(
            refused > 0,
            "{}: none of {cases} mutations was refused",
            entry.name
        );
        eprintln!(
            "{}: {cases} mutations, {refused} refused, none panicked",
            entry.name
        );
    }
}

#[test]
fn every_registered_adapter_has_a_parser_fuzz_target() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/fuzz_targets");
    let targets: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    for entry in pvisor::adapters::AGENTS {
        let call = format!("get(\"{}\")", entry.name);
        assert!(
            targets.iter().any(|t| t.contains(&call)),
            "{} has no fuzz target in fuzz/fuzz_targets",
            entry.name
        );
    }
}

#[path = "../fuzz/common/bridge_cases.rs"]
mod bridge_cases;

/// The short smoke of the `bridge_validate` fuzz target: every adapter's request check, with
/// its expected prefix taken from a request its real CLI sent. The request it was taken from
/// is accepted as request 1 and refused as a later one (it goes no further than the prefix);
/// every earlier request (shorter than the prefix) is refused; a byte changed in a prefix
/// message's text, a message dropped or duplicated is refused; byte flips and truncations of
/// every logged request never panic.
#[test]
fn bridge_request_check_smoke() {
    use serde_json::Value;
    let root = fixtures();
    let mut inputs = 0;
    for (i, (agent, protocol, log)) in bridge_cases::CASES.iter().enumerate() {
        let v = bridge_cases::Validator::new(&root, i);
        let bodies = bridge_cases::bodies(&root, log);
        assert!(
            bodies.len() >= 2,
            "{agent}: {log} has no second main request"
        );
        let genuine = serde_json::to_vec(&bodies[1]).unwrap();
        assert_eq!(v.check(&genuine, false), Ok(()), "{agent}: its own request");
        assert!(
            v.check(&genuine, true).is_err(),
            "{agent}: no turn after the boundary"
        );
        assert!(
            v.check(&serde_json::to_vec(&bodies[0]).unwrap(), false)
                .is_err(),
            "{agent}"
        );
        let key = protocol.list_key();
        let list = bodies[1][key].as_array().unwrap().clone();
        let last = list.len() - 1;
        let mut edits: Vec<(String, Value)> = vec![];
        let mut dropped = bodies[1].clone();
        dropped[key].as_array_mut().unwrap().remove(last);
        edits.push(("the last message dropped".into(), dropped));
        let mut dup = bodies[1].clone();
        dup[key].as_array_mut().unwrap().push(list[last].clone());
        edits.push(("the last message duplicated".into(), dup));
        // A changed character in the last message's text (wherever its strings are).
        let mut changed = bodies[1].clone();
        fn change_a_string(v: &mut Value) -> bool {
            match v {
                Value::String(s) if s.len() > 3 && s.is_ascii() => {
                    let c = if s.as_bytes()[1] == b'x' { "y" } else { "x" };
                    s.replace_range(1..2, c);
                    true
                }
                Value::Array(a) => a.iter_mut().rev().any(change_a_string),
                Value::Object(o) => o
                    .iter_mut()
                    .filter(|(k, _)| *k != "type" && *k != "role")
                    .any(|(_, x)| change_a_string(x)),
                _ => false,
            }
        }
        assert!(change_a_string(&mut changed[key][last]), "{agent}");
        edits.push(("a character of the last message changed".into(), changed));
        for (what, body) in edits {
            let r = v.check(&serde_json::to_vec(&body).unwrap(), false);
            assert!(r.is_err(), "{agent}: {what} was accepted");
            inputs += 1;
        }
        // What the fuzz target feeds: the conversation list alone.
        let own = serde_json::to_vec(&bodies[1][key]).unwrap();
        assert_eq!(v.check_list(&own, false), Ok(()), "{agent}: its own list");
        for body in &bodies {
            let bytes = serde_json::to_vec(&body[key]).unwrap();
            let step = (bytes.len() / 150).max(1);
            for k in (0..bytes.len()).step_by(step) {
                let mut flipped = bytes.clone();
                flipped[k] ^= 0x20;
                let _ = v.check_list(&flipped, k % 2 == 0);
                let _ = v.check_list(&bytes[..k], false);
                inputs += 2;
            }
        }
    }
    assert!(inputs > 5_000, "{inputs}");
}
