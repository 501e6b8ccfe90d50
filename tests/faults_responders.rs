//! Revocation responders and CRL hosts failing under the check (issue 27 section 1): a
//! responder that never answers or drips its body past the timeout, garbage answers (HTML,
//! truncated DER), an OCSP `tryLater`, a stale CRL, a CRL of 100 MB; and the cache that keeps
//! the last good evidence while the responder is bad. Keys and certificates are generated per
//! test; the responders are on `127.0.0.1:0` (`allow_destinations = loopback`).
//!
//! Each fault: the check fails closed (`notRevoked` false, the contract's
//! `crl_response_error` / `ocsp_response_error` entry), within the method's timeout plus a
//! generous 3 s for a loaded machine, the reason is in the report's explanation, and the
//! revocation counters behind `psp_gateway_revocation_fetches_total{method,outcome}` count
//! it (`failed`: no body within the limits; `rejected`: a body that is no valid answer).

mod common;
#[path = "revocation_support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hyper::Method;
use psp_cert::cert::PspCertificate;
use psp_check::check::{CheckReport, ErrorCode, MethodOutcome};
use psp_service::revocation::{MethodStats, RevocationChecker, RevocationConfig};
use psp_service::service::CheckService;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SERIAL: &[u8] = &[0x27, 0x01];
/// What a loaded 2-core machine may add to a timeout.
const SLACK: Duration = Duration::from_secs(3);

/// An OCSPResponse with responseStatus `tryLater` (3) and no responseBytes, by hand.
const TRY_LATER: [u8; 5] = [0x30, 0x03, 0x0a, 0x01, 0x03];

/// A check of `leaf` (issued by the trusted `ca`) at [`NOW`], bounded: the report, and how
/// long it took.
async fn check(
    service: &CheckService,
    leaf: &PspCertificate,
    bound: Duration,
) -> (Arc<psp_service::service::Checked>, Duration) {
    let started = Instant::now();
    let report = tokio::time::timeout(
        bound,
        service.check(
            Arc::new(leaf.clone()),
            Arc::new(Vec::new()),
            "XX".parse().expect("country code"),
            NOW,
        ),
    )
    .await
    .unwrap_or_else(|_| panic!("the check did not end within {bound:?}"));
    (report, started.elapsed())
}

fn stats(service: &CheckService) -> (MethodStats, MethodStats) {
    let s = service.revocation().expect("a fetching checker").stats();
    (s.ocsp, s.crl)
}

/// The check failed closed on revocation alone, with `code` among its errors and `says` in
/// its explanation.
fn assert_fails_closed(report: &CheckReport, code: ErrorCode, says: &str) {
    assert!(
        report.validity().valid_qtsp && report.validity().valid_signature,
        "only revocation fails: {report:#?}"
    );
    assert!(!report.validity().not_revoked, "fail closed: {report:#?}");
    assert!(
        report.errors().iter().any(|e| e.code == code),
        "{code:?} among {:?}",
        report.errors()
    );
    let text = report.explanation().join(" | ");
    assert!(text.contains(says), "the explanation says {says:?}: {text}");
}

/// A raw server: reads a request head, writes `head`, then `body_chunks` chunks of `chunk`
/// (chunked coding when `chunked`, else raw bytes), each after `pause`; counts the bytes of
/// body it managed to write. Stops when the client goes.
async fn raw_body_server(
    head: &'static str,
    chunked: bool,
    chunk: usize,
    body_chunks: usize,
    pause: Duration,
) -> (std::net::SocketAddr, Arc<AtomicU64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let written = Arc::new(AtomicU64::new(0));
    let count = written.clone();
    tokio::spawn(async move {
        for _ in 0..16 {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let count = count.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") && seen.len() < 65536 {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let data = vec![0x30u8; chunk];
                for _ in 0..body_chunks {
                    let frame = if chunked {
                        [format!("{chunk:x}\r\n").as_bytes(), &data, b"\r\n"].concat()
                    } else {
                        data.clone()
                    };
                    if stream.write_all(&frame).await.is_err() {
                        return;
                    }
                    count.fetch_add(chunk as u64, Ordering::SeqCst);
                    if !pause.is_zero() {
                        tokio::time::sleep(pause).await;
                    }
                }
            });
        }
    });
    (addr, written)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_responder_and_a_dripping_crl_host_fail_closed_within_their_timeouts() {
    let ca = TestCa::new("Timeout CA");
    let silent = silent_server().await;
    // The head at once, then one byte every 100 ms for 30 s: each read is quick, the whole is
    // not.
    let (drip, dripped) = raw_body_server(
        "HTTP/1.1 200 OK\r\ncontent-type: application/pkix-crl\r\ntransfer-encoding: chunked\r\n\r\n",
        true,
        1,
        300,
        Duration::from_millis(100),
    )
    .await;
    let leaf = ca.leaf(
        SERIAL,
        &[format!("http://{drip}/ca.crl")],
        &[format!("http://{silent}/ocsp")],
    );
    let config = RevocationConfig {
        ocsp_timeout_ms: 500,
        crl_timeout_ms: 1_000,
        ..test_config()
    };
    let service = service_trusting(&[&ca.cert], &config);
    let (report, took) = check(&service, &leaf, Duration::from_secs(1) + SLACK).await;
    eprintln!(
        "silent OCSP, dripping CRL: {took:?} ({} bytes dripped)",
        dripped.load(Ordering::SeqCst)
    );
    assert_fails_closed(
        &report,
        ErrorCode::OcspResponseError,
        "no complete answer within 500 ms",
    );
    assert_fails_closed(
        &report,
        ErrorCode::CrlResponseError,
        "no complete answer within 1000 ms",
    );
    assert!(
        took >= Duration::from_millis(1_000),
        "the CRL had its whole timeout: {took:?}"
    );
    let (ocsp, crl) = stats(&service);
    assert_eq!(
        (ocsp.fetch_failed, crl.fetch_failed),
        (1, 1),
        "{ocsp:?} {crl:?}"
    );
    assert_eq!((ocsp.fetch_ok, crl.fetch_ok), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_answers_html_and_truncated_der_fail_closed_and_count_as_rejected() {
    let ca = TestCa::new("Garbage CA");
    let good_ocsp = ocsp_response(&ca, OcspSpec::good(SERIAL));
    let good_crl = ca.crl(NOW - hours(1), NOW + hours(24), &[]);
    let html = b"<html><body>Service temporarily unavailable</body></html>".to_vec();
    for (name, ocsp_body, crl_body) in [
        ("HTML", html.clone(), html.clone()),
        (
            "truncated DER",
            good_ocsp[..good_ocsp.len() / 2].to_vec(),
            good_crl[..good_crl.len() / 2].to_vec(),
        ),
    ] {
        let server = TestServer::start(Arc::new(move |_: &Method, path: &str, _: &[u8]| {
            if path == "/ocsp" {
                Reply::ocsp(ocsp_body.clone())
            } else {
                Reply::crl(crl_body.clone())
            }
        }))
        .await;
        let leaf = ca.leaf(SERIAL, &[server.url("/ca.crl")], &[server.url("/ocsp")]);
        let service = service_trusting(&[&ca.cert], &test_config());
        let (report, took) = check(&service, &leaf, Duration::from_secs(5) + SLACK).await;
        eprintln!("{name}: {took:?}: {}", report.explanation().join(" | "));
        assert_fails_closed(
            &report,
            ErrorCode::OcspResponseError,
            "not a valid OCSPResponse",
        );
        assert_fails_closed(&report, ErrorCode::CrlResponseError, "cannot be parsed");
        let (ocsp, crl) = stats(&service);
        assert_eq!(
            (ocsp.rejected, crl.rejected),
            (1, 1),
            "{name}: {ocsp:?} {crl:?}"
        );
        assert_eq!((ocsp.fetch_ok, crl.fetch_ok), (0, 0), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ocsp_try_later_fails_closed_and_is_counted() {
    let ca = TestCa::new("Busy Responder CA");
    let server = TestServer::fixed(Reply::ocsp(TRY_LATER.to_vec())).await;
    let leaf = ca.leaf(SERIAL, &[], &[server.url("/ocsp")]);
    let service = service_trusting(&[&ca.cert], &test_config());
    let (report, took) = check(&service, &leaf, Duration::from_secs(2) + SLACK).await;
    eprintln!("tryLater: {took:?}: {}", report.explanation().join(" | "));
    assert_fails_closed(&report, ErrorCode::OcspResponseError, "tryLater");
    let (ocsp, _) = stats(&service);
    assert_eq!(ocsp.rejected, 1, "{ocsp:?}");
    assert_eq!(server.hits("/ocsp"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_crl_past_its_grace_fails_closed_and_is_counted() {
    let ca = TestCa::new("Stale CRL CA");
    // nextUpdate two hours ago; the grace is one hour.
    let crl = ca.crl(NOW - hours(26), NOW - hours(2), &[]);
    let server = TestServer::fixed(Reply::crl(crl)).await;
    let leaf = ca.leaf(SERIAL, &[server.url("/ca.crl")], &[]);
    let config = RevocationConfig {
        crl_grace_secs: 3600,
        ..test_config()
    };
    let service = service_trusting(&[&ca.cert], &config);
    let (report, took) = check(&service, &leaf, Duration::from_secs(5) + SLACK).await;
    eprintln!("stale CRL: {took:?}: {}", report.explanation().join(" | "));
    assert_fails_closed(&report, ErrorCode::CrlResponseError, "stale");
    let (_, crl) = stats(&service);
    assert_eq!(crl.rejected, 1, "{crl:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crl_of_100_mb_is_cut_at_the_cap_without_being_read_whole() {
    const HUNDRED_MB: usize = 100 * 1024 * 1024;
    const CHUNK: usize = 64 * 1024;
    const CAP: u64 = 1024 * 1024;
    for (name, head, chunked) in [
        (
            "streamed",
            "HTTP/1.1 200 OK\r\ncontent-type: application/pkix-crl\r\ntransfer-encoding: chunked\r\n\r\n",
            true,
        ),
        (
            "declared",
            "HTTP/1.1 200 OK\r\ncontent-type: application/pkix-crl\r\ncontent-length: 104857600\r\n\r\n",
            false,
        ),
    ] {
        let ca = TestCa::new("Huge CRL CA");
        let (addr, written) =
            raw_body_server(head, chunked, CHUNK, HUNDRED_MB / CHUNK, Duration::ZERO).await;
        let leaf = ca.leaf(SERIAL, &[format!("http://{addr}/huge.crl")], &[]);
        let config = RevocationConfig {
            crl_max_bytes: CAP,
            crl_timeout_ms: 5_000,
            ..test_config()
        };
        let service = service_trusting(&[&ca.cert], &config);
        let (report, took) = check(&service, &leaf, Duration::from_secs(5) + SLACK).await;
        // Let the server notice the client went.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let sent = written.load(Ordering::SeqCst);
        eprintln!(
            "100 MB CRL {name}: {took:?}, {} KiB written before the client went: {}",
            sent >> 10,
            report.explanation().join(" | ")
        );
        assert_fails_closed(
            &report,
            ErrorCode::CrlResponseError,
            "exceeds the 1048576-byte limit",
        );
        // Loopback buffers hold a few MiB; a reader of the whole would have taken 100 MiB.
        assert!(
            sent < 32 * 1024 * 1024,
            "{name}: {} MiB were read: the body was not cut at the cap",
            sent >> 20
        );
        let (_, crl) = stats(&service);
        assert_eq!(crl.fetch_failed, 1, "{name}: {crl:?}");
    }
}

/// The OCSP cache while the responder turns bad: the last good answer serves every check
/// within its time to live, which is `min(nextUpdate, ocsp_max_ttl_secs)` (docs/configuration.md,
/// `revocation.ocsp_max_ttl_secs`: "longest cache time of an OCSP answer"); past the maximum
/// it is fetched again, and a bad responder then fails the method closed even though the
/// good answer's `nextUpdate` (24 h) has not come. (The CRL's counterpart, kept until
/// `nextUpdate` plus the grace across failed refreshes, is
/// `revocation_network::a_failed_refresh_keeps_the_last_good_crl_until_next_update_plus_grace`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_good_ocsp_answer_serves_while_the_responder_is_bad_until_its_ttl() {
    let ca = TestCa::new("Turning CA");
    let good = ocsp_response(&ca, OcspSpec::good(SERIAL));
    let served = Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    let server = TestServer::start(Arc::new(move |_: &Method, _: &str, _: &[u8]| {
        match count.fetch_add(1, Ordering::SeqCst) {
            0 => Reply::ocsp(good.clone()),
            1 => Reply::ocsp(TRY_LATER.to_vec()),
            _ => Reply::ocsp(b"<html>down</html>".to_vec()),
        }
    }))
    .await;
    let leaf = ca.leaf(SERIAL, &[], &[server.url("/ocsp")]);
    let checker = RevocationChecker::new(&RevocationConfig {
        ocsp_max_ttl_secs: 1,
        ..test_config()
    })
    .expect("configuration");
    let first = checker.evidence(&leaf, Some(&ca.cert), NOW).await;
    assert!(
        matches!(first.ocsp, MethodOutcome::Good { .. }),
        "{:?}",
        first.ocsp
    );
    // The responder is bad from now on; within the TTL the cached answer serves, unfetched.
    for _ in 0..3 {
        let again = checker.evidence(&leaf, Some(&ca.cert), NOW).await;
        assert!(
            matches!(again.ocsp, MethodOutcome::Good { .. }),
            "{:?}",
            again.ocsp
        );
    }
    assert_eq!(server.hits("/ocsp"), 1, "served from the cache");
    assert_eq!(checker.stats().ocsp.cache_hits, 3);
    // Past ocsp_max_ttl_secs (real time: the cache's clock), within nextUpdate.
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let later = checker.evidence(&leaf, Some(&ca.cert), NOW).await;
    match &later.ocsp {
        MethodOutcome::Failed { reason } => {
            assert!(reason.contains("tryLater"), "{reason}");
        }
        other => panic!("past the TTL the bad responder decides: {other:?}"),
    }
    assert_eq!(server.hits("/ocsp"), 2);
    assert_eq!(checker.stats().ocsp.rejected, 1);
}

/// The counters above as the admin listener's `/metrics` shows them: a silent OCSP responder
/// is `psp_gateway_revocation_fetches_total{method="ocsp",outcome="failed"}`, a stale CRL
/// `{method="crl",outcome="rejected"}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_faults_are_in_the_revocation_fetch_metric() {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    let ca = TestCa::new("Metric CA");
    let silent = silent_server().await;
    let stale = TestServer::fixed(Reply::crl(ca.crl(NOW - hours(26), NOW - hours(2), &[]))).await;
    let leaf = ca.leaf(
        SERIAL,
        &[stale.url("/ca.crl")],
        &[format!("http://{silent}/ocsp")],
    );
    let config = RevocationConfig {
        ocsp_timeout_ms: 300,
        ..test_config()
    };
    let service = Arc::new(service_trusting(&[&ca.cert], &config));
    let (report, _) = check(&service, &leaf, Duration::from_millis(300) + SLACK).await;
    assert_fails_closed(
        &report,
        ErrorCode::OcspResponseError,
        "no complete answer within 300 ms",
    );
    assert_fails_closed(&report, ErrorCode::CrlResponseError, "stale");

    let faces =
        psp_gateway::app::build_faces(&common::test_pki::test_config(|t| t), service, None, None)
            .expect("faces");
    let admin = faces
        .admin
        .clone()
        .expect("the sandbox configuration has [admin]");
    let request = http::Request::get("/metrics")
        .header("host", "localhost")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let response = tokio::time::timeout(SLACK, psp_faces::admin::handle(admin, request))
        .await
        .expect("scraped");
    let text = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let text = String::from_utf8_lossy(&text);
    for line in [
        "psp_gateway_revocation_fetches_total{method=\"ocsp\",outcome=\"failed\"} 1",
        "psp_gateway_revocation_fetches_total{method=\"crl\",outcome=\"rejected\"} 1",
        "psp_gateway_revocation_fetches_total{method=\"ocsp\",outcome=\"ok\"} 0",
        "psp_gateway_revocation_fetches_total{method=\"crl\",outcome=\"ok\"} 0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line} in:\n{}",
            text.lines()
                .filter(|l| l.contains("revocation_fetches"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}
