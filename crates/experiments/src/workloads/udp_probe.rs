//! A constant-rate UDP probe (the Proteus paper's §3 measurement, Figure
//! 2): datagrams at a fixed bit rate whatever happens to them, each echoed
//! by the receiver, so that every echoed datagram gives one RTT sample.
//! No congestion control, no retransmission, no QUIC.
//!
//! Each datagram starts with the simulator's 16-byte [`Probe`] header, its
//! sequence number and its send time, padded with zeros to the configured
//! size; the receiver answers each with the header alone.
//! The sender's RTT sample of a datagram is the echo's arrival time minus
//! the send time it carries.

use super::{
    BulkDirection, FlowOutcome, FlowSetup, FlowView, Hosts, Traits, WorkloadKind, downcast,
};
use crate::figure::Plot;
use crate::outcome::{TrialResult, millis};
use crate::units::{BitRate, Bytes, Span};
use netsim::testing::Probe;
use netsim::{Datagram, Host, Time};
use quic::nearest_rank;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

/// `kind = "udp_probe"`: `rate`, `duration`, `packet` and `direction`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, try_from = "RawUdpProbe")]
pub struct UdpProbe {
    /// The sending rate, counted in IP packet bytes as the links count
    /// them (positive).
    pub rate: BitRate,
    /// How long it sends from its start (positive).
    pub duration: Span,
    /// Each datagram's IP packet size: payload, UDP and IP headers
    /// (default 1500 B; 64 B to 9000 B).
    pub packet: Bytes,
    /// Which way the probe goes (default `download`: the server sends).
    pub direction: BulkDirection,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUdpProbe {
    rate: BitRate,
    duration: Span,
    #[serde(default = "full_packet")]
    packet: Bytes,
    #[serde(default = "download")]
    direction: BulkDirection,
}

fn full_packet() -> Bytes {
    Bytes(1500)
}
fn download() -> BulkDirection {
    BulkDirection::Download
}

/// UDP and IPv6 headers: a packet must hold them and the [`Probe`] header
/// every probe datagram starts with (and every echo is).
const SMALLEST: u64 = 48 + Probe::LEN as u64;
/// The largest packet (a jumbo frame's).
const LARGEST: u64 = 9000;

impl TryFrom<RawUdpProbe> for UdpProbe {
    type Error = String;

    fn try_from(raw: RawUdpProbe) -> Result<UdpProbe, String> {
        if raw.rate.0.is_zero() {
            return Err("`rate` must be positive".into());
        }
        if raw.duration.0.is_zero() {
            return Err("`duration` must be positive".into());
        }
        if !(SMALLEST..=LARGEST).contains(&raw.packet.0) {
            return Err(format!(
                "`packet` {} B is outside {SMALLEST}..={LARGEST} B",
                raw.packet.0
            ));
        }
        Ok(UdpProbe {
            rate: raw.rate,
            duration: raw.duration,
            packet: raw.packet,
            direction: raw.direction,
        })
    }
}

impl WorkloadKind for UdpProbe {
    fn traits(&self) -> Traits {
        Traits {
            data_sender: self.direction.data_sender(),
            quic: false,
            flows: true,
            server_opens_streams: false,
            kernel_tcp: false,
            server_ack_delay: false,
            transfer: None,
            servable: false,
            switchable: false,
        }
    }

    fn endpoints(&self, setup: &FlowSetup) -> Hosts {
        let (from, to) = self.direction.sender_first(setup.client, setup.server);
        let start = Time::ZERO + setup.start;
        let sender: Box<dyn Host> = Box::new(ProbeSender::new(self, from, to, start));
        let echoer: Box<dyn Host> = Box::new(ProbeEchoer::default());
        // Its own inverse: (sender, echoer) ordered as (client, server).
        let (client, server) = self.direction.sender_first(sender, echoer);
        Hosts { client, server }
    }

    fn collect(&self, view: &FlowView<'_>, result: &mut TrialResult) -> FlowOutcome {
        let names = view.names;
        let (sender, echoer) = self.direction.sender_first(view.client, view.server);
        let (Some(sender), Some(echoer)) = (
            downcast::<ProbeSender>(sender, "sender", result),
            downcast::<ProbeEchoer>(echoer, "echoer", result),
        ) else {
            return FlowOutcome::default();
        };
        result.set(names.metric("probe_sent"), sender.sent as f64);
        result.set(names.metric("probe_echoed"), echoer.echoed as f64);
        if let Some(min) = sender.samples.iter().map(|&(_, rtt)| rtt).min() {
            result.set(names.metric("rtt_min_ms"), millis(min));
        }
        if let Some(window) = view.measure {
            let samples = sender.samples_in(window.from, window.until);
            let sent = sender.sent_between(window.from, window.until);
            if sent > 0 {
                let lost = 1.0 - samples.len() as f64 / sent as f64;
                result.set(names.metric("probe_loss_fraction"), lost);
            }
            let mut rtts: Vec<Duration> = samples.iter().map(|&(_, rtt)| rtt).collect();
            rtts.sort_unstable();
            for p in [50u64, 95, 99] {
                if let Some(rtt) = nearest_rank(&rtts, p) {
                    result.set(names.metric(&format!("rtt_p{p}_ms")), millis(rtt));
                }
            }
            if let Some(grouping) = view.rtt_intervals {
                crate::rtt_intervals::add(result, names, &samples, window, view.phases, grouping);
            }
        }
        FlowOutcome {
            completed: sender.is_finished(),
            goodput_mbps: None,
        }
    }

    fn headline(&self) -> &'static [&'static str] {
        &["rtt_p50_ms", "rtt_p95_ms", "probe_loss_fraction"]
    }

    fn plots(&self) -> Vec<Plot> {
        vec![Plot::Bars {
            metric: "rtt_p95_ms".into(),
            title: None,
        }]
    }
}

/// The probe's sending end: datagram `k` (from 0) leaves at `start` plus
/// `k` packet times at the rate (to the nanosecond, so the rate holds
/// over any span to within one packet), for the configured duration.
/// Finished [`LINGER`] after its last datagram is due, so that a run does
/// not stop while the last ones and their echoes are in flight.
#[derive(Debug)]
pub(crate) struct ProbeSender {
    local: SocketAddr,
    peer: SocketAddr,
    /// Payload bytes per datagram.
    payload: usize,
    /// Bits per packet on the wire, times 10^9 (one packet's time at the
    /// rate is this over the rate, in nanoseconds).
    packet_bit_nanos: u128,
    rate_bps: u128,
    start: Time,
    /// Datagrams it sends in all.
    count: u64,
    /// Datagrams sent so far.
    sent: u64,
    /// (send time, RTT) of each echoed datagram, in the order echoed.
    samples: Vec<(Time, Duration)>,
    /// Whether it has lingered after its last datagram.
    done: bool,
}

/// How long the sender waits for echoes after its last datagram.
const LINGER: Duration = Duration::from_secs(1);

impl ProbeSender {
    fn new(probe: &UdpProbe, local: SocketAddr, peer: SocketAddr, start: Time) -> ProbeSender {
        let ip = if local.is_ipv4() && peer.is_ipv4() {
            20
        } else {
            40
        };
        let packet = probe.packet.0;
        let packet_bit_nanos = u128::from(packet) * 8 * 1_000_000_000;
        let rate_bps = u128::from(probe.rate.0.bits_per_sec());
        // Datagram k leaves within the duration when k packet times are
        // shorter than it: k · bits · 10^9 < duration_ns · rate.
        let count = (probe.duration.0.as_nanos() * rate_bps).div_ceil(packet_bit_nanos);
        ProbeSender {
            local,
            peer,
            payload: packet as usize - 8 - ip,
            packet_bit_nanos,
            rate_bps,
            start,
            count: u64::try_from(count).unwrap_or(u64::MAX),
            sent: 0,
            samples: Vec::new(),
            done: false,
        }
    }

    /// When datagram `k` is due.
    fn due(&self, k: u64) -> Time {
        let nanos = u128::from(k) * self.packet_bit_nanos / self.rate_bps;
        self.start + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// When it is finished: [`LINGER`] after its last datagram is due.
    fn finish_at(&self) -> Time {
        self.due(self.count.saturating_sub(1)) + LINGER
    }

    /// How many datagrams are due in `[from, until)`.
    fn sent_between(&self, from: Time, until: Time) -> u64 {
        // The first datagram due at or after `t`.
        let first_at = |t: Time| {
            let since = t.saturating_duration_since(self.start).as_nanos();
            let k = (since * self.rate_bps).div_ceil(self.packet_bit_nanos);
            u64::try_from(k).unwrap_or(u64::MAX).min(self.count)
        };
        first_at(until).saturating_sub(first_at(from))
    }

    /// The RTT samples of the datagrams sent in `[from, until)`: (send
    /// time since `from`, RTT), in the order echoed.
    fn samples_in(&self, from: Time, until: Time) -> Vec<(Duration, Duration)> {
        self.samples
            .iter()
            .filter(|&&(at, _)| at >= from && at < until)
            .map(|&(at, rtt)| (at - from, rtt))
            .collect()
    }
}

impl Host for ProbeSender {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        // Anything but an echo of a datagram it sent is ignored.
        if let Some(Probe { seq, sent_at }) = Probe::decode(&datagram.payload)
            && seq < self.sent
            && sent_at <= now
        {
            self.samples.push((sent_at, now - sent_at));
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.sent >= self.count && now >= self.finish_at() {
            self.done = true;
        }
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        if self.sent >= self.count || self.due(self.sent) > now {
            return None;
        }
        let probe = Probe {
            seq: self.sent,
            sent_at: now,
        };
        self.sent += 1;
        let payload = probe.encode(self.payload);
        Some(Datagram::new(self.local, self.peer, payload))
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        if self.sent < self.count {
            Some(self.due(self.sent))
        } else {
            (!self.done).then(|| self.finish_at())
        }
    }

    fn is_finished(&self) -> bool {
        self.done
    }
}

/// The probe's receiving end: answers every probe datagram with its
/// header. Always finished (it only answers).
#[derive(Debug, Default)]
pub(crate) struct ProbeEchoer {
    /// Probe datagrams received and echoed.
    echoed: u64,
    replies: VecDeque<Datagram>,
}

impl Host for ProbeEchoer {
    fn handle_datagram(&mut self, _now: Time, datagram: Datagram) {
        if datagram.payload.len() >= Probe::LEN {
            self.echoed += 1;
            let echo = datagram.reply(datagram.payload.slice(..Probe::LEN));
            self.replies.push_back(echo);
        }
    }

    fn handle_timeout(&mut self, _now: Time) {}

    fn poll_transmit(&mut self, _now: Time) -> Option<Datagram> {
        self.replies.pop_front()
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        None
    }

    fn is_finished(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsim::testing::Sink;
    use netsim::{ChainSpec, HopConfig, HostSpec, LinkConfig, Rate, Seed, Simulator};

    fn probe(text: &str) -> UdpProbe {
        toml::from_str(text).expect("a valid probe")
    }

    fn addrs() -> (SocketAddr, SocketAddr) {
        let a = "10.0.0.1:5000".parse().expect("address");
        let b = "10.0.1.1:5000".parse().expect("address");
        (a, b)
    }

    /// The probe from `a` to `receiver` at `b` over one 30 ms, 100 Mbit/s
    /// hop, run for `secs` seconds; the simulator and the chain.
    fn run(probe: &UdpProbe, receiver: impl Host, secs: u64) -> (Simulator, netsim::Chain) {
        let (a, b) = addrs();
        let link = LinkConfig::constant(Duration::from_millis(30), Rate::from_mbps(100));
        let sender = ProbeSender::new(probe, a, b, Time::from_millis(500));
        let spec = ChainSpec::new(
            HostSpec::new("sender", a.ip(), sender),
            HostSpec::new("receiver", b.ip(), receiver),
        )
        .hop(HopConfig::symmetric(link));
        let mut sim = Simulator::new(Seed::new(1));
        let chain = sim.add_chain(spec).expect("a chain");
        sim.run_until(Time::from_secs(secs));
        (sim, chain)
    }

    #[test]
    fn sends_at_its_rate_to_within_a_packet_over_any_span() {
        // 7 Mbit/s in 1000 B packets: one every 1.142857… ms, so the
        // schedule is not a whole number of nanoseconds per packet.
        let probe = probe("rate = \"7Mbit/s\"\nduration = \"3s\"\npacket = \"1000B\"");
        let (sim, chain) = run(&probe, Sink::new(), 5);
        let sink = sim.host::<Sink>(chain.receiver).expect("the sink");
        // 3 s at 7 Mbit/s: 2625 packets of 1000 B, and nothing after.
        assert_eq!(sink.arrivals().len(), 2625);
        assert!(sink.arrivals().iter().all(|a| a.wire_len == 1000));
        // Over spans of arrival time (each packet takes the same path, so
        // arrivals keep the schedule's spacing): 7 Mbit/s within a packet.
        for (from_ms, to_ms) in [(530, 1530), (777, 1000), (600, 3500), (1234, 1235)] {
            let (from, to) = (Time::from_millis(from_ms), Time::from_millis(to_ms));
            let got = sink.received_between(from, to).bytes as f64 * 8.0;
            let want = 7e6 * (to_ms - from_ms) as f64 / 1000.0;
            assert!(
                (got - want).abs() <= 8000.0,
                "{from_ms}-{to_ms} ms: {got} bits, {want}"
            );
        }
        let sender = sim.host::<ProbeSender>(chain.sender).expect("the sender");
        assert!(sender.is_finished());
        assert_eq!(sender.sent, 2625);
        // Its own count of what it sent in a span agrees with the wire,
        // 30.08 ms later (30 ms and 1000 B at 100 Mbit/s).
        let (from, to) = (Time::from_millis(600), Time::from_millis(1600));
        let late = Duration::from_micros(30_080);
        let on_wire = sink.received_between(from + late, to + late);
        assert_eq!(sender.sent_between(from, to), on_wire.packets);
    }

    #[test]
    fn on_an_idle_path_every_rtt_is_the_base_rtt() {
        let probe = probe("rate = \"20Mbit/s\"\nduration = \"2s\"");
        let (sim, chain) = run(&probe, ProbeEchoer::default(), 4);
        let sender = sim.host::<ProbeSender>(chain.sender).expect("the sender");
        let echoer = sim.host::<ProbeEchoer>(chain.receiver).expect("the echoer");
        // 2 s at 20 Mbit/s in 1500 B packets: 3334 (one every 0.6 ms).
        assert_eq!(sender.sent, 3334);
        assert_eq!(echoer.echoed, 3334);
        assert_eq!(sender.samples.len(), 3334);
        // 30 ms each way, 1500 B out and a 44 B echo back at 100 Mbit/s.
        let base = Duration::from_millis(60) + Duration::from_nanos(120_000 + 3_520);
        for &(_, rtt) in &sender.samples {
            let off = rtt.abs_diff(base);
            assert!(off < Duration::from_micros(1), "{rtt:?} against {base:?}");
        }
        // The samples of a window, by send time since its start.
        let from = Time::from_millis(1000);
        let window = sender.samples_in(from, Time::from_millis(1090));
        assert_eq!(
            window.len() as u64,
            sender.sent_between(from, Time::from_millis(1090))
        );
        assert_eq!(window.len(), 150);
        assert!(window.iter().all(|&(at, _)| at < Duration::from_millis(90)));
    }

    #[test]
    fn refuses_what_it_cannot_send() {
        let bad = [
            ("rate = \"0Mbit/s\"\nduration = \"1s\"", "`rate`"),
            ("rate = \"1Mbit/s\"\nduration = \"0s\"", "`duration`"),
            (
                "rate = \"1Mbit/s\"\nduration = \"1s\"\npacket = \"40B\"",
                "`packet`",
            ),
            (
                "rate = \"1Mbit/s\"\nduration = \"1s\"\npacket = \"9001B\"",
                "`packet`",
            ),
        ];
        for (text, field) in bad {
            let error = toml::from_str::<UdpProbe>(text)
                .expect_err(text)
                .to_string();
            assert!(error.contains(field), "{text}: {error}");
        }
        let probe = probe("rate = \"1Mbit/s\"\nduration = \"1s\"");
        assert_eq!(probe.packet, Bytes(1500));
        assert_eq!(probe.traits().data_sender, crate::workloads::Side::Server);
    }
}
