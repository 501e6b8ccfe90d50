//! A CRL (DER or PEM) decoded, checked against an issuer and indexed, then looked up.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use psp_cert::cert::PspCertificate;
use psp_service::revocation::crl::CrlIndex;

fn issuer() -> &'static PspCertificate {
    static ISSUER: OnceLock<PspCertificate> = OnceLock::new();
    ISSUER.get_or_init(|| {
        PspCertificate::parse(include_bytes!("../../certs/ca/qtsp-issuing.pem"))
            .expect("the sandbox issuing CA parses")
    })
}

fuzz_target!(|data: &[u8]| {
    let _ = CrlIndex::parse(data, issuer());
});
