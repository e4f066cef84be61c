//! The options of one QUIC endpoint.

use crate::channel::DatagramChannel;
use crate::clock::SimClock;
use crate::controllers::SharedFactory;
use crate::keylog::KeyLog;
use netsim::Seed;
use std::time::Duration;

/// How to set up a [`crate::QuicClient`] or [`crate::QuicServer`].
///
/// Every random source of the endpoint derives from `seed` and the
/// endpoint's own address, so two endpoints in one run draw different
/// streams and a run repeats exactly.
#[derive(Clone)]
pub struct QuicConfig {
    /// The scenario seed.
    pub seed: Seed,
    /// Builds each connection's congestion controller (default:
    /// noq-proto's CUBIC). Controllers are chosen by name one level up, in
    /// `cc::Controller`; this crate only takes the factory.
    pub controller: SharedFactory,
    /// Fix the UDP payload at this size and turn path-MTU discovery off
    /// (default: noq-proto's, 1200 bytes growing by discovery up to 1452).
    pub max_udp_payload: Option<u16>,
    /// Ask the peer to acknowledge less often (the QUIC ACK-frequency
    /// extension, draft 04; default: off, the peer's own ACK policy).
    pub ack_frequency: Option<AckFrequency>,
    /// Flow-control credit this endpoint grants its peer per stream and
    /// per connection, bytes (default: noq-proto's).
    pub receive_window: Option<u32>,
    /// Bytes this endpoint sends without acknowledgement at most (default:
    /// noq-proto's, 10 MB).
    pub send_window: Option<u64>,
    /// Keep the RTT of each packet acknowledged from the first time to
    /// before the second (default: only the minimum is kept).
    pub rtt_window: Option<(netsim::Time, netsim::Time)>,
    /// Sample each connection's time series at this interval (default: off).
    pub sample_interval: Option<Duration>,
    /// Log TLS secrets here (default: off).
    pub keylog: Option<KeyLog>,
    /// The map from virtual time to the `Instant`s the state machine (and
    /// its congestion controller) sees (default: a fresh one per endpoint).
    /// Share one with a controller that must convert times of its own,
    /// such as PACUBIC's quACK send times.
    pub clock: Option<SimClock>,
    /// Collect qlog traces here (default: off).
    #[cfg(feature = "qlog")]
    pub qlog: Option<crate::qlog::QlogSet>,
    /// The TLS application protocol (default: `pepkit`; MASQUE peers
    /// want `h3`).
    pub alpn: Option<Vec<u8>>,
    /// Log each connection's packets sent, acknowledged and lost for its
    /// application ([`crate::Session::take_packet_events`]; default off).
    pub packet_log: bool,
    /// Keep each RTT sample of the RTT window with its packet's send time
    /// ([`crate::RttLog::timed`]; default off).
    pub rtt_times: bool,
    /// QUIC DATAGRAM frames to and from something beside the endpoint
    /// (default: none; datagrams stay with the applications).
    pub datagram_channel: Option<DatagramChannel>,
    /// Loss-detection thresholds (default: noq-proto's, RFC 9002's 3
    /// packets and 9/8 RTT).
    pub loss_detection: Option<LossDetection>,
    /// The most bytes of outgoing datagrams noq-proto buffers (default:
    /// its 1 MiB). A small buffer keeps the queue with the application.
    pub datagram_send_buffer: Option<usize>,
    /// Log the connection IDs the endpoint issues here (default: off).
    pub cid_log: Option<crate::cid::CidLog>,
    /// Send a PING after this long without sending (default: never).
    pub keep_alive: Option<Duration>,
    /// The first byte of every connection ID the endpoint issues (default:
    /// the seed's): a server whose sockets are steered by connection ID
    /// (one worker each) marks its IDs with its worker's index.
    pub cid_first_byte: Option<u8>,
    /// Offer QUIC timestamps (draft-huitema-quic-ts's TIMESTAMP frame,
    /// noq-proto's `TransportConfig::enable_timestamps`; default off).
    /// When both endpoints offer them, each one's congestion controller
    /// hears the forward one-way delay of its packets
    /// (`Controller::on_one_way_delay`); a peer that does not (any other
    /// QUIC stack) leaves the connection without them.
    pub timestamps: bool,
}

/// When a packet is declared lost (RFC 9002 §6.1): after this many later
/// packets were acknowledged, or this many RTTs after it was sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossDetection {
    /// Packets acknowledged after it (RFC 9002: 3).
    pub packet_threshold: u32,
    /// The time threshold as a multiple of the RTT (RFC 9002: 9/8).
    pub time_threshold: f32,
}

impl Default for LossDetection {
    fn default() -> LossDetection {
        LossDetection {
            packet_threshold: 3,
            time_threshold: 9.0 / 8.0,
        }
    }
}

impl QuicConfig {
    /// Defaults: CUBIC, no sampling, no key log.
    pub fn new(seed: Seed) -> QuicConfig {
        QuicConfig {
            seed,
            controller: std::sync::Arc::new(noq_proto::congestion::CubicConfig::default()),
            max_udp_payload: None,
            ack_frequency: None,
            receive_window: None,
            send_window: None,
            rtt_window: None,
            sample_interval: None,
            keylog: None,
            clock: None,
            #[cfg(feature = "qlog")]
            qlog: None,
            alpn: None,
            packet_log: false,
            rtt_times: false,
            datagram_channel: None,
            loss_detection: None,
            datagram_send_buffer: None,
            cid_log: None,
            keep_alive: None,
            cid_first_byte: None,
            timestamps: false,
        }
    }

    /// Issue connection IDs whose first byte is `byte`
    /// ([`QuicConfig::cid_first_byte`]).
    pub fn with_cid_first_byte(mut self, byte: u8) -> QuicConfig {
        self.cid_first_byte = Some(byte);
        self
    }

    /// Offer QUIC timestamps ([`QuicConfig::timestamps`]).
    pub fn with_timestamps(mut self) -> QuicConfig {
        self.timestamps = true;
        self
    }

    /// Keep the connection alive with a PING after `interval` idle.
    pub fn with_keep_alive(mut self, interval: Duration) -> QuicConfig {
        self.keep_alive = Some(interval);
        self
    }

    /// Log every connection ID the endpoint issues in `log`.
    pub fn with_cid_log(mut self, log: crate::cid::CidLog) -> QuicConfig {
        self.cid_log = Some(log);
        self
    }

    /// Negotiate this TLS application protocol instead of `pepkit`.
    pub fn with_alpn(mut self, alpn: &[u8]) -> QuicConfig {
        self.alpn = Some(alpn.to_vec());
        self
    }

    /// Keep the send time of each packet whose RTT the RTT window keeps
    /// (for RTT statistics over intervals of send time).
    pub fn with_rtt_times(mut self) -> QuicConfig {
        self.rtt_times = true;
        self
    }

    /// Log every connection's packets for its application.
    pub fn with_packet_log(mut self) -> QuicConfig {
        self.packet_log = true;
        self
    }

    /// Send the datagrams queued on `channel` on the endpoint's connection
    /// and put every datagram received into it.
    pub fn with_datagram_channel(mut self, channel: DatagramChannel) -> QuicConfig {
        self.datagram_channel = Some(channel);
        self
    }

    /// Declare packets lost with these thresholds.
    pub fn with_loss_detection(mut self, loss: LossDetection) -> QuicConfig {
        self.loss_detection = Some(loss);
        self
    }

    /// Buffer at most `bytes` of outgoing datagrams in the state machine.
    pub fn with_datagram_send_buffer(mut self, bytes: usize) -> QuicConfig {
        self.datagram_send_buffer = Some(bytes);
        self
    }

    /// Build each connection's congestion controller with `factory`.
    pub fn with_controller(mut self, factory: SharedFactory) -> QuicConfig {
        self.controller = factory;
        self
    }

    /// Send UDP payloads of at most `bytes` (at least 1200, QUIC's minimum),
    /// without path-MTU discovery, as the Sidekick experiments' clients did.
    pub fn with_max_udp_payload(mut self, bytes: u16) -> QuicConfig {
        assert!(
            bytes >= 1200,
            "QUIC needs UDP payloads of at least 1200 bytes"
        );
        self.max_udp_payload = Some(bytes);
        self
    }

    /// Ask the peer to acknowledge only every `frequency.threshold + 1`
    /// ack-eliciting packets, or after `frequency.max_delay`.
    pub fn with_ack_frequency(mut self, frequency: AckFrequency) -> QuicConfig {
        self.ack_frequency = Some(frequency);
        self
    }

    /// Grant the peer `bytes` of flow-control credit per stream and per
    /// connection up front (the Sidekick clients set 1000 MiB, so flow
    /// control never bound).
    pub fn with_receive_window(mut self, bytes: u32) -> QuicConfig {
        self.receive_window = Some(bytes);
        self
    }

    /// Allow `bytes` unacknowledged in flight (noq-proto's send window).
    pub fn with_send_window(mut self, bytes: u64) -> QuicConfig {
        self.send_window = Some(bytes);
        self
    }

    /// Keep the RTTs of the packets acknowledged in `[from, until)` (in
    /// [`crate::ConnRecord::rtt`]).
    pub fn with_rtt_window(mut self, from: netsim::Time, until: netsim::Time) -> QuicConfig {
        self.rtt_window = Some((from, until));
        self
    }

    /// Sample each connection's time series every `interval`.
    pub fn with_sampling(mut self, interval: Duration) -> QuicConfig {
        assert!(!interval.is_zero(), "sampling interval must be positive");
        self.sample_interval = Some(interval);
        self
    }

    /// Collect each connection's qlog trace in `set`.
    #[cfg(feature = "qlog")]
    pub fn with_qlog(mut self, set: crate::qlog::QlogSet) -> QuicConfig {
        self.qlog = Some(set);
        self
    }

    /// Map virtual time to `Instant`s with `clock` (so a congestion
    /// controller holding the same clock can convert virtual times).
    pub fn with_clock(mut self, clock: SimClock) -> QuicConfig {
        self.clock = Some(clock);
        self
    }

    /// Log TLS secrets to `keylog`.
    pub fn with_keylog(mut self, keylog: KeyLog) -> QuicConfig {
        self.keylog = Some(keylog);
        self
    }
}

impl std::fmt::Debug for QuicConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicConfig")
            .field("seed", &self.seed)
            .field("max_udp_payload", &self.max_udp_payload)
            .field("ack_frequency", &self.ack_frequency)
            .field("receive_window", &self.receive_window)
            .field("send_window", &self.send_window)
            .field("rtt_window", &self.rtt_window)
            .field("sample_interval", &self.sample_interval)
            .field("alpn", &self.alpn)
            .field("packet_log", &self.packet_log)
            .field("rtt_times", &self.rtt_times)
            .field("loss_detection", &self.loss_detection)
            .field("timestamps", &self.timestamps)
            .finish_non_exhaustive()
    }
}

/// What an endpoint asks of its peer's acknowledgements (the ACK_FREQUENCY
/// frame of draft-ietf-quic-ack-frequency-04, as noq-proto implements it).
///
/// noq-proto clamps the requested delay to at most the larger of the path's
/// RTT and 25 ms, so on a 52 ms path the peer acknowledges at least every
/// 52 ms whatever `max_delay` says; the threshold is the knob that reaches
/// further.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckFrequency {
    /// Ack-eliciting packets the peer may receive without acknowledging
    /// (0: acknowledge each; noq-proto's default is 1, every other).
    pub threshold: u32,
    /// The longest the peer may delay an acknowledgement (default: the
    /// peer's own `max_ack_delay`, 25 ms).
    pub max_delay: Option<Duration>,
}
