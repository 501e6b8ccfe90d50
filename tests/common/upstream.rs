//! A bank API stand-in for the gateway tests: records what it receives, streams large
//! bodies both ways, and can be slow.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream;
use http::{HeaderMap, Method, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use psp_gateway::server::{self, Body, Handler, Limits, full};
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
/// - `…/slow`: answers after 5 s;
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
                tokio::time::sleep(Duration::from_secs(5)).await;
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
    tokio::spawn(server::serve(
        listener,
        None,
        Limits::default(),
        handler,
        stop_rx,
    ));
    Upstream {
        addr,
        received,
        _stop: stop,
    }
}
