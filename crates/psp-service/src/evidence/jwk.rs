//! JWK (RFC 7517, RFC 8037) and JWK sets, keyed by their RFC 7638 thumbprint.
//!
//! The `kid` of every key is its thumbprint, so a `kid` names exactly one key: a set whose
//! entry claims a `kid` that is not its own thumbprint is refused, which keeps anyone who
//! can edit the published set from pointing an existing `kid` at a key of their own.

use serde_json::{Map, Value, json};

use super::key::PublicKey;
use super::{Alg, b64url, b64url_decode};
use crate::hex;

/// A published JWKS holds a handful of keys (the current one and those still verifying);
/// 64 KiB is hundreds of them and bounds what parsing a hostile set costs.
pub const MAX_JWKS_BYTES: usize = 64 * 1024;

/// The JWK member (a private one, RFC 7517 §4) that says when a previous key was retired
/// (RFC 3339): a verifier accepts nothing it signed after that instant.
pub const RETIRED: &str = "retired";

/// Why a JWK or a JWK set was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwkError {
    /// More than [`MAX_JWKS_BYTES`].
    #[error("the JWK set is {len} bytes, more than the {max}-byte limit")]
    TooLarge { len: usize, max: usize },
    /// Not JSON, or not the shape RFC 7517 gives.
    #[error("the JWK set is not a JSON object with a `keys` array: {reason}")]
    NotJwks { reason: String },
    /// A JWK that is not a JSON object.
    #[error("a JWK is not a JSON object")]
    NotObject,
    /// A required member is missing or not a string.
    #[error("the JWK has no string member `{member}`")]
    Missing { member: &'static str },
    /// A `kty`/`crv` pair this code does not verify with.
    #[error("the JWK is kty `{kty}`, crv `{crv}`: only EC P-256 and OKP Ed25519 are supported")]
    Unsupported { kty: String, crv: String },
    /// A private key member: a published set must never carry one.
    #[error("the JWK carries the private member `d`: a JWK set must hold public keys only")]
    PrivateMember,
    /// A key member that is not base64url.
    #[error("the JWK member `{member}` is not unpadded base64url")]
    NotBase64Url { member: &'static str },
    /// Key bytes of the wrong length.
    #[error("the JWK's key is malformed: {reason}")]
    BadKey { reason: String },
    /// A `kid` that is not the key's own thumbprint.
    #[error("the JWK's kid `{kid}` is not its RFC 7638 thumbprint `{thumbprint}`")]
    KidMismatch { kid: String, thumbprint: String },
    /// An `alg` that is not the key's.
    #[error("the JWK's alg `{alg}` is not {expected}, the algorithm of its key")]
    AlgMismatch { alg: String, expected: Alg },
    /// A `use` other than `sig`.
    #[error("the JWK's use `{found}` is not `sig`")]
    NotForSigning { found: String },
    /// Two entries for the same key.
    #[error("the JWK set lists key `{kid}` more than once: one entry per key")]
    Duplicate { kid: String },
    /// A `retired` member that is not an RFC 3339 time.
    #[error("the JWK's `retired` member {found} is not an RFC 3339 time")]
    BadRetired { found: String },
}

impl PublicKey {
    /// The RFC 7638 thumbprint: base64url of SHA-256 over the required members in
    /// lexicographic order, no whitespace (§3.2; EC members from RFC 7518 §6.2.1, OKP from
    /// RFC 8037 §2).
    pub fn kid(&self) -> String {
        b64url(&hex::sha256(self.thumbprint_input().as_bytes()))
    }

    /// The JSON RFC 7638 §3.2 hashes. Every value is base64url or a fixed name, so no JSON
    /// escaping is needed and `format!` writes it exactly.
    fn thumbprint_input(&self) -> String {
        match self.ec_coordinates() {
            Some((x, y)) => format!(
                r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
                b64url(x),
                b64url(y)
            ),
            None => format!(
                r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
                b64url(self.raw())
            ),
        }
    }

    /// The public JWK, with `kid` (the thumbprint), `alg` and `use: sig`.
    pub fn to_jwk(&self) -> Value {
        let mut jwk = match self.ec_coordinates() {
            Some((x, y)) => json!({"kty": "EC", "crv": "P-256", "x": b64url(x), "y": b64url(y)}),
            None => json!({"kty": "OKP", "crv": "Ed25519", "x": b64url(self.raw())}),
        };
        if let Value::Object(members) = &mut jwk {
            members.insert("kid".to_owned(), Value::String(self.kid()));
            members.insert(
                "alg".to_owned(),
                Value::String(self.alg().jws_name().to_owned()),
            );
            members.insert("use".to_owned(), Value::String("sig".to_owned()));
            if let Some(retired) = self.retired() {
                members.insert(
                    RETIRED.to_owned(),
                    Value::String(super::key::rfc3339_secs(retired)),
                );
            }
        }
        jwk
    }

    /// A public key from a JWK. Refuses a private member, a `kid` that is not the
    /// thumbprint, an `alg` not the key's, a `use` other than `sig`.
    pub fn from_jwk(jwk: &Value) -> Result<PublicKey, JwkError> {
        let members = jwk.as_object().ok_or(JwkError::NotObject)?;
        if members.contains_key("d") {
            return Err(JwkError::PrivateMember);
        }
        let key = match (
            string(members, "kty")?,
            members.get("crv").and_then(Value::as_str),
        ) {
            ("EC", Some("P-256")) => {
                let mut point = vec![0x04];
                point.extend(coordinate(members, "x", 32)?);
                point.extend(coordinate(members, "y", 32)?);
                PublicKey::from_raw(Alg::Es256, &point)
            }
            ("OKP", Some("Ed25519")) => {
                PublicKey::from_raw(Alg::EdDsa, &coordinate(members, "x", 32)?)
            }
            (kty, crv) => {
                return Err(JwkError::Unsupported {
                    kty: kty.to_owned(),
                    crv: crv.unwrap_or("(none)").to_owned(),
                });
            }
        }
        .map_err(|e| JwkError::BadKey {
            reason: e.to_string(),
        })?;
        check_optional_members(members, &key)?;
        match members.get(RETIRED) {
            None => Ok(key),
            Some(value) => value
                .as_str()
                .and_then(|t| {
                    time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                        .ok()
                })
                .map(|t| key.clone().retired_at(t.unix_timestamp()))
                .ok_or_else(|| JwkError::BadRetired {
                    found: value.to_string(),
                }),
        }
    }
}

fn string<'a>(members: &'a Map<String, Value>, member: &'static str) -> Result<&'a str, JwkError> {
    members
        .get(member)
        .and_then(Value::as_str)
        .ok_or(JwkError::Missing { member })
}

/// A base64url key member of exactly `len` bytes (RFC 7518 §6.2.1.2: coordinates are the
/// full field size, leading zeros kept).
fn coordinate(
    members: &Map<String, Value>,
    member: &'static str,
    len: usize,
) -> Result<Vec<u8>, JwkError> {
    let bytes = b64url_decode(string(members, member)?).ok_or(JwkError::NotBase64Url { member })?;
    if bytes.len() != len {
        return Err(JwkError::BadKey {
            reason: format!("`{member}` is {} bytes, not {len}", bytes.len()),
        });
    }
    Ok(bytes)
}

fn check_optional_members(members: &Map<String, Value>, key: &PublicKey) -> Result<(), JwkError> {
    if let Some(kid) = members.get("kid") {
        let thumbprint = key.kid();
        if kid.as_str() != Some(thumbprint.as_str()) {
            return Err(JwkError::KidMismatch {
                kid: kid.as_str().map_or_else(|| kid.to_string(), str::to_owned),
                thumbprint,
            });
        }
    }
    if let Some(alg) = members.get("alg")
        && alg.as_str() != Some(key.alg().jws_name())
    {
        return Err(JwkError::AlgMismatch {
            alg: alg.as_str().map_or_else(|| alg.to_string(), str::to_owned),
            expected: key.alg(),
        });
    }
    if let Some(found) = members.get("use")
        && found.as_str() != Some("sig")
    {
        return Err(JwkError::NotForSigning {
            found: found
                .as_str()
                .map_or_else(|| found.to_string(), str::to_owned),
        });
    }
    Ok(())
}

/// A set of public keys (RFC 7517 §5), each found by its `kid`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Jwks {
    keys: Vec<PublicKey>,
}

impl Jwks {
    /// A set of `keys`; a key given twice is kept once.
    pub fn new(keys: impl IntoIterator<Item = PublicKey>) -> Jwks {
        let mut set = Jwks::default();
        for key in keys {
            set.insert(key);
        }
        set
    }

    /// Adds `key`; the same key given again is kept once, with the earliest retirement of
    /// the two (the strictest: a copy without `retired` never widens a retired key's life).
    fn insert(&mut self, key: PublicKey) {
        let kid = key.kid();
        match self.keys.iter_mut().find(|k| k.kid() == kid) {
            None => self.keys.push(key),
            Some(kept) => {
                let earliest = match (kept.retired(), key.retired()) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                if let Some(at) = earliest {
                    *kept = kept.clone().retired_at(at);
                }
            }
        }
    }

    /// The key whose thumbprint is `kid`.
    pub fn get(&self, kid: &str) -> Option<&PublicKey> {
        self.keys.iter().find(|key| key.kid() == kid)
    }

    /// The keys, in the order given.
    pub fn keys(&self) -> &[PublicKey] {
        &self.keys
    }

    /// `{"keys":[...]}`.
    pub fn to_value(&self) -> Value {
        json!({ "keys": self.keys.iter().map(PublicKey::to_jwk).collect::<Vec<_>>() })
    }

    /// The set as JSON text, to publish.
    pub fn to_json(&self) -> String {
        self.to_value().to_string()
    }

    /// Parses a JWK set. Entries of a `kty`/`crv` this code does not know are skipped (RFC
    /// 7517 §5: "implementations SHOULD ignore JWKs within a JWK Set that use 'kty' values
    /// that are not understood"); every other refusal of [`PublicKey::from_jwk`] refuses
    /// the whole set, and a private member `d` does so whatever the key type.
    pub fn from_json(text: &str) -> Result<Jwks, JwkError> {
        if text.len() > MAX_JWKS_BYTES {
            return Err(JwkError::TooLarge {
                len: text.len(),
                max: MAX_JWKS_BYTES,
            });
        }
        let not_jwks = |reason: String| JwkError::NotJwks { reason };
        let value: Value = serde_json::from_str(text).map_err(|e| not_jwks(e.to_string()))?;
        let entries = value
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| not_jwks("no `keys` array".to_owned()))?;
        let mut set = Jwks::default();
        for entry in entries {
            match PublicKey::from_jwk(entry) {
                // One key, one entry: two entries for one key (a set made by joining the sets
                // of before and after a rotation) could say two lives.
                Ok(key) if set.get(&key.kid()).is_some() => {
                    return Err(JwkError::Duplicate { kid: key.kid() });
                }
                Ok(key) => set.insert(key),
                Err(JwkError::Unsupported { .. }) => continue,
                Err(refused) => return Err(refused),
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::SigningKey;

    fn ed25519_rfc8037() -> PublicKey {
        // RFC 8037 appendix A.2's public key.
        let x = b64url_decode("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo").unwrap();
        PublicKey::from_raw(Alg::EdDsa, &x).unwrap()
    }

    fn generated(alg: Alg) -> PublicKey {
        SigningKey::from_pem(&SigningKey::generate_pem(alg))
            .unwrap()
            .public()
    }

    #[test]
    fn the_ed25519_thumbprint_is_rfc_8037_appendix_a3() {
        assert_eq!(
            ed25519_rfc8037().kid(),
            "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
        );
    }

    #[test]
    fn the_ec_thumbprint_hashes_the_canonical_members() {
        // RFC 7515 appendix A.3's P-256 key. RFC 7638 gives only an RSA example; every
        // generated EC kid is also checked against jwcrypto in tests/evidence_interop.rs.
        let x = b64url_decode("f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU").unwrap();
        let y = b64url_decode("x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0").unwrap();
        let key = PublicKey::from_raw(Alg::Es256, &[&[4u8][..], &x, &y].concat()).unwrap();
        assert_eq!(
            key.thumbprint_input(),
            r#"{"crv":"P-256","kty":"EC","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}"#
        );
        // jwcrypto 1.6.1's `JWK.thumbprint()` of this key (and the value JOSE libraries in
        // other languages pin for it).
        assert_eq!(key.kid(), "oKIywvGUpTVTyxMQ3bwIIeQUudfr_CkLMjCE19ECD-U");
    }

    #[test]
    fn keys_round_trip_through_jwk_and_jwks() {
        let keys = [
            generated(Alg::Es256),
            generated(Alg::EdDsa),
            ed25519_rfc8037(),
        ];
        for key in &keys {
            let jwk = key.to_jwk();
            assert_eq!(jwk["kid"], key.kid());
            assert_eq!(jwk["use"], "sig");
            assert_eq!(PublicKey::from_jwk(&jwk).as_ref(), Ok(key));
        }
        let set = Jwks::new(keys.iter().cloned().chain(keys.iter().cloned()));
        assert_eq!(set.keys().len(), 3, "a key given twice is kept once");
        let parsed = Jwks::from_json(&set.to_json()).unwrap();
        assert_eq!(parsed, set);
        assert_eq!(parsed.get(&keys[0].kid()), Some(&keys[0]));
        assert_eq!(parsed.get("no-such-kid"), None);
    }

    #[test]
    fn unknown_key_types_are_skipped_but_private_keys_refuse_the_set() {
        let ed = ed25519_rfc8037().to_jwk();
        let text = json!({"keys": [
            {"kty": "RSA", "n": "AQAB", "e": "AQAB"},
            {"kty": "EC", "crv": "P-384", "x": "AA", "y": "AA"},
            {"kty": "OKP", "crv": "X25519", "x": "AA"},
            ed,
        ]})
        .to_string();
        assert_eq!(Jwks::from_json(&text).unwrap().keys(), &[ed25519_rfc8037()]);

        let mut private = ed25519_rfc8037().to_jwk();
        private["d"] = json!("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A");
        let err = Jwks::from_json(&json!({"keys": [private]}).to_string()).unwrap_err();
        assert_eq!(err, JwkError::PrivateMember);
        // Even on a key type that would otherwise be skipped.
        let rsa_private = json!({"keys": [{"kty": "RSA", "n": "AQAB", "e": "AQAB", "d": "AQ"}]});
        assert_eq!(
            Jwks::from_json(&rsa_private.to_string()),
            Err(JwkError::PrivateMember)
        );
    }

    #[test]
    fn a_kid_that_is_not_the_keys_thumbprint_refuses_the_set() {
        // Someone who can edit the published set re-points the current kid at their key.
        let honest = generated(Alg::EdDsa);
        let mut forged = generated(Alg::EdDsa).to_jwk();
        forged["kid"] = json!(honest.kid());
        let err = Jwks::from_json(&json!({"keys": [forged]}).to_string()).unwrap_err();
        assert!(
            matches!(err, JwkError::KidMismatch { ref kid, .. } if *kid == honest.kid()),
            "{err}"
        );
    }

    #[test]
    fn malformed_jwks_are_refused_with_the_member_named() {
        let mut jwk = generated(Alg::Es256).to_jwk();
        jwk["alg"] = json!("EdDSA");
        assert!(matches!(
            PublicKey::from_jwk(&jwk),
            Err(JwkError::AlgMismatch { .. })
        ));
        let mut jwk = generated(Alg::Es256).to_jwk();
        jwk["use"] = json!("enc");
        assert!(matches!(
            PublicKey::from_jwk(&jwk),
            Err(JwkError::NotForSigning { .. })
        ));
        let mut jwk = generated(Alg::Es256).to_jwk();
        jwk.as_object_mut().unwrap().remove("y");
        assert_eq!(
            PublicKey::from_jwk(&jwk),
            Err(JwkError::Missing { member: "y" })
        );
        let mut jwk = generated(Alg::EdDsa).to_jwk();
        jwk["x"] = json!("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo=");
        assert_eq!(
            PublicKey::from_jwk(&jwk),
            Err(JwkError::NotBase64Url { member: "x" })
        );
        let mut jwk = generated(Alg::EdDsa).to_jwk();
        jwk["x"] = json!("AAAA");
        assert!(matches!(
            PublicKey::from_jwk(&jwk),
            Err(JwkError::BadKey { .. })
        ));
        assert_eq!(PublicKey::from_jwk(&json!("EC")), Err(JwkError::NotObject));
        assert!(matches!(
            Jwks::from_json("[]"),
            Err(JwkError::NotJwks { .. })
        ));
        assert!(matches!(
            Jwks::from_json("{"),
            Err(JwkError::NotJwks { .. })
        ));
        let huge = " ".repeat(MAX_JWKS_BYTES + 1);
        assert!(matches!(
            Jwks::from_json(&huge),
            Err(JwkError::TooLarge { .. })
        ));
    }
}
