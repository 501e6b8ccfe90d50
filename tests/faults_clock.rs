//! The wall clock stepped while the service runs (issue 27), through the time the check takes
//! as an argument (`CheckService::check(.., now)`): forward a day, back an hour, right again;
//! and across a certificate's `notAfter`. What each step must do (docs/hardening.md, "A clock
//! that steps"):
//! - nothing cached at one time answers for another: a result is checked again when the wall
//!   clock leaves the window it was cached for (moka expires on the monotonic clock);
//! - evidence judged at a time the clock stepped away from is judged again: a revocation
//!   failure remembered for `failure_ttl` ("thisUpdate in the future" said while the clock
//!   was an hour slow) is not repeated once the clock is right;
//! - evidence from the clock's future fails closed (beyond the 300-second skew), as does
//!   evidence past its `nextUpdate` + grace.

mod common;

use std::sync::Arc;

use psp_cert::country::CountryCode;
use psp_service::service::Checked;
use time::{Duration, OffsetDateTime};

fn xx() -> CountryCode {
    "XX".parse().expect("code")
}

/// `[validQTSP, validSignature, notRevoked, notExpired]`.
fn flags(c: &Checked) -> [bool; 4] {
    let v = &c.validity();
    [
        v.valid_qtsp,
        v.valid_signature,
        v.not_revoked,
        v.not_expired,
    ]
}

/// The errors' codes and titles, one per line.
fn errors(c: &Checked) -> String {
    c.errors()
        .iter()
        .map(|e| format!("{}: {}\n", e.code.as_str(), e.title))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stepped_wall_clock_is_judged_at_its_new_time_and_nothing_sticks_once_it_is_right() {
    let running = common::service::start(common::test_pki::test_config(|t| t)).await;
    let cert = Arc::new(common::load_cert(
        &common::test_pki::test_pki().psp("valid"),
    ));
    let check = |at: OffsetDateTime| {
        running
            .service
            .check(cert.clone(), Arc::new(Vec::new()), xx(), at)
    };
    let all = [true; 4];

    let now = OffsetDateTime::now_utc();
    let c = check(now).await;
    assert_eq!(flags(&c), all, "{}", errors(&c));

    // Forward a day: the cached result (its OCSP answer good for an hour) is not served; the
    // check runs at the new time, where the OCSP answer is stale and the sandbox CRL
    // (nextUpdate a day on, plus an hour's grace) still shows the certificate unrevoked.
    let c = check(now + Duration::days(1)).await;
    assert_eq!(flags(&c), all, "{}", errors(&c));
    assert!(
        errors(&c).contains("ocsp_response_error") && errors(&c).contains("the response is stale"),
        "checked at the new time, not answered from the cache:\n{}",
        errors(&c)
    );

    // Back an hour: the evidence fetched now is from the clock's future (beyond the skew):
    // not relied on, fail closed, each method naming why.
    let c = check(now - Duration::hours(1)).await;
    assert!(!c.validity().not_revoked, "{}", errors(&c));
    assert!(
        errors(&c).contains("the CRL's thisUpdate") && errors(&c).contains("is in the future"),
        "{}",
        errors(&c)
    );

    // Right again: valid at once, not after the remembered failures expire.
    let c = check(OffsetDateTime::now_utc()).await;
    assert_eq!(flags(&c), all, "{}", errors(&c));

    // Across notAfter: checked an hour before it (the evidence stale then, the certificate
    // not expired), then a day after it: expired, whatever was cached an hour before.
    let c = check(cert.not_after - Duration::hours(1)).await;
    assert!(c.validity().not_expired, "{}", errors(&c));
    let c = check(cert.not_after + Duration::days(1)).await;
    assert!(!c.validity().not_expired, "{}", errors(&c));
    // And right again once more.
    let c = check(OffsetDateTime::now_utc()).await;
    assert_eq!(flags(&c), all, "{}", errors(&c));
    running.stop().await;
}
