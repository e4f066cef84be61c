//! The byte layouts of the Robin sidekick protocol (§4.1, §4.2).
//!
//! All integers are big-endian. Two families of messages:
//!
//! **Discovery**, in band on the base connection's 4-tuple, so that it
//! crosses NATs and reaches a transparent proxy:
//!
//! ```text
//! request  sender → receiver's address (the proxy on the path sees it)
//!   0..128    REQUEST_MARKER
//!   128       version (2)
//!   129..137  nonce (u64), echoed by the reply
//!   137..164  zero padding
//!                                                       164 bytes
//! reply    proxy → sender, from the receiver's address and port
//!   0..128    REPLY_MARKER
//!   128       version (2)
//!   129..137  the request's nonce
//!   137..145  session ID (u64, opaque)
//!   145       address family of the proxy: 4 or 6
//!   4 or 16   the proxy's IP address
//!   2         the proxy's UDP port
//!                                             152 (IPv4) or 164 (IPv6) bytes
//! ```
//!
//! The request is padded to the longest reply, so that a proxy never
//! answers a (possibly spoofed) request with more bytes than it received:
//! request and reply travel on the same 4-tuple, so their IP and UDP
//! headers are the same size, and the reply is at most as long as the
//! request on the wire too (amplification ≤ 1).
//!
//! Both markers begin with a zero byte. A QUIC packet's first byte may be
//! zero too (a peer that greases the fixed bit, RFC 9287, as noq-proto
//! does), so the first byte alone tells nothing; the other 127 bytes of the
//! marker make an accidental match with a QUIC packet or any other
//! protocol vanishingly unlikely.
//!
//! **Control**, between the sender's own UDP port and the proxy's address:
//!
//! ```text
//!   0         version (high nibble, 2) | kind (low nibble)
//!   1..9      session ID (u64)
//! kind 1, configure   sender → proxy                         22 bytes
//!   9         interval unit: 0 = milliseconds, 1 = packets
//!   10..14    interval (u32, ≥ 1)
//!   14        threshold t (1..=255)
//!   15        identifier width in bytes: 2, 4 or 8
//!   16..18    identifier offset in the UDP payload (u16)
//!   18..22    grant: quACKs the sender has granted in all, a running
//!             total (u32, wrapping); the proxy adds what it has not yet
//!             applied, so a repeated or reordered grant adds nothing
//! kind 2, reset       sender → proxy                         10 bytes
//!   9         epoch (u8): the sender's reset counter
//! kind 3, quACK       proxy → sender                    14 + quACK bytes
//!   9..13     quota left after this quACK (u32)
//!   13        the epoch of the last reset applied
//!   14..      a quACK message (quack::wire), to the end of the datagram
//! ```
//!
//! The session ID in a quACK is the *next* ID: the proxy rotates it with
//! every quACK, and accepts control messages only with one of the IDs it has
//! sent recently. Only a party that receives the quACKs — the real sender —
//! can raise the quota or reconfigure, which defeats reflection attacks
//! (§4.1): a spoofed request earns at most the initial quota of one quACK.
//!
//! Version 1 (a 137-byte request, a grant added as it came) is not
//! understood: its request was smaller than the reply it earned.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use thiserror::Error;

/// The protocol version this crate writes and reads.
pub const VERSION: u8 = 2;

/// Bytes of a discovery marker.
pub const MARKER_LEN: usize = 128;

/// A fixed 128-byte pattern: a zero byte, an ASCII tag, then a filler from a
/// 32-bit linear congruential generator seeded with `seed`.
const fn marker(tag: &[u8; 15], seed: u32) -> [u8; MARKER_LEN] {
    let mut out = [0u8; MARKER_LEN];
    let mut i = 0;
    while i < tag.len() {
        out[1 + i] = tag[i];
        i += 1;
    }
    let mut x = seed;
    let mut i = 16;
    while i < MARKER_LEN {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        out[i] = (x >> 24) as u8;
        i += 1;
    }
    out
}

/// Starts a sidekick-request packet.
pub const REQUEST_MARKER: [u8; MARKER_LEN] = marker(b"sidekick-reques", 0x5349_444b);
/// Starts a sidekick-reply packet.
pub const REPLY_MARKER: [u8; MARKER_LEN] = marker(b"sidekick-reply.", 0x5349_444c);

/// Bytes of a reply carrying an IPv4 proxy address.
pub const REPLY_LEN_V4: usize = MARKER_LEN + 1 + 8 + 8 + 1 + 4 + 2;

/// Bytes of a reply carrying an IPv6 proxy address: the longest reply.
pub const REPLY_LEN_V6: usize = MARKER_LEN + 1 + 8 + 8 + 1 + 16 + 2;

/// Bytes of a request: padded to the longest reply.
pub const REQUEST_LEN: usize = REPLY_LEN_V6;

// No reply is longer than a request.
const _: () = assert!(REQUEST_LEN >= REPLY_LEN_V6 && REQUEST_LEN >= REPLY_LEN_V4);

/// Bytes of a request before its padding.
const REQUEST_FIELDS_LEN: usize = MARKER_LEN + 1 + 8;

const KIND_CONFIGURE: u8 = 1;
const KIND_RESET: u8 = 2;
const KIND_QUACK: u8 = 3;
const QUACK_HEADER_LEN: usize = 14;

/// A message that does not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum ParseError {
    /// Shorter than its fixed fields.
    #[error("message truncated: {needed} bytes needed, {got} present")]
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// Longer than its fixed layout.
    #[error("{0} unexpected bytes after the message")]
    TrailingBytes(usize),
    /// Not a sidekick discovery marker.
    #[error("not a sidekick discovery message")]
    NotDiscovery,
    /// A version this crate does not speak.
    #[error("unsupported sidekick version {0}")]
    UnsupportedVersion(u8),
    /// An unknown control kind.
    #[error("unknown control message kind {0}")]
    UnknownKind(u8),
    /// A field out of its range.
    #[error("invalid {field}: {value}")]
    InvalidField {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
}

/// A discovery message: in band, on the base connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discovery {
    /// The sender asks whether a sidekick proxy is on the path.
    Request {
        /// Echoed by the reply.
        nonce: u64,
    },
    /// A proxy answers, as the receiver.
    Reply {
        /// The request's nonce.
        nonce: u64,
        /// The session ID to present in the first control message.
        session: u64,
        /// Where to send control messages.
        proxy: SocketAddr,
    },
}

impl Discovery {
    /// Whether `payload` starts with either marker (cheap: compares the
    /// first bytes before the rest).
    pub fn is_discovery(payload: &[u8]) -> bool {
        payload.len() >= MARKER_LEN
            && payload[0] == 0
            && (payload[..MARKER_LEN] == REQUEST_MARKER || payload[..MARKER_LEN] == REPLY_MARKER)
    }

    /// Appends the message's bytes to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Discovery::Request { nonce } => {
                out.extend_from_slice(&REQUEST_MARKER);
                out.push(VERSION);
                out.extend_from_slice(&nonce.to_be_bytes());
                out.extend_from_slice(&[0; REQUEST_LEN - REQUEST_FIELDS_LEN]);
            }
            Discovery::Reply {
                nonce,
                session,
                proxy,
            } => {
                out.extend_from_slice(&REPLY_MARKER);
                out.push(VERSION);
                out.extend_from_slice(&nonce.to_be_bytes());
                out.extend_from_slice(&session.to_be_bytes());
                match proxy.ip() {
                    IpAddr::V4(ip) => {
                        out.push(4);
                        out.extend_from_slice(&ip.octets());
                    }
                    IpAddr::V6(ip) => {
                        out.push(6);
                        out.extend_from_slice(&ip.octets());
                    }
                }
                out.extend_from_slice(&proxy.port().to_be_bytes());
            }
        }
    }

    /// The message as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Parses a discovery message.
    pub fn parse(bytes: &[u8]) -> Result<Discovery, ParseError> {
        let mut reader = Reader::new(bytes);
        let marker = reader.take(MARKER_LEN)?;
        let request = if marker == REQUEST_MARKER {
            true
        } else if marker == REPLY_MARKER {
            false
        } else {
            return Err(ParseError::NotDiscovery);
        };
        let version = reader.u8()?;
        if version != VERSION {
            return Err(ParseError::UnsupportedVersion(version));
        }
        let nonce = reader.u64()?;
        let message = if request {
            let padding = reader.take(REQUEST_LEN - REQUEST_FIELDS_LEN)?;
            if let Some(&byte) = padding.iter().find(|&&b| b != 0) {
                return Err(invalid("request padding", byte.into()));
            }
            Discovery::Request { nonce }
        } else {
            let session = reader.u64()?;
            let ip = match reader.u8()? {
                4 => IpAddr::V4(Ipv4Addr::from(reader.array::<4>()?)),
                6 => IpAddr::V6(Ipv6Addr::from(reader.array::<16>()?)),
                family => {
                    return Err(ParseError::InvalidField {
                        field: "address family",
                        value: family.into(),
                    });
                }
            };
            let port = reader.u16()?;
            Discovery::Reply {
                nonce,
                session,
                proxy: SocketAddr::new(ip, port),
            }
        };
        reader.finish()?;
        Ok(message)
    }
}

/// How often the proxy sends quACKs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interval {
    /// Every this many milliseconds (while the flow has new packets).
    Millis(u32),
    /// After every this many packets of the flow.
    Packets(u32),
}

/// The sender's configuration of its session (§4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The quACK interval.
    pub interval: Interval,
    /// The threshold t: power sums per quACK.
    pub threshold: u8,
    /// Identifier width in bytes: 2, 4 or 8.
    pub id_bytes: u8,
    /// Where the identifier starts in each UDP payload.
    pub id_offset: u16,
    /// The sender's grant: quACKs it has granted in all since it
    /// configured, a running total that wraps. The proxy adds to the quota
    /// left only the part it has not applied yet (and only for a session ID
    /// that came in a quACK), so repeating a grant is harmless.
    pub quota: u32,
}

/// A control message between the sender and the proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Control {
    /// Configure the session (also grants quACKs).
    Configure {
        /// A session ID the proxy issued recently.
        session: u64,
        /// The settings.
        config: Config,
    },
    /// Reinitialise the flow's quACK.
    Reset {
        /// A session ID the proxy issued recently.
        session: u64,
        /// The sender's reset counter, echoed in later quACKs.
        epoch: u8,
    },
    /// A quACK and the session's state.
    Quack {
        /// The session ID for the sender's next control message.
        next_session: u64,
        /// QuACKs left before the sender must grant more.
        quota_left: u32,
        /// The epoch of the last reset the proxy applied.
        epoch: u8,
        /// The quACK message (`quack::wire` bytes).
        quack: Vec<u8>,
    },
}

impl Control {
    /// Appends the message's bytes to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let header = |out: &mut Vec<u8>, kind: u8, session: u64| {
            out.push(VERSION << 4 | kind);
            out.extend_from_slice(&session.to_be_bytes());
        };
        match self {
            Control::Configure { session, config } => {
                header(out, KIND_CONFIGURE, *session);
                let (unit, value) = match config.interval {
                    Interval::Millis(ms) => (0, ms),
                    Interval::Packets(n) => (1, n),
                };
                out.push(unit);
                out.extend_from_slice(&value.to_be_bytes());
                out.push(config.threshold);
                out.push(config.id_bytes);
                out.extend_from_slice(&config.id_offset.to_be_bytes());
                out.extend_from_slice(&config.quota.to_be_bytes());
            }
            Control::Reset { session, epoch } => {
                header(out, KIND_RESET, *session);
                out.push(*epoch);
            }
            Control::Quack {
                next_session,
                quota_left,
                epoch,
                quack,
            } => {
                header(out, KIND_QUACK, *next_session);
                out.extend_from_slice(&quota_left.to_be_bytes());
                out.push(*epoch);
                out.extend_from_slice(quack);
            }
        }
    }

    /// The message as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Parses a control message. The quACK inside a `Quack` is returned as
    /// bytes; `quack::wire` parses it for the configured identifier width.
    pub fn parse(bytes: &[u8]) -> Result<Control, ParseError> {
        let mut reader = Reader::new(bytes);
        let first = reader.u8()?;
        if first >> 4 != VERSION {
            return Err(ParseError::UnsupportedVersion(first >> 4));
        }
        let session = reader.u64()?;
        let message = match first & 0x0f {
            KIND_CONFIGURE => {
                let interval = match (reader.u8()?, reader.u32()?) {
                    (_, 0) => return Err(invalid("interval", 0)),
                    (0, ms) => Interval::Millis(ms),
                    (1, n) => Interval::Packets(n),
                    (unit, _) => return Err(invalid("interval unit", unit.into())),
                };
                let threshold = reader.u8()?;
                if threshold == 0 {
                    return Err(invalid("threshold", 0));
                }
                let id_bytes = reader.u8()?;
                if !matches!(id_bytes, 2 | 4 | 8) {
                    return Err(invalid("identifier width", id_bytes.into()));
                }
                let id_offset = reader.u16()?;
                let quota = reader.u32()?;
                Control::Configure {
                    session,
                    config: Config {
                        interval,
                        threshold,
                        id_bytes,
                        id_offset,
                        quota,
                    },
                }
            }
            KIND_RESET => Control::Reset {
                session,
                epoch: reader.u8()?,
            },
            KIND_QUACK => {
                let quota_left = reader.u32()?;
                let epoch = reader.u8()?;
                let quack = reader.rest().to_vec();
                if quack.is_empty() {
                    return Err(ParseError::Truncated {
                        needed: QUACK_HEADER_LEN + 1,
                        got: bytes.len(),
                    });
                }
                Control::Quack {
                    next_session: session,
                    quota_left,
                    epoch,
                    quack,
                }
            }
            kind => return Err(ParseError::UnknownKind(kind)),
        };
        reader.finish()?;
        Ok(message)
    }
}

fn invalid(field: &'static str, value: u64) -> ParseError {
    ParseError::InvalidField { field, value }
}

/// Reads fields off the front of a message.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ParseError> {
        let end = self.at + n;
        let field = self.bytes.get(self.at..end).ok_or(ParseError::Truncated {
            needed: end,
            got: self.bytes.len(),
        })?;
        self.at = end;
        Ok(field)
    }

    /// The next `N` bytes as an array.
    fn array<const N: usize>(&mut self) -> Result<[u8; N], ParseError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, ParseError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, ParseError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, ParseError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, ParseError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    fn rest(&mut self) -> &'a [u8] {
        let rest = &self.bytes[self.at..];
        self.at = self.bytes.len();
        rest
    }

    fn finish(&self) -> Result<(), ParseError> {
        match self.bytes.len() - self.at {
            0 => Ok(()),
            n => Err(ParseError::TrailingBytes(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_the_documented_layout() {
        assert_eq!(
            Discovery::Request { nonce: 7 }.to_bytes().len(),
            REQUEST_LEN
        );
        let v4 = Discovery::Reply {
            nonce: 1,
            session: 2,
            proxy: "10.0.0.1:1234".parse().unwrap(),
        };
        assert_eq!(v4.to_bytes().len(), 152);
        assert_eq!(REPLY_LEN_V4, 152);
        let v6 = Discovery::Reply {
            nonce: 1,
            session: 2,
            proxy: "[fd00::1]:1234".parse().unwrap(),
        };
        assert_eq!(v6.to_bytes().len(), 164);
        assert_eq!(REPLY_LEN_V6, 164);
        let config = Config {
            interval: Interval::Millis(30),
            threshold: 10,
            id_bytes: 4,
            id_offset: 21,
            quota: 100,
        };
        let configure = Control::Configure { session: 9, config };
        assert_eq!(configure.to_bytes().len(), 22);
        assert_eq!(
            Control::Reset {
                session: 9,
                epoch: 3
            }
            .to_bytes()
            .len(),
            10
        );
    }

    #[test]
    fn markers_are_distinct_and_never_quic() {
        assert_ne!(REQUEST_MARKER, REPLY_MARKER);
        assert_eq!(REQUEST_MARKER[0] & 0x40, 0);
        assert_eq!(&REQUEST_MARKER[1..16], b"sidekick-reques");
        let mut quic_like = REQUEST_MARKER;
        quic_like[0] = 0x40;
        assert!(!Discovery::is_discovery(&quic_like));
        assert!(Discovery::is_discovery(
            &Discovery::Request { nonce: 1 }.to_bytes()
        ));
    }
}
