//! The checking service: the edge around the pure check core. It owns the reference-data
//! snapshots (swapped atomically on reload), gathers revocation evidence, runs the core and
//! caches results. The endpoint, the gateway and the CLI all check through it.

pub mod audit;
mod config;
mod decision;

pub use config::ResultsConfig;
pub use decision::{Call, Decision, Site};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use time::OffsetDateTime;
use tracing::Instrument;

use crate::cert::PspCertificate;
use crate::check::{
    self, CheckInput, CheckReport, IssuerResolution, PathEvidence, RevocationPlan, Snapshots,
};
use crate::country::CountryCode;
use crate::register::{RegisterConfig, RegisterLoadError, RegisterSnapshot};
use crate::revocation::RevocationChecker;
use crate::trust::{SourceSpec, TrustList, TrustLoadError};

/// One consistent set of reference data.
#[derive(Debug)]
pub struct ReferenceData {
    pub trust: TrustList,
    pub registers: RegisterSnapshot,
    /// Increases with every successful reload; part of every cache key.
    pub generation: u64,
    /// When it was loaded.
    pub loaded_at: OffsetDateTime,
    /// What it was loaded from: the periodic refreshes fetch and reload these, so that they
    /// follow a reloaded configuration.
    pub sources: DataSources,
}

/// Why reference data could not be loaded (the previous data stays in use).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Trust(#[from] TrustLoadError),
    #[error(transparent)]
    Registers(#[from] RegisterLoadError),
}

/// Where the reference data comes from: the trust sources and the register files, as the
/// configuration names them (`Config::data_sources`).
#[derive(Debug, Clone)]
pub struct DataSources {
    pub trust: Vec<SourceSpec>,
    pub registers: RegisterConfig,
    /// The directory register paths are relative to.
    pub base_dir: PathBuf,
}

impl ReferenceData {
    /// Loads the trust list and the registers, completely or not at all, judging the
    /// trusted lists' freshness at `at` (now, or the time an audit asks about).
    pub fn load(
        sources: &DataSources,
        generation: u64,
        at: OffsetDateTime,
    ) -> Result<ReferenceData, LoadError> {
        let trust = crate::trust::load(&sources.trust, at)?;
        let (registers, _) = crate::register::load(&sources.registers, &sources.base_dir)?;
        Ok(ReferenceData {
            trust,
            registers: registers.with_generation(generation),
            generation,
            loaded_at: OffsetDateTime::now_utc(),
            sources: sources.clone(),
        })
    }
}

/// Cache key: the same certificate, chain and jurisdiction against the same data.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    fingerprint: [u8; 32],
    chain: Vec<[u8; 32]>,
    jurisdiction: CountryCode,
    generation: u64,
}

/// A check result as the service hands it out and caches it: the report, and its contract
/// wire form serialised on first use and shared after that (a cached result is answered many
/// times). The wire form is kept here, beside the cache, not in the pure report.
#[derive(Debug)]
pub struct Checked {
    report: CheckReport,
    wire: std::sync::OnceLock<(Box<str>, bytes::Bytes)>,
    evidence: std::sync::OnceLock<Box<str>>,
    identity: std::sync::OnceLock<IdentityHeaderValues>,
}

/// The PSP's identity as the faces forward it in headers, made once per result: the
/// authorisation number as it is, and the PSP's name percent-encoded (UTF-8; every byte but
/// ASCII letters and digits). `None` when the report has none, or when the number is not a
/// valid header value (it came from a certificate: a control character keeps it out).
#[derive(Debug, Clone, Default)]
pub struct IdentityHeaderValues {
    pub auth_number: Option<http::HeaderValue>,
    pub name: Option<http::HeaderValue>,
}

impl Checked {
    /// A result whose wire form is not serialised yet.
    pub fn new(report: CheckReport) -> Self {
        Checked {
            report,
            wire: std::sync::OnceLock::new(),
            evidence: std::sync::OnceLock::new(),
            identity: std::sync::OnceLock::new(),
        }
    }

    /// The identity header values ([`IdentityHeaderValues`]), made on the first call and
    /// shared after that: every permit of a cached result forwards the same ones.
    pub fn identity_header_values(&self) -> &IdentityHeaderValues {
        self.identity.get_or_init(|| IdentityHeaderValues {
            // Trimmed: a PSD2 auth number is printable ASCII (`auth_number`), so it is always
            // a header value; one that is not in PSD2 form never reaches a permit.
            auth_number: self
                .report
                .auth_number()
                .and_then(|a| http::HeaderValue::from_str(a.trim()).ok()),
            name: self.report.psp_subject_name().and_then(|name| {
                let encoded =
                    percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC)
                        .to_string();
                http::HeaderValue::from_str(&encoded).ok()
            }),
        })
    }

    /// The report's revocation evidence in one line
    /// ([`CheckReport::revocation_evidence`]), joined on the first call and shared after
    /// that: every audit record of a cached result carries it.
    pub fn revocation_evidence(&self) -> &str {
        self.evidence
            .get_or_init(|| self.report.revocation_evidence().into_boxed_str())
    }

    /// The report.
    pub fn report(&self) -> &CheckReport {
        &self.report
    }

    /// The contract's wire form as JSON, serialised on the first call for `link_base` and
    /// shared after that (the bytes are reference-counted).
    pub fn wire_json(&self, link_base: &str) -> Result<bytes::Bytes, serde_json::Error> {
        if let Some((base, json)) = self.wire.get()
            && **base == *link_base
        {
            return Ok(json.clone());
        }
        let json = bytes::Bytes::from(serde_json::to_vec(&self.report.to_wire(link_base))?);
        // Another caller may have set it meanwhile, with the same bytes: either is right.
        let _ = self.wire.set((link_base.into(), json.clone()));
        Ok(json)
    }
}

impl AsRef<CheckReport> for Checked {
    fn as_ref(&self) -> &CheckReport {
        &self.report
    }
}

impl std::ops::Deref for Checked {
    type Target = CheckReport;

    fn deref(&self) -> &CheckReport {
        &self.report
    }
}

#[derive(Debug, Clone)]
struct Cached {
    report: Arc<Checked>,
    ttl: Duration,
    /// The wall-clock time the check was made for.
    at: OffsetDateTime,
}

impl Cached {
    /// Whether the result holds at `now` on the wall clock. moka expires entries on the
    /// monotonic clock; a wall clock stepped forward past the entry's end (`at` + `ttl`: a
    /// certificate's `notAfter`, a list's `NextUpdate`, a CRL's `nextUpdate`) or back before
    /// `at` (by more than [`WALL_CLOCK_TOLERANCE`]) makes the entry answer nothing: the check
    /// runs again at the new time.
    fn holds_at(&self, now: OffsetDateTime) -> bool {
        let end = self.at + self.ttl;
        now >= self.at - WALL_CLOCK_TOLERANCE && now < end
    }
}

/// How far before a cached check's time a caller's clock may read and still be answered from
/// it: concurrent callers read the clock a moment apart.
const WALL_CLOCK_TOLERANCE: Duration = Duration::from_secs(5);

struct ReportExpiry;

impl moka::Expiry<Key, Cached> for ReportExpiry {
    fn expire_after_create(
        &self,
        _key: &Key,
        value: &Cached,
        _created_at: std::time::Instant,
    ) -> Option<Duration> {
        Some(value.ttl)
    }
}

/// How revocation evidence is gathered.
pub enum Revocation {
    /// Fetch CRLs and OCSP responses (the service).
    Fetch(RevocationChecker),
    /// Fetch nothing: `notRevoked` is false with both errors, saying why (offline audits with
    /// `psp-gateway check --offline`).
    Offline,
}

/// The reason given for every method of an offline check.
pub const OFFLINE: &str = "revocation evidence not fetched: offline check (--offline)";

/// The checking service.
pub struct CheckService {
    data: ArcSwap<ReferenceData>,
    /// Serialises reloads: the next generation is computed and swapped in under it.
    reload_lock: std::sync::Mutex<()>,
    /// Why the last reload failed, and when (cleared by a successful one), for `/readyz`.
    last_reload_error: std::sync::Mutex<Option<(OffsetDateTime, String)>>,
    revocation: Revocation,
    /// The UK FCA register, consulted on demand for `PSDGB-FCA-<FRN>` PSPs.
    /// Replaced by a reload (a rotated API key, changed settings).
    fca: arc_swap::ArcSwapOption<crate::register::FcaRegister>,
    cache: moka::future::Cache<Key, Cached>,
    result_ttl: Duration,
}

/// A report whose revocation evidence has a failed method is cached this long at most: the
/// responder may be back a moment later (the revocation module remembers failures for the
/// same order of time).
const FAILED_EVIDENCE_TTL: Duration = Duration::from_secs(30);

impl CheckService {
    pub fn new(
        data: ReferenceData,
        revocation: Revocation,
        result_ttl: Duration,
        max_entries: u64,
    ) -> CheckService {
        CheckService {
            data: ArcSwap::from_pointee(data),
            reload_lock: std::sync::Mutex::new(()),
            last_reload_error: std::sync::Mutex::new(None),
            revocation,
            fca: arc_swap::ArcSwapOption::empty(),
            cache: moka::future::Cache::builder()
                .max_capacity(max_entries)
                .expire_after(ReportExpiry)
                .build(),
            result_ttl,
        }
    }

    /// Consult the UK FCA register API for PSPs whose auth number is `PSDGB-FCA-<FRN>`.
    pub fn with_fca(self, fca: crate::register::FcaRegister) -> CheckService {
        self.fca.store(Some(Arc::new(fca)));
        self
    }

    /// Replaces the FCA register adapter (or removes it): a reload's.
    pub fn replace_fca(&self, fca: Option<crate::register::FcaRegister>) {
        self.fca.store(fca.map(Arc::new));
    }

    /// The home register block of an FCA PSP, from the FCA API: asked only when the
    /// certificate's issuer is approved and its signature verifies (so that anyone's
    /// self-made certificate cannot spend the API's quota, nor read a real firm's entry); otherwise, offline, or when the API fails without a usable stale
    /// answer, the block says why and the access rule refuses.
    async fn fca_home(
        &self,
        report: &mut CheckReport,
        certificate: &PspCertificate,
        registers: &crate::register::RegisterSnapshot,
        jurisdiction: CountryCode,
    ) {
        use crate::register::{Frn, OnDemandHome};
        let fca = self.fca.load_full();
        let (Some(fca), Some(auth)) = (fca.as_deref(), certificate.auth_number()) else {
            return;
        };
        let Some(frn) = Frn::from_auth_number(auth) else {
            return;
        };
        let home = if !(report.validity().valid_qtsp && report.validity().valid_signature) {
            OnDemandHome::Unavailable {
                reason: "The UK FCA register was not consulted: the certificate's issuer is not approved or its signature does not verify.".to_owned(),
            }
        } else if matches!(self.revocation, Revocation::Offline) {
            OnDemandHome::Unavailable {
                reason: format!("The UK FCA register was not consulted: {OFFLINE}."),
            }
        } else {
            match fca.lookup(&frn).await {
                Ok(l) => OnDemandHome::Answer {
                    entity: l.answer.to_entity(),
                    warning: l.warning(),
                },
                Err(e) => OnDemandHome::Unavailable {
                    reason: format!("The UK FCA register could not be consulted: {e}"),
                },
            }
        };
        let line = match &home {
            OnDemandHome::Answer { entity, .. } => format!(
                "home register: the UK FCA register API answered for FRN {} ({})",
                frn.as_str(),
                if entity.is_some() {
                    "found"
                } else {
                    "not found"
                }
            ),
            OnDemandHome::Unavailable { reason } => format!("home register: {reason}"),
        };
        report.consult_home_on_demand(registers, auth, jurisdiction, ("GB-FCA", &home), line);
    }

    /// The revocation checker (for its counters); `None` offline.
    pub fn revocation(&self) -> Option<&RevocationChecker> {
        match &self.revocation {
            Revocation::Fetch(r) => Some(r),
            Revocation::Offline => None,
        }
    }

    /// Check results held in the cache now (approximate, as moka counts).
    pub fn cached_results(&self) -> u64 {
        self.cache.entry_count()
    }

    /// The reference data in use.
    pub fn data(&self) -> Arc<ReferenceData> {
        self.data.load_full()
    }

    /// Reloads the reference data from `sources`. On failure the current data stays in use
    /// and the error is returned for the caller to report (and kept for `/readyz`). Reloads
    /// are serialised: two cannot interleave their generation and swap.
    pub fn reload(&self, sources: &DataSources) -> Result<u64, LoadError> {
        let _serial = self
            .reload_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let next = self.data.load().generation + 1;
        let loaded = ReferenceData::load(sources, next, OffsetDateTime::now_utc());
        let mut last = self
            .last_reload_error
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match loaded {
            Ok(data) => {
                self.data.store(Arc::new(data));
                *last = None;
                Ok(next)
            }
            Err(e) => {
                *last = Some((OffsetDateTime::now_utc(), e.to_string()));
                Err(e)
            }
        }
    }

    /// Records a reload that failed before reaching the data (an invalid configuration).
    pub fn record_reload_failure(&self, why: &str) {
        *self
            .last_reload_error
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) =
            Some((OffsetDateTime::now_utc(), why.to_owned()));
    }

    /// The last reload's failure, if the last reload failed: when, and why.
    pub fn last_reload_error(&self) -> Option<(OffsetDateTime, String)> {
        self.last_reload_error
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Checks a certificate (and the intermediates presented with it) for a jurisdiction at
    /// `now`. Concurrent identical checks coalesce into one.
    pub async fn check(
        &self,
        certificate: Arc<PspCertificate>,
        intermediates: Arc<Vec<PspCertificate>>,
        jurisdiction: CountryCode,
        now: OffsetDateTime,
    ) -> Arc<Checked> {
        let data = self.data.load_full();
        let key = Key {
            fingerprint: certificate.fingerprint_sha256,
            chain: intermediates.iter().map(|c| c.fingerprint_sha256).collect(),
            jurisdiction,
            generation: data.generation,
        };
        let validity_ttl = self.ttl_for(&certificate, now);
        // Exported over OTLP when on (telemetry::otlp): the check, and on a miss its
        // revocation fetch and register lookup.
        let span = tracing::trace_span!(
            target: "psp_trace",
            "certificate check",
            cache = tracing::field::Empty
        );
        // A hit that does not hold at `now` on the wall clock (`Cached::holds_at`) is
        // dropped and the check runs again, once.
        let mut attempts = 0;
        let entry = loop {
            attempts += 1;
            // The check's future is large (revocation fetches, the register lookup) and only a
            // miss runs it: boxed when it starts, so that a hit neither carries nor moves it.
            let run = async {
                Box::pin(self.run_check(
                    &certificate,
                    &intermediates,
                    &data,
                    jurisdiction,
                    now,
                    validity_ttl,
                    &span,
                ))
                .await
            };
            let entry = self
                .cache
                .entry_by_ref(&key)
                .or_insert_with(run)
                .instrument(span.clone())
                .await;
            if entry.is_fresh() || attempts == 2 || entry.value().holds_at(now) {
                break entry;
            }
            self.cache.invalidate(&key).await;
        };
        span.record("cache", if entry.is_fresh() { "miss" } else { "hit" });
        // Fresh: this call ran the check (or waited for the one that did); otherwise a hit.
        crate::telemetry::metrics::metrics()
            .result_cache
            .get_or_create(&crate::telemetry::metrics::ResultLabels {
                result: if entry.is_fresh() { "miss" } else { "hit" }.to_owned(),
            })
            .inc();
        entry.into_value().report
    }

    /// The check itself, on a cache miss: revocation evidence for the path, the report, the
    /// on-demand home register, and how long the result may be cached.
    #[allow(clippy::too_many_arguments)]
    async fn run_check(
        &self,
        certificate: &PspCertificate,
        intermediates: &[PspCertificate],
        data: &ReferenceData,
        jurisdiction: CountryCode,
        now: OffsetDateTime,
        validity_ttl: Duration,
        span: &tracing::Span,
    ) -> Cached {
        let revocation = &self.revocation;
        let revocation_span = tracing::trace_span!(target: "psp_trace", parent: span, "revocation");
        let register_span =
            tracing::trace_span!(target: "psp_trace", parent: span, "register lookup");
        let input = CheckInput {
            certificate,
            intermediates,
            jurisdiction,
            now,
        };
        let snapshots = Snapshots {
            trust: &data.trust,
            registers: &data.registers,
        };
        let resolution = check::resolve_issuer(&input, snapshots.trust);
        let evidence = path_evidence(revocation, input, &data.trust, &resolution, now)
            .instrument(revocation_span)
            .await;
        let mut report =
            register_span.in_scope(|| check::report(&input, snapshots, &resolution, &evidence));
        self.fca_home(&mut report, certificate, &data.registers, jurisdiction)
            .instrument(register_span)
            .await;
        let mut ttl = evidence_ttl(validity_ttl, &evidence, now);
        // Never past the NextUpdate of the list that approved the issuer.
        if let check::TrustOutcome::Approved { issuer } = resolution.trust {
            ttl = ttl.min(data.trust.approval_ttl(issuer, now));
        }
        if report.registers().home.warning.is_some() {
            // A stale or missing on-demand answer: ask again soon.
            ttl = ttl.min(FAILED_EVIDENCE_TTL);
        }
        Cached {
            report: Arc::new(Checked::new(report)),
            ttl,
            at: now,
        }
    }

    /// The cached report of a certificate presented alone (by its DER's SHA-256) for a
    /// jurisdiction, if there is one still current: what [`CheckService::check`] would answer
    /// on a hit, without parsing the certificate. Entries expire as they do for `check`
    /// (validity boundaries, revocation evidence, result TTL) and are keyed by the reference
    /// data's generation, so a reload is never answered from before it.
    pub async fn cached(
        &self,
        fingerprint: [u8; 32],
        jurisdiction: CountryCode,
        now: OffsetDateTime,
    ) -> Option<Arc<Checked>> {
        let key = Key {
            fingerprint,
            chain: Vec::new(),
            jurisdiction,
            generation: self.data.load().generation,
        };
        let hit = self.cache.get(&key).await.filter(|c| c.holds_at(now))?;
        crate::telemetry::metrics::metrics()
            .result_cache
            .get_or_create(&crate::telemetry::metrics::ResultLabels {
                result: "hit".to_owned(),
            })
            .inc();
        Some(hit.report)
    }

    /// An audit: the check as it would have come out at the past time `at`, not cached.
    /// - The trust list's status history is read at `at` (as every check does).
    /// - `registers`, when given, are the snapshot in force at `at` (from the register
    ///   history); otherwise the current ones.
    /// - Revocation evidence is fetched now and read as of `at`
    ///   ([`PathEvidence::as_of`]).
    ///
    /// Returns the report and the evidence used (of every certificate of the path).
    pub async fn audit(
        &self,
        certificate: &PspCertificate,
        intermediates: &[PspCertificate],
        jurisdiction: CountryCode,
        at: OffsetDateTime,
        registers: Option<&crate::register::RegisterSnapshot>,
    ) -> (CheckReport, PathEvidence) {
        let data = self.data.load_full();
        let input = CheckInput {
            certificate,
            intermediates,
            jurisdiction,
            now: at,
        };
        let snapshots = Snapshots {
            trust: &data.trust,
            registers: registers.unwrap_or(&data.registers),
        };
        let resolution = check::resolve_issuer(&input, snapshots.trust);
        let evidence = path_evidence(
            &self.revocation,
            input,
            &data.trust,
            &resolution,
            OffsetDateTime::now_utc(),
        )
        .await
        .as_of(at);
        let mut report = check::report(&input, snapshots, &resolution, &evidence);
        // An audit of an FCA PSP asks the register now: the API keeps no history.
        self.fca_home(
            &mut report,
            certificate,
            registers.unwrap_or(&data.registers),
            jurisdiction,
        )
        .await;
        (report, evidence)
    }

    /// A result stays cached for the configured time, but never across the certificate's
    /// validity boundaries (the `notExpired` flag would change) nor beyond its revocation
    /// evidence (see [`evidence_ttl`]).
    fn ttl_for(&self, cert: &PspCertificate, now: OffsetDateTime) -> Duration {
        let mut ttl = self.result_ttl;
        for boundary in [cert.not_before, cert.not_after] {
            if boundary > now {
                let until = Duration::try_from(boundary - now).unwrap_or(Duration::ZERO);
                ttl = ttl.min(until);
            }
        }
        ttl
    }
}

/// The revocation evidence of every certificate of the verified path below its trust-list
/// issuer ([`RevocationPlan`]). Nothing is fetched when no path verified: the certificate's
/// URLs are then attacker data.
async fn path_evidence(
    revocation: &Revocation,
    input: CheckInput<'_>,
    trust: &crate::trust::TrustList,
    resolution: &IssuerResolution,
    now: OffsetDateTime,
) -> PathEvidence {
    let r = match revocation {
        Revocation::Fetch(r) => r,
        Revocation::Offline => return PathEvidence::not_checked(OFFLINE),
    };
    let Some(mut plan) = RevocationPlan::new(input, trust, resolution) else {
        return PathEvidence::not_checked(crate::revocation::UNKNOWN_ISSUER);
    };
    // Rounds: the certificates of each round concurrently, through the same caches, download
    // slots, limits and destination policy as a single one; a CRL signed by another key of the
    // issuer adds that key's certificate to the next round.
    loop {
        let pending = plan.pending();
        if pending.is_empty() {
            return plan.evidence();
        }
        // The targets, copied out of the plan (their certificates are the input's), so that
        // the plan can record the evidence.
        let targets: Vec<_> = pending
            .iter()
            .filter_map(|&i| {
                plan.target(i)
                    .map(|t| (i, t.certificate, t.issuer, t.crl_signers.clone()))
            })
            .collect();
        let round = join_all(
            targets
                .iter()
                .map(|(_, certificate, issuer, signers)| {
                    r.evidence_signed(certificate, Some(issuer), signers, now)
                })
                .collect(),
        )
        .await;
        for ((i, ..), (evidence, signer)) in targets.into_iter().zip(round) {
            plan.record(i, evidence, signer);
        }
    }
}

/// Runs `futures` concurrently on the calling task and returns their outputs in order (the
/// few certificates of one path: no task is spawned, so they may borrow).
async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    use std::task::Poll;
    let mut futures: Vec<std::pin::Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(v) => *output = Some(v),
                    Poll::Pending => done = false,
                }
            }
        }
        if done { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// Never beyond the revocation evidence of any certificate of the path: the earliest
/// `nextUpdate` of a good answer, and briefly when a method failed (its responder may be
/// back).
fn evidence_ttl(ttl: Duration, evidence: &PathEvidence, now: OffsetDateTime) -> Duration {
    let mut ttl = ttl;
    if let Some(until) = evidence.good_until() {
        ttl = ttl.min(Duration::try_from(until - now).unwrap_or(Duration::ZERO));
    }
    if evidence.has_failure() {
        ttl = ttl.min(FAILED_EVIDENCE_TTL);
    }
    ttl
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::check::{CaEvidence, MethodOutcome, RevocationEvidence};

    const NOW: OffsetDateTime = datetime!(2025-06-01 12:00 UTC);
    const WEEK: Duration = Duration::from_secs(7 * 24 * 3600);

    fn good(hours: i64) -> MethodOutcome {
        let next_update = NOW + time::Duration::hours(hours);
        crate::revocation::test_answers::crl_answer(NOW, next_update, false)
    }

    fn path(intermediate: RevocationEvidence) -> PathEvidence {
        PathEvidence {
            certificate: RevocationEvidence {
                crl: good(24),
                ocsp: good(24),
            },
            above: vec![CaEvidence {
                role: "intermediate CA",
                subject: "CN=Issuing CA".into(),
                fingerprint: [0; 32],
                evidence: intermediate,
            }],
            incomplete: None,
        }
    }

    #[test]
    fn a_cached_result_never_outlives_the_evidence_of_an_intermediate() {
        let evidence = path(RevocationEvidence {
            crl: good(2),
            ocsp: good(48),
        });
        assert_eq!(
            evidence_ttl(WEEK, &evidence, NOW),
            Duration::from_secs(2 * 3600)
        );
        let failed = path(RevocationEvidence {
            crl: good(48),
            ocsp: MethodOutcome::Failed {
                reason: "down".into(),
            },
        });
        assert_eq!(evidence_ttl(WEEK, &failed, NOW), FAILED_EVIDENCE_TTL);
    }
}
