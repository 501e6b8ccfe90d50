//! The sandbox's echo upstream (off unless `gateway.upstream = "sandbox-echo"` with the
//! sandbox on): answers every request with its request line and headers as JSON, so a new
//! user sees exactly what a bank's API would receive from the gateway.

use std::sync::Arc;

use http::{HeaderValue, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::json;

use crate::server::{Body, ConnInfo, Handler, full};

/// The echo handler. The request body is read (counted, not kept) so uploads work.
pub fn handler() -> Handler {
    Arc::new(|req: Request<Incoming>, _conn: Arc<ConnInfo>| Box::pin(echo(req)))
}

async fn echo(req: Request<Incoming>) -> Response<Body> {
    let (parts, mut body) = req.into_parts();
    let mut body_bytes: u64 = 0;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => {
                if let Some(d) = f.data_ref() {
                    body_bytes += d.len() as u64;
                }
            }
            Err(_) => break,
        }
    }
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let value = json!({
        "echo": "psp-gateway sandbox upstream: this is what the bank's API would receive",
        "method": parts.method.as_str(),
        "path": parts.uri.path(),
        "query": parts.uri.query(),
        "version": format!("{:?}", parts.version),
        "headers": headers,
        "bodyBytes": body_bytes,
    });
    let mut r = Response::new(full(serde_json::to_vec_pretty(&value).unwrap_or_default()));
    *r.status_mut() = StatusCode::OK;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}
