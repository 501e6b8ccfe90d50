//! Combining revocation evidence into `notRevoked` (`DESIGN.md` section 3).
//!
//! The evidence itself (fetching, verifying and caching CRLs and OCSP responses) is gathered
//! at the edge; this is the pure rule: `notRevoked` is true only if no method says revoked and
//! at least one method gave a verified definitive answer. Each method that could not complete
//! adds its error entry, also when the other method succeeded.

use super::report::{CertCheckError, ErrorCode};
pub use crate::revocation::{MethodOutcome, RevocationEvidence, RevocationStatus};

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
        let flag = combine(&RevocationEvidence { crl, ocsp }, "CN=x", &mut errors);
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
