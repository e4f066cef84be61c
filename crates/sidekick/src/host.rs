//! A netsim [`Host`] wrapper that puts the sender engine beside any
//! sender's UDP socket: the QUIC client, the media sender, anything.
//!
//! The wrapped host sends and receives as before. The wrapper sends the
//! sidekick request after the host's first datagram (which fixes the base
//! connection's 4-tuple), logs every datagram the host sends, keeps the
//! sidekick's own datagrams (the reply, quACKs) from it, and sends the
//! engine's control messages and retransmissions. The engine's near-segment
//! signals go to an optional [`Signals`] queue (`cc`'s), where a
//! path-aware congestion controller on the same host reads them.

use crate::sender::{SenderConfig, SenderStats, SidekickSender};
use cc::Signals;
use netsim::{Datagram, Host, Seed, Time};
use quack::Field;

/// A host with a sidekick sender engine beside its socket.
pub struct SidekickHost<H: Host, F: Field> {
    inner: H,
    config: SenderConfig,
    seed: Seed,
    engine: Option<SidekickSender<F>>,
    signals: Option<Signals>,
}

impl<H: Host, F: Field> SidekickHost<H, F> {
    /// Wraps `inner`; the engine starts with its first datagram.
    pub fn new(inner: H, config: SenderConfig, seed: Seed) -> SidekickHost<H, F> {
        SidekickHost {
            inner,
            config,
            seed,
            engine: None,
            signals: None,
        }
    }

    /// Also pushes every signal of the engine to `signals`, as the engine
    /// produces it.
    pub fn with_signals(mut self, signals: Signals) -> SidekickHost<H, F> {
        self.signals = Some(signals);
        self
    }

    /// The wrapped host.
    pub fn inner(&self) -> &H {
        &self.inner
    }

    /// The engine's counters (zero before the first datagram).
    pub fn stats(&self) -> SenderStats {
        self.engine.as_ref().map(|e| *e.stats()).unwrap_or_default()
    }

    /// Hands the engine's signals to the controller, if one listens.
    fn drain_events(&mut self) {
        let Some(engine) = &mut self.engine else {
            return;
        };
        while let Some(signal) = engine.poll_event() {
            if let Some(signals) = &self.signals {
                signals.push(signal);
            }
        }
    }
}

impl<H: Host, F: Field> Host for SidekickHost<H, F> {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        let taken = self
            .engine
            .as_mut()
            .is_some_and(|engine| engine.on_received(now, &datagram));
        if !taken {
            self.inner.handle_datagram(now, datagram);
        }
        self.drain_events();
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.inner.poll_timeout().is_some_and(|at| at <= now) {
            self.inner.handle_timeout(now);
        }
        if let Some(engine) = &mut self.engine
            && engine.poll_timeout().is_some_and(|at| at <= now)
        {
            engine.handle_timeout(now);
        }
        self.drain_events();
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        if let Some(datagram) = self.engine.as_mut().and_then(SidekickSender::poll_transmit) {
            return Some(datagram);
        }
        let datagram = self.inner.poll_transmit(now)?;
        let engine = self.engine.get_or_insert_with(|| {
            let mut engine =
                SidekickSender::new(self.config.clone(), datagram.src, datagram.dst, self.seed);
            engine.start(now);
            engine
        });
        engine.on_sent(now, &datagram);
        Some(datagram)
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        let engine = self.engine.as_ref().and_then(SidekickSender::poll_timeout);
        self.inner.poll_timeout().into_iter().chain(engine).min()
    }

    fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }
}
