//! The listener's side of the face: accepting, refusing callers not in `callers` before any
//! byte is read, the bounded TLS handshake, and handing each connection to tonic's HTTP/2
//! server with the caller's address.
//!
//! ```text
//!  accept ─▶ caller in `callers`? ─▶ connection slot ─▶ TCP_NODELAY ─▶ [TLS, 10 s] ─▶ queue ─▶ tonic
//!              no: closed              none: closed                     (a task per
//!                                                                        handshake)
//! ```

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::held::HeldWrites;
use super::{HANDSHAKE_TIMEOUT, MAX_CONNECTIONS};
use crate::server::Cidr;

/// Accepted connections waiting for tonic to take them. Tonic takes each at once (it spawns a
/// task per connection), so a few places are enough.
const QUEUE: usize = 16;

/// How long to back off after a failed accept (out of file descriptors and the like), as the
/// other listeners do.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The caller of a Check, as the connection it came on says: what tonic puts in each
/// request's extensions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caller {
    pub(crate) peer: SocketAddr,
}

/// One accepted connection from a caller, with its slot among [`MAX_CONNECTIONS`] (given back
/// when tonic drops the connection).
pub(crate) struct Accepted {
    /// Written through [`HeldWrites`]: an answer and its trailers leave in one write.
    transport: HeldWrites<Transport>,
    caller: Caller,
    _slot: OwnedSemaphorePermit,
}

enum Transport {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// The connections accepted, as tonic's incoming stream.
pub(crate) struct Incoming(mpsc::Receiver<Accepted>);

/// A queue between the accept loop and tonic.
pub(crate) fn queue() -> (mpsc::Sender<Accepted>, Incoming) {
    let (tx, rx) = mpsc::channel(QUEUE);
    (tx, Incoming(rx))
}

/// Accepts on `listener` until `shutdown` turns true (or tonic stops taking connections):
/// a connection from an address outside `callers` is closed before any byte is read; the
/// others go to `accepted`, after a TLS handshake of at most [`HANDSHAKE_TIMEOUT`] when the
/// listener has TLS.
pub(crate) async fn accept(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    callers: Vec<Cidr>,
    accepted: mpsc::Sender<Accepted>,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "ext_authz accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = super::stopped(&mut shutdown) => break,
        };
        if !callers.iter().any(|c| c.contains(peer.ip())) {
            tracing::debug!(%peer, "ext_authz: not one of ext_authz.callers, connection closed");
            continue;
        }
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            tracing::debug!(%peer, "ext_authz: every connection slot taken, connection closed");
            continue;
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, %peer, "cannot set TCP_NODELAY");
        }
        let caller = Caller { peer };
        match &tls {
            None => {
                let connection = Accepted {
                    transport: HeldWrites::new(Transport::Plain(stream)),
                    caller,
                    _slot: slot,
                };
                if accepted.send(connection).await.is_err() {
                    break;
                }
            }
            Some(acceptor) => {
                let (acceptor, accepted) = (acceptor.clone(), accepted.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            let connection = Accepted {
                                transport: HeldWrites::new(Transport::Tls(Box::new(stream))),
                                caller,
                                _slot: slot,
                            };
                            // Tonic gone: the server is stopping, and the connection with it.
                            let _ = accepted.send(connection).await;
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(error = %e, %peer, "ext_authz TLS handshake failed");
                        }
                        Err(_) => tracing::debug!(%peer, "ext_authz TLS handshake timed out"),
                    }
                });
            }
        }
    }
}

impl futures_core::Stream for Incoming {
    type Item = Result<Accepted, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().0.poll_recv(cx).map(|next| next.map(Ok))
    }
}

impl tonic::transport::server::Connected for Accepted {
    type ConnectInfo = Caller;

    fn connect_info(&self) -> Caller {
        self.caller
    }
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Transport::Plain(s) => s.is_write_vectored(),
            Transport::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_flush(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

impl AsyncRead for Accepted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().transport).poll_read(cx, buf)
    }
}

impl AsyncWrite for Accepted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().transport).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().transport).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.transport.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().transport).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().transport).poll_shutdown(cx)
    }
}
