//! `sandbox-pki.json`: what [`super::generate`] wrote, for the runtime CRL/OCSP responder, the
//! register fixtures and the tests.
//!
//! Paths are relative to the directory the PKI was generated into, with `/` separators.
//! Times are RFC 3339 strings in UTC.

use std::fmt;
use std::path::Path;

use rcgen::{Issuer, KeyPair, SignatureAlgorithm};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::SandboxError;
use super::extensions::SandboxQcType;

/// The version of the manifest layout; bumped when a field changes meaning.
pub const MANIFEST_FORMAT: u32 = 1;

/// Everything the sandbox PKI generator wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`MANIFEST_FORMAT`] at the time of writing.
    pub format: u32,
    /// Base of every revocation and caIssuers URL in the certificates
    /// (`http://127.0.0.1:9090/sandbox`), served by the admin listener.
    pub base_url: String,
    /// Every certificate authority, roots before the CAs they signed.
    pub cas: Vec<CaEntry>,
    /// Every PSP certificate, one per sandbox scenario.
    pub psps: Vec<PspEntry>,
    /// The gateway's own TLS server certificate and its CA.
    pub server: ServerEntry,
}

impl Manifest {
    /// The CA named `name` (the file stem, `qtsp-issuing`).
    pub fn ca(&self, name: &str) -> Option<&CaEntry> {
        self.cas.iter().find(|ca| ca.name == name)
    }

    /// The PSP certificate of scenario `scenario` (`valid`, `revoked`, …).
    pub fn psp(&self, scenario: &str) -> Option<&PspEntry> {
        self.psps.iter().find(|psp| psp.scenario == scenario)
    }

    /// The PSP certificates `ca_name` issued (what its CRL and OCSP responder speak for).
    pub fn issued_by<'a>(&'a self, ca_name: &'a str) -> impl Iterator<Item = &'a PspEntry> + 'a {
        self.psps.iter().filter(move |psp| psp.issuer == ca_name)
    }
}

/// One certificate authority. Its private key is written too: the sandbox responder signs CRLs
/// and OCSP responses with it. These are public test keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaEntry {
    /// File stem and URL segment: `qtsp-root`, `qtsp-issuing`, …
    pub name: String,
    /// PEM certificate, relative to the output directory (`ca/qtsp-issuing.pem`).
    pub cert: String,
    /// PKCS#8 PEM private key, relative to the output directory (`ca/qtsp-issuing.key`).
    pub key: String,
    pub key_algorithm: KeyAlgorithm,
    /// Subject commonName.
    pub subject_cn: String,
    /// Name of the CA that signed this one; `None` when self-signed.
    pub issued_by: Option<String>,
    /// Name of the CA whose subject DN this one copies byte for byte, with a different key
    /// (the look-alike used to prove that issuers are matched by key, not by name).
    pub lookalike_of: Option<String>,
    /// Where this CA's CRL is served: `{base_url}/crl/{name}.crl`.
    pub crl_url: String,
    /// Where this CA's OCSP responder answers: `{base_url}/ocsp/{name}`.
    pub ocsp_url: String,
    /// Where this CA's certificate is served (DER): `{base_url}/ca/{name}.crt`.
    pub ca_issuers_url: String,
    /// Subject key identifier, upper-case hex (what the AKI of everything it signs carries).
    pub subject_key_id: String,
    #[serde(with = "rfc3339")]
    pub not_before: OffsetDateTime,
    #[serde(with = "rfc3339")]
    pub not_after: OffsetDateTime,
}

impl CaEntry {
    /// Loads this CA's certificate and key from `out_dir` as an rcgen [`Issuer`], ready to sign
    /// CRLs, OCSP responder certificates or more certificates. The issuer keeps the
    /// certificate's subject DN and subject key identifier, so what it signs chains to it.
    pub fn load_issuer(&self, out_dir: &Path) -> Result<Issuer<'static, KeyPair>, SandboxError> {
        let cert_path = out_dir.join(&self.cert);
        let key_path = out_dir.join(&self.key);
        let cert_pem = read_to_string(&cert_path)?;
        let key_pem = read_to_string(&key_path)?;
        let key = KeyPair::from_pkcs8_pem_and_sign_algo(&key_pem, self.key_algorithm.signature())
            .map_err(|source| SandboxError::Load {
            path: key_path,
            source,
        })?;
        Issuer::from_ca_cert_pem(&cert_pem, key).map_err(|source| SandboxError::Load {
            path: cert_path,
            source,
        })
    }
}

/// One PSP certificate: one sandbox scenario.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PspEntry {
    /// Scenario name and file stem: `valid`, `revoked`, `tampered`, …
    pub scenario: String,
    /// PEM certificate, relative to the output directory (`psp/valid.pem`).
    pub cert: String,
    /// PKCS#8 PEM private key, relative to the output directory (`psp/valid.key`).
    pub key: String,
    pub key_algorithm: KeyAlgorithm,
    /// Name of the issuing CA (a [`CaEntry::name`]).
    pub issuer: String,
    /// Serial number content octets, upper-case hex (16 octets, first below 0x80).
    pub serial: String,
    /// Subject organizationIdentifier (2.5.4.97): the PSD2 authorisation number.
    pub auth_number: String,
    /// Subject organizationName as issued (for `tampered`, before the tampering).
    pub organisation: String,
    /// Subject commonName.
    pub common_name: String,
    /// Subject countryName: the PSP's home country.
    pub country: String,
    /// PSD2 roles in the QC statement, TS 119 495 names (`PSP_PI`, …), in order.
    pub roles: Vec<String>,
    /// NCA name in the PSD2 QC statement.
    pub nca_name: String,
    /// NCA id in the PSD2 QC statement.
    pub nca_id: String,
    pub qc_type: SandboxQcType,
    /// Whether the QcCompliance statement is present.
    pub qc_compliance: bool,
    /// Whether the certificate carries the TLS extended key usages (serverAuth, clientAuth).
    pub tls_key_usage: bool,
    #[serde(with = "rfc3339")]
    pub not_before: OffsetDateTime,
    #[serde(with = "rfc3339")]
    pub not_after: OffsetDateTime,
    /// CRL distribution point in the certificate; `None` for `no-revocation`.
    pub crl_url: Option<String>,
    /// OCSP URL in the certificate's authorityInfoAccess; `None` for `no-revocation`.
    pub ocsp_url: Option<String>,
    /// caIssuers URL in the certificate's authorityInfoAccess.
    pub ca_issuers_url: Option<String>,
    /// Whether the issuing CA's CRL and OCSP responder must report this certificate revoked.
    pub revoked: bool,
    /// The reason to report when `revoked`.
    pub revocation_reason: Option<RevocationReason>,
    /// The revocation time to report when `revoked`.
    #[serde(with = "rfc3339_option")]
    pub revocation_time: Option<OffsetDateTime>,
    /// Whether the certificate was altered after signing (its signature does not verify).
    pub tampered: bool,
}

impl PspEntry {
    /// The serial number's content octets (decoded from [`PspEntry::serial`]); `None` if the
    /// manifest was edited into something that is not hex.
    pub fn serial_bytes(&self) -> Option<Vec<u8>> {
        if !self.serial.len().is_multiple_of(2) {
            return None;
        }
        (0..self.serial.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(self.serial.get(i..i + 2)?, 16).ok())
            .collect()
    }
}

/// The gateway's TLS listener certificate (not part of the PSD2 PKI).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerEntry {
    /// The server CA certificate (`server/ca.pem`), for clients to trust.
    pub ca_cert: String,
    /// The server CA key (`server/ca.key`).
    pub ca_key: String,
    /// The server certificate (`server/cert.pem`).
    pub cert: String,
    /// The server key (`server/key.pem`), PKCS#8.
    pub key: String,
    /// subjectAltName dNSName entries.
    pub dns_names: Vec<String>,
    /// subjectAltName iPAddress entries.
    pub ip_addresses: Vec<String>,
    /// The sandbox sites' certificates (`gateway.toml`'s `[[sites]]`), by the same CA.
    #[serde(default)]
    pub sites: Vec<SiteServerEntry>,
}

/// One sandbox site's TLS server certificate, for its one server name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteServerEntry {
    /// The server name (subjectAltName dNSName and CN).
    pub name: String,
    /// The certificate (`server/<name>.pem`).
    pub cert: String,
    /// The key (`server/<name>.key`), PKCS#8.
    pub key: String,
}

/// The key type of a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum KeyAlgorithm {
    /// RSA 2048-bit, signing with sha256WithRSAEncryption.
    #[serde(rename = "rsa-2048")]
    Rsa2048,
    /// RSA 3072-bit, signing with sha256WithRSAEncryption.
    #[serde(rename = "rsa-3072")]
    Rsa3072,
    /// ECDSA on P-256, signing with ecdsa-with-SHA256.
    #[serde(rename = "ecdsa-p256")]
    EcdsaP256,
}

impl KeyAlgorithm {
    /// The rcgen signature algorithm a key of this type signs with.
    pub fn signature(self) -> &'static SignatureAlgorithm {
        match self {
            KeyAlgorithm::Rsa2048 | KeyAlgorithm::Rsa3072 => &rcgen::PKCS_RSA_SHA256,
            KeyAlgorithm::EcdsaP256 => &rcgen::PKCS_ECDSA_P256_SHA256,
        }
    }
}

impl fmt::Display for KeyAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyAlgorithm::Rsa2048 => "rsa-2048",
            KeyAlgorithm::Rsa3072 => "rsa-3072",
            KeyAlgorithm::EcdsaP256 => "ecdsa-p256",
        })
    }
}

/// RFC 5280 section 5.3.1:
///
/// ```asn1
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
/// Serialised with the RFC's names (`keyCompromise`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RevocationReason {
    #[serde(rename = "unspecified")]
    Unspecified,
    #[serde(rename = "keyCompromise")]
    KeyCompromise,
    #[serde(rename = "cACompromise")]
    CaCompromise,
    #[serde(rename = "affiliationChanged")]
    AffiliationChanged,
    #[serde(rename = "superseded")]
    Superseded,
    #[serde(rename = "cessationOfOperation")]
    CessationOfOperation,
    #[serde(rename = "certificateHold")]
    CertificateHold,
    #[serde(rename = "removeFromCRL")]
    RemoveFromCrl,
    #[serde(rename = "privilegeWithdrawn")]
    PrivilegeWithdrawn,
    #[serde(rename = "aACompromise")]
    AaCompromise,
}

impl RevocationReason {
    /// The CRLReason value (RFC 5280 section 5.3.1), also used by OCSP's `revocationReason`
    /// (RFC 6960 section 4.2.1).
    pub fn code(self) -> u8 {
        self.to_rcgen() as u8
    }

    /// The same reason as rcgen's CRL builder names it.
    pub fn to_rcgen(self) -> rcgen::RevocationReason {
        match self {
            RevocationReason::Unspecified => rcgen::RevocationReason::Unspecified,
            RevocationReason::KeyCompromise => rcgen::RevocationReason::KeyCompromise,
            RevocationReason::CaCompromise => rcgen::RevocationReason::CaCompromise,
            RevocationReason::AffiliationChanged => rcgen::RevocationReason::AffiliationChanged,
            RevocationReason::Superseded => rcgen::RevocationReason::Superseded,
            RevocationReason::CessationOfOperation => rcgen::RevocationReason::CessationOfOperation,
            RevocationReason::CertificateHold => rcgen::RevocationReason::CertificateHold,
            RevocationReason::RemoveFromCrl => rcgen::RevocationReason::RemoveFromCrl,
            RevocationReason::PrivilegeWithdrawn => rcgen::RevocationReason::PrivilegeWithdrawn,
            RevocationReason::AaCompromise => rcgen::RevocationReason::AaCompromise,
        }
    }
}

/// Reads and parses a manifest written by [`super::generate`].
pub fn load_manifest(path: &Path) -> Result<Manifest, SandboxError> {
    let text = read_to_string(path)?;
    serde_json::from_str(&text).map_err(|source| SandboxError::Manifest {
        path: path.to_path_buf(),
        source,
    })
}

fn read_to_string(path: &Path) -> Result<String, SandboxError> {
    std::fs::read_to_string(path).map_err(|source| SandboxError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// `OffsetDateTime` as an RFC 3339 string (time's own serde module needs a feature this crate
/// does not enable).
mod rfc3339 {
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _, ser::Error as _};
    use time::OffsetDateTime;
    use time::format_description::well_known::Rfc3339;

    pub(super) fn serialize<S: Serializer>(t: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&t.format(&Rfc3339).map_err(S::Error::custom)?)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OffsetDateTime, D::Error> {
        let text = String::deserialize(d)?;
        OffsetDateTime::parse(&text, &Rfc3339).map_err(D::Error::custom)
    }
}

/// `Option<OffsetDateTime>` as an RFC 3339 string or `null`.
mod rfc3339_option {
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _, ser::Error as _};
    use time::OffsetDateTime;
    use time::format_description::well_known::Rfc3339;

    pub(super) fn serialize<S: Serializer>(
        t: &Option<OffsetDateTime>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&t.format(&Rfc3339).map_err(S::Error::custom)?),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<OffsetDateTime>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| OffsetDateTime::parse(&text, &Rfc3339).map_err(D::Error::custom))
            .transpose()
    }
}
