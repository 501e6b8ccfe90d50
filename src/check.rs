//! The check core: pure. Certificate, presented intermediates, transaction jurisdiction, a
//! point in time, the trust list and the revocation evidence in; a [`CheckReport`] out. No
//! I/O, no clock: that is what lets the tests check real certificates that expired long ago
//! at a fixed time.
//!
//! Semantics (`DESIGN.md` section 3; the contract's rule 8: every flag is computed
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
//! - `notRevoked`: see [`revocation`]: true only on verified evidence.

pub mod report;
pub mod revocation;

pub use report::{CertCheckError, CheckReport, ErrorCode, Validity};
pub use revocation::{MethodOutcome, RevocationEvidence, RevocationStatus};

use time::OffsetDateTime;

use crate::cert::{PspCertificate, QcType};
use crate::config::{CertKind, QcCompliancePolicy, UntypedPolicy};
use crate::country::CountryCode;
use crate::register::RegisterSnapshot;
use crate::trust::TrustList;

/// At most this many presented intermediates are considered. TLS peers and load balancers
/// send the leaf and one or two CAs; EN 319 411 hierarchies have at most three levels below
/// a root. Eight leaves room for cross-certificates and bounds the path search.
pub const MAX_PRESENTED_INTERMEDIATES: usize = 8;

/// At most this many intermediates between the certificate and a trust-list issuer. Real QTSP
/// hierarchies are root → issuing CA (TL services usually list the issuing CA itself, so the
/// path is usually empty); four is generous and keeps the search small.
pub const MAX_PATH_INTERMEDIATES: usize = 4;

/// At most this many signature verifications per check, the budget on attacker-controlled
/// work (rustls-webpki keeps the same kind of budget, 100 there for web PKI chains).
pub const MAX_SIGNATURE_CHECKS: usize = 32;

/// What the check is asked.
#[derive(Debug, Clone, Copy)]
pub struct CheckInput<'a> {
    pub certificate: &'a PspCertificate,
    /// Other certificates presented with it (TLS chain, `--chain` files), in any order.
    pub intermediates: &'a [PspCertificate],
    pub jurisdiction: CountryCode,
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
    pub fn certificate<'a>(
        &self,
        trust: &'a TrustList,
        intermediates: &'a [PspCertificate],
    ) -> &'a PspCertificate {
        match *self {
            KeyRef::TrustList(i) => &trust.issuers()[i].certificate,
            KeyRef::Presented(i) => &intermediates[i],
        }
    }
}

/// The outcome of the signature check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureOutcome {
    Verified {
        by: KeyRef,
    },
    /// An issuer key was found and the signature does not verify with it.
    Invalid,
    /// No certificate in the trust list or among the intermediates names the issuer with a
    /// matching key identifier.
    IssuerKeyNotFound,
    /// The signature algorithm is not supported, or refused by policy.
    NotCheckable(crate::cert::SignatureError),
}

/// The outcome of issuer identification against the trust list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustOutcome {
    /// `issuer` (index into [`TrustList::issuers`]) approves the certificate. `path` holds the
    /// presented intermediates between them, certificate side first.
    Approved { issuer: usize, path: Vec<usize> },
    /// The issuer is in the trust list but does not approve this certificate here.
    NotApproved {
        issuer: usize,
        path: Vec<usize>,
        reason: String,
    },
    /// No trust-list issuer is the certificate's issuer.
    Unknown,
}

/// Who issued the certificate, as far as keys can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerResolution {
    pub signature: SignatureOutcome,
    pub trust: TrustOutcome,
}

impl IssuerResolution {
    /// The issuer whose key is genuine (in the trust list, or a presented intermediate on a
    /// verified path to it): the one revocation evidence must be signed by. `None` when the
    /// issuer is unknown: then nothing is fetched for the certificate.
    pub fn revocation_issuer(&self) -> Option<KeyRef> {
        match &self.trust {
            TrustOutcome::Approved { issuer, path }
            | TrustOutcome::NotApproved { issuer, path, .. } => Some(match path.first() {
                Some(&p) => KeyRef::Presented(p),
                None => KeyRef::TrustList(*issuer),
            }),
            TrustOutcome::Unknown => None,
        }
    }

    fn path(&self) -> &[usize] {
        match &self.trust {
            TrustOutcome::Approved { path, .. } | TrustOutcome::NotApproved { path, .. } => path,
            TrustOutcome::Unknown => &[],
        }
    }
}

/// The read-only reference data a check runs against: one consistent pair of snapshots.
#[derive(Debug, Clone, Copy)]
pub struct Snapshots<'a> {
    pub trust: &'a TrustList,
    pub registers: &'a RegisterSnapshot,
}

/// Runs every check and the register lookup. The revocation evidence was gathered by the
/// caller (an edge) for [`IssuerResolution::revocation_issuer`].
pub fn check(
    input: &CheckInput<'_>,
    snapshots: Snapshots<'_>,
    revocation: &RevocationEvidence,
) -> CheckReport {
    let resolution = resolve_issuer(input, snapshots.trust);
    report(input, snapshots, &resolution, revocation)
}

/// Builds the report from an issuer resolution already made (the edges resolve first, to know
/// whose revocation evidence to fetch).
pub fn report(
    input: &CheckInput<'_>,
    snapshots: Snapshots<'_>,
    resolution: &IssuerResolution,
    revocation: &RevocationEvidence,
) -> CheckReport {
    let trust = snapshots.trust;
    let cert = input.certificate;
    let mut errors = Vec::new();
    let mut explanation = Vec::new();

    let (valid_qtsp, source) = match &resolution.trust {
        TrustOutcome::Approved { issuer, .. } => {
            let i = &trust.issuers()[*issuer];
            explanation.push(format!("issuer approved: {}", i.origin));
            (true, Some(&trust.sources()[i.source]))
        }
        TrustOutcome::NotApproved { issuer, reason, .. } => {
            let i = &trust.issuers()[*issuer];
            explanation.push(format!("issuer {} does not approve it: {reason}", i.origin));
            (false, Some(&trust.sources()[i.source]))
        }
        TrustOutcome::Unknown => {
            explanation.push("issuer is not in the trust list (matched by key)".to_owned());
            (false, None)
        }
    };

    let subject = &cert.subject;
    let valid_signature = match &resolution.signature {
        SignatureOutcome::Verified { .. } => true,
        SignatureOutcome::Invalid => {
            explanation.push("signature does not verify with the issuer's key".to_owned());
            false
        }
        SignatureOutcome::IssuerKeyNotFound => {
            errors.push(CertCheckError::new(
                ErrorCode::IssuerKeyNotFound,
                format!(
                    "Signature of {subject} could not be checked: no issuer key found for {} in the trust list or the presented chain",
                    cert.issuer
                ),
            ));
            false
        }
        SignatureOutcome::NotCheckable(e) => {
            let code = if e.is_policy_refusal() {
                ErrorCode::SignatureAlgorithmRejected
            } else {
                ErrorCode::SignatureAlgorithmUnsupported
            };
            errors.push(CertCheckError::new(
                code,
                format!("Signature of {subject} could not be checked: {e}"),
            ));
            false
        }
    };

    let mut not_expired = cert.is_valid_at(input.now);
    if input.now < cert.not_before {
        errors.push(CertCheckError::new(
            ErrorCode::CertificateNotYetValid,
            format!("{subject} is not valid before {}", cert.not_before),
        ));
    }
    for &p in resolution.path() {
        let inter = &input.intermediates[p];
        if !inter.is_valid_at(input.now) {
            explanation.push(format!(
                "intermediate {} is outside its validity",
                inter.subject
            ));
            not_expired = false;
        }
    }

    let not_revoked = revocation.combine(subject, &mut errors);
    for (method, outcome) in [("CRL", &revocation.crl), ("OCSP", &revocation.ocsp)] {
        explanation.push(match outcome {
            MethodOutcome::Good { evidence, .. } => format!("{method}: not revoked ({evidence})"),
            MethodOutcome::Revoked {
                at,
                reason,
                evidence,
            } => format!(
                "{method}: revoked at {} reason {} ({evidence})",
                at.and_then(|t| t
                    .format(&time::format_description::well_known::Rfc3339)
                    .ok())
                    .unwrap_or_else(|| "unknown time".to_owned()),
                reason.as_deref().unwrap_or("unspecified")
            ),
            MethodOutcome::Failed { reason } => format!("{method}: could not complete: {reason}"),
        });
    }

    CheckReport {
        psp_subject_name: cert.psp_subject_name().map(str::to_owned),
        auth_number: cert.organization_identifier.as_ref().map(|a| a.raw.clone()),
        qtsp_common_name: cert.issuer_cn.clone(),
        qtsp_source: source.map(|s| s.qtsp_source),
        qtsp_jurisdiction: source.map(|s| s.reported_jurisdiction.clone()),
        validity: Validity {
            valid_qtsp,
            valid_signature,
            not_revoked,
            not_expired,
        },
        revocation: revocation.status(),
        errors,
        explanation,
        registers: snapshots
            .registers
            .lookup(cert.auth_number(), input.jurisdiction),
    }
}

/// Identifies the certificate's issuer by key: in the trust list, or through presented
/// intermediates that chain to it.
///
/// A candidate issuer must carry the certificate's issuer name as its subject (byte for byte)
/// and, when both sides have key identifiers, the matching one. It is the issuer when its key
/// verifies the signature, or when the key identifiers are present and equal: the latter keeps
/// `validQTSP` about who issued the certificate while `validSignature` reports a tampered one
/// (flags are independent). A name alone never identifies an issuer.
pub fn resolve_issuer(input: &CheckInput<'_>, trust: &TrustList) -> IssuerResolution {
    let leaf = input.certificate;
    let presented: Vec<usize> = input
        .intermediates
        .iter()
        .enumerate()
        .filter(|(_, c)| c.der != leaf.der)
        .map(|(i, _)| i)
        .take(MAX_PRESENTED_INTERMEDIATES)
        .collect();
    let mut budget = MAX_SIGNATURE_CHECKS;

    // Candidates for the certificate's direct issuer: trust list first, then presented.
    let mut candidates: Vec<KeyRef> = trust
        .issuers()
        .iter()
        .enumerate()
        .filter(|(_, t)| names_issuer(leaf, &t.certificate))
        .map(|(i, _)| KeyRef::TrustList(i))
        .collect();
    candidates.extend(
        presented
            .iter()
            .filter(|&&p| {
                is_usable_ca(&input.intermediates[p]) && names_issuer(leaf, &input.intermediates[p])
            })
            .map(|&p| KeyRef::Presented(p)),
    );

    let mut signature = if candidates.is_empty() {
        SignatureOutcome::IssuerKeyNotFound
    } else {
        SignatureOutcome::Invalid
    };
    let mut verified_by = Vec::new();
    let mut last_refusal = None;
    for c in &candidates {
        if budget == 0 {
            break;
        }
        budget -= 1;
        match leaf.verify_signed_by(&c.certificate(trust, input.intermediates).spki) {
            Ok(()) => verified_by.push(*c),
            Err(e) if e.is_algorithm_problem() => last_refusal = Some(e),
            Err(_) => {}
        }
    }
    if let Some(by) = verified_by.first() {
        signature = SignatureOutcome::Verified { by: *by };
    } else if let Some(e) = last_refusal {
        signature = SignatureOutcome::NotCheckable(e);
    }

    // Issuer identification: candidates bound to the certificate by a verified signature or
    // by equal key identifiers; presented ones must chain to the trust list.
    let mut matches: Vec<(usize, Vec<usize>)> = Vec::new();
    for c in &candidates {
        let cand = c.certificate(trust, input.intermediates);
        if !(verified_by.contains(c) || bound_by_key_id(leaf, cand)) {
            continue;
        }
        match *c {
            KeyRef::TrustList(i) => matches.push((i, Vec::new())),
            KeyRef::Presented(p) => {
                let mut visited = vec![p];
                paths_to_trust_list(
                    input,
                    trust,
                    &presented,
                    p,
                    &mut visited,
                    &mut budget,
                    &mut matches,
                );
            }
        }
    }

    let mut first_refusal = None;
    for (issuer, path) in &matches {
        match approval(input, trust, *issuer) {
            Ok(()) => {
                return IssuerResolution {
                    signature,
                    trust: TrustOutcome::Approved {
                        issuer: *issuer,
                        path: path.clone(),
                    },
                };
            }
            Err(reason) => {
                if first_refusal.is_none() {
                    first_refusal = Some(TrustOutcome::NotApproved {
                        issuer: *issuer,
                        path: path.clone(),
                        reason,
                    });
                }
            }
        }
    }
    IssuerResolution {
        signature,
        trust: first_refusal.unwrap_or(TrustOutcome::Unknown),
    }
}

/// Depth-first search from presented intermediate `from` up to the trust list. Every link
/// must be a verified signature: intermediates are attacker-supplied.
fn paths_to_trust_list(
    input: &CheckInput<'_>,
    trust: &TrustList,
    presented: &[usize],
    from: usize,
    visited: &mut Vec<usize>,
    budget: &mut usize,
    out: &mut Vec<(usize, Vec<usize>)>,
) {
    let cert = &input.intermediates[from];
    for (i, t) in trust.issuers().iter().enumerate() {
        if *budget == 0 {
            return;
        }
        if names_issuer(cert, &t.certificate) {
            *budget -= 1;
            if cert.verify_signed_by(&t.certificate.spki).is_ok() {
                out.push((i, visited.clone()));
            }
        }
    }
    if visited.len() >= MAX_PATH_INTERMEDIATES {
        return;
    }
    for &p in presented {
        if *budget == 0 {
            return;
        }
        let next = &input.intermediates[p];
        if visited.contains(&p) || !is_usable_ca(next) || !names_issuer(cert, next) {
            continue;
        }
        *budget -= 1;
        if cert.verify_signed_by(&next.spki).is_ok() {
            visited.push(p);
            paths_to_trust_list(input, trust, presented, p, visited, budget, out);
            visited.pop();
        }
    }
}

/// `candidate` carries `cert`'s issuer name, and no key identifier contradicts it.
fn names_issuer(cert: &PspCertificate, candidate: &PspCertificate) -> bool {
    if cert.issuer_raw != candidate.subject_raw {
        return false;
    }
    match (&cert.authority_key_id, &candidate.subject_key_id) {
        (Some(aki), Some(ski)) => aki == ski,
        _ => true,
    }
}

/// The key identifiers on both sides are present and equal.
fn bound_by_key_id(cert: &PspCertificate, candidate: &PspCertificate) -> bool {
    matches!((&cert.authority_key_id, &candidate.subject_key_id), (Some(a), Some(s)) if a == s)
}

/// A presented certificate may act as an issuer only if it is a CA allowed to sign
/// certificates (RFC 5280 4.2.1.9 and 4.2.1.3).
fn is_usable_ca(c: &PspCertificate) -> bool {
    c.is_ca == Some(true) && c.key_usage.is_none_or(|ku| ku.key_cert_sign)
}

/// Whether trust-list issuer `issuer` approves the certificate for this jurisdiction; the
/// reason when it does not.
fn approval(input: &CheckInput<'_>, trust: &TrustList, issuer: usize) -> Result<(), String> {
    let cert = input.certificate;
    let t = &trust.issuers()[issuer];
    let source = &trust.sources()[t.source];
    if !source.valid_for.contains(&input.jurisdiction) {
        return Err(format!(
            "trust source `{}` is not approved for jurisdiction {}",
            source.name, input.jurisdiction
        ));
    }
    let Some(a) = t.approval_at(cert.not_before) else {
        return Err(format!(
            "the service had no status at the certificate's issuance ({})",
            cert.not_before
        ));
    };
    if !a.active {
        return Err(format!(
            "the service was `{}` at the certificate's issuance ({})",
            a.status, cert.not_before
        ));
    }
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
                return Err("QcType esign: an electronic-signature certificate is neither a website nor a seal certificate".to_owned());
            }
            QcType::Other(_) => {}
        }
    }
    if kinds.is_empty() {
        match source.untyped {
            UntypedPolicy::Reject => {
                return Err(format!(
                    "the certificate has no QcType web or eseal, and trust source `{}` rejects untyped certificates",
                    source.name
                ));
            }
            UntypedPolicy::Accept if a.kinds.is_empty() => {
                return Err("the service is approved for no certificate kind".to_owned());
            }
            UntypedPolicy::Accept => {}
        }
    }
    if let Some(k) = kinds.iter().find(|k| !a.kinds.contains(k)) {
        return Err(format!("the service is not approved for {k}"));
    }
    if source.qc_compliance == QcCompliancePolicy::Required
        && !cert.qc.as_ref().is_some_and(|q| q.has_compliance())
    {
        return Err(format!(
            "the certificate has no QcCompliance statement, which trust source `{}` requires",
            source.name
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use time::macros::datetime;

    use super::*;
    use crate::config::CertKind;
    use crate::trust::{Approval, QtspSource, Source, TrustedIssuer};

    fn sandbox(rel: &str) -> PspCertificate {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
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
        );
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
            TrustOutcome::NotApproved { reason, .. } => reason,
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
        );
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
