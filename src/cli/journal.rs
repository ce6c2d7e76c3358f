//! `pvisor journal verify|show|export`.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use journal_format::TailState;

use super::error::CliError;
use super::exit;
use crate::fold::{self, ReplayState};
use crate::journal::{read_events, resolve_path, JournalError};
use crate::report::{export::export_line, export::rfc3339, summary};

#[derive(Debug, Subcommand)]
pub enum JournalCmd {
    /// Check header, checksums, sequence, hash chain and event order. Exit 0 when intact;
    /// 60 torn tail (recoverable), 61 corrupt, 62 forked, 63 too new, 65 illegal order.
    Verify {
        /// The journal file (journal.pvj) or the run's state directory.
        path: PathBuf,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
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
    /// Test support: a miniature engine that appends a legal run, printing `ack SEQ` after
    /// each durable append (used by the kill-loop tests).
    #[command(hide = true)]
    Stress {
        state_dir: PathBuf,
        #[arg(long, default_value_t = u64::MAX)]
        max_events: u64,
    },
}

pub fn run(cmd: JournalCmd) -> Result<i32, CliError> {
    match cmd {
        JournalCmd::Verify { path, json } => verify(path, json),
        JournalCmd::Show { path } => show(path),
        JournalCmd::Export { path, output } => export(path, output),
        JournalCmd::Stress { state_dir, max_events } => super::stress::run(state_dir, max_events),
    }
}

fn verify(path: PathBuf, json: bool) -> Result<i32, CliError> {
    let file = resolve_path(&path)?;
    let mut state = ReplayState::default();
    let mut fold_err = None;
    let res = read_events(&file, |e| {
        if fold_err.is_none() {
            if let Err(fe) = fold::apply(&mut state, &e) {
                fold_err = Some(fe);
            }
        }
        Ok(())
    });
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
    let _ = writeln!(out, "{:>5}  {:<24}  {:<18}  {:<24}  summary", "seq", "time (UTC)", "phase", "event");
    let mut bad = None;
    let rep = read_events(&file, |e| {
        let phase = match fold::apply(&mut state, &e) {
            Ok(()) => state.phase.name(),
            Err(fe) => {
                bad.get_or_insert(fe);
                "ILLEGAL".into()
            }
        };
        let _ = writeln!(out, "{:>5}  {:<24}  {:<18}  {:<24}  {}", e.seq, rfc3339(e.at_ms), phase, e.event.name(), summary(&e.event));
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
        Some(p) => Box::new(std::io::BufWriter::new(std::fs::File::create(p).map_err(|e| CliError::new(exit::CONFIGURATION, format!("cannot create {}: {e}", p.display()), None))?)),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    read_events(&file, |e| {
        let _ = writeln!(sink, "{}", export_line(&e));
        Ok(())
    })?;
    let _ = sink.flush();
    Ok(exit::OK)
}
