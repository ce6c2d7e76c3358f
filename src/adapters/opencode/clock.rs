//! Keeping the ids OpenCode makes after the recorded ones when the agent's clock is behind
//! the recording's.
//!
//! OpenCode orders messages and parts by id, and its ids grow with the clock
//! ([`super::ids`]); its loop finds the newest user message by comparing ids as strings. A
//! session recorded on a machine whose clock was ahead of the agent's (another machine,
//! another zone set wrong, a clock reset) would put the continuation's first message
//! *before* the recorded ones. So, when the recorded ids are not safely older than the
//! agent's clock, the session is imported with every message and part id and every time
//! moved back by one delta (order, suffixes and texts kept; the model sees none of them),
//! and the continued session is mapped back to the recorded ids.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use super::session::Session;

const MASK: u64 = (1 << 48) - 1;
/// How far before the agent's clock the newest recorded id must stand.
const MARGIN_MS: u64 = 1_000;
/// Where the newest recorded id is moved to, before the agent's clock.
const SHIFT_TO_MS: u64 = 24 * 3600 * 1000;

/// The agent's clock as OpenCode wrote it into the store on import (parts get "now" as
/// their `time_created`).
pub fn agent_clock(store: &Path) -> Option<u64> {
    let conn =
        rusqlite::Connection::open_with_flags(store, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ok()?;
    conn.query_row("SELECT max(time_created) FROM part", [], |r| {
        r.get::<_, Option<i64>>(0)
    })
    .ok()
    .flatten()
    .and_then(|v| u64::try_from(v).ok())
}

/// The largest ascending id value of the session's messages and parts.
fn newest_id(session: &Session) -> Option<u64> {
    session
        .messages
        .iter()
        .flat_map(|m| {
            std::iter::once(m.id()).chain(m.parts.iter().filter_map(|p| p["id"].as_str()))
        })
        .filter_map(super::ids::value_of)
        .max()
}

/// The shift (ms) that puts the newest recorded id a day before `agent_now`, or `None` when
/// the recorded ids already sort before the ids the agent will make.
pub fn needed_shift(session: &Session, agent_now: u64) -> Option<u64> {
    let newest = newest_id(session)?;
    let agent_id = agent_now.wrapping_mul(4096) & MASK;
    let margin = MARGIN_MS * 4096;
    if newest.saturating_add(margin) < agent_id {
        return None;
    }
    // In id space (ms mod 2^36, × 4096): move `newest` to `agent_id − SHIFT_TO`.
    let target = agent_id.wrapping_sub(SHIFT_TO_MS * 4096) & MASK;
    Some((newest.wrapping_sub(target) & MASK) / 4096 + 1)
}

fn shift_id(id: &str, delta_ms: u64) -> Option<String> {
    let (prefix, rest) = id.split_once('_')?;
    if !matches!(prefix, "msg" | "prt") || rest.len() < 12 {
        return None;
    }
    let v = super::ids::value_of(id)?;
    let shifted = v.wrapping_sub(delta_ms.wrapping_mul(4096)) & MASK;
    Some(format!("{prefix}_{shifted:012x}{}", &rest[12..]))
}

/// Every integer under a `time` object moved back by `delta_ms`, every string equal to a
/// mapped id replaced.
fn rewrite(v: &mut Value, delta_ms: u64, ids: &HashMap<String, String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                if k == "time" {
                    if let Value::Object(t) = child {
                        for x in t.values_mut() {
                            if let Some(n) = x.as_u64() {
                                *x = Value::from(n.saturating_sub(delta_ms));
                            }
                        }
                        continue;
                    }
                }
                rewrite(child, delta_ms, ids);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rewrite(x, delta_ms, ids)),
        Value::String(s) => {
            if let Some(n) = ids.get(s.as_str()) {
                *s = n.clone();
            }
        }
        _ => {}
    }
}

/// The session with its messages and parts moved back by `delta_ms`, and the map from each
/// moved id back to the recorded one.
pub fn shifted(session: &Session, delta_ms: u64) -> (Session, HashMap<String, String>) {
    let mut forward = HashMap::new();
    for m in &session.messages {
        for id in std::iter::once(m.id()).chain(m.parts.iter().filter_map(|p| p["id"].as_str())) {
            if let Some(s) = shift_id(id, delta_ms) {
                forward.insert(id.to_string(), s);
            }
        }
    }
    let mut out = session.clone();
    for m in &mut out.messages {
        rewrite(&mut m.info, delta_ms, &forward);
        m.parts
            .iter_mut()
            .for_each(|p| rewrite(p, delta_ms, &forward));
    }
    let back = forward.into_iter().map(|(k, v)| (v, k)).collect();
    (out, back)
}

/// Strings equal to a moved id replaced by the recorded id (times are left as the agent
/// wrote them).
pub fn map_back(v: &mut Value, back: &HashMap<String, String>) {
    rewrite_ids_only(v, back)
}

fn rewrite_ids_only(v: &mut Value, ids: &HashMap<String, String>) {
    match v {
        Value::Object(m) => m.values_mut().for_each(|x| rewrite_ids_only(x, ids)),
        Value::Array(a) => a.iter_mut().for_each(|x| rewrite_ids_only(x, ids)),
        Value::String(s) => {
            if let Some(n) = ids.get(s.as_str()) {
                *s = n.clone();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::session::{InputForm, Message};
    use super::*;
    use serde_json::json;

    fn session(ms: u64) -> Session {
        let id =
            |p: &str, ms: u64, c: u64| format!("{p}_{:012x}AAAAAAAAAAAAAA", (ms * 4096 + c) & MASK);
        let user = id("msg", ms, 1);
        Session {
            form: InputForm::Export,
            info: json!({"id": "ses_x"}),
            info_known: true,
            messages: vec![
                Message {
                    info: json!({"id": user, "role": "user", "time": {"created": ms}}),
                    parts: vec![
                        json!({"id": id("prt", ms, 2), "messageID": user, "type": "text", "text": user}),
                    ],
                    line: 0,
                    part_lines: vec![0],
                },
                Message {
                    info: json!({"id": id("msg", ms + 5, 1), "parentID": user, "role": "assistant", "time": {"created": ms + 5, "completed": ms + 9}}),
                    parts: vec![
                        json!({"id": id("prt", ms + 6, 1), "type": "tool", "callID": "call_1", "state": {"status": "completed", "time": {"start": ms + 6, "end": ms + 8}}}),
                    ],
                    line: 0,
                    part_lines: vec![0],
                },
            ],
        }
    }

    #[test]
    fn an_older_recording_is_left_alone() {
        let rec = 1_795_998_687_649;
        assert_eq!(needed_shift(&session(rec), rec + 3 * 86_400_000), None);
    }

    #[test]
    fn a_recording_ahead_of_the_agent_moves_back_in_order_and_maps_back() {
        let rec = 1_795_998_687_649;
        let now = rec - 86_400_000;
        let s = session(rec);
        let d = needed_shift(&s, now).expect("ahead of the agent");
        let (moved, back) = shifted(&s, d);
        let ids: Vec<&str> = moved.messages.iter().map(|m| m.id()).collect();
        assert!(ids[0] < ids[1], "order kept: {ids:?}");
        let newest = newest_id(&moved).unwrap();
        assert!(newest < (now * 4096) & MASK, "sorts before the agent's ids");
        assert_eq!(needed_shift(&moved, now), None);
        // References, times and texts follow; the model's call id does not.
        assert_eq!(
            moved.messages[1].info["parentID"],
            json!(moved.messages[0].id())
        );
        assert_eq!(
            moved.messages[0].parts[0]["messageID"],
            json!(moved.messages[0].id())
        );
        assert_eq!(moved.messages[1].parts[0]["callID"], "call_1");
        assert_eq!(
            moved.messages[1].info["time"]["completed"],
            json!(rec + 9 - d)
        );
        assert_eq!(
            moved.messages[1].parts[0]["state"]["time"]["end"],
            json!(rec + 8 - d)
        );
        assert!(moved.messages[0].parts[0]["id"]
            .as_str()
            .unwrap()
            .ends_with("AAAAAAAAAAAAAA"));
        let mut v = moved.to_export();
        map_back(&mut v, &back);
        let orig = s.to_export();
        assert_eq!(
            v["messages"][1]["info"]["parentID"],
            orig["messages"][1]["info"]["parentID"]
        );
        assert_eq!(
            v["messages"][0]["parts"][0]["id"],
            orig["messages"][0]["parts"][0]["id"]
        );
    }
}
