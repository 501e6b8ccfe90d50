//! Damaged real certificates: every truncation and a set of single-byte changes at every
//! position are parsed (and, where they parse, verified) without a panic, and a changed
//! certificate never verifies. The loops are bounded by the size of one certificate.
//!
//! "Never verifies" covers the envelope outside the signed bytes too: x509-parser alone
//! accepted a context-specific tag in place of the outer SEQUENCE, the signatureAlgorithm
//! OID or the signature BIT STRING, which would have given a second encoding (and a second
//! fingerprint) of a validly signed certificate.

use std::path::PathBuf;

use psp_cert::cert::qc::{MAX_QC_STATEMENTS, OID_QC_STATEMENTS, decode_qc_statements};
use psp_cert::cert::{PspCertificate, decode_certificate_chain};
use x509_parser::prelude::{FromDer, X509Certificate};

fn corpus_bytes(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/psd2-certs")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn corpus(name: &str) -> PspCertificate {
    PspCertificate::parse(&corpus_bytes(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Replacement values tried at each position: flipping the lowest and highest bits reaches
/// lengths, tags and content alike; 0x00 and 0xff are the usual edge values.
fn mutations(b: u8) -> [u8; 4] {
    [b ^ 0x01, b ^ 0x80, 0x00, 0xff]
}

#[test]
fn every_truncation_of_a_real_certificate_is_refused_without_panic() {
    let cert = corpus("ica_creditas_cz_qwac_psdcz_cnb.pem");
    for end in 0..cert.der.len() {
        assert!(
            PspCertificate::from_der(cert.der[..end].to_vec()).is_err(),
            "truncated to {end} bytes"
        );
    }
}

#[test]
fn single_byte_changes_of_a_real_certificate_never_panic_and_never_verify() {
    let cert = corpus("ica_creditas_cz_qwac_psdcz_cnb.pem");
    let issuer = corpus("ica_ssl_ev_ca_rsa_10_2017.pem");
    let mut parsed = 0;
    for pos in 0..cert.der.len() {
        for value in mutations(cert.der[pos]) {
            if value == cert.der[pos] {
                continue;
            }
            let mut der = cert.der.clone();
            der[pos] = value;
            if let Ok(changed) = PspCertificate::from_der(der) {
                parsed += 1;
                let _ = changed.serial_hex();
                let _ = changed.auth_number();
                assert!(
                    changed.verify_signed_by(&issuer.spki).is_err(),
                    "byte {pos} set to {value:#04x} still verifies"
                );
            }
        }
    }
    // Most changes land in names, keys and the signature, which still parse.
    assert!(
        parsed > cert.der.len(),
        "only {parsed} changed certificates parsed"
    );
}

#[test]
fn single_byte_changes_of_pem_text_never_panic() {
    let text = corpus_bytes("ing_sandbox_example_qwac.pem");
    let original = corpus("ing_sandbox_example_qwac.pem");
    for pos in 0..text.len() {
        for value in [b' ', b'%', b'+', b'-', b'=', b'A', b'\n', 0x00, 0xc3] {
            let mut changed = text.clone();
            changed[pos] = value;
            if let Ok(cert) = PspCertificate::parse(&changed) {
                // A change that still decodes either touched nothing that matters (a line
                // break, the text around the armour) or gave a different certificate.
                let _ = cert.psp_subject_name();
                if cert.der == original.der {
                    continue;
                }
                assert_ne!(cert.fingerprint_sha256, original.fingerprint_sha256);
            }
            let _ = decode_certificate_chain(&changed);
        }
    }
}

#[test]
fn single_byte_changes_of_real_qc_statements_never_panic() {
    for name in [
        "wso2_fake_obie_issuer_selfmade.pem",
        "ing_sandbox_example_qwac.pem",
        "adorsys_xs2a_mock_qwac_psdde_fakenca.pem",
        "eszigno_test_qwac_psdfi.pem",
    ] {
        let cert = corpus(name);
        let (_, x509) = X509Certificate::from_der(&cert.der).expect("parses");
        let ext = x509
            .extensions()
            .iter()
            .find(|e| e.oid.to_id_string() == OID_QC_STATEMENTS)
            .expect("qcStatements extension");
        let value = ext.value.to_vec();
        for pos in 0..value.len() {
            for v in 0..=255u8 {
                let mut changed = value.clone();
                changed[pos] = v;
                let (qc, _) = decode_qc_statements(&changed, ext.critical);
                assert!(qc.statements.len() <= MAX_QC_STATEMENTS);
            }
        }
        for end in 0..value.len() {
            let (_, warnings) = decode_qc_statements(&value[..end], ext.critical);
            assert!(!warnings.is_empty(), "{name}: truncated to {end} bytes");
        }
    }
}

#[test]
fn a_certificate_envelope_with_a_wrong_tag_is_refused() {
    let cert = corpus("ica_creditas_cz_qwac_psdcz_cnb.pem");
    // The outer SEQUENCE as context-specific [16]: x509-parser alone would accept it.
    let mut der = cert.der.clone();
    der[0] = 0xb0;
    assert!(PspCertificate::from_der(der).is_err());
    // Trailing bytes after the certificate.
    let mut der = cert.der.clone();
    der.push(0);
    assert!(PspCertificate::from_der(der).is_err());
}
