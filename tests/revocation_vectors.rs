//! Revocation evidence from material no one here wrote: the RustCrypto x509-ocsp vectors and
//! the real CRLs of e-Szigno Test CA3 and the OBIE pre-production issuing CA
//! (`../shared/data/`, see TEST-SUITES.md section 3 and psd2-certs/README.md).

mod common;
#[path = "revocation_support/mod.rs"]
mod support;

use psp_cert::cert::PspCertificate;
use psp_service::revocation::CrlReason;
use psp_service::revocation::crl::{CrlError, CrlIndex, CrlStatus};
use psp_service::revocation::ocsp::{
    self, CertIdHash, OcspError, OcspPolicy, OcspSigner, OcspStatus, ResponderError, ResponderName,
    SingleStatus,
};
use std::time::Duration;
use support::{at, data, load_cert, read};

const OCSP_DIR: &str = "ocsp/rustcrypto-x509-ocsp";

fn vector(name: &str) -> Vec<u8> {
    read(&data(&format!("{OCSP_DIR}/{name}")))
}

fn vector_cert(name: &str) -> PspCertificate {
    PspCertificate::from_der(vector(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn ca() -> PspCertificate {
    vector_cert("rsa-2048-sha256-ca.der")
}

// ---- OCSP: RustCrypto vectors --------------------------------------------------------------

#[test]
fn cert_ids_match_in_the_hash_algorithm_the_response_uses() {
    let ca = ca();
    let other_issuer = vector_cert("rsa-2048-sha256-ocsp-crt.der");
    for (file, hash) in [
        ("sha1-certid-ocsp-res.der", CertIdHash::Sha1),
        ("sha256-certid-ocsp-res.der", CertIdHash::Sha256),
        ("sha512-certid-ocsp-res.der", CertIdHash::Sha512),
    ] {
        let info = ocsp::parse_response(&vector(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(info.responses.len(), 1, "{file}");
        let single = &info.responses[0];
        assert_eq!(single.hash, Some(hash), "{file}");
        assert_eq!(single.serial, vec![0x01, 0x00, 0x01], "{file}");
        assert_eq!(single.status, SingleStatus::Good, "{file}");
        assert!(
            single.matches(&ca, &[0x01, 0x00, 0x01]),
            "{file}: CertID of the CA"
        );
        assert!(!single.matches(&ca, &[0x02]), "{file}: another serial");
        assert!(
            !single.matches(&other_issuer, &[0x01, 0x00, 0x01]),
            "{file}: another issuer"
        );
    }
}

#[test]
fn a_response_with_several_cert_ids_matches_each_supported_hash() {
    let info = ocsp::parse_response(&vector("ocsp-multiple-responses-res.der")).expect("parses");
    let ca = ca();
    let matched: Vec<Option<CertIdHash>> = info
        .responses
        .iter()
        .filter(|s| s.matches(&ca, &[0x01, 0x00, 0x01]))
        .map(|s| s.hash)
        .collect();
    // Eight SingleResponses: serial 010001 with SHA-1, SHA-224, SHA-256, SHA-384 and SHA-512
    // CertIDs, and three other serials. SHA-224 is not computed, so its CertID never matches.
    assert_eq!(info.responses.len(), 8);
    assert!(
        info.responses
            .iter()
            .any(|s| s.hash.is_none() && s.hash_oid == "2.16.840.1.101.3.4.2.4")
    );
    assert_eq!(
        matched,
        vec![
            Some(CertIdHash::Sha1),
            Some(CertIdHash::Sha256),
            Some(CertIdHash::Sha384),
            Some(CertIdHash::Sha512)
        ]
    );
}

#[test]
fn our_request_for_serial_010001_is_byte_identical_to_the_sha1_golden_request() {
    let ours = ocsp::build_request(&ca(), &[0x01, 0x00, 0x01], None).expect("request");
    assert_eq!(ours, vector("sha1-certid-ocsp-req.der"));
}

#[test]
fn the_revoked_response_verifies_with_its_delegated_responder_and_gives_revoked_at_its_time() {
    let answer = ocsp::verify_response(
        &vector("rsa-2048-sha256-revoked-ocsp-res.der"),
        &ca(),
        &[0x03],
        None,
        at("2023-11-05T12:00:00Z"),
        &OcspPolicy::default(),
    )
    .expect("verifies at 2023-11-05");
    assert_eq!(
        answer.status(),
        OcspStatus::Revoked {
            at: at("2023-11-05T01:09:45Z"),
            reason: None
        }
    );
    assert_eq!(answer.this_update(), at("2023-11-05T01:09:46Z"));
    assert_eq!(answer.next_update(), Some(at("2024-11-04T01:09:46Z")));
    assert_eq!(
        *answer.signer(),
        OcspSigner::Delegated {
            subject: "CN=rsa-2048-sha256-ocsp-crt".to_owned()
        }
    );
}

#[test]
fn the_revoked_response_is_refused_once_stale_and_for_another_serial() {
    let der = vector("rsa-2048-sha256-revoked-ocsp-res.der");
    let policy = OcspPolicy::default();
    let late = ocsp::verify_response(
        &der,
        &ca(),
        &[0x03],
        None,
        at("2025-01-01T00:00:00Z"),
        &policy,
    );
    // The delegated responder's certificate has expired by then, before anything else.
    assert!(
        matches!(late, Err(OcspError::DelegationRefused { .. })),
        "{late:?}"
    );
    let other = ocsp::verify_response(
        &der,
        &ca(),
        &[0x02],
        None,
        at("2023-11-05T12:00:00Z"),
        &policy,
    );
    assert_eq!(other, Err(OcspError::NoMatchingResponse));
}

#[test]
fn the_revoked_response_is_refused_for_an_issuer_that_did_not_delegate() {
    // The included responder certificate was issued by rsa-2048-sha256-ca; for a certificate
    // of another CA (here e-Szigno Test CA3) it is no authorised responder.
    let der = vector("rsa-2048-sha256-revoked-ocsp-res.der");
    let outcome = ocsp::verify_response(
        &der,
        &load_cert(&data("psd2-certs/eszigno_test_ca3.pem")),
        &[0x03],
        None,
        at("2023-11-05T12:00:00Z"),
        &OcspPolicy::default(),
    );
    assert!(
        matches!(outcome, Err(OcspError::DelegationRefused { ref why, .. }) if why.contains("issued by CN=rsa-2048-sha256-ca")),
        "{outcome:?}"
    );
}

#[test]
fn error_only_responses_could_not_complete() {
    for (file, status) in [
        ("ocsp-malformed.der", ResponderError::MalformedRequest),
        ("ocsp-internal-error.der", ResponderError::InternalError),
        ("ocsp-try-later.der", ResponderError::TryLater),
        ("ocsp-sig-required.der", ResponderError::SigRequired),
        ("ocsp-unauthorized.der", ResponderError::Unauthorized),
    ] {
        let der = vector(file);
        assert_eq!(
            ocsp::parse_response(&der),
            Err(OcspError::Responder(status)),
            "{file}"
        );
        let verdict = ocsp::verify_response(
            &der,
            &ca(),
            &[0x01, 0x00, 0x01],
            None,
            at("2023-11-05T12:00:00Z"),
            &OcspPolicy::default(),
        );
        assert_eq!(verdict, Err(OcspError::Responder(status)), "{file}");
        assert!(verdict.is_err_and(|e| e.to_string().contains(status.as_str())));
    }
}

#[test]
fn the_real_dod_response_parses_into_one_good_and_one_revoked_serial() {
    let info = ocsp::parse_response(&vector("DODEMAILCA_63-resp.der")).expect("parses");
    let by_serial = |serial: &[u8]| {
        info.responses
            .iter()
            .find(|s| s.serial == serial)
            .unwrap_or_else(|| panic!("serial {serial:02X?}"))
    };
    assert_eq!(by_serial(&[0x07, 0xAB, 0x85]).status, SingleStatus::Good);
    assert!(matches!(
        by_serial(&[0x07, 0xAB, 0x86]).status,
        SingleStatus::Revoked { .. }
    ));
    assert_eq!(
        by_serial(&[0x07, 0xAB, 0x85]).this_update.date(),
        time::macros::date!(2023 - 11 - 07)
    );
    assert!(
        !info.certificates.is_empty(),
        "the responder chain is embedded"
    );
}

#[test]
fn responders_named_by_key_and_responses_with_nonces_parse() {
    let by_key = ocsp::parse_response(&vector("ocsp-by-key-res.der")).expect("parses");
    assert!(matches!(by_key.responder, ResponderName::ByKey(ref h) if h.len() == 20));
    assert!(by_key.nonce.is_some());
    let exts = ocsp::parse_response(&vector("ocsp-multiple-exts-res.der")).expect("parses");
    assert!(exts.nonce.is_some());
    let no_chain = ocsp::parse_response(&vector("ocsp-dtm-no-chain-res.der")).expect("parses");
    assert!(no_chain.certificates.is_empty());
    // Without the responder certificate nothing can verify it.
    let verdict = ocsp::verify_response(
        &vector("ocsp-dtm-no-chain-res.der"),
        &ca(),
        &[0x01, 0x00, 0x01],
        None,
        at("2020-01-01T00:00:00Z"),
        &OcspPolicy::default(),
    );
    assert!(
        matches!(verdict, Err(OcspError::SignerNotFound(_))),
        "{verdict:?}"
    );
}

#[test]
fn the_rustcrypto_v1_crl_verifies_and_lists_serial_03() {
    let crl = CrlIndex::parse(&vector("rsa-2048-sha256-ca-crl.der"), &ca()).expect("verifies");
    assert_eq!(crl.len(), 1);
    let entry = crl.lookup(&[0x03]).expect("serial 03 is listed");
    assert_eq!(entry.at.date(), time::macros::date!(2023 - 11 - 05));
    assert!(crl.lookup(&[0x02]).is_none());
    let leaf = vector_cert("rsa-2048-sha256-crt.der");
    assert_eq!(crl.status(&leaf), Ok(CrlStatus::NotListed));
}

// ---- CRLs: real issuers ----------------------------------------------------------------------

const GRACE: Duration = Duration::from_secs(3600);
const SKEW: Duration = Duration::from_secs(300);

#[test]
fn the_e_szigno_test_ca3_crl_verifies_and_gives_the_right_status() {
    let issuer = load_cert(&data("psd2-certs/eszigno_test_ca3.pem"));
    let crl = CrlIndex::parse(
        &read(&data("psd2-certs/eszigno_test_ca3_2023-03-02.crl")),
        &issuer,
    )
    .expect("the real CRL verifies against its issuer");
    // psd2-certs/README.md says 301 entries, but its own reason counts add up to 302, and
    // so does `openssl crl -text`.
    assert_eq!(crl.len(), 302);
    assert_eq!(crl.crl_number(), Some("AC39")); // 44089
    assert_eq!(crl.this_update(), at("2023-03-02T11:15:03Z"));
    assert_eq!(crl.next_update(), at("2023-03-03T12:15:04Z"));
    crl.check_current(crl.this_update(), GRACE, SKEW)
        .expect("current at its thisUpdate");

    let listed = crl.lookup(&[0x01, 0x48]).expect("serial 0148 is listed");
    assert_eq!(listed.at, at("2010-02-12T15:37:35Z"));
    assert_eq!(listed.reason, Some(CrlReason::CertificateHold));
    for pem in [
        "eszigno_test_qwac_psdfi.pem",
        "eszigno_test_qsealc_psdfi.pem",
    ] {
        let cert = load_cert(&data(&format!("psd2-certs/{pem}")));
        assert_eq!(crl.status(&cert), Ok(CrlStatus::NotListed), "{pem}");
    }
    assert!(matches!(
        crl.check_current(at("2023-03-03T14:00:00Z"), GRACE, SKEW),
        Err(CrlError::Stale { .. })
    ));
}

#[test]
fn the_obie_pre_production_crl_verifies_and_gives_the_right_status() {
    let issuer = load_cert(&data("psd2-certs/obie_pp_issuing_ca.pem"));
    let crl = CrlIndex::parse(
        &read(&data("psd2-certs/obie_pp_issuing_ca_2021-03-15.crl.pem")),
        &issuer,
    )
    .expect("the real PEM CRL verifies against its issuer");
    assert_eq!(crl.len(), 1605);
    crl.check_current(crl.this_update(), GRACE, SKEW)
        .expect("current at its thisUpdate");
    let listed = crl
        .lookup(&[0x59, 0xC6, 0x1B, 0x40])
        .expect("serial 59C61B40 is listed");
    assert_eq!(listed.at, at("2021-03-10T15:03:57Z"));
    assert_eq!(listed.reason, Some(CrlReason::CessationOfOperation));
    let cert = load_cert(&data("psd2-certs/obie_pp_wso2_transport_qwac_2026.pem"));
    assert_eq!(crl.status(&cert), Ok(CrlStatus::NotListed));
}

#[test]
fn a_real_crl_is_refused_for_the_wrong_issuer_and_when_altered() {
    let crl_bytes = read(&data("psd2-certs/eszigno_test_ca3_2023-03-02.crl"));
    let wrong = load_cert(&data("psd2-certs/obie_pp_issuing_ca.pem"));
    assert!(matches!(
        CrlIndex::parse(&crl_bytes, &wrong),
        Err(CrlError::IssuerMismatch { .. })
    ));
    let issuer = load_cert(&data("psd2-certs/eszigno_test_ca3.pem"));
    // Change one revocation time digit inside the signed part.
    let mut altered = crl_bytes.clone();
    let pos = altered
        .windows(13)
        .position(|w| w == b"100212153735Z")
        .expect("the revocation time of serial 0148");
    altered[pos + 1] = b'1';
    assert!(matches!(
        CrlIndex::parse(&altered, &issuer),
        Err(CrlError::Signature(_))
    ));
}

#[test]
fn a_certificate_of_another_issuer_is_not_judged_by_this_crl() {
    let issuer = load_cert(&data("psd2-certs/eszigno_test_ca3.pem"));
    let crl = CrlIndex::parse(
        &read(&data("psd2-certs/eszigno_test_ca3_2023-03-02.crl")),
        &issuer,
    )
    .expect("verifies");
    let foreign = load_cert(&data("psd2-certs/obie_pp_wso2_transport_qwac_2026.pem"));
    assert!(matches!(
        crl.status(&foreign),
        Err(CrlError::IssuerMismatch { .. })
    ));
}
