//! The gateway's client-certificate verifier: it asks every client for a certificate and
//! accepts any well-formed chain at the handshake, so that a certificate failing a check gets
//! a proper error body from the gateway instead of a bare TLS alert (docs/stack.md). Proof of
//! possession is still checked: the handshake signature is verified with the certificate's
//! key (`verify_tls12_signature` / `verify_tls13_signature`).

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, Error, SignatureScheme};

use crate::cert::PspCertificate;
use crate::check::MAX_PRESENTED_INTERMEDIATES;

#[derive(Debug)]
pub struct AcceptAnyWellFormedChain {
    mandatory: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl AcceptAnyWellFormedChain {
    pub fn new(mandatory: bool) -> Arc<Self> {
        Arc::new(AcceptAnyWellFormedChain {
            mandatory,
            algorithms: rustls::crypto::ring::default_provider().signature_verification_algorithms,
        })
    }
}

impl ClientCertVerifier for AcceptAnyWellFormedChain {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // No hints: PSPs hold certificates from many QTSPs; the check judges the issuer.
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        if intermediates.len() > MAX_PRESENTED_INTERMEDIATES {
            return Err(Error::General(format!(
                "client chain of {} intermediates is over the limit of {MAX_PRESENTED_INTERMEDIATES}",
                intermediates.len()
            )));
        }
        // Well-formed: the leaf parses as an X.509 certificate. Everything else is the
        // check's business, after the handshake.
        PspCertificate::from_der(end_entity.to_vec())
            .map_err(|_| Error::InvalidCertificate(rustls::CertificateError::BadEncoding))?;
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
