//! What the conformance harnesses of psp-check (`tests/x509_limbo.rs`, `tests/pkits_paths.rs`,
//! `tests/pkits_revocation.rs`) share: how a peer suite's case is put to the real check core,
//! and how known divergences are recorded.
//!
//! The check core is driven as a black box, through the same calls the checking service
//! (`psp_service::CheckService`) makes (`resolve_issuer`, then revocation evidence for the issuer it
//! names, then `report`). The suite's trust anchors become the issuers of one trust source;
//! the case passes when `validQTSP && validSignature && notExpired`, and also `notRevoked`
//! when the case brings CRLs. Everything that builds product values is in [`trust_list`] and
//! [`run_case`], so an API change touches only these two functions.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use psp_check::cert::PspCertificate;
use psp_check::check::{
    self, CheckInput, CheckReport, MethodOutcome, PathEvidence, RevocationEvidence, RevocationPlan,
    Snapshots,
};
use psp_check::country::CountryCode;
use psp_check::register::RegisterSnapshot;
use psp_check::revocation::crl::{CrlError, CrlIndex, DEFAULT_CRL_GRACE};
use psp_check::revocation::ocsp::DEFAULT_CLOCK_SKEW;
use psp_check::trust::{
    CertKind, QcCompliancePolicy, QtspSource, Source, TrustList, UntypedPolicy,
};
use serde::Deserialize;
use time::OffsetDateTime;

/// `rel` in the shared test material (`../shared/data` beside the repository).
pub fn data(rel: &str) -> std::path::PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel);
    assert!(
        p.exists(),
        "{} is missing: the tests read ../shared/data beside the repository",
        p.display()
    );
    p
}

/// `s`, an RFC 3339 time.
pub fn at(s: &str) -> OffsetDateTime {
    OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .expect("test time is RFC 3339")
}

/// The bytes of `path`, or a panic naming it.
pub fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The transaction jurisdiction of every case; the one trust source is valid for it.
pub const JURISDICTION: &str = "DE";

/// A suite's verdict, in x509-limbo's words (PKITS "Valid" is SUCCESS, "Invalid" FAILURE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum Outcome {
    #[serde(rename = "SUCCESS")]
    Success,
    #[serde(rename = "FAILURE")]
    Failure,
}

/// One trust source whose issuers are the case's trust anchors: both kinds, no QcCompliance
/// or QcType required (the suites' certificates are not PSD2 certificates), approved since
/// always, valid for [`JURISDICTION`].
pub fn trust_list(anchors: &[PspCertificate]) -> TrustList {
    let mut source = Source::configured("conformance", QtspSource::Qtsp, &[jurisdiction()]);
    source.reported_jurisdiction = "EEA".into();
    source.qc_compliance = QcCompliancePolicy::Optional;
    source.untyped = UntypedPolicy::Accept;
    let mut trust = TrustList::new(vec![source], Vec::new()).expect("one source");
    trust
        .add_issuers(
            0,
            anchors.to_vec(),
            &[CertKind::Web, CertKind::Seal],
            "trust anchor",
        )
        .expect("source 0 exists");
    trust
}

fn jurisdiction() -> CountryCode {
    JURISDICTION.parse().expect("a country code")
}

/// A CRL supplied by the suite, named for messages.
pub struct Crl {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// What the check core said about one case.
pub struct Run {
    pub outcome: Outcome,
    pub report: CheckReport,
    /// Whether the case brought revocation data (else notRevoked is not part of the verdict).
    pub revocation: bool,
}

impl Run {
    /// The flags, errors and explanation in one line, for failure messages. Revocation lines
    /// are left out when the case brought no revocation data (they only say so).
    pub fn detail(&self) -> String {
        let v = &self.report.validity();
        let revocation = |s: &str| {
            self.revocation
                || !(s.starts_with("CRL:")
                    || s.starts_with("OCSP:")
                    || s.starts_with("crl_response_error")
                    || s.starts_with("ocsp_response_error"))
        };
        let errors: Vec<String> = self
            .report
            .errors()
            .iter()
            .map(|e| format!("{}: {}", e.code.as_str(), e.title))
            .filter(|s| revocation(s))
            .collect();
        let explanation: Vec<&str> = self
            .report
            .explanation()
            .iter()
            .map(String::as_str)
            .filter(|s| revocation(s))
            .collect();
        let not_revoked = if self.revocation {
            format!(" notRevoked={}", v.not_revoked)
        } else {
            String::new()
        };
        format!(
            "validQTSP={} validSignature={} notExpired={}{not_revoked}; explanation: {}; errors: {}",
            v.valid_qtsp,
            v.valid_signature,
            v.not_expired,
            explanation.join(" | "),
            if errors.is_empty() {
                "none".to_owned()
            } else {
                errors.join(" | ")
            }
        )
    }
}

/// Runs one case through the check core. `crls`: `None` when the case has no revocation
/// data (then `notRevoked` is not part of the verdict); otherwise the CRLs the harness stands
/// in for the fetcher with (see [`crl_evidence`]).
pub fn run_case(
    anchors: &[PspCertificate],
    leaf: &PspCertificate,
    intermediates: &[PspCertificate],
    now: OffsetDateTime,
    crls: Option<&[Crl]>,
) -> Run {
    let trust = trust_list(anchors);
    let registers = RegisterSnapshot::empty();
    let input = CheckInput {
        certificate: leaf,
        intermediates,
        jurisdiction: jurisdiction(),
        now,
    };
    let snapshots = Snapshots {
        trust: &trust,
        registers: &registers,
    };
    // As the checking service does: resolve first, then gather the evidence of every
    // certificate of the verified path (`RevocationPlan`), CRL signers included.
    let resolution = check::resolve_issuer(&input, &trust);
    let evidence = match crls {
        None => PathEvidence::not_checked("no revocation data in this case"),
        Some(crls) => match RevocationPlan::new(input, &trust, &resolution) {
            None => PathEvidence::not_checked(
                "no certification path to a trust anchor verified: no revocation evidence",
            ),
            Some(mut plan) => loop {
                let pending = plan.pending();
                if pending.is_empty() {
                    break plan.evidence();
                }
                for i in pending {
                    let Some(t) = plan.target(i) else { continue };
                    let (certificate, issuer) = (t.certificate, t.issuer);
                    let signers = t.crl_signers.clone();
                    let (evidence, signer) =
                        crl_evidence(certificate, Some(issuer), &signers, crls, now);
                    plan.record(i, evidence, signer);
                }
            },
        },
    };
    let report = check::report(&input, snapshots, &resolution, &evidence);
    let v = &report.validity();
    let pass =
        v.valid_qtsp && v.valid_signature && v.not_expired && (crls.is_none() || v.not_revoked);
    Run {
        outcome: if pass {
            Outcome::Success
        } else {
            Outcome::Failure
        },
        report,
        revocation: crls.is_some(),
    }
}

/// The CRL evidence for `leaf` (any certificate of the path), with the product's pure CRL
/// code (`CrlIndex`: verified with the issuer the check resolved or one of the CRL signers
/// whose paths it verified, current under the default grace and clock skew, covering the
/// certificate), as the revocation checker's CRL method computes it. The one difference: the
/// CRLs come from the suite instead of the certificate's distribution points, so there is no
/// URL order; the harness takes "revoked" if any usable CRL lists the certificate, else
/// "good" if one usable CRL does not, else "could not complete". CRLs by another issuer are
/// passed over silently: they would not be at the distribution point. Also returns the index
/// into `crl_signers` of the signer of the CRL relied on, when not the issuer's own key.
pub fn crl_evidence(
    leaf: &PspCertificate,
    issuer: Option<&PspCertificate>,
    crl_signers: &[&PspCertificate],
    crls: &[Crl],
    now: OffsetDateTime,
) -> (RevocationEvidence, Option<usize>) {
    let ocsp = MethodOutcome::Failed {
        reason: "no OCSP in this suite".into(),
    };
    let Some(issuer) = issuer else {
        return (
            RevocationEvidence {
                crl: MethodOutcome::Failed {
                    reason: "the issuer is unknown: no CRL can be verified".into(),
                },
                ocsp,
            },
            None,
        );
    };
    let signer_of = |crl: &CrlIndex| {
        crl_signers
            .iter()
            .position(|s| psp_check::hex::sha256(&s.spki) == crl.signer_key_sha256())
            .filter(|_| psp_check::hex::sha256(&issuer.spki) != crl.signer_key_sha256())
    };
    let mut good = None;
    let mut reasons = Vec::new();
    for Crl { name, bytes } in crls {
        let crl = match CrlIndex::parse_signed(bytes, issuer, crl_signers) {
            Ok(crl) => crl,
            Err(CrlError::IssuerMismatch { .. }) => continue,
            Err(e) => {
                reasons.push(format!("{name}: {e}"));
                continue;
            }
        };
        // A CRL of another issuer says nothing of this certificate.
        if let Err(CrlError::IssuerMismatch { .. }) = crl.status(leaf) {
            continue;
        }
        let note = signer_of(&crl)
            .map(|k| format!(", signed by the CRL signer {}", crl_signers[k].subject))
            .unwrap_or_default();
        let tolerance = (DEFAULT_CRL_GRACE, DEFAULT_CLOCK_SKEW);
        match MethodOutcome::from_crl(&crl, leaf, name, now, tolerance).noting(&note) {
            revoked @ MethodOutcome::Revoked { .. } => {
                return (RevocationEvidence { crl: revoked, ocsp }, signer_of(&crl));
            }
            good_answer @ MethodOutcome::Good { .. } => {
                good.get_or_insert((good_answer, signer_of(&crl)));
            }
            MethodOutcome::Failed { reason } => reasons.push(reason),
        }
    }
    if reasons.is_empty() {
        reasons.push("no CRL by the certificate's issuer".into());
    }
    let (crl, signer) = good.unwrap_or((
        MethodOutcome::Failed {
            reason: reasons.join("; "),
        },
        None,
    ));
    (RevocationEvidence { crl, ocsp }, signer)
}

/// `[[divergence]]` entries: cases where psp-gateway deliberately gives another outcome than
/// the suite, `expected` being the outcome psp-gateway is meant to give.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DivergenceFile {
    #[serde(default)]
    divergence: Vec<Divergence>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Divergence {
    pub id: String,
    pub expected: Outcome,
    pub reason: String,
}

pub fn load_divergences(path: &Path) -> BTreeMap<String, Divergence> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file: DivergenceFile =
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut map = BTreeMap::new();
    for d in file.divergence {
        assert!(
            !d.reason.trim().is_empty(),
            "{}: divergence {} has no reason",
            path.display(),
            d.id
        );
        let id = d.id.clone();
        assert!(
            map.insert(id.clone(), d).is_none(),
            "{}: divergence {id} is listed twice",
            path.display()
        );
    }
    map
}

/// One case's result, for [`judge`].
pub struct Judged {
    pub id: String,
    pub expected: Outcome,
    pub actual: Outcome,
    pub detail: String,
}

/// Agreements, intended divergences, and the problems: disagreements not in the divergence
/// file, entries that no longer diverge (stale) or name no case that ran.
pub struct Verdicts {
    pub agree: usize,
    pub intended: usize,
    pub problems: Vec<String>,
}

pub fn judge(results: &[Judged], divergences: &BTreeMap<String, Divergence>) -> Verdicts {
    let mut v = Verdicts {
        agree: 0,
        intended: 0,
        problems: Vec::new(),
    };
    let mut seen = BTreeSet::new();
    for r in results {
        seen.insert(r.id.as_str());
        match divergences.get(&r.id) {
            None if r.actual == r.expected => v.agree += 1,
            None => v.problems.push(format!(
                "{}: suite expects {:?}, psp-gateway gives {:?}: {}",
                r.id, r.expected, r.actual, r.detail
            )),
            Some(d) if d.expected == r.expected => v.problems.push(format!(
                "{}: divergence entry says {:?}, which is what the suite expects: not a divergence",
                r.id, d.expected
            )),
            Some(_) if r.actual == r.expected => v.problems.push(format!(
                "{}: stale divergence entry: psp-gateway now gives the suite's {:?}",
                r.id, r.expected
            )),
            Some(_) => v.intended += 1,
        }
    }
    for id in divergences.keys() {
        if !seen.contains(id.as_str()) {
            v.problems.push(format!(
                "{id}: divergence entry for a case that did not run (unknown or skipped)"
            ));
        }
    }
    v
}
