//! Helpers for the revocation tests: a PKI generated with rcgen, OCSP responses and CRLs built
//! and signed here, HTTP responders on `127.0.0.1:0` (hyper, and raw TCP for the faults).
//!
//! Only loopback addresses are ever connected to; every loop is bounded.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use der::asn1::{BitString, Null, OctetString};
use der::{Decode as _, Encode as _};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use psp_gateway::cert::PspCertificate;
use psp_gateway::revocation::ocsp::{CertIdHash, OID_PKIX_OCSP_NONCE};
use psp_gateway::revocation::{AllowDestinations, RevocationConfig};
use rcgen::{
    BasicConstraints, CertificateParams, CertificateRevocationListParams, CrlDistributionPoint,
    CustomExtension, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyIdMethod, KeyPair,
    KeyUsagePurpose, RevocationReason, RevokedCertParams, SerialNumber, SigningKey as _,
};
use spki::{AlgorithmIdentifierOwned, ObjectIdentifier};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use x509_cert::ext::pkix::CrlReason;
use x509_ocsp::{
    BasicOcspResponse, CertId, CertStatus, OcspGeneralizedTime, OcspRequest, OcspResponse,
    ResponderId, ResponseData, RevokedInfo, SingleResponse, Version,
};

// From `tests/common` (the including test declares `mod common;`): one home for the path of
// the shared test material and for the DER TLV writer.
#[allow(unused_imports)] // like the functions here, not every including test uses it
pub use crate::common::data;
use crate::common::forge::encode as tlv;

/// The fixed validation time of the generated-PKI tests.
pub const NOW: OffsetDateTime = time::macros::datetime!(2025-06-01 12:00 UTC);

/// Connections a test server accepts before it stops (a bound, not a limit tests reach).
const MAX_CONNECTIONS: usize = 10_000;

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
        let params = CertificateRevocationListParams {
            this_update,
            next_update,
            crl_number: SerialNumber::from(this_update.unix_timestamp() as u64),
            issuing_distribution_point: None,
            revoked_certs: revoked
                .iter()
                .map(|(serial, at, reason)| RevokedCertParams {
                    serial_number: SerialNumber::from_slice(serial),
                    revocation_time: *at,
                    reason_code: Some(*reason),
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: KeyIdMethod::Sha256,
        };
        params.signed_by(&self.issuer).expect("CRL").der().to_vec()
    }
}

/// authorityInfoAccess with id-ad-ocsp URIs (rcgen has no field for it).
fn aia_ocsp(urls: &[String]) -> CustomExtension {
    let ad_ocsp = [0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01];
    let mut descriptions = Vec::new();
    for url in urls {
        let uri = tlv(0x86, url.as_bytes());
        descriptions.extend(tlv(0x30, &[&ad_ocsp[..], &uri].concat()));
    }
    CustomExtension::from_oid_content(&[1, 3, 6, 1, 5, 5, 7, 1, 1], tlv(0x30, &descriptions))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

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

/// One answer of a test server.
#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub location: Option<String>,
    /// Held back this long before answering (to make concurrent callers overlap).
    pub delay: Duration,
}

impl Reply {
    pub fn ok(content_type: &'static str, body: Vec<u8>) -> Self {
        Reply {
            status: 200,
            content_type,
            body,
            location: None,
            delay: Duration::ZERO,
        }
    }

    pub fn ocsp(body: Vec<u8>) -> Self {
        Self::ok("application/ocsp-response", body)
    }

    pub fn crl(body: Vec<u8>) -> Self {
        Self::ok("application/pkix-crl", body)
    }

    pub fn status(status: u16) -> Self {
        Reply {
            status,
            ..Self::ok("text/plain", Vec::new())
        }
    }
}

pub type Handler = Arc<dyn Fn(&Method, &str, &[u8]) -> Reply + Send + Sync>;

/// A hyper HTTP/1.1 server on `127.0.0.1:0` that records the path of every request.
pub struct TestServer {
    pub addr: SocketAddr,
    hits: Arc<Mutex<HashMap<String, usize>>>,
}

impl TestServer {
    pub async fn start(handler: Handler) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let hits: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let counted = Arc::clone(&hits);
        tokio::spawn(async move {
            for _ in 0..MAX_CONNECTIONS {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let handler = Arc::clone(&handler);
                let counted = Arc::clone(&counted);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let handler = Arc::clone(&handler);
                        let counted = Arc::clone(&counted);
                        async move {
                            let method = req.method().clone();
                            let path = req.uri().path().to_owned();
                            let body = req
                                .into_body()
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            *counted
                                .lock()
                                .expect("hits")
                                .entry(path.clone())
                                .or_default() += 1;
                            let reply = handler(&method, &path, &body);
                            if !reply.delay.is_zero() {
                                tokio::time::sleep(reply.delay).await;
                            }
                            let mut response = Response::builder()
                                .status(StatusCode::from_u16(reply.status).expect("status"))
                                .header("content-type", reply.content_type);
                            if let Some(location) = &reply.location {
                                response = response.header("location", location);
                            }
                            Ok::<_, std::convert::Infallible>(
                                response
                                    .body(Full::new(Bytes::from(reply.body)))
                                    .expect("response"),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        TestServer { addr, hits }
    }

    /// A server answering every request with `reply`.
    pub async fn fixed(reply: Reply) -> Self {
        Self::start(Arc::new(move |_: &Method, _: &str, _: &[u8]| reply.clone())).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn hits(&self, path: &str) -> usize {
        self.hits
            .lock()
            .expect("hits")
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    pub fn total_hits(&self) -> usize {
        self.hits.lock().expect("hits").values().sum()
    }
}

/// A TCP server that accepts connections and never answers; the connections stay open until
/// the test's runtime ends.
pub async fn silent_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        let mut held = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            match listener.accept().await {
                Ok((stream, _)) => held.push(stream),
                Err(_) => return,
            }
        }
    });
    addr
}

/// An address where nothing listens: bound, then released.
pub async fn refusing_address() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    drop(listener);
    addr
}

/// A TCP server that reads the request head, then writes `head` and, when `chunks` is set,
/// that many chunks of `chunk` in chunked transfer coding (stopping when the client goes).
pub async fn raw_server(head: &'static str, chunk: Vec<u8>, chunks: usize) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        for _ in 0..MAX_CONNECTIONS {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let chunk = chunk.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let mut seen = Vec::new();
                for _ in 0..64 {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                    if seen.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for _ in 0..chunks {
                    let frame =
                        [format!("{:x}\r\n", chunk.len()).as_bytes(), &chunk, b"\r\n"].concat();
                    if stream.write_all(&frame).await.is_err() {
                        return;
                    }
                }
                let _ = stream.write_all(b"0\r\n\r\n").await;
            });
        }
    });
    addr
}

// ------------------------------------------------------------------------------------------
// The checking service over generated trust anchors

/// A checking service whose trust list holds `anchors` (one source, valid for `XX`, both
/// kinds, no QcCompliance or QcType required), fetching revocation evidence with `config`.
pub fn service_trusting(
    anchors: &[&PspCertificate],
    config: &RevocationConfig,
) -> psp_gateway::service::CheckService {
    use psp_gateway::service::{CheckService, DataSources, ReferenceData, Revocation};
    use psp_gateway::trust::{
        Approval, CertKind, QcCompliancePolicy, QtspSource, Source, TrustList, TrustedIssuer,
        UntypedPolicy,
    };
    use std::collections::BTreeSet;
    let source = Source {
        name: "generated".into(),
        qtsp_source: QtspSource::Eidas,
        reported_jurisdiction: "XX".into(),
        valid_for: BTreeSet::from(["XX".parse().expect("country code")]),
        qc_compliance: QcCompliancePolicy::Optional,
        untyped: UntypedPolicy::Accept,
    };
    let issuers = anchors
        .iter()
        .enumerate()
        .map(|(i, certificate)| TrustedIssuer {
            source: 0,
            certificate: (*certificate).clone(),
            origin: format!("generated anchor {i}"),
            history: vec![Approval {
                from: None,
                active: true,
                kinds: BTreeSet::from([CertKind::Web, CertKind::Seal]),
                status: "granted".into(),
                qualifications: Vec::new(),
                not_understood: Vec::new(),
            }],
        })
        .collect();
    let data = ReferenceData {
        trust: TrustList::new(vec![source], issuers),
        registers: psp_gateway::register::RegisterSnapshot::empty(),
        generation: 1,
        loaded_at: NOW,
        sources: DataSources {
            trust: Vec::new(),
            registers: Default::default(),
            base_dir: std::path::PathBuf::from("."),
        },
    };
    let checker = psp_gateway::revocation::RevocationChecker::new(config).expect("checker");
    CheckService::new(
        data,
        Revocation::Fetch(checker),
        Duration::from_secs(300),
        100,
    )
}
