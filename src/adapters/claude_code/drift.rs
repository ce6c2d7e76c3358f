//! Host and time drift: what Claude Code 2.1.332 snapshots in its session and compares with
//! the live host when it resumes (see `docs/agents/claude-code.md`, "Drift model").
//!
//! Two kinds of `attachment` records carry snapshots that Claude compares on resume:
//!
//! * `environment` — `attachment.snapshot` {workingDirectory, isGitRepo, platform, shell,
//!   osVersion, …}. Claude recomputes the snapshot at every turn; when `platform`, `shell` or
//!   `osVersion` differ from the last stored one it sends a whole new `# Environment` block,
//!   when another field differs an `# Environment update`.
//! * `date` — `attachment.date` (`YYYY-MM-DD`, in the agent's time zone). A different day
//!   makes Claude send "The date has changed. Today's date is now …".
//!
//! The model sees neither snapshot: it sees `rendered` (the text Claude rendered when the
//! record was written), which is kept byte for byte. So the rebuilt session keeps every
//! model-visible byte as recorded and sets the snapshots to what the agent will observe at
//! continuation time: Claude then finds nothing to announce. [`neutralize`] does that, line
//! by line, touching only those fields (every other line stays byte-identical).

use journal_format::event::Neutralized;
use serde_json::Value;
use std::path::Path;

/// The host facts Claude will observe when it starts (computed the way Claude computes them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    /// `os.type() + " " + os.release()` — `uname -s` and `uname -r`.
    pub os_version: String,
    /// Node's `process.platform`.
    pub platform: String,
    /// The shell description (`bash` with `SHELL=/bin/bash`, as the continuation sets it).
    pub shell: String,
    /// The agent's working directory.
    pub working_directory: String,
    /// Whether the working directory is inside a git work tree.
    pub is_git_repo: bool,
    /// Today's date in the agent's time zone (`YYYY-MM-DD`).
    pub date: String,
}

impl HostFacts {
    /// Observe this host for an agent started in `workspace` with `TZ=UTC` and
    /// `SHELL=/bin/bash` (the continuation's environment).
    pub fn observe(workspace: &Path) -> HostFacts {
        let (sysname, release) = uname();
        let cwd = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
        HostFacts {
            os_version: format!("{sysname} {release}"),
            platform: node_platform().to_string(),
            shell: "bash".into(),
            is_git_repo: inside_git_work_tree(&cwd),
            working_directory: cwd.to_string_lossy().into_owned(),
            date: utc_date_today(),
        }
    }
}

/// `uname(2)` sysname and release.
fn uname() -> (String, String) {
    // SAFETY: `utsname` is plain old data; uname fills it with NUL-terminated strings.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return ("Linux".into(), String::new());
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (field(&u.sysname), field(&u.release))
}

/// Node's `process.platform` for the running OS.
fn node_platform() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    }
}

/// A `.git` directory or file in `dir` or one of its ancestors (what `git rev-parse
/// --is-inside-work-tree` answers for an ordinary checkout).
fn inside_git_work_tree(dir: &Path) -> bool {
    dir.ancestors().any(|d| d.join(".git").exists())
}

/// Today's date in UTC.
pub fn utc_date_today() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}",
        now.year(),
        u8::from(now.month()),
        now.day()
    )
}

/// Set every environment and date snapshot of a session text to `facts`. Returns the new
/// text and what was changed (one entry per distinct fact and recorded value). Lines that
/// need no change, and every model-visible field, are kept byte for byte.
pub fn neutralize(text: &str, facts: &HostFacts) -> (String, Vec<Neutralized>) {
    let mut out = String::with_capacity(text.len());
    let mut changes: Vec<Neutralized> = Vec::new();
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        match neutralize_line(body, facts, &mut changes) {
            Some(new) => {
                out.push_str(&new);
                if line.ends_with('\n') {
                    out.push('\n');
                }
            }
            None => out.push_str(line),
        }
    }
    (out, changes)
}

fn neutralize_line(
    line: &str,
    facts: &HostFacts,
    changes: &mut Vec<Neutralized>,
) -> Option<String> {
    // Cheap filter: only attachment records of the two kinds are parsed.
    if !line.contains("\"attachment\"")
        || !(line.contains("\"environment\"") || line.contains("\"date\""))
    {
        return None;
    }
    let mut v: Value = serde_json::from_str(line).ok()?;
    if v.get("type").and_then(Value::as_str) != Some("attachment") {
        return None;
    }
    let att = v.get_mut("attachment")?.as_object_mut()?;
    let mut changed = false;
    let mut set = |fact: &str, slot: &mut Value, live: Value| {
        if *slot != live {
            let recorded = match &*slot {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let live_s = match &live {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if !changes
                .iter()
                .any(|c| c.fact == fact && c.recorded == recorded)
            {
                changes.push(Neutralized {
                    fact: fact.into(),
                    recorded,
                    live: live_s,
                });
            }
            *slot = live;
            changed = true;
        }
    };
    match att.get("type").and_then(Value::as_str) {
        Some("environment") => {
            let snap = att.get_mut("snapshot")?.as_object_mut()?;
            // Only fields the snapshot already has: an absent field is not compared.
            let fields: [(&str, Value); 5] = [
                ("osVersion", Value::from(facts.os_version.clone())),
                ("platform", Value::from(facts.platform.clone())),
                ("shell", Value::from(facts.shell.clone())),
                (
                    "workingDirectory",
                    Value::from(facts.working_directory.clone()),
                ),
                ("isGitRepo", Value::from(facts.is_git_repo)),
            ];
            for (k, live) in fields {
                if let Some(slot) = snap.get_mut(k) {
                    set(&format!("claude:environment.{k}"), slot, live);
                }
            }
        }
        Some("date") => {
            let slot = att.get_mut("date")?;
            set("claude:date", slot, Value::from(facts.date.clone()));
        }
        _ => return None,
    }
    changed.then(|| serde_json::to_string(&v).expect("JSON values serialize"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> HostFacts {
        HostFacts {
            os_version: "Linux 9.9.9-drift".into(),
            platform: "linux".into(),
            shell: "bash".into(),
            working_directory: "/w".into(),
            is_git_repo: false,
            date: "2030-01-02".into(),
        }
    }

    #[test]
    fn snapshots_follow_the_host_and_rendered_text_stays() {
        let env = r#"{"parentUuid":"a","attachment":{"type":"environment","snapshot":{"workingDirectory":"/w","isGitRepo":false,"platform":"linux","shell":"bash","osVersion":"Linux 6.1.0"}},"type":"attachment","rendered":[{"content":"OS Version: Linux 6.1.0 ü"}],"renderedRole":"system"}"#;
        let date = r#"{"attachment":{"type":"date","date":"2026-11-30"},"type":"attachment","rendered":[{"content":"Today's date is 2026-11-30."}]}"#;
        let other = r#"{"type":"user","message":{"role":"user","content":"the \"environment\" and \"date\" \"attachment\""}}"#;
        let text = format!("{env}\n{other}\n{date}\n");
        let (out, changes) = neutralize(&text, &facts());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[1], other, "other records are kept byte for byte");
        let e: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(
            e["attachment"]["snapshot"]["osVersion"],
            "Linux 9.9.9-drift"
        );
        assert_eq!(
            e["rendered"][0]["content"], "OS Version: Linux 6.1.0 ü",
            "model-visible text kept"
        );
        let d: Value = serde_json::from_str(lines[2]).unwrap();
        assert_eq!(d["attachment"]["date"], "2030-01-02");
        assert_eq!(d["rendered"][0]["content"], "Today's date is 2026-11-30.");
        assert_eq!(changes.len(), 2);
        assert_eq!(
            changes[0],
            Neutralized {
                fact: "claude:environment.osVersion".into(),
                recorded: "Linux 6.1.0".into(),
                live: "Linux 9.9.9-drift".into()
            }
        );
        assert_eq!(changes[1].fact, "claude:date");
        // Idempotent, and a matching host changes nothing.
        let (again, none) = neutralize(&out, &facts());
        assert_eq!(again, out);
        assert!(none.is_empty());
    }

    #[test]
    fn observed_facts_have_claudes_shape() {
        let f = HostFacts::observe(Path::new("/"));
        assert!(f.os_version.starts_with(
            std::env::consts::OS
                .chars()
                .next()
                .unwrap()
                .to_ascii_uppercase()
        ));
        assert_eq!(f.date.len(), 10);
        assert_eq!(f.working_directory, "/");
    }
}
