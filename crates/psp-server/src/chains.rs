//! Client certificate chains as the handshakes presented them, one copy per distinct chain.
//!
//! Every TLS connection keeps its client's chain for its life ([`crate::TlsInfo`]), and a
//! PSP opens many connections with the same chain: each would hold a copy (1.5 KB for the
//! sandbox's leaf, more with intermediates). Here a chain is kept once, by the SHA-256 of its
//! certificates (each with its length, so that two chains never read as one), and shared by
//! reference while any connection holds it. A chain no connection holds any more is dropped;
//! its entry is swept out once the table has doubled since the last sweep, so the table stays
//! within twice the chains in use (at most one per connection, `limits.max_connections`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use rustls_pki_types::CertificateDer;

/// A chain as presented, shared.
pub type SharedChain = Arc<[CertificateDer<'static>]>;

/// The table never sweeps below this many entries.
const FIRST_SWEEP: usize = 1024;

struct Table {
    chains: HashMap<[u8; 32], Weak<[CertificateDer<'static>]>>,
    sweep_at: usize,
}

fn table() -> &'static Mutex<Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE.get_or_init(|| {
        Mutex::new(Table {
            chains: HashMap::new(),
            sweep_at: FIRST_SWEEP,
        })
    })
}

/// The SHA-256 of a chain's certificates, each with its length before it, so that two chains
/// never read as one: the key of every cache of chains (here, and the gateway's parsed ones).
pub fn chain_digest<C: AsRef<[u8]>>(chain: &[C]) -> [u8; 32] {
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    for certificate in chain {
        let der = certificate.as_ref();
        digest.update(&(der.len() as u64).to_be_bytes());
        digest.update(der);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.finish().as_ref());
    out
}

/// `chain`, shared with every connection that presented the same certificates.
pub(crate) fn shared(chain: &[CertificateDer<'_>]) -> SharedChain {
    if chain.is_empty() {
        return Arc::from(Vec::new());
    }
    let key = chain_digest(chain);
    let mut table = table().lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(kept) = table.chains.get(&key).and_then(Weak::upgrade) {
        return kept;
    }
    let owned: SharedChain = chain.iter().map(|c| c.clone().into_owned()).collect();
    table.chains.insert(key, Arc::downgrade(&owned));
    if table.chains.len() >= table.sweep_at {
        table.chains.retain(|_, kept| kept.strong_count() > 0);
        table.sweep_at = (2 * table.chains.len()).max(FIRST_SWEEP);
    }
    owned
}

/// Chains in the table (held or not yet swept).
#[cfg(test)]
fn entries() -> usize {
    table()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .chains
        .len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(bytes: &[u8]) -> CertificateDer<'static> {
        CertificateDer::from(bytes.to_vec())
    }

    #[test]
    fn the_same_chain_is_kept_once_and_another_apart() {
        let a = [cert(b"chains-test leaf A"), cert(b"chains-test issuer")];
        let first = shared(&a);
        let again = shared(&a.clone());
        assert!(Arc::ptr_eq(&first, &again), "one copy for both connections");
        assert_eq!(&first[..], &a[..]);
        // The same bytes cut differently are another chain.
        let joined = [cert(b"chains-test leaf Achains-test issuer")];
        assert!(!Arc::ptr_eq(&first, &shared(&joined)));
        assert!(!Arc::ptr_eq(
            &first,
            &shared(&[cert(b"chains-test leaf B"), cert(b"chains-test issuer")])
        ));
        assert!(shared(&[]).is_empty());
    }

    #[test]
    fn chains_no_connection_holds_are_swept_out() {
        // 5,000 distinct chains, each dropped at once (a connection that closed): the table
        // never holds much more than its first sweep's size, though other tests of this
        // process may hold a few.
        let mut most = 0;
        for i in 0..5_000u32 {
            let chain = shared(&[cert(format!("chains-test sweep {i}").as_bytes())]);
            drop(chain);
            most = most.max(entries());
        }
        assert!(most <= 2 * FIRST_SWEEP + 64, "{most} entries");
        // One still held survives every sweep, and is still shared.
        let held = shared(&[cert(b"chains-test held")]);
        for i in 0..3_000u32 {
            drop(shared(&[cert(format!("chains-test churn {i}").as_bytes())]));
        }
        assert!(Arc::ptr_eq(&held, &shared(&[cert(b"chains-test held")])));
    }
}
