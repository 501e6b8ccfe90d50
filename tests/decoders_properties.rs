//! Property tests (proptest) of the decoders that read what a client or a network sends:
//! every way a load balancer may deliver a certificate decodes to the same DER, and no input
//! makes a decoder panic. The fuzz targets (`fuzz/`) search the same decoders by coverage;
//! these run in every `cargo test`.

mod common;

use base64::Engine;
use proptest::prelude::*;
use psp_cert::cert::PspCertificate;
use psp_cert::cert::qc::decode_qc_statements;
use psp_cert::cert::{decode_certificate_chain, decode_certificate_input};
use psp_service::revocation::ocsp::parse_response;

/// The DER of real certificates from the shared data and the sandbox (read once).
fn certificates() -> &'static [Vec<u8>] {
    static DERS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    DERS.get_or_init(read_certificates)
}

fn read_certificates() -> Vec<Vec<u8>> {
    let mut ders = Vec::new();
    for dir in [common::data("psd2-certs"), common::root().join("certs/psp")] {
        for entry in std::fs::read_dir(&dir).expect("dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "pem")
                && let Ok(cert) = PspCertificate::parse(&std::fs::read(&path).expect("read"))
            {
                ders.push(cert.der.clone());
            }
        }
    }
    assert!(ders.len() >= 20, "{} certificates", ders.len());
    ders
}

/// The ways a hop delivers a certificate, as `decode_certificate_input`'s documentation lists.
fn encodings(der: &[u8], line: usize, crlf: bool) -> Vec<(String, Vec<u8>)> {
    let std = base64::engine::general_purpose::STANDARD.encode(der);
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(der);
    let eol = if crlf { "\r\n" } else { "\n" };
    let wrapped: Vec<&str> = std
        .as_bytes()
        .chunks(line)
        .map(|c| std::str::from_utf8(c).expect("ASCII"))
        .collect();
    let pem = format!(
        "-----BEGIN CERTIFICATE-----{eol}{}{eol}-----END CERTIFICATE-----{eol}",
        wrapped.join(eol)
    );
    let percent =
        percent_encoding::utf8_percent_encode(&pem, percent_encoding::NON_ALPHANUMERIC).to_string();
    vec![
        ("DER".to_owned(), der.to_vec()),
        ("Base64".to_owned(), std.clone().into_bytes()),
        ("Base64 URL-safe".to_owned(), url.into_bytes()),
        ("Base64 wrapped".to_owned(), wrapped.join(eol).into_bytes()),
        ("PEM".to_owned(), pem.clone().into_bytes()),
        (
            "PEM on one line".to_owned(),
            pem.replace(eol, " ").into_bytes(),
        ),
        (
            "PEM with tabs".to_owned(),
            pem.replace(eol, "\t").into_bytes(),
        ),
        ("URL-encoded PEM".to_owned(), percent.into_bytes()),
        (
            "Base64 with + as space".to_owned(),
            std.replace('+', " ").into_bytes(),
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_delivery_of_a_certificate_decodes_to_the_same_der(
        which in 0usize..1000,
        line in prop::sample::select(vec![64usize, 76, 40, 1000]),
        crlf in any::<bool>(),
    ) {
        let ders = certificates();
        let der = &ders[which % ders.len()];
        for (how, input) in encodings(der, line, crlf) {
            let decoded = decode_certificate_input(&input);
            prop_assert_eq!(decoded.as_ref().ok(), Some(der), "{}", how);
            let chain = decode_certificate_chain(&input);
            prop_assert_eq!(chain.ok(), Some(vec![der.clone()]), "{} as a chain", how);
        }
    }

    #[test]
    fn a_certificate_with_any_byte_changed_is_decoded_or_refused_without_panic(
        which in 0usize..1000,
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let ders = certificates();
        let mut der = ders[which % ders.len()].clone();
        let i = at.index(der.len());
        der[i] = byte;
        // Either it still parses (and then its DER is the input's), or it is refused.
        if let Ok(cert) = PspCertificate::from_der(der.clone()) {
            prop_assert_eq!(cert.der, der);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_a_decoder(input in prop::collection::vec(any::<u8>(), 0..4096)) {
        let _ = decode_certificate_input(&input);
        let _ = decode_certificate_chain(&input);
        let _ = PspCertificate::parse(&input);
        let _ = decode_qc_statements(&input, false);
        let _ = parse_response(&input);
        let _ = psp_service::trust::tsl::parse(&input);
        // The property is that each returns: proptest counts a panic as a failed case.
        let _ = psp_service::register::decode_answer_for_fuzzing(&input);
    }
}
