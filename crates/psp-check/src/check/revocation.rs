//! Combining revocation evidence into `notRevoked` (`docs/design.md` section 3), and whose
//! evidence is needed ([`RevocationPlan`]).
//!
//! The evidence itself (fetching, verifying and caching CRLs and OCSP responses) is gathered
//! at the edge; this is the pure rule: for each certificate of the verified path below the
//! trust-list issuer (RFC 5280 section 6.1.3 (a)(3)), no method says revoked and at least one
//! method gave a verified definitive answer; `notRevoked` is true only if that holds for every
//! one. Each method that could not complete adds its error entry naming the certificate, also
//! when the other method succeeded.

use super::path::{MAX_PRESENTED_INTERMEDIATES, SignerPaths, same_name};
use super::report::{CertCheckError, ErrorCode};
use super::{CheckInput, IssuerResolution};
use crate::cert::PspCertificate;
pub use crate::revocation::{
    CaEvidence, MethodOutcome, PathEvidence, RevocationEvidence, RevocationStatus,
};
use crate::trust::TrustList;

/// At most this many certificates have their revocation checked for one check: each target
/// is a distinct certificate among the PSP's and the presented ones
/// ([`MAX_PRESENTED_INTERMEDIATES`]), intermediates and CRL signers alike, so the bound holds
/// by construction; it is kept as a guard (beyond it `notRevoked` would be false, never cut
/// silently: each target costs fetches).
pub const MAX_REVOCATION_TARGETS: usize = 1 + MAX_PRESENTED_INTERMEDIATES;

/// A certificate on the path whose revocation is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Leaf,
    /// Index into the presented intermediates.
    Presented(usize),
}

/// A CRL signer other than the issuer's own key.
#[derive(Debug, Clone)]
enum Signer {
    /// The trust-list issuer at the head of the path: never checked itself.
    Anchor,
    /// A presented certificate, with the presented intermediates of its verified path
    /// above it (signer side first).
    Presented { index: usize, above: Vec<usize> },
}

/// One certificate whose revocation status is to be established.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    /// The certificate.
    pub certificate: &'a PspCertificate,
    /// Its issuer on the verified path: the key CRLs and OCSP answers must verify with (or
    /// a responder it delegated).
    pub issuer: &'a PspCertificate,
    /// The certificates of the issuer's other keys whose CRLs are usable too (RFC 5280
    /// section 6.3.3 (f)): same name as the issuer, cRLSign when keyUsage is present, and a
    /// certification path that verifies to the same trust-list issuer.
    pub crl_signers: Vec<&'a PspCertificate>,
    /// "certificate", "intermediate CA" or "CRL signer".
    pub role: &'static str,
    node: Node,
    signers: Vec<Signer>,
    evidence: Option<RevocationEvidence>,
}

/// Whose revocation to check for a verified path, and the evidence as it comes in. Pure: the
/// edge (the checking service, or a conformance harness) fetches the evidence of each
/// [`RevocationPlan::pending`] target and [`RevocationPlan::record`]s it; a CRL signed by
/// another key of the issuer adds that key's certificate (and the intermediates of its path)
/// to the targets, since the CRL is only as good as its signer.
pub struct RevocationPlan<'a> {
    input: CheckInput<'a>,
    trust: &'a TrustList,
    anchor: usize,
    signer_paths: SignerPaths<'a>,
    targets: Vec<Target<'a>>,
    incomplete: Option<String>,
}

impl<'a> RevocationPlan<'a> {
    /// The plan for the resolution's verified path; `None` when no path verified (then
    /// nothing may be fetched: the certificate's URLs are attacker data), or when the
    /// resolution was not made for `input` against `trust`.
    pub fn new(
        input: CheckInput<'a>,
        trust: &'a TrustList,
        resolution: &IssuerResolution,
    ) -> Option<RevocationPlan<'a>> {
        // A resolution made for other inputs or another trust list plans nothing.
        if !resolution.is_for(&input, trust) {
            return None;
        }
        let path = resolution.path.as_ref().ok()?;
        let mut plan = RevocationPlan {
            input,
            trust,
            anchor: path.anchor(),
            signer_paths: SignerPaths::new(input.certificate, input.intermediates, trust),
            targets: Vec::new(),
            incomplete: None,
        };
        let chain: Vec<Node> = std::iter::once(Node::Leaf)
            .chain(path.intermediates().iter().map(|&i| Node::Presented(i)))
            .collect();
        plan.add_chain(&chain, "intermediate CA");
        Some(plan)
    }

    fn cert(&self, node: Node) -> &'a PspCertificate {
        match node {
            Node::Leaf => self.input.certificate,
            Node::Presented(i) => &self.input.intermediates[i],
        }
    }

    /// Adds `chain` (a certificate, then the presented intermediates above it up to the
    /// trust-list issuer) to the targets, each with its issuer; `role` names the ones above
    /// the first.
    fn add_chain(&mut self, chain: &[Node], role: &'static str) {
        let anchor_cert = &self.trust.issuers()[self.anchor].certificate;
        for (k, &node) in chain.iter().enumerate() {
            if self.targets.iter().any(|t| t.node == node) {
                continue;
            }
            if self.targets.len() >= MAX_REVOCATION_TARGETS {
                self.incomplete = Some(format!(
                    "more than {MAX_REVOCATION_TARGETS} certificates would need their revocation checked"
                ));
                return;
            }
            let certificate = self.cert(node);
            let issuer = match chain.get(k + 1) {
                Some(&above) => self.cert(above),
                None => anchor_cert,
            };
            let signers = self.signers_for(certificate, issuer);
            let crl_signers = signers
                .iter()
                .map(|s| match s {
                    Signer::Anchor => anchor_cert,
                    Signer::Presented { index, .. } => &self.input.intermediates[*index],
                })
                .collect();
            let role = match (node, k) {
                (Node::Leaf, _) => "certificate",
                (_, 0) => role,
                _ => "intermediate CA",
            };
            self.targets.push(Target {
                certificate,
                issuer,
                crl_signers,
                role,
                node,
                signers,
                evidence: None,
            });
        }
    }

    /// The issuer's other keys whose CRLs about `certificate` are usable.
    fn signers_for(
        &mut self,
        certificate: &PspCertificate,
        issuer: &PspCertificate,
    ) -> Vec<Signer> {
        let may_sign_crls = |c: &PspCertificate| c.key_usage.is_none_or(|ku| ku.crl_sign);
        let mut out = Vec::new();
        let mut keys: Vec<&[u8]> = vec![&issuer.spki];
        let anchor_cert = &self.trust.issuers()[self.anchor].certificate;
        if same_name(certificate, anchor_cert)
            && !keys.contains(&anchor_cert.spki.as_slice())
            && may_sign_crls(anchor_cert)
        {
            keys.push(&anchor_cert.spki);
            out.push(Signer::Anchor);
        }
        let presented = self.input.intermediates;
        for (index, candidate) in presented.iter().enumerate() {
            if !same_name(certificate, candidate)
                || keys.contains(&candidate.spki.as_slice())
                || candidate.der == certificate.der
                || !may_sign_crls(candidate)
            {
                continue;
            }
            if let Some(above) = self.signer_paths.path(index, self.anchor) {
                keys.push(&candidate.spki);
                out.push(Signer::Presented { index, above });
            }
        }
        out
    }

    /// The targets whose evidence is still to be gathered (indices for
    /// [`RevocationPlan::target`] and [`RevocationPlan::record`]).
    pub fn pending(&self) -> Vec<usize> {
        (0..self.targets.len())
            .filter(|&i| self.targets[i].evidence.is_none())
            .collect()
    }

    /// The target at index `i` (as returned by [`RevocationPlan::pending`]); `None` for an
    /// index the plan does not have.
    pub fn target(&self, i: usize) -> Option<&Target<'a>> {
        self.targets.get(i)
    }

    /// Records target `i`'s evidence. `crl_signer`: the index into its
    /// [`Target::crl_signers`] of the signer whose CRL the CRL method used, when it was not
    /// the issuer's own key; that signer's certificate (and its path) then has its own
    /// revocation checked.
    pub fn record(&mut self, i: usize, evidence: RevocationEvidence, crl_signer: Option<usize>) {
        let Some(target) = self.targets.get_mut(i) else {
            return;
        };
        target.evidence = Some(evidence);
        if let Some(Signer::Presented { index, above }) =
            crl_signer.and_then(|k| target.signers.get(k)).cloned()
        {
            let chain: Vec<Node> = std::iter::once(index)
                .chain(above)
                .map(Node::Presented)
                .collect();
            self.add_chain(&chain, "CRL signer");
        }
    }

    /// The evidence gathered; a target never recorded counts as not checked.
    pub fn evidence(self) -> PathEvidence {
        let mut certificate = None;
        let mut above = Vec::new();
        for t in self.targets {
            let evidence = t.evidence.unwrap_or_else(|| {
                RevocationEvidence::not_checked("no revocation evidence was gathered for it")
            });
            match t.node {
                Node::Leaf => certificate = Some(evidence),
                Node::Presented(_) => above.push(CaEvidence {
                    role: t.role,
                    subject: t.certificate.subject.clone(),
                    fingerprint: t.certificate.fingerprint_sha256,
                    evidence,
                }),
            }
        }
        PathEvidence {
            certificate: certificate.unwrap_or_else(|| {
                RevocationEvidence::not_checked("no revocation evidence was gathered for it")
            }),
            above,
            incomplete: self.incomplete,
        }
    }
}

/// The evidence as the check may rely on it: every good or revoked answer whose proof
/// ([`crate::revocation::Verified`]) admits it for the certificate it is given for, signed by
/// that certificate's issuer on the verified path (or a CRL signer of that issuer), read as of
/// the time of the check; any other answer becomes a method that could not complete, saying
/// why. Without a verified path, no answer is about a certificate of the path: none is admitted.
pub(crate) fn admitted(
    input: &CheckInput<'_>,
    trust: &TrustList,
    resolution: &IssuerResolution,
    evidence: &PathEvidence,
) -> PathEvidence {
    // Who may sign answers about each certificate of the path, by its fingerprint; and, for
    // the CRL signers' own certificates, any key of the path.
    let mut signers: Vec<([u8; 32], Vec<[u8; 32]>)> = Vec::new();
    let mut path_keys: Vec<[u8; 32]> = Vec::new();
    if let Some(plan) = RevocationPlan::new(*input, trust, resolution) {
        for target in plan.targets.iter() {
            let mut keys = vec![crate::hex::sha256(&target.issuer.spki)];
            keys.extend(
                target
                    .crl_signers
                    .iter()
                    .map(|c| crate::hex::sha256(&c.spki)),
            );
            path_keys.extend(keys.iter().copied());
            signers.push((target.certificate.fingerprint_sha256, keys));
        }
    }
    let admit = |certificate: &[u8; 32], evidence: &RevocationEvidence| {
        let keys = signers
            .iter()
            .find(|(c, _)| c == certificate)
            .map_or(path_keys.as_slice(), |(_, keys)| keys.as_slice());
        let method = |outcome: &MethodOutcome| {
            let verified = match outcome {
                MethodOutcome::Good { verified, .. } | MethodOutcome::Revoked { verified, .. } => {
                    verified
                }
                MethodOutcome::Failed { .. } => return outcome.clone(),
            };
            match verified.admits(outcome, certificate, keys, input.now) {
                Ok(()) => outcome.clone(),
                Err(why) => MethodOutcome::Failed {
                    reason: format!("not relied on: {why}"),
                },
            }
        };
        RevocationEvidence {
            crl: method(&evidence.crl),
            ocsp: method(&evidence.ocsp),
        }
    };
    PathEvidence {
        certificate: admit(&input.certificate.fingerprint_sha256, &evidence.certificate),
        above: evidence
            .above
            .iter()
            .map(|ca| CaEvidence {
                evidence: admit(&ca.fingerprint, &ca.evidence),
                ..ca.clone()
            })
            .collect(),
        incomplete: evidence.incomplete.clone(),
    }
}

/// `notRevoked` for a whole path: the PSP's certificate's evidence ([`combine`]), and that of
/// every certificate in `path_cas` (the intermediates of the verified path, by fingerprint)
/// and every other CA certificate whose evidence was gathered (CRL signers relied on). A
/// certificate of the path without evidence is not revoked-checked: false. Each failure's
/// error entry names the certificate.
pub(crate) fn combine_path(
    evidence: &PathEvidence,
    subject: &str,
    path_cas: &[&PspCertificate],
    errors: &mut Vec<CertCheckError>,
) -> bool {
    let mut flag = combine(&evidence.certificate, subject, errors);
    for ca in path_cas {
        if !evidence
            .above
            .iter()
            .any(|e| e.fingerprint == ca.fingerprint_sha256)
        {
            flag &= combine(
                &RevocationEvidence::not_checked("no revocation evidence was gathered for it"),
                &format!("intermediate CA {}", ca.subject),
                errors,
            );
        }
    }
    for e in &evidence.above {
        flag &= combine(&e.evidence, &format!("{} {}", e.role, e.subject), errors);
    }
    if let Some(why) = &evidence.incomplete {
        errors.push(CertCheckError::new(
            ErrorCode::CrlResponseError,
            format!(
                "Revocation of the certification path of {subject} could not be checked: {why}"
            ),
        ));
        flag = false;
    }
    flag
}

/// The `notRevoked` flag; pushes an error entry for each method that could not complete.
pub(crate) fn combine(
    evidence: &RevocationEvidence,
    subject: &str,
    errors: &mut Vec<CertCheckError>,
) -> bool {
    let methods = [
        (&evidence.crl, ErrorCode::CrlResponseError, "CRL"),
        (&evidence.ocsp, ErrorCode::OcspResponseError, "OCSP"),
    ];
    let mut revoked = false;
    let mut good = false;
    for (outcome, code, name) in methods {
        match outcome {
            MethodOutcome::Good { .. } => good = true,
            MethodOutcome::Revoked { .. } => revoked = true,
            MethodOutcome::Failed { reason } => errors.push(CertCheckError::new(
                code,
                format!("{name} check could not be completed for {subject}: {reason}"),
            )),
        }
    }
    let flag = good && !revoked;
    debug_assert_eq!(flag, evidence.status() == RevocationStatus::Good);
    flag
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> MethodOutcome {
        MethodOutcome::Good {
            evidence: "test".into(),
            valid_until: None,
            verified: crate::revocation::Verified::for_tests(true),
        }
    }
    fn revoked() -> MethodOutcome {
        MethodOutcome::Revoked {
            at: None,
            reason: None,
            evidence: "test".into(),
            verified: crate::revocation::Verified::for_tests(false),
        }
    }
    fn failed() -> MethodOutcome {
        MethodOutcome::Failed {
            reason: "down".into(),
        }
    }

    fn run(crl: MethodOutcome, ocsp: MethodOutcome) -> (bool, Vec<&'static str>) {
        let mut errors = Vec::new();
        let flag = combine(&RevocationEvidence { crl, ocsp }, "CN=x", &mut errors);
        (flag, errors.iter().map(|e| e.code.as_str()).collect())
    }

    #[test]
    fn a_ca_of_the_path_without_evidence_makes_not_revoked_false_naming_it() {
        let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("certs/ca/qtsp-issuing.pem");
        let ca = PspCertificate::parse(&std::fs::read(path).expect("sandbox CA")).expect("parses");
        let evidence = PathEvidence::from(RevocationEvidence {
            crl: good(),
            ocsp: good(),
        });
        let mut errors = Vec::new();
        assert!(combine_path(&evidence, "CN=x", &[], &mut errors));
        assert!(errors.is_empty());
        assert!(!combine_path(&evidence, "CN=x", &[&ca], &mut errors));
        assert_eq!(errors.len(), 2);
        assert!(
            errors
                .iter()
                .all(|e| e.title.contains(&format!("intermediate CA {}", ca.subject))),
            "{errors:?}"
        );

        // Evidence for it, revoked: false, and no error entry (as for the certificate).
        let mut evidence = evidence;
        evidence.above.push(CaEvidence {
            role: "intermediate CA",
            subject: ca.subject.clone(),
            fingerprint: ca.fingerprint_sha256,
            evidence: RevocationEvidence {
                crl: revoked(),
                ocsp: good(),
            },
        });
        let mut errors = Vec::new();
        assert!(!combine_path(&evidence, "CN=x", &[&ca], &mut errors));
        assert!(errors.is_empty());
        assert_eq!(evidence.status(), RevocationStatus::Revoked);
    }

    #[test]
    fn one_good_answer_suffices_and_the_failed_method_is_still_reported() {
        assert_eq!(run(good(), failed()), (true, vec!["ocsp_response_error"]));
        assert_eq!(run(failed(), good()), (true, vec!["crl_response_error"]));
        assert_eq!(run(good(), good()), (true, vec![]));
    }

    #[test]
    fn any_revoked_answer_wins_over_a_good_one() {
        assert_eq!(run(good(), revoked()), (false, vec![]));
        assert_eq!(run(revoked(), good()), (false, vec![]));
        assert_eq!(
            run(revoked(), failed()),
            (false, vec!["ocsp_response_error"])
        );
    }

    #[test]
    fn no_verified_answer_is_not_revoked_false_with_both_errors() {
        assert_eq!(
            run(failed(), failed()),
            (false, vec!["crl_response_error", "ocsp_response_error"])
        );
        let (flag, codes) = {
            let mut errors = Vec::new();
            let f = combine(
                &RevocationEvidence::not_checked("not attempted"),
                "CN=x",
                &mut errors,
            );
            (f, errors)
        };
        assert!(!flag);
        assert_eq!(codes.len(), 2);
        assert!(
            codes[0].title.contains("CN=x"),
            "the title names the subject"
        );
    }
}
