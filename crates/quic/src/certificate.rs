//! The server's Ed25519 test certificate, made deterministically, and the
//! client's verifier that trusts exactly that certificate.
//!
//! Ed25519 signatures are deterministic (RFC 8032), so with a fixed key the
//! certificate and every handshake signature are the same run after run.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, Error, SignatureScheme};

/// PKCS#8 v1 prefix of an Ed25519 private key (RFC 8410); the 32-byte seed
/// follows.
const ED25519_PKCS8_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// The fixed Ed25519 private-key seed of the test certificate. This is a
/// test key: it is public, so it authenticates nothing.
const TEST_KEY_SEED: [u8; 32] = *b"pepkit test key, not a secret!!!";

/// The server name the test certificate is issued for.
pub const TEST_SERVER_NAME: &str = "pepkit.test";

/// A self-signed Ed25519 certificate and its private key, the same bytes
/// every time.
#[derive(Debug)]
pub struct TestCertificate {
    cert: CertificateDer<'static>,
    key: Vec<u8>,
}

impl TestCertificate {
    /// The certificate for [`TEST_SERVER_NAME`] with the fixed test key.
    pub fn new() -> TestCertificate {
        let mut key = ED25519_PKCS8_PREFIX.to_vec();
        key.extend_from_slice(&TEST_KEY_SEED);
        let pkcs8 = PrivatePkcs8KeyDer::from(key.clone());
        // A fixed key and fixed parameters cannot fail to sign.
        let pair = rcgen::KeyPair::from_pkcs8_der_and_sign_algo(&pkcs8, &rcgen::PKCS_ED25519)
            .expect("the fixed Ed25519 test key is valid");
        let params = rcgen::CertificateParams::new(vec![TEST_SERVER_NAME.to_string()])
            .expect("the fixed server name is valid");
        let cert = params
            .self_signed(&pair)
            .expect("signing the test certificate cannot fail");
        TestCertificate {
            cert: cert.der().clone(),
            key,
        }
    }

    /// The certificate, DER-encoded.
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert
    }

    /// The private key, PKCS#8 DER (a public test key: for giving an
    /// independent peer, such as masque-go's proxy, the certificate our
    /// clients pin).
    pub fn key_pkcs8(&self) -> &[u8] {
        &self.key
    }

    /// The private key (PKCS#8 DER).
    pub(crate) fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.clone()))
    }
}

impl Default for TestCertificate {
    fn default() -> TestCertificate {
        TestCertificate::new()
    }
}

/// Accepts exactly one end-entity certificate (byte for byte) and checks
/// the handshake signature against it. No chain building, no validity dates,
/// so no clock is read.
#[derive(Debug)]
pub(crate) struct PinnedCertVerifier {
    cert: CertificateDer<'static>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl PinnedCertVerifier {
    pub(crate) fn new(
        cert: CertificateDer<'static>,
        algorithms: WebPkiSupportedAlgorithms,
    ) -> PinnedCertVerifier {
        PinnedCertVerifier { cert, algorithms }
    }
}

impl ServerCertVerifier for PinnedCertVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if end_entity.as_ref() == self.cert.as_ref() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        Err(Error::PeerIncompatible(
            rustls::PeerIncompatible::Tls13RequiredForQuic,
        ))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_is_deterministic() {
        assert_eq!(
            TestCertificate::new().cert_der(),
            TestCertificate::new().cert_der()
        );
    }
}
