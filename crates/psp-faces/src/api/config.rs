//! The `[api]` section of `gateway.toml`: the check endpoint's own settings, parsed by the
//! configuration into these types (the endpoint never reads the configuration itself).

use std::net::SocketAddr;
use std::num::NonZeroU32;

use serde::Deserialize;

use crate::server::{Cidr, TlsFiles};

/// `api.rate_limit`: requests per source address (IPv6 per address block), the contract's
/// 15,000 per 5 minutes by default. The same type as `gateway.rate_limit`; here every key has
/// a default. Its `max_tracked_sources` also sizes the failed-login tables.
pub use crate::server::limiter::RateLimitConfig;

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
    /// Moved to `[results] ttl_seconds` (the result cache is the check service's, which the
    /// gateway uses too): refused here, naming its new place, so that an old file does not
    /// silently lose its setting.
    #[serde(default, rename = "result_ttl_seconds", deserialize_with = "moved_ttl")]
    _result_ttl_seconds: (),
    /// Moved to `[results] cache_entries` (as `result_ttl_seconds`).
    #[serde(
        default,
        rename = "result_cache_entries",
        deserialize_with = "moved_entries"
    )]
    _result_cache_entries: (),
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

/// Refuses a key that moved out of `[api]`, naming where it is written now.
fn moved<'de, D: serde::Deserializer<'de>>(d: D, old: &str, new: &str) -> Result<(), D::Error> {
    serde::de::IgnoredAny::deserialize(d)?;
    Err(serde::de::Error::custom(format!(
        "api.{old} has moved: write it as `{new}` in the `[results]` section (the result cache serves the check endpoint and the gateway alike)"
    )))
}

fn moved_ttl<'de, D: serde::Deserializer<'de>>(d: D) -> Result<(), D::Error> {
    moved(d, "result_ttl_seconds", "ttl_seconds")
}

fn moved_entries<'de, D: serde::Deserializer<'de>>(d: D) -> Result<(), D::Error> {
    moved(d, "result_cache_entries", "cache_entries")
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

fn default_rate_period() -> u64 {
    300
}
