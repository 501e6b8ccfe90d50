//! Loopback HTTP servers for the tests, each on `127.0.0.1:0`: the listener is bound before
//! its address is handed out and stays bound for the server's life (no free-port race).
//!
//! Only loopback addresses are ever bound; every accept loop is bounded.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use crate::wait::Gate;

/// Connections a test server accepts before it stops (a bound, not a limit tests reach).
const MAX_CONNECTIONS: usize = 10_000;

/// A listener on an ephemeral loopback port, bound now.
pub async fn loopback() -> TcpListener {
    TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0")
}

/// One answer of a [`TestServer`].
#[derive(Clone)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
    /// A `Location` header, for redirects.
    pub location: Option<String>,
    /// Held back until this gate opens (to make concurrent callers overlap, or to answer
    /// never), instead of after a delay.
    pub gate: Option<Gate>,
}

impl Reply {
    /// `200` with `content_type` and `body`.
    pub fn ok(content_type: &'static str, body: Vec<u8>) -> Self {
        Reply {
            status: 200,
            content_type,
            body,
            location: None,
            gate: None,
        }
    }

    /// `200` with an OCSP response.
    pub fn ocsp(body: Vec<u8>) -> Self {
        Self::ok("application/ocsp-response", body)
    }

    /// `200` with a CRL.
    pub fn crl(body: Vec<u8>) -> Self {
        Self::ok("application/pkix-crl", body)
    }

    /// `status` with an empty body.
    pub fn status(status: u16) -> Self {
        Reply {
            status,
            ..Self::ok("text/plain", Vec::new())
        }
    }

    /// This reply, held until `gate` opens.
    pub fn held_by(self, gate: &Gate) -> Self {
        Reply {
            gate: Some(gate.clone()),
            ..self
        }
    }
}

/// What a [`TestServer`] answers: method, path and body of the request in, [`Reply`] out.
pub type Handler = Arc<dyn Fn(&Method, &str, &[u8]) -> Reply + Send + Sync>;

/// Requests received per path, shared by a server's connection tasks and the test.
#[derive(Clone, Default)]
struct Hits(Arc<Mutex<HashMap<String, usize>>>);

impl Hits {
    fn record(&self, path: &str) {
        *self
            .0
            .lock()
            .expect("hits")
            .entry(path.to_owned())
            .or_default() += 1;
    }

    fn of(&self, path: &str) -> usize {
        self.0.lock().expect("hits").get(path).copied().unwrap_or(0)
    }

    fn total(&self) -> usize {
        self.0.lock().expect("hits").values().sum()
    }
}

/// A hyper HTTP/1.1 server on `127.0.0.1:0` that records the path of every request.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    hits: Hits,
}

impl TestServer {
    /// Starts a server answering with `handler`.
    pub async fn start(handler: Handler) -> Self {
        let listener = loopback().await;
        let addr = listener.local_addr().expect("local addr");
        let hits = Hits::default();
        let counted = hits.clone();
        let _detached = serve_http1(listener, move |req: Request<Incoming>| {
            let handler = Arc::clone(&handler);
            let counted = counted.clone();
            async move {
                let method = req.method().clone();
                let path = req.uri().path().to_owned();
                let body = req
                    .into_body()
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                counted.record(&path);
                let reply = handler(&method, &path, &body);
                if let Some(gate) = &reply.gate {
                    gate.wait().await;
                }
                let mut response = Response::builder()
                    .status(StatusCode::from_u16(reply.status).expect("status"))
                    .header("content-type", reply.content_type);
                if let Some(location) = &reply.location {
                    response = response.header("location", location);
                }
                response
                    .body(Full::new(Bytes::from(reply.body)))
                    .expect("response")
            }
        });
        TestServer { addr, hits }
    }

    /// A server answering every request with `reply`.
    pub async fn fixed(reply: Reply) -> Self {
        Self::start(Arc::new(move |_: &Method, _: &str, _: &[u8]| reply.clone())).await
    }

    /// `http://<addr><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests received for `path` so far.
    pub fn hits(&self, path: &str) -> usize {
        self.hits.of(path)
    }

    /// Requests received so far, every path.
    pub fn total_hits(&self) -> usize {
        self.hits.total()
    }
}

/// Serves HTTP/1.1 on `listener` with `answer` on a task of its own, until the runtime ends
/// or the returned accept task is aborted (which closes the listener).
pub fn serve_http1<F, Fut>(listener: TcpListener, answer: F) -> tokio::task::JoinHandle<()>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    tokio::spawn(async move {
        for _ in 0..MAX_CONNECTIONS {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let answer = answer.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let answer = answer.clone();
                    async move { Ok::<_, Infallible>(answer(req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

/// A static file server: path → bytes, changeable while it runs. Once [`held`](Files::hold),
/// it answers nothing (an attacker who chooses how long a round lasts). Dropped, it stops
/// listening (a server that went away).
pub struct Files {
    /// Where it listens.
    pub addr: SocketAddr,
    files: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    held: Arc<AtomicBool>,
    hits: Hits,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for Files {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl Files {
    /// Starts an empty file server on `127.0.0.1:0`.
    pub async fn start() -> Files {
        let listener = loopback().await;
        let addr = listener.local_addr().expect("addr");
        let files: Arc<Mutex<HashMap<String, Vec<u8>>>> = Arc::default();
        let held: Arc<AtomicBool> = Arc::default();
        let hits = Hits::default();
        let (served, holding, counted) = (files.clone(), held.clone(), hits.clone());
        let accept = serve_http1(listener, move |req: Request<Incoming>| {
            let (served, holding, counted) = (served.clone(), holding.clone(), counted.clone());
            async move {
                let path = req.uri().path().to_owned();
                counted.record(&path);
                if holding.load(Ordering::SeqCst) {
                    std::future::pending::<()>().await;
                }
                let body = served.lock().expect("lock").get(&path).cloned();
                match body {
                    Some(b) => Response::new(Full::new(Bytes::from(b))),
                    None => {
                        let mut r = Response::new(Full::new(Bytes::from_static(b"not found")));
                        *r.status_mut() = StatusCode::NOT_FOUND;
                        r
                    }
                }
            }
        });
        Files {
            addr,
            files,
            held,
            hits,
            accept,
        }
    }

    /// Serves `bytes` at `path` from now on.
    pub fn put(&self, path: &str, bytes: Vec<u8>) {
        self.files
            .lock()
            .expect("lock")
            .insert(path.to_owned(), bytes);
    }

    /// From now on, every request waits forever.
    pub fn hold(&self) {
        self.held.store(true, Ordering::SeqCst);
    }

    /// `http://<addr><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests received for `path` so far (held ones included).
    pub fn hits(&self, path: &str) -> usize {
        self.hits.of(path)
    }
}

/// A TCP server that accepts connections and never answers; the connections stay open until
/// the test's runtime ends.
pub async fn silent_server() -> SocketAddr {
    let listener = loopback().await;
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        let mut held = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            match listener.accept().await {
                Ok((stream, _)) => held.push(stream),
                Err(_) => return,
            }
        }
    });
    addr
}

/// An address where nothing listens: bound, then released. Only for tests that need a
/// refused connection (another process could take the port; then the connection is not
/// refused but still fails the way those tests need: no valid answer).
pub async fn refusing_address() -> SocketAddr {
    let listener = loopback().await;
    let addr = listener.local_addr().expect("local addr");
    drop(listener);
    addr
}

/// A TCP server that reads the request head, then writes `head` and, when `chunks` is set,
/// that many chunks of `chunk` in chunked transfer coding (stopping when the client goes).
pub async fn raw_server(head: &'static str, chunk: Vec<u8>, chunks: usize) -> SocketAddr {
    let listener = loopback().await;
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        for _ in 0..MAX_CONNECTIONS {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let chunk = chunk.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let mut seen = Vec::new();
                for _ in 0..64 {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                    if seen.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for _ in 0..chunks {
                    let frame =
                        [format!("{:x}\r\n", chunk.len()).as_bytes(), &chunk, b"\r\n"].concat();
                    if stream.write_all(&frame).await.is_err() {
                        return;
                    }
                }
                let _ = stream.write_all(b"0\r\n\r\n").await;
            });
        }
    });
    addr
}
