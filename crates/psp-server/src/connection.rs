//! One connection's requests, from its first bytes to its close.
//!
//! The framing guard ([`crate::framing`]) reads first, so the protocol is known before hyper
//! is involved: HTTP/2 (its preface) is served by hyper's HTTP/2 connection to the end, and
//! HTTP/1 by hyper's HTTP/1 connection *while it is in use*. An HTTP/1 connection quiet for
//! [`PARK_AFTER`] (no request in progress, none started or finished) is parked: hyper's
//! connection is wound down without a word to the client (it was idle, so no answer says
//! `connection: close`), its state and its two buffers (8 KiB or more to read, 8 KiB for
//! answer heads) are dropped, and what remains is the socket, the TLS session and the
//! framing guard's state. The next request's first bytes, read by the guard, start a new
//! hyper connection on the same socket, put back in front of it.
//!
//! The timeouts are the same whether a connection is parked or not: the idle watchdog and
//! the first-request deadline ([`crate::idle::RequestTracker`]), the framing guard's per-head
//! deadline, and shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};

use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::sync::watch;

use crate::framing::FramingGuard;
use crate::idle::{InFlight, RequestTracker, TrackedBody};
use crate::{CLOSE_GRACE, Limits, MAX_CONCURRENT_STREAMS, MAX_HEADERS, hyper_head_limit};
use crate::{ConnHandler, ResponseFuture};

/// How long an HTTP/1 connection stays quiet before it is parked. Short, so that a
/// connection's buffers are not kept through a client's think time, and long next to the
/// gap between requests of a busy client, which never parks.
pub(crate) const PARK_AFTER: Duration = Duration::from_millis(250);

/// The first bytes read to learn that a request has come (or which protocol a connection
/// speaks), put back in front of the connection for hyper.
const FIRST_READ: usize = 512;

/// hyper's connection settings for a listener with `limits`, for each protocol.
///
/// The timeouts of a connection are kept here, not by hyper: the framing guard's per-head
/// deadline (`header_read_timeout`, from a head's first byte), and the request-level
/// watchdog (`first_request_timeout` before the first request, `idle_timeout` between
/// requests). hyper's own header-read timer is off: in hyper ≥ 1.6 it starts as soon as a
/// keep-alive connection waits for its next request, so it closed every idle HTTP/1
/// connection `header_read_timeout` (10 s) after its last answer, whatever `idle_timeout`
/// said. With the guard holding a head until it is complete, that timer could measure
/// nothing else.
pub(crate) struct Builders {
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
}

impl Builders {
    pub(crate) fn new(limits: &Limits) -> Self {
        let mut http1 = http1::Builder::new();
        http1
            .timer(TokioTimer::new())
            .header_read_timeout(None)
            // A request refused by the framing guard ends the reading side: hyper still
            // answers the requests before it, then the connection is shut down, which writes
            // the refusal.
            .half_close(true)
            .max_buf_size(hyper_head_limit(limits))
            .max_headers(MAX_HEADERS);
        let mut http2 = http2::Builder::new(TokioExecutor::new());
        http2
            .timer(TokioTimer::new())
            .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
            .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
        Builders { http1, http2 }
    }
}

/// A connection's handler, each request counted by the connection's tracker from its start
/// to the end of its answer's body ([`TrackedBody`]).
#[derive(Clone)]
pub(crate) struct TrackingService {
    pub(crate) tracker: Arc<RequestTracker>,
    pub(crate) handler: ConnHandler,
}

impl hyper::service::Service<Request<Incoming>> for TrackingService {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = Tracked;

    fn call(&self, req: Request<Incoming>) -> Tracked {
        Tracked {
            in_flight: Some(self.tracker.begin()),
            response: (self.handler)(req),
        }
    }
}

/// A handler's answer whose body keeps its request in progress. A future of its own, not an
/// `async` block, so that it is `Unpin`, which hyper needs to hand a connection back.
pub(crate) struct Tracked {
    in_flight: Option<InFlight>,
    response: ResponseFuture,
}

impl Future for Tracked {
    type Output = Result<Response<TrackedBody>, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.in_flight.is_none() {
            // Polled again after it answered (hyper does not do this): the handler's future
            // is not polled past its end.
            return Poll::Pending;
        }
        let response = std::task::ready!(self.response.as_mut().poll(cx));
        match self.in_flight.take() {
            Some(in_flight) => Poll::Ready(Ok(response.map(|b| TrackedBody::new(b, in_flight)))),
            None => Poll::Pending,
        }
    }
}

/// A connection read from `front` first, then from `inner`.
pub(crate) struct Rewind<S> {
    front: Bytes,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if !this.front.is_empty() {
            let n = this.front.len().min(buf.remaining());
            buf.put_slice(&this.front[..n]);
            this.front.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// What a connection is served with besides its bytes.
pub(crate) struct Serving<'a> {
    pub(crate) builders: &'a Builders,
    pub(crate) service: TrackingService,
    pub(crate) tracker: &'a RequestTracker,
    pub(crate) limits: Limits,
    pub(crate) peer: std::net::SocketAddr,
}

/// Serves the connection `guard` reads until it ends: closed by the client, idle past the
/// watchdog, or at shutdown.
pub(crate) async fn serve<S>(
    serving: Serving<'_>,
    guard: FramingGuard<S>,
    mut shutdown: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut io = Rewind {
        front: Bytes::new(),
        inner: guard,
    };
    // Counted in `psp_gateway_connections_parked` while it is parked.
    let mut parked: Option<ParkedGauge> = None;
    loop {
        if io.front.is_empty() && !next_bytes(&mut io, &serving, &mut shutdown).await {
            drop(parked);
            close(&mut io).await;
            return;
        }
        // Woken: served again, no longer parked.
        drop(parked.take());
        if io.inner.is_http2() {
            Box::pin(serve_http2(&serving, io, &mut shutdown)).await;
            return;
        }
        // Boxed, as the HTTP/2 one: hyper's connection state is the largest part of the
        // serving future, and a parked connection's task keeps only what is outside it.
        match Box::pin(serve_http1(&serving, io, &mut shutdown)).await {
            Some(back) => {
                io = back;
                serving.tracker.parked();
                parked = Some(ParkedGauge::new());
            }
            None => return,
        }
    }
}

/// One parked connection in `psp_gateway_connections_parked`, for as long as it lives.
struct ParkedGauge;

impl ParkedGauge {
    fn new() -> Self {
        crate::telemetry::metrics::metrics()
            .connections_parked
            .inc();
        ParkedGauge
    }
}

impl Drop for ParkedGauge {
    fn drop(&mut self) {
        crate::telemetry::metrics::metrics()
            .connections_parked
            .dec();
    }
}

/// Waits for the next bytes of a connection hyper is not serving (its first request, or the
/// next of a parked one) and puts them in front of it; `false` when the connection is to
/// end instead: closed or refused by the client's side, idle past the watchdog, shutdown.
async fn next_bytes<S>(
    io: &mut Rewind<FramingGuard<S>>,
    serving: &Serving<'_>,
    shutdown: &mut watch::Receiver<bool>,
) -> bool
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    if *shutdown.borrow() {
        return false;
    }
    let mut first = BytesMut::zeroed(FIRST_READ);
    let mut buf = ReadBuf::new(&mut first);
    let read = std::future::poll_fn(|cx| Pin::new(&mut io.inner).poll_read(cx, &mut buf));
    let limits = &serving.limits;
    tokio::select! {
        r = read => {
            let n = match r {
                Ok(()) => buf.filled().len(),
                Err(e) => {
                    tracing::debug!(error = %e, peer = %serving.peer, "connection ended with an error");
                    0
                }
            };
            first.truncate(n);
            io.front = first.freeze();
            n > 0
        }
        () = serving.tracker.idle(limits.idle_timeout, limits.first_request_timeout) => {
            idle_closed(serving);
            false
        }
        _ = shutdown.changed() => false,
    }
}

/// Ends a connection hyper is not serving: a refusal the framing guard holds is written, then
/// TLS's close and the socket's; within [`CLOSE_GRACE`] for a peer that does not read.
async fn close<S: AsyncWrite + Unpin>(io: &mut S) {
    let _ = tokio::time::timeout(CLOSE_GRACE, io.shutdown()).await;
}

/// Serves HTTP/1 requests until the connection ends (`None`) or is parked (the connection
/// back, between two messages).
async fn serve_http1<S>(
    serving: &Serving<'_>,
    io: Rewind<FramingGuard<S>>,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<Rewind<FramingGuard<S>>>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let tracker = serving.tracker;
    let limits = &serving.limits;
    let mut connection = serving
        .builders
        .http1
        .serve_connection(TokioIo::new(io), serving.service.clone());
    let since = tokio::time::Instant::now();
    // Set when parking was asked for: the requests started by then. hyper then winds down;
    // a request that came meanwhile is answered with `connection: close`, and the connection
    // closes instead of parking.
    let mut parking: Option<u64> = None;
    let mut closing = Closing::default();
    loop {
        tokio::select! {
            r = std::future::poll_fn(|cx| connection.poll_without_shutdown(cx)) => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, peer = %serving.peer, "connection ended with an error");
                    return None;
                }
                let asked = !closing.asked && parking == Some(tracker.requests_started());
                let parts = connection.into_parts();
                let mut io = parts.io.into_inner();
                // Parked only between messages: hyper used every byte it was given (nothing
                // in its buffer, which could be the rest of a body it did not drain, or a
                // head it did not read), and the framing guard passed on no part of a
                // message that hyper has not read (it may hold part of the next head).
                // Otherwise what follows could be read as a head that was never one: the
                // connection closes instead, as hyper would have closed it.
                if asked
                    && parts.read_buf.is_empty()
                    && io.front.is_empty()
                    && io.inner.between_messages()
                {
                    // `front` is empty but still holds the first read's buffer
                    // (`next_bytes`): let it go while parked.
                    io.front = Bytes::new();
                    io.inner.release_idle_buffers();
                    return Some(io);
                }
                close(&mut io).await;
                return None;
            }
            () = tracker.quiet(PARK_AFTER, since), if parking.is_none() && !closing.asked => {
                parking = Some(tracker.requests_started());
                Pin::new(&mut connection).graceful_shutdown();
            }
            () = tracker.idle(limits.idle_timeout, limits.first_request_timeout), if !closing.asked => {
                closing.idle(serving);
                Pin::new(&mut connection).graceful_shutdown();
            }
            () = closing.grace(), if closing.grace.is_some() => {
                if closing.grace_over(serving) {
                    return None;
                }
            }
            _ = shutdown.changed(), if !closing.asked => {
                closing.asked = true;
                Pin::new(&mut connection).graceful_shutdown();
            }
        }
    }
}

/// Serves an HTTP/2 connection to its end.
async fn serve_http2<S>(
    serving: &Serving<'_>,
    io: Rewind<FramingGuard<S>>,
    shutdown: &mut watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let tracker = serving.tracker;
    let limits = &serving.limits;
    let connection = serving
        .builders
        .http2
        .serve_connection(TokioIo::new(io), serving.service.clone());
    tokio::pin!(connection);
    let mut closing = Closing::default();
    loop {
        tokio::select! {
            r = connection.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, peer = %serving.peer, "connection ended with an error");
                }
                return;
            }
            () = tracker.idle(limits.idle_timeout, limits.first_request_timeout), if !closing.asked => {
                closing.idle(serving);
                connection.as_mut().graceful_shutdown();
            }
            () = closing.grace(), if closing.grace.is_some() => {
                if closing.grace_over(serving) {
                    return;
                }
            }
            _ = shutdown.changed(), if !closing.asked => {
                closing.asked = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

/// The close of a connection hyper is serving: asked for (idle past the watchdog, or at
/// shutdown), and for an idle one, the peer's time to say goodbye (HTTP/2's GOAWAY and its
/// PING) before the connection is dropped.
#[derive(Default)]
struct Closing {
    asked: bool,
    grace: Option<tokio::time::Instant>,
}

/// The log line of a connection closed for idleness.
fn idle_closed(serving: &Serving<'_>) {
    tracing::debug!(
        peer = %serving.peer,
        requests = serving.tracker.requests_started(),
        "idle connection closed"
    );
}

impl Closing {
    /// Closing for idleness.
    fn idle(&mut self, serving: &Serving<'_>) {
        idle_closed(serving);
        self.asked = true;
        self.grace = Some(tokio::time::Instant::now() + CLOSE_GRACE);
    }

    /// The end of the grace (pending without one).
    async fn grace(&self) {
        match self.grace {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }

    /// The grace is over: `true` to drop the connection, unless a request is still in
    /// progress (then another grace).
    fn grace_over(&mut self, serving: &Serving<'_>) -> bool {
        if serving.tracker.in_flight() == 0 {
            tracing::debug!(peer = %serving.peer, "idle connection did not close in time: dropped");
            return true;
        }
        self.grace = Some(tokio::time::Instant::now() + CLOSE_GRACE);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn rewind_reads_what_is_in_front_then_the_connection() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let (mut client, server) = tokio::io::duplex(64);
        let mut io = Rewind {
            front: Bytes::from_static(b"front "),
            inner: server,
        };
        client.write_all(b"then the rest").await.unwrap();
        drop(client);
        let mut all = String::new();
        io.read_to_string(&mut all).await.unwrap();
        assert_eq!(all, "front then the rest");
    }
}
