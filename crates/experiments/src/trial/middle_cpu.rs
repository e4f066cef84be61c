//! A middle node's engine on a CPU of its own, in real mode
//! ([`crate::RunOptions::middle_cpu`]): for measuring what a middlebox
//! costs (PEMI's Figure 13) without the endpoints, the link emulator and
//! their kernel work evicting its caches between packets on a shared core.
//! The trial's thread keeps off that CPU while the trial runs, so that
//! everything it starts (the relay, the hosts, peer processes) does too,
//! and the testbed runs the middle node's thread on it alone.

use emu::sys::{pin_thread, thread_cpus};

/// Checks that `cpu` can be given to a middle node: the process may run
/// on it and on at least one other CPU.
pub fn keep_middle_cpu(cpu: usize) -> Result<(), String> {
    let cpus = thread_cpus().map_err(|e| format!("reading the CPU affinity: {e}"))?;
    if !cpus.contains(&cpu) {
        return Err(format!(
            "--pin-middle {cpu}: this process may run on CPUs {} only",
            list(&cpus)
        ));
    }
    if cpus.len() < 2 {
        return Err(format!(
            "--pin-middle {cpu}: it is the only CPU this process may run on; \
             the rest of the trial needs another"
        ));
    }
    Ok(())
}

/// While alive, the calling thread runs on its CPUs but `cpu`; dropped,
/// on all of them again.
pub(super) struct KeptOff {
    before: Vec<usize>,
}

impl KeptOff {
    pub(super) fn cpu(cpu: usize) -> Result<KeptOff, String> {
        let before = thread_cpus().map_err(|e| format!("reading the CPU affinity: {e}"))?;
        let others: Vec<usize> = before.iter().copied().filter(|&c| c != cpu).collect();
        if others.is_empty() {
            return Err(format!("no CPU but {cpu} to run the rest of the trial on"));
        }
        pin_thread(&others).map_err(|e| format!("keeping off CPU {cpu}: {e}"))?;
        Ok(KeptOff { before })
    }
}

impl Drop for KeptOff {
    fn drop(&mut self) {
        // Best effort: the CPUs it had a moment ago.
        let _ = pin_thread(&self.before);
    }
}

fn list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trial_keeps_off_the_middles_cpu_and_gets_it_back() {
        std::thread::spawn(|| {
            let all = thread_cpus().expect("affinity");
            let last = *all.last().expect("a CPU");
            if all.len() < 2 {
                assert!(keep_middle_cpu(last).is_err());
                return;
            }
            keep_middle_cpu(last).expect("a CPU it may use");
            let error = keep_middle_cpu(not_allowed(&all)).expect_err("a CPU it may not use");
            assert!(error.contains("may run on CPUs"), "{error}");
            {
                let _kept = KeptOff::cpu(last).expect("kept off");
                let now = thread_cpus().expect("affinity");
                assert!(
                    !now.contains(&last) && now.len() == all.len() - 1,
                    "{now:?}"
                );
            }
            assert_eq!(thread_cpus().expect("affinity"), all);
        })
        .join()
        .expect("the thread");
    }

    /// A CPU number the process may not run on.
    fn not_allowed(all: &[usize]) -> usize {
        all.last().map_or(0, |last| last + 1)
    }
}
