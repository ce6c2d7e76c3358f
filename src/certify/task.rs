//! Generated tasks: a workspace to start from and the model's turns, each a batch of
//! agent-neutral [`Step`]s, drawn by proptest strategies (so that a failing task shrinks to
//! the smallest one that still fails).
//!
//! What they cover: parallel calls (a batch of several read-only steps; steps that write run
//! alone, since agents run a batch's calls concurrently), unicode and bytes that are not
//! UTF-8 in files, empty and large outputs, failing commands, edits that do not apply, files
//! created then deleted, nested directories, calls with an argument of the wrong type.

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::Path;

use crate::kit::recorder::{shell_quoted, Recorder, Step};
use crate::scripted::{Script, SideRule, Turn};

/// One file of the workspace before the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedFile {
    pub path: String,
    /// The bytes, base64 (they need not be UTF-8).
    pub base64: String,
}

impl SeedFile {
    pub fn new(path: &str, bytes: &[u8]) -> SeedFile {
        use base64::Engine;
        SeedFile {
            path: path.into(),
            base64: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }
    pub fn bytes(&self) -> Vec<u8> {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(&self.base64)
            .unwrap_or_default()
    }
}

/// A generated task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub files: Vec<SeedFile>,
    /// The model's turns that call tools, in order; a last turn of plain text ends the run.
    pub turns: Vec<Vec<Step>>,
}

/// The prompt every recording is given.
pub const PROMPT: &str = "Carry out the scripted certification task.";

/// The mtime of every seeded file (2026-01-01T00:00:00Z): what an agent's read state and the
/// replay see is the same in every run of a case.
pub const SEED_MTIME: u64 = 1_767_225_600;

impl Task {
    /// The model script of this task for an agent, with absolute paths below `work`.
    pub fn script(&self, recorder: &dyn Recorder, work: &Path) -> Script {
        let mut turns: Vec<Turn> = self
            .turns
            .iter()
            .enumerate()
            .map(|(i, steps)| Turn {
                text: Some(format!("Step {}.", i + 1)),
                tool_calls: steps.iter().flat_map(|s| recorder.calls(s, work)).collect(),
                ..Default::default()
            })
            .collect();
        turns.push(recorder.last_turn());
        let mut s = Script::new(turns);
        s.name = Some("pvisor-certify".into());
        s.side_text = Some("Certification task".into());
        s.side = vec![SideRule {
            matches: "isNewTopic".into(),
            text: r#"{"isNewTopic": true, "title": "Certification task"}"#.into(),
        }];
        s.no_tools_is_side = recorder.no_tools_is_side();
        s
    }

    /// Fill `work` (created if missing) with the seed files and the agent's `extra`
    /// workspace files ([`Recorder::workspace_files`]), every mtime [`SEED_MTIME`].
    pub fn seed(&self, work: &Path, extra: &[(String, Vec<u8>)]) -> std::io::Result<()> {
        std::fs::create_dir_all(work)?;
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(SEED_MTIME);
        let files = self.files.iter().map(|f| (f.path.clone(), f.bytes()));
        for (path, bytes) in files.chain(extra.iter().cloned()) {
            let p = work.join(&path);
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d)?;
            }
            std::fs::write(&p, bytes)?;
            std::fs::File::options()
                .write(true)
                .open(&p)?
                .set_modified(t)?;
        }
        Ok(())
    }

    /// The number of tool calls.
    pub fn calls(&self) -> usize {
        self.turns.iter().map(Vec::len).sum()
    }
}

const PATHS: &[&str] = &[
    "a.txt",
    "notes.md",
    "dir/b.txt",
    "dir/sub/ünï code.txt",
    "deep/x/y/z.txt",
];

fn path() -> impl Strategy<Value = String> {
    prop::sample::select(PATHS).prop_map(String::from)
}

/// A word of text: ASCII, accented, CJK, emoji (no quote, no backslash, no newline).
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,8}",
        "[A-Z0-9_]{1,6}",
        Just("héllo".to_string()),
        Just("漢字".to_string()),
        Just("🎉".to_string()),
        Just("tab\there".to_string()),
    ]
}

/// A line of words.
fn line() -> impl Strategy<Value = String> {
    prop::collection::vec(word(), 1..5).prop_map(|w| w.join(" "))
}

/// Text of a file: empty, a few lines, or many lines (a large output).
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just(String::new()),
        5 => prop::collection::vec(line(), 1..5).prop_map(|l| l.join("\n") + "\n"),
        1 => (line(), 200usize..1500).prop_map(|(l, n)| {
            (1..=n).map(|i| format!("{i} {l}\n")).collect::<String>()
        }),
    ]
}

/// Bytes of a seeded file: text, or text with bytes that are not UTF-8 (and a NUL).
fn seed_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => text().prop_map(String::into_bytes),
        1 => line().prop_map(|l| {
            let mut b = l.into_bytes();
            b.extend_from_slice(b"\n\xff\xfe bad \xc3\x28 bytes\x00end\n");
            b
        }),
    ]
}

/// A shell command: output (none, some, a lot, on stderr), failure, files and folders made
/// and removed.
fn command() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("true".to_string()),
        line().prop_map(|l| format!("echo {}", shell_quoted(&l))),
        (line(), path()).prop_map(|(l, p)| format!(
            "mkdir -p \"$(dirname {q})\" && printf '%s\\n' {} > {q} && cat {q}",
            shell_quoted(&l),
            q = shell_quoted(&p)
        )),
        path().prop_map(|p| format!("cat {}; echo status=$?", shell_quoted(&p))),
        (100u32..3000).prop_map(|n| format!("seq 1 {n}")),
        (line(), 1u8..5).prop_map(|(l, c)| format!(
            "echo {q}; echo {q} >&2; exit {c}",
            q = shell_quoted(&l)
        )),
        path().prop_map(|p| format!(
            "mkdir -p \"$(dirname {q})\" && printf '\\377\\376 raw \\303\\050\\n' > {q} && wc -c {q}",
            q = shell_quoted(&p)
        )),
        path().prop_map(|p| format!("rm -f {}; ls -R", shell_quoted(&p))),
        Just("ls -R".to_string()),
    ]
}

/// A step that only reads.
fn read_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => path().prop_map(|path| Step::Read { path }),
        1 => word().prop_map(|pattern| Step::Search { pattern }),
        1 => prop::sample::select(&["*.txt", "**/*.txt", "*.md", "*"][..])
            .prop_map(|g| Step::List { glob: g.into() }),
    ]
}

/// Any step.
fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => command().prop_map(|cmd| Step::Run { cmd }),
        2 => (path(), text()).prop_map(|(path, content)| Step::Write { path, content }),
        2 => read_step(),
        2 => (path(), line(), line()).prop_map(|(path, old, new)| Step::Edit { path, old, new }),
        1 => path().prop_map(|path| Step::Delete { path }),
        1 => (1u32..100_000).prop_map(|number| Step::Malformed { number }),
    ]
}

/// One batch: a single step, or several read-only ones.
fn batch() -> impl Strategy<Value = Vec<Step>> {
    prop_oneof![
        3 => step().prop_map(|s| vec![s]),
        1 => prop::collection::vec(read_step(), 2..4),
    ]
}

/// A task of `1..=max_turns` batches.
pub fn task(max_turns: usize) -> impl Strategy<Value = Task> {
    let files = prop::collection::btree_map(path(), seed_bytes(), 0..4).prop_map(|m| {
        m.into_iter()
            .map(|(p, b)| SeedFile::new(&p, &b))
            .collect::<Vec<_>>()
    });
    (files, prop::collection::vec(batch(), 1..=max_turns.max(1)))
        .prop_map(|(files, turns)| with_edits_that_apply(Task { files, turns }))
}

/// Most edits made to apply: an edit whose (random) old text has an even first byte takes
/// instead the first line of what the task last put in that file (seeded or written), when
/// that is known and not empty; the others stay edits that do not apply.
fn with_edits_that_apply(mut t: Task) -> Task {
    let mut known: std::collections::BTreeMap<String, String> = t
        .files
        .iter()
        .map(|f| {
            (
                f.path.clone(),
                String::from_utf8_lossy(&f.bytes()).into_owned(),
            )
        })
        .collect();
    for step in t.turns.iter_mut().flatten() {
        match step {
            Step::Write { path, content } => {
                known.insert(path.clone(), content.clone());
            }
            Step::Edit { path, old, .. } if old.as_bytes().first().is_some_and(|b| b % 2 == 0) => {
                if let Some(first) = known
                    .get(path.as_str())
                    .and_then(|c| c.lines().next())
                    .filter(|l| !l.is_empty() && !l.contains('\u{fffd}'))
                {
                    *old = first.to_string();
                }
            }
            _ => {}
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    #[test]
    fn batches_of_several_calls_only_read_and_tasks_are_bounded() {
        let mut runner = TestRunner::new_with_rng(
            Config::default(),
            TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
        );
        let s = task(3);
        let mut seen_parallel = false;
        for _ in 0..300 {
            let t = s.new_tree(&mut runner).unwrap().current();
            assert!((1..=3).contains(&t.turns.len()));
            for b in &t.turns {
                assert!(!b.is_empty());
                if b.len() > 1 {
                    seen_parallel = true;
                    assert!(b.iter().all(Step::reads_only), "{b:?}");
                }
            }
            let back: Task = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
            assert_eq!(back, t);
        }
        assert!(seen_parallel);
    }
}
