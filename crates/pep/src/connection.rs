//! One relayed connection: admitting it (or refusing it, over the limit),
//! opening the server-side leg from the client's address, and the two
//! threads that copy bytes, one per direction, until both ends close, it
//! idles out, an error breaks it or the PEP stops.

use crate::{Counters, POLL_INTERVAL, TcpPepConfig};
use emu::tcp::congestion::set_congestion;
use emu::tcp::is_timeout;
use socket2::{Domain, Protocol, SockAddr, SockRef, Socket, Type};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// What the PEP's threads share.
pub(super) struct Shared {
    pub(super) config: TcpPepConfig,
    pub(super) counters: Counters,
    pub(super) stop: Arc<AtomicBool>,
}

/// Makes closing a socket send a reset (`SO_LINGER` 0) instead of a FIN.
fn reset(socket: SockRef<'_>) {
    let _ = socket.set_linger(Some(Duration::ZERO));
}

impl Shared {
    /// Takes on a freshly accepted connection: refuses it if too many are
    /// open, else starts its relay thread.
    pub(super) fn admit(
        self: &Arc<Shared>,
        socket: Socket,
        peer: SockAddr,
    ) -> Option<JoinHandle<()>> {
        let counters = &self.counters;
        let (Some(peer), Some(original_dst)) = (
            peer.as_socket(),
            socket.local_addr().ok().and_then(|a| a.as_socket()),
        ) else {
            counters.errors.fetch_add(1, Ordering::Relaxed);
            reset(SockRef::from(&socket));
            return None;
        };
        let open = counters.open.load(Ordering::Relaxed);
        if open >= self.config.max_connections || self.is_direct(original_dst) {
            counters.refused.fetch_add(1, Ordering::Relaxed);
            reset(SockRef::from(&socket));
            return None;
        }
        let open = counters.open.fetch_add(1, Ordering::Relaxed) + 1;
        counters.peak.fetch_max(open as u64, Ordering::Relaxed);
        counters.connections.fetch_add(1, Ordering::Relaxed);
        let me = Arc::clone(self);
        let spawned = thread::Builder::new()
            .name("pep-conn".to_owned())
            .stack_size(256 * 1024)
            .spawn(move || {
                let outcome = me.relay(TcpStream::from(socket), peer, original_dst);
                me.count(outcome);
                me.counters.open.fetch_sub(1, Ordering::Relaxed);
            });
        match spawned {
            Ok(handle) => Some(handle),
            Err(_) => {
                // The socket moved into the closure and was dropped with it.
                counters.errors.fetch_add(1, Ordering::Relaxed);
                counters.open.fetch_sub(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Whether a connection was made to the PEP's own port on one of this
    /// host's addresses rather than diverted by `tproxy`: relaying it would
    /// connect the PEP to itself, again and again.
    fn is_direct(&self, original_dst: SocketAddr) -> bool {
        original_dst.port() == self.config.port
            && (original_dst.ip().is_loopback()
                || UdpSocket::bind(SocketAddr::new(original_dst.ip(), 0)).is_ok())
    }

    fn count(&self, outcome: Outcome) {
        let counter = match outcome {
            Outcome::Completed => &self.counters.completed,
            Outcome::Idle => &self.counters.idle_closed,
            Outcome::ConnectFailed => &self.counters.connect_failed,
            Outcome::Error => &self.counters.errors,
            Outcome::Stopped => &self.counters.stopped,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Sets the per-socket options of a leg.
    fn leg_options(&self, socket: SockRef<'_>) -> io::Result<()> {
        if let Some(size) = self.config.send_buffer {
            socket.set_send_buffer_size(size)?;
        }
        if let Some(size) = self.config.recv_buffer {
            socket.set_recv_buffer_size(size)?;
        }
        socket.set_read_timeout(Some(POLL_INTERVAL))?;
        socket.set_write_timeout(Some(POLL_INTERVAL))?;
        Ok(())
    }

    /// Opens the server-side leg from the client's address to the original
    /// destination.
    fn connect_server(&self, client: SocketAddr, server: SocketAddr) -> io::Result<TcpStream> {
        let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
        socket.set_ip_transparent_v4(true)?;
        socket.set_reuse_address(true)?;
        set_congestion(SockRef::from(&socket), &self.config.congestion)
            .map_err(io::Error::other)?;
        self.leg_options(SockRef::from(&socket))?;
        let mut bound = false;
        if self.config.preserve_client_port {
            bound = socket.bind(&SockAddr::from(client)).is_ok();
        }
        if !bound {
            socket.bind(&SockAddr::from(SocketAddr::new(client.ip(), 0)))?;
        }
        socket.connect_timeout(&SockAddr::from(server), self.config.connect_timeout)?;
        Ok(TcpStream::from(socket))
    }

    /// Relays one connection until both directions end, it idles out, an
    /// error breaks it or the PEP stops.
    fn relay(&self, client: TcpStream, peer: SocketAddr, original_dst: SocketAddr) -> Outcome {
        let setup = set_congestion(SockRef::from(&client), &self.config.congestion)
            .map_err(io::Error::other)
            .and_then(|()| self.leg_options(SockRef::from(&client)));
        if setup.is_err() {
            reset(SockRef::from(&client));
            return Outcome::Error;
        }
        if self.stop.load(Ordering::Relaxed) {
            reset(SockRef::from(&client));
            return Outcome::Stopped;
        }
        let server = match self.connect_server(peer, original_dst) {
            Ok(server) => server,
            Err(_) => {
                // The client sees a reset, as it would from a dead server.
                reset(SockRef::from(&client));
                return Outcome::ConnectFailed;
            }
        };
        let conn = Arc::new(Connection {
            client,
            server,
            started: Instant::now(),
            last_activity_ms: AtomicU64::new(0),
            end: AtomicU8::new(END_NONE),
        });
        let upstream = {
            let conn = Arc::clone(&conn);
            let stop = Arc::clone(&self.stop);
            let idle = self.config.idle_timeout;
            let buffer = self.config.relay_buffer;
            thread::Builder::new()
                .name("pep-c2s".to_owned())
                .stack_size(256 * 1024)
                .spawn(move || {
                    let mut bytes = 0u64;
                    let end = conn.copy(Leg::ClientToServer, &stop, idle, buffer, &mut bytes);
                    (end, bytes)
                })
        };
        let Ok(upstream) = upstream else {
            conn.abort(END_ERROR);
            return Outcome::Error;
        };
        let mut down_bytes = 0u64;
        let down = conn.copy(
            Leg::ServerToClient,
            &self.stop,
            self.config.idle_timeout,
            self.config.relay_buffer,
            &mut down_bytes,
        );
        self.counters
            .bytes_s2c
            .fetch_add(down_bytes, Ordering::Relaxed);
        let up = match upstream.join() {
            Ok((end, bytes)) => {
                self.counters.bytes_c2s.fetch_add(bytes, Ordering::Relaxed);
                end
            }
            Err(_) => END_ERROR,
        };
        // The first abnormal end (recorded by whichever thread saw it) names
        // the outcome.
        match conn.end.load(Ordering::Relaxed) {
            END_IDLE => Outcome::Idle,
            END_STOPPED => Outcome::Stopped,
            END_ERROR => Outcome::Error,
            _ if up == END_NONE && down == END_NONE => Outcome::Completed,
            _ => Outcome::Error,
        }
    }
}

/// How a relayed connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Completed,
    Idle,
    ConnectFailed,
    Error,
    Stopped,
}

/// No abnormal end (a copy thread's normal end: end of stream).
const END_NONE: u8 = 0;
/// Idle timeout.
const END_IDLE: u8 = 1;
/// The PEP is stopping.
const END_STOPPED: u8 = 2;
/// A network error on either leg.
const END_ERROR: u8 = 3;

/// One direction of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Leg {
    ClientToServer,
    ServerToClient,
}

/// Both legs of a relayed connection.
struct Connection {
    client: TcpStream,
    server: TcpStream,
    started: Instant,
    /// Milliseconds after `started` at which the last byte moved either way.
    last_activity_ms: AtomicU64,
    /// The first abnormal end, `END_NONE` if none.
    end: AtomicU8,
}

impl Connection {
    fn touch(&self) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.last_activity_ms.fetch_max(ms, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_activity_ms.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(last)
    }

    /// Records `why` (if nothing was recorded before) and shuts both legs in
    /// both directions, which wakes the other copy thread.
    fn abort(&self, why: u8) {
        let _ = self
            .end
            .compare_exchange(END_NONE, why, Ordering::Relaxed, Ordering::Relaxed);
        for leg in [&self.client, &self.server] {
            reset(SockRef::from(leg));
            let _ = leg.shutdown(Shutdown::Both);
        }
    }

    /// Why waiting must end now, if it must.
    fn must_end(&self, stop: &AtomicBool, idle: Duration) -> Option<u8> {
        if self.end.load(Ordering::Relaxed) != END_NONE {
            return Some(self.end.load(Ordering::Relaxed));
        }
        if stop.load(Ordering::Relaxed) {
            return Some(END_STOPPED);
        }
        if self.idle_for() >= idle {
            return Some(END_IDLE);
        }
        None
    }

    /// Copies one direction until end of stream (then shuts down the
    /// destination's write side) or an abnormal end (then aborts the
    /// connection). Returns `END_NONE` for end of stream, else why it ended;
    /// `bytes` counts what was written.
    fn copy(
        &self,
        leg: Leg,
        stop: &AtomicBool,
        idle: Duration,
        buffer: usize,
        bytes: &mut u64,
    ) -> u8 {
        let (from, to) = match leg {
            Leg::ClientToServer => (&self.client, &self.server),
            Leg::ServerToClient => (&self.server, &self.client),
        };
        let mut buf = vec![0u8; buffer];
        loop {
            let n = match (&*from).read(&mut buf) {
                Ok(0) => {
                    if self.end.load(Ordering::Relaxed) != END_NONE {
                        // The other thread aborted: this "end of stream" is
                        // our own shutdown.
                        return self.end.load(Ordering::Relaxed);
                    }
                    let _ = to.shutdown(Shutdown::Write);
                    return END_NONE;
                }
                Ok(n) => {
                    // A busy connection never times out: look at the stop
                    // flag between reads too.
                    if stop.load(Ordering::Relaxed) {
                        self.abort(END_STOPPED);
                        return END_STOPPED;
                    }
                    n
                }
                Err(e) if e.kind() == ErrorKind::Interrupted || is_timeout(&e) => {
                    if let Some(why) = self.must_end(stop, idle) {
                        self.abort(why);
                        return why;
                    }
                    continue;
                }
                Err(_) => {
                    self.abort(END_ERROR);
                    return END_ERROR;
                }
            };
            self.touch();
            let mut data = &buf[..n];
            while !data.is_empty() {
                match (&*to).write(data) {
                    Ok(0) => {
                        self.abort(END_ERROR);
                        return END_ERROR;
                    }
                    Ok(written) => {
                        data = &data[written..];
                        *bytes += written as u64;
                        self.touch();
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted || is_timeout(&e) => {
                        if let Some(why) = self.must_end(stop, idle) {
                            self.abort(why);
                            return why;
                        }
                    }
                    Err(_) => {
                        self.abort(END_ERROR);
                        return END_ERROR;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emu::tcp::bulk::{BulkDirection, TcpBulkServer, TcpBulkServerConfig, encode_header};
    use std::net::TcpListener;

    /// Whether this process may set `IP_TRANSPARENT` (root).
    /// Whether `test` can set `IP_TRANSPARENT` (root); skips or fails as
    /// [`crate::require_or_skip`] decides.
    fn transparent_or_skip(test: &str) -> bool {
        let check = Socket::new(Domain::IPV4, Type::STREAM, None)
            .and_then(|s| s.set_ip_transparent_v4(true))
            .map_err(|e| format!("IP_TRANSPARENT needs root (CAP_NET_ADMIN): {e}"));
        emu::require_or_skip(test, check)
    }

    fn shared(config: TcpPepConfig) -> Arc<Shared> {
        Arc::new(Shared {
            config,
            counters: Counters::default(),
            stop: Arc::new(AtomicBool::new(false)),
        })
    }

    /// A client connected to a stand-in for the intercepting listener, and
    /// the relay thread between it and `server` (loopback, no tproxy).
    fn relay_to(shared: &Arc<Shared>, server: SocketAddr) -> (TcpStream, JoinHandle<Outcome>) {
        let front = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(front.local_addr().unwrap()).unwrap();
        let (accepted, peer) = front.accept().unwrap();
        let me = Arc::clone(shared);
        let relay = thread::spawn(move || {
            let outcome = me.relay(accepted, peer, server);
            me.count(outcome);
            outcome
        });
        (client, relay)
    }

    #[test]
    fn relay_carries_an_upload_and_its_reply_across_a_half_close() {
        if !transparent_or_skip("relay_carries_an_upload_and_its_reply_across_a_half_close") {
            return;
        }
        let mut config = TcpBulkServerConfig::new("127.0.0.1:0".parse().unwrap());
        config.stop_after = Some(1);
        config.deadline = Some(Duration::from_secs(20));
        let server = TcpBulkServer::bind(config).unwrap();
        let server_addr = server.local_addr();
        let server = thread::spawn(move || server.run(Arc::new(AtomicBool::new(false))));
        let pep = shared(TcpPepConfig::default());
        let (client, relay) = relay_to(&pep, server_addr);
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let size = 3_000_000u64;
        (&client)
            .write_all(&encode_header(BulkDirection::Upload, size))
            .unwrap();
        (&client).write_all(&vec![7u8; size as usize]).unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let mut reply = Vec::new();
        (&client).read_to_end(&mut reply).unwrap();
        assert_eq!(reply, [1]);
        assert_eq!(relay.join().unwrap(), Outcome::Completed);
        let records = server.join().unwrap().unwrap();
        assert!(records[0].complete(), "{:?}", records[0]);
        assert_eq!(records[0].bytes, size);
        let stats = pep.counters.snapshot();
        assert_eq!(stats.completed, 1);
        assert_eq!(stats.bytes_client_to_server, size + 9);
        assert_eq!(stats.bytes_server_to_client, 1);
    }

    #[test]
    fn idle_connections_are_closed_on_both_legs() {
        if !transparent_or_skip("idle_connections_are_closed_on_both_legs") {
            return;
        }
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let pep = shared(TcpPepConfig {
            idle_timeout: Duration::from_millis(300),
            ..TcpPepConfig::default()
        });
        let started = Instant::now();
        let (client, relay) = relay_to(&pep, server.local_addr().unwrap());
        let (server_leg, _) = server.accept().unwrap();
        assert_eq!(relay.join().unwrap(), Outcome::Idle);
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
            "{waited:?}"
        );
        // Both ends see the connection end (a reset or end of stream).
        for leg in [&client, &server_leg] {
            leg.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut buf = [0u8; 16];
            assert!(matches!((&*leg).read(&mut buf), Ok(0) | Err(_)));
        }
        assert_eq!(pep.counters.snapshot().idle_closed, 1);
    }

    #[test]
    fn stop_ends_a_busy_connection() {
        if !transparent_or_skip("stop_ends_a_busy_connection") {
            return;
        }
        let mut config = TcpBulkServerConfig::new("127.0.0.1:0".parse().unwrap());
        config.deadline = Some(Duration::from_secs(20));
        let server = TcpBulkServer::bind(config).unwrap();
        let server_addr = server.local_addr();
        let server_stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&server_stop);
        let server = thread::spawn(move || server.run(flag));
        let pep = shared(TcpPepConfig::default());
        let (client, relay) = relay_to(&pep, server_addr);
        // A download far larger than will ever be read.
        (&client)
            .write_all(&encode_header(BulkDirection::Download, u64::MAX / 2))
            .unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = 0;
        while got < 1_000_000 {
            got += (&client).read(&mut buf).unwrap();
        }
        pep.stop.store(true, Ordering::Relaxed);
        let stopping = Instant::now();
        // Keep reading, so the relay stays busy while it notices the flag.
        while matches!((&client).read(&mut buf), Ok(n) if n > 0) {
            assert!(stopping.elapsed() < Duration::from_secs(3));
        }
        assert_eq!(relay.join().unwrap(), Outcome::Stopped);
        assert!(stopping.elapsed() < Duration::from_secs(3));
        server_stop.store(true, Ordering::Relaxed);
        let records = server.join().unwrap().unwrap();
        assert_eq!(records.len(), 1);
        assert!(records[0].error.is_some());
        assert_eq!(pep.counters.snapshot().stopped, 1);
    }

    #[test]
    fn connections_beyond_the_limit_are_refused() {
        let pep = shared(TcpPepConfig {
            max_connections: 1,
            ..TcpPepConfig::default()
        });
        pep.counters.open.store(1, Ordering::Relaxed);
        let front = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        front
            .bind(&SockAddr::from(SocketAddr::from(([127, 0, 0, 1], 0))))
            .unwrap();
        front.listen(4).unwrap();
        let addr = front.local_addr().unwrap().as_socket().unwrap();
        let client = TcpStream::connect(addr).unwrap();
        let (accepted, peer) = front.accept().unwrap();
        assert!(pep.admit(accepted, peer).is_none());
        client
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut buf = [0u8; 4];
        let read = (&client).read(&mut buf);
        assert!(
            matches!(&read, Err(e) if e.kind() == ErrorKind::ConnectionReset),
            "{read:?}"
        );
        let stats = pep.counters.snapshot();
        assert_eq!((stats.refused, stats.connections), (1, 0));
    }
}
