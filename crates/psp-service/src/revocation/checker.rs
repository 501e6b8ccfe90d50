//! [`RevocationChecker`]: fetches, verifies and caches CRLs and OCSP answers for one
//! certificate and returns the evidence the pure check core combines. The checking service
//! asks it for every certificate of a verified path (`check::RevocationPlan`: the PSP's, each
//! intermediate's, each CRL signer's relied on).
//!
//! ```text
//! evidence_signed(cert, issuer, crl_signers, now)
//!   ├─ no issuer, or not the certificate's ────▶ both Failed, nothing fetched
//!   └─ tokio::join!
//!        ├─ OCSP: cache (issuer key, serial, URLs) ─ miss ─▶ POST each URL ─▶ verify_response
//!        └─ CRL:  cache (URL, issuer key) ──── miss ─▶ GET ─▶ spawn_blocking(CrlIndex::parse)
//!                   └─ hit, refresh due ─▶ background download; the old CRL stays in use
//!                                          until nextUpdate + grace
//! ```
//!
//! Caches are moka, hidden here. Concurrent misses for one key run one fetch (moka's
//! `get_with` coalesces them); the others wait for it. Entries never outlive what they say
//! about themselves (`nextUpdate`, plus the grace for CRLs), and every hit is checked again
//! against the caller's `now`. Failures are remembered for `failure_ttl` so that a responder
//! that is down costs one timeout, not one per request; they stay failures (fail closed).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use moka::Expiry;
use moka::future::Cache;
use time::OffsetDateTime;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::config::{RevocationConfig, RevocationConfigError};
use super::crl::CrlError;
use super::crl::CrlIndex;
use super::ocsp::{self, OcspAnswer, OcspError, OcspPolicy};
use super::{MethodOutcome, RevocationEvidence};
use super::{add, rfc3339, until};
use crate::cert::PspCertificate;
use crate::fetch::{FetchError, Fetcher, Limits};

/// Reason when the certificate names no CRL distribution point.
pub const NO_CRL_URL: &str = "the certificate names no CRL distribution point";
/// Reason when the certificate names no OCSP responder.
pub const NO_OCSP_URL: &str = "the certificate names no OCSP responder";
/// Reason when no certification path verified (every signature up to a trust-list issuer):
/// nothing is fetched, so that a self-made or tampered certificate cannot make the gateway
/// fetch a URL of its choosing (docs/design.md section 6).
pub const UNKNOWN_ISSUER: &str = "no certification path to a trust-list issuer verified, so no revocation evidence was fetched or checked";

/// Reason when the issuer passed in is not the certificate's issuer: nothing is fetched.
pub const ISSUER_MISMATCH: &str =
    "the issuer certificate given is not the certificate's issuer (names differ)";

/// URLs tried per method. Certificates name one or two (often http and ldap, of which we use
/// http); four bounds what one certificate can make us fetch.
pub const MAX_URLS_PER_METHOD: usize = 4;
/// `Content-Type` of an OCSP request over HTTP (RFC 6960 appendix A.1).
pub const OCSP_REQUEST_CONTENT_TYPE: &str = "application/ocsp-request";
/// A cached CRL is refreshed once three quarters of its `thisUpdate`..`nextUpdate` window
/// have passed (or after the refresh interval, whichever comes first), leaving a quarter of
/// the window to retry before it goes stale.
const CRL_REFRESH_AT_NUMERATOR: u32 = 3;
const CRL_REFRESH_AT_DENOMINATOR: u32 = 4;
/// After a failed background refresh, the next attempt waits this long, so an unreachable
/// distribution point is not hammered by every request.
const CRL_REFRESH_RETRY: Duration = Duration::from_secs(60);
/// Longest time any entry stays in a cache, whatever its `nextUpdate` says (a CRL valid for
/// a year is still dropped, and fetched again, after a week).
const MAX_ENTRY_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Why a checker cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevocationSetupError {
    #[error(transparent)]
    Config(#[from] RevocationConfigError),
}

/// Every download slot stayed taken for a caller's whole wait: the lookup fails closed and
/// is not cached, so the next request tries again.
#[derive(Debug, Clone, thiserror::Error)]
#[error("all {slots} revocation download slots stayed taken for {waited_ms} ms: not checked now")]
struct SlotsBusy {
    slots: usize,
    waited_ms: u128,
}

/// Why no OCSP answer was obtained (cached for `failure_ttl`).
#[derive(Debug, Clone, thiserror::Error)]
enum OcspFailure {
    /// No nonce could be drawn for the request.
    #[error("the system random generator failed")]
    NoRandom,
    /// The request could not be encoded.
    #[error(transparent)]
    Request(OcspError),
    /// Every responder tried failed or was refused, in the order tried.
    #[error("{}", join_failures(.0))]
    Responders(Vec<ResponderFailure>),
}

/// What one OCSP responder did wrong.
#[derive(Debug, Clone, thiserror::Error)]
enum ResponderFailure {
    /// The download failed.
    #[error("{url}: {error}")]
    Fetch { url: String, error: FetchError },
    /// The response was refused.
    #[error("{url}: {error}")]
    Refused { url: String, error: OcspError },
}

fn join_failures(failures: &[ResponderFailure]) -> String {
    failures
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why no current CRL was obtained from one distribution point.
#[derive(Debug, Clone, thiserror::Error)]
enum CrlFailure {
    /// No download slot freed up in time.
    #[error(transparent)]
    Busy(#[from] SlotsBusy),
    /// The download failed.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// The CRL does not parse, verify or is not current.
    #[error(transparent)]
    Crl(#[from] CrlError),
    /// The blocking parser task panicked or was cancelled.
    #[error("the CRL parser task failed: {reason}")]
    ParserTask { reason: String },
    /// The cached CRL was verified with a different issuer or signer set.
    #[error("the cached CRL was verified for another issuer")]
    OtherIssuer,
}

/// Counters of one method, since start-up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MethodStats {
    /// Lookups answered from the cache, including those that waited for another caller's
    /// fetch of the same key.
    pub cache_hits: u64,
    /// Lookups that started a fetch.
    pub cache_misses: u64,
    /// Downloads that gave a verified CRL or OCSP answer.
    pub fetch_ok: u64,
    /// Downloads that failed (connect, timeout, HTTP status, size, destination).
    pub fetch_failed: u64,
    /// Downloads whose content was refused (signature, issuer, staleness, unknown, …).
    pub rejected: u64,
    /// Background CRL refreshes that replaced the cached CRL (always 0 for OCSP).
    pub refresh_ok: u64,
    /// Background CRL refreshes that failed; the previous CRL stayed in use.
    pub refresh_failed: u64,
    /// Cache misses that found every download slot taken for their whole wait: failed,
    /// not cached.
    pub busy: u64,
}

/// A snapshot of the counters, for the metrics endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RevocationStats {
    pub ocsp: MethodStats,
    pub crl: MethodStats,
    /// Downloads in flight now, and the cap (`max_fetches_in_flight`).
    pub in_flight: usize,
    pub max_in_flight: usize,
    /// Cached OCSP answers and CRLs (failures included), and the CRL cache's weight in bytes
    /// of index. moka applies evictions in batches, so these can be briefly over the bounds.
    pub ocsp_entries: u64,
    pub crl_entries: u64,
    pub crl_bytes: u64,
}

#[derive(Default)]
struct Counters {
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    fetch_ok: AtomicU64,
    fetch_failed: AtomicU64,
    rejected: AtomicU64,
    refresh_ok: AtomicU64,
    refresh_failed: AtomicU64,
    busy: AtomicU64,
}

impl Counters {
    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> MethodStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        MethodStats {
            cache_hits: get(&self.cache_hits),
            cache_misses: get(&self.cache_misses),
            fetch_ok: get(&self.fetch_ok),
            fetch_failed: get(&self.fetch_failed),
            rejected: get(&self.rejected),
            refresh_ok: get(&self.refresh_ok),
            refresh_failed: get(&self.refresh_failed),
            busy: get(&self.busy),
        }
    }
}

/// The settings in the units the checker uses.
#[derive(Debug, Clone, Copy)]
struct Settings {
    ocsp: Limits,
    crl: Limits,
    skew: Duration,
    crl_grace: Duration,
    crl_refresh_interval: Duration,
    ocsp_policy: OcspPolicy,
    ocsp_max_ttl: Duration,
    failure_ttl: Duration,
    ocsp_nonce: bool,
}

/// OCSP cache key: the issuer (SHA-256 of its SubjectPublicKeyInfo), the serial's octets and
/// the responder URLs asked, in order. An answer is reused only for the question it
/// answered: a certificate naming another responder (a tampered certificate whose URL an
/// attacker chose, serving a replayed "good" answer) cannot place an answer in the entry the
/// genuine certificate's lookups use.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct OcspKey {
    issuer_key: [u8; 32],
    serial: Vec<u8>,
    responders: Vec<String>,
}

/// CRL cache key: the URL and the issuer the CRL was verified for. Keying by issuer too
/// means a certificate of another issuer naming this URL cannot replace or poison the entry
/// the rightful issuer's certificates use.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CrlKey {
    url: String,
    issuer_key: [u8; 32],
    /// SHA-256 over the SHA-256s of the SubjectPublicKeyInfos of the CRL signers other than
    /// the issuer accepted with it (RFC 5280 section 6.3.3 (f)); zero when there are none. A
    /// CRL verified with a signer that another path did not validate, or a failure cached
    /// without that signer, never answers for the other.
    signers: [u8; 32],
}

fn signers_digest(crl_signers: &[&PspCertificate]) -> [u8; 32] {
    if crl_signers.is_empty() {
        return [0; 32];
    }
    let keys: Vec<u8> = crl_signers
        .iter()
        .flat_map(|c| crate::hex::sha256(&c.spki))
        .collect();
    crate::hex::sha256(&keys)
}

/// Anything cached, with the time-to-live computed when it was made.
trait Expiring {
    fn ttl(&self) -> Duration;

    /// The wall-clock time of the fetch: what a cached failure was judged at.
    fn fetched_at(&self) -> OffsetDateTime;

    /// Whether this entry, read at `now`, was judged at a time a steady clock could not have
    /// kept it to: before its fetch, or after its end, by more than `skew`. The wall clock was
    /// stepped: "thisUpdate in the future" or "stale" was said of another time, so a failure
    /// is dropped and the method tried again (once per key and step) rather than repeated
    /// until it expires.
    fn judged_at_another_time(&self, now: OffsetDateTime, skew: Duration) -> bool {
        let judged_at = self.fetched_at();
        now < judged_at - skew || now > judged_at + self.ttl() + skew
    }
}

struct PerEntryExpiry;

impl<K, V: Expiring> Expiry<K, Arc<V>> for PerEntryExpiry {
    fn expire_after_create(&self, _key: &K, value: &Arc<V>, _at: Instant) -> Option<Duration> {
        Some(value.ttl())
    }

    fn expire_after_update(
        &self,
        _key: &K,
        value: &Arc<V>,
        _at: Instant,
        _left: Option<Duration>,
    ) -> Option<Duration> {
        Some(value.ttl())
    }
}

struct OcspEntry {
    result: Result<(OcspAnswer, String), OcspFailure>,
    ttl: Duration,
    /// The wall-clock time of the fetch (what a failure was judged at).
    fetched_at: OffsetDateTime,
}

impl Expiring for OcspEntry {
    fn ttl(&self) -> Duration {
        self.ttl
    }

    fn fetched_at(&self) -> OffsetDateTime {
        self.fetched_at
    }
}

struct CrlEntry {
    result: Result<Arc<CrlIndex>, CrlFailure>,
    /// The issuer the CRL was verified with, and the other CRL signers accepted: what a
    /// background refresh verifies against.
    issuer: Arc<PspCertificate>,
    signers: Arc<Vec<PspCertificate>>,
    fetched_at: OffsetDateTime,
    refresh: Mutex<RefreshState>,
    ttl: Duration,
}

impl Expiring for CrlEntry {
    fn ttl(&self) -> Duration {
        self.ttl
    }

    fn fetched_at(&self) -> OffsetDateTime {
        self.fetched_at
    }
}

#[derive(Debug, Clone, Copy)]
struct RefreshState {
    running: bool,
    not_before: OffsetDateTime,
}

impl CrlEntry {
    /// The time from which a background refresh is due.
    fn refresh_due(&self, index: &CrlIndex, interval: Duration) -> OffsetDateTime {
        let window = until(index.this_update(), index.next_update());
        let at_fraction = add(
            index.this_update(),
            window * CRL_REFRESH_AT_NUMERATOR / CRL_REFRESH_AT_DENOMINATOR,
        );
        at_fraction.min(add(self.fetched_at, interval))
    }
}

/// Gathers revocation evidence: OCSP and CRL, verified, cached, fail closed. Clone is cheap
/// (everything is shared); use one per process.
#[derive(Clone)]
pub struct RevocationChecker {
    inner: Arc<Inner>,
}

struct Inner {
    settings: Settings,
    fetcher: Fetcher,
    ocsp_cache: Cache<OcspKey, Arc<OcspEntry>>,
    crl_cache: Cache<CrlKey, Arc<CrlEntry>>,
    ocsp_counters: Counters,
    crl_counters: Counters,
    /// One permit per download in flight (`max_fetches_in_flight`).
    fetch_slots: Arc<Semaphore>,
    max_fetches: usize,
}

impl std::fmt::Debug for RevocationChecker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RevocationChecker")
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

impl RevocationChecker {
    /// Validates the configuration and builds the client and the caches. Binds nothing and
    /// fetches nothing.
    pub fn new(config: &RevocationConfig) -> Result<Self, RevocationSetupError> {
        config.validate()?;
        let settings = Settings {
            ocsp: Limits {
                total: config.ocsp_timeout(),
                max_bytes: config.ocsp_max_response_bytes,
            },
            crl: Limits {
                total: config.crl_timeout(),
                max_bytes: config.crl_max_bytes,
            },
            skew: config.clock_skew(),
            crl_grace: config.crl_grace(),
            crl_refresh_interval: config.crl_refresh_interval(),
            ocsp_policy: OcspPolicy::from(config),
            ocsp_max_ttl: config.ocsp_max_ttl(),
            failure_ttl: config.failure_ttl(),
            ocsp_nonce: config.ocsp_nonce,
        };
        let max_fetches = usize::try_from(config.max_fetches_in_flight).unwrap_or(usize::MAX);
        let ocsp_cache = Cache::builder()
            .max_capacity(config.ocsp_cache_entries)
            .expire_after(PerEntryExpiry)
            .build();
        let crl_cache = Cache::builder()
            .max_capacity(config.crl_cache_max_bytes)
            .weigher(|_key: &CrlKey, entry: &Arc<CrlEntry>| -> u32 {
                let bytes = entry.result.as_ref().map_or(0, |index| index.index_bytes());
                u32::try_from(bytes).unwrap_or(u32::MAX).max(1)
            })
            .expire_after(PerEntryExpiry)
            .build();
        Ok(RevocationChecker {
            inner: Arc::new(Inner {
                settings,
                fetcher: Fetcher::new(config.allow_destinations, config.connect_timeout()),
                ocsp_cache,
                crl_cache,
                ocsp_counters: Counters::default(),
                crl_counters: Counters::default(),
                fetch_slots: Arc::new(Semaphore::new(max_fetches)),
                max_fetches,
            }),
        })
    }

    /// The evidence for `cert`, issued by `issuer` (the certificate whose key is genuine:
    /// [`crate::check::IssuerResolution::revocation_issuer`]). With no issuer nothing is
    /// fetched and both methods fail. OCSP and CRL run concurrently when the certificate
    /// names both. Never fails: every problem is a [`MethodOutcome::Failed`] with its reason.
    pub async fn evidence(
        &self,
        cert: &PspCertificate,
        issuer: Option<&PspCertificate>,
        now: OffsetDateTime,
    ) -> RevocationEvidence {
        self.evidence_signed(cert, issuer, &[], now).await.0
    }

    /// As [`RevocationChecker::evidence`], also accepting CRLs signed by `crl_signers` (the
    /// certificates of the issuer's other keys whose paths verified:
    /// [`crate::check::Target::crl_signers`]). Returns the index into `crl_signers` of the
    /// signer of the CRL the CRL method used, when it was not the issuer's own key.
    pub async fn evidence_signed(
        &self,
        cert: &PspCertificate,
        issuer: Option<&PspCertificate>,
        crl_signers: &[&PspCertificate],
        now: OffsetDateTime,
    ) -> (RevocationEvidence, Option<usize>) {
        let Some(issuer) = issuer else {
            return (RevocationEvidence::not_checked(UNKNOWN_ISSUER), None);
        };
        // The CertID and the CRL lookup both assume `issuer` is the certificate's issuer;
        // a mismatched pair would ask about another certificate. Names are compared as the
        // path compares them (RFC 5280 section 7.1): an intermediate re-encoded at a CA's
        // rollover still chains, and is checked.
        if !super::crl::same_name(
            &cert.issuer_raw,
            cert.issuer_name.as_ref(),
            &issuer.subject_raw,
            issuer.subject_name.as_ref(),
        ) {
            return (RevocationEvidence::not_checked(ISSUER_MISMATCH), None);
        }
        let ((crl, signer), ocsp) = tokio::join!(
            self.inner.crl_outcome(cert, issuer, crl_signers, now),
            self.inner.ocsp_outcome(cert, issuer, now)
        );
        (RevocationEvidence { crl, ocsp }, signer)
    }

    /// The counters so far.
    pub fn stats(&self) -> RevocationStats {
        RevocationStats {
            ocsp: self.inner.ocsp_counters.snapshot(),
            crl: self.inner.crl_counters.snapshot(),
            in_flight: self
                .inner
                .max_fetches
                .saturating_sub(self.inner.fetch_slots.available_permits()),
            max_in_flight: self.inner.max_fetches,
            ocsp_entries: self.inner.ocsp_cache.entry_count(),
            crl_entries: self.inner.crl_cache.entry_count(),
            crl_bytes: self.inner.crl_cache.weighted_size(),
        }
    }

    /// Applies the caches' pending evictions, so that [`RevocationChecker::stats`] counts
    /// what they hold now (tests and benchmarks; the caches do it themselves as they go).
    pub async fn settle_caches(&self) {
        self.inner.ocsp_cache.run_pending_tasks().await;
        self.inner.crl_cache.run_pending_tasks().await;
    }
}

impl Inner {
    async fn ocsp_outcome(
        &self,
        cert: &PspCertificate,
        issuer: &PspCertificate,
        now: OffsetDateTime,
    ) -> MethodOutcome {
        if cert.ocsp_urls.is_empty() {
            return MethodOutcome::Failed {
                reason: NO_OCSP_URL.to_owned(),
            };
        }
        let key = OcspKey {
            issuer_key: crate::hex::sha256(&issuer.spki),
            serial: cert.serial.clone(),
            responders: cert
                .ocsp_urls
                .iter()
                .take(MAX_URLS_PER_METHOD)
                .cloned()
                .collect(),
        };
        // A cached answer no longer current at `now` is dropped and fetched again, once.
        for _ in 0..2 {
            let mut fetched = false;
            let entry = self
                .ocsp_cache
                .try_get_with(key.clone(), async {
                    let _slot = self.fetch_slot(self.settings.ocsp.total).await?;
                    fetched = true;
                    Ok::<_, SlotsBusy>(Arc::new(self.fetch_ocsp(cert, issuer, now).await))
                })
                .await;
            let entry = match entry {
                Ok(entry) => entry,
                Err(busy) => {
                    Counters::bump(&self.ocsp_counters.busy);
                    return MethodOutcome::Failed {
                        reason: busy.to_string(),
                    };
                }
            };
            Counters::bump(if fetched {
                &self.ocsp_counters.cache_misses
            } else {
                &self.ocsp_counters.cache_hits
            });
            match &entry.result {
                Ok((answer, url)) => {
                    if fetched || answer.usable_at(now, self.settings.skew) {
                        return MethodOutcome::from_ocsp(
                            answer,
                            cert,
                            url,
                            (now, self.settings.skew),
                        );
                    }
                    self.ocsp_cache.invalidate(&key).await;
                }
                Err(_) if !fetched && entry.judged_at_another_time(now, self.settings.skew) => {
                    self.ocsp_cache.invalidate(&key).await;
                }
                Err(reason) => {
                    return MethodOutcome::Failed {
                        reason: reason.to_string(),
                    };
                }
            }
        }
        MethodOutcome::Failed {
            reason: "the cached OCSP answer is not current and no current one was obtained"
                .to_owned(),
        }
    }

    /// A download slot, waiting at most `wait` (the method's timeout: no caller waits for a
    /// slot longer than a download may take). Without one, the miss fails closed and is not
    /// cached, so the next request tries again.
    async fn fetch_slot(&self, wait: Duration) -> Result<OwnedSemaphorePermit, SlotsBusy> {
        match tokio::time::timeout(wait, Arc::clone(&self.fetch_slots).acquire_owned()).await {
            Ok(Ok(slot)) => Ok(slot),
            Ok(Err(_)) | Err(_) => Err(SlotsBusy {
                slots: self.max_fetches,
                waited_ms: wait.as_millis(),
            }),
        }
    }

    async fn fetch_ocsp(
        &self,
        cert: &PspCertificate,
        issuer: &PspCertificate,
        now: OffsetDateTime,
    ) -> OcspEntry {
        let failure = |reason: OcspFailure| OcspEntry {
            result: Err(reason),
            ttl: self.settings.failure_ttl,
            fetched_at: now,
        };
        let nonce = if self.settings.ocsp_nonce {
            match random_nonce() {
                Some(n) => Some(n),
                None => return failure(OcspFailure::NoRandom),
            }
        } else {
            None
        };
        let request = match ocsp::build_request(issuer, &cert.serial, nonce.as_deref()) {
            Ok(r) => r,
            Err(e) => return failure(OcspFailure::Request(e)),
        };
        let mut reasons = Vec::new();
        for url in cert.ocsp_urls.iter().take(MAX_URLS_PER_METHOD) {
            let body = match self
                .fetcher
                .post(
                    url,
                    OCSP_REQUEST_CONTENT_TYPE,
                    request.clone(),
                    self.settings.ocsp,
                )
                .await
            {
                Ok(body) => body,
                Err(e) => {
                    Counters::bump(&self.ocsp_counters.fetch_failed);
                    tracing::warn!(url = %url, error = %e, serial = %cert.serial_hex(), "OCSP fetch failed");
                    reasons.push(ResponderFailure::Fetch {
                        url: url.clone(),
                        error: e,
                    });
                    continue;
                }
            };
            match ocsp::verify_response(
                &body,
                issuer,
                &cert.serial,
                nonce.as_deref(),
                now,
                &self.settings.ocsp_policy,
            ) {
                Ok(answer) => {
                    Counters::bump(&self.ocsp_counters.fetch_ok);
                    let ttl = until(now, answer.valid_until())
                        .min(self.settings.ocsp_max_ttl)
                        .min(MAX_ENTRY_TTL);
                    return OcspEntry {
                        result: Ok((answer, url.clone())),
                        ttl,
                        fetched_at: now,
                    };
                }
                Err(e) => {
                    Counters::bump(&self.ocsp_counters.rejected);
                    tracing::warn!(url = %url, error = %e, serial = %cert.serial_hex(), "OCSP response refused");
                    reasons.push(ResponderFailure::Refused {
                        url: url.clone(),
                        error: e,
                    });
                }
            }
        }
        failure(OcspFailure::Responders(reasons))
    }

    async fn crl_outcome(
        self: &Arc<Self>,
        cert: &PspCertificate,
        issuer: &PspCertificate,
        crl_signers: &[&PspCertificate],
        now: OffsetDateTime,
    ) -> (MethodOutcome, Option<usize>) {
        if cert.crl_urls.is_empty() {
            return (
                MethodOutcome::Failed {
                    reason: NO_CRL_URL.to_owned(),
                },
                None,
            );
        }
        let mut reasons = Vec::new();
        for url in cert.crl_urls.iter().take(MAX_URLS_PER_METHOD) {
            let index = match self.crl_for(url, issuer, crl_signers, now).await {
                Ok(index) => index,
                Err(reason) => {
                    reasons.push(format!("{url}: {reason}"));
                    continue;
                }
            };
            let signer = crl_signers
                .iter()
                .position(|s| crate::hex::sha256(&s.spki) == index.signer_key_sha256())
                .filter(|_| crate::hex::sha256(&issuer.spki) != index.signer_key_sha256());
            let note = signer.map_or_else(String::new, |k| {
                format!(
                    ", signed by the issuer's CRL-signing certificate {}",
                    crl_signers[k].subject
                )
            });
            let tolerance = (self.settings.crl_grace, self.settings.skew);
            match MethodOutcome::from_crl(&index, cert, url, now, tolerance).noting(&note) {
                MethodOutcome::Failed { reason } => reasons.push(reason),
                answer => return (answer, signer),
            }
        }
        (
            MethodOutcome::Failed {
                reason: reasons.join("; "),
            },
            None,
        )
    }

    /// The current CRL at `url` for `issuer`, from the cache or downloaded.
    async fn crl_for(
        self: &Arc<Self>,
        url: &str,
        issuer: &PspCertificate,
        crl_signers: &[&PspCertificate],
        now: OffsetDateTime,
    ) -> Result<Arc<CrlIndex>, CrlFailure> {
        let key = CrlKey {
            url: url.to_owned(),
            issuer_key: crate::hex::sha256(&issuer.spki),
            signers: signers_digest(crl_signers),
        };
        // A cached CRL no longer current at `now` is dropped and fetched again, once.
        let mut retried = false;
        loop {
            let mut fetched = false;
            let entry = self
                .crl_cache
                .try_get_with(key.clone(), async {
                    let _slot = self.fetch_slot(self.settings.crl.total).await?;
                    fetched = true;
                    Ok::<_, SlotsBusy>(Arc::new(
                        self.fetch_crl(
                            url,
                            Arc::new(issuer.clone()),
                            Arc::new(crl_signers.iter().map(|&c| c.clone()).collect()),
                            now,
                        )
                        .await,
                    ))
                })
                .await;
            let entry = match entry {
                Ok(entry) => entry,
                Err(busy) => {
                    Counters::bump(&self.crl_counters.busy);
                    return Err(CrlFailure::Busy(busy.as_ref().clone()));
                }
            };
            Counters::bump(if fetched {
                &self.crl_counters.cache_misses
            } else {
                &self.crl_counters.cache_hits
            });
            let index = match &entry.result {
                Ok(index) => Arc::clone(index),
                Err(_)
                    if !fetched
                        && !retried
                        && entry.judged_at_another_time(now, self.settings.skew) =>
                {
                    self.crl_cache.invalidate(&key).await;
                    retried = true;
                    continue;
                }
                Err(reason) => return Err(reason.clone()),
            };
            if !index.verified_for_any(issuer, crl_signers) {
                return Err(CrlFailure::OtherIssuer);
            }
            match index.check_current(now, self.settings.crl_grace, self.settings.skew) {
                Ok(()) => {
                    self.maybe_refresh(&key, &entry, &index, now);
                    return Ok(index);
                }
                Err(e) if fetched => return Err(e.into()),
                Err(e) => {
                    // Past nextUpdate + grace (or a CRL from our future): drop it, fetch again.
                    self.crl_cache.invalidate(&key).await;
                    if retried {
                        return Err(e.into());
                    }
                    retried = true;
                }
            }
        }
    }

    /// Downloads, parses (off the async workers) and verifies a CRL; the outcome is cached.
    async fn fetch_crl(
        &self,
        url: &str,
        issuer: Arc<PspCertificate>,
        signers: Arc<Vec<PspCertificate>>,
        now: OffsetDateTime,
    ) -> CrlEntry {
        let result = self.download_crl(url, &issuer, &signers, now).await;
        let ttl = match &result {
            Ok(index) => {
                until(now, add(index.next_update(), self.settings.crl_grace)).min(MAX_ENTRY_TTL)
            }
            Err(_) => self.settings.failure_ttl,
        };
        CrlEntry {
            result,
            issuer,
            signers,
            fetched_at: now,
            refresh: Mutex::new(RefreshState {
                running: false,
                not_before: now,
            }),
            ttl,
        }
    }

    async fn download_crl(
        &self,
        url: &str,
        issuer: &Arc<PspCertificate>,
        signers: &Arc<Vec<PspCertificate>>,
        now: OffsetDateTime,
    ) -> Result<Arc<CrlIndex>, CrlFailure> {
        let body = match self.fetcher.get(url, self.settings.crl).await {
            Ok(body) => body,
            Err(e) => {
                Counters::bump(&self.crl_counters.fetch_failed);
                tracing::warn!(url = %url, error = %e, "CRL fetch failed");
                return Err(e.into());
            }
        };
        let issuer = Arc::clone(issuer);
        let signers = Arc::clone(signers);
        let parsed = tokio::task::spawn_blocking(move || {
            let others: Vec<&PspCertificate> = signers.iter().collect();
            CrlIndex::parse_signed(&body, &issuer, &others)
        })
        .await;
        let checked = match parsed {
            Ok(Ok(index)) => index
                .check_current(now, self.settings.crl_grace, self.settings.skew)
                .map(|()| index)
                .map_err(CrlFailure::from),
            Ok(Err(e)) => Err(e.into()),
            Err(e) => Err(CrlFailure::ParserTask {
                reason: e.to_string(),
            }),
        };
        match checked {
            Ok(index) => {
                Counters::bump(&self.crl_counters.fetch_ok);
                tracing::debug!(url = %url, entries = index.len(), crl_number = ?index.crl_number(), "CRL loaded");
                Ok(Arc::new(index))
            }
            Err(e) => {
                Counters::bump(&self.crl_counters.rejected);
                tracing::warn!(url = %url, error = %e, "CRL refused");
                Err(e)
            }
        }
    }

    /// Starts a background download when the entry's refresh is due and none is running.
    /// The cached CRL stays in use meanwhile and after a failure, until nextUpdate + grace.
    fn maybe_refresh(
        self: &Arc<Self>,
        key: &CrlKey,
        entry: &Arc<CrlEntry>,
        index: &Arc<CrlIndex>,
        now: OffsetDateTime,
    ) {
        if now < entry.refresh_due(index, self.settings.crl_refresh_interval) {
            return;
        }
        {
            let Ok(mut state) = entry.refresh.lock() else {
                return;
            };
            if state.running || now < state.not_before {
                return;
            }
            state.running = true;
        }
        let inner = Arc::clone(self);
        let key = key.clone();
        let entry = Arc::clone(entry);
        let old = Arc::clone(index);
        tokio::spawn(async move {
            let fresh = match inner.fetch_slot(inner.settings.crl.total).await {
                Ok(_slot) => {
                    inner
                        .download_crl(&key.url, &entry.issuer, &entry.signers, now)
                        .await
                }
                Err(busy) => Err(busy.into()),
            };
            match fresh {
                // Never replace a CRL with an older one (a stale mirror or a replay).
                Ok(index) if index.this_update() >= old.this_update() => {
                    Counters::bump(&inner.crl_counters.refresh_ok);
                    let ttl = until(now, add(index.next_update(), inner.settings.crl_grace))
                        .min(MAX_ENTRY_TTL);
                    let replacement = CrlEntry {
                        result: Ok(index),
                        issuer: Arc::clone(&entry.issuer),
                        signers: Arc::clone(&entry.signers),
                        fetched_at: now,
                        refresh: Mutex::new(RefreshState {
                            running: false,
                            not_before: now,
                        }),
                        ttl,
                    };
                    inner.crl_cache.insert(key, Arc::new(replacement)).await;
                }
                other => {
                    Counters::bump(&inner.crl_counters.refresh_failed);
                    let why = match other {
                        Ok(index) => format!(
                            "the new CRL (thisUpdate {}) is older than the cached one",
                            rfc3339(index.this_update())
                        ),
                        Err(e) => e.to_string(),
                    };
                    tracing::warn!(url = %key.url, error = %why, "CRL refresh failed; the cached CRL stays in use until nextUpdate + grace");
                    if let Ok(mut state) = entry.refresh.lock() {
                        state.running = false;
                        state.not_before = add(now, CRL_REFRESH_RETRY);
                    }
                }
            }
        });
    }
}

fn random_nonce() -> Option<Vec<u8>> {
    use ring::rand::SecureRandom as _;
    let mut nonce = vec![0u8; ocsp::NONCE_LEN];
    ring::rand::SystemRandom::new().fill(&mut nonce).ok()?;
    Some(nonce)
}
