//! A Linux TCP flow bounded by time, for competing flows on a testbed
//! (`[[flows]]` with `transport = "tcp"`): the sender writes zeros with its
//! congestion control (`TCP_CONGESTION`) until its deadline or its byte
//! count, then closes; the sink accepts that one connection and reports
//! every read to the caller, who logs the delivery on the run's clock.
//!
//! Unlike [`super::bulk`], there is no header and no reply: the receiver
//! only counts what arrives, so a flow that ends by time is a complete
//! flow, and its throughput over any window is read from the sink's log.

use super::congestion::set_congestion;
use super::is_timeout;
use socket2::{Domain, Protocol, SockAddr, SockRef, Socket, Type};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often blocking calls wake up to look at the deadline or stop flag.
const POLL: Duration = Duration::from_millis(50);

/// What a sender writes per call.
const CHUNK: usize = 64 * 1024;

/// A sender's settings.
#[derive(Clone, Debug)]
pub struct TcpSenderConfig {
    /// Where the sink listens.
    pub server: SocketAddr,
    /// The local address to bind (port 0: the kernel's choice).
    pub bind: SocketAddr,
    /// The congestion control, as Linux names it (`cubic`, `bbr`, `reno`).
    pub congestion: String,
    /// When to stop sending.
    pub until: Instant,
    /// At most this many bytes (`None`: until the deadline).
    pub bytes: Option<u64>,
}

/// What a sender sent.
#[derive(Clone, Debug)]
pub struct TcpSenderReport {
    /// Bytes the kernel accepted from the sender.
    pub sent: u64,
    /// The congestion control the socket used, read back from the kernel.
    pub congestion: String,
}

/// Connects to the sink and sends until the deadline or the byte count,
/// then closes the connection (a FIN after the data). A connection that
/// cannot be made before the deadline is an error that names the address.
pub fn send(config: &TcpSenderConfig) -> io::Result<TcpSenderReport> {
    let socket = Socket::new(
        Domain::for_address(config.server),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    set_congestion(SockRef::from(&socket), &config.congestion)
        .map_err(|e| io::Error::other(e.to_string()))?;
    socket.set_reuse_address(true)?;
    socket
        .bind(&SockAddr::from(config.bind))
        .map_err(|e| io::Error::new(e.kind(), format!("binding {}: {e}", config.bind)))?;
    let left = config.until.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::Error::new(
            ErrorKind::TimedOut,
            "the flow's end came before it started",
        ));
    }
    socket
        .connect_timeout(&SockAddr::from(config.server), left)
        .map_err(|e| io::Error::new(e.kind(), format!("connecting to {}: {e}", config.server)))?;
    let congestion = super::congestion::congestion_in_use(SockRef::from(&socket))?;
    let mut stream = TcpStream::from(socket);
    stream.set_write_timeout(Some(POLL))?;
    let zeros = [0u8; CHUNK];
    let mut sent = 0u64;
    let limit = config.bytes.unwrap_or(u64::MAX);
    while sent < limit && Instant::now() < config.until {
        let want = (limit - sent).min(CHUNK as u64) as usize;
        match stream.write(&zeros[..want]) {
            Ok(0) => return Err(io::Error::new(ErrorKind::WriteZero, "the sink closed")),
            Ok(n) => sent += n as u64,
            Err(e) if is_timeout(&e) || e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    // A FIN after what the kernel holds; the sink sees the end of stream.
    let _ = stream.shutdown(std::net::Shutdown::Write);
    Ok(TcpSenderReport { sent, congestion })
}

/// A sink listening for one sender.
pub struct TcpSink {
    listener: TcpListener,
}

impl TcpSink {
    /// Listens on `listen` with congestion control `congestion` (which its
    /// accepted socket inherits; it sends only ACKs).
    pub fn bind(listen: SocketAddr, congestion: &str) -> io::Result<TcpSink> {
        let socket = Socket::new(
            Domain::for_address(listen),
            Type::STREAM,
            Some(Protocol::TCP),
        )?;
        set_congestion(SockRef::from(&socket), congestion)
            .map_err(|e| io::Error::other(e.to_string()))?;
        socket.set_reuse_address(true)?;
        socket
            .bind(&SockAddr::from(listen))
            .map_err(|e| io::Error::new(e.kind(), format!("binding {listen}: {e}")))?;
        socket.listen(4)?;
        // Linux's accept honours SO_RCVTIMEO, so accept wakes up to look
        // at the stop flag.
        socket.set_read_timeout(Some(POLL))?;
        Ok(TcpSink {
            listener: TcpListener::from(socket),
        })
    }

    /// Accepts one connection and reads it to its end, calling
    /// `on_read(before)` just before each read's bytes count (`before`:
    /// the bytes received so far), until the sender closes or `stop` is
    /// set. Returns the bytes received.
    pub fn run(self, stop: Arc<AtomicBool>, mut on_read: impl FnMut(u64)) -> io::Result<u64> {
        let mut stream = loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(0);
            }
            match self.listener.accept() {
                Ok((stream, _)) => break stream,
                Err(e) if is_timeout(&e) || e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        };
        stream.set_read_timeout(Some(POLL))?;
        let mut buffer = vec![0u8; CHUNK];
        let mut total = 0u64;
        while !stop.load(Ordering::Relaxed) {
            match stream.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => {
                    on_read(total);
                    total += n as u64;
                }
                Err(e) if is_timeout(&e) || e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sender_stops_at_its_byte_count_and_the_sink_counts_every_byte() {
        let sink = TcpSink::bind("127.0.0.1:0".parse().unwrap(), "cubic").unwrap();
        let addr = sink.listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let reads = std::thread::spawn(move || {
            let mut calls = 0u64;
            let total = sink.run(stop, |_| calls += 1).unwrap();
            (total, calls)
        });
        let report = send(&TcpSenderConfig {
            server: addr,
            bind: "127.0.0.1:0".parse().unwrap(),
            congestion: "cubic".into(),
            until: Instant::now() + Duration::from_secs(10),
            bytes: Some(1_000_000),
        })
        .unwrap();
        assert_eq!(report.sent, 1_000_000);
        assert_eq!(report.congestion, "cubic");
        let (total, calls) = reads.join().unwrap();
        assert_eq!(total, 1_000_000);
        assert!(calls >= 1);
    }

    #[test]
    fn a_sender_stops_at_its_deadline() {
        let sink = TcpSink::bind("127.0.0.1:0".parse().unwrap(), "cubic").unwrap();
        let addr = sink.listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let reads = std::thread::spawn(move || sink.run(stop, |_| {}).unwrap());
        let start = Instant::now();
        let report = send(&TcpSenderConfig {
            server: addr,
            bind: "127.0.0.1:0".parse().unwrap(),
            congestion: "reno".into(),
            until: start + Duration::from_millis(300),
            bytes: None,
        })
        .unwrap();
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(300), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
        assert!(report.sent > 0);
        assert_eq!(reads.join().unwrap(), report.sent);
    }
}
