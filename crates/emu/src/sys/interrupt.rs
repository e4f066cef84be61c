//! Ctrl-C and SIGTERM for real-mode runs: the first one asks every loop to
//! stop (so testbeds are torn down by their `Drop`), a second one exits at
//! once.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

fn flag() -> &'static Arc<AtomicBool> {
    FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

/// Installs the handlers for SIGINT and SIGTERM (once; later calls do
/// nothing). Without them a signal ends the process before it can remove
/// its namespaces.
pub fn install() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // A second signal while the first is being handled exits (130).
            let _ = signal_hook::flag::register_conditional_shutdown(signal, 130, flag().clone());
            let _ = signal_hook::flag::register(signal, flag().clone());
        }
    });
}

/// Whether a stop was asked for.
pub fn requested() -> bool {
    flag().load(Ordering::Relaxed)
}

/// Asks every loop to stop, as the first signal does (for a caller that
/// stops a run itself, and for tests).
pub fn request() {
    flag().store(true, Ordering::Relaxed);
}
