//! Certificates as the authorisation faces' callers send them, decoded once per distinct
//! value.
//!
//! Envoy (`source.certificate`, `x-forwarded-client-cert`), the forward-auth callers, a
//! trusted proxy in header mode and the check endpoint's callers (`eidas`) send the client's
//! certificate encoded (URL-encoded PEM, XFCC, RFC 9440, Base64), and every request of a PSP
//! carries the same bytes. Decoding them
//! was 14 % of an ext_authz Check's CPU time (`PROFILE=1 benches/load-ext-authz.sh`). Here a
//! value is decoded once, and its chain is kept with the digest the identity cache keys on
//! ([`crate::server::chain_digest`]), so that a repeated value costs one SHA-256 of its
//! bytes and one lookup.
//!
//! - **The key** is the SHA-256 of the decoder's name, its parameter (the `xfcc_by` a value
//!   is checked against) and the value, each with its length before it: the same bytes read
//!   by another decoder, or checked against another `xfcc_by`, are decoded apart, and two
//!   values never share a key unless SHA-256 collides.
//! - **A value that does not decode is not kept**: it is decoded again each time, and its
//!   error said each time.
//! - **Bounded by weight**: what is kept is weighed by its bytes, at most
//!   [`DECODED_BYTES`] in all, idle entries dropped after [`DECODED_IDLE`]. A chain heavier
//!   than the bound is decoded and used, not kept.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The most bytes of decoded chains kept: about 2,700 chains like the sandbox's valid
/// PSP's.
pub const DECODED_BYTES: u64 = 8 * 1024 * 1024;
/// A value no request sent for this long is dropped.
pub const DECODED_IDLE: Duration = Duration::from_secs(600);

/// A client's certificate chain (leaf first; empty: none presented), its
/// [`crate::server::chain_digest`] and its leaf's SHA-256 fingerprint.
#[derive(Debug, PartialEq, Eq)]
pub struct DecodedChain {
    chain: Vec<Vec<u8>>,
    digest: [u8; 32],
    leaf_fingerprint: Option<[u8; 32]>,
}

impl DecodedChain {
    pub fn new(chain: Vec<Vec<u8>>) -> Arc<DecodedChain> {
        let digest = crate::server::chain_digest(&chain);
        let leaf_fingerprint = chain.first().map(|leaf| crate::hex::sha256(leaf));
        Arc::new(DecodedChain {
            chain,
            digest,
            leaf_fingerprint,
        })
    }

    /// The SHA-256 of the leaf's DER; `None` when no certificate was presented.
    pub fn leaf_fingerprint(&self) -> Option<[u8; 32]> {
        self.leaf_fingerprint
    }

    /// No certificate presented.
    pub fn none() -> Arc<DecodedChain> {
        static NONE: OnceLock<Arc<DecodedChain>> = OnceLock::new();
        Arc::clone(NONE.get_or_init(|| DecodedChain::new(Vec::new())))
    }

    /// The certificates, DER, leaf first.
    pub fn chain(&self) -> &[Vec<u8>] {
        &self.chain
    }

    /// The chain's digest, the key of the identity cache.
    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }

    fn weight(&self) -> u32 {
        let bytes: usize = self.chain.iter().map(|der| der.len() + 32).sum();
        u32::try_from(128 + bytes).unwrap_or(u32::MAX)
    }
}

/// Why a certificate a caller sent encoded cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    /// The PEM, Base64 or DER does not read as certificates.
    #[error("{0}")]
    Encoding(#[from] crate::cert::CertError),
    /// An XFCC or RFC 9440 value does not read, or has the wrong shape.
    #[error("{0}")]
    Forwarded(#[from] crate::forwarded::ForwardedError),
    /// Where the value came from, when the cause alone does not say.
    #[error("{place}: {cause}")]
    In {
        place: &'static str,
        cause: Box<Unreadable>,
    },
    /// `append-forward` with no `xfcc_by` to find the edge's element by.
    #[error("x-forwarded-client-cert: append-forward needs the proxy's By")]
    AppendForwardWithoutBy,
    /// The header is given more than once: which value the proxy set is not known.
    #[error("the {header} header is given {count} times: which one its proxy set is not known")]
    Repeated { header: String, count: usize },
}

impl Unreadable {
    /// `cause`, said to come from `place`.
    pub fn in_place(place: &'static str, cause: impl Into<Unreadable>) -> Unreadable {
        Unreadable::In {
            place,
            cause: Box::new(cause.into()),
        }
    }
}

fn cache() -> &'static moka::sync::Cache<[u8; 32], Arc<DecodedChain>> {
    static CACHE: OnceLock<moka::sync::Cache<[u8; 32], Arc<DecodedChain>>> = OnceLock::new();
    CACHE.get_or_init(|| {
        moka::sync::Cache::builder()
            .weigher(|_, decoded: &Arc<DecodedChain>| decoded.weight())
            .max_capacity(DECODED_BYTES)
            .time_to_idle(DECODED_IDLE)
            .build()
    })
}

/// The key of `value` read by `decoder` with `parameter`.
fn key(decoder: &str, parameter: Option<&str>, value: &[u8]) -> [u8; 32] {
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    let mut part = |bytes: &[u8]| {
        digest.update(&(bytes.len() as u64).to_be_bytes());
        digest.update(bytes);
    };
    part(decoder.as_bytes());
    match parameter {
        None => part(b"\0none"),
        Some(p) => {
            part(b"\x01some");
            part(p.as_bytes());
        }
    }
    part(value);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.finish().as_ref());
    out
}

/// `value` decoded by `decode`, which is the decoder named `decoder` with `parameter`: from
/// the cache when the same value was decoded the same way before, else decoded now (and
/// kept, when it decodes).
pub fn decoded_once(
    decoder: &'static str,
    parameter: Option<&str>,
    value: &[u8],
    decode: impl FnOnce(&[u8]) -> Result<Vec<Vec<u8>>, Unreadable>,
) -> Result<Arc<DecodedChain>, Unreadable> {
    let key = key(decoder, parameter, value);
    if let Some(kept) = cache().get(&key) {
        return Ok(kept);
    }
    let decoded = DecodedChain::new(decode(value)?);
    cache().insert(key, Arc::clone(&decoded));
    Ok(decoded)
}

/// How the edge in front of an authoriser forwards XFCC: Envoy's
/// `forward_client_cert_details`, which fixes the shape of a genuine value
/// ([`crate::forwarded::XfccForwarding`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum XfccMode {
    /// `SANITIZE_SET`: the header is the edge's one element (the default, and what an edge
    /// facing the PSPs should use).
    #[default]
    SanitizeSet,
    /// `APPEND_FORWARD`: the edge's element is appended to the client's; needs `xfcc_by`.
    AppendForward,
}

/// The chain of an XFCC value that the proxy `by` forwarded as `mode` says, decoded once per
/// distinct value (the cache key holds the mode and `by`). An empty value is no certificate.
/// `AppendForward` without `by` is refused here too, though configuration refuses it first.
pub fn xfcc_decoded(
    value: &[u8],
    mode: XfccMode,
    by: Option<&str>,
) -> Result<Arc<DecodedChain>, Unreadable> {
    use crate::forwarded::{ForwardedError, XfccForwarding, xfcc_chain};
    let (decoder, forwarding) = match (mode, by) {
        (XfccMode::SanitizeSet, by) => ("xfcc sanitize-set", XfccForwarding::SanitizeSet { by }),
        (XfccMode::AppendForward, Some(by)) => {
            ("xfcc append-forward", XfccForwarding::AppendForward { by })
        }
        (XfccMode::AppendForward, None) => {
            return Err(Unreadable::AppendForwardWithoutBy);
        }
    };
    decoded_once(decoder, by, value, |value| {
        match xfcc_chain(value, forwarding) {
            Ok(chain) => Ok(chain),
            Err(ForwardedError::Empty) => Ok(Vec::new()),
            Err(e) => Err(Unreadable::in_place("x-forwarded-client-cert", e)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A decoder that counts its calls and reads `value` as one certificate of its bytes,
    /// `prefix` before them.
    fn counting<'a>(
        calls: &'a AtomicUsize,
        prefix: &'a [u8],
    ) -> impl FnOnce(&[u8]) -> Result<Vec<Vec<u8>>, Unreadable> + 'a {
        move |value: &[u8]| {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok(vec![[prefix, value].concat()])
        }
    }

    #[test]
    fn a_value_is_decoded_once_and_keeps_its_chains_digest() {
        let calls = AtomicUsize::new(0);
        let value = b"presented-test once";
        let first = decoded_once("test-a", None, value, counting(&calls, b"")).unwrap();
        let again = decoded_once("test-a", None, value, counting(&calls, b"")).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(first.chain(), &[value.to_vec()]);
        assert_eq!(first.digest(), crate::server::chain_digest(first.chain()));
        assert_eq!(first.leaf_fingerprint(), Some(crate::hex::sha256(value)));
        assert_eq!(DecodedChain::none().leaf_fingerprint(), None);
    }

    /// The same bytes under another decoder, or another parameter (`xfcc_by`), are another
    /// decoding: a value accepted as added by one proxy is never taken from the cache for a
    /// face that requires another.
    #[test]
    fn the_same_bytes_read_another_way_are_decoded_apart() {
        let calls = AtomicUsize::new(0);
        let value = b"presented-test apart";
        let a = decoded_once("test-b", None, value, counting(&calls, b"none:")).unwrap();
        let by_edge = decoded_once(
            "test-b",
            Some("spiffe://edge"),
            value,
            counting(&calls, b"edge:"),
        )
        .unwrap();
        let by_other = decoded_once(
            "test-b",
            Some("spiffe://other"),
            value,
            |_: &[u8]| -> Result<Vec<Vec<u8>>, Unreadable> {
                Err(Unreadable::AppendForwardWithoutBy)
            },
        );
        let empty_parameter =
            decoded_once("test-b", Some(""), value, counting(&calls, b"empty:")).unwrap();
        let other_decoder =
            decoded_once("test-c", None, value, counting(&calls, b"other:")).unwrap();
        assert_eq!(a.chain()[0], b"none:presented-test apart");
        assert_eq!(by_edge.chain()[0], b"edge:presented-test apart");
        assert_eq!(by_other, Err(Unreadable::AppendForwardWithoutBy));
        assert_eq!(empty_parameter.chain()[0], b"empty:presented-test apart");
        assert_eq!(other_decoder.chain()[0], b"other:presented-test apart");
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        // Parts are length-prefixed: a decoder name and a value cut differently are another key.
        assert_ne!(key("ab", None, b"c"), key("a", None, b"bc"));
        assert_ne!(key("a", Some("b"), b"c"), key("a", Some("bc"), b""));
    }

    #[test]
    fn a_value_that_does_not_decode_is_not_kept() {
        let calls = AtomicUsize::new(0);
        for _ in 0..3 {
            let refused = decoded_once("test-d", None, b"presented-test bad", |_: &[u8]| {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(crate::forwarded::ForwardedError::Empty.into())
            });
            assert_eq!(
                refused,
                Err(Unreadable::Forwarded(
                    crate::forwarded::ForwardedError::Empty
                ))
            );
        }
        assert_eq!(
            calls.load(Ordering::SeqCst),
            3,
            "decoded (and refused) each time"
        );
    }

    /// A caller names the bytes (an ext_authz Check may carry 4 MiB): forty distinct chains of
    /// 1 MiB each are weighed, and the cache stays within its bound.
    #[test]
    fn heavy_values_stay_within_the_bound() {
        for i in 0u8..40 {
            let value = vec![i; 1024 * 1024];
            let decoded =
                decoded_once("test-heavy", None, &value, |v: &[u8]| Ok(vec![v.to_vec()])).unwrap();
            assert_eq!(decoded.chain()[0].len(), 1024 * 1024);
        }
        cache().run_pending_tasks();
        assert!(
            cache().weighted_size() <= DECODED_BYTES,
            "{} bytes kept",
            cache().weighted_size()
        );
    }
}
