//! Sidekick for a remote data sender (the server of a download): the
//! proxy buffers the sender's datagrams and retransmits them from quACKs
//! that the data receiver sends (the paper's Limitations, "Even more diverse
//! network scenarios": when the lossy segment is on the far side of the
//! proxy from the sender, "the proxy would need some way to receive quACKs
//! from the data receiver, as well as a mechanism to buffer and retransmit
//! packets").
//!
//! The roles of the Robin protocol turn around, with its messages
//! unchanged:
//!
//! * [`Relay`], on the proxy's node, runs the sender engine
//!   ([`SidekickSender`]) for each flow of a remote data sender it relays,
//!   on the sender's behalf: it logs each datagram it forwards toward the
//!   receiver, sends the in-band request and the configure messages from
//!   the sender's addresses, and resends (byte-identical, from the sender's
//!   address) what the receiver's quACKs show lost on the hop between them.
//!   Everything else goes to the sidekick proxy engine it holds, so the
//!   node still quACKs the data senders on its own side.
//! * [`QuackingHost`], beside the data receiver's socket, runs the proxy
//!   engine ([`SidekickProxy`]) on what the receiver receives: it answers
//!   the request, takes the configuration and sends the quACKs. It uses the
//!   receiver's base address for all of it (a configure or reset message
//!   is shorter than any QUIC packet), so the receiver needs no socket of
//!   its own for the sidekick.
//!
//! The remote sender is unmodified: it sees an ordinary, if late, copy of a
//! packet it may already have declared lost, and its controller undoes the
//! congestion response when the end-to-end ACK shows the loss spurious.

use crate::proxy::{ProxyConfig, SidekickProxy};
use crate::sender::{SenderConfig, SidekickSender};
use crate::wire::{Control, Discovery};
use netsim::{Datagram, Host, Interface, Middlebox, Seed, Time, Transmit};
use quack::Field;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, SocketAddr};

/// What a relay has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RelayStats {
    /// Flows of remote data senders relayed.
    pub flows: u64,
    /// The receivers' quACKs applied.
    pub quacks: u64,
    /// Datagrams resent toward the receivers from their quACKs.
    pub retransmitted: u64,
}

/// A remote data sender's flow, sender first.
type FlowKey = (SocketAddr, SocketAddr);

/// The proxy's node: the sidekick proxy engine, and the sender engine on
/// behalf of the remote data senders it relays.
pub struct Relay<F: Field> {
    proxy: SidekickProxy,
    config: SenderConfig,
    seed: Seed,
    /// The remote data senders whose flows it relays.
    senders: BTreeSet<IpAddr>,
    flows: BTreeMap<FlowKey, SidekickSender<F>>,
    outbox: VecDeque<Transmit>,
    stats: RelayStats,
}

impl<F: Field> Relay<F> {
    /// A relay for the flows of `senders`, each with a sender engine of
    /// `config`, around `proxy` (which forwards, or not, for both).
    pub fn new(
        proxy: ProxyConfig,
        config: SenderConfig,
        senders: impl IntoIterator<Item = IpAddr>,
        seed: Seed,
    ) -> Relay<F> {
        Relay {
            proxy: SidekickProxy::new(proxy),
            config,
            seed,
            senders: senders.into_iter().collect(),
            flows: BTreeMap::new(),
            outbox: VecDeque::new(),
            stats: RelayStats::default(),
        }
    }

    /// The proxy engine it holds.
    pub fn proxy(&self) -> &SidekickProxy {
        &self.proxy
    }

    /// Its counters.
    pub fn stats(&self) -> RelayStats {
        let mut stats = self.stats;
        for engine in self.flows.values() {
            stats.quacks += engine.stats().quacks;
            stats.retransmitted += engine.stats().retransmitted;
        }
        stats
    }

    /// Sends what the engines have to send and drops their signals (no
    /// controller listens on the node).
    fn drain(&mut self, now: Time) {
        for engine in self.flows.values_mut() {
            while let Some(datagram) = engine.poll_transmit() {
                self.outbox.push_back(Transmit::at(now, datagram));
            }
            while engine.poll_event().is_some() {}
        }
    }

    /// The engine a datagram from a receiver is for, if any: a reply on
    /// the base connection, or a quACK to the engine's control address.
    fn engine_for(&mut self, datagram: &Datagram) -> Option<&mut SidekickSender<F>> {
        if !self.senders.contains(&datagram.dst.ip()) {
            return None;
        }
        let base = (datagram.dst, datagram.src);
        if self.flows.contains_key(&base) {
            return self.flows.get_mut(&base);
        }
        self.flows
            .iter_mut()
            .find_map(|(&(sender, receiver), engine)| {
                let ours = engine.control_addr() == datagram.dst
                    && sender.ip() == datagram.dst.ip()
                    && receiver.ip() == datagram.src.ip();
                ours.then_some(engine)
            })
    }
}

impl<F: Field> Middlebox for Relay<F> {
    fn handle_datagram(&mut self, now: Time, from: Interface, datagram: Datagram) {
        if let Some(engine) = self.engine_for(&datagram)
            && engine.on_received(now, &datagram)
        {
            self.drain(now);
            return;
        }
        let relayed = self.senders.contains(&datagram.src.ip())
            && !Discovery::is_discovery(&datagram.payload);
        let key = (datagram.src, datagram.dst);
        let logged = relayed.then(|| datagram.clone());
        self.proxy.handle_datagram(now, from, datagram);
        if let Some(datagram) = logged {
            let (config, seed) = (&self.config, self.seed);
            let stats = &mut self.stats;
            let engine = self.flows.entry(key).or_insert_with(|| {
                stats.flows += 1;
                let label = format!("relay/{}/{}", key.0, key.1);
                let mut engine =
                    SidekickSender::new(config.clone(), key.0, key.1, seed.derive(&label));
                engine.start(now);
                engine
            });
            engine.on_sent(now, &datagram);
            self.drain(now);
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.proxy.poll_timeout().is_some_and(|at| at <= now) {
            self.proxy.handle_timeout(now);
        }
        for engine in self.flows.values_mut() {
            if engine.poll_timeout().is_some_and(|at| at <= now) {
                engine.handle_timeout(now);
            }
        }
        self.drain(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Transmit> {
        // The engines' datagrams are their own: they leave even when the
        // node does not forward (beside the path).
        self.outbox
            .pop_front()
            .or_else(|| self.proxy.poll_transmit(now))
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        let engines = self.flows.values().filter_map(SidekickSender::poll_timeout);
        self.proxy.poll_timeout().into_iter().chain(engines).min()
    }
}

/// A data receiver with the proxy engine beside its socket: it quACKs what
/// the receiver receives to the relay that asks ([`Relay`]).
pub struct QuackingHost<H: Host> {
    inner: H,
    /// The engine, on an address of the receiver's IP that never goes on
    /// the wire; the receiver's base address stands for it.
    engine: SidekickProxy,
    /// The receiver's base address.
    base: SocketAddr,
}

/// Whether `payload` is a sender's control message (a configure or a
/// reset), exactly: a QUIC packet (at least 20 bytes longer than either,
/// whatever its first byte, which may have a greased fixed bit) never is.
fn is_sender_control(payload: &[u8]) -> bool {
    match Control::parse(payload) {
        Ok(control @ (Control::Configure { .. } | Control::Reset { .. })) => {
            control.to_bytes().len() == payload.len()
        }
        _ => false,
    }
}

/// The port of the engine's internal address.
const INTERNAL_PORT: u16 = 1;

impl<H: Host> QuackingHost<H> {
    /// Wraps `inner` (whose address is `addr`), with the engine's bounds
    /// from `config` (its address and forwarding are set here).
    pub fn new(inner: H, addr: SocketAddr, mut config: ProxyConfig) -> QuackingHost<H> {
        config.addr = SocketAddr::new(addr.ip(), INTERNAL_PORT);
        config.forward = false;
        QuackingHost {
            inner,
            engine: SidekickProxy::new(config),
            base: addr,
        }
    }

    /// The wrapped host.
    pub fn inner(&self) -> &H {
        &self.inner
    }

    /// The engine (its counters: the quACKs sent).
    pub fn engine(&self) -> &SidekickProxy {
        &self.engine
    }

    fn internal(&self) -> SocketAddr {
        SocketAddr::new(self.base.ip(), INTERNAL_PORT)
    }
}

impl<H: Host> Host for QuackingHost<H> {
    fn handle_datagram(&mut self, now: Time, mut datagram: Datagram) {
        if is_sender_control(&datagram.payload) {
            // A configure or reset to the base address: the engine's.
            datagram.dst = self.internal();
            self.engine.handle_datagram(now, Interface(0), datagram);
            return;
        }
        if Discovery::is_discovery(&datagram.payload) {
            self.engine.handle_datagram(now, Interface(0), datagram);
            return;
        }
        self.engine
            .handle_datagram(now, Interface(0), datagram.clone());
        self.inner.handle_datagram(now, datagram);
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.inner.poll_timeout().is_some_and(|at| at <= now) {
            self.inner.handle_timeout(now);
        }
        if self.engine.poll_timeout().is_some_and(|at| at <= now) {
            self.engine.handle_timeout(now);
        }
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        if let Some(transmit) = self.engine.poll_transmit(now) {
            let mut datagram = transmit.datagram;
            let internal = self.internal();
            if datagram.src == internal {
                // A quACK: from the base address.
                datagram.src = self.base;
            } else if let Ok(Discovery::Reply { nonce, session, .. }) =
                Discovery::parse(&datagram.payload)
            {
                // The reply names the base address (the request's
                // destination, the reply's source) as the proxy's.
                let proxy = datagram.src;
                datagram.payload = Discovery::Reply {
                    nonce,
                    session,
                    proxy,
                }
                .to_bytes()
                .into();
            }
            return Some(datagram);
        }
        self.inner.poll_transmit(now)
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        let engine = self.engine.poll_timeout();
        self.inner.poll_timeout().into_iter().chain(engine).min()
    }

    fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Config, Interval};

    #[test]
    fn only_a_configure_or_reset_of_its_own_length_is_control() {
        let configure = Control::Configure {
            session: 7,
            config: Config {
                interval: Interval::Millis(30),
                threshold: 10,
                id_bytes: 4,
                id_offset: 21,
                quota: 1024,
            },
        }
        .to_bytes();
        let reset = Control::Reset {
            session: 7,
            epoch: 1,
        }
        .to_bytes();
        assert!(is_sender_control(&configure));
        assert!(is_sender_control(&reset));
        // A short-header QUIC packet with a greased fixed bit can begin as
        // a configure does; it is longer.
        let mut packet = configure.to_vec();
        packet.resize(60, 0xab);
        assert!(!is_sender_control(&packet));
        let quack = Control::Quack {
            next_session: 7,
            quota_left: 3,
            epoch: 0,
            quack: vec![1, 2, 3],
        }
        .to_bytes();
        assert!(!is_sender_control(&quack));
        assert!(!is_sender_control(&[]));
    }
}
