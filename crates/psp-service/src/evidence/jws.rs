//! Detached JWS with an unencoded payload: RFC 7515 compact serialization with the payload
//! left out (appendix F) and signed as raw bytes (RFC 7797, `"b64":false`).
//!
//! The verifier trusts nothing in the header until the signature has verified with a key
//! it already holds: the `kid` picks the key, and the key, not the header, decides the
//! algorithm; a header whose `alg` is not that key's is refused before any signature
//! check (the algorithm-substitution attack of RFC 8725 §2.1 and §3.1).

use serde_json::{Map, Value, json};

use super::jwk::Jwks;
use super::key::SigningKey;
use super::{Alg, b64url, b64url_decode};

/// Our headers are about 150 bytes; 4 KiB bounds the JSON an unauthenticated sender makes
/// us decode and parse before any signature is checked.
pub const MAX_HEADER_BYTES: usize = 4096;

/// The header parameter RFC 7797 §6 requires in `crit`.
const B64: &str = "b64";

/// The header parameter that says which question a signed answer answers (the
/// certificate's SHA-256, the jurisdiction asked, the `fi_reference_id`, the caller): the
/// contract's body names none of them, so without it the answer about one certificate is
/// byte for byte the answer about another. Listed in `crit`, so that a verifier that does not
/// understand it refuses the JWS rather than accept it for any question.
pub const QUESTION: &str = "psp_question";

/// What a verified JWS said about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JwsVerified {
    /// The key that signed: its RFC 7638 thumbprint.
    pub kid: String,
    /// Its algorithm.
    pub alg: Alg,
    /// When the signer says it signed (seconds since the Unix epoch), from the protected
    /// header; covered by the signature, but only as true as the signer.
    pub iat: i64,
    /// The question a signed answer answers ([`QUESTION`]), when the header has one.
    pub question: Option<Map<String, Value>>,
}

/// Why a detached JWS was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwsError {
    /// Compact serialization has exactly three parts.
    #[error("the JWS has {parts} dot-separated parts, not 3")]
    NotThreeParts { parts: usize },
    /// A detached JWS carries no payload between its dots (RFC 7515 appendix F).
    #[error("the JWS carries a payload; a detached JWS has nothing between its two dots")]
    PayloadNotDetached,
    /// The header is larger than [`MAX_HEADER_BYTES`].
    #[error("the JWS header is {len} bytes of base64url, more than the {max}-byte limit")]
    HeaderTooLarge { len: usize, max: usize },
    /// The header is not base64url.
    #[error("the JWS header is not unpadded base64url")]
    HeaderNotBase64Url,
    /// The header is not a JSON object (RFC 7515 §5.2 step 4).
    #[error("the JWS header is not a JSON object: {reason}")]
    HeaderNotJsonObject { reason: String },
    /// No `alg`.
    #[error("the JWS header has no string `alg`")]
    AlgMissing,
    /// `alg: none`, an unsecured JWS (RFC 7518 §3.6), never accepted.
    #[error("the JWS header's alg is `none`: an unsigned JWS is never accepted")]
    AlgNone,
    /// An `alg` other than ES256 or EdDSA (HS256, RS256, ...).
    #[error("the JWS alg `{alg}` is not accepted; only ES256 and EdDSA are")]
    AlgUnsupported { alg: String },
    /// The header's `alg` is not the algorithm of the key its `kid` names.
    #[error("the JWS header says alg {header} but key `{kid}` is {key}: algorithm substitution")]
    AlgMismatch { header: Alg, key: Alg, kid: String },
    /// No `kid`.
    #[error("the JWS header has no string `kid`")]
    KidMissing,
    /// A `kid` that is not in the key set.
    #[error("the JWS kid `{kid}` is not a key of the JWK set")]
    KidUnknown { kid: String },
    /// `b64` absent or not exactly `false`: the payload would be base64url-encoded.
    #[error("the JWS header's b64 is not `false`: only unencoded payloads (RFC 7797) are accepted")]
    B64NotFalse,
    /// `crit` absent, malformed, or without `b64` (RFC 7797 §6 makes it required).
    #[error("the JWS header's crit is not an array of strings listing `b64`")]
    CritWithoutB64,
    /// A critical header parameter this code does not understand (RFC 7515 §4.1.11).
    #[error("the JWS header's crit lists `{member}`, which this verifier does not understand")]
    CritUnknown { member: String },
    /// No integer `iat`.
    #[error("the JWS header has no integer `iat`")]
    IatMissing,
    /// The signature part is not base64url.
    #[error("the JWS signature is not unpadded base64url")]
    SignatureNotBase64Url,
    /// A signature of the wrong length for its algorithm.
    #[error("the {alg} signature is {len} bytes, not {expected}")]
    SignatureLength {
        alg: Alg,
        len: usize,
        expected: usize,
    },
    /// The signature does not verify: the payload or header was changed, or another key
    /// signed.
    #[error("the JWS signature does not verify with key `{kid}`")]
    BadSignature { kid: String },
    /// A signed decision's header with a member only an answer's has.
    #[error("the JWS header has `{member}`, which a signed decision never has")]
    MemberNotInDecision { member: String },
    /// A compact JWS whose `typ` is not a signed decision's.
    #[error("the JWS typ is `{typ}`, not psp-decision+json: it is not a signed decision")]
    NotADecision { typ: String },
    /// `psp_question` that is not an object, or not listed in `crit`.
    #[error("the JWS header's psp_question is not an object listed in crit")]
    QuestionMalformed,
    /// Signed outside its key's life: after the key was retired, or in the future.
    #[error("the JWS verifies, but {0}")]
    Lifetime(#[from] super::key::LifetimeError),
}

/// Signs `payload` as a detached JWS with an unencoded payload:
/// `BASE64URL(header) || ".." || BASE64URL(signature)`, the protected header being
/// `{"alg","kid","b64":false,"crit":["b64"],"iat"}` (with `question`, also
/// `"psp_question":question`, listed in `crit`) and the signing input
/// `ASCII(BASE64URL(header)) || '.' || payload` (RFC 7797 §3).
pub fn sign_detached(
    key: &SigningKey,
    payload: &[u8],
    iat: i64,
    question: Option<&Map<String, Value>>,
) -> String {
    let mut header = json!({
        "alg": key.alg().jws_name(),
        "kid": key.kid(),
        "b64": false,
        "crit": [B64],
        "iat": iat,
    });
    if let (Some(question), Some(members)) = (question, header.as_object_mut()) {
        members.insert("crit".to_owned(), json!([B64, QUESTION]));
        members.insert(QUESTION.to_owned(), Value::Object(question.clone()));
    }
    let header = b64url(header.to_string().as_bytes());
    let signature = key.sign(&signing_input(&header, payload));
    format!("{header}..{}", b64url(&signature))
}

/// RFC 7797 §3: with `b64: false` the payload goes into the signing input as it is.
fn signing_input(header_b64: &str, payload: &[u8]) -> Vec<u8> {
    [header_b64.as_bytes(), b".", payload].concat()
}

/// Verifies a detached JWS over `payload` with a key of `jwks`; every check of the header
/// comes before the signature is verified, and each refusal is its own [`JwsError`].
pub fn verify_detached(jwks: &Jwks, jws: &str, payload: &[u8]) -> Result<JwsVerified, JwsError> {
    let (header_b64, signature_b64) = split_detached(jws)?;
    let header = decode_header(header_b64)?;
    let header_alg = header_alg(&header)?;
    check_crit_and_b64(&header)?;
    verified_by(
        jwks,
        &header,
        header_alg,
        signature_b64,
        &signing_input(header_b64, payload),
    )
}

/// Signs `payload` as a compact JWS with the payload inside (RFC 7515 §7.1), for a signed
/// decision that travels alone (an audit record, a header to the upstream): the protected
/// header is `{"alg","kid","typ","iat"}`, no `crit`, the payload base64url-encoded.
pub fn sign_compact(key: &SigningKey, typ: &str, payload: &[u8], iat: i64) -> String {
    let header = json!({
        "alg": key.alg().jws_name(),
        "kid": key.kid(),
        "typ": typ,
        "iat": iat,
    });
    let input = format!(
        "{}.{}",
        b64url(header.to_string().as_bytes()),
        b64url(payload)
    );
    let signature = key.sign(input.as_bytes());
    format!("{input}.{}", b64url(&signature))
}

/// Verifies a compact JWS made by [`sign_compact`] with a key of `jwks` and returns its
/// payload: the same header checks as [`verify_detached`] (no `none`, the key's own
/// algorithm, a known `kid`, an `iat`), and no `crit` or `b64` at all (a payload here is
/// always encoded).
pub fn verify_compact(jwks: &Jwks, jws: &str) -> Result<(JwsVerified, Vec<u8>), JwsError> {
    let parts = jws.matches('.').count() + 1;
    let mut split = jws.split('.');
    let (Some(header_b64), Some(payload_b64), Some(signature_b64), 3) =
        (split.next(), split.next(), split.next(), parts)
    else {
        return Err(JwsError::NotThreeParts { parts });
    };
    let header = decode_header(header_b64)?;
    let header_alg = header_alg(&header)?;
    if let Some(member) = ["crit", B64, QUESTION]
        .into_iter()
        .find(|m| header.contains_key(*m))
    {
        return Err(JwsError::MemberNotInDecision {
            member: member.to_owned(),
        });
    }
    // A compact JWS of this key is a signed decision, and says so: another type of statement
    // (a JWT, an answer recast) is not taken for one.
    let typ = header.get("typ").and_then(Value::as_str);
    if typ != Some(super::DECISION_TYPE) {
        return Err(JwsError::NotADecision {
            typ: typ.unwrap_or("(none)").to_owned(),
        });
    }
    let input = [header_b64.as_bytes(), b".", payload_b64.as_bytes()].concat();
    let verified = verified_by(jwks, &header, header_alg, signature_b64, &input)?;
    let payload = b64url_decode(payload_b64).ok_or(JwsError::SignatureNotBase64Url)?;
    Ok((verified, payload))
}

/// The checks every JWS shares once its header is read: the key its `kid` names, that key's
/// own algorithm (not the header's: no algorithm substitution), an `iat`, and a signature of
/// the algorithm's length that verifies over `input`.
fn verified_by(
    jwks: &Jwks,
    header: &Map<String, Value>,
    header_alg: Alg,
    signature_b64: &str,
    input: &[u8],
) -> Result<JwsVerified, JwsError> {
    let kid = header
        .get("kid")
        .and_then(Value::as_str)
        .ok_or(JwsError::KidMissing)?;
    let key = jwks.get(kid).ok_or_else(|| JwsError::KidUnknown {
        kid: kid.to_owned(),
    })?;
    if header_alg != key.alg() {
        return Err(JwsError::AlgMismatch {
            header: header_alg,
            key: key.alg(),
            kid: kid.to_owned(),
        });
    }
    let iat = header
        .get("iat")
        .and_then(Value::as_i64)
        .ok_or(JwsError::IatMissing)?;
    let signature = b64url_decode(signature_b64).ok_or(JwsError::SignatureNotBase64Url)?;
    // Both ES256 (RFC 7518 §3.4: r || s, 32 bytes each) and Ed25519 are 64 bytes.
    if signature.len() != 64 {
        return Err(JwsError::SignatureLength {
            alg: key.alg(),
            len: signature.len(),
            expected: 64,
        });
    }
    if !key.verify(input, &signature) {
        return Err(JwsError::BadSignature {
            kid: kid.to_owned(),
        });
    }
    key.signed_in_lifetime(Some(iat), time::OffsetDateTime::now_utc().unix_timestamp())?;
    Ok(JwsVerified {
        kid: kid.to_owned(),
        alg: key.alg(),
        iat,
        question: header.get(QUESTION).and_then(Value::as_object).cloned(),
    })
}

/// The header and signature of `header..signature`.
fn split_detached(jws: &str) -> Result<(&str, &str), JwsError> {
    // Counted, not collected: a string of dots costs no allocation.
    let parts = jws.matches('.').count() + 1;
    let mut split = jws.split('.');
    let (Some(header), Some(payload), Some(signature), 3) =
        (split.next(), split.next(), split.next(), parts)
    else {
        return Err(JwsError::NotThreeParts { parts });
    };
    if !payload.is_empty() {
        return Err(JwsError::PayloadNotDetached);
    }
    Ok((header, signature))
}

fn decode_header(header_b64: &str) -> Result<Map<String, Value>, JwsError> {
    if header_b64.len() > MAX_HEADER_BYTES {
        return Err(JwsError::HeaderTooLarge {
            len: header_b64.len(),
            max: MAX_HEADER_BYTES,
        });
    }
    let json = b64url_decode(header_b64).ok_or(JwsError::HeaderNotBase64Url)?;
    let not_object = |reason: String| JwsError::HeaderNotJsonObject { reason };
    match serde_json::from_slice(&json).map_err(|e| not_object(e.to_string()))? {
        Value::Object(members) => Ok(members),
        other => Err(not_object(format!("found {other}"))),
    }
}

/// RFC 7797 §6: `b64` must be listed in `crit`; RFC 7515 §4.1.11: a critical parameter
/// the verifier does not understand refuses the JWS. `b64` must be exactly `false`: a JWS
/// with an encoded payload would be a different signing input for the same bytes.
fn check_crit_and_b64(header: &Map<String, Value>) -> Result<(), JwsError> {
    let crit = header
        .get("crit")
        .and_then(Value::as_array)
        .ok_or(JwsError::CritWithoutB64)?;
    let mut lists_b64 = false;
    let mut lists_question = false;
    for member in crit {
        match member.as_str() {
            Some(B64) => lists_b64 = true,
            Some(QUESTION) => lists_question = true,
            Some(other) => {
                return Err(JwsError::CritUnknown {
                    member: other.to_owned(),
                });
            }
            None => return Err(JwsError::CritWithoutB64),
        }
    }
    if !lists_b64 {
        return Err(JwsError::CritWithoutB64);
    }
    if header.get(B64) != Some(&Value::Bool(false)) {
        return Err(JwsError::B64NotFalse);
    }
    // A question is critical: present exactly when listed, and an object.
    match (header.get(QUESTION), lists_question) {
        (None, false) | (Some(Value::Object(_)), true) => Ok(()),
        _ => Err(JwsError::QuestionMalformed),
    }
}

fn header_alg(header: &Map<String, Value>) -> Result<Alg, JwsError> {
    let alg = header
        .get("alg")
        .and_then(Value::as_str)
        .ok_or(JwsError::AlgMissing)?;
    if alg.eq_ignore_ascii_case("none") {
        return Err(JwsError::AlgNone);
    }
    Alg::from_jws_name(alg).ok_or_else(|| JwsError::AlgUnsupported {
        alg: alg.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::key::{LifetimeError, MAX_CLOCK_SKEW_SECS};
    use super::*;

    const IAT: i64 = 1_764_000_000;

    fn key(alg: Alg) -> SigningKey {
        SigningKey::from_pem(&SigningKey::generate_pem(alg)).unwrap()
    }

    /// A JWS with `header` (any JSON) signed by `signer` over `payload`.
    fn forged(signer: &SigningKey, header: Value, payload: &[u8]) -> String {
        let header = b64url(header.to_string().as_bytes());
        let signature = signer.sign(&signing_input(&header, payload));
        format!("{header}..{}", b64url(&signature))
    }

    fn good_header(key: &SigningKey) -> Value {
        json!({"alg": key.alg().jws_name(), "kid": key.kid(), "b64": false, "crit": ["b64"], "iat": IAT})
    }

    /// `good_header` with `member` changed (or removed, for `Value::Null`).
    fn with(key: &SigningKey, member: &str, value: Value) -> Value {
        let mut header = good_header(key);
        match value {
            Value::Null => {
                header.as_object_mut().unwrap().remove(member);
            }
            value => header[member] = value,
        }
        header
    }

    #[test]
    fn the_question_answered_is_signed_critical_and_read_back() {
        let key = key(Alg::Es256);
        let jwks = Jwks::new([key.public()]);
        let mut question = Map::new();
        question.insert("certSha256".into(), "ab".repeat(32).into());
        question.insert("jurisdiction".into(), "XX".into());
        let jws = sign_detached(&key, b"{}", IAT, Some(&question));
        let v = verify_detached(&jwks, &jws, b"{}").expect("verifies");
        assert_eq!(v.question, Some(question.clone()));
        // A question the verifier is not told is critical could be ignored: refused.
        let mut header = good_header(&key);
        header[QUESTION] = Value::Object(question.clone());
        let not_critical = forged(&key, header, b"{}");
        assert_eq!(
            verify_detached(&jwks, &not_critical, b"{}"),
            Err(JwsError::QuestionMalformed)
        );
        // Listed in crit but absent, or not an object: refused.
        let listed_absent = forged(&key, with(&key, "crit", json!([B64, QUESTION])), b"{}");
        assert_eq!(
            verify_detached(&jwks, &listed_absent, b"{}"),
            Err(JwsError::QuestionMalformed)
        );
    }

    #[test]
    fn a_retired_key_verifies_what_it_signed_before_its_retirement_and_nothing_after() {
        let key = key(Alg::EdDsa);
        let retired = key.public().retired_at(IAT + 10);
        let jwks = Jwks::new([retired]);
        let before = sign_detached(&key, b"p", IAT, None);
        assert!(verify_detached(&jwks, &before, b"p").is_ok());
        let after = sign_detached(&key, b"p", IAT + 11, None);
        assert!(
            matches!(
                verify_detached(&jwks, &after, b"p"),
                Err(JwsError::Lifetime(LifetimeError::AfterRetirement { .. }))
            ),
            "{:?}",
            verify_detached(&jwks, &after, b"p")
        );
        // A compact JWS (a signed decision) is held to the same rule.
        let decision = sign_compact(&key, "psp-decision+json", b"{}", IAT + 3600);
        assert!(matches!(
            verify_compact(&jwks, &decision),
            Err(JwsError::Lifetime(LifetimeError::AfterRetirement { .. }))
        ));
        // The retirement travels in the JWKS.
        let published = Jwks::from_json(&jwks.to_json()).expect("parses");
        assert_eq!(published.keys()[0].retired(), Some(IAT + 10));
        assert!(verify_detached(&published, &after, b"p").is_err());
    }

    #[test]
    fn a_signature_dated_beyond_the_clock_skew_is_refused() {
        let key = key(Alg::Es256);
        let jwks = Jwks::new([key.public()]);
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let soon = sign_detached(&key, b"p", now + MAX_CLOCK_SKEW_SECS - 5, None);
        assert!(verify_detached(&jwks, &soon, b"p").is_ok());
        let later = sign_detached(&key, b"p", now + 30 * 86_400, None);
        assert!(matches!(
            verify_detached(&jwks, &later, b"p"),
            Err(JwsError::Lifetime(LifetimeError::InTheFuture { .. }))
        ));
    }

    #[test]
    fn detached_jws_round_trips_for_both_algorithms() {
        for alg in [Alg::Es256, Alg::EdDsa] {
            let key = key(alg);
            let jwks = Jwks::new([key.public()]);
            let payload = b"{\"report\":\"ok\"}\n with raw bytes \xff\x00 and dots ...";
            let jws = sign_detached(&key, payload, IAT, None);
            assert!(jws.contains(".."), "{jws}");
            assert_eq!(
                verify_detached(&jwks, &jws, payload),
                Ok(JwsVerified {
                    kid: key.kid(),
                    alg,
                    iat: IAT,
                    question: None,
                })
            );
            assert_eq!(
                verify_detached(&jwks, &jws, b""),
                Err(JwsError::BadSignature { kid: key.kid() })
            );
        }
    }

    #[test]
    fn the_header_is_the_one_rfc_7797_describes() {
        let key = key(Alg::EdDsa);
        let jws = sign_detached(&key, b"x", IAT, None);
        let header: Value =
            serde_json::from_slice(&b64url_decode(jws.split('.').next().unwrap()).unwrap())
                .unwrap();
        assert_eq!(header, good_header(&key));
    }

    #[test]
    fn a_tampered_payload_or_header_does_not_verify() {
        let key = key(Alg::Es256);
        let jwks = Jwks::new([key.public()]);
        let jws = sign_detached(&key, b"amount=10", IAT, None);
        assert_eq!(
            verify_detached(&jwks, &jws, b"amount=99"),
            Err(JwsError::BadSignature { kid: key.kid() })
        );
        // Re-encode the header with a later iat, keep the signature.
        let later = b64url(with(&key, "iat", json!(IAT + 1)).to_string().as_bytes());
        let signature = jws.split('.').nth(2).unwrap();
        assert_eq!(
            verify_detached(&jwks, &format!("{later}..{signature}"), b"amount=10"),
            Err(JwsError::BadSignature { kid: key.kid() })
        );
    }

    #[test]
    fn another_key_is_unknown_and_its_signature_under_our_kid_fails() {
        let ours = key(Alg::EdDsa);
        let theirs = key(Alg::EdDsa);
        let jwks = Jwks::new([ours.public()]);
        let jws = sign_detached(&theirs, b"p", IAT, None);
        assert_eq!(
            verify_detached(&jwks, &jws, b"p"),
            Err(JwsError::KidUnknown { kid: theirs.kid() })
        );
        let claimed = forged(&theirs, good_header(&ours), b"p");
        assert_eq!(
            verify_detached(&jwks, &claimed, b"p"),
            Err(JwsError::BadSignature { kid: ours.kid() })
        );
    }

    #[test]
    fn alg_none_and_other_algorithms_are_refused() {
        let key = key(Alg::Es256);
        let jwks = Jwks::new([key.public()]);
        let header = b64url(with(&key, "alg", json!("none")).to_string().as_bytes());
        assert_eq!(
            verify_detached(&jwks, &format!("{header}.."), b"p"),
            Err(JwsError::AlgNone)
        );
        // The bare `{"alg":"none"}` of the textbook attack is named as such too.
        let header = b64url(br#"{"alg":"none"}"#);
        assert_eq!(
            verify_detached(&jwks, &format!("{header}.."), b"p"),
            Err(JwsError::AlgNone)
        );
        let header = b64url(with(&key, "alg", json!("NONE")).to_string().as_bytes());
        assert_eq!(
            verify_detached(&jwks, &format!("{header}.."), b"p"),
            Err(JwsError::AlgNone)
        );
        for alg in ["HS256", "RS256", "ES384", "es256", "Ed25519"] {
            let jws = forged(&key, with(&key, "alg", json!(alg)), b"p");
            assert_eq!(
                verify_detached(&jwks, &jws, b"p"),
                Err(JwsError::AlgUnsupported {
                    alg: alg.to_owned()
                })
            );
        }
        let jws = forged(&key, with(&key, "alg", Value::Null), b"p");
        assert_eq!(
            verify_detached(&jwks, &jws, b"p"),
            Err(JwsError::AlgMissing)
        );
        let jws = forged(&key, with(&key, "alg", json!(7)), b"p");
        assert_eq!(
            verify_detached(&jwks, &jws, b"p"),
            Err(JwsError::AlgMissing)
        );
    }

    #[test]
    fn an_alg_that_is_not_the_named_keys_is_algorithm_substitution() {
        let ed = key(Alg::EdDsa);
        let jwks = Jwks::new([ed.public()]);
        // A valid Ed25519 signature, under a header claiming ES256.
        let jws = forged(&ed, with(&ed, "alg", json!("ES256")), b"p");
        let err = verify_detached(&jwks, &jws, b"p").unwrap_err();
        assert_eq!(
            err,
            JwsError::AlgMismatch {
                header: Alg::Es256,
                key: Alg::EdDsa,
                kid: ed.kid()
            }
        );
        assert!(err.to_string().contains("algorithm substitution"), "{err}");
    }

    #[test]
    fn kid_must_name_a_key_of_the_set() {
        let key = key(Alg::EdDsa);
        let jwks = Jwks::new([key.public()]);
        let jws = forged(&key, with(&key, "kid", Value::Null), b"p");
        assert_eq!(
            verify_detached(&jwks, &jws, b"p"),
            Err(JwsError::KidMissing)
        );
        let jws = forged(&key, with(&key, "kid", json!("other")), b"p");
        assert_eq!(
            verify_detached(&jwks, &jws, b"p"),
            Err(JwsError::KidUnknown {
                kid: "other".to_owned()
            })
        );
    }

    #[test]
    fn b64_must_be_false_and_critical_and_no_other_crit_is_understood() {
        let key = key(Alg::EdDsa);
        let jwks = Jwks::new([key.public()]);
        let refused = |header: Value| verify_detached(&jwks, &forged(&key, header, b"p"), b"p");
        for b64 in [json!(true), json!("false"), json!(0), Value::Null] {
            assert_eq!(refused(with(&key, "b64", b64)), Err(JwsError::B64NotFalse));
        }
        for crit in [json!([]), json!("b64"), json!([1]), Value::Null] {
            assert_eq!(
                refused(with(&key, "crit", crit)),
                Err(JwsError::CritWithoutB64)
            );
        }
        assert_eq!(
            refused(with(&key, "crit", json!(["b64", "exp"]))),
            Err(JwsError::CritUnknown {
                member: "exp".to_owned()
            })
        );
        // A non-critical member we do not know is ignored (RFC 7515 §4).
        assert!(refused(with(&key, "x-note", json!("hello"))).is_ok());
        assert_eq!(
            refused(with(&key, "iat", json!("soon"))),
            Err(JwsError::IatMissing)
        );
        assert_eq!(
            refused(with(&key, "iat", Value::Null)),
            Err(JwsError::IatMissing)
        );
    }

    #[test]
    fn malformed_serializations_are_refused_by_shape() {
        let key = key(Alg::Es256);
        let jwks = Jwks::new([key.public()]);
        let jws = sign_detached(&key, b"p", IAT, None);
        let (header, signature) = jws.split_once("..").unwrap();
        let check = |text: &str| verify_detached(&jwks, text, b"p");
        assert_eq!(check(header), Err(JwsError::NotThreeParts { parts: 1 }));
        assert_eq!(
            check(&format!("{jws}.x")),
            Err(JwsError::NotThreeParts { parts: 4 })
        );
        assert_eq!(
            check(&format!("{header}.cA.{signature}")),
            Err(JwsError::PayloadNotDetached)
        );
        assert_eq!(
            check(&format!("{header}=..{signature}")),
            Err(JwsError::HeaderNotBase64Url)
        );
        assert!(matches!(
            check(&format!("{}..{signature}", b64url(b"[1]"))),
            Err(JwsError::HeaderNotJsonObject { .. })
        ));
        assert!(matches!(
            check(&format!("{}..{signature}", b64url(b"{\"alg\":"))),
            Err(JwsError::HeaderNotJsonObject { .. })
        ));
        let huge = b64url(&[b' '; MAX_HEADER_BYTES]);
        assert!(matches!(
            check(&format!("{huge}..{signature}")),
            Err(JwsError::HeaderTooLarge { .. })
        ));
        assert_eq!(
            check(&format!("{header}..{signature}=")),
            Err(JwsError::SignatureNotBase64Url)
        );
        assert_eq!(
            check(&format!("{header}..{}", &signature[..signature.len() - 2])),
            Err(JwsError::SignatureLength {
                alg: Alg::Es256,
                len: 63,
                expected: 64
            })
        );
        // A DER signature, the form JWS forbids (RFC 7518 §3.4).
        let der = key.sign_note(&signing_input(header, b"p"));
        assert!(matches!(
            check(&format!("{header}..{}", b64url(&der))),
            Err(JwsError::SignatureLength { .. })
        ));
    }

    #[test]
    fn rfc_8037_appendix_a4_signature_verifies() {
        // RFC 8037 A.4/A.5: an EdDSA JWS (encoded payload, no kid) with its published
        // signature, checked with the same key through PublicKey::verify.
        let x = b64url_decode("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo").unwrap();
        let public = crate::evidence::PublicKey::from_raw(Alg::EdDsa, &x).unwrap();
        let input = b"eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc";
        let sig = b64url_decode(
            "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg",
        )
        .unwrap();
        assert!(public.verify(input, &sig));
    }
}
