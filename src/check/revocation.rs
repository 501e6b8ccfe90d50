//! Combining revocation evidence into `notRevoked` (`DESIGN.md` section 3).
//!
//! The evidence itself (fetching, verifying and caching CRLs and OCSP responses) is gathered
//! at the edge; this is the pure rule: `notRevoked` is true only if no method says revoked and
//! at least one method gave a verified definitive answer. Each method that could not complete
//! adds its error entry, also when the other method succeeded.

use time::OffsetDateTime;

pub use super::report::RevocationStatus;
use super::report::{CertCheckError, ErrorCode};

/// What one revocation method established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MethodOutcome {
    /// A verified, current, definitive answer: not revoked, until `valid_until` (the CRL's
    /// or OCSP response's `nextUpdate`, or the cache's cap when it has none).
    Good {
        evidence: String,
        valid_until: Option<OffsetDateTime>,
    },
    /// A verified answer: revoked.
    Revoked {
        at: Option<OffsetDateTime>,
        reason: Option<String>,
        evidence: String,
    },
    /// The method could not complete; `reason` says why (no URL, fetch failed, bad signature,
    /// stale, OCSP `unknown` or `tryLater`, …).
    Failed { reason: String },
}

/// The evidence for both methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevocationEvidence {
    pub crl: MethodOutcome,
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

    /// The `notRevoked` flag; pushes an error entry for each method that could not complete.
    pub(crate) fn combine(&self, subject: &str, errors: &mut Vec<CertCheckError>) -> bool {
        let methods = [
            (&self.crl, ErrorCode::CrlResponseError, "CRL"),
            (&self.ocsp, ErrorCode::OcspResponseError, "OCSP"),
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
        debug_assert_eq!(flag, self.status() == RevocationStatus::Good);
        flag
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> MethodOutcome {
        MethodOutcome::Good {
            evidence: "test".into(),
            valid_until: None,
        }
    }
    fn revoked() -> MethodOutcome {
        MethodOutcome::Revoked {
            at: None,
            reason: None,
            evidence: "test".into(),
        }
    }
    fn failed() -> MethodOutcome {
        MethodOutcome::Failed {
            reason: "down".into(),
        }
    }

    fn run(crl: MethodOutcome, ocsp: MethodOutcome) -> (bool, Vec<&'static str>) {
        let mut errors = Vec::new();
        let flag = RevocationEvidence { crl, ocsp }.combine("CN=x", &mut errors);
        (flag, errors.iter().map(|e| e.code.as_str()).collect())
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
            let f = RevocationEvidence::not_checked("not attempted").combine("CN=x", &mut errors);
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
