//! Signature verification: real chains from the shared corpus, and generated ECDSA and
//! Ed25519 certificates for the algorithms the corpus lacks.

use std::path::PathBuf;

use psp_cert::cert::{PspCertificate, SignatureError};
use rcgen::{CertificateParams, KeyPair, PublicKeyData};
use x509_parser::prelude::{FromDer, X509Name};

fn corpus(name: &str) -> PspCertificate {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/psd2-certs")
        .join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    PspCertificate::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn position(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn the_creditas_qwac_verifies_with_its_ica_issuing_ca() {
    let leaf = corpus("ica_creditas_cz_qwac_psdcz_cnb.pem");
    let ca = corpus("ica_ssl_ev_ca_rsa_10_2017.pem");
    assert_eq!(leaf.verify_signed_by(&ca.spki), Ok(()));
    assert_eq!(leaf.issuer_raw, ca.subject_raw);
    // The raw names are whole DER Names (SEQUENCE tag and length included).
    let (rest, _) = X509Name::from_der(&leaf.issuer_raw).expect("a DER Name");
    assert!(rest.is_empty());
}

#[test]
fn one_changed_letter_in_the_subject_breaks_the_signature() {
    let leaf = corpus("ica_creditas_cz_qwac_psdcz_cnb.pem");
    let ca = corpus("ica_ssl_ev_ca_rsa_10_2017.pem");
    let subject_at = position(&leaf.der, &leaf.subject_raw).expect("subject inside the DER");
    let cn_at = position(&leaf.subject_raw, b"creditas.cz").expect("CN inside the subject");
    let mut der = leaf.der.clone();
    der[subject_at + cn_at] = b'C';
    let forged = PspCertificate::from_der(der).expect("still parses");
    assert_eq!(forged.subject_cn.as_deref(), Some("Creditas.cz"));
    assert_eq!(
        forged.verify_signed_by(&ca.spki),
        Err(SignatureError::Invalid)
    );
}

#[test]
fn the_eszigno_test_certificates_verify_up_to_their_root() {
    let qwac = corpus("eszigno_test_qwac_psdfi.pem");
    let qseal = corpus("eszigno_test_qsealc_psdfi.pem");
    let ca3 = corpus("eszigno_test_ca3.pem");
    let root = corpus("eszigno_test_root_ca_2008.pem");
    assert_eq!(qwac.verify_signed_by(&ca3.spki), Ok(()));
    assert_eq!(qseal.verify_signed_by(&ca3.spki), Ok(()));
    assert_eq!(ca3.verify_signed_by(&root.spki), Ok(()));
    assert_eq!(root.verify_signed_by(&root.spki), Ok(()));
}

#[test]
fn the_obie_pre_production_certificates_verify_up_to_their_root() {
    let qwac = corpus("obie_pp_wso2_transport_qwac_2026.pem");
    let issuing = corpus("obie_pp_issuing_ca.pem");
    let root = corpus("obie_pp_root_ca.pem");
    assert_eq!(qwac.verify_signed_by(&issuing.spki), Ok(()));
    assert_eq!(issuing.verify_signed_by(&root.spki), Ok(()));
    assert_eq!(root.verify_signed_by(&root.spki), Ok(()));
}

#[test]
fn the_adorsys_mock_verifies_with_its_v1_root() {
    // The signature is fine; what is wrong with that chain is for path validation to say.
    let leaf = corpus("adorsys_xs2a_mock_qwac_psdde_fakenca.pem");
    let root = corpus("adorsys_certgen_MyRootCA.pem");
    assert_eq!(leaf.verify_signed_by(&root.spki), Ok(()));
}

#[test]
fn a_certificate_does_not_verify_with_another_issuers_key() {
    let leaf = corpus("ica_creditas_cz_qwac_psdcz_cnb.pem");
    let other = corpus("eszigno_test_ca3.pem");
    assert_eq!(
        leaf.verify_signed_by(&other.spki),
        Err(SignatureError::Invalid)
    );
}

#[test]
fn the_sha1_signed_wso2_fake_is_refused_as_weak() {
    let fake = corpus("wso2_fake_obie_issuer_selfmade.pem");
    let claimed_issuer = corpus("obie_pp_issuing_ca.pem");
    assert_eq!(fake.signature_algorithm, "1.2.840.113549.1.1.5");
    assert_eq!(
        fake.verify_signed_by(&claimed_issuer.spki),
        Err(SignatureError::WeakAlgorithm(
            "1.2.840.113549.1.1.5".to_owned()
        ))
    );
}

#[test]
fn an_unreadable_issuer_key_is_reported_as_such() {
    let leaf = corpus("ica_creditas_cz_qwac_psdcz_cnb.pem");
    for garbage in [&b""[..], b"\x30\x03\x02\x01\x00", b"not a key"] {
        assert!(
            matches!(
                leaf.verify_signed_by(garbage),
                Err(SignatureError::BadIssuerKey(_))
            ),
            "{garbage:?}"
        );
    }
}

#[test]
fn a_signature_algorithm_differing_from_the_tbs_one_is_refused() {
    let leaf = corpus("ica_creditas_cz_qwac_psdcz_cnb.pem");
    let ca = corpus("ica_ssl_ev_ca_rsa_10_2017.pem");
    // sha256WithRSAEncryption, as encoded in both AlgorithmIdentifiers; the outer one is last.
    let alg = [
        0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b,
    ];
    let outer = leaf
        .der
        .windows(alg.len())
        .rposition(|w| w == alg)
        .expect("outer signatureAlgorithm");
    let mut der = leaf.der.clone();
    der[outer + alg.len() - 1] = 0x0c; // sha384WithRSAEncryption
    let altered = PspCertificate::from_der(der).expect("still parses");
    assert!(
        altered.warnings.iter().any(|w| w.contains("differs")),
        "{:?}",
        altered.warnings
    );
    assert!(matches!(
        altered.verify_signed_by(&ca.spki),
        Err(SignatureError::AlgorithmMismatch { .. })
    ));
}

fn generated(alg: &'static rcgen::SignatureAlgorithm) -> (PspCertificate, KeyPair) {
    let key = KeyPair::generate_for(alg).expect("key generation");
    let params = CertificateParams::new(vec!["psp.example".to_owned()]).expect("params");
    let cert = params.self_signed(&key).expect("self-signed certificate");
    let parsed = PspCertificate::from_der(cert.der().to_vec()).expect("parses");
    (parsed, key)
}

#[test]
fn generated_ecdsa_and_ed25519_certificates_verify() {
    for alg in [
        &rcgen::PKCS_ECDSA_P256_SHA256,
        &rcgen::PKCS_ECDSA_P384_SHA384,
        &rcgen::PKCS_ED25519,
    ] {
        let (cert, key) = generated(alg);
        assert_eq!(cert.spki, key.subject_public_key_info(), "{alg:?}");
        assert_eq!(cert.verify_signed_by(&cert.spki), Ok(()), "{alg:?}");
        let (_, other_key) = generated(alg);
        assert_eq!(
            cert.verify_signed_by(&other_key.subject_public_key_info()),
            Err(SignatureError::Invalid),
            "{alg:?}"
        );
    }
}

#[test]
fn a_key_of_the_wrong_type_is_a_bad_issuer_key() {
    let (ecdsa, _) = generated(&rcgen::PKCS_ECDSA_P256_SHA256);
    let (ed25519, _) = generated(&rcgen::PKCS_ED25519);
    let rsa_ca = corpus("eszigno_test_ca3.pem");
    assert!(matches!(
        ecdsa.verify_signed_by(&rsa_ca.spki),
        Err(SignatureError::BadIssuerKey(_))
    ));
    assert!(matches!(
        ed25519.verify_signed_by(&ecdsa.spki),
        Err(SignatureError::BadIssuerKey(_))
    ));
    assert!(matches!(
        rsa_ca.verify_signed_by(&ecdsa.spki),
        Err(SignatureError::BadIssuerKey(_))
    ));
}

#[test]
fn ecdsa_with_a_brainpool_issuer_key_is_unsupported() {
    let (ecdsa, _) = generated(&rcgen::PKCS_ECDSA_P256_SHA256);
    // SubjectPublicKeyInfo { id-ecPublicKey, brainpoolP256r1 (1.3.36.3.3.2.8.1.1.7) }, with an
    // uncompressed point of the right size (its value does not matter: ring is never asked).
    let mut spki = vec![
        0x30, 0x5a, 0x30, 0x14, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x09,
        0x2b, 0x24, 0x03, 0x03, 0x02, 0x08, 0x01, 0x01, 0x07, 0x03, 0x42, 0x00, 0x04,
    ];
    spki.extend([0x11; 64]);
    match ecdsa.verify_signed_by(&spki) {
        Err(SignatureError::UnsupportedAlgorithm(what)) => {
            assert!(what.contains("brainpool"), "{what}")
        }
        other => panic!("expected UnsupportedAlgorithm, got {other:?}"),
    }
}
