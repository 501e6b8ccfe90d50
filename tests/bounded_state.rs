//! The check-result cache driven far past its bound with distinct certificates: it holds at
//! most its bound, and the process's memory stays flat once the cache is full (a cache that
//! kept every report would grow by the size of the reports).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::process_memory;
use common::test_pki::test_config;
use psp_cert::cert::PspCertificate;
use psp_service::service::{CheckService, ReferenceData, Revocation};
use time::OffsetDateTime;

const BOUND: u64 = 256;

/// `n` distinct certificates (one key, distinct names and serials), as PSPs of an issuer no
/// trust source knows: each check is a cache miss that fetches nothing.
fn certificates(n: usize) -> Vec<Arc<PspCertificate>> {
    let key = rcgen::KeyPair::generate().expect("key");
    (0..n)
        .map(|i| {
            let mut params =
                rcgen::CertificateParams::new(vec![format!("psp{i}.example")]).expect("params");
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, format!("PSP {i}"));
            params.serial_number =
                Some(rcgen::SerialNumber::from(u64::try_from(i + 1).expect("i")));
            let cert = params.self_signed(&key).expect("certificate");
            Arc::new(PspCertificate::from_der(cert.der().to_vec()).expect("parses"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_result_cache_holds_its_bound_and_memory_stays_flat_past_it() {
    let config = test_config(|t| t);
    let data = ReferenceData::load(&config.data_sources(), 1, OffsetDateTime::now_utc())
        .expect("sandbox data");
    let service = CheckService::new(data, Revocation::Offline, Duration::from_secs(300), BOUND);
    let certs = certificates(12_000);
    let now = OffsetDateTime::now_utc();
    let jurisdiction = "XX".parse().expect("jurisdiction");
    let no_chain = Arc::new(Vec::new());
    let mut rss = Vec::new();
    for (round, chunk) in certs.chunks(3_000).enumerate() {
        for cert in chunk {
            let report = service
                .check(cert.clone(), no_chain.clone(), jurisdiction, now)
                .await;
            assert!(
                !report.validity().valid_qtsp,
                "an unknown issuer is not approved"
            );
        }
        // The cache applies its evictions in the background: wait (bounded) until its count
        // is within the bound, instead of for a fixed time.
        psp_testkit::wait::until(
            &format!("round {round}: the cached results within the bound of {BOUND}"),
            Duration::from_secs(10),
            || service.cached_results() <= BOUND + BOUND / 4,
        )
        .await;
        rss.push(process_memory("VmRSS:"));
    }
    // Measured with the bound raised to 100,000 (nothing evicted): RSS grows by about 5.7 MiB
    // per round of 3,000, 17 MiB over the last three. With the bound, it grew by 28 KiB.
    let growth = rss.last().expect("rounds").saturating_sub(rss[0]);
    eprintln!(
        "RSS by round of 3,000 distinct certificates (KiB): {:?}; growth after the first {} KiB",
        rss.iter().map(|r| r >> 10).collect::<Vec<_>>(),
        growth >> 10
    );
    assert!(
        growth < 4 * 1024 * 1024,
        "RSS grew by {} KiB while the cache was full",
        growth >> 10
    );
}
