//! The OCSP and CRL caches driven far past their bounds with distinct keys: each holds at
//! most its bound, and the process's memory stays flat once they are full. Failures are
//! cached too (for `failure_ttl`), so a responder answering 503 fills both caches without
//! signing anything: one OCSP entry (issuer, serial, responders) and one CRL entry (URL,
//! issuer) per lookup.

mod common;
#[path = "revocation_support/mod.rs"]
mod support;

use common::process_memory;
use psp_check::check::MethodOutcome;
use psp_service::revocation::{RevocationChecker, RevocationConfig};
use support::*;

const BOUND: u64 = 256;
const ROUNDS: usize = 4;
const PER_ROUND: usize = 2_500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_revocation_caches_hold_their_bounds_and_memory_stays_flat_past_them() {
    let server = TestServer::fixed(Reply::status(503)).await;
    let ca = TestCa::new("Bounded CA");
    let template = ca.leaf(&[1], &[server.url("/crl/0")], &[server.url("/ocsp")]);
    let checker = RevocationChecker::new(&RevocationConfig {
        failure_ttl_secs: 3_600,
        ocsp_cache_entries: BOUND,
        // Failures weigh 1 byte each (a CRL index weighs its size).
        crl_cache_max_bytes: BOUND,
        ..test_config()
    })
    .expect("configuration");
    let mut rss = Vec::new();
    for round in 0..ROUNDS {
        for i in 0..PER_ROUND {
            let n = round * PER_ROUND + i + 1;
            let mut cert = template.clone();
            cert.serial = u32::try_from(n).expect("n").to_be_bytes().to_vec();
            cert.crl_urls = vec![server.url(&format!("/crl/{n}"))];
            let evidence = checker.evidence(&cert, Some(&ca.cert), NOW).await;
            for outcome in [&evidence.ocsp, &evidence.crl] {
                assert!(
                    matches!(outcome, MethodOutcome::Failed { .. }),
                    "{outcome:?}"
                );
            }
        }
        checker.settle_caches().await;
        let stats = checker.stats();
        assert!(
            stats.ocsp_entries <= BOUND && stats.crl_entries <= BOUND,
            "round {round}: {} OCSP and {} CRL entries for bounds of {BOUND}",
            stats.ocsp_entries,
            stats.crl_entries
        );
        rss.push(process_memory("VmRSS:"));
    }
    let stats = checker.stats();
    let lookups = (ROUNDS * PER_ROUND) as u64;
    assert_eq!(
        stats.ocsp.cache_misses, lookups,
        "every lookup was a new key"
    );
    assert_eq!(
        stats.crl.cache_misses, lookups,
        "every lookup was a new key"
    );
    // Measured with the bounds raised to 1,000,000 (nothing evicted): RSS grows by about
    // 10 MiB per round, 31 MiB over the last three. With the bounds, it grew by 620 KiB.
    let growth = rss.last().expect("rounds").saturating_sub(rss[0]);
    eprintln!(
        "RSS by round of {PER_ROUND} distinct keys per cache (KiB): {:?}; growth after the first {} KiB",
        rss.iter().map(|r| r >> 10).collect::<Vec<_>>(),
        growth >> 10
    );
    assert!(
        growth < 4 * 1024 * 1024,
        "RSS grew by {} KiB while the caches were full",
        growth >> 10
    );
}
