//! Forward-auth: the PSD2 decision for the reverse proxy a bank already runs. nginx
//! `auth_request`, ingress-nginx `auth-url`, Traefik `ForwardAuth`, Caddy `forward_auth` and
//! Envoy's (and Istio's) HTTP ext_authz each send a request here for every request they hold,
//! and go on only when it is answered 200.
//!
//! Per request:
//! 1. The caller must be one of `[[forward_auth.callers]]` (by its address); anyone else is
//!    refused 403 `forward_auth_caller_unknown`, since whoever can ask can name any
//!    certificate.
//! 2. The original request is read where that caller's kind puts it ([`CallerKind`]); a
//!    header missing or given twice is refused, never guessed.
//! 3. The certificate is read from the caller's header, in the encodings proxies use
//!    ([`crate::forwarded`]); an empty header is no certificate.
//! 4. The site is the caller's `site`, else the one that names the original host.
//! 5. The site decides ([`GatewayState::authorise`]), exactly as its built-in proxy would.
//!
//! The answer is exactly 200 to allow (Envoy's HTTP mode and ingress-nginx allow on 200 only),
//! with the identity headers for the proxy to copy upstream. A refusal is 401 (certificate
//! problems) or 403 (everything else: nginx turns any other status into 500) with the site's
//! dialect body. The built-in proxy's own status and the refusal's code are logged with the
//! decision (its check id is the answer's `x-request-id`), never put in the answer: Caddy and
//! Traefik pass a refusal's headers on to the client.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use serde::Deserialize;

use crate::forwarded;
use crate::gateway::presented::{Unreadable, XfccMode, decoded_once, xfcc_decoded};
use crate::gateway::{Answer, Ask, DecodedChain, GatewayState};
use crate::server::{Body, Cidr, ConnInfo, contract_error, full, new_request_id};
use crate::sites::Sites;

/// `[forward_auth]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForwardAuthConfig {
    /// The listener the proxies call (plain HTTP: it is reached on the bank's internal
    /// network, by the callers named below only).
    pub listen: SocketAddr,
    /// The proxies answered, each with where it puts the original request and the
    /// certificate.
    pub callers: Vec<CallerConfig>,
}

/// One proxy that asks.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallerConfig {
    /// What the proxy is, which says where it puts the original request.
    pub kind: CallerKind,
    /// Its addresses. A request from any other is refused.
    pub addresses: Vec<Cidr>,
    /// The header it puts the client certificate in. Defaults: traefik
    /// `X-Forwarded-Tls-Client-Cert`, envoy `x-forwarded-client-cert`, ingress-nginx
    /// `ssl-client-cert`; nginx and caddy name theirs (their configuration sets it).
    #[serde(default)]
    pub certificate_header: Option<String>,
    /// `envoy`: the prefix its HTTP mode puts before the original path (`path_prefix` of
    /// the ext_authz filter's `http_service.server_uri`).
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// `envoy` with XFCC: take the last element only if this hop added it (its `By`).
    #[serde(default)]
    pub xfcc_by: Option<String>,
    /// With XFCC: how the edge forwards it (`sanitize-set`, the default, or
    /// `append-forward`, which needs `xfcc_by`).
    #[serde(default)]
    pub xfcc_forwarding: XfccMode,
    /// The site this proxy serves; otherwise the site that names the original host.
    #[serde(default)]
    pub site: Option<String>,
}

/// Where each proxy puts the original request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CallerKind {
    /// nginx `auth_request`: `X-Original-Method`, `X-Original-URI` and `Host`, as its
    /// configuration sets them (`deploy/nginx/`).
    Nginx,
    /// ingress-nginx `auth-url`: `X-Original-Method`, the absolute `X-Original-URL` (built
    /// from the `Host` header), and `X-Routed-Host`, which the documented `auth-snippet` sets
    /// to nginx's `$host` (the request line's authority when the target is absolute, which is
    /// what nginx chose the backend by). The two must name the same host.
    IngressNginx,
    /// Traefik `ForwardAuth`: `X-Forwarded-Method`, `X-Forwarded-Uri`, `X-Forwarded-Host`.
    Traefik,
    /// Caddy `forward_auth`: `X-Forwarded-Method`, `X-Forwarded-Uri`, `X-Forwarded-Host`.
    Caddy,
    /// Envoy's HTTP ext_authz: the request line itself behind `path_prefix`, and `Host`.
    Envoy,
}

impl CallerKind {
    /// The headers this kind of proxy writes into its check request itself, replacing any
    /// copy the client sent (besides the certificate header): the face cannot see the
    /// client's copy of these, so the proxy's example configuration (`deploy/`) removes them
    /// from the request to the bank's API. Any other header of the strip set in the check
    /// request is the client's, and is refused. The lists: nginx as `deploy/nginx` configures
    /// it; Caddy's `forward_auth` (`X-Forwarded-Method`, `X-Forwarded-Uri`) and
    /// `reverse_proxy`, as the real Caddy of the tests sends them; Traefik's
    /// `forwardauth.writeHeader` and its forwarded-headers rewrite (`X-Real-Ip`,
    /// `X-Forwarded-Port`, `X-Forwarded-Server`), ingress-nginx's auth location and Envoy's
    /// HTTP ext_authz client as their documentation describes them (none of these three runs
    /// here: not verified against the real proxy).
    fn own_headers(self) -> &'static [&'static str] {
        match self {
            CallerKind::Nginx => &["host", "x-original-uri", "x-original-method"],
            CallerKind::IngressNginx => &[
                "x-routed-host",
                "x-original-url",
                "x-original-method",
                "x-sent-from",
                "x-real-ip",
                "x-forwarded-for",
                "x-forwarded-proto",
                "x-forwarded-host",
                "x-auth-request-redirect",
                "x-request-id",
                // With auth-tls-pass-certificate-to-upstream, beside ssl-client-cert.
                "ssl-client-verify",
                "ssl-client-subject-dn",
                "ssl-client-issuer-dn",
            ],
            CallerKind::Traefik => &[
                "x-forwarded-method",
                "x-forwarded-uri",
                "x-forwarded-host",
                "x-forwarded-proto",
                "x-forwarded-for",
                "x-forwarded-port",
                "x-forwarded-server",
                "x-real-ip",
            ],
            CallerKind::Caddy => &[
                "x-forwarded-method",
                "x-forwarded-uri",
                "x-forwarded-host",
                "x-forwarded-proto",
                "x-forwarded-for",
            ],
            CallerKind::Envoy => &["host", "x-forwarded-for", "x-forwarded-proto"],
        }
    }

    /// Whether the proxy removes headers the answer names: Envoy's HTTP mode honours
    /// `x-envoy-auth-headers-to-remove`; nginx, Caddy and Traefik have no such answer.
    fn removes_headers(self) -> bool {
        self == CallerKind::Envoy
    }
}

/// Envoy's HTTP ext_authz removes the headers an OK answer lists here (comma-separated) from
/// the request it forwards.
const ENVOY_HEADERS_TO_REMOVE: &str = "x-envoy-auth-headers-to-remove";

/// Why `[forward_auth]` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForwardAuthConfigError {
    /// No callers.
    #[error("forward_auth.callers is empty: no proxy could ask")]
    NoCallers,
    /// A caller without addresses.
    #[error("forward_auth.callers: a `{0:?}` caller has no addresses")]
    NoAddresses(CallerKind),
    /// nginx or caddy without its certificate header.
    #[error(
        "forward_auth.callers: a `{0:?}` caller needs certificate_header (the header its configuration sets)"
    )]
    NoCertificateHeader(CallerKind),
    /// A header name that is none.
    #[error("forward_auth.callers: `{0}` is not a header name")]
    BadHeaderName(String),
    /// `path_prefix` on a caller that is not Envoy, or one not starting with `/`.
    #[error("forward_auth.callers: path_prefix `{0}` must start with / and is for kind envoy only")]
    BadPathPrefix(String),
    /// `xfcc_forwarding = "append-forward"` without `xfcc_by`: the edge's element cannot be
    /// told from the client's.
    #[error(
        "forward_auth.callers: a `{0:?}` caller with xfcc_forwarding = \"append-forward\" needs xfcc_by (the proxy's own URI SAN), or the client's element could pass for the proxy's"
    )]
    AppendForwardWithoutBy(CallerKind),
    /// A `site` that no site has.
    #[error("forward_auth.callers: site `{0}` is not configured")]
    UnknownSite(String),
    /// Two callers whose addresses overlap: callers are told apart by address, so the first
    /// would answer for both, and a client of the second could send the first kind's headers
    /// through it (a proxy passes its client's headers on to the check).
    #[error(
        "forward_auth.callers: `{first}` (a `{first_kind:?}` caller) and `{second}` (a `{second_kind:?}` caller) overlap: callers are told apart by their addresses, so requests of one would be read as the other's"
    )]
    OverlappingAddresses {
        first: Cidr,
        first_kind: CallerKind,
        second: Cidr,
        second_kind: CallerKind,
    },
}

impl ForwardAuthConfig {
    /// Every caller has addresses and a certificate header, names that parse, a prefix where
    /// one applies, and a site that exists (`sites`: the configured site names).
    pub fn validate(&self, sites: &[&str]) -> Result<(), ForwardAuthConfigError> {
        if self.callers.is_empty() {
            return Err(ForwardAuthConfigError::NoCallers);
        }
        for c in &self.callers {
            if c.addresses.is_empty() {
                return Err(ForwardAuthConfigError::NoAddresses(c.kind));
            }
            c.certificate_header()?;
            if let Some(prefix) = &c.path_prefix
                && (c.kind != CallerKind::Envoy || !prefix.starts_with('/'))
            {
                return Err(ForwardAuthConfigError::BadPathPrefix(prefix.clone()));
            }
            if c.xfcc_forwarding == XfccMode::AppendForward && c.xfcc_by.is_none() {
                return Err(ForwardAuthConfigError::AppendForwardWithoutBy(c.kind));
            }
            if let Some(site) = &c.site
                && !sites.contains(&site.as_str())
            {
                return Err(ForwardAuthConfigError::UnknownSite(site.clone()));
            }
        }
        // A caller is found by the first whose addresses hold the peer: two callers sharing an
        // address would make the second's requests read as the first kind's. Through Caddy,
        // for instance, a client without a certificate could send nginx's X-Original-URI and
        // X-SSL-Client-Cert (with any PSP's public certificate) and be let in under that
        // PSP's identity. Refused here rather than read one way.
        for (i, first) in self.callers.iter().enumerate() {
            for second in &self.callers[i + 1..] {
                for a in &first.addresses {
                    if let Some(b) = second.addresses.iter().find(|b| overlap(a, b)) {
                        return Err(ForwardAuthConfigError::OverlappingAddresses {
                            first: *a,
                            first_kind: first.kind,
                            second: *b,
                            second_kind: second.kind,
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether two address blocks share an address: blocks are nested or apart, so one holds the
/// other's address (as written: any address of a block is in it).
fn overlap(a: &Cidr, b: &Cidr) -> bool {
    let address = |c: &Cidr| {
        c.to_string()
            .rsplit_once('/')
            .and_then(|(ip, _)| ip.parse::<IpAddr>().ok())
    };
    match (address(a), address(b)) {
        (Some(of_a), Some(of_b)) => a.contains(of_b) || b.contains(of_a),
        // Every block displays as `address/prefix`; were one not to, refuse the pair.
        _ => true,
    }
}

impl CallerConfig {
    /// The certificate header: configured, or the kind's default.
    fn certificate_header(&self) -> Result<HeaderName, ForwardAuthConfigError> {
        let name = match (&self.certificate_header, self.kind) {
            (Some(name), _) => name.as_str(),
            (None, CallerKind::Traefik) => "x-forwarded-tls-client-cert",
            (None, CallerKind::Envoy) => "x-forwarded-client-cert",
            (None, CallerKind::IngressNginx) => "ssl-client-cert",
            (None, kind @ (CallerKind::Nginx | CallerKind::Caddy)) => {
                return Err(ForwardAuthConfigError::NoCertificateHeader(kind));
            }
        };
        HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ForwardAuthConfigError::BadHeaderName(name.to_owned()))
    }
}

/// The forward-auth face: its callers, and the base of its error links.
pub struct ForwardAuthState {
    callers: Vec<Caller>,
    link_base: String,
}

struct Caller {
    config: CallerConfig,
    certificate_header: HeaderName,
}

impl ForwardAuthState {
    /// The face as `config` sets it up (validated: [`ForwardAuthConfig::validate`]).
    pub fn new(
        config: &ForwardAuthConfig,
        link_base: String,
    ) -> Result<ForwardAuthState, ForwardAuthConfigError> {
        let callers = config
            .callers
            .iter()
            .map(|c| {
                Ok(Caller {
                    certificate_header: c.certificate_header()?,
                    config: c.clone(),
                })
            })
            .collect::<Result<_, ForwardAuthConfigError>>()?;
        Ok(ForwardAuthState { callers, link_base })
    }

    fn caller(&self, peer: IpAddr) -> Option<&Caller> {
        self.callers
            .iter()
            .find(|c| c.config.addresses.iter().any(|a| a.contains(peer)))
    }
}

/// Why a forward-auth request cannot be asked at all (answered 403 with the contract's body).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Unasked {
    CallerUnknown(IpAddr),
    /// A header of the original request is missing (its name).
    Missing(&'static str),
    /// A header of the original request is given more than once, or is not text.
    Ambiguous(&'static str),
    /// Envoy's path does not start with the configured prefix.
    OutsidePrefix,
    /// No site names the original host (or it names none) and the caller names no site.
    NoSite(Option<String>),
    /// ingress-nginx: the host of `X-Original-URL` (the `Host` header) is not the one nginx
    /// routed by (`X-Routed-Host`, its `$host`): a request whose absolute-form target names
    /// another host than its `Host` would be decided for one site and delivered to another.
    HostsDisagree {
        original: String,
        routed: String,
    },
}

impl Unasked {
    fn code(&self) -> &'static str {
        match self {
            Unasked::CallerUnknown(_) => "forward_auth_caller_unknown",
            Unasked::Missing(_) | Unasked::Ambiguous(_) | Unasked::OutsidePrefix => {
                "forward_auth_request_incomplete"
            }
            Unasked::NoSite(_) | Unasked::HostsDisagree { .. } => "misdirected_request",
        }
    }

    fn title(&self) -> String {
        match self {
            Unasked::CallerUnknown(ip) => {
                format!("{ip} is not a configured forward-auth caller (forward_auth.callers)")
            }
            Unasked::Missing(name) => {
                format!("The proxy did not send `{name}`: check its forward-auth configuration")
            }
            Unasked::Ambiguous(name) => {
                format!("`{name}` is given more than once or is not text")
            }
            Unasked::OutsidePrefix => {
                "The path does not start with the caller's path_prefix".to_owned()
            }
            Unasked::NoSite(Some(host)) => format!("No site serves the host `{host}`"),
            Unasked::NoSite(None) => "The request names no host and the caller no site".to_owned(),
            Unasked::HostsDisagree { original, routed } => format!(
                "The request names the host `{}` but was routed by `{}`",
                shown(original),
                shown(routed)
            ),
        }
    }
}

/// Answers one forward-auth request.
pub async fn handle<B>(
    state: &ForwardAuthState,
    sites: &Sites,
    req: Request<B>,
    conn: &ConnInfo,
) -> Response<Body> {
    let asked = match question(state, sites, &req, conn) {
        Ok(asked) => asked,
        Err(unasked) => return unasked_response(&unasked, &state.link_base, conn.peer),
    };
    let (site, ask, kind) = asked;
    answer(site.authorise(ask).await, kind)
}

/// The site and the question, from the caller's request.
fn question<'s, B>(
    state: &ForwardAuthState,
    sites: &'s Sites,
    req: &Request<B>,
    conn: &ConnInfo,
) -> Result<(&'s Arc<GatewayState>, Ask, CallerKind), Unasked> {
    let caller = state
        .caller(conn.peer.ip())
        .ok_or(Unasked::CallerUnknown(conn.peer.ip()))?;
    let h = req.headers();
    let (method, target, host) = original_request(caller, req)?;
    let method: Method = method
        .parse()
        .map_err(|_| Unasked::Ambiguous("the original method"))?;
    let site = match (&caller.config.site, &host) {
        (Some(name), _) => sites.named(name),
        (None, Some(host)) => sites.by_host(host),
        (None, None) if sites.all().len() == 1 => sites.all().first(),
        (None, None) => None,
    }
    .ok_or_else(|| Unasked::NoSite(host.clone()))?;
    let chain = certificate(caller, h);
    Ok((
        site,
        Ask {
            face: "forward-auth",
            method,
            target,
            host,
            chain,
            peer: client_of(h, conn.peer),
            header_names: h
                .keys()
                .map(HeaderName::as_str)
                .filter(|name| {
                    *name != caller.certificate_header.as_str()
                        && !caller.config.kind.own_headers().contains(name)
                })
                .map(str::to_owned)
                .collect(),
            edge_removes: caller.config.kind.removes_headers(),
            // The proxies do not pass the body to the check.
            form_body: None,
            trace_headers: crate::gateway::trace_headers(
                h.iter()
                    .map(|(name, value)| (name.as_str(), value.as_bytes())),
            ),
        },
        caller.config.kind,
    ))
}

/// The original request's method, target and host, as the caller's kind of proxy passes
/// them (Envoy: the check request's own, less `path_prefix`).
fn original_request<B>(
    caller: &Caller,
    req: &Request<B>,
) -> Result<(String, String, Option<String>), Unasked> {
    let h = req.headers();
    Ok(match caller.config.kind {
        CallerKind::Nginx => (
            one(h, "x-original-method")?,
            one(h, "x-original-uri")?,
            optional(h, "host")?,
        ),
        CallerKind::IngressNginx => {
            let url = one(h, "x-original-url")?;
            let uri: http::Uri = url
                .parse()
                .map_err(|_| Unasked::Ambiguous("x-original-url"))?;
            let mut target = uri
                .path_and_query()
                .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned());
            // `http::Uri` drops a fragment, which nginx forwards with the rest of the target:
            // kept, so that the site refuses it as every face does.
            if let Some((_, fragment)) = url.split_once('#') {
                target.push('#');
                target.push_str(fragment);
            }
            let host = uri
                .authority()
                .map(|a| a.as_str().to_owned())
                .ok_or(Unasked::Ambiguous("x-original-url"))?;
            let routed = one(h, "x-routed-host")?;
            if crate::gateway::host_of(&host) != crate::gateway::host_of(&routed) {
                return Err(Unasked::HostsDisagree {
                    original: host,
                    routed,
                });
            }
            (one(h, "x-original-method")?, target, Some(host))
        }
        CallerKind::Traefik | CallerKind::Caddy => (
            one(h, "x-forwarded-method")?,
            one(h, "x-forwarded-uri")?,
            optional(h, "x-forwarded-host")?,
        ),
        CallerKind::Envoy => {
            let target = req
                .uri()
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_owned();
            let target = match &caller.config.path_prefix {
                Some(prefix) => match target.strip_prefix(prefix.trim_end_matches('/')) {
                    Some(rest) if rest.starts_with('/') => rest.to_owned(),
                    _ => return Err(Unasked::OutsidePrefix),
                },
                None => target,
            };
            (
                req.method().as_str().to_owned(),
                target,
                optional(h, "host")?,
            )
        }
    })
}

/// The client's certificate chain from the caller's header: none when it is absent or empty
/// (nginx sends an empty `$ssl_client_escaped_cert` when the client presented none).
fn certificate(caller: &Caller, h: &HeaderMap) -> Result<Arc<DecodedChain>, Unreadable> {
    let mut values = h.get_all(&caller.certificate_header).iter();
    let value = match (values.next(), values.next()) {
        (None, _) => return Ok(DecodedChain::none()),
        (Some(_), Some(_)) => {
            return Err(Unreadable::Repeated {
                header: format!("`{}`", caller.certificate_header),
                count: h.get_all(&caller.certificate_header).iter().count(),
            });
        }
        (Some(value), None) => value.as_bytes(),
    };
    if value.iter().all(u8::is_ascii_whitespace) {
        return Ok(DecodedChain::none());
    }
    // Caddy 2.6 sends a placeholder's own text when it has no value for it (no client
    // certificate): that is no certificate, not a certificate that cannot be read.
    if caller.config.kind == CallerKind::Caddy && value.starts_with(b"{http.") {
        return Ok(DecodedChain::none());
    }
    if caller.certificate_header == "x-forwarded-client-cert" {
        xfcc_decoded(
            value,
            caller.config.xfcc_forwarding,
            caller.config.xfcc_by.as_deref(),
        )
    } else if caller.certificate_header == "client-cert" {
        decoded_once("forwarded client-cert", None, value, |value| {
            Ok(forwarded::rfc9440_certificate(value).map(|leaf| vec![leaf])?)
        })
    } else {
        decoded_once("forwarded certificate", None, value, |value| {
            Ok(forwarded::forwarded_chain(value)?)
        })
    }
}

/// At most 64 characters of a value the client chose, for a refusal's text.
fn shown(value: &str) -> String {
    value.chars().take(64).collect()
}

/// The header's one value, as text.
fn one(h: &HeaderMap, name: &'static str) -> Result<String, Unasked> {
    optional(h, name)?.ok_or(Unasked::Missing(name))
}

/// The header's value, if there is one; twice, or not text, is refused.
fn optional(h: &HeaderMap, name: &'static str) -> Result<Option<String>, Unasked> {
    let mut values = h.get_all(name).iter();
    match (values.next(), values.next()) {
        (None, _) => Ok(None),
        (Some(v), None) => v
            .to_str()
            .map(|v| Some(v.to_owned()))
            .map_err(|_| Unasked::Ambiguous(name)),
        (Some(_), Some(_)) => Err(Unasked::Ambiguous(name)),
    }
}

/// The client's address for the audit record: the last `X-Forwarded-For` entry the caller
/// (a configured proxy) added, else the caller itself.
fn client_of(h: &HeaderMap, peer: SocketAddr) -> SocketAddr {
    h.get_all(crate::server::X_FORWARDED_FOR)
        .iter()
        .next_back()
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.rsplit(',').next())
        .and_then(|v| v.trim().parse::<IpAddr>().ok())
        .map_or(peer, |ip| SocketAddr::new(ip, 0))
}

/// The proxy's answer: exactly 200 with the identity headers to copy, or 401/403 with the
/// dialect's body and the built-in proxy's status and code beside it.
fn answer(answer: Answer, kind: CallerKind) -> Response<Body> {
    match answer {
        Answer::Allow { set, remove, .. } => {
            let mut response = Response::new(full(Bytes::new()));
            *response.headers_mut() = set;
            if kind.removes_headers() {
                let names: Vec<&str> = remove
                    .iter()
                    .filter(|name| !response.headers().contains_key(*name))
                    .map(HeaderName::as_str)
                    .collect();
                if let Ok(value) = HeaderValue::from_str(&names.join(",")) {
                    response
                        .headers_mut()
                        .insert(ENVOY_HEADERS_TO_REMOVE, value);
                }
            }
            response
        }
        Answer::Deny {
            status,
            headers,
            body,
            ..
        } => {
            // The built-in proxy's own status and the refusal's code are in the decision's
            // log lines (its access line and audit record, by check id), not in the answer:
            // Caddy and Traefik pass a refusal's headers on to the client.
            let proxy_status = match status {
                StatusCode::UNAUTHORIZED => StatusCode::UNAUTHORIZED,
                _ => StatusCode::FORBIDDEN,
            };
            let mut response = Response::new(full(body));
            *response.status_mut() = proxy_status;
            *response.headers_mut() = headers;
            response
        }
    }
}

/// The answer to a question never asked of a site: 403 with the contract's body, counted and
/// audited ([`crate::gateway::log_face_refusal`]).
fn unasked_response(unasked: &Unasked, link_base: &str, peer: SocketAddr) -> Response<Body> {
    if let Unasked::CallerUnknown(ip) = unasked {
        tracing::warn!(peer = %ip, "forward-auth request from an address that is no configured caller");
    }
    let (id, title) = (new_request_id(), unasked.title());
    crate::gateway::log_face_refusal(crate::gateway::FaceRefusal {
        face: "forward-auth",
        site: "",
        check_id: &id,
        peer,
        status: StatusCode::FORBIDDEN,
        code: unasked.code(),
        detail: &title,
    });
    contract_error(
        StatusCode::FORBIDDEN,
        &id,
        unasked.code(),
        &title,
        link_base,
    )
}
