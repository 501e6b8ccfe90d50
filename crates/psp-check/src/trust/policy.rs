//! The rules a trust source applies, as the trust list holds them (the configuration parses
//! `gateway.toml` into these types; nothing here reads the configuration).

use std::fmt;

use serde::Deserialize;

/// Whether a source requires the QcCompliance statement (ETSI EN 319 412-5) in the
/// certificates its issuers approve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QcCompliancePolicy {
    /// Certificates without the QcCompliance statement are refused.
    Required,
    /// Certificates may carry the QcCompliance statement or not.
    Optional,
}

/// What a source does with certificates that carry no QcType web or eseal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UntypedPolicy {
    /// Certificates with no QcType web or eseal are refused.
    Reject,
    /// Certificates with no QcType web or eseal are accepted.
    Accept,
}

/// Kinds of PSD2 certificate an issuer may be approved for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CertKind {
    /// Website authentication (QWAC; QcType web).
    Web,
    /// Electronic seals (QSealC; QcType eseal).
    Seal,
}

impl fmt::Display for CertKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CertKind::Web => "website authentication",
            CertKind::Seal => "electronic seals",
        })
    }
}
