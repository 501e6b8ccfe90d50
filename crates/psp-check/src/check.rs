//! The check core: pure. Certificate, presented intermediates, transaction jurisdiction, a
//! point in time, the trust list and the revocation evidence in; a [`CheckReport`] out. No
//! I/O, no clock: that is what lets the tests check real certificates that expired long ago
//! at a fixed time.
//!
//! Semantics (`docs/design.md` section 3; the contract's rule 8: every flag is computed
//! independently):
//!
//! - `validQTSP`: the certificate's issuer is a trust-list issuer, identified by key, whose
//!   source is approved for the jurisdiction, whose service was granted at the certificate's
//!   `notBefore`, for the certificate's kind (QcType web → website authentication, eseal →
//!   seals; no QcType → the source's `untyped` rule), with QcCompliance where the source
//!   requires it. Presented intermediates may sit between the certificate and the trust-list
//!   issuer; each of them must be a CA whose signature verifies.
//! - `validSignature`: the certificate's signature verifies with its issuer's key, looked for
//!   in the trust list, then among the presented intermediates.
//! - `notExpired`: `notBefore <= now <= notAfter`, for the certificate and for any
//!   intermediate on its path to the trust list.
//! - `notRevoked`: see [`revocation`]: true only on verified evidence, for the certificate and
//!   every intermediate of its verified path (and every CRL signer relied on).

pub mod path;
pub mod report;
pub mod revocation;

pub use path::{
    MAX_PRESENTED_INTERMEDIATES, PathError, PathFailure, Paths, PresentedSignature, VerifiedPath,
};
pub use report::{CertCheckError, CheckReport, ErrorCode, Validity};
pub use revocation::{
    CaEvidence, MAX_REVOCATION_TARGETS, MethodOutcome, PathEvidence, RevocationEvidence,
    RevocationPlan, RevocationStatus, Target,
};

use time::OffsetDateTime;

use crate::cert::{PspCertificate, QcType};
use crate::country::CountryCode;
use crate::register::RegisterSnapshot;
use crate::trust::TrustList;
use crate::trust::{CertKind, QcCompliancePolicy, UntypedPolicy};

/// What the check is asked.
#[derive(Debug, Clone, Copy)]
pub struct CheckInput<'a> {
    /// The PSP certificate under check.
    pub certificate: &'a PspCertificate,
    /// Other certificates presented with it (TLS chain, `--chain` files), in any order.
    pub intermediates: &'a [PspCertificate],
    /// The transaction jurisdiction the issuer's trust source must be approved for.
    pub jurisdiction: CountryCode,
    /// The point in time the check is made at.
    pub now: OffsetDateTime,
}

/// A certificate whose key the check relied on: a trust-list issuer or a presented
/// intermediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRef {
    /// Index into [`TrustList::issuers`].
    TrustList(usize),
    /// Index into [`CheckInput::intermediates`].
    Presented(usize),
}

impl KeyRef {
    /// The certificate this reference designates, in `trust` or in `intermediates`; `None`
    /// when it designates none of them (a reference made for other inputs).
    pub fn certificate<'a>(
        &self,
        trust: &'a TrustList,
        intermediates: &'a [PspCertificate],
    ) -> Option<&'a PspCertificate> {
        match *self {
            KeyRef::TrustList(i) => trust.issuers().get(i).map(|i| &i.certificate),
            KeyRef::Presented(i) => intermediates.get(i),
        }
    }

    /// The certificate's direct issuer on a path: its first intermediate, else the
    /// trust-list issuer.
    fn direct_issuer(anchor: usize, intermediates: &[usize]) -> KeyRef {
        match intermediates.first() {
            Some(&p) => KeyRef::Presented(p),
            None => KeyRef::TrustList(anchor),
        }
    }
}

/// Whether the trust-list issuer at the head of the path approves the certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustOutcome {
    /// `issuer` (index into [`TrustList::issuers`]) approves the certificate.
    Approved {
        /// Index into [`TrustList::issuers`].
        issuer: usize,
    },
    /// The issuer is in the trust list but does not approve this certificate here.
    NotApproved {
        /// Index into [`TrustList::issuers`].
        issuer: usize,
        /// Why the issuer does not approve the certificate.
        reason: Refusal,
    },
    /// No trust-list issuer is the certificate's issuer.
    Unknown,
}

/// Who issued the certificate, as far as verified signatures tell. Made only by
/// [`resolve_issuer`], for one input and one trust list: [`report()`] uses it only for those
/// (another one is resolved again), so a resolution cannot vouch for another certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerResolution {
    /// The verified path `validQTSP` and `validSignature` come from, or why there is none.
    pub path: Result<VerifiedPath, PathFailure>,
    /// The judgement of the path's trust-list issuer.
    pub trust: TrustOutcome,
    made_for: MadeFor,
}

/// The input and trust list a resolution was made for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MadeFor {
    certificate: [u8; 32],
    intermediates: Vec<[u8; 32]>,
    jurisdiction: CountryCode,
    now: time::OffsetDateTime,
    trust: u64,
}

impl MadeFor {
    fn of(input: &CheckInput<'_>, trust: &TrustList) -> MadeFor {
        MadeFor {
            certificate: input.certificate.fingerprint_sha256,
            intermediates: input
                .intermediates
                .iter()
                .map(|c| c.fingerprint_sha256)
                .collect(),
            jurisdiction: input.jurisdiction,
            now: input.now,
            trust: trust.id(),
        }
    }

    /// Whether these are `input` and `trust`, compared in place (the check's miss path asks
    /// twice per check).
    fn is(&self, input: &CheckInput<'_>, trust: &TrustList) -> bool {
        self.certificate == input.certificate.fingerprint_sha256
            && self.trust == trust.id()
            && self.jurisdiction == input.jurisdiction
            && self.now == input.now
            && self
                .intermediates
                .iter()
                .copied()
                .eq(input.intermediates.iter().map(|c| c.fingerprint_sha256))
    }
}

impl IssuerResolution {
    /// Whether this resolution was made for `input` against `trust`.
    pub fn is_for(&self, input: &CheckInput<'_>, trust: &TrustList) -> bool {
        self.made_for.is(input, trust)
    }

    /// The certificate's direct issuer on the verified path: the one revocation evidence must
    /// be signed by. `None` when no path verified (every signature up to a trust-list issuer):
    /// then nothing is fetched for the certificate, not even for a certificate that names a
    /// trusted issuer by key identifier and whose own signature fails (a tampered or forged
    /// certificate chooses its own revocation URLs).
    pub fn revocation_issuer(&self) -> Option<KeyRef> {
        let path = self.path.as_ref().ok()?;
        Some(KeyRef::direct_issuer(path.anchor(), path.intermediates()))
    }

    /// The path whose issuer the report names: the verified one, or the one of a certificate
    /// whose own signature failed under an issuer it names by key identifier.
    fn reported_path(&self) -> Option<(usize, &[usize])> {
        match &self.path {
            Ok(p) => Some((p.anchor(), p.intermediates())),
            Err(PathFailure::CertificateSignature {
                path,
                bound_by_key_id: true,
                structure: Ok(()),
                ..
            }) => Some((path.anchor, &path.intermediates)),
            Err(_) => None,
        }
    }
}

/// The read-only reference data a check runs against: one consistent pair of snapshots.
#[derive(Debug, Clone, Copy)]
pub struct Snapshots<'a> {
    /// The trust list the issuer is judged against.
    pub trust: &'a TrustList,
    /// The NCA registers the PSP is looked up in.
    pub registers: &'a RegisterSnapshot,
}

impl<'a> Snapshots<'a> {
    /// The pair of `trust` and `registers`.
    pub fn new(trust: &'a TrustList, registers: &'a RegisterSnapshot) -> Snapshots<'a> {
        Snapshots { trust, registers }
    }
}

/// Runs every check and the register lookup. The revocation evidence of the certificate was
/// gathered by the caller (an edge) for [`IssuerResolution::revocation_issuer`]; the
/// intermediates of its path have none here, so `notRevoked` is false when the path has any
/// (the edges use [`RevocationPlan`] and [`report()`]).
pub fn check(
    input: &CheckInput<'_>,
    snapshots: Snapshots<'_>,
    revocation: &RevocationEvidence,
) -> CheckReport {
    let resolution = resolve_issuer(input, snapshots.trust);
    report(
        input,
        snapshots,
        &resolution,
        &PathEvidence::from(revocation.clone()),
    )
}

/// Builds the report from an issuer resolution already made (the edges resolve first, to know
/// whose revocation evidence to fetch). Each flag is computed on its own, in the order of the
/// module documentation — `validQTSP`, `validSignature`, `notExpired`, `notRevoked` — each
/// adding its error entries and explanation lines in that order.
pub fn report(
    input: &CheckInput<'_>,
    snapshots: Snapshots<'_>,
    resolution: &IssuerResolution,
    path_evidence: &PathEvidence,
) -> CheckReport {
    let trust = snapshots.trust;
    let cert = input.certificate;
    let mut errors = Vec::new();
    let mut explanation = Vec::new();
    // A resolution made for other inputs or another trust list is not this one's.
    let resolved_here;
    let resolution = if resolution.is_for(input, trust) {
        resolution
    } else {
        resolved_here = resolve_issuer(input, trust);
        &resolved_here
    };
    let admitted = self::revocation::admitted(input, trust, resolution, path_evidence);
    let path_evidence = &admitted;

    let (valid_qtsp, source) = qtsp_flag(input, trust, resolution, &mut errors, &mut explanation);
    let valid_signature = signature_flag(
        input,
        trust,
        &resolution.path,
        &mut errors,
        &mut explanation,
    );
    let not_expired = expiry_flag(input, trust, resolution, &mut errors, &mut explanation);
    let (not_revoked, revocation_status) = revocation_flag(
        input,
        resolution,
        path_evidence,
        &mut errors,
        &mut explanation,
    );

    CheckReport {
        certificate_sha256: cert.fingerprint_sha256,
        psp_subject_name: cert.psp_subject_name().map(str::to_owned),
        auth_number: cert.organization_identifier.as_ref().map(|a| a.raw.clone()),
        qtsp_common_name: qtsp_common_name(input, trust, resolution),
        qtsp_source: source.map(|s| s.qtsp_source),
        qtsp_jurisdiction: source.map(|s| s.reported_jurisdiction.clone()),
        validity: Validity {
            valid_qtsp,
            valid_signature,
            not_revoked,
            not_expired,
        },
        revocation: revocation_status,
        errors,
        explanation,
        registers: snapshots
            .registers
            .lookup(cert.auth_number(), input.jurisdiction),
    }
}

/// `validQTSP`: the judgement of the path's trust-list issuer, with the source it belongs to
/// (reported whether or not it approves). A stale list is an error entry.
fn qtsp_flag<'t>(
    input: &CheckInput<'_>,
    trust: &'t TrustList,
    resolution: &IssuerResolution,
    errors: &mut Vec<CertCheckError>,
    explanation: &mut Vec<String>,
) -> (bool, Option<&'t crate::trust::Source>) {
    match &resolution.trust {
        TrustOutcome::Approved { issuer } => {
            let i = &trust.issuers()[*issuer];
            explanation.push(format!("issuer approved: {}", i.origin));
            (true, Some(&trust.sources()[i.source]))
        }
        TrustOutcome::NotApproved { issuer, reason } => {
            let i = &trust.issuers()[*issuer];
            explanation.push(format!("issuer {} does not approve it: {reason}", i.origin));
            if let Refusal::Service(crate::trust::NotApproved::ListStale { .. }) = reason {
                errors.push(CertCheckError::new(
                    ErrorCode::TrustedListStale,
                    format!("Issuer of {} not used: {reason}", input.certificate.subject),
                ));
            }
            (false, Some(&trust.sources()[i.source]))
        }
        TrustOutcome::Unknown => {
            explanation.push("no verified certification path to a trust-list issuer".to_owned());
            (false, None)
        }
    }
}

/// `notExpired`: `notBefore <= now <= notAfter` for the certificate (an error entry when it
/// is not yet valid), for each intermediate of the reported path and for its trust-list
/// issuer.
fn expiry_flag(
    input: &CheckInput<'_>,
    trust: &TrustList,
    resolution: &IssuerResolution,
    errors: &mut Vec<CertCheckError>,
    explanation: &mut Vec<String>,
) -> bool {
    let cert = input.certificate;
    let mut not_expired = cert.is_valid_at(input.now);
    if input.now < cert.not_before {
        errors.push(CertCheckError::new(
            ErrorCode::CertificateNotYetValid,
            format!("{} is not valid before {}", cert.subject, cert.not_before),
        ));
    }
    if let Some((anchor, path)) = resolution.reported_path() {
        for &p in path {
            let inter = &input.intermediates[p];
            if !inter.is_valid_at(input.now) {
                explanation.push(format!(
                    "intermediate {} is outside its validity",
                    inter.subject
                ));
                not_expired = false;
            }
        }
        let head = &trust.issuers()[anchor].certificate;
        if !head.is_valid_at(input.now) {
            explanation.push(format!(
                "trust-list issuer {} is outside its validity",
                head.subject
            ));
            not_expired = false;
        }
    }
    not_expired
}

/// `notRevoked` ([`revocation::combine_path`]) over the certificate and every CA of its
/// verified path, each method's outcome explained, and the revocation status reported
/// (`Good` only when `notRevoked` holds).
fn revocation_flag(
    input: &CheckInput<'_>,
    resolution: &IssuerResolution,
    path_evidence: &PathEvidence,
    errors: &mut Vec<CertCheckError>,
    explanation: &mut Vec<String>,
) -> (bool, RevocationStatus) {
    // Every CA certificate of the verified path below the trust-list issuer (RFC 5280
    // section 6.1.3 (a)(3)); none when no path verified (then nothing was checked at all).
    let path_cas: Vec<&PspCertificate> = match &resolution.path {
        Ok(p) => p
            .intermediates()
            .iter()
            .map(|&i| &input.intermediates[i])
            .collect(),
        Err(_) => Vec::new(),
    };
    let not_revoked = self::revocation::combine_path(
        path_evidence,
        &input.certificate.subject,
        &path_cas,
        errors,
    );
    explain_revocation(path_evidence, explanation);
    let revocation_status = match path_evidence.status() {
        RevocationStatus::Good if !not_revoked => RevocationStatus::Unknown,
        status => status,
    };
    (not_revoked, revocation_status)
}

/// One explanation line per revocation method and certificate: the certificate's CRL and
/// OCSP, then those of each CA above it.
fn explain_revocation(path_evidence: &PathEvidence, explanation: &mut Vec<String>) {
    let revocation = &path_evidence.certificate;
    let certificate_lines = [("CRL", &revocation.crl), ("OCSP", &revocation.ocsp)]
        .into_iter()
        .map(|(method, outcome)| (String::new(), method, outcome));
    let ca_lines = path_evidence.above.iter().flat_map(|ca| {
        [("CRL", &ca.evidence.crl), ("OCSP", &ca.evidence.ocsp)]
            .into_iter()
            .map(move |(method, outcome)| {
                (format!("{} {}: ", ca.role, ca.subject), method, outcome)
            })
    });
    for (whose, method, outcome) in certificate_lines.chain(ca_lines) {
        explanation.push(
            whose
                + &match outcome {
                    MethodOutcome::Good { evidence, .. } => {
                        format!("{method}: not revoked ({evidence})")
                    }
                    MethodOutcome::Revoked {
                        at,
                        reason,
                        evidence,
                        ..
                    } => format!(
                        "{method}: revoked at {} reason {} ({evidence})",
                        at.and_then(|t| t
                            .format(&time::format_description::well_known::Rfc3339)
                            .ok())
                            .unwrap_or_else(|| "unknown time".to_owned()),
                        reason.as_deref().unwrap_or("unspecified")
                    ),
                    MethodOutcome::Failed { reason } => {
                        format!("{method}: could not complete: {reason}")
                    }
                },
        );
    }
}

/// The issuing CA's name: from the verified issuer certificate when there is one (names
/// may differ in case or encoding from the certificate's issuer field), else as the
/// certificate writes it.
fn qtsp_common_name(
    input: &CheckInput<'_>,
    trust: &TrustList,
    resolution: &IssuerResolution,
) -> Option<String> {
    let cert = input.certificate;
    match &resolution.path {
        Ok(p) => KeyRef::direct_issuer(p.anchor(), p.intermediates())
            .certificate(trust, input.intermediates)
            .and_then(|issuer| issuer.subject_cn.clone())
            .or_else(|| cert.issuer_cn.clone()),
        Err(_) => cert.issuer_cn.clone(),
    }
}

/// `validSignature`: every signature on the path verifies. Adds the error entry that says why
/// not, when it is not: one case per [`PathFailure`].
fn signature_flag(
    input: &CheckInput<'_>,
    trust: &TrustList,
    path: &Result<VerifiedPath, PathFailure>,
    errors: &mut Vec<CertCheckError>,
    explanation: &mut Vec<String>,
) -> bool {
    let subject = &input.certificate.subject;
    match path {
        Ok(p) => {
            explanation.push(format!(
                "certification path verified: {} intermediate(s) to the trust-list issuer {}",
                p.intermediates().len(),
                trust.issuers()[p.anchor()].certificate.subject
            ));
            true
        }
        Err(PathFailure::Invalid { error, .. }) => {
            explanation.push(format!(
                "every signature verifies, but the path is invalid: {error}"
            ));
            errors.push(CertCheckError::new(
                ErrorCode::CertificationPathInvalid,
                format!("Certification path of {subject} is invalid: {error}"),
            ));
            true
        }
        Err(PathFailure::CertificateSignature { path, error, .. }) => {
            let issuer = KeyRef::direct_issuer(path.anchor, &path.intermediates)
                .certificate(trust, input.intermediates)
                .map_or("?", |issuer| issuer.subject.as_str());
            if error.is_algorithm_problem() {
                errors.push(algorithm_error(error, subject));
            } else {
                errors.push(CertCheckError::new(
                    ErrorCode::SignatureInvalid,
                    format!(
                        "Signature of {subject} does not verify with the key of {issuer}, the issuer it names on the way to the trust list: {error}",
                    ),
                ));
            }
            false
        }
        Err(PathFailure::IntermediateSignature { path, at, error }) => {
            errors.push(intermediate_signature_error(input, trust, path, *at, error));
            false
        }
        Err(PathFailure::NoTrustedIssuer { signature }) => {
            presented_signature_flag(input, signature, errors, explanation)
        }
        Err(PathFailure::TooManyIntermediates { presented }) => {
            errors.push(CertCheckError::new(
                ErrorCode::ChainTooLong,
                format!(
                    "Certification path of {subject} was not built: {presented} intermediates were presented, over the limit of {MAX_PRESENTED_INTERMEDIATES}"
                ),
            ));
            false
        }
    }
}

/// The error entry for a signature that could not be checked: its algorithm refused by policy,
/// or not supported.
fn algorithm_error(e: &crate::cert::SignatureError, what: &str) -> CertCheckError {
    let code = if e.is_policy_refusal() {
        ErrorCode::SignatureAlgorithmRejected
    } else {
        ErrorCode::SignatureAlgorithmUnsupported
    };
    CertCheckError::new(
        code,
        format!("Signature of {what} could not be checked: {e}"),
    )
}

/// [`PathFailure::IntermediateSignature`]: the error entry for the intermediate at `at` on
/// `path`, whose signature the key above it (the next intermediate, or the trust-list issuer)
/// does not verify.
fn intermediate_signature_error(
    input: &CheckInput<'_>,
    trust: &TrustList,
    path: &path::CandidatePath,
    at: usize,
    error: &crate::cert::SignatureError,
) -> CertCheckError {
    let inter = &input.intermediates[path.intermediates[at]];
    let above = match path.intermediates.get(at + 1) {
        Some(&p) => &input.intermediates[p],
        None => &trust.issuers()[path.anchor].certificate,
    };
    if error.is_algorithm_problem() {
        algorithm_error(error, &inter.subject)
    } else {
        CertCheckError::new(
            ErrorCode::SignatureInvalid,
            format!(
                "Signature of the presented intermediate {} does not verify with the key of {}, the issuer it names: {error}",
                inter.subject, above.subject
            ),
        )
    }
}

/// [`PathFailure::NoTrustedIssuer`]: `validSignature` from the certificate's signature
/// against the presented issuers.
fn presented_signature_flag(
    input: &CheckInput<'_>,
    signature: &PresentedSignature,
    errors: &mut Vec<CertCheckError>,
    explanation: &mut Vec<String>,
) -> bool {
    let cert = input.certificate;
    let subject = &cert.subject;
    match signature {
        PresentedSignature::Verified { by } => {
            explanation.push(format!(
                "signature verifies with the presented, untrusted issuer {}",
                input.intermediates[*by].subject
            ));
            true
        }
        PresentedSignature::Invalid => {
            explanation
                .push("signature does not verify with the key of any presented issuer".to_owned());
            false
        }
        PresentedSignature::IssuerKeyNotFound => {
            errors.push(CertCheckError::new(
                ErrorCode::IssuerKeyNotFound,
                format!(
                    "Signature of {subject} could not be checked: no issuer key found for {} in the trust list or the presented chain",
                    cert.issuer
                ),
            ));
            false
        }
        PresentedSignature::NotCheckable(e) => {
            errors.push(algorithm_error(e, subject));
            false
        }
    }
}

/// Identifies the certificate's issuer: builds the verified certification paths to the trust
/// list ([`path::build`]) and picks the one the flags come from: approved by its trust-list
/// issuer first, then one whose certificates are all current, then the shortest. A name or a
/// key identifier never decides: see [`path`].
pub fn resolve_issuer(input: &CheckInput<'_>, trust: &TrustList) -> IssuerResolution {
    let made_for = MadeFor::of(input, trust);
    match path::build(input.certificate, input.intermediates, trust) {
        Paths::Verified(paths) => {
            let current = |p: &VerifiedPath| {
                trust.issuers()[p.anchor()]
                    .certificate
                    .is_valid_at(input.now)
                    && p.intermediates()
                        .iter()
                        .all(|&i| input.intermediates[i].is_valid_at(input.now))
            };
            let judged = paths.into_iter().map(|p| {
                let approval = approval(input, trust, p.anchor());
                (p, approval)
            });
            let best = judged
                .min_by_key(|(p, approval)| {
                    (approval.is_err(), !current(p), p.intermediates().len())
                })
                // `path::build` returns `Paths::Verified` only with at least one path.
                .expect("Paths::Verified holds at least one path");
            let (path, approval) = best;
            let trust = match approval {
                Ok(()) => TrustOutcome::Approved {
                    issuer: path.anchor(),
                },
                Err(reason) => TrustOutcome::NotApproved {
                    issuer: path.anchor(),
                    reason,
                },
            };
            IssuerResolution {
                path: Ok(path),
                trust,
                made_for,
            }
        }
        Paths::Failed(failure) => {
            // A certificate that names its trust-list issuer by key identifier, under a
            // verified path, but whose own signature fails: who issued it is known (the
            // contract's tampered scenario), so the issuer's judgement is reported, while
            // `validSignature` is false.
            let trust = match &failure {
                PathFailure::CertificateSignature {
                    path,
                    bound_by_key_id: true,
                    structure: Ok(()),
                    ..
                } => match approval(input, trust, path.anchor) {
                    Ok(()) => TrustOutcome::Approved {
                        issuer: path.anchor,
                    },
                    Err(reason) => TrustOutcome::NotApproved {
                        issuer: path.anchor,
                        reason,
                    },
                },
                _ => TrustOutcome::Unknown,
            };
            IssuerResolution {
                path: Err(failure),
                trust,
                made_for,
            }
        }
    }
}

/// Why a trust-list issuer does not approve the certificate here (the path to it may still be
/// verified: `QTSPSource` is reported, `validQTSP` is false).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The issuer's trust source is not approved for the transaction jurisdiction.
    #[error("trust source `{source_name}` is not approved for jurisdiction {jurisdiction}")]
    Jurisdiction {
        /// The name of the issuer's trust source.
        source_name: String,
        /// The transaction jurisdiction.
        jurisdiction: CountryCode,
    },
    /// The service's status, critical extensions or Qualifications at issuance.
    #[error(transparent)]
    Service(#[from] crate::trust::NotApproved),
    /// The certificate has QcType esign: an electronic-signature certificate.
    #[error(
        "QcType esign: an electronic-signature certificate is neither a website nor a seal certificate"
    )]
    ElectronicSignature,
    /// The certificate has no QcType web or eseal, and the trust source rejects untyped
    /// certificates.
    #[error(
        "the certificate has no QcType web or eseal, and trust source `{source_name}` rejects untyped certificates"
    )]
    Untyped {
        /// The name of the issuer's trust source.
        source_name: String,
    },
    /// The certificate is untyped and the issuer's service is approved for no certificate
    /// kind.
    #[error("the service is approved for no certificate kind")]
    NoKind,
    /// The issuer's service is not approved for a kind the certificate's QcType declares.
    #[error("the service is not approved for {kind}")]
    Kind {
        /// The certificate kind the service is not approved for.
        kind: CertKind,
    },
    /// The certificate lacks the QcCompliance statement its trust source requires.
    #[error(
        "the certificate has no QcCompliance statement, which trust source `{source_name}` requires"
    )]
    QcCompliance {
        /// The name of the issuer's trust source.
        source_name: String,
    },
}

/// Whether trust-list issuer `issuer` approves the certificate for this jurisdiction; the
/// reason when it does not.
fn approval(input: &CheckInput<'_>, trust: &TrustList, issuer: usize) -> Result<(), Refusal> {
    let cert = input.certificate;
    let t = &trust.issuers()[issuer];
    let source = &trust.sources()[t.source];
    // The list the issuer came from, judged now (docs/trusted-lists.md, Freshness).
    trust.fresh_at(issuer, input.now)?;
    if !source.valid_for.contains(&input.jurisdiction) {
        return Err(Refusal::Jurisdiction {
            source_name: source.name.clone(),
            jurisdiction: input.jurisdiction,
        });
    }
    // Status, critical extensions and the trusted list's Qualifications, judged at issuance.
    let a = t.approval_for(cert, cert.not_before)?;
    let types = cert
        .qc
        .as_ref()
        .map(|q| q.types.as_slice())
        .unwrap_or_default();
    let mut kinds = Vec::new();
    for ty in types {
        match ty {
            QcType::Web => kinds.push(CertKind::Web),
            QcType::ESeal => kinds.push(CertKind::Seal),
            QcType::ESign => {
                return Err(Refusal::ElectronicSignature);
            }
            QcType::Other(_) => {}
        }
    }
    if kinds.is_empty() {
        match source.untyped {
            UntypedPolicy::Reject => {
                return Err(Refusal::Untyped {
                    source_name: source.name.clone(),
                });
            }
            UntypedPolicy::Accept if a.kinds.is_empty() => {
                return Err(Refusal::NoKind);
            }
            UntypedPolicy::Accept => {}
        }
    }
    if let Some(k) = kinds.iter().find(|k| !a.kinds.contains(k)) {
        return Err(Refusal::Kind { kind: *k });
    }
    if source.qc_compliance == QcCompliancePolicy::Required
        && !cert.qc.as_ref().is_some_and(|q| q.has_compliance())
    {
        return Err(Refusal::QcCompliance {
            source_name: source.name.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use time::macros::datetime;

    use super::*;
    use crate::trust::CertKind;
    use crate::trust::{Approval, QtspSource, Source, TrustedIssuer};

    fn sandbox(rel: &str) -> PspCertificate {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("certs")
            .join(rel);
        PspCertificate::parse(&std::fs::read(&path).expect("sandbox file")).expect("parses")
    }

    fn source(valid_for: &[&str]) -> Source {
        Source {
            name: "test".into(),
            qtsp_source: QtspSource::Eidas,
            reported_jurisdiction: "EEA".into(),
            valid_for: valid_for.iter().map(|c| c.parse().expect("code")).collect(),
            qc_compliance: QcCompliancePolicy::Required,
            untyped: UntypedPolicy::Reject,
        }
    }

    fn approval(from: Option<OffsetDateTime>, active: bool, kinds: &[CertKind]) -> Approval {
        Approval {
            from,
            active,
            kinds: kinds.iter().copied().collect::<BTreeSet<_>>(),
            status: if active { "granted" } else { "withdrawn" }.into(),
            qualifications: Vec::new(),
            not_understood: Vec::new(),
        }
    }

    fn resolve(history: Vec<Approval>, cert: &str, valid_for: &[&str]) -> TrustOutcome {
        let trust = TrustList::new(
            vec![source(valid_for)],
            vec![TrustedIssuer {
                source: 0,
                certificate: sandbox("ca/qtsp-issuing.pem"),
                origin: "test".into(),
                history,
            }],
        )
        .expect("every issuer names a source");
        let cert = sandbox(cert);
        let input = CheckInput {
            certificate: &cert,
            intermediates: &[],
            jurisdiction: "XX".parse().expect("code"),
            now: datetime!(2026-01-01 0:00 UTC),
        };
        resolve_issuer(&input, &trust).trust
    }

    fn reason(o: TrustOutcome) -> String {
        match o {
            TrustOutcome::NotApproved { reason, .. } => reason.to_string(),
            other => panic!("expected NotApproved, got {other:?}"),
        }
    }

    const BOTH: &[CertKind] = &[CertKind::Web, CertKind::Seal];

    #[test]
    fn status_is_judged_at_the_certificates_issuance() {
        // The sandbox certificates were issued 2025-01-01.
        let granted_then_withdrawn = vec![
            approval(Some(datetime!(2025-06-01 0:00 UTC)), false, BOTH),
            approval(Some(datetime!(2020-01-01 0:00 UTC)), true, BOTH),
        ];
        assert!(matches!(
            resolve(granted_then_withdrawn, "psp/valid.pem", &["XX"]),
            TrustOutcome::Approved { .. }
        ));
        let withdrawn_at_issuance = vec![
            approval(Some(datetime!(2024-06-01 0:00 UTC)), false, BOTH),
            approval(Some(datetime!(2020-01-01 0:00 UTC)), true, BOTH),
        ];
        assert!(
            reason(resolve(withdrawn_at_issuance, "psp/valid.pem", &["XX"])).contains("withdrawn")
        );
        let granted_later = vec![approval(Some(datetime!(2025-06-01 0:00 UTC)), true, BOTH)];
        assert!(reason(resolve(granted_later, "psp/valid.pem", &["XX"])).contains("no status"));
    }

    #[test]
    fn the_certificate_kind_must_be_granted() {
        let web_only = || vec![approval(None, true, &[CertKind::Web])];
        assert!(matches!(
            resolve(web_only(), "psp/valid.pem", &["XX"]),
            TrustOutcome::Approved { .. }
        ));
        assert!(reason(resolve(web_only(), "psp/qseal.pem", &["XX"])).contains("electronic seals"));
    }

    #[test]
    fn the_source_must_be_approved_for_the_jurisdiction() {
        let always = vec![approval(None, true, BOTH)];
        assert!(reason(resolve(always, "psp/valid.pem", &["XY"])).contains("jurisdiction XX"));
    }

    #[test]
    fn a_qualified_source_requires_qc_compliance() {
        // obie-valid carries no QcCompliance statement (as real OBIE certificates); under a
        // qualified source's default rule its own issuer does not approve it.
        let trust = TrustList::new(
            vec![source(&["GB"])],
            vec![TrustedIssuer {
                source: 0,
                certificate: sandbox("ca/obie-issuing.pem"),
                origin: "test".into(),
                history: vec![approval(None, true, BOTH)],
            }],
        )
        .expect("every issuer names a source");
        let cert = sandbox("psp/obie-valid.pem");
        let input = CheckInput {
            certificate: &cert,
            intermediates: &[],
            jurisdiction: "GB".parse().expect("code"),
            now: datetime!(2026-01-01 0:00 UTC),
        };
        assert!(reason(resolve_issuer(&input, &trust).trust).contains("QcCompliance"));
    }

    #[test]
    fn a_look_alike_issuer_with_the_same_name_is_not_the_issuer() {
        let always = vec![approval(None, true, BOTH)];
        assert_eq!(
            resolve(always, "psp/untrusted.pem", &["XX"]),
            TrustOutcome::Unknown
        );
    }
}
