//! The CLI's error: a message, a one-line hint, and an exit code (jj's error-plus-hint).

use crate::journal::JournalError;
use journal_format::ScanError;

use super::exit;

#[derive(Debug)]
pub struct CliError {
    pub code: i32,
    pub message: String,
    pub hint: Option<String>,
}

impl CliError {
    pub fn new(code: i32, message: impl Into<String>, hint: impl Into<Option<String>>) -> Self {
        CliError {
            code,
            message: message.into(),
            hint: hint.into(),
        }
    }
    pub fn render(&self) -> String {
        let mut s = format!("error: {}", self.message);
        if let Some(h) = &self.hint {
            s.push_str(&format!("\nhint: {h}"));
        }
        s
    }
}

impl From<JournalError> for CliError {
    fn from(e: JournalError) -> Self {
        let msg = e.to_string();
        match &e {
            JournalError::Locked { .. } => CliError::new(exit::JOURNAL_LOCKED, msg, Some("wait for the other run to finish, or stop it; the lock is released when its process exits".into())),
            JournalError::TooNew { .. } | JournalError::NotWritable { .. } => CliError::new(exit::JOURNAL_TOO_NEW, msg, Some("use the pvisor version that wrote this journal, or a newer one".into())),
            JournalError::Damaged { source: ScanError::Forked { .. }, .. } => CliError::new(exit::JOURNAL_FORKED, msg, Some("two writers or a failed fsync produced diverging histories; keep the file for inspection and start a new run".into())),
            JournalError::Damaged { .. } | JournalError::Decode { .. } => CliError::new(exit::JOURNAL_CORRUPT, msg, Some("the journal is damaged before its last record; it cannot be repaired automatically. `pvisor journal export` shows what precedes the damage".into())),
            JournalError::NotFound { .. } => CliError::new(exit::CONFIGURATION, msg, Some("pass the journal file (journal.pvj) or the run's state directory".into())),
            _ => CliError::new(exit::INTERNAL, msg, None),
        }
    }
}
