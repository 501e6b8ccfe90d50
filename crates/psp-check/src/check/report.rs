//! The check result and its wire form: the contract's `eIDAS` object
//! (`spec/psp-checking-service.md`, "Check result").

use serde::Serialize;

use crate::register::RegisterResult;
use crate::revocation::RevocationStatus;
use crate::trust::QtspSource;

/// The outcome of a check. Outcomes are data: a certificate that fails a check is a report
/// with a false flag, not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    pub psp_subject_name: Option<String>,
    /// The subject `organizationIdentifier` as written (PSD2 form or not).
    pub auth_number: Option<String>,
    /// The issuer CN read from the certificate, trusted or not.
    pub qtsp_common_name: Option<String>,
    /// `None` for an issuer not in the trust list (`Unknown` on the wire).
    pub qtsp_source: Option<QtspSource>,
    pub qtsp_jurisdiction: Option<String>,
    pub validity: Validity,
    /// Why `notRevoked` is what it is (revoked, or status unknown). Never on the wire.
    pub revocation: RevocationStatus,
    /// Checks that could not be completed (`eIDAS.errors`).
    pub errors: Vec<CertCheckError>,
    /// Why each flag came out as it did, for audits and `psp-gateway check --explain`.
    /// Never on the wire.
    pub explanation: Vec<String>,
    /// `homeRegister` and, when the jurisdiction differs from home, `hostRegister`.
    pub registers: RegisterResult,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Validity {
    #[serde(rename = "validQTSP")]
    pub valid_qtsp: bool,
    #[serde(rename = "validSignature")]
    pub valid_signature: bool,
    #[serde(rename = "notRevoked")]
    pub not_revoked: bool,
    #[serde(rename = "notExpired")]
    pub not_expired: bool,
}

impl AsRef<CheckReport> for CheckReport {
    fn as_ref(&self) -> &CheckReport {
        self
    }
}

impl CheckReport {
    /// The revocation evidence lines of the explanation (CRL number, OCSP `producedAt`, or why
    /// a method could not complete), the certificate's and each CA's of its path, for audit
    /// records.
    pub fn revocation_evidence(&self) -> String {
        self.explanation
            .iter()
            .filter(|l| {
                l.starts_with("CRL:")
                    || l.starts_with("OCSP:")
                    || l.contains(": CRL: ")
                    || l.contains(": OCSP: ")
            })
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl Validity {
    pub fn all(&self) -> bool {
        self.valid_qtsp && self.valid_signature && self.not_revoked && self.not_expired
    }
}

/// Codes of `eIDAS.errors` entries. The first two are the contract's; the others say why the
/// signature or validity check could not be completed (`DESIGN.md` section 3) and are
/// documented in `docs/errors.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    CrlResponseError,
    OcspResponseError,
    IssuerKeyNotFound,
    SignatureAlgorithmUnsupported,
    SignatureAlgorithmRejected,
    CertificateNotYetValid,
    /// A signature on the certification path does not verify with the key of the issuer it
    /// names (a tampered certificate, or one forged under a look-alike of a trusted issuer).
    SignatureInvalid,
    /// Every signature verifies, but the path breaks a rule of RFC 5280 section 6.1 or the
    /// certificate is not one a PSP may hold.
    CertificationPathInvalid,
    /// More intermediates were presented than a path is built from.
    ChainTooLong,
    /// The trust-list issuer comes from a list (or a LOTL) past its `NextUpdate` at the time
    /// of the check.
    TrustedListStale,
}

impl ErrorCode {
    pub fn as_str(&self) -> &'static str {
        match self {
            ErrorCode::CrlResponseError => "crl_response_error",
            ErrorCode::OcspResponseError => "ocsp_response_error",
            ErrorCode::IssuerKeyNotFound => "issuer_key_not_found",
            ErrorCode::SignatureAlgorithmUnsupported => "signature_algorithm_unsupported",
            ErrorCode::SignatureAlgorithmRejected => "signature_algorithm_rejected",
            ErrorCode::CertificateNotYetValid => "certificate_not_yet_valid",
            ErrorCode::SignatureInvalid => "signature_invalid",
            ErrorCode::CertificationPathInvalid => "certification_path_invalid",
            ErrorCode::ChainTooLong => "chain_too_long",
            ErrorCode::TrustedListStale => "trusted_list_stale",
        }
    }
}

/// One `eIDAS.errors` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertCheckError {
    pub code: ErrorCode,
    pub title: String,
}

impl CertCheckError {
    pub fn new(code: ErrorCode, title: String) -> Self {
        CertCheckError { code, title }
    }
}

/// The contract's `eIDAS` object.
#[derive(Debug, Serialize)]
pub struct WireEidas<'a> {
    pub data: WireData<'a>,
    pub validity: Validity,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<WireError<'a>>,
}

#[derive(Debug, Serialize)]
pub struct WireData<'a> {
    #[serde(rename = "pspSubjectName")]
    pub psp_subject_name: Option<&'a str>,
    #[serde(rename = "authNumber")]
    pub auth_number: Option<&'a str>,
    #[serde(rename = "QTSPCommonName")]
    pub qtsp_common_name: Option<&'a str>,
    #[serde(rename = "QTSPSource")]
    pub qtsp_source: &'a str,
    #[serde(rename = "QTSPJurisdiction")]
    pub qtsp_jurisdiction: &'a str,
}

#[derive(Debug, Serialize)]
pub struct WireError<'a> {
    pub code: &'static str,
    pub title: &'a str,
    pub link: String,
}

/// The check result body: `eIDAS`, `homeRegister` and, when applicable, `hostRegister`.
#[derive(Debug, Serialize)]
pub struct WireCheckResult<'a> {
    #[serde(rename = "eIDAS")]
    pub eidas: WireEidas<'a>,
    #[serde(flatten)]
    pub registers: &'a RegisterResult,
}

const UNKNOWN: &str = "Unknown";

impl CheckReport {
    /// The contract's wire form; `link_base` prefixes each error code in `link`.
    pub fn to_wire<'a>(&'a self, link_base: &str) -> WireCheckResult<'a> {
        WireCheckResult {
            eidas: WireEidas {
                data: WireData {
                    psp_subject_name: self.psp_subject_name.as_deref(),
                    auth_number: self.auth_number.as_deref(),
                    qtsp_common_name: self.qtsp_common_name.as_deref(),
                    qtsp_source: self.qtsp_source.map_or(UNKNOWN, |s| s.as_str()),
                    qtsp_jurisdiction: self.qtsp_jurisdiction.as_deref().unwrap_or(UNKNOWN),
                },
                validity: self.validity,
                errors: self
                    .errors
                    .iter()
                    .map(|e| WireError {
                        code: e.code.as_str(),
                        title: &e.title,
                        link: format!("{link_base}{}", e.code.as_str()),
                    })
                    .collect(),
            },
            registers: &self.registers,
        }
    }
}
