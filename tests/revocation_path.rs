//! The revocation of every certificate of the verified path below the trust-list issuer
//! (RFC 5280 section 6.1.3 (a)(3), ETSI EN 319 412), through the checking service against
//! real HTTP responders on `127.0.0.1:0`: an issuing CA revoked by its root stops its PSPs, a
//! CA whose status cannot be established fails closed naming it, and a CRL signed by a
//! separate CRL-signing key of the CA is used once that key's certificate verifies to the
//! same root, and only while that certificate is not revoked (RFC 5280 section 6.3.3 (f)).

mod common;
#[path = "revocation_support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hyper::Method;
use psp_cert::cert::PspCertificate;
use psp_service::service::CheckService;
use rcgen::{KeyUsagePurpose, RevocationReason};
use support::*;

const ROOT_CRL: &str = "/root.crl";
const SUB_CRL: &str = "/sub.crl";

/// A responder serving the CRLs in `crls` by path (404 for any other), replaceable.
async fn crl_server() -> (TestServer, Arc<Mutex<HashMap<String, Vec<u8>>>>) {
    let crls: Arc<Mutex<HashMap<String, Vec<u8>>>> = Arc::default();
    let served = Arc::clone(&crls);
    let server = TestServer::start(Arc::new(
        move |_: &Method, path: &str, _: &[u8]| match served.lock().expect("crls").get(path) {
            Some(body) => Reply::crl(body.clone()),
            None => Reply::status(404),
        },
    ))
    .await;
    (server, crls)
}

async fn check(
    service: &CheckService,
    leaf: &PspCertificate,
    chain: &[&PspCertificate],
) -> Arc<psp_service::service::Checked> {
    service
        .check(
            Arc::new(leaf.clone()),
            Arc::new(chain.iter().map(|&c| c.clone()).collect()),
            "XX".parse().expect("country code"),
            NOW,
        )
        .await
}

fn explanation(report: &psp_check::check::CheckReport) -> String {
    report.explanation().join(" | ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_intermediate_stops_its_psps() {
    let (server, crls) = crl_server().await;
    let root = TestCa::new("QTSP Root");
    let issuing = root.sub_ca("QTSP Issuing CA", &[0x51], &[server.url(ROOT_CRL)]);
    let psp = issuing.leaf(&[0x01], &[server.url(SUB_CRL)], &[]);
    // The issuing CA's own CRL does not list the PSP: its certificate alone is fine.
    crls.lock().expect("crls").insert(
        SUB_CRL.into(),
        issuing.crl(NOW - hours(1), NOW + hours(24), &[]),
    );
    crls.lock().expect("crls").insert(
        ROOT_CRL.into(),
        root.crl(
            NOW - hours(1),
            NOW + hours(24),
            &[(&[0x51], NOW - hours(2), RevocationReason::KeyCompromise)],
        ),
    );
    let service = service_trusting(&[&root.cert], &test_config());
    let report = check(&service, &psp, &[&issuing.cert]).await;
    assert!(report.validity().valid_qtsp && report.validity().valid_signature);
    assert!(!report.validity().not_revoked, "{report:#?}");
    let text = explanation(&report);
    assert!(
        text.contains(&format!(
            "intermediate CA {}: CRL: revoked at ",
            issuing.cert.subject
        )) && text.contains("reason keyCompromise"),
        "the explanation names the revoked CA: {text}"
    );
    assert!(
        text.contains("| CRL: not revoked (CRL from"),
        "the PSP's own certificate is not listed: {text}"
    );
    assert_eq!(server.hits(ROOT_CRL), 1, "the root's CRL was fetched");
    assert!(
        report.revocation_evidence().contains(&format!(
            "intermediate CA {}: CRL: revoked",
            issuing.cert.subject
        )),
        "the audit record's evidence names it too: {}",
        report.revocation_evidence()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_psp_under_a_good_intermediate_is_not_revoked() {
    let (server, crls) = crl_server().await;
    let root = TestCa::new("QTSP Root");
    let issuing = root.sub_ca("QTSP Issuing CA", &[0x51], &[server.url(ROOT_CRL)]);
    let psp = issuing.leaf(&[0x01], &[server.url(SUB_CRL)], &[]);
    crls.lock().expect("crls").insert(
        SUB_CRL.into(),
        issuing.crl(NOW - hours(1), NOW + hours(24), &[]),
    );
    crls.lock().expect("crls").insert(
        ROOT_CRL.into(),
        root.crl(NOW - hours(1), NOW + hours(2), &[]),
    );
    let service = service_trusting(&[&root.cert], &test_config());
    let report = check(&service, &psp, &[&issuing.cert]).await;
    assert!(report.validity().not_revoked, "{report:#?}");
    assert_eq!(
        report.revocation(),
        psp_check::check::RevocationStatus::Good
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intermediate_whose_status_cannot_be_established_fails_closed_naming_it() {
    let (server, crls) = crl_server().await;
    let root = TestCa::new("QTSP Root");
    // No revocation pointer at all on the issuing CA; then one whose CRL is not served.
    let silent = root.sub_ca("QTSP Issuing CA", &[0x51], &[]);
    let unserved = root.sub_ca("QTSP Issuing CA 2", &[0x52], &[server.url("/missing.crl")]);
    let service = service_trusting(&[&root.cert], &test_config());
    for (ca, why) in [
        (&silent, "the certificate names no CRL distribution point"),
        (&unserved, "/missing.crl"),
    ] {
        let psp = ca.leaf(&[0x01], &[server.url(SUB_CRL)], &[]);
        crls.lock()
            .expect("crls")
            .insert(SUB_CRL.into(), ca.crl(NOW - hours(1), NOW + hours(24), &[]));
        let report = check(&service, &psp, &[&ca.cert]).await;
        assert!(!report.validity().not_revoked, "{report:#?}");
        let subject = &ca.cert.subject;
        assert!(
            report
                .errors()
                .iter()
                .any(|e| e.code.as_str() == "crl_response_error"
                    && e.title.contains(&format!("intermediate CA {subject}"))
                    && e.title.contains(why)),
            "the error names the CA and why: {:#?}",
            report.errors()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crl_signed_by_the_cas_separate_crl_key_counts_only_while_that_keys_certificate_is_not_revoked()
 {
    let (server, crls) = crl_server().await;
    let root = TestCa::new("QTSP Root");
    // The CA signs certificates with one key and CRLs with another, both certified by the
    // root under the CA's name (RFC 5280 section 6.3.3 (f); PKITS 4.4.19).
    let signing = root.sub_ca_with(
        "QTSP Issuing CA",
        &[0x51],
        &[server.url(ROOT_CRL)],
        true,
        vec![KeyUsagePurpose::KeyCertSign],
    );
    let crl_key = root.sub_ca_with(
        "QTSP Issuing CA",
        &[0x52],
        &[server.url(ROOT_CRL)],
        false,
        vec![KeyUsagePurpose::CrlSign],
    );
    let psp = signing.leaf(&[0x01], &[server.url(SUB_CRL)], &[]);
    crls.lock().expect("crls").insert(
        SUB_CRL.into(),
        crl_key.crl(NOW - hours(1), NOW + hours(24), &[]),
    );
    crls.lock().expect("crls").insert(
        ROOT_CRL.into(),
        root.crl(NOW - hours(1), NOW + hours(24), &[]),
    );

    // Without the CRL signer's certificate, the CRL cannot be used: fail closed.
    let service = service_trusting(&[&root.cert], &test_config());
    let report = check(&service, &psp, &[&signing.cert]).await;
    assert!(!report.validity().not_revoked);
    assert!(
        report
            .errors()
            .iter()
            .any(|e| e.title.contains("keyUsage does not allow signing CRLs")),
        "{:#?}",
        report.errors()
    );

    // With it (presented in the chain), the CRL is used and the signer's status is checked.
    let report = check(&service, &psp, &[&signing.cert, &crl_key.cert]).await;
    assert!(report.validity().not_revoked, "{report:#?}");
    let text = explanation(&report);
    assert!(
        text.contains(&format!(
            "signed by the issuer's CRL-signing certificate {}",
            crl_key.cert.subject
        )) && text.contains(&format!(
            "CRL signer {}: CRL: not revoked",
            crl_key.cert.subject
        )),
        "{text}"
    );

    // The root revokes the CRL-signing key's certificate: its CRLs no longer clear anyone.
    crls.lock().expect("crls").insert(
        ROOT_CRL.into(),
        root.crl(
            NOW - hours(1),
            NOW + hours(24),
            &[(&[0x52], NOW - hours(2), RevocationReason::KeyCompromise)],
        ),
    );
    let fresh = service_trusting(&[&root.cert], &test_config());
    let report = check(&fresh, &psp, &[&signing.cert, &crl_key.cert]).await;
    assert!(!report.validity().not_revoked);
    assert!(
        explanation(&report).contains(&format!(
            "CRL signer {}: CRL: revoked at ",
            crl_key.cert.subject
        )),
        "{}",
        explanation(&report)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_look_alike_crl_signer_that_the_root_did_not_certify_is_not_used() {
    let (server, crls) = crl_server().await;
    let root = TestCa::new("QTSP Root");
    let signing = root.sub_ca_with(
        "QTSP Issuing CA",
        &[0x51],
        &[server.url(ROOT_CRL)],
        true,
        vec![KeyUsagePurpose::KeyCertSign],
    );
    // Same name and cRLSign, but certified by the attacker's own root.
    let attacker = TestCa::new("QTSP Root");
    let forged_signer = attacker.sub_ca_with(
        "QTSP Issuing CA",
        &[0x52],
        &[],
        false,
        vec![KeyUsagePurpose::CrlSign],
    );
    let psp = signing.leaf(&[0x01], &[server.url(SUB_CRL)], &[]);
    crls.lock().expect("crls").insert(
        SUB_CRL.into(),
        forged_signer.crl(NOW - hours(1), NOW + hours(24), &[]),
    );
    crls.lock().expect("crls").insert(
        ROOT_CRL.into(),
        root.crl(NOW - hours(1), NOW + hours(24), &[]),
    );
    let service = service_trusting(&[&root.cert], &test_config());
    let report = check(
        &service,
        &psp,
        &[&signing.cert, &forged_signer.cert, &attacker.cert],
    )
    .await;
    assert!(report.validity().valid_signature);
    assert!(!report.validity().not_revoked, "{report:#?}");
    assert!(!explanation(&report).contains("CRL signer"));
}

/// PKITS 4.3.3 and 4.3.5: the end entity writes its issuer's name with other white space and
/// capitalisation than the CA's certificate. The path chains (RFC 5280 section 7.1), and the
/// revocation checker takes the CA as the certificate's issuer too, instead of refusing the
/// pair unchecked (these certificates name no distribution point, so that is what it says).
#[tokio::test]
async fn an_issuer_name_written_with_other_spaces_or_case_is_still_the_issuer_for_revocation() {
    let pkits = |name: &str| {
        PspCertificate::from_der(read(&data(&format!("pkits/certs/{name}.crt")))).expect("parses")
    };
    let ca = pkits("GoodCACert");
    let checker = psp_service::revocation::RevocationChecker::new(&test_config()).expect("checker");
    for ee in [
        "ValidNameChainingWhitespaceTest3EE",
        "ValidNameChainingCapitalizationTest5EE",
    ] {
        let cert = pkits(ee);
        assert_ne!(
            cert.issuer_raw, ca.subject_raw,
            "{ee}: the names differ in bytes"
        );
        let evidence = checker.evidence(&cert, Some(&ca), NOW).await;
        assert_eq!(
            evidence.crl,
            psp_check::check::MethodOutcome::Failed {
                reason: psp_service::revocation::NO_CRL_URL.to_owned()
            },
            "{ee}"
        );
    }
}
