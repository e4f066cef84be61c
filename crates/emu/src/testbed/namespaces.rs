//! The testbed's network namespaces: whether this process can make them,
//! making one the way real mode wants its nodes, and sweeping those of
//! processes that died without removing theirs.

use crate::sys::command::{self, CommandError, in_netns, ip};
use std::sync::atomic::{AtomicU32, Ordering};

/// Whether this process can build testbeds; `Err` says why not, in words
/// a skipped test can print.
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
            return Err(format!(
                "{program} is not installed (scripts/setup installs it)"
            ));
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

/// Creates network namespace `name` the way real mode wants its nodes, and
/// records it in `made` (for the caller's cleanup) as soon as it exists: no
/// IPv6 chatter (router solicitations, DAD), no reverse-path filtering (the
/// sidekick proxy answers from the receiver's address), forwarding on,
/// loopback up.
pub(crate) fn add_namespace(name: &str, made: &mut Vec<String>) -> Result<(), CommandError> {
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

/// Removes the namespaces of testbeds whose process is gone (after a
/// crash or SIGKILL). Returns the names removed.
pub fn sweep_stale() -> Vec<String> {
    let Ok(list) = ip(&["netns", "list"]) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
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
        if !std::path::Path::new(&format!("/proc/{pid}")).exists()
            && ip(&["netns", "del", name]).is_ok()
        {
            removed.push(name.to_string());
        }
    }
    removed
}
