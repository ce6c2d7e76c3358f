//! Reading a session out of OpenCode's SQLite store (`opencode.db`, with its `-wal` folded
//! in). The store is copied first, so that the original is never written (SQLite writes the
//! WAL back on open) and a store in use by a running OpenCode reads consistently.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Value};

use super::session::{with_ids, InputForm, Message, Session};
use crate::error::TrajectoryError;

fn err(path: &Path, field: impl Into<String>, msg: impl Into<String>) -> TrajectoryError {
    TrajectoryError::new(path, 0, field, msg)
}

fn db_err(path: &Path, what: &str, e: rusqlite::Error) -> TrajectoryError {
    err(path, what, format!("cannot read the OpenCode store: {e}"))
}

/// The one root session of the store (a store holding several names them).
pub fn read_session(path: &Path) -> Result<Session, TrajectoryError> {
    let tmp = tempfile::Builder::new()
        .prefix("pvisor-opencode-store-")
        .tempdir()
        .map_err(|e| {
            err(
                path,
                "file",
                format!("cannot make a temporary directory: {e}"),
            )
        })?;
    let copy = tmp.path().join("opencode.db");
    std::fs::copy(path, &copy)
        .map_err(|e| err(path, "file", format!("cannot copy the store: {e}")))?;
    for suffix in ["-wal", "-shm"] {
        let side = path.with_file_name(format!(
            "{}{suffix}",
            path.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("opencode.db")
        ));
        if side.is_file() {
            std::fs::copy(&side, tmp.path().join(format!("opencode.db{suffix}")))
                .map_err(|e| err(path, "file", format!("cannot copy {}: {e}", side.display())))?;
        }
    }
    read_copy(path, &copy)
}

fn parse_json(path: &Path, field: &str, text: Option<String>) -> Result<Value, TrajectoryError> {
    match text {
        None => Ok(Value::Null),
        Some(t) => serde_json::from_str(&t).map_err(|e| err(path, field, format!("not JSON: {e}"))),
    }
}

fn read_copy(path: &Path, copy: &Path) -> Result<Session, TrajectoryError> {
    let conn = Connection::open_with_flags(copy, OpenFlags::SQLITE_OPEN_READ_WRITE)
        .map_err(|e| db_err(path, "file", e))?;
    let mut roots: Vec<String> = {
        let mut st = conn
            .prepare("SELECT id FROM session WHERE parent_id IS NULL ORDER BY time_created, id")
            .map_err(|e| db_err(path, "session", e))?;
        let rows = st
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(|e| db_err(path, "session", e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| db_err(path, "session", e))?
    };
    let sid = match roots.len() {
        1 => roots.remove(0),
        0 => return Err(err(path, "session", "the store holds no session")),
        _ => {
            return Err(err(
                path,
                "session",
                format!(
                    "the store holds {} sessions ({}): export the one to replay with `opencode export <id>`",
                    roots.len(),
                    roots.join(", ")
                ),
            ))
        }
    };
    let info = session_info(path, &conn, &sid)?;
    let mut messages = Vec::new();
    {
        let mut st = conn
            .prepare("SELECT id, data FROM message WHERE session_id = ?1 ORDER BY time_created, id")
            .map_err(|e| db_err(path, "message", e))?;
        let rows = st
            .query_map([&sid], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(|e| db_err(path, "message", e))?;
        for row in rows {
            let (mid, data) = row.map_err(|e| db_err(path, "message", e))?;
            let data = parse_json(path, &format!("message {mid}: data"), Some(data))?;
            messages.push(Message {
                info: with_ids(data, &[("id", &mid), ("sessionID", &sid)]),
                parts: Vec::new(),
                line: 0,
                part_lines: Vec::new(),
            });
        }
    }
    let mut st = conn
        .prepare("SELECT id, message_id, data FROM part WHERE session_id = ?1 ORDER BY id")
        .map_err(|e| db_err(path, "part", e))?;
    let rows = st
        .query_map([&sid], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .map_err(|e| db_err(path, "part", e))?;
    for row in rows {
        let (pid, mid, data) = row.map_err(|e| db_err(path, "part", e))?;
        let field = format!("part {pid}");
        let data = parse_json(path, &format!("{field}: data"), Some(data))?;
        let part = with_ids(
            data,
            &[("id", &pid), ("sessionID", &sid), ("messageID", &mid)],
        );
        super::parse::check_part(path, 0, &field, &part)?;
        let m = messages.iter_mut().find(|m| m.id() == mid).ok_or_else(|| {
            err(
                path,
                format!("{field}.message_id"),
                format!("names message {mid}, which the session does not hold"),
            )
        })?;
        m.parts.push(part);
        m.part_lines.push(0);
    }
    Ok(Session {
        form: InputForm::Store,
        info,
        info_known: true,
        messages,
    })
}

/// The `session` row as `opencode export` writes its `info`.
fn session_info(path: &Path, conn: &Connection, sid: &str) -> Result<Value, TrajectoryError> {
    let mut st = conn
        .prepare("SELECT * FROM session WHERE id = ?1")
        .map_err(|e| db_err(path, "session", e))?;
    let names: Vec<String> = st.column_names().iter().map(|s| s.to_string()).collect();
    let row: Vec<(String, Value)> = st
        .query_row([sid], |r| {
            let mut out = Vec::new();
            for (i, n) in names.iter().enumerate() {
                let v = match r.get_ref(i)? {
                    rusqlite::types::ValueRef::Null => Value::Null,
                    rusqlite::types::ValueRef::Integer(x) => json!(x),
                    rusqlite::types::ValueRef::Real(x) => json!(x),
                    rusqlite::types::ValueRef::Text(t) => json!(String::from_utf8_lossy(t)),
                    rusqlite::types::ValueRef::Blob(_) => Value::Null,
                };
                out.push((n.clone(), v));
            }
            Ok(out)
        })
        .map_err(|e| db_err(path, "session", e))?;
    let col = |k: &str| {
        row.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or(Value::Null)
    };
    let json_col = |k: &str| -> Result<Value, TrajectoryError> {
        match col(k) {
            Value::String(s) => parse_json(path, &format!("session.{k}"), Some(s)),
            v => Ok(v),
        }
    };
    let mut info = serde_json::Map::new();
    let mut put = |k: &str, v: Value| {
        if !v.is_null() {
            info.insert(k.to_string(), v);
        }
    };
    put("id", json!(sid));
    put("slug", col("slug"));
    put("projectID", col("project_id"));
    put("workspaceID", col("workspace_id"));
    put("parentID", col("parent_id"));
    put("directory", col("directory"));
    put("path", col("path"));
    put("title", col("title"));
    put("agent", col("agent"));
    put("model", json_col("model")?);
    put("version", col("version"));
    if !col("summary_additions").is_null() {
        put(
            "summary",
            json!({"additions": col("summary_additions"), "deletions": col("summary_deletions"), "files": col("summary_files")}),
        );
    }
    put("cost", col("cost"));
    put(
        "tokens",
        json!({"input": col("tokens_input"), "output": col("tokens_output"), "reasoning": col("tokens_reasoning"),
               "cache": {"read": col("tokens_cache_read"), "write": col("tokens_cache_write")}}),
    );
    put("permission", json_col("permission")?);
    put("revert", json_col("revert")?);
    put(
        "share",
        col("share_url")
            .as_str()
            .map(|u| json!({"url": u}))
            .unwrap_or(Value::Null),
    );
    put(
        "time",
        json!({"created": col("time_created"), "updated": col("time_updated")}),
    );
    Ok(Value::Object(info))
}
