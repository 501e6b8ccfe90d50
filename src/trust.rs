//! The trust list: which issuers are approved, by which source, for which jurisdictions and
//! certificate kinds, and since when.
//!
//! Issuers come from PEM files named in configuration, or from ETSI TS 119 612 trusted lists
//! ([`tsl`]). Every issuer is held as its parsed CA certificate, so matching a PSP
//! certificate to an issuer is by key (the issuer's public key, key identifiers as a hint),
//! never by name alone: see [`mod@crate::check`].
//!
//! A trusted list is used only after its XML signature ([`xmlsig`]) verifies, by a signer the
//! configuration pins for it ([`ListSigners`]); the verified tree is the one read.
//!
//! # What a trusted list says, honoured
//!
//! A trusted-list service becomes a [`TrustedIssuer`] whose [`Approval`] periods follow the
//! service's status history (ETSI TS 119 612 clauses 5.5 and 5.6). For a PSP certificate,
//! [`TrustedIssuer::approval_for`] judges the period in effect at the certificate's issuance:
//!
//! 1. The period must be active (`granted`, or a pre-eIDAS active status) and of type
//!    `…/Svctype/CA/QC`, compared exactly.
//! 2. A period whose `ServiceInformation` carries an extension marked critical that is not
//!    understood approves nothing (clause 5.5.9: a relying party "shall not use" service
//!    information with a critical extension it does not process). Understood are
//!    `AdditionalServiceInformation` and `Qualifications`; anything else is named in
//!    [`NotApproved::CriticalExtension`], noted once at load and logged as a warning.
//! 3. The kinds the period approves come from `AdditionalServiceInformation`: exactly
//!    `…/SvcInfoExt/ForWebSiteAuthentication` for web, `…/SvcInfoExt/ForeSeals` for seals
//!    (whole-URI equality, never a suffix).
//! 4. The period's `Qualifications` (clause 5.5.9.2) are applied to the certificate
//!    ([`qualifications`]): where a `QualificationElement`'s criteria select it, `QCForWSA`
//!    and `QCForESeal` replace the kinds of rule 3 for that certificate, `NotQualified`,
//!    `QCForESig` and an unknown qualifier refuse it, and the (Q)SCD, `QCStatement` and
//!    `QCForLegalPerson` qualifiers change nothing. Criteria that cannot be decided refuse
//!    the certificate when their qualifiers would matter.

pub mod cache;
pub mod lotl;
pub mod policy;
pub mod qualifications;
pub mod refresh;
pub mod tsl;
pub mod xmlsig;

pub use policy::{CertKind, QcCompliancePolicy, UntypedPolicy};

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::cert::{PspCertificate, input::decode_certificate_chain};
use crate::country::CountryCode;
use qualifications::{CertFacts, Qualification};

/// The `QTSPSource` values of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum QtspSource {
    /// A QTSP on an EU/EEA trusted list.
    #[serde(rename = "EIDAS")]
    Eidas,
    /// A QTSP approved directly by configuration.
    #[serde(rename = "QTSP")]
    Qtsp,
    /// The UK Open Banking directory.
    #[serde(rename = "OBIE")]
    Obie,
    /// An open-banking hub directory of a country or scheme.
    #[serde(rename = "OBHD")]
    Obhd,
}

impl QtspSource {
    pub fn as_str(&self) -> &'static str {
        match self {
            QtspSource::Eidas => "EIDAS",
            QtspSource::Qtsp => "QTSP",
            QtspSource::Obie => "OBIE",
            QtspSource::Obhd => "OBHD",
        }
    }

    /// Qualified schemes require QcCompliance and a QcType by default; directory schemes
    /// issue certificates without them.
    fn is_qualified_scheme(&self) -> bool {
        matches!(self, QtspSource::Eidas | QtspSource::Qtsp)
    }
}

impl fmt::Display for QtspSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A trust source with its rules, as loaded.
#[derive(Debug, Clone)]
pub struct Source {
    pub name: String,
    pub qtsp_source: QtspSource,
    /// The `QTSPJurisdiction` value reported for its certificates.
    pub reported_jurisdiction: String,
    /// Transaction jurisdictions its issuers are approved for.
    pub valid_for: BTreeSet<CountryCode>,
    pub qc_compliance: QcCompliancePolicy,
    pub untyped: UntypedPolicy,
}

/// A trust source to load, as the configuration (or `check --trust`) describes it, with its
/// file paths resolved and its jurisdictions expanded. Policies left `None` take the source
/// kind's default: required QcCompliance and rejecting untyped certificates for the
/// qualified schemes (`EIDAS`, `QTSP`), the opposite for the directory schemes.
#[derive(Debug, Clone)]
pub struct SourceSpec {
    pub name: String,
    pub qtsp_source: QtspSource,
    pub reported_jurisdiction: String,
    pub valid_for: BTreeSet<CountryCode>,
    pub qc_compliance: Option<QcCompliancePolicy>,
    pub untyped: Option<UntypedPolicy>,
    /// PEM files of CA certificates approved by the source, each with its kinds.
    pub issuers: Vec<IssuerFile>,
    /// ETSI TS 119 612 trusted-list files, each with who may have signed it.
    pub trusted_lists: Vec<TrustedListFile>,
    /// The EU list of the lists, whose national lists are read from the source's cache
    /// ([`cache`], filled by `trust fetch` and `serve`'s refresh).
    pub lotl: Option<LotlSpec>,
    /// How long after its `NextUpdate` a list is still used (clause 5.3.15; default 0).
    pub next_update_grace: time::Duration,
}

/// A list of the lists to follow, as configured.
#[derive(Debug, Clone)]
pub struct LotlSpec {
    /// Where the LOTL is fetched from: an `http(s)` URL or a local file.
    pub location: String,
    /// PEM files of the certificates pinned for the LOTL (as published in the Official
    /// Journal of the EU).
    pub signers: Vec<PathBuf>,
    /// SHA-256 fingerprints of more pinned certificates (the Official Journal prints them).
    pub signer_sha256: Vec<lotl::Fingerprint>,
    /// The territories whose lists are used (`None`: every list the LOTL points to).
    pub territories: Option<Vec<String>>,
    /// The directory under which the source's cache lives (the source's name is appended).
    pub cache_dir: PathBuf,
}

impl LotlSpec {
    /// This source's cache.
    pub fn cache(&self, source_name: &str) -> cache::SourceCache {
        cache::SourceCache::new(&self.cache_dir, source_name)
    }

    /// The pinned certificates' fingerprints: those of the PEM files, and those configured.
    pub fn pinned(&self, source_name: &str) -> Result<Vec<lotl::Fingerprint>, TrustLoadError> {
        let mut out = self.signer_sha256.clone();
        for f in &self.signers {
            let pem = read_capped(source_name, f)?;
            let ders = decode_certificate_chain(&pem).map_err(|e| TrustLoadError::Invalid {
                source_name: source_name.to_owned(),
                path: f.clone(),
                message: format!("LOTL signer file: {e}"),
            })?;
            out.extend(lotl::fingerprints(&ders));
        }
        if out.is_empty() {
            return Err(TrustLoadError::Invalid {
                source_name: source_name.to_owned(),
                path: self.signers.first().cloned().unwrap_or_default(),
                message: "no certificate pinned for the LOTL".to_owned(),
            });
        }
        Ok(out)
    }
}

/// What a list is to its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ListRole {
    /// A list of the lists.
    Lotl,
    /// A national list the LOTL points to.
    National,
    /// A list file named in configuration.
    Configured,
}

/// One list as the last load found it: used, or not and why. Shown by `config check`,
/// `trust status` and `/readyz`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListStatus {
    pub source: String,
    pub role: ListRole,
    pub territory: Option<String>,
    /// The file read.
    pub location: String,
    pub sequence_number: Option<u64>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub issue_date: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub next_update: Option<OffsetDateTime>,
    /// `NextUpdate` plus the grace: after this the list is not used.
    #[serde(with = "time::serde::rfc3339::option")]
    pub usable_until: Option<OffsetDateTime>,
    /// Who signed it, as `subject (SHA-256 …)`, and how the signer was authorised.
    pub signer: Option<String>,
    /// Why the list is not used; `None` when it is.
    pub problem: Option<String>,
    /// Services read from the list, and CA/QC issuers taken from them.
    pub services: usize,
    pub issuers: usize,
}

impl ListStatus {
    fn new(source: &str, role: ListRole, territory: Option<&str>, location: String) -> Self {
        ListStatus {
            source: source.to_owned(),
            role,
            territory: territory.map(str::to_owned),
            location,
            sequence_number: None,
            issue_date: None,
            next_update: None,
            usable_until: None,
            signer: None,
            problem: None,
            services: 0,
            issuers: 0,
        }
    }

    /// Fills in what the list says of itself, and refuses it if it is not fresh at `at`.
    fn judge(&mut self, list: &tsl::TrustedList, grace: time::Duration, at: OffsetDateTime) {
        self.sequence_number = list.sequence_number;
        self.issue_date = list.issue_date;
        self.next_update = list.next_update;
        self.usable_until = list.next_update.map(|n| n + grace);
        if self.problem.is_none() {
            self.problem = not_admissible(list, at).or_else(|| self.staleness(at));
        }
    }

    /// Why the list is not fresh at `now`, if it is not: past `NextUpdate` plus the grace,
    /// or closed (no `NextUpdate`, clause 5.3.15).
    pub fn staleness(&self, now: OffsetDateTime) -> Option<String> {
        match (self.next_update, self.usable_until) {
            (Some(next), Some(until)) if until < now => Some(format!(
                "past its NextUpdate ({}){}",
                rfc3339(next),
                if until > next {
                    format!(" and the grace (until {})", rfc3339(until))
                } else {
                    String::new()
                }
            )),
            (None, _) => Some(
                "no NextUpdate: a closed list (TS 119 612 clause 5.3.15) is not used".to_owned(),
            ),
            _ => None,
        }
    }

    /// Why the list is not used at `now`: the problem found at load, or staleness since.
    pub fn problem_at(&self, now: OffsetDateTime) -> Option<String> {
        self.problem.clone().or_else(|| self.staleness(now))
    }
}

/// How far a list's `ListIssueDateTime` may be ahead of our clock: five minutes, the clock
/// skew Kerberos tolerates by default (RFC 4120 section 1.1); hosts kept by NTP are within a
/// second. A list issued further in the future is not used (a list from the future is not
/// the one in force, and would outrank the real next one by its sequence number).
pub const MAX_CLOCK_SKEW: time::Duration = time::Duration::minutes(5);

/// Why a list cannot be used at `at` whatever its dates of freshness: no
/// `TSLSequenceNumber` (without it a replay cannot be told from a new list), or a
/// `ListIssueDateTime` more than [`MAX_CLOCK_SKEW`] after `at`. Applied at every load and
/// at every fetch ([`refresh`]).
pub fn not_admissible(list: &tsl::TrustedList, at: OffsetDateTime) -> Option<String> {
    if list.sequence_number.is_none() {
        return Some(
            "no TSLSequenceNumber (TS 119 612 clause 5.3.2): a replayed list could not be told from a new one, so the list is not used"
                .to_owned(),
        );
    }
    match list.issue_date {
        Some(issued) if issued > at + MAX_CLOCK_SKEW => Some(format!(
            "ListIssueDateTime {} is in the future (more than {} min after {}): not used",
            rfc3339(issued),
            MAX_CLOCK_SKEW.whole_minutes(),
            rfc3339(at)
        )),
        _ => None,
    }
}

/// A trusted-list file and the signers whose signature on it is accepted.
#[derive(Debug, Clone)]
pub struct TrustedListFile {
    pub path: PathBuf,
    pub signers: ListSigners,
}

/// Who may have signed a trusted list (ETSI TS 119 612 clause 5.7; [`xmlsig`]).
#[derive(Debug, Clone)]
pub enum ListSigners {
    /// PEM files of the certificates the operator authorises to sign the list (for a
    /// national list: the ones the EU list of lists names for its territory).
    Pinned(Vec<PathBuf>),
    /// Any signer whose signature verifies, reported at load: `check --trust`, the
    /// operator's explicit choice for an ad-hoc audit.
    AnyVerified,
    /// No signature required: `[danger] unsigned_trusted_lists`, logged at every load.
    Unsigned,
    /// The signers a list of the lists authorises for the list's territory; the LOTL
    /// `file` must be signed by one of the `signers` (PEM files) pinned for it
    /// (`check --lotl FILE --lotl-signer CERT`).
    Lotl {
        file: PathBuf,
        signers: Vec<PathBuf>,
    },
}

/// A PEM file of CA certificates and the kinds they are approved for.
#[derive(Debug, Clone)]
pub struct IssuerFile {
    pub path: PathBuf,
    pub kinds: Vec<CertKind>,
}

/// One approval period of an issuer: from `from` (inclusive) until the next newer period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// `None`: since always (issuers approved by configuration).
    pub from: Option<OffsetDateTime>,
    /// Whether the issuer was approved (TS 119 612 `granted`, or a pre-eIDAS active status).
    pub active: bool,
    /// Kinds approved in this period.
    pub kinds: BTreeSet<CertKind>,
    /// The status as the source wrote it, for explanations.
    pub status: String,
    /// The `Qualifications` of this period (TS 119 612 clause 5.5.9.2), applied per
    /// certificate by [`TrustedIssuer::approval_for`]; empty for configured issuers.
    pub qualifications: Vec<Qualification>,
    /// Critical extensions of this period that are not understood, as `{namespace}name`:
    /// while any is listed the period approves nothing (clause 5.5.9).
    pub not_understood: Vec<String>,
}

/// What an issuer's approval in effect at a certificate's issuance grants that certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalFor {
    /// The kinds approved for this certificate: the period's kinds, or those its
    /// `Qualifications` decide for the certificate.
    pub kinds: BTreeSet<CertKind>,
    /// The status as the source wrote it.
    pub status: String,
}

/// Why an issuer does not approve a certificate (jurisdiction, kind and QC rules aside,
/// which are the checker's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotApproved {
    #[error("the service had no status at the certificate's issuance ({at})")]
    NoStatus { at: OffsetDateTime },
    #[error("the service was `{status}` at the certificate's issuance ({at})")]
    Inactive { status: String, at: OffsetDateTime },
    #[error(
        "service extension {extension} is critical and not understood, so the service is not used for its status at the certificate's issuance ({at})"
    )]
    CriticalExtension {
        extension: String,
        at: OffsetDateTime,
    },
    #[error("{0}")]
    Qualification(#[from] qualifications::Refusal),
    /// The list the issuer comes from (or the LOTL that authorised it) is past its
    /// `NextUpdate` plus the grace at the time of the check: judged at every decision from
    /// the snapshot's own dates, whether or not a refresh has run since.
    #[error(
        "{list} is past its NextUpdate ({next_update}){grace}: its issuers approve nothing until a fresh list is loaded",
        next_update = rfc3339(*next_update),
        grace = if until > next_update { format!(" and the grace (until {})", rfc3339(*until)) } else { String::new() }
    )]
    ListStale {
        /// `trusted list CZ (…/lists/CZ.xml)`, or the LOTL's.
        list: String,
        next_update: OffsetDateTime,
        until: OffsetDateTime,
    },
}

/// Until when the issuers of one list may be used: the list's `NextUpdate` plus the grace,
/// or the LOTL's that authorised it, whichever comes first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListDeadline {
    /// The list whose date this is, for the refusal.
    pub list: String,
    pub next_update: OffsetDateTime,
    /// `next_update` plus the grace: after this instant the list approves nothing.
    pub until: OffsetDateTime,
}

impl ListDeadline {
    /// The deadline of a list as its status records it (`None` for a list without
    /// `NextUpdate`, which is never used).
    fn of(status: &ListStatus) -> Option<ListDeadline> {
        let list = match (status.role, status.territory.as_deref()) {
            (ListRole::Lotl, _) => format!("the LOTL ({})", status.location),
            (_, Some(t)) => format!("trusted list {t} ({})", status.location),
            (_, None) => format!("trusted list {}", status.location),
        };
        Some(ListDeadline {
            list,
            next_update: status.next_update?,
            until: status.usable_until?,
        })
    }

    /// The earlier of two deadlines.
    fn earliest(self, other: Option<&ListDeadline>) -> ListDeadline {
        match other {
            Some(o) if o.until < self.until => o.clone(),
            _ => self,
        }
    }
}

/// An approved issuer: its CA certificate, its source and its approval history.
#[derive(Debug, Clone)]
pub struct TrustedIssuer {
    /// Index into [`TrustList::sources`].
    pub source: usize,
    pub certificate: PspCertificate,
    /// Where it came from (file, or trusted-list service name), for explanations.
    pub origin: String,
    /// Newest first.
    pub history: Vec<Approval>,
}

impl TrustedIssuer {
    /// The approval period in effect at `t`.
    pub fn approval_at(&self, t: OffsetDateTime) -> Option<&Approval> {
        self.history
            .iter()
            .find(|a| a.from.is_none_or(|from| from <= t))
    }

    /// What the approval in effect at `at` (the certificate's issuance) grants `cert`: the
    /// rules of the [module documentation](self).
    pub fn approval_for(
        &self,
        cert: &PspCertificate,
        at: OffsetDateTime,
    ) -> Result<ApprovalFor, NotApproved> {
        let a = self.approval_at(at).ok_or(NotApproved::NoStatus { at })?;
        if !a.active {
            return Err(NotApproved::Inactive {
                status: a.status.clone(),
                at,
            });
        }
        if let Some(extension) = a.not_understood.first() {
            return Err(NotApproved::CriticalExtension {
                extension: extension.clone(),
                at,
            });
        }
        let decided = qualifications::evaluate(&a.qualifications, &CertFacts::of(cert))?;
        Ok(ApprovalFor {
            kinds: decided.unwrap_or_else(|| a.kinds.clone()),
            status: a.status.clone(),
        })
    }
}

/// The loaded trust list: an immutable snapshot.
#[derive(Debug, Clone, Default)]
pub struct TrustList {
    sources: Vec<Source>,
    issuers: Vec<TrustedIssuer>,
    /// Per issuer (same index), until when the list it came from may be used; `None` for
    /// issuers approved by configuration.
    deadlines: Vec<Option<ListDeadline>>,
    /// What loading passed over (trusted-list services that are not CA/QC, undecodable
    /// entries), for `config check` and logs.
    notes: Vec<String>,
    /// Every trusted list and LOTL met, used or not.
    lists: Vec<ListStatus>,
}

/// Why the trust list could not be loaded. Nothing is half-loaded: any error rejects the
/// whole snapshot.
#[derive(Debug, thiserror::Error)]
pub enum TrustLoadError {
    #[error("trust source `{source_name}`: cannot read {path}: {error}")]
    Read {
        source_name: String,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("trust source `{source_name}`: {path}: {message}")]
    Invalid {
        source_name: String,
        path: PathBuf,
        message: String,
    },
}

/// The TS 119 612 service type of a CA issuing qualified certificates.
const SERVICE_TYPE_CA_QC: &str = "http://uri.etsi.org/TrstSvc/Svctype/CA/QC";

/// Upper bound on one trust file read into memory: the largest national trusted list is a few
/// MiB (the 2019 CZ list is 640 KB); 32 MiB leaves room without letting a wrong path (a disk
/// image, say) exhaust memory.
const MAX_TRUST_FILE_BYTES: u64 = 32 * 1024 * 1024;

impl TrustList {
    /// Loads every source, judging the lists' freshness at `at` (now, or the time an audit
    /// asks about). A configuration error (a file that cannot be read, a list whose signature
    /// fails) refuses the whole load; a list that is stale, or a LOTL national list not
    /// fetched or refused, is recorded in [`TrustList::lists`] and not used.
    pub fn load(sources: &[SourceSpec], at: OffsetDateTime) -> Result<TrustList, TrustLoadError> {
        let mut list = TrustList::default();
        for source in sources {
            list.add_source(source, at)?;
        }
        for status in &list.lists {
            if let Some(problem) = &status.problem {
                tracing::warn!(
                    source = %status.source,
                    list = %status.location,
                    territory = status.territory.as_deref().unwrap_or(""),
                    %problem,
                    "trusted list not used"
                );
            }
        }
        Ok(list)
    }

    /// A trust list from parts already built (tests, and loaders of other formats).
    /// Each issuer's `source` must index into `sources`.
    pub fn new(sources: Vec<Source>, issuers: Vec<TrustedIssuer>) -> TrustList {
        assert!(
            issuers.iter().all(|i| i.source < sources.len()),
            "every issuer names one of the sources"
        );
        TrustList {
            sources,
            deadlines: vec![None; issuers.len()],
            issuers,
            notes: Vec::new(),
            lists: Vec::new(),
        }
    }

    pub fn sources(&self) -> &[Source] {
        &self.sources
    }

    pub fn issuers(&self) -> &[TrustedIssuer] {
        &self.issuers
    }

    /// Until when the list trust-list issuer `issuer` came from may be used (`None`: an
    /// issuer approved by configuration, always).
    pub fn deadline(&self, issuer: usize) -> Option<&ListDeadline> {
        self.deadlines.get(issuer).and_then(Option::as_ref)
    }

    /// Whether the list that issuer `issuer` came from is still usable at `now` (its
    /// `NextUpdate` plus the grace, and its LOTL's, not passed): the decision-time half of
    /// freshness, which does not wait for a refresh or a reload.
    pub fn fresh_at(&self, issuer: usize, now: OffsetDateTime) -> Result<(), NotApproved> {
        match self.deadline(issuer) {
            Some(d) if d.until < now => Err(NotApproved::ListStale {
                list: d.list.clone(),
                next_update: d.next_update,
                until: d.until,
            }),
            _ => Ok(()),
        }
    }

    /// How long an approval by issuer `issuer` made at `now` may be reused: until its list's
    /// deadline, not an instant beyond; unbounded for an issuer approved by configuration.
    pub fn approval_ttl(&self, issuer: usize, now: OffsetDateTime) -> std::time::Duration {
        match self.deadline(issuer) {
            Some(d) => {
                std::time::Duration::try_from(d.until - now).unwrap_or(std::time::Duration::ZERO)
            }
            None => std::time::Duration::MAX,
        }
    }

    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Every trusted list and LOTL the load met, used or not.
    pub fn lists(&self) -> &[ListStatus] {
        &self.lists
    }

    /// `source: list: why` for every list not usable at `now`.
    pub fn list_problems(&self, now: OffsetDateTime) -> Vec<String> {
        self.lists
            .iter()
            .filter_map(|l| {
                l.problem_at(now).map(|p| {
                    format!(
                        "trust source `{}`: {} {}: {p}",
                        l.source,
                        l.territory.as_deref().unwrap_or("list"),
                        l.location
                    )
                })
            })
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.issuers.is_empty()
    }

    fn add_source(&mut self, sc: &SourceSpec, at: OffsetDateTime) -> Result<(), TrustLoadError> {
        let qualified = sc.qtsp_source.is_qualified_scheme();
        let index = self.sources.len();
        self.sources.push(Source {
            name: sc.name.clone(),
            qtsp_source: sc.qtsp_source,
            reported_jurisdiction: sc.reported_jurisdiction.clone(),
            valid_for: sc.valid_for.clone(),
            qc_compliance: sc.qc_compliance.unwrap_or(if qualified {
                QcCompliancePolicy::Required
            } else {
                QcCompliancePolicy::Optional
            }),
            untyped: sc.untyped.unwrap_or(if qualified {
                UntypedPolicy::Reject
            } else {
                UntypedPolicy::Accept
            }),
        });
        for issuer in &sc.issuers {
            let path = issuer.path.clone();
            let bytes = read_capped(&sc.name, &path)?;
            let invalid = |message: String| TrustLoadError::Invalid {
                source_name: sc.name.clone(),
                path: path.clone(),
                message,
            };
            let ders = decode_certificate_chain(&bytes).map_err(|e| invalid(e.to_string()))?;
            for der in ders {
                let certificate =
                    PspCertificate::from_der(der).map_err(|e| invalid(e.to_string()))?;
                if certificate.is_ca != Some(true) {
                    return Err(invalid(format!(
                        "{} is not a CA certificate (basicConstraints cA is not true)",
                        certificate.subject
                    )));
                }
                self.deadlines.push(None);
                self.issuers.push(TrustedIssuer {
                    source: index,
                    certificate,
                    origin: path.display().to_string(),
                    history: vec![Approval {
                        from: None,
                        active: true,
                        kinds: issuer.kinds.iter().copied().collect(),
                        status: "approved by configuration".to_owned(),
                        qualifications: Vec::new(),
                        not_understood: Vec::new(),
                    }],
                });
            }
        }
        for tl in &sc.trusted_lists {
            let path = tl.path.clone();
            let bytes = read_capped(&sc.name, &path)?;
            let invalid = |message: String| TrustLoadError::Invalid {
                source_name: sc.name.clone(),
                path: path.clone(),
                message,
            };
            // One tree: the document whose signature is verified is the one read.
            let doc = xmlsig::parse_document(&bytes).map_err(|e| invalid(e.to_string()))?;
            // For a list authorised through a LOTL: whether that LOTL is usable at `at`, and
            // until when (a stale LOTL disables its lists, as for a LOTL source).
            let mut through_lotl: Option<(Option<String>, Option<ListDeadline>)> = None;
            // The signer verified here, whose validity at the list's issue is judged below.
            let mut verified_signer: Option<PspCertificate> = None;
            let signer = match &tl.signers {
                ListSigners::Unsigned => {
                    tracing::warn!(
                        path = %path.display(),
                        "trusted list loaded WITHOUT signature verification ([danger] unsigned_trusted_lists)"
                    );
                    "NOT VERIFIED ([danger] unsigned_trusted_lists)".to_owned()
                }
                ListSigners::Pinned(signer_files) => {
                    let verified = xmlsig::verify(&doc)
                        .map_err(|e| invalid(format!("signature refused: {e}")))?;
                    let mut pinned = Vec::new();
                    for f in signer_files {
                        let pem = read_capped(&sc.name, f)?;
                        pinned.extend(
                            decode_certificate_chain(&pem).map_err(|e| {
                                invalid(format!("signer file {}: {e}", f.display()))
                            })?,
                        );
                    }
                    if !pinned.contains(&verified.signer.der) {
                        return Err(invalid(format!(
                            "signed by {} (SHA-256 {}), which is not among the signers configured for it",
                            verified.signer.subject,
                            verified.signer.fingerprint_hex()
                        )));
                    }
                    let label = format!(
                        "signature verified, signer {} (SHA-256 {}) pinned",
                        verified.signer.subject,
                        verified.signer.fingerprint_hex()
                    );
                    verified_signer = Some(verified.signer);
                    label
                }
                ListSigners::Lotl { file, signers } => {
                    let spec = LotlSpec {
                        location: file.display().to_string(),
                        signers: signers.clone(),
                        signer_sha256: Vec::new(),
                        territories: None,
                        cache_dir: PathBuf::new(),
                    };
                    let pinned = spec.pinned(&sc.name)?;
                    let lotl_bytes = read_capped(&sc.name, file)?;
                    let lotl = lotl::verify_lotl(&lotl_bytes, &pinned, &[]).map_err(|e| {
                        TrustLoadError::Invalid {
                            source_name: sc.name.clone(),
                            path: file.clone(),
                            message: e,
                        }
                    })?;
                    let territory = tsl::read_document(&doc)
                        .map_err(|e| invalid(e.to_string()))?
                        .territory;
                    let signed = lotl::verify_national(&lotl.lotl.list, &territory, &bytes)
                        .map_err(invalid)?;
                    let mut lotl_status = ListStatus::new(
                        &sc.name,
                        ListRole::Lotl,
                        Some("EU"),
                        file.display().to_string(),
                    );
                    lotl_status.signer = Some(format!("{}, pinned", lotl.lotl.signer_label()));
                    lotl_status.judge(&lotl.lotl.list, sc.next_update_grace, at);
                    through_lotl =
                        Some((lotl_status.problem.clone(), ListDeadline::of(&lotl_status)));
                    self.lists.push(lotl_status);
                    format!(
                        "signature verified, signer {}, authorised for {territory} by the LOTL {} (sequence {}, signed by {})",
                        signed.signer_label(),
                        file.display(),
                        lotl.lotl
                            .list
                            .sequence_number
                            .map(|n| n.to_string())
                            .unwrap_or_default(),
                        lotl.lotl.signer_label()
                    )
                }
                ListSigners::AnyVerified => {
                    let verified = xmlsig::verify(&doc)
                        .map_err(|e| invalid(format!("signature refused: {e}")))?;
                    let label = format!(
                        "signature verified, signer {} (SHA-256 {}) accepted as the operator's explicit choice (no LOTL authorises it here)",
                        verified.signer.subject,
                        verified.signer.fingerprint_hex()
                    );
                    verified_signer = Some(verified.signer);
                    label
                }
            };
            self.notes.push(format!("{}: {signer}", path.display()));
            let list = tsl::read_document(&doc).map_err(|e| invalid(e.to_string()))?;
            if let Some(signer) = &verified_signer {
                lotl::signer_valid_at_issue(&list, signer).map_err(invalid)?;
            }
            let mut status = ListStatus::new(
                &sc.name,
                ListRole::Configured,
                Some(&list.territory),
                path.display().to_string(),
            );
            status.signer = Some(signer);
            let lotl_deadline = match through_lotl {
                Some((Some(problem), _)) => {
                    status.problem = Some(format!(
                        "the LOTL that authorises it is not used: {problem}"
                    ));
                    None
                }
                Some((None, deadline)) => deadline,
                None => None,
            };
            self.use_list(
                index,
                status,
                &list,
                sc.next_update_grace,
                at,
                lotl_deadline.as_ref(),
            );
        }
        if let Some(lotl) = &sc.lotl {
            self.add_lotl(index, sc, lotl, at)?;
        }
        Ok(())
    }

    /// Adds the list's issuers unless it is stale at `at`, and records its status. Its
    /// issuers carry the list's deadline, or `lotl`'s (the LOTL that authorised it) when that
    /// comes first.
    fn use_list(
        &mut self,
        source: usize,
        mut status: ListStatus,
        list: &tsl::TrustedList,
        grace: time::Duration,
        at: OffsetDateTime,
        lotl: Option<&ListDeadline>,
    ) {
        status.judge(list, grace, at);
        status.services = list.services.len();
        if status.problem.is_none() {
            // A used list has a NextUpdate (a list without one is refused by `judge`).
            if let Some(deadline) = ListDeadline::of(&status) {
                let deadline = deadline.earliest(lotl);
                status.issuers =
                    self.add_trusted_list(source, Path::new(&status.location), list, &deadline);
            }
        }
        self.lists.push(status);
    }

    /// A LOTL source: the LOTL from the cache, verified against the pinned certificates
    /// (through the stored pivots when needed), then each national list it points to, from
    /// the cache, verified against its pointer. What is missing or refused is recorded,
    /// not used, and does not stop the rest.
    fn add_lotl(
        &mut self,
        index: usize,
        sc: &SourceSpec,
        spec: &LotlSpec,
        at: OffsetDateTime,
    ) -> Result<(), TrustLoadError> {
        let pinned = spec.pinned(&sc.name)?;
        let cache = spec.cache(&sc.name);
        let cache_err = |path: PathBuf, error: std::io::Error| TrustLoadError::Read {
            source_name: sc.name.clone(),
            path,
            error,
        };
        let mut status = ListStatus::new(
            &sc.name,
            ListRole::Lotl,
            Some("EU"),
            cache.lotl_path().display().to_string(),
        );
        let Some(bytes) = cache
            .read_lotl()
            .map_err(|e| cache_err(cache.lotl_path(), e))?
        else {
            status.problem = Some(format!(
                "no LOTL fetched yet from {} (run `psp-gateway trust fetch`, or wait for serve's first refresh)",
                spec.location
            ));
            self.lists.push(status);
            return Ok(());
        };
        let pivots = cache
            .read_pivots()
            .map_err(|e| cache_err(cache.dir().to_owned(), e))?;
        let verified = match lotl::verify_lotl(&bytes, &pinned, &pivots) {
            Ok(v) => v,
            Err(e) => {
                status.problem = Some(e);
                self.lists.push(status);
                return Ok(());
            }
        };
        // The highest sequence numbers accepted so far: a stored document below them is an
        // older genuine one put in place of the last accepted (cache::rollback).
        let record = match cache.read_sequences() {
            Ok(r) => r,
            Err(e) => {
                status.problem = Some(format!(
                    "the sequence record cannot be read ({e}); no list of this source is used"
                ));
                self.lists.push(status);
                return Ok(());
            }
        };
        status.problem =
            cache::rollback(&record, cache::LOTL_KEY, verified.lotl.list.sequence_number);
        status.signer = Some(if verified.pivots_followed.is_empty() {
            format!("{}, pinned", verified.lotl.signer_label())
        } else {
            format!(
                "{}, through pivots {}",
                verified.lotl.signer_label(),
                verified.pivots_followed.join(", ")
            )
        });
        status.judge(&verified.lotl.list, sc.next_update_grace, at);
        let lotl_usable = status.problem.is_none();
        let lotl_deadline = ListDeadline::of(&status);
        self.lists.push(status);
        let lotl = &verified.lotl.list;
        for pointer in lotl::national_pointers(lotl, spec.territories.as_deref()) {
            let t = pointer.territory.as_str();
            let path = cache.list_path(t);
            let mut status = ListStatus::new(
                &sc.name,
                ListRole::National,
                Some(t),
                path.as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| pointer.location.clone()),
            );
            if !lotl_usable {
                status.problem = Some("the LOTL that authorises it is not used".to_owned());
                self.lists.push(status);
                continue;
            }
            let bytes = match cache.read_list(t) {
                Ok(Some(b)) => b,
                Ok(None) if path.is_none() => {
                    status.problem = Some(format!("territory {t:?} is not a two-letter code"));
                    self.lists.push(status);
                    continue;
                }
                Ok(None) => {
                    status.problem = Some(format!("not fetched yet from {}", pointer.location));
                    self.lists.push(status);
                    continue;
                }
                Err(e) => {
                    status.problem = Some(format!("cannot read the cached list: {e}"));
                    self.lists.push(status);
                    continue;
                }
            };
            match lotl::verify_national(lotl, t, &bytes) {
                Ok(signed) => {
                    status.signer = Some(format!(
                        "{}, authorised by the LOTL for {t}",
                        signed.signer_label()
                    ));
                    status.problem = cache::rollback(&record, t, signed.list.sequence_number);
                    self.use_list(
                        index,
                        status,
                        &signed.list,
                        sc.next_update_grace,
                        at,
                        lotl_deadline.as_ref(),
                    );
                }
                Err(e) => {
                    status.problem = Some(e);
                    self.lists.push(status);
                }
            }
        }
        if let Some(wanted) = &spec.territories {
            for t in wanted {
                if !self.lists.iter().any(|l| {
                    l.source == sc.name
                        && l.role == ListRole::National
                        && l.territory.as_deref() == Some(t)
                }) {
                    let mut status =
                        ListStatus::new(&sc.name, ListRole::National, Some(t), String::new());
                    status.problem = Some(format!("the LOTL points to no XML list for {t}"));
                    self.lists.push(status);
                }
            }
        }
        Ok(())
    }

    fn push_issuer(&mut self, deadline: ListDeadline, issuer: TrustedIssuer) {
        self.deadlines.push(Some(deadline));
        self.issuers.push(issuer);
    }

    /// Adds the CA/QC services of `list` as issuers; returns how many were added.
    fn add_trusted_list(
        &mut self,
        source: usize,
        path: &Path,
        list: &tsl::TrustedList,
        deadline: &ListDeadline,
    ) -> usize {
        let before = self.issuers.len();
        for skipped in &list.skipped {
            self.notes.push(format!("{}: {skipped}", path.display()));
        }
        let mut other_services = 0usize;
        let mut qualified_services = 0usize;
        for service in &list.services {
            // Only services that issue qualified certificates can vouch for a QWAC or a
            // QSealC; a service's type may change over its history, so the type is judged
            // per period below, and a service that never was CA/QC is passed over here.
            if !service
                .history
                .iter()
                .any(|p| p.service_type == SERVICE_TYPE_CA_QC)
            {
                other_services += 1;
                continue;
            }
            let history: Vec<Approval> = service
                .history
                .iter()
                .map(|p| {
                    // `kinds()` compares the whole URIs (tsl::uri), never a suffix.
                    let offered = p.kinds();
                    let mut kinds = BTreeSet::new();
                    if offered.web {
                        kinds.insert(CertKind::Web);
                    }
                    if offered.seal {
                        kinds.insert(CertKind::Seal);
                    }
                    Approval {
                        from: Some(p.starting),
                        active: p.status.is_active() && p.service_type == SERVICE_TYPE_CA_QC,
                        kinds,
                        status: status_name(&p.status),
                        qualifications: p.qualifications.clone(),
                        not_understood: p.unread_critical_extensions.clone(),
                    }
                })
                .collect();
            if history.iter().any(|a| !a.qualifications.is_empty()) {
                qualified_services += 1;
            }
            let unusable: Vec<String> = service
                .history
                .iter()
                .filter(|p| !p.unread_critical_extensions.is_empty())
                .map(|p| {
                    format!(
                        "from {}: {}",
                        p.starting,
                        p.unread_critical_extensions.join(", ")
                    )
                })
                .collect();
            if !unusable.is_empty() {
                // Logged here, once per load, rather than at every check it refuses.
                tracing::warn!(
                    trusted_list = %path.display(),
                    service = %service.service_name,
                    periods = unusable.len(),
                    "trusted-list service carries critical extensions that are not understood; \
                     it is not used for those periods"
                );
                self.notes.push(format!(
                    "{}: service `{}`: critical extensions not understood, the service is not \
                     used for these periods (TS 119 612 clause 5.5.9): {}",
                    path.display(),
                    service.service_name,
                    unusable.join("; ")
                ));
            }
            for der in &service.certificates {
                match PspCertificate::from_der(der.clone()) {
                    Ok(certificate) => self.push_issuer(
                        deadline.clone(),
                        TrustedIssuer {
                            source,
                            certificate,
                            origin: format!(
                                "{} (TL {}): {}",
                                path.display(),
                                list.territory,
                                service.service_name
                            ),
                            history: history.clone(),
                        },
                    ),
                    Err(e) => self.notes.push(format!(
                        "{}: service `{}`: certificate passed over: {e}",
                        path.display(),
                        service.service_name
                    )),
                }
            }
        }
        if qualified_services > 0 {
            self.notes.push(format!(
                "{}: {qualified_services} CA/QC services carry Qualifications, applied to each \
                 certificate they select",
                path.display()
            ));
        }
        if other_services > 0 {
            self.notes.push(format!(
                "{}: {other_services} services that never were CA/QC passed over",
                path.display()
            ));
        }
        self.issuers.len() - before
    }
}

/// A time as RFC 3339, for messages.
pub fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| t.to_string())
}

fn status_name(s: &tsl::ServiceStatus) -> String {
    match s {
        tsl::ServiceStatus::Other(uri) => uri.clone(),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// Reads a trust file (a list, a LOTL, a pinned signer) through a bounded reader, so that a
/// pipe or a device (whose `metadata` says 0 bytes) is refused at the limit too.
fn read_capped(source_name: &str, path: &Path) -> Result<Vec<u8>, TrustLoadError> {
    use crate::bounded::{BoundedReadError, read_file};
    read_file(path, MAX_TRUST_FILE_BYTES, "a trust file").map_err(|e| match e {
        BoundedReadError::Io(error) => TrustLoadError::Read {
            source_name: source_name.to_owned(),
            path: path.to_owned(),
            error,
        },
        too_large @ BoundedReadError::TooLarge { .. } => TrustLoadError::Invalid {
            source_name: source_name.to_owned(),
            path: path.to_owned(),
            message: too_large.to_string(),
        },
    })
}

#[cfg(test)]
mod tests;
