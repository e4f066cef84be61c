//! The user-space link emulator: a bump in the wire between pairs of veth
//! ports that runs the simulator's own link model ([`netsim::Link`]) in
//! real time.
//!
//! Each hop has two ports, `left` (towards the client) and `right`
//! (towards the server), and two links: frames arriving on `left` go
//! through the forward link and leave on `right`, and the reverse way back.
//! For each frame the relay asks the link for its fate at the arrival time
//! — delivered at a time, or dropped (random loss, full buffer, RED) — and
//! holds it until that time. Since every link is FIFO, delivery times per
//! link never decrease, so each link's holding queue is a plain FIFO and
//! the next wake-up is the earliest head.
//!
//! Frames are received with `recvmmsg` and sent with `sendmmsg`, in batches,
//! and each is offered to its link at the time the kernel stamped it on
//! arrival (`SO_TIMESTAMPNS`), not when the relay got to read it: a relay
//! that reads a burst late still shows the link the frames' real spacing.
//! A busy relay wakes at most once every [`MIN_WAKE`]: what arrived or fell
//! due meanwhile is read and sent together, so its cost per frame falls as
//! the rate grows, and a frame is sent at most that much late.
//! The links count IP lengths (the frame without its 14-byte Ethernet
//! header), as the simulator does. Frames the relay does not understand
//! (ARP, anything not IP) go through the same link: a link is a link.

use crate::RealClock;
use crate::sys::{PacketSocket, PollFd, RecvBatch, SendBatch};
use netsim::{Fate, HopConfig, Link, LinkConfigError, LinkStats, Pcapng, Seed, Time};
use serde::Serialize;
use std::collections::VecDeque;
use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The Ethernet header length.
const ETHERNET_HEADER: usize = 14;
/// The largest frame the relay carries (a 1500-byte MTU plus headers, with
/// room for a VLAN tag).
const MAX_FRAME: usize = 1522;
/// Frames received per `recvmmsg` call.
const BATCH: usize = 64;
/// The longest the relay sleeps without looking at its stop flag.
const MAX_SLEEP: Duration = Duration::from_millis(20);
/// The least time from one wake-up of the relay to the next: frames that
/// arrive or fall due sooner wait for the next one (at most this long).
const MIN_WAKE: Duration = Duration::from_micros(100);
/// Batches read from one port per wake-up.
const BATCHES_PER_WAKE: usize = 16;

/// One emulated hop: its two ports and the configuration of its links.
#[derive(Clone, Debug)]
pub struct RelayHop {
    /// The port towards the client side.
    pub left: String,
    /// The port towards the server side.
    pub right: String,
    /// Forward (left → right) and reverse links.
    pub config: HopConfig,
}

/// How late the relay sent frames, against the times the link model set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Lateness {
    /// Frames sent.
    pub frames: u64,
    /// Frames sent more than 100 µs late.
    pub over_100us: u64,
    /// Frames sent more than 1 ms late.
    pub over_1ms: u64,
    /// The latest a frame was sent, in µs.
    pub max_us: u64,
}

impl Lateness {
    pub(crate) fn record(&mut self, late: Duration) {
        self.frames += 1;
        if late > Duration::from_micros(100) {
            self.over_100us += 1;
        }
        if late > Duration::from_millis(1) {
            self.over_1ms += 1;
        }
        self.max_us = self
            .max_us
            .max(u64::try_from(late.as_micros()).unwrap_or(u64::MAX));
    }
}

/// What a relay run did.
#[derive(Clone, Debug, Default)]
pub struct RelayReport {
    /// Per hop, the forward and reverse links' counters.
    pub links: Vec<(LinkStats, LinkStats)>,
    /// Frames longer than the relay carries (dropped; none should be,
    /// with offloads off).
    pub oversize: u64,
    /// Frames the kernel would not take on send.
    pub send_failures: u64,
    /// Frames the kernel dropped before the relay read them.
    pub kernel_drops: u64,
    /// How punctual the relay was.
    pub lateness: Lateness,
    /// The captures asked for ([`Relay::with_capture`]): per captured hop,
    /// its name and a pcapng file with one interface per direction, every
    /// frame as it arrived (before the link's fate).
    pub captures: Vec<(String, Pcapng)>,
}

/// Hops whose frames a running relay is to capture, by index and name:
/// set it to `Some` and the relay takes it at its next wake-up (at most
/// 20 ms later), leaving `None` ([`Relay::with_capture`]).
pub type CaptureSlot = Arc<Mutex<Option<Vec<(usize, String)>>>>;

/// One direction of one hop.
struct Lane {
    link: Link,
    /// The port frames leave on.
    out: usize,
    /// Frames held until their delivery time, oldest first.
    held: VecDeque<(Time, Vec<u8>)>,
}

/// The relay's view of the run's clock: a [`RealClock`] whose origin can be
/// moved later while the relay runs ([`Relay::with_restart`]).
struct LinkClock {
    base: RealClock,
    /// Nanoseconds on `base` at which the links' time 0 is.
    shift: Option<Arc<AtomicU64>>,
}

impl LinkClock {
    fn clock(&self) -> RealClock {
        let shift = self.shift.as_ref().map_or(0, |s| s.load(Ordering::SeqCst));
        self.base.later(Duration::from_nanos(shift))
    }
}

/// The relay: ports, lanes and spare buffers.
pub struct Relay {
    ports: Vec<PacketSocket>,
    /// The lane each port's arrivals go into.
    lane_of_port: Vec<usize>,
    lanes: Vec<Lane>,
    spare: Vec<Vec<u8>>,
    report: RelayReport,
    restart: Option<Arc<AtomicU64>>,
    /// Where capture requests arrive.
    capture_slot: Option<CaptureSlot>,
    /// Per lane, the capture (index into `report.captures`) and interface
    /// its arrivals are written to.
    lane_capture: Vec<Option<(usize, u32)>>,
}

/// Why a relay could not start.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// A hop's link configuration is invalid.
    #[error("hop {hop}: {source}")]
    Link {
        /// The hop's index.
        hop: usize,
        /// What is wrong.
        source: LinkConfigError,
    },
    /// A port could not be opened.
    #[error("relay port {port}: {source}")]
    Port {
        /// The interface.
        port: String,
        /// Why.
        source: io::Error,
    },
}

impl Relay {
    /// Opens the ports of `hops` in the current network namespace and
    /// builds their links, whose random generators derive from `seed` as
    /// the simulator's links of the same chain do ([`Seed::link`]: hop `i`'s
    /// forward link is link `2i`, its reverse link `2i + 1`), so a trial
    /// draws the same random losses in both modes.
    pub fn open(hops: &[RelayHop], seed: Seed) -> Result<Relay, RelayError> {
        let mut ports = Vec::new();
        let mut lane_of_port = Vec::new();
        let mut lanes = Vec::new();
        for (index, hop) in hops.iter().enumerate() {
            let link = |config: &netsim::LinkConfig, number: usize| {
                hop_link(config, seed, number)
                    .map_err(|source| RelayError::Link { hop: index, source })
            };
            let (left, right) = (ports.len(), ports.len() + 1);
            for name in [&hop.left, &hop.right] {
                // Room for a few hundred full frames before the kernel drops.
                let socket =
                    PacketSocket::bind(name, 4 << 20).map_err(|source| RelayError::Port {
                        port: name.clone(),
                        source,
                    })?;
                socket.stamp_arrivals().map_err(|source| RelayError::Port {
                    port: name.clone(),
                    source,
                })?;
                ports.push(socket);
            }
            lane_of_port.push(lanes.len());
            lanes.push(Lane {
                link: link(&hop.config.forward, 2 * index)?,
                out: right,
                held: VecDeque::new(),
            });
            lane_of_port.push(lanes.len());
            lanes.push(Lane {
                link: link(&hop.config.reverse, 2 * index + 1)?,
                out: left,
                held: VecDeque::new(),
            });
        }
        Ok(Relay {
            ports,
            lane_of_port,
            lanes,
            spare: Vec::new(),
            report: RelayReport::default(),
            restart: None,
            capture_slot: None,
            lane_capture: Vec::new(),
        })
    }

    /// Lets the run's clock be restarted while the relay runs: whenever
    /// `shift` changes, the links' time 0 moves to `shift` nanoseconds after
    /// the origin of the clock given to [`Relay::run`]. A trace-driven
    /// link's trace, RED's 500 ms timer and everything else in the link
    /// model then count from the new origin. Change it only while no frames
    /// cross the relay.
    pub fn with_restart(mut self, shift: Arc<AtomicU64>) -> Relay {
        self.restart = Some(shift);
        self
    }

    /// Lets captures be asked for while the relay runs, through `slot`.
    pub fn with_capture(mut self, slot: CaptureSlot) -> Relay {
        self.capture_slot = Some(slot);
        self
    }

    /// Starts the captures waiting in the slot, if any: hop `i`'s forward
    /// lane is interface 0 of its file, its reverse lane interface 1.
    fn take_capture_request(&mut self) {
        let Some(slot) = &self.capture_slot else {
            return;
        };
        let Some(hops) = slot.try_lock().ok().and_then(|mut s| s.take()) else {
            return;
        };
        self.lane_capture = vec![None; self.lanes.len()];
        for (hop, name) in hops {
            if 2 * hop + 1 >= self.lanes.len() {
                continue;
            }
            let file = self.report.captures.len();
            let interfaces = [format!("{name} forward"), format!("{name} reverse")];
            self.report.captures.push((name, Pcapng::new(interfaces)));
            self.lane_capture[2 * hop] = Some((file, 0));
            self.lane_capture[2 * hop + 1] = Some((file, 1));
        }
    }

    /// Relays until `stop` is set, on `clock`'s time, and returns what it
    /// did. Errors only if a socket fails outright.
    pub fn run(mut self, clock: RealClock, stop: &AtomicBool) -> io::Result<RelayReport> {
        let link_clock = LinkClock {
            base: clock,
            shift: self.restart.take(),
        };
        let mut batch = RecvBatch::new(BATCH, MAX_FRAME + 1);
        let mut out: Vec<Vec<u8>> = Vec::with_capacity(BATCH);
        let mut send = SendBatch::new(BATCH);
        let mut fds: Vec<PollFd> = self
            .ports
            .iter()
            .map(|p| PollFd::readable(p.as_fd()))
            .collect();
        let mut last_wake: Option<(std::time::Instant, bool)> = None;
        while !stop.load(Ordering::Relaxed) {
            self.take_capture_request();
            let clock = link_clock.clock();
            let now = clock.now();
            let mut handled = 0;
            for lane in 0..self.lanes.len() {
                handled += self.send_due(lane, now, &clock, &mut out, &mut send)?;
            }
            let next = self
                .lanes
                .iter()
                .filter_map(|lane| lane.held.front().map(|(at, _)| *at))
                .min();
            let sleep = next.map_or(MAX_SLEEP, |at| clock.until(at).min(MAX_SLEEP));
            // A busy relay (its last two wake-ups less than 2 × MIN_WAKE
            // apart, with frames to carry) waits out the rest of MIN_WAKE without looking at the
            // sockets, then reads whatever is there.
            let rest = match last_wake {
                Some((at, true)) => MIN_WAKE.saturating_sub(at.elapsed()),
                _ => Duration::ZERO,
            };
            if rest > Duration::ZERO {
                std::thread::sleep(rest);
                fds.iter_mut().for_each(|fd| fd.readable = true);
            } else {
                crate::sys::poll(&mut fds, Some(sleep))?;
            }
            let woke = std::time::Instant::now();
            // The clock may have restarted while the relay slept.
            let clock = link_clock.clock();
            for (port, fd) in fds.iter().enumerate() {
                if fd.readable {
                    handled += self.receive(port, &clock, &mut batch)?;
                }
            }
            let busy = handled > 0 && last_wake.is_some_and(|(at, _)| woke - at < 2 * MIN_WAKE);
            last_wake = Some((woke, busy));
        }
        for port in &self.ports {
            self.report.kernel_drops += port.take_stats().map_or(0, |s| s.drops);
        }
        self.report.links = self
            .lanes
            .chunks(2)
            .map(|pair| (*pair[0].link.stats(), *pair[1].link.stats()))
            .collect();
        Ok(self.report)
    }

    /// Reads what waits on `port` (a bounded number of batches, so a
    /// flood on one port does not starve the others' sends), each frame
    /// offered to its link at its kernel arrival stamp. Returns how many
    /// it read.
    fn receive(
        &mut self,
        port: usize,
        clock: &RealClock,
        batch: &mut RecvBatch,
    ) -> io::Result<usize> {
        let index = self.lane_of_port[port];
        let lane = &mut self.lanes[index];
        let capture = self.lane_capture.get(index).copied().flatten();
        let mut read = 0;
        for _ in 0..BATCHES_PER_WAKE {
            let n = self.ports[port].recv_batch(batch)?;
            if n == 0 {
                break;
            }
            read += n;
            let anchor = clock.anchor();
            for (i, (bytes, len)) in batch.frames().enumerate() {
                if len > MAX_FRAME {
                    self.report.oversize += 1;
                    continue;
                }
                let now = batch.stamps()[i].map_or(anchor.now(), |stamp| anchor.place(stamp));
                if let Some((file, interface)) = capture
                    && let Some((_, pcap)) = self.report.captures.get_mut(file)
                {
                    pcap.record_frame(interface, now, bytes);
                }
                match lane.link.offer(now, ip_length(bytes)) {
                    Fate::Deliver { at } => {
                        let mut frame = self.spare.pop().unwrap_or_default();
                        frame.clear();
                        frame.extend_from_slice(bytes);
                        lane.held.push_back((at, frame));
                    }
                    Fate::Dropped(_) => {}
                }
            }
            if n < batch.capacity() {
                break;
            }
        }
        Ok(read)
    }

    /// Sends the lane's frames whose time has come, in batches; returns
    /// how many it took from the lane.
    fn send_due(
        &mut self,
        lane: usize,
        now: Time,
        clock: &RealClock,
        out: &mut Vec<Vec<u8>>,
        send: &mut SendBatch,
    ) -> io::Result<usize> {
        let lane = &mut self.lanes[lane];
        let mut taken = 0;
        loop {
            out.clear();
            while out.len() < BATCH {
                match lane.held.front() {
                    Some((at, _)) if *at <= now => {
                        let (at, frame) = lane.held.pop_front().expect("front exists");
                        self.report.lateness.record(clock.now() - at);
                        out.push(frame);
                    }
                    _ => break,
                }
            }
            if out.is_empty() {
                return Ok(taken);
            }
            taken += out.len();
            let sent = self.ports[lane.out].send_frames(out, send)?;
            // A full transmit queue drops the rest, as a NIC would.
            self.report.send_failures += (out.len() - sent) as u64;
            self.spare.append(out);
        }
    }
}

/// Link number `number` of the chain (hop `i` has `2i` forward and
/// `2i + 1` reverse), seeded as the simulator seeds the same link.
fn hop_link(
    config: &netsim::LinkConfig,
    seed: Seed,
    number: usize,
) -> Result<Link, LinkConfigError> {
    Link::new(config.clone(), seed.link(number))
}

/// The length the link model counts: the IP packet for IPv4 and IPv6
/// frames, the whole frame otherwise.
fn ip_length(frame: &[u8]) -> usize {
    match frame.get(12..14) {
        Some([0x08, 0x00]) | Some([0x86, 0xdd]) => frame.len() - ETHERNET_HEADER,
        _ => frame.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::{hop_link, ip_length};
    use netsim::testing::{CbrSource, Sink};
    use netsim::{
        ChainSpec, DropCause, GilbertElliott, HopConfig, HostSpec, LinkConfig, LossModel,
        MiddleSpec, Probability, Rate, Seed, Simulator, Time,
    };
    use std::time::Duration;

    /// The relay's links draw the same random losses as the simulator's
    /// links of the same chain, so a trial's two modes see the same losses
    /// (the packets they are offered permitting): offered as many packets,
    /// each link loses the same ones.
    #[test]
    fn links_lose_what_the_simulators_links_lose() {
        let lossy = |loss: LossModel| {
            LinkConfig::constant(Duration::from_millis(5), Rate::from_mbps(100)).with_loss(loss)
        };
        let hops = [
            HopConfig::symmetric(lossy(LossModel::Bernoulli(Probability::new(0.05).unwrap()))),
            HopConfig::symmetric(lossy(LossModel::GilbertElliott(GilbertElliott::gilbert(
                Probability::new(0.01).unwrap(),
                Probability::new(0.3).unwrap(),
            )))),
        ];
        let (a, b) = (
            "10.0.0.1:4000".parse().unwrap(),
            "10.0.1.1:5000".parse().unwrap(),
        );
        let source = CbrSource::new(a, b, 1000, Duration::from_micros(200), 20_000);
        let spec = ChainSpec::new(
            HostSpec::new("sender", a.ip(), source),
            HostSpec::new("receiver", b.ip(), Sink::echoing()),
        )
        .hop(hops[0].clone())
        .middle(MiddleSpec::forwarder("router"))
        .hop(hops[1].clone());
        let seed = Seed::new(11);
        let mut sim = Simulator::new(seed);
        let chain = sim.add_chain(spec).unwrap();
        sim.run_until(Time::from_secs(10));
        for (index, (hop, links)) in hops.iter().zip(&chain.hops).enumerate() {
            for (number, config, id) in [
                (2 * index, &hop.forward, links.forward),
                (2 * index + 1, &hop.reverse, links.reverse),
            ] {
                let simulated = sim.link_stats(id);
                assert!(simulated.dropped_loss.packets > 20, "{simulated:?}");
                let mut link = hop_link(config, seed, number).unwrap();
                let mut lost = 0;
                for k in 0..simulated.offered.packets {
                    let now = Time::from_micros(200 * k);
                    if link.offer(now, 1028) == netsim::Fate::Dropped(DropCause::Loss) {
                        lost += 1;
                    }
                }
                assert_eq!(lost, simulated.dropped_loss.packets, "link {number}");
            }
        }
    }

    #[test]
    fn links_count_ip_lengths() {
        let mut frame = vec![0u8; 1514];
        frame[12] = 0x08;
        assert_eq!(ip_length(&frame), 1500);
        frame[12] = 0x08;
        frame[13] = 0x06; // ARP
        assert_eq!(ip_length(&frame), 1514);
        assert_eq!(ip_length(&[0u8; 4]), 4);
    }
}
