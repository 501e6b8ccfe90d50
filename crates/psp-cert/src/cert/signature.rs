//! Verifying a certificate's signature with its issuer's public key, under an explicit
//! algorithm policy.
//!
//! ring does the cryptography. The policy decides first which algorithms may be used at all:
//!
//! | algorithm | verdict |
//! |---|---|
//! | RSA PKCS#1 v1.5 with SHA-256, SHA-384, SHA-512 (key 2048–8192 bits) | accepted |
//! | RSASSA-PSS with SHA-256/384/512, MGF1 with the same hash, salt = hash length | accepted |
//! | ECDSA on P-256 or P-384 with SHA-256 or SHA-384 | accepted |
//! | Ed25519 | accepted |
//! | anything built on MD2, MD4, MD5 or SHA-1 (RSA, DSA, ECDSA, PSS) | [`SignatureError::WeakAlgorithm`] |
//! | everything else ring cannot verify: SHA-224, ECDSA with SHA-512, P-521, brainpool curves, DSA, GOST | [`SignatureError::UnsupportedAlgorithm`] |
//!
//! Why SHA-1 is refused: chosen-prefix collisions on SHA-1 are practical (Leurent and
//! Peyrin, "SHA-1 is a Shambles", 2020), so a SHA-1 signature no longer binds the certificate
//! content; the CA/Browser Forum Baseline Requirements have forbidden SHA-1 certificate
//! signatures since 2016, and ETSI TS 119 312 (the cryptographic suites behind eIDAS trust
//! services) treats SHA-1 as unsuitable for signatures. MD5 and MD2 have been broken for
//! longer.
//!
//! Brainpool curves, used by some QTSPs, are not implemented by ring (nor by aws-lc-rs); such
//! signatures are reported as unsupported rather than as invalid, so a report can say why.

use x509_parser::prelude::{FromDer, SubjectPublicKeyInfo, X509Certificate};
use x509_parser::public_key::{PublicKey, RSAPublicKey};
use x509_parser::signature_algorithm::RsaSsaPssParams;
use x509_parser::x509::AlgorithmIdentifier;

use ring::signature::{self, VerificationAlgorithm};

/// Why a signature was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// The signature algorithm (dotted OID, with the curve or the PSS hash where that is what
    /// decides) is one this policy does not verify, usually because ring cannot.
    #[error("unsupported signature algorithm: {0}")]
    UnsupportedAlgorithm(String),
    /// The signature algorithm is built on a broken hash (MD2, MD4, MD5, SHA-1): refused
    /// whatever the signature says.
    #[error("signature algorithm {0} uses a broken hash (SHA-1 or MD5 family)")]
    WeakAlgorithm(String),
    /// The issuer's RSA key is shorter than 2048 bits (CA/Browser Forum Baseline
    /// Requirements section 6.1.5, ETSI TS 119 312).
    #[error("issuer RSA key of {bits} bits is below the 2048-bit minimum")]
    WeakIssuerKey { bits: usize },
    /// The issuer key cannot be read, or is not of the type the signature algorithm needs.
    #[error("issuer key unusable: {0}")]
    BadIssuerKey(String),
    /// The certificate's `signatureAlgorithm` differs from the `signature` field inside
    /// `tbsCertificate`, which RFC 5280 section 4.1.1.2 requires to be identical.
    #[error("signatureAlgorithm {outer} differs from tbsCertificate.signature {inner}")]
    AlgorithmMismatch { outer: String, inner: String },
    /// The certificate's own encoding could not be read for verification (signature bits,
    /// algorithm parameters).
    #[error("certificate cannot be verified: {0}")]
    Malformed(String),
    /// The signature does not verify with this key: the certificate was not signed by it, or
    /// was changed after signing.
    #[error("signature does not verify with the issuer key")]
    Invalid,
}

impl SignatureError {
    /// The signature could not be judged at all (the algorithm or the key is outside what this
    /// policy verifies), as opposed to a signature that was checked and is wrong.
    pub fn is_algorithm_problem(&self) -> bool {
        matches!(
            self,
            SignatureError::UnsupportedAlgorithm(_)
                | SignatureError::WeakAlgorithm(_)
                | SignatureError::WeakIssuerKey { .. }
        )
    }

    /// Refused by policy (a broken hash, a short key) rather than unsupported.
    pub fn is_policy_refusal(&self) -> bool {
        matches!(
            self,
            SignatureError::WeakAlgorithm(_) | SignatureError::WeakIssuerKey { .. }
        )
    }
}

// Signature algorithms (RFC 3279, RFC 4055, RFC 5758, RFC 8410).
const MD2_RSA: &str = "1.2.840.113549.1.1.2";
const MD4_RSA: &str = "1.2.840.113549.1.1.3";
const MD5_RSA: &str = "1.2.840.113549.1.1.4";
const SHA1_RSA: &str = "1.2.840.113549.1.1.5";
const RSASSA_PSS: &str = "1.2.840.113549.1.1.10";
const SHA256_RSA: &str = "1.2.840.113549.1.1.11";
const SHA384_RSA: &str = "1.2.840.113549.1.1.12";
const SHA512_RSA: &str = "1.2.840.113549.1.1.13";
const OIW_MD5_RSA: &str = "1.3.14.3.2.3";
const OIW_MD5_RSA_SIG: &str = "1.3.14.3.2.25";
const OIW_SHA1_RSA: &str = "1.3.14.3.2.29";
const DSA_SHA1: &str = "1.2.840.10040.4.3";
const ECDSA_SHA1: &str = "1.2.840.10045.4.1";
const ECDSA_SHA256: &str = "1.2.840.10045.4.3.2";
const ECDSA_SHA384: &str = "1.2.840.10045.4.3.3";
const ED25519: &str = "1.3.101.112";

// Public key algorithms and curves.
const RSA_ENCRYPTION: &str = "1.2.840.113549.1.1.1";
const EC_PUBLIC_KEY: &str = "1.2.840.10045.2.1";
const CURVE_P256: &str = "1.2.840.10045.3.1.7";
const CURVE_P384: &str = "1.3.132.0.34";
/// ecStdCurvesAndGeneration brainpool arc (RFC 5639): brainpoolP256r1 is `.1.1.7`.
const BRAINPOOL_ARC: &str = "1.3.36.3.3.2.8.";

// Hashes and MGF1 for RSASSA-PSS (RFC 4055 section 3.1).
const SHA1: &str = "1.3.14.3.2.26";
const SHA256: &str = "2.16.840.1.101.3.4.2.1";
const SHA384: &str = "2.16.840.1.101.3.4.2.2";
const SHA512: &str = "2.16.840.1.101.3.4.2.3";
const MGF1: &str = "1.2.840.113549.1.1.8";

/// RSA moduli below this many bits are refused (CA/B Forum BR 6.1.5; TS 119 312).
const MIN_RSA_BITS: usize = 2048;
/// ring's RSA verification refuses moduli above this many bits.
const MAX_RSA_BITS: usize = 8192;

/// Verifies that `cert_der` was signed by the key in `issuer_spki_der` (a DER
/// SubjectPublicKeyInfo), under the policy above.
pub(crate) fn verify_certificate_signature(
    cert_der: &[u8],
    issuer_spki_der: &[u8],
) -> Result<(), SignatureError> {
    super::check_envelope(cert_der).map_err(|e| SignatureError::Malformed(e.to_string()))?;
    let cert = match X509Certificate::from_der(cert_der) {
        Ok(([], cert)) => cert,
        Ok(_) => {
            return Err(SignatureError::Malformed(
                "trailing bytes after the certificate".to_owned(),
            ));
        }
        Err(e) => return Err(SignatureError::Malformed(e.to_string())),
    };
    let spki = match SubjectPublicKeyInfo::from_der(issuer_spki_der) {
        Ok(([], spki)) => spki,
        Ok(_) => {
            return Err(SignatureError::BadIssuerKey(
                "trailing bytes after the SubjectPublicKeyInfo".to_owned(),
            ));
        }
        Err(e) => return Err(SignatureError::BadIssuerKey(e.to_string())),
    };

    let outer = &cert.signature_algorithm;
    let inner = &cert.tbs_certificate.signature;
    if !same_algorithm(outer, inner) {
        return Err(SignatureError::AlgorithmMismatch {
            outer: outer.algorithm.to_id_string(),
            inner: inner.algorithm.to_id_string(),
        });
    }
    if cert.signature_value.unused_bits != 0 {
        return Err(SignatureError::Malformed(
            "signature BIT STRING has unused bits".to_owned(),
        ));
    }
    if spki.subject_public_key.unused_bits != 0 {
        return Err(SignatureError::BadIssuerKey(
            "subjectPublicKey BIT STRING has unused bits".to_owned(),
        ));
    }

    let algorithm = choose_algorithm(outer, &spki)?;
    let key = signature::UnparsedPublicKey::new(algorithm, &spki.subject_public_key.data);
    key.verify(cert.tbs_certificate.as_ref(), &cert.signature_value.data)
        .map_err(|_| SignatureError::Invalid)
}

/// Verifies a signature over other signed data (a CRL's `tbsCertList`, an OCSP response's
/// `tbsResponseData`) with the key in `signer_spki_der`, under the same algorithm policy as
/// certificates. `signature` is the content of the signature BIT STRING, whose number of
/// unused bits the caller passes: anything but zero is malformed.
pub fn verify_signed_data(
    message: &[u8],
    algorithm: &AlgorithmIdentifier<'_>,
    signature: &[u8],
    unused_bits: u8,
    signer_spki_der: &[u8],
) -> Result<(), SignatureError> {
    if unused_bits != 0 {
        return Err(SignatureError::Malformed(
            "signature BIT STRING has unused bits".to_owned(),
        ));
    }
    let spki = signer_key(signer_spki_der)?;
    let chosen = choose_algorithm(algorithm, &spki)?;
    signature::UnparsedPublicKey::new(chosen, &spki.subject_public_key.data)
        .verify(message, signature)
        .map_err(|_| SignatureError::Invalid)
}

/// The signer's SubjectPublicKeyInfo, read strictly: nothing after it, and a key BIT STRING
/// without unused bits.
fn signer_key(spki_der: &[u8]) -> Result<SubjectPublicKeyInfo<'_>, SignatureError> {
    let spki = match SubjectPublicKeyInfo::from_der(spki_der) {
        Ok(([], spki)) => spki,
        Ok(_) => {
            return Err(SignatureError::BadIssuerKey(
                "trailing bytes after the SubjectPublicKeyInfo".to_owned(),
            ));
        }
        Err(e) => return Err(SignatureError::BadIssuerKey(e.to_string())),
    };
    if spki.subject_public_key.unused_bits != 0 {
        return Err(SignatureError::BadIssuerKey(
            "subjectPublicKey BIT STRING has unused bits".to_owned(),
        ));
    }
    Ok(spki)
}

/// The hash of a signature scheme named outside ASN.1 (by an XML-DSig algorithm URI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemeHash {
    Sha256,
    Sha384,
    Sha512,
}

/// A signature scheme named outside ASN.1, under the same policy as `choose_algorithm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// RSASSA-PKCS1-v1_5 (RFC 8017 section 8.2).
    RsaPkcs1(SchemeHash),
    /// RSASSA-PSS with MGF1 over the same hash and a salt as long as the hash (RFC 6931
    /// section 2.3.10 for XML-DSig).
    RsaPss(SchemeHash),
    /// ECDSA with the signature as the fixed-length concatenation r || s (XML-DSig 1.1
    /// section 6.4.3), not DER.
    EcdsaFixed(SchemeHash),
}

/// Verifies `signature` over `message` with the key in `signer_spki_der` under `scheme`:
/// RSA keys of 2048 to 8192 bits (an id-RSASSA-PSS key too for PSS), ECDSA on P-256 with
/// SHA-256 or on P-384 with SHA-384 (ring has no fixed-length verifier for the crossed pairs).
pub fn verify_with_scheme(
    message: &[u8],
    scheme: Scheme,
    signature: &[u8],
    signer_spki_der: &[u8],
) -> Result<(), SignatureError> {
    let spki = signer_key(signer_spki_der)?;
    let chosen: &'static dyn VerificationAlgorithm = match scheme {
        Scheme::RsaPkcs1(hash) => {
            require_rsa_key(&spki)?;
            match hash {
                SchemeHash::Sha256 => &signature::RSA_PKCS1_2048_8192_SHA256,
                SchemeHash::Sha384 => &signature::RSA_PKCS1_2048_8192_SHA384,
                SchemeHash::Sha512 => &signature::RSA_PKCS1_2048_8192_SHA512,
            }
        }
        Scheme::RsaPss(hash) => {
            require_rsa_key_of(&spki, true)?;
            match hash {
                SchemeHash::Sha256 => &signature::RSA_PSS_2048_8192_SHA256,
                SchemeHash::Sha384 => &signature::RSA_PSS_2048_8192_SHA384,
                SchemeHash::Sha512 => &signature::RSA_PSS_2048_8192_SHA512,
            }
        }
        Scheme::EcdsaFixed(hash) => {
            let curve = ec_curve(&spki)?;
            match (curve.as_str(), hash) {
                (CURVE_P256, SchemeHash::Sha256) => &signature::ECDSA_P256_SHA256_FIXED,
                (CURVE_P384, SchemeHash::Sha384) => &signature::ECDSA_P384_SHA384_FIXED,
                (c, h) => {
                    return Err(SignatureError::UnsupportedAlgorithm(format!(
                        "ECDSA with {h:?} on curve {c}"
                    )));
                }
            }
        }
    };
    signature::UnparsedPublicKey::new(chosen, &spki.subject_public_key.data)
        .verify(message, signature)
        .map_err(|_| SignatureError::Invalid)
}

/// Same OID and same parameters (tag and content).
fn same_algorithm(a: &AlgorithmIdentifier<'_>, b: &AlgorithmIdentifier<'_>) -> bool {
    let params = |x: &AlgorithmIdentifier<'_>| {
        x.parameters
            .as_ref()
            .map(|p| (p.tag(), p.class(), p.data.to_vec()))
    };
    a.algorithm == b.algorithm && params(a) == params(b)
}

/// The ring verification algorithm the policy allows for this signature algorithm and key.
fn choose_algorithm(
    sig_alg: &AlgorithmIdentifier<'_>,
    spki: &SubjectPublicKeyInfo<'_>,
) -> Result<&'static dyn VerificationAlgorithm, SignatureError> {
    let oid = sig_alg.algorithm.to_id_string();
    match oid.as_str() {
        MD2_RSA | MD4_RSA | MD5_RSA | SHA1_RSA | OIW_MD5_RSA | OIW_MD5_RSA_SIG | OIW_SHA1_RSA
        | DSA_SHA1 | ECDSA_SHA1 => Err(SignatureError::WeakAlgorithm(oid)),
        SHA256_RSA | SHA384_RSA | SHA512_RSA => {
            require_null_or_absent_params(sig_alg, &oid)?;
            require_rsa_key(spki)?;
            Ok(match oid.as_str() {
                SHA256_RSA => &signature::RSA_PKCS1_2048_8192_SHA256,
                SHA384_RSA => &signature::RSA_PKCS1_2048_8192_SHA384,
                _ => &signature::RSA_PKCS1_2048_8192_SHA512,
            })
        }
        RSASSA_PSS => {
            let alg = pss_algorithm(sig_alg)?;
            require_rsa_key(spki)?;
            Ok(alg)
        }
        ECDSA_SHA256 | ECDSA_SHA384 => {
            require_null_or_absent_params(sig_alg, &oid)?;
            let curve = ec_curve(spki)?;
            match (curve.as_str(), oid.as_str()) {
                (CURVE_P256, ECDSA_SHA256) => Ok(&signature::ECDSA_P256_SHA256_ASN1),
                (CURVE_P256, _) => Ok(&signature::ECDSA_P256_SHA384_ASN1),
                (CURVE_P384, ECDSA_SHA256) => Ok(&signature::ECDSA_P384_SHA256_ASN1),
                (CURVE_P384, _) => Ok(&signature::ECDSA_P384_SHA384_ASN1),
                (c, _) if c.starts_with(BRAINPOOL_ARC) => {
                    Err(SignatureError::UnsupportedAlgorithm(format!(
                        "{oid} on brainpool curve {c} (not implemented by ring)"
                    )))
                }
                (c, _) => Err(SignatureError::UnsupportedAlgorithm(format!(
                    "{oid} on curve {c}"
                ))),
            }
        }
        ED25519 => {
            if sig_alg.parameters.is_some() {
                return Err(SignatureError::Malformed(
                    "Ed25519 AlgorithmIdentifier has parameters (RFC 8410 section 3)".to_owned(),
                ));
            }
            let key_alg = spki.algorithm.algorithm.to_id_string();
            if key_alg != ED25519 {
                return Err(SignatureError::BadIssuerKey(format!(
                    "Ed25519 signature but issuer key algorithm {key_alg}"
                )));
            }
            Ok(&signature::ED25519)
        }
        _ => Err(SignatureError::UnsupportedAlgorithm(oid)),
    }
}

/// RFC 4055 section 5 (RSA PKCS#1 v1.5) and RFC 5758 section 3.2 (ECDSA): the parameters are
/// NULL or absent respectively; both forms are met in practice, so either is accepted.
fn require_null_or_absent_params(
    sig_alg: &AlgorithmIdentifier<'_>,
    oid: &str,
) -> Result<(), SignatureError> {
    match &sig_alg.parameters {
        None => Ok(()),
        Some(p) if p.tag() == x509_parser::asn1_rs::Tag::Null && p.data.is_empty() => Ok(()),
        Some(_) => Err(SignatureError::Malformed(format!(
            "unexpected parameters for {oid}"
        ))),
    }
}

/// The issuer key must be an rsaEncryption key of 2048 to 8192 bits.
fn require_rsa_key(spki: &SubjectPublicKeyInfo<'_>) -> Result<(), SignatureError> {
    require_rsa_key_of(spki, false)
}

/// An RSA key of 2048 to 8192 bits: rsaEncryption, or also id-RSASSA-PSS (RFC 4055 section
/// 1.2, whose key is the same RSAPublicKey) when `allow_pss_key`. The parameters of an
/// id-RSASSA-PSS key, which may restrict the hash, are not read: the signature's own
/// algorithm is already restricted by the policy.
fn require_rsa_key_of(
    spki: &SubjectPublicKeyInfo<'_>,
    allow_pss_key: bool,
) -> Result<(), SignatureError> {
    let key_alg = spki.algorithm.algorithm.to_id_string();
    let modulus = if key_alg == RSA_ENCRYPTION {
        match spki.parsed() {
            Ok(PublicKey::RSA(rsa)) => rsa.modulus,
            Ok(_) => {
                return Err(SignatureError::BadIssuerKey(
                    "rsaEncryption key that is not an RSAPublicKey".to_owned(),
                ));
            }
            Err(e) => return Err(SignatureError::BadIssuerKey(e.to_string())),
        }
    } else if allow_pss_key && key_alg == RSASSA_PSS {
        match RSAPublicKey::from_der(&spki.subject_public_key.data) {
            Ok(([], rsa)) => rsa.modulus,
            _ => {
                return Err(SignatureError::BadIssuerKey(
                    "id-RSASSA-PSS key that is not an RSAPublicKey".to_owned(),
                ));
            }
        }
    } else {
        return Err(SignatureError::BadIssuerKey(format!(
            "RSA signature but issuer key algorithm {key_alg}"
        )));
    };
    let bits = bit_length(modulus);
    if bits < MIN_RSA_BITS {
        return Err(SignatureError::WeakIssuerKey { bits });
    }
    if bits > MAX_RSA_BITS {
        return Err(SignatureError::UnsupportedAlgorithm(format!(
            "RSA key of {bits} bits (ring verifies up to {MAX_RSA_BITS})"
        )));
    }
    Ok(())
}

/// Curves a subscriber key may be on: the NIST curves of ETSI TS 119 312 and the brainpool
/// curves some QTSPs issue on (RFC 5639). P-192 and smaller are refused (TS 119 312 lists
/// none below 256 bits).
const SUBSCRIBER_CURVES: &[(&str, &str)] = &[
    (CURVE_P256, "P-256"),
    (CURVE_P384, "P-384"),
    ("1.3.132.0.35", "P-521"),
    ("1.3.36.3.3.2.8.1.1.7", "brainpoolP256r1"),
    ("1.3.36.3.3.2.8.1.1.11", "brainpoolP384r1"),
    ("1.3.36.3.3.2.8.1.1.13", "brainpoolP512r1"),
];

/// Why a certificate's own public key is not acceptable (a PSP's, or an issuer's on a
/// certification path), or `None` when it is: RSA of at least 2048 bits in whole bytes, EC on a curve of
/// [`SUBSCRIBER_CURVES`], or Ed25519 (ETSI TS 119 312; rustls-webpki and x509-limbo's
/// `webpki::forbidden-*` cases refuse the same weak keys). DSA, which no QTSP issues, and
/// every other algorithm are refused.
pub(crate) fn key_problem(spki_der: &[u8]) -> Option<String> {
    let spki = match SubjectPublicKeyInfo::from_der(spki_der) {
        Ok(([], spki)) => spki,
        Ok(_) => return Some("trailing bytes after the SubjectPublicKeyInfo".to_owned()),
        Err(e) => return Some(format!("unreadable SubjectPublicKeyInfo: {e}")),
    };
    let key_alg = spki.algorithm.algorithm.to_id_string();
    match key_alg.as_str() {
        RSA_ENCRYPTION => {
            let modulus = match spki.parsed() {
                Ok(PublicKey::RSA(rsa)) => rsa.modulus,
                _ => return Some("rsaEncryption key that is not an RSAPublicKey".to_owned()),
            };
            let bits = bit_length(modulus);
            if bits < MIN_RSA_BITS {
                Some(format!(
                    "RSA key of {bits} bits is below the {MIN_RSA_BITS}-bit minimum"
                ))
            } else if !bits.is_multiple_of(8) {
                Some(format!(
                    "RSA key of {bits} bits is not a whole number of bytes"
                ))
            } else {
                None
            }
        }
        EC_PUBLIC_KEY => match ec_curve(&spki) {
            Ok(curve) if SUBSCRIBER_CURVES.iter().any(|(oid, _)| *oid == curve) => None,
            Ok(curve) => Some(format!("EC key on curve {curve}, which is not accepted")),
            Err(e) => Some(e.to_string()),
        },
        ED25519 => None,
        other => Some(format!("public key algorithm {other} is not accepted")),
    }
}

/// Bits in a big-endian unsigned integer, leading zeros ignored.
fn bit_length(be: &[u8]) -> usize {
    let Some(pos) = be.iter().position(|&b| b != 0) else {
        return 0;
    };
    let rest = be.len() - pos;
    (rest - 1) * 8 + (8 - be[pos].leading_zeros() as usize)
}

/// The named curve of an id-ecPublicKey issuer key, dotted.
fn ec_curve(spki: &SubjectPublicKeyInfo<'_>) -> Result<String, SignatureError> {
    let key_alg = spki.algorithm.algorithm.to_id_string();
    if key_alg != EC_PUBLIC_KEY {
        return Err(SignatureError::BadIssuerKey(format!(
            "ECDSA signature but issuer key algorithm {key_alg}"
        )));
    }
    spki.algorithm
        .parameters
        .as_ref()
        .and_then(|p| p.as_oid().ok())
        .map(|oid| oid.to_id_string())
        .ok_or_else(|| SignatureError::BadIssuerKey("EC key without a named curve".to_owned()))
}

/// RFC 4055 section 3.1:
///
/// ```text
/// RSASSA-PSS-params ::= SEQUENCE {
///     hashAlgorithm      [0] HashAlgorithm DEFAULT sha1Identifier,
///     maskGenAlgorithm   [1] MaskGenAlgorithm DEFAULT mgf1SHA1Identifier,
///     saltLength         [2] INTEGER DEFAULT 20,
///     trailerField       [3] INTEGER DEFAULT 1 }
/// ```
///
/// ring verifies PSS with MGF1 over the message hash and a salt as long as the hash; other
/// combinations are unsupported, and SHA-1 (the default) is weak.
fn pss_algorithm(
    sig_alg: &AlgorithmIdentifier<'_>,
) -> Result<&'static dyn VerificationAlgorithm, SignatureError> {
    let Some(params) = sig_alg.parameters.as_ref() else {
        // All defaults: SHA-1.
        return Err(SignatureError::WeakAlgorithm(format!(
            "{RSASSA_PSS} with default (SHA-1) parameters"
        )));
    };
    let params = RsaSsaPssParams::try_from(params)
        .map_err(|e| SignatureError::Malformed(format!("RSASSA-PSS parameters: {e}")))?;
    let hash = params.hash_algorithm_oid().to_id_string();
    let mgf = params
        .mask_gen_algorithm()
        .map_err(|e| SignatureError::Malformed(format!("RSASSA-PSS maskGenAlgorithm: {e}")))?;
    let (mgf_oid, mgf_hash) = (mgf.mgf.to_id_string(), mgf.hash.to_id_string());
    if hash == SHA1 || mgf_hash == SHA1 {
        return Err(SignatureError::WeakAlgorithm(format!(
            "{RSASSA_PSS} with SHA-1"
        )));
    }
    let (alg, hash_len): (&'static dyn VerificationAlgorithm, u32) = match hash.as_str() {
        SHA256 => (&signature::RSA_PSS_2048_8192_SHA256, 32),
        SHA384 => (&signature::RSA_PSS_2048_8192_SHA384, 48),
        SHA512 => (&signature::RSA_PSS_2048_8192_SHA512, 64),
        other => {
            return Err(SignatureError::UnsupportedAlgorithm(format!(
                "{RSASSA_PSS} with hash {other}"
            )));
        }
    };
    if mgf_oid != MGF1 || mgf_hash != hash {
        return Err(SignatureError::UnsupportedAlgorithm(format!(
            "{RSASSA_PSS} with mask generation {mgf_oid} over {mgf_hash}"
        )));
    }
    if params.salt_length() != hash_len || params.trailer_field() != 1 {
        return Err(SignatureError::UnsupportedAlgorithm(format!(
            "{RSASSA_PSS} with salt length {} and trailer field {}",
            params.salt_length(),
            params.trailer_field()
        )));
    }
    Ok(alg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use psp_testkit::der::tlv;

    const SHA256_OID: [u8; 11] = [
        0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01,
    ];
    const SHA1_OID: [u8; 7] = [0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a];

    /// AlgorithmIdentifier { id-RSASSA-PSS, RSASSA-PSS-params } with the given hash (as an
    /// encoded OID), MGF1 hash and salt length.
    fn pss(hash: &[u8], mgf_hash: &[u8], salt: u8) -> Vec<u8> {
        let hash_alg = |h: &[u8]| tlv(0x30, &[h, &[0x05, 0x00][..]].concat());
        let mgf1_oid = [
            0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x08,
        ];
        let params = tlv(
            0x30,
            &[
                tlv(0xa0, &hash_alg(hash)),
                tlv(
                    0xa1,
                    &tlv(0x30, &[&mgf1_oid[..], &hash_alg(mgf_hash)].concat()),
                ),
                tlv(0xa2, &[0x02, 0x01, salt]),
            ]
            .concat(),
        );
        let pss_oid = [
            0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a,
        ];
        tlv(0x30, &[&pss_oid[..], &params].concat())
    }

    fn judge(alg_der: &[u8]) -> Result<(), SignatureError> {
        let (rest, alg) = AlgorithmIdentifier::from_der(alg_der).expect("AlgorithmIdentifier");
        assert!(rest.is_empty());
        pss_algorithm(&alg).map(|_| ())
    }

    #[test]
    fn rsa_pss_with_sha256_mgf1_sha256_and_a_32_byte_salt_is_accepted() {
        assert_eq!(judge(&pss(&SHA256_OID, &SHA256_OID, 32)), Ok(()));
    }

    #[test]
    fn rsa_pss_with_default_or_sha1_parameters_is_weak() {
        let bare = [
            0x30, 0x0b, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a,
        ];
        assert!(matches!(
            judge(&bare),
            Err(SignatureError::WeakAlgorithm(_))
        ));
        assert!(matches!(
            judge(&pss(&SHA1_OID, &SHA1_OID, 20)),
            Err(SignatureError::WeakAlgorithm(_))
        ));
        assert!(matches!(
            judge(&pss(&SHA256_OID, &SHA1_OID, 32)),
            Err(SignatureError::WeakAlgorithm(_))
        ));
    }

    #[test]
    fn rsa_pss_with_a_salt_ring_cannot_check_is_unsupported() {
        assert!(matches!(
            judge(&pss(&SHA256_OID, &SHA256_OID, 20)),
            Err(SignatureError::UnsupportedAlgorithm(_))
        ));
    }

    #[test]
    fn bit_length_ignores_leading_zero_octets_and_bits() {
        assert_eq!(bit_length(&[]), 0);
        assert_eq!(bit_length(&[0, 0]), 0);
        assert_eq!(bit_length(&[0x00, 0x80, 0x00]), 16);
        assert_eq!(bit_length(&[0x01, 0xff]), 9);
    }
}
