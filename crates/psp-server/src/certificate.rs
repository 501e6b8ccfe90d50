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

/// The certificates of a listener that several sites share, chosen by the server name the
/// client asks for (SNI): each site's certificate under each of its names, and the default
/// site's for a client that names none. A name no site has, or no name without a default
/// site, resolves to nothing: rustls then ends the handshake with the `access_denied` alert,
/// and no request is ever read from that connection.
#[derive(Debug)]
pub struct SiteCertificates {
    /// Lowercased server name → the certificate presented for it.
    by_name: std::collections::HashMap<String, Arc<ServerCertificate>>,
    default: Option<Arc<ServerCertificate>>,
}

impl SiteCertificates {
    /// `names`: every server name with its site's certificate; `default`: the certificate of
    /// the listener's default site, if it has one.
    pub fn new(
        names: impl IntoIterator<Item = (String, Arc<ServerCertificate>)>,
        default: Option<Arc<ServerCertificate>>,
    ) -> SiteCertificates {
        SiteCertificates {
            by_name: names
                .into_iter()
                .map(|(name, certificate)| (name.to_ascii_lowercase(), certificate))
                .collect(),
            default,
        }
    }
}

impl ResolvesServerCert for SiteCertificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let chosen = match hello.server_name() {
            Some(name) => {
                let found = self.by_name.get(&name.to_ascii_lowercase());
                if found.is_none() {
                    tracing::debug!(server_name = name, "no site has this server name");
                }
                found
            }
            None => {
                if self.default.is_none() {
                    tracing::debug!("no server name sent and no default site");
                }
                self.default.as_ref()
            }
        };
        chosen.map(|c| c.current.load_full())
    }
}
