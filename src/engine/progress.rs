//! Progress on stderr while a run works, derived from the folded state after every durable
//! event (replayed batches and calls, the continuation's live steps): a bar (indicatif) when
//! stderr is a terminal, JSON Lines for machines (`--progress-json`), nothing with `--quiet`
//! or when stderr is not a terminal. Never on stdout: stdout carries the result.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use crate::fold::ReplayState;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A bar when stderr is a terminal, else nothing (the default).
    Auto,
    /// Nothing.
    Quiet,
    /// One JSON object per line on stderr: `{"progress": {...}}`.
    Json,
}

struct Reporter {
    mode: Mode,
    bar: Option<indicatif::ProgressBar>,
    last: Option<String>,
}

static REPORTER: Mutex<Option<Reporter>> = Mutex::new(None);

/// Choose how this process shows progress (the CLI calls it once, before the run).
pub fn set_mode(mode: Mode) {
    let mode = match mode {
        Mode::Auto
            if !std::io::stderr().is_terminal()
                || std::env::var_os("PVISOR_NO_PROGRESS").is_some() =>
        {
            Mode::Quiet
        }
        m => m,
    };
    *REPORTER.lock().unwrap_or_else(|e| e.into_inner()) = Some(Reporter {
        mode,
        bar: None,
        last: None,
    });
}

/// What the state says the run is doing, as one line.
fn doing(s: &ReplayState) -> String {
    let p = s.progress();
    match s.phase {
        crate::fold::Phase::Continuing => match p.live_budget {
            Some(b) => format!("continuing: live step {} of at most {b}", p.live_steps),
            None => format!("continuing: live step {}", p.live_steps),
        },
        ph => ph.name(),
    }
}

/// Report the state after an event (no-op unless [`set_mode`] chose a display).
pub fn update(s: &ReplayState) {
    let mut g = REPORTER.lock().unwrap_or_else(|e| e.into_inner());
    let Some(r) = g.as_mut() else { return };
    let p = s.progress();
    match r.mode {
        Mode::Quiet => {}
        Mode::Auto => {
            let bar = r.bar.get_or_insert_with(|| {
                let b = indicatif::ProgressBar::with_draw_target(
                    Some(p.calls_total.max(1)),
                    indicatif::ProgressDrawTarget::stderr(),
                );
                if let Ok(st) = indicatif::ProgressStyle::with_template(
                    "[pvisor] {bar:30} calls {pos}/{len} {msg}",
                ) {
                    b.set_style(st);
                }
                b
            });
            bar.set_length(p.calls_total.max(1));
            bar.set_position(p.calls_done);
            bar.set_message(format!(
                "batches {}/{} | {}",
                p.batches_done,
                p.batches_total,
                doing(s)
            ));
        }
        Mode::Json => {
            let line = serde_json::json!({"progress": {
                "phase": s.phase.name(),
                "batches_done": p.batches_done, "batches_total": p.batches_total,
                "calls_done": p.calls_done, "calls_total": p.calls_total,
                "live_steps": p.live_steps, "live_budget": p.live_budget,
            }})
            .to_string();
            if r.last.as_deref() != Some(line.as_str()) {
                let _ = writeln!(std::io::stderr(), "{line}");
                r.last = Some(line);
            }
        }
    }
}

/// Remove the bar before the result is printed.
pub fn finish() {
    let mut g = REPORTER.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = g.as_mut() {
        if let Some(b) = r.bar.take() {
            b.finish_and_clear();
        }
    }
}
