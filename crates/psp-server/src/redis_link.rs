//! One Redis node's connection for the shared counters (`shared`): redis-rs's multiplexed
//! connection over a stream made here, replaced whenever it may be out of step.
//!
//! Why not redis-rs's `ConnectionManager` (issue 39):
//! - a multiplexed connection matches replies to requests by their order; a call that misses
//!   its budget leaves its entry waiting, and when that reply is lost (a proxy, a failover)
//!   every later call takes the reply of the one before it, and misses its budget in turn, until
//!   the connection breaks. Here a call that misses its budget ends its connection: the next
//!   call uses a new one ([`Link::call`]);
//! - it reconnects on I/O errors only: a login refused once (`WRONGPASS` while a password was
//!   rotated) was kept as a failed connection. Here every failed connection attempt is retried,
//!   with a backoff from 50 ms to 2 s, and each failure is logged with its cause (a server
//!   certificate that does not verify says so, not "no answer within the budget");
//! - a reply's size is unbounded (a 2 GB bulk string from a hostile Redis raised the RSS by
//!   220 MB for good). Here the stream refuses to read more than [`MAX_UNASKED_BYTES`] beyond
//!   what the commands written could be answered with ([`Capped`]).
//!
//! The connection is made before the first call when [`Link::connect_now`] is awaited (at
//! start-up), so that a start is not a window of fallbacks.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// Longest wait between two connection attempts.
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(2);
/// First wait after a failed attempt.
const MIN_RECONNECT_DELAY: Duration = Duration::from_millis(50);

/// Bytes a Redis may send beyond what was asked for before the connection is cut: room for a
/// few replies of the largest kind the gateway reads (an error message, `CLUSTER` redirects),
/// far below what would matter to the process's memory.
pub(crate) const MAX_UNASKED_BYTES: usize = 64 * 1024;
/// Bytes of reply each written byte may be answered with. The gateway's commands are answered
/// with far fewer bytes than they take (an `EVALSHA` of ~150 bytes with ~30).
const REPLY_BYTES_PER_WRITTEN_BYTE: usize = 4;
/// Ceiling of the credit a long run of small replies builds up.
const MAX_CREDIT: usize = 1024 * 1024;

/// Where and how to connect.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) host: String,
    pub(crate) port: u16,
    /// TLS (`rediss://`): the client configuration, verified against the roots it holds.
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
    /// Database, user and password (`AUTH`, `SELECT`).
    pub(crate) settings: redis::RedisConnectionInfo,
    pub(crate) connect_timeout: Duration,
}

impl Endpoint {
    fn name(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Why a call got no answer it can use.
#[derive(Debug)]
pub(crate) enum CallError {
    /// No connection now (one is being made); the last attempt's error.
    NotConnected(String),
    /// No answer before the deadline; the connection was ended.
    Timeout,
    /// Redis answered with an error, or the connection failed.
    Redis(redis::RedisError),
    /// A Redis Cluster redirect that is not followed.
    Redirect(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::NotConnected(why) => write!(f, "not connected: {why}"),
            CallError::Timeout => f.write_str("no answer within the budget"),
            CallError::Redis(e) => write!(f, "{e}"),
            CallError::Redirect(why) => f.write_str(why),
        }
    }
}

/// Why a connection to a node could not be made; said in the log and in
/// [`crate::shared::SharedState::connect`]'s causes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConnectError {
    /// Another task is making the connection.
    InProgress,
    /// The whole attempt (TCP, TLS, `AUTH`, the scripts) took longer than this.
    Deadline(Duration),
    /// No TCP connection to the node.
    Tcp { node: String, cause: String },
    /// The configured host is not a name TLS can verify.
    ServerName { host: String, cause: String },
    /// The TLS handshake failed (a certificate that does not verify, a protocol error).
    Tls { node: String, cause: String },
    /// Redis refused the connection's first commands (`HELLO`, `AUTH`, `SELECT`).
    Refused { node: String, cause: String },
    /// `SCRIPT LOAD` failed for a reason other than Redis's own answer.
    ScriptLoad(String),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::InProgress => f.write_str("a connection is being made"),
            ConnectError::Deadline(timeout) => write!(
                f,
                "no connection within connect_timeout_ms ({} ms)",
                timeout.as_millis()
            ),
            ConnectError::Tcp { node, cause } => write!(f, "cannot connect to {node}: {cause}"),
            ConnectError::ServerName { host, cause } => {
                write!(f, "{host} is not a TLS server name: {cause}")
            }
            ConnectError::Tls { node, cause } => write!(f, "TLS with {node} failed: {cause}"),
            ConnectError::Refused { node, cause } => {
                write!(f, "Redis at {node} refused the connection: {cause}")
            }
            ConnectError::ScriptLoad(cause) => write!(f, "SCRIPT LOAD: {cause}"),
        }
    }
}

struct State {
    /// The connection calls use, with its number.
    current: Option<(u64, MultiplexedConnection)>,
    /// Whether a task is making a connection.
    connecting: bool,
    /// The last failed attempt's error, for calls made while there is no connection.
    last_error: String,
}

/// One node's connection.
pub(crate) struct Link {
    endpoint: Endpoint,
    name: String,
    state: Mutex<State>,
    next_id: AtomicU64,
    /// Connections made by every link of one [`crate::shared::SharedState`]: a failure that
    /// came before the latest connection no longer holds calls back.
    connects: Arc<AtomicU64>,
    /// Scripts loaded on every new connection (`SCRIPT LOAD`), so that the first call after a
    /// restart of Redis does not pay for a `NOSCRIPT` round trip.
    scripts: Vec<String>,
    /// Woken when a connection is made: a call that found none waits for it within its budget
    /// (a connection ended by another call's missed budget is back within a millisecond on a
    /// healthy Redis, and the calls in between need not follow a failure mode).
    connected: tokio::sync::Notify,
}

impl Link {
    pub(crate) fn new(
        endpoint: Endpoint,
        connects: Arc<AtomicU64>,
        scripts: Vec<String>,
    ) -> Arc<Link> {
        Arc::new(Link {
            name: endpoint.name(),
            endpoint,
            state: Mutex::new(State {
                current: None,
                connecting: false,
                last_error: "not connected yet".to_owned(),
            }),
            next_id: AtomicU64::new(1),
            connects,
            scripts,
            connected: tokio::sync::Notify::new(),
        })
    }

    /// `host:port` of the node.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the connection now, once (bounded by the connect timeout); when it fails, the
    /// background attempts go on. For the start, so that the first requests find a
    /// connection.
    pub(crate) async fn connect_now(self: &Arc<Self>) -> Result<(), ConnectError> {
        {
            let mut state = self.state();
            if state.current.is_some() {
                return Ok(());
            }
            if state.connecting {
                return Err(ConnectError::InProgress);
            }
            state.connecting = true;
        }
        match self.attempt().await {
            Ok(()) => Ok(()),
            Err(why) => {
                self.spawn_reconnect(MIN_RECONNECT_DELAY);
                Err(why)
            }
        }
    }

    /// Sends `cmd` and waits for its answer until `deadline`. A call that misses it ends the
    /// connection (a reply may still come and would be taken for the next call's).
    pub(crate) async fn call(
        self: &Arc<Self>,
        cmd: &redis::Cmd,
        deadline: Instant,
    ) -> Result<redis::Value, CallError> {
        let (id, mut connection) = match self.current() {
            Some(current) => current,
            None => {
                // Registered before the connection is asked for, so that a connection made in
                // between is not missed.
                let mut made = std::pin::pin!(self.connected.notified());
                made.as_mut().enable();
                self.ensure_connecting();
                let waited = tokio::time::timeout_at(deadline, made).await;
                match (waited, self.current()) {
                    (Ok(()), Some(current)) => current,
                    _ => return Err(CallError::NotConnected(self.state().last_error.clone())),
                }
            }
        };
        let mut reply = std::pin::pin!(connection.send_packed_command(cmd));
        let answered = match tokio::time::timeout_at(deadline, reply.as_mut()).await {
            Ok(answered) => Some(answered),
            Err(_) => answered_by_now(reply.as_mut()).await,
        };
        match answered {
            Some(Ok(value)) => value.extract_error().map_err(|e| {
                self.end_if_broken(id, &e);
                CallError::Redis(e)
            }),
            Some(Err(e)) => {
                self.end_if_broken(id, &e);
                Err(CallError::Redis(e))
            }
            None => {
                self.end(
                    id,
                    "a call missed its budget: the connection may be out of step",
                );
                Err(CallError::Timeout)
            }
        }
    }

    /// The connection calls use now, with its number.
    fn current(&self) -> Option<(u64, MultiplexedConnection)> {
        self.state()
            .current
            .as_ref()
            .map(|(id, connection)| (*id, connection.clone()))
    }

    fn end_if_broken(self: &Arc<Self>, id: u64, e: &redis::RedisError) {
        let server_answered = matches!(e.kind(), redis::ErrorKind::Server(_));
        if !server_answered {
            self.end(id, &e.to_string());
        }
    }

    /// Ends connection `id` if it is still the current one, and starts making a new one.
    fn end(self: &Arc<Self>, id: u64, why: &str) {
        {
            let mut state = self.state();
            match &state.current {
                Some((current, _)) if *current == id => {
                    state.current = None;
                    state.last_error = why.to_owned();
                }
                _ => return,
            }
        }
        tracing::info!(node = %self.name, reason = why, "shared state (Redis): connection ended, making a new one");
        self.ensure_connecting();
    }

    fn ensure_connecting(self: &Arc<Self>) {
        {
            let mut state = self.state();
            if state.connecting || state.current.is_some() {
                return;
            }
            state.connecting = true;
        }
        self.spawn_reconnect(Duration::ZERO);
    }

    /// Tries until a connection is made (or the link is dropped), with a backoff.
    fn spawn_reconnect(self: &Arc<Self>, first_delay: Duration) {
        let weak: Weak<Link> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut delay = first_delay;
            loop {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                let Some(link) = weak.upgrade() else { return };
                if link.attempt().await.is_ok() {
                    return;
                }
                delay = (delay * 2).clamp(MIN_RECONNECT_DELAY, MAX_RECONNECT_DELAY);
            }
        });
    }

    /// One connection attempt, bounded by the connect timeout. The `connecting` flag is set
    /// by the caller and cleared here when it succeeds.
    async fn attempt(self: &Arc<Self>) -> Result<(), ConnectError> {
        // One deadline for the whole attempt: the connection, `AUTH`, the scripts and the
        // eviction check. A Redis that accepts and never answers costs one connect timeout.
        let deadline = tokio::time::Instant::now() + self.endpoint.connect_timeout;
        let timed_out = || ConnectError::Deadline(self.endpoint.connect_timeout);
        let (connection, driver) = match tokio::time::timeout_at(deadline, self.open()).await {
            Ok(Ok(made)) => made,
            Ok(Err(why)) => return self.attempt_failed(why),
            Err(_) => return self.attempt_failed(timed_out()),
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let weak = Arc::downgrade(self);
        let driving = tokio::spawn(async move {
            driver.await;
            if let Some(link) = weak.upgrade() {
                link.end(id, "the connection closed");
            }
        });
        let mut connection = connection;
        let ready = tokio::time::timeout_at(deadline, async {
            self.load_scripts(&mut connection).await?;
            self.check_eviction(&mut connection).await;
            Ok::<(), ConnectError>(())
        })
        .await;
        match ready {
            Ok(Ok(())) => {}
            Ok(Err(why)) => {
                driving.abort();
                return self.attempt_failed(why);
            }
            Err(_) => {
                // Out of step, or not answering: this connection is not used.
                driving.abort();
                return self.attempt_failed(timed_out());
            }
        }
        let mut state = self.state();
        state.current = Some((id, connection));
        state.connecting = false;
        drop(state);
        self.connects.fetch_add(1, Ordering::Relaxed);
        self.connected.notify_waiters();
        tracing::info!(node = %self.name, "shared state (Redis): connected");
        Ok(())
    }

    fn attempt_failed(&self, outcome: ConnectError) -> Result<(), ConnectError> {
        let why = outcome.to_string();
        let mut state = self.state();
        let changed = state.last_error != why;
        state.last_error = why;
        drop(state);
        if changed {
            tracing::warn!(node = %self.name, error = %outcome, "shared state (Redis): cannot connect; retrying with a backoff");
        }
        Err(outcome)
    }

    /// Loads the scripts (within the attempt's deadline). A user without `SCRIPT LOAD` still
    /// works: a call then loads on `NOSCRIPT`, and fails with the cause.
    async fn load_scripts(
        &self,
        connection: &mut MultiplexedConnection,
    ) -> Result<(), ConnectError> {
        for code in &self.scripts {
            let mut load = redis::cmd("SCRIPT");
            load.arg("LOAD").arg(code);
            connection
                .send_packed_command(&load)
                .await
                .map(drop)
                .or_else(|e| match e.kind() {
                    redis::ErrorKind::Server(_) => Ok(()),
                    _ => Err(ConnectError::ScriptLoad(e.to_string())),
                })?;
        }
        Ok(())
    }

    /// Warns when Redis may evict the counters: every key the gateway writes has a time to
    /// live, so any `maxmemory-policy` but `noeviction` (the `volatile-*` ones included) can
    /// drop a counter under memory pressure, and a dropped counter is a quota started afresh.
    /// Read with `INFO memory` (the ACL may refuse it: then nothing is known, and said once
    /// at debug level).
    async fn check_eviction(&self, connection: &mut MultiplexedConnection) {
        let mut info = redis::cmd("INFO");
        info.arg("memory");
        let text = match connection.send_packed_command(&info).await {
            Ok(redis::Value::BulkString(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(redis::Value::VerbatimString { text, .. }) => text,
            other => {
                tracing::debug!(node = %self.name, answer = ?other.map(drop), "shared state (Redis): maxmemory-policy not readable");
                return;
            }
        };
        if let Some(policy) = eviction_policy(&text)
            && policy != "noeviction"
        {
            tracing::warn!(
                node = %self.name,
                policy,
                "shared state (Redis): maxmemory-policy may evict the gateway's counters (a quota then starts afresh); set it to noeviction"
            );
        }
    }

    /// TCP, TLS when configured, the length cap, `AUTH` and `SELECT`.
    async fn open(&self) -> Result<(MultiplexedConnection, Driver), ConnectError> {
        let node = || self.name.clone();
        let tcp = tokio::net::TcpStream::connect((self.endpoint.host.as_str(), self.endpoint.port))
            .await
            .map_err(|e| ConnectError::Tcp {
                node: node(),
                cause: e.to_string(),
            })?;
        let _ = tcp.set_nodelay(true);
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        let (connection, driver) = match &self.endpoint.tls {
            Some(tls) => {
                let server_name = rustls_pki_types::ServerName::try_from(
                    self.endpoint.host.clone(),
                )
                .map_err(|e| ConnectError::ServerName {
                    host: self.endpoint.host.clone(),
                    cause: e.to_string(),
                })?;
                let stream = tokio_rustls::TlsConnector::from(tls.clone())
                    .connect(server_name, tcp)
                    .await
                    .map_err(|e| ConnectError::Tls {
                        node: node(),
                        cause: e.to_string(),
                    })?;
                let (connection, driver) = MultiplexedConnection::new_with_config(
                    &self.endpoint.settings,
                    Capped::new(stream),
                    config,
                )
                .await
                .map_err(|e| ConnectError::Refused {
                    node: node(),
                    cause: e.to_string(),
                })?;
                (connection, futures_boxed(driver))
            }
            None => {
                let (connection, driver) = MultiplexedConnection::new_with_config(
                    &self.endpoint.settings,
                    Capped::new(tcp),
                    config,
                )
                .await
                .map_err(|e| ConnectError::Refused {
                    node: node(),
                    cause: e.to_string(),
                })?;
                (connection, futures_boxed(driver))
            }
        };
        Ok((connection, driver))
    }
}

/// `maxmemory_policy` from the text of `INFO memory`.
fn eviction_policy(info: &str) -> Option<&str> {
    info.lines()
        .find_map(|line| line.strip_prefix("maxmemory_policy:"))
        .map(str::trim)
}

/// Turns of the runtime a call whose deadline passed still waits for a reply that may have
/// come in time.
const LATE_TURNS: usize = 3;

/// Whether the reply came by the deadline after all. A timer and a reply can become ready in
/// the same turn of a busy runtime, and the reply is handed over by the connection's reader,
/// another task: the deadline's task may run first. The budget means "Redis did not answer",
/// not "this process was busy" (issue 39): the reader is given [`LATE_TURNS`] turns to hand
/// over what it has, and nothing more is waited for.
async fn answered_by_now<F: Future>(mut reply: Pin<&mut F>) -> Option<F::Output> {
    for _ in 0..LATE_TURNS {
        tokio::task::yield_now().await;
        let ready = std::future::poll_fn(|cx| Poll::Ready(reply.as_mut().poll(cx))).await;
        if let Poll::Ready(answered) = ready {
            return Some(answered);
        }
    }
    None
}

type Driver = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

fn futures_boxed(driver: impl Future<Output = ()> + Send + 'static) -> Driver {
    Box::pin(driver)
}

/// A stream that refuses to read more than was asked for: every byte written gives
/// [`REPLY_BYTES_PER_WRITTEN_BYTE`] bytes of reading credit (at most [`MAX_CREDIT`] in all),
/// and the connection starts with [`MAX_UNASKED_BYTES`]. A read past the credit is an error:
/// the connection ends instead of buffering whatever a Redis sends.
pub(crate) struct Capped<S> {
    inner: S,
    credit: usize,
}

impl<S> Capped<S> {
    pub(crate) fn new(inner: S) -> Self {
        Capped {
            inner,
            credit: MAX_UNASKED_BYTES,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Capped<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let read = buf.filled().len() - before;
                if read > this.credit {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "Redis sent more than the commands sent to it can be answered with",
                    )));
                }
                this.credit -= read;
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Capped<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.inner).poll_write(cx, data);
        if let Poll::Ready(Ok(n)) = &written {
            this.credit = this
                .credit
                .saturating_add(n.saturating_mul(REPLY_BYTES_PER_WRITTEN_BYTE))
                .min(MAX_CREDIT.max(MAX_UNASKED_BYTES));
        }
        written
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_reply_larger_than_what_was_asked_is_refused_not_buffered() {
        let (client, mut server) = tokio::io::duplex(1 << 20);
        let mut capped = Capped::new(client);
        capped
            .write_all(b"*1\r\n$4\r\nPING\r\n")
            .await
            .expect("write");
        // A "2 GB" bulk string: the header and then bytes for as long as they are read.
        let sent = tokio::spawn(async move {
            let chunk = vec![b'x'; 16 * 1024];
            let _ = server.write_all(b"$2000000000\r\n").await;
            for _ in 0..64 {
                if server.write_all(&chunk).await.is_err() {
                    break;
                }
            }
        });
        let mut buf = vec![0u8; 8 * 1024];
        let mut total = 0usize;
        let error = loop {
            match capped.read(&mut buf).await {
                Ok(0) => panic!("the stream ended before the cap"),
                Ok(n) => total += n,
                Err(e) => break e,
            }
        };
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(total <= MAX_UNASKED_BYTES + 4 * 14, "read {total} bytes");
        sent.abort();
    }

    #[test]
    fn the_eviction_policy_is_read_from_info_memory() {
        let info = "# Memory\r\nused_memory:1024\r\nmaxmemory_policy:allkeys-lru\r\nmem_fragmentation_ratio:1.2\r\n";
        assert_eq!(eviction_policy(info), Some("allkeys-lru"));
        assert_eq!(eviction_policy("# Memory\r\nused_memory:1\r\n"), None);
    }

    #[tokio::test]
    async fn replies_within_what_was_asked_are_read_for_ever() {
        let (client, mut server) = tokio::io::duplex(1 << 16);
        let mut capped = Capped::new(client);
        let mut buf = [0u8; 64];
        // Far more than the initial credit in all, each reply smaller than its command.
        for _ in 0..10_000 {
            capped.write_all(&[b'c'; 40]).await.expect("write");
            let mut command = [0u8; 40];
            server.read_exact(&mut command).await.expect("server reads");
            server.write_all(&[b'r'; 30]).await.expect("server writes");
            capped
                .read_exact(&mut buf[..30])
                .await
                .expect("a reply within the credit");
        }
    }
}
