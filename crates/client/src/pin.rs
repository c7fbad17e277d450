//! Trusting a `pcmail serve` by the fingerprint of its certificate: the PC pinned it at enrolment (the join code carries it), so a
//! self-signed certificate needs no CA, and a server with another certificate
//! is refused before anything is sent.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::sync::{Arc, Mutex};

/// Accepts exactly the certificate whose SHA-256 is `pinned`; remembers the
/// fingerprint of one it refused, for the message.
#[derive(Debug)]
pub struct PinnedCert {
    pinned: String,
    refused: Arc<Mutex<Option<String>>>,
    provider: Arc<CryptoProvider>,
}

/// A rustls client config that trusts only the pinned certificate, and the
/// slot where a refused certificate's fingerprint lands.
pub fn client_config(pinned: &str) -> (rustls::ClientConfig, Arc<Mutex<Option<String>>>) {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let refused = Arc::new(Mutex::new(None));
    let verifier = PinnedCert { pinned: pinned.to_string(), refused: refused.clone(), provider: provider.clone() };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("the default provider supports the default versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    (config, refused)
}

/// TLS for a client of plain http:// addresses only: it trusts no
/// certificate, so building it reads no certificate folder.
pub fn trusting_nothing() -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("the default provider supports the default versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth()
}

/// What a PC is told when the server's certificate is not the pinned one:
/// both fingerprints, and what to do.
pub fn mismatch_message(url: &str, pinned: &str, seen: &str) -> String {
    format!(
        "the server at {url} presented a TLS certificate with SHA-256 fingerprint {seen}, but this PC pinned {pinned} \
         when it enrolled: it may not be your pcmail server, so nothing was sent. If the admin replaced the server's \
         certificate on purpose (compare with the fingerprint `pcmail serve` prints at start), re-enrol with a new join \
         code (`pcmail roster add LABEL` on the admin's PC, then `pcmail init --join CODE --server {url}`) or pin the \
         new one with `pcmail init --server {url} --tls-fingerprint {seen}`"
    )
}

/// What a PC is told when an https:// server it pinned nothing for is not
/// trusted by the system's authorities: what went wrong, and how to trust it.
pub fn untrusted_message(url: &str, why: &str) -> String {
    format!(
        "the server at {url} is not trusted: {why}, so nothing was sent. For a `pcmail serve` with its own \
         certificate, enrol with a join code from the admin (it carries the certificate's fingerprint) or pin it with \
         `pcmail init --server {url} --tls-fingerprint SHA256` (the fingerprint `pcmail serve` prints at start)"
    )
}

impl ServerCertVerifier for PinnedCert {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        // The pin is the identity: the name or address the PC dialled does not matter.
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let seen = pcmail_core::auth::cert_fingerprint(end_entity.as_ref());
        // Both are 64 hex of a public certificate's hash: no secret to time.
        if seen == self.pinned {
            Ok(ServerCertVerified::assertion())
        } else {
            *self.refused.lock().unwrap_or_else(|e| e.into_inner()) = Some(seen);
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::ApplicationVerificationFailure))
        }
    }

    // The handshake is still proven with the certificate's key.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}
