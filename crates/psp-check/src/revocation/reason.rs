//! The revocation reason shared by CRL entries and OCSP `RevokedInfo`, and time formatting
//! for evidence and error texts.

use std::fmt;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// RFC 5280 section 5.3.1 (also OCSP's `revocationReason`, RFC 6960 section 4.2.1):
///
/// ```text
/// CRLReason ::= ENUMERATED {
///      unspecified             (0),
///      keyCompromise           (1),
///      cACompromise            (2),
///      affiliationChanged      (3),
///      superseded              (4),
///      cessationOfOperation    (5),
///      certificateHold         (6),
///           -- value 7 is not used
///      removeFromCRL           (8),
///      privilegeWithdrawn      (9),
///      aACompromise           (10) }
/// ```
///
/// Displayed with the RFC's names (`keyCompromise`), which is what
/// [`crate::check::MethodOutcome::Revoked`] carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrlReason {
    /// `unspecified` (0).
    Unspecified,
    /// `keyCompromise` (1): the subject's private key is compromised.
    KeyCompromise,
    /// `cACompromise` (2): a CA's private key is compromised.
    CaCompromise,
    /// `affiliationChanged` (3): the subject's name or other information changed.
    AffiliationChanged,
    /// `superseded` (4): the certificate was replaced.
    Superseded,
    /// `cessationOfOperation` (5): the certificate is no longer needed.
    CessationOfOperation,
    /// `certificateHold` (6): the certificate is suspended.
    CertificateHold,
    /// `removeFromCRL` (8): a delta CRL entry lifting a hold.
    RemoveFromCrl,
    /// `privilegeWithdrawn` (9): a privilege in the certificate was withdrawn.
    PrivilegeWithdrawn,
    /// `aACompromise` (10): an attribute authority's key is compromised.
    AaCompromise,
}

impl CrlReason {
    /// The reason for an ENUMERATED value; `None` for 7 and values above 10.
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0 => CrlReason::Unspecified,
            1 => CrlReason::KeyCompromise,
            2 => CrlReason::CaCompromise,
            3 => CrlReason::AffiliationChanged,
            4 => CrlReason::Superseded,
            5 => CrlReason::CessationOfOperation,
            6 => CrlReason::CertificateHold,
            8 => CrlReason::RemoveFromCrl,
            9 => CrlReason::PrivilegeWithdrawn,
            10 => CrlReason::AaCompromise,
            _ => return None,
        })
    }

    /// The ENUMERATED value.
    pub fn code(self) -> u8 {
        match self {
            CrlReason::Unspecified => 0,
            CrlReason::KeyCompromise => 1,
            CrlReason::CaCompromise => 2,
            CrlReason::AffiliationChanged => 3,
            CrlReason::Superseded => 4,
            CrlReason::CessationOfOperation => 5,
            CrlReason::CertificateHold => 6,
            CrlReason::RemoveFromCrl => 8,
            CrlReason::PrivilegeWithdrawn => 9,
            CrlReason::AaCompromise => 10,
        }
    }

    /// The RFC's name for the reason.
    pub fn as_str(self) -> &'static str {
        match self {
            CrlReason::Unspecified => "unspecified",
            CrlReason::KeyCompromise => "keyCompromise",
            CrlReason::CaCompromise => "cACompromise",
            CrlReason::AffiliationChanged => "affiliationChanged",
            CrlReason::Superseded => "superseded",
            CrlReason::CessationOfOperation => "cessationOfOperation",
            CrlReason::CertificateHold => "certificateHold",
            CrlReason::RemoveFromCrl => "removeFromCRL",
            CrlReason::PrivilegeWithdrawn => "privilegeWithdrawn",
            CrlReason::AaCompromise => "aACompromise",
        }
    }
}

impl fmt::Display for CrlReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A signature error as a reason about a CRL or an OCSP response (the shared error's
/// `Malformed` text speaks of certificates).
pub(crate) fn signature_detail(e: &crate::cert::SignatureError) -> String {
    match e {
        crate::cert::SignatureError::Malformed(detail) => detail.clone(),
        other => other.to_string(),
    }
}

/// `t` as RFC 3339 (`2023-11-05T01:09:45Z`), for evidence and reasons.
pub fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339)
        .unwrap_or_else(|_| format!("{} (unix)", t.unix_timestamp()))
}

/// `t + d`, saturating at the largest representable time instead of overflowing.
pub fn add(t: OffsetDateTime, d: std::time::Duration) -> OffsetDateTime {
    time::Duration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d))
        .unwrap_or(time::PrimitiveDateTime::MAX.assume_utc())
}

/// The non-negative time from `from` to `to` (zero when `to` is not later).
pub fn until(from: OffsetDateTime, to: OffsetDateTime) -> std::time::Duration {
    std::time::Duration::try_from(to - from).unwrap_or(std::time::Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_code_round_trips_and_seven_is_unused() {
        for code in 0..=10u8 {
            match CrlReason::from_code(code) {
                Some(r) => assert_eq!(r.code(), code),
                None => assert_eq!(code, 7),
            }
        }
        assert_eq!(CrlReason::from_code(11), None);
        assert_eq!(CrlReason::KeyCompromise.to_string(), "keyCompromise");
    }

    #[test]
    fn time_arithmetic_saturates() {
        let max = time::PrimitiveDateTime::MAX.assume_utc();
        assert_eq!(add(max, std::time::Duration::from_secs(1)), max);
        let t = time::macros::datetime!(2024-01-01 0:00 UTC);
        assert_eq!(
            until(t, t - time::Duration::seconds(5)),
            std::time::Duration::ZERO
        );
        assert_eq!(rfc3339(t), "2024-01-01T00:00:00Z");
    }
}
