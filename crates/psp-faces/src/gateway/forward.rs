//! Forwarding a permitted call to the bank's API: the request and response bodies stream in
//! both directions (nothing buffers a whole body), the path is the normalised one the route
//! was chosen on, hop-by-hop headers are dropped, `X-Forwarded-*` set, spoofable identity
//! headers and path or method override headers removed, and the verified identity added.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::{Authority, Scheme};
use http::{Request, Response, Uri, Version};
use http_body_util::BodyExt;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use super::config::IdentityHeaders;
use super::path::NormalisedPath;
use crate::policy::Permit;
use crate::register::ServiceSet;
use crate::server::{Body, BodyError};
use crate::service::Checked;
use crate::telemetry::trace_context::{TRACEPARENT, TRACESTATE, TraceContext};

/// Hop-by-hop headers (RFC 9110 section 7.6.1), plus `proxy-connection` and
/// `proxy-authorization`, which only concern the hop to this gateway.
const HOP_BY_HOP: [HeaderName; 9] = [
    HeaderName::from_static("connection"),
    HeaderName::from_static("proxy-connection"),
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("te"),
    HeaderName::from_static("trailer"),
    HeaderName::from_static("transfer-encoding"),
    HeaderName::from_static("upgrade"),
    HeaderName::from_static("proxy-authenticate"),
    HeaderName::from_static("proxy-authorization"),
];

/// The default identity header names (`gateway.identity_headers` unset): removed from every
/// inbound request whatever names the site configures, so that a reload renaming them never
/// lets a client's copy of an old default through to an upstream that still reads it.
const DEFAULT_IDENTITY_HEADERS: [HeaderName; 7] = [
    HeaderName::from_static("x-psp-auth-number"),
    HeaderName::from_static("x-psp-name"),
    HeaderName::from_static("x-psp-services"),
    HeaderName::from_static("x-psp-certificate"),
    HeaderName::from_static("x-psp-check-id"),
    HeaderName::from_static("x-psp-report-only-rejection"),
    HeaderName::from_static("x-psp-decision-jws"),
];

/// Client-certificate headers that load balancers and other proxies use; a client must
/// never be able to pass one to the bank: Envoy's `X-Forwarded-Client-Cert`, RFC 9440's
/// `Client-Cert` and `Client-Cert-Chain`, Traefik's `X-Forwarded-Tls-Client-Cert` and its
/// `-Info`, `X-Client-Cert`, `X-Client-Verify`, `X-SSL-Cert`, `X-Client-DN` and
/// `X-Client-Cert-Dn` (nginx and HAProxy conventions), `X-ARR-ClientCert` (Azure App Service),
/// and the contract's `eidas`.
const CLIENT_CERT_HEADERS: [HeaderName; 13] = [
    HeaderName::from_static("x-forwarded-client-cert"),
    HeaderName::from_static("client-cert"),
    HeaderName::from_static("client-cert-chain"),
    HeaderName::from_static("x-forwarded-tls-client-cert"),
    HeaderName::from_static("x-forwarded-tls-client-cert-info"),
    HeaderName::from_static("x-client-cert"),
    HeaderName::from_static("x-client-verify"),
    HeaderName::from_static("x-ssl-cert"),
    HeaderName::from_static("x-client-dn"),
    HeaderName::from_static("x-client-cert-dn"),
    HeaderName::from_static("x-arr-clientcert"),
    HeaderName::from_static("eidas"),
    HeaderName::from_static("ssl-client-cert"),
];

/// Any header starting with one of these is a client-certificate header too: `X-SSL-Client-*`
/// (nginx, Apache, F5), `SSL-Client-*` (ingress-nginx's `ssl-client-cert`,
/// `ssl-client-subject-dn`, `ssl-client-verify`), `X-Amzn-Mtls-Clientcert*` (AWS load
/// balancers).
const CLIENT_CERT_PREFIXES: [&str; 3] = ["x-ssl-client-", "ssl-client-", "x-amzn-mtls-clientcert"];

/// Client-address and front-end headers other proxies set and upstream frameworks believe:
/// a client must not name its own address, port, scheme or server. The gateway sets
/// `X-Forwarded-For`, `-Proto` and `-Host` itself; these it removes: `X-Real-IP` (nginx),
/// `True-Client-IP` (Akamai, Cloudflare), `CF-Connecting-IP`, `Fastly-Client-IP`,
/// `X-Client-IP`, `X-Cluster-Client-IP`, `X-Original-Forwarded-For`, `X-Forwarded-Port`,
/// `X-Forwarded-Server`, `X-Forwarded-Scheme`, `X-Forwarded-Ssl`, `X-Url-Scheme`,
/// `Front-End-Https`, `X-Originating-IP`, `X-Remote-IP`, `X-Remote-Addr`, `Client-IP`,
/// `X-ProxyUser-Ip`, and Envoy's trust markers `X-Envoy-Internal` and
/// `X-Envoy-External-Address`. (`X-Forwarded-Prefix` is an override header.)
pub(super) const CLIENT_ADDRESS_HEADERS: [HeaderName; 20] = [
    HeaderName::from_static("x-real-ip"),
    HeaderName::from_static("true-client-ip"),
    HeaderName::from_static("cf-connecting-ip"),
    HeaderName::from_static("fastly-client-ip"),
    HeaderName::from_static("x-client-ip"),
    HeaderName::from_static("x-cluster-client-ip"),
    HeaderName::from_static("x-original-forwarded-for"),
    HeaderName::from_static("x-forwarded-port"),
    HeaderName::from_static("x-forwarded-server"),
    HeaderName::from_static("x-forwarded-scheme"),
    HeaderName::from_static("x-forwarded-ssl"),
    HeaderName::from_static("x-url-scheme"),
    HeaderName::from_static("front-end-https"),
    HeaderName::from_static("x-originating-ip"),
    HeaderName::from_static("x-remote-ip"),
    HeaderName::from_static("x-remote-addr"),
    HeaderName::from_static("client-ip"),
    HeaderName::from_static("x-proxyuser-ip"),
    HeaderName::from_static("x-envoy-internal"),
    HeaderName::from_static("x-envoy-external-address"),
];

/// Headers that upstream frameworks honour as a replacement for the request's path or method:
/// a client could otherwise be routed by the gateway on one path and served another.
/// `X-Original-URL` and `X-Rewrite-URL` (IIS URL Rewrite, Symfony, Zend), `X-Original-URI`
/// (nginx `auth_request` convention), `X-Forwarded-Uri`, `X-Forwarded-Path` and
/// `X-Forwarded-Prefix` (Traefik, Spring's `ForwardedHeaderFilter`), `X-Envoy-Original-Path`
/// and `X-Envoy-Original-Url` (Envoy), the method overrides `X-HTTP-Method-Override`, `X-HTTP-Method` and
/// `X-Method-Override` (ASP.NET, Express `method-override`, Google APIs), and the original-method
/// headers proxies write for their authorisers and some frameworks read as the method,
/// `X-Forwarded-Method` (Traefik, Caddy), `X-Original-Method` (nginx `auth_request`) and
/// `X-Envoy-Original-Method`. `gateway.strip_headers` adds more.
pub(super) const OVERRIDE_HEADERS: [HeaderName; 14] = [
    HeaderName::from_static("x-original-url"),
    HeaderName::from_static("x-rewrite-url"),
    HeaderName::from_static("x-original-uri"),
    HeaderName::from_static("x-forwarded-uri"),
    HeaderName::from_static("x-forwarded-path"),
    HeaderName::from_static("x-forwarded-prefix"),
    HeaderName::from_static("x-envoy-original-path"),
    HeaderName::from_static("x-envoy-original-url"),
    HeaderName::from_static("x-http-method-override"),
    HeaderName::from_static("x-http-method"),
    HeaderName::from_static("x-method-override"),
    HeaderName::from_static("x-forwarded-method"),
    HeaderName::from_static("x-original-method"),
    HeaderName::from_static("x-envoy-original-method"),
];

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// Why a call could not be forwarded. The gateway maps each one to its status in one
/// exhaustive `match` (`gateway::forward_failure`); the `String`s are the detail for the log,
/// never sent to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ForwardError {
    /// The upstream request could not be built from the inbound one (its URI or a header).
    RequestBuild(String),
    /// No connection to the upstream: refused, unreachable, name resolution, TLS handshake,
    /// or over `gateway.upstream_connect_timeout_ms`.
    Connect(String),
    /// A connection was made but the exchange failed: closed early, or a response that
    /// cannot be read.
    Protocol(String),
    /// No response within `gateway.upstream_timeout_ms`.
    Timeout,
    /// The client's request body could not be read while it was being forwarded (a chunk
    /// size that overflows, a connection closed early): the caller's fault, not the upstream's.
    RequestBody(String),
}

/// Set when the inbound body fails while it is streamed to the upstream.
#[derive(Debug, Default, Clone)]
pub(super) struct BodyFailed(Arc<AtomicBool>);

impl BodyFailed {
    fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Why the upstream client cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// `upstream` does not parse as a URI.
    #[error("upstream `{url}`: {source}")]
    BadUrl {
        url: String,
        source: http::uri::InvalidUri,
    },
    /// `upstream` has no scheme.
    #[error("upstream has no scheme")]
    NoScheme,
    /// `upstream` has no host.
    #[error("upstream has no host")]
    NoHost,
    /// `upstream_ca` cannot be read as PEM certificates.
    #[error("upstream_ca {}: {source}", path.display())]
    CaFile {
        path: std::path::PathBuf,
        source: rustls_pki_types::pem::Error,
    },
    /// A certificate of `upstream_ca` is refused as a trust anchor.
    #[error("upstream_ca {}: {source}", path.display())]
    CaCertificate {
        path: std::path::PathBuf,
        source: rustls::Error,
    },
    /// The TLS client configuration is refused.
    #[error(transparent)]
    Tls(rustls::Error),
}

/// The upstream: base URL and a pooled client.
pub(super) struct Upstream {
    scheme: Scheme,
    authority: Authority,
    base_path: String,
    client: Client<HttpsConnector<HttpConnector>, Body>,
    timeout: Duration,
}

impl Upstream {
    pub(super) fn new(
        url: &str,
        ca: Option<&Path>,
        connect_timeout: Duration,
        timeout: Duration,
    ) -> Result<Upstream, UpstreamError> {
        let uri: Uri = url.parse().map_err(|source| UpstreamError::BadUrl {
            url: url.to_owned(),
            source,
        })?;
        let scheme = uri.scheme().cloned().ok_or(UpstreamError::NoScheme)?;
        let authority = uri.authority().cloned().ok_or(UpstreamError::NoHost)?;
        let base_path = uri.path().trim_end_matches('/').to_owned();

        let mut roots = rustls::RootCertStore::empty();
        if let Some(ca) = ca {
            let ca_file = |source| UpstreamError::CaFile {
                path: ca.to_owned(),
                source,
            };
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(ca)
                .map_err(ca_file)?
                .collect::<Result<_, _>>()
                .map_err(ca_file)?;
            for c in certs {
                roots
                    .add(c)
                    .map_err(|source| UpstreamError::CaCertificate {
                        path: ca.to_owned(),
                        source,
                    })?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(UpstreamError::Tls)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(connector);
        Ok(Upstream {
            scheme,
            authority,
            base_path,
            client,
            timeout,
        })
    }

    /// `gateway.upstream_timeout_ms`.
    pub(super) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sends the prepared request; streams the response back. `body_failed` is the flag
    /// [`prepare`] returned with it.
    pub(super) async fn send(
        &self,
        req: Request<Body>,
        body_failed: &BodyFailed,
    ) -> Result<Response<Body>, ForwardError> {
        let sent = tokio::time::timeout(self.timeout, self.client.request(req)).await;
        let response = match sent {
            Ok(Err(e)) if body_failed.is_set() => {
                return Err(ForwardError::RequestBody(e.to_string()));
            }
            Err(_) => return Err(ForwardError::Timeout),
            Ok(Err(e)) if e.is_connect() => return Err(ForwardError::Connect(e.to_string())),
            Ok(Err(e)) => return Err(ForwardError::Protocol(e.to_string())),
            Ok(Ok(r)) => r,
        };
        let (mut parts, body) = response.into_parts();
        remove_hop_by_hop(&mut parts.headers);
        let body = body.map_err(|e| Box::new(e) as BodyError).boxed();
        Ok(Response::from_parts(
            parts,
            IdleBounded::new(body, self.timeout).boxed(),
        ))
    }

    /// The upstream URI: the base path, the normalised path the route was chosen on (never the
    /// inbound one, which a receiver could read differently), and the inbound query unchanged.
    fn uri_for(&self, path: &NormalisedPath, query: Option<&str>) -> Result<Uri, http::Error> {
        let mut pq = format!("{}{path}", self.base_path);
        if let Some(q) = query {
            pq.push('?');
            pq.push_str(q);
        }
        Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(pq)
            .build()
    }
}

/// The upstream's response body, cut off with an error when the upstream sends nothing for
/// `idle` while the gateway waits for it (`gateway.upstream_timeout_ms`): the head is already
/// with the client, so a stalled body could otherwise hold the client's request, the upstream
/// connection and the budget's ticket for good. Only time spent waiting on the upstream
/// counts: the clock starts when the body is polled, not while a slow client reads.
/// The error that ends a response body whose side (`what`) did nothing for `bound`.
fn timed_out(what: &str, bound: Duration) -> BodyError {
    Box::new(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("{what} for {} ms", bound.as_millis()),
    ))
}

struct IdleBounded {
    inner: Body,
    idle: Duration,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    waiting: bool,
}

impl IdleBounded {
    fn new(inner: Body, idle: Duration) -> IdleBounded {
        IdleBounded {
            inner,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
            waiting: false,
        }
    }
}

impl hyper::body::Body for IdleBounded {
    type Data = bytes::Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        use std::future::Future;
        use std::task::Poll;
        let this = self.get_mut();
        if !this.waiting {
            let at = tokio::time::Instant::now() + this.idle;
            this.deadline.as_mut().reset(at);
            this.waiting = true;
        }
        match std::pin::Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.waiting = false;
                Poll::Ready(frame)
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.waiting = false;
                    Poll::Ready(Some(Err(timed_out(
                        "the upstream sent nothing of its response body",
                        this.idle,
                    ))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// The response body as the client takes it, ended when the client takes nothing of it for
/// `bound` (`gateway.upstream_timeout_ms`) while it has more to give (issue 40 finding 1).
/// A client that never reads (HTTP/2 `SETTINGS_INITIAL_WINDOW_SIZE = 0`, a full TCP window)
/// stops the server from polling the body at all, so a timer of the body's own never runs: a
/// watchdog task, holding the body only weakly, takes the body away (the upstream's body, its
/// connection and the budget's ticket with it) once the body has gone unpolled for `bound`;
/// the next poll, if one ever comes, ends the stream with an error. Without it one PSP held
/// 128 upstream connections for good, and 8 PSPs every slot of the budget.
pub(super) struct ReadBounded {
    shared: Arc<ReadShared>,
}

struct ReadShared {
    body: std::sync::Mutex<Option<Body>>,
    /// When the body was last polled, in milliseconds since `started`.
    polled_ms: AtomicU64,
    started: tokio::time::Instant,
    bound: Duration,
}

impl ReadShared {
    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

impl ReadBounded {
    pub(super) fn new(body: Body, bound: Duration) -> ReadBounded {
        let shared = Arc::new(ReadShared {
            body: std::sync::Mutex::new(Some(body)),
            polled_ms: AtomicU64::new(0),
            started: tokio::time::Instant::now(),
            bound,
        });
        let watched = Arc::downgrade(&shared);
        let bound_ms = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX);
        tokio::spawn(async move {
            let mut next = tokio::time::Instant::now() + bound;
            loop {
                tokio::time::sleep_until(next).await;
                let Some(shared) = watched.upgrade() else {
                    return;
                };
                let idle_ms = shared
                    .elapsed_ms()
                    .saturating_sub(shared.polled_ms.load(Ordering::Relaxed));
                if idle_ms >= bound_ms {
                    let taken = shared
                        .body
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .take();
                    if taken.is_some() {
                        tracing::info!(
                            bound_ms,
                            "a client took nothing of its response for upstream_timeout_ms: the upstream call is ended"
                        );
                    }
                    return;
                }
                next = tokio::time::Instant::now()
                    + Duration::from_millis(bound_ms.saturating_sub(idle_ms).max(1));
            }
        });
        ReadBounded { shared }
    }
}

impl hyper::body::Body for ReadBounded {
    type Data = bytes::Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let shared = &self.shared;
        shared
            .polled_ms
            .store(shared.elapsed_ms(), Ordering::Relaxed);
        let mut body = shared
            .body
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match body.as_mut() {
            Some(inner) => std::pin::Pin::new(inner).poll_frame(cx),
            None => std::task::Poll::Ready(Some(Err(timed_out(
                "the client took nothing of the response",
                shared.bound,
            )))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.shared
            .body
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .is_some_and(hyper::body::Body::is_end_stream)
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.shared
            .body
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(hyper::body::Body::size_hint)
            .unwrap_or_default()
    }
}

/// What forwarding needs to know about the inbound connection.
pub(super) struct Hop<'a> {
    pub peer: IpAddr,
    /// `peer` as a header value, made once per connection.
    pub peer_value: &'a HeaderValue,
    /// The peer is a trusted proxy: its `X-Forwarded-*` headers are kept and extended.
    pub peer_trusted: bool,
    /// The call reached the gateway over TLS.
    pub tls: bool,
}

/// Inbound headers removed before forwarding, besides the hop-by-hop ones.
pub(super) struct Strip<'a> {
    /// The identity header names (the gateway adds its own).
    pub names: &'a IdentityHeaders,
    /// Header mode's own certificate header.
    pub identity_header: Option<&'a HeaderName>,
    /// `gateway.strip_headers`, removed with [`OVERRIDE_HEADERS`].
    pub configured: &'a [HeaderName],
}

/// The verified identity a forwarded call carries.
pub(super) struct Identity<'a> {
    pub permit: &'a Permit<Checked>,
    /// The certificate header's value: the certificate as URL-encoded PEM
    /// ([`url_encoded_pem`]), made once per client chain.
    pub certificate: Option<&'a HeaderValue>,
    pub check_id: &'a str,
    /// The signed decision, when it is forwarded (`[evidence] forward_signature`).
    pub decision: Option<HeaderValue>,
}

/// Rewrites an inbound request for the upstream: URI (on the normalised `path`), hop-by-hop,
/// spoofable and override headers, `X-Forwarded-*`, the identity of the permit, and the
/// gateway's `traceparent` and `tracestate` in place of the caller's. The flag
/// returned with it is set if the inbound body fails while it is forwarded.
pub(super) fn prepare(
    upstream: &Upstream,
    req: Request<Body>,
    path: &NormalisedPath,
    hop: &Hop<'_>,
    strip: Strip<'_>,
    identity: Identity<'_>,
    trace: &TraceContext,
) -> Result<(Request<Body>, BodyFailed), ForwardError> {
    let names = strip.names;
    let (mut parts, body) = req.into_parts();
    // The authority the gateway accepted (`authority::accepted` refused any other): the
    // target's, or else Host's.
    let original_host = parts
        .uri
        .authority()
        .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        .or_else(|| parts.headers.get(header::HOST).cloned());
    // HTTP/2 may split Cookie into crumbs; an HTTP/1.1 receiver expects one line
    // (RFC 9113 section 8.2.3).
    if parts.version == Version::HTTP_2 {
        join_cookie_crumbs(&mut parts.headers);
    }
    parts.uri = upstream
        .uri_for(path, parts.uri.query())
        .map_err(|e| ForwardError::RequestBuild(e.to_string()))?;
    parts.version = Version::HTTP_11;
    let h = &mut parts.headers;
    remove_hop_by_hop(h);
    h.remove(header::HOST);
    super::overrides::drop_lookalikes(h, |canonical| is_protected(canonical, &strip));
    strip_identity(h, names, strip.identity_header);
    strip_overrides(h, strip.configured);

    forwarded_headers(h, hop, original_host);
    identity_headers(h, names, identity);
    // The caller's `traceparent` and `tracestate` never go on as they are: the upstream's
    // parent is the gateway's span (a malformed or unbelieved one was replaced by a new trace).
    trace.write_to(h);
    let failed = BodyFailed::default();
    let flag = failed.clone();
    let body = body
        .map_err(move |e| {
            flag.set();
            e
        })
        .boxed();
    Ok((Request::from_parts(parts, body), failed))
}

/// Replaces the inbound `X-Forwarded-*`, `Forwarded` and client-address headers with the
/// gateway's: `X-Forwarded-For` and `X-Forwarded-Proto` believed (and extended) only from a
/// trusted proxy, `X-Forwarded-Host` the authority the gateway accepted.
fn forwarded_headers(h: &mut HeaderMap, hop: &Hop<'_>, original_host: Option<HeaderValue>) {
    // X-Forwarded-For: believed (and extended) only from a trusted proxy.
    let prior: Vec<String> = if hop.peer_trusted {
        h.get_all(&X_FORWARDED_FOR)
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect()
    } else {
        Vec::new()
    };
    let proto = if hop.peer_trusted {
        h.get(&X_FORWARDED_PROTO).cloned()
    } else {
        None
    };
    h.remove(X_FORWARDED_FOR);
    h.remove(X_FORWARDED_PROTO);
    h.remove(X_FORWARDED_HOST);
    h.remove(header::FORWARDED);
    for name in &CLIENT_ADDRESS_HEADERS {
        h.remove(name);
    }
    if prior.is_empty() {
        // The common case, and all of it from an untrusted peer: the connection's own value.
        h.insert(X_FORWARDED_FOR, hop.peer_value.clone());
    } else {
        let mut chain = prior.join(", ");
        chain.push_str(", ");
        chain.push_str(&hop.peer.to_string());
        insert_value(h, &X_FORWARDED_FOR, &chain);
    }
    let proto = proto.unwrap_or(HeaderValue::from_static(if hop.tls {
        "https"
    } else {
        "http"
    }));
    h.insert(X_FORWARDED_PROTO, proto);
    if let Some(host) = original_host {
        h.insert(X_FORWARDED_HOST, host);
    }
}

/// Adds the verified identity of the permit: authorisation number, PSP name, services,
/// check id, report-only reason and the certificate header.
pub(super) fn identity_headers(h: &mut HeaderMap, names: &IdentityHeaders, identity: Identity<'_>) {
    let Identity {
        permit,
        certificate,
        check_id,
        decision,
    } = identity;
    // The values that do not change with the request are made once per result.
    let values = permit.shared().identity_header_values();
    if let Some(auth) = &values.auth_number {
        h.insert(names.auth_number.clone(), auth.clone());
    }
    if let Some(name) = &values.name {
        h.insert(names.name.clone(), name.clone());
    }
    if let Some(services) = services_value(permit.services()) {
        h.insert(names.services.clone(), services);
    }
    insert_value(h, &names.check_id, check_id);
    if let Some(r) = permit.not_enforced() {
        insert_value(h, &names.report_only, r.reason.code());
    }
    if let Some(value) = certificate {
        h.insert(names.certificate.clone(), value.clone());
    }
    if let Some(value) = decision {
        h.insert(names.decision.clone(), value);
    }
}

/// The services header's value: the numbers in ascending order, comma-separated; `None` for
/// no service. The 256 values are made once.
fn services_value(set: ServiceSet) -> Option<HeaderValue> {
    static VALUES: std::sync::OnceLock<Vec<HeaderValue>> = std::sync::OnceLock::new();
    if set.is_empty() {
        return None;
    }
    let values = VALUES.get_or_init(|| {
        (0..256u16)
            .map(|bits| {
                let numbers: Vec<String> = (1..=8u8)
                    .filter(|n| bits & (1 << (n - 1)) != 0)
                    .map(|n| n.to_string())
                    .collect();
                HeaderValue::from_str(&numbers.join(",")).expect("digits and commas")
            })
            .collect()
    });
    let index = set
        .iter()
        .fold(0usize, |bits, s| bits | 1 << (s.number() - 1));
    values.get(index).cloned()
}

/// The certificate as URL-encoded PEM (what nginx's `$ssl_client_escaped_cert` gives).
pub(super) fn url_encoded_pem(der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    percent_encode(&pem)
}

fn percent_encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Sets the header `name` (parsed when the gateway was built) to `value`, when it is a valid
/// value.
fn insert_value(h: &mut HeaderMap, name: &HeaderName, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        h.insert(name.clone(), v);
    }
}

/// Joins the `cookie` fields into one, separated by `"; "`.
fn join_cookie_crumbs(h: &mut HeaderMap) {
    let crumbs: Vec<&[u8]> = h
        .get_all(header::COOKIE)
        .iter()
        .map(HeaderValue::as_bytes)
        .collect();
    if crumbs.len() < 2 {
        return;
    }
    let joined = crumbs.join(&b"; "[..]);
    if let Ok(value) = HeaderValue::from_bytes(&joined) {
        h.insert(header::COOKIE, value);
    }
}

/// Removes the hop-by-hop headers and every header the `Connection` header names.
fn remove_hop_by_hop(h: &mut HeaderMap) {
    let listed: Vec<String> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    for name in &HOP_BY_HOP {
        h.remove(name);
    }
    for name in &listed {
        h.remove(name.as_str());
    }
}

/// Removes every inbound header that could pass for an identity: the identity header names,
/// the client-certificate headers, and `extra` (header mode's own header), in any case and
/// however often they appear (`HeaderMap` names are lower-case; `remove` drops every value).
pub(super) fn strip_identity(
    h: &mut HeaderMap,
    names: &IdentityHeaders,
    extra: Option<&HeaderName>,
) {
    let prefixed: Vec<HeaderName> = h
        .keys()
        .filter(|k| {
            CLIENT_CERT_PREFIXES
                .iter()
                .any(|p| k.as_str().starts_with(p))
        })
        .cloned()
        .collect();
    for k in prefixed {
        h.remove(k);
    }
    for name in CLIENT_CERT_HEADERS.iter().chain(&DEFAULT_IDENTITY_HEADERS) {
        h.remove(name);
    }
    for name in names.all() {
        h.remove(name);
    }
    if let Some(extra) = extra {
        h.remove(extra);
    }
}

/// Whether `name` (lower case) is a header the gateway removes, sets or reads itself: a
/// lookalike spelling of it must not reach the upstream either.
fn is_protected(name: &str, strip: &Strip<'_>) -> bool {
    let listed = |list: &[HeaderName]| list.iter().any(|h| h.as_str() == name);
    listed(&HOP_BY_HOP)
        || listed(&CLIENT_CERT_HEADERS)
        || listed(&DEFAULT_IDENTITY_HEADERS)
        || listed(&CLIENT_ADDRESS_HEADERS)
        || listed(&OVERRIDE_HEADERS)
        || listed(strip.configured)
        || listed(&[X_FORWARDED_FOR, X_FORWARDED_PROTO, X_FORWARDED_HOST])
        || name == header::FORWARDED.as_str()
        || name == TRACEPARENT.as_str()
        || name == TRACESTATE.as_str()
        || name == header::HOST.as_str()
        || CLIENT_CERT_PREFIXES.iter().any(|p| name.starts_with(p))
        || strip.names.all().into_iter().any(|n| n.as_str() == name)
        || strip.identity_header.is_some_and(|n| n.as_str() == name)
}

/// Whether the built-in proxy removes an inbound header `name` (lower case) and sends nothing
/// of the client's in its place ([`prepare`]): an identity header, header mode's own, a
/// client-certificate or client-address header, `Forwarded`, an override header, one of
/// `gateway.strip_headers`, a name with an underscore or a look-alike spelling of a protected
/// name. This is the one strip set every face applies: the external authorisers have their
/// proxy remove these, or refuse a request that carries one. Not in it: the hop-by-hop headers,
/// `Host` and `X-Forwarded-For`, `-Proto`, `-Host` (each proxy writes its own for its hop),
/// and the trace context (`gateway.trace_context` governs it).
pub(super) fn is_stripped(name: &str, strip: &Strip<'_>) -> bool {
    let listed = |list: &[HeaderName]| list.iter().any(|h| h.as_str() == name);
    listed(&CLIENT_CERT_HEADERS)
        || listed(&DEFAULT_IDENTITY_HEADERS)
        || listed(&CLIENT_ADDRESS_HEADERS)
        || listed(&OVERRIDE_HEADERS)
        || listed(strip.configured)
        || name == header::FORWARDED.as_str()
        || CLIENT_CERT_PREFIXES.iter().any(|p| name.starts_with(p))
        || strip.names.all().into_iter().any(|n| n.as_str() == name)
        || strip.identity_header.is_some_and(|n| n.as_str() == name)
        || super::overrides::is_lookalike(name, |canonical| is_protected(canonical, strip))
}

/// Every fixed name of the strip set ([`is_stripped`]), for a proxy that removes by name:
/// the identity headers, header mode's own, the client-certificate, client-address and
/// override headers, `Forwarded` and `gateway.strip_headers`. The prefixes and look-alike
/// spellings are matched against the request's own names.
pub(super) fn stripped_names(strip: &Strip<'_>) -> Vec<HeaderName> {
    strip
        .names
        .all()
        .into_iter()
        .cloned()
        .chain(strip.identity_header.cloned())
        .chain(
            DEFAULT_IDENTITY_HEADERS
                .iter()
                .filter(|name| !strip.names.all().contains(name))
                .cloned(),
        )
        .chain(CLIENT_CERT_HEADERS.iter().cloned())
        .chain(CLIENT_ADDRESS_HEADERS.iter().cloned())
        .chain([header::FORWARDED])
        .chain(OVERRIDE_HEADERS.iter().cloned())
        .chain(strip.configured.iter().cloned())
        .collect()
}

/// Removes the path and method override headers and the configured ones, however often they
/// appear (`HeaderMap` names are lower-case, so in any case; `remove` drops every value).
pub(super) fn strip_overrides(h: &mut HeaderMap, configured: &[HeaderName]) {
    for name in &OVERRIDE_HEADERS {
        h.remove(name);
    }
    for name in configured {
        h.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_identity_names_are_the_configurations_defaults() {
        let defaults = super::super::config::IdentityHeaderNames::default();
        let constants = DEFAULT_IDENTITY_HEADERS;
        let names: Vec<&str> = constants.iter().map(HeaderName::as_str).collect();
        assert_eq!(names, defaults.all());
    }

    #[test]
    fn every_service_set_has_its_numbers_in_order_as_its_header_value() {
        for bits in 0u16..256 {
            let numbers: Vec<u8> = (1..=8u8).filter(|n| bits & (1 << (n - 1)) != 0).collect();
            let set = ServiceSet::from_numbers(&numbers).expect("1 to 8");
            let want: Vec<String> = numbers.iter().map(u8::to_string).collect();
            match services_value(set) {
                None => assert!(numbers.is_empty(), "{numbers:?}"),
                Some(v) => assert_eq!(v.to_str().unwrap(), want.join(","), "{numbers:?}"),
            }
        }
    }
}
