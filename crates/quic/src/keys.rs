//! Fixed keys for the endpoint's stateless functions: the HMAC key that
//! signs stateless-reset tokens and the key that seals address-validation
//! (retry and NEW_TOKEN) tokens. Both derive from the scenario seed.

use netsim::Seed;
use rand_chacha::rand_core::RngCore;
use ring::{aead, hkdf, hmac};
use std::sync::Arc;

/// The stateless-reset HMAC key of the endpoint called `label`.
pub(crate) fn reset_key(seed: Seed, label: &str) -> Arc<dyn noq_proto::crypto::HmacKey> {
    let mut bytes = [0u8; 64];
    seed.rng(&format!("{label}/reset-key"))
        .fill_bytes(&mut bytes);
    Arc::new(hmac::Key::new(hmac::HMAC_SHA256, &bytes))
}

/// Seals tokens with HKDF-SHA256 and AES-256-GCM, a fresh key per token
/// nonce: the construction noq-proto uses for its own (private, randomly
/// keyed) token key, here with a key from the seed.
pub(crate) struct TokenKey(hkdf::Prk);

impl TokenKey {
    /// The token key of the endpoint called `label`.
    pub(crate) fn new(seed: Seed, label: &str) -> TokenKey {
        let mut master = [0u8; 64];
        seed.rng(&format!("{label}/token-key"))
            .fill_bytes(&mut master);
        TokenKey(hkdf::Salt::new(hkdf::HKDF_SHA256, &[]).extract(&master))
    }

    fn aead(&self, nonce: u128) -> Result<aead::LessSafeKey, noq_proto::crypto::CryptoError> {
        let nonce_bytes = nonce.to_le_bytes();
        let info = [&nonce_bytes[..]];
        let okm = self
            .0
            .expand(&info, hkdf::HKDF_SHA256)
            .map_err(|_| noq_proto::crypto::CryptoError)?;
        let mut key = [0u8; 32];
        okm.fill(&mut key)
            .map_err(|_| noq_proto::crypto::CryptoError)?;
        let key = aead::UnboundKey::new(&aead::AES_256_GCM, &key)
            .map_err(|_| noq_proto::crypto::CryptoError)?;
        Ok(aead::LessSafeKey::new(key))
    }
}

impl noq_proto::crypto::HandshakeTokenKey for TokenKey {
    fn seal(
        &self,
        token_nonce: u128,
        data: &mut Vec<u8>,
    ) -> Result<(), noq_proto::crypto::CryptoError> {
        // Each key is used once (it is derived from the random token nonce),
        // so a zero AEAD nonce is safe, as in noq-proto.
        let nonce = aead::Nonce::assume_unique_for_key([0u8; 12]);
        self.aead(token_nonce)?
            .seal_in_place_append_tag(nonce, aead::Aad::empty(), data)
            .map_err(|_| noq_proto::crypto::CryptoError)
    }

    fn open<'a>(
        &self,
        token_nonce: u128,
        data: &'a mut [u8],
    ) -> Result<&'a [u8], noq_proto::crypto::CryptoError> {
        let nonce = aead::Nonce::assume_unique_for_key([0u8; 12]);
        let key = self.aead(token_nonce)?;
        key.open_in_place(nonce, aead::Aad::empty(), data)
            .map(|plain| &*plain)
            .map_err(|_| noq_proto::crypto::CryptoError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use noq_proto::crypto::HandshakeTokenKey;

    #[test]
    fn token_round_trip() {
        let key = TokenKey::new(Seed::new(3), "server");
        let mut data = b"hello".to_vec();
        key.seal(7, &mut data).unwrap();
        assert_eq!(key.open(7, &mut data).unwrap(), b"hello");
    }
}
