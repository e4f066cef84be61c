//! PEMI's parameters: the values of the paper's §6 as defaults, and the
//! bounds this implementation adds.

use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::time::Duration;

/// How PEMI slows a sender that exceeds its target rate once it has
/// stopped retransmitting (§4.5.2: "reorder or delay the reply packets").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    /// Never touch replies: only stop retransmitting.
    Off,
    /// Hold every reply for a delay, starting at an eighth of the
    /// end-to-end RTT (RFC 9002's time threshold is 9/8 of an RTT).
    #[default]
    Delay,
    /// Hold one reply back until this many later replies have passed,
    /// starting at 3 (RFC 9002's packet threshold).
    Reorder,
    /// Both at once.
    Both,
}

/// The engine's settings. [`PemiConfig::default`] is the paper's §6
/// configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct PemiConfig {
    /// α: the flowlet timeout is α · sINV (§4.2.1; 2).
    pub alpha: u32,
    /// β, in hundredths: Δmargin = β · F_timeout (§4.2.2; 0.5 → 50).
    pub beta_percent: u32,
    /// Packets within this of each other may be acknowledged by one reply
    /// and are never inferred lost one by one (§4.3.1; 0.1 ms).
    pub close_interval: Duration,
    /// N: a flowlet of more packets is not protected (§4.6; 100).
    pub max_flowlet: usize,
    /// Retransmit only while retransmissions are at most this share of the
    /// forwarded packets, in percent (§4.6, §8; 10).
    pub retransmit_cap_percent: u64,
    /// Above this reply/sent ratio the receiver acknowledges every packet
    /// (eliciting threshold 1), else every second (appendix A; 60%).
    pub threshold_ratio_percent: u64,
    /// The reply/sent ratio is the whole connection's, as in the paper,
    /// but counted from the end of its first window of this many protected
    /// packets (the threshold is 2 until then): the handshake's and slow
    /// start's extra replies would otherwise decide for too long
    /// (docs/pemi.md).
    pub threshold_window: u64,
    /// The fresh-RTT rule's width ratio, in percent (§4.2.3; 0.8 → 80).
    pub width_ratio_percent: u64,
    /// A trailing unreplied run shorter than the eliciting threshold is
    /// forgiven when the receiver sent anything within this much of the
    /// expected reply (the receiver's ACK timer, RFC 9000's default
    /// `max_ack_delay` of 25 ms); `None`: the paper's rule alone (only runs
    /// followed by a matched reply are forgiven). See docs/pemi.md.
    pub tail_grace: Option<Duration>,
    /// Back off to forwarding while PEMI's own estimate of its precision,
    /// from whether the receiver answers its copies, is low (beyond the
    /// paper: never do harm; `selfcheck.rs`, docs/pemi.md).
    pub self_check: bool,
    /// Connections idle this long are forgotten (appendix A, RFC 9312:
    /// 120 s).
    pub idle_timeout: Duration,
    /// A handshake not completed within this is forgotten.
    pub handshake_timeout: Duration,
    /// The most connections tracked; new ones beyond are forwarded
    /// untracked.
    pub max_connections: usize,
    /// The most connections in their handshake; a new Initial beyond it
    /// evicts the oldest (a flood of spoofed Initials cannot crowd out
    /// completed connections, nor grow the table).
    pub max_handshakes: usize,
    /// Bytes of unfinished flowlets buffered per connection for
    /// retransmission.
    pub buffer_per_connection: usize,
    /// Bytes buffered across all connections.
    pub buffer_total: usize,
    /// Flowlets kept per connection before the oldest is given up.
    pub max_flowlets: usize,
    /// PEMI's own address for ICMP echo probes to the protected endpoint
    /// (`None`: no ICMP calibration).
    pub probe_addr: Option<IpAddr>,
    /// The ICMP identifier of the probes.
    pub probe_id: u16,
    /// Calibrate from the spin bit where a connection spins.
    pub spin_calibration: bool,
    /// Run the Copa-derived controller and enforce its rate (§4.5).
    pub congestion_control: bool,
    /// How the rate is enforced on a sender that does not slow down.
    pub enforcement: Enforcement,
    /// Copa's δ, in hundredths (0.5 → 50).
    pub copa_delta_percent: u64,
    /// The controller's initial window, in packets.
    pub initial_cwnd: u64,
    /// The window over which RTT_min is the minimum (Copa: 10 s).
    pub min_rtt_window: Duration,
    /// Keep a log of inferences and RTT estimates for ground-truth
    /// accounting (the simulator's accuracy report); off in a daemon.
    pub record: bool,
}

impl Default for PemiConfig {
    fn default() -> Self {
        PemiConfig {
            alpha: 2,
            beta_percent: 50,
            close_interval: Duration::from_micros(100),
            max_flowlet: 100,
            retransmit_cap_percent: 10,
            threshold_ratio_percent: 60,
            threshold_window: 64,
            width_ratio_percent: 80,
            tail_grace: Some(Duration::from_millis(25)),
            self_check: true,
            idle_timeout: Duration::from_secs(120),
            handshake_timeout: Duration::from_secs(10),
            max_connections: 65_536,
            max_handshakes: 16_384,
            buffer_per_connection: 1 << 20,
            buffer_total: 64 << 20,
            max_flowlets: 64,
            probe_addr: None,
            probe_id: 0x5045,
            spin_calibration: true,
            congestion_control: true,
            enforcement: Enforcement::Delay,
            copa_delta_percent: 50,
            initial_cwnd: 10,
            min_rtt_window: Duration::from_secs(10),
            record: false,
        }
    }
}

impl PemiConfig {
    /// Δmargin for a flowlet timeout.
    pub(crate) fn margin(&self, flowlet_timeout: Duration) -> Duration {
        flowlet_timeout * self.beta_percent / 100
    }
}
