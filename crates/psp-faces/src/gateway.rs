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

mod ask;
mod authority;
mod budget;
pub mod config;
mod dialect;
pub mod echo;
mod forward;
mod overrides;
pub mod path;
pub mod presented;
mod record;
mod signed;
pub mod tls;

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method};
use hyper::{Request, Response};
use time::OffsetDateTime;
use tracing::Instrument;

use crate::cert::PspCertificate;
use crate::cert::input::decode_certificate_chain;
use crate::policy::{CrossBorderRule, Permit, Policy, Reason, Rejection};
use crate::register::ServiceSet;
use crate::server::{
    Body, BodyError, Cidr, ConnInfo, CounterKind, Refusal, SharedLimiter, SharedState,
    client_address, new_request_id, source_key,
};
use crate::service::{Call, CheckService, Checked, Site};
use crate::telemetry::trace_context::{SystemIds, TraceContext};

pub use ask::{Answer, Ask, trace_headers};
use budget::UpstreamBudget;
pub use config::{
    Dialect, GatewayConfig, GatewayConfigError, IdentitySource, TraceContextMode, UnderscoreHeaders,
};
pub use dialect::{Failure, OverloadScope, refusal_status};
pub use forward::UpstreamError;
use forward::{ForwardError, Hop, Upstream};
use path::NormalisedPath;
pub use path::PathRefusal;
pub use presented::DecodedChain;
use record::{Decided, Record, Trouble};
pub use record::{FaceRefusal, log_face_refusal};

/// Whether a request's headers declare a form body (`overrides`).
pub(crate) fn is_form_headers(headers: &http::HeaderMap) -> bool {
    overrides::is_form_headers(headers)
}

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
    /// The site's name (`[[sites]]`; `default` for `[gateway]`).
    name: Arc<str>,
    /// Where the site's own proxy listens, if it has one.
    listen: Option<std::net::SocketAddr>,
    /// Its TLS server names, lowercased.
    server_names: Vec<String>,
    /// The `Host` values this site's requests may carry, lowercased (`server_names`, then
    /// `hosts`); empty: any.
    host_names: Vec<String>,
    /// The listener's site for a client that sends no server name.
    default_site: bool,
    service: Arc<CheckService>,
    /// The access rule and whether it only reports: what the decision is made against.
    site: Site,
    /// Longest prefix first.
    routes: Vec<Route>,
    default_dialect: Dialect,
    identity: IdentitySource,
    identity_header: Option<HeaderName>,
    trusted_proxies: Vec<Cidr>,
    names: config::IdentityHeaders,
    /// `strip_headers` from the configuration, removed before forwarding (with the built-in
    /// path and method override headers).
    strip_headers: Vec<HeaderName>,
    /// `None` for a site without a listener, decided only by the external authorisers.
    upstream: Option<Upstream>,
    /// The upstream's URL as configured (the sandbox echo's address for it), for the logs.
    upstream_url: Option<String>,
    forward_unmatched: bool,
    link_base: String,
    /// `gateway.rate_limit`: the per-client limiter (in Redis with `[shared_state]`) and its
    /// IPv6 block length.
    limiter: Option<(Arc<SharedLimiter<IpAddr>>, u8)>,
    /// `gateway.allowed_methods`: any other method is refused before routing.
    allowed_methods: Vec<Method>,
    /// Their `Allow` header, for the 405.
    allow_header: HeaderValue,
    underscores: UnderscoreHeaders,
    /// `gateway.trace_context`: whose `traceparent` is continued.
    trace_context: TraceContextMode,
    /// Calls in flight to the upstream, in total and per PSP.
    budget: Arc<UpstreamBudget>,
    /// Parsed client certificate chains by the SHA-256 of their DER, shared by the
    /// connections that present the same chain (a PSP opens many) and by the authorisation
    /// faces' requests naming it: each holds a reference, not a copy, and skips the parse.
    identities: moka::future::Cache<[u8; 32], Arc<PeerIdentity>>,
    /// The signed decisions, when `[evidence]` is configured.
    decisions: Option<Arc<signed::Decisions>>,
}

/// The name of the one site a `[gateway]` section configures.
pub const DEFAULT_SITE: &str = "default";

/// The client certificate chains kept for sharing, weighed in bytes
/// ([`PeerIdentity::weight`]): 32 MiB, about 5,500 chains like the sandbox's valid PSP's
/// (6 KB each with their header value), well above the PSPs one bank serves at once.
/// Weighed, not counted: an ext_authz Check may carry 4 MiB, a chain of that size would be
/// kept like any other, and 4,096 of them would have held gigabytes. A chain heavier than
/// the whole bound is not kept. A chain evicted stays alive while a connection holds it.
const IDENTITY_CACHE_BYTES: u64 = 32 * 1024 * 1024;
/// A chain no new connection presented for this long is dropped from the sharing cache.
const IDENTITY_CACHE_IDLE: std::time::Duration = std::time::Duration::from_secs(600);

/// The cache of shared chains: weighed, bounded to [`IDENTITY_CACHE_BYTES`], idle entries
/// dropped after [`IDENTITY_CACHE_IDLE`].
fn identity_cache() -> moka::future::Cache<[u8; 32], Arc<PeerIdentity>> {
    moka::future::Cache::builder()
        .weigher(|_, identity: &Arc<PeerIdentity>| identity.weight())
        .max_capacity(IDENTITY_CACHE_BYTES)
        .time_to_idle(IDENTITY_CACHE_IDLE)
        .build()
}

/// What the gateway takes from outside its own `[gateway]` section: where its upstream is,
/// the `[danger]` relaxations that concern it, and the base of error links (`[checks]`).
#[derive(Debug, Clone)]
pub struct Surroundings {
    /// The configured upstream, or the sandbox echo's address; `None` for a site without one.
    pub upstream_url: Option<String>,
    /// `upstream_ca`, resolved against the configuration file's directory.
    pub upstream_ca: Option<std::path::PathBuf>,
    /// `danger.gateway_report_only`.
    pub report_only: bool,
    /// `danger.forward_unmatched_routes`.
    pub forward_unmatched_routes: bool,
    pub error_link_base: String,
    /// `[evidence]`: decisions are signed with it.
    pub evidence: Option<Arc<crate::evidence::Evidence>>,
    /// `[shared_state]`: `gateway.rate_limit` is counted in Redis, once for the fleet.
    pub shared_state: Option<Arc<SharedState>>,
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

/// The configured routes (or the default ones), longest prefix first.
fn routes(g: &GatewayConfig) -> Vec<Route> {
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
    routes
}

/// The `Allow` header value listing the allowed methods.
fn allow_header(allowed_methods: &[Method]) -> Result<HeaderValue, GatewayStateError> {
    let allow = allowed_methods
        .iter()
        .map(Method::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    HeaderValue::from_str(&allow).map_err(|_| GatewayStateError::AllowHeader(allow.clone()))
}

/// The site's policy: jurisdiction, cross-border rule (the jurisdiction's default unless
/// configured), accepted statuses, roles, allow and deny lists.
fn policy(g: &GatewayConfig) -> Policy {
    Policy {
        jurisdiction: g.jurisdiction,
        cross_border: g
            .cross_border
            .unwrap_or_else(|| CrossBorderRule::default_for(g.jurisdiction)),
        accepted_statuses: g.accepted_statuses.clone(),
        require_roles: g.require_roles,
        allow: g.allow.as_ref().map(|a| a.iter().collect()),
        deny: g.deny.iter().collect(),
    }
}

/// `strip_headers` as header names; a name that is none is refused.
fn strip_headers(g: &GatewayConfig) -> Result<Vec<HeaderName>, GatewayConfigError> {
    g.strip_headers
        .iter()
        .map(|h| {
            HeaderName::from_bytes(h.as_bytes()).map_err(|_| GatewayConfigError::BadHeaderName {
                setting: "strip_headers",
                name: h.clone(),
            })
        })
        .collect()
}

/// The per-client limiter of `gateway.rate_limit`, with its IPv6 block length: shared by the
/// fleet through `shared` when given, its Redis keys scoped by the site's name (each site has
/// its own quota, as each has its own limiter per process).
fn limiter(
    g: &GatewayConfig,
    shared: Option<&Arc<SharedState>>,
) -> Option<(Arc<SharedLimiter<IpAddr>>, u8)> {
    g.rate_limit.map(|r| {
        let limiter = SharedLimiter::new(
            shared,
            CounterKind::RateLimits,
            r.requests,
            std::time::Duration::from_secs(r.period_seconds),
            r.max_tracked_sources,
            "gateway-requests",
        )
        .scoped(g.name.as_deref().unwrap_or("gateway"));
        (Arc::new(limiter), r.ipv6_prefix)
    })
}

impl GatewayState {
    /// The gateway as `g` and its surroundings configure it: routes, allowed methods, the
    /// upstream client, the site's policy, the identity headers, the limits and caches.
    pub fn new(
        g: &GatewayConfig,
        around: Surroundings,
        service: Arc<CheckService>,
    ) -> Result<GatewayState, GatewayStateError> {
        let routes = routes(g);
        let allowed_methods = g.methods()?;
        let allow_header = allow_header(&allowed_methods)?;
        let upstream = match &around.upstream_url {
            Some(url) => Some(Upstream::new(
                url,
                around.upstream_ca.as_deref(),
                std::time::Duration::from_millis(g.upstream_connect_timeout_ms),
                std::time::Duration::from_millis(g.upstream_timeout_ms),
            )?),
            None => None,
        };
        Ok(GatewayState {
            name: g.name.as_deref().unwrap_or(DEFAULT_SITE).into(),
            upstream_url: around.upstream_url.clone(),
            listen: g.listen,
            server_names: g
                .server_names
                .iter()
                .map(|n| n.to_ascii_lowercase())
                .collect(),
            host_names: g.host_names(),
            default_site: g.default,
            service,
            site: Site {
                policy: policy(g),
                report_only: around.report_only,
            },
            routes,
            default_dialect: g.default_dialect,
            identity: g.identity,
            identity_header: g
                .identity_header
                .as_deref()
                .and_then(|h| HeaderName::from_bytes(h.as_bytes()).ok()),
            trusted_proxies: g.trusted_proxies.clone(),
            names: g.identity_headers.parse()?,
            strip_headers: strip_headers(g)?,
            upstream,
            forward_unmatched: around.forward_unmatched_routes,
            link_base: around.error_link_base,
            limiter: limiter(g, around.shared_state.as_ref()),
            allowed_methods,
            allow_header,
            underscores: g.headers_with_underscores,
            trace_context: g.trace_context,
            budget: Arc::new(UpstreamBudget::new(
                g.upstream_max_requests,
                g.upstream_max_requests_per_psp,
            )),
            identities: identity_cache(),
            decisions: around.evidence.map(|e| Arc::new(signed::Decisions::new(e))),
        })
    }

    /// The signed decision's header for the upstream, when `[evidence] forward_signature`
    /// asks for it.
    fn forwarded_decision(&self, record: &Record) -> Option<HeaderValue> {
        self.decisions
            .as_ref()
            .filter(|d| d.evidence().forward_signature)
            .and(record.decided.as_ref())
            .and_then(|d| d.signed.as_ref())
            .and_then(|s| s.header.clone())
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
        if let (Some(_), Some(theirs)) = (&self.decisions, &previous.decisions) {
            // Signed decisions name the configuration's hash: a changed one signs anew.
            self.decisions = Some(Arc::clone(theirs));
        }
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
        let version = req
            .extensions()
            .get::<authority::VersionUnknown>()
            .is_none()
            .then(|| req.version());
        authority::accepted(version, req.uri(), req.headers())
            .map_err(Failure::AuthorityRefused)?;
        if let Some(host) = self.misdirected(req) {
            return Err(Failure::Misdirected(host));
        }
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

    /// What the site's proxy strips from an inbound request besides the fixed lists.
    fn strip(&self) -> forward::Strip<'_> {
        forward::Strip {
            names: &self.names,
            identity_header: self.identity_header.as_ref(),
            configured: &self.strip_headers,
        }
    }

    /// The base of the site's error links (`checks.error_link_base`).
    pub fn error_link_base(&self) -> &str {
        &self.link_base
    }

    /// The site's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the site's own proxy listens, if it has one.
    pub fn listen(&self) -> Option<std::net::SocketAddr> {
        self.listen
    }

    /// The site's TLS server names, lowercased.
    pub fn server_names(&self) -> &[String] {
        &self.server_names
    }

    /// The `Host` values the site's requests may carry, lowercased; empty: any.
    pub fn host_names(&self) -> &[String] {
        &self.host_names
    }

    /// Whether the site takes its listener's clients that send no server name.
    pub fn is_default(&self) -> bool {
        self.default_site
    }

    /// The upstream's URL, or `none` for a site decided only by the external authorisers.
    pub fn upstream_display(&self) -> &str {
        self.upstream_url.as_deref().unwrap_or("none")
    }

    /// The site's jurisdiction.
    pub fn jurisdiction(&self) -> crate::country::CountryCode {
        self.site.policy.jurisdiction
    }

    /// Whether `host` (a `Host` value or an authority, any case, with or without a port)
    /// names this site: always when the site names no hosts.
    pub fn answers_to(&self, host: &str) -> bool {
        let host = host_of(host);
        self.host_names.is_empty() || self.host_names.contains(&host)
    }

    /// The host a request names when it is not one of this site's (421 Misdirected Request:
    /// an HTTP/2 connection made for one site must not carry a request for another). A
    /// request that names no host is the connection's site's.
    fn misdirected<B>(&self, req: &Request<B>) -> Option<String> {
        if self.host_names.is_empty() {
            // A site that names no hosts answers to any: nothing to read.
            return None;
        }
        let named = request_host(req)?;
        (!self.answers_to(&named)).then_some(named)
    }

    /// Forgets clients back at full quota (run periodically, as the endpoint's sweep).
    pub fn sweep(&self) {
        if let Some((limiter, _)) = &self.limiter {
            limiter.local().retain_recent();
        }
    }

    /// Whether the calling client is within `gateway.rate_limit`.
    async fn over_rate_limit<B>(&self, req: &Request<B>, conn: &ConnInfo) -> Result<(), Refusal> {
        let Some((limiter, ipv6_prefix)) = self.limiter.as_ref() else {
            return Ok(());
        };
        let forwarded = req
            .headers()
            .get_all(&crate::server::X_FORWARDED_FOR)
            .iter()
            .filter_map(|v| v.to_str().ok());
        let client = client_address(conn.peer.ip(), forwarded, &self.trusted_proxies);
        limiter.check(&source_key(client, *ipv6_prefix)).await
    }

    fn route(&self, method: &Method, path: &NormalisedPath) -> Option<&Route> {
        self.routes.iter().find(|r| r.matches(method, path))
    }

    /// Whether the peer at `ip` is one of `trusted_proxies`.
    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted_proxies.iter().any(|c| c.contains(ip))
    }

    /// The request's trace: the caller's, when `gateway.trace_context` believes this caller
    /// and its `traceparent` is well formed, else a new one; with the gateway's own span.
    fn trace_of(&self, headers: &http::HeaderMap, peer_trusted: bool) -> TraceContext {
        let believe = match self.trace_context {
            TraceContextMode::Accept => true,
            TraceContextMode::FromTrustedProxies => peer_trusted,
            TraceContextMode::Ignore => false,
        };
        TraceContext::for_request(headers, believe, &SystemIds)
    }
}

/// The host of a `Host` value or an authority, lowercased, without port, userinfo or a
/// final dot (`API.Bank.nl.:443` and `api.bank.nl` are one host).
pub fn host_of(authority: &str) -> String {
    let after_userinfo = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(rest) = after_userinfo.strip_prefix('[') {
        rest.split_once(']').map_or(rest, |(h, _)| h)
    } else {
        after_userinfo
            .rsplit_once(':')
            .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
            .map_or(after_userinfo, |(h, _)| h)
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// One client connection as the gateway sees it: what the listener knows of it, and the
/// identity its handshake presented, parsed on the connection's first request and kept,
/// typed, for its life (a connection's certificate cannot change).
pub struct Connection {
    info: Arc<ConnInfo>,
    identity: OnceLock<Arc<PeerIdentity>>,
    /// The peer's address as a header value (`X-Forwarded-For`), made on first use.
    peer_value: OnceLock<HeaderValue>,
}

impl Connection {
    /// A connection the listener accepted; nothing parsed yet.
    pub fn new(info: Arc<ConnInfo>) -> Self {
        Connection {
            info,
            identity: OnceLock::new(),
            peer_value: OnceLock::new(),
        }
    }

    /// The peer's address as a header value, made once per connection.
    fn peer_value(&self) -> &HeaderValue {
        self.peer_value.get_or_init(|| {
            HeaderValue::from_str(&self.info.peer.ip().to_string())
                .expect("an IP address is a valid header value")
        })
    }
}

impl std::ops::Deref for Connection {
    type Target = ConnInfo;

    fn deref(&self) -> &ConnInfo {
        &self.info
    }
}

/// The host a request names: its `:authority` (HTTP/2, absolute form), else its `Host`.
pub(crate) fn request_host<B>(req: &Request<B>) -> Option<String> {
    match req.uri().authority() {
        Some(authority) => Some(authority.as_str().to_owned()),
        None => req
            .headers()
            .get(http::header::HOST)
            .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned()),
    }
}

/// The answer to a request on a connection that no site of its listener takes (a server name
/// or host no site has, after a reload changed them, or none without a default site): 421 in
/// the listener's first site's default dialect, logged as that site's; nothing is forwarded.
pub(crate) fn misdirected<B>(
    site: &GatewayState,
    req: &Request<B>,
    conn: &Connection,
    named: Option<String>,
) -> Response<Body> {
    let record = Record::new(
        "gateway",
        (Arc::clone(&site.name), site.site.policy.jurisdiction),
        new_request_id(),
        (req.method().clone(), req.uri().path().to_owned()),
        site.default_dialect,
        site.trace_of(req.headers(), site.is_trusted(conn.peer.ip())),
    );
    let failure = Failure::Misdirected(named.unwrap_or_default());
    let response = refusal(site, &record, &failure);
    record::log(&record, conn, Some(&failure), response.status());
    response
}

/// One request through the gateway, phase by phase (pingora's `ProxyHttp` shape): admit
/// (the client's rate), route (screen, normalise, choose the route), identify (the client's
/// certificate chain), decide (check and access rule, one call to the service), rewrite the
/// request (form body, identity headers, the upstream budget), forward, rewrite the
/// response; then the one logging phase (`record::log`) writes the metrics, the audit
/// record and the access line from the request's record.
///
/// The body is any [`hyper::body::Body`] of bytes: the listener gives hyper's, a test an
/// in-memory one.
pub async fn handle<B>(
    state: Arc<GatewayState>,
    req: Request<B>,
    conn: Arc<Connection>,
) -> Response<Body>
where
    B: hyper::body::Body<Data = Bytes> + Send + Sync + 'static,
    B::Error: Into<BodyError>,
{
    let peer_trusted = state.is_trusted(conn.peer.ip());
    let (span, trace) = request_span(Asker::Proxy, &state, req.headers(), peer_trusted);
    let mut record = Record::new(
        "gateway",
        (Arc::clone(&state.name), state.site.policy.jurisdiction),
        new_request_id(),
        (req.method().clone(), req.uri().path().to_owned()),
        state.default_dialect,
        trace,
    );
    span.record("check_id", record.check_id.as_str());
    let phased = phases(&state, req, &conn, peer_trusted, &mut record)
        .instrument(span)
        .await;
    let (response, failure) = match phased {
        Ok(forwarded) => (forwarded, None),
        Err(failure) => (refusal(&state, &record, &failure), Some(failure)),
    };
    record::log(&record, &conn, failure.as_ref(), response.status());
    // Under `fail_closed`, the answer waits for its audit record's write (group commit).
    crate::telemetry::audit::recorded().await;
    response
}

/// Who asks: a request to the built-in proxy, or an external authoriser's question.
#[derive(Debug, Clone, Copy)]
enum Asker {
    Proxy,
    Authoriser,
}

/// The request's span (exported over OTLP when on: `telemetry::otlp`) and its trace, which
/// the span joins.
fn request_span(
    asker: Asker,
    state: &GatewayState,
    headers: &http::HeaderMap,
    peer_trusted: bool,
) -> (tracing::Span, TraceContext) {
    let mut trace = state.trace_of(headers, peer_trusted);
    // One `trace_span!` per name: a span's name is part of its static callsite.
    let span = match asker {
        Asker::Authoriser => tracing::trace_span!(
            target: "psp_trace",
            "authorise",
            otel.kind = "server",
            site = &*state.name,
            check_id = tracing::field::Empty
        ),
        Asker::Proxy => tracing::trace_span!(
            target: "psp_trace",
            "gateway request",
            otel.kind = "server",
            site = &*state.name,
            check_id = tracing::field::Empty
        ),
    };
    crate::telemetry::otlp::adopt(&span, &mut trace);
    (span, trace)
}

/// The phases, in order; the first that refuses ends the request.
async fn phases<B>(
    state: &GatewayState,
    req: Request<B>,
    conn: &Connection,
    peer_trusted: bool,
    record: &mut Record,
) -> Result<Response<Body>, Failure>
where
    B: hyper::body::Body<Data = Bytes> + Send + Sync + 'static,
    B::Error: Into<BodyError>,
{
    admit(state, &req, conn).await?;
    let (path, required) = route(state, &req, record)?;
    let (identity, certificate) = identify(state, &req, conn, peer_trusted).await?;
    let permit = decide(state, &identity, certificate, &path, required, record).await?;
    let hop = Hop {
        peer: conn.peer.ip(),
        peer_value: conn.peer_value(),
        peer_trusted,
        tls: conn.tls.is_some(),
    };
    let (upstream_req, body_failed, ticket) =
        rewrite_request(state, req, &hop, &path, &identity, &permit, record).await?;
    let response = forward(state, upstream_req, &body_failed, record).await?;
    let read_bound = state
        .upstream
        .as_ref()
        .map_or(Duration::from_secs(30), Upstream::timeout);
    Ok(rewrite_response(response, ticket, read_bound))
}

/// Admit: a client over `gateway.rate_limit` is refused before anything else is done.
async fn admit<B>(state: &GatewayState, req: &Request<B>, conn: &ConnInfo) -> Result<(), Failure> {
    match state.over_rate_limit(req, conn).await {
        Ok(()) => Ok(()),
        Err(Refusal::Limited(retry_after_secs)) => Err(Failure::RateLimited { retry_after_secs }),
        Err(Refusal::Unavailable) => Err(Failure::SharedStateUnavailable),
    }
}

/// Route: what is refused before any route is chosen ([`GatewayState::screen`]), then the
/// route of the normalised path and method, whose dialect the answer is written in from here
/// on. Nothing is known of the route of a request refused before routing: its rejection is in
/// the default dialect. The metric's route label is the configured prefix (bounded), never the
/// request path.
fn route<B>(
    state: &GatewayState,
    req: &Request<B>,
    record: &mut Record,
) -> Result<(NormalisedPath, ServiceSet), Failure> {
    let normalised = state.screen(req)?;
    match state.route(req.method(), &normalised) {
        Some(r) => {
            record.route = r.prefix.clone();
            record.dialect = r.dialect;
            Ok((normalised, r.services))
        }
        None if state.forward_unmatched => Ok((normalised, ServiceSet::EMPTY)),
        None => Err(Failure::RouteUnknown),
    }
}

/// Identify: the client's certificate chain ([`peer_identity`]) and its leaf, which must be
/// there and readable.
async fn identify<B>(
    state: &GatewayState,
    req: &Request<B>,
    conn: &Connection,
    peer_trusted: bool,
) -> Result<(Arc<PeerIdentity>, Arc<PspCertificate>), Failure> {
    let identity = peer_identity(state, req, conn, peer_trusted)
        .await
        .map_err(Failure::Refused)?;
    identify_in(identity)
}

/// The leaf of a parsed chain, which must be there and readable.
fn identify_in(
    identity: Arc<PeerIdentity>,
) -> Result<(Arc<PeerIdentity>, Arc<PspCertificate>), Failure> {
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
    Ok((identity, certificate))
}

/// Decide: the one decision call ([`CheckService::decide`]: the checks, cached, then the
/// site's access rule), recorded for the audit.
async fn decide(
    state: &GatewayState,
    identity: &PeerIdentity,
    certificate: Arc<PspCertificate>,
    path: &NormalisedPath,
    required: ServiceSet,
    record: &mut Record,
) -> Result<Permit<Checked>, Failure> {
    if crate::telemetry::audit::refusing_requests() {
        return Err(Failure::AuditUnavailable);
    }
    let fingerprint = certificate.fingerprint_hex();
    let call = Call {
        certificate,
        intermediates: Arc::clone(&identity.intermediates),
        required,
        now: OffsetDateTime::now_utc(),
    };
    let decision = state.service.decide(&state.site, call).await;
    let (verdict, reason) = match &decision.outcome {
        Ok(p) => match p.not_enforced() {
            Some(r) => ("report-only", r.reason.code()),
            None => ("permit", ""),
        },
        Err(r) => ("refuse", r.reason.code()),
    };
    let signed = match &state.decisions {
        Some(decisions) => Some(
            decisions
                .get(
                    &state.service,
                    signed::Facts {
                        site: &state.name,
                        jurisdiction: state.site.policy.jurisdiction,
                        route: &record.route,
                        required,
                        fingerprint: &fingerprint,
                        checked: &decision.checked,
                        verdict,
                        reason,
                    },
                )
                .await,
        ),
        None => None,
    };
    record.decided = Some(Decided {
        fingerprint,
        path: path.as_str().to_owned(),
        checked: decision.checked,
        verdict,
        reason,
        check_time: decision.check_time,
        signed,
    });
    decision.outcome.map_err(Failure::Refused)
}

/// Rewrite the request: a form body is read (for a permitted call only: nobody else makes
/// the gateway buffer a body) and screened for overrides, the PSP's share of the upstream is
/// taken (by auth number, as one PSP may hold several certificates, else by certificate),
/// and the upstream request is built on the normalised path with the identity headers.
async fn rewrite_request<B>(
    state: &GatewayState,
    req: Request<B>,
    hop: &Hop<'_>,
    path: &NormalisedPath,
    identity: &PeerIdentity,
    permit: &Permit<Checked>,
    record: &mut Record,
) -> Result<(Request<Body>, forward::BodyFailed, budget::Ticket), Failure>
where
    B: hyper::body::Body<Data = Bytes> + Send + Sync + 'static,
    B::Error: Into<BodyError>,
{
    let Some(upstream) = &state.upstream else {
        // Only a site with a listener forwards, and such a site has an upstream (validated).
        record.trouble = Some(Trouble::Build("the site has no upstream".to_owned()));
        return Err(Failure::UpstreamUnavailable);
    };
    let req = overrides::screen_form(req, upstream.timeout())
        .await
        .map_err(|refusal| match refusal {
            overrides::FormRefusal::Override(field) => Failure::OverrideRefused(field),
            overrides::FormRefusal::TooLarge => Failure::FormBodyTooLarge,
            overrides::FormRefusal::Unreadable(detail) => {
                record.trouble = Some(Trouble::FormBody(detail));
                Failure::RequestBodyInvalid
            }
        })?;
    let headers = forward::Identity {
        permit,
        certificate: identity.certificate_header.as_ref(),
        check_id: &record.check_id,
        decision: state.forwarded_decision(record),
    };
    let strip = state.strip();
    // One PSP, one share of the budget, however its certificates spell the auth number.
    let psp = match (&permit.report().auth_number(), &record.decided) {
        (Some(auth_number), _) => crate::cert::auth_number::identity_key(auth_number),
        (None, Some(decided)) => decided.fingerprint.clone(),
        (None, None) => String::new(),
    };
    let ticket = state
        .budget
        .take(&psp)
        .map_err(Failure::UpstreamOverloaded)?;
    let (upstream_req, body_failed) =
        forward::prepare(upstream, req, path, hop, strip, headers, &record.trace)
            .map_err(|e| forward_failure(e, record))?;
    Ok((upstream_req, body_failed, ticket))
}

/// Forward: the call to the upstream, bounded by its timeout.
async fn forward(
    state: &GatewayState,
    upstream_req: Request<Body>,
    body_failed: &forward::BodyFailed,
    record: &mut Record,
) -> Result<Response<Body>, Failure> {
    let Some(upstream) = &state.upstream else {
        record.trouble = Some(Trouble::Build("the site has no upstream".to_owned()));
        return Err(Failure::UpstreamUnavailable);
    };
    let span = tracing::trace_span!(target: "psp_trace", "upstream call", otel.kind = "client");
    upstream
        .send(upstream_req, body_failed)
        .instrument(span)
        .await
        .map_err(|e| forward_failure(e, record))
}

/// Rewrite the response: the upstream connection is busy until the response body is streamed
/// back or dropped, so the budget's ticket travels with the body; a client that takes nothing
/// of it for `read_bound` loses it ([`forward::ReadBounded`]).
fn rewrite_response(
    response: Response<Body>,
    ticket: budget::Ticket,
    read_bound: Duration,
) -> Response<Body> {
    response.map(|body| {
        use http_body_util::BodyExt;
        let with_ticket = body
            .map_frame(move |frame| {
                let _in_flight = &ticket;
                frame
            })
            .boxed();
        forward::ReadBounded::new(with_ticket, read_bound).boxed()
    })
}

/// The answer to a refused request, in the dialect the record says, with the headers its
/// failure calls for (`Allow` for a method refused, `Retry-After` for a rate or a budget).
fn refusal(state: &GatewayState, record: &Record, failure: &Failure) -> Response<Body> {
    let mut response = failure.response(record.dialect, &record.check_id, &state.link_base);
    match failure {
        Failure::RateLimited { retry_after_secs } => {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, (*retry_after_secs).into());
        }
        Failure::MethodRefused(_) => {
            response
                .headers_mut()
                .insert(http::header::ALLOW, state.allow_header.clone());
        }
        Failure::UpstreamOverloaded(_)
        | Failure::AuditUnavailable
        | Failure::SharedStateUnavailable => {
            response.headers_mut().insert(
                http::header::RETRY_AFTER,
                HeaderValue::from_static(OVERLOADED_RETRY_AFTER_SECS),
            );
        }
        _ => {}
    }
    response
}

/// `Retry-After` of an `upstream_overloaded` answer: a call in flight to a PSD2 API ends
/// within seconds (its timeout is `gateway.upstream_timeout_ms`).
const OVERLOADED_RETRY_AFTER_SECS: &str = "1";

/// Every forwarding error, recorded for the logging phase with its detail and mapped to the
/// failure the client sees: the upstream unreachable or broken is 502, its silence 504. A
/// request that cannot be built is 502 as well (it names the upstream's URI, which comes from
/// the configuration). A request body that fails on the client's side is 400.
fn forward_failure(error: ForwardError, record: &mut Record) -> Failure {
    let (trouble, failure) = match error {
        ForwardError::RequestBody(detail) => (Trouble::Body(detail), Failure::RequestBodyInvalid),
        ForwardError::RequestBuild(detail) => {
            (Trouble::Build(detail), Failure::UpstreamUnavailable)
        }
        ForwardError::Connect(detail) => (
            Trouble::Upstream {
                kind: "connect",
                detail: Some(detail),
            },
            Failure::UpstreamUnavailable,
        ),
        ForwardError::Protocol(detail) => (
            Trouble::Upstream {
                kind: "protocol",
                detail: Some(detail),
            },
            Failure::UpstreamUnavailable,
        ),
        ForwardError::Timeout => (
            Trouble::Upstream {
                kind: "timeout",
                detail: None,
            },
            Failure::UpstreamTimeout,
        ),
    };
    record.trouble = Some(trouble);
    failure
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
    /// About the bytes this identity holds, for the sharing cache's bound: each parsed
    /// certificate's DER twice (its bytes, and the fields parsed from them) and 512 bytes
    /// more, the certificate header's value (the leaf as URL-encoded PEM, about 1.4 times its
    /// DER, kept even for a leaf that does not parse), and 256 bytes for the rest.
    fn weight(&self) -> u32 {
        let leaf = self.leaf.iter().filter_map(|leaf| leaf.as_ref().ok());
        let certificates: usize = leaf
            .map(|c| c.der.len())
            .chain(self.intermediates.iter().map(|c| c.der.len()))
            .map(|der| 2 * der + 512)
            .sum();
        let header = self.certificate_header.as_ref().map_or(0, HeaderValue::len);
        u32::try_from(256 + certificates + header).unwrap_or(u32::MAX)
    }

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
async fn peer_identity<B>(
    state: &GatewayState,
    req: &Request<B>,
    conn: &Connection,
    peer_trusted: bool,
) -> Result<Arc<PeerIdentity>, Rejection> {
    match state.identity {
        IdentitySource::Tls => {
            if let Some(kept) = conn.identity.get() {
                return Ok(Arc::clone(kept));
            }
            let chain = conn.tls.as_ref().map_or(&[][..], |t| &t.peer_chain[..]);
            let identity = shared_identity(state, chain).await;
            Ok(Arc::clone(conn.identity.get_or_init(|| identity)))
        }
        IdentitySource::Header => {
            let decoded = header_chain(state, req, peer_trusted)?;
            Ok(shared_identity_keyed(state, decoded.digest(), decoded.chain()).await)
        }
    }
}

/// The parsed identity of `chain`, shared by every connection and request that presents the
/// same certificates (by [`crate::server::chain_digest`], in a bounded cache): a handshake's chain, a trusted
/// proxy's header, an ext_authz Check's or a forward-auth request's certificate. The same
/// bytes always parse the same way, so the first parse stands for all of them; every
/// request is still checked.
pub(crate) async fn shared_identity<C: AsRef<[u8]>>(
    state: &GatewayState,
    chain: &[C],
) -> Arc<PeerIdentity> {
    shared_identity_keyed(state, crate::server::chain_digest(chain), chain).await
}

/// [`shared_identity`] of a chain whose digest is known (`key`: its
/// [`crate::server::chain_digest`]).
pub(crate) async fn shared_identity_keyed<C: AsRef<[u8]>>(
    state: &GatewayState,
    key: [u8; 32],
    chain: &[C],
) -> Arc<PeerIdentity> {
    if let Some(identity) = state.identities.get(&key).await {
        return identity;
    }
    let identity = Arc::new(PeerIdentity::from_chain(chain));
    state.identities.insert(key, Arc::clone(&identity)).await;
    // Once per new chain: count what the cache holds now, evictions applied.
    state.identities.run_pending_tasks().await;
    crate::telemetry::metrics::metrics()
        .client_chains
        .set(i64::try_from(state.identities.entry_count()).unwrap_or(i64::MAX));
    identity
}

/// Header mode's certificate chain (leaf first), from a trusted proxy's identity header.
fn header_chain<B>(
    state: &GatewayState,
    req: &Request<B>,
    peer_trusted: bool,
) -> Result<Arc<DecodedChain>, Rejection> {
    let Some(name) = &state.identity_header else {
        return Ok(DecodedChain::none());
    };
    if !peer_trusted {
        return Ok(DecodedChain::none());
    }
    let mut values = req.headers().get_all(name).iter();
    let value = match (values.next(), values.next()) {
        (None, _) => return Ok(DecodedChain::none()),
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
    presented::decoded_once("identity header", None, value.as_bytes(), |value| {
        Ok(decode_certificate_chain(value)?)
    })
    .map_err(|e| {
        Rejection::new(
            Reason::CertificateUnreadable,
            format!("the certificate header cannot be read: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caller of the authorisation faces names the certificate bytes (an ext_authz Check may
    /// carry 4 MiB): chains of 2 MiB each, thirty-two of them, are weighed by what they hold
    /// and the sharing cache stays within its bound (counted, it would have kept all of them:
    /// over 90 MB). A real chain weighs a few KiB and is kept.
    #[tokio::test]
    async fn heavy_chains_named_to_the_authorisers_stay_within_the_caches_bytes() {
        let cache = identity_cache();
        for i in 0u8..32 {
            let junk = vec![vec![i; 2 * 1024 * 1024]];
            let identity = Arc::new(PeerIdentity::from_chain(&junk));
            // The leaf does not parse, but its URL-encoded form is kept for the header.
            assert!(identity.weight() > 2 * 1024 * 1024, "{}", identity.weight());
            cache
                .insert(crate::server::chain_digest(&junk), identity)
                .await;
        }
        cache.run_pending_tasks().await;
        assert!(
            cache.weighted_size() <= IDENTITY_CACHE_BYTES,
            "{} bytes kept",
            cache.weighted_size()
        );
        assert!(cache.entry_count() < 32, "{} kept", cache.entry_count());

        let pem = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../certs/psp/valid.pem"),
        )
        .expect("the sandbox's valid PSP");
        let chain = decode_certificate_chain(&pem).expect("a chain");
        let identity = Arc::new(PeerIdentity::from_chain(&chain));
        assert!(identity.leaf.as_ref().is_some_and(Result::is_ok));
        assert!(identity.weight() < 16 * 1024, "{}", identity.weight());
        let key = crate::server::chain_digest(&chain);
        let fresh = identity_cache();
        fresh.insert(key, Arc::clone(&identity)).await;
        fresh.run_pending_tasks().await;
        assert!(
            fresh
                .get(&key)
                .await
                .is_some_and(|kept| Arc::ptr_eq(&kept, &identity))
        );
        assert_eq!(fresh.weighted_size(), u64::from(identity.weight()));
    }
}
