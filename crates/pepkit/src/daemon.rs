//! What pepkit's daemons share: how they learn to stop (and to dump their
//! tables), and how they report at the end.

use std::fmt::Display;
use std::process::ExitCode;
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

/// The stop flag of [`stop_flag`], and a flag that SIGUSR1 sets: the
/// daemon then writes its table to its log.
pub(crate) fn stop_and_dump_flags() -> Result<(Arc<AtomicBool>, Arc<AtomicBool>), String> {
    let stop = stop_flag()?;
    let dump = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, Arc::clone(&dump))
        .map_err(|e| format!("installing a signal handler: {e}"))?;
    Ok((stop, dump))
}

/// Ends a daemon `name` that ran: its counters as one JSON line on stdout,
/// or its error on stderr.
pub(crate) fn report<S: serde::Serialize>(
    name: &str,
    outcome: Result<S, impl Display>,
) -> ExitCode {
    match outcome {
        Ok(stats) => {
            println!(
                "{}",
                serde_json::to_string(&stats).expect("counters serialise")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}
