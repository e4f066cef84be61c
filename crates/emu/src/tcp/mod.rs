//! Linux TCP: the baselines of the papers, on the kernel's TCP.
//!
//! * [`bulk`]: the bulk transfer protocol (a client and a server), the
//!   "TCP e2e" baseline.
//! * [`stream`]: a flow bounded by time (a sender and a counting sink),
//!   for competing flows on a testbed.
//! * [`congestion`]: a socket's congestion controller by name, which all
//!   use.
//!
//! They poll their blocking calls with socket timeouts; the two helpers
//! below say which errors only mean "look again".

pub mod bulk;
pub mod congestion;
pub mod stream;

use std::io::{self, ErrorKind};

/// Whether an error only means "the timeout fired".
pub fn is_timeout(error: &io::Error) -> bool {
    matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Errors after which accepting can go on.
pub fn is_transient_accept_error(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(
            libc::ECONNABORTED
                | libc::EMFILE
                | libc::ENFILE
                | libc::ENOBUFS
                | libc::ENOMEM
                | libc::EPROTO
                | libc::EPERM
        )
    ) || error.kind() == ErrorKind::ConnectionReset
}
