//! The UK FCA Financial Services Register API, looked up on demand for PSPs whose
//! authorisation number is `PSDGB-FCA-<FRN>`.
//!
//! ```text
//!  lookup(FRN) ─▶ fresh cache ──hit──────────────────────────────────────▶ Fresh
//!                  (moka, ttl)
//!                    │ miss or older than ttl (concurrent lookups of one FRN share one load)
//!                    ▼
//!                  load: 429 block? ─▶ token (governor, bounded wait) ─▶ GET Firm
//!                        ─▶ not found: NotFound
//!                        ─▶ GET Permissions?pgnp=1..n (≤ max_pages) ─▶ GET Passports?pgnp=1..n
//!                        ─▶ mapping tables ─▶ FcaAnswer ─▶ fresh cache + last-good cache
//!                    │ error
//!                    ▼
//!                  last-good cache, answer younger than max_stale? ─▶ Stale (with the error)
//!                    │ no, or the error is a configuration error
//!                    ▼
//!                  Err(FcaError): the caller fails closed
//! ```
//!
//! Every request carries `x-auth-email` and `x-auth-key`; the key is never logged nor shown by
//! `Debug`. Outcomes are read from the envelope's `Status` (`FSR-API-xx-yy-zz`), not from the
//! HTTP status, which is 200 for "not found" too. The reference for the behaviour and the
//! mapping tables is `docs/registers.md`, section "UK FCA register (on demand)".
//!
//! Freshness is judged by an [`FcaClock`] (the system clock unless a test passes a
//! [`ManualClock`]); moka's own time-to-live only bounds memory and is never shorter.

mod mapping;
mod wire;

#[cfg(test)]
mod tests;

pub use mapping::{
    CategoryRule, FIRM_STATUS, FirmStanding, PERMISSIONS, PSD_EMD_STATUS, PermissionMeaning,
    PsdStatusRow,
};
pub use wire::Endpoint;

use std::fmt;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use hyper::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use moka::future::Cache;

use super::config::FcaSettings;
use super::{AuthStatus, Category, CategoryEntry, Entity, ServiceSet};
use crate::cert::PsdAuthNumber;
use crate::fetch::{FetchError, Fetcher, Limits};
use wire::{StatusClass, WireError, clean};

/// The production API (FCA developer portal).
pub const DEFAULT_BASE_URL: &str = "https://register.fca.org.uk/services/V0.1";
/// The environment variable [`FcaCredentials::from_env`] reads the API e-mail from.
pub const ENV_EMAIL: &str = "PSP_GATEWAY_FCA_EMAIL";
/// The environment variable [`FcaCredentials::from_env`] reads the API key from.
pub const ENV_KEY: &str = "PSP_GATEWAY_FCA_KEY";

/// The auth number prefix of an FCA-registered PSP (ETSI TS 119 495: `PSD` + `GB` + `-` +
/// `FCA` + `-` + reference).
const FCA_PREFIX: &str = "PSDGB-FCA-";
/// FRNs are six or seven digits today; ten leaves room and keeps every FRN an `u64`.
const MAX_FRN_DIGITS: usize = 10;

/// The API's documented limit: 50 requests per 10 seconds per key, the key blocked for a
/// minute past it (brief for this adapter; the CyborgFinance/FCARegisterLaravel README says
/// about 10 per 10 s, hence configurable).
const DEFAULT_QUOTA: FcaQuota = FcaQuota {
    requests: 50,
    period: Duration::from_secs(10),
};
/// How long a lookup waits for a token before failing with "rate limit". 1 s: the lookup sits
/// in a PSP's request; with the default quota a token comes every 400 ms.
const DEFAULT_MAX_TOKEN_WAIT: Duration = Duration::from_secs(1);
/// One request (connect, answer, body). 5 s: the recorded answers are 0.1–12 KB.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// A whole lookup (all pages, token waits). 10 s: a bank needs 1 + 2–3 + 1 requests.
const DEFAULT_LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Body cap per answer. 1 MiB: the largest recorded answer (a permissions page of Barclays) is
/// 12 KB.
const DEFAULT_MAX_BODY_BYTES: u64 = 1024 * 1024;
/// Pages read per paginated endpoint. 10 pages of 20 = 200 activities; the recorded banks have
/// 38 and 42.
const DEFAULT_MAX_PAGES: u32 = 10;
/// An answer is used without asking again for 1 hour.
const DEFAULT_TTL: Duration = Duration::from_secs(3600);
/// An answer may stand in for an unreachable register up to 24 hours after it was read.
const DEFAULT_MAX_STALE: Duration = Duration::from_secs(24 * 3600);
/// FRNs held in each cache.
const DEFAULT_CACHE_CAPACITY: u64 = 10_000;
/// After an HTTP 429 no request is sent for this long: the API blocks the key for a minute.
const DEFAULT_UPSTREAM_BLOCK: Duration = Duration::from_secs(60);

/// A firm reference number: 1 to 10 ASCII digits, nothing else, so it can be put in a URL
/// path as it is.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Frn(String);

impl Frn {
    /// The FRN, when `s` is 1–10 ASCII digits (no sign, space, dot, slash or escape).
    pub fn parse(s: &str) -> Option<Frn> {
        (!s.is_empty() && s.len() <= MAX_FRN_DIGITS && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| Frn(s.to_owned()))
    }

    /// The FRN of an auth number whose NCA id is `GB-FCA` (compared as the register lookup
    /// compares NCA ids, case-insensitively).
    pub fn from_auth_number(auth: &PsdAuthNumber) -> Option<Frn> {
        if auth.nca_id() == "GB-FCA" {
            Frn::parse(&auth.reference)
        } else {
            None
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Frn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The FRN in an organizationIdentifier `PSDGB-FCA-<FRN>`, or `None` when the value is not
/// exactly that prefix followed by 1–10 ASCII digits. OBIE directory ids
/// (`PSDGB-OB-Unknown0015800001HQQrZAAX`) are not FCA register subjects.
pub fn frn_of(auth_number: &str) -> Option<&str> {
    let rest = auth_number.strip_prefix(FCA_PREFIX)?;
    Frn::parse(rest).map(|_| rest)
}

/// The API e-mail and key. `Debug` shows the e-mail and hides the key; there is no `Display`.
#[derive(Clone)]
pub struct FcaCredentials {
    email: String,
    key: String,
}

impl FcaCredentials {
    /// Both must be non-empty visible ASCII (they travel as header values).
    pub fn new(email: impl Into<String>, key: impl Into<String>) -> Result<Self, FcaConfigError> {
        let (email, key) = (email.into(), key.into());
        let fine = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic());
        if !fine(&email) {
            return Err(FcaConfigError::Credentials(
                "the FCA API e-mail is empty or not visible ASCII",
            ));
        }
        if !fine(&key) {
            return Err(FcaConfigError::Credentials(
                "the FCA API key is empty or not visible ASCII",
            ));
        }
        Ok(FcaCredentials { email, key })
    }

    /// From [`ENV_EMAIL`] and [`ENV_KEY`].
    pub fn from_env() -> Result<Self, FcaConfigError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// From [`ENV_EMAIL`] and [`ENV_KEY`] as `get` reads them (tests pass a map).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Self, FcaConfigError> {
        let email = get(ENV_EMAIL).ok_or(FcaConfigError::Credentials(
            "PSP_GATEWAY_FCA_EMAIL is not set",
        ))?;
        let key = get(ENV_KEY).ok_or(FcaConfigError::Credentials(
            "PSP_GATEWAY_FCA_KEY is not set",
        ))?;
        Self::new(email.trim(), key.trim())
    }

    pub fn email(&self) -> &str {
        &self.email
    }
}

impl fmt::Debug for FcaCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FcaCredentials")
            .field("email", &self.email)
            .field("key", &"<redacted>")
            .finish()
    }
}

/// At most `requests` requests in any window of `period`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FcaQuota {
    pub requests: u32,
    pub period: Duration,
}

/// Configuration of the adapter. [`FcaConfig::new`] sets the defaults.
#[derive(Clone, Debug)]
pub struct FcaConfig {
    /// `https://…` (plain `http` only to a loopback address, for tests: the key travels in a
    /// header).
    pub base_url: String,
    pub credentials: FcaCredentials,
    pub quota: FcaQuota,
    /// Longest wait for a token before a lookup fails with "rate limit".
    pub max_token_wait: Duration,
    pub request_timeout: Duration,
    pub lookup_timeout: Duration,
    pub max_body_bytes: u64,
    /// Pages read per paginated endpoint; a firm with more fails the lookup.
    pub max_pages: u32,
    /// How long an answer is used without asking again.
    pub ttl: Duration,
    /// How old (since it was read) an answer may be and still stand in, marked stale, when
    /// the register cannot be reached. At least `ttl`.
    pub max_stale: Duration,
    pub cache_capacity: u64,
    /// After an HTTP 429, no request for this long.
    pub upstream_block: Duration,
}

impl FcaConfig {
    /// The adapter's configuration from `[registers.fca]`: the e-mail from the section or
    /// the environment, the key from `key_file` (relative to `base_dir`) or the environment.
    pub fn from_settings(
        settings: &FcaSettings,
        base_dir: &std::path::Path,
    ) -> Result<FcaConfig, FcaSettingsError> {
        let email = match &settings.email {
            Some(e) => e.clone(),
            None => std::env::var(ENV_EMAIL).map_err(|_| FcaSettingsError::NoEmail)?,
        };
        let key = match &settings.key_file {
            Some(f) => {
                let path = base_dir.join(f);
                let text = std::fs::read_to_string(&path)
                    .map_err(|source| FcaSettingsError::KeyFile { path, source })?;
                text.trim().to_owned()
            }
            None => std::env::var(ENV_KEY).map_err(|_| FcaSettingsError::NoKey)?,
        };
        let credentials = FcaCredentials::new(email.trim(), key)?;
        let mut config = FcaConfig::new(credentials);
        if let Some(url) = &settings.base_url {
            config.base_url = url.clone();
        }
        if let Some(t) = settings.ttl_secs {
            config.ttl = Duration::from_secs(t);
        }
        if let Some(t) = settings.max_stale_secs {
            config.max_stale = Duration::from_secs(t);
        }
        if let Some(n) = settings.requests_per_10s {
            config.quota = FcaQuota {
                requests: n,
                period: Duration::from_secs(10),
            };
        }
        Ok(config)
    }

    pub fn new(credentials: FcaCredentials) -> Self {
        FcaConfig {
            base_url: DEFAULT_BASE_URL.to_owned(),
            credentials,
            quota: DEFAULT_QUOTA,
            max_token_wait: DEFAULT_MAX_TOKEN_WAIT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            lookup_timeout: DEFAULT_LOOKUP_TIMEOUT,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_pages: DEFAULT_MAX_PAGES,
            ttl: DEFAULT_TTL,
            max_stale: DEFAULT_MAX_STALE,
            cache_capacity: DEFAULT_CACHE_CAPACITY,
            upstream_block: DEFAULT_UPSTREAM_BLOCK,
        }
    }

    /// The base URL without a trailing `/`, after the checks of [`FcaConfig::base_url`].
    fn checked_base(&self) -> Result<String, FcaConfigError> {
        let bad = |why: &'static str| FcaConfigError::BaseUrl {
            url: clean(&self.base_url, 100),
            why,
        };
        let base = self.base_url.trim_end_matches('/');
        let uri: hyper::Uri = base.parse().map_err(|_| bad("not a URL"))?;
        let host = uri.host().ok_or_else(|| bad("no host"))?;
        if uri.query().is_some() {
            return Err(bad("has a query"));
        }
        match uri.scheme_str() {
            Some("https") => {}
            Some("http") => {
                let bare = host.trim_start_matches('[').trim_end_matches(']');
                let loopback =
                    bare == "localhost" || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
                if !loopback {
                    return Err(bad(
                        "plain http would send the API key in clear; use https (http is \
                         accepted for loopback test servers only)",
                    ));
                }
            }
            _ => return Err(bad("scheme is not https")),
        }
        Ok(base.to_owned())
    }

    fn check(&self) -> Result<(), FcaConfigError> {
        let zero = |what: &'static str, d: Duration| {
            if d.is_zero() {
                Err(FcaConfigError::Value(what))
            } else {
                Ok(())
            }
        };
        if self.quota.requests == 0 {
            return Err(FcaConfigError::Value("quota.requests must be at least 1"));
        }
        zero("quota.period must not be zero", self.quota.period)?;
        zero("request_timeout must not be zero", self.request_timeout)?;
        zero("lookup_timeout must not be zero", self.lookup_timeout)?;
        zero("ttl must not be zero", self.ttl)?;
        if self.max_stale < self.ttl {
            return Err(FcaConfigError::Value("max_stale must be at least ttl"));
        }
        if self.max_pages == 0 {
            return Err(FcaConfigError::Value("max_pages must be at least 1"));
        }
        if self.max_body_bytes == 0 || self.cache_capacity == 0 {
            return Err(FcaConfigError::Value(
                "max_body_bytes and cache_capacity must be at least 1",
            ));
        }
        Ok(())
    }
}

/// A configuration the adapter refuses. The text never holds the API key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FcaConfigError {
    #[error("FCA register credentials: {0}")]
    Credentials(&'static str),
    #[error("FCA register base URL `{url}`: {why}")]
    BaseUrl { url: String, why: &'static str },
    #[error("FCA register configuration: {0}")]
    Value(&'static str),
}

/// Why `[registers.fca]` gives no adapter configuration ([`FcaConfig::from_settings`]).
#[derive(Debug, thiserror::Error)]
pub enum FcaSettingsError {
    #[error("[registers.fca] email is not set, nor is {ENV_EMAIL}")]
    NoEmail,
    #[error("[registers.fca] key_file is not set, nor is {ENV_KEY}")]
    NoKey,
    #[error("[registers.fca] key_file {}: {source}", path.display())]
    KeyFile {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("[registers.fca] {0}")]
    Credentials(#[from] FcaConfigError),
}

/// Which limit stopped a lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RateLimit {
    /// The client-side token bucket had no token within `max_token_wait`; the next one comes
    /// after `wait`.
    Local { wait: Duration },
    /// The API answered HTTP 429.
    Upstream,
    /// A 429 was answered less than `upstream_block` ago; no request is sent for `remaining`.
    Blocked { remaining: Duration },
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateLimit::Local { wait } => write!(
                f,
                "no request token within the wait budget (next in {} ms)",
                wait.as_millis()
            ),
            RateLimit::Upstream => f.write_str("the FCA register answered HTTP 429"),
            RateLimit::Blocked { remaining } => write!(
                f,
                "the FCA register answered HTTP 429; no request for another {} s",
                remaining.as_secs()
            ),
        }
    }
}

/// Why a lookup gave no answer. The text never holds the API key; text from the network is
/// shortened and stripped of control characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FcaError {
    #[error("`{0}` is not an FCA firm reference number (1 to 10 ASCII digits)")]
    InvalidFrn(String),
    #[error(
        "the FCA register refused the API credentials ({status}: {message}); this is a \
         configuration error: set a valid FCA register e-mail and key (PSP_GATEWAY_FCA_EMAIL, \
         PSP_GATEWAY_FCA_KEY)"
    )]
    Unauthorised { status: String, message: String },
    #[error("FCA register rate limit: {0}")]
    RateLimited(RateLimit),
    #[error("FCA register {endpoint}: {source}")]
    Fetch {
        endpoint: Endpoint,
        source: FetchError,
    },
    #[error("FCA register {endpoint}: the answer is not JSON: {detail}")]
    Malformed { endpoint: Endpoint, detail: String },
    #[error("FCA register {endpoint}: unexpected answer: {detail}")]
    Shape { endpoint: Endpoint, detail: String },
    #[error("FCA register {endpoint}: status {status} ({message})")]
    Status {
        endpoint: Endpoint,
        status: String,
        message: String,
    },
    #[error("FCA register {endpoint}: {pages} pages, more than the {cap} read")]
    TooManyPages {
        endpoint: Endpoint,
        pages: u64,
        cap: u32,
    },
    #[error("the FCA register lookup took longer than {} ms", .0.as_millis())]
    Timeout(Duration),
}

impl FcaError {
    /// Whether a cached answer may stand in: yes when the register could not be reached or
    /// answered badly; no for a bad FRN or refused credentials (a configuration error must
    /// show, not hide behind old answers).
    pub fn allows_stale(&self) -> bool {
        !matches!(
            self,
            FcaError::InvalidFrn(_) | FcaError::Unauthorised { .. }
        )
    }

    fn wire(endpoint: Endpoint, e: WireError) -> FcaError {
        match e {
            WireError::Malformed(detail) => FcaError::Malformed {
                endpoint,
                detail: clean(&detail, 200),
            },
            WireError::Shape(detail) => FcaError::Shape { endpoint, detail },
        }
    }
}

/// The time source for freshness.
pub trait FcaClock: Send + Sync + 'static {
    fn now(&self) -> Instant;
}

/// [`Instant::now`].
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl FcaClock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that moves only when told to (tests, simulations).
#[derive(Debug)]
pub struct ManualClock {
    start: Instant,
    offset: Mutex<Duration>,
}

impl ManualClock {
    pub fn new() -> Self {
        ManualClock {
            start: Instant::now(),
            offset: Mutex::new(Duration::ZERO),
        }
    }

    pub fn advance(&self, by: Duration) {
        let mut offset = self.offset.lock().unwrap_or_else(PoisonError::into_inner);
        *offset += by;
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl FcaClock for ManualClock {
    fn now(&self) -> Instant {
        self.start + *self.offset.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The contract's category and status of a firm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PsdStanding {
    pub category: Category,
    pub status: AuthStatus,
}

/// Which way a passport goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassportDirection {
    Out,
    In,
    Other,
}

/// A passport as the register lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FcaPassport {
    /// As published (`GIBRALTAR`).
    pub country: String,
    pub direction: PassportDirection,
    /// As published (`Passporting Out`).
    pub direction_text: String,
}

/// A firm in the register, mapped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FcaFirm {
    pub frn: String,
    /// `Organisation Name`.
    pub name: String,
    /// The firm `Status` as published.
    pub firm_status: String,
    /// `PSD / EMD Status` as published (often `""`).
    pub psd_emd_status: String,
    /// The category and status; `None` when the firm is not a payment service provider in the
    /// register, or its status is not in the mapping table (see `notes`).
    pub standing: Option<PsdStanding>,
    /// PSD2 Annex I services from the permissions (all eight for a credit institution); empty
    /// when `standing` is `None`.
    pub services: ServiceSet,
    /// The firm may issue electronic money.
    pub e_money: bool,
    /// Every activity name read, sorted.
    pub permissions: Vec<String>,
    /// The activity names no row of [`PERMISSIONS`] maps (ignored, reported).
    pub unmapped_permissions: Vec<String>,
    pub passports: Vec<FcaPassport>,
    /// What the mapping could not place, for the audit log.
    pub notes: Vec<String>,
}

impl FcaFirm {
    /// The home register's category entry, when the firm has a standing. No `passportOut`:
    /// the services per country would need `/Passports/{Country}/Permission`, which is not
    /// read (docs/registers.md).
    pub fn category_entry(&self) -> Option<CategoryEntry> {
        self.standing.as_ref().map(|s| CategoryEntry {
            category: s.category.clone(),
            legal_name: self.name.clone(),
            status: s.status,
            services: self.services,
            e_money: self.e_money,
            passport_out: None,
        })
    }

    /// The register entity: reference = FRN, one category entry or none.
    pub fn to_entity(&self) -> Entity {
        Entity {
            reference: self.frn.clone(),
            entries: self.category_entry().into_iter().collect(),
        }
    }
}

/// What the register says about an FRN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FcaAnswer {
    /// Boxed: a firm is ten times the size of the other variant.
    Found(Box<FcaFirm>),
    /// No firm with this FRN (`FSR-API-02-01-11` or `-21`): a definite answer.
    NotFound { frn: String },
}

impl FcaAnswer {
    pub fn firm(&self) -> Option<&FcaFirm> {
        match self {
            FcaAnswer::Found(f) => Some(f),
            FcaAnswer::NotFound { .. } => None,
        }
    }

    /// The entity, `None` when the FRN is not in the register.
    pub fn to_entity(&self) -> Option<Entity> {
        self.firm().map(FcaFirm::to_entity)
    }
}

/// Whether an answer is current.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Freshness {
    /// Read less than `ttl` ago.
    Fresh,
    /// Older than `ttl`, younger than `max_stale`, served because a new lookup failed with
    /// `error`.
    Stale { error: FcaError },
}

/// A lookup's result.
#[derive(Clone, Debug)]
pub struct FcaLookup {
    pub answer: Arc<FcaAnswer>,
    /// Since the answer was read from the register.
    pub age: Duration,
    pub freshness: Freshness,
}

impl FcaLookup {
    pub fn is_stale(&self) -> bool {
        matches!(self.freshness, Freshness::Stale { .. })
    }

    /// For a stale answer, the warning the caller puts in the home-register block.
    pub fn warning(&self) -> Option<String> {
        match &self.freshness {
            Freshness::Fresh => None,
            Freshness::Stale { error } => Some(format!(
                "The FCA register could not be consulted ({error}); this answer was read {} s \
                 ago.",
                self.age.as_secs()
            )),
        }
    }
}

struct Stored {
    answer: Arc<FcaAnswer>,
    fetched_at: Instant,
}

/// The on-demand FCA register client: token bucket, cache, stale answers. Cheap to clone.
#[derive(Clone)]
pub struct FcaRegister {
    inner: Arc<Inner>,
}

struct Inner {
    base: String,
    config: FcaConfig,
    headers: Vec<(HeaderName, HeaderValue)>,
    fetcher: Fetcher,
    limiter: DefaultDirectRateLimiter,
    limiter_clock: DefaultClock,
    clock: Arc<dyn FcaClock>,
    fresh: Cache<String, Arc<Stored>>,
    last_good: Cache<String, Arc<Stored>>,
    blocked_until: Mutex<Option<Instant>>,
    requests: AtomicU64,
}

impl fmt::Debug for FcaRegister {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.inner.config;
        f.debug_struct("FcaRegister")
            .field("base", &self.inner.base)
            .field("credentials", &c.credentials)
            .field("quota", &c.quota)
            .field("ttl", &c.ttl)
            .field("max_stale", &c.max_stale)
            .finish_non_exhaustive()
    }
}

/// The GCRA quota that never lets more than `q.requests` through in any window of `q.period`:
/// a burst `b` followed by one cell every `T` admits at most `b + ⌊P / T⌋` in a window of
/// length `P`. With `b = ⌈N / 2⌉` and `T = P / (N − b)` that is `N`; with `N = 1`, `T` is just
/// over `P`. A quota of `N` cells with `T = P / N` (governor's `per_second` shape) would admit
/// `2N − 1`.
pub fn gcra_quota(q: FcaQuota) -> Quota {
    let n = q.requests.max(1);
    let burst = n.div_ceil(2);
    let refill = n - burst;
    let period = q.period.max(Duration::from_millis(1));
    let interval = if refill == 0 {
        period + Duration::from_millis(1)
    } else {
        period / refill
    };
    let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
    Quota::with_period(interval.max(Duration::from_nanos(1)))
        .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
        .allow_burst(burst)
}

impl FcaRegister {
    /// The client over `fetcher` (whose destination policy applies) with the system clock.
    pub fn new(config: FcaConfig, fetcher: Fetcher) -> Result<Self, FcaConfigError> {
        Self::with_clock(config, fetcher, Arc::new(SystemClock))
    }

    pub fn with_clock(
        config: FcaConfig,
        fetcher: Fetcher,
        clock: Arc<dyn FcaClock>,
    ) -> Result<Self, FcaConfigError> {
        config.check()?;
        let base = config.checked_base()?;
        let header = |v: &str| {
            HeaderValue::from_str(v)
                .map_err(|_| FcaConfigError::Credentials("not a valid header value"))
        };
        let mut key = header(&config.credentials.key)?;
        key.set_sensitive(true);
        let mut email = header(&config.credentials.email)?;
        email.set_sensitive(true);
        let json = HeaderValue::from_static("application/json");
        let headers = vec![
            (HeaderName::from_static("x-auth-email"), email),
            (HeaderName::from_static("x-auth-key"), key),
            (ACCEPT, json.clone()),
            // The FCA's examples send it on GET too.
            (CONTENT_TYPE, json),
        ];
        let limiter_clock = DefaultClock::default();
        let limiter =
            RateLimiter::direct_with_clock(gcra_quota(config.quota), limiter_clock.clone());
        let fresh = Cache::builder()
            .max_capacity(config.cache_capacity)
            .time_to_live(config.ttl)
            .build();
        let last_good = Cache::builder()
            .max_capacity(config.cache_capacity)
            .time_to_live(config.max_stale)
            .build();
        Ok(FcaRegister {
            inner: Arc::new(Inner {
                base,
                config,
                headers,
                fetcher,
                limiter,
                limiter_clock,
                clock,
                fresh,
                last_good,
                blocked_until: Mutex::new(None),
                requests: AtomicU64::new(0),
            }),
        })
    }

    /// Requests sent so far (for metrics).
    pub fn requests_sent(&self) -> u64 {
        self.inner.requests.load(Ordering::Relaxed)
    }

    /// [`FcaRegister::lookup`] for a reference as read from a certificate; a reference that is
    /// not an FRN fails before any request.
    pub async fn lookup_reference(&self, reference: &str) -> Result<FcaLookup, FcaError> {
        match Frn::parse(reference) {
            Some(frn) => self.lookup(&frn).await,
            None => Err(FcaError::InvalidFrn(
                reference
                    .chars()
                    .take(40)
                    .flat_map(char::escape_debug)
                    .collect(),
            )),
        }
    }

    /// The register's answer for `frn`: from the cache when younger than `ttl`, else from the
    /// API (concurrent lookups of one FRN share one load), else a cached answer younger than
    /// `max_stale`, marked stale, else the error.
    pub async fn lookup(&self, frn: &Frn) -> Result<FcaLookup, FcaError> {
        let inner = &self.inner;
        let key = frn.as_str().to_owned();
        if let Some(stored) = inner.fresh.get(&key).await {
            let age = inner.age(&stored);
            if age < inner.config.ttl {
                return Ok(FcaLookup {
                    answer: stored.answer.clone(),
                    age,
                    freshness: Freshness::Fresh,
                });
            }
            // Expired by the register's clock (moka's own clock may not have caught up).
            inner.fresh.invalidate(&key).await;
        }
        match inner.fresh.try_get_with(key.clone(), inner.load(frn)).await {
            Ok(stored) => Ok(FcaLookup {
                answer: stored.answer.clone(),
                age: inner.age(&stored),
                freshness: Freshness::Fresh,
            }),
            Err(error) => {
                let error = FcaError::clone(&error);
                if error.allows_stale()
                    && let Some(stored) = inner.last_good.get(&key).await
                {
                    let age = inner.age(&stored);
                    if age <= inner.config.max_stale {
                        tracing::warn!(
                            frn = frn.as_str(),
                            age_s = age.as_secs(),
                            error = %error,
                            "FCA register lookup failed: serving a stale answer"
                        );
                        return Ok(FcaLookup {
                            answer: stored.answer.clone(),
                            age,
                            freshness: Freshness::Stale { error },
                        });
                    }
                }
                tracing::warn!(frn = frn.as_str(), error = %error, "FCA register lookup failed");
                Err(error)
            }
        }
    }
}

impl Inner {
    fn age(&self, stored: &Stored) -> Duration {
        self.clock
            .now()
            .saturating_duration_since(stored.fetched_at)
    }

    /// One load from the API, bounded by `lookup_timeout`; a success goes to the last-good
    /// cache too.
    async fn load(&self, frn: &Frn) -> Result<Arc<Stored>, FcaError> {
        let answer = tokio::time::timeout(self.config.lookup_timeout, self.fetch_answer(frn))
            .await
            .map_err(|_| FcaError::Timeout(self.config.lookup_timeout))??;
        let stored = Arc::new(Stored {
            answer: Arc::new(answer),
            fetched_at: self.clock.now(),
        });
        self.last_good
            .insert(frn.as_str().to_owned(), stored.clone())
            .await;
        Ok(stored)
    }

    async fn fetch_answer(&self, frn: &Frn) -> Result<FcaAnswer, FcaError> {
        let firm = self.request(frn, Endpoint::Firm, None).await?;
        let record = match self.classify(Endpoint::Firm, &firm)? {
            StatusClass::Ok => {
                wire::firm_record(&firm.data).map_err(|e| FcaError::wire(Endpoint::Firm, e))?
            }
            StatusClass::FirmNotFound => {
                return Ok(FcaAnswer::NotFound {
                    frn: frn.as_str().to_owned(),
                });
            }
            _ => return Err(status_error(Endpoint::Firm, &firm)),
        };
        // The record must be the one asked for (numerically: the API may drop leading zeros).
        if record.frn.trim_start_matches('0') != frn.as_str().trim_start_matches('0') {
            return Err(FcaError::Shape {
                endpoint: Endpoint::Firm,
                detail: format!("asked for FRN {frn}, the record is FRN {:?}", record.frn),
            });
        }
        let mut permissions = Vec::new();
        for data in self.pages(frn, Endpoint::Permissions).await? {
            permissions.extend(
                wire::permission_names(&data)
                    .map_err(|e| FcaError::wire(Endpoint::Permissions, e))?,
            );
        }
        let mut passports = Vec::new();
        for data in self.pages(frn, Endpoint::Passports).await? {
            passports.extend(
                wire::passport_records(&data)
                    .map_err(|e| FcaError::wire(Endpoint::Passports, e))?,
            );
        }
        Ok(FcaAnswer::Found(Box::new(mapping::map_firm(
            record,
            permissions,
            passports,
        ))))
    }

    /// The `Data` of every page of a paginated endpoint; none when the first page says "no
    /// record". More pages are read while `ResultInfo` has `Next` or the page is below
    /// `total_count / per_page`; more than `max_pages` pages fail the lookup rather than give
    /// a partial list.
    async fn pages(
        &self,
        frn: &Frn,
        endpoint: Endpoint,
    ) -> Result<Vec<serde_json::Value>, FcaError> {
        let cap = self.config.max_pages;
        let mut out = Vec::new();
        let mut page: u32 = 1;
        loop {
            let envelope = self.request(frn, endpoint, Some(page)).await?;
            match self.classify(endpoint, &envelope)? {
                StatusClass::Ok => {}
                StatusClass::NoRecords if page == 1 => return Ok(out),
                _ => return Err(status_error(endpoint, &envelope)),
            }
            let shape = |detail: String| FcaError::Shape { endpoint, detail };
            let info = envelope
                .page
                .ok_or_else(|| shape("no `ResultInfo` on a paginated answer".into()))?;
            if info.page != u64::from(page) {
                return Err(shape(format!(
                    "asked for page {page}, the answer is page {}",
                    info.page
                )));
            }
            let pages = info.total_pages();
            if pages > u64::from(cap) {
                return Err(FcaError::TooManyPages {
                    endpoint,
                    pages,
                    cap,
                });
            }
            out.push(envelope.data);
            let more = info.has_next || u64::from(page) < pages;
            if !more {
                return Ok(out);
            }
            if page >= cap {
                return Err(FcaError::TooManyPages {
                    endpoint,
                    pages: pages.max(u64::from(page) + 1),
                    cap,
                });
            }
            page += 1;
        }
    }

    /// The status class, or the error for refused credentials and unknown codes.
    fn classify(
        &self,
        endpoint: Endpoint,
        envelope: &wire::Envelope,
    ) -> Result<StatusClass, FcaError> {
        match wire::classify(endpoint, &envelope.status) {
            Some(StatusClass::Unauthorised) => {
                tracing::error!(
                    status = %envelope.status,
                    "the FCA register refused the API credentials: check the configured e-mail and key"
                );
                Err(FcaError::Unauthorised {
                    status: envelope.status.clone(),
                    message: envelope.message.clone(),
                })
            }
            Some(class) => Ok(class),
            None => Err(status_error(endpoint, envelope)),
        }
    }

    /// One GET: the 429 block, a token, the request, the envelope.
    async fn request(
        &self,
        frn: &Frn,
        endpoint: Endpoint,
        page: Option<u32>,
    ) -> Result<wire::Envelope, FcaError> {
        self.check_block()?;
        self.take_token().await?;
        let url = match (endpoint, page) {
            (Endpoint::Firm, _) => format!("{}/Firm/{frn}", self.base),
            (Endpoint::Permissions, p) => {
                format!(
                    "{}/Firm/{frn}/Permissions?pgnp={}",
                    self.base,
                    p.unwrap_or(1)
                )
            }
            (Endpoint::Passports, p) => {
                format!("{}/Firm/{frn}/Passports?pgnp={}", self.base, p.unwrap_or(1))
            }
        };
        self.requests.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            frn = frn.as_str(),
            endpoint = endpoint.as_str(),
            page,
            "FCA register request"
        );
        let limits = Limits {
            total: self.config.request_timeout,
            max_bytes: self.config.max_body_bytes,
        };
        let body = self
            .fetcher
            .get_with_headers(&url, &self.headers, limits)
            .await
            .map_err(|source| match source {
                FetchError::Status(429) => {
                    self.block();
                    FcaError::RateLimited(RateLimit::Upstream)
                }
                source => FcaError::Fetch { endpoint, source },
            })?;
        wire::parse_envelope(&body).map_err(|e| FcaError::wire(endpoint, e))
    }

    fn check_block(&self) -> Result<(), FcaError> {
        let until = *self
            .blocked_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match until {
            Some(until) => {
                let now = self.clock.now();
                if now < until {
                    Err(FcaError::RateLimited(RateLimit::Blocked {
                        remaining: until - now,
                    }))
                } else {
                    Ok(())
                }
            }
            None => Ok(()),
        }
    }

    fn block(&self) {
        let until = self.clock.now() + self.config.upstream_block;
        tracing::warn!(
            block_s = self.config.upstream_block.as_secs(),
            "the FCA register answered HTTP 429: no request until the block ends"
        );
        *self
            .blocked_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(until);
    }

    /// Waits for a token up to `max_token_wait`; fails at once when the next token is
    /// further away than that.
    async fn take_token(&self) -> Result<(), FcaError> {
        let deadline = tokio::time::Instant::now() + self.config.max_token_wait;
        loop {
            match self.limiter.check() {
                Ok(()) => return Ok(()),
                Err(not_until) => {
                    let wait = not_until.wait_time_from(self.limiter_clock.now());
                    if tokio::time::Instant::now() + wait > deadline {
                        return Err(FcaError::RateLimited(RateLimit::Local { wait }));
                    }
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }
}

/// Decodes an FCA API answer as the adapter does: the envelope, its status class for each
/// endpoint, and the firm, permission and passport records its data may carry. For the fuzz
/// target (`fuzz/`); returns how many of the record decoders accepted the data.
#[doc(hidden)]
pub fn decode_answer_for_fuzzing(body: &[u8]) -> usize {
    let Ok(envelope) = wire::parse_envelope(body) else {
        return 0;
    };
    for endpoint in [Endpoint::Firm, Endpoint::Permissions, Endpoint::Passports] {
        let _ = wire::classify(endpoint, &envelope.status);
        let _ = status_error(endpoint, &envelope);
    }
    let _ = envelope.page.map(|p| p.total_pages());
    usize::from(wire::firm_record(&envelope.data).is_ok())
        + usize::from(wire::permission_names(&envelope.data).is_ok())
        + usize::from(wire::passport_records(&envelope.data).is_ok())
}

fn status_error(endpoint: Endpoint, envelope: &wire::Envelope) -> FcaError {
    FcaError::Status {
        endpoint,
        status: envelope.status.clone(),
        message: envelope.message.clone(),
    }
}
