//! The admin listener: `/healthz` (alive), `/readyz` (reference data usable: issuers and
//! registers loaded, every trusted list verified and before its `NextUpdate`), and in the
//! sandbox the sandbox CAs' CRLs and OCSP responder.

use std::sync::Arc;

use http::{HeaderValue, StatusCode, header};
use hyper::body::Incoming;
use hyper::{Request, Response};

use http_body_util::{BodyExt, Limited};
use time::OffsetDateTime;

use crate::sandbox::SandboxResponder;
use crate::server::{Body, full};
use crate::service::CheckService;

pub struct AdminState {
    service: Arc<CheckService>,
    /// The sandbox CAs' CRL and OCSP responder, when the sandbox is on.
    responder: Option<SandboxResponder>,
}

/// Largest request body read (an OCSP request is a few hundred bytes; RFC 6960 requests
/// with several CertIDs stay under a few KB).
const MAX_ADMIN_BODY: usize = 64 * 1024;

impl AdminState {
    /// `sandbox_certs`: the sandbox PKI directory whose CRLs and OCSP answers the listener
    /// serves, when the sandbox is enabled.
    pub fn new(
        sandbox_certs: Option<&std::path::Path>,
        service: Arc<CheckService>,
    ) -> Result<AdminState, String> {
        let responder = match sandbox_certs {
            Some(dir) => Some(SandboxResponder::load(dir).map_err(|e| e.to_string())?),
            None => None,
        };
        Ok(AdminState { service, responder })
    }
}

pub async fn handle(state: Arc<AdminState>, req: Request<Incoming>) -> Response<Body> {
    if let Some(responder) = &state.responder
        && req.uri().path().starts_with("/sandbox/")
    {
        let (parts, body) = req.into_parts();
        let body = match Limited::new(body, MAX_ADMIN_BODY).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => return text(StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n"),
        };
        return match responder.respond(
            &parts.method,
            parts.uri.path(),
            &body,
            OffsetDateTime::now_utc(),
        ) {
            Some((status, content_type, bytes)) => {
                let mut r = Response::new(full(bytes));
                *r.status_mut() = status;
                r.headers_mut()
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
                r
            }
            None => text(StatusCode::NOT_FOUND, "not found\n"),
        };
    }
    match req.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => {
            let data = state.service.data();
            let now = OffsetDateTime::now_utc();
            let mut problems: Vec<String> = Vec::new();
            if data.trust.is_empty() {
                problems.push("the trust list holds no issuer".to_owned());
            }
            if data.registers.registers().is_empty() {
                problems.push("no NCA register is loaded".to_owned());
            }
            // Every configured list must be present, verified and fresh now (not only at the
            // last load: NextUpdate may have passed since).
            let list_problems = data.trust.list_problems(now);
            let lists = data.trust.lists().len();
            problems.extend(list_problems.iter().cloned());
            // Every register file within its age budget.
            let wall = std::time::SystemTime::now();
            problems.extend(data.registers.stale_files(wall));
            let register_files: Vec<serde_json::Value> = data
                .registers
                .files()
                .iter()
                .map(|f| {
                    serde_json::json!({
                        "path": f.path.display().to_string(),
                        "format": f.format.as_str(),
                        "url": f.url,
                        "ageSeconds": f.age(wall).map(|a| a.as_secs()),
                        "maxAgeSeconds": f.max_age.map(|a| a.as_secs()),
                    })
                })
                .collect();
            let body = serde_json::json!({
                "ready": problems.is_empty(),
                "problems": problems,
                "generation": data.generation,
                "trustedIssuers": data.trust.issuers().len(),
                "trustedLists": {
                    "used": lists - list_problems.len(),
                    "notUsed": list_problems.len(),
                },
                "registers": data.registers.registers().len(),
                "registerFiles": register_files,
                "loadedAt": crate::trust::rfc3339(data.loaded_at),
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
