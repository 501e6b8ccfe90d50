//! The floor of `benches/load-ext-authz.sh`'s gRPC runs: a bare Envoy ext_authz server that
//! reads each `Check` call's request body whole and answers one fixed `CheckResponse`
//! (status OK, allowed) of a given size, with `grpc-status: 0` in its trailers. It runs on the
//! stack under the gateway's face (a multi-thread tokio runtime with its default worker count,
//! hyper's HTTP/2 server, `TCP_NODELAY`) and does nothing else: no decoding of the request, no
//! decision, no logging. The same load generator (`benches/ext_authz_load.rs`) driving it at
//! the same rate gives what the machine, the generator and HTTP/2 cost before any decision.
//!
//! ```sh
//! cargo run --release --example bare_ext_authz -- 127.0.0.1:19191 900
//! ```

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use envoy_types::ext_authz::v3::pb::CheckResponse;
use envoy_types::pb::envoy::config::core::v3::{HeaderValue, HeaderValueOption};
use envoy_types::pb::envoy::service::auth::v3::{OkHttpResponse, check_response};
use envoy_types::pb::google::rpc::Status;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;

#[path = "bare/accept.rs"]
mod accept;

/// The gRPC message frame of an allowed `CheckResponse` whose encoding is `size` bytes (a
/// byte or two more where the lengths' varints skip it; the smallest such answer, when `size`
/// is below it): one header to set, its value padded.
fn answer_frame(size: usize) -> Bytes {
    let answer = |padding: usize| CheckResponse {
        status: Some(Status {
            code: 0,
            ..Default::default()
        }),
        http_response: Some(check_response::HttpResponse::OkResponse(OkHttpResponse {
            headers: vec![HeaderValueOption {
                header: Some(HeaderValue {
                    key: "x-psp-floor".to_owned(),
                    value: "a".repeat(padding),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        })),
        ..Default::default()
    };
    // Each byte of padding is a byte of the message, but for the lengths' varints: grow the
    // padding until the encoding reaches the size, then take the least that does.
    let mut padding = 0;
    while answer(padding).encoded_len() < size {
        padding += size - answer(padding).encoded_len();
    }
    while padding > 0 && answer(padding - 1).encoded_len() >= size {
        padding -= 1;
    }
    let message = answer(padding).encode_to_vec();
    let length = u32::try_from(message.len()).expect("a message under 4 GiB");
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.push(0); // not compressed
    frame.extend_from_slice(&length.to_be_bytes());
    frame.extend_from_slice(&message);
    Bytes::from(frame)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: bare_ext_authz LISTEN_ADDR ANSWER_BYTES";
    let addr: SocketAddr = args.next().and_then(|a| a.parse().ok()).expect(usage);
    let size: usize = args.next().and_then(|a| a.parse().ok()).expect(usage);
    let frame = answer_frame(size);
    accept::serve_connections(addr, move |stream| {
        let frame = frame.clone();
        async move {
            let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                let frame = frame.clone();
                async move {
                    // The call's message, read whole (as any server must before it answers).
                    let _ = request.into_body().collect().await;
                    let mut trailers = http::HeaderMap::new();
                    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                    let body = Full::new(frame)
                        .with_trailers(async move { Some(Ok::<_, Infallible>(trailers)) });
                    let mut response = Response::new(body);
                    response.headers_mut().insert(
                        http::header::CONTENT_TYPE,
                        http::HeaderValue::from_static("application/grpc"),
                    );
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    });
}
