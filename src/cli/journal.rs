//! `pvisor journal verify|show|export`.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use journal_format::TailState;

use super::error::CliError;
use super::exit;
use super::output::{emit, emit_fmt, emit_json};
use crate::fold::{self, ReplayState};
use crate::journal::{read_events, resolve_path, JournalError};
use crate::report::{export::rfc3339, export::write_export_line, summary};

#[derive(Debug, Subcommand)]
pub enum JournalCmd {
    /// Check header, checksums, sequence and hash chain (with --deep: also decode every
    /// event and check their order). Exit 0 when intact; 60 torn tail (recoverable), 61
    /// corrupt, 62 forked, 63 too new, 65 illegal order (--deep).
    Verify {
        /// The journal file (journal.pvj) or the run's state directory.
        path: PathBuf,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
        /// Also decode every event and fold them: a payload that does not decode (61) or an
        /// order the phase machine refuses (65). Slower; what a resume and the audit do.
        #[arg(long)]
        deep: bool,
    },
    /// A human timeline: seq, time, phase, event, one-line summary.
    Show { path: PathBuf },
    /// JSON Lines, one event per line (see docs/journal-format.md for the text/bytes rule).
    Export {
        path: PathBuf,
        /// Write to this file instead of stdout.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Offline audit of one run (state directory or journal) or of a directory of runs:
    /// integrity, event order, budgets, privacy, bridge receipts, per-step report.
    /// Exit 0 when every audited run passes, 66 when a check failed.
    Audit {
        path: PathBuf,
        /// text (default), json (schema pvisor.audit/v1) or html (self-contained file).
        #[arg(long, value_enum, default_value_t = AuditFormat::Text)]
        format: AuditFormat,
        /// Write the report to this file instead of stdout.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Parallel workers for a directory of runs.
        #[arg(long, default_value_t = 2)]
        jobs: usize,
    },
    /// Compare two runs of the same session (two models from one boundary, a run before and
    /// after an edit): where their observations, model requests and live actions first
    /// diverge, and how their outcomes differ. Exit 0 when they are the same, 67 when they
    /// differ.
    Diff {
        /// The first run's state directory or journal.
        a: PathBuf,
        /// The second run's state directory or journal.
        b: PathBuf,
        /// text (default), json (schema pvisor.journal-diff/v1) or html (self-contained file).
        #[arg(long, value_enum, default_value_t = AuditFormat::Text)]
        format: AuditFormat,
        /// Write the report to this file instead of stdout.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Test support: a miniature engine that appends a legal run, printing `ack SEQ` after
    /// each durable append (used by the kill-loop tests).
    #[command(hide = true)]
    Stress {
        state_dir: PathBuf,
        #[arg(long, default_value_t = u64::MAX)]
        max_events: u64,
        /// Batches of the synthetic run (4 events each, plus 6).
        #[arg(long, default_value_t = super::stress::DEFAULT_BATCHES)]
        batches: u64,
    },
}

pub fn run(cmd: JournalCmd) -> Result<i32, CliError> {
    match cmd {
        JournalCmd::Verify { path, json, deep } => verify(path, json, deep),
        JournalCmd::Show { path } => show(path),
        JournalCmd::Export { path, output } => export(path, output),
        JournalCmd::Stress {
            state_dir,
            max_events,
            batches,
        } => super::stress::run(state_dir, max_events, batches),
        JournalCmd::Audit {
            path,
            format,
            output,
            jobs,
        } => audit(path, format, output, jobs),
        JournalCmd::Diff {
            a,
            b,
            format,
            output,
        } => diff(a, b, format, output),
    }
}

fn diff(
    a: PathBuf,
    b: PathBuf,
    format: AuditFormat,
    output: Option<PathBuf>,
) -> Result<i32, CliError> {
    use crate::audit::compare;
    let d = compare::diff_runs(&a, &b)?;
    let text = match format {
        AuditFormat::Text => compare::text(&d),
        AuditFormat::Json => serde_json::to_string_pretty(&d).unwrap_or_default() + "\n",
        AuditFormat::Html => compare::html(&d),
    };
    emit(&output, &text)?;
    Ok(if d.same() {
        exit::OK
    } else {
        exit::RUNS_DIFFER
    })
}

fn verify(path: PathBuf, json: bool, deep: bool) -> Result<i32, CliError> {
    let file = resolve_path(&path)?;
    let mut state = ReplayState::default();
    let mut fold_err = None;
    let res = if deep {
        read_events(&file, |e| {
            if fold_err.is_none() {
                // A finished batch leaves the state: memory stays flat however long the run.
                if let Err(fe) = fold::apply_streaming(&mut state, &e) {
                    fold_err = Some(fe);
                }
            }
            Ok(())
        })
    } else {
        crate::journal::scan_file(&file)
    };
    let (code, status, message, seq, offset) = match &res {
        Ok(rep) => match (rep.tail, &fold_err) {
            (TailState::Torn { offset, len }, _) => (exit::JOURNAL_TORN_TAIL, "torn_tail", format!("{} intact events up to seq {}, then a torn tail of {len} bytes at byte offset {offset}; opening the journal for write (pvisor replay --resume-journal) quarantines it", rep.records, rep.last_seq), Some(rep.last_seq + 1), Some(offset)),
            (TailState::Clean { .. }, Some(fe)) => (exit::JOURNAL_ILLEGAL_ORDER, "illegal_order", fe.to_string(), Some(fe.seq), None),
            (TailState::Clean { end_offset }, None) => (exit::OK, "intact", format!("intact: {} events, last seq {}, {end_offset} bytes, head {}", rep.records, rep.last_seq, rep.head.to_hex()), Some(rep.last_seq), None),
        },
        Err(e) => {
            let ce = CliError::from(match e {
                JournalError::Damaged { path, source } => JournalError::Damaged { path: path.clone(), source: source.clone() },
                other => JournalError::Io { path: file.clone(), source: std::io::Error::other(other.to_string()) },
            });
            let code = match e {
                JournalError::TooNew { .. } => exit::JOURNAL_TOO_NEW,
                JournalError::Decode { .. } => exit::JOURNAL_CORRUPT,
                JournalError::Damaged { .. } => ce.code,
                JournalError::NotFound { .. } => exit::CONFIGURATION,
                _ => exit::INTERNAL,
            };
            let status = match code {
                exit::JOURNAL_FORKED => "forked",
                exit::JOURNAL_TOO_NEW => "too_new",
                exit::JOURNAL_CORRUPT => "corrupt",
                _ => "error",
            };
            let (seq, off) = match e {
                JournalError::Damaged { source, .. } => (source.seq(), source.offset()),
                JournalError::Decode { seq, offset, .. } => (Some(*seq), Some(*offset)),
                JournalError::TooNew { .. } => (None, Some(0)),
                _ => (None, None),
            };
            (code, status, e.to_string(), seq, off)
        }
    };
    if json {
        let v = serde_json::json!({ "path": file.display().to_string(), "status": status, "exit_code": code, "message": message, "seq": seq, "offset": offset });
        println!("{v}");
    } else if code == exit::OK {
        println!("{}: {message}", file.display());
    } else {
        eprintln!("{}: {status}: {message}", file.display());
    }
    Ok(code)
}

fn show(path: PathBuf) -> Result<i32, CliError> {
    let file = resolve_path(&path)?;
    let mut state = ReplayState::default();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let _ = writeln!(
        out,
        "{:>5}  {:<24}  {:<18}  {:<24}  summary",
        "seq", "time (UTC)", "phase", "event"
    );
    let mut bad = None;
    let rep = read_events(&file, |e| {
        let phase = match fold::apply_streaming(&mut state, &e) {
            Ok(_) => state.phase.name(),
            Err(fe) => {
                bad.get_or_insert(fe);
                "ILLEGAL".into()
            }
        };
        let _ = writeln!(
            out,
            "{:>5}  {:<24}  {:<18}  {:<24}  {}",
            e.seq,
            rfc3339(e.at_ms),
            phase,
            e.event.name(),
            summary(&e.event)
        );
        Ok(())
    })?;
    if let TailState::Torn { offset, len } = rep.tail {
        let _ = writeln!(out, "    -  torn tail: {len} bytes at byte offset {offset} (recovered when the journal is next opened for write)");
    }
    if let Some(fe) = bad {
        return Err(CliError::new(exit::JOURNAL_ILLEGAL_ORDER, fe.to_string(), Some("the events are intact but out of order for the phase machine; `pvisor journal export` shows them all".to_string())));
    }
    Ok(exit::OK)
}

fn export(path: PathBuf, output: Option<PathBuf>) -> Result<i32, CliError> {
    let file = resolve_path(&path)?;
    let mut sink: Box<dyn Write> = match &output {
        Some(p) => Box::new(std::io::BufWriter::new(std::fs::File::create(p).map_err(
            |e| {
                CliError::new(
                    exit::CONFIGURATION,
                    format!("cannot create {}: {e}", p.display()),
                    None,
                )
            },
        )?)),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    read_events(&file, |e| {
        let _ = write_export_line(&mut sink, &e);
        Ok(())
    })?;
    let _ = sink.flush();
    Ok(exit::OK)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuditFormat {
    Text,
    Json,
    Html,
}

/// Write every readable run's HTML page into `<output>.runs/` and return their addresses
/// relative to `output`'s folder.
fn write_run_pages(
    output: &std::path::Path,
    all: &[(PathBuf, Result<crate::audit::AuditReport, String>)],
) -> Result<Vec<Option<String>>, CliError> {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "fleet.html".into());
    let dir_name = format!("{name}.runs");
    let dir = output.with_file_name(&dir_name);
    std::fs::create_dir_all(&dir).map_err(|e| {
        CliError::new(
            exit::CONFIGURATION,
            format!("cannot create {}: {e}", dir.display()),
            None,
        )
    })?;
    let mut links = Vec::with_capacity(all.len());
    for (i, (_, r)) in all.iter().enumerate() {
        let Ok(r) = r else {
            links.push(None);
            continue;
        };
        let id: String = r.run["run_id"]
            .as_str()
            .unwrap_or("run")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let file = format!("{i:05}-{id}.html");
        std::fs::write(dir.join(&file), crate::audit::html::render(r)).map_err(|e| {
            CliError::new(
                exit::CONFIGURATION,
                format!("cannot write {}: {e}", dir.join(&file).display()),
                None,
            )
        })?;
        links.push(Some(format!("{dir_name}/{file}")));
    }
    Ok(links)
}

fn audit(
    path: PathBuf,
    format: AuditFormat,
    output: Option<PathBuf>,
    jobs: usize,
) -> Result<i32, CliError> {
    use crate::audit::{self, fleet};
    let single = resolve_path(&path).is_ok();
    if single {
        let r = audit::audit_run(&path)?;
        match format {
            AuditFormat::Text => emit_fmt(&output, |w| {
                audit::text::render(&r, w).map_err(|e| e.to_string())
            })?,
            // Written as it is serialized: the timeline streams from the journal.
            AuditFormat::Json => emit_json(&output, &r)?,
            AuditFormat::Html => emit(&output, &audit::html::render(&r))?,
        }
        return Ok(if r.ok { exit::OK } else { exit::AUDIT_FAILED });
    }
    if !path.is_dir() {
        return Err(JournalError::NotFound { path }.into());
    }
    let runs = fleet::find_runs(&path);
    if runs.is_empty() {
        return Err(CliError::new(
            exit::CONFIGURATION,
            format!(
                "no run state directory (holding journal.pvj) below {}",
                path.display()
            ),
            Some("pass a run's state directory, a journal file, or a folder of runs".into()),
        ));
    }
    let all = fleet::audit_all(&runs, jobs);
    let summary = fleet::summarize(&all);
    let ok = all
        .iter()
        .all(|(_, r)| r.as_ref().map(|r| r.ok).unwrap_or(false));
    let text = match format {
        // Written as it is serialized, not built as one text first.
        AuditFormat::Json => {
            #[derive(serde::Serialize)]
            struct Fleet<'a> {
                summary: &'a serde_json::Value,
                runs: Vec<Run<'a>>,
            }
            #[derive(serde::Serialize)]
            #[serde(untagged)]
            enum Run<'a> {
                Audited(&'a crate::audit::AuditReport),
                Unreadable {
                    journal: &'a std::path::Path,
                    error: &'a str,
                },
            }
            let fleet = Fleet {
                summary: &summary,
                runs: all
                    .iter()
                    .map(|(p, r)| match r {
                        Ok(r) => Run::Audited(r),
                        Err(e) => Run::Unreadable {
                            journal: p,
                            error: e,
                        },
                    })
                    .collect(),
            };
            emit_json(&output, &fleet)?;
            return Ok(if ok { exit::OK } else { exit::AUDIT_FAILED });
        }
        AuditFormat::Text => {
            let mut s = format!(
                "fleet audit of {}: {} runs, {} pass\n",
                path.display(),
                all.len(),
                summary["audits_ok"]
            );
            for k in [
                "phases",
                "qualities",
                "agent_statuses",
                "failure_categories",
            ] {
                s.push_str(&format!("{k}: {}\n", summary[k]));
            }
            s.push_str(&format!(
                "observation equality rate: {}\nduration p50/p95 ms: {}/{}\n",
                summary["observation_equality_rate"],
                summary["duration_ms"]["p50"],
                summary["duration_ms"]["p95"]
            ));
            for (p, r) in &all {
                s.push_str(&format!(
                    "  {} {}\n",
                    match r {
                        Ok(r) if r.ok => "ok    ",
                        Ok(_) => "FAILED",
                        Err(_) => "ERROR ",
                    },
                    p.display()
                ));
            }
            s
        }
        AuditFormat::Html => {
            // Each run's own page beside the fleet page (`<output>.runs/`), linked from it.
            let links: Vec<Option<String>> = match &output {
                Some(o) => write_run_pages(o, &all)?,
                None => vec![None; all.len()],
            };
            audit::html::fleet::render(&path.display().to_string(), &summary, &all, &links)
        }
    };
    emit(&output, &text)?;
    Ok(if ok { exit::OK } else { exit::AUDIT_FAILED })
}
