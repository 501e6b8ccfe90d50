//! The `[api]` section of `gateway.toml`: the check endpoint's own settings, parsed by the
//! configuration into these types (the endpoint never reads the configuration itself).

use std::net::SocketAddr;
use std::num::NonZeroU32;

use serde::Deserialize;

use crate::server::{Cidr, TlsFiles};

/// The check endpoint's listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiConfig {
    pub listen: SocketAddr,
    /// Server certificate and key; plain HTTP when absent, which is allowed on loopback only
    /// unless `danger.plaintext_api` is set.
    #[serde(default)]
    pub tls: Option<TlsFiles>,
    /// API credentials; passwords stored as argon2 PHC strings
    /// (`psp-gateway credentials hash`).
    #[serde(default)]
    pub credentials: Vec<Credential>,
    /// Largest `eidas` header accepted. 16 KiB: a PSD2 certificate is 1.5–4 KB as DER, about
    /// 5.5 KB as Base64; URL-encoded PEM roughly doubles that.
    #[serde(default = "default_max_eidas_header_bytes")]
    pub max_eidas_header_bytes: usize,
    #[serde(default)]
    pub rate_limit: RateLimitConfig,
    /// Peers whose `X-Forwarded-For` is believed (load balancers).
    #[serde(default)]
    pub trusted_proxies: Vec<Cidr>,
    /// How long a check result may be served from the cache (never beyond the revocation
    /// evidence's validity).
    #[serde(default = "default_result_ttl_seconds")]
    pub result_ttl_seconds: u64,
    /// Most check results cached.
    #[serde(default = "default_result_cache_entries")]
    pub result_cache_entries: u64,
    /// Password verifications (argon2) running at once. Each one holds the hash's memory
    /// cost (19 MiB with the default parameters) for ~20 ms of CPU; a request over the cap
    /// waits up to 250 ms for a turn, then gets 503 `server_busy`.
    #[serde(default = "default_max_concurrent_password_checks")]
    pub max_concurrent_password_checks: usize,
    /// Failed logins counted per source address, per user name and source, and per user
    /// name (refused for the first two, slowed down for the third).
    #[serde(default)]
    pub failed_logins: FailedLoginConfig,
}

/// Two: 38 MiB of argon2 memory at most with the default parameters, and about 100
/// verifications a second on two cores, far more than callers need: a successful login is
/// remembered for 5 minutes, so only wrong or new credentials are verified.
fn default_max_concurrent_password_checks() -> usize {
    2
}

/// Failed logins counted per `period_seconds`, each count refilled evenly (issue 22):
/// - `per_source`: failed logins from one source address (any user names); past it, that
///   source gets 429 `login_attempts_exceeded` before any argon2 work;
/// - `per_user_and_source`: failed logins for one user name from one source address; past it,
///   that source gets 429 for that name, and other sources are unaffected;
/// - `per_user`: failed logins for one user name from all sources; past it, the name is under
///   attack: never refused (a stranger could lock the owner out), but attempts from sources
///   that failed for the name in the last period are slowed down (at most 2 at a time per
///   name, each wrong one answered after 2 s; beyond, 429 at once for that name and source).
///   A source that has not failed for the name (and has no attempt for it in flight) gets its
///   verification at once.
///
/// Only failures count: an attempt is counted before its verification (so a burst cannot
/// overrun a limit) and given back when the password is right. A remembered success (5
/// minutes) is not verified again. Defaults: 20, 10 and 20 per 300 s.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailedLoginConfig {
    #[serde(default = "default_failed_logins")]
    pub per_source: u32,
    /// Positive (a zero is refused when the configuration is read).
    #[serde(default = "default_failed_logins_per_user_and_source")]
    pub per_user_and_source: NonZeroU32,
    #[serde(default = "default_failed_logins")]
    pub per_user: u32,
    #[serde(default = "default_rate_period")]
    pub period_seconds: u64,
}

impl Default for FailedLoginConfig {
    fn default() -> Self {
        FailedLoginConfig {
            per_source: default_failed_logins(),
            per_user_and_source: default_failed_logins_per_user_and_source(),
            per_user: default_failed_logins(),
            period_seconds: default_rate_period(),
        }
    }
}

/// 20 per 5 minutes: a caller who mistyped a password retries a few times; a guesser gets
/// 5,760 tries a day per source address instead of 15,000 per 5 minutes.
fn default_failed_logins() -> u32 {
    20
}

/// 10 per 5 minutes: half a source's failures on one name, so a source that mistyped one
/// name's password ten times can still log in as another.
fn default_failed_logins_per_user_and_source() -> NonZeroU32 {
    NonZeroU32::new(10).unwrap_or(NonZeroU32::MIN)
}

fn default_max_eidas_header_bytes() -> usize {
    16 * 1024
}

fn default_result_ttl_seconds() -> u64 {
    300
}

/// 100,000 results of a few KB each: a few hundred MB at most, far more distinct
/// certificates than any bank sees in five minutes.
fn default_result_cache_entries() -> u64 {
    100_000
}

/// One API caller.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credential {
    pub username: String,
    /// Argon2 PHC string, for example `$argon2id$v=19$m=19456,t=2,p=1$…`.
    pub password_hash: String,
    /// What the caller may do beyond checks: `audit` allows the `at` query parameter (a
    /// check as of a past time).
    #[serde(default)]
    pub roles: Vec<Role>,
}

/// A role of an API caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// May ask for a check as of a past time (`at`).
    Audit,
}

/// Requests per source IP: `requests` per `period_seconds`. Default: the contract's 15,000 per
/// 5 minutes.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    #[serde(default = "default_rate_requests")]
    pub requests: u32,
    #[serde(default = "default_rate_period")]
    pub period_seconds: u64,
    /// IPv6 clients are counted per address block of this prefix length (1–128). 64: one
    /// subscriber usually holds at least a /64 (RFC 6177) and can use any address in it.
    /// Applies to the request quota and the per-source login quota.
    #[serde(default = "default_ipv6_prefix")]
    pub ipv6_prefix: u8,
    /// Keys remembered at most by each limiter table (request quota; failed logins per
    /// source, per user name and source, per user name). When full, the entries closest to full quota are forgotten
    /// (counted as evictions). 100,000 entries of ~50 bytes: a few MB.
    #[serde(default = "default_max_tracked_sources")]
    pub max_tracked_sources: usize,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig {
            requests: default_rate_requests(),
            period_seconds: default_rate_period(),
            ipv6_prefix: default_ipv6_prefix(),
            max_tracked_sources: default_max_tracked_sources(),
        }
    }
}

fn default_ipv6_prefix() -> u8 {
    64
}

fn default_max_tracked_sources() -> usize {
    100_000
}

fn default_rate_requests() -> u32 {
    15_000
}

fn default_rate_period() -> u64 {
    300
}
