//! The admin listener: `/healthz` (alive), `/readyz` (reference data usable: issuers and
//! registers loaded, every trusted list verified and before its `NextUpdate`), and in the
//! sandbox the sandbox CAs' CRLs and OCSP responder.

use std::sync::Arc;

use http::{HeaderValue, StatusCode, header};
use hyper::{Request, Response};

use http_body_util::{BodyExt, Limited};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use time::OffsetDateTime;

use crate::revocation::RevocationStats;
use crate::sandbox::SandboxResponder;
use crate::sandbox::responder::ResponderLoadError;
use crate::server::{Body, full};
use crate::service::{CheckService, ReferenceData};

pub struct AdminState {
    service: Arc<CheckService>,
    /// The sandbox CAs' CRL and OCSP responder, when the sandbox is on.
    responder: Option<SandboxResponder>,
    /// Redis for the shared counters, when configured (`/readyz` says whether it answers).
    shared_state: Option<Arc<crate::server::SharedState>>,
    /// The evidence keys, when configured: their JWKS is served.
    evidence: Option<Arc<crate::evidence::Evidence>>,
}

/// Where the public keys of `[evidence]` are served (RFC 8615 well-known location).
pub const JWKS_PATH: &str = "/.well-known/jwks.json";

/// Largest request body read (an OCSP request is a few hundred bytes; RFC 6960 requests
/// with several CertIDs stay under a few KB).
const MAX_ADMIN_BODY: usize = 64 * 1024;

impl AdminState {
    /// `sandbox_certs`: the sandbox PKI directory whose CRLs and OCSP answers the listener
    /// serves, when the sandbox is enabled.
    pub fn new(
        sandbox_certs: Option<&std::path::Path>,
        service: Arc<CheckService>,
    ) -> Result<AdminState, ResponderLoadError> {
        let responder = match sandbox_certs {
            Some(dir) => Some(SandboxResponder::load(dir)?),
            None => None,
        };
        Ok(AdminState {
            service,
            responder,
            shared_state: None,
            evidence: None,
        })
    }

    /// Serves the public keys of `evidence` at [`JWKS_PATH`].
    pub fn with_evidence(mut self, evidence: Option<Arc<crate::evidence::Evidence>>) -> AdminState {
        self.evidence = evidence;
        self
    }

    /// `/readyz` reports whether the shared counters' Redis answers (`sharedState`).
    pub fn with_shared_state(mut self, shared: Arc<crate::server::SharedState>) -> AdminState {
        self.shared_state = Some(shared);
        self
    }
}

/// Handles one request to the admin listener. Any request body type will do (the listener
/// gives hyper's, a test an in-memory one); only the sandbox responder reads it, bounded.
pub async fn handle<B>(state: Arc<AdminState>, req: Request<B>) -> Response<Body>
where
    B: hyper::body::Body<Data = bytes::Bytes>,
    B::Error: Into<crate::server::BodyError>,
{
    if let Some(responder) = &state.responder
        && req.uri().path().starts_with("/sandbox/")
    {
        return sandbox_response(responder, req).await;
    }
    match req.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/metrics" => metrics_response(&state.service),
        "/readyz" => readiness_response(&state.service, state.shared_state.as_deref()),
        JWKS_PATH => match &state.evidence {
            Some(evidence) => {
                let mut r = Response::new(full(evidence.jwks_json()));
                let h = r.headers_mut();
                h.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/jwk-set+json"),
                );
                h.insert(
                    header::CACHE_CONTROL,
                    HeaderValue::from_static("max-age=300"),
                );
                r
            }
            None => text(StatusCode::NOT_FOUND, "no [evidence] key is configured\n"),
        },
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// A `/sandbox/` request: reads the body (at most [`MAX_ADMIN_BODY`]) and gives it to the
/// sandbox CRL and OCSP responder; 404 for a path it does not serve.
async fn sandbox_response<B>(responder: &SandboxResponder, req: Request<B>) -> Response<Body>
where
    B: hyper::body::Body<Data = bytes::Bytes>,
    B::Error: Into<crate::server::BodyError>,
{
    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, MAX_ADMIN_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return text(StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n"),
    };
    match responder.respond(
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
    }
}

/// `/metrics`: the state metrics read now, in the Prometheus text format.
fn metrics_response(service: &CheckService) -> Response<Body> {
    let body = crate::telemetry::metrics::render(&state_metrics(service));
    let mut r = Response::new(full(body));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}

/// `/readyz`: 200 when the reference data is usable now, else 503; the JSON body lists the
/// problems, the counts and each register file's age. `sharedState` is `ok` or `degraded`
/// when `[shared_state]` is configured (absent otherwise) and never fails readiness: a Redis
/// outage must not take every replica out of the balancer at once (the failure modes decide).
fn readiness_response(
    service: &CheckService,
    shared: Option<&crate::server::SharedState>,
) -> Response<Body> {
    let data = service.data();
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
    // A log that refuses requests (fail_closed) takes the replica out of the balancer.
    let audit = crate::telemetry::audit::global();
    if crate::telemetry::audit::refusing_requests() {
        problems.push(
            "the audit log cannot be written (on_write_failure = fail_closed): requests get 503"
                .to_owned(),
        );
    }
    if audit.as_ref().is_some_and(|log| log.copy_behind()) {
        problems.push(
            "the audit log's checkpoint_copy cannot be written: it lacks the latest signed checkpoints"
                .to_owned(),
        );
    }
    let mut body = serde_json::json!({
        "ready": problems.is_empty(),
        "problems": problems,
        "generation": data.generation,
        "trustedIssuers": data.trust.issuers().len(),
        "trustedLists": {
            "used": lists - list_problems.len(),
            "notUsed": list_problems.len(),
        },
        "registers": data.registers.registers().len(),
        "registerFiles": register_files(&data, wall),
        // The data in use is the last good; a failed reload is shown, not fatal.
        "lastReloadError": service.last_reload_error().map(|(at, why)| {
            serde_json::json!({ "at": crate::trust::rfc3339(at), "error": without_values(&why) })
        }),
        "loadedAt": crate::trust::rfc3339(data.loaded_at),
    });
    if let (Some(log), Some(fields)) = (audit, body.as_object_mut()) {
        let state = if log.writable() { "ok" } else { "failing" };
        fields.insert("auditLog".to_owned(), state.into());
    }
    if let (Some(shared), Some(fields)) = (shared, body.as_object_mut()) {
        let state = if shared.is_up() { "ok" } else { "degraded" };
        fields.insert("sharedState".to_owned(), state.into());
    }
    let status = if problems.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json(status, &body)
}

/// Each register file for `/readyz`: path, format, URL, age at `wall` and age budget.
fn register_files(data: &ReferenceData, wall: std::time::SystemTime) -> Vec<serde_json::Value> {
    data.registers
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
        .collect()
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: String,
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListLabels {
    source: String,
    territory: String,
    role: String,
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NcaLabels {
    nca: String,
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FileLabels {
    path: String,
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabels {
    method: String,
    outcome: String,
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodOnly {
    method: String,
}

/// The state metrics, read at this scrape: reference data, trusted lists, registers, the
/// result cache and the revocation counters (registered in that order).
fn state_metrics(service: &CheckService) -> Registry {
    let mut r = Registry::default();
    let data = service.data();
    let now = OffsetDateTime::now_utc();

    reference_data_metrics(&mut r, &data);
    trust_metrics(&mut r, &data, now);
    register_metrics(&mut r, &data);

    let cached = Gauge::<i64>::default();
    cached.set(i64::try_from(service.cached_results()).unwrap_or(i64::MAX));
    r.register(
        "psp_gateway_result_cache_entries",
        "Check results held in the cache",
        cached,
    );

    if let Some(revocation) = service.revocation() {
        revocation_metrics(&mut r, &revocation.stats());
    }
    r
}

/// The reference data's generation and load time.
fn reference_data_metrics(r: &mut Registry, data: &ReferenceData) {
    let generation = Gauge::<i64>::default();
    generation.set(i64::try_from(data.generation).unwrap_or(i64::MAX));
    r.register(
        "psp_gateway_reference_data_generation",
        "Reference-data generation in use (increases with every successful reload)",
        generation,
    );
    let loaded = Gauge::<f64, AtomicU64>::default();
    loaded.set(data.loaded_at.unix_timestamp() as f64);
    r.register(
        "psp_gateway_reference_data_loaded_timestamp_seconds",
        "When the reference data in use was loaded",
        loaded,
    );
}

/// Approved issuers per trust source, and each trusted list's state at `now` and
/// `NextUpdate`.
fn trust_metrics(r: &mut Registry, data: &ReferenceData, now: OffsetDateTime) {
    let issuers = Family::<SourceLabels, Gauge>::default();
    for source in data.trust.sources() {
        // Every source is listed, with 0 when it holds no issuer.
        issuers
            .get_or_create(&SourceLabels {
                source: source.name.clone(),
            })
            .set(0);
    }
    for issuer in data.trust.issuers() {
        if let Some(source) = data.trust.sources().get(issuer.source) {
            issuers
                .get_or_create(&SourceLabels {
                    source: source.name.clone(),
                })
                .inc();
        }
    }
    r.register(
        "psp_gateway_trusted_issuers",
        "Approved issuers per trust source",
        issuers,
    );
    let used = Family::<ListLabels, Gauge>::default();
    let next_update = Family::<ListLabels, Gauge<f64, AtomicU64>>::default();
    for list in data.trust.lists() {
        let labels = ListLabels {
            source: list.source.clone(),
            territory: list.territory.clone().unwrap_or_default(),
            role: format!("{:?}", list.role).to_lowercase(),
        };
        used.get_or_create(&labels)
            .set(i64::from(list.problem_at(now).is_none()));
        if let Some(n) = list.next_update {
            next_update
                .get_or_create(&labels)
                .set(n.unix_timestamp() as f64);
        }
    }
    r.register(
        "psp_gateway_trusted_list_used",
        "1 when the trusted list (or LOTL) is verified, authorised and fresh now, else 0",
        used,
    );
    r.register(
        "psp_gateway_trusted_list_next_update_timestamp_seconds",
        "The trusted list's NextUpdate",
        next_update,
    );
}

/// Entities per NCA register and each register file's age.
fn register_metrics(r: &mut Registry, data: &ReferenceData) {
    let entities = Family::<NcaLabels, Gauge>::default();
    for register in data.registers.registers() {
        entities
            .get_or_create(&NcaLabels {
                nca: register.nca_id().to_owned(),
            })
            .set(i64::try_from(register.entities().len()).unwrap_or(i64::MAX));
    }
    r.register(
        "psp_gateway_register_entities",
        "Entities per NCA register",
        entities,
    );
    let ages = Family::<FileLabels, Gauge<f64, AtomicU64>>::default();
    let wall = std::time::SystemTime::now();
    for file in data.registers.files() {
        if let Some(age) = file.age(wall) {
            ages.get_or_create(&FileLabels {
                path: file.path.display().to_string(),
            })
            .set(age.as_secs_f64());
        }
    }
    r.register(
        "psp_gateway_register_file_age_seconds",
        "Time since each register file was last replaced",
        ages,
    );
}

/// The revocation checker's counters: lookups and downloads per method and outcome, cache
/// sizes and the download slots.
fn revocation_metrics(r: &mut Registry, stats: &RevocationStats) {
    let lookups = Family::<MethodLabels, Counter>::default();
    let fetches = Family::<MethodLabels, Counter>::default();
    for (method, m) in [("ocsp", &stats.ocsp), ("crl", &stats.crl)] {
        let label = |outcome: &str| MethodLabels {
            method: method.to_owned(),
            outcome: outcome.to_owned(),
        };
        lookups.get_or_create(&label("hit")).inc_by(m.cache_hits);
        lookups.get_or_create(&label("miss")).inc_by(m.cache_misses);
        fetches.get_or_create(&label("ok")).inc_by(m.fetch_ok);
        fetches
            .get_or_create(&label("failed"))
            .inc_by(m.fetch_failed);
        fetches.get_or_create(&label("rejected")).inc_by(m.rejected);
        fetches
            .get_or_create(&label("refresh-ok"))
            .inc_by(m.refresh_ok);
        fetches
            .get_or_create(&label("refresh-failed"))
            .inc_by(m.refresh_failed);
        fetches.get_or_create(&label("busy")).inc_by(m.busy);
    }
    let entries = Family::<MethodOnly, Gauge<i64>>::default();
    for (method, n) in [("ocsp", stats.ocsp_entries), ("crl", stats.crl_entries)] {
        entries
            .get_or_create(&MethodOnly {
                method: method.to_owned(),
            })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
    r.register(
        "psp_gateway_revocation_cache_entries",
        "Cached OCSP answers and CRLs, failures included (bounds: revocation.ocsp_cache_entries, revocation.crl_cache_max_bytes)",
        entries,
    );
    let crl_bytes = Gauge::<i64>::default();
    crl_bytes.set(i64::try_from(stats.crl_bytes).unwrap_or(i64::MAX));
    r.register(
        "psp_gateway_revocation_crl_cache_bytes",
        "Bytes of CRL index held (bound: revocation.crl_cache_max_bytes)",
        crl_bytes,
    );
    let in_flight = Gauge::<i64>::default();
    in_flight.set(i64::try_from(stats.in_flight).unwrap_or(i64::MAX));
    r.register(
        "psp_gateway_revocation_fetches_in_flight",
        "Revocation downloads in flight now",
        in_flight,
    );
    let cap = Gauge::<i64>::default();
    cap.set(i64::try_from(stats.max_in_flight).unwrap_or(i64::MAX));
    r.register(
        "psp_gateway_revocation_fetches_in_flight_max",
        "The cap on revocation downloads in flight (revocation.max_fetches_in_flight)",
        cap,
    );
    r.register(
        "psp_gateway_revocation_lookups",
        "Revocation cache lookups by method and result",
        lookups,
    );
    r.register(
        "psp_gateway_revocation_fetches",
        "Revocation downloads by method and outcome (rejected: the content was refused; busy: every download slot stayed taken, not fetched)",
        fetches,
    );
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

/// A reload error as `/readyz` (unauthenticated) and the log show it: where and what, without
/// the configuration's own text. A parser's error quotes the offending line and value, which
/// may be a secret (a password or key written where a file name belongs: the FCA docs promise
/// the key is never logged). Dropped: the source lines of a TOML error (`80 | password = …`,
/// its `|` and `^` lines); every double-quoted value becomes `"…"`.
pub fn without_values(error: &str) -> String {
    let mut out = Vec::new();
    for line in error.lines() {
        let trimmed = line.trim_start();
        let gutter = trimmed.trim_start_matches(|c: char| c.is_ascii_digit());
        if gutter.trim_start().starts_with('|') {
            continue;
        }
        let mut kept = String::with_capacity(line.len());
        let mut quoted = false;
        for c in line.chars() {
            match (c, quoted) {
                ('"', false) => {
                    quoted = true;
                    kept.push_str("\"…");
                }
                ('"', true) => {
                    quoted = false;
                    kept.push('"');
                }
                (_, true) => {}
                (c, false) => kept.push(c),
            }
        }
        if quoted {
            // An unterminated quote: what follows it stays hidden.
            kept.push('"');
        }
        out.push(kept);
    }
    out.join("\n")
}

#[cfg(test)]
mod reload_error_tests {
    use super::without_values;

    #[test]
    fn a_reload_error_shown_to_anyone_holds_no_line_or_value_of_the_configuration() {
        let toml = "configuration invalid: gateway.toml: TOML parse error at line 12, column 12\n   |\n12 | password = hunter2-secret\n   |            ^\ninvalid string\nexpected `\"`, `'`";
        let shown = without_values(toml);
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("line 12, column 12"), "{shown}");
        let typed = "previous_keys: invalid type: string \"s3cret\", expected a table";
        let shown = without_values(typed);
        assert!(!shown.contains("s3cret"), "{shown}");
        assert_eq!(
            shown,
            "previous_keys: invalid type: string \"…\", expected a table"
        );
        let file = "registers/sandbox/XX.json: not a register file";
        assert_eq!(without_values(file), file);
    }
}
