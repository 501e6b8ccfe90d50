//! The gateway: TLS with client certificates in front of the bank's PSD2 API. Per request:
//!
//! ```text
//!  path ─▶ route ─▶ identity ─▶ check (cached) ─▶ access rule ─▶ forward ──▶ bank API
//!  (norm-  (path,    (handshake    (service)        (policy:      (identity
//!  alised)  method)   chain, or                      Permit or     headers,
//!                     header from                    Rejection)    streaming)
//!                     a trusted LB)
//!    │       │            │                               │            │
//!    └─400   └──404       └──401 CERTIFICATE_MISSING      └──401/403   └──502/504
//!                                             all in the route's dialect (400: the default)
//! ```
//!
//! The path comes first: the route is chosen on the normalised path and the upstream receives
//! exactly that path (`path.rs`), so the gateway and the bank's API cannot read one request as
//! two different resources. A path that cannot be normalised unambiguously is refused (400,
//! in the default dialect: no route is known yet) and never forwarded.
//!
//! The check runs on every request (its result is cached, never beyond the revocation
//! evidence), so a revocation takes effect on long-lived and resumed TLS sessions too.

mod authority;
mod budget;
pub mod config;
mod dialect;
pub mod echo;
mod forward;
mod overrides;
pub mod path;
pub mod tls;

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use http::{HeaderName, HeaderValue, Method};
use hyper::body::Incoming;
use hyper::{Request, Response};
use time::OffsetDateTime;

use crate::cert::PspCertificate;
use crate::cert::input::decode_certificate_chain;
use crate::policy::{self, CrossBorderRule, Permit, Policy, Reason, Rejection};
use crate::register::ServiceSet;
use crate::server::{
    Body, Cidr, ConnHandler, ConnInfo, KeyedLimiter, NewConnection, client_address, new_request_id,
    source_key,
};
use crate::service::{CheckService, Checked};

use budget::UpstreamBudget;
pub use config::{Dialect, GatewayConfig, GatewayConfigError, IdentitySource, UnderscoreHeaders};
pub use dialect::{Failure, OverloadScope, refusal_status};
pub use forward::UpstreamError;
use forward::{ForwardError, Hop, Upstream};
use path::NormalisedPath;
pub use path::PathRefusal;

struct Route {
    prefix: String,
    methods: Vec<Method>,
    services: ServiceSet,
    dialect: Dialect,
}

impl Route {
    fn matches(&self, method: &Method, path: &NormalisedPath) -> bool {
        let path = path.as_str();
        let under = path == self.prefix
            || path
                .strip_prefix(self.prefix.as_str())
                .is_some_and(|rest| rest.starts_with('/'));
        under && (self.methods.is_empty() || self.methods.contains(method))
    }
}

/// Everything the gateway needs, built once at start-up.
pub struct GatewayState {
    service: Arc<CheckService>,
    policy: Policy,
    /// Longest prefix first.
    routes: Vec<Route>,
    default_dialect: Dialect,
    identity: IdentitySource,
    identity_header: Option<HeaderName>,
    trusted_proxies: Vec<Cidr>,
    names: config::IdentityHeaderNames,
    /// `strip_headers` from the configuration, removed before forwarding (with the built-in
    /// path and method override headers).
    strip_headers: Vec<HeaderName>,
    upstream: Upstream,
    report_only: bool,
    forward_unmatched: bool,
    link_base: String,
    /// `gateway.rate_limit`: the per-client limiter and its IPv6 block length.
    limiter: Option<(Arc<KeyedLimiter<IpAddr>>, u8)>,
    /// `gateway.allowed_methods`: any other method is refused before routing.
    allowed_methods: Vec<Method>,
    /// Their `Allow` header, for the 405.
    allow_header: HeaderValue,
    underscores: UnderscoreHeaders,
    /// Calls in flight to the upstream, in total and per PSP.
    budget: Arc<UpstreamBudget>,
    /// Parsed client certificate chains by the SHA-256 of their DER, shared by the
    /// connections that present the same chain (a PSP opens many): each connection holds a
    /// reference, not a copy, and a new connection skips the parse.
    identities: moka::future::Cache<[u8; 32], Arc<PeerIdentity>>,
}

/// Distinct client certificate chains kept for sharing: 4,096, well above the PSPs one bank
/// serves at once. A chain evicted stays alive while a connection holds it.
const IDENTITY_CACHE_ENTRIES: u64 = 4_096;
/// A chain no new connection presented for this long is dropped from the sharing cache.
const IDENTITY_CACHE_IDLE: std::time::Duration = std::time::Duration::from_secs(600);

/// What the gateway takes from outside its own `[gateway]` section: where its upstream is,
/// the `[danger]` relaxations that concern it, and the base of error links (`[checks]`).
#[derive(Debug, Clone)]
pub struct Surroundings {
    /// The configured upstream, or the sandbox echo's address.
    pub upstream_url: String,
    /// `upstream_ca`, resolved against the configuration file's directory.
    pub upstream_ca: Option<std::path::PathBuf>,
    /// `danger.gateway_report_only`.
    pub report_only: bool,
    /// `danger.forward_unmatched_routes`.
    pub forward_unmatched_routes: bool,
    pub error_link_base: String,
}

/// Why the gateway cannot be set up from its configuration.
#[derive(Debug, thiserror::Error)]
pub enum GatewayStateError {
    /// The `[gateway]` section is refused.
    #[error(transparent)]
    Config(#[from] GatewayConfigError),
    /// The allowed methods do not make an `Allow` header value.
    #[error("gateway.allowed_methods: `{0}` is not a header value")]
    AllowHeader(String),
    /// The upstream client cannot be built.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
}

impl GatewayState {
    pub fn new(
        g: &GatewayConfig,
        around: Surroundings,
        service: Arc<CheckService>,
    ) -> Result<GatewayState, GatewayStateError> {
        let mut routes: Vec<Route> = g
            .routes
            .clone()
            .unwrap_or_else(config::default_routes)
            .into_iter()
            .map(|r| Route {
                prefix: r.prefix,
                methods: r.methods.iter().filter_map(|m| m.parse().ok()).collect(),
                services: r.services,
                dialect: r.dialect,
            })
            .collect();
        routes.sort_by_key(|r| std::cmp::Reverse(r.prefix.len()));
        let allowed_methods = g.methods()?;
        let allow = allowed_methods
            .iter()
            .map(Method::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        let allow_header = HeaderValue::from_str(&allow)
            .map_err(|_| GatewayStateError::AllowHeader(allow.clone()))?;
        let upstream = Upstream::new(
            &around.upstream_url,
            around.upstream_ca.as_deref(),
            std::time::Duration::from_millis(g.upstream_connect_timeout_ms),
            std::time::Duration::from_millis(g.upstream_timeout_ms),
        )?;
        Ok(GatewayState {
            service,
            policy: Policy {
                jurisdiction: g.jurisdiction,
                cross_border: g
                    .cross_border
                    .unwrap_or_else(|| CrossBorderRule::default_for(g.jurisdiction)),
                accepted_statuses: g.accepted_statuses.clone(),
                require_roles: g.require_roles,
                allow: g.allow.as_ref().map(|a| a.iter().cloned().collect()),
                deny: g.deny.iter().cloned().collect(),
            },
            routes,
            default_dialect: g.default_dialect,
            identity: g.identity,
            identity_header: g
                .identity_header
                .as_deref()
                .and_then(|h| HeaderName::from_bytes(h.as_bytes()).ok()),
            trusted_proxies: g.trusted_proxies.clone(),
            names: g.identity_headers.clone(),
            strip_headers: g
                .strip_headers
                .iter()
                .map(|h| {
                    HeaderName::from_bytes(h.as_bytes()).map_err(|_| {
                        GatewayConfigError::BadHeaderName {
                            setting: "strip_headers",
                            name: h.clone(),
                        }
                    })
                })
                .collect::<Result<_, _>>()?,
            upstream,
            report_only: around.report_only,
            forward_unmatched: around.forward_unmatched_routes,
            link_base: around.error_link_base,
            limiter: g.rate_limit.map(|r| {
                let limiter = KeyedLimiter::new(
                    r.requests,
                    std::time::Duration::from_secs(r.period_seconds),
                    r.max_tracked_sources,
                    "gateway-requests",
                );
                (Arc::new(limiter), r.ipv6_prefix)
            }),
            allowed_methods,
            allow_header,
            underscores: g.headers_with_underscores,
            budget: Arc::new(UpstreamBudget::new(
                g.upstream_max_requests,
                g.upstream_max_requests_per_psp,
            )),
            identities: moka::future::Cache::builder()
                .max_capacity(IDENTITY_CACHE_ENTRIES)
                .time_to_idle(IDENTITY_CACHE_IDLE)
                .build(),
        })
    }

    /// Keeps what a reload must not reset from `previous`: the clients' counts when the rate
    /// limit is unchanged (a reload is no fresh quota), and the parsed client chains (a
    /// certificate parses the same under any configuration).
    pub fn keeping_state_of(mut self, previous: &GatewayState) -> GatewayState {
        if let (Some((mine, prefix)), Some((theirs, their_prefix))) =
            (&self.limiter, &previous.limiter)
            && mine.settings() == theirs.settings()
            && prefix == their_prefix
        {
            self.limiter = Some((theirs.clone(), *their_prefix));
        }
        if self.budget.settings() == previous.budget.settings() {
            // The calls in flight are still in flight: a reload is no fresh budget.
            self.budget = Arc::clone(&previous.budget);
        }
        self.identities = previous.identities.clone();
        self
    }

    /// What is refused before any route is chosen, in this order: a method the gateway does
    /// not forward, two authorities, a path with two meanings, a query parameter that
    /// overrides the method or path, a header name with an underscore (when refused).
    /// Returns the normalised path the route is chosen on.
    fn screen<B>(&self, req: &Request<B>) -> Result<NormalisedPath, Failure> {
        if !self.allowed_methods.contains(req.method()) {
            return Err(Failure::MethodRefused(req.method().clone()));
        }
        authority::accepted(req.uri(), req.headers()).map_err(Failure::AuthorityRefused)?;
        let normalised = path::normalise(req.uri().path()).map_err(Failure::PathRefused)?;
        if let Some(parameter) = req.uri().query().and_then(overrides::refused_parameter) {
            return Err(Failure::OverrideRefused(parameter));
        }
        if self.underscores == UnderscoreHeaders::Refuse
            && let Some(name) =
                overrides::underscore_header(req.headers(), self.identity_header.as_ref())
        {
            return Err(Failure::HeaderNameRefused(name));
        }
        Ok(normalised)
    }

    /// Forgets clients back at full quota (run periodically, as the endpoint's sweep).
    pub fn sweep(&self) {
        if let Some((limiter, _)) = &self.limiter {
            limiter.retain_recent();
        }
    }

    /// The seconds to wait when the calling client is over `gateway.rate_limit`.
    fn over_rate_limit(&self, req: &Request<Incoming>, conn: &ConnInfo) -> Option<u64> {
        let (limiter, ipv6_prefix) = self.limiter.as_ref()?;
        let forwarded = req
            .headers()
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok());
        let client = client_address(conn.peer.ip(), forwarded, &self.trusted_proxies);
        limiter.check(&source_key(client, *ipv6_prefix)).err()
    }

    fn route(&self, method: &Method, path: &NormalisedPath) -> Option<&Route> {
        self.routes.iter().find(|r| r.matches(method, path))
    }
}

/// Handles one call.
/// One client connection as the gateway sees it: what the listener knows of it, and the
/// identity its handshake presented, parsed on the connection's first request and kept,
/// typed, for its life (a connection's certificate cannot change).
pub struct Connection {
    info: Arc<ConnInfo>,
    identity: OnceLock<Arc<PeerIdentity>>,
}

impl Connection {
    /// A connection the listener accepted; nothing parsed yet.
    pub fn new(info: Arc<ConnInfo>) -> Self {
        Connection {
            info,
            identity: OnceLock::new(),
        }
    }
}

impl std::ops::Deref for Connection {
    type Target = ConnInfo;

    fn deref(&self) -> &ConnInfo {
        &self.info
    }
}

/// The gateway's handler of each accepted connection, for the listener. Each request takes
/// the gateway `current` gives at that moment: a reload swaps in a rebuilt one, and the
/// connection keeps its parsed identity.
pub fn new_connection(
    current: impl Fn() -> Arc<GatewayState> + Send + Sync + 'static,
) -> NewConnection {
    let current = Arc::new(current);
    Arc::new(move |info: Arc<ConnInfo>| {
        let connection = Arc::new(Connection::new(info));
        let current = Arc::clone(&current);
        let handler: ConnHandler = Arc::new(move |req| {
            let (state, connection) = (current(), Arc::clone(&connection));
            Box::pin(async move { handle(state, req, connection).await })
        });
        handler
    })
}

pub async fn handle(
    state: Arc<GatewayState>,
    req: Request<Incoming>,
    conn: Arc<Connection>,
) -> Response<Body> {
    let check_id = new_request_id();
    if let Some(retry_after_secs) = state.over_rate_limit(&req, &conn) {
        let metrics = crate::telemetry::metrics::metrics();
        metrics
            .rate_limited
            .get_or_create(&crate::telemetry::metrics::FaceLabels {
                face: "gateway".to_owned(),
            })
            .inc();
        let failure = Failure::RateLimited { retry_after_secs };
        metrics.request("gateway", "", "rejected", failure.code());
        let mut response = failure.response(state.default_dialect, &check_id, &state.link_base);
        response
            .headers_mut()
            .insert(http::header::RETRY_AFTER, retry_after_secs.into());
        return response;
    }
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    // Nothing is known of the route of a request refused before routing: its rejection is
    // in the default dialect. The metric's route label is the configured prefix (bounded),
    // never the request path.
    let mut route_label = String::new();
    let (dialect, outcome) = match state.screen(&req) {
        Err(failure) => (state.default_dialect, Err(failure)),
        Ok(normalised) => {
            let (dialect, required) = match state.route(&method, &normalised) {
                Some(r) => {
                    route_label = r.prefix.clone();
                    (r.dialect, Some(r.services))
                }
                None if state.forward_unmatched => (state.default_dialect, Some(ServiceSet::EMPTY)),
                None => (state.default_dialect, None),
            };
            let outcome = match required {
                Some(required) => {
                    admit_and_forward(&state, req, &conn, &normalised, required, &check_id).await
                }
                None => Err(Failure::RouteUnknown),
            };
            (dialect, outcome)
        }
    };
    let metrics = crate::telemetry::metrics::metrics();
    match &outcome {
        Ok(_) => metrics.request("gateway", &route_label, "forwarded", ""),
        Err(f) => metrics.request("gateway", &route_label, "rejected", f.code()),
    }
    outcome.unwrap_or_else(|failure| {
        // Refusals by the access rule were audited with the check's details already.
        if !matches!(&failure, Failure::Refused(r) if r.reason.is_decided_by_rule()) {
            tracing::info!(
                target: "audit",
                check_id = %check_id,
                peer = %conn.peer,
                method = %method,
                path = %path,
                status = failure.status().as_u16(),
                reason = failure.code(),
                detail = match &failure {
                    Failure::PathRefused(r) => r.code(),
                    Failure::AuthorityRefused(r) => r.code(),
                    Failure::UpstreamOverloaded(scope) => scope.label(),
                    Failure::Refused(_)
                    | Failure::MethodRefused(_)
                    | Failure::OverrideRefused(_)
                    | Failure::HeaderNameRefused(_)
                    | Failure::FormBodyTooLarge
                    | Failure::RateLimited { .. }
                    | Failure::RequestBodyInvalid
                    | Failure::RouteUnknown
                    | Failure::UpstreamUnavailable
                    | Failure::UpstreamTimeout => "",
                },
                "gateway refused"
            );
        }
        let mut response = failure.response(dialect, &check_id, &state.link_base);
        match &failure {
            Failure::MethodRefused(_) => {
                response
                    .headers_mut()
                    .insert(http::header::ALLOW, state.allow_header.clone());
            }
            Failure::UpstreamOverloaded(_) => {
                response.headers_mut().insert(
                    http::header::RETRY_AFTER,
                    HeaderValue::from_static(OVERLOADED_RETRY_AFTER_SECS),
                );
            }
            _ => {}
        }
        response
    })
}

/// `Retry-After` of an `upstream_overloaded` answer: a call in flight to a PSD2 API ends
/// within seconds (its timeout is `gateway.upstream_timeout_ms`).
const OVERLOADED_RETRY_AFTER_SECS: &str = "1";

/// Identity, check, access rule, forward: the phases after routing. `path` is the normalised
/// path the route was chosen on, and the only path the upstream may receive.
async fn admit_and_forward(
    state: &GatewayState,
    req: Request<Incoming>,
    conn: &Connection,
    path: &NormalisedPath,
    required: ServiceSet,
    check_id: &str,
) -> Result<Response<Body>, Failure> {
    let peer_trusted = state
        .trusted_proxies
        .iter()
        .any(|c| c.contains(conn.peer.ip()));
    let identity = peer_identity(state, &req, conn, peer_trusted)
        .await
        .map_err(Failure::Refused)?;
    let certificate = match &identity.leaf {
        None => {
            return Err(Failure::Refused(Rejection::new(
                Reason::CertificateMissing,
                "no client certificate was presented",
            )));
        }
        Some(Err(e)) => {
            return Err(Failure::Refused(Rejection::new(
                Reason::CertificateUnreadable,
                format!("the client certificate cannot be read: {e}"),
            )));
        }
        Some(Ok(certificate)) => Arc::clone(certificate),
    };

    let started = std::time::Instant::now();
    let report = state
        .service
        .check(
            certificate.clone(),
            Arc::clone(&identity.intermediates),
            state.policy.jurisdiction,
            OffsetDateTime::now_utc(),
        )
        .await;
    crate::telemetry::metrics::metrics()
        .check_duration
        .get_or_create(&crate::telemetry::metrics::FaceLabels {
            face: "gateway".to_owned(),
        })
        .observe(started.elapsed().as_secs_f64());
    let decision = if state.report_only {
        let permit =
            policy::decide_report_only(&state.policy, report.clone(), &certificate, required);
        if let Some(rejection) = permit.not_enforced() {
            tracing::warn!(
                target: "audit",
                check_id = %check_id,
                auth_number = report.auth_number.as_deref().unwrap_or(""),
                reason = rejection.reason.code(),
                "report-only: would have refused, forwarding"
            );
        }
        Ok(permit)
    } else {
        policy::decide(&state.policy, report.clone(), &certificate, required)
    };
    audit_decision(
        check_id,
        conn,
        &certificate,
        &report,
        (req.method(), path),
        &state.policy,
        decision.as_ref(),
    );
    let permit = decision.map_err(Failure::Refused)?;
    // Read only for a permitted call: nobody else makes the gateway buffer a body.
    let req = overrides::screen_form(req, state.upstream.timeout())
        .await
        .map_err(|refusal| match refusal {
            overrides::FormRefusal::Override(field) => Failure::OverrideRefused(field),
            overrides::FormRefusal::TooLarge => Failure::FormBodyTooLarge,
            overrides::FormRefusal::Unreadable(detail) => {
                tracing::info!(check_id = %check_id, error = %detail, "the form body could not be read");
                Failure::RequestBodyInvalid
            }
        })?;

    let hop = Hop {
        peer: conn.peer.ip(),
        peer_trusted,
        tls: conn.tls.is_some(),
    };
    let extra = state.identity_header.as_ref().map(HeaderName::as_str);
    let identity = forward::Identity {
        permit: &permit,
        certificate: identity.certificate_header.as_ref(),
        check_id,
    };
    let strip = forward::Strip {
        names: &state.names,
        identity_header: extra,
        configured: &state.strip_headers,
    };
    // The PSP's share of the upstream: by auth number (one PSP may hold several
    // certificates), else by certificate.
    let psp = permit
        .report()
        .auth_number
        .clone()
        .unwrap_or_else(|| certificate.fingerprint_hex());
    let ticket = state
        .budget
        .take(&psp)
        .map_err(Failure::UpstreamOverloaded)?;
    let (upstream_req, body_failed) =
        forward::prepare(&state.upstream, req, path, &hop, strip, identity)
            .map_err(|e| forward_failure(e, check_id))?;
    let response = state
        .upstream
        .send(upstream_req, &body_failed)
        .await
        .map_err(|e| forward_failure(e, check_id))?;
    // The upstream connection is busy until the response body is streamed back or dropped.
    Ok(response.map(|body| {
        use http_body_util::BodyExt;
        body.map_frame(move |frame| {
            let _in_flight = &ticket;
            frame
        })
        .boxed()
    }))
}

/// Every forwarding error, logged with its detail and mapped to the failure the client sees:
/// the upstream unreachable or broken is 502, its silence 504. A request that cannot be built
/// is 502 as well (it names the upstream's URI, which comes from the configuration). A
/// request body that fails on the client's side is 400.
fn forward_failure(error: ForwardError, check_id: &str) -> Failure {
    let kind = match &error {
        ForwardError::RequestBody(detail) => {
            tracing::info!(check_id = %check_id, error = %detail, "the request body could not be read");
            return Failure::RequestBodyInvalid;
        }
        ForwardError::RequestBuild(_) => "request",
        ForwardError::Connect(_) => "connect",
        ForwardError::Protocol(_) => "protocol",
        ForwardError::Timeout => "timeout",
    };
    crate::telemetry::metrics::metrics()
        .upstream_errors
        .get_or_create(&crate::telemetry::metrics::OutcomeLabels {
            what: "upstream".to_owned(),
            outcome: kind.to_owned(),
        })
        .inc();
    match error {
        ForwardError::RequestBody(_) => Failure::RequestBodyInvalid,
        ForwardError::RequestBuild(detail) => {
            tracing::error!(check_id = %check_id, error = %detail, "cannot build the upstream request");
            Failure::UpstreamUnavailable
        }
        ForwardError::Connect(detail) | ForwardError::Protocol(detail) => {
            tracing::warn!(check_id = %check_id, error = %detail, "upstream unavailable");
            Failure::UpstreamUnavailable
        }
        ForwardError::Timeout => {
            tracing::warn!(check_id = %check_id, "upstream timed out");
            Failure::UpstreamTimeout
        }
    }
}

/// One audit record per decision of the access rule, with the check's details.
fn audit_decision(
    check_id: &str,
    conn: &ConnInfo,
    certificate: &PspCertificate,
    report: &crate::check::CheckReport,
    (method, path): (&Method, &NormalisedPath),
    policy: &Policy,
    decision: Result<&Permit<Checked>, &Rejection>,
) {
    let (decision, reason) = match decision {
        Ok(p) => match p.not_enforced() {
            Some(r) => ("report-only", r.reason.code()),
            None => ("permit", ""),
        },
        Err(r) => ("refuse", r.reason.code()),
    };
    tracing::info!(
        target: "audit",
        check_id = %check_id,
        peer = %conn.peer,
        resumed = conn.tls.as_ref().is_some_and(|t| t.resumed),
        fingerprint = %certificate.fingerprint_hex(),
        auth_number = report.auth_number.as_deref().unwrap_or(""),
        jurisdiction = %policy.jurisdiction,
        method = %method,
        path = path.as_str(),
        valid_qtsp = report.validity.valid_qtsp,
        valid_signature = report.validity.valid_signature,
        not_revoked = report.validity.not_revoked,
        not_expired = report.validity.not_expired,
        evidence = %report.revocation_evidence(),
        decision,
        reason,
        "gateway decision"
    );
}

/// A client's certificate chain, parsed, and its certificate as the upstream receives it.
pub struct PeerIdentity {
    /// `None` when no certificate was presented; why it cannot be read otherwise.
    leaf: Option<Result<Arc<PspCertificate>, crate::cert::CertError>>,
    /// The other certificates presented (those that parse), for the path builder.
    intermediates: Arc<Vec<PspCertificate>>,
    /// The certificate header's value: the leaf as URL-encoded PEM, validated once.
    certificate_header: Option<HeaderValue>,
}

impl PeerIdentity {
    fn from_chain<C: AsRef<[u8]>>(chain: &[C]) -> PeerIdentity {
        let Some((leaf, rest)) = chain.split_first() else {
            return PeerIdentity {
                leaf: None,
                intermediates: Arc::default(),
                certificate_header: None,
            };
        };
        let leaf = leaf.as_ref();
        PeerIdentity {
            leaf: Some(PspCertificate::from_der(leaf.to_vec()).map(Arc::new)),
            intermediates: Arc::new(
                rest.iter()
                    .filter_map(|d| PspCertificate::from_der(d.as_ref().to_vec()).ok())
                    .collect(),
            ),
            // URL-encoded PEM is visible ASCII: always a valid header value.
            certificate_header: HeaderValue::from_str(&forward::url_encoded_pem(leaf)).ok(),
        }
    }
}

/// The identity of the call: from the handshake, parsed once per connection (its
/// certificate cannot change, so every request on it shares the parse) and shared with the
/// other connections that present the same chain, or in header mode from the identity header
/// when the peer is a trusted proxy, per request (from anyone else the header is ignored, and
/// removed before forwarding).
async fn peer_identity(
    state: &GatewayState,
    req: &Request<Incoming>,
    conn: &Connection,
    peer_trusted: bool,
) -> Result<Arc<PeerIdentity>, Rejection> {
    match state.identity {
        IdentitySource::Tls => {
            if let Some(kept) = conn.identity.get() {
                return Ok(Arc::clone(kept));
            }
            let chain = conn.tls.as_ref().map_or(&[][..], |t| &t.peer_chain[..]);
            let key = chain_digest(chain);
            let identity = match state.identities.get(&key).await {
                Some(identity) => identity,
                None => {
                    let identity = Arc::new(PeerIdentity::from_chain(chain));
                    state.identities.insert(key, Arc::clone(&identity)).await;
                    // Once per new chain: count what the cache holds now, evictions applied.
                    state.identities.run_pending_tasks().await;
                    crate::telemetry::metrics::metrics()
                        .client_chains
                        .set(i64::try_from(state.identities.entry_count()).unwrap_or(i64::MAX));
                    identity
                }
            };
            Ok(Arc::clone(conn.identity.get_or_init(|| identity)))
        }
        IdentitySource::Header => {
            let chain = header_chain(state, req, peer_trusted)?;
            Ok(Arc::new(PeerIdentity::from_chain(&chain)))
        }
    }
}

/// SHA-256 over a chain's certificates, each prefixed with its length (so that no two
/// chains share a digest by splitting the same bytes differently).
fn chain_digest<C: AsRef<[u8]>>(chain: &[C]) -> [u8; 32] {
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    for certificate in chain {
        let der = certificate.as_ref();
        digest.update(&(der.len() as u64).to_be_bytes());
        digest.update(der);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.finish().as_ref());
    out
}

/// Header mode's certificate chain (leaf first), from a trusted proxy's identity header.
fn header_chain(
    state: &GatewayState,
    req: &Request<Incoming>,
    peer_trusted: bool,
) -> Result<Vec<Vec<u8>>, Rejection> {
    let Some(name) = &state.identity_header else {
        return Ok(Vec::new());
    };
    if !peer_trusted {
        return Ok(Vec::new());
    }
    let mut values = req.headers().get_all(name).iter();
    let value = match (values.next(), values.next()) {
        (None, _) => return Ok(Vec::new()),
        (Some(value), None) => value,
        (Some(_), Some(_)) => {
            return Err(Rejection::new(
                Reason::CertificateUnreadable,
                format!("the certificate header `{name}` appears more than once"),
            ));
        }
    };
    // Visible ASCII and spaces only (PEM armour has spaces; Base64 and URL-encoded PEM
    // have none): anything else is refused with its position, never read around.
    if let Some((at, byte)) = value
        .as_bytes()
        .iter()
        .enumerate()
        .find(|(_, b)| !(0x20..=0x7e).contains(*b))
    {
        return Err(Rejection::new(
            Reason::CertificateUnreadable,
            format!(
                "the certificate header `{name}` has byte 0x{byte:02x} at position {at}, which is not visible ASCII"
            ),
        ));
    }
    decode_certificate_chain(value.as_bytes()).map_err(|e| {
        Rejection::new(
            Reason::CertificateUnreadable,
            format!("the certificate header cannot be read: {e}"),
        )
    })
}
