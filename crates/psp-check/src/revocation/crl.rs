//! CRLs (RFC 5280 section 5): verifying one against the certificate's issuer and indexing its
//! entries. Pure: bytes and the issuer in, an index or the reason the CRL cannot be used out.
//! Fetching, caching and refreshing are in the private `checker` module.
//!
//! What a CRL must be to be used (RFC 5280 section 6.3.3, restricted to complete CRLs issued
//! by the certificate's issuer, signed with the issuer's own key or with another key of the
//! issuer whose certificate the caller validated, section 6.3.3 (f):
//! [`CrlIndex::parse_signed`]):
//!
//! - DER (or PEM around DER), one `CertificateList` and nothing after it;
//! - `issuer` byte-for-byte equal to the certificate's issuer name (the same rule as issuer
//!   chaining in [`mod@crate::check`]);
//! - the signer may sign CRLs: `cRLSign` is set when it has a keyUsage extension (RFC 5280
//!   section 4.2.1.3), and a separate signer carries the CRL issuer's name;
//! - the signature verifies with the signer's key under the certificate signature policy
//!   (SHA-1 refused), and `signatureAlgorithm` equals `tbsCertList.signature` (section 5.1.1.2);
//! - no critical CRL extension or CRL entry extension we do not process (sections 5.2 and
//!   5.3: "the application MUST NOT use that CRL"); delta CRLs, indirect CRLs and CRLs
//!   partitioned by reason are not processed, so they are refused rather than misread;
//! - current: `thisUpdate` not ahead of `now` by more than the clock skew, `nextUpdate`
//!   present (section 5.1.2.5: "Conforming CRL issuers MUST include the nextUpdate field") and
//!   not passed by more than the configured grace;
//! - covering the certificate: an issuingDistributionPoint limited to user or CA certificates
//!   or to other distribution points (named by URI or directory name) does not cover a
//!   certificate outside that scope.
//!
//! Serial numbers are looked up by their exact content octets (negative and over-long serials
//! included, PKITS 4.4.14 to 4.4.18), in a hash map built once per CRL.

use std::collections::HashMap;
use std::time::Duration;

use der::{Decode as _, Header, Reader as _, SliceReader};
use time::OffsetDateTime;
use x509_parser::extensions::{DistributionPointName, GeneralName, ParsedExtension, X509Extension};
use x509_parser::prelude::FromDer as _;
use x509_parser::time::ASN1Time;
use x509_parser::x509::{AlgorithmIdentifier, X509Name};

use super::reason::{CrlReason, add, rfc3339};
use crate::cert::{NormalizedName, PspCertificate, SignatureError, verify_signed_data};

/// How long after its `nextUpdate` a CRL is still used. Issuers publish the next CRL well
/// before `nextUpdate`; one hour rides out an issuer publishing late or a distribution point
/// being down for a while, and a CA that stopped publishing is noticed the same day.
pub const DEFAULT_CRL_GRACE: Duration = Duration::from_secs(60 * 60);

// CRL extensions (RFC 5280 section 5.2) and CRL entry extensions (section 5.3), dotted.
const OID_AUTHORITY_KEY_ID: &str = "2.5.29.35";
const OID_ISSUER_ALT_NAME: &str = "2.5.29.18";
const OID_CRL_NUMBER: &str = "2.5.29.20";
const OID_DELTA_CRL_INDICATOR: &str = "2.5.29.27";
const OID_ISSUING_DISTRIBUTION_POINT: &str = "2.5.29.28";
const OID_FRESHEST_CRL: &str = "2.5.29.46";
const OID_AUTHORITY_INFO_ACCESS: &str = "1.3.6.1.5.5.7.1.1";
const OID_REASON_CODE: &str = "2.5.29.21";
const OID_INVALIDITY_DATE: &str = "2.5.29.24";
const OID_HOLD_INSTRUCTION_CODE: &str = "2.5.29.23";
const OID_CERTIFICATE_ISSUER: &str = "2.5.29.29";

/// The PEM label of CRLs (RFC 7468 section 6).
const PEM_LABEL: &str = "X509 CRL";

/// Bytes of index per entry beyond the serial's octets, for the cache's weigher: the boxed
/// serial's pointer and length and its allocation, the entry, the hash table's control byte
/// and load factor. Measured: 400,000 entries with 16-octet serials grew the resident set by
/// about 21 MB (53 bytes per entry); 64 + serial length over-estimates on purpose.
const INDEX_BYTES_PER_ENTRY: usize = 64;

/// Why a CRL cannot be used. The `Display` text is the reason in the check report's
/// `crl_response_error` title.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CrlError {
    /// The bytes are neither a DER CRL nor a PEM `X509 CRL` block.
    #[error("the CRL is neither DER nor PEM: {0}")]
    Encoding(String),
    /// The CRL's DER does not parse as a CertificateList (RFC 5280 section 5.1).
    #[error("the CRL cannot be parsed: {0}")]
    Parse(String),
    /// The CRL's version is neither v1 nor v2 (the value is the version number).
    #[error("the CRL is version {0}; only v1 and v2 exist")]
    Version(u32),
    /// A v1 CRL carries extensions, which RFC 5280 section 5.1.2.1 allows only in v2.
    #[error("a v1 CRL carries extensions (RFC 5280 section 5.1.2.1 requires v2)")]
    ExtensionsInV1,
    /// signatureAlgorithm differs from `tbsCertList.signature` (RFC 5280 section 5.1.1.2).
    #[error("signatureAlgorithm differs from tbsCertList.signature (RFC 5280 section 5.1.1.2)")]
    AlgorithmMismatch,
    /// The CRL's issuer is not the certificate's issuer.
    #[error("the CRL is issued by {crl_issuer}, not by the certificate's issuer {cert_issuer}")]
    IssuerMismatch {
        /// The CRL's issuer, as an RFC 4514 string.
        crl_issuer: String,
        /// The certificate's issuer, as an RFC 4514 string.
        cert_issuer: String,
    },
    /// The issuer's keyUsage is present and lacks cRLSign (RFC 5280 section 4.2.1.3).
    #[error("the issuer's keyUsage does not allow signing CRLs (no cRLSign)")]
    IssuerNotCrlSigner,
    /// The CRL's signature does not verify with the issuer's public key.
    #[error("the CRL signature does not verify with the issuer's key: {}", super::reason::signature_detail(.0))]
    Signature(SignatureError),
    /// An extension (the dotted OID) appears more than once.
    #[error("extension {0} appears more than once")]
    DuplicateExtension(String),
    /// A CRL extension (the dotted OID) cannot be decoded.
    #[error("the CRL extension {0} is malformed")]
    MalformedExtension(String),
    /// The CRL has a critical extension (the dotted OID) that is not understood.
    #[error("the CRL has an unsupported critical extension {0}")]
    UnsupportedCriticalExtension(String),
    /// A CRL entry has a critical entry extension that is not understood.
    #[error("the entry for serial {serial} has an unsupported critical extension {oid}")]
    UnsupportedCriticalEntryExtension {
        /// The entry's serial number.
        serial: String,
        /// The extension's dotted OID.
        oid: String,
    },
    /// The CRL is a delta CRL (RFC 5280 section 5.2.4); only complete CRLs are used.
    #[error("the CRL is a delta CRL; only complete CRLs are used")]
    DeltaCrl,
    /// The CRL is indirect (RFC 5280 section 5.2.5), which is not supported.
    #[error("the CRL is an indirect CRL, which is not supported")]
    IndirectCrl,
    /// The CRL's issuingDistributionPoint limits it to some reasons (onlySomeReasons).
    #[error("the CRL covers only some revocation reasons, which is not supported")]
    PartitionedByReason,
    /// The CRL's issuingDistributionPoint covers only attribute certificates.
    #[error("the CRL covers only attribute certificates")]
    AttributeCertificatesOnly,
    /// The issuingDistributionPoint names its point relative to the issuer (not supported).
    #[error(
        "the CRL's issuingDistributionPoint names its point relative to the issuer, which is not supported"
    )]
    RelativeDistributionPoint,
    /// The CRL has no nextUpdate, which RFC 5280 section 5.1.2.5 requires.
    #[error("the CRL has no nextUpdate (RFC 5280 section 5.1.2.5 requires it)")]
    NoNextUpdate,
    /// The v2 CRL has no cRLNumber, which RFC 5280 section 5.2.3 requires.
    #[error("the v2 CRL has no cRLNumber (RFC 5280 section 5.2.3 requires it)")]
    NoCrlNumber,
    /// The cRLNumber extension is marked critical (RFC 5280 section 5.2.3: non-critical).
    #[error("the CRL's cRLNumber is marked critical (RFC 5280 section 5.2.3: non-critical)")]
    CriticalCrlNumber,
    /// The CRL's thisUpdate is later than now plus the allowed clock skew.
    #[error("the CRL's thisUpdate {} is in the future", rfc3339(*.this_update))]
    NotYetValid {
        /// The CRL's thisUpdate.
        this_update: OffsetDateTime,
    },
    /// The CRL's nextUpdate passed more than the grace period ago.
    #[error("the CRL is stale: nextUpdate {} passed, beyond the {}-second grace", rfc3339(*.next_update), .grace.as_secs())]
    Stale {
        /// The CRL's nextUpdate.
        next_update: OffsetDateTime,
        /// The grace allowed after nextUpdate.
        grace: Duration,
    },
    /// The CRL's scope (issuingDistributionPoint) does not cover the certificate; says why.
    #[error("the CRL does not cover this certificate: {0}")]
    OutOfScope(String),
}

/// The hasher of the serial index: FxHash's multiply-rotate over 8-byte words. SipHash (the
/// standard one) resists keys chosen to collide, which no one can do here: the entries are
/// indexed only after the CA's signature over them verified. It was 12 % of indexing a
/// million-entry CRL (BENCHMARKS.md).
type SerialHash = std::hash::BuildHasherDefault<FxHasher>;

#[derive(Default)]
struct FxHasher(u64);

impl FxHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// One listed certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RevokedEntry {
    /// The entry's revocationDate.
    pub at: OffsetDateTime,
    /// The entry's reasonCode extension, if present (RFC 5280 section 5.3.1).
    pub reason: Option<CrlReason>,
}

/// What a current CRL says about one certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrlStatus {
    /// The certificate's serial number is not on the CRL.
    NotListed,
    /// Listed; `certificateHold` counts: a certificate on hold is not to be relied on.
    Revoked(RevokedEntry),
}

/// The scope an issuingDistributionPoint gives the CRL (RFC 5280 section 5.2.5), as far as
/// it applies to the certificates we check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Scope {
    only_user_certs: bool,
    only_ca_certs: bool,
    /// fullName URIs of the distribution point; empty when the CRL names none.
    distribution_points: Vec<String>,
}

/// A verified CRL, indexed by serial number. Time-independent: [`CrlIndex::check_current`]
/// says whether it may be used at a given time.
#[derive(Debug, Clone)]
pub struct CrlIndex {
    issuer_name: Vec<u8>,
    /// The issuer name normalised for comparison (RFC 5280 section 7.1), when it can be.
    issuer_normalised: Option<NormalizedName>,
    signer_key_sha256: [u8; 32],
    issuer: String,
    this_update: OffsetDateTime,
    next_update: OffsetDateTime,
    crl_number: Option<String>,
    scope: Scope,
    revoked: HashMap<Box<[u8]>, RevokedEntry, SerialHash>,
    index_bytes: usize,
}

impl CrlIndex {
    /// Decodes (DER or PEM), verifies against `issuer` and indexes a CRL. Runs in time
    /// linear in the CRL's size; call it off the async workers for large CRLs.
    pub fn parse(bytes: &[u8], issuer: &PspCertificate) -> Result<Self, CrlError> {
        Self::parse_signed(bytes, issuer, &[])
    }

    /// As [`CrlIndex::parse`], accepting also a signature by one of `crl_signers`: the
    /// certificates of the issuer's other keys (RFC 5280 section 6.3.3 (f)), whose
    /// certification paths the caller verified to the issuer's trust anchor. A signer must
    /// carry the CRL issuer's name and, when it has keyUsage, cRLSign. The issuer's own key is
    /// tried first; the error given when none verifies is the issuer's.
    /// [`CrlIndex::signer_key_sha256`] says which key signed.
    ///
    /// The steps: the CertificateList decoded and the two algorithm fields compared
    /// (section 5.1.1.2); the issuer and signature checked (`verified_signer`); the version,
    /// CRL extensions and nextUpdate read (`read_crl_fields`); then the entries indexed
    /// (`index_entries`). The cheap identity checks come first, then the signature, and only
    /// then the entries: nothing a forger sends is indexed.
    pub fn parse_signed(
        bytes: &[u8],
        issuer: &PspCertificate,
        crl_signers: &[&PspCertificate],
    ) -> Result<Self, CrlError> {
        let der = decode(bytes)?;
        let list = split_certificate_list(&der)?;
        let tbs = read_tbs(list.tbs)?;

        // RFC 5280 section 5.1.1.2: signatureAlgorithm "MUST contain the same algorithm
        // identifier as the signature field in the sequence tbsCertList" (DER: same bytes).
        if tbs.signature != list.algorithm {
            return Err(CrlError::AlgorithmMismatch);
        }
        let signer = verified_signer(&list, &tbs, issuer, crl_signers)?;
        let fields = read_crl_fields(&tbs)?;
        let (revoked, index_bytes) = index_entries(tbs.revoked, fields.v2)?;

        Ok(CrlIndex {
            issuer_name: tbs.issuer.to_vec(),
            issuer_normalised: NormalizedName::from_der(tbs.issuer).ok(),
            signer_key_sha256: crate::hex::sha256(&signer.spki),
            issuer: name_text(tbs.issuer),
            this_update: tbs.this_update,
            next_update: fields.next_update,
            crl_number: fields.crl_number,
            scope: fields.scope,
            revoked,
            index_bytes,
        })
    }

    /// Whether the CRL may be used at `now`: `thisUpdate <= now + skew` and
    /// `now <= nextUpdate + grace`.
    pub fn check_current(
        &self,
        now: OffsetDateTime,
        grace: Duration,
        skew: Duration,
    ) -> Result<(), CrlError> {
        if self.this_update > add(now, skew) {
            return Err(CrlError::NotYetValid {
                this_update: self.this_update,
            });
        }
        if now > add(self.next_update, grace) {
            return Err(CrlError::Stale {
                next_update: self.next_update,
                grace,
            });
        }
        Ok(())
    }

    /// The status of `cert` according to this CRL, after checking that the CRL's scope
    /// covers it and that the certificate's issuer name is the CRL's. Does not check currency
    /// (see [`CrlIndex::check_current`]).
    pub fn status(&self, cert: &PspCertificate) -> Result<CrlStatus, CrlError> {
        if !same_name(
            &self.issuer_name,
            self.issuer_normalised.as_ref(),
            &cert.issuer_raw,
            cert.issuer_name.as_ref(),
        ) {
            return Err(CrlError::IssuerMismatch {
                crl_issuer: self.issuer.clone(),
                cert_issuer: cert.issuer.clone(),
            });
        }
        let is_ca = cert.is_ca == Some(true);
        if self.scope.only_user_certs && is_ca {
            return Err(CrlError::OutOfScope(
                "it lists end-entity certificates only".to_owned(),
            ));
        }
        if self.scope.only_ca_certs && !is_ca {
            return Err(CrlError::OutOfScope(
                "it lists CA certificates only".to_owned(),
            ));
        }
        // RFC 5280 section 6.3.3 (b)(2)(i): when both name distribution points, one of the
        // certificate's must be the CRL's.
        if !self.scope.distribution_points.is_empty()
            && !cert
                .crl_urls
                .iter()
                .any(|u| self.scope.distribution_points.contains(u))
            && !certificate_points(cert)
                .iter()
                .any(|u| self.scope.distribution_points.contains(u))
        {
            return Err(CrlError::OutOfScope(format!(
                "it is for distribution point {}",
                self.scope.distribution_points.join(", ")
            )));
        }
        Ok(match self.lookup(&cert.serial) {
            Some(entry) => CrlStatus::Revoked(*entry),
            None => CrlStatus::NotListed,
        })
    }

    /// The entry for a serial number's exact content octets.
    pub fn lookup(&self, serial: &[u8]) -> Option<&RevokedEntry> {
        self.revoked.get(serial)
    }

    /// Whether this CRL is `issuer`'s (by name) and was verified with the key of `issuer` or
    /// of one of `crl_signers`.
    pub fn verified_for_any(
        &self,
        issuer: &PspCertificate,
        crl_signers: &[&PspCertificate],
    ) -> bool {
        same_name(
            &self.issuer_name,
            self.issuer_normalised.as_ref(),
            &issuer.subject_raw,
            issuer.subject_name.as_ref(),
        ) && std::iter::once(issuer)
            .chain(crl_signers.iter().copied())
            .any(|s| self.signer_key_sha256 == crate::hex::sha256(&s.spki))
    }

    /// SHA-256 of the SubjectPublicKeyInfo whose key verified the CRL.
    pub fn signer_key_sha256(&self) -> [u8; 32] {
        self.signer_key_sha256
    }

    /// The number of revoked certificates (entries) the CRL lists.
    pub fn len(&self) -> usize {
        self.revoked.len()
    }

    /// Whether the CRL lists no revoked certificates.
    pub fn is_empty(&self) -> bool {
        self.revoked.is_empty()
    }

    /// The CRL's issuer as an RFC 4514 string.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The CRL's thisUpdate: when it was issued (RFC 5280 section 5.1.2.4).
    pub fn this_update(&self) -> OffsetDateTime {
        self.this_update
    }

    /// The CRL's nextUpdate: when the next CRL is due (RFC 5280 section 5.1.2.5).
    pub fn next_update(&self) -> OffsetDateTime {
        self.next_update
    }

    /// cRLNumber in upper-case hex (decimal numbers are what tools print; hex keeps
    /// 20-octet numbers exact without a bignum).
    pub fn crl_number(&self) -> Option<&str> {
        self.crl_number.as_deref()
    }

    /// Approximate memory held by the index, in bytes (the cache's weight).
    pub fn index_bytes(&self) -> usize {
        self.index_bytes
    }
}

/// A distribution point's full name as compared between a certificate's
/// cRLDistributionPoints and a CRL's issuingDistributionPoint: a URI as written, a directory
/// name by its DER (PKITS names self-issued certificates' points so, 4.5.3).
fn point_name(name: &GeneralName<'_>) -> Option<String> {
    match name {
        GeneralName::URI(u) => Some((*u).to_owned()),
        GeneralName::DirectoryName(n) => Some(format!("dirName:{}", crate::hex::upper(n.as_raw()))),
        _ => None,
    }
}

/// Every full name of the certificate's cRLDistributionPoints ([`point_name`]); empty when it
/// has none or they cannot be read.
fn certificate_points(cert: &PspCertificate) -> Vec<String> {
    let Ok((_, parsed)) = x509_parser::certificate::X509Certificate::from_der(&cert.der) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for ext in parsed.extensions() {
        if let ParsedExtension::CRLDistributionPoints(points) = ext.parsed_extension() {
            for point in points.iter() {
                if let Some(DistributionPointName::FullName(names)) = &point.distribution_point {
                    out.extend(names.iter().filter_map(point_name));
                }
            }
        }
    }
    out
}

/// DER as is; PEM (`-----BEGIN X509 CRL-----`) decoded by the one PEM reader
/// ([`crate::cert::input::decode_pem`]). Distribution points are supposed to serve DER (RFC
/// 5280 section 4.2.1.13) but some serve PEM.
fn decode(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, CrlError> {
    match crate::cert::input::decode_pem(bytes, PEM_LABEL) {
        Ok(Some(der)) => Ok(std::borrow::Cow::Owned(der)),
        Ok(None) => Ok(std::borrow::Cow::Borrowed(bytes)),
        Err(e) => Err(CrlError::Encoding(e.to_string())),
    }
}

/// Two names are the same (RFC 5280 section 7.1 comparison, as the path builder does): the
/// same bytes, or the same normalised name. A CA that re-encoded its name at a rollover
/// still finds its CRL.
pub fn same_name(
    a_raw: &[u8],
    a: Option<&NormalizedName>,
    b_raw: &[u8],
    b: Option<&NormalizedName>,
) -> bool {
    a_raw == b_raw || matches!((a, b), (Some(a), Some(b)) if a == b)
}

/// The key that signed the CRL: the CRL must name `issuer`; then the issuer's own key is
/// tried, and each of `crl_signers` that carries the CRL issuer's name (RFC 5280 section
/// 6.3.3 (f)); a signer whose keyUsage lacks cRLSign is passed over. When none verifies, the
/// error is the issuer's.
fn verified_signer<'c>(
    list: &CertificateList<'_>,
    tbs: &Tbs<'_>,
    issuer: &'c PspCertificate,
    crl_signers: &[&'c PspCertificate],
) -> Result<&'c PspCertificate, CrlError> {
    let crl_issuer = NormalizedName::from_der(tbs.issuer).ok();
    let names_it = |c: &PspCertificate| {
        same_name(
            tbs.issuer,
            crl_issuer.as_ref(),
            &c.subject_raw,
            c.subject_name.as_ref(),
        )
    };
    if !names_it(issuer) {
        return Err(CrlError::IssuerMismatch {
            crl_issuer: name_text(tbs.issuer),
            cert_issuer: issuer.subject.clone(),
        });
    }
    let algorithm = match AlgorithmIdentifier::from_der(list.algorithm) {
        Ok(([], alg)) => alg,
        _ => return Err(CrlError::Parse("signatureAlgorithm".to_owned())),
    };
    let mut refusal = None;
    for (k, signer) in std::iter::once(issuer)
        .chain(crl_signers.iter().copied())
        .enumerate()
    {
        if k > 0 && !names_it(signer) {
            continue;
        }
        if signer.key_usage.is_some_and(|ku| !ku.crl_sign) {
            if k == 0 {
                refusal = Some(CrlError::IssuerNotCrlSigner);
            }
            continue;
        }
        match verify_signed_data(
            list.tbs,
            &algorithm,
            list.signature,
            list.unused_bits,
            &signer.spki,
        ) {
            Ok(()) => return Ok(signer),
            Err(e) if k == 0 => refusal = Some(CrlError::Signature(e)),
            Err(_) => {}
        }
    }
    Err(refusal.unwrap_or(CrlError::IssuerNotCrlSigner))
}

/// Revoked serials and what the CRL says of each.
type RevokedIndex = HashMap<Box<[u8]>, RevokedEntry, SerialHash>;

/// What the CRL says of itself, once its signature verified.
struct CrlFields {
    /// Whether it is a v2 CRL (which entry extensions require).
    v2: bool,
    crl_number: Option<String>,
    scope: Scope,
    next_update: OffsetDateTime,
}

/// The version (section 5.1.2.1), the CRL extensions (section 5.2; only in v2), the cRLNumber
/// every v2 CRL must carry (section 5.2.3) and nextUpdate, which this implementation requires.
fn read_crl_fields(tbs: &Tbs<'_>) -> Result<CrlFields, CrlError> {
    // RFC 5280 section 5.1.2.1: `Version OPTIONAL -- if present, MUST be v2`, and
    // extensions (of the CRL or of entries) require v2.
    let v2 = match tbs.version {
        None => false,
        Some(1) => true,
        Some(v) => return Err(CrlError::Version(v + 1)),
    };
    let extensions = tbs
        .extensions
        .map(read_extension_list)
        .transpose()?
        .unwrap_or_default();
    if !v2 && !extensions.is_empty() {
        return Err(CrlError::ExtensionsInV1);
    }
    let (crl_number, scope) = read_crl_extensions(&extensions)?;
    // RFC 5280 section 5.2.3: "conforming CRL issuers MUST include this extension in all
    // CRLs". A v1 CRL cannot carry it (and is accepted as before, for old responders).
    if v2 && crl_number.is_none() {
        return Err(CrlError::NoCrlNumber);
    }
    let next_update = tbs.next_update.ok_or(CrlError::NoNextUpdate)?;
    Ok(CrlFields {
        v2,
        crl_number,
        scope,
        next_update,
    })
}

/// The revoked certificates (section 5.1.2.6) indexed by serial, with the index's size in
/// bytes; entry extensions (section 5.3) only in a v2 CRL.
fn index_entries(
    revoked_certificates: Option<&[u8]>,
    v2: bool,
) -> Result<(RevokedIndex, usize), CrlError> {
    let mut revoked = HashMap::with_hasher(SerialHash::default());
    let mut index_bytes = 0usize;
    let mut entries = Tlvs::new(revoked_certificates.unwrap_or_default())?;
    while let Some(entry) = entries.next_tlv()? {
        let entry = read_entry(entry)?;
        let reason = match entry.extensions {
            Some(_) if !v2 => return Err(CrlError::ExtensionsInV1),
            Some(raw) => read_entry_extensions(entry.serial, &read_extension_list(raw)?)?,
            None => None,
        };
        let serial: Box<[u8]> = entry.serial.into();
        index_bytes = index_bytes.saturating_add(serial.len() + INDEX_BYTES_PER_ENTRY);
        // A serial listed twice is revoked either way; the first entry's time is kept.
        revoked.entry(serial).or_insert(RevokedEntry {
            at: entry.revocation_date,
            reason,
        });
    }
    Ok((revoked, index_bytes))
}

/// RFC 5280 section 5.2. Returns the cRLNumber (hex) and the scope.
fn read_crl_extensions(
    extensions: &[X509Extension<'_>],
) -> Result<(Option<String>, Scope), CrlError> {
    let mut seen: Vec<String> = Vec::new();
    let mut crl_number = None;
    let mut scope = Scope::default();
    for ext in extensions {
        let oid = ext.oid.to_id_string();
        if seen.contains(&oid) {
            return Err(CrlError::DuplicateExtension(oid));
        }
        seen.push(oid.clone());
        let parsed = ext.parsed_extension();
        match oid.as_str() {
            // RFC 5280 section 5.2.3: "This extension is non-critical".
            OID_CRL_NUMBER if ext.critical => return Err(CrlError::CriticalCrlNumber),
            OID_CRL_NUMBER => match parsed {
                ParsedExtension::CRLNumber(n) => {
                    crl_number = Some(crate::hex::upper(&n.to_bytes_be()));
                }
                _ => return Err(CrlError::MalformedExtension(oid)),
            },
            OID_DELTA_CRL_INDICATOR => return Err(CrlError::DeltaCrl),
            OID_ISSUING_DISTRIBUTION_POINT => match parsed {
                ParsedExtension::IssuingDistributionPoint(idp) => {
                    if idp.indirect_crl {
                        return Err(CrlError::IndirectCrl);
                    }
                    if idp.only_some_reasons.is_some() {
                        return Err(CrlError::PartitionedByReason);
                    }
                    if idp.only_contains_attribute_certs {
                        return Err(CrlError::AttributeCertificatesOnly);
                    }
                    scope.only_user_certs = idp.only_contains_user_certs;
                    scope.only_ca_certs = idp.only_contains_ca_certs;
                    match &idp.distribution_point {
                        None => {}
                        Some(DistributionPointName::FullName(names)) => {
                            scope.distribution_points =
                                names.iter().filter_map(point_name).collect();
                            if scope.distribution_points.is_empty() {
                                // A distribution point named other than by URI or directory
                                // name cannot match the certificates': keep it unmatchable.
                                scope.distribution_points.push(String::new());
                            }
                        }
                        Some(DistributionPointName::NameRelativeToCRLIssuer(_)) => {
                            return Err(CrlError::RelativeDistributionPoint);
                        }
                    }
                }
                _ => return Err(CrlError::MalformedExtension(oid)),
            },
            // Understood and not needed: key identification, alternative names, pointers to
            // delta CRLs and to the issuer's certificate.
            OID_AUTHORITY_KEY_ID
            | OID_ISSUER_ALT_NAME
            | OID_FRESHEST_CRL
            | OID_AUTHORITY_INFO_ACCESS => {}
            _ if ext.critical => return Err(CrlError::UnsupportedCriticalExtension(oid)),
            _ => {}
        }
    }
    Ok((crl_number, scope))
}

/// RFC 5280 section 5.3. Returns the reason; refuses the whole CRL on a critical entry
/// extension it does not process ("MUST NOT use that CRL to determine the status of any
/// certificates").
fn read_entry_extensions(
    serial: &[u8],
    extensions: &[X509Extension<'_>],
) -> Result<Option<CrlReason>, CrlError> {
    let mut reason = None;
    let mut seen: Vec<String> = Vec::new();
    for ext in extensions {
        let oid = ext.oid.to_id_string();
        if seen.contains(&oid) {
            return Err(CrlError::DuplicateExtension(oid));
        }
        seen.push(oid.clone());
        match oid.as_str() {
            OID_REASON_CODE => match ext.parsed_extension() {
                // An out-of-range code still lists the certificate; the reason is unknown.
                ParsedExtension::ReasonCode(code) => reason = CrlReason::from_code(code.0),
                _ => return Err(CrlError::MalformedExtension(oid)),
            },
            OID_INVALIDITY_DATE | OID_HOLD_INSTRUCTION_CODE => {}
            // Only meaningful in indirect CRLs, which are refused.
            OID_CERTIFICATE_ISSUER => return Err(CrlError::IndirectCrl),
            _ if ext.critical => {
                return Err(CrlError::UnsupportedCriticalEntryExtension {
                    serial: crate::hex::upper(serial),
                    oid,
                });
            }
            _ => {}
        }
    }
    Ok(reason)
}

/// The three parts of a CertificateList, as they are on the wire (RFC 5280 section 5.1):
///
/// ```text
/// CertificateList  ::=  SEQUENCE  {
///      tbsCertList          TBSCertList,
///      signatureAlgorithm   AlgorithmIdentifier,
///      signatureValue       BIT STRING  }
/// ```
///
/// CRLs are walked by hand rather than decoded whole by x509-parser: its decoded form costs
/// about 550 bytes per entry (450 MB for a 32 MiB CRL) before the signature can even be
/// checked. Walking keeps only the index, and indexes nothing before the signature verifies.
struct CertificateList<'a> {
    tbs: &'a [u8],
    algorithm: &'a [u8],
    signature: &'a [u8],
    unused_bits: u8,
}

fn split_certificate_list(der: &[u8]) -> Result<CertificateList<'_>, CrlError> {
    let (tag, content, rest) = split_first(der)?;
    if tag != TAG_SEQUENCE {
        return Err(CrlError::Parse("not a SEQUENCE".to_owned()));
    }
    if !rest.is_empty() {
        return Err(CrlError::Parse(format!(
            "{} bytes after the CertificateList",
            rest.len()
        )));
    }
    let mut parts = Tlvs::new(content)?;
    let tbs = parts.expect("tbsCertList", TAG_SEQUENCE)?;
    let algorithm = parts.expect("signatureAlgorithm", TAG_SEQUENCE)?;
    let bits = parts.expect("signatureValue", TAG_BIT_STRING)?;
    if parts.next_tlv()?.is_some() {
        return Err(CrlError::Parse("elements after signatureValue".to_owned()));
    }
    let (_, bits, _) = split_first(bits)?;
    let (&unused_bits, signature) = bits
        .split_first()
        .ok_or_else(|| CrlError::Parse("empty signatureValue".to_owned()))?;
    Ok(CertificateList {
        tbs,
        algorithm,
        signature,
        unused_bits,
    })
}

/// RFC 5280 section 5.1:
///
/// ```text
/// TBSCertList  ::=  SEQUENCE  {
///      version                 Version OPTIONAL,
///                                   -- if present, MUST be v2
///      signature               AlgorithmIdentifier,
///      issuer                  Name,
///      thisUpdate              Time,
///      nextUpdate              Time OPTIONAL,
///      revokedCertificates     SEQUENCE OF SEQUENCE  {
///           userCertificate         CertificateSerialNumber,
///           revocationDate          Time,
///           crlEntryExtensions      Extensions OPTIONAL
///                                    -- if present, version MUST be v2
///                                }  OPTIONAL,
///      crlExtensions           [0]  EXPLICIT Extensions OPTIONAL
///                                    -- if present, version MUST be v2
///                                }
/// ```
///
/// The fields, with `revokedCertificates` and `crlExtensions` left as their content octets.
struct Tbs<'a> {
    /// The INTEGER value (1 for v2).
    version: Option<u32>,
    /// The whole AlgorithmIdentifier TLV.
    signature: &'a [u8],
    /// The whole Name TLV.
    issuer: &'a [u8],
    this_update: OffsetDateTime,
    next_update: Option<OffsetDateTime>,
    revoked: Option<&'a [u8]>,
    /// The content of the Extensions SEQUENCE.
    extensions: Option<&'a [u8]>,
}

const TAG_INTEGER: u8 = 0x02;
const TAG_BIT_STRING: u8 = 0x03;
const TAG_UTC_TIME: u8 = 0x17;
const TAG_GENERALIZED_TIME: u8 = 0x18;
const TAG_SEQUENCE: u8 = 0x30;
const TAG_CRL_EXTENSIONS: u8 = 0xa0;

fn read_tbs(tbs: &[u8]) -> Result<Tbs<'_>, CrlError> {
    let (_, content, _) = split_first(tbs)?;
    let mut fields = Tlvs::new(content)?;
    let mut next = fields.next_tlv()?;
    let mut version = None;
    if let Some(tlv) = next.filter(|t| t.first() == Some(&TAG_INTEGER)) {
        let (_, value, _) = split_first(tlv)?;
        version = Some(match value {
            [v] => u32::from(*v),
            _ => return Err(CrlError::Parse("version is not a small INTEGER".to_owned())),
        });
        next = fields.next_tlv()?;
    }
    let signature = require(next, "signature", TAG_SEQUENCE)?;
    let issuer = fields.expect("issuer", TAG_SEQUENCE)?;
    let this_update = time(fields.next_tlv()?.ok_or_else(|| missing("thisUpdate"))?)?;
    let mut next = fields.next_tlv()?;
    let mut next_update = None;
    if let Some(tlv) =
        next.filter(|t| matches!(t.first(), Some(&(TAG_UTC_TIME | TAG_GENERALIZED_TIME))))
    {
        next_update = Some(time(tlv)?);
        next = fields.next_tlv()?;
    }
    let mut revoked = None;
    if let Some(tlv) = next.filter(|t| t.first() == Some(&TAG_SEQUENCE)) {
        revoked = Some(split_first(tlv)?.1);
        next = fields.next_tlv()?;
    }
    let mut extensions = None;
    if let Some(tlv) = next.filter(|t| t.first() == Some(&TAG_CRL_EXTENSIONS)) {
        let (_, explicit, _) = split_first(tlv)?;
        let (tag, list, rest) = split_first(explicit)?;
        if tag != TAG_SEQUENCE || !rest.is_empty() {
            return Err(CrlError::Parse(
                "crlExtensions is not one SEQUENCE".to_owned(),
            ));
        }
        extensions = Some(list);
        next = fields.next_tlv()?;
    }
    if next.is_some() {
        return Err(CrlError::Parse(
            "unexpected field in tbsCertList".to_owned(),
        ));
    }
    Ok(Tbs {
        version,
        signature,
        issuer,
        this_update,
        next_update,
        revoked,
        extensions,
    })
}

/// One entry of revokedCertificates.
struct Entry<'a> {
    /// The serial number's content octets, exactly as encoded.
    serial: &'a [u8],
    revocation_date: OffsetDateTime,
    /// The content of the crlEntryExtensions SEQUENCE.
    extensions: Option<&'a [u8]>,
}

fn read_entry(tlv: &[u8]) -> Result<Entry<'_>, CrlError> {
    let (tag, content, _) = split_first(tlv)?;
    if tag != TAG_SEQUENCE {
        return Err(CrlError::Parse(
            "a revokedCertificates entry is not a SEQUENCE".to_owned(),
        ));
    }
    let mut fields = Tlvs::new(content)?;
    let serial_tlv = fields.expect("userCertificate", TAG_INTEGER)?;
    let (_, serial, _) = split_first(serial_tlv)?;
    if serial.is_empty() {
        return Err(CrlError::Parse("empty userCertificate".to_owned()));
    }
    let revocation_date = time(
        fields
            .next_tlv()?
            .ok_or_else(|| missing("revocationDate"))?,
    )?;
    let extensions = match fields.next_tlv()? {
        None => None,
        Some(tlv) => {
            let (tag, list, _) = split_first(tlv)?;
            if tag != TAG_SEQUENCE {
                return Err(CrlError::Parse(
                    "crlEntryExtensions is not a SEQUENCE".to_owned(),
                ));
            }
            Some(list)
        }
    };
    if fields.next_tlv()?.is_some() {
        return Err(CrlError::Parse(
            "unexpected field in a revokedCertificates entry".to_owned(),
        ));
    }
    Ok(Entry {
        serial,
        revocation_date,
        extensions,
    })
}

/// `Extensions ::= SEQUENCE SIZE (1..MAX) OF Extension` (the content octets), parsed with
/// x509-parser so that known extensions are decoded.
fn read_extension_list(content: &[u8]) -> Result<Vec<X509Extension<'_>>, CrlError> {
    let mut out = Vec::new();
    let mut items = Tlvs::new(content)?;
    while let Some(tlv) = items.next_tlv()? {
        match X509Extension::from_der(tlv) {
            Ok(([], ext)) => out.push(ext),
            _ => return Err(CrlError::Parse("malformed Extension".to_owned())),
        }
    }
    Ok(out)
}

/// `Time ::= CHOICE { utcTime UTCTime, generalTime GeneralizedTime }` (RFC 5280 section
/// 4.1.2.5: UTCTime years 50 to 99 are 19xx).
fn time(tlv: &[u8]) -> Result<OffsetDateTime, CrlError> {
    match ASN1Time::from_der(tlv) {
        Ok(([], t)) => Ok(t.to_datetime()),
        _ => Err(CrlError::Parse("malformed Time".to_owned())),
    }
}

fn name_text(name: &[u8]) -> String {
    X509Name::from_der(name)
        .map(|(_, n)| n.to_string())
        .unwrap_or_else(|_| "an unreadable name".to_owned())
}

fn missing(field: &str) -> CrlError {
    CrlError::Parse(format!("{field} is missing"))
}

fn require<'a>(tlv: Option<&'a [u8]>, field: &str, tag: u8) -> Result<&'a [u8], CrlError> {
    match tlv {
        Some(t) if t.first() == Some(&tag) => Ok(t),
        Some(_) => Err(CrlError::Parse(format!("{field} has the wrong tag"))),
        None => Err(missing(field)),
    }
}

/// Splits the first TLV off `input`: its identifier octet, its content, and what follows.
/// DER only (definite, minimal lengths), through der's reader.
fn split_first(input: &[u8]) -> Result<(u8, &[u8], &[u8]), CrlError> {
    let der_err = |e: der::Error| CrlError::Parse(e.to_string());
    let tag = *input
        .first()
        .ok_or_else(|| CrlError::Parse("truncated".to_owned()))?;
    let mut reader = SliceReader::new(input).map_err(der_err)?;
    let header = Header::decode(&mut reader).map_err(der_err)?;
    let content = reader.read_slice(header.length).map_err(der_err)?;
    let used = usize::try_from(reader.position()).map_err(der_err)?;
    Ok((tag, content, input.get(used..).unwrap_or_default()))
}

/// Consecutive TLVs of a content.
struct Tlvs<'a> {
    reader: SliceReader<'a>,
}

impl<'a> Tlvs<'a> {
    fn new(content: &'a [u8]) -> Result<Self, CrlError> {
        SliceReader::new(content)
            .map(|reader| Tlvs { reader })
            .map_err(|e| CrlError::Parse(e.to_string()))
    }

    /// The next whole TLV, or `None` at the end.
    fn next_tlv(&mut self) -> Result<Option<&'a [u8]>, CrlError> {
        if self.reader.is_finished() {
            return Ok(None);
        }
        self.reader
            .tlv_bytes()
            .map(Some)
            .map_err(|e| CrlError::Parse(e.to_string()))
    }

    fn expect(&mut self, field: &str, tag: u8) -> Result<&'a [u8], CrlError> {
        require(self.next_tlv()?, field, tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_armour_is_removed_and_der_passes_through() {
        let der = [0x30u8, 0x03, 0x02, 0x01, 0x05];
        assert_eq!(decode(&der).expect("DER").as_ref(), &der);
        let pem = format!("\n-----BEGIN {PEM_LABEL}-----\nMAMCAQU=\n-----END {PEM_LABEL}-----\n");
        assert_eq!(decode(pem.as_bytes()).expect("PEM").as_ref(), &der);
        let broken = format!("-----BEGIN {PEM_LABEL}-----\nMAMCAQU=\n");
        assert!(matches!(
            decode(broken.as_bytes()),
            Err(CrlError::Encoding(_))
        ));
    }
}
