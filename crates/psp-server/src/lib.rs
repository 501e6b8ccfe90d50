//! Serving HTTP on a listener: the plumbing every listener shares (API, gateway, admin), and the
//! HTTP pieces more than one face uses (request ids, the contract's error body, JSON
//! responses), so that no face imports another.
//!
//! ```text
//!  accept ─▶ connection permit ─▶ per-source cap ─▶ TCP_NODELAY ─▶ [TLS handshake, bounded]
//!             (max_connections)    (max_connections_per_source)                   │
//!                                                                                  ▼
//!                          request-level idle watchdog + shutdown ◀── hyper (h1 + h2)
//! ```
//!
//! An HTTP/1 connection quiet for a quarter of a second is parked: hyper's state and buffers
//! for it are dropped until its next request (`connection`).
//!
//! Idleness is measured in requests, not bytes (`idle`): HTTP/2 PING and SETTINGS frames do
//! not keep a connection open, so clients that send only those cannot hold the connection
//! slots.
//!
//! Limits on what comes from the network are named in [`Limits`] with their sources. The
//! header-read timeout is the framing guard's, per head; hyper's own, which also ran between
//! requests, is off (`connection::Builders`); tokio-rustls has no handshake timeout of its own,
//! so the accept is wrapped in one.

#![forbid(unsafe_code)]
// `pub` only what is reachable from the crate root: anything else is `pub(crate)`.
#![warn(unreachable_pub)]

// The layers below, named as modules of this crate inside it.
use psp_telemetry as telemetry;

mod certificate;
mod chains;
mod cidr;
mod connection;
mod error_body;
pub mod framing;
mod idle;
pub mod limiter;
mod redis_link;
mod request_id;
pub mod shared;
mod write_rest;

pub use certificate::{CertificateError, ServerCertificate, SiteCertificates, load_certified_key};
pub use chains::{SharedChain, chain_digest};
pub use cidr::{Cidr, InvalidCidr, client_address, source_key};
pub use error_body::contract_error;
pub use idle::TrackedBody;
pub use limiter::{KeyedLimiter, RateLimitConfig, RateLimitConfigError, count_evictions};
pub use request_id::new_request_id;
pub use shared::{
    CounterKind, FailureMode, LoginCharge, LoginLedgers, Refusal, SharedLimiter, SharedState,
    SharedStateConfig, SharedStateConfigError, SharedStateError,
};
pub use write_rest::poll_write_rest;

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::{Request, Response};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;

/// `X-Forwarded-For`, which [`client_address`] reads from a trusted proxy's requests.
pub const X_FORWARDED_FOR: http::HeaderName = http::HeaderName::from_static("x-forwarded-for");

/// The error type of response bodies (upstream bodies stream through the gateway).
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;
/// Every response body: a full buffer or a stream.
pub type Body = BoxBody<Bytes, BodyError>;

/// A full body from bytes.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    http_body_util::Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

/// A JSON response as every listener answers: the body, `application/json`, `no-store` (check
/// results and errors are about one call), and the request or check id in `x-request-id`.
pub fn json_response(
    status: http::StatusCode,
    body: impl Into<Bytes>,
    request_id: &str,
) -> Response<Body> {
    use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    let h = response.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(v) = HeaderValue::from_str(request_id) {
        h.insert("x-request-id", v);
    }
    response
}

/// What the handler learns about the connection a request came on.
#[derive(Debug)]
pub struct ConnInfo {
    pub peer: SocketAddr,
    pub tls: Option<TlsInfo>,
}

impl ConnInfo {
    pub fn new(peer: SocketAddr, tls: Option<TlsInfo>) -> Self {
        ConnInfo { peer, tls }
    }
}

/// The TLS side of a connection.
#[derive(Debug, Clone)]
pub struct TlsInfo {
    /// The client's certificate chain as presented in the handshake (leaf first); empty when
    /// the client sent none. Still present on resumed TLS 1.3 sessions. Shared with the other
    /// connections that presented the same chain (`chains`).
    pub peer_chain: SharedChain,
    /// The session was resumed (the client certificate verifier did not run again).
    pub resumed: bool,
    /// The server name the client asked for (SNI), lowercased; `None` when it sent none.
    pub server_name: Option<String>,
}

/// A request handler: every listener has one.
pub type Handler = Arc<
    dyn Fn(Request<Incoming>, Arc<ConnInfo>) -> Pin<Box<dyn Future<Output = Response<Body>> + Send>>
        + Send
        + Sync,
>;

/// The future of one response.
pub type ResponseFuture = Pin<Box<dyn Future<Output = Response<Body>> + Send>>;

/// Serves the requests of one connection; made by a [`NewConnection`] when the connection is
/// accepted, so that what a face derives from the connection (the gateway's parsed client
/// certificate: a connection's certificate cannot change) lives in it, typed, for the
/// connection's life.
pub type ConnHandler = Arc<dyn Fn(Request<Incoming>) -> ResponseFuture + Send + Sync>;

/// Makes the handler of each accepted connection (in the manner of linkerd2-proxy's
/// `NewService`).
pub type NewConnection = Arc<dyn Fn(Arc<ConnInfo>) -> ConnHandler + Send + Sync>;

/// A handler that keeps nothing per connection, as a [`NewConnection`].
pub fn per_request(handler: Handler) -> NewConnection {
    Arc::new(move |conn: Arc<ConnInfo>| {
        let handler = handler.clone();
        let handle: ConnHandler = Arc::new(move |req| handler(req, conn.clone()));
        handle
    })
}

/// Limits on one listener.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Time to receive a request's headers, from their first byte (the framing guard keeps
    /// it; not the wait for a next request, which is `idle_timeout`). 10 s: slow-loris defence; nginx's `client_header_timeout`
    /// defaults to 60 s, Envoy's `request_headers_timeout` is unset by default; 10 s is ample
    /// for machine clients on a bank's network.
    pub header_read_timeout: Duration,
    /// A connection with no request in progress and none started or finished for this long
    /// is closed gracefully (HTTP/2 included, which has no header-read timeout between
    /// streams). PING, SETTINGS and other frames that are not requests do not count. 60 s,
    /// Envoy's default `idle_timeout` is 1 h for downstream; API clients reconnect cheaply
    /// and idle connections hold memory.
    pub idle_timeout: Duration,
    /// A connection that has not started a request this long after it was accepted (after
    /// the TLS handshake, on TLS listeners) is closed gracefully. 10 s, as the header-read
    /// timeout: a client opens a connection to send a request on it.
    pub first_request_timeout: Duration,
    /// TLS handshake deadline. 10 s, as nginx's `ssl_handshake_timeout` default (60 s) is
    /// generous for a public listener; a handshake is a few round trips.
    pub handshake_timeout: Duration,
    /// Concurrent connections. 10,000: far above what one replica on 2 cores serves, low
    /// enough that file descriptors (default soft limit 1,024 raised by systemd to 524,288)
    /// and memory stay bounded. Scale horizontally beyond.
    pub max_connections: usize,
    /// Concurrent connections from one source address (IPv6: one /64,
    /// [`CONNECTION_IPV6_PREFIX`]); a connection over it is closed at once. 64: a client
    /// needs a few connections (HTTP/2 multiplexes 100 requests on each), and one source
    /// cannot take the whole `max_connections`. Behind a load balancer every connection
    /// comes from the balancer's addresses: raise it there.
    pub max_connections_per_source: usize,
    /// Largest header block a client may send. 64 KiB: the `eidas` header carries a
    /// certificate (16 KiB allowed), the rest is small; hyper's default buffer is ~400 KB.
    pub max_header_bytes: usize,
    /// How long a graceful shutdown waits for connections to finish.
    pub drain_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            handshake_timeout: Duration::from_secs(10),
            first_request_timeout: Duration::from_secs(10),
            max_connections: 10_000,
            max_connections_per_source: 64,
            max_header_bytes: 64 * 1024,
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// A TLS handshake outcome label.
fn outcome(what: &str) -> crate::telemetry::metrics::OutcomeLabels {
    crate::telemetry::metrics::OutcomeLabels {
        what: "tls".to_owned(),
        outcome: what.to_owned(),
    }
}

/// hyper's HTTP/1 read buffer, which bounds a request head: `max_header_bytes`, at least
/// hyper's minimum of 8 KiB.
fn hyper_head_limit(limits: &Limits) -> usize {
    limits.max_header_bytes.max(8192)
}

/// HTTP/1 allows at most this many header lines. 100 is hyper's default; kept explicit.
const MAX_HEADERS: usize = 100;
/// IPv6 peers are counted per /64 for `max_connections_per_source`: one subscriber usually
/// holds at least a /64 (RFC 6177) and can connect from any address in it.
pub const CONNECTION_IPV6_PREFIX: u8 = 64;
/// After a graceful close of an idle connection, how long the peer has to finish the
/// goodbye (HTTP/2 GOAWAY and its PING) before the connection is dropped. 5 s: a few round
/// trips.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// HTTP/2 concurrent streams per connection. 100: RFC 9113 section 6.5.2 recommends no
/// lower than 100.
const MAX_CONCURRENT_STREAMS: u32 = 100;

/// Serves `listener` until `shutdown` turns true, then stops accepting and drains. Requests
/// refused before any handler reads them (`framing`) link their error code under
/// `link_base` (`checks.error_link_base`).
pub async fn serve_with_link_base(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    limits: Limits,
    link_base: Arc<str>,
    handler: Handler,
    shutdown: watch::Receiver<bool>,
) {
    serve_connections(
        listener,
        tls,
        limits,
        link_base,
        per_request(handler),
        shutdown,
    )
    .await;
}

/// [`serve_with_link_base`], each accepted connection served by the handler `new_connection`
/// makes for it.
pub async fn serve_connections(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    limits: Limits,
    link_base: Arc<str>,
    new_connection: NewConnection,
    mut shutdown: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let per_source = PerSource::new(limits.max_connections_per_source);
    let setup = Arc::new(ConnectionSetup {
        tls,
        new_connection,
        builders: connection::Builders::new(&limits),
        limits,
        link_base,
    });

    // Accept failures in a row (descriptors used up): logged when they start and when they
    // end, not at every retry.
    let mut failing: u64 = 0;
    loop {
        if *shutdown.borrow() {
            break;
        }
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = shutdown.changed() => break,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => {
                    if failing > 0 {
                        tracing::warn!(failures = failing, "accepting connections again");
                        failing = 0;
                    }
                    x
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning,
                    // and say so once, not every 50 ms.
                    if failing == 0 {
                        tracing::error!(error = %e, "accept failed: new connections wait in the backlog until it succeeds (retried every 50 ms)");
                    }
                    failing += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        let Some(source_slot) = per_source.take(peer.ip()) else {
            tracing::debug!(%peer, "over the per-source connection cap: closed");
            drop(stream);
            continue;
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, %peer, "cannot set TCP_NODELAY");
        }
        let setup = setup.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let _source_slot = source_slot;
            serve_accepted(&setup, stream, peer, shutdown).await;
        });
    }

    drain(&permits, &limits).await;
}

/// What every connection of one listener is served with.
struct ConnectionSetup {
    tls: Option<TlsAcceptor>,
    new_connection: NewConnection,
    builders: connection::Builders,
    limits: Limits,
    link_base: Arc<str>,
}

/// One accepted connection's task: the TLS handshake if the listener has TLS, then its
/// requests, served by the handler `new_connection` makes for it.
async fn serve_accepted(
    setup: &ConnectionSetup,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    shutdown: watch::Receiver<bool>,
) {
    match &setup.tls {
        None => {
            let conn = Arc::new(ConnInfo::new(peer, None));
            serve_connection(setup, stream, conn, shutdown, idle::RequestTracker::new()).await;
        }
        Some(acceptor) => {
            let Some((stream, info)) =
                tls_handshake(acceptor, stream, peer, setup.limits.handshake_timeout).await
            else {
                return;
            };
            let conn = Arc::new(ConnInfo::new(peer, Some(info)));
            // The TLS stream (1.2 KB, most of it rustls's connection) in a box of its own:
            // moved by value through the serving futures, it would be laid out in each.
            let stream = Box::new(stream);
            serve_connection(setup, stream, conn, shutdown, idle::RequestTracker::new()).await;
        }
    }
}

/// The TLS handshake within `timeout`, counted in `tls_handshakes` (failed, timeout,
/// resumed or full); `None` when it failed or timed out.
async fn tls_handshake(
    acceptor: &TlsAcceptor,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    timeout: Duration,
) -> Option<(
    tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    TlsInfo,
)> {
    let accepted = tokio::time::timeout(timeout, acceptor.accept(stream)).await;
    let handshakes = &crate::telemetry::metrics::metrics().tls_handshakes;
    let stream = match accepted {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            handshakes.get_or_create(&outcome("failed")).inc();
            tracing::debug!(error = %e, %peer, "TLS handshake failed");
            return None;
        }
        Err(_) => {
            handshakes.get_or_create(&outcome("timeout")).inc();
            tracing::debug!(%peer, "TLS handshake timed out");
            return None;
        }
    };
    let (_, session) = stream.get_ref();
    let resumed = session.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    handshakes
        .get_or_create(&outcome(if resumed { "resumed" } else { "full" }))
        .inc();
    let info = TlsInfo {
        peer_chain: chains::shared(session.peer_certificates().unwrap_or_default()),
        resumed,
        server_name: session.server_name().map(str::to_ascii_lowercase),
    };
    Some((stream, info))
}

/// Drain: every connection task holds a permit; all permits back means all done. Waits at
/// most `drain_timeout`.
async fn drain(permits: &Semaphore, limits: &Limits) {
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(limits.drain_timeout, permits.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!("drain timeout: closing remaining connections");
    }
}

/// Connections per source key, for `max_connections_per_source`.
#[derive(Clone)]
struct PerSource {
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
    max: usize,
}

/// One connection counted against its source; released when dropped.
struct SourceSlot {
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
    key: IpAddr,
}

impl PerSource {
    fn new(max: usize) -> Self {
        PerSource {
            counts: Arc::new(Mutex::new(HashMap::new())),
            max,
        }
    }

    /// A slot for a connection from `peer`, or `None` when its source is at the cap.
    fn take(&self, peer: IpAddr) -> Option<SourceSlot> {
        let key = source_key(peer, CONNECTION_IPV6_PREFIX);
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let n = counts.entry(key).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(SourceSlot {
            counts: self.counts.clone(),
            key,
        })
    }
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = counts.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

/// Serves one connection's requests with its listener's `setup`, counted by `tracker`.
async fn serve_connection<S>(
    setup: &ConnectionSetup,
    stream: S,
    conn: Arc<ConnInfo>,
    shutdown: watch::Receiver<bool>,
    tracker: Arc<idle::RequestTracker>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = connection::TrackingService {
        tracker: tracker.clone(),
        handler: (setup.new_connection)(conn.clone()),
    };
    // hyper reads HTTP/1 request heads only after the guard has checked their framing.
    let guard = framing::FramingGuard::new(
        stream,
        hyper_head_limit(&setup.limits),
        setup.limits.header_read_timeout,
        setup.link_base.clone(),
    );
    let serving = connection::Serving {
        builders: &setup.builders,
        service,
        tracker: &tracker,
        limits: setup.limits,
        peer: conn.peer,
    };
    connection::serve(serving, guard, shutdown).await;
}

/// A server certificate chain and its private key (PEM files), and whether clients may
/// resume sessions.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
    /// TLS session resumption (TLS 1.3 tickets, TLS 1.2 session ids), on by default: a
    /// resumed session skips the handshake's signatures and the client-certificate
    /// verification, and the certificate still goes through every check per request. Off,
    /// every connection is a full handshake (benchmarks compare both).
    #[serde(default = "resumption_default")]
    pub session_resumption: bool,
}

fn resumption_default() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    /// One request on `client`; the response head and body, or `None` when the connection was
    /// closed instead of answering.
    async fn request(client: &mut DuplexStream) -> Option<String> {
        client
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .ok()?;
        answers(client, 1).await
    }

    /// A connection served as every listener serves one, with `limits`, over an in-memory pipe
    /// (the paused clock then advances only when both ends wait).
    fn connection(limits: Limits) -> (DuplexStream, tokio::task::JoinHandle<()>) {
        let served = served(limits);
        // Never shut down: the sender lives as long as the connection's task.
        std::mem::forget(served.shutdown);
        (served.client, served.task)
    }

    /// A connection being served, and what tests look at or do to it.
    struct Served {
        client: DuplexStream,
        task: tokio::task::JoinHandle<()>,
        tracker: Arc<idle::RequestTracker>,
        shutdown: watch::Sender<bool>,
    }

    fn served(limits: Limits) -> Served {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let setup = ConnectionSetup {
            tls: None,
            new_connection: per_request(Arc::new(|_req, _conn| {
                Box::pin(async { Response::new(full("ok")) })
            })),
            builders: connection::Builders::new(&limits),
            limits,
            link_base: Arc::from("/docs/errors#"),
        };
        let (shutdown, watching) = watch::channel(false);
        let tracker = idle::RequestTracker::new();
        let task = {
            let tracker = tracker.clone();
            tokio::spawn(async move {
                let conn = Arc::new(ConnInfo::new(SocketAddr::from(([127, 0, 0, 1], 1)), None));
                serve_connection(&setup, server, conn, watching, tracker).await;
            })
        };
        Served {
            client,
            task,
            tracker,
            shutdown,
        }
    }

    /// Reads answers until `n` bodies ("ok") have come; `None` if the connection closed first.
    async fn answers(client: &mut DuplexStream, n: usize) -> Option<String> {
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while got.windows(6).filter(|w| w == b"\r\n\r\nok").count() < n {
            let read = client.read(&mut buf).await.ok()?;
            if read == 0 {
                return None;
            }
            got.extend_from_slice(&buf[..read]);
        }
        Some(String::from_utf8_lossy(&got).into_owned())
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_connection_is_parked_and_serves_its_next_requests_even_pipelined() {
        let mut c = served(Limits::default());
        assert!(request(&mut c.client).await.is_some());
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(c.tracker.parks(), 1, "parked after 250 ms quiet");
        // Two requests in one write: the first wakes the connection, the second was read
        // with it and must not be lost when hyper takes the connection back.
        c.client
            .write_all(
                b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\nGET /healthz HTTP/1.1\r\nhost: x\r\n\r\n",
            )
            .await
            .unwrap();
        let both = answers(&mut c.client, 2).await.expect("both answered");
        assert_eq!(both.matches("HTTP/1.1 200 OK").count(), 2, "{both}");
        assert!(!both.contains("connection: close"), "{both}");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(c.tracker.parks(), 2);
        assert_eq!(c.tracker.requests_started(), 3);
        assert!(!c.task.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_unread_when_parking_is_asked_is_never_taken_for_the_next_head() {
        // The handler answers without reading the body, whose rest comes slowly; when the
        // connection turns quiet, the rest of the body must not be read as a new request (a
        // request smuggled in a body): the connection is closed, not parked.
        let mut c = served(Limits::default());
        let smuggled = b"GET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n";
        let body_len = 30 + smuggled.len();
        c.client
            .write_all(
                format!("POST /healthz HTTP/1.1\r\nhost: x\r\ncontent-length: {body_len}\r\n\r\n")
                    .as_bytes(),
            )
            .await
            .unwrap();
        c.client.write_all(&[b'a'; 30]).await.unwrap();
        assert!(answers(&mut c.client, 1).await.is_some(), "answered early");
        tokio::time::sleep(Duration::from_secs(1)).await;
        c.client.write_all(smuggled).await.ok();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            c.tracker.requests_started(),
            1,
            "the body was read as a request"
        );
        assert_eq!(c.tracker.parks(), 0);
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), c.client.read_to_end(&mut rest)).await;
        assert!(
            !String::from_utf8_lossy(&rest).contains("HTTP/1.1"),
            "{rest:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn empty_lines_trickled_across_parkings_do_not_keep_a_connection_open() {
        // Blank lines before a request line are allowed (and held by the framing guard as
        // the start of a head); sent one every 200 ms, for 30 s, they start no request and
        // must not hold the connection past its head's deadline.
        let limits = Limits {
            header_read_timeout: Duration::from_secs(2),
            ..Limits::default()
        };
        let mut c = served(limits);
        for _ in 0..150 {
            if c.client.write_all(b"\r\n").await.is_err() || c.task.is_finished() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(c.task.is_finished(), "still open after 30 s of blank lines");
        assert_eq!(c.tracker.requests_started(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_connection_is_never_parked() {
        let mut c = served(Limits::default());
        for _ in 0..20 {
            assert!(request(&mut c.client).await.is_some());
            tokio::time::sleep(connection::PARK_AFTER / 2).await;
        }
        assert_eq!(c.tracker.parks(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_sent_across_the_parking_is_answered_and_one_never_finished_still_times_out() {
        let limits = Limits {
            header_read_timeout: Duration::from_secs(2),
            ..Limits::default()
        };
        let mut c = served(limits);
        assert!(request(&mut c.client).await.is_some());
        // Half a head, then the rest after the connection was parked (the framing guard
        // holds the half; hyper has seen nothing of it).
        c.client
            .write_all(b"GET /healthz HTTP/1.1\r\nho")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(c.tracker.parks(), 1);
        c.client.write_all(b"st: x\r\n\r\n").await.unwrap();
        assert!(
            answers(&mut c.client, 1).await.is_some(),
            "answered after the park"
        );
        // A head begun and never finished, on a parked connection: closed at the guard's
        // deadline, not kept for the idle timeout.
        tokio::time::sleep(Duration::from_secs(1)).await;
        c.client
            .write_all(b"GET /healthz HTTP/1.1\r\nho")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(c.task.is_finished(), "closed at the header timeout");
        assert_eq!(answers(&mut c.client, 1).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_parked_connection_is_closed_at_shutdown_and_a_refused_head_is_still_answered() {
        let mut c = served(Limits::default());
        assert!(request(&mut c.client).await.is_some());
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(c.tracker.parks(), 1);
        c.shutdown.send_replace(true);
        assert_eq!(answers(&mut c.client, 1).await, None, "closed");
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(c.task.is_finished());

        // On a parked connection, a head the framing guard refuses (two Content-Length
        // values) is answered with its refusal, as on a busy one.
        let mut c = served(Limits::default());
        assert!(request(&mut c.client).await.is_some());
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(c.tracker.parks(), 1);
        c.client
            .write_all(b"POST /healthz HTTP/1.1\r\nhost: x\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nab")
            .await
            .unwrap();
        let mut got = Vec::new();
        c.client.read_to_end(&mut got).await.unwrap();
        let got = String::from_utf8_lossy(&got);
        assert!(got.starts_with("HTTP/1.1 400"), "{got}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_keep_alive_connection_idle_past_the_header_timeout_but_within_idle_timeout_is_still_served()
     {
        // The documented defaults: 10 s to send a head, 60 s idle between requests.
        let limits = Limits::default();
        assert!(limits.header_read_timeout < limits.idle_timeout);
        let (mut client, _task) = connection(limits);
        assert!(request(&mut client).await.is_some(), "the first request");
        // Idle for longer than the header-read timeout (it closed the connection here at
        // 10 s), less than the idle timeout.
        tokio::time::sleep(limits.header_read_timeout * 3).await;
        let second = request(&mut client).await;
        assert!(
            second
                .as_deref()
                .is_some_and(|r| r.starts_with("HTTP/1.1 200")),
            "the connection is still usable: {second:?}"
        );
        // Idle for longer than the idle timeout: closed.
        tokio::time::sleep(limits.idle_timeout + Duration::from_secs(1)).await;
        assert_eq!(request(&mut client).await, None, "closed for idleness");
    }

    #[tokio::test(start_paused = true)]
    async fn the_idle_timeout_is_the_configured_one_not_the_header_timeout() {
        let limits = Limits {
            header_read_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(300),
            ..Limits::default()
        };
        let (mut client, task) = connection(limits);
        assert!(request(&mut client).await.is_some());
        tokio::time::sleep(Duration::from_secs(299)).await;
        assert!(request(&mut client).await.is_some(), "within idle_timeout");
        tokio::time::sleep(Duration::from_secs(301)).await;
        assert!(task.is_finished(), "the connection ended past idle_timeout");
        assert_eq!(request(&mut client).await, None);
    }
}
