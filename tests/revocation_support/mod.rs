//! Helpers for the revocation tests: a PKI generated with rcgen, OCSP responses and CRLs built
//! and signed here; the HTTP responders on `127.0.0.1:0` are psp-testkit's.
//!
//! Only loopback addresses are ever connected to; every loop is bounded.
#![allow(dead_code)]

use std::time::Duration;

use der::asn1::{BitString, Null, OctetString};
use der::{Decode as _, Encode as _};
use psp_cert::cert::PspCertificate;
use psp_service::revocation::ocsp::{CertIdHash, OID_PKIX_OCSP_NONCE};
use psp_service::revocation::{AllowDestinations, RevocationConfig};
use rcgen::{
    BasicConstraints, CertificateParams, CrlDistributionPoint, DnType, ExtendedKeyUsagePurpose,
    IsCa, Issuer, KeyPair, KeyUsagePurpose, RevocationReason, SerialNumber, SigningKey as _,
};
use spki::{AlgorithmIdentifierOwned, ObjectIdentifier};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use x509_cert::ext::pkix::CrlReason;
use x509_ocsp::{
    BasicOcspResponse, CertId, CertStatus, OcspGeneralizedTime, OcspRequest, OcspResponse,
    ResponderId, ResponseData, RevokedInfo, SingleResponse, Version,
};

// From `tests/common` (the including test declares `mod common;`): one home for the path of
// the shared test material. The DER TLV writer is psp-testkit's.
#[allow(unused_imports)] // like the functions here, not every including test uses it
pub use crate::common::data;
use psp_testkit::der::tlv;

/// The fixed validation time of the generated-PKI tests.
pub const NOW: OffsetDateTime = time::macros::datetime!(2025-06-01 12:00 UTC);

pub fn at(s: &str) -> OffsetDateTime {
    OffsetDateTime::parse(s, &Rfc3339).expect("test time is RFC 3339")
}

pub fn hours(h: i64) -> time::Duration {
    time::Duration::hours(h)
}

pub fn read(path: &std::path::Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn load_cert(path: &std::path::Path) -> PspCertificate {
    PspCertificate::parse(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A configuration for tests: loopback allowed, short timeouts, no failure memory (each test
/// sees its own fetches).
pub fn test_config() -> RevocationConfig {
    RevocationConfig {
        connect_timeout_ms: 300,
        ocsp_timeout_ms: 2_000,
        crl_timeout_ms: 5_000,
        failure_ttl_secs: 0,
        allow_destinations: AllowDestinations::Loopback,
        ..RevocationConfig::default()
    }
}

// ------------------------------------------------------------------------------------------
// Generated PKI

/// A certificate authority with an ECDSA P-256 key, generated for one test.
pub struct TestCa {
    pub cert: PspCertificate,
    pub issuer: Issuer<'static, KeyPair>,
    pub key_pem: String,
    pub cert_pem: String,
}

fn validity(params: &mut CertificateParams) {
    params.not_before = time::macros::datetime!(2020-01-01 0:00 UTC);
    params.not_after = time::macros::datetime!(2040-01-01 0:00 UTC);
}

impl TestCa {
    pub fn new(cn: &str) -> Self {
        Self::with_key_usages(
            cn,
            vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
                KeyUsagePurpose::DigitalSignature,
            ],
        )
    }

    pub fn with_key_usages(cn: &str, usages: Vec<KeyUsagePurpose>) -> Self {
        let key = KeyPair::generate().expect("ECDSA key");
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, cn);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Revocation Tests");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = usages;
        validity(&mut params);
        let cert = params.self_signed(&key).expect("self-signed CA");
        let cert_pem = cert.pem();
        let key_pem = key.serialize_pem();
        let parsed = PspCertificate::from_der(cert.der().to_vec()).expect("CA parses");
        TestCa {
            cert: parsed,
            issuer: Issuer::new(params, key),
            key_pem,
            cert_pem,
        }
    }

    pub fn key(&self) -> &KeyPair {
        self.issuer.key()
    }

    /// An intermediate CA certificate issued by this CA, with these revocation pointers.
    pub fn sub_ca(&self, cn: &str, serial: &[u8], crl_urls: &[String]) -> TestCa {
        self.sub_ca_with(
            cn,
            serial,
            crl_urls,
            true,
            vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
                KeyUsagePurpose::DigitalSignature,
            ],
        )
    }

    /// A certificate for another key under the name `cn`, issued by this CA: a CA
    /// (`is_ca`) or not, with these key usages (a separate CRL-signing key: not a CA, cRLSign
    /// only).
    pub fn sub_ca_with(
        &self,
        cn: &str,
        serial: &[u8],
        crl_urls: &[String],
        is_ca: bool,
        usages: Vec<KeyUsagePurpose>,
    ) -> TestCa {
        let key = KeyPair::generate().expect("sub-CA key");
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, cn);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Revocation Tests");
        params.is_ca = if is_ca {
            IsCa::Ca(BasicConstraints::Unconstrained)
        } else {
            IsCa::ExplicitNoCa
        };
        params.key_usages = usages;
        params.serial_number = Some(SerialNumber::from_slice(serial));
        params.use_authority_key_identifier_extension = true;
        validity(&mut params);
        if !crl_urls.is_empty() {
            params.crl_distribution_points = vec![CrlDistributionPoint {
                uris: crl_urls.to_vec(),
            }];
        }
        let cert = params.signed_by(&key, &self.issuer).expect("sub-CA");
        let cert_pem = cert.pem();
        let key_pem = key.serialize_pem();
        let parsed = PspCertificate::from_der(cert.der().to_vec()).expect("sub-CA parses");
        TestCa {
            cert: parsed,
            issuer: Issuer::new(params, key),
            key_pem,
            cert_pem,
        }
    }

    /// An end-entity certificate with these revocation pointers.
    pub fn leaf(&self, serial: &[u8], crl_urls: &[String], ocsp_urls: &[String]) -> PspCertificate {
        let key = KeyPair::generate().expect("leaf key");
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("leaf {}", hex(serial)));
        params.serial_number = Some(SerialNumber::from_slice(serial));
        params.use_authority_key_identifier_extension = true;
        validity(&mut params);
        if !crl_urls.is_empty() {
            params.crl_distribution_points = vec![CrlDistributionPoint {
                uris: crl_urls.to_vec(),
            }];
        }
        if !ocsp_urls.is_empty() {
            params.custom_extensions = vec![aia_ocsp(ocsp_urls)];
        }
        let cert = params.signed_by(&key, &self.issuer).expect("leaf");
        PspCertificate::from_der(cert.der().to_vec()).expect("leaf parses")
    }

    /// A delegated OCSP responder certificate (with id-kp-OCSPSigning when `ocsp_signing`).
    pub fn responder(&self, cn: &str, ocsp_signing: bool) -> (PspCertificate, KeyPair, String) {
        let key = KeyPair::generate().expect("responder key");
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = if ocsp_signing {
            vec![ExtendedKeyUsagePurpose::OcspSigning]
        } else {
            vec![ExtendedKeyUsagePurpose::ClientAuth]
        };
        validity(&mut params);
        let cert = params.signed_by(&key, &self.issuer).expect("responder");
        let pem = cert.pem();
        (
            PspCertificate::from_der(cert.der().to_vec()).expect("responder parses"),
            key,
            pem,
        )
    }

    /// A CRL signed by this CA.
    pub fn crl(
        &self,
        this_update: OffsetDateTime,
        next_update: OffsetDateTime,
        revoked: &[(&[u8], OffsetDateTime, RevocationReason)],
    ) -> Vec<u8> {
        psp_testkit::pki::crl_signed_by(&self.issuer, this_update, next_update, revoked)
    }
}

use psp_testkit::pki::aia_ocsp;
pub use psp_testkit::pki::hex;

/// The subjectPublicKey bits of a certificate (what CertIDs and KeyHash hash).
pub fn key_bits(cert: &PspCertificate) -> Vec<u8> {
    use x509_parser::prelude::FromDer as _;
    let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(&cert.spki).expect("SPKI");
    spki.subject_public_key.data.to_vec()
}

// ------------------------------------------------------------------------------------------
// OCSP responses

/// Who signs a test OCSP response.
pub enum Signer<'a> {
    /// The CA's own key, named by key hash.
    Issuer,
    /// Another key, named as if it were the issuer's (a forgery).
    Impostor(&'a KeyPair),
    /// A delegated responder: its key signs, its certificate is included and named.
    Delegated(&'a PspCertificate, &'a KeyPair),
}

/// What a test OCSP response says.
pub struct OcspSpec<'a> {
    pub serial: Vec<u8>,
    pub status: CertStatus,
    pub this_update: OffsetDateTime,
    pub next_update: Option<OffsetDateTime>,
    pub hash: CertIdHash,
    pub signer: Signer<'a>,
    pub nonce: Option<Vec<u8>>,
    /// The signatureAlgorithm to claim; `None` for ecdsa-with-SHA256 (what the key does).
    pub claimed_algorithm: Option<ObjectIdentifier>,
}

impl<'a> OcspSpec<'a> {
    pub fn good(serial: &[u8]) -> Self {
        OcspSpec {
            serial: serial.to_vec(),
            status: CertStatus::good(),
            this_update: NOW - hours(1),
            next_update: Some(NOW + hours(24)),
            hash: CertIdHash::Sha1,
            signer: Signer::Issuer,
            nonce: None,
            claimed_algorithm: None,
        }
    }

    pub fn revoked(serial: &[u8], at: OffsetDateTime, reason: CrlReason) -> Self {
        OcspSpec {
            status: CertStatus::Revoked(RevokedInfo {
                revocation_time: gt(at),
                revocation_reason: Some(reason),
            }),
            ..Self::good(serial)
        }
    }

    pub fn unknown(serial: &[u8]) -> Self {
        OcspSpec {
            status: CertStatus::unknown(),
            ..Self::good(serial)
        }
    }
}

pub fn gt(t: OffsetDateTime) -> OcspGeneralizedTime {
    OcspGeneralizedTime(
        der::asn1::GeneralizedTime::from_unix_duration(Duration::from_secs(
            t.unix_timestamp() as u64
        ))
        .expect("time after 1970"),
    )
}

/// A signed BasicOCSPResponse for a certificate of `ca`.
pub fn ocsp_response(ca: &TestCa, spec: OcspSpec<'_>) -> Vec<u8> {
    let serial_tlv = tlv(0x02, &spec.serial);
    let cert_id = CertId {
        hash_algorithm: AlgorithmIdentifierOwned {
            oid: spec.hash.oid(),
            parameters: Some(Null.into()),
        },
        issuer_name_hash: OctetString::new(spec.hash.digest(&ca.cert.subject_raw)).expect("hash"),
        issuer_key_hash: OctetString::new(spec.hash.digest(&key_bits(&ca.cert))).expect("hash"),
        serial_number: x509_cert::serial_number::SerialNumber::from_der(&serial_tlv)
            .expect("serial"),
    };
    let (key, named_key, certs): (&KeyPair, Vec<u8>, Option<Vec<x509_cert::Certificate>>) =
        match spec.signer {
            Signer::Issuer => (ca.key(), key_bits(&ca.cert), None),
            Signer::Impostor(k) => (k, key_bits(&ca.cert), None),
            Signer::Delegated(cert, k) => (
                k,
                key_bits(cert),
                Some(vec![
                    x509_cert::Certificate::from_der(&cert.der).expect("responder cert"),
                ]),
            ),
        };
    let response_extensions = spec.nonce.map(|n| {
        vec![x509_cert::ext::Extension {
            extn_id: OID_PKIX_OCSP_NONCE,
            critical: false,
            extn_value: OctetString::new(
                OctetString::new(n).expect("nonce").to_der().expect("nonce"),
            )
            .expect("nonce"),
        }]
    });
    let data = ResponseData {
        version: Version::V1,
        responder_id: ResponderId::ByKey(
            OctetString::new(CertIdHash::Sha1.digest(&named_key)).expect("key hash"),
        ),
        produced_at: gt(spec.this_update),
        responses: vec![SingleResponse {
            cert_id,
            cert_status: spec.status,
            this_update: gt(spec.this_update),
            next_update: spec.next_update.map(gt),
            single_extensions: None,
        }],
        response_extensions,
    };
    sign_basic(data, key, certs, spec.claimed_algorithm)
}

pub fn sign_basic(
    data: ResponseData,
    key: &KeyPair,
    certs: Option<Vec<x509_cert::Certificate>>,
    claimed_algorithm: Option<ObjectIdentifier>,
) -> Vec<u8> {
    let tbs = data.to_der().expect("tbs");
    let signature = key.sign(&tbs).expect("sign");
    let basic = BasicOcspResponse {
        tbs_response_data: data,
        signature_algorithm: AlgorithmIdentifierOwned {
            oid: claimed_algorithm.unwrap_or(ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2")),
            parameters: None,
        },
        signature: BitString::from_bytes(&signature).expect("signature"),
        certs,
    };
    OcspResponse::successful(basic)
        .expect("response")
        .to_der()
        .expect("DER")
}

/// The nonce of an OCSP request, if it has one (for responders that echo it).
pub fn request_nonce(body: &[u8]) -> Option<Vec<u8>> {
    let req = OcspRequest::from_der(body).ok()?;
    req.nonce().map(|n| n.0.as_bytes().to_vec())
}

// ------------------------------------------------------------------------------------------
// HTTP responders

#[allow(unused_imports)] // not every including test uses each
pub use psp_testkit::server::{
    Handler, Reply, TestServer, raw_server, refusing_address, silent_server,
};

// ------------------------------------------------------------------------------------------
// The checking service over generated trust anchors

/// A checking service whose trust list holds `anchors` (one source, valid for `XX`, both
/// kinds, no QcCompliance or QcType required), fetching revocation evidence with `config`.
pub fn service_trusting(
    anchors: &[&PspCertificate],
    config: &RevocationConfig,
) -> psp_service::service::CheckService {
    use psp_service::service::{CheckService, DataSources, ReferenceData, Revocation};
    let trust = crate::common::anchors_trust_list(
        "generated",
        psp_service::trust::QtspSource::Eidas,
        "XX",
        "XX".parse().expect("country code"),
        "generated anchor",
        anchors.iter().copied(),
    );
    let data = ReferenceData {
        trust,
        registers: psp_service::register::RegisterSnapshot::empty(),
        generation: 1,
        loaded_at: NOW,
        sources: DataSources {
            trust: Vec::new(),
            registers: Default::default(),
            base_dir: std::path::PathBuf::from("."),
        },
    };
    let checker = psp_service::revocation::RevocationChecker::new(config).expect("checker");
    CheckService::new(
        data,
        Revocation::Fetch(checker),
        Duration::from_secs(300),
        100,
    )
}
