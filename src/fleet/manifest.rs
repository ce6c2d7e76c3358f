//! The fleet manifest (`pvisor.fleet/v1`, JSON Lines): a header line with the schema and
//! the defaults every replay shares, then one replay request per line, each with its run id.
//!
//! ```text
//! {"schema_version":"pvisor.fleet/v1","defaults":{"agent":"codex","state_dir":"state","replay_only":true,"isolate":true}}
//! {"run_id":"s1-n1","trajectory":"s1.jsonl","after_step":1,"workspace":"/work","workspace_seed":"seeds/s1"}
//! {"run_id":"s1-n2","trajectory":"s1.jsonl","after_step":2,"workspace":"/work","workspace_seed":"seeds/s1"}
//! ```
//!
//! A request line has the keys of `pvisor.replay-request/v1` (docs/cli.md) without its
//! `schema_version`; a key it sets overrides the default. Relative paths are relative to the
//! manifest. Task `i` (0-based) is the `i`-th request line.

use std::path::{Path, PathBuf};

use crate::request::{ReplayRequest, RequestFields};

pub const FLEET_SCHEMA: &str = "pvisor.fleet/v1";

/// A manifest problem, naming the file, the line and (when known) the field.
#[derive(Debug, thiserror::Error)]
#[error("{path}:{line}: {message}")]
pub struct ManifestError {
    pub path: PathBuf,
    /// 1-based; 0 for the file as a whole.
    pub line: usize,
    pub message: String,
    pub hint: Option<String>,
}

/// A parsed manifest: the defaults and every request line (1-based line number, fields).
#[derive(Debug, Clone)]
pub struct Manifest {
    pub path: PathBuf,
    pub defaults: RequestFields,
    pub lines: Vec<(usize, RequestFields)>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    schema_version: String,
    #[serde(default)]
    defaults: Option<RequestFields>,
}

impl Manifest {
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let err = |line: usize, message: String, hint: Option<&str>| ManifestError {
            path: path.to_path_buf(),
            line,
            message,
            hint: hint.map(String::from),
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| err(0, format!("cannot read the manifest: {e}"), None))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut rows = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l))
            .filter(|(_, l)| !l.trim().is_empty());
        let (hl, header) = rows
            .next()
            .ok_or_else(|| err(0, "the manifest is empty".into(), None))?;
        let header: Header = serde_json::from_str(header).map_err(|e| {
            err(
                hl,
                format!("header: {e}"),
                Some("the first line is {\"schema_version\":\"pvisor.fleet/v1\",\"defaults\":{…}}"),
            )
        })?;
        if header.schema_version != FLEET_SCHEMA {
            return Err(err(
                hl,
                format!(
                    "schema_version: `{}` is not `{FLEET_SCHEMA}`",
                    header.schema_version
                ),
                None,
            ));
        }
        let defaults = crate::request::relative_to(header.defaults.unwrap_or_default(), base);
        let mut lines = Vec::new();
        let mut ids = std::collections::HashMap::new();
        for (n, l) in rows {
            let f: RequestFields = serde_json::from_str(l).map_err(|e| {
                let message = match field_at_fault(l) {
                    Some(k) => format!("{k}: {e}"),
                    None => e.to_string(),
                };
                err(
                    n,
                    message,
                    Some("each line is a replay request (the keys of pvisor.replay-request/v1)"),
                )
            })?;
            if f.schema_version.is_some() {
                return Err(err(
                    n,
                    "schema_version: only the header names the schema".into(),
                    None,
                ));
            }
            let Some(id) = f.run_id.clone() else {
                return Err(err(
                    n,
                    "run_id: missing; every replay of a fleet names its run id (it makes retries idempotent)".into(),
                    None,
                ));
            };
            if let Some(first) = ids.insert(id.clone(), n) {
                return Err(err(
                    n,
                    format!("run_id: `{id}` is also the run id of line {first}"),
                    None,
                ));
            }
            lines.push((n, crate::request::relative_to(f, base)));
        }
        if lines.is_empty() {
            return Err(err(0, "the manifest has no replay request".into(), None));
        }
        Ok(Manifest {
            path: path.to_path_buf(),
            defaults,
            lines,
        })
    }

    /// Task `index` (0-based) as a validated request.
    pub fn request(&self, index: usize) -> Result<ReplayRequest, ManifestError> {
        let (n, f) = self.lines.get(index).ok_or_else(|| ManifestError {
            path: self.path.clone(),
            line: 0,
            message: format!(
                "task index {index} is out of range: the manifest has {} replay(s), indexes 0..={}",
                self.lines.len(),
                self.lines.len() - 1
            ),
            hint: Some("the index is 0-based (the Slurm array is 0-N−1)".into()),
        })?;
        let mut fields = f.clone().or(self.defaults.clone());
        // A fleet's replays of one session share its original path: each is isolated unless
        // the manifest says otherwise, where this machine can isolate.
        if fields.isolate.is_none() {
            fields.isolate = Some(crate::workspace::isolate::available());
        }
        ReplayRequest::from_fields(fields).map_err(|e| ManifestError {
            path: self.path.clone(),
            line: *n,
            message: e.message,
            hint: e.hint,
        })
    }
}

/// The key of a request line whose value does not fit its field (each key alone is tried).
fn field_at_fault(line: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    v.as_object()?.iter().find_map(|(k, x)| {
        let one = serde_json::json!({ k: x });
        serde_json::from_value::<RequestFields>(one)
            .is_err()
            .then(|| k.clone())
    })
}

/// The task index: `--index`, else `SLURM_ARRAY_TASK_ID` (Slurm job arrays), else
/// `JOB_COMPLETION_INDEX` (Kubernetes Indexed Jobs).
pub fn task_index(flag: Option<usize>) -> Result<usize, String> {
    if let Some(i) = flag {
        return Ok(i);
    }
    for var in ["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"] {
        if let Ok(v) = std::env::var(var) {
            return v
                .trim()
                .parse()
                .map_err(|_| format!("{var}=`{v}` is not a task index"));
        }
    }
    Err("no task index: pass --index I, or run as a Slurm array task (SLURM_ARRAY_TASK_ID) or a Kubernetes Indexed Job (JOB_COMPLETION_INDEX)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("fleet.jsonl");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn lines_override_defaults_and_paths_are_relative_to_the_manifest() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "{\"schema_version\":\"pvisor.fleet/v1\",\"defaults\":{\"agent\":\"codex\",\"state_dir\":\"state\",\"replay_only\":true,\"workspace\":\"/w\"}}\n\
             {\"run_id\":\"a\",\"trajectory\":\"s.jsonl\",\"after_step\":1}\n\n\
             {\"run_id\":\"b\",\"trajectory\":\"/abs/s.jsonl\",\"after_step\":2,\"agent\":\"claude-code\"}\n",
        );
        let m = Manifest::load(&p).unwrap();
        assert_eq!(m.lines.len(), 2);
        let a = m.request(0).unwrap();
        assert_eq!(a.agent, "codex");
        assert_eq!(a.trajectory, d.path().join("s.jsonl"));
        assert_eq!(a.state_dir, d.path().join("state/a"));
        assert_eq!(
            a.isolate,
            crate::workspace::isolate::available(),
            "a fleet task is isolated by default where the machine can isolate"
        );
        let b = m.request(1).unwrap();
        assert_eq!(b.agent, "claude-code");
        assert_eq!(b.after_step, 2);
        let e = m.request(2).unwrap_err();
        assert!(e.message.contains("out of range"), "{e}");
    }

    #[test]
    fn errors_name_the_line_and_field() {
        let d = tempfile::tempdir().unwrap();
        let h = "{\"schema_version\":\"pvisor.fleet/v1\"}\n";
        for (text, line, field) in [
            (
                "{\"schema_version\":\"pvisor.fleet/v9\"}\n{\"run_id\":\"a\"}\n",
                1,
                "schema_version",
            ),
            (
                &format!("{h}{{\"trajectory\":\"t\"}}\n") as &str,
                2,
                "run_id",
            ),
            (
                &format!("{h}{{\"run_id\":\"a\"}}\n{{\"run_id\":\"a\"}}\n"),
                3,
                "run_id",
            ),
            (
                &format!("{h}{{\"run_id\":\"a\",\"after_step\":\"x\"}}\n"),
                2,
                "after_step",
            ),
        ] {
            let e = Manifest::load(&write(d.path(), text)).unwrap_err();
            assert_eq!(e.line, line, "{e}");
            assert!(e.to_string().contains(field), "{e}");
        }
        // A request error names its line.
        let p = write(
            d.path(),
            &format!("{h}{{\"run_id\":\"a\",\"trajectory\":\"t\"}}\n"),
        );
        let e = Manifest::load(&p).unwrap().request(0).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("--agent"), "{e}");
    }

    #[test]
    fn the_index_comes_from_the_flag_or_the_scheduler() {
        assert_eq!(task_index(Some(3)).unwrap(), 3);
    }
}
