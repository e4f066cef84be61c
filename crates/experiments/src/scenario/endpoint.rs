//! An endpoint's fields (`[client]`, `[server]`), read: its address, its
//! controller and what the controller is given, what it asks of its
//! peer's ACKs and its loss detection.

use super::error::fail;
use super::raw::{AckFrequencySpec, LossDetectionSpec, RawEndpoint, RawScenario};
use crate::systems::Problem;
use crate::workloads::{Side, Workload};
use std::net::{IpAddr, SocketAddr};

/// The client's port unless given; the server's is [`SERVER_PORT`].
pub(super) const CLIENT_PORT: u16 = 5000;
/// The server's port unless given.
pub(super) const SERVER_PORT: u16 = 4433;

/// An endpoint's socket address.
pub(super) fn endpoint_addr(endpoint: &RawEndpoint, default_port: u16) -> SocketAddr {
    SocketAddr::new(endpoint.addr(), endpoint.port.unwrap_or(default_port))
}

/// An endpoint's QUIC controller (default CUBIC).
pub(super) fn quic_controller(
    endpoint: &RawEndpoint,
    who: &str,
) -> Result<cc::Controller, Problem> {
    let Some(value) = endpoint.controller.clone() else {
        return Ok(cc::Controller::default());
    };
    crate::shorthand::tagged(value).map_err(|error: toml::de::Error| {
        (
            format!("{who}.controller"),
            super::error::first_line(&error.to_string()).to_string(),
        )
    })
}

/// An endpoint's ACK-frequency request.
pub(super) fn ack_frequency(spec: Option<AckFrequencySpec>) -> Option<quic::AckFrequency> {
    spec.map(|spec| quic::AckFrequency {
        threshold: spec.threshold,
        max_delay: spec.max_delay.map(|span| span.0),
    })
}

/// An endpoint's loss thresholds, if it sets them (RFC 9002's otherwise),
/// for `controller`, which may not set its own as well.
pub(super) fn loss_detection(
    endpoint: &RawEndpoint,
    who: &str,
    controller: &cc::Controller,
) -> Result<Option<quic::LossDetection>, Problem> {
    let Some(LossDetectionSpec {
        packet_threshold,
        time_threshold,
    }) = endpoint.loss_detection
    else {
        return Ok(None);
    };
    let field = |inner: &str| format!("{who}.loss_detection{inner}");
    if controller.sets_loss_detection() {
        return Err((
            field(""),
            format!(
                "the {} controller sets its own loss detection (its settings)",
                controller.name()
            ),
        ));
    }
    let rfc = quic::LossDetection::default();
    let packet_threshold = packet_threshold.unwrap_or(rfc.packet_threshold);
    if packet_threshold == 0 {
        return Err((
            field(".packet_threshold"),
            "at least 1 (RFC 9002 recommends 3)".into(),
        ));
    }
    let time_threshold = time_threshold.unwrap_or(f64::from(rfc.time_threshold));
    // Under one RTT a packet would be declared lost before its ACK could
    // arrive.
    if !(1.0..=100.0).contains(&time_threshold) {
        return Err((
            field(".time_threshold"),
            format!("{time_threshold} is not between 1 and 100 RTTs (RFC 9002 recommends 9/8)"),
        ));
    }
    Ok(Some(quic::LossDetection {
        packet_threshold,
        time_threshold: time_threshold as f32,
    }))
}

/// `addr` plus `offset`, if that stays in the address family.
pub(super) fn offset_addr(addr: IpAddr, offset: u128) -> Option<IpAddr> {
    match addr {
        IpAddr::V4(v4) => u32::try_from(offset)
            .ok()
            .and_then(|offset| u32::from(v4).checked_add(offset))
            .map(|n| IpAddr::V4(n.into())),
        IpAddr::V6(v6) => u128::from(v6)
            .checked_add(offset)
            .map(|n| IpAddr::V6(n.into())),
    }
}

impl RawScenario {
    /// What the client's and the server's controllers are given: what the
    /// workload's application drives for its data sender, and what the
    /// middle system provides to the data senders of the flows it serves.
    pub(super) fn inputs(
        &self,
        workload: &Workload,
        served: bool,
    ) -> (Vec<cc::Input>, Vec<cc::Input>) {
        let kind = workload.kind();
        let sender = kind.traits().data_sender;
        let mut client = Vec::new();
        let mut server = Vec::new();
        if let Some(input) = kind.provides() {
            match sender {
                Side::Client => client.push(input),
                Side::Server => server.push(input),
            }
        }
        if served && let Some(input) = self.middle.system().provides() {
            match sender {
                Side::Client => client.push(input),
                Side::Server => server.push(input),
            }
        }
        (client, server)
    }

    /// Refuses a controller that reads something its endpoint (`field`,
    /// the `side` end) will not have, given what is provided to the
    /// client and to the server (`inputs`). When the other end would
    /// have it, the direction is the cause, and the message says so: what
    /// a middle system provides goes to the data sender.
    pub(super) fn check_requires(
        &self,
        controller: &cc::Controller,
        field: &str,
        side: Side,
        (client, server): (&[cc::Input], &[cc::Input]),
    ) -> Result<(), Problem> {
        let Some((input, why)) = controller.requires() else {
            return Ok(());
        };
        let (provided, other) = match side {
            Side::Client => (client, server),
            Side::Server => (server, client),
        };
        if provided.contains(&input) {
            Ok(())
        } else if other.contains(&input) {
            fail(field, format!("{why}; {}", wrong_direction(side)))
        } else {
            fail(field, why)
        }
    }
}

/// Why the `side` end's controller lacks what the other end's gets: the
/// other end sends the data, and what is provided goes to the data
/// sender.
fn wrong_direction(side: Side) -> &'static str {
    match side {
        Side::Server => {
            "the direction is the cause: here the client sends the data (client → server, \
             an upload), and what the middle system provides goes to the data sender; the \
             server's controller gets it in a download (the server → client direction)"
        }
        Side::Client => {
            "the direction is the cause: here the server sends the data (server → client, \
             a download), and what the middle system provides goes to the data sender; the \
             client's controller gets it in an upload (the client → server direction)"
        }
    }
}
