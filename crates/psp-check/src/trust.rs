//! The trust list: which issuers are approved, by which source, for which jurisdictions and
//! certificate kinds, and since when.
//!
//! Issuers come from PEM files named in configuration, or from ETSI TS 119 612 trusted lists
//! ([`tsl`]). Every issuer is held as its parsed CA certificate, so matching a PSP
//! certificate to an issuer is by key (the issuer's public key, key identifiers as a hint),
//! never by name alone: see [`mod@crate::check`].
//!
//! A trusted list is used only after its XML signature ([`xmlsig`]) verifies, by a signer the
//! configuration pins for it (`psp_service::trust::ListSigners`); the verified tree is the one read.
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

pub mod lotl;
pub mod policy;
pub mod qualifications;
pub mod tsl;
pub mod xmlsig;

pub use policy::{CertKind, QcCompliancePolicy, UntypedPolicy};

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::cert::PspCertificate;
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
    /// The source kind as serialised and displayed: `EIDAS`, `QTSP`, `OBIE` or `OBHD`.
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
    pub fn is_qualified_scheme(&self) -> bool {
        matches!(self, QtspSource::Eidas | QtspSource::Qtsp)
    }

    /// The policies a source of this kind takes when its configuration sets none: a qualified
    /// scheme requires QcCompliance and rejects certificates without a QcType; a directory
    /// scheme accepts both.
    pub fn default_policies(&self) -> (QcCompliancePolicy, UntypedPolicy) {
        if self.is_qualified_scheme() {
            (QcCompliancePolicy::Required, UntypedPolicy::Reject)
        } else {
            (QcCompliancePolicy::Optional, UntypedPolicy::Accept)
        }
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
    /// The source's name, as configured.
    pub name: String,
    /// The kind of scheme the source is (eIDAS, QTSP, OBIE or OBHD).
    pub qtsp_source: QtspSource,
    /// The `QTSPJurisdiction` value reported for its certificates.
    pub reported_jurisdiction: String,
    /// Transaction jurisdictions its issuers are approved for.
    pub valid_for: BTreeSet<CountryCode>,
    /// Whether the certificates its issuers approve must carry the QcCompliance statement.
    pub qc_compliance: QcCompliancePolicy,
    /// What it does with certificates that carry no QcType web or eseal.
    pub untyped: UntypedPolicy,
}

impl Source {
    /// A source whose issuers the embedder approves itself (PEM files, as `serve`'s
    /// `issuers`), for the transaction jurisdictions `valid_for`, reporting the first as its
    /// `QTSPJurisdiction`, with the policies its scheme kind takes by default
    /// ([`QtspSource::default_policies`]).
    pub fn configured(name: &str, qtsp_source: QtspSource, valid_for: &[CountryCode]) -> Source {
        let (qc_compliance, untyped) = qtsp_source.default_policies();
        Source {
            name: name.to_owned(),
            qtsp_source,
            reported_jurisdiction: valid_for
                .first()
                .map_or_else(String::new, |c| c.as_str().to_owned()),
            valid_for: valid_for.iter().copied().collect(),
            qc_compliance,
            untyped,
        }
    }
}

/// Why CA certificates could not be added from PEM ([`TrustList::add_pem_issuers`]).
#[derive(Debug, thiserror::Error)]
pub enum PemIssuerError {
    /// The bytes are not a certificate chain (PEM or DER), or a certificate does not parse.
    #[error("{0}")]
    Unreadable(#[from] crate::cert::CertError),
    /// A certificate is not a CA's: an issuer must be.
    #[error("{subject} is not a CA certificate (basicConstraints cA is not true)")]
    NotCa {
        /// The certificate's subject.
        subject: String,
    },
    /// The source index names no source of the trust list.
    #[error("trust source {source_index} does not exist (the list has {sources})")]
    NoSuchSource {
        /// The index given.
        source_index: usize,
        /// How many sources the list has.
        sources: usize,
    },
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
    /// The name of the trust source the list belongs to.
    pub source: String,
    /// What the list is to its source: the LOTL, a national list or a configured file.
    pub role: ListRole,
    /// The territory the list is for (`CZ`, …), when known.
    pub territory: Option<String>,
    /// The file read.
    pub location: String,
    /// The list's `TSLSequenceNumber` (TS 119 612 clause 5.3.2), once read.
    pub sequence_number: Option<u64>,
    /// The list's `ListIssueDateTime` (TS 119 612 clause 5.3.14), once read.
    #[serde(with = "time::serde::rfc3339::option")]
    pub issue_date: Option<OffsetDateTime>,
    /// The list's `NextUpdate` (TS 119 612 clause 5.3.15); `None` for a closed or unread list.
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
    /// The CA/QC issuers taken from those services.
    pub issuers: usize,
}

impl ListStatus {
    /// A list met by a load, with nothing known of it yet.
    pub fn new(source: &str, role: ListRole, territory: Option<&str>, location: String) -> Self {
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
    pub fn judge(&mut self, list: &tsl::TrustedList, grace: time::Duration, at: OffsetDateTime) {
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
/// at every fetch (`psp_service::trust::refresh`).
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
    /// The service had no status in effect at the certificate's issuance.
    #[error("the service had no status at the certificate's issuance ({at})")]
    NoStatus {
        /// The certificate's issuance.
        at: OffsetDateTime,
    },
    /// The service's status at the certificate's issuance did not approve it.
    #[error("the service was `{status}` at the certificate's issuance ({at})")]
    Inactive {
        /// The status as the source wrote it.
        status: String,
        /// The certificate's issuance.
        at: OffsetDateTime,
    },
    /// A critical extension of the service's status period is not understood (clause 5.5.9).
    #[error(
        "service extension {extension} is critical and not understood, so the service is not used for its status at the certificate's issuance ({at})"
    )]
    CriticalExtension {
        /// The extension, as `{namespace}name`.
        extension: String,
        /// The certificate's issuance.
        at: OffsetDateTime,
    },
    /// The service's `Qualifications` (TS 119 612 clause 5.5.9.2) refuse the certificate.
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
        /// The list's `NextUpdate`.
        next_update: OffsetDateTime,
        /// `next_update` plus the grace, which the check is past.
        until: OffsetDateTime,
    },
}

/// Until when the issuers of one list may be used: the list's `NextUpdate` plus the grace,
/// or the LOTL's that authorised it, whichever comes first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListDeadline {
    /// The list whose date this is, for the refusal.
    pub list: String,
    /// The list's `NextUpdate`.
    pub next_update: OffsetDateTime,
    /// `next_update` plus the grace: after this instant the list approves nothing.
    pub until: OffsetDateTime,
}

impl ListDeadline {
    /// The deadline of a list as its status records it (`None` for a list without
    /// `NextUpdate`, which is never used).
    pub fn of(status: &ListStatus) -> Option<ListDeadline> {
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
    pub fn earliest(self, other: Option<&ListDeadline>) -> ListDeadline {
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
    /// The issuer's CA certificate.
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
    /// Which trust list this is, renewed by every change to its sources or issuers: an
    /// [`crate::check::IssuerResolution`] is used only with the list it was made against.
    id: u64,
}

/// A new trust-list identity ([`TrustList::id`]).
fn next_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The TS 119 612 service type of a CA issuing qualified certificates.
const SERVICE_TYPE_CA_QC: &str = "http://uri.etsi.org/TrstSvc/Svctype/CA/QC";

impl TrustList {
    /// A trust list from parts already built (tests, and loaders of other formats). Each
    /// issuer's `source` must index into `sources`.
    pub fn new(
        sources: Vec<Source>,
        issuers: Vec<TrustedIssuer>,
    ) -> Result<TrustList, PemIssuerError> {
        if let Some(bad) = issuers.iter().find(|i| i.source >= sources.len()) {
            return Err(PemIssuerError::NoSuchSource {
                source_index: bad.source,
                sources: sources.len(),
            });
        }
        Ok(TrustList {
            sources,
            deadlines: vec![None; issuers.len()],
            issuers,
            notes: Vec::new(),
            lists: Vec::new(),
            id: next_id(),
        })
    }

    /// This trust list's identity: changes whenever a source or an issuer is added.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The trust sources, which [`TrustedIssuer::source`] indexes into.
    pub fn sources(&self) -> &[Source] {
        &self.sources
    }

    /// The approved issuers, from every source.
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

    /// What loading passed over (services that are not CA/QC, undecodable entries), for logs.
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

    /// Whether the trust list approves no issuer at all.
    pub fn is_empty(&self) -> bool {
        self.issuers.is_empty()
    }

    /// Adds the list's issuers unless it is stale at `at`, and records its status. Its
    /// issuers carry the list's deadline, or `lotl`'s (the LOTL that authorised it) when that
    /// comes first.
    pub fn use_list(
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
                status.issuers = self.add_trusted_list(source, &status.location, list, &deadline);
            }
        }
        self.lists.push(status);
    }

    /// Adds a source; returns its index, which its issuers name.
    pub fn add_source(&mut self, source: Source) -> usize {
        self.id = next_id();
        self.sources.push(source);
        self.sources.len() - 1
    }

    /// Adds an issuer approved by configuration: no list, so no deadline.
    pub fn push_configured_issuer(&mut self, issuer: TrustedIssuer) -> Result<(), PemIssuerError> {
        self.source_exists(issuer.source)?;
        self.id = next_id();
        self.deadlines.push(None);
        self.issuers.push(issuer);
        Ok(())
    }

    fn source_exists(&self, source: usize) -> Result<(), PemIssuerError> {
        match source < self.sources.len() {
            true => Ok(()),
            false => Err(PemIssuerError::NoSuchSource {
                source_index: source,
                sources: self.sources.len(),
            }),
        }
    }

    /// A trust list of one source whose issuers are the CA certificates of `pem` (a PEM
    /// bundle or DER), approved for web and seal certificates ([`TrustList::add_pem_issuers`]).
    pub fn from_pem(source: Source, pem: &[u8]) -> Result<TrustList, PemIssuerError> {
        let origin = format!("PEM issuers of {}", source.name);
        let mut trust = TrustList::new(vec![source], Vec::new())?;
        trust.add_pem_issuers(0, pem, &[CertKind::Web, CertKind::Seal], &origin)?;
        Ok(trust)
    }

    /// Adds every certificate of `pem` (a PEM bundle or DER) as an issuer of source `source`,
    /// approved for `kinds` by the caller's configuration ([`TrustList::add_issuers`]). Each
    /// must be a CA certificate; on an error nothing is added. Returns how many were added.
    pub fn add_pem_issuers(
        &mut self,
        source: usize,
        pem: &[u8],
        kinds: &[CertKind],
        origin: &str,
    ) -> Result<usize, PemIssuerError> {
        self.source_exists(source)?;
        let mut certificates = Vec::new();
        for der in crate::cert::decode_certificate_chain(pem)? {
            let certificate = PspCertificate::from_der(der)?;
            if certificate.is_ca != Some(true) {
                return Err(PemIssuerError::NotCa {
                    subject: certificate.subject,
                });
            }
            certificates.push(certificate);
        }
        self.add_issuers(source, certificates, kinds, origin)
    }

    /// Adds `certificates` as issuers of source `source`, approved for `kinds` by the caller's
    /// configuration since always; `origin` names where they came from, for reports. Returns
    /// how many were added.
    pub fn add_issuers(
        &mut self,
        source: usize,
        certificates: Vec<PspCertificate>,
        kinds: &[CertKind],
        origin: &str,
    ) -> Result<usize, PemIssuerError> {
        self.source_exists(source)?;
        let added = certificates.len();
        for certificate in certificates {
            self.push_configured_issuer(TrustedIssuer {
                source,
                certificate,
                origin: origin.to_owned(),
                history: vec![Approval {
                    from: None,
                    active: true,
                    kinds: kinds.iter().copied().collect(),
                    status: "approved by configuration".to_owned(),
                    qualifications: Vec::new(),
                    not_understood: Vec::new(),
                }],
            })?;
        }
        Ok(added)
    }

    /// Records what a load passed over, for `config check` and logs.
    pub fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    /// Records a list met by a load that is not used (its `problem` says why).
    pub fn record_list(&mut self, status: ListStatus) {
        self.lists.push(status);
    }

    fn push_issuer(&mut self, deadline: ListDeadline, issuer: TrustedIssuer) {
        self.id = next_id();
        self.deadlines.push(Some(deadline));
        self.issuers.push(issuer);
    }

    /// Adds the CA/QC services of `list` as issuers; returns how many were added. Per service
    /// that ever was CA/QC: its history as approvals (`approval_history`), the periods it is
    /// not used for noted (`note_not_understood`), then each of its certificates as an issuer
    /// (`add_service_certificates`); the counts of services noted last.
    fn add_trusted_list(
        &mut self,
        source: usize,
        location: &str,
        list: &tsl::TrustedList,
        deadline: &ListDeadline,
    ) -> usize {
        let before = self.issuers.len();
        for skipped in &list.skipped {
            self.notes.push(format!("{}: {skipped}", location));
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
            let history = approval_history(service);
            if history.iter().any(|a| !a.qualifications.is_empty()) {
                qualified_services += 1;
            }
            self.note_not_understood(location, service);
            let origin = format!(
                "{} (TL {}): {}",
                location, list.territory, service.service_name
            );
            self.add_service_certificates(source, location, service, &origin, &history, deadline);
        }
        if qualified_services > 0 {
            self.notes.push(format!(
                "{}: {qualified_services} CA/QC services carry Qualifications, applied to each \
                 certificate they select",
                location
            ));
        }
        if other_services > 0 {
            self.notes.push(format!(
                "{}: {other_services} services that never were CA/QC passed over",
                location
            ));
        }
        self.issuers.len() - before
    }

    /// The periods of `service` that carry critical extensions not understood (TS 119 612
    /// clause 5.5.9), for which it is not used: logged and noted once per load, rather than
    /// at every check it refuses.
    fn note_not_understood(&mut self, location: &str, service: &tsl::TslService) {
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
            tracing::warn!(
                trusted_list = %location,
                service = %service.service_name,
                periods = unusable.len(),
                "trusted-list service carries critical extensions that are not understood; \
                 it is not used for those periods"
            );
            self.notes.push(format!(
                "{}: service `{}`: critical extensions not understood, the service is not \
                 used for these periods (TS 119 612 clause 5.5.9): {}",
                location,
                service.service_name,
                unusable.join("; ")
            ));
        }
    }

    /// Each certificate of `service` as an issuer with its `history`; one that cannot be read
    /// is noted and passed over.
    fn add_service_certificates(
        &mut self,
        source: usize,
        location: &str,
        service: &tsl::TslService,
        origin: &str,
        history: &[Approval],
        deadline: &ListDeadline,
    ) {
        for der in &service.certificates {
            match PspCertificate::from_der(der.clone()) {
                Ok(certificate) => self.push_issuer(
                    deadline.clone(),
                    TrustedIssuer {
                        source,
                        certificate,
                        origin: origin.to_owned(),
                        history: history.to_vec(),
                    },
                ),
                Err(e) => self.notes.push(format!(
                    "{}: service `{}`: certificate passed over: {e}",
                    location, service.service_name
                )),
            }
        }
    }
}

/// A CA/QC service's history as approvals, one per period: the kinds it offers (judged on the
/// whole URIs, [`tsl::uri`]), whether it is active and CA/QC then, and its qualifications and
/// critical extensions not understood.
fn approval_history(service: &tsl::TslService) -> Vec<Approval> {
    service
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
        .collect()
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

#[cfg(test)]
mod tests;
