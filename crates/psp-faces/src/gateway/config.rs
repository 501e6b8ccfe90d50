//! `[gateway]`: the gateway listener, the bank's jurisdiction and upstream, the routes and
//! the access rule.

use std::net::SocketAddr;
use std::path::PathBuf;

use http::HeaderName;
use serde::Deserialize;

use crate::country::CountryCode;
use crate::policy::CrossBorderRule;
use crate::register::{AuthStatus, ServiceSet};
use crate::server::Cidr;
use crate::server::TlsFiles;
use crate::server::limiter::{RateLimitConfig, RateLimitConfigError};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// `[[sites]]`: the site's name, in metrics and the audit record, for `check --site` and
    /// the external authorisers' `psp_site`. `[gateway]` is the one site `default`.
    #[serde(default)]
    pub name: Option<String>,
    /// The server names (TLS SNI) this site answers to on its listener, each with the site's
    /// certificate; also the `Host` values its requests may carry. Required when several sites
    /// share a listener.
    #[serde(default)]
    pub server_names: Vec<String>,
    /// Further `Host` values accepted for this site (names a load balancer in front uses, IP
    /// addresses), never chosen by SNI.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// The listener's site for a client that sends no server name (SNI). Without one such a
    /// handshake fails.
    #[serde(default)]
    pub default: bool,
    /// The site's own proxy listener. `[[sites]]` may leave it out: such a site is decided
    /// only through the external authorisers (`[ext_authz]`, `[forward_auth]`).
    #[serde(default)]
    pub listen: Option<SocketAddr>,
    /// The bank's jurisdiction: the transaction jurisdiction of every check.
    pub jurisdiction: CountryCode,
    /// Server certificate and key. Required when the identity comes from the handshake;
    /// optional in header mode (a load balancer in front terminates TLS).
    #[serde(default)]
    pub tls: Option<TlsFiles>,
    /// Whether the handshake requires a client certificate (`required`) or only asks for one
    /// (`requested`, the default: a missing certificate then gets a proper error body).
    #[serde(default)]
    pub client_certificate: ClientCertificateMode,
    /// The bank's API: an `http://` or `https://` URL, or `sandbox-echo` (sandbox only).
    /// Required with `listen`.
    #[serde(default)]
    pub upstream: Option<String>,
    /// CA certificates (PEM) for an `https` upstream; the system's roots are not used.
    #[serde(default)]
    pub upstream_ca: Option<PathBuf>,
    /// Connect timeout to the upstream. 2 s: the upstream is on the bank's network.
    #[serde(default = "default_upstream_connect_ms")]
    pub upstream_connect_timeout_ms: u64,
    /// Time for the upstream to send response headers, and the longest silence within its
    /// response body (then cut off). 30 s: PSD2 APIs answer within seconds; the Berlin Group
    /// and UK OB profiles expect well under 30 s.
    #[serde(default = "default_upstream_timeout_ms")]
    pub upstream_timeout_ms: u64,
    /// Where the PSP's certificate comes from: the TLS handshake, or a header set by a
    /// trusted load balancer.
    #[serde(default)]
    pub identity: IdentitySource,
    /// Header mode: the header carrying the certificate (Base64 DER, PEM or URL-encoded
    /// PEM), believed only from `trusted_proxies`.
    #[serde(default)]
    pub identity_header: Option<String>,
    /// Load balancers whose identity header and `X-Forwarded-*` headers are believed.
    #[serde(default)]
    pub trusted_proxies: Vec<Cidr>,
    /// The cross-border rule; default `uk-tpr` for GB, `passport-out` elsewhere.
    #[serde(default)]
    pub cross_border: Option<CrossBorderRule>,
    /// Home register statuses accepted (default `Authorised` and `Registered`).
    #[serde(default = "default_statuses")]
    pub accepted_statuses: Vec<AuthStatus>,
    /// Also require the certificate's PSD2 roles to cover the route.
    #[serde(default)]
    pub require_roles: bool,
    /// Only these auth numbers (as written in the certificate), when set.
    #[serde(default)]
    pub allow: Option<Vec<String>>,
    /// Never these auth numbers.
    #[serde(default)]
    pub deny: Vec<String>,
    /// The dialect of rejections on paths no route matches.
    #[serde(default = "default_dialect")]
    pub default_dialect: Dialect,
    /// Names of the identity headers added for the upstream.
    #[serde(default)]
    pub identity_headers: IdentityHeaderNames,
    /// Inbound headers removed before forwarding, in addition to the path and method override
    /// headers removed always (`X-Original-URL`, `X-HTTP-Method-Override`, …; README). For
    /// headers the bank's framework honours that the built-in list does not know.
    #[serde(default)]
    pub strip_headers: Vec<String>,
    /// Routes: path prefix (and optionally methods) → required services and dialect. When
    /// absent, the Berlin Group NextGenPSD2 and UK Open Banking defaults (README).
    #[serde(default)]
    pub routes: Option<Vec<RouteConfig>>,
    /// Requests per client (the peer, or the client a trusted proxy names), off when absent:
    /// answered 429 in the route's dialect past it.
    /// The same type as `api.rate_limit`; here `requests` and `period_seconds` must be written.
    #[serde(default, deserialize_with = "RateLimitConfig::deserialize_explicit")]
    pub rate_limit: Option<RateLimitConfig>,
    /// Methods the gateway forwards; any other is refused with 405 before any route is
    /// chosen. `CONNECT` and `TRACE` may not be listed. Default: GET, HEAD, POST, PUT, PATCH,
    /// DELETE, OPTIONS.
    #[serde(default = "default_methods")]
    pub allowed_methods: Vec<String>,
    /// Inbound header names with an underscore: `drop` (the default, as nginx does) or
    /// `refuse` (400 `header_name_refused`). They are never forwarded: a WSGI or CGI upstream
    /// reads `x_psp_services` as `X-Psp-Services`.
    #[serde(default)]
    pub headers_with_underscores: UnderscoreHeaders,
    /// Calls in flight to the upstream, all PSPs together; past it a call is answered 503
    /// `upstream_overloaded` at once. Each HTTP/1.1 call in flight holds one upstream
    /// connection, so this also bounds the connections. Default 1,024 (Envoy's default
    /// circuit breaker `max_requests` and `max_connections`).
    #[serde(default = "default_upstream_max_requests")]
    pub upstream_max_requests: usize,
    /// Calls in flight to the upstream per PSP (its auth number, or its certificate when it
    /// has none); past it 503 `upstream_overloaded`. Default 128: one PSP cannot take more
    /// than an eighth of the default total.
    #[serde(default = "default_upstream_max_requests_per_psp")]
    pub upstream_max_requests_per_psp: usize,
    /// Whose W3C `traceparent` (and `tracestate`) the gateway continues: any caller's
    /// (`accept`, the default), only a trusted proxy's (`from-trusted-proxies`), or nobody's
    /// (`ignore`). Otherwise, and for a malformed one, a new trace starts. The upstream always
    /// receives the gateway's own `traceparent`, never the caller's as is.
    #[serde(default)]
    pub trace_context: TraceContextMode,
}

/// `gateway.trace_context`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TraceContextMode {
    /// Any caller's well-formed `traceparent` continues its trace.
    #[default]
    Accept,
    /// Only `trusted_proxies`' (the bank's edge): a PSP cannot choose the trace id.
    FromTrustedProxies,
    /// Every request starts a new trace.
    Ignore,
}

fn default_methods() -> Vec<String> {
    super::overrides::DEFAULT_METHODS
        .iter()
        .map(|m| m.as_str().to_owned())
        .collect()
}

fn default_upstream_max_requests() -> usize {
    1_024
}

fn default_upstream_max_requests_per_psp() -> usize {
    128
}

/// `gateway.headers_with_underscores`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnderscoreHeaders {
    /// Removed before forwarding; the request goes on.
    #[default]
    Drop,
    /// The request is refused with 400 `header_name_refused`.
    Refuse,
}

fn default_upstream_connect_ms() -> u64 {
    2_000
}

fn default_upstream_timeout_ms() -> u64 {
    30_000
}

fn default_statuses() -> Vec<AuthStatus> {
    vec![AuthStatus::Authorised, AuthStatus::Registered]
}

fn default_dialect() -> Dialect {
    Dialect::BerlinGroup
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientCertificateMode {
    #[default]
    Requested,
    Required,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdentitySource {
    #[default]
    Tls,
    Header,
}

/// The body format of rejections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// Berlin Group NextGenPSD2 `tppMessages`.
    BerlinGroup,
    /// UK Open Banking `OBErrorResponse1`.
    UkOpenBanking,
    /// The contract's `{"errors":[{id,code,title,link}]}`.
    Contract,
}

/// One route.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Matches the path itself and everything below it (`/v1/accounts` matches
    /// `/v1/accounts/123`, not `/v1/accountsX`), after normalisation of the request path (so
    /// the prefix must itself be in normal form). The longest matching prefix wins.
    pub prefix: String,
    /// Methods the route applies to; all when empty.
    #[serde(default)]
    pub methods: Vec<String>,
    /// Payment services the PSP needs for this route.
    pub services: ServiceSet,
    #[serde(default = "default_dialect")]
    pub dialect: Dialect,
}

/// Header names for the identity passed upstream. Every inbound header with one of these
/// names is removed before the gateway adds its own.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IdentityHeaderNames {
    pub auth_number: String,
    pub name: String,
    pub services: String,
    pub certificate: String,
    pub check_id: String,
    /// Report-only mode: the reason the call would have been refused.
    pub report_only: String,
    /// The signed decision (`[evidence] forward_signature`): a compact JWS.
    pub decision: String,
}

impl Default for IdentityHeaderNames {
    fn default() -> Self {
        IdentityHeaderNames {
            auth_number: "x-psp-auth-number".into(),
            name: "x-psp-name".into(),
            services: "x-psp-services".into(),
            certificate: "x-psp-certificate".into(),
            check_id: "x-psp-check-id".into(),
            report_only: "x-psp-report-only-rejection".into(),
            decision: "x-psp-decision-jws".into(),
        }
    }
}

impl IdentityHeaderNames {
    pub fn all(&self) -> [&str; 7] {
        [
            &self.auth_number,
            &self.name,
            &self.services,
            &self.certificate,
            &self.check_id,
            &self.report_only,
            &self.decision,
        ]
    }

    /// The names, parsed (once, when the gateway is built: requests use [`IdentityHeaders`]).
    /// A name is refused when it is not a header name, has an underscore, is given to two
    /// identity headers, or is a header the request's framing, routing, client address,
    /// credentials or trace depend on (docs/attacks/proxy-and-data.md O3: `content-length`
    /// sent a second length upstream, `host` replaced the upstream's host).
    pub fn parse(&self) -> Result<IdentityHeaders, GatewayConfigError> {
        let parse = |name: &str| {
            let bad = || GatewayConfigError::BadHeaderName {
                setting: "identity_headers",
                name: name.to_owned(),
            };
            let parsed = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
            let reserved = RESERVED_HEADER_NAMES.contains(&parsed.as_str())
                || parsed.as_str().starts_with("x-forwarded-")
                || parsed.as_str().contains('_');
            let twice = self
                .all()
                .iter()
                .filter(|other| other.eq_ignore_ascii_case(name))
                .count()
                > 1;
            if reserved || twice {
                return Err(bad());
            }
            Ok(parsed)
        };
        Ok(IdentityHeaders {
            auth_number: parse(&self.auth_number)?,
            name: parse(&self.name)?,
            services: parse(&self.services)?,
            certificate: parse(&self.certificate)?,
            check_id: parse(&self.check_id)?,
            report_only: parse(&self.report_only)?,
            decision: parse(&self.decision)?,
        })
    }
}

/// Headers an identity header may not be named after.
const RESERVED_HEADER_NAMES: [&str; 18] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "forwarded",
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-request-id",
    "traceparent",
    "tracestate",
    "content-type",
];

/// The identity header names of [`IdentityHeaderNames`], parsed: what each request uses.
#[derive(Debug, Clone)]
pub struct IdentityHeaders {
    pub auth_number: HeaderName,
    pub name: HeaderName,
    pub services: HeaderName,
    pub certificate: HeaderName,
    pub check_id: HeaderName,
    pub report_only: HeaderName,
    pub decision: HeaderName,
}

impl IdentityHeaders {
    pub fn all(&self) -> [&HeaderName; 7] {
        [
            &self.auth_number,
            &self.name,
            &self.services,
            &self.certificate,
            &self.check_id,
            &self.report_only,
            &self.decision,
        ]
    }
}

/// The default routes: Berlin Group NextGenPSD2 and UK Open Banking v3.1.
pub fn default_routes() -> Vec<RouteConfig> {
    let route = |prefix: &str, service: u8, dialect| RouteConfig {
        prefix: prefix.to_owned(),
        methods: Vec::new(),
        services: ServiceSet::from_numbers(&[service]).unwrap_or(ServiceSet::EMPTY),
        dialect,
    };
    use Dialect::{BerlinGroup as Bg, UkOpenBanking as Ob};
    vec![
        route("/v1/accounts", 8, Bg),
        route("/v1/consents", 8, Bg),
        route("/v1/card-accounts", 8, Bg),
        route("/v1/payments", 7, Bg),
        route("/v1/bulk-payments", 7, Bg),
        route("/v1/periodic-payments", 7, Bg),
        route("/v1/funds-confirmations", 5, Bg),
        route("/open-banking/v3.1/aisp", 8, Ob),
        route("/open-banking/v3.1/pisp", 7, Ob),
        route("/open-banking/v3.1/cbpii", 5, Ob),
    ]
}

/// Why a `[gateway]` section is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatewayConfigError {
    /// `allowed_methods` is empty.
    #[error("gateway.allowed_methods is empty: nothing could be forwarded")]
    NoMethods,
    /// An `allowed_methods` entry does not parse as a method.
    #[error("gateway.allowed_methods: `{0}` is not an HTTP method")]
    BadMethod(String),
    /// `allowed_methods` names `CONNECT` or `TRACE`.
    #[error(
        "gateway.allowed_methods: {0} is never forwarded (a tunnel or an echo of the identity headers)"
    )]
    NeverForwarded(http::Method),
    /// `identity = "tls"` without a `tls` section.
    #[error("gateway.tls is required when the identity comes from the TLS handshake")]
    NoTls,
    /// A listener without an upstream to forward to.
    #[error("gateway.upstream is required with gateway.listen")]
    NoUpstream,
    /// A server name that is not a DNS name, or a host that is neither one nor an IP address.
    #[error(
        "gateway.{setting}: `{name}` is not a DNS name (letters, digits, `-` and dots){}",
        if *setting == "hosts" { " or an IP address" } else { "" }
    )]
    BadServerName { setting: &'static str, name: String },
    /// `identity = "header"` without `identity_header`.
    #[error("gateway.identity_header is required with identity = \"header\"")]
    NoIdentityHeader,
    /// `identity = "header"` with no trusted proxy.
    #[error("gateway.trusted_proxies is empty: no peer could set the identity header")]
    NoTrustedProxies,
    /// `upstream = "sandbox-echo"` outside the sandbox.
    #[error("gateway.upstream = \"sandbox-echo\" needs sandbox.enabled")]
    EchoNeedsSandbox,
    /// `upstream` does not parse as a URI.
    #[error("gateway.upstream `{upstream}`: {reason}")]
    BadUpstream { upstream: String, reason: String },
    /// `upstream` is not an absolute http(s) URL.
    #[error("gateway.upstream `{0}` must be an http:// or https:// URL, or sandbox-echo")]
    UpstreamNotHttp(String),
    /// A route prefix does not start with `/`.
    #[error("gateway.routes: prefix `{0}` must start with /")]
    PrefixNotAbsolute(String),
    /// A route prefix is not in normal form, so it would never match as written.
    #[error("gateway.routes: prefix `{prefix}` is not in normal form; write `{normal}`")]
    PrefixNotNormal { prefix: String, normal: String },
    /// A route prefix is refused by the path normaliser.
    #[error("gateway.routes: prefix `{prefix}`: {refusal}")]
    BadPrefix {
        prefix: String,
        refusal: super::path::PathRefusal,
    },
    /// A route names no services.
    #[error("gateway.routes: `{0}` names no services")]
    NoServices(String),
    /// A route's method does not parse.
    #[error("gateway.routes: `{0}` is not an HTTP method")]
    BadRouteMethod(String),
    /// `accepted_statuses` is empty.
    #[error("gateway.accepted_statuses is empty: nobody could pass")]
    NoAcceptedStatuses,
    /// A header name setting is not a valid header name.
    #[error("gateway.{setting}: `{name}` is not a header name")]
    BadHeaderName { setting: &'static str, name: String },
    /// `rate_limit` has a zero count, period or table, or a bad IPv6 prefix.
    #[error(transparent)]
    RateLimit(#[from] RateLimitConfigError),
    /// An upstream request limit is zero.
    #[error(
        "gateway.upstream_max_requests and gateway.upstream_max_requests_per_psp must be positive"
    )]
    ZeroUpstreamLimit,
}

impl GatewayConfig {
    /// `allowed_methods`, parsed; `CONNECT` and `TRACE` are refused, and so is an empty list.
    pub(crate) fn methods(&self) -> Result<Vec<http::Method>, GatewayConfigError> {
        if self.allowed_methods.is_empty() {
            return Err(GatewayConfigError::NoMethods);
        }
        self.allowed_methods
            .iter()
            .map(|m| {
                let method: http::Method = m
                    .parse()
                    .map_err(|_| GatewayConfigError::BadMethod(m.clone()))?;
                if super::overrides::NEVER_METHODS.contains(&method) {
                    return Err(GatewayConfigError::NeverForwarded(method));
                }
                Ok(method)
            })
            .collect()
    }

    /// Checks the section as a whole: the identity source has what it needs, the upstream,
    /// each route, the statuses, header names, methods and limits.
    pub fn validate(&self, sandbox: bool) -> Result<(), GatewayConfigError> {
        self.validate_identity_source()?;
        self.validate_upstream(sandbox)?;
        self.validate_names()?;
        if let Some(routes) = &self.routes {
            for r in routes {
                r.validate()?;
            }
        }
        if self.accepted_statuses.is_empty() {
            return Err(GatewayConfigError::NoAcceptedStatuses);
        }
        self.identity_headers.parse()?;
        if let Some(r) = &self.rate_limit {
            r.validate("gateway")?;
        }
        if let Some(n) = &self.identity_header {
            http::HeaderName::from_bytes(n.as_bytes()).map_err(|_| {
                GatewayConfigError::BadHeaderName {
                    setting: "identity_header",
                    name: n.to_string(),
                }
            })?;
        }
        for n in &self.strip_headers {
            http::HeaderName::from_bytes(n.as_bytes()).map_err(|_| {
                GatewayConfigError::BadHeaderName {
                    setting: "strip_headers",
                    name: n.to_string(),
                }
            })?;
        }
        self.methods()?;
        if self.upstream_max_requests == 0 || self.upstream_max_requests_per_psp == 0 {
            return Err(GatewayConfigError::ZeroUpstreamLimit);
        }
        Ok(())
    }

    /// TLS identity needs the TLS listener; header identity needs its header and the proxies
    /// trusted to set it.
    fn validate_identity_source(&self) -> Result<(), GatewayConfigError> {
        match self.identity {
            IdentitySource::Tls if self.tls.is_none() && self.listen.is_some() => {
                Err(GatewayConfigError::NoTls)
            }
            IdentitySource::Header if self.identity_header.is_none() => {
                Err(GatewayConfigError::NoIdentityHeader)
            }
            IdentitySource::Header if self.trusted_proxies.is_empty() => {
                Err(GatewayConfigError::NoTrustedProxies)
            }
            _ => Ok(()),
        }
    }

    /// The upstream: the sandbox echo (only in the sandbox) or an http(s) URI with a host.
    fn validate_upstream(&self, sandbox: bool) -> Result<(), GatewayConfigError> {
        let Some(upstream) = &self.upstream else {
            return match self.listen {
                Some(_) => Err(GatewayConfigError::NoUpstream),
                None => Ok(()),
            };
        };
        if upstream == "sandbox-echo" {
            if !sandbox {
                return Err(GatewayConfigError::EchoNeedsSandbox);
            }
        } else {
            let uri: http::Uri = upstream.parse().map_err(|e: http::uri::InvalidUri| {
                GatewayConfigError::BadUpstream {
                    upstream: upstream.clone(),
                    reason: e.to_string(),
                }
            })?;
            if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
                return Err(GatewayConfigError::UpstreamNotHttp(upstream.clone()));
            }
        }
        Ok(())
    }

    /// Whether the upstream is the sandbox echo.
    pub fn upstream_is_echo(&self) -> bool {
        self.upstream.as_deref() == Some("sandbox-echo")
    }

    /// The names a request's `Host` may carry for this site, lowercased: the server names,
    /// then the further hosts. Empty: any `Host` (a site alone on its listener, as `[gateway]`).
    pub fn host_names(&self) -> Vec<String> {
        self.server_names
            .iter()
            .chain(&self.hosts)
            .map(|n| n.to_ascii_lowercase())
            .collect()
    }

    /// Server names and hosts are DNS names: letters, digits, `-`, dots between labels.
    fn validate_names(&self) -> Result<(), GatewayConfigError> {
        let is_dns_name = |n: &str| {
            !n.is_empty()
                && n.len() <= 253
                && n.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && !label.starts_with('-')
                        && !label.ends_with('-')
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                })
        };
        let is_ip = |n: &str| n.parse::<std::net::IpAddr>().is_ok();
        if let Some(bad) = self.server_names.iter().find(|n| !is_dns_name(n)) {
            return Err(GatewayConfigError::BadServerName {
                setting: "server_names",
                name: bad.clone(),
            });
        }
        for (setting, names) in [("hosts", &self.hosts)] {
            if let Some(bad) = names.iter().find(|n| !is_dns_name(n) && !is_ip(n)) {
                return Err(GatewayConfigError::BadServerName {
                    setting,
                    name: bad.clone(),
                });
            }
        }
        Ok(())
    }
}

impl RouteConfig {
    /// One route: an absolute prefix in normal form, at least one service, methods that parse.
    fn validate(&self) -> Result<(), GatewayConfigError> {
        if !self.prefix.starts_with('/') {
            return Err(GatewayConfigError::PrefixNotAbsolute(self.prefix.clone()));
        }
        // Request paths are matched in normal form: a prefix that is not could never
        // match, or would match something other than it reads.
        match super::path::normalise(&self.prefix) {
            Ok(n) if n.as_str() == self.prefix => {}
            Ok(n) => {
                return Err(GatewayConfigError::PrefixNotNormal {
                    prefix: self.prefix.clone(),
                    normal: n.to_string(),
                });
            }
            Err(refusal) => {
                return Err(GatewayConfigError::BadPrefix {
                    prefix: self.prefix.clone(),
                    refusal,
                });
            }
        }
        if self.services.is_empty() {
            return Err(GatewayConfigError::NoServices(self.prefix.clone()));
        }
        for m in &self.methods {
            m.parse::<http::Method>()
                .map_err(|_| GatewayConfigError::BadRouteMethod(m.clone()))?;
        }
        Ok(())
    }
}
