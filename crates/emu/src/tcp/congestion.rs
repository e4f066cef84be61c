//! A TCP socket's congestion controller, chosen by name
//! (`setsockopt(TCP_CONGESTION)`: `"cubic"`, `"bbr"`, `"reno"`, …), with
//! errors that list what the kernel offers.

use socket2::SockRef;
use std::io;

/// The file listing the congestion controllers the kernel has loaded.
const AVAILABLE_CONTROLLERS: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
/// The file listing the controllers unprivileged sockets may choose.
const ALLOWED_CONTROLLERS: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// Setting a socket's congestion controller failed.
#[derive(Debug, thiserror::Error)]
pub enum CongestionError {
    /// The kernel does not know the controller (`ENOENT`, `EINVAL`).
    #[error(
        "congestion controller {name} is not available; \
         /proc/sys/net/ipv4/tcp_available_congestion_control lists: {available}"
    )]
    Unavailable {
        /// The controller asked for.
        name: String,
        /// The controllers the kernel lists, space-separated.
        available: String,
    },
    /// The controller exists but this process may not choose it (`EPERM`).
    #[error(
        "congestion controller {name} is not allowed for this process; \
         /proc/sys/net/ipv4/tcp_allowed_congestion_control lists: {allowed}"
    )]
    NotAllowed {
        /// The controller asked for.
        name: String,
        /// The controllers unprivileged sockets may choose, space-separated.
        allowed: String,
    },
    /// Any other failure of `setsockopt(TCP_CONGESTION)`.
    #[error("setting congestion controller {name} failed: {source}")]
    Other {
        /// The controller asked for.
        name: String,
        /// The system error.
        source: io::Error,
    },
}

/// The congestion controllers the kernel has loaded
/// (`/proc/sys/net/ipv4/tcp_available_congestion_control`).
pub fn available_congestion_controls() -> Vec<String> {
    read_list(AVAILABLE_CONTROLLERS)
}

/// A space-separated list from a procfs file, empty if it cannot be read.
fn read_list(path: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|text| text.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// A list for an error message.
fn describe_list(path: &str) -> String {
    let list = read_list(path);
    if list.is_empty() {
        format!("(could not read {path})")
    } else {
        list.join(" ")
    }
}

/// Sets a TCP socket's congestion controller (`TCP_CONGESTION`) by name.
pub fn set_congestion(socket: SockRef<'_>, name: &str) -> Result<(), CongestionError> {
    socket
        .set_tcp_congestion(name.as_bytes())
        .map_err(|source| match source.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::EINVAL) => CongestionError::Unavailable {
                name: name.to_owned(),
                available: describe_list(AVAILABLE_CONTROLLERS),
            },
            Some(libc::EPERM) => CongestionError::NotAllowed {
                name: name.to_owned(),
                allowed: describe_list(ALLOWED_CONTROLLERS),
            },
            _ => CongestionError::Other {
                name: name.to_owned(),
                source,
            },
        })
}

/// The congestion controller a TCP socket uses, read back with
/// `getsockopt(TCP_CONGESTION)`.
pub fn congestion_in_use(socket: SockRef<'_>) -> io::Result<String> {
    let name = socket.tcp_congestion()?;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}
