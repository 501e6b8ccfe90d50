//! A bank API stand-in for the gateway tests: records what it receives, streams large
//! bodies both ways, and can hold an answer for good.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream;
use http::{HeaderMap, Method, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use psp_server::{self as server, Body, Handler, Limits, full};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// What the upstream received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    pub body_bytes: u64,
}

pub struct Upstream {
    pub addr: SocketAddr,
    pub received: Arc<Mutex<Vec<Received>>>,
    _stop: watch::Sender<bool>,
}

/// Size of the streamed download, and the chunk it is made of.
pub const DOWNLOAD_BYTES: u64 = 50 * 1024 * 1024;
const CHUNK: usize = 64 * 1024;

/// Starts the stand-in on 127.0.0.1:0. Paths:
/// - `…/download`: a 50 MB body, generated chunk by chunk;
/// - `…/slow`: never answers (the gateway's upstream timeout is what ends it);
/// - anything else: drains the request body and answers `received <n> bytes`.
pub async fn start() -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let received: Arc<Mutex<Vec<Received>>> = Arc::default();
    let log = received.clone();
    let handler: Handler = Arc::new(move |req, _conn| {
        let log = log.clone();
        Box::pin(async move {
            let (parts, mut body) = req.into_parts();
            let mut n = 0u64;
            while let Some(Ok(frame)) = body.frame().await {
                if let Some(d) = frame.data_ref() {
                    n += d.len() as u64;
                }
            }
            log.lock().expect("lock").push(Received {
                method: parts.method.clone(),
                path: parts.uri.path().to_owned(),
                headers: parts.headers.clone(),
                body_bytes: n,
            });
            let path = parts.uri.path();
            if path.ends_with("/slow") {
                std::future::pending::<()>().await;
            }
            if path.ends_with("/download") {
                let chunks = (DOWNLOAD_BYTES / CHUNK as u64) as usize;
                let s = stream::iter((0..chunks).map(|i| {
                    Ok::<_, Infallible>(Frame::data(Bytes::from(vec![(i % 251) as u8; CHUNK])))
                }));
                let body: Body = StreamBody::new(s)
                    .map_err(|never: Infallible| match never {})
                    .boxed();
                return Response::new(body);
            }
            let mut r: Response<Body> = Response::new(full(format!("received {n} bytes")));
            *r.status_mut() = StatusCode::OK;
            r
        })
    });
    let (stop, stop_rx) = watch::channel(false);
    tokio::spawn(server::serve_with_link_base(
        listener,
        None,
        Limits::default(),
        "/docs/errors#".into(),
        handler,
        stop_rx,
    ));
    Upstream {
        addr,
        received,
        _stop: stop,
    }
}

/// An upstream below HTTP: it records the bytes of each request head exactly as they arrived
/// (so a test sees the request line the gateway wrote, not what a parser made of it) and
/// answers every request `200` with `Connection: close`.
pub struct RawUpstream {
    pub addr: SocketAddr,
    heads: Arc<Mutex<Vec<Vec<u8>>>>,
    task: tokio::task::JoinHandle<()>,
}

/// Budget for one recorded request head: far above any head the gateway writes.
const RAW_HEAD_LIMIT: usize = 64 * 1024;

impl RawUpstream {
    /// The request lines received so far (without CRLF), as raw bytes.
    pub fn request_lines(&self) -> Vec<Vec<u8>> {
        self.heads
            .lock()
            .expect("lock")
            .iter()
            .map(|h| {
                let end = h.windows(2).position(|w| w == b"\r\n").unwrap_or(h.len());
                h[..end].to_vec()
            })
            .collect()
    }

    /// The request targets received so far (the request line's middle part), as raw bytes.
    pub fn targets(&self) -> Vec<Vec<u8>> {
        self.request_lines()
            .into_iter()
            .map(|line| {
                let mut parts = line.splitn(3, |b| *b == b' ');
                let _method = parts.next();
                parts.next().unwrap_or_default().to_vec()
            })
            .collect()
    }

    /// The header lines of the last request head, lower-cased names only.
    pub fn last_header_names(&self) -> Vec<String> {
        let heads = self.heads.lock().expect("lock");
        let Some(head) = heads.last() else {
            return Vec::new();
        };
        String::from_utf8_lossy(head)
            .split("\r\n")
            .skip(1)
            .filter_map(|l| {
                l.split_once(':')
                    .map(|(n, _)| n.trim().to_ascii_lowercase())
            })
            .collect()
    }

    pub fn count(&self) -> usize {
        self.heads.lock().expect("lock").len()
    }
}

impl Drop for RawUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a [`RawUpstream`] on 127.0.0.1:0.
pub async fn start_raw() -> RawUpstream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let heads: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let log = heads.clone();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let n = match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    head.extend_from_slice(&buf[..n]);
                    if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                        head.truncate(end + 4);
                        break;
                    }
                    if head.len() > RAW_HEAD_LIMIT {
                        return;
                    }
                }
                log.lock().expect("lock").push(head);
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    )
                    .await;
                let _ = stream.shutdown().await;
            });
        }
    });
    RawUpstream { addr, heads, task }
}

/// An upstream that holds every request until released, counting its connections and the
/// requests it holds.
pub struct HeldUpstream {
    pub addr: std::net::SocketAddr,
    pub connections: Arc<AtomicUsize>,
    pub held: Arc<AtomicUsize>,
    pub release: tokio::sync::watch::Sender<bool>,
}

pub async fn held_upstream() -> HeldUpstream {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let connections = Arc::new(AtomicUsize::new(0));
    let held = Arc::new(AtomicUsize::new(0));
    let (release, released) = tokio::sync::watch::channel(false);
    let (count, holding) = (connections.clone(), held.clone());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let (holding, released) = (holding.clone(), released.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_req| {
                    let (holding, mut released) = (holding.clone(), released.clone());
                    async move {
                        holding.fetch_add(1, Ordering::SeqCst);
                        let _ = released.wait_for(|r| *r).await;
                        Ok::<_, Infallible>(http::Response::new(http_body_util::Full::new(
                            bytes::Bytes::from_static(b"released"),
                        )))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    HeldUpstream {
        addr,
        connections,
        held,
        release,
    }
}

/// Waits (bounded: 10 s of tokio's clock) until `condition` holds.
pub async fn until(what: &str, condition: impl Fn() -> bool) {
    psp_testkit::wait::until(what, Duration::from_secs(10), condition).await;
}
