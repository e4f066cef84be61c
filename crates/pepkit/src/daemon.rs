//! What pepkit's daemons share: how they learn to stop.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// A flag that SIGTERM and SIGINT set. Every signal only sets it (there is
/// no "second signal exits"): `timeout`, which testbeds run daemons under,
/// passes one SIGTERM on twice, to its child and to its process group.
pub(crate) fn stop_flag() -> Result<Arc<AtomicBool>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| format!("installing a signal handler: {e}"))?;
    }
    Ok(stop)
}
