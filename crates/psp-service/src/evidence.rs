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

pub use jwk::{JwkError, Jwks, MAX_JWKS_BYTES};
pub use jws::{JwsError, JwsVerified, MAX_HEADER_BYTES, sign_detached, verify_detached};
pub use key::{KeyError, PublicKey, SigningKey};
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
fn b64url_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .ok()
}
