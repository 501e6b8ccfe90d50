//! The revocation checker against real HTTP responders on `127.0.0.1:0`: answers, faults,
//! caching, coalescing and the fetch limits. Keys and certificates are generated here.

mod common;
#[path = "revocation_support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use psp_cert::cert::PspCertificate;
use psp_check::check::MethodOutcome;
use psp_service::revocation::{
    AllowDestinations, ISSUER_MISMATCH, NO_CRL_URL, NO_OCSP_URL, RevocationChecker,
    RevocationConfig, UNKNOWN_ISSUER,
};
use psp_testkit::wait::{Gate, until};
use rcgen::{KeyPair, RevocationReason};
use support::*;
use x509_cert::ext::pkix::CrlReason;

const SERIAL: &[u8] = &[0x10, 0x20, 0x30, 0x40];

fn checker(config: RevocationConfig) -> RevocationChecker {
    RevocationChecker::new(&config).expect("test configuration is valid")
}

fn reason(outcome: &MethodOutcome) -> &str {
    match outcome {
        MethodOutcome::Failed { reason } => reason,
        other => panic!("expected a failed method, got {other:?}"),
    }
}

fn assert_good(outcome: &MethodOutcome) -> &str {
    match outcome {
        MethodOutcome::Good { evidence, .. } => evidence,
        other => panic!("expected good, got {other:?}"),
    }
}

/// A CA, a server answering OCSP with `reply_for(ca)`, and a certificate naming only it.
async fn ocsp_only(
    reply_for: impl FnOnce(&TestCa) -> Reply,
) -> (TestCa, TestServer, PspCertificate) {
    let ca = TestCa::new("OCSP Test CA");
    let server = TestServer::fixed(reply_for(&ca)).await;
    let cert = ca.leaf(SERIAL, &[], &[server.url("/ocsp")]);
    (ca, server, cert)
}

async fn ocsp_outcome(reply_for: impl FnOnce(&TestCa) -> Reply) -> MethodOutcome {
    let (ca, _server, cert) = ocsp_only(reply_for).await;
    let evidence = checker(test_config())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    evidence.ocsp
}

#[tokio::test]
async fn a_good_ocsp_answer_signed_by_the_issuer_is_good() {
    let (ca, server, cert) =
        ocsp_only(|ca| Reply::ocsp(ocsp_response(ca, OcspSpec::good(SERIAL)))).await;
    let evidence = checker(test_config())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    let text = assert_good(&evidence.ocsp);
    assert!(text.contains("signed by the issuer"), "{text}");
    assert!(text.contains(&server.url("/ocsp")), "{text}");
    assert_eq!(reason(&evidence.crl), NO_CRL_URL, "OCSP-only certificate");
    assert_eq!(server.hits("/ocsp"), 1);
}

#[tokio::test]
async fn a_revoked_ocsp_answer_gives_the_revocation_time_and_reason() {
    let revoked_at = at("2025-03-01T10:00:00Z");
    let outcome = ocsp_outcome(|ca| {
        Reply::ocsp(ocsp_response(
            ca,
            OcspSpec::revoked(SERIAL, revoked_at, CrlReason::KeyCompromise),
        ))
    })
    .await;
    match outcome {
        MethodOutcome::Revoked { at, reason, .. } => {
            assert_eq!(at, Some(revoked_at));
            assert_eq!(reason.as_deref(), Some("keyCompromise"));
        }
        other => panic!("expected revoked, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unknown_ocsp_answer_could_not_complete() {
    let outcome =
        ocsp_outcome(|ca| Reply::ocsp(ocsp_response(ca, OcspSpec::unknown(SERIAL)))).await;
    assert!(reason(&outcome).contains("status unknown"), "{outcome:?}");
}

#[tokio::test]
async fn an_answer_about_another_serial_could_not_complete() {
    let outcome = ocsp_outcome(|ca| Reply::ocsp(ocsp_response(ca, OcspSpec::good(&[0x7f])))).await;
    assert!(
        reason(&outcome).contains("no matching CertID"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn unsigned_ocsp_error_statuses_could_not_complete() {
    for (file, name) in [
        ("ocsp-malformed.der", "malformedRequest"),
        ("ocsp-internal-error.der", "internalError"),
        ("ocsp-try-later.der", "tryLater"),
        ("ocsp-sig-required.der", "sigRequired"),
        ("ocsp-unauthorized.der", "unauthorized"),
    ] {
        let body = read(&data(&format!("ocsp/rustcrypto-x509-ocsp/{file}")));
        let outcome = ocsp_outcome(|_| Reply::ocsp(body)).await;
        assert!(reason(&outcome).contains(name), "{file}: {outcome:?}");
    }
}

#[tokio::test]
async fn a_responder_refusing_connections_fails_the_method() {
    let ca = TestCa::new("Refusing CA");
    let addr = refusing_address().await;
    let cert = ca.leaf(
        SERIAL,
        &[format!("http://{addr}/crl")],
        &[format!("http://{addr}/ocsp")],
    );
    let evidence = checker(test_config())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    for outcome in [&evidence.ocsp, &evidence.crl] {
        let r = reason(outcome);
        assert!(
            r.contains(&addr.to_string()),
            "the reason names the URL: {r}"
        );
        assert!(r.to_lowercase().contains("connect"), "{r}");
    }
}

#[tokio::test]
async fn a_responder_that_never_answers_fails_within_the_timeout() {
    let ca = TestCa::new("Silent CA");
    let addr = silent_server().await;
    let cert = ca.leaf(
        SERIAL,
        &[format!("http://{addr}/crl")],
        &[format!("http://{addr}/ocsp")],
    );
    let config = RevocationConfig {
        ocsp_timeout_ms: 300,
        crl_timeout_ms: 300,
        ..test_config()
    };
    let evidence = checker(config).evidence(&cert, Some(&ca.cert), NOW).await;
    assert!(reason(&evidence.ocsp).contains("no complete answer within 300 ms"));
    assert!(reason(&evidence.crl).contains("no complete answer within 300 ms"));
}

#[tokio::test]
async fn an_oversized_ocsp_body_is_refused_whether_declared_or_streamed() {
    let declared = ocsp_outcome(|_| Reply::ocsp(vec![0x30; 100 * 1024])).await;
    assert!(
        reason(&declared).contains("exceeds the 65536-byte limit"),
        "{declared:?}"
    );

    // No Content-Length: 4,096 chunks of 16 KiB (64 MiB) offered, cut at the cap.
    let ca = TestCa::new("Streaming CA");
    let addr = raw_server(
        "HTTP/1.1 200 OK\r\ncontent-type: application/ocsp-response\r\ntransfer-encoding: chunked\r\n\r\n",
        vec![0x30; 16 * 1024],
        4096,
    )
    .await;
    let cert = ca.leaf(SERIAL, &[], &[format!("http://{addr}/ocsp")]);
    let evidence = checker(test_config())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    assert!(
        reason(&evidence.ocsp).contains("exceeds the 65536-byte limit"),
        "{:?}",
        evidence.ocsp
    );
}

#[tokio::test]
async fn a_garbage_body_is_not_an_answer() {
    let outcome = ocsp_outcome(|_| Reply::ocsp(b"<html>maintenance</html>".to_vec())).await;
    assert!(
        reason(&outcome).contains("not a valid OCSPResponse"),
        "{outcome:?}"
    );
    let ca = TestCa::new("Garbage CRL CA");
    let server = TestServer::fixed(Reply::crl(b"\x30\x03garbage".to_vec())).await;
    let cert = ca.leaf(SERIAL, &[server.url("/crl")], &[]);
    let evidence = checker(test_config())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    assert!(
        reason(&evidence.crl).contains("cannot be parsed"),
        "{:?}",
        evidence.crl
    );
}

#[tokio::test]
async fn a_response_signed_by_the_wrong_key_is_refused() {
    let impostor = KeyPair::generate().expect("key");
    let outcome = ocsp_outcome(|ca| {
        Reply::ocsp(ocsp_response(
            ca,
            OcspSpec {
                signer: Signer::Impostor(&impostor),
                ..OcspSpec::good(SERIAL)
            },
        ))
    })
    .await;
    assert!(
        reason(&outcome).contains("signature does not verify"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_response_signed_with_sha1_is_refused_by_policy() {
    let ecdsa_with_sha1 = spki::ObjectIdentifier::new_unwrap("1.2.840.10045.4.1");
    let outcome = ocsp_outcome(|ca| {
        Reply::ocsp(ocsp_response(
            ca,
            OcspSpec {
                claimed_algorithm: Some(ecdsa_with_sha1),
                ..OcspSpec::good(SERIAL)
            },
        ))
    })
    .await;
    assert!(
        reason(&outcome).contains("uses a broken hash"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_delegated_responder_with_ocsp_signing_is_accepted() {
    let ca = TestCa::new("Delegating CA");
    let (responder, key, _) = ca.responder("Delegated Responder", true);
    let server = TestServer::fixed(Reply::ocsp(ocsp_response(
        &ca,
        OcspSpec {
            signer: Signer::Delegated(&responder, &key),
            ..OcspSpec::good(SERIAL)
        },
    )))
    .await;
    let cert = ca.leaf(SERIAL, &[], &[server.url("/ocsp")]);
    let evidence = checker(test_config())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    let text = assert_good(&evidence.ocsp);
    assert!(
        text.contains("delegated responder CN=Delegated Responder"),
        "{text}"
    );
}

#[tokio::test]
async fn a_delegated_responder_without_ocsp_signing_is_refused() {
    let ca = TestCa::new("Delegating CA");
    let (responder, key, _) = ca.responder("Client Auth Only", false);
    let server = TestServer::fixed(Reply::ocsp(ocsp_response(
        &ca,
        OcspSpec {
            signer: Signer::Delegated(&responder, &key),
            ..OcspSpec::good(SERIAL)
        },
    )))
    .await;
    let cert = ca.leaf(SERIAL, &[], &[server.url("/ocsp")]);
    let evidence = checker(test_config())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    assert!(
        reason(&evidence.ocsp).contains("lacks the id-kp-OCSPSigning"),
        "{:?}",
        evidence.ocsp
    );
}

#[tokio::test]
async fn a_responder_certificate_from_another_ca_is_refused() {
    let ca = TestCa::new("Real CA");
    let other = TestCa::new("Other CA");
    let (responder, key, _) = other.responder("Foreign Responder", true);
    let server = TestServer::fixed(Reply::ocsp(ocsp_response(
        &ca,
        OcspSpec {
            signer: Signer::Delegated(&responder, &key),
            ..OcspSpec::good(SERIAL)
        },
    )))
    .await;
    let cert = ca.leaf(SERIAL, &[], &[server.url("/ocsp")]);
    let evidence = checker(test_config())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    assert!(
        reason(&evidence.ocsp).contains("is not authorised by the issuer"),
        "{:?}",
        evidence.ocsp
    );
}

#[tokio::test]
async fn a_stale_ocsp_response_is_refused() {
    let outcome = ocsp_outcome(|ca| {
        Reply::ocsp(ocsp_response(
            ca,
            OcspSpec {
                this_update: NOW - hours(48),
                next_update: Some(NOW - hours(24)),
                ..OcspSpec::good(SERIAL)
            },
        ))
    })
    .await;
    assert!(reason(&outcome).contains("stale"), "{outcome:?}");
}

#[tokio::test]
async fn an_ocsp_response_from_the_future_is_refused_beyond_the_clock_skew() {
    let outcome = ocsp_outcome(|ca| {
        Reply::ocsp(ocsp_response(
            ca,
            OcspSpec {
                this_update: NOW + hours(1),
                next_update: Some(NOW + hours(24)),
                ..OcspSpec::good(SERIAL)
            },
        ))
    })
    .await;
    assert!(reason(&outcome).contains("in the future"), "{outcome:?}");
    let within_skew = ocsp_outcome(|ca| {
        Reply::ocsp(ocsp_response(
            ca,
            OcspSpec {
                this_update: NOW + time::Duration::minutes(2),
                ..OcspSpec::good(SERIAL)
            },
        ))
    })
    .await;
    assert_good(&within_skew);
}

#[tokio::test]
async fn the_nonce_is_sent_and_a_wrong_echo_is_refused() {
    let config = RevocationConfig {
        ocsp_nonce: true,
        ..test_config()
    };
    let ca = Arc::new(TestCa::new("Nonce CA"));
    let echo_ca = Arc::clone(&ca);
    let echo = TestServer::start(Arc::new(move |_: &Method, _: &str, body: &[u8]| {
        let nonce = request_nonce(body).expect("the request carries a nonce");
        assert_eq!(nonce.len(), 32);
        Reply::ocsp(ocsp_response(
            &echo_ca,
            OcspSpec {
                nonce: Some(nonce),
                ..OcspSpec::good(SERIAL)
            },
        ))
    }))
    .await;
    let cert = ca.leaf(SERIAL, &[], &[echo.url("/ocsp")]);
    let evidence = checker(config.clone())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    assert_good(&evidence.ocsp);

    let wrong = TestServer::fixed(Reply::ocsp(ocsp_response(
        &ca,
        OcspSpec {
            nonce: Some(vec![1; 32]),
            ..OcspSpec::good(SERIAL)
        },
    )))
    .await;
    let cert = ca.leaf(SERIAL, &[], &[wrong.url("/ocsp")]);
    let evidence = checker(config.clone())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    assert!(reason(&evidence.ocsp).contains("nonce does not match"));

    // A good answer with the nonce stripped (a replayed or pre-signed one): not good.
    let stripped = TestServer::fixed(Reply::ocsp(ocsp_response(
        &ca,
        OcspSpec {
            nonce: None,
            ..OcspSpec::good(SERIAL)
        },
    )))
    .await;
    let cert = ca.leaf(SERIAL, &[], &[stripped.url("/ocsp")]);
    let evidence = checker(config).evidence(&cert, Some(&ca.cert), NOW).await;
    assert!(
        reason(&evidence.ocsp).contains("carries no nonce, though one was sent"),
        "{:?}",
        evidence.ocsp
    );
}

#[tokio::test]
async fn a_crl_only_certificate_gets_good_from_the_crl_and_revoked_when_listed() {
    let ca = TestCa::new("CRL Test CA");
    let revoked_serial: &[u8] = &[0x66];
    let revoked_at = at("2025-02-01T00:00:00Z");
    let crl = ca.crl(
        NOW - hours(2),
        NOW + hours(22),
        &[(revoked_serial, revoked_at, RevocationReason::Superseded)],
    );
    let server = TestServer::fixed(Reply::crl(crl)).await;
    let good = ca.leaf(SERIAL, &[server.url("/ca.crl")], &[]);
    let revoked = ca.leaf(revoked_serial, &[server.url("/ca.crl")], &[]);
    let checker = checker(test_config());

    let evidence = checker.evidence(&good, Some(&ca.cert), NOW).await;
    let text = assert_good(&evidence.crl);
    assert!(text.contains("1 entries"), "{text}");
    assert_eq!(reason(&evidence.ocsp), NO_OCSP_URL, "CRL-only certificate");

    let evidence = checker.evidence(&revoked, Some(&ca.cert), NOW).await;
    match evidence.crl {
        MethodOutcome::Revoked { at, reason, .. } => {
            assert_eq!(at, Some(revoked_at));
            assert_eq!(reason.as_deref(), Some("superseded"));
        }
        other => panic!("expected revoked, got {other:?}"),
    }
    assert_eq!(
        server.hits("/ca.crl"),
        1,
        "the second check used the cached CRL"
    );
    let stats = checker.stats();
    assert_eq!((stats.crl.cache_misses, stats.crl.cache_hits), (1, 1));
    assert_eq!(stats.crl.fetch_ok, 1);
}

#[tokio::test]
async fn a_pem_crl_is_accepted() {
    let ca = TestCa::new("PEM CRL CA");
    let der = ca.crl(NOW - hours(1), NOW + hours(23), &[]);
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let pem = format!("-----BEGIN X509 CRL-----\n{b64}\n-----END X509 CRL-----\n");
    let server = TestServer::fixed(Reply::crl(pem.into_bytes())).await;
    let cert = ca.leaf(SERIAL, &[server.url("/ca.crl")], &[]);
    let evidence = checker(test_config())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    assert_good(&evidence.crl);
}

#[tokio::test]
async fn a_crl_signed_by_another_ca_with_the_same_name_is_refused() {
    let ca = TestCa::new("Twin CA");
    let twin = TestCa::new("Twin CA");
    let server =
        TestServer::fixed(Reply::crl(twin.crl(NOW - hours(1), NOW + hours(23), &[]))).await;
    let cert = ca.leaf(SERIAL, &[server.url("/ca.crl")], &[]);
    let evidence = checker(test_config())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    assert!(
        reason(&evidence.crl).contains("signature does not verify"),
        "{:?}",
        evidence.crl
    );
}

#[tokio::test]
async fn an_issuer_without_crl_sign_cannot_vouch_with_a_crl() {
    let ca = TestCa::with_key_usages(
        "No CRL Sign CA",
        vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ],
    );
    // rcgen will not sign a CRL for an issuer without cRLSign; a CRL of another CA with the
    // same name stands in. The keyUsage check comes before the signature check.
    let crl_params_ca = TestCa::new("No CRL Sign CA");
    let crl = crl_params_ca.crl(NOW - hours(1), NOW + hours(23), &[]);
    let server = TestServer::fixed(Reply::crl(crl)).await;
    let cert = ca.leaf(SERIAL, &[server.url("/ca.crl")], &[]);
    let evidence = checker(test_config())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    assert!(
        reason(&evidence.crl).contains("no cRLSign"),
        "{:?}",
        evidence.crl
    );
}

#[tokio::test]
async fn a_stale_crl_is_used_within_the_grace_and_refused_beyond_it() {
    let ca = TestCa::new("Stale CRL CA");
    let next_update = NOW - hours(1);
    let crl = ca.crl(NOW - hours(25), next_update, &[]);
    let server = TestServer::fixed(Reply::crl(crl)).await;
    let cert = ca.leaf(SERIAL, &[server.url("/ca.crl")], &[]);
    let config = RevocationConfig {
        crl_grace_secs: 2 * 3600,
        ..test_config()
    };

    let within = checker(config.clone())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    assert_good(&within.crl);

    let beyond = checker(config)
        .evidence(&cert, Some(&ca.cert), NOW + hours(2))
        .await;
    assert!(reason(&beyond.crl).contains("stale"), "{:?}", beyond.crl);
}

#[tokio::test]
async fn a_failed_refresh_keeps_the_last_good_crl_until_next_update_plus_grace() {
    let ca = Arc::new(TestCa::new("Refresh CA"));
    let this_update = NOW;
    let next_update = NOW + hours(4);
    let crl = ca.crl(this_update, next_update, &[]);
    let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = Arc::clone(&served);
    // The first download succeeds; the distribution point then fails.
    let server = TestServer::start(Arc::new(move |_: &Method, _: &str, _: &[u8]| {
        if count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            Reply::crl(crl.clone())
        } else {
            Reply::status(503)
        }
    }))
    .await;
    let cert = ca.leaf(SERIAL, &[server.url("/ca.crl")], &[]);
    let config = RevocationConfig {
        crl_grace_secs: 3600,
        crl_refresh_interval_secs: 24 * 3600,
        ..test_config()
    };
    let checker = checker(config);

    assert_good(&checker.evidence(&cert, Some(&ca.cert), NOW).await.crl);
    // Three quarters of the window have passed: a refresh starts in the background and fails.
    assert_good(
        &checker
            .evidence(
                &cert,
                Some(&ca.cert),
                NOW + hours(3) + time::Duration::minutes(30),
            )
            .await
            .crl,
    );
    until(
        "the background refresh failed",
        Duration::from_secs(2),
        || checker.stats().crl.refresh_failed > 0,
    )
    .await;
    assert_eq!(checker.stats().crl.refresh_failed, 1);
    // After nextUpdate, within the grace: still the cached CRL.
    assert_good(
        &checker
            .evidence(
                &cert,
                Some(&ca.cert),
                next_update + time::Duration::minutes(30),
            )
            .await
            .crl,
    );
    // Beyond the grace: the CRL is dropped, the download fails, the method fails.
    let beyond = checker
        .evidence(&cert, Some(&ca.cert), next_update + hours(2))
        .await;
    assert!(reason(&beyond.crl).contains("HTTP 503"), "{:?}", beyond.crl);
}

#[tokio::test]
async fn a_certificate_naming_both_methods_gets_both_answers() {
    let ca = Arc::new(TestCa::new("Both Methods CA"));
    let crl = ca.crl(NOW - hours(1), NOW + hours(23), &[]);
    let ocsp = ocsp_response(&ca, OcspSpec::good(SERIAL));
    let server = TestServer::start(Arc::new(
        move |method: &Method, path: &str, _: &[u8]| match (method.as_str(), path) {
            ("GET", "/ca.crl") => Reply::crl(crl.clone()),
            ("POST", "/ocsp") => Reply::ocsp(ocsp.clone()),
            _ => Reply::status(404),
        },
    ))
    .await;
    let cert = ca.leaf(SERIAL, &[server.url("/ca.crl")], &[server.url("/ocsp")]);
    let evidence = checker(test_config())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    assert_good(&evidence.crl);
    assert_good(&evidence.ocsp);
}

#[tokio::test]
async fn a_redirect_to_another_host_is_not_followed() {
    let elsewhere = TestServer::fixed(Reply::status(200)).await;
    let target = format!("http://localhost:{}/ocsp", elsewhere.addr.port());
    let redirect = Reply {
        location: Some(target.clone()),
        ..Reply::status(302)
    };
    let outcome = ocsp_outcome(move |_| redirect).await;
    let r = reason(&outcome);
    assert!(r.contains("redirects are not followed"), "{r}");
    assert!(r.contains(&target), "the reason names the target: {r}");
    assert_eq!(elsewhere.total_hits(), 0);
}

#[tokio::test]
async fn loopback_destinations_are_refused_unless_configured() {
    let ca = TestCa::new("Loopback CA");
    let server = TestServer::fixed(Reply::ocsp(ocsp_response(&ca, OcspSpec::good(SERIAL)))).await;
    let by_ip = server.url("/ocsp");
    let by_name = format!("http://localhost:{}/ocsp", server.addr.port());
    let public_only = RevocationConfig {
        allow_destinations: AllowDestinations::Public,
        ..test_config()
    };
    for url in [&by_ip, &by_name] {
        let cert = ca.leaf(SERIAL, &[], std::slice::from_ref(url));
        let evidence = checker(public_only.clone())
            .evidence(&cert, Some(&ca.cert), NOW)
            .await;
        let r = reason(&evidence.ocsp);
        assert!(r.contains("a loopback address"), "{url}: {r}");
        assert!(r.contains("allow_destinations = \"public\""), "{url}: {r}");
    }
    assert_eq!(server.total_hits(), 0, "nothing reached the server");

    let cert = ca.leaf(SERIAL, &[], &[by_name]);
    let evidence = checker(test_config())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    assert_good(&evidence.ocsp);
}

#[tokio::test]
async fn schemes_other_than_http_and_https_are_refused() {
    let ca = TestCa::new("Scheme CA");
    let cert = ca.leaf(
        SERIAL,
        &["ldap://127.0.0.1/cn=crl".to_owned()],
        &["file:///etc/passwd".to_owned()],
    );
    let evidence = checker(test_config())
        .evidence(&cert, Some(&ca.cert), NOW)
        .await;
    assert!(reason(&evidence.crl).contains("scheme `ldap` is not allowed"));
    assert!(reason(&evidence.ocsp).contains("scheme `file` is not allowed"));
}

#[tokio::test]
async fn an_unknown_issuer_triggers_no_fetch_at_all() {
    let ca = TestCa::new("Unknown CA");
    let server = TestServer::fixed(Reply::status(200)).await;
    let cert = ca.leaf(SERIAL, &[server.url("/crl")], &[server.url("/ocsp")]);
    let checker = checker(test_config());
    let evidence = checker.evidence(&cert, None, NOW).await;
    assert_eq!(reason(&evidence.crl), UNKNOWN_ISSUER);
    assert_eq!(reason(&evidence.ocsp), UNKNOWN_ISSUER);
    assert_eq!(server.total_hits(), 0);
    let stats = checker.stats();
    assert_eq!((stats.ocsp, stats.crl, stats.in_flight), Default::default());
}

#[tokio::test]
async fn an_issuer_that_did_not_issue_the_certificate_triggers_no_fetch() {
    let ca = TestCa::new("Issuing CA");
    let other = TestCa::new("Some Other CA");
    let server = TestServer::fixed(Reply::status(200)).await;
    let cert = ca.leaf(SERIAL, &[server.url("/crl")], &[server.url("/ocsp")]);
    let evidence = checker(test_config())
        .evidence(&cert, Some(&other.cert), NOW)
        .await;
    assert_eq!(reason(&evidence.crl), ISSUER_MISMATCH);
    assert_eq!(reason(&evidence.ocsp), ISSUER_MISMATCH);
    assert_eq!(server.total_hits(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_checks_of_one_uncached_certificate_make_one_request_per_url() {
    let ca = Arc::new(TestCa::new("Coalescing CA"));
    let crl = ca.crl(NOW - hours(1), NOW + hours(23), &[]);
    let ocsp = ocsp_response(&ca, OcspSpec::good(SERIAL));
    // Answers are held until every caller has started its check (and the first fetch has
    // reached the server), so that every caller arrives while the first fetch runs.
    let gate = Gate::new();
    let held = gate.clone();
    let server = TestServer::start(Arc::new(
        move |method: &Method, path: &str, _: &[u8]| match (method.as_str(), path) {
            ("GET", "/ca.crl") => Reply::crl(crl.clone()).held_by(&held),
            ("POST", "/ocsp") => Reply::ocsp(ocsp.clone()).held_by(&held),
            _ => Reply::status(404),
        },
    ))
    .await;
    let cert = Arc::new(ca.leaf(SERIAL, &[server.url("/ca.crl")], &[server.url("/ocsp")]));
    let checker = checker(test_config());
    let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..100 {
        let checker = checker.clone();
        let cert = Arc::clone(&cert);
        let ca = Arc::clone(&ca);
        let started = Arc::clone(&started);
        tasks.push(tokio::spawn(async move {
            started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            checker.evidence(&cert, Some(&ca.cert), NOW).await
        }));
    }
    until(
        "every caller started and a fetch arrived",
        Duration::from_secs(10),
        || started.load(std::sync::atomic::Ordering::SeqCst) == 100 && server.total_hits() >= 1,
    )
    .await;
    gate.open();
    for task in tasks {
        let evidence = task.await.expect("task");
        assert_good(&evidence.crl);
        assert_good(&evidence.ocsp);
    }
    assert_eq!(server.hits("/ca.crl"), 1);
    assert_eq!(server.hits("/ocsp"), 1);
    let stats = checker.stats();
    assert_eq!(stats.ocsp.cache_misses, 1);
    assert_eq!(stats.ocsp.cache_hits, 99);
    assert_eq!(stats.crl.cache_misses, 1);
    assert_eq!(stats.crl.cache_hits, 99);
}

#[tokio::test]
async fn a_cached_ocsp_answer_is_fetched_again_once_it_is_no_longer_current() {
    let (ca, server, cert) =
        ocsp_only(|ca| Reply::ocsp(ocsp_response(ca, OcspSpec::good(SERIAL)))).await;
    let checker = checker(test_config());
    assert_good(&checker.evidence(&cert, Some(&ca.cert), NOW).await.ocsp);
    assert_good(&checker.evidence(&cert, Some(&ca.cert), NOW).await.ocsp);
    assert_eq!(server.hits("/ocsp"), 1);
    // Two days later the cached answer (nextUpdate NOW + 24 h) is not used; the responder
    // still serves the same, now stale, response.
    let later = checker
        .evidence(&cert, Some(&ca.cert), NOW + hours(48))
        .await;
    assert!(reason(&later.ocsp).contains("stale"), "{:?}", later.ocsp);
    assert_eq!(server.hits("/ocsp"), 2);
}

#[tokio::test]
async fn failures_are_remembered_for_the_failure_ttl() {
    let ca = TestCa::new("Flaky CA");
    let server = TestServer::fixed(Reply::status(500)).await;
    let cert = ca.leaf(SERIAL, &[], &[server.url("/ocsp")]);
    let checker = checker(RevocationConfig {
        failure_ttl_secs: 60,
        ..test_config()
    });
    for _ in 0..3 {
        let evidence = checker.evidence(&cert, Some(&ca.cert), NOW).await;
        assert!(reason(&evidence.ocsp).contains("HTTP 500"));
    }
    assert_eq!(server.hits("/ocsp"), 1);
    assert_eq!(checker.stats().ocsp.fetch_failed, 1);
}

#[tokio::test]
async fn the_revoked_rustcrypto_vector_served_over_http_gives_revoked_at_its_time() {
    let dir = "ocsp/rustcrypto-x509-ocsp";
    let ca = PspCertificate::from_der(read(&data(&format!("{dir}/rsa-2048-sha256-ca.der"))))
        .expect("CA");
    let body = read(&data(&format!(
        "{dir}/rsa-2048-sha256-revoked-ocsp-res.der"
    )));
    let server = TestServer::fixed(Reply::ocsp(body)).await;
    let mut cert = PspCertificate::from_der(read(&data(&format!("{dir}/rsa-2048-sha256-crt.der"))))
        .expect("leaf");
    // The response is about serial 03 (a certificate not in the vectors); only the serial
    // and the responder URL matter to the OCSP check.
    cert.serial = vec![0x03];
    cert.ocsp_urls = vec![server.url("/ocsp")];
    let evidence = checker(test_config())
        .evidence(&cert, Some(&ca), at("2023-11-05T12:00:00Z"))
        .await;
    match evidence.ocsp {
        MethodOutcome::Revoked { at: when, .. } => {
            assert_eq!(when, Some(at("2023-11-05T01:09:45Z")));
        }
        other => panic!("expected revoked, got {other:?}"),
    }
}

#[tokio::test]
async fn an_ocsp_answer_is_reused_only_for_the_responder_that_gave_it() {
    // Same issuer, same serial, another responder URL (a tampered copy naming a responder of
    // the attacker's choosing): the answer cached for the first is not used for the second,
    // and the second's own answer does not replace the first's.
    let ca = TestCa::new("OCSP Cache Key CA");
    let genuine = TestServer::fixed(Reply::ocsp(ocsp_response(&ca, OcspSpec::good(SERIAL)))).await;
    let other = TestServer::fixed(Reply::ocsp(ocsp_response(
        &ca,
        OcspSpec::revoked(SERIAL, at("2025-03-01T10:00:00Z"), CrlReason::KeyCompromise),
    )))
    .await;
    let checker = checker(test_config());
    let first = ca.leaf(SERIAL, &[], &[genuine.url("/ocsp")]);
    let second = ca.leaf(SERIAL, &[], &[other.url("/ocsp")]);
    assert_good(&checker.evidence(&first, Some(&ca.cert), NOW).await.ocsp);
    let e = checker.evidence(&second, Some(&ca.cert), NOW).await;
    assert!(
        matches!(e.ocsp, MethodOutcome::Revoked { .. }),
        "asked its own responder: {:?}",
        e.ocsp
    );
    assert_good(&checker.evidence(&first, Some(&ca.cert), NOW).await.ocsp);
    assert_eq!(
        genuine.hits("/ocsp"),
        1,
        "the first answer was cached for its own key"
    );
    assert_eq!(other.hits("/ocsp"), 1);
}

/// A responder that holds each request 300 ms, then answers 503 and closes: how many
/// requests it held at once at most, and how many it got.
async fn slow_counting_server() -> (
    std::net::SocketAddr,
    Arc<std::sync::Mutex<(usize, usize, usize)>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    // (open now, most open at once, total)
    let counts = Arc::new(std::sync::Mutex::new((0usize, 0usize, 0usize)));
    let shared = counts.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let counts = shared.clone();
            tokio::spawn(async move {
                {
                    let mut c = counts.lock().expect("lock");
                    c.0 += 1;
                    c.1 = c.1.max(c.0);
                    c.2 += 1;
                }
                let mut buf = [0u8; 4096];
                let _ =
                    tokio::time::timeout(Duration::from_millis(100), stream.read(&mut buf)).await;
                tokio::time::sleep(Duration::from_millis(300)).await;
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 503 Busy\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
                let _ = stream.shutdown().await;
                counts.lock().expect("lock").0 -= 1;
            });
        }
    });
    (addr, counts)
}

/// 24 new certificates at once, each naming its own CRL and OCSP URL on a slow responder,
/// under a cap of 4 downloads: the responder never holds more than 4 at once (and does hold
/// 4, so the cap is what limits), every method fails closed, the misses that found no slot
/// within their method's timeout say so, and that refusal is not cached (the next lookup
/// downloads). On tokio's paused clock: the responder's 300 ms and the 2 s timeouts pass
/// without being waited for, and always in the same order.
#[tokio::test(start_paused = true)]
async fn downloads_in_flight_never_exceed_the_cap_and_the_rest_fail_closed_uncached() {
    let (addr, counts) = slow_counting_server().await;
    let ca = TestCa::new("Busy CA");
    let checker = checker(RevocationConfig {
        ocsp_timeout_ms: 2_000,
        crl_timeout_ms: 2_000,
        max_fetches_in_flight: 4,
        ..test_config()
    });
    let certs: Vec<PspCertificate> = (0..24u8)
        .map(|i| {
            ca.leaf(
                &[0x11, i],
                &[format!("http://{addr}/crl/{i}")],
                &[format!("http://{addr}/ocsp/{i}")],
            )
        })
        .collect();
    let lookups = certs
        .iter()
        .map(|cert| checker.evidence(cert, Some(&ca.cert), NOW));
    let results = futures_util::future::join_all(lookups).await;
    let (_, most_at_once, total) = *counts.lock().expect("lock");
    assert_eq!(
        most_at_once, 4,
        "the responder held at most the cap, and reached it"
    );
    let mut busy = Vec::new();
    for (cert, evidence) in certs.iter().zip(&results) {
        for outcome in [&evidence.ocsp, &evidence.crl] {
            let r = reason(outcome);
            if r.contains("download slots stayed taken") {
                busy.push(cert);
            } else {
                assert!(r.contains("503"), "{r}");
            }
        }
    }
    assert!(
        !busy.is_empty(),
        "48 downloads of 300 ms under a cap of 4 cannot all fit in 2 s"
    );
    assert_eq!(
        busy.len() + total,
        48,
        "every download either ran or was refused a slot"
    );
    let stats = checker.stats();
    assert_eq!(stats.ocsp.busy + stats.crl.busy, busy.len() as u64);
    assert_eq!(stats.in_flight, 0, "every slot is back");

    // Not cached: the same certificate downloads this time.
    let before = counts.lock().expect("lock").2;
    let _ = checker.evidence(busy[0], Some(&ca.cert), NOW).await;
    assert!(
        counts.lock().expect("lock").2 > before,
        "the busy refusal was not cached"
    );
}
