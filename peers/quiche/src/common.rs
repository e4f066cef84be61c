//! What the client and the server share: quiche's configuration, the
//! throwaway certificate, datagram output at quiche's pacing times, the
//! clocks and the protocol's constants.

use boring::asn1::Asn1Time;
use boring::bn::BigNum;
use boring::ec::{EcGroup, EcKey};
use boring::hash::MessageDigest;
use boring::nid::Nid;
use boring::pkey::PKey;
use boring::ssl::{SslContextBuilder, SslMethod};
use boring::x509::{X509, X509NameBuilder};
use mio::net::UdpSocket;
use std::fs::File;
use std::io::BufWriter;
use std::net::SocketAddr;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The ALPN of pepkit's bulk and RTC protocol (peers/README.md).
pub const ALPN: &[u8] = b"pepkit-bulk";
/// Bytes of a download request's or upload's header: kind, then N (u64).
pub const BULK_HEADER: usize = 9;
/// Bytes of an RTC request: 2, frames (u64), frames per second and bytes
/// per frame (u32s).
pub const RTC_HEADER: usize = 17;
/// Bytes at the start of every RTC frame: its index and generation time.
pub const FRAME_HEAD: usize = 16;
/// Bounds the client's per-frame table (24 MB) and the server's requests,
/// as the ngtcp2 RTC peer does.
pub const MAX_FRAMES: u64 = 1_000_000;
/// The largest frame a server accepts to generate.
pub const MAX_FRAME_BYTES: u64 = 1 << 20;
/// Datagrams read per wake-up: bounds the time between timer checks.
pub const MAX_READS: usize = 256;
/// Datagrams one connection sends per wake-up, for the same reason.
pub const MAX_SENDS: usize = 64;
/// quiche's examples' datagram size (quiche's own default is 1200; the
/// path MTU in pepkit's testbeds is 1500). No PMTU discovery.
pub const MAX_DATAGRAM: usize = 1350;
/// Receive buffer: a whole UDP datagram, whatever the peer sends.
pub const RECV_BUF: usize = 65535;
/// quic-go's maximum receive windows, as the other peers use them: the
/// initial windows are the maxima, so quiche's window auto-tuning cannot
/// grow them further.
const CONNECTION_WINDOW: u64 = 15 << 20;
const STREAM_WINDOW: u64 = 6 << 20;
const IDLE_TIMEOUT_MS: u64 = 30_000;

/// Zeros for bulk data and frame padding, written a slice at a time.
pub static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

/// Nanoseconds of the Unix epoch (frame generation and arrival times).
pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A quiche configuration for one side. `uni_streams` is how many
/// unidirectional streams the peer may open (the RTC client grants one
/// per frame); the server accepts a few bidirectional streams (one is
/// used) and the client none.
pub fn config(server: bool, uni_streams: u64) -> Result<quiche::Config, String> {
    let tls_err = |e: boring::error::ErrorStack| format!("TLS setup: {e}");
    let mut tls = SslContextBuilder::new(SslMethod::tls()).map_err(tls_err)?;
    if server {
        let (cert, key) = self_signed().map_err(|e| format!("certificate: {e}"))?;
        tls.set_certificate(&cert).map_err(tls_err)?;
        tls.set_private_key(&key).map_err(tls_err)?;
    }
    let quiche_err = |e: quiche::Error| format!("quiche configuration: {e}");
    let mut c = quiche::Config::with_boring_ssl_ctx_builder(quiche::PROTOCOL_VERSION, tls)
        .map_err(quiche_err)?;
    c.set_application_protos(&[ALPN]).map_err(quiche_err)?;
    // The server's certificate is made at its start: nothing to verify it against.
    c.verify_peer(false);
    // quiche's default, named so that nobody has to look it up: PEMI §6
    // runs all endpoints with CUBIC.
    c.set_cc_algorithm(quiche::CongestionControlAlgorithm::CUBIC);
    c.set_max_idle_timeout(IDLE_TIMEOUT_MS);
    c.set_max_send_udp_payload_size(MAX_DATAGRAM);
    c.set_initial_max_data(CONNECTION_WINDOW);
    c.set_max_connection_window(CONNECTION_WINDOW);
    c.set_initial_max_stream_data_bidi_local(STREAM_WINDOW);
    c.set_initial_max_stream_data_bidi_remote(STREAM_WINDOW);
    c.set_initial_max_stream_data_uni(STREAM_WINDOW);
    c.set_max_stream_window(STREAM_WINDOW);
    c.set_initial_max_streams_bidi(if server { 4 } else { 0 });
    c.set_initial_max_streams_uni(uni_streams);
    // Connections are told apart by connection ID, but no path changes
    // are expected in a testbed.
    c.set_disable_active_migration(true);
    Ok(c)
}

/// A self-signed P-256 certificate and its key, made at start as the
/// other peers do; clients do not verify it.
fn self_signed() -> Result<(X509, PKey<boring::pkey::Private>), boring::error::ErrorStack> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1)?;
    let key = PKey::from_ec_key(EcKey::generate(&group)?)?;
    let mut name = X509NameBuilder::new()?;
    name.append_entry_by_nid(Nid::COMMONNAME, "pepkit-peer")?;
    let name = name.build();
    let mut cert = X509::builder()?;
    cert.set_version(2)?;
    cert.set_serial_number(&*BigNum::from_u32(1)?.to_asn1_integer()?)?;
    cert.set_subject_name(&name)?;
    cert.set_issuer_name(&name)?;
    cert.set_pubkey(&key)?;
    cert.set_not_before(&*Asn1Time::from_unix(unix_secs() - 3600)?)?;
    cert.set_not_after(&*Asn1Time::days_from_now(1)?)?;
    cert.sign(&key, MessageDigest::sha256())?;
    Ok((cert.build(), key))
}

fn unix_secs() -> i64 {
    (unix_ns() / 1_000_000_000) as i64
}

/// A random connection ID of quiche's maximum length.
pub fn random_cid() -> Result<quiche::ConnectionId<'static>, String> {
    let mut id = [0; quiche::MAX_CONN_ID_LEN];
    boring::rand::rand_bytes(&mut id).map_err(|e| format!("random: {e}"))?;
    Ok(quiche::ConnectionId::from_vec(id.to_vec()))
}

/// With `PEPKIT_QLOGDIR` set (and not empty), `conn` writes a qlog
/// (JSON-SEQ, quiche's base events) to `DIR/<trace id>_<side>.sqlog`,
/// as the quic-go peer does, and `write_stats` its loss counters at its
/// end; unset, nothing is written.
pub fn qlog(conn: &mut quiche::Connection, side: &str) {
    let Some(path) = diagnostic_file(conn, side, "sqlog") else {
        return;
    };
    match File::create(&path) {
        Ok(file) => conn.set_qlog(
            Box::new(BufWriter::new(file)),
            format!("quiche-peer {side}"),
            String::new(),
        ),
        Err(e) => eprintln!("quiche-peer: qlog {}: {e}", path.display()),
    }
}

/// With `PEPKIT_QLOGDIR` set, writes quiche's loss counters for `conn`
/// (datagrams sent, declared lost, of them acknowledged later, i.e.
/// spurious, and retransmitted) to `DIR/<trace id>_<side>.stats` as one
/// JSON line: quiche's base-level qlog has no loss events.
pub fn write_stats(conn: &quiche::Connection, side: &str) {
    let Some(path) = diagnostic_file(conn, side, "stats") else {
        return;
    };
    let s = conn.stats();
    let line = format!(
        "{{\"sent\":{},\"lost\":{},\"spurious_lost\":{},\"retrans\":{}}}\n",
        s.sent, s.lost, s.spurious_lost, s.retrans
    );
    if let Err(e) = std::fs::write(&path, line) {
        eprintln!("quiche-peer: {}: {e}", path.display());
    }
}

/// `DIR/<trace id>_<side>.<extension>` when `PEPKIT_QLOGDIR=DIR` is set
/// and not empty.
fn diagnostic_file(
    conn: &quiche::Connection,
    side: &str,
    extension: &str,
) -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("PEPKIT_QLOGDIR").filter(|d| !d.is_empty())?;
    Some(std::path::Path::new(&dir).join(format!("{}_{side}.{extension}", conn.trace_id())))
}

/// One connection's datagram output. quiche stamps each datagram with
/// the time it may leave (`SendInfo::at`, its pacing); a datagram whose
/// time has not come waits here, and the connection writes no more until
/// it has gone, so at most one datagram per connection is held back.
pub struct Output {
    buf: Vec<u8>,
    held: Option<(usize, SocketAddr, Instant)>,
}

/// What `Output::flush` left behind.
pub enum Flushed {
    /// quiche has nothing more to send now.
    Idle,
    /// Come back at this time: a datagram waits for its pacing time, or the
    /// per-wake-up bound was reached (then the time is now).
    At(Instant),
}

impl Output {
    pub fn new() -> Output {
        Output {
            buf: vec![0; MAX_DATAGRAM.max(1500)],
            held: None,
        }
    }

    /// Sends what `conn` has to send now, at most `MAX_SENDS` datagrams.
    /// A send error (full socket buffer, no route, no listener yet) is a
    /// lost datagram, which QUIC repairs; only quiche's own errors fail.
    pub fn flush(
        &mut self,
        conn: &mut quiche::Connection,
        socket: &UdpSocket,
    ) -> Result<Flushed, quiche::Error> {
        for _ in 0..MAX_SENDS {
            let now = Instant::now();
            if let Some((len, to, at)) = self.held {
                if at > now {
                    return Ok(Flushed::At(at));
                }
                let _ = socket.send_to(&self.buf[..len], to);
                self.held = None;
                continue;
            }
            match conn.send(&mut self.buf) {
                Ok((len, info)) => {
                    if info.at > now {
                        self.held = Some((len, info.to, info.at));
                    } else {
                        let _ = socket.send_to(&self.buf[..len], info.to);
                    }
                }
                Err(quiche::Error::Done) => return Ok(Flushed::Idle),
                Err(e) => return Err(e),
            }
        }
        Ok(Flushed::At(Instant::now()))
    }
}

/// Hands quiche `left` zero bytes for `stream` until it takes no more
/// (flow control, congestion window), FIN with the last; returns whether
/// all of them, and the FIN, have been handed over.
pub fn send_zeros(
    conn: &mut quiche::Connection,
    stream: u64,
    left: &mut u64,
) -> Result<bool, quiche::Error> {
    loop {
        let n = (*left).min(ZEROS.len() as u64);
        match conn.stream_send(stream, &ZEROS[..n as usize], n == *left) {
            Ok(k) => {
                *left -= k as u64;
                if k as u64 == n && *left == 0 {
                    return Ok(true);
                }
                if (k as u64) < n {
                    return Ok(false);
                }
            }
            Err(quiche::Error::Done) => return Ok(false),
            Err(e) => return Err(e),
        }
    }
}

/// The earlier of two optional times.
pub fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Big-endian integers of the protocol's headers.
pub fn be_u64(b: &[u8]) -> u64 {
    b.iter().take(8).fold(0, |v, &x| v << 8 | u64::from(x))
}

/// Writes a connection's error, if it has one, as text.
pub fn describe_close(conn: &quiche::Connection) -> String {
    if let Some(e) = conn.peer_error() {
        format!(
            "the server closed the connection (code {:#x}, {:?})",
            e.error_code,
            String::from_utf8_lossy(&e.reason)
        )
    } else if let Some(e) = conn.local_error() {
        format!(
            "the connection failed (code {:#x}, {:?})",
            e.error_code,
            String::from_utf8_lossy(&e.reason)
        )
    } else if conn.is_timed_out() {
        "the connection timed out (idle)".to_string()
    } else {
        "the connection closed".to_string()
    }
}
