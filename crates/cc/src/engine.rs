//! The sans-IO form of a congestion controller: inputs with their times,
//! the window and pacing rate as outputs. The controllers of this crate
//! that are new with Proteus (PCC, Copa, LEDBAT, BBR) are written against
//! [`CongestionEngine`] and reach noq-proto through [`Engine`], which
//! unpacks its callbacks (noq-proto's `RttEstimator` cannot be built
//! outside noq-proto, so tests, property tests and benchmarks drive the
//! engines directly).

use quic::congestion::{Controller, ControllerMetrics, RttEstimator};
use std::any::Any;
use std::fmt::Debug;
use std::time::{Duration, Instant};

/// A congestion controller as a state machine.
pub trait CongestionEngine: Clone + Debug + Send + Sync + 'static {
    /// An ack-eliciting packet of `bytes` with number `pn` left at `now`.
    fn handle_sent(&mut self, now: Instant, bytes: u16, pn: u64);
    /// Packet `pn` of `bytes`, sent at `sent`, was acknowledged at `now`;
    /// the connection's smoothed RTT is `smoothed`.
    fn handle_ack(&mut self, now: Instant, sent: Instant, bytes: u64, pn: u64, smoothed: Duration);
    /// The forward one-way delay of the packet an ACK newly acknowledged
    /// as the largest, µs plus the constant offset between the two
    /// endpoints' clocks (so possibly negative), from the peer's QUIC
    /// timestamp; heard only on connections that negotiated timestamps
    /// (`quic::QuicConfig::with_timestamps`), before the batch ends.
    fn handle_one_way_delay(&mut self, _now: Instant, _delay_micros: i64) {}
    /// A batch of ACKs ended at `now`, leaving `in_flight` bytes in
    /// flight; the connection was `app_limited` before it.
    fn handle_end_acks(&mut self, now: Instant, in_flight: u64, app_limited: bool);
    /// Packet `pn` of `bytes` was declared lost at `now`.
    fn handle_lost(&mut self, now: Instant, bytes: u16, pn: u64);
    /// A congestion event at `now` whose newest lost packet was sent at
    /// `sent`.
    fn handle_congestion(&mut self, now: Instant, sent: Instant, persistent: bool);
    /// The window held back a packet the pacer would have sent.
    fn handle_cwnd_limited(&mut self) {}
    /// The path's MTU changed.
    fn handle_mtu(&mut self, mtu: u16);
    /// The window, bytes.
    fn poll_window(&self) -> u64;
    /// The pacing rate, bytes/s (`None`: noq-proto paces the window).
    fn poll_pacing_rate(&self) -> Option<u64>;
}

/// A [`CongestionEngine`] as noq-proto's controller.
#[derive(Clone, Debug)]
pub struct Engine<E>(pub E);

impl<E: CongestionEngine> Controller for Engine<E> {
    fn on_packet_sent(&mut self, now: Instant, bytes: u16, pn: u64) {
        self.0.handle_sent(now, bytes, pn);
    }

    fn on_cwnd_limited(&mut self) {
        self.0.handle_cwnd_limited();
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        pn: u64,
        _app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.0.handle_ack(now, sent, bytes, pn, rtt.get());
    }

    fn on_one_way_delay(&mut self, now: Instant, delay_micros: i64) {
        self.0.handle_one_way_delay(now, delay_micros);
    }

    fn on_end_acks(&mut self, now: Instant, in_flight: u64, app_limited: bool, _: Option<u64>) {
        self.0.handle_end_acks(now, in_flight, app_limited);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        persistent: bool,
        _is_ecn: bool,
        _lost_bytes: u64,
        _largest_lost_pn: u64,
    ) {
        self.0.handle_congestion(now, sent, persistent);
    }

    fn on_packet_lost(&mut self, lost_bytes: u16, pn: u64, now: Instant) {
        self.0.handle_lost(now, lost_bytes, pn);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.0.handle_mtu(new_mtu);
    }

    fn window(&self) -> u64 {
        self.0.poll_window().max(1)
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut metrics = ControllerMetrics::default();
        metrics.congestion_window = self.window();
        metrics.pacing_rate = self.0.poll_pacing_rate().map(|rate| rate.max(1));
        metrics
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        self.window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        Box::new(self.0)
    }
}
