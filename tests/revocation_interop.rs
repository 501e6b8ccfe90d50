//! Interoperability: the sandbox responder (ours, serving the sandbox CAs from `certs/`) read
//! by our checker, and a real OCSP responder no one here wrote (`openssl ocsp`) answering our
//! requests.

#[path = "revocation_support/mod.rs"]
mod support;

mod common;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use hyper::http::StatusCode;
use psp_cert::cert::PspCertificate;
use psp_check::check::{self, CheckInput, MethodOutcome};
use psp_sandbox::SandboxResponder;
use psp_sandbox::pki::RevocationReason;
use psp_service::revocation::crl::{CrlIndex, CrlStatus};
use psp_service::revocation::ocsp::{self, OcspError, OcspPolicy, OcspStatus, ResponderError};
use psp_service::revocation::{CrlReason, RevocationChecker, RevocationConfig};
use support::*;
use time::OffsetDateTime;

fn certs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("certs")
}

fn manifest() -> psp_sandbox::Manifest {
    psp_sandbox::load_manifest(&certs_dir().join("sandbox-pki.json")).expect("manifest")
}

fn sandbox_cert(rel: &str) -> PspCertificate {
    load_cert(&certs_dir().join(rel))
}

fn psp(scenario: &str) -> (PspCertificate, psp_sandbox::pki::PspEntry) {
    let entry = manifest().psp(scenario).expect("scenario").clone();
    (sandbox_cert(&entry.cert), entry)
}

fn ca_cert(name: &str) -> PspCertificate {
    sandbox_cert(&format!("ca/{name}.pem"))
}

fn responder() -> SandboxResponder {
    SandboxResponder::load(&certs_dir()).expect("the sandbox responder loads")
}

fn ok_body(reply: Option<(StatusCode, &'static str, Vec<u8>)>, content_type: &str) -> Vec<u8> {
    let (status, ct, body) = reply.expect("a sandbox path");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ct, content_type);
    body
}

// ---- The sandbox responder, called directly ----------------------------------------------

#[test]
fn the_sandbox_crl_lists_the_revoked_scenario_with_its_time_and_reason() {
    let now = NOW;
    let crl = ok_body(
        responder().respond(&Method::GET, "/sandbox/crl/qtsp-issuing.crl", b"", now),
        "application/pkix-crl",
    );
    let index = CrlIndex::parse(&crl, &ca_cert("qtsp-issuing")).expect("signed by the CA");
    index
        .check_current(now, Duration::ZERO, Duration::ZERO)
        .expect("current");
    assert_eq!(index.next_update(), now + time::Duration::days(1));

    let (revoked, entry) = psp("revoked");
    assert_eq!(
        entry.revocation_reason,
        Some(RevocationReason::KeyCompromise)
    );
    match index.status(&revoked) {
        Ok(CrlStatus::Revoked(listed)) => {
            assert_eq!(Some(listed.at), entry.revocation_time);
            assert_eq!(listed.reason, Some(CrlReason::KeyCompromise));
        }
        other => panic!("expected revoked, got {other:?}"),
    }
    let (valid, _) = psp("valid");
    assert_eq!(index.status(&valid), Ok(CrlStatus::NotListed));
    assert_eq!(index.len(), 1, "only `revoked` is revoked");
}

#[test]
fn the_sandbox_crl_is_signed_again_after_an_hour_and_reused_before() {
    let responder = responder();
    let get = |t: OffsetDateTime| {
        ok_body(
            responder.respond(&Method::GET, "/sandbox/crl/qtsp-issuing.crl", b"", t),
            "application/pkix-crl",
        )
    };
    let first = get(NOW);
    assert_eq!(get(NOW + time::Duration::minutes(10)), first);
    let later = get(NOW + hours(2));
    assert_ne!(later, first);
    let index = CrlIndex::parse(&later, &ca_cert("qtsp-issuing")).expect("verifies");
    assert_eq!(index.this_update(), NOW + hours(2));
}

#[test]
fn the_sandbox_ocsp_responder_answers_good_revoked_and_unknown() {
    let responder = responder();
    let issuer = ca_cert("qtsp-issuing");
    let ask = |serial: &[u8]| {
        let request = ocsp::build_request(&issuer, serial, None).expect("request");
        let body = ok_body(
            responder.respond(&Method::POST, "/sandbox/ocsp/qtsp-issuing", &request, NOW),
            "application/ocsp-response",
        );
        ocsp::verify_response(&body, &issuer, serial, None, NOW, &OcspPolicy::default())
    };
    let (valid, _) = psp("valid");
    assert_eq!(ask(&valid.serial).map(|a| a.status()), Ok(OcspStatus::Good));
    let (revoked, entry) = psp("revoked");
    assert_eq!(
        ask(&revoked.serial).map(|a| a.status()),
        Ok(OcspStatus::Revoked {
            at: entry.revocation_time.expect("time"),
            reason: Some(CrlReason::KeyCompromise)
        })
    );
    assert_eq!(ask(&[0x42, 0x42]), Err(OcspError::UnknownStatus));
}

/// The embedding attack's break 3, OCSP (docs/attacks/embedding.md): the sandbox
/// responder's verified "good" answer about `valid` is not evidence about `revoked`, whether
/// turned into an outcome for `revoked` (`from_ocsp` checks the serial) or, as an outcome
/// for `valid`, handed to `revoked`'s check (the proof names its certificate).
#[test]
fn an_ocsp_answer_about_another_certificate_is_not_relied_on() {
    let responder = responder();
    let issuer = ca_cert("qtsp-issuing");
    let (valid, _) = psp("valid");
    let (revoked, _) = psp("revoked");
    let request = ocsp::build_request(&issuer, &valid.serial, None).expect("request");
    let body = ok_body(
        responder.respond(&Method::POST, "/sandbox/ocsp/qtsp-issuing", &request, NOW),
        "application/ocsp-response",
    );
    let answer = ocsp::verify_response(
        &body,
        &issuer,
        &valid.serial,
        None,
        NOW,
        &OcspPolicy::default(),
    )
    .expect("a verified answer about valid");
    let when = (NOW, Duration::from_secs(60));
    assert!(matches!(
        MethodOutcome::from_ocsp(&answer, &revoked, "sandbox", when),
        MethodOutcome::Failed { .. }
    ));
    let about_valid = MethodOutcome::from_ocsp(&answer, &valid, "sandbox", when);
    assert!(
        matches!(about_valid, MethodOutcome::Good { .. }),
        "{about_valid:?}"
    );

    let trust = psp_service::trust::TrustList::from_pem(
        psp_service::trust::Source::configured(
            "sandbox",
            psp_service::trust::QtspSource::Eidas,
            &["XX".parse().expect("country")],
        ),
        &std::fs::read(certs_dir().join("ca/qtsp-issuing.pem")).expect("CA"),
    )
    .expect("trust");
    let registers = psp_service::register::RegisterSnapshot::empty();
    let check_with = |certificate: &PspCertificate, ocsp: MethodOutcome| {
        let mut evidence = psp_check::revocation::RevocationEvidence::not_checked("not asked");
        evidence.ocsp = ocsp;
        let input = CheckInput {
            certificate,
            intermediates: &[],
            jurisdiction: "XX".parse().expect("country"),
            now: NOW,
        };
        check::check(&input, check::Snapshots::new(&trust, &registers), &evidence)
            .validity()
            .not_revoked
    };
    assert!(
        check_with(&valid, about_valid.clone()),
        "the honest use holds"
    );
    assert!(
        !check_with(&revoked, about_valid),
        "valid's answer is not revoked's"
    );
}

#[test]
fn the_sandbox_ocsp_responder_refuses_other_cas_and_garbage_and_echoes_nonces() {
    let responder = responder();
    let (obie, _) = psp("obie-valid");
    let foreign = ocsp::build_request(&ca_cert("obie-issuing"), &obie.serial, None).expect("req");
    let body = ok_body(
        responder.respond(&Method::POST, "/sandbox/ocsp/qtsp-issuing", &foreign, NOW),
        "application/ocsp-response",
    );
    assert_eq!(
        ocsp::parse_response(&body),
        Err(OcspError::Responder(ResponderError::Unauthorized))
    );
    let body = ok_body(
        responder.respond(&Method::POST, "/sandbox/ocsp/qtsp-issuing", b"garbage", NOW),
        "application/ocsp-response",
    );
    assert_eq!(
        ocsp::parse_response(&body),
        Err(OcspError::Responder(ResponderError::MalformedRequest))
    );

    let issuer = ca_cert("qtsp-issuing");
    let (valid, _) = psp("valid");
    let nonce = [9u8; 32];
    let request = ocsp::build_request(&issuer, &valid.serial, Some(&nonce)).expect("request");
    let body = ok_body(
        responder.respond(&Method::POST, "/sandbox/ocsp/qtsp-issuing", &request, NOW),
        "application/ocsp-response",
    );
    let info = ocsp::parse_response(&body).expect("parses");
    assert_eq!(info.nonce.as_deref(), Some(&nonce[..]));
    ocsp::verify_response(
        &body,
        &issuer,
        &valid.serial,
        Some(&nonce),
        NOW,
        &OcspPolicy::default(),
    )
    .expect("verifies with the nonce");
}

#[test]
fn the_ecdsa_sandbox_ca_signs_crls_and_ocsp_responses_that_verify() {
    let responder = responder();
    let issuer = ca_cert("qtsp-ecdsa-issuing");
    let (ecdsa, _) = psp("ecdsa");
    let crl = ok_body(
        responder.respond(
            &Method::GET,
            "/sandbox/crl/qtsp-ecdsa-issuing.crl",
            b"",
            NOW,
        ),
        "application/pkix-crl",
    );
    let index = CrlIndex::parse(&crl, &issuer).expect("ECDSA CRL verifies");
    assert_eq!(index.status(&ecdsa), Ok(CrlStatus::NotListed));
    let request = ocsp::build_request(&issuer, &ecdsa.serial, None).expect("request");
    let body = ok_body(
        responder.respond(
            &Method::POST,
            "/sandbox/ocsp/qtsp-ecdsa-issuing",
            &request,
            NOW,
        ),
        "application/ocsp-response",
    );
    let answer = ocsp::verify_response(
        &body,
        &issuer,
        &ecdsa.serial,
        None,
        NOW,
        &OcspPolicy::default(),
    )
    .expect("ECDSA response verifies");
    assert_eq!(answer.status(), OcspStatus::Good);
}

#[test]
fn the_sandbox_serves_ca_certificates_and_nothing_else() {
    let responder = responder();
    let der = ok_body(
        responder.respond(&Method::GET, "/sandbox/ca/qtsp-root.crt", b"", NOW),
        "application/pkix-cert",
    );
    assert_eq!(der, ca_cert("qtsp-root").der);
    assert!(
        responder
            .respond(&Method::GET, "/healthz", b"", NOW)
            .is_none()
    );
    assert!(
        responder
            .respond(&Method::GET, "/sandbox/other", b"", NOW)
            .is_none()
    );
    let (status, _, _) = responder
        .respond(&Method::GET, "/sandbox/crl/nobody.crl", b"", NOW)
        .expect("a sandbox path");
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = responder
        .respond(&Method::GET, "/sandbox/ocsp/qtsp-issuing", b"", NOW)
        .expect("a sandbox path");
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

// ---- The sandbox responder behind HTTP, read by the checker ------------------------------

/// The sandbox certificate with its revocation URLs moved from the admin listener's fixed
/// port to the test server's.
fn pointed_at(mut cert: PspCertificate, server: &TestServer) -> PspCertificate {
    let base = psp_sandbox::pki::BASE_URL;
    let local = server.url("/sandbox");
    for url in cert.crl_urls.iter_mut().chain(cert.ocsp_urls.iter_mut()) {
        *url = url.replacen(base, &local, 1);
    }
    cert
}

#[tokio::test]
async fn the_checker_reads_the_sandbox_responder_over_http_and_the_check_reports_it() {
    let responder = Arc::new(responder());
    let server =
        TestServer::start(Arc::new(
            move |method: &Method, path: &str, body: &[u8]| match responder.respond(
                method,
                path,
                body,
                OffsetDateTime::now_utc(),
            ) {
                Some((status, content_type, body)) => Reply {
                    status: status.as_u16(),
                    ..Reply::ok(content_type, body)
                },
                None => Reply::status(404),
            },
        ))
        .await;
    let trust = common::sandbox_trust();
    let checker = RevocationChecker::new(&test_config()).expect("checker");
    let now = OffsetDateTime::now_utc();

    for (scenario, expect_revoked) in [("valid", false), ("revoked", true), ("ecdsa", false)] {
        let (cert, _) = psp(scenario);
        let cert = pointed_at(cert, &server);
        let input = CheckInput {
            certificate: &cert,
            intermediates: &[],
            jurisdiction: common::cc("XX"),
            now,
        };
        let resolution = check::resolve_issuer(&input, &trust);
        let issuer = resolution
            .revocation_issuer()
            .and_then(|k| k.certificate(&trust, &[]));
        assert!(
            issuer.is_some(),
            "{scenario}: the sandbox issuer is trusted"
        );
        let evidence = checker.evidence(&cert, issuer, now).await;
        for outcome in [&evidence.crl, &evidence.ocsp] {
            match (outcome, expect_revoked) {
                (MethodOutcome::Good { .. }, false) => {}
                (MethodOutcome::Revoked { reason, .. }, true) => {
                    assert_eq!(reason.as_deref(), Some("keyCompromise"), "{scenario}");
                }
                (other, _) => panic!("{scenario}: {other:?}"),
            }
        }
        let registers = psp_service::register::RegisterSnapshot::empty();
        let snapshots = check::Snapshots {
            trust: &trust,
            registers: &registers,
        };
        let report = check::report(&input, snapshots, &resolution, &evidence.clone().into());
        assert_eq!(report.validity().not_revoked, !expect_revoked, "{scenario}");
        assert!(
            report.errors().is_empty(),
            "{scenario}: {:?}",
            report.errors()
        );
    }
}

// ---- A real OCSP responder: openssl ocsp --------------------------------------------------

/// `openssl ocsp` as a responder, killed when dropped.
struct OpensslResponder {
    child: Child,
    port: u16,
}

impl Drop for OpensslResponder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Requests the responder serves before it exits on its own (its bounded lifetime).
const OPENSSL_REQUESTS: &str = "8";
/// How long we wait for openssl to report its listening port.
const OPENSSL_START_TIMEOUT: Duration = Duration::from_secs(10);

fn start_openssl(dir: &Path) -> OpensslResponder {
    let mut child = Command::new("openssl")
        .current_dir(dir)
        .args([
            "ocsp",
            "-index",
            "index.txt",
            "-port",
            "0",
            "-rsigner",
            "responder.pem",
            "-rkey",
            "responder.key",
            "-CA",
            "ca.pem",
            "-nmin",
            "10",
            "-nrequest",
            OPENSSL_REQUESTS,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the openssl CLI runs (install openssl; .ci/run does)");
    // openssl prints `ACCEPT [::]:<port> PID=<pid>` once listening (port 0: the kernel picks).
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Keep reading until openssl exits, so it never writes into a closed pipe.
        for line in BufReader::new(stdout).lines().take(10_000) {
            let Ok(line) = line else { return };
            if let Some(rest) = line.strip_prefix("ACCEPT ") {
                let port = rest
                    .split_whitespace()
                    .next()
                    .and_then(|addr| addr.rsplit(':').next())
                    .and_then(|p| p.parse::<u16>().ok());
                let _ = tx.send(port);
            }
        }
    });
    let port = rx.recv_timeout(OPENSSL_START_TIMEOUT).ok().flatten();
    let mut responder = OpensslResponder { child, port: 0 };
    responder.port = port.expect("openssl ocsp reported its listening port");
    responder
}

/// openssl's index.txt time format.
fn index_time(t: OffsetDateTime) -> String {
    let f = time::macros::format_description!(
        "[year repr:last_two][month][day][hour][minute][second]Z"
    );
    t.format(&f).expect("time")
}

#[tokio::test]
async fn openssl_ocsp_answers_our_requests_and_we_verify_its_answers() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "openssl-ocsp-{}-{}",
        std::process::id(),
        OffsetDateTime::now_utc().unix_timestamp_nanos()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");

    let ca = TestCa::new("OpenSSL Interop CA");
    let (_, responder_key, responder_pem) = ca.responder("OpenSSL Interop Responder", true);
    let good: &[u8] = &[0x12, 0x34, 0x56, 0x78];
    let revoked: &[u8] = &[0x12, 0x34, 0x56, 0x79];
    let revoked_at = time::macros::datetime!(2025-02-03 04:05:06 UTC);
    let expiry = index_time(time::macros::datetime!(2039-12-31 0:00 UTC));
    let index = format!(
        "V\t{expiry}\t\t{}\tunknown\t/CN=good\nR\t{expiry}\t{},keyCompromise\t{}\tunknown\t/CN=revoked\n",
        hex(good),
        index_time(revoked_at),
        hex(revoked),
    );
    std::fs::write(dir.join("index.txt"), index).expect("index");
    std::fs::write(dir.join("ca.pem"), &ca.cert_pem).expect("ca");
    std::fs::write(dir.join("responder.pem"), &responder_pem).expect("responder cert");
    std::fs::write(dir.join("responder.key"), responder_key.serialize_pem()).expect("key");

    let openssl = start_openssl(&dir);
    let url = format!("http://127.0.0.1:{}/", openssl.port);
    let checker = RevocationChecker::new(&RevocationConfig {
        ocsp_nonce: true,
        ..test_config()
    })
    .expect("checker");
    let now = OffsetDateTime::now_utc();

    let good_cert = ca.leaf(good, &[], std::slice::from_ref(&url));
    let evidence = checker.evidence(&good_cert, Some(&ca.cert), now).await;
    match &evidence.ocsp {
        MethodOutcome::Good { evidence, .. } => {
            assert!(
                evidence.contains("delegated responder CN=OpenSSL Interop Responder"),
                "{evidence}"
            );
        }
        other => panic!("openssl's good answer: {other:?}"),
    }

    let revoked_cert = ca.leaf(revoked, &[], std::slice::from_ref(&url));
    let evidence = checker.evidence(&revoked_cert, Some(&ca.cert), now).await;
    match &evidence.ocsp {
        MethodOutcome::Revoked { at, reason, .. } => {
            assert_eq!(*at, Some(revoked_at));
            assert_eq!(reason.as_deref(), Some("keyCompromise"));
        }
        other => panic!("openssl's revoked answer: {other:?}"),
    }

    let stranger = ca.leaf(&[0x55], &[], std::slice::from_ref(&url));
    let evidence = checker.evidence(&stranger, Some(&ca.cert), now).await;
    match &evidence.ocsp {
        MethodOutcome::Failed { reason } => assert!(reason.contains("status unknown"), "{reason}"),
        other => panic!("openssl's unknown answer: {other:?}"),
    }

    drop(openssl);
    let _ = std::fs::remove_dir_all(&dir);
}
