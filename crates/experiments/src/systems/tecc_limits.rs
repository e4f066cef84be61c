//! The tunnel server's limits as a scenario and `pepkit middle tecc` write
//! them: the `limits` table of a `tecc` middle, each field one of
//! [`tunnel::ServerLimits`]'s, its default that type's.
//!
//! ```toml
//! middle = { kind = "tecc", mode = "mdt", limits = { max_connections = 64, total_bytes = "256MB" } }
//! ```
//!
//! `pepkit middle tecc --set limits.max_connections=64` sets one.

use super::settings::settings;
use crate::units::{Bytes, Span};
use tunnel::ServerLimits;

/// The defaults, [`ServerLimits`]'s.
fn default() -> ServerLimits {
    ServerLimits::default()
}

settings! {
    /// The tunnel server's limits as written (every one optional).
    pub(crate) struct TunnelLimits {
        /// Connections served at once, 1..=1000000; another client is
        /// refused until one closes.
        max_connections: u64 = default().max_connections as u64,
        /// Tunnels one connection may open, 1..=1024 (a target-facing
        /// port each).
        max_tunnels: u16 = default().max_tunnels,
        /// Request streams one connection may have waiting for their
        /// HEADERS, 1..=100000; one more closes it.
        max_pending: u64 = default().max_pending as u64,
        /// Bytes from a target held for one tunnel, 2kB..=connection_bytes.
        tunnel_bytes: Bytes = Bytes(default().tunnel_bytes as u64),
        /// Bytes held for one connection, tunnel_bytes..=total_bytes.
        connection_bytes: Bytes = Bytes(default().connection_bytes as u64),
        /// Bytes held for all connections, connection_bytes..=1000GB.
        total_bytes: Bytes = Bytes(default().total_bytes as u64),
        /// Stream data a connection keeps unacknowledged toward its client
        /// (the QUIC send window), 10kB..=1GB.
        send_window: Bytes = Bytes(default().send_window),
        /// Stream data a connection accepts from its client ahead of what
        /// the server read (the QUIC receive windows), 10kB..=1GB.
        receive_window: Bytes = Bytes(u64::from(default().receive_window)),
        /// Handshakes from unvalidated addresses under way beyond which a
        /// new client gets a Retry, 0..=1000000 (0: always).
        retry_threshold: u64 = default().handshakes.retry_threshold as u64,
        /// Time a handshake may take before it is given up, 100ms..=10min.
        handshake_timeout: Span = Span(default().handshakes.timeout),
    }
}

impl TunnelLimits {
    /// Whether no limit is set (each is its default).
    pub(crate) fn is_unset(&self) -> bool {
        *self == TunnelLimits::default()
    }

    /// Every limit set to its default (what `--help` shows).
    pub(crate) fn filled() -> TunnelLimits {
        let unset = TunnelLimits::default();
        TunnelLimits {
            max_connections: Some(unset.max_connections()),
            max_tunnels: Some(unset.max_tunnels()),
            max_pending: Some(unset.max_pending()),
            tunnel_bytes: Some(unset.tunnel_bytes()),
            connection_bytes: Some(unset.connection_bytes()),
            total_bytes: Some(unset.total_bytes()),
            send_window: Some(unset.send_window()),
            receive_window: Some(unset.receive_window()),
            retry_threshold: Some(unset.retry_threshold()),
            handshake_timeout: Some(unset.handshake_timeout()),
        }
    }

    /// The limits, or which one is out of its range and why.
    pub(crate) fn server_limits(&self) -> Result<ServerLimits, String> {
        let within = |name: &str, value: u64, low: u64, high: u64| {
            if (low..=high).contains(&value) {
                Ok(value)
            } else {
                Err(format!(
                    "`limits.{name}` is {value}: it must be {low}..={high}"
                ))
            }
        };
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let total = within(
            "total_bytes",
            self.total_bytes().0,
            2_000,
            1_000_000_000_000,
        )?;
        let at_most =
            |bound: &'static str| move |e: String| format!("{e} (at most `limits.{bound}`)");
        let connection = within("connection_bytes", self.connection_bytes().0, 2_000, total)
            .map_err(at_most("total_bytes"))?;
        let tunnel = within("tunnel_bytes", self.tunnel_bytes().0, 2_000, connection)
            .map_err(at_most("connection_bytes"))?;
        let window = |name, value: Bytes| within(name, value.0, 10_000, 1_000_000_000);
        let timeout = self.handshake_timeout().0;
        if !(std::time::Duration::from_millis(100)..=std::time::Duration::from_secs(600))
            .contains(&timeout)
        {
            return Err(format!(
                "`limits.handshake_timeout` is {timeout:?}: it must be 100ms..=10min"
            ));
        }
        let mut limits = default();
        limits.max_connections = size(within(
            "max_connections",
            self.max_connections(),
            1,
            1_000_000,
        )?);
        limits.max_tunnels = within("max_tunnels", u64::from(self.max_tunnels()), 1, 1024)? as u16;
        limits.max_pending = size(within("max_pending", self.max_pending(), 1, 100_000)?);
        limits.tunnel_bytes = size(tunnel);
        limits.connection_bytes = size(connection);
        limits.total_bytes = size(total);
        limits.send_window = window("send_window", self.send_window())?;
        limits.receive_window = window("receive_window", self.receive_window())? as u32;
        limits.handshakes.retry_threshold = size(within(
            "retry_threshold",
            self.retry_threshold(),
            0,
            1_000_000,
        )?);
        limits.handshakes.timeout = timeout;
        Ok(limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_limits_are_the_servers_defaults() {
        let limits = TunnelLimits::default();
        assert!(limits.is_unset());
        assert_eq!(limits.server_limits(), Ok(ServerLimits::default()));
        assert_eq!(
            TunnelLimits::filled().server_limits(),
            Ok(ServerLimits::default())
        );
    }

    #[test]
    fn each_limit_out_of_range_is_named() {
        let cases = [
            "max_connections = 0",
            "max_tunnels = 2000",
            "max_pending = 0",
            "tunnel_bytes = \"1kB\"",
            "connection_bytes = \"2000GB\"",
            "total_bytes = \"1kB\"",
            "send_window = \"1kB\"",
            "receive_window = \"2GB\"",
            "retry_threshold = 2000000",
            "handshake_timeout = \"10ms\"",
        ];
        for case in cases {
            let limits: TunnelLimits = toml::from_str(case).unwrap();
            let name = case.split(' ').next().unwrap();
            let error = limits.server_limits().unwrap_err();
            assert!(error.contains(&format!("limits.{name}")), "{case}: {error}");
        }
        let limits: TunnelLimits =
            toml::from_str("tunnel_bytes = \"4MB\"\nconnection_bytes = \"2MB\"").unwrap();
        assert!(limits.server_limits().unwrap_err().contains("tunnel_bytes"));
    }

    #[test]
    fn set_limits_reach_the_server() {
        let limits: TunnelLimits = toml::from_str(
            "max_connections = 8\nsend_window = \"1MB\"\nhandshake_timeout = \"2s\"",
        )
        .unwrap();
        let server = limits.server_limits().unwrap();
        assert_eq!(server.max_connections, 8);
        assert_eq!(server.send_window, 1_000_000);
        assert_eq!(server.handshakes.timeout, std::time::Duration::from_secs(2));
        assert_eq!(server.max_tunnels, ServerLimits::default().max_tunnels);
    }
}

#[cfg(test)]
mod help {
    use crate::systems::catalogue;

    #[test]
    fn the_help_shows_every_limits_default() {
        let tecc = catalogue().into_iter().find(|e| e.kind == "tecc").unwrap();
        let limits = tecc.settings.iter().find(|s| s.name == "limits").unwrap();
        let default = limits.default.clone().unwrap();
        for field in ["max_connections = 1024", "handshake_timeout = \"10s\""] {
            assert!(default.contains(field), "{default}");
        }
    }
}
