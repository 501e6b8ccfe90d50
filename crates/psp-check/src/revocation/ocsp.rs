//! OCSP (RFC 6960): the request we send and the checks a response must pass before its answer
//! is used. Pure: bytes, the issuer, a serial number and a point in time in; an answer or the
//! reason it cannot be used out. Fetching and caching are in the private `checker` module.
//!
//! RFC 6960 section 3.2, what a client must confirm before accepting a response, in the order
//! [`verify_response`] confirms it:
//!
//! ```text
//! 1. The certificate identified in a received response corresponds to
//!    the certificate that was identified in the corresponding request;
//! 2. The signature on the response is valid;
//! 3. The identity of the signer matches the intended recipient of the
//!    request;
//! 4. The signer is currently authorized to provide a response for the
//!    certificate in question;
//! 5. The time at which the status being indicated is known to be
//!    correct (thisUpdate) is sufficiently recent;
//! 6. When available, the time at or before which newer information will
//!    be available about the status of the certificate (nextUpdate) is
//!    greater than the current time.
//! ```
//!
//! (The signature and the signer, 2 to 4, are checked first: nothing in the response is read
//! for its meaning before it is known to come from the issuer.)
//!
//! **Signature algorithms**: the certificate policy of [`crate::cert::SignatureError`] applies
//! unchanged, so SHA-1 signatures on responses are refused. A response carries a nonce the
//! client chose, which is exactly the attacker-chosen content a chosen-prefix collision needs;
//! responders of EU QTSPs sign with SHA-256 (ETSI TS 119 312 retired SHA-1 for signatures).
//! SHA-1 stays in the CertID: there it hashes public names and keys and is what responders
//! expect (RFC 6960 section 4.1.1; RFC 5019 section 2.1.1 mandates it for lightweight
//! responders).

use std::time::Duration;

use der::asn1::{BitStringRef, Null, OctetString};
use der::{Decode, Encode, Header, Reader, SliceReader, Tag, TagNumber, Tagged as _};
use spki::{AlgorithmIdentifierOwned, ObjectIdentifier};
use time::OffsetDateTime;
use x509_cert::ext::Extension;
use x509_cert::serial_number::SerialNumber;
use x509_ocsp::{
    CertId, CertStatus, OcspGeneralizedTime, OcspRequest, OcspResponse, OcspResponseStatus,
    Request, ResponderId, ResponseData, SingleResponse, TbsRequest, Version,
};
use x509_parser::prelude::FromDer as _;
use x509_parser::x509::{AlgorithmIdentifier, SubjectPublicKeyInfo};

use super::reason::{CrlReason, add, rfc3339};
use crate::cert::{PspCertificate, SignatureError, verify_signed_data};

/// `id-pkix-ocsp-basic` (RFC 6960 section 4.2.1): the only response type defined.
pub const OID_PKIX_OCSP_BASIC: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.48.1.1");
/// `id-pkix-ocsp-nonce` (RFC 6960 section 4.4.1, RFC 8954).
pub const OID_PKIX_OCSP_NONCE: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.48.1.2");
/// `id-kp-OCSPSigning` (RFC 6960 section 4.2.2.2), dotted as `PspCertificate` keeps EKUs.
pub const OID_KP_OCSP_SIGNING: &str = "1.3.6.1.5.5.7.3.9";

/// Certificates embedded in a response that are considered as its signer. Responders include
/// their own certificate and sometimes its issuer; eight is generous and bounds the signature
/// checks a hostile response can cause (two per candidate).
pub const MAX_RESPONDER_CERTIFICATES: usize = 8;
/// SingleResponses examined in one response. We ask about one certificate; responders that
/// answer in batches (RFC 6960 section 4.2.1 allows more than asked) send a handful.
pub const MAX_SINGLE_RESPONSES: usize = 64;
/// RFC 8954 section 2.1: `Nonce ::= OCTET STRING(SIZE(1..32))`; we send 32 random octets.
pub const NONCE_LEN: usize = 32;

/// The hash algorithm of a CertID (RFC 6960 section 4.1.1: the hash over the issuer's name
/// and key). SHA-1 is what we send; responses are matched in whatever algorithm they use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CertIdHash {
    /// SHA-1 (OID 1.3.14.3.2.26).
    Sha1,
    /// SHA-256 (OID 2.16.840.1.101.3.4.2.1).
    Sha256,
    /// SHA-384 (OID 2.16.840.1.101.3.4.2.2).
    Sha384,
    /// SHA-512 (OID 2.16.840.1.101.3.4.2.3).
    Sha512,
}

impl CertIdHash {
    const SHA1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.14.3.2.26");
    const SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.1");
    const SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.2");
    const SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.3");

    /// The hash for an AlgorithmIdentifier OID; `None` for hashes not computed here.
    pub fn from_oid(oid: &ObjectIdentifier) -> Option<Self> {
        match *oid {
            Self::SHA1 => Some(CertIdHash::Sha1),
            Self::SHA256 => Some(CertIdHash::Sha256),
            Self::SHA384 => Some(CertIdHash::Sha384),
            Self::SHA512 => Some(CertIdHash::Sha512),
            _ => None,
        }
    }

    /// The hash's AlgorithmIdentifier OID.
    pub fn oid(self) -> ObjectIdentifier {
        match self {
            CertIdHash::Sha1 => Self::SHA1,
            CertIdHash::Sha256 => Self::SHA256,
            CertIdHash::Sha384 => Self::SHA384,
            CertIdHash::Sha512 => Self::SHA512,
        }
    }

    /// The hash of `data` with this algorithm.
    pub fn digest(self, data: &[u8]) -> Vec<u8> {
        let alg = match self {
            CertIdHash::Sha1 => &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
            CertIdHash::Sha256 => &ring::digest::SHA256,
            CertIdHash::Sha384 => &ring::digest::SHA384,
            CertIdHash::Sha512 => &ring::digest::SHA512,
        };
        ring::digest::digest(alg, data).as_ref().to_vec()
    }
}

/// Clock skew allowed between us and the issuer: a `thisUpdate` up to this far in the future
/// is accepted, and so is a `nextUpdate` passed by at most this much. Five minutes is the
/// default validity-period tolerance of OpenSSL's OCSP client (`-validity_period 300`).
pub const DEFAULT_CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

/// An OCSP response without `nextUpdate` ("newer information is available all the time",
/// RFC 6960 section 4.2.2.1) is treated as valid for this long after its `thisUpdate`.
pub const DEFAULT_OCSP_TTL: Duration = Duration::from_secs(60 * 60);

/// The time tolerances [`verify_response`] applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OcspPolicy {
    /// A `thisUpdate` up to this far ahead of `now` is accepted, and a `nextUpdate` passed by
    /// at most this much.
    pub clock_skew: Duration,
    /// A response without `nextUpdate` is treated as valid until `thisUpdate` plus this.
    pub default_ttl: Duration,
}

impl Default for OcspPolicy {
    fn default() -> Self {
        OcspPolicy {
            clock_skew: DEFAULT_CLOCK_SKEW,
            default_ttl: DEFAULT_OCSP_TTL,
        }
    }
}

/// The unsigned error statuses of RFC 6960 section 4.2.1. None of them says anything about
/// the certificate: each is "could not complete", never "good".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponderError {
    /// `malformedRequest` (1): the request did not conform to the OCSP syntax.
    MalformedRequest,
    /// `internalError` (2): the responder reached an inconsistent internal state.
    InternalError,
    /// `tryLater` (3): the responder cannot answer now; try again later.
    TryLater,
    /// `sigRequired` (5): the responder requires signed requests.
    SigRequired,
    /// `unauthorized` (6): the responder is not authorised to answer for this certificate.
    Unauthorized,
}

impl ResponderError {
    /// The status's name in RFC 6960 (`tryLater`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ResponderError::MalformedRequest => "malformedRequest",
            ResponderError::InternalError => "internalError",
            ResponderError::TryLater => "tryLater",
            ResponderError::SigRequired => "sigRequired",
            ResponderError::Unauthorized => "unauthorized",
        }
    }
}

/// What a verified, current response says about the certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OcspStatus {
    /// The certificate is not revoked.
    Good,
    /// The certificate is revoked.
    Revoked {
        /// The RevokedInfo's revocationTime.
        at: OffsetDateTime,
        /// The RevokedInfo's revocationReason, if present.
        reason: Option<CrlReason>,
    },
}

/// Who signed a verified response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OcspSigner {
    /// The certificate's issuer itself.
    Issuer,
    /// A responder certificate the issuer signed for the purpose (RFC 6960 section 4.2.2.2).
    Delegated {
        /// The responder certificate's subject, as an RFC 4514 string.
        subject: String,
    },
}

/// A response that passed every check of RFC 6960 section 3.2: only
/// [`verify_response`] makes one, and its fields are read through methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OcspAnswer {
    /// The certificate's status.
    status: OcspStatus,
    /// The response's producedAt: when the responder signed it.
    produced_at: OffsetDateTime,
    /// The SingleResponse's thisUpdate: when the status was known correct.
    this_update: OffsetDateTime,
    /// The SingleResponse's nextUpdate, if the responder gave one.
    next_update: Option<OffsetDateTime>,
    /// Until when the answer may be used: `nextUpdate` (or `thisUpdate` plus the default
    /// TTL), and never beyond a delegated responder certificate's `notAfter`.
    valid_until: OffsetDateTime,
    /// Who signed the response: the issuer or a delegated responder.
    signer: OcspSigner,
    /// The serial number of the certificate the answer is about, as asked.
    serial: Vec<u8>,
    /// SHA-256 of the SubjectPublicKeyInfo of the issuer the response was verified for.
    issuer_key_sha256: [u8; 32],
}

impl OcspAnswer {
    /// The certificate's status.
    pub fn status(&self) -> OcspStatus {
        self.status
    }

    /// The response's producedAt: when the responder signed it.
    pub fn produced_at(&self) -> OffsetDateTime {
        self.produced_at
    }

    /// The SingleResponse's thisUpdate: when the status was known correct.
    pub fn this_update(&self) -> OffsetDateTime {
        self.this_update
    }

    /// The SingleResponse's nextUpdate, if the responder gave one.
    pub fn next_update(&self) -> Option<OffsetDateTime> {
        self.next_update
    }

    /// Until when the answer may be used (see the field's documentation).
    pub fn valid_until(&self) -> OffsetDateTime {
        self.valid_until
    }

    /// Who signed the response.
    pub fn signer(&self) -> &OcspSigner {
        &self.signer
    }

    /// The serial number of the certificate the answer is about.
    pub fn serial(&self) -> &[u8] {
        &self.serial
    }

    /// SHA-256 of the SubjectPublicKeyInfo of the issuer the response was verified for (its
    /// own signature, or the delegated responder it certified).
    pub fn issuer_key_sha256(&self) -> &[u8; 32] {
        &self.issuer_key_sha256
    }

    /// Whether the answer is current at `now`, with `skew` tolerance at both ends.
    pub fn usable_at(&self, now: OffsetDateTime, skew: Duration) -> bool {
        self.this_update <= add(now, skew) && now <= add(self.valid_until, skew)
    }
}

/// Why a response cannot be used. The `Display` text is the reason in the check report's
/// `ocsp_response_error` title.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OcspError {
    /// The OCSP request could not be encoded.
    #[error("cannot build the OCSP request: {0}")]
    Request(String),
    /// The bytes are not a DER OCSPResponse (RFC 6960 section 4.2.1).
    #[error("the response is not a valid OCSPResponse: {0}")]
    Malformed(String),
    /// The responder returned an unsigned error status instead of an answer.
    #[error("the responder answered {} (an unsigned error status, not an answer)", .0.as_str())]
    Responder(ResponderError),
    /// The responseType (the dotted OID) is not id-pkix-ocsp-basic.
    #[error("the response type {0} is not id-pkix-ocsp-basic")]
    UnsupportedResponseType(String),
    /// The responderID (described) matches neither the issuer nor an included certificate.
    #[error(
        "the response is signed by {0}, which is neither the issuer nor a responder certificate included in the response"
    )]
    SignerNotFound(String),
    /// The responder certificate is not a valid delegate of the issuer (RFC 6960 section 4.2.2.2).
    #[error("the responder certificate {subject} is not authorised by the issuer: {why}")]
    DelegationRefused {
        /// The responder certificate's subject.
        subject: String,
        /// Why it is refused.
        why: String,
    },
    /// The response's signature does not verify with the signer's key.
    #[error("the response signature does not verify: {}", super::reason::signature_detail(.0))]
    Signature(SignatureError),
    /// A nonce was sent and the response carries none (a pre-signed or replayed response).
    #[error(
        "the response carries no nonce, though one was sent (revocation.ocsp_nonce): a pre-signed or replayed response"
    )]
    NonceMissing,
    /// The response's nonce differs from the one sent (RFC 8954).
    #[error("the response's nonce does not match the request's")]
    NonceMismatch,
    /// The response has a critical extension (the dotted OID) that is not understood.
    #[error("the response has an unsupported critical extension {0}")]
    UnsupportedCriticalExtension(String),
    /// No SingleResponse's CertID matches the certificate.
    #[error("the response has no answer for this certificate (no matching CertID)")]
    NoMatchingResponse,
    /// The responder answered `unknown` for the certificate.
    #[error("the responder does not know the certificate (status unknown)")]
    UnknownStatus,
    /// The response's thisUpdate is later than now plus the allowed clock skew.
    #[error("the response's thisUpdate {} is in the future", rfc3339(*.this_update))]
    NotYetValid {
        /// The response's thisUpdate.
        this_update: OffsetDateTime,
    },
    /// The response's validity ended more than the allowed clock skew ago.
    #[error("the response is stale: valid until {}", rfc3339(*.valid_until))]
    Stale {
        /// Until when the response was usable.
        valid_until: OffsetDateTime,
    },
}

/// RFC 6960 section 4.1.1, what we send (one Request, no signature):
///
/// ```text
/// OCSPRequest ::= SEQUENCE {
///     tbsRequest                  TBSRequest,
///     optionalSignature   [0]     EXPLICIT Signature OPTIONAL }
///
/// TBSRequest ::= SEQUENCE {
///     version             [0]     EXPLICIT Version DEFAULT v1,
///     requestorName       [1]     EXPLICIT GeneralName OPTIONAL,
///     requestList                 SEQUENCE OF Request,
///     requestExtensions   [2]     EXPLICIT Extensions OPTIONAL }
///
/// Request ::= SEQUENCE {
///     reqCert                     CertID,
///     singleRequestExtensions     [0] EXPLICIT Extensions OPTIONAL }
///
/// CertID ::= SEQUENCE {
///     hashAlgorithm       AlgorithmIdentifier,
///     issuerNameHash      OCTET STRING, -- Hash of issuer's DN
///     issuerKeyHash       OCTET STRING, -- Hash of issuer's public key
///     serialNumber        CertificateSerialNumber }
/// ```
///
/// The CertID is hashed with SHA-1, which every responder understands. `nonce`, when given,
/// goes into `requestExtensions` as RFC 8954 describes.
pub fn build_request(
    issuer: &PspCertificate,
    serial: &[u8],
    nonce: Option<&[u8]>,
) -> Result<Vec<u8>, OcspError> {
    let req_err = |e: der::Error| OcspError::Request(e.to_string());
    let key_bits = subject_public_key_bits(&issuer.spki)
        .map_err(|e| OcspError::Request(format!("issuer key: {e}")))?;
    let hash = CertIdHash::Sha1;
    let cert_id = CertId {
        hash_algorithm: AlgorithmIdentifierOwned {
            oid: hash.oid(),
            parameters: Some(Null.into()),
        },
        issuer_name_hash: OctetString::new(hash.digest(&issuer.subject_raw)).map_err(req_err)?,
        issuer_key_hash: OctetString::new(hash.digest(&key_bits)).map_err(req_err)?,
        serial_number: serial_number(serial)?,
    };
    let request_extensions = match nonce {
        Some(n) => Some(vec![nonce_extension(n)?]),
        None => None,
    };
    let request = OcspRequest {
        tbs_request: TbsRequest {
            version: Version::V1,
            requestor_name: None,
            request_list: vec![Request {
                req_cert: cert_id,
                single_request_extensions: None,
            }],
            request_extensions,
        },
        optional_signature: None,
    };
    request.to_der().map_err(req_err)
}

/// RFC 8954 section 2.1: `Nonce ::= OCTET STRING(SIZE(1..32))`, the extnValue holding its
/// DER encoding.
fn nonce_extension(nonce: &[u8]) -> Result<Extension, OcspError> {
    if nonce.is_empty() || nonce.len() > NONCE_LEN {
        return Err(OcspError::Request(format!(
            "a nonce is 1 to {NONCE_LEN} octets, not {}",
            nonce.len()
        )));
    }
    let req_err = |e: der::Error| OcspError::Request(e.to_string());
    let inner = OctetString::new(nonce).map_err(req_err)?;
    Ok(Extension {
        extn_id: OID_PKIX_OCSP_NONCE,
        critical: false,
        extn_value: OctetString::new(inner.to_der().map_err(req_err)?).map_err(req_err)?,
    })
}

/// `CertificateSerialNumber ::= INTEGER` with exactly the certificate's content octets (a
/// negative or 21-octet serial included: re-encoding it as unsigned would ask about another
/// certificate).
fn serial_number(serial: &[u8]) -> Result<SerialNumber, OcspError> {
    let len = u8::try_from(serial.len())
        .ok()
        .filter(|&l| (1..0x80).contains(&l))
        .ok_or_else(|| OcspError::Request(format!("serial of {} octets", serial.len())))?;
    let mut tlv = vec![0x02, len];
    tlv.extend_from_slice(serial);
    SerialNumber::from_der(&tlv)
        .map_err(|e| OcspError::Request(format!("serial number cannot be encoded: {e}")))
}

/// The content of the subjectPublicKey BIT STRING of a DER SubjectPublicKeyInfo: what
/// `issuerKeyHash` and `KeyHash` hash (RFC 6960 sections 4.1.1 and 4.2.1).
pub fn subject_public_key_bits(spki_der: &[u8]) -> Result<Vec<u8>, SpkiError> {
    match SubjectPublicKeyInfo::from_der(spki_der) {
        Ok(([], spki)) => Ok(spki.subject_public_key.data.to_vec()),
        Ok(_) => Err(SpkiError::TrailingBytes),
        Err(e) => Err(SpkiError::Der(e)),
    }
}

/// Why a SubjectPublicKeyInfo gives no key bits ([`subject_public_key_bits`]).
#[derive(Debug, thiserror::Error)]
pub enum SpkiError {
    /// Bytes follow the SubjectPublicKeyInfo's DER.
    #[error("trailing bytes after the SubjectPublicKeyInfo")]
    TrailingBytes,
    /// The SubjectPublicKeyInfo's DER does not parse.
    #[error("{0}")]
    Der(x509_parser::nom::Err<x509_parser::error::X509Error>),
}

/// A response's status for one CertID, before any verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SingleStatus {
    /// CertStatus `good`.
    Good,
    /// CertStatus `revoked`, with its RevokedInfo.
    Revoked {
        /// The RevokedInfo's revocationTime.
        at: OffsetDateTime,
        /// The RevokedInfo's revocationReason, if present.
        reason: Option<CrlReason>,
    },
    /// CertStatus `unknown`.
    Unknown,
}

/// One SingleResponse as read (RFC 6960 section 4.2.1):
///
/// ```text
/// SingleResponse ::= SEQUENCE {
///    certID                       CertID,
///    certStatus                   CertStatus,
///    thisUpdate                   GeneralizedTime,
///    nextUpdate         [0]       EXPLICIT GeneralizedTime OPTIONAL,
///    singleExtensions   [1]       EXPLICIT Extensions OPTIONAL }
///
/// CertStatus ::= CHOICE {
///     good        [0]     IMPLICIT NULL,
///     revoked     [1]     IMPLICIT RevokedInfo,
///     unknown     [2]     IMPLICIT UnknownInfo }
///
/// RevokedInfo ::= SEQUENCE {
///     revocationTime              GeneralizedTime,
///     revocationReason    [0]     EXPLICIT CRLReason OPTIONAL }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SingleResponseInfo {
    /// `None` when the CertID uses a hash we do not compute (SHA-224, MD5, …).
    pub hash: Option<CertIdHash>,
    /// The CertID's hash algorithm, dotted.
    pub hash_oid: String,
    /// The hash AlgorithmIdentifier's parameters are absent or NULL (anything else is
    /// malformed and never matches).
    hash_params_ok: bool,
    /// The CertID's issuerNameHash: the hash of the issuer's DER name.
    pub issuer_name_hash: Vec<u8>,
    /// The CertID's issuerKeyHash: the hash of the issuer's subjectPublicKey bits.
    pub issuer_key_hash: Vec<u8>,
    /// The serial number's content octets.
    pub serial: Vec<u8>,
    /// The certStatus.
    pub status: SingleStatus,
    /// The thisUpdate: when the status was known correct.
    pub this_update: OffsetDateTime,
    /// The nextUpdate, if present.
    pub next_update: Option<OffsetDateTime>,
    /// Critical singleExtensions, dotted (none is understood, so any makes it unusable).
    pub critical_extensions: Vec<String>,
}

impl SingleResponseInfo {
    /// Whether the CertID names `serial` issued by `issuer`, recomputing the name and key
    /// hashes with the CertID's own algorithm.
    pub fn matches(&self, issuer: &PspCertificate, serial: &[u8]) -> bool {
        match subject_public_key_bits(&issuer.spki) {
            Ok(bits) => self.matches_parts(&issuer.subject_raw, &bits, serial),
            Err(_) => false,
        }
    }

    fn matches_parts(&self, issuer_name: &[u8], issuer_key_bits: &[u8], serial: &[u8]) -> bool {
        let Some(hash) = self.hash else {
            return false;
        };
        self.hash_params_ok
            && self.serial == serial
            && self.issuer_name_hash == hash.digest(issuer_name)
            && self.issuer_key_hash == hash.digest(issuer_key_bits)
    }
}

/// How the response names its signer (RFC 6960 section 4.2.1):
///
/// ```text
/// ResponderID ::= CHOICE {
///    byName   [1] Name,
///    byKey    [2] KeyHash }
///
/// KeyHash ::= OCTET STRING -- SHA-1 hash of responder's public key
///                          -- (excluding the tag and length fields)
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponderName {
    /// DER of the Name.
    ByName(Vec<u8>),
    /// SHA-1 over the responder's subjectPublicKey bits.
    ByKey(Vec<u8>),
}

impl ResponderName {
    fn names(&self, cert: &PspCertificate) -> bool {
        match self {
            ResponderName::ByName(name) => *name == cert.subject_raw,
            ResponderName::ByKey(hash) => subject_public_key_bits(&cert.spki)
                .is_ok_and(|bits| *hash == CertIdHash::Sha1.digest(&bits)),
        }
    }

    fn describe(&self) -> String {
        match self {
            ResponderName::ByName(der) => x509_parser::x509::X509Name::from_der(der)
                .map(|(_, n)| n.to_string())
                .unwrap_or_else(|_| "an unreadable name".to_owned()),
            ResponderName::ByKey(hash) => format!("key hash {}", crate::hex::upper(hash)),
        }
    }
}

/// A successful response as read, before any verification: what the tests and the audit
/// trail look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OcspResponseInfo {
    /// The responderID: the responder's name or key hash.
    pub responder: ResponderName,
    /// The producedAt: when the responder signed the response.
    pub produced_at: OffsetDateTime,
    /// The SingleResponses, in order.
    pub responses: Vec<SingleResponseInfo>,
    /// The nonce extension's value (the octets inside the Nonce OCTET STRING), if present.
    pub nonce: Option<Vec<u8>>,
    /// Critical responseExtensions other than the nonce, dotted.
    pub critical_extensions: Vec<String>,
    /// DER of the certificates included in the response, in order.
    pub certificates: Vec<Vec<u8>>,
}

/// The signed parts of a BasicOCSPResponse, as they are on the wire.
struct SignedParts {
    tbs: Vec<u8>,
    algorithm: Vec<u8>,
    signature: Vec<u8>,
    unused_bits: u8,
}

/// RFC 6960 section 4.2.1:
///
/// ```text
/// OCSPResponse ::= SEQUENCE {
///    responseStatus         OCSPResponseStatus,
///    responseBytes          [0] EXPLICIT ResponseBytes OPTIONAL }
///
/// OCSPResponseStatus ::= ENUMERATED {
///     successful            (0),  -- Response has valid confirmations
///     malformedRequest      (1),  -- Illegal confirmation request
///     internalError         (2),  -- Internal error in issuer
///     tryLater              (3),  -- Try again later
///                                 -- (4) is not used
///     sigRequired           (5),  -- Must sign the request
///     unauthorized          (6)   -- Request unauthorized
/// }
///
/// ResponseBytes ::= SEQUENCE {
///     responseType   OBJECT IDENTIFIER,
///     response       OCTET STRING }
/// ```
///
/// Any status but `successful` is an [`OcspError::Responder`]: those responses are not
/// signed, so nothing they say may be relied on.
pub fn parse_response(der: &[u8]) -> Result<OcspResponseInfo, OcspError> {
    parse(der).map(|(info, _)| info)
}

fn parse(der: &[u8]) -> Result<(OcspResponseInfo, SignedParts), OcspError> {
    let malformed = |e: der::Error| OcspError::Malformed(e.to_string());
    let response = OcspResponse::from_der(der).map_err(malformed)?;
    let error = match response.response_status {
        OcspResponseStatus::Successful => None,
        OcspResponseStatus::MalformedRequest => Some(ResponderError::MalformedRequest),
        OcspResponseStatus::InternalError => Some(ResponderError::InternalError),
        OcspResponseStatus::TryLater => Some(ResponderError::TryLater),
        OcspResponseStatus::SigRequired => Some(ResponderError::SigRequired),
        OcspResponseStatus::Unauthorized => Some(ResponderError::Unauthorized),
    };
    if let Some(e) = error {
        return Err(OcspError::Responder(e));
    }
    let bytes = response.response_bytes.ok_or_else(|| {
        OcspError::Malformed("status successful without responseBytes".to_owned())
    })?;
    if bytes.response_type != OID_PKIX_OCSP_BASIC {
        return Err(OcspError::UnsupportedResponseType(
            bytes.response_type.to_string(),
        ));
    }
    let basic = split_basic(bytes.response.as_bytes()).map_err(malformed)?;
    let data = ResponseData::from_der(basic.tbs).map_err(malformed)?;
    let info = read_response_data(&data, &basic.certs)?;
    let parts = SignedParts {
        tbs: basic.tbs.to_vec(),
        algorithm: basic.algorithm.to_vec(),
        signature: basic.signature.to_vec(),
        unused_bits: basic.unused_bits,
    };
    Ok((info, parts))
}

/// A BasicOCSPResponse split into the exact bytes that were signed and the rest:
///
/// ```text
/// BasicOCSPResponse       ::= SEQUENCE {
///    tbsResponseData      ResponseData,
///    signatureAlgorithm   AlgorithmIdentifier,
///    signature            BIT STRING,
///    certs            [0] EXPLICIT SEQUENCE OF Certificate OPTIONAL }
/// ```
///
/// Decoding into x509-ocsp's `BasicOcspResponse` and re-encoding would give the signed bytes
/// only if the responder's encoding is the canonical one; taking them from the wire does not
/// depend on that.
struct RawBasic<'a> {
    tbs: &'a [u8],
    algorithm: &'a [u8],
    signature: &'a [u8],
    unused_bits: u8,
    certs: Vec<&'a [u8]>,
}

fn split_basic(der: &[u8]) -> der::Result<RawBasic<'_>> {
    let mut reader = SliceReader::new(der)?;
    let raw = reader.sequence(|r| {
        let tbs = r.tlv_bytes()?;
        let algorithm = r.tlv_bytes()?;
        let signature = BitStringRef::decode(r)?;
        let mut certs = Vec::new();
        if !r.is_finished() {
            let header = Header::decode(r)?;
            let certs_tag = Tag::ContextSpecific {
                constructed: true,
                number: TagNumber::N0,
            };
            if header.tag != certs_tag {
                return Err(header.tag.unexpected_error(Some(certs_tag)));
            }
            r.read_nested(header.length, |r| {
                r.sequence(|r| {
                    while !r.is_finished() {
                        certs.push(r.tlv_bytes()?);
                    }
                    Ok(())
                })
            })?;
        }
        Ok(RawBasic {
            tbs,
            algorithm,
            signature: signature.raw_bytes(),
            unused_bits: signature.unused_bits(),
            certs,
        })
    })?;
    reader.finish(raw)
}

/// RFC 6960 section 4.2.1:
///
/// ```text
/// ResponseData ::= SEQUENCE {
///    version              [0] EXPLICIT Version DEFAULT v1,
///    responderID              ResponderID,
///    producedAt               GeneralizedTime,
///    responses                SEQUENCE OF SingleResponse,
///    responseExtensions   [1] EXPLICIT Extensions OPTIONAL }
/// ```
fn read_response_data(data: &ResponseData, certs: &[&[u8]]) -> Result<OcspResponseInfo, OcspError> {
    let malformed = |e: der::Error| OcspError::Malformed(e.to_string());
    let responder = match &data.responder_id {
        ResponderId::ByName(name) => ResponderName::ByName(name.to_der().map_err(malformed)?),
        ResponderId::ByKey(hash) => ResponderName::ByKey(hash.as_bytes().to_vec()),
    };
    let mut nonce = None;
    let mut critical_extensions = Vec::new();
    for ext in data.response_extensions.iter().flatten() {
        if ext.extn_id == OID_PKIX_OCSP_NONCE {
            nonce = Some(read_nonce(ext.extn_value.as_bytes()));
        } else if ext.critical {
            critical_extensions.push(ext.extn_id.to_string());
        }
    }
    let responses = data
        .responses
        .iter()
        .take(MAX_SINGLE_RESPONSES)
        .map(read_single)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(OcspResponseInfo {
        responder,
        produced_at: time_of(&data.produced_at)?,
        responses,
        nonce,
        critical_extensions,
        certificates: certs.iter().map(|c| c.to_vec()).collect(),
    })
}

/// The nonce octets: the content of the `Nonce` OCTET STRING inside extnValue (RFC 8954).
/// Some older responders put the octets in extnValue directly; those are kept as they are,
/// so they are compared as sent.
fn read_nonce(extn_value: &[u8]) -> Vec<u8> {
    match OctetString::from_der(extn_value) {
        Ok(inner) => inner.as_bytes().to_vec(),
        Err(_) => extn_value.to_vec(),
    }
}

fn read_single(single: &SingleResponse) -> Result<SingleResponseInfo, OcspError> {
    let id = &single.cert_id;
    let status = match &single.cert_status {
        CertStatus::Good(_) => SingleStatus::Good,
        CertStatus::Unknown(_) => SingleStatus::Unknown,
        CertStatus::Revoked(info) => SingleStatus::Revoked {
            at: time_of(&info.revocation_time)?,
            reason: info
                .revocation_reason
                .and_then(|r| CrlReason::from_code(r as u8)),
        },
    };
    let hash_params_ok = match &id.hash_algorithm.parameters {
        None => true,
        Some(p) => p.tag() == Tag::Null && p.value().is_empty(),
    };
    Ok(SingleResponseInfo {
        hash: CertIdHash::from_oid(&id.hash_algorithm.oid),
        hash_oid: id.hash_algorithm.oid.to_string(),
        hash_params_ok,
        issuer_name_hash: id.issuer_name_hash.as_bytes().to_vec(),
        issuer_key_hash: id.issuer_key_hash.as_bytes().to_vec(),
        serial: id.serial_number.as_bytes().to_vec(),
        status,
        this_update: time_of(&single.this_update)?,
        next_update: single.next_update.as_ref().map(time_of).transpose()?,
        critical_extensions: single
            .single_extensions
            .iter()
            .flatten()
            .filter(|e| e.critical)
            .map(|e| e.extn_id.to_string())
            .collect(),
    })
}

fn time_of(t: &OcspGeneralizedTime) -> Result<OffsetDateTime, OcspError> {
    let secs = i64::try_from(t.0.to_unix_duration().as_secs())
        .map_err(|_| OcspError::Malformed("time out of range".to_owned()))?;
    OffsetDateTime::from_unix_timestamp(secs)
        .map_err(|e| OcspError::Malformed(format!("time out of range: {e}")))
}

/// Verifies a response for the certificate `serial` issued by `issuer`, at `now`.
///
/// `expected_nonce` is the nonce sent with the request, if any: the response must echo it.
/// One without a nonce is refused (RFC 8954 section 2.1 leaves that to the client): a nonce is
/// sent only where it was asked for (`revocation.ocsp_nonce`), and a response with the nonce
/// stripped is exactly a replayed one. Pre-signed responses never carry one: a responder that
/// serves only those cannot be used with `ocsp_nonce` on.
///
/// `good` and `revoked` are answers; `unknown` and every unsigned error status are
/// [`OcspError`]s ("could not complete"), never "good".
///
/// The checks of RFC 6960 section 3.2, in order: the signer (items 2 to 4), the extensions
/// (section 4.4) and the nonce, the response about the certificate (item 1), its currency
/// (items 5 and 6), then its status.
pub fn verify_response(
    der: &[u8],
    issuer: &PspCertificate,
    serial: &[u8],
    expected_nonce: Option<&[u8]>,
    now: OffsetDateTime,
    policy: &OcspPolicy,
) -> Result<OcspAnswer, OcspError> {
    let (info, parts) = parse(der)?;

    // RFC 6960 section 3.2, items 2 to 4: a valid signature by the issuer or by a responder
    // it authorised.
    let (signer, signer_not_after) = verify_signer(&info, &parts, issuer, now)?;

    // RFC 6960 section 4.4: extensions the client does not understand may be ignored unless
    // critical; a critical one we cannot process makes the response unusable.
    if let Some(oid) = info.critical_extensions.first() {
        return Err(OcspError::UnsupportedCriticalExtension(oid.clone()));
    }
    match (expected_nonce, &info.nonce) {
        (Some(sent), Some(got)) if sent != got.as_slice() => {
            return Err(OcspError::NonceMismatch);
        }
        (Some(_), None) => return Err(OcspError::NonceMissing),
        _ => {}
    }

    let single = matching_single(&info, issuer, serial)?;
    if let Some(oid) = single.critical_extensions.first() {
        return Err(OcspError::UnsupportedCriticalExtension(oid.clone()));
    }
    let valid_until = current_until(single, signer_not_after, now, policy)?;

    let status = match single.status {
        SingleStatus::Good => OcspStatus::Good,
        SingleStatus::Revoked { at, reason } => OcspStatus::Revoked { at, reason },
        SingleStatus::Unknown => return Err(OcspError::UnknownStatus),
    };
    Ok(OcspAnswer {
        status,
        produced_at: info.produced_at,
        this_update: single.this_update,
        next_update: single.next_update,
        valid_until,
        signer,
        serial: serial.to_vec(),
        issuer_key_sha256: crate::hex::sha256(&issuer.spki),
    })
}

/// RFC 6960 section 3.2 item 1: the SingleResponse about our certificate. If several match
/// (a responder may repeat a CertID in several hash algorithms), a revoked one wins, then a
/// good one.
fn matching_single<'i>(
    info: &'i OcspResponseInfo,
    issuer: &PspCertificate,
    serial: &[u8],
) -> Result<&'i SingleResponseInfo, OcspError> {
    let key_bits = subject_public_key_bits(&issuer.spki)
        .map_err(|e| OcspError::Request(format!("issuer key: {e}")))?;
    let matching: Vec<&SingleResponseInfo> = info
        .responses
        .iter()
        .filter(|s| s.matches_parts(&issuer.subject_raw, &key_bits, serial))
        .collect();
    matching
        .iter()
        .find(|s| matches!(s.status, SingleStatus::Revoked { .. }))
        .or_else(|| {
            matching
                .iter()
                .find(|s| matches!(s.status, SingleStatus::Good))
        })
        .or_else(|| matching.first())
        .copied()
        .ok_or(OcspError::NoMatchingResponse)
}

/// RFC 6960 section 3.2 items 5 and 6: the answer is current at `now`; returns until when it
/// may be used. Without nextUpdate ("newer information is available all the time", RFC 6960
/// section 4.2.2.1) the answer is treated as valid for the default TTL; never past a
/// delegated responder's `notAfter`.
fn current_until(
    single: &SingleResponseInfo,
    signer_not_after: Option<OffsetDateTime>,
    now: OffsetDateTime,
    policy: &OcspPolicy,
) -> Result<OffsetDateTime, OcspError> {
    if single.this_update > add(now, policy.clock_skew) {
        return Err(OcspError::NotYetValid {
            this_update: single.this_update,
        });
    }
    let mut valid_until = single
        .next_update
        .unwrap_or_else(|| add(single.this_update, policy.default_ttl));
    if let Some(not_after) = signer_not_after {
        valid_until = valid_until.min(not_after);
    }
    if now > add(valid_until, policy.clock_skew) {
        return Err(OcspError::Stale { valid_until });
    }
    Ok(valid_until)
}

/// Finds who signed the response and verifies the signature. Candidates, in order: the
/// issuer itself when the ResponderID names it, then the included certificates the
/// ResponderID names, each of which must be an authorised responder first.
///
/// Returns the signer and, for a delegated responder, its `notAfter`.
fn verify_signer(
    info: &OcspResponseInfo,
    parts: &SignedParts,
    issuer: &PspCertificate,
    now: OffsetDateTime,
) -> Result<(OcspSigner, Option<OffsetDateTime>), OcspError> {
    let algorithm = match AlgorithmIdentifier::from_der(&parts.algorithm) {
        Ok(([], alg)) => alg,
        Ok(_) => {
            return Err(OcspError::Malformed(
                "trailing bytes after signatureAlgorithm".to_owned(),
            ));
        }
        Err(e) => return Err(OcspError::Malformed(format!("signatureAlgorithm: {e}"))),
    };
    let verify = |spki: &[u8]| {
        verify_signed_data(
            &parts.tbs,
            &algorithm,
            &parts.signature,
            parts.unused_bits,
            spki,
        )
    };

    let mut last_error = None;
    if info.responder.names(issuer) {
        match verify(&issuer.spki) {
            Ok(()) => return Ok((OcspSigner::Issuer, None)),
            Err(e) => last_error = Some(OcspError::Signature(e)),
        }
    }
    for der in info.certificates.iter().take(MAX_RESPONDER_CERTIFICATES) {
        let Ok(candidate) = PspCertificate::from_der(der.clone()) else {
            continue;
        };
        if !info.responder.names(&candidate) {
            continue;
        }
        if let Err(why) = authorised_responder(&candidate, issuer, now) {
            last_error = Some(OcspError::DelegationRefused {
                subject: candidate.subject.clone(),
                why: why.to_string(),
            });
            continue;
        }
        match verify(&candidate.spki) {
            Ok(()) => {
                return Ok((
                    OcspSigner::Delegated {
                        subject: candidate.subject.clone(),
                    },
                    Some(candidate.not_after),
                ));
            }
            Err(e) => last_error = Some(OcspError::Signature(e)),
        }
    }
    Err(last_error.unwrap_or_else(|| OcspError::SignerNotFound(info.responder.describe())))
}

/// RFC 6960 section 4.2.2.2, authorised responders:
///
/// ```text
/// OCSP signing delegation SHALL be designated by the inclusion of
/// id-kp-OCSPSigning in an extended key usage certificate extension
/// included in the OCSP response signer's certificate.  This certificate
/// MUST be issued directly by the CA that is identified in the request.
/// ```
///
/// So: issued by the issuer (its issuer name is the issuer's subject and the issuer's key
/// verifies its signature), carries id-kp-OCSPSigning, and is valid at `now`. Its own
/// revocation status is not checked: RFC 6960 section 4.2.2.2.1 lets the CA choose, and
/// responder certificates are short-lived and usually carry id-pkix-ocsp-nocheck.
fn authorised_responder(
    responder: &PspCertificate,
    issuer: &PspCertificate,
    now: OffsetDateTime,
) -> Result<(), DelegationError> {
    if responder.issuer_raw != issuer.subject_raw {
        return Err(DelegationError::Issuer(responder.issuer.clone()));
    }
    responder
        .verify_signed_by(&issuer.spki)
        .map_err(DelegationError::Signature)?;
    let ocsp_signing = responder
        .extended_key_usage
        .as_ref()
        .is_some_and(|ekus| ekus.iter().any(|e| e == OID_KP_OCSP_SIGNING));
    if !ocsp_signing {
        return Err(DelegationError::NoOcspSigning);
    }
    if !responder.is_valid_at(now) {
        return Err(DelegationError::NotValid {
            not_before: rfc3339(responder.not_before),
            not_after: rfc3339(responder.not_after),
            now: rfc3339(now),
        });
    }
    Ok(())
}

/// Why a responder certificate is not an authorised responder ([`authorised_responder`]);
/// the text becomes `OcspError::DelegationRefused`'s `why`.
#[derive(Debug, thiserror::Error)]
enum DelegationError {
    #[error("it is issued by {0}")]
    Issuer(String),
    #[error("its signature does not verify with the issuer key: {0}")]
    Signature(SignatureError),
    #[error("it lacks the id-kp-OCSPSigning extended key usage")]
    NoOcspSigning,
    #[error("it is valid from {not_before} to {not_after}, not at {now}")]
    NotValid {
        not_before: String,
        not_after: String,
        now: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serials_keep_their_exact_octets_even_when_negative() {
        let s = serial_number(&[0xff]).expect("negative serial");
        assert_eq!(s.as_bytes(), &[0xff]);
        let s = serial_number(&[0x00, 0x80]).expect("positive serial with sign octet");
        assert_eq!(s.as_bytes(), &[0x00, 0x80]);
        assert!(serial_number(&[]).is_err());
        assert!(serial_number(&[0x00, 0x01]).is_err(), "non-minimal INTEGER");
    }

    #[test]
    fn nonces_are_one_to_thirty_two_octets() {
        assert!(nonce_extension(&[]).is_err());
        assert!(nonce_extension(&[7; 33]).is_err());
        let ext = nonce_extension(&[7; 32]).expect("32 octets");
        assert_eq!(read_nonce(ext.extn_value.as_bytes()), vec![7; 32]);
    }

    #[test]
    fn cert_id_hashes_recognise_the_four_sha_algorithms_only() {
        for h in [
            CertIdHash::Sha1,
            CertIdHash::Sha256,
            CertIdHash::Sha384,
            CertIdHash::Sha512,
        ] {
            assert_eq!(CertIdHash::from_oid(&h.oid()), Some(h));
        }
        let sha224 = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.4");
        assert_eq!(CertIdHash::from_oid(&sha224), None);
        assert_eq!(CertIdHash::Sha1.digest(b"").len(), 20);
    }

    #[test]
    fn garbage_is_malformed_not_good() {
        assert!(matches!(
            parse_response(b"not an OCSP response"),
            Err(OcspError::Malformed(_))
        ));
        assert!(matches!(parse_response(&[]), Err(OcspError::Malformed(_))));
    }
}
