//! A transparent wrapper around a connection's congestion controller that
//! tracks bytes in flight from the controller callbacks, because
//! noq-proto's public API does not expose them, records the RTT of every
//! acknowledged packet (the time from its sending to the callback), and,
//! on request, logs every packet sent, acknowledged and declared lost (by
//! packet number), which noq-proto reports only to the controller.

use crate::controllers::SharedFactory;
use crate::metrics::RttLog;
use noq_proto::RttEstimator;
use noq_proto::congestion::{Controller, ControllerFactory, ControllerMetrics};
use std::any::Any;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes in flight as the controller sees them: set exactly after each
/// batch of ACKs (`on_end_acks`), raised by every packet sent and lowered by
/// every packet declared lost in between; and, if asked, the connection's
/// [`PacketLog`].
#[derive(Clone, Debug, Default)]
pub(crate) struct InFlightGauge {
    bytes: Arc<AtomicU64>,
    rtt: RttLog,
    packets: Option<PacketLog>,
}

impl InFlightGauge {
    /// A gauge that also logs every packet's fate.
    pub(crate) fn logging() -> InFlightGauge {
        InFlightGauge {
            packets: Some(PacketLog::default()),
            ..InFlightGauge::default()
        }
    }
    /// The connection's RTT samples.
    pub(crate) fn rtt(&self) -> &RttLog {
        &self.rtt
    }
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
    pub(crate) fn packets(&self) -> Option<&PacketLog> {
        self.packets.as_ref()
    }
    fn set(&self, bytes: u64) {
        self.bytes.store(bytes, Ordering::Relaxed);
    }
    fn add(&self, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
    fn sub(&self, bytes: u64) {
        let _ = self
            .bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_sub(bytes))
            });
    }
}

/// What happened to one packet, as the congestion controller heard it.
/// Packet numbers are those of the packet-number space of the packet
/// (1-RTT packets, which carry application data and datagrams, once the
/// handshake is over).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketEvent {
    /// An ack-eliciting packet was sent.
    Sent {
        /// Its packet number.
        pn: u64,
        /// Its size, bytes.
        bytes: u16,
    },
    /// It was acknowledged.
    Acked {
        /// Its packet number.
        pn: u64,
    },
    /// It was declared lost.
    Lost {
        /// Its packet number.
        pn: u64,
    },
}

/// The per-packet events of one connection, in the order the controller
/// saw them, with the connection's minimum RTT. Shared between the
/// controller wrapper (which writes) and the connection's application
/// (which reads, through [`crate::Session::take_packet_events`]); nothing
/// else touches it, so the lock is never contended.
#[derive(Clone, Debug, Default)]
pub(crate) struct PacketLog(Arc<Mutex<LogState>>);

#[derive(Debug, Default)]
struct LogState {
    events: VecDeque<PacketEvent>,
    min_rtt: Option<Duration>,
}

impl PacketLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        // Single-threaded use: a poisoned lock means a panic already happened.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn push(&self, event: PacketEvent) {
        self.lock().events.push_back(event);
    }
    fn note_rtt(&self, rtt: &RttEstimator) {
        self.lock().min_rtt = Some(rtt.min());
    }
    /// Moves every event logged so far into `out`.
    pub(crate) fn drain_into(&self, out: &mut Vec<PacketEvent>) {
        out.extend(self.lock().events.drain(..));
    }
    /// The connection's minimum RTT, once a packet was acknowledged.
    pub(crate) fn min_rtt(&self) -> Option<Duration> {
        self.lock().min_rtt
    }
}

/// Builds the inner factory's controller wrapped in a [`Probed`].
pub(crate) struct ProbedFactory {
    inner: SharedFactory,
    gauge: InFlightGauge,
    /// Keep the RTT samples of packets acknowledged in [from, until).
    window: Option<(Instant, Instant)>,
}

impl ProbedFactory {
    pub(crate) fn new(
        inner: SharedFactory,
        gauge: InFlightGauge,
        window: Option<(Instant, Instant)>,
    ) -> ProbedFactory {
        ProbedFactory {
            inner,
            gauge,
            window,
        }
    }
}

impl ControllerFactory for ProbedFactory {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Probed {
            inner: self.inner.clone().build(now, current_mtu),
            gauge: self.gauge.clone(),
            window: self.window,
        })
    }
}

/// A controller that forwards every call to `inner` and feeds the gauge.
#[derive(Debug)]
struct Probed {
    inner: Box<dyn Controller>,
    gauge: InFlightGauge,
    window: Option<(Instant, Instant)>,
}

impl Controller for Probed {
    fn on_sent(&mut self, now: Instant, bytes: u64, largest_pn: u64) {
        self.inner.on_sent(now, bytes, largest_pn);
    }

    fn on_packet_sent(&mut self, now: Instant, bytes: u16, pn: u64) {
        self.gauge.add(u64::from(bytes));
        if let Some(log) = &self.gauge.packets {
            log.push(PacketEvent::Sent { pn, bytes });
        }
        self.inner.on_packet_sent(now, bytes, pn);
    }

    fn on_cwnd_limited(&mut self) {
        self.inner.on_cwnd_limited();
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        pn: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        let keep = self
            .window
            .is_some_and(|(from, until)| from <= now && now < until);
        // The send time within the window, for a packet sent in it.
        let sent_at = self
            .window
            .and_then(|(from, _)| sent.checked_duration_since(from))
            .filter(|_| keep);
        self.gauge
            .rtt()
            .record(now.saturating_duration_since(sent), keep, sent_at);
        if let Some(log) = &self.gauge.packets {
            log.push(PacketEvent::Acked { pn });
            log.note_rtt(rtt);
        }
        self.inner.on_ack(now, sent, bytes, pn, app_limited, rtt);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest_packet_num_acked: Option<u64>,
    ) {
        self.gauge.set(in_flight);
        self.inner
            .on_end_acks(now, in_flight, app_limited, largest_packet_num_acked);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        is_ecn: bool,
        lost_bytes: u64,
        largest_lost_pn: u64,
    ) {
        self.inner.on_congestion_event(
            now,
            sent,
            is_persistent_congestion,
            is_ecn,
            lost_bytes,
            largest_lost_pn,
        );
    }

    fn on_packet_lost(&mut self, lost_bytes: u16, pn: u64, now: Instant) {
        self.gauge.sub(u64::from(lost_bytes));
        if let Some(log) = &self.gauge.packets {
            log.push(PacketEvent::Lost { pn });
        }
        self.inner.on_packet_lost(lost_bytes, pn, now);
    }

    fn on_spurious_congestion_event(&mut self) {
        self.inner.on_spurious_congestion_event();
    }

    fn on_spurious_loss(&mut self, now: Instant, pn: u64, largest_acked: u64) {
        self.inner.on_spurious_loss(now, pn, largest_acked);
    }

    fn on_one_way_delay(&mut self, now: Instant, delay_micros: i64) {
        self.inner.on_one_way_delay(now, delay_micros);
    }

    fn extra_loss_delay(&self) -> Duration {
        self.inner.extra_loss_delay()
    }

    fn packet_threshold(&self) -> Option<u32> {
        self.inner.packet_threshold()
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.inner.on_mtu_update(new_mtu);
    }

    fn on_ack_frequency_update(
        &mut self,
        ack_eliciting_threshold: u64,
        requested_max_ack_delay: Duration,
    ) {
        self.inner
            .on_ack_frequency_update(ack_eliciting_threshold, requested_max_ack_delay);
    }

    fn window(&self) -> u64 {
        self.inner.window()
    }

    fn metrics(&self) -> ControllerMetrics {
        self.inner.metrics()
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(Probed {
            inner: self.inner.clone_box(),
            gauge: self.gauge.clone(),
            window: self.window,
        })
    }

    fn initial_window(&self) -> u64 {
        self.inner.initial_window()
    }

    /// The wrapped controller, so callers can downcast to its own type.
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self.inner.into_any()
    }
}
