//! Claude Code session parsing: malformed sessions give a TrajectoryError naming the line
//! and field; no input makes the parser panic.

use proptest::prelude::*;
use pvisor::adapters::claude_code::parse::{parse_bytes, ParsedSession};
use pvisor::error::TrajectoryError;
use serde_json::{json, Value};
use std::path::Path;

const SESSION: &str =
    "tests/fixtures/claude/native-run1/bb060794-24b9-4e25-8e25-e714a6132171.jsonl";

fn lines() -> Vec<String> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(SESSION)).unwrap();
    text.lines().map(str::to_owned).collect()
}

fn join(lines: &[String]) -> Vec<u8> {
    let mut s = lines.join("\n");
    s.push('\n');
    s.into_bytes()
}

fn parse(lines: &[String]) -> Result<ParsedSession, TrajectoryError> {
    parse_bytes(Path::new("session.jsonl"), &join(lines))
}

fn edit_line(lines: &mut [String], n: usize, f: impl FnOnce(&mut Value)) {
    let mut v: Value = serde_json::from_str(&lines[n - 1]).unwrap();
    f(&mut v);
    lines[n - 1] = serde_json::to_string(&v).unwrap();
}

#[test]
fn truncated_last_line() {
    let mut l = lines();
    let last = l.pop().unwrap();
    let mut bytes = join(&l);
    bytes.extend_from_slice(&last.as_bytes()[..last.len() / 2]);
    let e = parse_bytes(Path::new("s.jsonl"), &bytes).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (47, "line"));
    assert!(e.message.contains("truncated"), "{}", e.message);
    assert_eq!(e.path, Path::new("s.jsonl"));
}

#[test]
fn invalid_json_line() {
    let mut l = lines();
    l[9] = "{\"type\": \"atis-latch\", ".into();
    let e = parse(&l).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (10, "line"));
    l[9] = "[1, 2]".into();
    let e = parse(&l).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (10, "line"));
    assert!(e.message.contains("JSON object"));
}

#[test]
fn broken_chain() {
    let mut l = lines();
    // Line 33 (the text block of batch 3) is the parent of line 34.
    l[32] = String::new();
    let e = parse(&l).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (34, "parentUuid"));
    assert!(
        e.message.contains("401b6ee6-8e35-4998-ad51-87ba3e08fa64"),
        "{}",
        e.message
    );
}

#[test]
fn duplicate_uuid_with_different_content() {
    let mut l = lines();
    let mut copy: Value = serde_json::from_str(&l[23]).unwrap();
    copy["timestamp"] = json!("2026-11-30T00:31:10.000Z");
    l.push(serde_json::to_string(&copy).unwrap());
    let e = parse(&l).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (48, "uuid"));
    assert!(e.message.contains("line 24"), "{}", e.message);
}

#[test]
fn identical_duplicate_line_is_ignored() {
    let mut l = lines();
    l.push(l[23].clone());
    let p = parse(&l).unwrap();
    assert_eq!(p.plan(), parse(&lines()).unwrap().plan());
    assert!(p.records.last().unwrap().duplicate);
}

#[test]
fn tool_use_without_result_before_a_later_batch() {
    let mut l = lines();
    // Line 38 holds the Read result of batch 3; batch 4 follows.
    l[37] = String::new();
    let e = parse(&l).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (34, "message.content[0]"));
    assert!(e.message.contains("toolu_fake_t002_0"), "{}", e.message);
}

#[test]
fn result_without_tool_use() {
    let mut l = lines();
    edit_line(&mut l, 39, |v| {
        v["message"]["content"][0]["tool_use_id"] = json!("toolu_nope")
    });
    let e = parse(&l).unwrap_err();
    assert_eq!(
        (e.line, e.field.as_str()),
        (39, "message.content[0].tool_use_id")
    );
}

#[test]
fn duplicate_tool_use_id() {
    let mut l = lines();
    edit_line(&mut l, 35, |v| {
        v["message"]["content"][0]["id"] = json!("toolu_fake_t002_0")
    });
    let e = parse(&l).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (35, "message.content[0].id"));
}

#[test]
fn wrong_field_types_are_named() {
    let mut l = lines();
    edit_line(&mut l, 21, |v| v["parentUuid"] = json!(7));
    let e = parse(&l).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (21, "parentUuid"));
    let mut l = lines();
    edit_line(&mut l, 21, |v| {
        v["message"]["content"][0]["name"] = json!(null)
    });
    let e = parse(&l).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (21, "message.content[0].name"));
    let mut l = lines();
    edit_line(&mut l, 24, |v| {
        v["message"]["content"][0]["is_error"] = json!("no")
    });
    let e = parse(&l).unwrap_err();
    assert_eq!(
        (e.line, e.field.as_str()),
        (24, "message.content[0].is_error")
    );
}

#[test]
fn incomplete_final_batch_is_not_an_error() {
    let l: Vec<String> = lines().into_iter().take(42).collect();
    let p = parse(&l).unwrap();
    let plan = p.plan();
    assert_eq!(plan.batches.len(), 4);
    assert!(!plan.batches.in_memory().unwrap()[3].complete);
    assert!(plan.batches.in_memory().unwrap()[3].calls[0]
        .original
        .is_none());
    assert_eq!(plan.max_boundary(), 3);
    assert_eq!(plan.model_turns, 4);
}

#[test]
fn cut_after_batch_three_results() {
    // The boundary-cut prefix of the reference notes: lines 1-39.
    let l: Vec<String> = lines().into_iter().take(39).collect();
    let p = parse(&l).unwrap();
    assert_eq!(p.plan().batches.len(), 3);
    assert_eq!(p.plan().max_boundary(), 3);
    assert_eq!(p.tip().unwrap().line, 39);
}

#[test]
fn sidechain_and_unknown_records_pass_through() {
    let mut l = lines();
    let side = json!({"parentUuid": null, "isSidechain": true, "type": "user", "uuid": "side-1", "sessionId": "bb060794-24b9-4e25-8e25-e714a6132171",
        "message": {"role": "user", "content": "sub-agent prompt"}});
    let side2 = json!({"parentUuid": "side-1", "isSidechain": true, "type": "assistant", "uuid": "side-2",
        "message": {"id": "msg_side", "role": "assistant", "content": [{"type": "tool_use", "id": "toolu_side", "name": "Bash", "input": {"command": "ls"}}]}});
    l.insert(20, serde_json::to_string(&side).unwrap());
    l.insert(21, serde_json::to_string(&side2).unwrap());
    l.push(r#"{"type":"some-future-record","payload":{"x":1}}"#.into());
    let p = parse(&l).unwrap();
    assert_eq!(p.plan().batches.len(), 4);
    assert_eq!(p.plan().model_turns, 5);
    assert!(p
        .records
        .iter()
        .any(|r| r.is_sidechain && r.uuid.as_deref() == Some("side-2")));
    assert_eq!(p.records.last().unwrap().kind, "some-future-record");
}

fn rec(kind: &str, uuid: &str, parent: Option<&str>, message: Value) -> String {
    serde_json::to_string(
        &json!({"parentUuid": parent, "isSidechain": false, "type": kind, "uuid": uuid,
        "sessionId": "s1", "cwd": "/w", "version": "2.1.332", "message": message}),
    )
    .unwrap()
}

fn tool_use(msg: &str, id: &str, cmd: &str) -> Value {
    json!({"id": msg, "role": "assistant", "model": "m", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": cmd}}]})
}

fn tool_result(id: &str, text: &str) -> Value {
    json!({"role": "user", "content": [{"tool_use_id": id, "type": "tool_result", "content": text, "is_error": false}]})
}

#[test]
fn compact_boundary_continues_through_logical_parent() {
    let boundary = serde_json::to_string(&json!({"parentUuid": null, "logicalParentUuid": "r1", "isSidechain": false, "type": "system",
        "subtype": "compact_boundary", "uuid": "cb", "sessionId": "s1", "content": "Conversation compacted"})).unwrap();
    let l = vec![
        rec(
            "user",
            "u1",
            None,
            json!({"role": "user", "content": "task"}),
        ),
        rec(
            "assistant",
            "a1",
            Some("u1"),
            tool_use("m1", "t1", "echo one"),
        ),
        rec("user", "r1", Some("a1"), tool_result("t1", "one")),
        boundary,
        rec(
            "user",
            "sum",
            Some("cb"),
            json!({"role": "user", "content": "summary"}),
        ),
        rec(
            "assistant",
            "a2",
            Some("sum"),
            tool_use("m2", "t2", "echo two"),
        ),
        rec("user", "r2", Some("a2"), tool_result("t2", "two")),
    ];
    let p = parse(&l).unwrap();
    assert_eq!(p.plan().batches.len(), 2);
    assert_eq!(p.compact_boundaries.len(), 1);
    assert_eq!(p.records[p.compact_boundaries[0]].line, 4);
    assert_eq!(
        p.plan().batches.in_memory().unwrap()[1].calls[0]
            .original
            .as_ref()
            .unwrap()
            .text,
        "two"
    );
}

#[test]
fn abandoned_branch_is_excluded() {
    // A rewind: the user re-prompted from u1; the first branch (a1/r1) is abandoned.
    let l = vec![
        rec(
            "user",
            "u1",
            None,
            json!({"role": "user", "content": "task"}),
        ),
        rec(
            "assistant",
            "a1",
            Some("u1"),
            tool_use("m1", "t1", "echo old"),
        ),
        rec("user", "r1", Some("a1"), tool_result("t1", "old")),
        rec(
            "user",
            "u2",
            None,
            json!({"role": "user", "content": "task, again"}),
        ),
        rec(
            "assistant",
            "a2",
            Some("u2"),
            tool_use("m2", "t2", "echo new"),
        ),
        rec("user", "r2", Some("a2"), tool_result("t2", "new")),
        rec(
            "assistant",
            "a3",
            Some("r2"),
            json!({"id": "m3", "role": "assistant", "content": [{"type": "text", "text": "done"}]}),
        ),
    ];
    let p = parse(&l).unwrap();
    assert_eq!(p.plan().batches.len(), 1);
    assert_eq!(
        p.plan().batches.in_memory().unwrap()[0].calls[0].call_id,
        "t2"
    );
    assert_eq!(p.plan().model_turns, 2);
    assert!(!p.on_chain(1));
}

#[test]
fn parallel_calls_with_the_chain_through_the_first_result() {
    // The next turn hangs off the *first* result; the second tool_use line and its
    // result are off the chain and re-attached.
    let block = |id: &str| json!({"id": "m1", "role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "true"}}]});
    let l = vec![
        rec(
            "user",
            "u1",
            None,
            json!({"role": "user", "content": "task"}),
        ),
        rec("assistant", "a1", Some("u1"), block("t1")),
        rec("assistant", "a2", Some("a1"), block("t2")),
        rec("user", "r1", Some("a1"), tool_result("t1", "x")),
        rec("user", "r2", Some("a2"), tool_result("t2", "y")),
        rec(
            "assistant",
            "a3",
            Some("r1"),
            json!({"id": "m2", "role": "assistant", "content": [{"type": "text", "text": "done"}]}),
        ),
    ];
    let p = parse(&l).unwrap();
    let b = p.plan().batches.in_memory().unwrap();
    assert_eq!(b.len(), 1);
    assert_eq!(
        b[0].calls
            .iter()
            .map(|c| c.call_id.as_str())
            .collect::<Vec<_>>(),
        vec!["t1", "t2"]
    );
    assert!(b[0].complete);
}

#[test]
fn array_content_keeps_native_blocks() {
    let content =
        json!([{"type": "text", "text": "part one "}, {"type": "text", "text": "part two"}]);
    let l = vec![
        rec(
            "user",
            "u1",
            None,
            json!({"role": "user", "content": "task"}),
        ),
        rec("assistant", "a1", Some("u1"), tool_use("m1", "t1", "true")),
        rec(
            "user",
            "r1",
            Some("a1"),
            json!({"role": "user", "content": [{"tool_use_id": "t1", "type": "tool_result", "content": content, "is_error": true}]}),
        ),
    ];
    let p = parse(&l).unwrap();
    let o = p.plan().batches.in_memory().unwrap()[0].calls[0]
        .original
        .clone()
        .unwrap();
    assert_eq!(o.text, "part one part two");
    assert!(o.is_error);
    assert_eq!(o.native, Some(content));
}

#[test]
fn cycle_is_an_error() {
    let l = vec![
        rec(
            "user",
            "u1",
            Some("a1"),
            json!({"role": "user", "content": "task"}),
        ),
        rec(
            "assistant",
            "a1",
            Some("u1"),
            json!({"id": "m", "role": "assistant", "content": []}),
        ),
        rec(
            "user",
            "u9",
            Some("a1"),
            json!({"role": "user", "content": "leaf"}),
        ),
    ];
    let e = parse(&l).unwrap_err();
    assert_eq!(e.field, "parentUuid");
}

#[test]
fn empty_input() {
    let p = parse_bytes(Path::new("e.jsonl"), b"").unwrap();
    assert!(p.plan().batches.is_empty());
    assert_eq!(p.plan().model_turns, 0);
    let p = parse_bytes(Path::new("e.jsonl"), b"\n\n").unwrap();
    assert!(p.records.is_empty());
}

fn check_invariants(p: &ParsedSession) {
    let plan = p.plan();
    for (i, b) in plan.batches.in_memory().unwrap().iter().enumerate() {
        assert_eq!(b.index, i + 1);
        assert!(!b.calls.is_empty());
        assert_eq!(b.complete, b.calls.iter().all(|c| c.original.is_some()));
    }
    assert!(plan.max_boundary() <= plan.batches.len());
    assert!(p.chain.windows(2).all(|w| w[0] < w[1]));
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize),
    Duplicate(usize),
    Swap(usize, usize),
    Truncate(usize, usize),
    Byte(usize, usize, u8),
    NullParent(usize),
    CopyUuid(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Delete),
        any::<usize>().prop_map(Mutation::Duplicate),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Swap(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Truncate(a, b)),
        (any::<usize>(), any::<usize>(), any::<u8>()).prop_map(|(a, b, c)| Mutation::Byte(a, b, c)),
        any::<usize>().prop_map(Mutation::NullParent),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::CopyUuid(a, b)),
    ]
}

fn apply(lines: &mut Vec<Vec<u8>>, m: &Mutation) {
    if lines.is_empty() {
        return;
    }
    let n = lines.len();
    match *m {
        Mutation::Delete(i) => {
            lines.remove(i % n);
        }
        Mutation::Duplicate(i) => {
            let l = lines[i % n].clone();
            lines.insert(i % n, l);
        }
        Mutation::Swap(a, b) => lines.swap(a % n, b % n),
        Mutation::Truncate(i, k) => {
            let l = &mut lines[i % n];
            let len = l.len();
            l.truncate(k % (len + 1));
        }
        Mutation::Byte(i, k, b) => {
            let l = &mut lines[i % n];
            if !l.is_empty() {
                let len = l.len();
                l[k % len] = b;
            }
        }
        Mutation::NullParent(i) => {
            if let Ok(mut v) = serde_json::from_slice::<Value>(&lines[i % n]) {
                if v.get("parentUuid").is_some() {
                    v["parentUuid"] = Value::Null;
                    lines[i % n] = serde_json::to_vec(&v).unwrap();
                }
            }
        }
        Mutation::CopyUuid(a, b) => {
            let src: Option<Value> = serde_json::from_slice::<Value>(&lines[a % n])
                .ok()
                .and_then(|v| v.get("uuid").cloned());
            if let (Some(u), Ok(mut v)) = (src, serde_json::from_slice::<Value>(&lines[b % n])) {
                if v.is_object() {
                    v["parentUuid"] = u;
                    lines[b % n] = serde_json::to_vec(&v).unwrap();
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let _ = parse_bytes(Path::new("fuzz.jsonl"), &bytes);
    }

    #[test]
    fn random_json_lines_never_panic(lines in proptest::collection::vec("[{}\\[\\]\":,a-z0-9 ]{0,60}", 0..20)) {
        let text = lines.join("\n");
        let _ = parse_bytes(Path::new("fuzz.jsonl"), text.as_bytes());
    }

    #[test]
    fn mutated_fixture_never_panics(muts in proptest::collection::vec(mutation(), 1..6), trailing_newline in any::<bool>()) {
        let mut ls: Vec<Vec<u8>> = lines().into_iter().map(String::into_bytes).collect();
        for m in &muts {
            apply(&mut ls, m);
        }
        let mut bytes = ls.join(&b'\n');
        if trailing_newline {
            bytes.push(b'\n');
        }
        match parse_bytes(Path::new("fuzz.jsonl"), &bytes) {
            Ok(p) => check_invariants(&p),
            Err(e) => prop_assert!(e.line <= ls.len() + 1, "line {} of {}", e.line, ls.len()),
        }
    }
}

/// A record of the conversation that Claude would not load (an unknown type, an attachment
/// without its kind) is refused: resuming, Claude would cut the chain there or resume against
/// an earlier prompt snapshot.
#[test]
fn a_chain_record_claude_does_not_load_is_refused() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/claude/recorded/parallel-order-2.1.332/session.jsonl"),
    )
    .unwrap();
    let original: Vec<String> = text.lines().map(str::to_owned).collect();
    // Line 29: the second prompt snapshot, the parent of the reply after it.
    assert!(original[28].contains("\"prompt_snapshot\""));
    parse(&original).expect("the genuine session parses");
    let refused = |edit: &dyn Fn(&mut Value)| {
        let mut l = original.clone();
        edit_line(&mut l, 29, edit);
        let e = parse(&l).unwrap_err();
        (e.line, e.field, e.message)
    };
    let (line, field, message) = refused(&|v| v["type"] = json!("attachmenu"));
    assert_eq!((line, field.as_str()), (29, "type"), "{message}");
    assert!(message.contains("`attachmenu`"), "{message}");
    let kind = "attachment.type".to_string();
    let (line, field, message) = refused(&|v| {
        v["attachment"].as_object_mut().unwrap().remove("type");
    });
    assert_eq!((line, &field), (29, &kind), "{message}");
    assert_eq!(refused(&|v| v["attachment"]["type"] = json!(7)).1, kind);
    // renamed: no longer a prompt snapshot, yet it carries a system prompt
    let (line, field, message) = refused(&|v| v["attachment"]["type"] = json!("prompt_snapshou"));
    assert_eq!((line, &field), (29, &kind), "{message}");
    // a key of the snapshot renamed: its value would be lost on resume
    let (line, field, message) = refused(&|v| {
        let a = v["attachment"].as_object_mut().unwrap();
        let prefix = a.remove("cliPrefix").unwrap();
        a.insert("cliPre&ix".into(), prefix);
    });
    assert_eq!(
        (line, field.as_str()),
        (29, "attachment.cliPre&ix"),
        "{message}"
    );
    // the snapshot that adds the tools lost them: it would look like a copy of the one
    // before it, which has no `cliPrefix`
    let (line, field, message) = refused(&|v| {
        v["attachment"].as_object_mut().unwrap().remove("tools");
    });
    assert_eq!(
        (line, field.as_str()),
        (29, "attachment.tools"),
        "{message}"
    );
    assert!(message.contains("cliPrefix"), "{message}");
    // a snapshot that lost the tools the one before it on the chain lists (line 14, the
    // first snapshot, given line 29's tools; line 29 without tools or prefix)
    let tools: Value =
        serde_json::from_str::<Value>(&original[28]).unwrap()["attachment"]["tools"].clone();
    assert!(original[13].contains("\"prompt_snapshot\""));
    let mut l = original.clone();
    edit_line(&mut l, 14, |v: &mut Value| {
        v["attachment"]["tools"] = tools.clone()
    });
    parse(&l).expect("the first snapshot with the tools is still one Claude could write");
    edit_line(&mut l, 29, |v: &mut Value| {
        let a = v["attachment"].as_object_mut().unwrap();
        a.remove("tools");
        a.remove("cliPrefix");
    });
    let e = parse(&l).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (29, "attachment.tools"), "{e}");
    assert!(
        e.message.contains("line 14") && e.message.contains("lists some"),
        "{e}"
    );
}
