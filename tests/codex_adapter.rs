//! Codex adapter on the genuine Codex CLI 0.149.0 rollouts (`tests/fixtures/codex/`):
//! parse, re-execution at every boundary in a fresh workspace (observations equal the
//! originals except the declared dynamic fields), rebuild (prefix = the input items of the
//! original request N+1), refusals, and mutated rollouts (trajectory error, never a panic).

#[path = "support/codex.rs"]
mod codex;

use pvisor::adapters::codex::{
    agent::{Codex, CodexTools},
    parse, tools,
};
use pvisor::kit::{Adapter, ExecContext, Observation, RebuildRequest, ToolClass, ToolRunner};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/codex")
        .join(p)
}

fn ctx(ws: &Path) -> ExecContext {
    ExecContext {
        workspace: ws.to_path_buf(),
        log_dir: ws.join(".logs"),
        state_dir: ws.join(".logs"),
        timeout: std::time::Duration::from_secs(30),
        agent_entrypoint: None,
    }
}

#[test]
fn parses_genuine_rollout() {
    let p = parse::parse_file(&fixture("genuine/rollout-final.jsonl")).unwrap();
    assert_eq!(p.session_id, "01a229dc-f117-7e91-85a6-a705d046a8e2");
    assert_eq!(p.cli_version.as_deref(), Some("0.149.0"));
    let plan = p.plan();
    let batches = plan.batches.loaded().unwrap();
    let shape: Vec<(usize, Vec<&str>)> = batches
        .iter()
        .map(|b| {
            (
                b.model_turn,
                b.calls.iter().map(|c| c.tool.as_str()).collect(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            (1, vec!["exec_command"]),
            (2, vec!["apply_patch"]),
            (3, vec!["exec_command", "exec_command"]),
            (4, vec!["apply_patch"]),
            (6, vec!["exec_command"]),
        ]
    );
    assert_eq!(plan.max_boundary(), 5);
    assert_eq!(plan.model_turns, 7);
    assert_eq!(plan.batches.loaded().unwrap()[2].calls[1].locator.line, 26);
}

/// A tool runner whose code-mode cells run on the pinned Node (installed with Codex).
fn cells_ctx(ws: &Path) -> ExecContext {
    ExecContext {
        agent_entrypoint: Some(codex::codex_entrypoint()),
        ..ctx(ws)
    }
}

fn exec_call(id: &str, src: &str) -> pvisor::kit::ToolCall {
    pvisor::kit::ToolCall {
        call_id: id.into(),
        tool: "exec".into(),
        input: Value::from(src),
        original: None,
        locator: Default::default(),
    }
}

fn wait_call(id: &str, args: Value) -> pvisor::kit::ToolCall {
    pvisor::kit::ToolCall {
        tool: "wait".into(),
        input: args,
        ..exec_call(id, "")
    }
}

/// The output value as the model sees it, wall times masked: a string, or the item texts.
fn shown(o: &pvisor::kit::ToolOutcome) -> Value {
    let mask = |t: &str| {
        tools::mask_dynamic(t).replace("Wall time: <dynamic> seconds", "Wall time X seconds")
    };
    match &o.observation.native {
        Some(Value::Array(items)) => Value::Array(
            items
                .iter()
                .map(|i| Value::from(mask(i["text"].as_str().unwrap_or("<image>"))))
                .collect(),
        ),
        _ => Value::from(mask(&o.observation.text)),
    }
}

#[test]
fn code_mode_cells_run_with_codex_semantics_and_texts() {
    let ws = tempfile::tempdir().unwrap();
    let mut t = CodexTools::new(&cells_ctx(ws.path()));
    let hdr = |s: &str| format!("Script {s}\nWall time X seconds\nOutput:\n");
    let cases: Vec<(&str, Value)> = vec![
        (
            "text(\"a\"); text(1/3); text({a:1,b:\"x\"}); text(new Date(0)); text(()=>1); text(); text(10n); text(-0); text(\"\")",
            serde_json::json!([hdr("completed"), "a", "0.3333333333333333", "{\"a\":1,\"b\":\"x\"}", "\"1970-01-01T00:00:00.000Z\"", "undefined", "undefined", "10", "0", ""]),
        ),
        ("const x = 1;", Value::from(hdr("completed"))),
        (
            "text(\"before\");\nthrow new Error(\"boom\")",
            serde_json::json!([hdr("failed"), "before", "Script error:\nError: boom\n    at exec_main.mjs:2:7"]),
        ),
        ("const x = ;", serde_json::json!([hdr("failed"), "Script error:\nSyntaxError: Unexpected token ';'"])),
        ("throw \"plain string\"", serde_json::json!([hdr("failed"), "Script error:\nplain string"])),
        ("throw {a:1}", serde_json::json!([hdr("failed"), "Script error:\n[object Object]"])),
        (
            "console.log(\"x\")",
            serde_json::json!([hdr("failed"), "Script error:\nReferenceError: console is not defined\n    at exec_main.mjs:1:1"]),
        ),
        (
            "await tools.nope({})",
            serde_json::json!([hdr("failed"), "Script error:\nTypeError: tools.nope is not a function\n    at exec_main.mjs:1:13"]),
        ),
        (
            "const o = {}; o.self = o; text(o)",
            serde_json::json!([hdr("failed"), "Script error:\nTypeError: Converting circular structure to JSON\n    --> starting at object with constructor 'Object'\n    --- property 'self' closes the circle\n    at exec_main.mjs:1:27"]),
        ),
        ("import fs from \"fs\"; text(1)", serde_json::json!([hdr("failed"), "Script error:\nUnsupported import in exec: fs"])),
        ("text(\"a\"); exit(); text(\"b\")", serde_json::json!([hdr("completed"), "a"])),
        ("Promise.reject(new Error(\"x\")); text(\"ok\")", serde_json::json!([hdr("completed"), "ok"])),
        (
            "await tools.exec_command(\"ls\")",
            serde_json::json!([hdr("failed"), "Script error:\ntool `exec_command` expects a JSON object for arguments"]),
        ),
        // Nothing of the host is reachable from the cell's realm.
        (
            "text([typeof process, typeof require, typeof fetch, typeof Atomics, typeof setTimeout, tools.exec_command.constructor.constructor(\"return typeof process\")()].join())",
            serde_json::json!([hdr("completed"), "undefined,undefined,undefined,undefined,function,undefined"]),
        ),
        (
            "// @exec: {\"max_output_tokens\": 10}\ntext(\"x\".repeat(2000))",
            serde_json::json!([hdr("completed"), format!("Warning: truncated output (original token count: 500)\nTotal output lines: 1\n\n{}…490 tokens truncated…{}", "x".repeat(20), "x".repeat(20))]),
        ),
        (
            "// @exec: {\"bogus\": 1}\ntext(1)",
            Value::from("exec pragma only supports `yield_time_ms` and `max_output_tokens`; got `bogus`"),
        ),
    ];
    for (i, (src, want)) in cases.iter().enumerate() {
        let out = t.execute(&exec_call(&format!("c{i}"), src)).unwrap();
        assert_eq!(&shown(&out), want, "{src}");
    }
}

#[test]
fn a_cell_s_tool_calls_run_in_the_workspace_and_are_reported_one_by_one() {
    let ws = tempfile::tempdir().unwrap();
    let mut t = CodexTools::new(&cells_ctx(ws.path()));
    let src = "const r = await tools.exec_command({cmd: \"echo hi > f.txt; echo $((1+2)); exit 4\"});\ntext([r.exit_code, r.output, Object.keys(r).join()]);\nawait tools.apply_patch(\"*** Begin Patch\\n*** Add File: g.txt\\n+g\\n*** End Patch\\n\");\nconst [a, b] = await Promise.all([tools.exec_command({cmd: \"cat g.txt\"}), tools.update_plan({plan: [{step: \"s\", status: \"pending\"}]})]);\ntext(a.output + JSON.stringify(b));\nawait tools.apply_patch(\"not a patch\");\n";
    let mut inner = vec![];
    let out = t
        .execute_observed(&exec_call("cell", src), &mut |c| inner.push(c))
        .unwrap();
    let shown = shown(&out);
    assert_eq!(shown[0], "Script failed\nWall time X seconds\nOutput:\n");
    assert_eq!(
        shown[1],
        "[4,\"3\\n\",\"chunk_id,wall_time_seconds,exit_code,original_token_count,output\"]"
    );
    assert_eq!(shown[2], "g\n{}");
    assert!(
        shown[3]
            .as_str()
            .unwrap()
            .starts_with("Script error:\napply_patch verification failed: invalid patch"),
        "{shown}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("f.txt")).unwrap(),
        "hi\n"
    );
    let tools: Vec<(&str, bool)> = inner.iter().map(|c| (c.tool.as_str(), c.ok)).collect();
    assert_eq!(tools.len(), 5, "{tools:?}");
    assert_eq!(tools[0], ("exec_command", true));
    assert_eq!(tools[1], ("apply_patch", true));
    assert_eq!(tools[4], ("apply_patch", false));
    assert_eq!(inner[1].touched, vec![PathBuf::from("g.txt")]);
    assert!(out.touched.contains(&PathBuf::from("g.txt")));
}

#[test]
fn a_yielded_cell_is_waited_for_and_terminated() {
    let ws = tempfile::tempdir().unwrap();
    let mut t = CodexTools::new(&cells_ctx(ws.path()));
    let slow = "// @exec: {\"yield_time_ms\": 300}\ntext(\"a\");\nawait new Promise(r => setTimeout(r, 1200));\ntext(\"b\");\n";
    let out = t.execute(&exec_call("s1", slow)).unwrap();
    assert_eq!(
        shown(&out),
        serde_json::json!([
            "Script running with cell ID 1\nWall time X seconds\nOutput:\n",
            "a"
        ])
    );
    let out = t
        .execute(&wait_call(
            "w1",
            serde_json::json!({"cell_id": "1", "yield_time_ms": 5000}),
        ))
        .unwrap();
    assert_eq!(
        shown(&out),
        serde_json::json!(["Script completed\nWall time X seconds\nOutput:\n", "b"])
    );
    let out = t
        .execute(&wait_call("w2", serde_json::json!({"cell_id": "1"})))
        .unwrap();
    assert_eq!(
        shown(&out),
        serde_json::json!([
            "Script failed\nWall time X seconds\nOutput:\n",
            "Script error:\nexec cell 1 not found"
        ])
    );
    // A busy cell (no await at all) yields too, and is ended by `terminate`.
    let out = t
        .execute(&exec_call(
            "s2",
            "// @exec: {\"yield_time_ms\": 300}\nwhile (true) {}\n",
        ))
        .unwrap();
    assert_eq!(
        shown(&out),
        Value::from("Script running with cell ID 2\nWall time X seconds\nOutput:\n")
    );
    let out = t
        .execute(&wait_call(
            "w3",
            serde_json::json!({"cell_id": "2", "terminate": true}),
        ))
        .unwrap();
    assert_eq!(
        shown(&out),
        Value::from("Script terminated\nWall time X seconds\nOutput:\n")
    );
}

#[test]
fn cells_codex_cannot_replay_are_refused_before_anything_runs() {
    let a = Codex;
    for src in [
        "notify(\"hello\")",
        "const g = await tools.create_goal({objective: \"x\"}); text(g)",
        "text(ALL_TOOLS)",
        "await tools[\"view_image\"]({path: \"a.png\"})",
    ] {
        let call = exec_call("r", src);
        assert_eq!(a.classify(&call), ToolClass::Unknown, "{src}");
        let ws = tempfile::tempdir().unwrap();
        let e = CodexTools::new(&ctx(ws.path()))
            .execute(&call)
            .unwrap_err()
            .to_string();
        assert!(e.contains("code-mode cell"), "{e}");
        assert!(
            std::fs::read_dir(ws.path()).unwrap().next().is_none(),
            "nothing ran"
        );
    }
    let ok = exec_call(
        "ok",
        "const r = await tools.exec_command({cmd: \"ls\"}); text(r.output)",
    );
    assert_eq!(a.classify(&ok), ToolClass::Mutating);
}

#[test]
fn the_genuine_code_mode_session_replays_with_codex_framing() {
    let a = Codex;
    let path = fixture("codemode/rollout-final.jsonl");
    let plan = a.parse(&path, &std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(plan.batches.len(), 5);
    let ws = tempfile::tempdir().unwrap();
    let mut t = a.tool_runner(&plan, &cells_ctx(ws.path()), &[]).unwrap();
    for b in plan.batches.loaded().unwrap().iter() {
        for call in &b.calls {
            assert_eq!(call.tool, "exec");
            let out = t.execute(call).unwrap();
            let orig = call.original.as_ref().unwrap();
            assert_eq!(
                a.mask_dynamic(call, &out.observation.text),
                a.mask_dynamic(call, &orig.text),
                "{}",
                call.call_id
            );
            assert_eq!(
                out.observation
                    .native
                    .as_ref()
                    .map(|v| v.as_array().unwrap().len()),
                orig.native.as_ref().map(|v| v.as_array().unwrap().len()),
                "{}: the same items",
                call.call_id
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(),
        "line one\nline 2 (edited)\nline three\n"
    );
}

#[test]
fn replay_every_boundary_matches_originals() {
    let path = fixture("genuine/rollout-final.jsonl");
    let bytes = std::fs::read(&path).unwrap();
    for n in 1..=5 {
        let a = Codex;
        let plan = a.parse(&path, &bytes).unwrap();
        let ws = tempfile::tempdir().unwrap();
        let c = ctx(ws.path());
        let mut tools = a.tool_runner(&plan, &c, &[]).unwrap();
        let mut obs = BTreeMap::new();
        for b in &plan.batches.loaded().unwrap()[..n] {
            for call in &b.calls {
                assert_ne!(a.classify(call), ToolClass::Unknown);
                let out = tools.execute(call).unwrap();
                let orig = call.original.as_ref().unwrap();
                assert_eq!(
                    a.mask_dynamic(call, &out.observation.text),
                    a.mask_dynamic(call, &orig.text),
                    "call {}",
                    call.call_id
                );
                assert_eq!(out.observation.is_error, orig.is_error);
                obs.insert(call.call_id.clone(), out.observation);
            }
        }
        // Rebuild with the fresh observations.
        let state = tempfile::tempdir().unwrap();
        let art = state.path().join("out/rollout.jsonl");
        let r = a
            .rebuild(&RebuildRequest {
                source: &path,
                plan: &plan,
                after_step: n,
                observations: pvisor::kit::Observations::Fresh(&obs),
                workspace: ws.path(),
                state_dir: state.path(),
                artifact_path: &art,
                touch_workspace: true,
                agent_entrypoint: None,
                for_continuation: true,
            })
            .unwrap();
        assert_eq!(r.session_id, "01a229dc-f117-7e91-85a6-a705d046a8e2");
        assert!(r
            .native_path
            .starts_with(state.path().join("codex-home/sessions/2026/11/30")));
        assert!(r
            .native_path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .ends_with("-01a229dc-f117-7e91-85a6-a705d046a8e2.jsonl"));
        let re = parse::parse_file(&r.native_path).unwrap();
        assert_eq!(re.plan().max_boundary(), n);
        for b in re.plan().batches.loaded().unwrap().iter() {
            for call in &b.calls {
                assert_eq!(call.original.as_ref().unwrap(), &obs[&call.call_id]);
            }
        }
        let last = r.prefix.last().unwrap();
        assert!(last["type"].as_str().unwrap().ends_with("_output"));
        // Without the prefix the rollout is copied by the byte ranges the parse kept: the same
        // bytes as the line-by-line rebuild, rewritten outputs included.
        let state2 = tempfile::tempdir().unwrap();
        let art2 = state2.path().join("out/rollout.jsonl");
        let mut changed = obs.clone();
        let first = plan.batches.loaded().unwrap()[0].calls[0].call_id.clone();
        changed
            .get_mut(&first)
            .unwrap()
            .text
            .push_str("\u{e9}\"changed\"");
        let mut made = vec![];
        for (o, st, art) in [(&changed, &state, &art), (&changed, &state2, &art2)] {
            let r = a
                .rebuild(&RebuildRequest {
                    source: &path,
                    plan: &plan,
                    after_step: n,
                    observations: pvisor::kit::Observations::Fresh(o),
                    workspace: ws.path(),
                    state_dir: st.path(),
                    artifact_path: art,
                    touch_workspace: true,
                    agent_entrypoint: None,
                    for_continuation: st.path() == state.path(),
                })
                .unwrap();
            made.push((r.digest, r.records));
        }
        assert_eq!(made[0], made[1], "boundary {n}");
        let (one, two) = (std::fs::read(&art).unwrap(), std::fs::read(&art2).unwrap());
        assert_eq!(
            String::from_utf8_lossy(&one),
            String::from_utf8_lossy(&two),
            "boundary {n}"
        );
        assert!(String::from_utf8_lossy(&two).contains("\u{e9}\\\"changed\\\""));
        let cfg = std::fs::read_to_string(state.path().join("codex-home/config.toml")).unwrap();
        assert!(
            cfg.contains("wire_api = \"responses\"") && cfg.contains("model = \"gpt-5.5\""),
            "{cfg}"
        );
    }
}

#[test]
#[allow(clippy::needless_range_loop)]
fn prefix_equals_original_request_n_plus_1() {
    let path = fixture("genuine/rollout-run1.jsonl");
    let a = Codex;
    let plan = a.parse(&path, &std::fs::read(&path).unwrap()).unwrap();
    let reqs: Vec<Value> = std::fs::read_to_string(fixture("genuine/requests-run1.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let originals: BTreeMap<String, Observation> = plan
        .batches
        .loaded()
        .unwrap()
        .iter()
        .flat_map(|b| {
            b.calls
                .iter()
                .map(|c| (c.call_id.clone(), c.original.clone().unwrap()))
        })
        .collect();
    for n in 1..=plan.max_boundary() {
        let state = tempfile::tempdir().unwrap();
        let art = state.path().join("a.jsonl");
        let r = a
            .rebuild(&RebuildRequest {
                source: &path,
                plan: &plan,
                after_step: n,
                observations: pvisor::kit::Observations::Fresh(&originals),
                workspace: state.path(),
                state_dir: state.path(),
                artifact_path: &art,
                touch_workspace: true,
                agent_entrypoint: None,
                for_continuation: true,
            })
            .unwrap();
        let input = reqs[n]["body"]["input"].as_array().unwrap();
        assert_eq!(&r.prefix, input, "boundary {n}");
        // Prepare-only: the rebuilt rollout is the original's first lines, byte for byte.
        let orig = std::fs::read_to_string(&path).unwrap();
        assert!(orig.starts_with(&std::fs::read_to_string(&r.native_path).unwrap()));
    }
    assert_eq!(
        parse::parse_file(&path).unwrap().last_turn_model.as_deref(),
        Some("gpt-5.5")
    );
}

#[test]
fn tool_texts() {
    let a = Codex;
    let ws = tempfile::tempdir().unwrap();
    let c = ctx(ws.path());
    let runner = std::cell::RefCell::new(CodexTools::new(&c));
    let call = |tool: &str, input: Value| pvisor::kit::ToolCall {
        call_id: "c".into(),
        tool: tool.into(),
        input,
        original: None,
        locator: pvisor::kit::Locator {
            line: 1,
            native_id: None,
        },
    };
    let t = |tool: &str, input: Value| {
        tools::mask_dynamic(
            &runner
                .borrow_mut()
                .execute(&call(tool, input))
                .unwrap()
                .observation
                .text,
        )
    };
    assert_eq!(
        t(
            "update_plan",
            serde_json::json!({"plan":[{"step":"a","status":"pending"}]})
        ),
        "Plan updated"
    );
    assert_eq!(
        t("exec_command", serde_json::json!({"cmd":"echo out; echo err >&2; exit 3"})),
        "Chunk ID: <dynamic>\nWall time: <dynamic> seconds\nProcess exited with code 3\nOriginal token count: 2\nOutput:\nout\nerr\n"
    );
    assert_eq!(
        t(
            "shell",
            serde_json::json!({"command":["bash","-c","printf hi"]})
        ),
        "Exit code: 0\nWall time: <dynamic> seconds\nOutput:\nhi"
    );
    assert_eq!(
        t("shell_command", serde_json::json!({"command":"false"})),
        "Exit code: 1\nWall time: <dynamic> seconds\nOutput:\n"
    );
    assert_eq!(
        t("apply_patch", serde_json::json!({"input":"*** Begin Patch\n*** Add File: d/x.txt\n+x\n*** End Patch"})),
        "Exit code: 0\nWall time: <dynamic> seconds\nOutput:\nSuccess. Updated the following files:\nA d/x.txt\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("d/x.txt")).unwrap(),
        "x\n"
    );
    // A long-running command keeps its session; write_stdin polls it to the end.
    let first = runner
        .borrow_mut()
        .execute(&call(
            "exec_command",
            serde_json::json!({"cmd":"echo start; sleep 1; echo end","yield_time_ms":250}),
        ))
        .unwrap()
        .observation
        .text;
    assert!(
        first.contains("Process running with session ID "),
        "{first}"
    );
    let id: String = first
        .lines()
        .find_map(|l| l.strip_prefix("Process running with session ID "))
        .unwrap()
        .into();
    let second = runner.borrow_mut().execute(&call("write_stdin", serde_json::json!({"session_id": id.parse::<u64>().unwrap(), "chars":"", "yield_time_ms": 5000}))).unwrap().observation.text;
    assert!(
        second.contains("\nProcess exited with code 0\nOriginal token count: "),
        "{second}"
    );
    let out = |t: &str| t.split_once("\nOutput:\n").unwrap().1.to_string();
    assert_eq!(out(&first) + &out(&second), "start\nend\n");
    // Unknown tool: refused.
    assert!(runner
        .borrow_mut()
        .execute(&call("frobnicate", serde_json::json!({})))
        .is_err());
    assert_eq!(
        a.classify(&call("frobnicate", serde_json::json!({}))),
        ToolClass::Unknown
    );
}

mod mutations {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn mutated_rollouts_never_panic(pos in 0usize..100_000, byte in any::<u8>(), cut in 0usize..100_000, mode in 0u8..3) {
            let mut bytes = std::fs::read(fixture("genuine/rollout-final.jsonl")).unwrap();
            match mode {
                0 => { let i = pos % bytes.len(); bytes[i] = byte; }
                1 => { let i = cut % bytes.len(); bytes.truncate(i); }
                _ => { let i = pos % bytes.len(); bytes.insert(i, byte); }
            }
            match parse::parse_bytes(Path::new("m.jsonl"), &bytes) {
                Ok(p) => { let _ = p.plan().max_boundary(); }
                Err(e) => prop_assert!(e.line > 0 || e.field == "file", "{e}"),
            }
        }
    }

    #[test]
    fn orphan_output_and_missing_meta_name_lines() {
        let src = std::fs::read_to_string(fixture("genuine/rollout-final.jsonl")).unwrap();
        let lines: Vec<&str> = src.lines().collect();
        // Line 13 (a call) dropped, the lines numbered on as Codex would have (`ordinal`).
        let no_call: String = lines
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 12)
            .enumerate()
            .map(|(k, (_, l))| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["ordinal"] = k.into();
                format!("{v}\n")
            })
            .collect();
        let e = parse::parse_bytes(Path::new("m"), no_call.as_bytes()).unwrap_err();
        assert_eq!(e.line, 14, "{e}");
        assert!(e.message.contains("unknown call"), "{e}");
        let no_meta: String = lines[1..].iter().map(|l| format!("{l}\n")).collect();
        let e = parse::parse_bytes(Path::new("m"), no_meta.as_bytes()).unwrap_err();
        assert!(e.message.contains("session_meta"), "{e}");
    }
}

/// Codex's tools run under the process supervisor: a `workdir` outside the workspace is
/// refused before anything runs, and every command's full output is logged.
#[test]
fn workdir_is_confined_and_output_logged() {
    let ws = tempfile::tempdir().unwrap();
    let c = ctx(ws.path());
    let mut t = CodexTools::new(&c);
    let call = |id: &str, input: Value| pvisor::kit::ToolCall {
        call_id: id.into(),
        tool: "shell".into(),
        input,
        original: None,
        locator: Default::default(),
    };
    let outside = tempfile::tempdir().unwrap();
    let e = t
        .execute(&call(
            "c1",
            serde_json::json!({"command": ["touch", "escaped"], "workdir": outside.path()}),
        ))
        .unwrap_err();
    assert!(e.to_string().contains("outside"), "{e}");
    assert!(!outside.path().join("escaped").exists(), "nothing ran");
    let out = t
        .execute(&call(
            "c2",
            serde_json::json!({"command": ["sh", "-c", "echo logged"]}),
        ))
        .unwrap();
    assert!(out.observation.text.contains("logged"));
    assert_eq!(
        std::fs::read_to_string(c.log_dir.join("c2.log")).unwrap(),
        "logged\n"
    );
}

/// A resumed replay cannot re-attach a cell the earlier process left running; a cell a later
/// `wait` saw end is no obstacle.
#[test]
fn a_resume_is_refused_only_while_a_completed_cell_was_left_running() {
    let a = Codex;
    let path = fixture("codemode/rollout-final.jsonl");
    let plan = a.parse(&path, &std::fs::read(&path).unwrap()).unwrap();
    let ws = tempfile::tempdir().unwrap();
    let obs = |t: &str| Observation {
        text: t.into(),
        is_error: false,
        native: None,
    };
    let yielded = (
        exec_call(
            "e1",
            "// @exec: {\"yield_time_ms\": 300}\nawait new Promise(r => setTimeout(r, 5000))",
        ),
        obs("Script running with cell ID 1\nWall time 0.3 seconds\nOutput:\n"),
    );
    let e = a
        .tool_runner(&plan, &cells_ctx(ws.path()), std::slice::from_ref(&yielded))
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("call e1 left a code-mode cell running"), "{e}");
    let waited = (
        wait_call("w1", serde_json::json!({"cell_id": "1"})),
        obs("Script completed\nWall time 4.7 seconds\nOutput:\n"),
    );
    assert!(a
        .tool_runner(&plan, &cells_ctx(ws.path()), &[yielded, waited])
        .is_ok());
}
