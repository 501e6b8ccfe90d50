//! Signing keys (PKCS#8 PEM) and public keys (SPKI PEM, raw bytes), on ring.
//!
//! ring parses PKCS#8 itself but its refusal says only "wrong algorithm"; the few lines of
//! DER reading here find the algorithm (and curve) first, so an operator who points the
//! gateway at an RSA or P-384 key is told so.

use std::path::Path;

use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _};

use super::Alg;
use crate::bounded;

/// A PEM key file is a few hundred bytes; 64 KiB leaves room for comments and a chain
/// someone pasted by mistake, and bounds what a wrong path (a log file) costs.
const MAX_PEM_FILE_BYTES: u64 = 64 * 1024;

/// DER of the SubjectPublicKeyInfo of a P-256 key, up to the 65-byte uncompressed point
/// (RFC 5480 §2: id-ecPublicKey, namedCurve secp256r1, BIT STRING with no unused bits).
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// DER of the SubjectPublicKeyInfo of an Ed25519 key, up to the 32 key bytes (RFC 8410 §4).
const ED25519_SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

// Object identifiers (their DER contents) that name what a key is.
const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_ED25519: &[u8] = &[0x2b, 0x65, 0x70];

/// Why a key was not loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The file could not be read.
    #[error("reading the key file {path}: {reason}")]
    Io { path: String, reason: String },
    /// No `-----BEGIN ...-----` line.
    #[error("no PEM block (-----BEGIN ...-----) found")]
    NotPem,
    /// A BEGIN line without its END line.
    #[error("the PEM block `{label}` has no `-----END {label}-----` line")]
    UnterminatedPem { label: String },
    /// The PEM body is not base64.
    #[error("the body of the PEM block `{label}` is not base64")]
    PemBase64 { label: String },
    /// A password-protected key; the gateway holds no passwords.
    #[error(
        "the key is encrypted (`{label}`): store it unencrypted, e.g. `openssl pkcs8 -topk8 -nocrypt`"
    )]
    Encrypted { label: String },
    /// A private key in a format other than PKCS#8 (SEC 1 `EC PRIVATE KEY`, PKCS#1, OpenSSH).
    #[error(
        "a `{label}` PEM block, not a PKCS#8 `PRIVATE KEY`: convert it with `openssl pkcs8 -topk8 -nocrypt`"
    )]
    NotPkcs8 { label: String },
    /// A PEM block of another kind (a certificate, a public key where a private one belongs).
    #[error("a `{found}` PEM block where a `{expected}` was expected")]
    WrongPemLabel {
        found: String,
        expected: &'static str,
    },
    /// The DER does not have the structure its label promises.
    #[error("the DER is not a well-formed {what}")]
    MalformedDer { what: &'static str },
    /// A well-formed key of an algorithm or curve evidence is not signed with.
    #[error("the key is {found}; only ECDSA P-256 (ES256) and Ed25519 (EdDSA) are supported")]
    UnsupportedAlgorithm { found: String },
    /// ring refused the key (an invalid scalar, a public key that does not match).
    #[error("the {alg} key was refused: {reason}")]
    Rejected { alg: Alg, reason: String },
    /// Raw public key bytes of the wrong length or form.
    #[error("an {alg} public key must be {expected}, not {len} bytes")]
    PublicKeyForm {
        alg: Alg,
        expected: &'static str,
        len: usize,
    },
}

/// A private key that signs evidence: ECDSA P-256 or Ed25519, from PKCS#8.
pub struct SigningKey {
    pair: Pair,
    public: PublicKey,
    rng: SystemRandom,
}

/// ECDSA needs two ring key pairs from the same PKCS#8: JWS wants the fixed r||s form
/// (RFC 7518 §3.4), signed notes the ASN.1 DER form (as transparency-dev/witness).
#[allow(
    clippy::large_enum_variant,
    reason = "a signing key is made once at start-up and then borrowed; boxing saves nothing"
)]
enum Pair {
    Es256 {
        fixed: EcdsaKeyPair,
        asn1: EcdsaKeyPair,
    },
    EdDsa(Ed25519KeyPair),
}

impl std::fmt::Debug for SigningKey {
    /// The kid only: a private key never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("alg", &self.public.alg)
            .field("kid", &self.public.kid())
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// Reads a PKCS#8 PEM key file (see [`SigningKey::from_pem`]).
    pub fn from_pem_file(path: &Path) -> Result<SigningKey, KeyError> {
        SigningKey::from_pem(&read_pem_file(path)?)
    }

    /// Parses the first PEM block of `text`, which must be an unencrypted PKCS#8
    /// `PRIVATE KEY` holding a P-256 or Ed25519 key.
    pub fn from_pem(text: &str) -> Result<SigningKey, KeyError> {
        let block = first_pem_block(text)?;
        match block.label.as_str() {
            "PRIVATE KEY" => SigningKey::from_pkcs8_der(&block.der),
            "ENCRYPTED PRIVATE KEY" => Err(KeyError::Encrypted { label: block.label }),
            label if label.ends_with("PRIVATE KEY") => {
                Err(KeyError::NotPkcs8 { label: block.label })
            }
            _ => Err(KeyError::WrongPemLabel {
                found: block.label,
                expected: "PRIVATE KEY",
            }),
        }
    }

    /// Parses a DER PKCS#8 PrivateKeyInfo (RFC 5958 §2).
    pub fn from_pkcs8_der(der: &[u8]) -> Result<SigningKey, KeyError> {
        let alg = pkcs8_alg(der)?;
        let rng = SystemRandom::new();
        let rejected = |e: ring::error::KeyRejected| KeyError::Rejected {
            alg,
            reason: e.to_string(),
        };
        let pair = match alg {
            Alg::Es256 => Pair::Es256 {
                fixed: EcdsaKeyPair::from_pkcs8(
                    &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                    der,
                    &rng,
                )
                .map_err(rejected)?,
                asn1: EcdsaKeyPair::from_pkcs8(
                    &signature::ECDSA_P256_SHA256_ASN1_SIGNING,
                    der,
                    &rng,
                )
                .map_err(rejected)?,
            },
            // `maybe_unchecked` accepts PKCS#8 v1 (no public key inside), which is what
            // OpenSSL and Python's cryptography write; a v2 key's public key is still checked.
            Alg::EdDsa => {
                Pair::EdDsa(Ed25519KeyPair::from_pkcs8_maybe_unchecked(der).map_err(rejected)?)
            }
        };
        let public_bytes = match &pair {
            Pair::Es256 { fixed, .. } => fixed.public_key().as_ref().to_vec(),
            Pair::EdDsa(pair) => pair.public_key().as_ref().to_vec(),
        };
        let public = PublicKey::from_raw(alg, &public_bytes)?;
        Ok(SigningKey { pair, public, rng })
    }

    /// A new key of `alg` as PKCS#8 PEM, for the sandbox and the tests.
    pub fn generate_pem(alg: Alg) -> String {
        let rng = SystemRandom::new();
        // ring fails here only when the operating system has no randomness to give, when
        // no key could be made at all.
        let der = match alg {
            Alg::Es256 => {
                EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
                    .expect("the system random source failed")
            }
            Alg::EdDsa => {
                Ed25519KeyPair::generate_pkcs8(&rng).expect("the system random source failed")
            }
        };
        pem_encode("PRIVATE KEY", der.as_ref())
    }

    /// The key's algorithm.
    pub fn alg(&self) -> Alg {
        self.public.alg
    }

    /// The RFC 7638 JWK thumbprint, the `kid` of everything this key signs.
    pub fn kid(&self) -> String {
        self.public.kid()
    }

    /// The public half.
    pub fn public(&self) -> PublicKey {
        self.public.clone()
    }

    /// A JWS signature over `msg`: ES256 as the fixed 64-byte r||s (RFC 7518 §3.4), EdDSA as
    /// the 64-byte Ed25519 signature (RFC 8037 §3.1).
    pub fn sign(&self, msg: &[u8]) -> Vec<u8> {
        match &self.pair {
            Pair::Es256 { fixed, .. } => ecdsa_sign(fixed, &self.rng, msg),
            Pair::EdDsa(pair) => pair.sign(msg).as_ref().to_vec(),
        }
    }

    /// A signed-note signature over `msg`: ECDSA as ASN.1 DER (type 0x02, as
    /// transparency-dev/witness), Ed25519 as the raw 64 bytes (type 0x01).
    pub(super) fn sign_note(&self, msg: &[u8]) -> Vec<u8> {
        match &self.pair {
            Pair::Es256 { asn1, .. } => ecdsa_sign(asn1, &self.rng, msg),
            Pair::EdDsa(pair) => pair.sign(msg).as_ref().to_vec(),
        }
    }
}

fn ecdsa_sign(pair: &EcdsaKeyPair, rng: &SystemRandom, msg: &[u8]) -> Vec<u8> {
    // ring's ECDSA signing fails only when the system random source does (the nonce).
    pair.sign(rng, msg)
        .expect("the system random source failed")
        .as_ref()
        .to_vec()
}

/// A public key: its algorithm and its raw bytes (the 65-byte uncompressed P-256 point, or
/// the 32-byte Ed25519 key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey {
    alg: Alg,
    bytes: Vec<u8>,
    /// When the key was retired (seconds since the epoch), for a previous key: nothing it
    /// signed after that instant is accepted ([`PublicKey::signed_in_lifetime`]).
    retired: Option<i64>,
}

/// How far ahead of this machine's clock a signature's time may be (the signer's clock may
/// run a little fast); past that, a signature dated in the future is refused.
pub const MAX_CLOCK_SKEW_SECS: i64 = 300;

/// Why a signature's time is outside its key's life.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LifetimeError {
    /// Signed (or dated) after the key was retired: a retired key signs nothing more.
    #[error(
        "it is dated {at}, after key `{kid}` was retired at {retired}: a retired key's signatures from after its retirement are not accepted"
    )]
    AfterRetirement {
        kid: String,
        retired: String,
        at: String,
    },
    /// Dated further in the future than the allowed clock skew.
    #[error(
        "it is dated {at}, more than {MAX_CLOCK_SKEW_SECS} s after this machine's clock ({now}): a signature from the future is not accepted"
    )]
    InTheFuture { at: String, now: String },
    /// A retired key's signature that says no time: its place in the key's life is unknown.
    #[error(
        "it names no time, and key `{kid}` is retired: its place in the key's life cannot be checked"
    )]
    Undated { kid: String },
}

/// `t` (seconds since the epoch) as RFC 3339, for messages and the JWKS.
pub fn rfc3339_secs(t: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(t)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| t.to_string())
}

impl PublicKey {
    /// A key from its raw bytes; the length (and, for P-256, the uncompressed form) is
    /// checked here, the point itself by ring when a signature is verified.
    pub fn from_raw(alg: Alg, bytes: &[u8]) -> Result<PublicKey, KeyError> {
        let ok = match alg {
            Alg::Es256 => bytes.len() == 65 && bytes[0] == 0x04,
            Alg::EdDsa => bytes.len() == 32,
        };
        if !ok {
            return Err(KeyError::PublicKeyForm {
                alg,
                expected: match alg {
                    Alg::Es256 => "an uncompressed P-256 point (0x04, 65 bytes)",
                    Alg::EdDsa => "32 bytes",
                },
                len: bytes.len(),
            });
        }
        Ok(PublicKey {
            alg,
            bytes: bytes.to_vec(),
            retired: None,
        })
    }

    /// This key, retired at `at` (seconds since the epoch): a previous key of a rotation.
    pub fn retired_at(mut self, at: i64) -> PublicKey {
        self.retired = Some(at);
        self
    }

    /// When this key was retired, if it was.
    pub fn retired(&self) -> Option<i64> {
        self.retired
    }

    /// Whether a signature of this key dated `at` (seconds since the epoch; `None`: it says
    /// no time) is within the key's life, as of `now`: not after its retirement, not more
    /// than [`MAX_CLOCK_SKEW_SECS`] ahead of `now`.
    pub fn signed_in_lifetime(&self, at: Option<i64>, now: i64) -> Result<(), LifetimeError> {
        let Some(at) = at else {
            return match self.retired {
                Some(_) => Err(LifetimeError::Undated { kid: self.kid() }),
                None => Ok(()),
            };
        };
        if let Some(retired) = self.retired
            && at > retired
        {
            return Err(LifetimeError::AfterRetirement {
                kid: self.kid(),
                retired: rfc3339_secs(retired),
                at: rfc3339_secs(at),
            });
        }
        if at > now.saturating_add(MAX_CLOCK_SKEW_SECS) {
            return Err(LifetimeError::InTheFuture {
                at: rfc3339_secs(at),
                now: rfc3339_secs(now),
            });
        }
        Ok(())
    }

    /// Reads an SPKI `PUBLIC KEY` PEM file: a retired key that still verifies.
    pub fn from_pem_file(path: &Path) -> Result<PublicKey, KeyError> {
        PublicKey::from_pem(&read_pem_file(path)?)
    }

    /// Parses the first PEM block of `text`, which must be an SPKI `PUBLIC KEY`.
    pub fn from_pem(text: &str) -> Result<PublicKey, KeyError> {
        let block = first_pem_block(text)?;
        if block.label != "PUBLIC KEY" {
            return Err(KeyError::WrongPemLabel {
                found: block.label,
                expected: "PUBLIC KEY",
            });
        }
        PublicKey::from_spki_der(&block.der)
    }

    /// Parses a DER SubjectPublicKeyInfo (RFC 5280 §4.1.2.7).
    pub fn from_spki_der(der: &[u8]) -> Result<PublicKey, KeyError> {
        const WHAT: &str = "SubjectPublicKeyInfo";
        let malformed = || KeyError::MalformedDer { what: WHAT };
        let (spki, rest) = der_take(der, 0x30).ok_or_else(malformed)?;
        if !rest.is_empty() {
            return Err(malformed());
        }
        let (algorithm, rest) = der_take(spki, 0x30).ok_or_else(malformed)?;
        let alg = algorithm_identifier(algorithm, WHAT)?;
        let (bits, rest) = der_take(rest, 0x03).ok_or_else(malformed)?;
        if !rest.is_empty() {
            return Err(malformed());
        }
        match bits.split_first() {
            Some((0, key)) => PublicKey::from_raw(alg, key),
            _ => Err(malformed()),
        }
    }

    /// The DER SubjectPublicKeyInfo: the input of a signed note's ECDSA key ID.
    pub fn to_spki_der(&self) -> Vec<u8> {
        let prefix: &[u8] = match self.alg {
            Alg::Es256 => &P256_SPKI_PREFIX,
            Alg::EdDsa => &ED25519_SPKI_PREFIX,
        };
        [prefix, &self.bytes].concat()
    }

    /// The key as SPKI PEM, for an auditor's tools (`openssl`, Python's cryptography).
    pub fn to_pem(&self) -> String {
        pem_encode("PUBLIC KEY", &self.to_spki_der())
    }

    /// The algorithm.
    pub fn alg(&self) -> Alg {
        self.alg
    }

    /// The raw key bytes.
    pub fn raw(&self) -> &[u8] {
        &self.bytes
    }

    /// Verifies a JWS signature (ES256 fixed r||s, or Ed25519) over `msg`.
    pub fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        let algorithm: &dyn signature::VerificationAlgorithm = match self.alg {
            Alg::Es256 => &signature::ECDSA_P256_SHA256_FIXED,
            Alg::EdDsa => &signature::ED25519,
        };
        signature::UnparsedPublicKey::new(algorithm, &self.bytes)
            .verify(msg, sig)
            .is_ok()
    }

    /// Verifies a signed-note signature (ECDSA ASN.1 DER, or Ed25519) over `msg`.
    pub(super) fn verify_note(&self, msg: &[u8], sig: &[u8]) -> bool {
        let algorithm: &dyn signature::VerificationAlgorithm = match self.alg {
            Alg::Es256 => &signature::ECDSA_P256_SHA256_ASN1,
            Alg::EdDsa => &signature::ED25519,
        };
        signature::UnparsedPublicKey::new(algorithm, &self.bytes)
            .verify(msg, sig)
            .is_ok()
    }

    /// For P-256, the x and y coordinates (32 bytes each) of the uncompressed point.
    pub(super) fn ec_coordinates(&self) -> Option<(&[u8], &[u8])> {
        match self.alg {
            Alg::Es256 => Some((&self.bytes[1..33], &self.bytes[33..65])),
            Alg::EdDsa => None,
        }
    }
}

fn read_pem_file(path: &Path) -> Result<String, KeyError> {
    let io = |reason: String| KeyError::Io {
        path: path.display().to_string(),
        reason,
    };
    let bytes = bounded::read_file(path, MAX_PEM_FILE_BYTES, "a PEM key file")
        .map_err(|e| io(e.to_string()))?;
    String::from_utf8(bytes).map_err(|_| io("not UTF-8 text".to_owned()))
}

struct PemBlock {
    label: String,
    der: Vec<u8>,
}

/// The first PEM block of `text` (RFC 7468 §2). Text before it is allowed (OpenSSL writes
/// "Bag Attributes" there); RFC 1421 headers (`Proc-Type: 4,ENCRYPTED`) mean a legacy
/// encrypted key.
fn first_pem_block(text: &str) -> Result<PemBlock, KeyError> {
    let mut lines = text.lines().map(str::trim);
    let label = lines
        .by_ref()
        .find_map(|line| line.strip_prefix("-----BEGIN ")?.strip_suffix("-----"))
        .ok_or(KeyError::NotPem)?
        .to_owned();
    let end = format!("-----END {label}-----");
    let mut body = String::new();
    let mut terminated = false;
    for line in lines {
        if line == end {
            terminated = true;
            break;
        }
        if line.starts_with("Proc-Type:") && line.contains("ENCRYPTED") {
            return Err(KeyError::Encrypted { label });
        }
        body.push_str(line);
    }
    if !terminated {
        return Err(KeyError::UnterminatedPem { label });
    }
    use base64::Engine as _;
    let der = base64::engine::general_purpose::STANDARD
        .decode(body.as_bytes())
        .map_err(|_| KeyError::PemBase64 {
            label: label.clone(),
        })?;
    Ok(PemBlock { label, der })
}

fn pem_encode(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    // RFC 7468 §2: lines of 64 characters. base64 is ASCII, so every chunk is UTF-8.
    for chunk in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The algorithm of a PKCS#8 PrivateKeyInfo (RFC 5958 §2):
///
/// ```text
/// OneAsymmetricKey ::= SEQUENCE {
///   version                   Version,
///   privateKeyAlgorithm       PrivateKeyAlgorithmIdentifier,
///   privateKey                PrivateKey, ... }
/// ```
fn pkcs8_alg(der: &[u8]) -> Result<Alg, KeyError> {
    const WHAT: &str = "PKCS#8 PrivateKeyInfo";
    let malformed = || KeyError::MalformedDer { what: WHAT };
    let (info, _) = der_take(der, 0x30).ok_or_else(malformed)?;
    let (_version, rest) = der_take(info, 0x02).ok_or_else(malformed)?;
    let (algorithm, _) = der_take(rest, 0x30).ok_or_else(malformed)?;
    algorithm_identifier(algorithm, WHAT)
}

/// Our algorithm for an AlgorithmIdentifier's contents (RFC 5480 §2.1.1, RFC 8410 §3), or
/// the refusal that names what it is.
fn algorithm_identifier(contents: &[u8], what: &'static str) -> Result<Alg, KeyError> {
    let malformed = || KeyError::MalformedDer { what };
    let (oid, params) = der_take(contents, 0x06).ok_or_else(malformed)?;
    if oid == OID_EC_PUBLIC_KEY {
        let (curve, _) = der_take(params, 0x06).ok_or_else(malformed)?;
        if curve == OID_P256 {
            return Ok(Alg::Es256);
        }
        return Err(KeyError::UnsupportedAlgorithm {
            found: format!("an EC key on {}", curve_name(curve)),
        });
    }
    if oid == OID_ED25519 {
        return Ok(Alg::EdDsa);
    }
    Err(KeyError::UnsupportedAlgorithm {
        found: algorithm_name(oid),
    })
}

fn curve_name(oid: &[u8]) -> String {
    match oid {
        [0x2b, 0x81, 0x04, 0x00, 0x22] => "P-384 (secp384r1)".to_owned(),
        [0x2b, 0x81, 0x04, 0x00, 0x23] => "P-521 (secp521r1)".to_owned(),
        [0x2b, 0x81, 0x04, 0x00, 0x0a] => "secp256k1".to_owned(),
        _ => format!("the curve with OID {}", oid_text(oid)),
    }
}

fn algorithm_name(oid: &[u8]) -> String {
    match oid {
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01] => "an RSA key".to_owned(),
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a] => "an RSA-PSS key".to_owned(),
        [0x2a, 0x86, 0x48, 0xce, 0x38, 0x04, 0x01] => "a DSA key".to_owned(),
        [0x2b, 0x65, 0x71] => "an Ed448 key".to_owned(),
        [0x2b, 0x65, 0x6e] => "an X25519 (key agreement) key".to_owned(),
        [0x2b, 0x65, 0x6f] => "an X448 (key agreement) key".to_owned(),
        _ => format!("a key of algorithm OID {}", oid_text(oid)),
    }
}

/// Dotted text of an OID's DER contents (X.690 §8.19), for error messages.
fn oid_text(oid: &[u8]) -> String {
    let mut arcs: Vec<u64> = Vec::new();
    let mut value: u64 = 0;
    for &b in oid {
        value = (value << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (value / 40).min(2);
                arcs.push(first);
                arcs.push(value - first * 40);
            } else {
                arcs.push(value);
            }
            value = 0;
        }
    }
    arcs.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

/// One DER TLV of `tag` at the front of `input`: its contents and what follows. Definite
/// lengths of up to two length bytes only (keys are small; anything else is not a key).
fn der_take(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&found, rest) = input.split_first()?;
    if found != tag {
        return None;
    }
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = match first {
        0..=0x7f => (usize::from(first), rest),
        0x81 => {
            let (&b, rest) = rest.split_first()?;
            (usize::from(b), rest)
        }
        0x82 => {
            let (b, rest) = rest.split_at_checked(2)?;
            (usize::from(b[0]) << 8 | usize::from(b[1]), rest)
        }
        _ => return None,
    };
    rest.split_at_checked(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key of `alg_oid` (with `params`) wrapped as PKCS#8, with a dummy private key.
    fn pkcs8_of(algorithm: &[u8]) -> Vec<u8> {
        let mut info = vec![0x02, 0x01, 0x00, 0x30, algorithm.len() as u8];
        info.extend_from_slice(algorithm);
        info.extend_from_slice(&[0x04, 0x02, 0x04, 0x00]);
        let mut der = vec![0x30, info.len() as u8];
        der.extend_from_slice(&info);
        der
    }

    fn refusal(pem: &str) -> KeyError {
        SigningKey::from_pem(pem).expect_err("the key must be refused")
    }

    #[test]
    fn generated_keys_of_both_algorithms_load_and_sign() {
        for alg in [Alg::Es256, Alg::EdDsa] {
            let key = SigningKey::from_pem(&SigningKey::generate_pem(alg))
                .expect("a generated key loads");
            assert_eq!(key.alg(), alg);
            let sig = key.sign(b"evidence");
            assert_eq!(sig.len(), 64, "{alg}: JWS signatures are 64 bytes");
            assert!(key.public().verify(b"evidence", &sig));
            assert!(!key.public().verify(b"evidencf", &sig));
            let note_sig = key.sign_note(b"evidence");
            assert!(key.public().verify_note(b"evidence", &note_sig));
            if alg == Alg::Es256 {
                assert_eq!(
                    note_sig[0], 0x30,
                    "an ECDSA note signature is a DER SEQUENCE"
                );
                assert!(!key.public().verify(b"evidence", &note_sig));
            }
        }
    }

    #[test]
    fn public_keys_round_trip_through_spki_pem() {
        for alg in [Alg::Es256, Alg::EdDsa] {
            let public = SigningKey::from_pem(&SigningKey::generate_pem(alg))
                .unwrap()
                .public();
            assert_eq!(PublicKey::from_pem(&public.to_pem()), Ok(public));
        }
    }

    #[test]
    fn an_openssl_style_ed25519_pkcs8_v1_key_loads() {
        // RFC 8410 §10.3's example private key (PKCS#8 v1, no public key inside).
        let pem = "-----BEGIN PRIVATE KEY-----\n\
                   MC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC\n\
                   -----END PRIVATE KEY-----\n";
        let key = SigningKey::from_pem(pem).expect("a v1 Ed25519 key loads");
        // RFC 8410 §10.1's public key is the one that goes with it.
        let public = PublicKey::from_pem(
            "-----BEGIN PUBLIC KEY-----\n\
             MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n\
             -----END PUBLIC KEY-----\n",
        )
        .unwrap();
        assert_eq!(key.public(), public);
    }

    // Throwaway keys written by `openssl genpkey` (OpenSSL 3.0), then `openssl ec` (SEC 1),
    // `openssl pkcs8 -topk8` (encrypted) and `openssl pkey -pubout`: the files an operator
    // will actually hand the gateway.
    const OPENSSL_P256: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgcPOG8I31gg9nmkf7
PCmnGwGHI9HOixcnIFPzWcMVmTuhRANCAAQlCWW0cx7iDuDuoIQWLabTYkLDq1vD
R9l/35CPMeTsUD6NczG6/TxgGttsVCF5DPKYJ26nc4Z2oab0CWA/iDPD
-----END PRIVATE KEY-----
";
    const OPENSSL_P256_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEJQlltHMe4g7g7qCEFi2m02JCw6tb
w0fZf9+QjzHk7FA+jXMxuv08YBrbbFQheQzymCdup3OGdqGm9AlgP4gzww==
-----END PUBLIC KEY-----
";
    const OPENSSL_P256_SEC1: &str = "-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIHDzhvCN9YIPZ5pH+zwppxsBhyPRzosXJyBT81nDFZk7oAoGCCqGSM49
AwEHoUQDQgAEJQlltHMe4g7g7qCEFi2m02JCw6tbw0fZf9+QjzHk7FA+jXMxuv08
YBrbbFQheQzymCdup3OGdqGm9AlgP4gzww==
-----END EC PRIVATE KEY-----
";
    const OPENSSL_P256_ENCRYPTED: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----
MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAgvGJoY+y4+4AICCAAw
DAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEDI9oWKHG0f+7rUOuc6xh04EgZCg
BRkJHn1HxoAPjCEvBYUEis/UsStRvL1dbsWsRSmZmN6brbAWxM/6SUY72g+M5VzF
3bQYz3HnJeuQXKuoL7MXSDMcpqvqNk1NsP5oOQVPrbTTjDRCY9FeUv/gTYc+qXUT
4ADc0rOCRRdxmwMEgMwG8H2z6sTvjxS3YtX5jNzfa2n+1IkSJh6pjEUzy1JC57c=
-----END ENCRYPTED PRIVATE KEY-----
";
    const OPENSSL_P384: &str = "-----BEGIN PRIVATE KEY-----
MIG2AgEAMBAGByqGSM49AgEGBSuBBAAiBIGeMIGbAgEBBDBITKXVFT6MPJD+v6Fs
glvMj/zE/kFeKiRuctKskIFVmNtdhCjrH10JoLrDl6wXpnyhZANiAASsTGWkWDEp
cwAf3WTMSkiIav6Zlb+RPWuGn67RdZFQcatLEf0fNhuPEvVDBbxr7/3x0ILGVtiT
UtbE9b8A0ym7fBLbKQteNhhsnIG6TulfG4ukMiqShfLgU5AURw7RMT0=
-----END PRIVATE KEY-----
";
    const OPENSSL_ED25519: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIPvf3C875dTooRoTqoUJTNWeXI1/N0IqL77xZj0SrkmF
-----END PRIVATE KEY-----
";
    const OPENSSL_RSA_1024: &str = "-----BEGIN PRIVATE KEY-----
MIICdgIBADANBgkqhkiG9w0BAQEFAASCAmAwggJcAgEAAoGBAMWNiHwcv43xIUyE
AFCFabTKvTwacWVPuYErqXZKYmlmX8W7qrz9AoUPew8cjGgYztdCr835R+RTrA6p
/h1Ck6J7UqwtJyXWZzq0OiUeszQCQi5zy7g0rwJEUKZ++q5lpv+M/K0yHPsc6z+y
ncTRWJdcyZQgolWjb+VZMdPCszZtAgMBAAECgYBiBjuOEhm+jcKPHASn77sm2V6S
nzBbK/cJMCgTKQ+x6vlkvR0YT5bbfXX7ZpgI4x5nU5C2bJYOprH+SL1tuWZVXwRF
QuRvJYHEV8sLwAbeG0KYbzX60oYr5sD/XZeak5UNMXc+oPhWuT/yFFV9Ev3jgiML
hosGlXrKSxYkfz/CpQJBAOeRrMTYk4kYoj1ga32YAUTA3z5YLtvri+t/rJ9W9iBH
n5Jl+x4+jTZMjbBfMo8beoF83yBuGMhljHVInSqQpVsCQQDaZSIlj1Y2iHdXS4/9
9plGttHqGiFbdro5AUuhgOg2QriwHvT1i4Ey++iuCaBy4dBAOe8oKNx4h/e3HzZ5
HbXXAkBjRzgb2IJAF5iO2cSbvsxkbpAHSYUlcfG10DHwyjaRFkPaXvBvQgAGlIF2
aQnjArPdyexbGfh0Cd1S9wOymPrbAkEAuMIEIEhhxCKw6332ZACB7Svu7CCNBcas
hltNM2VNjdHmUsDttOj/NTWdw9ZLEcVtm1gntg7TbXiBnT7fo5j54wJAUiaNzDO5
vp8mFU9NHpdmGRk8QveN/VR2iCu5olM9oUDG61hLc9O8qrho+0eEv5K8YK0ZeRon
dyU8ZXQahGSkYg==
-----END PRIVATE KEY-----
";

    #[test]
    fn keys_written_by_openssl_load_or_are_refused_by_name() {
        let p256 = SigningKey::from_pem(OPENSSL_P256).expect("OpenSSL's P-256 PKCS#8 loads");
        assert_eq!(p256.alg(), Alg::Es256);
        assert_eq!(Ok(p256.public()), PublicKey::from_pem(OPENSSL_P256_PUBLIC));
        let ed =
            SigningKey::from_pem(OPENSSL_ED25519).expect("OpenSSL's Ed25519 PKCS#8 (v1) loads");
        assert_eq!(ed.alg(), Alg::EdDsa);
        assert_eq!(
            refusal(OPENSSL_P256_SEC1),
            KeyError::NotPkcs8 {
                label: "EC PRIVATE KEY".to_owned()
            }
        );
        assert_eq!(
            refusal(OPENSSL_P256_ENCRYPTED),
            KeyError::Encrypted {
                label: "ENCRYPTED PRIVATE KEY".to_owned()
            }
        );
        assert_eq!(
            refusal(OPENSSL_P384),
            KeyError::UnsupportedAlgorithm {
                found: "an EC key on P-384 (secp384r1)".to_owned()
            }
        );
        assert_eq!(
            refusal(OPENSSL_RSA_1024).to_string(),
            "the key is an RSA key; only ECDSA P-256 (ES256) and Ed25519 (EdDSA) are supported"
        );
    }

    #[test]
    fn text_around_the_pem_block_and_crlf_line_ends_are_accepted() {
        let pem = SigningKey::generate_pem(Alg::Es256);
        let wrapped = format!(
            "Bag Attributes\r\n    localKeyID: 01\r\n{}",
            pem.replace('\n', "\r\n")
        );
        assert!(SigningKey::from_pem(&wrapped).is_ok());
    }

    #[test]
    fn keys_of_other_algorithms_are_refused_by_name() {
        let rsa = [
            &[
                0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01,
            ][..],
            &[0x05, 0x00],
        ]
        .concat();
        let p384 = [
            &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01][..],
            &[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22],
        ]
        .concat();
        let ed448 = [0x06, 0x03, 0x2b, 0x65, 0x71];
        let unknown = [0x06, 0x03, 0x2a, 0x03, 0x04];
        for (algorithm, named) in [
            (&rsa[..], "an RSA key"),
            (&p384[..], "an EC key on P-384 (secp384r1)"),
            (&ed448[..], "an Ed448 key"),
            (&unknown[..], "a key of algorithm OID 1.2.3.4"),
        ] {
            let pem = pem_encode("PRIVATE KEY", &pkcs8_of(algorithm));
            let err = refusal(&pem);
            assert_eq!(
                err,
                KeyError::UnsupportedAlgorithm {
                    found: named.to_owned()
                }
            );
            assert!(err.to_string().contains(named), "{err}");
        }
    }

    #[test]
    fn encrypted_and_non_pkcs8_private_keys_are_refused_by_label() {
        let encrypted = pem_encode("ENCRYPTED PRIVATE KEY", &[0x30, 0x00]);
        assert!(
            matches!(refusal(&encrypted), KeyError::Encrypted { label } if label == "ENCRYPTED PRIVATE KEY")
        );
        let legacy = "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END EC PRIVATE KEY-----\n";
        assert!(matches!(refusal(legacy), KeyError::Encrypted { .. }));
        for label in ["EC PRIVATE KEY", "RSA PRIVATE KEY", "OPENSSH PRIVATE KEY"] {
            let pem = pem_encode(label, &[0x30, 0x00]);
            let err = refusal(&pem);
            assert_eq!(
                err,
                KeyError::NotPkcs8 {
                    label: label.to_owned()
                }
            );
            assert!(err.to_string().contains("openssl pkcs8"), "{err}");
        }
        let public = SigningKey::from_pem(&SigningKey::generate_pem(Alg::EdDsa))
            .unwrap()
            .public()
            .to_pem();
        assert_eq!(
            refusal(&public),
            KeyError::WrongPemLabel {
                found: "PUBLIC KEY".to_owned(),
                expected: "PRIVATE KEY"
            }
        );
    }

    #[test]
    fn garbage_is_refused_with_what_is_wrong_with_it() {
        assert_eq!(refusal("not a key at all"), KeyError::NotPem);
        assert_eq!(refusal(""), KeyError::NotPem);
        assert_eq!(
            refusal("-----BEGIN PRIVATE KEY-----\nMC4CAQAw\n"),
            KeyError::UnterminatedPem {
                label: "PRIVATE KEY".to_owned()
            }
        );
        assert_eq!(
            refusal("-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n"),
            KeyError::PemBase64 {
                label: "PRIVATE KEY".to_owned()
            }
        );
        assert_eq!(
            refusal(&pem_encode("PRIVATE KEY", b"garbage")),
            KeyError::MalformedDer {
                what: "PKCS#8 PrivateKeyInfo"
            }
        );
        // Truncated: the lengths promise more than there is.
        let der = pkcs8_of(&[0x06, 0x03, 0x2b, 0x65, 0x70]);
        assert!(matches!(
            refusal(&pem_encode("PRIVATE KEY", &der[..der.len() - 3])),
            KeyError::MalformedDer { .. }
        ));
        // Well-formed enough to name Ed25519, but not a key ring accepts.
        assert!(matches!(
            refusal(&pem_encode("PRIVATE KEY", &der)),
            KeyError::Rejected {
                alg: Alg::EdDsa,
                ..
            }
        ));
    }

    #[test]
    fn a_missing_key_file_is_named_in_the_error() {
        let err = SigningKey::from_pem_file(Path::new("/nonexistent/evidence.pem")).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/evidence.pem"),
            "{err}"
        );
    }

    #[test]
    fn public_keys_of_the_wrong_form_are_refused() {
        let mut compressed = vec![0x02];
        compressed.extend_from_slice(&[7; 32]);
        assert!(matches!(
            PublicKey::from_raw(Alg::Es256, &compressed),
            Err(KeyError::PublicKeyForm { len: 33, .. })
        ));
        assert!(PublicKey::from_raw(Alg::EdDsa, &[0; 31]).is_err());
        assert!(PublicKey::from_spki_der(&[0x30, 0x00]).is_err());
        let rsa_spki = [
            &[
                0x30, 0x0f, 0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01,
                0x01,
            ][..],
            &[0x05, 0x00],
        ]
        .concat();
        // The AlgorithmIdentifier is read before the (here missing) key bits.
        assert!(matches!(
            PublicKey::from_spki_der(&rsa_spki),
            Err(KeyError::UnsupportedAlgorithm { .. }) | Err(KeyError::MalformedDer { .. })
        ));
    }
}
