//! HTTP Basic credentials: argon2 hashes from configuration, verified off the async workers,
//! successful verifications cached briefly.
//!
//! Timing: an unknown user costs the same argon2 verification as a known one (against a
//! fixed dummy hash), so response times do not reveal which usernames exist; the cache key is
//! a SHA-256 of user and password, compared by hash-map lookup of a digest the attacker
//! cannot choose to collide. The rate limit runs before any of this.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use argon2::{Argon2, PasswordHasher, PasswordVerifier};
use base64::Engine;

use crate::config::Credential;

/// How long a successful verification is remembered. Five minutes: a removed credential
/// stops working within that time after a reload; argon2 costs ~20 ms of CPU per miss.
const VERIFIED_TTL: Duration = Duration::from_secs(300);
/// Cached verifications at most: one per active caller credential is enough.
const VERIFIED_CAPACITY: u64 = 10_000;
/// Longest `Authorization` header value read. Usernames and passwords are short; this bounds
/// the Base64 decoding and the hashing work an attacker can ask for.
const MAX_AUTHORIZATION_BYTES: usize = 1024;

/// Why a request is not authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// No header, not Basic, not Base64, no colon, too long.
    Missing,
    /// Unknown user or wrong password.
    Wrong,
}

pub struct Authenticator {
    users: Arc<HashMap<String, String>>,
    dummy_hash: Arc<String>,
    verified: moka::future::Cache<[u8; 32], ()>,
}

impl Authenticator {
    pub fn new(credentials: &[Credential]) -> Authenticator {
        // The dummy hash has the default parameters, like the hashes `credentials hash` makes.
        let dummy_hash = Argon2::default()
            .hash_password(b"psp-gateway dummy password for unknown users")
            .map(|h| h.to_string())
            .unwrap_or_default();
        Authenticator {
            users: Arc::new(
                credentials
                    .iter()
                    .map(|c| (c.username.clone(), c.password_hash.clone()))
                    .collect(),
            ),
            dummy_hash: Arc::new(dummy_hash),
            verified: moka::future::Cache::builder()
                .max_capacity(VERIFIED_CAPACITY)
                .time_to_live(VERIFIED_TTL)
                .build(),
        }
    }

    /// Checks an `Authorization` header value; returns the username.
    pub async fn authenticate(&self, header: Option<&[u8]>) -> Result<String, AuthFailure> {
        let (user, password) = parse_basic(header.ok_or(AuthFailure::Missing)?)?;
        let key = digest(&user, &password);
        if self.verified.get(&key).await.is_some() && self.users.contains_key(&user) {
            return Ok(user);
        }
        let users = self.users.clone();
        let dummy = self.dummy_hash.clone();
        let user_for_task = user.clone();
        let ok = tokio::task::spawn_blocking(move || {
            let (hash, known) = match users.get(&user_for_task) {
                Some(h) => (h.as_str(), true),
                None => (dummy.as_str(), false),
            };
            let verified = Argon2::default()
                .verify_password(password.as_bytes(), hash)
                .is_ok();
            verified && known
        })
        .await
        .unwrap_or(false);
        if ok {
            self.verified.insert(key, ()).await;
            Ok(user)
        } else {
            Err(AuthFailure::Wrong)
        }
    }
}

fn digest(user: &str, password: &str) -> [u8; 32] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(user.as_bytes());
    ctx.update(&[0]);
    ctx.update(password.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// `Basic base64(user:password)` (RFC 7617).
fn parse_basic(value: &[u8]) -> Result<(String, String), AuthFailure> {
    if value.len() > MAX_AUTHORIZATION_BYTES {
        return Err(AuthFailure::Missing);
    }
    let value = std::str::from_utf8(value).map_err(|_| AuthFailure::Missing)?;
    let (scheme, token) = value.trim().split_once(' ').ok_or(AuthFailure::Missing)?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(AuthFailure::Missing);
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .map_err(|_| AuthFailure::Missing)?;
    let decoded = String::from_utf8(decoded).map_err(|_| AuthFailure::Missing)?;
    let (user, password) = decoded.split_once(':').ok_or(AuthFailure::Missing)?;
    Ok((user.to_owned(), password.to_owned()))
}

/// Hashes a secret for `api.credentials` (argon2id, default parameters, random salt).
pub fn hash_secret(secret: &str) -> Result<String, String> {
    Argon2::default()
        .hash_password(secret.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| format!("cannot hash: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(s: &str) -> Vec<u8> {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(s)
        )
        .into_bytes()
    }

    #[tokio::test]
    async fn right_and_wrong_credentials() {
        let auth = Authenticator::new(&[Credential {
            username: "alice".into(),
            password_hash: hash_secret("s3cret").expect("hash"),
        }]);
        assert_eq!(
            auth.authenticate(Some(&basic("alice:s3cret"))).await,
            Ok("alice".to_owned())
        );
        // Cached path gives the same answer.
        assert_eq!(
            auth.authenticate(Some(&basic("alice:s3cret"))).await,
            Ok("alice".to_owned())
        );
        assert_eq!(
            auth.authenticate(Some(&basic("alice:wrong"))).await,
            Err(AuthFailure::Wrong)
        );
        assert_eq!(
            auth.authenticate(Some(&basic("bob:s3cret"))).await,
            Err(AuthFailure::Wrong)
        );
        assert_eq!(auth.authenticate(None).await, Err(AuthFailure::Missing));
        assert_eq!(
            auth.authenticate(Some(b"Bearer abc")).await,
            Err(AuthFailure::Missing)
        );
        assert_eq!(
            auth.authenticate(Some(b"Basic !!!")).await,
            Err(AuthFailure::Missing)
        );
        assert_eq!(
            auth.authenticate(Some(&basic("no-colon"))).await,
            Err(AuthFailure::Missing)
        );
    }

    #[test]
    fn passwords_may_contain_colons() {
        assert_eq!(
            parse_basic(&basic("u:pa:ss")),
            Ok(("u".to_owned(), "pa:ss".to_owned()))
        );
    }
}
