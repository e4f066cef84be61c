//! Seeded randomness for rustls: its `SecureRandom` (TLS randoms, session
//! IDs, tickets) and the X25519 key-exchange group (ephemeral keys).
//!
//! rustls takes both as `&'static` references inside its `CryptoProvider`,
//! so each endpoint leaks one small generator of each kind (a few hundred
//! bytes per endpoint, for the life of the process).

use netsim::{Seed, SimRng};
use rand_chacha::rand_core::RngCore;
use rustls::crypto::{
    ActiveKeyExchange, GetRandomFailed, SecureRandom, SharedSecret, SupportedKxGroup,
};
use rustls::{Error, NamedGroup, PeerMisbehaved};
use std::fmt;
use std::sync::Mutex;

/// rustls' `SecureRandom`, fed from a seeded ChaCha8 stream.
pub(crate) struct SeededRandom {
    rng: Mutex<SimRng>,
}

impl SeededRandom {
    /// A generator for the component called `label` under `seed`, leaked so
    /// that rustls can hold it as `&'static`.
    pub(crate) fn leak(seed: Seed, label: &str) -> &'static SeededRandom {
        Box::leak(Box::new(SeededRandom {
            rng: Mutex::new(seed.rng(label)),
        }))
    }
}

impl fmt::Debug for SeededRandom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SeededRandom")
    }
}

impl SecureRandom for SeededRandom {
    fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        let mut rng = self.rng.lock().map_err(|_| GetRandomFailed)?;
        rng.fill_bytes(buf);
        Ok(())
    }
}

/// The X25519 key-exchange group with ephemeral secrets drawn from a seeded
/// stream (*ring*'s own X25519 draws from the operating system).
pub(crate) struct SeededX25519 {
    rng: Mutex<SimRng>,
}

impl SeededX25519 {
    /// A group for the component called `label` under `seed`, leaked so
    /// that rustls can hold it as `&'static`.
    pub(crate) fn leak(seed: Seed, label: &str) -> &'static SeededX25519 {
        Box::leak(Box::new(SeededX25519 {
            rng: Mutex::new(seed.rng(label)),
        }))
    }
}

impl fmt::Debug for SeededX25519 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SeededX25519")
    }
}

impl SupportedKxGroup for SeededX25519 {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, Error> {
        let mut bytes = [0u8; 32];
        self.rng
            .lock()
            .map_err(|_| Error::FailedToGetRandomBytes)?
            .fill_bytes(&mut bytes);
        let secret = x25519_dalek::StaticSecret::from(bytes);
        let public = x25519_dalek::PublicKey::from(&secret);
        Ok(Box::new(X25519Exchange { secret, public }))
    }

    fn name(&self) -> NamedGroup {
        NamedGroup::X25519
    }
}

/// One X25519 exchange in progress.
struct X25519Exchange {
    secret: x25519_dalek::StaticSecret,
    public: x25519_dalek::PublicKey,
}

impl ActiveKeyExchange for X25519Exchange {
    fn complete(self: Box<Self>, peer_pub_key: &[u8]) -> Result<SharedSecret, Error> {
        let peer: [u8; 32] = peer_pub_key
            .try_into()
            .map_err(|_| Error::from(PeerMisbehaved::InvalidKeyShare))?;
        let shared = self
            .secret
            .diffie_hellman(&x25519_dalek::PublicKey::from(peer));
        if !shared.was_contributory() {
            return Err(PeerMisbehaved::InvalidKeyShare.into());
        }
        Ok(SharedSecret::from(&shared.as_bytes()[..]))
    }

    fn pub_key(&self) -> &[u8] {
        self.public.as_bytes()
    }

    fn group(&self) -> NamedGroup {
        NamedGroup::X25519
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_exchange_agrees_and_repeats() {
        let a = SeededX25519::leak(Seed::new(1), "a").start().unwrap();
        let b = SeededX25519::leak(Seed::new(1), "b").start().unwrap();
        let a_again = SeededX25519::leak(Seed::new(1), "a").start().unwrap();
        assert_eq!(a.pub_key(), a_again.pub_key());
        let b_pub = b.pub_key().to_vec();
        let a_pub = a.pub_key().to_vec();
        let s1 = a.complete(&b_pub).unwrap();
        let s2 = b.complete(&a_pub).unwrap();
        assert_eq!(s1.secret_bytes(), s2.secret_bytes());
    }
}
