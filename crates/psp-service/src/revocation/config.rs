//! `[revocation]` in `gateway.toml`: every limit of the CRL and OCSP edge, with its default.
//!
//! All fields are optional; an empty table gives the defaults below, which fail closed and
//! are meant for production. Durations are whole milliseconds (`*_ms`) or seconds (`*_secs`),
//! sizes whole bytes: plain integers keep `config check` messages exact and need no parser.
//!
//! ```toml
//! [revocation]
//! connect_timeout_ms = 2000
//! ocsp_timeout_ms = 3000
//! crl_timeout_ms = 15000
//! ocsp_max_response_bytes = 65536
//! crl_max_bytes = 33554432
//! clock_skew_secs = 300
//! crl_grace_secs = 3600
//! crl_refresh_interval_secs = 3600
//! ocsp_default_ttl_secs = 3600
//! ocsp_max_ttl_secs = 3600
//! failure_ttl_secs = 30
//! ocsp_cache_entries = 100000
//! crl_cache_max_bytes = 268435456
//! ocsp_nonce = false
//! allow_destinations = "public"   # or "loopback" (the sandbox), or "any"
//! ```

use std::time::Duration;

use serde::Deserialize;

pub use crate::fetch::AllowDestinations;
pub use psp_check::revocation::crl::DEFAULT_CRL_GRACE;
use psp_check::revocation::ocsp::OcspPolicy;
pub use psp_check::revocation::ocsp::{DEFAULT_CLOCK_SKEW, DEFAULT_OCSP_TTL};

/// TCP connect timeout. Two seconds is about ten round trips across Europe and what docs/stack.md
/// budgets for every outbound connection; a responder that cannot complete a handshake in
/// that time will not answer within the request either.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Whole OCSP exchange (connect, request, response body). OCSP answers are small (RFC 6960
/// responses are a few KiB); three seconds bounds the latency a slow responder adds to a
/// request, which waits for it (docs/design.md section 3: both methods are consulted).
pub const DEFAULT_OCSP_TIMEOUT: Duration = Duration::from_secs(3);
/// Whole CRL download. The largest CRLs of public QTSPs are 10 to 20 MiB; fifteen seconds
/// is that size at about 10 Mbit/s.
pub const DEFAULT_CRL_TIMEOUT: Duration = Duration::from_secs(15);
/// OCSP response body cap. A BasicOCSPResponse with a delegated responder certificate and
/// its chain is 2 to 6 KiB; 64 KiB leaves room for long chains (docs/design.md section 6).
pub const DEFAULT_OCSP_MAX_RESPONSE_BYTES: u64 = 64 * 1024;
/// CRL body cap (docs/design.md section 6). Twice the largest public CRLs we know of (about
/// 15 MiB), so growth does not break us, while a hostile server cannot make us hold more.
pub const DEFAULT_CRL_MAX_BYTES: u64 = 32 * 1024 * 1024;
/// A cached CRL is downloaded again after this long even when its `nextUpdate` is further
/// away: CAs publish new CRLs (with new revocations) long before the old one's `nextUpdate`
/// (often daily, with a validity of a week), and one hour bounds how late we see them.
pub const DEFAULT_CRL_REFRESH_INTERVAL: Duration = Duration::from_secs(60 * 60);
/// An OCSP answer is reused for at most this long, even when its `nextUpdate` is later
/// (responders commonly sign for seven days): a revocation the responder knows reaches us
/// within the hour.
pub const DEFAULT_OCSP_MAX_TTL: Duration = Duration::from_secs(60 * 60);
/// A method that could not complete is remembered this long, so a responder that is down
/// costs one timeout per certificate per 30 seconds rather than one per request. The answer
/// stays "could not complete" (fail closed) meanwhile.
pub const DEFAULT_FAILURE_TTL: Duration = Duration::from_secs(30);
/// OCSP answers kept: one per (issuer, serial); 100,000 is more PSPs than exist in the EEA
/// (about 10,000 in the EBA register) and a few tens of MiB at most.
pub const DEFAULT_OCSP_CACHE_ENTRIES: u64 = 100_000;
/// Memory for indexed CRLs, in bytes of index (about 60 bytes per entry): 256 MiB holds
/// several of the largest public CRLs at once.
pub const DEFAULT_CRL_CACHE_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// Revocation downloads in flight at once, OCSP and CRL together: 32. Each is one outbound
/// connection and, for a CRL, up to `crl_max_bytes` of body; concurrent misses for one key
/// already share a download, so this bounds distinct keys (a burst of new certificates, or
/// certificates naming many distribution points). A cache miss waits for a slot at most its
/// method's timeout, then fails closed, uncached.
pub const DEFAULT_MAX_FETCHES_IN_FLIGHT: u64 = 32;
/// Upper bound of `max_fetches_in_flight`: one replica has no use for more connections out.
const MAX_FETCHES_IN_FLIGHT: u64 = 4096;

/// The `[revocation]` table. Every field is optional; see the constants above for the
/// defaults and where they come from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RevocationConfig {
    /// TCP connect timeout for CRL and OCSP fetches ([`DEFAULT_CONNECT_TIMEOUT`]).
    pub connect_timeout_ms: u64,
    /// Whole OCSP exchange ([`DEFAULT_OCSP_TIMEOUT`]).
    pub ocsp_timeout_ms: u64,
    /// Whole CRL download ([`DEFAULT_CRL_TIMEOUT`]).
    pub crl_timeout_ms: u64,
    /// OCSP response body cap ([`DEFAULT_OCSP_MAX_RESPONSE_BYTES`]).
    pub ocsp_max_response_bytes: u64,
    /// CRL body cap ([`DEFAULT_CRL_MAX_BYTES`]).
    pub crl_max_bytes: u64,
    /// Clock skew tolerance ([`DEFAULT_CLOCK_SKEW`]).
    pub clock_skew_secs: u64,
    /// Use of a CRL after its `nextUpdate` ([`DEFAULT_CRL_GRACE`]).
    pub crl_grace_secs: u64,
    /// Background re-download of a cached CRL ([`DEFAULT_CRL_REFRESH_INTERVAL`]).
    pub crl_refresh_interval_secs: u64,
    /// Validity of an OCSP response without `nextUpdate` ([`DEFAULT_OCSP_TTL`]).
    pub ocsp_default_ttl_secs: u64,
    /// Longest reuse of an OCSP answer ([`DEFAULT_OCSP_MAX_TTL`]).
    pub ocsp_max_ttl_secs: u64,
    /// How long a failed method is remembered ([`DEFAULT_FAILURE_TTL`]); 0 disables it.
    pub failure_ttl_secs: u64,
    /// OCSP answers kept ([`DEFAULT_OCSP_CACHE_ENTRIES`]).
    pub ocsp_cache_entries: u64,
    /// Memory for indexed CRLs ([`DEFAULT_CRL_CACHE_MAX_BYTES`]).
    pub crl_cache_max_bytes: u64,
    /// Downloads in flight at once ([`DEFAULT_MAX_FETCHES_IN_FLIGHT`]).
    pub max_fetches_in_flight: u64,
    /// Send a random nonce (RFC 8954) with OCSP requests and require a response that carries
    /// one to echo it. Off by default: most large responders serve pre-signed responses and
    /// ignore nonces, and answers are cached anyway; a response without a nonce is accepted
    /// (RFC 8954 section 2.1 leaves that to the client).
    pub ocsp_nonce: bool,
    /// Which destinations fetches may connect to.
    pub allow_destinations: AllowDestinations,
}

impl Default for RevocationConfig {
    fn default() -> Self {
        RevocationConfig {
            connect_timeout_ms: millis(DEFAULT_CONNECT_TIMEOUT),
            ocsp_timeout_ms: millis(DEFAULT_OCSP_TIMEOUT),
            crl_timeout_ms: millis(DEFAULT_CRL_TIMEOUT),
            ocsp_max_response_bytes: DEFAULT_OCSP_MAX_RESPONSE_BYTES,
            crl_max_bytes: DEFAULT_CRL_MAX_BYTES,
            clock_skew_secs: DEFAULT_CLOCK_SKEW.as_secs(),
            crl_grace_secs: DEFAULT_CRL_GRACE.as_secs(),
            crl_refresh_interval_secs: DEFAULT_CRL_REFRESH_INTERVAL.as_secs(),
            ocsp_default_ttl_secs: DEFAULT_OCSP_TTL.as_secs(),
            ocsp_max_ttl_secs: DEFAULT_OCSP_MAX_TTL.as_secs(),
            failure_ttl_secs: DEFAULT_FAILURE_TTL.as_secs(),
            ocsp_cache_entries: DEFAULT_OCSP_CACHE_ENTRIES,
            crl_cache_max_bytes: DEFAULT_CRL_CACHE_MAX_BYTES,
            max_fetches_in_flight: DEFAULT_MAX_FETCHES_IN_FLIGHT,
            ocsp_nonce: false,
            allow_destinations: AllowDestinations::Public,
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Upper bounds that keep a typo from disabling a limit: no timeout above ten minutes, no
/// body above 1 GiB, no time tolerance above 30 days.
const MAX_TIMEOUT_MS: u64 = 10 * 60 * 1000;
const MAX_BODY_BYTES: u64 = 1024 * 1024 * 1024;
const MAX_TOLERANCE_SECS: u64 = 30 * 24 * 60 * 60;

/// A `[revocation]` value out of range; the message names the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("revocation.{key}: {problem}")]
pub struct RevocationConfigError {
    pub key: &'static str,
    pub problem: String,
}

impl RevocationConfig {
    /// Checks every value's range; run by [`super::RevocationChecker::new`] and by
    /// `config check` (the lead wires it).
    pub fn validate(&self) -> Result<(), RevocationConfigError> {
        let timeouts = [
            ("connect_timeout_ms", self.connect_timeout_ms),
            ("ocsp_timeout_ms", self.ocsp_timeout_ms),
            ("crl_timeout_ms", self.crl_timeout_ms),
        ];
        for (key, v) in timeouts {
            range(key, v, 1, MAX_TIMEOUT_MS, "milliseconds")?;
        }
        range(
            "ocsp_max_response_bytes",
            self.ocsp_max_response_bytes,
            1,
            MAX_BODY_BYTES,
            "bytes",
        )?;
        range(
            "crl_max_bytes",
            self.crl_max_bytes,
            1,
            MAX_BODY_BYTES,
            "bytes",
        )?;
        let tolerances = [
            ("clock_skew_secs", self.clock_skew_secs, 0),
            ("crl_grace_secs", self.crl_grace_secs, 0),
            (
                "crl_refresh_interval_secs",
                self.crl_refresh_interval_secs,
                1,
            ),
            ("ocsp_default_ttl_secs", self.ocsp_default_ttl_secs, 1),
            ("ocsp_max_ttl_secs", self.ocsp_max_ttl_secs, 1),
            ("failure_ttl_secs", self.failure_ttl_secs, 0),
        ];
        for (key, v, min) in tolerances {
            range(key, v, min, MAX_TOLERANCE_SECS, "seconds")?;
        }
        range(
            "ocsp_cache_entries",
            self.ocsp_cache_entries,
            1,
            u64::MAX,
            "entries",
        )?;
        range(
            "crl_cache_max_bytes",
            self.crl_cache_max_bytes,
            1,
            u64::MAX,
            "bytes",
        )?;
        range(
            "max_fetches_in_flight",
            self.max_fetches_in_flight,
            1,
            MAX_FETCHES_IN_FLIGHT,
            "downloads",
        )?;
        Ok(())
    }

    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }
    pub fn ocsp_timeout(&self) -> Duration {
        Duration::from_millis(self.ocsp_timeout_ms)
    }
    pub fn crl_timeout(&self) -> Duration {
        Duration::from_millis(self.crl_timeout_ms)
    }
    pub fn clock_skew(&self) -> Duration {
        Duration::from_secs(self.clock_skew_secs)
    }
    pub fn crl_grace(&self) -> Duration {
        Duration::from_secs(self.crl_grace_secs)
    }
    pub fn crl_refresh_interval(&self) -> Duration {
        Duration::from_secs(self.crl_refresh_interval_secs)
    }
    pub fn ocsp_default_ttl(&self) -> Duration {
        Duration::from_secs(self.ocsp_default_ttl_secs)
    }
    pub fn ocsp_max_ttl(&self) -> Duration {
        Duration::from_secs(self.ocsp_max_ttl_secs)
    }
    pub fn failure_ttl(&self) -> Duration {
        Duration::from_secs(self.failure_ttl_secs)
    }
}

fn range(
    key: &'static str,
    v: u64,
    min: u64,
    max: u64,
    unit: &str,
) -> Result<(), RevocationConfigError> {
    if v < min || v > max {
        return Err(RevocationConfigError {
            key,
            problem: format!("{v} is outside {min}..={max} {unit}"),
        });
    }
    Ok(())
}

impl From<&RevocationConfig> for OcspPolicy {
    fn from(c: &RevocationConfig) -> Self {
        OcspPolicy {
            clock_skew: c.clock_skew(),
            default_ttl: c.ocsp_default_ttl(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_table_gives_the_documented_defaults() {
        let c: RevocationConfig = toml::from_str("").expect("empty table");
        assert_eq!(c, RevocationConfig::default());
        assert_eq!(c.connect_timeout(), DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(c.ocsp_max_response_bytes, 64 * 1024);
        assert_eq!(c.crl_max_bytes, 32 * 1024 * 1024);
        assert_eq!(c.allow_destinations, AllowDestinations::Public);
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn unknown_keys_are_rejected_and_named() {
        let err = toml::from_str::<RevocationConfig>("ocsp_timeout = 3").expect_err("unknown key");
        assert!(err.to_string().contains("ocsp_timeout"), "{err}");
    }

    #[test]
    fn destinations_are_spelled_in_kebab_case() {
        let c: RevocationConfig =
            toml::from_str("allow_destinations = \"loopback\"").expect("loopback");
        assert_eq!(c.allow_destinations, AllowDestinations::Loopback);
        assert!(toml::from_str::<RevocationConfig>("allow_destinations = \"private\"").is_err());
    }

    #[test]
    fn a_zero_timeout_is_refused_with_the_key_named() {
        let c = RevocationConfig {
            ocsp_timeout_ms: 0,
            ..RevocationConfig::default()
        };
        let err = c.validate().expect_err("zero timeout");
        assert_eq!(err.key, "ocsp_timeout_ms");
        assert!(err.to_string().starts_with("revocation.ocsp_timeout_ms"));
    }
}
