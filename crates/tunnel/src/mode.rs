//! How the tunnel carries the inner packets, and its settings.

use std::time::Duration;

/// The tunnel modes of TECC §2–3 and §5.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// MST: DATAGRAM capsules on the CONNECT stream (reliable and in
    /// order, so one loss holds back every packet behind it).
    Stream,
    /// MSGT: a group of this many streams (the CONNECT stream and more
    /// extended CONNECTs bound to it), packets spread over them in turn.
    StreamGroup(u16),
    /// MDT: HTTP datagrams in QUIC DATAGRAM frames (unreliable).
    Datagram,
    /// RMDT: MDT, and each end resends the datagrams its QUIC connection
    /// declares lost (mapped through the packets that carried them).
    RetransmittedDatagram,
    /// MFT: QUIC-aware forwarding (draft-ietf-masque-quic-proxy): long
    /// headers tunnelled in datagrams, short headers whose connection IDs
    /// are registered forwarded as plain UDP with virtual CIDs.
    Forwarding,
}

impl Mode {
    /// The paper's name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Stream => "MST",
            Mode::StreamGroup(_) => "MSGT",
            Mode::Datagram => "MDT",
            Mode::RetransmittedDatagram => "RMDT",
            Mode::Forwarding => "MFT",
        }
    }

    /// Whether packets travel as QUIC DATAGRAM frames.
    pub fn uses_datagrams(self) -> bool {
        matches!(
            self,
            Mode::Datagram | Mode::RetransmittedDatagram | Mode::Forwarding
        )
    }

    /// Whether lost datagrams are resent by the tunnel.
    pub fn retransmits(self) -> bool {
        self == Mode::RetransmittedDatagram
    }

    /// Streams a tunnel uses (1 for the stream mode).
    pub fn streams(self) -> u16 {
        match self {
            Mode::Stream => 1,
            Mode::StreamGroup(n) => n.max(1),
            _ => 0,
        }
    }
}

/// What both tunnel ends agree on (besides the outer QUIC configuration,
/// which carries the tunnel's congestion controller).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelSettings {
    /// The mode.
    pub mode: Mode,
    /// TECC: the tunnel server samples and feeds back; the tunnel client
    /// relays the feedback to the application server (QUIC_INFO).
    pub feedback: bool,
    /// The most bytes queued per tunnel and direction in the tunnel's own
    /// queue (drop-tail beyond).
    pub queue_limit: usize,
    /// How many times a datagram may be resent (RMDT).
    pub max_retransmissions: u8,
    /// Feedback settings (used with `feedback`).
    pub sampler: SamplerSettings,
    /// Record which datagrams were declared lost (for tests against the
    /// simulator's ground truth).
    pub record_losses: bool,
}

impl TunnelSettings {
    /// Settings for `mode`, without feedback.
    pub fn new(mode: Mode) -> TunnelSettings {
        TunnelSettings {
            mode,
            feedback: false,
            queue_limit: 4 << 20,
            max_retransmissions: 4,
            sampler: SamplerSettings::default(),
            record_losses: false,
        }
    }

    /// TECC: RMDT with the sampler's feedback.
    pub fn tecc() -> TunnelSettings {
        TunnelSettings {
            feedback: true,
            ..TunnelSettings::new(Mode::RetransmittedDatagram)
        }
    }
}

/// The tunnel server's network sampler (TECC §4.2.2, §4.2.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SamplerSettings {
    /// The feedback cycle before the tunnel's minimum RTT is known, and its
    /// floor (τ = max(T_t, this)).
    pub min_cycle: Duration,
    /// Multiple detection: the queue reported is the smallest of this many
    /// consecutive cycles' minima, so a queue seen in one cycle only is
    /// not reported.
    pub detections: u8,
    /// What the feedback reports as Tr(t), "the tunnel server's sending
    /// rate" (§4.2.2).
    pub rate: RateSource,
}

impl Default for SamplerSettings {
    fn default() -> SamplerSettings {
        SamplerSettings {
            min_cycle: Duration::from_millis(5),
            detections: 2,
            rate: RateSource::Pacing,
        }
    }
}

/// The two readings of TECC's Tr(t).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RateSource {
    /// The tunnel controller's pacing rate: what it would send at.
    #[default]
    Pacing,
    /// What actually left: datagram bytes the tunnel sent (retransmissions
    /// included) over the cycle just ended.
    Sent,
}

impl RateSource {
    /// Every reading.
    pub const ALL: [RateSource; 2] = [RateSource::Pacing, RateSource::Sent];

    /// The reading's name, as scenario files and `--tunnel-rate` write it.
    pub fn name(self) -> &'static str {
        match self {
            RateSource::Pacing => "pacing",
            RateSource::Sent => "sent",
        }
    }
}

impl std::fmt::Display for RateSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for RateSource {
    type Err = String;

    fn from_str(text: &str) -> Result<RateSource, String> {
        RateSource::ALL
            .into_iter()
            .find(|source| source.name() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = RateSource::ALL.iter().map(|s| s.name()).collect();
                format!("{text}: one of {}", names.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_sources_parse_from_their_names() {
        for source in RateSource::ALL {
            assert_eq!(source.name().parse::<RateSource>(), Ok(source));
        }
        assert_eq!(
            "bytes".parse::<RateSource>(),
            Err("bytes: one of pacing, sent".to_string())
        );
        assert_eq!(RateSource::default().to_string(), "pacing");
        assert!("Sent".parse::<RateSource>().is_err());
    }
}
