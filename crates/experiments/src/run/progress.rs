//! Progress of a run on standard error: a redrawn bar on a terminal, a
//! line every tenth of the run otherwise (logs, CI).

use crate::outcome::TrialResult;
use std::io::{IsTerminal, Write};
use std::time::Instant;

/// Reports trials as they finish.
pub struct Progress {
    enabled: bool,
    terminal: bool,
    total: usize,
    done: usize,
    incomplete: usize,
    interrupted: usize,
    started: Instant,
    last_printed_tenth: usize,
}

impl Progress {
    /// Progress on standard error (bar or lines as it is a terminal or not).
    pub fn stderr() -> Progress {
        Progress::new(true, std::io::stderr().is_terminal())
    }

    /// No output (tests, libraries).
    pub fn silent() -> Progress {
        Progress::new(false, false)
    }

    fn new(enabled: bool, terminal: bool) -> Progress {
        Progress {
            enabled,
            terminal,
            total: 0,
            done: 0,
            incomplete: 0,
            interrupted: 0,
            started: Instant::now(),
            last_printed_tenth: 0,
        }
    }

    pub(crate) fn start(&mut self, total: usize, jobs: usize) {
        self.total = total;
        self.started = Instant::now();
        if self.enabled {
            eprintln!("running {total} trials on {jobs} threads");
        }
    }

    pub(crate) fn trial_done(&mut self, result: &TrialResult) {
        self.done += 1;
        if result.interrupted_run() {
            self.interrupted += 1;
        } else {
            self.incomplete += usize::from(!result.completed);
        }
        if !self.enabled {
            return;
        }
        let elapsed = self.started.elapsed().as_secs_f64();
        let left = elapsed / self.done as f64 * (self.total - self.done) as f64;
        let mut incomplete = match self.incomplete {
            0 => String::new(),
            n => format!(" · {n} unfinished"),
        };
        if self.interrupted > 0 {
            incomplete += &format!(" · {} not run (interrupted)", self.interrupted);
        }
        let status = format!(
            "{}/{} trials · {elapsed:.1} s · ~{left:.0} s left{incomplete} · last: {} #{}",
            self.done, self.total, result.variant, result.trial
        );
        if self.terminal {
            const WIDTH: usize = 24;
            let filled = WIDTH * self.done / self.total.max(1);
            let bar = format!("{}{}", "=".repeat(filled), " ".repeat(WIDTH - filled));
            eprint!("\r\x1b[2K[{bar}] {status}");
            let _ = std::io::stderr().flush();
        } else {
            let tenth = 10 * self.done / self.total.max(1);
            if tenth > self.last_printed_tenth || self.done == self.total {
                self.last_printed_tenth = tenth;
                eprintln!("{status}");
            }
        }
    }

    pub(crate) fn finish(&mut self) {
        if self.enabled && self.terminal {
            eprintln!();
        }
        if self.enabled {
            eprintln!(
                "{} trials in {:.1} s",
                self.done,
                self.started.elapsed().as_secs_f64()
            );
        }
    }
}
