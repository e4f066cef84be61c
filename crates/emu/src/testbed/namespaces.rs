//! The testbed's network namespaces: whether this process can make them,
//! making one the way real mode wants its nodes, and sweeping those of
//! processes that died without removing theirs.

use crate::sys::command::{self, CommandError, in_netns, ip};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// Whether this process can build testbeds; `Err` says why not as a
/// predicate that completes a sentence about real mode ("needs root …",
/// "needs ethtool, which is not installed …"), so that callers write
/// "real mode {reason}" or "skipping real mode: it {reason}".
pub fn available() -> Result<(), String> {
    // Root: the effective uid (third field of Uid:) is 0.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0");
    if !root {
        return Err("needs root (network namespaces and AF_PACKET sockets)".into());
    }
    for program in ["ip", "ethtool", "sysctl", "timeout"] {
        if !command::have(program) {
            return Err(missing(program));
        }
    }
    // A name of its own per call: threads may probe at the same time.
    static PROBES: AtomicU32 = AtomicU32::new(0);
    let probe = format!(
        "pk-{}-probe{}",
        std::process::id(),
        PROBES.fetch_add(1, Ordering::Relaxed)
    );
    ip(&["netns", "add", &probe]).map_err(|e| format!("cannot create a network namespace: {e}"))?;
    let _ = ip(&["netns", "del", &probe]);
    Ok(())
}

/// Why real mode cannot run without `program`, as [`available`] says it.
fn missing(program: &str) -> String {
    format!("needs {program}, which is not installed (scripts/setup installs it)")
}

/// Creates network namespace `name` the way real mode wants its nodes, and
/// records it in `made` (for the caller's cleanup) as soon as it exists: no
/// IPv6 chatter (router solicitations, DAD), no reverse-path filtering (the
/// sidekick proxy answers from the receiver's address), forwarding on,
/// loopback up.
pub fn add_namespace(name: &str, made: &mut Vec<String>) -> Result<(), CommandError> {
    hold_lock();
    ip(&["netns", "add", name])?;
    made.push(name.to_string());
    in_netns(
        name,
        "sysctl",
        &[
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
            "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.default.rp_filter=0",
            "net.ipv4.ip_forward=1",
        ],
    )?;
    ip(&["-n", name, "link", "set", "lo", "up"])?;
    Ok(())
}

/// Where a process that makes namespaces keeps its lock: `pk-<pid>.lock`,
/// locked for as long as the process lives (the kernel releases it when the
/// process dies, however it dies), so a sweep can tell a dead run's
/// namespaces from a live one's even when the PID has been reused.
fn lock_dir() -> std::path::PathBuf {
    std::path::PathBuf::from("/run/pepkit")
}

/// Takes this process's lock before its first namespace (once; later calls
/// do nothing). Best effort: without it, sweeps fall back to the PID.
pub(crate) fn hold_lock() {
    static LOCK: OnceLock<Option<std::fs::File>> = OnceLock::new();
    LOCK.get_or_init(|| {
        std::fs::create_dir_all(lock_dir()).ok()?;
        let path = lock_dir().join(format!("pk-{}.lock", std::process::id()));
        let file = std::fs::File::create(path).ok()?;
        file.lock().ok()?;
        Some(file)
    });
}

/// Whether the process `pid` that made `pk-<pid>-…` namespaces is gone:
/// its lock is free (or, without a lock file, no process has its PID).
fn owner_gone(pid: u32) -> bool {
    let path = lock_dir().join(format!("pk-{pid}.lock"));
    match std::fs::File::open(&path) {
        Ok(file) => file.try_lock().is_ok(),
        Err(_) => !std::path::Path::new(&format!("/proc/{pid}")).exists(),
    }
}

/// What a sweep removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// The namespaces removed.
    pub namespaces: Vec<String>,
    /// Processes killed because they still ran inside one of them.
    pub processes: Vec<u32>,
}

/// Removes everything testbeds of dead processes left (after a crash or a
/// SIGKILL): kills the processes still running in their namespaces (a
/// namespace lives as long as a process in it does), then deletes the
/// namespaces, and with them their interfaces, routes and nftables tables.
pub fn sweep_stale() -> Swept {
    let mut swept = Swept::default();
    let Ok(list) = ip(&["netns", "list"]) else {
        return swept;
    };
    let mut owners = Vec::new();
    for line in list.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(pid) = name
            .strip_prefix("pk-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || !owner_gone(pid) {
            continue;
        }
        for straggler in namespace_pids(name) {
            if crate::sys::send_signal(straggler, libc::SIGKILL, false).is_ok() {
                swept.processes.push(straggler);
            }
        }
        if ip(&["netns", "del", name]).is_ok() {
            swept.namespaces.push(name.to_string());
            owners.push(pid);
        }
    }
    owners.dedup();
    for pid in owners {
        let _ = std::fs::remove_file(lock_dir().join(format!("pk-{pid}.lock")));
    }
    remove_dead_locks();
    swept
}

/// Removes the lock files of dead processes that no namespace names: a run
/// killed between two trials has torn its last testbed down but not yet
/// released its lock file. A file is removed only when its lock is free and
/// no process has its PID, so a run that has just created its file and not
/// yet locked it keeps it.
fn remove_dead_locks() {
    let Ok(entries) = std::fs::read_dir(lock_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix("pk-")?.strip_suffix(".lock"))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let dead = !std::path::Path::new(&format!("/proc/{pid}")).exists();
        if dead && owner_gone(pid) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The processes running in namespace `name`.
fn namespace_pids(name: &str) -> Vec<u32> {
    ip(&["netns", "pids", name])
        .map(|out| {
            out.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod reason_tests {
    #[test]
    fn a_missing_program_reads_as_a_sentence_after_either_subject() {
        let reason = super::missing("ethtool");
        assert_eq!(
            format!("skipping real mode: it {reason}"),
            "skipping real mode: it needs ethtool, which is not installed (scripts/setup \
             installs it)"
        );
        assert!(format!("real mode {reason}").starts_with("real mode needs ethtool, which"));
    }
}
