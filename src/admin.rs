//! The admin listener: `/healthz` (alive), `/readyz` (reference data usable), and in the
//! sandbox the sandbox CAs' CRLs and OCSP responder.

use std::sync::Arc;

use http::{HeaderValue, StatusCode, header};
use hyper::body::Incoming;
use hyper::{Request, Response};

use crate::checker::Checker;
use crate::config::Config;
use crate::server::{Body, full};

pub struct AdminState {
    checker: Arc<Checker>,
}

impl AdminState {
    pub fn new(_config: &Config, checker: Arc<Checker>) -> AdminState {
        AdminState { checker }
    }
}

pub async fn handle(state: Arc<AdminState>, req: Request<Incoming>) -> Response<Body> {
    match req.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => {
            let data = state.checker.data();
            let mut problems = Vec::new();
            if data.trust.is_empty() {
                problems.push("the trust list holds no issuer");
            }
            if data.registers.registers().is_empty() {
                problems.push("no NCA register is loaded");
            }
            let body = serde_json::json!({
                "ready": problems.is_empty(),
                "problems": problems,
                "generation": data.generation,
                "trustedIssuers": data.trust.issuers().len(),
                "registers": data.registers.registers().len(),
            });
            let status = if problems.is_empty() {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            json(status, &body)
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    r
}

fn json(status: StatusCode, body: &serde_json::Value) -> Response<Body> {
    let mut r = Response::new(full(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}
