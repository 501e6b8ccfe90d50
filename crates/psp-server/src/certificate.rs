//! A listener's own certificate and key, replaceable while it serves: each new handshake takes
//! the current one, and connections already open keep the one they were made with.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why a certificate and key could not be loaded: which file, and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{what} {}: {message}", path.display())]
pub struct CertificateError {
    /// `certificate` or `key`.
    pub what: &'static str,
    pub path: PathBuf,
    pub message: String,
}

/// Loads a PEM certificate chain (the listener's certificate first) and its PEM private key,
/// and checks that the key is the certificate's.
pub fn load_certified_key(cert: &Path, key: &Path) -> Result<CertifiedKey, CertificateError> {
    let err = |what: &'static str, path: &Path, message: String| CertificateError {
        what,
        path: path.to_owned(),
        message,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| err("certificate", cert, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| err("certificate", cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(err(
            "certificate",
            cert,
            "no certificate in the file".into(),
        ));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| err("key", key, e.to_string()))?;
    let provider = rustls::crypto::ring::default_provider();
    // Refused when the key's public half is not the certificate's.
    let certified = CertifiedKey::from_der(chain, private, &provider)
        .map_err(|e| err("key", key, e.to_string()))?;
    Ok(certified)
}

/// The certificate a listener presents, swapped whole by [`ServerCertificate::replace`].
#[derive(Debug)]
pub struct ServerCertificate {
    current: ArcSwap<CertifiedKey>,
}

impl ServerCertificate {
    pub fn new(key: CertifiedKey) -> ServerCertificate {
        ServerCertificate {
            current: ArcSwap::from_pointee(key),
        }
    }

    /// From here on, new handshakes present `key`.
    pub fn replace(&self, key: CertifiedKey) {
        self.current.store(Arc::new(key));
    }
}

impl ResolvesServerCert for ServerCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}
