//! The `eidas` header and `--cert` input: base64, PEM or DER, one certificate or a chain, then
//! the certificate parser (names, QC statements, PSD2 roles, authorisation number).
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_cert::cert::PspCertificate;
use psp_cert::cert::{decode_certificate_chain, decode_certificate_input};

fuzz_target!(|data: &[u8]| {
    if let Ok(der) = decode_certificate_input(data) {
        if let Ok(cert) = PspCertificate::from_der(der) {
            let _ = cert.auth_number();
        }
    }
    if let Ok(chain) = decode_certificate_chain(data) {
        for der in chain {
            let _ = PspCertificate::from_der(der);
        }
    }
    let _ = PspCertificate::parse(data);
});
