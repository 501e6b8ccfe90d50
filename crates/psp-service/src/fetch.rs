//! The outbound HTTP client for CRLs, OCSP and trusted lists (docs/design.md section 6): `http` and
//! `https` only,
//! connect and total timeouts, body size caps enforced while reading, no redirects, and no
//! destination outside what `allow_destinations` permits.
//!
//! Destinations are checked where the address is known: a URL with a literal IP address is
//! checked before the request; a host name is checked inside the connector's resolver, on
//! every address it resolves to, so the address checked is the address connected to (a DNS
//! answer that changes between a check and the connect cannot slip through).
//!
//! Redirects are not followed: the URLs are the ones the issuer put in its certificate, RFC
//! 5280 and RFC 6960 do not ask clients to follow redirects, and a redirect is the usual way
//! to turn a fetcher against internal addresses. A 3xx answer is a failure naming its target.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, LengthLimitError, Limited};
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderName, HeaderValue, LOCATION, USER_AGENT};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::rt::TokioExecutor;

use serde::Deserialize;

/// Sent with every fetch, so issuers can tell our traffic apart.
const USER_AGENT_VALUE: &str = concat!("psp-gateway/", env!("CARGO_PKG_VERSION"));
/// Idle pooled connections to a responder are closed after this long. Ninety seconds is
/// hyper-util's default; OCSP traffic to one responder is bursty.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Idle connections kept per host: one per concurrent fetch we expect to a single
/// responder (misses are coalesced, so a handful suffices).
const POOL_MAX_IDLE_PER_HOST: usize = 4;

/// Where outbound fetches (revocation, trusted lists) may connect to (docs/design.md section 6: no
/// private, loopback or link-local targets unless configured).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllowDestinations {
    /// Globally routable addresses only (the default): no loopback, private (RFC 1918, RFC
    /// 4193), shared (RFC 6598), link-local or other special-purpose addresses (RFC 6890).
    #[default]
    Public,
    /// Public addresses and loopback: the sandbox, whose responder is on 127.0.0.1.
    Loopback,
    /// Any unicast address, including private networks (an internal CRL mirror). Only the
    /// unspecified address (which Linux connects to the local host) and multicast or
    /// broadcast stay refused.
    Any,
}

impl AllowDestinations {
    /// The value as written in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            AllowDestinations::Public => "public",
            AllowDestinations::Loopback => "loopback",
            AllowDestinations::Any => "any",
        }
    }
}

/// The shortest wait between two refreshes, whatever the data says: data that is already
/// stale must not make `serve` fetch in a loop.
pub const MIN_REFRESH_WAIT: Duration = Duration::from_secs(60);

/// How long `serve` waits before the next refresh of fetched data (trusted lists,
/// registers): the interval less up to 10 % (so that many gateways do not fetch at the same
/// moment), or less if something becomes unusable sooner (`until`), never less than
/// [`MIN_REFRESH_WAIT`].
pub fn next_wait(
    interval: Duration,
    until: Option<time::OffsetDateTime>,
    now: time::OffsetDateTime,
) -> Duration {
    let mut jitter = [0u8; 4];
    let fraction =
        match ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut jitter) {
            Ok(()) => f64::from(u32::from_le_bytes(jitter)) / f64::from(u32::MAX),
            Err(_) => 0.5,
        };
    let mut wait = interval.mul_f64(1.0 - 0.1 * fraction);
    if let Some(until) = until {
        let until = (until - now).max(time::Duration::ZERO);
        let until = Duration::try_from(until).unwrap_or(Duration::ZERO);
        wait = wait.min(until);
    }
    wait.max(MIN_REFRESH_WAIT)
}

/// How often a wait for a refresh reads the wall clock again ([`wait_for_refresh`]).
pub const WALL_CLOCK_CHECK: Duration = Duration::from_secs(60);

/// Waits until a refresh is due: `wait` has passed on the monotonic clock (tokio's), or the
/// wall clock (`wall`, read every [`WALL_CLOCK_CHECK`]) has reached `until` (the data's
/// `NextUpdate`), but not before [`MIN_REFRESH_WAIT`] (stale data must not make a loop).
///
/// A sleep computed once from the wall clock would not notice the clock stepped forward past
/// `NextUpdate`: the lists would be stale (and approve nothing) until the interval's end, up
/// to 6 hours. Stepped back, the wait still ends after `wait`: no window grows with the step.
pub async fn wait_for_refresh(
    wait: Duration,
    until: Option<time::OffsetDateTime>,
    wall: impl Fn() -> time::OffsetDateTime,
) {
    let start = tokio::time::Instant::now();
    let deadline = start + wait;
    let floor = start + MIN_REFRESH_WAIT.min(wait);
    loop {
        let now = tokio::time::Instant::now();
        if now >= deadline || (now >= floor && until.is_some_and(|u| wall() >= u)) {
            return;
        }
        let next = (now + WALL_CLOCK_CHECK)
            .min(deadline)
            .max(floor.min(deadline));
        tokio::time::sleep_until(next).await;
    }
}

/// Why a fetch failed. The `Display` text becomes part of the method's failure reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("`{0}` is not a valid URL")]
    InvalidUrl(String),
    #[error("scheme `{0}` is not allowed (http and https only)")]
    Scheme(String),
    #[error("{0}")]
    Refused(Refusal),
    #[error("{0}")]
    Transport(String),
    #[error("no complete answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    #[error("answered {status} with a redirect to {location}; redirects are not followed")]
    Redirect { status: u16, location: String },
    #[error("answered HTTP {0}")]
    Status(u16),
    #[error("the response body exceeds the {0}-byte limit")]
    TooLarge(u64),
    #[error("the response body could not be read: {0}")]
    Body(String),
}

/// A destination the policy does not allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    host: String,
    addr: IpAddr,
    class: AddressClass,
    allow: AllowDestinations,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host == self.addr.to_string() {
            write!(f, "destination {}", self.addr)?;
        } else {
            write!(f, "destination {} resolves to {}", self.host, self.addr)?;
        }
        write!(
            f,
            ", {}, which revocation.allow_destinations = \"{}\" does not allow",
            self.class.describe(),
            self.allow.as_str()
        )
    }
}

impl StdError for Refusal {}

/// What kind of address an IP address is, after RFC 6890's special-purpose registries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    Public,
    Loopback,
    /// RFC 1918, RFC 4193 unique local, RFC 6598 shared (carrier-grade NAT), deprecated
    /// site-local.
    Private,
    LinkLocal,
    /// 0.0.0.0/8, `::`: Linux connects these to the local host.
    Unspecified,
    /// Multicast and broadcast: no TCP.
    Multicast,
    /// Documentation, benchmarking, reserved and protocol-assignment ranges: never a real
    /// server.
    Reserved,
}

impl AddressClass {
    fn describe(self) -> &'static str {
        match self {
            AddressClass::Public => "a public address",
            AddressClass::Loopback => "a loopback address",
            AddressClass::Private => "a private-network address",
            AddressClass::LinkLocal => "a link-local address",
            AddressClass::Unspecified => "the unspecified address",
            AddressClass::Multicast => "a multicast or broadcast address",
            AddressClass::Reserved => "a reserved special-purpose address",
        }
    }
}

/// Classifies an address by the IANA IPv4 and IPv6 Special-Purpose Address Registries
/// (RFC 6890). IPv4 addresses embedded in IPv6 (mapped, compatible, NAT64 `64:ff9b::/96`)
/// are classified as the IPv4 address they reach.
pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    let o = ip.octets();
    match o {
        [0, ..] => AddressClass::Unspecified,
        [127, ..] => AddressClass::Loopback,
        [10, ..] => AddressClass::Private,
        [172, b, ..] if (16..=31).contains(&b) => AddressClass::Private,
        [192, 168, ..] => AddressClass::Private,
        [100, b, ..] if (64..=127).contains(&b) => AddressClass::Private,
        [169, 254, ..] => AddressClass::LinkLocal,
        [a, ..] if (224..=239).contains(&a) => AddressClass::Multicast,
        [255, 255, 255, 255] => AddressClass::Multicast,
        [a, ..] if a >= 240 => AddressClass::Reserved,
        [192, 0, 0, _] | [192, 0, 2, _] | [198, 51, 100, _] | [203, 0, 113, _] => {
            AddressClass::Reserved
        }
        [198, b, ..] if b == 18 || b == 19 => AddressClass::Reserved,
        _ => AddressClass::Public,
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    if ip.is_unspecified() {
        return AddressClass::Unspecified;
    }
    if ip.is_loopback() {
        return AddressClass::Loopback;
    }
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    // ::ffff:a.b.c.d (mapped), ::ffff:0:a.b.c.d (translated, RFC 2765), ::a.b.c.d
    // (compatible, deprecated), 64:ff9b::a.b.c.d (NAT64, RFC 6052) and 64:ff9b:1::/48's
    // (local-use NAT64, RFC 8215): the IPv4 address in the last 32 bits. 2002:aabb:ccdd::/48
    // (6to4, RFC 3056): the IPv4 address after the prefix. A router reaches that IPv4 address
    // through them, so they are what it is.
    let embedded = match s {
        [0, 0, 0, 0, 0, 0xffff, ..]
        | [0, 0, 0, 0, 0xffff, 0, ..]
        | [0, 0, 0, 0, 0, 0, ..]
        | [0x64, 0xff9b, 0, 0, 0, 0, ..]
        | [0x64, 0xff9b, 1, ..] => Some(v4(s[6], s[7])),
        [0x2002, ..] => Some(v4(s[1], s[2])),
        _ => None,
    };
    if let Some(v4) = embedded {
        return classify_v4(v4);
    }
    // Teredo (2001:0::/32, RFC 4380) tunnels to an IPv4 client address it hides (XORed) in
    // its last 32 bits, through a server named in the middle: never a destination here.
    if s[0] == 0x2001 && s[1] == 0 {
        return AddressClass::Reserved;
    }
    match s[0] {
        x if x & 0xfe00 == 0xfc00 => AddressClass::Private,
        x if x & 0xffc0 == 0xfe80 => AddressClass::LinkLocal,
        x if x & 0xffc0 == 0xfec0 => AddressClass::Private,
        x if x & 0xff00 == 0xff00 => AddressClass::Multicast,
        0x2001 if s[1] == 0x0db8 => AddressClass::Reserved,
        _ => AddressClass::Public,
    }
}

/// Whether the policy allows connecting to an address of this class.
pub fn allowed(allow: AllowDestinations, class: AddressClass) -> bool {
    // Exhaustive over the classes: a new class forces a decision here.
    match class {
        AddressClass::Public => true,
        AddressClass::Loopback => {
            matches!(allow, AllowDestinations::Loopback | AllowDestinations::Any)
        }
        AddressClass::Private | AddressClass::LinkLocal | AddressClass::Reserved => {
            allow == AllowDestinations::Any
        }
        AddressClass::Unspecified | AddressClass::Multicast => false,
    }
}

fn check_address(host: &str, addr: IpAddr, allow: AllowDestinations) -> Result<(), Refusal> {
    let class = classify(addr);
    if allowed(allow, class) {
        Ok(())
    } else {
        Err(Refusal {
            host: host.to_owned(),
            addr,
            class,
            allow,
        })
    }
}

/// The connector's resolver: resolves with the system resolver and refuses the name unless
/// every address it resolves to is allowed (one bad address refuses the whole answer, so a
/// mixed answer cannot be used to reach an internal host).
#[derive(Clone)]
struct PolicyResolver {
    allow: AllowDestinations,
}

type ResolveFuture =
    Pin<Box<dyn Future<Output = Result<std::vec::IntoIter<SocketAddr>, ResolveError>> + Send>>;

#[derive(Debug)]
enum ResolveError {
    Lookup {
        host: String,
        source: std::io::Error,
    },
    NoAddress(String),
    Refused(Refusal),
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::Lookup { host, source } => write!(f, "cannot resolve {host}: {source}"),
            ResolveError::NoAddress(host) => write!(f, "{host} resolves to no address"),
            ResolveError::Refused(r) => r.fmt(f),
        }
    }
}

impl StdError for ResolveError {}

impl tower_service::Service<Name> for PolicyResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = ResolveError;
    type Future = ResolveFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let allow = self.allow;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map_err(|source| ResolveError::Lookup {
                    host: host.clone(),
                    source,
                })?
                .collect();
            if addrs.is_empty() {
                return Err(ResolveError::NoAddress(host));
            }
            for a in &addrs {
                check_address(&host, a.ip(), allow).map_err(ResolveError::Refused)?;
            }
            Ok(addrs.into_iter())
        })
    }
}

/// Limits of one fetch.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connect, request and the whole body.
    pub total: Duration,
    /// Body bytes; more is an error and is never buffered.
    pub max_bytes: u64,
}

/// The shared client. Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct Fetcher {
    client: Client<HttpsConnector<HttpConnector<PolicyResolver>>, Full<Bytes>>,
    allow: AllowDestinations,
}

impl Fetcher {
    /// Builds the client. TLS (for `https` distribution points, rare: RFC 5280 section
    /// 4.2.1.13 recommends `http` so that revocation checking does not depend on TLS
    /// validation) uses the platform's root certificates with the ring provider; without any,
    /// `https` fetches fail and are reported.
    pub fn new(allow: AllowDestinations, connect_timeout: Duration) -> Self {
        let mut http = HttpConnector::new_with_resolver(PolicyResolver { allow });
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = match hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(Arc::clone(&provider))
        {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "no platform root certificates: https CRL and OCSP URLs will fail");
                hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(empty_roots(provider))
            }
        };
        let https = builder.https_or_http().enable_http1().wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .pool_max_idle_per_host(POOL_MAX_IDLE_PER_HOST)
            .build(https);
        Fetcher { client, allow }
    }

    /// GET `url`.
    pub async fn get(&self, url: &str, limits: Limits) -> Result<Bytes, FetchError> {
        self.fetch(Method::GET, url, &[], None, limits).await
    }

    /// GET `url` with extra request headers (an API key, `Accept`). The destination policy,
    /// the no-redirect rule and `limits` apply as for [`Fetcher::get`]. Mark secret values
    /// with [`HeaderValue::set_sensitive`]; this client never logs headers.
    pub async fn get_with_headers(
        &self,
        url: &str,
        headers: &[(HeaderName, HeaderValue)],
        limits: Limits,
    ) -> Result<Bytes, FetchError> {
        self.fetch(Method::GET, url, headers, None, limits).await
    }

    /// POST `body` of `content_type` to `url`.
    pub async fn post(
        &self,
        url: &str,
        content_type: &'static str,
        body: Vec<u8>,
        limits: Limits,
    ) -> Result<Bytes, FetchError> {
        self.fetch(Method::POST, url, &[], Some((content_type, body)), limits)
            .await
    }

    async fn fetch(
        &self,
        method: Method,
        url: &str,
        headers: &[(HeaderName, HeaderValue)],
        body: Option<(&'static str, Vec<u8>)>,
        limits: Limits,
    ) -> Result<Bytes, FetchError> {
        let uri = self.check_url(url)?;
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header(USER_AGENT, USER_AGENT_VALUE);
        for (name, value) in headers {
            request = request.header(name, value.clone());
        }
        let body = match body {
            Some((content_type, bytes)) => {
                request = request.header(CONTENT_TYPE, content_type);
                Full::new(Bytes::from(bytes))
            }
            None => Full::new(Bytes::new()),
        };
        let request = request
            .body(body)
            .map_err(|e| FetchError::InvalidUrl(format!("{url}: {e}")))?;
        match tokio::time::timeout(limits.total, self.exchange(request, limits.max_bytes)).await {
            Ok(result) => result,
            Err(_) => Err(FetchError::Timeout(limits.total)),
        }
    }

    async fn exchange(
        &self,
        request: Request<Full<Bytes>>,
        max_bytes: u64,
    ) -> Result<Bytes, FetchError> {
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| transport_error(&e))?;
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("(no Location)")
                .chars()
                .take(200)
                .collect();
            return Err(FetchError::Redirect {
                status: status.as_u16(),
                location,
            });
        }
        if status != StatusCode::OK {
            return Err(FetchError::Status(status.as_u16()));
        }
        // A declared length over the cap is refused before reading anything.
        let declared = response
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|len| len > max_bytes) {
            return Err(FetchError::TooLarge(max_bytes));
        }
        let cap = usize::try_from(max_bytes).unwrap_or(usize::MAX);
        match Limited::new(response.into_body(), cap).collect().await {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
                Err(FetchError::TooLarge(max_bytes))
            }
            Err(e) => Err(FetchError::Body(chain(e.as_ref()))),
        }
    }

    /// `http` or `https`, a host, and (for a literal IP address, which the connector does not
    /// resolve) an allowed destination.
    fn check_url(&self, url: &str) -> Result<Uri, FetchError> {
        let invalid = || FetchError::InvalidUrl(url.chars().take(200).collect());
        // The scheme is judged before parsing, so `file:///…` or `ldap:///…` (which are not
        // HTTP URIs at all) are named as what they are.
        let scheme = url.split_once(':').map(|(s, _)| s).ok_or_else(invalid)?;
        if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
            return Err(FetchError::Scheme(scheme.chars().take(20).collect()));
        }
        let uri: Uri = url.parse().map_err(|_| invalid())?;
        let host = uri
            .host()
            .ok_or_else(|| FetchError::InvalidUrl(url.chars().take(200).collect()))?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            check_address(bare, ip, self.allow).map_err(FetchError::Refused)?;
        }
        Ok(uri)
    }
}

fn empty_roots(provider: Arc<rustls::crypto::CryptoProvider>) -> rustls::ClientConfig {
    let builder = rustls::ClientConfig::builder_with_provider(provider);
    match builder.with_safe_default_protocol_versions() {
        Ok(b) => b
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth(),
        // The ring provider supports the default versions; this arm is not reached.
        Err(_) => rustls::ClientConfig::builder()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth(),
    }
}

/// A transport error with the refusal of the resolver, if that is what it was, in front.
fn transport_error(e: &hyper_util::client::legacy::Error) -> FetchError {
    let mut source: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(ResolveError::Refused(r)) = err.downcast_ref::<ResolveError>() {
            return FetchError::Refused(r.clone());
        }
        source = err.source();
    }
    // The client error's own text ("client error (Connect)") adds nothing to its source's.
    FetchError::Transport(match e.source() {
        Some(source) => chain(source),
        None => chain(e),
    })
}

/// An error and its sources, joined with ": ".
fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = source {
        let text = err.to_string();
        if !parts.last().is_some_and(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = err.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wall clock stepped while waiting for a refresh: forward past `NextUpdate`, the
    /// refresh comes within a minute of the step (not at the 6-hour interval's end); back an
    /// hour, it still comes at the interval's end; never before the 60-second floor.
    #[tokio::test(start_paused = true)]
    async fn a_stepped_wall_clock_moves_a_refresh_forward_but_never_delays_it() {
        use std::sync::{Arc, Mutex};
        let six_hours = Duration::from_secs(6 * 3600);
        let start = time::OffsetDateTime::now_utc();
        let next_update = start + time::Duration::hours(3);
        let waited = |step: time::Duration, after: Duration| {
            let wall = Arc::new(Mutex::new(start));
            let stepper = wall.clone();
            async move {
                let began = tokio::time::Instant::now();
                let stepped = tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    let mut w = stepper.lock().expect("clock");
                    *w += step;
                });
                wait_for_refresh(six_hours, Some(next_update), move || {
                    // The wall clock runs with tokio's, plus the step once it happened.
                    *wall.lock().expect("clock")
                        + time::Duration::try_from(began.elapsed()).expect("fits")
                })
                .await;
                stepped.abort();
                began.elapsed()
            }
        };
        // Steady: at NextUpdate (3 h), before the interval.
        let steady = waited(time::Duration::ZERO, six_hours).await;
        assert!(
            (Duration::from_secs(3 * 3600)..=Duration::from_secs(3 * 3600 + 60)).contains(&steady),
            "{steady:?}"
        );
        // A day forward after 10 minutes: within a minute of the step.
        let forward = waited(time::Duration::days(1), Duration::from_secs(600)).await;
        assert!(
            (Duration::from_secs(600)..=Duration::from_secs(660)).contains(&forward),
            "{forward:?}"
        );
        // A day forward at once: not before the 60-second floor.
        let at_once = waited(time::Duration::days(1), Duration::ZERO).await;
        assert_eq!(at_once, MIN_REFRESH_WAIT, "{at_once:?}");
        // An hour back after 10 minutes: NextUpdate is reached an hour later on the wall
        // clock, at 4 h, still within the interval.
        let back = waited(-time::Duration::hours(1), Duration::from_secs(600)).await;
        assert!(
            (Duration::from_secs(4 * 3600)..=Duration::from_secs(4 * 3600 + 60)).contains(&back),
            "{back:?}"
        );
        // Ten hours back: the interval ends the wait (6 h), not NextUpdate (13 h).
        let far_back = waited(-time::Duration::hours(10), Duration::from_secs(600)).await;
        assert_eq!(far_back, six_hours, "{far_back:?}");
    }

    fn class(s: &str) -> AddressClass {
        classify(s.parse().expect("address"))
    }

    #[test]
    fn special_purpose_addresses_are_classified_after_rfc_6890() {
        assert_eq!(class("8.8.8.8"), AddressClass::Public);
        assert_eq!(class("2a00:1450::1"), AddressClass::Public);
        assert_eq!(class("127.0.0.1"), AddressClass::Loopback);
        assert_eq!(class("::1"), AddressClass::Loopback);
        for private in [
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "fd00::1",
        ] {
            assert_eq!(class(private), AddressClass::Private, "{private}");
        }
        assert_eq!(class("172.32.0.1"), AddressClass::Public);
        assert_eq!(class("169.254.169.254"), AddressClass::LinkLocal);
        assert_eq!(class("fe80::1"), AddressClass::LinkLocal);
        assert_eq!(class("0.0.0.0"), AddressClass::Unspecified);
        assert_eq!(class("::"), AddressClass::Unspecified);
        assert_eq!(class("224.0.0.1"), AddressClass::Multicast);
        assert_eq!(class("192.0.2.7"), AddressClass::Reserved);
    }

    #[test]
    fn ipv4_embedded_in_ipv6_is_judged_as_the_ipv4_address() {
        assert_eq!(class("::ffff:127.0.0.1"), AddressClass::Loopback);
        assert_eq!(class("::ffff:10.0.0.1"), AddressClass::Private);
        assert_eq!(class("64:ff9b::a9fe:a9fe"), AddressClass::LinkLocal);
        assert_eq!(class("::ffff:8.8.8.8"), AddressClass::Public);
        // 6to4 of 127.0.0.1, 10.0.0.1 and 169.254.169.254; of 8.8.8.8 it is public.
        assert_eq!(class("2002:7f00:1::1"), AddressClass::Loopback);
        assert_eq!(class("2002:a00:1::"), AddressClass::Private);
        assert_eq!(class("2002:a9fe:a9fe::1"), AddressClass::LinkLocal);
        assert_eq!(class("2002:808:808::1"), AddressClass::Public);
        // Local-use NAT64 (RFC 8215) and the translated form (RFC 2765).
        assert_eq!(class("64:ff9b:1::7f00:1"), AddressClass::Loopback);
        assert_eq!(class("64:ff9b:1::a00:1"), AddressClass::Private);
        assert_eq!(class("::ffff:0:a9fe:a9fe"), AddressClass::LinkLocal);
        // Teredo, whatever client it hides (here 10.0.0.1 XORed): never a destination.
        assert_eq!(
            class("2001:0:4136:e378:8000:63bf:f5ff:fffe"),
            AddressClass::Reserved
        );
        assert_eq!(class("2001:db8::1"), AddressClass::Reserved);
    }

    #[test]
    fn each_policy_allows_what_it_names_and_nothing_more() {
        use AllowDestinations::*;
        assert!(allowed(Public, AddressClass::Public));
        assert!(!allowed(Public, AddressClass::Loopback));
        assert!(allowed(Loopback, AddressClass::Loopback));
        assert!(!allowed(Loopback, AddressClass::Private));
        assert!(allowed(Any, AddressClass::Private));
        assert!(allowed(Any, AddressClass::LinkLocal));
        assert!(!allowed(Any, AddressClass::Unspecified));
        assert!(!allowed(Any, AddressClass::Multicast));
    }
}
