//! A one-line progress display on stderr, only when stderr is a terminal. Derived from the
//! folded state like everything else.

use std::io::{IsTerminal, Write};

use super::decide::Step;
use crate::fold::ReplayState;

pub struct Progress {
    on: bool,
    shown: bool,
}

impl Progress {
    pub fn new() -> Self {
        Progress {
            on: std::io::stderr().is_terminal() && std::env::var_os("PVISOR_NO_PROGRESS").is_none(),
            shown: false,
        }
    }
    pub fn show(&mut self, s: &ReplayState, step: Step) {
        if !self.on {
            return;
        }
        let p = s.progress();
        let what = match step {
            Step::RunCall(k, i) => format!("batch {k} call {}", i + 1),
            Step::Continue => format!("continuing: {} live steps", p.live_steps),
            other => format!("{other:?}").to_lowercase(),
        };
        let _ = write!(
            std::io::stderr(),
            "\r\x1b[2K[pvisor] {} | batches {}/{} calls {}/{} | {what}",
            s.phase.name(),
            p.batches_done,
            p.batches_total,
            p.calls_done,
            p.calls_total
        );
        self.shown = true;
    }
    pub fn clear(&mut self) {
        if self.shown {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
            self.shown = false;
        }
    }
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}
