//! Signing primitives for evidence (issue 26): the keys, their JWK and JWKS forms, detached
//! JWS with an unencoded payload (RFC 7515 + RFC 7797) and C2SP signed notes.
//!
//! Two algorithms only, both on ring: ECDSA P-256 with SHA-256 (JWS `ES256`, signed-note
//! type 0x02) and Ed25519 (JWS `EdDSA`, signed-note type 0x01). A key of any other kind is
//! refused when it is loaded, with an error that names what was found, so a rotation to an
//! unsupported key fails at start-up rather than at the first signature.
//!
//! Verification is a pure function of bytes and keys: nothing here reads the clock (the
//! signer is handed `iat`) and only [`SigningKey::from_pem_file`] and
//! [`PublicKey::from_pem_file`] read files.

mod jwk;
mod jws;
mod key;
mod note;

pub use jwk::{JwkError, Jwks, MAX_JWKS_BYTES, RETIRED};
pub use jws::{
    JwsError, JwsVerified, MAX_HEADER_BYTES, QUESTION, sign_compact, sign_detached, verify_compact,
    verify_detached,
};
pub use key::{KeyError, LifetimeError, MAX_CLOCK_SKEW_SECS, PublicKey, SigningKey, rfc3339_secs};
pub use note::{MAX_NOTE_SIGNATURES, NoteError, note_key_id, note_sign, note_verify, verifier_key};

/// The two signature algorithms evidence is signed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Alg {
    /// ECDSA over NIST P-256 with SHA-256 (RFC 7518 §3.4).
    Es256,
    /// Ed25519 (RFC 8037 §3.1).
    EdDsa,
}

impl Alg {
    /// The JWS `alg` value (RFC 7518 §3.1, RFC 8037 §3.1).
    pub fn jws_name(self) -> &'static str {
        match self {
            Alg::Es256 => "ES256",
            Alg::EdDsa => "EdDSA",
        }
    }

    /// The algorithm a JWS `alg` names, when it is one of ours. Case-sensitive, as RFC 7515
    /// §4.1.1 makes it.
    pub fn from_jws_name(name: &str) -> Option<Alg> {
        match name {
            "ES256" => Some(Alg::Es256),
            "EdDSA" => Some(Alg::EdDsa),
            _ => None,
        }
    }
}

impl std::fmt::Display for Alg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.jws_name())
    }
}

/// base64url without padding (RFC 7515 §2), the encoding of every JOSE member.
fn b64url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Decodes base64url without padding; padding, whitespace and the standard alphabet's `+/`
/// are refused, so each value has one spelling.
/// Unpadded base64url, decoded (a JWS part read without verifying it).
pub fn b64url_decode_pub(text: &str) -> Option<Vec<u8>> {
    b64url_decode(text)
}

fn b64url_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .ok()
}

/// The process's evidence keys (`[evidence]`): the key that signs, the JWKS published at
/// `/.well-known/jwks.json` (its public key and the previous ones still accepted), and the
/// SHA-256 of the configuration in force, which every signed decision names.
pub struct Evidence {
    key: std::sync::Arc<SigningKey>,
    jwks: Jwks,
    jwks_json: bytes::Bytes,
    /// Forward each permitted call's signed decision to the upstream.
    pub forward_signature: bool,
    config_sha256: arc_swap::ArcSwap<String>,
}

impl Evidence {
    /// The signing key, the earlier public keys still published, and the configuration's
    /// hash. A previous key with the signing key's own thumbprint is published once.
    pub fn new(
        key: SigningKey,
        previous: Vec<PublicKey>,
        forward_signature: bool,
        config_sha256: String,
    ) -> Evidence {
        let mut keys = vec![key.public()];
        for k in previous {
            if keys.iter().all(|have| have.kid() != k.kid()) {
                keys.push(k);
            }
        }
        let jwks = Jwks::new(keys);
        let jwks_json = bytes::Bytes::from(jwks.to_json());
        Evidence {
            key: std::sync::Arc::new(key),
            jwks,
            jwks_json,
            forward_signature,
            config_sha256: arc_swap::ArcSwap::from_pointee(config_sha256),
        }
    }

    pub fn key(&self) -> &std::sync::Arc<SigningKey> {
        &self.key
    }

    pub fn jwks(&self) -> &Jwks {
        &self.jwks
    }

    /// The JWKS as served.
    pub fn jwks_json(&self) -> bytes::Bytes {
        self.jwks_json.clone()
    }

    /// The detached signature of a response body (`x-jws-signature`) answering `question`
    /// (`psp_question` in the protected header: [`jws::QUESTION`]), dated now.
    pub fn sign_body(
        &self,
        body: &[u8],
        question: &serde_json::Map<String, serde_json::Value>,
    ) -> String {
        self.sign_body_at(
            body,
            time::OffsetDateTime::now_utc().unix_timestamp(),
            question,
        )
    }

    /// [`Evidence::sign_body`], dated `iat` (seconds since the epoch).
    pub fn sign_body_at(
        &self,
        body: &[u8],
        iat: i64,
        question: &serde_json::Map<String, serde_json::Value>,
    ) -> String {
        sign_detached(&self.key, body, iat, Some(question))
    }

    /// A signed decision: a compact JWS of `payload` (JSON), typed `psp-decision+json`.
    pub fn sign_decision(&self, payload: &[u8]) -> String {
        sign_compact(
            &self.key,
            DECISION_TYPE,
            payload,
            time::OffsetDateTime::now_utc().unix_timestamp(),
        )
    }

    /// The SHA-256 (hex) of the configuration in force.
    pub fn config_sha256(&self) -> std::sync::Arc<String> {
        self.config_sha256.load_full()
    }

    /// A reload put another configuration in force.
    pub fn set_config_sha256(&self, sha256: String) {
        self.config_sha256.store(std::sync::Arc::new(sha256));
    }
}

impl std::fmt::Debug for Evidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evidence")
            .field("key", &self.key)
            .field("published", &self.jwks.keys().len())
            .field("forward_signature", &self.forward_signature)
            .finish()
    }
}

/// The `typ` of a signed decision's JWS header.
pub const DECISION_TYPE: &str = "psp-decision+json";
