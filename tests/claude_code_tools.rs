//! Edge cases of the re-executed Claude Code tools. Expected texts are those of the
//! Claude Code 2.1.332 bundle (module and function cited per test).

use pvisor::adapters::claude_code::tools::{ReadGuard, ToolConfig, ToolSession};
use pvisor::error::ExecError;
use pvisor::kit::{ExecContext, Observation, ToolCall, ToolOutcome};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const CURRENT: &str = " (file state is current in your context \u{2014} no need to Read it back)";

struct Env {
    _dir: tempfile::TempDir,
    _logs: tempfile::TempDir,
    ws: PathBuf,
    ctx: ExecContext,
    s: ToolSession,
}

fn env_with(guard: ReadGuard) -> Env {
    env_cfg(ToolConfig {
        read_guard: guard,
        ..ToolConfig::default()
    })
}

fn env_cfg(config: ToolConfig) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let logs = tempfile::tempdir().unwrap();
    let ctx = ExecContext {
        workspace: ws.clone(),
        log_dir: logs.path().to_path_buf(),
        state_dir: logs.path().to_path_buf(),
        timeout: Duration::from_secs(30),
        agent_entrypoint: None,
    };
    let s = ToolSession::new(config);
    Env {
        _dir: dir,
        _logs: logs,
        ws,
        ctx,
        s,
    }
}

fn env() -> Env {
    env_with(ReadGuard::Enforce)
}

fn call(tool: &str, input: Value) -> ToolCall {
    ToolCall {
        call_id: "toolu_test".into(),
        tool: tool.into(),
        input,
        original: None,
        locator: pvisor::kit::Locator {
            line: 0,
            native_id: None,
        },
    }
}

impl Env {
    fn try_run(&self, tool: &str, input: Value) -> Result<ToolOutcome, ExecError> {
        self.s.execute(&call(tool, input), &self.ctx)
    }
    fn run(&self, tool: &str, input: Value) -> ToolOutcome {
        self.try_run(tool, input).unwrap()
    }
    fn text(&self, tool: &str, input: Value) -> (String, bool) {
        let o = self.run(tool, input);
        (o.observation.text, o.observation.is_error)
    }
    fn p(&self, rel: &str) -> String {
        self.ws.join(rel).to_string_lossy().into_owned()
    }
    fn write(&self, rel: &str, content: &str) {
        let p = self.ws.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    fn touch(&self, rel: &str, secs_ago: u64) {
        let f = std::fs::File::options()
            .write(true)
            .open(self.ws.join(rel))
            .unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(secs_ago))
            .unwrap();
    }
}

// ---------------------------------------------------------------- Read (chunk-bqhgd24a.js `w0`)

#[test]
fn read_formats_and_reminders() {
    let e = env();
    e.write("a.txt", "line one\nline two\n");
    assert_eq!(
        e.text("Read", json!({"file_path": e.p("a.txt")})),
        ("1\tline one\n2\tline two\n3\t".into(), false)
    );
    e.write("n.txt", "no newline");
    assert_eq!(
        e.text("Read", json!({"file_path": e.p("n.txt")})).0,
        "1\tno newline"
    );
    e.write("crlf.txt", "a\r\nb\r\n");
    assert_eq!(
        e.text("Read", json!({"file_path": e.p("crlf.txt")})).0,
        "1\ta\n2\tb\n3\t"
    );
    e.write("five.txt", "1\n2\n3\n4\n5\n");
    assert_eq!(
        e.text(
            "Read",
            json!({"file_path": e.p("five.txt"), "offset": 2, "limit": 2})
        )
        .0,
        "2\t2\n3\t3"
    );
    assert_eq!(
        e.text("Read", json!({"file_path": e.p("five.txt"), "offset": 4}))
            .0,
        "4\t4\n5\t5\n6\t"
    );
    assert_eq!(
        e.text("Read", json!({"file_path": e.p("five.txt"), "limit": 1}))
            .0,
        "1\t1"
    );
    // An offset at the last (empty) line shows just its number.
    assert_eq!(
        e.text(
            "Read",
            json!({"file_path": e.p("five.txt"), "offset": 6, "limit": 1})
        )
        .0,
        "6\t"
    );
    assert_eq!(
        e.text("Read", json!({"file_path": e.p("five.txt"), "offset": 10})),
        ("<system-reminder>Warning: the file exists but is shorter than the provided offset (10). The file has 6 lines.</system-reminder>".into(), false)
    );
    e.write("empty.txt", "");
    assert_eq!(
        e.text("Read", json!({"file_path": e.p("empty.txt")})),
        ("<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>".into(), false)
    );
    // Relative paths resolve against the current directory.
    assert_eq!(
        e.text("Read", json!({"file_path": "a.txt"})).0,
        "1\tline one\n2\tline two\n3\t"
    );
}

#[test]
fn read_errors() {
    let e = env();
    let ws = e.ws.display().to_string();
    assert_eq!(
        e.text("Read", json!({"file_path": e.p("missing.txt")})),
        (
            format!("File does not exist. Note: your current working directory is {ws}."),
            true
        )
    );
    e.write("notes.md", "x");
    assert_eq!(
        e.text("Read", json!({"file_path": e.p("notes.txt")})).0,
        format!("File does not exist. Note: your current working directory is {ws}. Did you mean notes.md?")
    );
    std::fs::create_dir(e.ws.join("dir")).unwrap();
    assert_eq!(
        e.text("Read", json!({"file_path": e.p("dir")})),
        (
            format!(
                "EISDIR: illegal operation on a directory, read '{}'",
                e.p("dir")
            ),
            true
        )
    );
    e.write("x.zip", "PK");
    assert_eq!(
        e.text("Read", json!({"file_path": e.p("x.zip")})),
        ("<tool_use_error>This tool cannot read binary files. The file appears to be a binary .zip file. Use a skill for this file type if one is available, or a shell command or script that can read the format.</tool_use_error>".into(), true)
    );
    e.write("big.txt", &"y".repeat(300 * 1024));
    assert_eq!(
        e.text("Read", json!({"file_path": e.p("big.txt")})),
        ("File content (300KB) exceeds maximum allowed size (256KB). Use offset and limit parameters to read specific portions of the file, or search for specific content instead of reading the whole file. To read it anyway, up to what still fits in your context, call Read again with allow_large: true \u{2014} only if you genuinely need all of it or the user asked for the whole file.".into(), true)
    );
    assert!(matches!(
        e.try_run("Read", json!({"file_path": "/etc/passwd"})),
        Err(ExecError::OutsideWorkspace { .. })
    ));
    assert!(matches!(
        e.try_run("Read", json!({"file_path": "../x"})),
        Err(ExecError::OutsideWorkspace { .. })
    ));
    assert!(matches!(
        e.try_run("Read", json!({})),
        Err(ExecError::BadInput { .. })
    ));
    assert!(matches!(
        e.try_run("Read", json!({"file_path": e.p("i.png")})),
        Err(ExecError::Unsupported { .. })
    ));
    assert_eq!(
        e.text("Read", json!({"file_path": "a\u{0}b"})),
        ("<tool_use_error>Read file_path cannot contain null bytes (\\0). Remove the null byte and try again.</tool_use_error>".into(), true)
    );
}

#[test]
fn read_notes_non_utf8() {
    let e = env();
    std::fs::write(e.ws.join("l1.txt"), b"caf\xe9\n").unwrap();
    let (t, err) = e.text("Read", json!({"file_path": e.p("l1.txt")}));
    assert!(!err);
    assert_eq!(t, "1\tcaf\u{fffd}\n2\t\n\n[This file is not valid UTF-8: it uses a legacy encoding such as Windows-1252, Shift-JIS or GBK, or it is binary. Its undecodable bytes show above as U+FFFD. Edit and Write will refuse it: change it with a shell command that keeps its encoding, or ask the user whether to convert it to UTF-8.]");
}

// ---------------------------------------------------------------- Write (`rN`, `S7r`)

#[test]
fn write_create_update_and_guards() {
    let e = env();
    let p = e.p("sub/dir/new.txt");
    let o = e.run("Write", json!({"file_path": p, "content": "a\nb\n"}));
    assert_eq!(
        o.observation.text,
        format!("File created successfully at: {p}{CURRENT}")
    );
    assert_eq!(o.touched, vec![PathBuf::from("sub/dir/new.txt")]);
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "a\nb\n");
    // Written by this session: counts as read.
    assert_eq!(
        e.text("Write", json!({"file_path": p, "content": "c"})).0,
        format!("The file {p} has been updated successfully.{CURRENT}")
    );
    // An existing file never read.
    e.write("old.txt", "old");
    assert_eq!(
        e.text("Write", json!({"file_path": e.p("old.txt"), "content": "new"})),
        ("<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>".into(), true)
    );
    assert_eq!(
        std::fs::read_to_string(e.ws.join("old.txt")).unwrap(),
        "old"
    );
    // Read, then changed on disk.
    e.touch("old.txt", 100);
    e.run("Read", json!({"file_path": e.p("old.txt")}));
    e.write("old.txt", "changed");
    assert_eq!(
        e.text("Write", json!({"file_path": e.p("old.txt"), "content": "new"})),
        ("<tool_use_error>File has been modified since read, either by the user or by a linter. Read it again before attempting to write it.</tool_use_error>".into(), true)
    );
    // An existing empty file is "created" (the old content is tested for truthiness).
    e.write("empty.txt", "");
    e.run("Read", json!({"file_path": e.p("empty.txt")}));
    assert_eq!(
        e.text(
            "Write",
            json!({"file_path": e.p("empty.txt"), "content": "x"})
        )
        .0,
        format!(
            "File created successfully at: {}{CURRENT}",
            e.p("empty.txt")
        )
    );
    std::fs::create_dir(e.ws.join("d")).unwrap();
    assert_eq!(
        e.text("Write", json!({"file_path": e.p("d"), "content": "x"})),
        (format!("<tool_use_error>{} is a directory, not a file. To create a file inside it, include the file name in file_path.</tool_use_error>", e.p("d")), true)
    );
}

#[test]
fn write_without_read_in_bypass_mode() {
    let e = env_with(ReadGuard::Skip);
    e.write("old.txt", "old");
    assert_eq!(
        e.text(
            "Write",
            json!({"file_path": e.p("old.txt"), "content": "new"})
        )
        .0,
        format!(
            "The file {} has been updated successfully.{CURRENT}",
            e.p("old.txt")
        )
    );
}

// ---------------------------------------------------------------- Edit (`DC`, `Z3i`, chunk-6fmj6syj.js)

#[test]
fn edit_success_texts() {
    let e = env();
    e.write("f.txt", "one two two three\n");
    e.run("Read", json!({"file_path": e.p("f.txt")}));
    let o = e.run(
        "Edit",
        json!({"file_path": e.p("f.txt"), "old_string": "one", "new_string": "1"}),
    );
    assert_eq!(
        o.observation.text,
        format!(
            "The file {} has been updated successfully.{CURRENT}",
            e.p("f.txt")
        )
    );
    assert_eq!(o.touched, vec![PathBuf::from("f.txt")]);
    let o = e.run("Edit", json!({"file_path": e.p("f.txt"), "old_string": "two", "new_string": "2", "replace_all": true}));
    assert_eq!(
        o.observation.text,
        format!(
            "The file {} has been updated. All occurrences were successfully replaced.{CURRENT}",
            e.p("f.txt")
        )
    );
    assert_eq!(
        std::fs::read_to_string(e.ws.join("f.txt")).unwrap(),
        "1 2 2 three\n"
    );
}

#[test]
fn edit_refusals() {
    let e = env();
    let ws = e.ws.display().to_string();
    e.write("f.txt", "a b a\n");
    let f = e.p("f.txt");
    assert_eq!(
        e.text("Edit", json!({"file_path": f, "old_string": "a", "new_string": "a"})),
        ("<tool_use_error>No changes to make: old_string and new_string are exactly the same.</tool_use_error>".into(), true)
    );
    assert_eq!(
        e.text("Edit", json!({"file_path": f, "old_string": "a", "new_string": "x"})),
        ("<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>".into(), true)
    );
    e.run("Read", json!({"file_path": f}));
    assert_eq!(
        e.text(
            "Edit",
            json!({"file_path": f, "old_string": "zzz", "new_string": "x"})
        ),
        (
            "<tool_use_error>String to replace not found in file.\nString: zzz</tool_use_error>"
                .into(),
            true
        )
    );
    assert_eq!(
        e.text("Edit", json!({"file_path": f, "old_string": "a", "new_string": "x"})),
        ("<tool_use_error>Found 2 matches of the string to replace, but replace_all is false. To replace all occurrences, set replace_all to true. To replace only one occurrence, please provide more context to uniquely identify the instance.\nString: a</tool_use_error>".into(), true)
    );
    assert_eq!(
        e.text("Edit", json!({"file_path": e.p("nope.txt"), "old_string": "a", "new_string": "x"})),
        (format!("<tool_use_error>File does not exist. Note: your current working directory is {ws}.</tool_use_error>"), true)
    );
    assert_eq!(
        e.text(
            "Edit",
            json!({"file_path": f, "old_string": "", "new_string": "x"})
        ),
        (
            "<tool_use_error>Cannot create new file - file already exists.</tool_use_error>".into(),
            true
        )
    );
    assert_eq!(
        std::fs::read_to_string(e.ws.join("f.txt")).unwrap(),
        "a b a\n"
    );
}

#[test]
fn edit_creates_with_empty_old_string_and_keeps_crlf() {
    let e = env();
    let p = e.p("new/file.txt");
    assert_eq!(
        e.text(
            "Edit",
            json!({"file_path": p, "old_string": "", "new_string": "hello\n"})
        )
        .0,
        format!("The file {p} has been updated successfully.{CURRENT}")
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "hello\n");
    e.write("w.txt", "x\r\ny\r\n");
    e.run("Read", json!({"file_path": e.p("w.txt")}));
    e.run(
        "Edit",
        json!({"file_path": e.p("w.txt"), "old_string": "x\ny", "new_string": "x\nz"}),
    );
    assert_eq!(std::fs::read(e.ws.join("w.txt")).unwrap(), b"x\r\nz\r\n");
}

#[test]
fn edit_stale_file_in_bypass_mode() {
    let e = env_with(ReadGuard::Skip);
    e.write("f.txt", "alpha\nbeta\n");
    e.touch("f.txt", 100);
    e.run("Read", json!({"file_path": e.p("f.txt")}));
    e.write("f.txt", "alpha\nbeta\ngamma\n");
    let (t, err) = e.text(
        "Edit",
        json!({"file_path": e.p("f.txt"), "old_string": "beta", "new_string": "BETA"}),
    );
    assert!(!err);
    assert_eq!(t, format!("The file {} has been updated successfully. (note: the file had been modified on disk since you last read it \u{2014} the edit applied cleanly, but the file contains other changes not in your context. Read it before edits that depend on surrounding content.)", e.p("f.txt")));
    // Edited without any Read: applies, no suffix.
    e.write("g.txt", "x\n");
    assert_eq!(
        e.text(
            "Edit",
            json!({"file_path": e.p("g.txt"), "old_string": "x", "new_string": "y"})
        )
        .0,
        format!("The file {} has been updated successfully.", e.p("g.txt"))
    );
    // A partial read does not put the file "in context".
    e.write("h.txt", "1\n2\n3\n");
    e.run(
        "Read",
        json!({"file_path": e.p("h.txt"), "offset": 2, "limit": 1}),
    );
    assert_eq!(
        e.text(
            "Edit",
            json!({"file_path": e.p("h.txt"), "old_string": "2", "new_string": "two"})
        )
        .0,
        format!("The file {} has been updated successfully.", e.p("h.txt"))
    );
}

#[test]
fn multi_edit() {
    let e = env_cfg(ToolConfig {
        behaviour: pvisor::adapters::claude_code::versions::Behaviour::of(Some((2, 0, 77))),
        ..ToolConfig::default()
    });
    e.write("m.txt", "a b c\n");
    e.run("Read", json!({"file_path": e.p("m.txt")}));
    let (t, err) = e.text(
        "MultiEdit",
        json!({"file_path": e.p("m.txt"), "edits": [
        {"old_string": "a", "new_string": "A"}, {"old_string": "c", "new_string": "C"}]}),
    );
    assert!(!err);
    assert_eq!(
        t,
        format!(
            "Applied 2 edits to {}:\n1. Replaced \"a\" with \"A\"\n2. Replaced \"c\" with \"C\"",
            e.p("m.txt")
        )
    );
    assert_eq!(
        std::fs::read_to_string(e.ws.join("m.txt")).unwrap(),
        "A b C\n"
    );
}

// ---------------------------------------------------------------- Bash (`yi`, `$Cr`, `z2t`)

#[test]
fn bash_outputs() {
    let e = env();
    assert_eq!(
        e.text("Bash", json!({"command": "echo hi > a.txt && ls"})),
        ("a.txt".into(), false)
    );
    assert_eq!(
        e.text(
            "Bash",
            json!({"command": "echo out; echo err >&2; echo out2"})
        )
        .0,
        "out\nerr\nout2"
    );
    assert_eq!(
        e.text("Bash", json!({"command": "printf '\\n\\n  x\\n\\n'"}))
            .0,
        "  x"
    );
    assert_eq!(
        e.text("Bash", json!({"command": "true"})),
        ("(Bash completed with no output)".into(), false)
    );
    // grep's exit 1 means "no match", not an error.
    let o = e.run("Bash", json!({"command": "grep nothing a.txt"}));
    assert_eq!(
        (
            o.observation.text.as_str(),
            o.observation.is_error,
            o.exit_code
        ),
        ("(Bash completed with no output)", false, Some(1))
    );
    let o = e.run(
        "Bash",
        json!({"command": "echo partial; ls /nonexistent-dir-xyz"}),
    );
    assert!(o.observation.is_error);
    assert_eq!(o.exit_code, Some(2));
    assert_eq!(
        o.observation.text,
        "Exit code 2\npartial\nls: cannot access '/nonexistent-dir-xyz': No such file or directory"
    );
    assert_eq!(
        e.text("Bash", json!({"command": "exit 3"})),
        ("Exit code 3".into(), true)
    );
}

#[test]
fn bash_cwd_carries_inside_the_workspace_only() {
    let e = env();
    e.run("Bash", json!({"command": "mkdir -p sub && cd sub"}));
    assert_eq!(e.text("Bash", json!({"command": "pwd"})).0, e.p("sub"));
    assert_eq!(e.s.snapshot().cwd, Some(e.ws.join("sub")));
    // Relative file paths follow the shell's directory.
    e.write("sub/in.txt", "x");
    assert_eq!(e.text("Read", json!({"file_path": "in.txt"})).0, "1\tx");
    // Leaving the start directory: reset, with Claude's note.
    let (t, err) = e.text("Bash", json!({"command": "cd / && echo moved"}));
    assert!(!err);
    assert_eq!(
        t,
        format!("moved\nShell cwd was reset to {}", e.ws.display())
    );
    assert_eq!(
        e.text("Bash", json!({"command": "pwd"})).0,
        e.ws.display().to_string()
    );
    // A failing command does not move the shell.
    e.run("Bash", json!({"command": "cd sub && false"}));
    assert_eq!(
        e.text("Bash", json!({"command": "pwd"})).0,
        e.ws.display().to_string()
    );
}

#[test]
fn bash_large_output_background_children_and_refusals() {
    let e = env();
    let o = e.run("Bash", json!({"command": "seq 1 20000"}));
    assert!(
        o.observation
            .text
            .starts_with("<persisted-output>\nOutput too large (106.3KB). Full output saved to: "),
        "{}",
        &o.observation.text[..200]
    );
    assert!(o
        .observation
        .text
        .contains("\n\nPreview (first 2KB):\n1\n2\n3\n"));
    assert!(o.observation.text.ends_with("\n...\n</persisted-output>"));
    let started = std::time::Instant::now();
    assert_eq!(
        e.text("Bash", json!({"command": "sleep 100 & echo started"}))
            .0,
        "started"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(matches!(
        e.try_run(
            "Bash",
            json!({"command": "sleep 1", "run_in_background": true})
        ),
        Err(ExecError::Unsupported { .. })
    ));
    assert!(matches!(
        e.try_run("Bash", json!({"command": "sleep 5", "timeout": 200})),
        Err(ExecError::Io { .. })
    ));
    let long = e.run(
        "Bash",
        json!({"command": "head -c 20000 /dev/zero | tr '\\0' 'x'; exit 1"}),
    );
    assert!(long.observation.is_error);
    assert!(long.observation.text.contains("characters truncated] ..."));
}

// ---------------------------------------------------------------- Glob (`mG`, `eJr`)

#[test]
fn glob_sorted_by_mtime_relative_and_capped() {
    let e = env();
    e.write("b.rs", "");
    e.write("src/a.rs", "");
    e.write(".hidden/c.rs", "");
    e.write("README.md", "");
    e.write(".gitignore", "src/\n");
    e.touch("src/a.rs", 300);
    e.touch("b.rs", 200);
    e.touch(".hidden/c.rs", 100);
    // Hidden files included, .gitignore not honoured, oldest first.
    assert_eq!(
        e.text("Glob", json!({"pattern": "**/*.rs"})),
        ("src/a.rs\nb.rs\n.hidden/c.rs".into(), false)
    );
    assert_eq!(
        e.text("Glob", json!({"pattern": "*.rs"})).0,
        "src/a.rs\nb.rs\n.hidden/c.rs"
    );
    assert_eq!(e.text("Glob", json!({"pattern": "src/*.rs"})).0, "src/a.rs");
    assert_eq!(
        e.text("Glob", json!({"pattern": "*.rs", "path": e.p("src")}))
            .0,
        "src/a.rs"
    );
    assert_eq!(
        e.text("Glob", json!({"pattern": "*.py"})),
        ("No files found".into(), false)
    );
    assert_eq!(
        e.text("Glob", json!({"pattern": "*", "path": e.p("nope")})),
        (
            format!(
                "Directory does not exist: {}. Note: your current working directory is {}.",
                e.p("nope"),
                e.ws.display()
            ),
            true
        )
    );
    for i in 0..105 {
        e.write(&format!("many/f{i:03}.txt"), "");
    }
    let (t, _) = e.text("Glob", json!({"pattern": "many/*.txt"}));
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 101);
    assert_eq!(lines[100], "(Showing 100 of 105 matching files; 5 more are not listed. Narrow the pattern or path to see the rest.)");
}

// ---------------------------------------------------------------- Grep (`hG`, `SJr`)

fn grep_env() -> Env {
    let e = env();
    e.write("a.txt", "hello world\nsecond line\nHello again\n");
    e.write("src/b.rs", "fn main() {\n    println!(\"hello\");\n}\n");
    e.write(".git/config", "hello from git\n");
    e.write("ignored/x.txt", "hello ignored\n");
    e.write(".gitignore", "ignored/\n");
    e.touch("a.txt", 300);
    e.touch("src/b.rs", 100);
    e
}

#[test]
fn grep_files_with_matches() {
    let e = grep_env();
    // Newest first; .git and .gitignore'd paths skipped.
    assert_eq!(
        e.text("Grep", json!({"pattern": "hello"})),
        ("Found 2 files\nsrc/b.rs\na.txt".into(), false)
    );
    assert_eq!(
        e.text(
            "Grep",
            json!({"pattern": "HELLO", "-i": true, "glob": "*.txt"})
        )
        .0,
        "Found 1 file\na.txt"
    );
    assert_eq!(
        e.text("Grep", json!({"pattern": "hello", "type": "rust"}))
            .0,
        "Found 1 file\nsrc/b.rs"
    );
    assert_eq!(
        e.text("Grep", json!({"pattern": "nomatch"})),
        ("No files found".into(), false)
    );
    assert_eq!(
        e.text("Grep", json!({"pattern": "hello", "head_limit": 1}))
            .0,
        "Found 1 file limit: 1\nsrc/b.rs"
    );
}

#[test]
fn grep_content_and_count() {
    let e = grep_env();
    assert_eq!(
        e.text(
            "Grep",
            json!({"pattern": "hello", "output_mode": "content", "-i": true})
        )
        .0,
        "a.txt:1:hello world\na.txt:3:Hello again\nsrc/b.rs:2:    println!(\"hello\");"
    );
    assert_eq!(
        e.text(
            "Grep",
            json!({"pattern": "second", "output_mode": "content", "-C": 1})
        )
        .0,
        "a.txt-1-hello world\na.txt:2:second line\na.txt-3-Hello again"
    );
    assert_eq!(
        e.text(
            "Grep",
            json!({"pattern": "hello", "output_mode": "content", "-n": false, "path": e.p("a.txt")})
        )
        .0,
        "hello world"
    );
    assert_eq!(
        e.text(
            "Grep",
            json!({"pattern": "hello", "output_mode": "content", "path": e.p("a.txt")})
        )
        .0,
        "1:hello world"
    );
    assert_eq!(
        e.text("Grep", json!({"pattern": "zzz", "output_mode": "content"}))
            .0,
        "No matches found"
    );
    assert_eq!(
        e.text(
            "Grep",
            json!({"pattern": "hello", "output_mode": "content", "-i": true, "head_limit": 2})
        )
        .0,
        "a.txt:1:hello world\na.txt:3:Hello again\n\n[Showing results with pagination = limit: 2]"
    );
    assert_eq!(
        e.text("Grep", json!({"pattern": "l", "output_mode": "count"}))
            .0,
        "a.txt:3\nsrc/b.rs:1\n\nFound 4 total occurrences across 2 files."
    );
    assert_eq!(
        e.text("Grep", json!({"pattern": "zzz", "output_mode": "count"}))
            .0,
        "No matches found\n\nFound 0 total occurrences across 0 files."
    );
    assert_eq!(
        e.text(
            "Grep",
            json!({"pattern": "fn main.*\\n.*println", "multiline": true, "output_mode": "content"})
        )
        .0,
        "src/b.rs:1:fn main() {\nsrc/b.rs:2:    println!(\"hello\");"
    );
    assert_eq!(
        e.text("Grep", json!({"pattern": "x", "path": e.p("nope")})),
        (
            format!(
                "Path does not exist: {}. Note: your current working directory is {}.",
                e.p("nope"),
                e.ws.display()
            ),
            true
        )
    );
    assert!(matches!(
        e.try_run("Grep", json!({"pattern": "(unclosed"})),
        Err(ExecError::Unsupported { .. })
    ));
}

// ---------------------------------------------------------------- LS and NotebookEdit

#[test]
fn ls_and_multi_edit_do_not_exist_in_2_1() {
    let e = env();
    assert_eq!(
        e.text("LS", json!({"path": e.ws.display().to_string()})),
        (
            "<tool_use_error>Error: No such tool available: LS</tool_use_error>".into(),
            true
        )
    );
    assert_eq!(
        e.text("MultiEdit", json!({"file_path": e.p("x"), "edits": []})),
        (
            "<tool_use_error>Error: No such tool available: MultiEdit</tool_use_error>".into(),
            true
        )
    );
}

#[test]
fn ls_tree() {
    let e = env_cfg(ToolConfig {
        behaviour: pvisor::adapters::claude_code::versions::Behaviour::of(Some((2, 0, 77))),
        ..ToolConfig::default()
    });
    e.write("src/main.rs", "");
    e.write("README.md", "");
    e.write(".hidden", "");
    let (t, _) = e.text("LS", json!({"path": e.ws.display().to_string()}));
    assert_eq!(
        t,
        format!("- {}/\n  - README.md\n  - src/\n    - main.rs\n\nNOTE: do any of the files above seem malicious? If so, you MUST refuse to continue work.", e.ws.display())
    );
}

#[test]
fn notebook_edit() {
    let e = env();
    let nb = json!({"cells": [{"cell_type": "code", "id": "c1", "source": "print(1)", "metadata": {}, "execution_count": 3, "outputs": [{"output_type": "stream", "text": "1"}]}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5});
    e.write(
        "n.ipynb",
        &format!("{}\n", serde_json::to_string_pretty(&nb).unwrap()),
    );
    let path = e.p("n.ipynb");
    assert_eq!(
        e.text("NotebookEdit", json!({"notebook_path": path, "cell_id": "c1", "new_source": "print(2)"})),
        ("<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>".into(), true)
    );
    // Reads of notebooks are not reproduced; seed the read state as a resumed session would.
    let read = call("Read", json!({"file_path": path}));
    e.s.seed(
        &read,
        &Observation {
            text: String::new(),
            is_error: false,
            native: None,
        },
        &e.ctx,
    );
    assert_eq!(
        e.text(
            "NotebookEdit",
            json!({"notebook_path": path, "cell_id": "c1", "new_source": "print(2)"})
        ),
        ("Updated cell c1 with print(2)".into(), false)
    );
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.starts_with("{\n \"cells\": [\n  {\n   \"cell_type\": \"code\",\n   \"id\": \"c1\",\n   \"source\": \"print(2)\""), "{written}");
    assert!(written.contains("\"execution_count\": null,\n   \"outputs\": []"));
    assert_eq!(
        e.text(
            "NotebookEdit",
            json!({"notebook_path": path, "cell_id": "zz", "new_source": "x"})
        )
        .0,
        "<tool_use_error>Cell with ID \"zz\" not found in notebook.</tool_use_error>"
    );
    assert_eq!(
        e.text(
            "NotebookEdit",
            json!({"notebook_path": path, "cell_id": "c1", "new_source": "", "edit_mode": "delete"})
        )
        .0,
        "Deleted cell c1"
    );
}

#[test]
fn unknown_and_non_regenerable_tools_are_refused() {
    let e = env();
    for t in [
        "WebFetch",
        "Agent",
        "TodoWrite",
        "mcp__server__tool",
        "Skill",
    ] {
        assert!(
            matches!(e.try_run(t, json!({})), Err(ExecError::Unsupported { .. })),
            "{t}"
        );
    }
}

#[test]
fn paths_outside_the_workspace_are_refused_for_writes() {
    let e = env();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), e.ws.join("link")).unwrap();
    let target = format!("{}/link/evil.txt", e.ws.display());
    assert!(matches!(
        e.try_run("Write", json!({"file_path": target, "content": "x"})),
        Err(ExecError::OutsideWorkspace { .. })
    ));
    assert!(!outside.path().join("evil.txt").exists());
    assert!(matches!(
        e.try_run(
            "Edit",
            json!({"file_path": "/tmp/x", "old_string": "", "new_string": "x"})
        ),
        Err(ExecError::OutsideWorkspace { .. })
    ));
    let _ = Path::new("");
}

/// A hard link an earlier Bash call planted (`ln /outside/file planted`) names a file outside
/// the workspace: Edit and Write refuse to write through it; the outside file is unchanged.
#[test]
fn writes_through_a_hard_link_to_a_file_outside_are_refused() {
    let e = env();
    let outside = tempfile::tempdir_in(e.ws.parent().unwrap()).unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "keep\n").unwrap();
    let out = e.run(
        "Bash",
        json!({"command": format!("ln {} planted.txt && cat planted.txt", secret.display())}),
    );
    assert!(
        out.observation.text.contains("keep"),
        "{}",
        out.observation.text
    );
    e.run("Read", json!({"file_path": e.p("planted.txt")}));
    assert!(matches!(
        e.try_run(
            "Edit",
            json!({"file_path": e.p("planted.txt"), "old_string": "keep", "new_string": "gone"})
        ),
        Err(ExecError::OutsideWorkspace { .. })
    ));
    assert!(matches!(
        e.try_run(
            "Write",
            json!({"file_path": e.p("planted.txt"), "content": "gone"})
        ),
        Err(ExecError::OutsideWorkspace { .. })
    ));
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "keep\n");
}
