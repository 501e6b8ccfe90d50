//! What an attacker can make from public material (the DER writer and the re-issuing are in
//! `psp_testkit::der`); only what needs a product type is here.

#[allow(unused_imports)] // not every including test forges
pub use psp_testkit::der::*;

/// The subject key identifier written in a DER certificate, if any.
pub fn subject_key_id(der: &[u8]) -> Option<Vec<u8>> {
    psp_cert::cert::PspCertificate::from_der(der.to_vec())
        .expect("parses")
        .subject_key_id
}
