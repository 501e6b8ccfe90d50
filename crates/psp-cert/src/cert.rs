//! Parsing a PSP certificate: subject, `organizationIdentifier` → auth number, QC statements,
//! issuer, validity, revocation pointers.
//!
//! Input may be DER, PEM or Base64 with the damage load balancers do to it (see [`input`]).
//! Parsing never panics on hostile input; deviations that can be read around honestly are
//! recorded as warnings on the result.

pub mod auth_number;
mod der;
pub mod dn;
pub mod input;
mod name;
pub mod name_constraints;
pub mod qc;
pub mod signature;

pub use auth_number::{AuthNumber, PsdAuthNumber};
pub use dn::{DnError, NormalizedName};
pub use input::{MAX_INPUT_LEN, decode_certificate_chain, decode_certificate_input};
pub use name_constraints::{CertNames, NameConstraints, NcBudget, NcError, has_name_constraints};
pub use qc::{Psd2Role, Psd2Statement, QcStatementKind, QcStatements, QcType, RoleOfPsp};
pub use signature::SignatureError;
pub use signature::verify_signed_data;

use time::OffsetDateTime;
use x509_parser::extensions::{DistributionPointName, GeneralName, ParsedExtension};
use x509_parser::prelude::{FromDer, X509Certificate};

use name::first_attribute;

/// Everything the checks and the reports need from one certificate, owned (no borrow of the
/// input), so it can be cached and shared between tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PspCertificate {
    /// The certificate's DER encoding, exactly as received.
    pub der: Vec<u8>,
    /// SHA-256 over `der`.
    pub fingerprint_sha256: [u8; 32],
    /// The subject as an RFC 4514 string (for titles and logs; never for matching).
    pub subject: String,
    /// The issuer as an RFC 4514 string (for titles and logs; never for matching).
    pub issuer: String,
    /// DER of the issuer `Name`, byte for byte, for chaining to an issuer's subject.
    pub issuer_raw: Vec<u8>,
    /// DER of the subject `Name`, byte for byte.
    pub subject_raw: Vec<u8>,
    /// The issuer name normalised for comparison (RFC 5280 section 7.1); `None` when the name
    /// cannot be read that way (then only the bytes are compared).
    pub issuer_name: Option<NormalizedName>,
    /// The subject name normalised for comparison.
    pub subject_name: Option<NormalizedName>,
    pub subject_cn: Option<String>,
    pub subject_o: Option<String>,
    pub subject_c: Option<String>,
    pub issuer_cn: Option<String>,
    /// Subject `organizationIdentifier` (2.5.4.97), parsed into an auth number when it has
    /// the PSD2 form.
    pub organization_identifier: Option<AuthNumber>,
    /// The serial number's content octets as encoded (big-endian two's complement, leading
    /// zero kept when the DER has one). Revocation lookups compare these bytes exactly.
    pub serial: Vec<u8>,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
    /// The X.509 version as written in the certificate (1, 2 or 3).
    pub version: u32,
    /// `basicConstraints.cA`; `None` when the extension is absent.
    pub is_ca: Option<bool>,
    /// `basicConstraints.pathLenConstraint`, when present.
    pub path_len_constraint: Option<u32>,
    /// Why the certificate's extensions forbid using it on a certification path: an unknown
    /// critical extension (RFC 5280 section 4.2), an extension marked critical that must not
    /// be, or a path-relevant extension that cannot be read. Empty for a usable certificate.
    pub extension_faults: Vec<String>,
    /// `keyUsage` bits; `None` when the extension is absent.
    pub key_usage: Option<KeyUsage>,
    /// certificatePolicies policy identifiers (2.5.29.32), dotted, in encoded order; empty
    /// when the extension is absent (or unreadable, with a warning).
    pub policies: Vec<String>,
    /// The subject's attribute types, dotted, in encoded order (repeats kept), for the
    /// trusted lists' `CertSubjectDNAttribute` criterion.
    pub subject_attribute_types: Vec<String>,
    /// Subject key identifier, when present.
    pub subject_key_id: Option<Vec<u8>>,
    /// Authority key identifier's keyIdentifier, when present.
    pub authority_key_id: Option<Vec<u8>>,
    /// DER of the SubjectPublicKeyInfo.
    pub spki: Vec<u8>,
    /// The signature algorithm's dotted OID (for example `1.2.840.113549.1.1.11`).
    pub signature_algorithm: String,
    /// URIs from the CRL distribution points (fullName, uniformResourceIdentifier), in order.
    pub crl_urls: Vec<String>,
    /// OCSP URIs from authorityInfoAccess, in order.
    pub ocsp_urls: Vec<String>,
    /// caIssuers URIs from authorityInfoAccess, in order.
    pub ca_issuers_urls: Vec<String>,
    /// Extended key usage OIDs, dotted; `None` when the extension is absent.
    pub extended_key_usage: Option<Vec<String>>,
    /// QC statements (ETSI EN 319 412-5, TS 119 495); `None` when the extension is absent.
    pub qc: Option<QcStatements>,
    /// Every deviation from the standards that parsing read around.
    pub warnings: Vec<String>,
}

/// The nine `keyUsage` bits (RFC 5280 section 4.2.1.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyUsage {
    pub digital_signature: bool,
    /// Also called contentCommitment.
    pub non_repudiation: bool,
    pub key_encipherment: bool,
    pub data_encipherment: bool,
    pub key_agreement: bool,
    pub key_cert_sign: bool,
    pub crl_sign: bool,
    pub encipher_only: bool,
    pub decipher_only: bool,
}

/// Why bytes could not be read as a certificate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertError {
    #[error("input is empty")]
    Empty,
    #[error("input is neither DER, PEM nor Base64: {0}")]
    Encoding(String),
    #[error("not an X.509 certificate: {0}")]
    Der(String),
    /// The input is larger than [`MAX_INPUT_LEN`]; refused before any decoding.
    #[error("input of {len} bytes exceeds the {max}-byte limit")]
    TooLarge { len: usize, max: usize },
}

/// Prefix of the warnings that come from the QCStatements extension, so that a report can
/// tell them from warnings about the rest of the certificate.
pub const QC_WARNING_PREFIX: &str = "QCStatements: ";

// Attribute types and extensions compared by dotted OID. organizationIdentifier has no named
// constant in x509-parser's registry, so it is spelled out from its arcs (X.520 2.5.4.97).
const OID_ORGANIZATION_IDENTIFIER: &str = "2.5.4.97";
const OID_COMMON_NAME: &str = "2.5.4.3";
const OID_ORGANIZATION: &str = "2.5.4.10";
const OID_COUNTRY: &str = "2.5.4.6";
const OID_EXT_SUBJECT_KEY_ID: &str = "2.5.29.14";
const OID_EXT_KEY_USAGE: &str = "2.5.29.15";
const OID_EXT_BASIC_CONSTRAINTS: &str = "2.5.29.19";
const OID_EXT_CRL_DP: &str = "2.5.29.31";
const OID_EXT_AUTHORITY_KEY_ID: &str = "2.5.29.35";
const OID_EXT_SUBJECT_ALT_NAME: &str = "2.5.29.17";
const OID_EXT_NAME_CONSTRAINTS: &str = "2.5.29.30";
const OID_EXT_CERTIFICATE_POLICIES: &str = "2.5.29.32";
const OID_EXT_EKU: &str = "2.5.29.37";
const OID_EXT_AIA: &str = "1.3.6.1.5.5.7.1.1";
const OID_AD_OCSP: &str = "1.3.6.1.5.5.7.48.1";
const OID_AD_CA_ISSUERS: &str = "1.3.6.1.5.5.7.48.2";

/// RFC 5280 section 4.1.2.2: serial numbers are at most 20 octets.
const MAX_SERIAL_OCTETS: usize = 20;

impl PspCertificate {
    /// Parses a DER certificate. Fails when the bytes are not one X.509 certificate, when an
    /// extension appears twice (RFC 5280 section 4.2 forbids it, and which one counts would be
    /// ambiguous), or when basicConstraints, keyUsage or extendedKeyUsage cannot be read (read
    /// as absent they would widen what the key may do). Other deviations become warnings.
    pub fn from_der(der: Vec<u8>) -> Result<Self, CertError> {
        if der.is_empty() {
            return Err(CertError::Empty);
        }
        if der.len() > MAX_INPUT_LEN {
            return Err(CertError::TooLarge {
                len: der.len(),
                max: MAX_INPUT_LEN,
            });
        }
        let parsed = parse_fields(&der)?;
        let fingerprint_sha256 = crate::hex::sha256(&der);
        Ok(PspCertificate {
            der,
            fingerprint_sha256,
            ..parsed
        })
    }

    /// Decodes `input` (DER, PEM or Base64, see [`input`]) and parses the first certificate.
    pub fn parse(input: &[u8]) -> Result<Self, CertError> {
        Self::from_der(decode_certificate_input(input)?)
    }

    /// The name to show for the PSP: the subject organizationName, else its commonName.
    pub fn psp_subject_name(&self) -> Option<&str> {
        self.subject_o.as_deref().or(self.subject_cn.as_deref())
    }

    /// The PSD2 authorisation number, when the organizationIdentifier has the PSD2 form.
    pub fn auth_number(&self) -> Option<&PsdAuthNumber> {
        self.organization_identifier.as_ref()?.psd.as_ref()
    }

    /// The serial number in upper-case hex without leading zeros, as OpenSSL and most tools
    /// print it (`2608759`, `8`). A negative serial (forbidden by RFC 5280, section 4.1.2.2)
    /// shows its two's-complement octets. Revocation lookups use [`Self::serial`], not this.
    pub fn serial_hex(&self) -> String {
        let hex = crate::hex::upper(&self.serial);
        let trimmed = hex.trim_start_matches('0');
        if trimmed.is_empty() {
            "0".to_owned()
        } else {
            trimmed.to_owned()
        }
    }

    /// The SHA-256 fingerprint in lower-case hex.
    pub fn fingerprint_hex(&self) -> String {
        crate::hex::lower(&self.fingerprint_sha256)
    }

    /// Verifies that this certificate was signed by the key in `issuer_spki_der` (a DER
    /// SubjectPublicKeyInfo), under the algorithm policy of [`SignatureError`]'s module:
    /// RSA PKCS#1 v1.5 and PSS with SHA-2, ECDSA P-256/P-384, Ed25519; SHA-1 and MD5 refused.
    pub fn verify_signed_by(&self, issuer_spki_der: &[u8]) -> Result<(), SignatureError> {
        signature::verify_certificate_signature(&self.der, issuer_spki_der)
    }

    /// Why this certificate's own public key is not acceptable, if it is not: too weak, or
    /// of a refused kind (see `signature::key_problem`).
    pub fn key_problem(&self) -> Option<String> {
        signature::key_problem(&self.spki)
    }

    /// Whether `t` lies in the validity period, both ends included (RFC 5280 section
    /// 4.1.2.5). Certificate times have whole seconds, so `t` counts by its second: a time
    /// inside the `notAfter` second is still valid, one inside the second before `notBefore`
    /// is not (x509-limbo's `validity::*-fractional` cases).
    pub fn is_valid_at(&self, t: OffsetDateTime) -> bool {
        let t = t.replace_nanosecond(0).unwrap_or(t);
        self.not_before <= t && t <= self.not_after
    }

    /// The warnings that came from the QCStatements extension (without their prefix).
    pub fn qc_warnings(&self) -> impl Iterator<Item = &str> {
        self.warnings
            .iter()
            .filter_map(|w| w.strip_prefix(QC_WARNING_PREFIX))
    }
}

/// RFC 5280 section 4.1, checked strictly before x509-parser reads the certificate:
///
/// ```text
/// Certificate ::= SEQUENCE {
///     tbsCertificate       TBSCertificate,      -- a SEQUENCE
///     signatureAlgorithm   AlgorithmIdentifier, -- SEQUENCE { OBJECT IDENTIFIER, ANY OPTIONAL }
///     signatureValue       BIT STRING }
/// ```
///
/// x509-parser does not check every tag of this envelope (it accepts, for instance, a
/// context-specific tag in place of the outer SEQUENCE or of the BIT STRING). The envelope is
/// outside the signed bytes, so such a variant would still verify while having another
/// fingerprint; refusing it keeps one certificate to one encoding.
pub fn check_envelope(der: &[u8]) -> Result<(), CertError> {
    let bad = |what: &str| CertError::Der(format!("certificate envelope: {what}"));
    let (outer, used) = der::read_tlv(der).map_err(|e| bad(&e.to_string()))?;
    if outer.tag != der::tag::SEQUENCE {
        return Err(bad("not a SEQUENCE"));
    }
    if used != der.len() {
        return Err(CertError::Der(format!(
            "{} bytes after the certificate",
            der.len() - used
        )));
    }
    let mut fields = outer.reader();
    let mut next = |what: &str, tag: u8| match fields.read() {
        Ok(tlv) if tlv.tag == tag => Ok(tlv),
        Ok(_) => Err(bad(&format!("{what} has the wrong tag"))),
        Err(e) => Err(bad(&format!("{what}: {e}"))),
    };
    next("tbsCertificate", der::tag::SEQUENCE)?;
    let alg = next("signatureAlgorithm", der::tag::SEQUENCE)?;
    next("signatureValue", der::tag::BIT_STRING)?;
    if !fields.is_empty() {
        return Err(bad("elements after signatureValue"));
    }
    if alg.reader().peek_tag() != Some(der::tag::OID) {
        return Err(bad(
            "signatureAlgorithm does not start with an OBJECT IDENTIFIER",
        ));
    }
    Ok(())
}

/// Everything but `der` and the fingerprint, which `from_der` fills in. The certificate
/// decoded (`decode`), then its fields read in order, with the warnings each gives: the
/// subject's country (`subject_country`) and organizationIdentifier, the serial, the two
/// signature algorithm fields (`check_signature_algorithms`), the names, validity, key and
/// signature algorithm, then the extensions ([`read_extensions`]).
fn parse_fields(der: &[u8]) -> Result<PspCertificate, CertError> {
    let cert = decode(der)?;
    let tbs = &cert.tbs_certificate;
    let mut warnings = Vec::new();

    let subject = tbs.subject();
    let issuer = tbs.issuer();
    let subject_c = subject_country(subject, &mut warnings);
    let organization_identifier = first_attribute(
        subject,
        OID_ORGANIZATION_IDENTIFIER,
        "subject organizationIdentifier",
        &mut warnings,
    )
    .map(|raw| AuthNumber::parse(&raw));

    let serial = cert.tbs_certificate.raw_serial().to_vec();
    check_serial(&serial, &mut warnings);
    check_signature_algorithms(&cert, &mut warnings);

    let mut out = PspCertificate {
        der: Vec::new(),
        fingerprint_sha256: [0; 32],
        subject: name::rfc4514(subject),
        issuer: name::rfc4514(issuer),
        issuer_raw: issuer.as_raw().to_vec(),
        subject_raw: subject.as_raw().to_vec(),
        issuer_name: NormalizedName::from_x509(issuer).ok(),
        subject_name: NormalizedName::from_x509(subject).ok(),
        subject_cn: first_attribute(
            subject,
            OID_COMMON_NAME,
            "subject commonName",
            &mut warnings,
        ),
        subject_o: first_attribute(
            subject,
            OID_ORGANIZATION,
            "subject organizationName",
            &mut warnings,
        ),
        subject_c,
        issuer_cn: first_attribute(issuer, OID_COMMON_NAME, "issuer commonName", &mut warnings),
        organization_identifier,
        serial,
        not_before: tbs.validity().not_before.to_datetime(),
        not_after: tbs.validity().not_after.to_datetime(),
        version: tbs.version().0 + 1,
        is_ca: None,
        path_len_constraint: None,
        extension_faults: Vec::new(),
        key_usage: None,
        policies: Vec::new(),
        subject_attribute_types: name::attribute_types(subject),
        subject_key_id: None,
        authority_key_id: None,
        spki: tbs.public_key().raw.to_vec(),
        signature_algorithm: cert.signature_algorithm.algorithm.to_id_string(),
        crl_urls: Vec::new(),
        ocsp_urls: Vec::new(),
        ca_issuers_urls: Vec::new(),
        extended_key_usage: None,
        qc: None,
        warnings: Vec::new(),
    };
    read_extensions(&cert, &mut out, &mut warnings)?;
    out.warnings = warnings;
    Ok(out)
}

/// The certificate decoded: its envelope checked ([`check_envelope`]), then DER with nothing
/// after it.
fn decode(der: &[u8]) -> Result<X509Certificate<'_>, CertError> {
    check_envelope(der)?;
    match X509Certificate::from_der(der) {
        Ok(([], cert)) => Ok(cert),
        Ok((rest, _)) => Err(CertError::Der(format!(
            "{} bytes after the certificate",
            rest.len()
        ))),
        Err(e) => Err(CertError::Der(e.to_string())),
    }
}

/// The subject's countryName, with a warning when it is not a two-letter code.
fn subject_country(
    subject: &x509_parser::x509::X509Name<'_>,
    warnings: &mut Vec<String>,
) -> Option<String> {
    let subject_c = first_attribute(subject, OID_COUNTRY, "subject countryName", warnings);
    if let Some(c) = &subject_c
        && (c.len() != 2 || !c.bytes().all(|b| b.is_ascii_alphabetic()))
    {
        warnings.push(format!(
            "subject countryName `{c}` is not a two-letter ISO 3166 code (X.520, RFC 5280 Appendix A)"
        ));
    }
    subject_c
}

/// RFC 5280 section 4.1.1.2: signatureAlgorithm must be the algorithm of
/// tbsCertificate.signature; a warning when it is not.
fn check_signature_algorithms(cert: &X509Certificate<'_>, warnings: &mut Vec<String>) {
    let tbs = &cert.tbs_certificate;
    if cert.signature_algorithm.algorithm != tbs.signature.algorithm {
        warnings.push(format!(
            "signatureAlgorithm {} differs from tbsCertificate.signature {} (RFC 5280 section 4.1.1.2)",
            cert.signature_algorithm.algorithm.to_id_string(),
            tbs.signature.algorithm.to_id_string()
        ));
    }
}

/// Reads the extensions into `out`: each once at most (RFC 5280 section 4.2), its criticality
/// judged, then read by OID.
// Whole: one match over every extension OID the certificate model reads, each arm with its
// malformed case next to it; split, the table of what is read from where would be scattered.
fn read_extensions(
    cert: &X509Certificate<'_>,
    out: &mut PspCertificate,
    warnings: &mut Vec<String>,
) -> Result<(), CertError> {
    let mut seen: Vec<String> = Vec::new();
    for ext in cert.tbs_certificate.extensions() {
        let oid = ext.oid.to_id_string();
        if seen.contains(&oid) {
            return Err(CertError::Der(format!(
                "extension {oid} appears more than once (RFC 5280 section 4.2)"
            )));
        }
        seen.push(oid.clone());
        let parsed = ext.parsed_extension();
        if let Some(fault) = extension_fault(&oid, ext.critical, parsed) {
            out.extension_faults.push(fault);
        }
        match (oid.as_str(), parsed) {
            (OID_EXT_BASIC_CONSTRAINTS, ParsedExtension::BasicConstraints(bc)) => {
                out.is_ca = Some(bc.ca);
                out.path_len_constraint = bc.path_len_constraint;
            }
            (OID_EXT_KEY_USAGE, ParsedExtension::KeyUsage(ku)) => {
                out.key_usage = Some(KeyUsage {
                    digital_signature: ku.digital_signature(),
                    non_repudiation: ku.non_repudiation(),
                    key_encipherment: ku.key_encipherment(),
                    data_encipherment: ku.data_encipherment(),
                    key_agreement: ku.key_agreement(),
                    key_cert_sign: ku.key_cert_sign(),
                    crl_sign: ku.crl_sign(),
                    encipher_only: ku.encipher_only(),
                    decipher_only: ku.decipher_only(),
                });
            }
            (OID_EXT_EKU, _) => {
                // Read here rather than from x509-parser's flags, to keep the encoded order.
                out.extended_key_usage = Some(read_eku(ext.value).ok_or_else(|| {
                    CertError::Der("extendedKeyUsage extension is malformed".to_owned())
                })?);
            }
            (OID_EXT_BASIC_CONSTRAINTS | OID_EXT_KEY_USAGE, _) => {
                return Err(CertError::Der(format!(
                    "{} extension is malformed",
                    extension_name(&oid)
                )));
            }
            (OID_EXT_SUBJECT_KEY_ID, ParsedExtension::SubjectKeyIdentifier(id)) => {
                out.subject_key_id = Some(id.0.to_vec());
            }
            (OID_EXT_AUTHORITY_KEY_ID, ParsedExtension::AuthorityKeyIdentifier(aki)) => {
                out.authority_key_id = aki.key_identifier.as_ref().map(|id| id.0.to_vec());
            }
            (OID_EXT_CRL_DP, ParsedExtension::CRLDistributionPoints(points)) => {
                for point in points.iter() {
                    if let Some(DistributionPointName::FullName(names)) = &point.distribution_point
                    {
                        out.crl_urls.extend(uris(names));
                    }
                }
            }
            (OID_EXT_AIA, ParsedExtension::AuthorityInfoAccess(aia)) => {
                for desc in aia.iter() {
                    let target = match desc.access_method.to_id_string().as_str() {
                        OID_AD_OCSP => &mut out.ocsp_urls,
                        OID_AD_CA_ISSUERS => &mut out.ca_issuers_urls,
                        _ => continue,
                    };
                    target.extend(uris(std::slice::from_ref(&desc.access_location)));
                }
            }
            (
                OID_EXT_SUBJECT_KEY_ID | OID_EXT_AUTHORITY_KEY_ID | OID_EXT_CRL_DP | OID_EXT_AIA,
                _,
            ) => {
                warnings.push(format!(
                    "{} extension is malformed; read as absent",
                    extension_name(&oid)
                ));
            }
            (OID_EXT_CERTIFICATE_POLICIES, ParsedExtension::CertificatePolicies(policies)) => {
                out.policies = policies
                    .iter()
                    .map(|p| p.policy_id.to_id_string())
                    .collect();
            }
            (OID_EXT_CERTIFICATE_POLICIES, _) => {
                warnings
                    .push("certificatePolicies extension is malformed; read as absent".to_owned());
            }
            (qc::OID_QC_STATEMENTS, _) => {
                let (statements, qc_warnings) = qc::decode_qc_statements(ext.value, ext.critical);
                out.qc = Some(statements);
                warnings.extend(
                    qc_warnings
                        .into_iter()
                        .map(|w| format!("{QC_WARNING_PREFIX}{w}")),
                );
            }
            _ => {}
        }
    }
    Ok(())
}

/// Extensions a certification path may carry marked critical: the ones the path validator
/// and the checks process (RFC 5280 section 4.2: "A certificate-using system MUST reject the
/// certificate if it encounters a critical extension it does not recognize"). Certificate
/// policies are recognised: no policy is required of a path (the initial policy set is
/// anyPolicy), so its content cannot change the outcome. Policy mappings, policy constraints
/// and inhibitAnyPolicy are not processed and so are refused when critical. Name constraints
/// are enforced by the path validator (`check::path`).
const UNDERSTOOD_CRITICAL: &[&str] = &[
    OID_EXT_BASIC_CONSTRAINTS,
    OID_EXT_KEY_USAGE,
    OID_EXT_EKU,
    OID_EXT_CRL_DP,
    OID_EXT_SUBJECT_ALT_NAME,
    OID_EXT_CERTIFICATE_POLICIES,
    OID_EXT_NAME_CONSTRAINTS,
    qc::OID_QC_STATEMENTS,
];

/// Extensions RFC 5280 requires to be non-critical: authority and subject key identifiers
/// (sections 4.2.1.1, 4.2.1.2) and authority information access (section 4.2.2.1).
const NEVER_CRITICAL: &[&str] = &[
    OID_EXT_AUTHORITY_KEY_ID,
    OID_EXT_SUBJECT_KEY_ID,
    OID_EXT_AIA,
];

/// Why one extension forbids using the certificate on a path, if it does.
fn extension_fault(oid: &str, critical: bool, parsed: &ParsedExtension<'_>) -> Option<String> {
    if critical && NEVER_CRITICAL.contains(&oid) {
        return Some(format!(
            "{} is marked critical, which RFC 5280 forbids",
            extension_name(oid)
        ));
    }
    if critical && !UNDERSTOOD_CRITICAL.contains(&oid) {
        return Some(format!(
            "unknown critical extension {} (RFC 5280 section 4.2)",
            extension_name(oid)
        ));
    }
    if let ParsedExtension::ParseError { error } = parsed {
        return Some(format!("{} cannot be read: {error}", extension_name(oid)));
    }
    None
}

fn extension_name(oid: &str) -> &str {
    match oid {
        OID_EXT_SUBJECT_KEY_ID => "subjectKeyIdentifier",
        OID_EXT_KEY_USAGE => "keyUsage",
        OID_EXT_BASIC_CONSTRAINTS => "basicConstraints",
        OID_EXT_CRL_DP => "cRLDistributionPoints",
        OID_EXT_AUTHORITY_KEY_ID => "authorityKeyIdentifier",
        OID_EXT_EKU => "extendedKeyUsage",
        OID_EXT_AIA => "authorityInfoAccess",
        OID_EXT_SUBJECT_ALT_NAME => "subjectAltName",
        OID_EXT_CERTIFICATE_POLICIES => "certificatePolicies",
        OID_EXT_NAME_CONSTRAINTS => "nameConstraints",
        other => other,
    }
}

/// The uniformResourceIdentifier entries of a GeneralNames, in order.
fn uris(names: &[GeneralName<'_>]) -> impl Iterator<Item = String> {
    names.iter().filter_map(|n| match n {
        GeneralName::URI(u) => Some((*u).to_owned()),
        _ => None,
    })
}

/// RFC 5280 section 4.2.1.12: `ExtKeyUsageSyntax ::= SEQUENCE SIZE (1..MAX) OF KeyPurposeId`,
/// `KeyPurposeId ::= OBJECT IDENTIFIER`. Dotted OIDs in encoded order; `None` if malformed.
fn read_eku(value: &[u8]) -> Option<Vec<String>> {
    let mut top = der::Reader::new(value);
    let seq = top.read().ok().filter(|t| t.tag == der::tag::SEQUENCE)?;
    if !top.is_empty() {
        return None;
    }
    let mut oids = Vec::new();
    let mut items = seq.reader();
    while !items.is_empty() {
        let item = items.read().ok().filter(|t| t.tag == der::tag::OID)?;
        oids.push(der::oid_to_string(item.value).ok()?);
    }
    if oids.is_empty() {
        return None;
    }
    Some(oids)
}

/// RFC 5280 section 4.1.2.2: a positive INTEGER of at most 20 octets.
fn check_serial(serial: &[u8], warnings: &mut Vec<String>) {
    if serial.first().is_some_and(|b| b & 0x80 != 0) {
        warnings.push("serial number is negative (RFC 5280 section 4.1.2.2)".to_owned());
    } else if serial.iter().all(|&b| b == 0) {
        warnings.push("serial number is zero (RFC 5280 section 4.1.2.2)".to_owned());
    }
    if serial.len() > MAX_SERIAL_OCTETS {
        warnings.push(format!(
            "serial number is {} octets, more than 20 (RFC 5280 section 4.1.2.2)",
            serial.len()
        ));
    }
}
