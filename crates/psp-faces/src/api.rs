//! `GET /v1/psp/eidas`: the contract's check endpoint (`docs/contract.md`;
//! `docs/design.md` section 4).
//!
//! A request passes these phases, top to bottom; each one can end it with an error from the
//! table in [`error`]:
//!
//! 1. request id, source address (peer, or `X-Forwarded-For` behind a trusted proxy);
//! 2. rate limit per source address (IPv6 per address block, `api.rate_limit.ipv6_prefix`)
//!    — first, so that nothing costly (argon2, parsing) runs for a flooding client;
//! 3. path (`/v1/psp/eidas`, any case) and method (GET);
//! 4. credentials (HTTP Basic, argon2; the failed-login counts per source, per user name and
//!    source, and per user name (which only slows down), and the cap on concurrent
//!    verifications are in [`auth`]);
//! 5. parameters: `jurisdiction`, `version`, `fi_reference_id`, `transaction_reference`,
//!    `eidas` (decoded tolerantly);
//! 6. the check (cached), and the 200 body.

pub mod auth;
pub mod config;
pub mod error;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use hyper::{Request, Response};
use time::OffsetDateTime;

use crate::cert::PspCertificate;
use crate::cert::input::decode_certificate_input;
use crate::country::CountryCode;
use crate::gateway::DecodedChain;
use crate::gateway::presented::decoded_once;
use crate::server::{
    Body, Cidr, ConnInfo, client_address, full, json_response, new_request_id, source_key,
};
use crate::service::{CheckService, Checked};

pub use crate::server::KeyedLimiter;
use crate::server::{CounterKind, Refusal, SharedLimiter, SharedState};
pub use auth::{AuthFailure, Authenticator, LoginLimits};
pub use config::{ApiConfig, Credential, FailedLoginConfig, RateLimitConfig};
pub use error::ApiError;

/// The endpoint's path; matched case-insensitively (the contract uses `/v1/psp/eidas` and
/// `/v1/PSP/eIDAS`).
pub const PATH: &str = "/v1/psp/eidas";

/// Where `link`s point (`checks.error_link_base` defaults to this path plus `#`): the error
/// documentation, served on this listener without credentials.
pub const ERRORS_PATH: &str = "/docs/errors";

/// `docs/errors.md`, built into the binary.
const ERRORS_MD: &str = include_str!("../../../docs/errors.md");

const EMPTY_VALUE: &str = "the value is empty";

fn error_documentation(request_id: &str) -> Response<Body> {
    let mut r = Response::new(full(ERRORS_MD));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/markdown; charset=utf-8"),
    );
    if let Ok(v) = HeaderValue::from_str(request_id) {
        h.insert("x-request-id", v);
    }
    r
}

/// Longest `fi_reference_id` / `transaction_reference` accepted. The contract does not give
/// their formats; 256 printable characters covers UUIDs, IBAN-based references and the like.
const MAX_REFERENCE_LEN: usize = 256;

/// Everything the endpoint needs, built once at start-up.
pub struct ApiState {
    pub service: Arc<CheckService>,
    /// Swapped whole on reload (credentials and login limits from the new configuration).
    pub auth: arc_swap::ArcSwap<Authenticator>,
    /// Requests per source key ([`source_key`]); swapped whole on reload (a new quota
    /// starts counting afresh). Counted in Redis when `[shared_state]` is configured
    /// ([`ApiState::with_shared_state`]).
    pub limiter: arc_swap::ArcSwap<SharedLimiter<IpAddr>>,
    /// Redis for the counters the replicas share, when configured.
    pub shared_state: Option<Arc<SharedState>>,
    /// IPv6 sources are counted per block of this prefix length.
    pub ipv6_prefix: u8,
    pub trusted_proxies: Vec<Cidr>,
    pub valid_jurisdictions: std::collections::BTreeSet<CountryCode>,
    pub max_eidas_header_bytes: usize,
    pub error_link_base: String,
    /// The register configuration audits read the history of (`with_audit`).
    pub audit_registers: Option<(crate::register::RegisterConfig, std::path::PathBuf)>,
    /// `[evidence]`: every answer's body is signed (`x-jws-signature`).
    pub evidence: Option<Arc<crate::evidence::Evidence>>,
    /// Signatures of recent bodies by their SHA-256, with the second they were made in: a
    /// cached result is answered with the same bytes many times a second, and signing them
    /// again within the same second would sign the same statement (body and `iat`) again.
    signatures: moka::future::Cache<[u8; 32], (i64, http::HeaderValue)>,
}

/// The request limiter `[api] rate_limit` configures: in Redis when `shared` is given, per
/// process otherwise.
fn limiter_of(api: &ApiConfig, shared: Option<&Arc<SharedState>>) -> SharedLimiter<IpAddr> {
    SharedLimiter::new(
        shared,
        CounterKind::RateLimits,
        api.rate_limit.requests,
        Duration::from_secs(api.rate_limit.period_seconds),
        api.rate_limit.max_tracked_sources,
        "requests",
    )
}

impl ApiState {
    /// Takes the credentials, login limits and request rate limit of a reloaded `[api]`
    /// section. Requests in flight finish with what they started with. (The listen address
    /// and TLS files need a restart.)
    pub fn reload(&self, api: &ApiConfig) {
        // What the credentials and limits did not change is kept: remembered logins (so a
        // reload sends no caller back to argon2), verification slots, login quotas.
        let next = self
            .auth
            .load()
            .reloaded(&api.credentials, LoginLimits::from_config(api));
        self.auth.store(Arc::new(next));
        // A limiter with unchanged settings keeps its counts (a reload is no fresh quota).
        let wanted = limiter_of(api, self.shared_state.as_ref());
        if self.limiter.load().settings() != wanted.settings() {
            self.limiter.store(Arc::new(wanted));
        }
    }

    /// Counts the request rate limit in Redis (`[shared_state]`), shared with the other
    /// replicas; without this call, per process.
    pub fn with_shared_state(mut self, api: &ApiConfig, shared: Arc<SharedState>) -> ApiState {
        self.limiter = arc_swap::ArcSwap::from_pointee(limiter_of(api, Some(&shared)));
        let auth = Authenticator::new(&api.credentials, LoginLimits::from_config(api))
            .with_shared_state(shared.clone());
        self.auth = arc_swap::ArcSwap::from_pointee(auth);
        self.shared_state = Some(shared);
        self
    }

    /// Audits (`at`) read the registers in force at the time from this register
    /// configuration's history (paths relative to `base_dir`).
    pub fn with_audit(
        mut self,
        registers: crate::register::RegisterConfig,
        base_dir: std::path::PathBuf,
    ) -> ApiState {
        self.audit_registers = Some((registers, base_dir));
        self
    }

    /// The endpoint's state: its `[api]` settings, the transaction jurisdictions it accepts
    /// and the base of its error links (`[checks]`), and the checking service.
    pub fn new(
        api: &ApiConfig,
        valid_jurisdictions: std::collections::BTreeSet<CountryCode>,
        error_link_base: String,
        service: Arc<CheckService>,
    ) -> ApiState {
        ApiState {
            service,
            auth: arc_swap::ArcSwap::from_pointee(Authenticator::new(
                &api.credentials,
                LoginLimits::from_config(api),
            )),
            limiter: arc_swap::ArcSwap::from_pointee(limiter_of(api, None)),
            shared_state: None,
            ipv6_prefix: api.rate_limit.ipv6_prefix,
            trusted_proxies: api.trusted_proxies.clone(),
            valid_jurisdictions,
            max_eidas_header_bytes: api.max_eidas_header_bytes,
            error_link_base,
            audit_registers: None,
            evidence: None,
            signatures: moka::future::Cache::builder()
                .max_capacity(SIGNATURES_KEPT)
                .time_to_live(std::time::Duration::from_secs(2))
                .build(),
        }
    }

    /// Signs every answer's body with `evidence` (`x-jws-signature`, a detached JWS).
    pub fn with_evidence(mut self, evidence: Option<Arc<crate::evidence::Evidence>>) -> ApiState {
        self.evidence = evidence;
        self
    }
}

/// The question a check answer answers, handed from the check to its signature
/// (`psp_question` of the JWS header, docs/evidence.md): the certificate's SHA-256, the
/// jurisdiction, the `fi_reference_id`, the caller, and for an audit check its time.
#[derive(Clone)]
struct Answered(serde_json::Map<String, serde_json::Value>);

impl Answered {
    fn new(
        fingerprint: &str,
        jurisdiction: CountryCode,
        fi_reference_id: &str,
        caller: &str,
    ) -> Answered {
        let mut q = serde_json::Map::new();
        q.insert("certSha256".into(), fingerprint.into());
        q.insert("jurisdiction".into(), jurisdiction.to_string().into());
        q.insert("fiReferenceId".into(), fi_reference_id.into());
        q.insert("caller".into(), caller.into());
        Answered(q)
    }
}

/// Bodies whose signature is kept for reuse within its second.
const SIGNATURES_KEPT: u64 = 10_000;

/// The header that carries an answer's detached signature (as UK Open Banking's).
pub const JWS_SIGNATURE: http::HeaderName = http::HeaderName::from_static("x-jws-signature");

/// `response` with its body signed: the body is collected (every answer of this face is
/// one buffer already) and a detached JWS over its exact bytes is added, made in this second
/// (reused when the same bytes were signed in this second already).
async fn signed(
    state: &ApiState,
    evidence: &crate::evidence::Evidence,
    response: Response<Body>,
) -> Response<Body> {
    use http_body_util::BodyExt;
    let (mut parts, body) = response.into_parts();
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        // A buffer does not fail; were it to, no answer is better than an unsigned one.
        Err(_) => {
            let mut failed = Response::new(crate::server::full(bytes::Bytes::new()));
            *failed.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            return failed;
        }
    };
    // The question answered (a successful check says which; a refusal answers none).
    let question = parts
        .extensions
        .remove::<Answered>()
        .map(|a| a.0)
        .unwrap_or_default();
    let question_json = serde_json::Value::Object(question.clone()).to_string();
    // The same bytes answering the same question, within the same second: the same
    // statement, signed once.
    let digest = crate::hex::sha256(&[&bytes[..], b"\0", question_json.as_bytes()].concat());
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let signature = match state.signatures.get(&digest).await {
        Some((second, value)) if second == now => Some(value),
        _ => {
            let value =
                http::HeaderValue::from_str(&evidence.sign_body_at(&bytes, now, &question)).ok();
            if let Some(value) = &value {
                state.signatures.insert(digest, (now, value.clone())).await;
            }
            value
        }
    };
    if let Some(v) = signature {
        parts.headers.insert(JWS_SIGNATURE, v);
    }
    Response::from_parts(parts, crate::server::full(bytes))
}

/// Handles one request. The endpoint reads no request body (`GET` only), so any body type
/// will do: the listener gives hyper's, a test an empty one.
pub async fn handle<B>(
    state: Arc<ApiState>,
    req: Request<B>,
    conn: Arc<ConnInfo>,
) -> Response<Body> {
    let request_id = new_request_id();
    let forwarded = req
        .headers()
        .get_all(&crate::server::X_FORWARDED_FOR)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>();
    let source = client_address(
        conn.peer.ip(),
        forwarded.into_iter(),
        &state.trusted_proxies,
    );
    let response = answer(&state, &req, source, &request_id).await;
    match &state.evidence {
        Some(evidence) => signed(&state, evidence, response).await,
        None => response,
    }
}

/// The answer to one request, counted and logged.
async fn answer<B>(
    state: &ApiState,
    req: &Request<B>,
    source: IpAddr,
    request_id: &str,
) -> Response<Body> {
    let metrics = crate::telemetry::metrics::metrics();
    match respond(state, req, source, request_id).await {
        Ok(response) => {
            metrics.request("api", "", "", "answered", "");
            response
        }
        Err(e) => {
            metrics.request("api", "", "", "refused", e.code());
            if matches!(
                e,
                ApiError::RateLimited { .. } | ApiError::LoginAttemptsExceeded { .. }
            ) {
                metrics
                    .rate_limited
                    .get_or_create(&crate::telemetry::metrics::FaceLabels { face: "api" })
                    .inc();
            }
            tracing::info!(
                request_id = %request_id,
                source = %source,
                code = e.code(),
                "check endpoint refused a request"
            );
            e.response(request_id, &state.error_link_base)
        }
    }
}

/// Answers one request (any refusal as an [`ApiError`]): the source's rate limit, the
/// route, the caller's credentials, the parameters, then the check (from the cache when
/// possible), its audit log line and the JSON answer.
async fn respond<B>(
    state: &ApiState,
    req: &Request<B>,
    source: IpAddr,
    request_id: &str,
) -> Result<Response<Body>, ApiError> {
    let source_key = source_key(source, state.ipv6_prefix);
    if let Some(documentation) = admitted(state, req, source_key, request_id).await? {
        return Ok(documentation);
    }
    let (auth, caller) = caller(state, req.headers(), source_key).await?;
    if crate::telemetry::audit::refusing_requests() {
        return Err(ApiError::AuditUnavailable);
    }
    let params = check_params(state, req, &auth, &caller)?;
    let (Some(fingerprint), [der]) = (
        params.certificate.leaf_fingerprint(),
        params.certificate.chain(),
    ) else {
        // decode_certificate_input gives one certificate or an error.
        return Err(ApiError::CertificateInvalid(
            "the eidas parameter holds no certificate".to_owned(),
        ));
    };

    let started = std::time::Instant::now();
    // A certificate asked about again is answered from the cache by its fingerprint, without
    // parsing it again (the same bytes parsed the same way the first time).
    let cached = match params.at {
        None => {
            state
                .service
                .cached(fingerprint, params.jurisdiction, OffsetDateTime::now_utc())
                .await
        }
        Some(_) => None,
    };
    let report = match cached {
        Some(report) => report,
        None => {
            let certificate = PspCertificate::from_der(der.clone())
                .map_err(|e| ApiError::CertificateInvalid(e.to_string()))?;
            // Both paths below are rare next to a cached answer and their futures are large:
            // boxed, so that the handler's own future (allocated and moved per request) stays
            // small.
            if let Some(at) = params.at {
                return Box::pin(audit(
                    state,
                    certificate,
                    params.jurisdiction,
                    at,
                    (&caller, &params.fi_reference_id),
                    request_id,
                ))
                .await;
            }
            Box::pin(state.service.check(
                Arc::new(certificate),
                Arc::new(Vec::new()),
                params.jurisdiction,
                OffsetDateTime::now_utc(),
            ))
            .await
        }
    };
    crate::telemetry::metrics::metrics()
        .check_duration
        .get_or_create(&crate::telemetry::metrics::FaceLabels { face: "api" })
        .observe(started.elapsed().as_secs_f64());
    check_answer(
        state,
        request_id,
        (&caller, source),
        &params,
        fingerprint,
        &report,
    )
    .await
}

/// The source's rate limit, then the route: `Some` with the answer for the error
/// documentation, `None` for a check (`GET` on [`PATH`]), else the refusal.
async fn admitted<B>(
    state: &ApiState,
    req: &Request<B>,
    source_key: IpAddr,
    request_id: &str,
) -> Result<Option<Response<Body>>, ApiError> {
    // The guard is held across the await: a reload during a Redis call swaps the limiter
    // for the next request, not this one.
    let limiter = state.limiter.load_full();
    match limiter.check(&source_key).await {
        Ok(()) => {}
        Err(Refusal::Limited(retry_after_secs)) => {
            return Err(ApiError::RateLimited { retry_after_secs });
        }
        Err(Refusal::Unavailable) => return Err(ApiError::SharedStateUnavailable),
    }
    if req.uri().path() == ERRORS_PATH {
        return match req.method() {
            &Method::GET => Ok(Some(error_documentation(request_id))),
            _ => Err(ApiError::MethodNotAllowed),
        };
    }
    if !req.uri().path().eq_ignore_ascii_case(PATH) {
        return Err(ApiError::NotFound);
    }
    if req.method() != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    Ok(None)
}

/// A check's answer: logged, recorded (under `fail_closed`, waiting for its record's write),
/// then the contract's JSON.
async fn check_answer(
    state: &ApiState,
    request_id: &str,
    (caller, source): (&str, IpAddr),
    params: &CheckParams,
    fingerprint: [u8; 32],
    report: &Checked,
) -> Result<Response<Body>, ApiError> {
    let fingerprint = crate::hex::lower(&fingerprint);
    log_check(request_id, caller, source, params, &fingerprint, report);
    // Under `fail_closed`, the answer waits for its record's write (group commit).
    crate::telemetry::audit::recorded().await;
    if crate::telemetry::audit::refusing_requests() {
        // This answer's own record could not be written: it is not given either.
        return Err(ApiError::AuditUnavailable);
    }
    let body = report.wire_json(&state.error_link_base).map_err(|e| {
        tracing::error!(request_id = %request_id, error = %e, "cannot serialise a check result");
        ApiError::Internal
    })?;
    let mut response = json_response(StatusCode::OK, body, request_id);
    response.extensions_mut().insert(Answered::new(
        &fingerprint,
        params.jurisdiction,
        &params.fi_reference_id,
        caller,
    ));
    Ok(response)
}

/// Authenticates the request's one `Authorization` header (two are no credentials at all)
/// with the credentials in force now; returns those credentials, for the role checks of
/// this request, and the caller's name.
async fn caller(
    state: &ApiState,
    headers: &HeaderMap,
    source_key: IpAddr,
) -> Result<(Arc<Authenticator>, String), ApiError> {
    // Two Authorization headers are no credentials at all (which one would count?).
    let authorization = single(headers, header::AUTHORIZATION.as_str())
        .map_err(|_| ApiError::AuthenticationMissing)?;
    let auth = state.auth.load_full();
    let caller = auth
        .authenticate(authorization, source_key)
        .await
        .map_err(|f| match f {
            AuthFailure::Missing => ApiError::AuthenticationMissing,
            AuthFailure::Wrong => ApiError::AuthenticationFailed,
            AuthFailure::TooManyAttempts { retry_after_secs } => {
                ApiError::LoginAttemptsExceeded { retry_after_secs }
            }
            AuthFailure::Busy => ApiError::Busy {
                retry_after_secs: auth::BUSY_RETRY_AFTER_SECS,
            },
            AuthFailure::Unavailable => ApiError::SharedStateUnavailable,
        })?;
    Ok((auth, caller))
}

/// A check request's parameters, read from the query and the headers.
struct CheckParams {
    jurisdiction: CountryCode,
    /// The past time to check as of (audit role only).
    at: Option<OffsetDateTime>,
    fi_reference_id: String,
    transaction_reference: Option<String>,
    /// The certificate from the `eidas` header, decoded to DER (once per distinct value,
    /// [`crate::gateway::presented`]): a chain of one.
    certificate: Arc<DecodedChain>,
}

/// Reads and validates the parameters, in this order: `jurisdiction`, `at`, `version`,
/// `fi_reference_id`, `transaction_reference`, `eidas` (within its size limit, decoded).
fn check_params<B>(
    state: &ApiState,
    req: &Request<B>,
    auth: &Authenticator,
    caller: &str,
) -> Result<CheckParams, ApiError> {
    let headers = req.headers();
    let jurisdiction = jurisdiction(req.uri().query(), &state.valid_jurisdictions)?;
    let at = audit_time(req.uri().query(), auth, caller)?;
    if let Some(v) = single(headers, "version")? {
        let v = String::from_utf8_lossy(v);
        if !(v.eq_ignore_ascii_case("latest") || v == "1") {
            return Err(ApiError::VersionInvalid(v.into_owned()));
        }
    }
    let fi_reference_id = match reference(headers, "fi_reference_id") {
        // A required parameter sent empty is as good as missing.
        Err(ApiError::ParameterInvalid { why, .. }) if why == EMPTY_VALUE => {
            return Err(ApiError::ParameterMissing("fi_reference_id"));
        }
        other => other?.ok_or(ApiError::ParameterMissing("fi_reference_id"))?,
    };
    let transaction_reference = reference(headers, "transaction_reference")?;
    let eidas = single(headers, "eidas")?
        .filter(|v| !v.iter().all(u8::is_ascii_whitespace))
        .ok_or(ApiError::ParameterMissing("eidas"))?;
    if eidas.len() > state.max_eidas_header_bytes {
        return Err(ApiError::ParameterInvalid {
            name: "eidas",
            why: format!(
                "{} bytes is over the {}-byte limit",
                eidas.len(),
                state.max_eidas_header_bytes
            ),
        });
    }
    let certificate = decoded_once("eidas parameter", None, eidas, |eidas| {
        Ok(decode_certificate_input(eidas).map(|der| vec![der])?)
    })
    .map_err(|e| ApiError::CertificateInvalid(e.to_string()))?;
    Ok(CheckParams {
        jurisdiction,
        at,
        fi_reference_id,
        transaction_reference,
        certificate,
    })
}

/// The `at` query parameter: an RFC 3339 time not in the future.
fn audit_time(
    query: Option<&str>,
    auth: &Authenticator,
    caller: &str,
) -> Result<Option<OffsetDateTime>, ApiError> {
    // `at` (an extension for audits) exists only for callers with the audit role (in the
    // credentials that authenticated this request: a reload that removes the role applies
    // from the next request); for anyone else it is refused as an unknown parameter would be.
    match query_once(query, "at")? {
        None => Ok(None),
        Some(_) if !auth.has_role(caller, config::Role::Audit) => Err(ApiError::ParameterInvalid {
            name: "at",
            why: "this endpoint has no such parameter".to_owned(),
        }),
        Some(v) => {
            let t = OffsetDateTime::parse(&v, &time::format_description::well_known::Rfc3339)
                .map_err(|e| ApiError::ParameterInvalid {
                    name: "at",
                    why: format!("not an RFC 3339 time ({e})"),
                })?;
            if t > OffsetDateTime::now_utc() + time::Duration::minutes(5) {
                return Err(ApiError::ParameterInvalid {
                    name: "at",
                    why: "the time is in the future".to_owned(),
                });
            }
            Ok(Some(t))
        }
    }
}

/// The audit log line of one answered check.
fn log_check(
    request_id: &str,
    caller: &str,
    source: IpAddr,
    params: &CheckParams,
    fingerprint: &str,
    report: &Checked,
) {
    tracing::info!(
        target: "audit",
        request_id = %request_id,
        caller = %caller,
        source = %source,
        fi_reference_id = %params.fi_reference_id,
        transaction_reference = params.transaction_reference.as_deref().unwrap_or(""),
        fingerprint = %fingerprint,
        auth_number = report.attested_auth_number().unwrap_or(""),
        claimed_auth_number = report.claimed_auth_number(),
        jurisdiction = %params.jurisdiction,
        valid_qtsp = report.validity().valid_qtsp,
        valid_signature = report.validity().valid_signature,
        not_revoked = report.validity().not_revoked,
        not_expired = report.validity().not_expired,
        revocation = ?report.revocation(),
        evidence = report.revocation_evidence(),
        "check"
    );
}

/// A check as of the past time `at`, for a caller with the audit role: the registers in
/// force then (register history), revocation evidence read as of then, and the `audit`
/// object saying which each block came from. Not cached.
async fn audit(
    state: &ApiState,
    certificate: PspCertificate,
    jurisdiction: CountryCode,
    at: OffsetDateTime,
    (caller, fi_reference_id): (&str, &str),
    request_id: &str,
) -> Result<Response<Body>, ApiError> {
    let registers = match state.audit_registers.clone() {
        Some((config, base)) => {
            tokio::task::spawn_blocking(move || {
                crate::service::audit::registers_as_of(&config, &base, at)
            })
            .await
            .map_err(|_| ApiError::Internal)?
            .map_err(|e| {
                tracing::error!(request_id = %request_id, error = %e, "audit: the register history cannot be read");
                ApiError::Internal
            })?
        }
        None => crate::service::audit::AuditRegisters {
            snapshot: None,
            note: "the current register files: no register history is available to this endpoint".to_owned(),
            used: Vec::new(),
            uncovered: Vec::new(),
        },
    };
    let fingerprint = certificate.fingerprint_hex();
    let (report, evidence) = state
        .service
        .audit(
            &certificate,
            &[],
            jurisdiction,
            at,
            registers.snapshot.as_deref(),
        )
        .await;
    tracing::info!(
        target: "audit",
        request_id = %request_id,
        caller = %caller,
        at = %crate::trust::rfc3339(at),
        fingerprint = %fingerprint,
        auth_number = report.attested_auth_number().unwrap_or(""),
        claimed_auth_number = report.claimed_auth_number(),
        jurisdiction = %jurisdiction,
        register_snapshots = ?registers.key(),
        "audit check"
    );
    crate::telemetry::audit::recorded().await;
    let mut wire = serde_json::to_value(report.to_wire(&state.error_link_base)).map_err(|e| {
        tracing::error!(request_id = %request_id, error = %e, "cannot serialise a check result");
        ApiError::Internal
    })?;
    crate::service::audit::annotate(&mut wire, at, &registers, &evidence);
    let body = serde_json::to_vec(&wire).map_err(|_| ApiError::Internal)?;
    let mut response = json_response(StatusCode::OK, body, request_id);
    let mut answered = Answered::new(&fingerprint, jurisdiction, fi_reference_id, caller);
    answered
        .0
        .insert("at".into(), crate::trust::rfc3339(at).into());
    response.extensions_mut().insert(answered);
    Ok(response)
}

/// A query parameter that may appear at most once, percent-decoded.
fn query_once(query: Option<&str>, name: &'static str) -> Result<Option<String>, ApiError> {
    let mut found = None;
    for pair in query.unwrap_or("").split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k != name {
            continue;
        }
        if found.is_some() {
            return Err(ApiError::ParameterInvalid {
                name,
                why: "the parameter appears more than once".to_owned(),
            });
        }
        found = Some(
            percent_encoding::percent_decode_str(v)
                .decode_utf8_lossy()
                .into_owned(),
        );
    }
    Ok(found)
}

/// The value of a header that may appear at most once.
fn single<'a>(headers: &'a HeaderMap, name: &'static str) -> Result<Option<&'a [u8]>, ApiError> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(ApiError::ParameterInvalid {
            name,
            why: "the header appears more than once".to_owned(),
        });
    }
    Ok(first.map(HeaderValue::as_bytes))
}

/// A reference header: printable ASCII, 1 to 256 characters.
fn reference(headers: &HeaderMap, name: &'static str) -> Result<Option<String>, ApiError> {
    let Some(v) = single(headers, name)? else {
        return Ok(None);
    };
    let invalid = |why: &str| ApiError::ParameterInvalid {
        name,
        why: why.to_owned(),
    };
    if v.iter().all(u8::is_ascii_whitespace) {
        return Err(invalid(EMPTY_VALUE));
    }
    if v.len() > MAX_REFERENCE_LEN {
        return Err(invalid("the value is longer than 256 characters"));
    }
    if !v.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        return Err(invalid("the value must be printable ASCII"));
    }
    Ok(Some(String::from_utf8_lossy(v).into_owned()))
}

/// The `jurisdiction` query parameter: exactly once, any case, a configured jurisdiction.
fn jurisdiction(
    query: Option<&str>,
    valid: &std::collections::BTreeSet<CountryCode>,
) -> Result<CountryCode, ApiError> {
    let found = query_once(query, "jurisdiction")?;
    let value = found.ok_or(ApiError::ParameterMissing("jurisdiction"))?;
    if value.is_empty() {
        return Err(ApiError::ParameterMissing("jurisdiction"));
    }
    let code: CountryCode = value
        .parse()
        .map_err(|_| ApiError::JurisdictionInvalid(value.clone()))?;
    if !valid.contains(&code) {
        return Err(ApiError::JurisdictionInvalid(value));
    }
    Ok(code)
}
