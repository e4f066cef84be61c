//! Applications that wake themselves: a frame clock, request arrivals.
//!
//! The endpoints drive their applications only after their own inputs
//! (datagrams and QUIC timers). An application that implements [`AppTimer`]
//! names the next time it wants to be driven, and the [`Timed`] host wrapper
//! adds those times to the endpoint's timer: any timeout drives the endpoint,
//! which drives every application.

use crate::app::{App, AppFactory};
use crate::client::QuicClient;
use crate::server::QuicServer;
use netsim::{Datagram, Host, Time};

/// An application that wants to be driven at times of its own (a frame
/// clock, request arrivals), not only after network input.
pub trait AppTimer {
    /// When the application next wants [`App::drive`], if ever. It must
    /// move past a time once driven at it.
    fn next_wakeup(&self) -> Option<Time>;
}

/// A host whose applications can be asked for [`AppTimer`] wakeups.
pub trait AppTimerHost: Host {
    /// The earliest wakeup any of its applications wants.
    fn app_wakeup(&self) -> Option<Time>;
}

impl<A: App + AppTimer> AppTimerHost for QuicClient<A> {
    fn app_wakeup(&self) -> Option<Time> {
        self.app()?.next_wakeup()
    }
}

impl<F> AppTimerHost for QuicServer<F>
where
    F: AppFactory,
    F::App: AppTimer,
{
    fn app_wakeup(&self) -> Option<Time> {
        self.apps().filter_map(AppTimer::next_wakeup).min()
    }
}

/// Wraps a QUIC endpoint host so that its applications' [`AppTimer`]
/// wakeups fire: the wrapper's timer is the earlier of the endpoint's and
/// the applications', and any timeout drives the endpoint (which drives
/// every application). Put `Timed::new(client)` in the [`netsim::HostSpec`]
/// and read it back as `sim.host::<Timed<QuicClient<_>>>(id)`.
#[derive(Debug)]
pub struct Timed<H> {
    inner: H,
}

impl<H: AppTimerHost> Timed<H> {
    /// Wraps `inner`.
    pub fn new(inner: H) -> Timed<H> {
        Timed { inner }
    }

    /// The wrapped host.
    pub fn inner(&self) -> &H {
        &self.inner
    }
}

impl<H: AppTimerHost> Host for Timed<H> {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        self.inner.handle_datagram(now, datagram);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.inner.handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        self.inner.poll_transmit(now)
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        let inner = self.inner.poll_timeout();
        let app = self.inner.app_wakeup();
        match (inner, app) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }
}
