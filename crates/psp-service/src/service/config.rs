//! `[results]`: the check service's result cache, which every face that checks through the
//! service (the endpoint and the gateway) shares. Parsed by the configuration into this type.

use std::time::Duration;

use serde::Deserialize;

/// `[results]`: how long, and how many, check results are kept.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultsConfig {
    /// How long a check result may be served from the cache (never beyond the revocation
    /// evidence's validity).
    #[serde(default = "default_ttl_seconds")]
    pub ttl_seconds: u64,
    /// Most check results cached.
    #[serde(default = "default_cache_entries")]
    pub cache_entries: u64,
}

impl Default for ResultsConfig {
    fn default() -> Self {
        ResultsConfig {
            ttl_seconds: default_ttl_seconds(),
            cache_entries: default_cache_entries(),
        }
    }
}

impl ResultsConfig {
    /// How long a result may be served from the cache.
    pub fn ttl(&self) -> Duration {
        Duration::from_secs(self.ttl_seconds)
    }
}

/// Five minutes (the `[api]` default this setting had before it moved here).
fn default_ttl_seconds() -> u64 {
    300
}

/// 100,000 results of a few KB each: a few hundred MB at most, far more distinct
/// certificates than any bank sees in five minutes.
fn default_cache_entries() -> u64 {
    100_000
}
