//! Revocation as the service gets it: CRL and OCSP, fetched, verified, cached, fail closed
//! (docs/design.md sections 3 and 6). This is an edge: it does network I/O. The pure parts
//! (verification, indexing, the evidence) are [`psp_check::revocation`], re-exported here
//! whole.
//!
//! - [`RevocationChecker`]: the fetching, caching edge; one per process.
//! - [`RevocationConfig`]: the `[revocation]` configuration table.
//!
//! Every certificate of the verified path below the trust anchor is checked
//! (`check::RevocationPlan`, gathered by the checking service).

pub mod config;

mod checker;

pub use psp_check::revocation::*;

pub use checker::{
    ISSUER_MISMATCH, MAX_URLS_PER_METHOD, MethodStats, NO_CRL_URL, NO_OCSP_URL,
    OCSP_REQUEST_CONTENT_TYPE, RevocationChecker, RevocationSetupError, RevocationStats,
    UNKNOWN_ISSUER,
};
pub use config::{AllowDestinations, RevocationConfig, RevocationConfigError};

/// Real revocation answers for unit tests: a good or revoked answer can only come from a
/// verified CRL or OCSP response ([`psp_check::revocation::Verified`]), so the tests make a
/// CA, a certificate and a CRL, as a CA would.
#[cfg(test)]
pub(crate) mod test_answers {
    use time::OffsetDateTime;

    use super::MethodOutcome;
    use super::crl::CrlIndex;
    use crate::cert::PspCertificate;

    /// What a CRL current from `now` to `next_update` says of a new certificate: good, or
    /// revoked when `revoked`.
    pub(crate) fn crl_answer(
        now: OffsetDateTime,
        next_update: OffsetDateTime,
        revoked: bool,
    ) -> MethodOutcome {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut ca = rcgen::CertificateParams::new(Vec::new()).expect("params");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "Test Issuing CA");
        let ca_cert = ca.self_signed(&ca_key).expect("CA");
        let leaf_key = rcgen::KeyPair::generate().expect("key");
        let mut leaf = rcgen::CertificateParams::new(Vec::new()).expect("params");
        leaf.distinguished_name
            .push(rcgen::DnType::CommonName, "Test PSP");
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer).expect("leaf");
        let issuer_cert = PspCertificate::parse(ca_cert.der()).expect("CA parses");
        let certificate = PspCertificate::parse(leaf_cert.der()).expect("leaf parses");
        let listed: &[&[u8]] = if revoked { &[&certificate.serial] } else { &[] };
        let crl = psp_testkit::pki::signed_crl(
            &ca_cert.pem(),
            &issuer.key().serialize_pem(),
            now,
            next_update,
            listed,
        );
        let index = CrlIndex::parse(&crl, &issuer_cert).expect("the CRL verifies");
        let tolerance = (std::time::Duration::ZERO, std::time::Duration::ZERO);
        MethodOutcome::from_crl(&index, &certificate, "test", now, tolerance)
    }
}
