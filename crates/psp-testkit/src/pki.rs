//! rcgen builders the tests share: certificates and extensions that need no product type.

use std::path::Path;

use rcgen::CustomExtension;

use crate::der::tlv;

/// A new certificate for `localhost` from the server CA in `certs` (`server/ca.pem` and
/// `server/ca.key`), with a key of its own: a rotated server certificate (PEM, key PEM).
pub fn new_server_certificate(certs: &Path) -> (String, String) {
    let ca_key = rcgen::KeyPair::from_pem(
        &std::fs::read_to_string(certs.join("server/ca.key")).expect("CA key"),
    )
    .expect("CA key parses");
    let ca = rcgen::Issuer::from_ca_cert_pem(
        &std::fs::read_to_string(certs.join("server/ca.pem")).expect("CA"),
        ca_key,
    )
    .expect("CA parses");
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "localhost (rotated)");
    let cert = params.signed_by(&key, &ca).expect("signed");
    (cert.pem(), key.serialize_pem())
}

/// authorityInfoAccess with one id-ad-ocsp URI per entry of `urls` (rcgen has no field
/// for it).
pub fn aia_ocsp(urls: &[String]) -> CustomExtension {
    let ad_ocsp = [0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01];
    let mut descriptions = Vec::new();
    for url in urls {
        let uri = tlv(0x86, url.as_bytes());
        descriptions.extend(tlv(0x30, &[&ad_ocsp[..], &uri].concat()));
    }
    CustomExtension::from_oid_content(&[1, 3, 6, 1, 5, 5, 7, 1, 1], tlv(0x30, &descriptions))
}

/// Upper-case hex of `bytes`, as serials are written in messages and file names.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// A CRL signed by the CA of `ca_pem` with its key `ca_key_pem` (PEM), current from
/// `this_update` to `next_update`, listing `revoked` serials (revoked at `this_update`, key
/// compromise): real revocation evidence for a test, which the check verifies as it would a
/// CA's ([`crl_signed_by`]).
pub fn signed_crl(
    ca_pem: &str,
    ca_key_pem: &str,
    this_update: time::OffsetDateTime,
    next_update: time::OffsetDateTime,
    revoked: &[&[u8]],
) -> Vec<u8> {
    let key = rcgen::KeyPair::from_pem(ca_key_pem).expect("CA key parses");
    let ca = rcgen::Issuer::from_ca_cert_pem(ca_pem, key).expect("CA parses");
    let entries: Vec<_> = revoked
        .iter()
        .map(|serial| (*serial, this_update, rcgen::RevocationReason::KeyCompromise))
        .collect();
    crl_signed_by(&ca, this_update, next_update, &entries)
}

/// A CRL signed by `issuer`, current from `this_update` to `next_update` (its CRL number the
/// seconds of `this_update`), listing each `(serial, revocation time, reason)` of `revoked`.
pub fn crl_signed_by(
    issuer: &rcgen::Issuer<'_, impl rcgen::SigningKey>,
    this_update: time::OffsetDateTime,
    next_update: time::OffsetDateTime,
    revoked: &[(&[u8], time::OffsetDateTime, rcgen::RevocationReason)],
) -> Vec<u8> {
    let params = rcgen::CertificateRevocationListParams {
        this_update,
        next_update,
        crl_number: rcgen::SerialNumber::from(this_update.unix_timestamp() as u64),
        issuing_distribution_point: None,
        revoked_certs: revoked
            .iter()
            .map(|(serial, at, reason)| rcgen::RevokedCertParams {
                serial_number: rcgen::SerialNumber::from_slice(serial),
                revocation_time: *at,
                reason_code: Some(*reason),
                invalidity_date: None,
            })
            .collect(),
        key_identifier_method: rcgen::KeyIdMethod::Sha256,
    };
    params.signed_by(issuer).expect("CRL signs").der().to_vec()
}
