//! The check result and its wire form: the contract's `eIDAS` object
//! (`docs/contract.md`, "Check result").

use serde::Serialize;

use crate::cert::PsdAuthNumber;
use crate::country::CountryCode;
use crate::register::{OnDemandHome, RegisterResult, RegisterSnapshot};
use crate::revocation::RevocationStatus;
use crate::trust::QtspSource;

/// The outcome of a check. Outcomes are data: a certificate that fails a check is a report
/// with a false flag, not an error.
///
/// Only the check makes one ([`crate::check()`], [`crate::check::report()`]), and its fields
/// are read through methods: a program cannot set a flag, so a [`crate::policy::Permit`]
/// comes only from what the check found. Cloning a report copies a verdict; it does not
/// make one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// SHA-256 of the certificate checked: a decision is made for this certificate only.
    pub(crate) certificate_sha256: [u8; 32],
    /// The PSP's name from the certificate subject (`pspSubjectName`).
    pub(crate) psp_subject_name: Option<String>,
    /// The subject `organizationIdentifier` as written (PSD2 form or not).
    pub(crate) auth_number: Option<String>,
    /// The issuer CN read from the certificate, trusted or not.
    pub(crate) qtsp_common_name: Option<String>,
    /// `None` for an issuer not in the trust list (`Unknown` on the wire).
    pub(crate) qtsp_source: Option<QtspSource>,
    /// The `QTSPJurisdiction` of the issuer's trust source; `None` for an issuer not in the
    /// trust list (`Unknown` on the wire).
    pub(crate) qtsp_jurisdiction: Option<String>,
    /// The four independently computed flags (`eIDAS.validity`).
    pub(crate) validity: Validity,
    /// Why `notRevoked` is what it is (revoked, or status unknown). Never on the wire.
    pub(crate) revocation: RevocationStatus,
    /// Checks that could not be completed (`eIDAS.errors`).
    pub(crate) errors: Vec<CertCheckError>,
    /// Why each flag came out as it did, for audits and `psp-gateway check --explain`.
    /// Never on the wire.
    pub(crate) explanation: Vec<String>,
    /// `homeRegister` and, when the jurisdiction differs from home, `hostRegister`.
    pub(crate) registers: RegisterResult,
}

/// The four certificate flags of the check result (`eIDAS.validity`), each computed
/// independently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Validity {
    /// The issuer is an approved trust-list issuer for this jurisdiction and kind (`validQTSP`).
    #[serde(rename = "validQTSP")]
    pub valid_qtsp: bool,
    /// The certificate's signature verifies with its issuer's key (`validSignature`).
    #[serde(rename = "validSignature")]
    pub valid_signature: bool,
    /// Verified revocation evidence shows the certificate and its path unrevoked
    /// (`notRevoked`).
    #[serde(rename = "notRevoked")]
    pub not_revoked: bool,
    /// The certificate and its path's intermediates are within their validity periods
    /// (`notExpired`).
    #[serde(rename = "notExpired")]
    pub not_expired: bool,
}

impl AsRef<CheckReport> for CheckReport {
    fn as_ref(&self) -> &CheckReport {
        self
    }
}

impl CheckReport {
    /// SHA-256 of the DER of the certificate the report is about.
    pub fn certificate_sha256(&self) -> &[u8; 32] {
        &self.certificate_sha256
    }

    /// The PSP's name from the certificate subject (`pspSubjectName`).
    pub fn psp_subject_name(&self) -> Option<&str> {
        self.psp_subject_name.as_deref()
    }

    /// The subject `organizationIdentifier` as written (PSD2 form or not), whoever signed
    /// the certificate: see [`CheckReport::attested_auth_number`] for what may be attributed.
    pub fn auth_number(&self) -> Option<&str> {
        self.auth_number.as_deref()
    }

    /// The issuer CN read from the certificate, trusted or not (`QTSPCommonName`).
    pub fn qtsp_common_name(&self) -> Option<&str> {
        self.qtsp_common_name.as_deref()
    }

    /// The issuer's trust source; `None` for an issuer not in the trust list.
    pub fn qtsp_source(&self) -> Option<QtspSource> {
        self.qtsp_source
    }

    /// The `QTSPJurisdiction` of the issuer's trust source; `None` for an issuer not in the
    /// trust list.
    pub fn qtsp_jurisdiction(&self) -> Option<&str> {
        self.qtsp_jurisdiction.as_deref()
    }

    /// The four independently computed flags (`eIDAS.validity`).
    pub fn validity(&self) -> Validity {
        self.validity
    }

    /// Why `notRevoked` is what it is (revoked, or status unknown).
    pub fn revocation(&self) -> RevocationStatus {
        self.revocation
    }

    /// The checks that could not be completed (`eIDAS.errors`).
    pub fn errors(&self) -> &[CertCheckError] {
        &self.errors
    }

    /// Why each flag came out as it did, one line each.
    pub fn explanation(&self) -> &[String] {
        &self.explanation
    }

    /// `homeRegister` and, when the jurisdiction differs from home, `hostRegister`.
    pub fn registers(&self) -> &RegisterResult {
        &self.registers
    }

    /// The register blocks for a PSP whose home register (`nca_id`) was consulted on demand
    /// ([`crate::register::RegisterSnapshot::lookup_on_demand`]), with `line` added to the
    /// explanation. The register answer is an input, as the snapshot is; the four flags stay
    /// the check's. An answer about another PSP (another authorisation number than the
    /// certificate's, or an entity of another reference) is taken as no answer.
    pub fn consult_home_on_demand(
        &mut self,
        snapshot: &RegisterSnapshot,
        auth: &PsdAuthNumber,
        jurisdiction: CountryCode,
        (nca_id, home): (&str, &OnDemandHome),
        line: String,
    ) {
        self.explanation.push(line);
        // The answer is about this report's PSP only: the certificate's own authorisation
        // number, and an entity of that reference. Any other is no answer (fail closed).
        let own = self.auth_number.as_deref().is_some_and(|claimed| {
            crate::cert::auth_number::identity_key(claimed) == auth.identity_key()
        });
        let entity_is_own = |entity: &crate::register::Entity| {
            let as_auth = PsdAuthNumber {
                reference: entity.reference.clone(),
                ..auth.clone()
            };
            as_auth.identity_key() == auth.identity_key()
        };
        let refused;
        let home = match home {
            _ if !own => {
                refused = OnDemandHome::Unavailable {
                    reason:
                        "The register answer is not about this certificate's authorisation number."
                            .to_owned(),
                };
                &refused
            }
            OnDemandHome::Answer {
                entity: Some(entity),
                ..
            } if !entity_is_own(entity) => {
                refused = OnDemandHome::Unavailable {
                    reason: format!(
                        "The register answered with entity {}, which is not {}.",
                        entity.reference, auth
                    ),
                };
                &refused
            }
            home => home,
        };
        self.registers = snapshot.lookup_on_demand(auth, jurisdiction, nca_id, home);
    }

    /// The authorisation number as attested: the certificate's `organizationIdentifier` when
    /// an approved issuer signed it (`valid_qtsp` and `valid_signature`), else `None`. What
    /// an audit record may attribute to a PSP: a self-signed or forged certificate can claim
    /// any PSP's number.
    pub fn attested_auth_number(&self) -> Option<&str> {
        (self.validity.valid_qtsp && self.validity.valid_signature)
            .then_some(self.auth_number.as_deref())
            .flatten()
    }

    /// The authorisation number the certificate claims when no approved issuer vouches for
    /// it ([`CheckReport::attested_auth_number`] is `None`): recorded as claimed, never as
    /// the PSP's.
    pub fn claimed_auth_number(&self) -> Option<&str> {
        match self.attested_auth_number() {
            Some(_) => None,
            None => self.auth_number.as_deref(),
        }
    }

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
    /// Whether all four flags are true.
    pub fn all(&self) -> bool {
        self.valid_qtsp && self.valid_signature && self.not_revoked && self.not_expired
    }
}

/// Codes of `eIDAS.errors` entries. The first two are the contract's; the others say why the
/// signature or validity check could not be completed (`docs/design.md` section 3) and are
/// documented in `docs/errors.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// Revocation could not be checked by CRL, or not for the whole certification path
    /// (`crl_response_error`, the contract's).
    CrlResponseError,
    /// The OCSP response could not be fetched or verified (`ocsp_response_error`, the
    /// contract's).
    OcspResponseError,
    /// No key of the certificate's issuer was found in the trust list or the presented chain.
    IssuerKeyNotFound,
    /// The signature algorithm is not one the check can verify.
    SignatureAlgorithmUnsupported,
    /// The signature algorithm or key is one the policy refuses.
    SignatureAlgorithmRejected,
    /// The certificate's `notBefore` is after the time of the check.
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
    /// The code as written in `eIDAS.errors[].code` and in the error link.
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
    /// What kind of check could not be completed (`code`).
    pub code: ErrorCode,
    /// A human-readable description of the failure (`title`).
    pub title: String,
}

impl CertCheckError {
    /// An entry with `code` and `title`.
    pub fn new(code: ErrorCode, title: String) -> Self {
        CertCheckError { code, title }
    }
}

/// The contract's `eIDAS` object.
#[derive(Debug, Serialize)]
pub struct WireEidas<'a> {
    /// The certificate and issuer data (`eIDAS.data`).
    pub data: WireData<'a>,
    /// The four flags (`eIDAS.validity`).
    pub validity: Validity,
    /// The checks that could not be completed (`eIDAS.errors`), omitted when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<WireError<'a>>,
}

/// The contract's `eIDAS.data` object.
#[derive(Debug, Serialize)]
pub struct WireData<'a> {
    /// `pspSubjectName`.
    #[serde(rename = "pspSubjectName")]
    pub psp_subject_name: Option<&'a str>,
    /// `authNumber`.
    #[serde(rename = "authNumber")]
    pub auth_number: Option<&'a str>,
    /// `QTSPCommonName`.
    #[serde(rename = "QTSPCommonName")]
    pub qtsp_common_name: Option<&'a str>,
    /// `QTSPSource`, `Unknown` for an issuer not in the trust list.
    #[serde(rename = "QTSPSource")]
    pub qtsp_source: &'a str,
    /// `QTSPJurisdiction`, `Unknown` for an issuer not in the trust list.
    #[serde(rename = "QTSPJurisdiction")]
    pub qtsp_jurisdiction: &'a str,
}

/// One entry of the contract's `eIDAS.errors` array.
#[derive(Debug, Serialize)]
pub struct WireError<'a> {
    /// `code`: the [`ErrorCode`] as a string.
    pub code: &'static str,
    /// `title`: the human-readable description.
    pub title: &'a str,
    /// `link`: the link base followed by the code.
    pub link: String,
}

/// The check result body: `eIDAS`, `homeRegister` and, when applicable, `hostRegister`.
#[derive(Debug, Serialize)]
pub struct WireCheckResult<'a> {
    /// The `eIDAS` object.
    #[serde(rename = "eIDAS")]
    pub eidas: WireEidas<'a>,
    /// `homeRegister` and, when applicable, `hostRegister`, flattened into the body.
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
