//! Envoy's external authorisation over gRPC (`envoy.service.auth.v3.Authorization/Check`): the
//! PSD2 decision for a bank whose edge is Envoy, Istio or another Envoy-based gateway. Envoy's
//! `ext_authz` HTTP filter sends a `CheckRequest` for every request it holds and forwards the
//! request only when the answer's status is `OK`, with the identity headers this face sets.
//!
//! Per Check, top to bottom:
//!
//! ```text
//!  accept ─▶ caller? ─▶ [TLS] ─▶ decode ─▶ site ─▶ question ─▶ site.authorise ─▶ CheckResponse
//!              │                   │        │                   (the built-in    OK + headers +
//!              └ closed, no byte   └ 400    └ 403 / 421          proxy's phases,  metadata, or
//!                read                                            logged once)    denied + body
//! ```
//!
//! 1. The caller must be in `callers`: whoever can ask can name any certificate, so a
//!    connection from anyone else is closed at accept, before any byte is read.
//! 2. Every `CheckRequest` gets a `CheckResponse`, never a gRPC error: an error status is
//!    Envoy's `failure_mode_allow` case, which a bank may have set to let requests through when
//!    the authoriser is down. So the decoding is this face's own (`grpc`): bytes that are not a
//!    `CheckRequest` (a string field that is not UTF-8, a truncated message) are a 400 refusal.
//!    What tonic refuses before this face sees a message (over [`MAX_CHECK_REQUEST_BYTES`], a
//!    compressed one) is turned into the same 400 refusal (`grpc::never_an_error`).
//! 3. The site: the route's context extension `site_key`, else the TLS server name, else the
//!    host, else the only site. An extension and a server name that name two different sites
//!    are refused 421; an extension naming no site, or nothing naming one of several, 403.
//! 4. The question ([`Ask`](crate::gateway::Ask)): the method, the target as Envoy holds it
//!    (path and query, after Envoy's own normalisation, before any route rewrite), the host,
//!    the certificate from where `certificate` says, the client's address.
//! 5. The site decides ([`GatewayState::authorise`](crate::gateway::GatewayState::authorise)),
//!    exactly as its built-in proxy would, and runs the logging phase (metrics, audit record)
//!    under the face `ext-authz`. The decision runs on a task of its own: when Envoy gives up
//!    first (its `grpc_service.timeout`, 200 ms by default), the decision still completes, is
//!    logged, and leaves the revocation evidence it fetched in the cache for Envoy's retry.
//! 6. The answer: allowed, `OK` with the identity headers to set (replacing the client's
//!    copies), every other header the built-in proxy strips to remove, and dynamic metadata
//!    (`psp_auth_number`, `psp_services`, `psp_site`, `psp_check_id`) for Envoy's own rate
//!    limit; refused, `PERMISSION_DENIED` (`UNAUTHENTICATED` for a 401) with the built-in
//!    proxy's status, headers and body.
//!
//! What Envoy does with the answer, and the configuration that keeps it a decision: the route
//! must not rewrite the path after the filter (`prefix_rewrite`, `regex_rewrite` run in the
//! router, after `ext_authz`, so the bank's API would receive another path than the one
//! decided); `include_peer_certificate: true` with `certificate = "peer"`; with
//! `certificate = "xfcc"`, `forward_client_cert_details: SANITIZE_SET` or `APPEND_FORWARD`
//! and `xfcc_by` set to the proxy's own URI SAN (Envoy appends an element only for a client
//! that presented a certificate: without `xfcc_by` a client without one could supply the last
//! element itself).
//!
//! Crates: `envoy-types` 0.7 ships Envoy's API compiled by prost (the `CheckRequest` and
//! `CheckResponse` types, `google.protobuf.Struct`, `google.rpc.Status`) for tonic 0.14, so
//! the build needs no `protoc` and no copy of Envoy's `.proto` tree; its generated
//! `AuthorizationServer` is not used, because it answers an undecodable request with a gRPC
//! error (step 2). `tonic` 0.14 serves HTTP/2 without any of its TLS features (which would
//! choose a crypto provider); the TLS towards Envoy is tokio-rustls on ring, as on every
//! other listener (docs/stack.md), so `aws-lc-rs` stays out of the tree.

mod answer;
mod grpc;
mod held;
mod listener;
mod question;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::server::Cidr;
use crate::sites::Sites;

/// The largest `CheckRequest` read, in bytes: tonic's default, kept explicit. A Check carries
/// the request's headers (Envoy's `max_request_headers_kb` is 60 KiB by default) and, with
/// `with_request_body`, at most `max_request_bytes` of its body: configure that well below.
/// A larger message is refused before this face reads it, with a 400 denial, never a gRPC
/// error.
pub const MAX_CHECK_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// Connections open at once. 1,024: the callers are a bank's own Envoy instances, each of
/// which keeps a few HTTP/2 connections to its authoriser; a connection over the limit is
/// closed at accept.
const MAX_CONNECTIONS: usize = 1024;

/// TLS handshake deadline, as the other listeners' (`Limits::handshake_timeout`, 10 s).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Checks in flight on one HTTP/2 connection. 100: RFC 9113 section 6.5.2 recommends no lower;
/// Envoy opens another connection when a connection's streams are all taken.
const MAX_CONCURRENT_STREAMS: u32 = 100;

/// HTTP/2 PING interval and how long its answer may take: a caller that vanished (a pod
/// removed without a FIN) is noticed within 40 s. gRPC's keepalive guidance (A8) suggests
/// minutes for clients; a server may ping more often, and Envoy answers PINGs itself.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a shutdown waits for the Checks in flight, as the other listeners
/// (`Limits::drain_timeout`, 30 s).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// `[ext_authz]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtAuthzConfig {
    /// The address Envoy's `grpc_service` calls.
    pub listen: SocketAddr,
    /// Source addresses answered (required, non-empty); a connection from anyone else is
    /// closed at accept, before any byte is read.
    pub callers: Vec<Cidr>,
    /// Where the PSP's certificate comes from.
    #[serde(default)]
    pub certificate: CertificateSource,
    /// With `xfcc`: the last XFCC element must have been added by this hop (its `By=`).
    #[serde(default)]
    pub xfcc_by: Option<String>,
    /// With `xfcc`: how the edge forwards it (`sanitize-set`, the default, or
    /// `append-forward`, which needs `xfcc_by`).
    #[serde(default)]
    pub xfcc_forwarding: crate::gateway::presented::XfccMode,
    /// The `context_extensions` key naming the site.
    #[serde(default = "default_site_key")]
    pub site_key: String,
    /// Optional TLS towards Envoy, with client certificates required from `client_ca` when
    /// set.
    #[serde(default)]
    pub tls: Option<ExtAuthzTls>,
}

/// Where the PSP's certificate comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CertificateSource {
    /// `attributes.source.certificate`: the leaf Envoy's TLS handshake verified, URL-encoded
    /// PEM (Envoy's `include_peer_certificate: true`). Empty: the client presented none.
    #[default]
    Peer,
    /// The `x-forwarded-client-cert` header of the request (Istio's path, and Envoy's
    /// `forward_client_cert_details`): its last element.
    Xfcc,
}

/// `[ext_authz.tls]`: the listener's certificate and key (PEM), and the CA whose
/// certificates the callers must present.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtAuthzTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Callers must present a certificate issued under one of these (PEM); without it the
    /// callers are told apart by address only.
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
}

/// The context extension that names the site, by default.
pub const DEFAULT_SITE_KEY: &str = "psp_site";

fn default_site_key() -> String {
    DEFAULT_SITE_KEY.to_owned()
}

/// Why an `[ext_authz]` section is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtAuthzConfigError {
    /// `callers` is empty.
    #[error(
        "ext_authz.callers is empty: whoever can ask can name any certificate, so the callers must be named"
    )]
    NoCallers,
    /// `site_key` is empty.
    #[error("ext_authz.site_key is empty")]
    EmptySiteKey,
    /// `xfcc_by` without `certificate = "xfcc"`.
    #[error("ext_authz.xfcc_by applies only with certificate = \"xfcc\"")]
    XfccByWithoutXfcc,
    /// `xfcc_by` is empty.
    #[error("ext_authz.xfcc_by is empty: name the proxy's own URI SAN, or leave it out")]
    EmptyXfccBy,
    /// `xfcc_forwarding = "append-forward"` without `xfcc_by`, or without `xfcc`.
    #[error(
        "ext_authz.xfcc_forwarding = \"append-forward\" needs certificate = \"xfcc\" and xfcc_by (the proxy's own URI SAN), or the client's element could pass for the proxy's"
    )]
    AppendForwardWithoutBy,
}

impl ExtAuthzConfig {
    /// Refuses what cannot work, before any port is bound.
    pub fn validate(&self) -> Result<(), ExtAuthzConfigError> {
        if self.callers.is_empty() {
            return Err(ExtAuthzConfigError::NoCallers);
        }
        if self.site_key.is_empty() {
            return Err(ExtAuthzConfigError::EmptySiteKey);
        }
        if self.xfcc_forwarding == crate::gateway::presented::XfccMode::AppendForward
            && (self.xfcc_by.is_none() || self.certificate != CertificateSource::Xfcc)
        {
            return Err(ExtAuthzConfigError::AppendForwardWithoutBy);
        }
        match (&self.xfcc_by, self.certificate) {
            (Some(by), CertificateSource::Xfcc) if by.trim().is_empty() => {
                Err(ExtAuthzConfigError::EmptyXfccBy)
            }
            (Some(_), CertificateSource::Peer) => Err(ExtAuthzConfigError::XfccByWithoutXfcc),
            (Some(_), CertificateSource::Xfcc) | (None, _) => Ok(()),
        }
    }
}

/// Why the TLS of `[ext_authz.tls]` cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum ExtAuthzTlsError {
    /// The certificate or the key cannot be read, or do not belong together.
    #[error("ext_authz.tls: {0}")]
    Certificate(#[from] crate::server::CertificateError),
    /// `client_ca` cannot be read or holds no usable CA certificate.
    #[error("ext_authz.tls.client_ca {}: {message}", path.display())]
    ClientCa { path: PathBuf, message: String },
    /// rustls refused the configuration.
    #[error("ext_authz.tls: {0}")]
    Rustls(String),
}

/// The TLS acceptor of `[ext_authz.tls]` (its paths already resolved): the listener's
/// certificate, ALPN `h2` (gRPC), and with `client_ca` a client certificate required and
/// verified in the handshake (rustls' `WebPkiClientVerifier`, ring).
pub fn tls_acceptor(tls: &ExtAuthzTls) -> Result<TlsAcceptor, ExtAuthzTlsError> {
    use rustls::server::WebPkiClientVerifier;
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;

    let key = crate::server::load_certified_key(&tls.cert, &tls.key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| ExtAuthzTlsError::Rustls(e.to_string()))?;
    let builder = match &tls.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let ca_error = |message: String| ExtAuthzTlsError::ClientCa {
                path: path.clone(),
                message,
            };
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(path).map_err(|e| ca_error(e.to_string()))? {
                let cert = cert.map_err(|e| ca_error(e.to_string()))?;
                roots.add(cert).map_err(|e| ca_error(e.to_string()))?;
            }
            if roots.is_empty() {
                return Err(ca_error("no CA certificate in the file".to_owned()));
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| ca_error(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config =
        builder.with_cert_resolver(Arc::new(crate::server::ServerCertificate::new(key)));
    // gRPC is HTTP/2 only (Envoy's gRPC clusters offer `h2`).
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Serves Check on `listener` until `shutdown` turns true; each Check takes the sites
/// `sites()` gives at that moment (a reload swaps in rebuilt ones). With `tls`, every
/// connection is a TLS one. Then stops accepting and lets the Checks in flight finish, for
/// 30 s at most.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    config: Arc<ExtAuthzConfig>,
    sites: impl Fn() -> Arc<Sites> + Send + Sync + 'static,
    shutdown: watch::Receiver<bool>,
) {
    let (accepted, incoming) = listener::queue();
    let accepting = listener::accept(
        listener,
        tls,
        config.callers.clone(),
        accepted,
        shutdown.clone(),
    );
    let service = grpc::AuthorizationService::new(config, Arc::new(sites));
    let mut stop = shutdown.clone();
    let serving = tonic::transport::Server::builder()
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .serve_with_incoming_shutdown(service, incoming, async move {
            stopped(&mut stop).await;
        });
    let mut stop = shutdown;
    let drain_deadline = async move {
        stopped(&mut stop).await;
        tokio::time::sleep(DRAIN_TIMEOUT).await;
    };
    tokio::select! {
        ((), served) = async { tokio::join!(accepting, serving) } => {
            if let Err(e) = served {
                tracing::warn!(error = %e, "ext_authz listener failed");
            }
        }
        () = drain_deadline => {
            tracing::warn!("ext_authz drain timeout: closing remaining connections");
        }
    }
}

/// Once `shutdown` is true (or its sender is gone, which is a shutdown too).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The section from a JSON document of the same shape (this crate reads no TOML; the
    /// configuration file's TOML is deserialised through the same serde derive).
    fn config(text: &str) -> serde_json::Result<ExtAuthzConfig> {
        serde_json::from_str(text)
    }

    #[test]
    fn defaults_are_the_peer_certificate_and_the_psp_site_extension() {
        let c =
            config(r#"{"listen": "127.0.0.1:9001", "callers": ["10.0.0.0/8"]}"#).expect("valid");
        assert_eq!(c.certificate, CertificateSource::Peer);
        assert_eq!(c.site_key, "psp_site");
        assert!(c.tls.is_none() && c.xfcc_by.is_none());
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn a_configuration_without_callers_or_with_a_misplaced_xfcc_by_is_refused() {
        let no_callers = config(r#"{"listen": "127.0.0.1:9001", "callers": []}"#).expect("parses");
        assert_eq!(no_callers.validate(), Err(ExtAuthzConfigError::NoCallers));
        let by_with_peer = config(
            r#"{"listen": "127.0.0.1:9001", "callers": ["::1"], "xfcc_by": "spiffe://edge"}"#,
        )
        .expect("parses");
        assert_eq!(
            by_with_peer.validate(),
            Err(ExtAuthzConfigError::XfccByWithoutXfcc)
        );
        let empty_by = config(
            r#"{"listen": "127.0.0.1:9001", "callers": ["::1"], "certificate": "xfcc", "xfcc_by": " "}"#,
        )
        .expect("parses");
        assert_eq!(empty_by.validate(), Err(ExtAuthzConfigError::EmptyXfccBy));
        let empty_key =
            config(r#"{"listen": "127.0.0.1:9001", "callers": ["::1"], "site_key": ""}"#)
                .expect("parses");
        assert_eq!(empty_key.validate(), Err(ExtAuthzConfigError::EmptySiteKey));
        // APPEND_FORWARD without the edge's By: the client's element could pass for the
        // edge's. Refused, in peer mode too; with xfcc and xfcc_by it is accepted.
        for without_by in [
            r#"{"listen": "127.0.0.1:9001", "callers": ["::1"], "certificate": "xfcc", "xfcc_forwarding": "append-forward"}"#,
            r#"{"listen": "127.0.0.1:9001", "callers": ["::1"], "xfcc_forwarding": "append-forward"}"#,
        ] {
            let c = config(without_by).expect("parses");
            assert_eq!(
                c.validate(),
                Err(ExtAuthzConfigError::AppendForwardWithoutBy),
                "{without_by}"
            );
        }
        let with_by = config(
            r#"{"listen": "127.0.0.1:9001", "callers": ["::1"], "certificate": "xfcc", "xfcc_by": "spiffe://edge", "xfcc_forwarding": "append-forward"}"#,
        )
        .expect("parses");
        assert_eq!(with_by.validate(), Ok(()));
        assert!(
            config(
                r#"{"listen": "127.0.0.1:9001", "callers": ["::1"], "xfcc_forwarding": "append"}"#
            )
            .is_err(),
            "an unknown mode is refused, not defaulted"
        );
    }

    #[test]
    fn unknown_keys_and_unknown_certificate_sources_are_refused() {
        assert!(
            config(r#"{"listen": "127.0.0.1:9001", "callers": ["::1"], "timeout": 1}"#).is_err()
        );
        assert!(
            config(r#"{"listen": "127.0.0.1:9001", "callers": ["::1"], "certificate": "header"}"#)
                .is_err()
        );
    }
}
