//! The baseline of `benches/load.sh`: a bare hyper handler that answers every request with a
//! fixed JSON body of a given size, on the same runtime settings as `psp-gateway serve` (a
//! multi-thread tokio runtime with its default worker count, hyper's automatic HTTP/1 and
//! HTTP/2, `TCP_NODELAY`), and nothing else: no routing, no limits, no logging.
//!
//! ```sh
//! cargo run --release --example bare_handler -- 127.0.0.1:18090 1375
//! ```

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

#[path = "bare/accept.rs"]
mod accept;

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: bare_handler LISTEN_ADDR BODY_BYTES";
    let addr: SocketAddr = args.next().and_then(|a| a.parse().ok()).expect(usage);
    let size: usize = args.next().and_then(|a| a.parse().ok()).expect(usage);
    // A JSON string of the requested size, as the endpoint's answer is JSON; 0 is an empty
    // body, as a forward-auth permit's (nginx's auth_request does not read a subrequest's
    // body, and closes a connection whose answer had one).
    let body = match size {
        0 => Bytes::new(),
        size => Bytes::from(format!("\"{}\"", "a".repeat(size.saturating_sub(2)))),
    };
    accept::serve_connections(addr, move |stream| {
        let body = body.clone();
        async move {
            let service = service_fn(move |_req: Request<hyper::body::Incoming>| {
                let mut response = Response::new(Full::new(body.clone()));
                response.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/json"),
                );
                async move { Ok::<_, Infallible>(response) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    });
}
