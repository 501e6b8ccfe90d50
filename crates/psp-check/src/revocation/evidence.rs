//! Revocation evidence: what each method (CRL, OCSP) established for one certificate. A good
//! answer comes only from a verified CRL ([`MethodOutcome::from_crl`]) or OCSP response
//! ([`MethodOutcome::from_ocsp`]), current at the time of the check; fetching them is the
//! caller's (the service's `RevocationChecker`); the pure rule that turns the evidence into
//! `notRevoked` is the check's (`check::revocation`).

use std::time::Duration;

use time::OffsetDateTime;

use super::crl::{CrlError, CrlIndex, CrlStatus};
use super::ocsp::{OcspAnswer, OcspSigner, OcspStatus};
use super::rfc3339;
use crate::cert::PspCertificate;

/// Proof that an answer (good or revoked) came from a CRL or OCSP response this crate
/// verified, and what it is about: only [`MethodOutcome::from_crl`] and
/// [`MethodOutcome::from_ocsp`] make one, so a program cannot assert that a certificate is not
/// revoked:
///
/// ```compile_fail
/// use psp_check::revocation::{MethodOutcome, Verified};
/// let forged = MethodOutcome::Good {
///     evidence: "trust me".into(),
///     valid_until: None,
///     verified: Verified { good: true },
/// };
/// ```
///
/// while reading one compiles (so the one above fails for the forgery alone):
///
/// ```
/// use psp_check::revocation::{MethodOutcome, Verified};
/// fn proof(answer: &MethodOutcome) -> Option<&Verified> {
///     match answer {
///         MethodOutcome::Good { verified, .. } => Some(verified),
///         _ => None,
///     }
/// }
/// ```
///
/// The proof binds the answer to what it establishes, and the check holds every answer to it
/// (`check::revocation`): its kind (a revoked answer's proof does not make a good answer),
/// the certificate it is about (SHA-256 of its DER), the key that signed the CRL or OCSP
/// response (which must be the certificate's issuer's on the verified path, or a CRL signer
/// of that issuer), the revocation time of a revoked answer, and the time it was read as of
/// ([`RevocationEvidence::as_of`]), which must be the time of the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    good: bool,
    certificate_sha256: [u8; 32],
    signer_key_sha256: [u8; 32],
    revoked_at: Option<OffsetDateTime>,
    as_of: Option<OffsetDateTime>,
}

impl Verified {
    fn new(good: bool, certificate: &PspCertificate, signer_key_sha256: [u8; 32]) -> Verified {
        Verified {
            good,
            certificate_sha256: certificate.fingerprint_sha256,
            signer_key_sha256,
            revoked_at: None,
            as_of: None,
        }
    }

    /// SHA-256 of the DER of the certificate the answer is about.
    pub fn certificate_sha256(&self) -> &[u8; 32] {
        &self.certificate_sha256
    }

    /// SHA-256 of the SubjectPublicKeyInfo of the key that signed the CRL or OCSP response.
    pub fn signer_key_sha256(&self) -> &[u8; 32] {
        &self.signer_key_sha256
    }

    /// The time the answer was read as of, when it was ([`RevocationEvidence::as_of`]).
    pub fn as_of(&self) -> Option<OffsetDateTime> {
        self.as_of
    }

    /// Whether `outcome` is the answer this proof was made for: of its kind, about
    /// `certificate_sha256`, signed by one of `signers`, read as of `now` or current, with
    /// the revocation time it was made with. The reason when not.
    pub(crate) fn admits(
        &self,
        outcome: &MethodOutcome,
        certificate_sha256: &[u8; 32],
        signers: &[[u8; 32]],
        now: OffsetDateTime,
    ) -> Result<(), &'static str> {
        let (good, at) = match outcome {
            MethodOutcome::Good { .. } => (true, None),
            MethodOutcome::Revoked { at, .. } => (false, *at),
            MethodOutcome::Failed { .. } => return Err("a failure carries no answer"),
        };
        if good != self.good || (!good && at != self.revoked_at) {
            return Err("the answer is not the one its CRL or OCSP response gave");
        }
        if &self.certificate_sha256 != certificate_sha256 {
            return Err("the answer is about another certificate");
        }
        if !signers.contains(&self.signer_key_sha256) {
            return Err("the answer is signed by a key that is not this certificate's issuer's");
        }
        if self.as_of.is_some_and(|t| t != now) {
            return Err("the answer was read as of another time than the check's");
        }
        Ok(())
    }
}

#[cfg(test)]
impl Verified {
    /// For this crate's unit tests of the rule that combines evidence: an answer about the
    /// certificate whose fingerprint is all zeroes, signed by the all-zero key.
    pub(crate) fn for_tests(good: bool) -> Verified {
        Verified {
            good,
            certificate_sha256: [0; 32],
            signer_key_sha256: [0; 32],
            revoked_at: None,
            as_of: None,
        }
    }
}

/// What one revocation method established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MethodOutcome {
    /// A verified, current, definitive answer: not revoked, until `valid_until` (the CRL's
    /// or OCSP response's `nextUpdate`, or the cache's cap when it has none).
    Good {
        /// What the answer was (source, signer, times), for the report.
        evidence: String,
        /// Until when the answer may be relied on; `None` when read as of a past time.
        valid_until: Option<OffsetDateTime>,
        /// That the answer was verified: see [`Verified`].
        verified: Verified,
    },
    /// A verified answer: revoked.
    Revoked {
        /// The revocation time, if the answer gives one.
        at: Option<OffsetDateTime>,
        /// The revocation reason's RFC 5280 name (`keyCompromise`, …), if given.
        reason: Option<String>,
        /// What the answer was (source, signer, times), for the report.
        evidence: String,
        /// That the answer was verified: a revocation read as of an earlier time
        /// ([`RevocationEvidence::as_of`]) becomes a good answer, so it too must be real.
        verified: Verified,
    },
    /// The method could not complete; `reason` says why (no URL, fetch failed, bad signature,
    /// stale, OCSP `unknown` or `tryLater`, …).
    Failed {
        /// Why the method could not complete.
        reason: String,
    },
}

impl MethodOutcome {
    /// What a verified CRL says of `certificate` at `now`: good (not listed) or revoked, or
    /// failed when the CRL is not current at `now` (`thisUpdate <= now + skew`,
    /// `now <= nextUpdate + grace`), does not cover the certificate, or was not issued by
    /// the certificate's issuer. `source` says where the CRL came from, for the report.
    pub fn from_crl(
        crl: &CrlIndex,
        certificate: &PspCertificate,
        source: &str,
        now: OffsetDateTime,
        (grace, skew): (Duration, Duration),
    ) -> MethodOutcome {
        let evidence = format!(
            "CRL from {source}, number {}, thisUpdate {}, nextUpdate {}, {} entries",
            crl.crl_number().unwrap_or("none"),
            rfc3339(crl.this_update()),
            rfc3339(crl.next_update()),
            crl.len()
        );
        let status = crl
            .check_current(now, grace, skew)
            .and_then(|()| crl.status(certificate));
        let signer = crl.signer_key_sha256();
        match status {
            Ok(CrlStatus::NotListed) => MethodOutcome::Good {
                evidence,
                valid_until: Some(crl.next_update()),
                verified: Verified::new(true, certificate, signer),
            },
            Ok(CrlStatus::Revoked(entry)) => MethodOutcome::Revoked {
                at: Some(entry.at),
                reason: entry.reason.map(|r| r.to_string()),
                evidence,
                verified: Verified {
                    revoked_at: Some(entry.at),
                    ..Verified::new(false, certificate, signer)
                },
            },
            Err(e) => MethodOutcome::failed(&e, source),
        }
    }

    /// What a verified OCSP answer ([`super::ocsp::verify_response`]) says, or failed when it
    /// is not current at `now` (with `skew` at both ends). `source` says where it came from.
    pub fn from_ocsp(
        answer: &OcspAnswer,
        certificate: &PspCertificate,
        source: &str,
        (now, skew): (OffsetDateTime, Duration),
    ) -> MethodOutcome {
        if answer.serial() != certificate.serial.as_slice() {
            return MethodOutcome::Failed {
                reason: format!("{source}: the OCSP answer is about another certificate"),
            };
        }
        if !answer.usable_at(now, skew) {
            return MethodOutcome::Failed {
                reason: format!(
                    "{source}: the OCSP answer is not current (thisUpdate {}, usable until {})",
                    rfc3339(answer.this_update()),
                    rfc3339(answer.valid_until())
                ),
            };
        }
        let signer = match answer.signer() {
            OcspSigner::Issuer => "the issuer".to_owned(),
            OcspSigner::Delegated { subject } => format!("delegated responder {subject}"),
        };
        let next = answer
            .next_update()
            .map_or_else(|| "none".to_owned(), rfc3339);
        let evidence = format!(
            "OCSP response from {source}, producedAt {}, thisUpdate {}, nextUpdate {next}, signed by {signer}",
            rfc3339(answer.produced_at()),
            rfc3339(answer.this_update()),
        );
        let signer = *answer.issuer_key_sha256();
        match answer.status() {
            OcspStatus::Good => MethodOutcome::Good {
                evidence,
                valid_until: answer.next_update(),
                verified: Verified::new(true, certificate, signer),
            },
            OcspStatus::Revoked { at, reason } => MethodOutcome::Revoked {
                at: Some(at),
                reason: reason.map(|r| r.to_string()),
                evidence,
                verified: Verified {
                    revoked_at: Some(at),
                    ..Verified::new(false, certificate, signer)
                },
            },
        }
    }

    /// The method could not complete: `error` from `source`.
    fn failed(error: &CrlError, source: &str) -> MethodOutcome {
        MethodOutcome::Failed {
            reason: format!("{source}: {error}"),
        }
    }

    /// The outcome with `note` added to its evidence (who signed a CRL, for example); a
    /// failure is unchanged.
    pub fn noting(mut self, note: &str) -> MethodOutcome {
        if let MethodOutcome::Good { evidence, .. } | MethodOutcome::Revoked { evidence, .. } =
            &mut self
        {
            evidence.push_str(note);
        }
        self
    }
}

/// The evidence for both methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevocationEvidence {
    /// What the CRL established.
    pub crl: MethodOutcome,
    /// What OCSP established.
    pub ocsp: MethodOutcome,
}

impl RevocationEvidence {
    /// No method was attempted, for `reason` (fail closed: `notRevoked` is false).
    pub fn not_checked(reason: &str) -> Self {
        RevocationEvidence {
            crl: MethodOutcome::Failed {
                reason: reason.to_owned(),
            },
            ocsp: MethodOutcome::Failed {
                reason: reason.to_owned(),
            },
        }
    }

    /// Until when the evidence may be relied on: the earliest `valid_until` of a good answer.
    /// `None` when no good answer carries one.
    pub fn good_until(&self) -> Option<OffsetDateTime> {
        [&self.crl, &self.ocsp]
            .into_iter()
            .filter_map(|o| match o {
                MethodOutcome::Good { valid_until, .. } => *valid_until,
                _ => None,
            })
            .min()
    }

    /// The evidence gathered now, read as of the past time `at` (audits):
    /// - a revocation dated after `at` means the certificate was not revoked at `at`;
    /// - a revocation without a date stays a revocation (fail closed);
    /// - a good answer now means not revoked at `at` as well (a revocation is not undone;
    ///   `certificateHold`, which is, is not used for QWACs and QSealCs);
    /// - a failure stays a failure.
    ///
    /// Each answer's evidence text says that it was read as of `at`.
    pub fn as_of(&self, at: OffsetDateTime) -> RevocationEvidence {
        let when = at
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|_| at.to_string());
        let read = |o: &MethodOutcome| match o {
            MethodOutcome::Revoked {
                reason,
                evidence,
                verified,
                ..
            } => match verified.revoked_at {
                Some(revoked) if revoked > at => MethodOutcome::Good {
                    evidence: format!(
                        "{evidence}; revoked at {}{}, after {when}: not revoked then",
                        rfc3339(revoked),
                        reason
                            .as_deref()
                            .map(|r| format!(" ({r})"))
                            .unwrap_or_default()
                    ),
                    valid_until: None,
                    verified: Verified {
                        good: true,
                        revoked_at: None,
                        as_of: Some(at),
                        ..verified.clone()
                    },
                },
                _ => o.clone(),
            },
            MethodOutcome::Good {
                evidence, verified, ..
            } => MethodOutcome::Good {
                evidence: format!(
                    "{evidence}; not revoked when fetched, so not revoked at {when} either"
                ),
                valid_until: None,
                verified: Verified {
                    as_of: Some(at),
                    ..verified.clone()
                },
            },
            other => other.clone(),
        };
        RevocationEvidence {
            crl: read(&self.crl),
            ocsp: read(&self.ocsp),
        }
    }

    /// Whether a method could not complete (its answer may be different a moment later).
    pub fn has_failure(&self) -> bool {
        [&self.crl, &self.ocsp]
            .into_iter()
            .any(|o| matches!(o, MethodOutcome::Failed { .. }))
    }

    /// What the evidence establishes, without the error entries.
    pub fn status(&self) -> RevocationStatus {
        let outcomes = [&self.crl, &self.ocsp];
        if outcomes
            .iter()
            .any(|o| matches!(o, MethodOutcome::Revoked { .. }))
        {
            RevocationStatus::Revoked
        } else if outcomes
            .iter()
            .any(|o| matches!(o, MethodOutcome::Good { .. }))
        {
            RevocationStatus::Good
        } else {
            RevocationStatus::Unknown
        }
    }
}

/// The revocation evidence of one CA certificate on the path (an intermediate, or a CRL
/// signer whose CRL was used).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaEvidence {
    /// What the certificate is on the path, for the report: "intermediate CA", "CRL signer".
    pub role: &'static str,
    /// The certificate's subject, as an RFC 4514 string.
    pub subject: String,
    /// SHA-256 of the certificate's DER: which certificate the evidence is about.
    pub fingerprint: [u8; 32],
    /// What CRL and OCSP established for the certificate.
    pub evidence: RevocationEvidence,
}

/// The revocation evidence of every certificate of a verified path below its trust-list
/// issuer (RFC 5280 section 6.1.3 (a)(3)): the PSP's certificate, each intermediate CA, and
/// each CRL signer whose CRL was relied on. `notRevoked` is true only when each has a good,
/// verified status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathEvidence {
    /// The PSP's certificate's.
    pub certificate: RevocationEvidence,
    /// The CA certificates', certificate side first, then CRL signers.
    pub above: Vec<CaEvidence>,
    /// Why the path's evidence could not be gathered completely, when it could not (more
    /// certificates to check than the budget allows): fail closed.
    pub incomplete: Option<String>,
}

impl From<RevocationEvidence> for PathEvidence {
    /// The evidence of the PSP's certificate alone (a path without intermediates).
    fn from(certificate: RevocationEvidence) -> Self {
        PathEvidence {
            certificate,
            above: Vec::new(),
            incomplete: None,
        }
    }
}

impl PathEvidence {
    /// Nothing was attempted, for `reason`.
    pub fn not_checked(reason: &str) -> Self {
        RevocationEvidence::not_checked(reason).into()
    }

    fn all(&self) -> impl Iterator<Item = &RevocationEvidence> {
        std::iter::once(&self.certificate).chain(self.above.iter().map(|c| &c.evidence))
    }

    /// The earliest `valid_until` of a good answer, over every certificate.
    pub fn good_until(&self) -> Option<OffsetDateTime> {
        self.all().filter_map(RevocationEvidence::good_until).min()
    }

    /// Whether a method could not complete for some certificate, or the path's evidence is
    /// incomplete.
    pub fn has_failure(&self) -> bool {
        self.incomplete.is_some() || self.all().any(RevocationEvidence::has_failure)
    }

    /// Every certificate's evidence read as of `at` ([`RevocationEvidence::as_of`]).
    pub fn as_of(&self, at: OffsetDateTime) -> PathEvidence {
        PathEvidence {
            certificate: self.certificate.as_of(at),
            above: self
                .above
                .iter()
                .map(|c| CaEvidence {
                    evidence: c.evidence.as_of(at),
                    ..c.clone()
                })
                .collect(),
            incomplete: self.incomplete.clone(),
        }
    }

    /// Revoked when any certificate is; good when every one is and nothing is missing.
    pub fn status(&self) -> RevocationStatus {
        let statuses: Vec<RevocationStatus> = self.all().map(RevocationEvidence::status).collect();
        if statuses.contains(&RevocationStatus::Revoked) {
            RevocationStatus::Revoked
        } else if self.incomplete.is_none() && statuses.iter().all(|s| *s == RevocationStatus::Good)
        {
            RevocationStatus::Good
        } else {
            RevocationStatus::Unknown
        }
    }
}

/// What the revocation evidence establishes: `notRevoked` is true only for `Good`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevocationStatus {
    /// At least one method gave a verified "not revoked" and none said revoked.
    Good,
    /// A method gave a verified "revoked".
    Revoked,
    /// No method could complete.
    Unknown,
}
