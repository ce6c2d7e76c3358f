//! What a command prints: to a file or the standard output, through a buffer, with a closed
//! pipe (`| head`) taken as the reader's choice rather than an error or a panic.

use std::io::Write;
use std::path::PathBuf;

use super::error::CliError;
use super::exit;

/// Write `text` to `output` (or stdout).
pub fn emit(output: &Option<PathBuf>, text: &str) -> Result<(), CliError> {
    emit_with(output, |w| w.write_all(text.as_bytes()))
}

/// Write `value` as pretty JSON and a newline to `output` (or stdout), as it is serialized
/// (a value that streams, like the audit's timeline, is never held as one text).
pub fn emit_json(output: &Option<PathBuf>, value: &impl serde::Serialize) -> Result<(), CliError> {
    emit_with(output, |w| {
        serde_json::to_writer_pretty(&mut *w, value)?;
        w.write_all(b"\n")
    })
}

/// Write a text to `output` (or stdout) as `write` produces it, without holding it; an
/// error `write` returns fails the output with its message.
pub fn emit_fmt(
    output: &Option<PathBuf>,
    write: impl FnOnce(&mut dyn std::fmt::Write) -> Result<(), String>,
) -> Result<(), CliError> {
    emit_with(output, |w| {
        let mut to = FmtToIo { w, error: None };
        let made = write(&mut to);
        match to.error {
            Some(e) => Err(e),
            None => made.map_err(std::io::Error::other),
        }
    })
}

/// `fmt::Write` onto an `io::Write`, keeping the first I/O error (its kind says whether the
/// reader closed the pipe); writes after it do nothing.
struct FmtToIo<'a> {
    w: &'a mut dyn std::io::Write,
    error: Option<std::io::Error>,
}

impl std::fmt::Write for FmtToIo<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.error.is_some() {
            return Err(std::fmt::Error);
        }
        self.w.write_all(s.as_bytes()).map_err(|e| {
            self.error = Some(e);
            std::fmt::Error
        })
    }
}

/// Write to `output` (or stdout) through a buffer, as `write` produces it.
fn emit_with(
    output: &Option<PathBuf>,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), CliError> {
    let cannot = |what: String, e: std::io::Error| {
        CliError::new(
            exit::CONFIGURATION,
            format!("cannot write {what}: {e}"),
            None,
        )
    };
    match output {
        Some(p) => {
            let f = std::fs::File::create(p).map_err(|e| cannot(p.display().to_string(), e))?;
            let mut w = std::io::BufWriter::new(f);
            write(&mut w)
                .and_then(|_| w.flush())
                .map_err(|e| cannot(p.display().to_string(), e))
        }
        None => {
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            match write(&mut w).and_then(|_| w.flush()) {
                // A closed pipe (`| head`) is the reader's choice, not a failure.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.map_err(|e| cannot("the standard output".into(), e)),
            }
        }
    }
}
