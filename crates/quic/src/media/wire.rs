//! The media protocol's wire format: AEAD-sealed data packets and NACKs.
//!
//! Every datagram is `nonce (12 B) ‖ ChaCha20-Poly1305 ciphertext ‖ tag
//! (16 B)`. The nonce is drawn per transmission from the sender's seeded
//! generator, so two transmissions of the same sequence number share no
//! bytes a middlebox could match. The associated data names the direction
//! (`DATA_AAD` or `NACK_AAD`), so a NACK can never be replayed as data.
//!
//! Data packet, [`MEDIA_DATA_LEN`] = 240 bytes on the wire:
//!
//! | offset | length | field |
//! |---|---|---|
//! | 0 | 12 | nonce (random per transmission) |
//! | 12 | 1 | sealed: kind (0 = media, 1 = end of stream) |
//! | 13 | 4 | sealed: sequence number (u32, big-endian; media from 1, end of stream carries the last one) |
//! | 17 | 207 | sealed: audio filler (`0xFF` before encryption) |
//! | 224 | 16 | Poly1305 tag |
//!
//! Bytes [`MEDIA_ID_OFFSET`]`..+4` (21..25) lie in the sealed filler, so they are
//! keystream bytes under a fresh nonce: pseudorandom for every transmission,
//! retransmissions included. A Sidekick proxy reads its packet identifier
//! there (the reference media client writes a random u32 at the same offset).
//!
//! NACK, [`MEDIA_NACK_LEN`] = 33 bytes: nonce (12) ‖ sealed kind 2 (1) ‖ sealed
//! sequence number (4) ‖ tag (16), one sequence number per NACK like the
//! reference server's 4-byte NACK.

use netsim::Seed;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use std::fmt;
use std::net::SocketAddr;

/// Length of a media data datagram's payload (the paper's 240 bytes).
pub const MEDIA_DATA_LEN: usize = 240;
/// Length of a NACK datagram's payload.
pub const MEDIA_NACK_LEN: usize = NONCE_LEN + PLAIN_HEADER_LEN + TAG_LEN;
/// Offset in a data payload of the 4 bytes a Sidekick proxy takes as the
/// packet identifier (`u32::from_be_bytes(payload[21..25])`).
pub const MEDIA_ID_OFFSET: usize = 21;

const TAG_LEN: usize = 16;
/// Kind byte plus sequence number.
const PLAIN_HEADER_LEN: usize = 5;
const DATA_AAD: &[u8] = b"pepkit media data v1";
const NACK_AAD: &[u8] = b"pepkit media nack v1";
const FILLER: u8 = 0xFF;

/// What a sealed media datagram says, once opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Message {
    /// Media packet with this sequence number (from 1).
    Media(u32),
    /// End of stream; the payload is the last sequence number sent.
    End(u32),
    /// Please retransmit this sequence number.
    Nack(u32),
}

/// Why a datagram was rejected (it is then ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MediaWireError {
    /// The payload does not have the length of any message for this direction.
    #[error("unexpected payload length {0}")]
    BadLength(usize),
    /// Authentication failed: corrupted, forged or under another key.
    #[error("AEAD authentication failed")]
    Undecryptable,
    /// Decrypted, but the kind byte is unknown for this direction.
    #[error("unknown message kind {0}")]
    BadKind(u8),
}

/// The AEAD key of one media flow (ChaCha20-Poly1305), known to both ends.
pub(crate) struct MediaKey {
    key: LessSafeKey,
}

impl fmt::Debug for MediaKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MediaKey(..)")
    }
}

impl MediaKey {
    /// The key of the flow from `sender` to `receiver` under the scenario
    /// seed (label `media/<sender>-><receiver>/key`), as if pre-shared.
    pub(crate) fn derive(seed: Seed, sender: SocketAddr, receiver: SocketAddr) -> MediaKey {
        use rand_chacha::rand_core::RngCore;
        let mut bytes = [0u8; 32];
        seed.rng(&format!("media/{sender}->{receiver}/key"))
            .fill_bytes(&mut bytes);
        let key = UnboundKey::new(&CHACHA20_POLY1305, &bytes)
            .expect("a 32-byte key is valid for ChaCha20-Poly1305");
        MediaKey {
            key: LessSafeKey::new(key),
        }
    }

    /// Seals `message` with `nonce` into a datagram payload.
    pub(crate) fn seal(&self, message: Message, nonce: [u8; NONCE_LEN]) -> Vec<u8> {
        let (kind, seq, len, aad) = match message {
            Message::Media(seq) => (0u8, seq, MEDIA_DATA_LEN, DATA_AAD),
            Message::End(seq) => (1u8, seq, MEDIA_DATA_LEN, DATA_AAD),
            Message::Nack(seq) => (2u8, seq, MEDIA_NACK_LEN, NACK_AAD),
        };
        let mut out = vec![FILLER; len];
        out[..NONCE_LEN].copy_from_slice(&nonce);
        out[NONCE_LEN] = kind;
        out[NONCE_LEN + 1..NONCE_LEN + PLAIN_HEADER_LEN].copy_from_slice(&seq.to_be_bytes());
        let (head, rest) = out.split_at_mut(NONCE_LEN);
        let (body, tag_out) = rest.split_at_mut(len - NONCE_LEN - TAG_LEN);
        let tag = self
            .key
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad), body)
            .expect("ChaCha20-Poly1305 seals any short message");
        tag_out.copy_from_slice(tag.as_ref());
        debug_assert_eq!(head, &nonce[..]);
        out
    }

    /// Opens a data-direction payload (media or end of stream).
    pub(crate) fn open_data(&self, payload: &[u8]) -> Result<Message, MediaWireError> {
        if payload.len() != MEDIA_DATA_LEN {
            return Err(MediaWireError::BadLength(payload.len()));
        }
        match self.open(payload, DATA_AAD)? {
            (0, seq) => Ok(Message::Media(seq)),
            (1, seq) => Ok(Message::End(seq)),
            (kind, _) => Err(MediaWireError::BadKind(kind)),
        }
    }

    /// Opens a NACK payload.
    pub(crate) fn open_nack(&self, payload: &[u8]) -> Result<u32, MediaWireError> {
        if payload.len() != MEDIA_NACK_LEN {
            return Err(MediaWireError::BadLength(payload.len()));
        }
        match self.open(payload, NACK_AAD)? {
            (2, seq) => Ok(seq),
            (kind, _) => Err(MediaWireError::BadKind(kind)),
        }
    }

    /// Authenticates and decrypts; returns the kind byte and the sequence
    /// number. The caller has checked that `payload` is longer than
    /// nonce, header and tag.
    fn open(&self, payload: &[u8], aad: &[u8]) -> Result<(u8, u32), MediaWireError> {
        let (nonce, sealed) = payload.split_at(NONCE_LEN);
        let nonce: [u8; NONCE_LEN] = nonce
            .try_into()
            .map_err(|_| MediaWireError::Undecryptable)?;
        let mut buf = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut buf,
            )
            .map_err(|_| MediaWireError::Undecryptable)?;
        match plain {
            [kind, a, b, c, d, ..] => Ok((*kind, u32::from_be_bytes([*a, *b, *c, *d]))),
            _ => Err(MediaWireError::BadLength(payload.len())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> MediaKey {
        MediaKey::derive(
            Seed::new(1),
            "10.0.0.1:5000".parse().unwrap(),
            "10.0.1.1:5123".parse().unwrap(),
        )
    }

    #[test]
    fn round_trip_and_fresh_identifiers() {
        let key = key();
        let a = key.seal(Message::Media(7), [1; NONCE_LEN]);
        let b = key.seal(Message::Media(7), [2; NONCE_LEN]);
        assert_eq!(a.len(), MEDIA_DATA_LEN);
        assert_eq!(key.open_data(&a), Ok(Message::Media(7)));
        assert_eq!(key.open_data(&b), Ok(Message::Media(7)));
        assert_ne!(
            a[MEDIA_ID_OFFSET..MEDIA_ID_OFFSET + 4],
            b[MEDIA_ID_OFFSET..MEDIA_ID_OFFSET + 4]
        );
        let n = key.seal(Message::Nack(9), [3; NONCE_LEN]);
        assert_eq!(n.len(), MEDIA_NACK_LEN);
        assert_eq!(key.open_nack(&n), Ok(9));
        // A NACK is not data and data is not a NACK.
        assert!(key.open_data(&n).is_err());
        assert!(key.open_nack(&a).is_err());
    }

    #[test]
    fn tampering_is_detected() {
        let key = key();
        let mut a = key.seal(Message::End(3000), [4; NONCE_LEN]);
        a[MEDIA_ID_OFFSET] ^= 1;
        assert_eq!(key.open_data(&a), Err(MediaWireError::Undecryptable));
        assert_eq!(key.open_data(&a[..10]), Err(MediaWireError::BadLength(10)));
    }
}
