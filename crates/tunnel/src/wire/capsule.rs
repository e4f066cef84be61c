//! Capsules (RFC 9297 §3.2) on a CONNECT stream's DATA, with the types we
//! use: DATAGRAM (RFC 9297), the connection-ID capsules of QUIC-aware
//! proxying (draft-ietf-masque-quic-proxy-01 §3: REGISTER/ACK/CLOSE of
//! client and target CIDs, type values 0xffe400–0xffe405) and our
//! TUNNEL_INFO (TECC feedback, [`super::feedback`]). Unknown types are
//! skipped, as RFC 9297 requires.

use super::feedback::{Feedback, QUIC_INFO};
use super::{WireError, varint};

/// DATAGRAM (RFC 9297 §3.5).
pub const DATAGRAM: u64 = 0x00;
/// REGISTER_CLIENT_CID (draft-ietf-masque-quic-proxy-01 §9.2).
pub const REGISTER_CLIENT_CID: u64 = 0xffe400;
/// REGISTER_TARGET_CID.
pub const REGISTER_TARGET_CID: u64 = 0xffe401;
/// ACK_CLIENT_CID.
pub const ACK_CLIENT_CID: u64 = 0xffe402;
/// ACK_TARGET_CID.
pub const ACK_TARGET_CID: u64 = 0xffe403;
/// CLOSE_CLIENT_CID.
pub const CLOSE_CLIENT_CID: u64 = 0xffe404;
/// CLOSE_TARGET_CID.
pub const CLOSE_TARGET_CID: u64 = 0xffe405;
/// TUNNEL_INFO: TECC's feedback from the tunnel server (ours, not
/// registered; the number that opens a QUIC_INFO datagram, see
/// [`super::feedback`]).
pub const TUNNEL_INFO: u64 = QUIC_INFO;

/// The largest capsule we accept: a whole UDP payload plus prefixes.
pub const MAX_CAPSULE: usize = 65_535 + 32;
/// The longest connection ID (QUIC version 1, RFC 9000 §17.2).
pub const MAX_CID: usize = 20;

/// One capsule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Capsule {
    /// An HTTP datagram on the stream: its context ID and payload.
    Datagram {
        /// Context ID (0: a UDP payload, RFC 9298 §5).
        context: u64,
        /// The payload.
        payload: Vec<u8>,
    },
    /// The client registers a client CID and the virtual CID the proxy
    /// must use when forwarding to it.
    RegisterClientCid {
        /// The real client CID.
        cid: Vec<u8>,
        /// The virtual client CID (empty: no forwarding).
        virtual_cid: Vec<u8>,
        /// Stateless reset token (empty or 16 bytes).
        reset_token: Vec<u8>,
    },
    /// The client registers a target CID.
    RegisterTargetCid {
        /// The target's CID.
        cid: Vec<u8>,
        /// The target's stateless reset token (empty or 16 bytes).
        reset_token: Vec<u8>,
    },
    /// The proxy accepts a client CID.
    AckClientCid {
        /// The client CID.
        cid: Vec<u8>,
    },
    /// The proxy accepts a target CID and names its virtual target CID.
    AckTargetCid {
        /// The target CID.
        cid: Vec<u8>,
        /// The virtual target CID the client must forward with.
        virtual_cid: Vec<u8>,
        /// Stateless reset token (empty or 16 bytes).
        reset_token: Vec<u8>,
    },
    /// Either side removes (or the proxy refuses) a client CID.
    CloseClientCid {
        /// The client CID.
        cid: Vec<u8>,
    },
    /// Either side removes (or the proxy refuses) a target CID.
    CloseTargetCid {
        /// The target CID.
        cid: Vec<u8>,
    },
    /// TECC feedback.
    TunnelInfo(Feedback),
}

fn read_bytes(input: &mut &[u8], most: usize, what: &'static str) -> Result<Vec<u8>, WireError> {
    let len = varint::read_len(input, most, what)?;
    let bytes = input.get(..len).ok_or(WireError::Truncated)?.to_vec();
    *input = &input[len..];
    Ok(bytes)
}

fn read_token(input: &mut &[u8]) -> Result<Vec<u8>, WireError> {
    let token = read_bytes(input, 16, "stateless reset token")?;
    if token.is_empty() || token.len() == 16 {
        Ok(token)
    } else {
        Err(WireError::Malformed("a stateless reset token has 16 bytes"))
    }
}

fn write_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    varint::write(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn plain_cid(value: &[u8]) -> Result<Vec<u8>, WireError> {
    if value.len() > MAX_CID {
        return Err(WireError::TooLarge("connection ID"));
    }
    Ok(value.to_vec())
}

impl Capsule {
    /// Parses a capsule of type `kind` from its value; `None` for a type we
    /// do not know (to be skipped).
    pub fn decode(kind: u64, mut value: &[u8]) -> Result<Option<Capsule>, WireError> {
        let input = &mut value;
        let capsule = match kind {
            DATAGRAM => {
                let context = varint::read(input)?;
                Capsule::Datagram {
                    context,
                    payload: input.to_vec(),
                }
            }
            REGISTER_CLIENT_CID | ACK_TARGET_CID => {
                let cid = read_bytes(input, MAX_CID, "connection ID")?;
                let virtual_cid = read_bytes(input, MAX_CID, "virtual connection ID")?;
                let reset_token = read_token(input)?;
                if kind == REGISTER_CLIENT_CID {
                    Capsule::RegisterClientCid {
                        cid,
                        virtual_cid,
                        reset_token,
                    }
                } else {
                    Capsule::AckTargetCid {
                        cid,
                        virtual_cid,
                        reset_token,
                    }
                }
            }
            REGISTER_TARGET_CID => {
                let cid = read_bytes(input, MAX_CID, "connection ID")?;
                let reset_token = read_token(input)?;
                Capsule::RegisterTargetCid { cid, reset_token }
            }
            ACK_CLIENT_CID => Capsule::AckClientCid {
                cid: plain_cid(value)?,
            },
            CLOSE_CLIENT_CID => Capsule::CloseClientCid {
                cid: plain_cid(value)?,
            },
            CLOSE_TARGET_CID => Capsule::CloseTargetCid {
                cid: plain_cid(value)?,
            },
            TUNNEL_INFO => Capsule::TunnelInfo(Feedback::decode_fields(input)?),
            _ => return Ok(None),
        };
        if !value.is_empty()
            && !matches!(
                kind,
                DATAGRAM | ACK_CLIENT_CID | CLOSE_CLIENT_CID | CLOSE_TARGET_CID
            )
        {
            return Err(WireError::Malformed("bytes after a capsule's fields"));
        }
        Ok(Some(capsule))
    }

    /// Appends the capsule (type, length, value).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut value = Vec::new();
        let kind = match self {
            Capsule::Datagram { context, payload } => {
                varint::write(&mut value, *context);
                value.extend_from_slice(payload);
                DATAGRAM
            }
            Capsule::RegisterClientCid {
                cid,
                virtual_cid,
                reset_token,
            }
            | Capsule::AckTargetCid {
                cid,
                virtual_cid,
                reset_token,
            } => {
                write_bytes(&mut value, cid);
                write_bytes(&mut value, virtual_cid);
                write_bytes(&mut value, reset_token);
                if matches!(self, Capsule::RegisterClientCid { .. }) {
                    REGISTER_CLIENT_CID
                } else {
                    ACK_TARGET_CID
                }
            }
            Capsule::RegisterTargetCid { cid, reset_token } => {
                write_bytes(&mut value, cid);
                write_bytes(&mut value, reset_token);
                REGISTER_TARGET_CID
            }
            Capsule::AckClientCid { cid } => {
                value.extend_from_slice(cid);
                ACK_CLIENT_CID
            }
            Capsule::CloseClientCid { cid } => {
                value.extend_from_slice(cid);
                CLOSE_CLIENT_CID
            }
            Capsule::CloseTargetCid { cid } => {
                value.extend_from_slice(cid);
                CLOSE_TARGET_CID
            }
            Capsule::TunnelInfo(feedback) => {
                feedback.encode_fields(&mut value);
                TUNNEL_INFO
            }
        };
        varint::write(out, kind);
        varint::write(out, value.len() as u64);
        out.extend_from_slice(&value);
    }
}

/// Appends a DATAGRAM capsule of a UDP payload (context 0) without
/// building a [`Capsule`].
pub fn encode_datagram(out: &mut Vec<u8>, payload: &[u8]) {
    varint::write(out, DATAGRAM);
    varint::write(out, 1 + payload.len() as u64);
    out.push(0);
    out.extend_from_slice(payload);
}

/// Splits a stream of capsules as its bytes arrive.
#[derive(Clone, Debug, Default)]
pub struct CapsuleReader {
    buf: Vec<u8>,
    /// Bytes of an unknown capsule still to skip.
    skip: u64,
}

impl CapsuleReader {
    /// Takes more bytes and appends the capsules they complete.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<Capsule>) -> Result<(), WireError> {
        let mut input = input;
        if self.skip > 0 {
            let take = usize::try_from(self.skip)
                .unwrap_or(usize::MAX)
                .min(input.len());
            self.skip -= take as u64;
            input = &input[take..];
        }
        self.buf.extend_from_slice(input);
        let mut at = 0;
        let result = loop {
            let mut cursor = &self.buf[at..];
            let (kind, len) = match (varint::read(&mut cursor), varint::read(&mut cursor)) {
                (Ok(kind), Ok(len)) => (kind, len),
                _ => break Ok(()),
            };
            let header = self.buf.len() - at - cursor.len();
            let known = kind == DATAGRAM
                || kind == TUNNEL_INFO
                || (REGISTER_CLIENT_CID..=CLOSE_TARGET_CID).contains(&kind);
            if !known {
                at += header;
                let left = self.buf.len() - at;
                let take = usize::try_from(len).unwrap_or(usize::MAX).min(left);
                at += take;
                self.skip = len - take as u64;
                if self.skip > 0 {
                    break Ok(());
                }
                continue;
            }
            let Some(len) = usize::try_from(len).ok().filter(|&l| l <= MAX_CAPSULE) else {
                break Err(WireError::TooLarge("capsule"));
            };
            let Some(value) = cursor.get(..len) else {
                break Ok(());
            };
            match Capsule::decode(kind, value) {
                Ok(Some(capsule)) => out.push(capsule),
                Ok(None) => {}
                Err(e) => break Err(e),
            }
            at += header + len;
        };
        self.buf.drain(..at);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all() -> Vec<Capsule> {
        vec![
            Capsule::Datagram {
                context: 0,
                payload: vec![1, 2, 3],
            },
            Capsule::RegisterClientCid {
                cid: vec![1; 8],
                virtual_cid: vec![2; 8],
                reset_token: vec![],
            },
            Capsule::RegisterTargetCid {
                cid: vec![3; 8],
                reset_token: vec![9; 16],
            },
            Capsule::AckClientCid { cid: vec![1; 8] },
            Capsule::AckTargetCid {
                cid: vec![3; 8],
                virtual_cid: vec![4; 8],
                reset_token: vec![],
            },
            Capsule::CloseClientCid { cid: vec![1; 8] },
            Capsule::CloseTargetCid { cid: vec![] },
            Capsule::TunnelInfo(Feedback::example()),
        ]
    }

    #[test]
    fn round_trip_in_any_chunking_with_unknown_capsules_between() {
        let mut bytes = Vec::new();
        for capsule in all() {
            capsule.encode(&mut bytes);
            // An unknown (greased) capsule type, to be skipped.
            varint::write(&mut bytes, 0x29);
            varint::write(&mut bytes, 5);
            bytes.extend_from_slice(b"grease");
            bytes.pop();
        }
        for chunk in [1, 2, 5, 64, 4096] {
            let mut reader = CapsuleReader::default();
            let mut out = Vec::new();
            for piece in bytes.chunks(chunk) {
                reader.push(piece, &mut out).unwrap();
            }
            assert_eq!(out, all(), "chunk {chunk}");
        }
    }

    #[test]
    fn hostile_lengths_are_refused() {
        let mut bytes = Vec::new();
        varint::write(&mut bytes, DATAGRAM);
        varint::write(&mut bytes, 1 << 40);
        let mut reader = CapsuleReader::default();
        assert!(reader.push(&bytes, &mut Vec::new()).is_err());
        let mut cid = Vec::new();
        Capsule::AckClientCid { cid: vec![0; 21] }.encode(&mut cid);
        assert!(
            CapsuleReader::default()
                .push(&cid, &mut Vec::new())
                .is_err()
        );
        let mut token = Vec::new();
        Capsule::RegisterTargetCid {
            cid: vec![1],
            reset_token: vec![0; 5],
        }
        .encode(&mut token);
        assert!(
            CapsuleReader::default()
                .push(&token, &mut Vec::new())
                .is_err()
        );
    }

    proptest! {
        #[test]
        fn never_panics(input in proptest::collection::vec(any::<u8>(), 0..256), chunk in 1usize..16) {
            let mut reader = CapsuleReader::default();
            let mut out = Vec::new();
            for piece in input.chunks(chunk) {
                if reader.push(piece, &mut out).is_err() {
                    break;
                }
            }
        }
    }
}
