//! The sandbox PKI generator: generated once into a temporary directory, read back into memory,
//! the directory removed, then checked with x509-parser (and ring for the keys) against the
//! scenario table written out again here, independently of the generator's own tables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use psp_sandbox::pki::{
    BASE_URL, MANIFEST_FILE, Manifest, RevocationReason, SandboxQcType, generate, load_manifest,
};
use time::OffsetDateTime;
use time::macros::datetime;
use x509_parser::der_parser::ber::{BerObject, BerObjectContent};
use x509_parser::der_parser::der::parse_der;
use x509_parser::extensions::{DistributionPointName, GeneralName, ParsedExtension};
use x509_parser::oid_registry::{
    OID_PKIX_ACCESS_DESCRIPTOR_CA_ISSUERS, OID_PKIX_ACCESS_DESCRIPTOR_OCSP,
};
use x509_parser::prelude::{FromDer, X509Certificate};

// ---------------------------------------------------------------------------------------------
// The scenario table, as the task states it.

struct Expected {
    scenario: &'static str,
    auth_number: &'static str,
    issuer: &'static str,
    roles: &'static [(&'static str, &'static str)],
    country: &'static str,
    nca_name: &'static str,
    nca_id: &'static str,
    qc_type: &'static str,
    qc_compliance: bool,
    ecdsa: bool,
}

const PSP_AS: (&str, &str) = ("0.4.0.19495.1.1", "PSP_AS");
const PSP_PI: (&str, &str) = ("0.4.0.19495.1.2", "PSP_PI");
const PSP_AI: (&str, &str) = ("0.4.0.19495.1.3", "PSP_AI");
const PSP_IC: (&str, &str) = ("0.4.0.19495.1.4", "PSP_IC");
const PI_AI: &[(&str, &str)] = &[PSP_PI, PSP_AI];
const QCT_WEB: &str = "0.4.0.1862.1.6.3";
const QCT_ESEAL: &str = "0.4.0.1862.1.6.2";
const XX_NCA: &str = "Sandbox Competent Authority XX";

const fn xx(scenario: &'static str, auth_number: &'static str) -> Expected {
    Expected {
        scenario,
        auth_number,
        issuer: "qtsp-issuing",
        roles: PI_AI,
        country: "XX",
        nca_name: XX_NCA,
        nca_id: "XX-TEST",
        qc_type: QCT_WEB,
        qc_compliance: true,
        ecdsa: false,
    }
}

const EXPECTED: &[Expected] = &[
    Expected {
        roles: &[PSP_PI, PSP_AI, PSP_IC],
        ..xx("valid", "PSDXX-TEST-000001")
    },
    xx("unauthorised", "PSDXX-TEST-000002"),
    xx("roles-1-2", "PSDXX-TEST-000003"),
    xx("expired", "PSDXX-TEST-000004"),
    Expected {
        issuer: "untrusted-issuing",
        ..xx("untrusted", "PSDXX-TEST-000005")
    },
    xx("revoked", "PSDXX-TEST-000006"),
    xx("no-revocation", "PSDXX-TEST-000007"),
    xx("tampered", "PSDXX-TEST-000008"),
    xx("passport-out-xy", "PSDXX-TEST-000009"),
    xx("gb-tpr", "PSDXX-TEST-000010"),
    Expected {
        roles: &[PSP_IC],
        ..xx("role-5", "PSDXX-TEST-000011")
    },
    Expected {
        issuer: "obie-issuing",
        country: "GB",
        nca_name: "Financial Conduct Authority",
        nca_id: "GB-FCA",
        qc_compliance: false,
        ..xx("obie-valid", "PSDGB-FCA-000012")
    },
    Expected {
        issuer: "obhd-issuing",
        nca_name: "Sandbox Hub Directory",
        nca_id: "XX-OBHD",
        qc_compliance: false,
        ..xx("obhd-valid", "PSDXX-OBHD-000013")
    },
    Expected {
        qc_type: QCT_ESEAL,
        ..xx("qseal", "PSDXX-TEST-000014")
    },
    Expected {
        issuer: "qtsp-ecdsa-issuing",
        ecdsa: true,
        ..xx("ecdsa", "PSDXX-TEST-000015")
    },
    Expected {
        roles: &[PSP_AI],
        ..xx("aisp", "PSDXX-TEST-000016")
    },
    Expected {
        roles: &[PSP_AS, PSP_PI, PSP_AI, PSP_IC],
        ..xx("credit-institution", "PSDXX-TEST-000017")
    },
    xx("exempt", "PSDXX-TEST-000018"),
];

const CA_FILES: &[(&str, &str)] = &[
    ("qtsp-root", "PSP Gateway Sandbox QTSP Root CA"),
    ("qtsp-issuing", "PSP Gateway Sandbox QTSP Issuing CA"),
    (
        "qtsp-ecdsa-issuing",
        "PSP Gateway Sandbox QTSP ECDSA Issuing CA",
    ),
    ("obie-root", "PSP Gateway Sandbox OBIE Root CA"),
    ("obie-issuing", "PSP Gateway Sandbox OBIE Issuing CA"),
    ("obhd-root", "PSP Gateway Sandbox Hub Directory Root CA"),
    (
        "obhd-issuing",
        "PSP Gateway Sandbox Hub Directory Issuing CA",
    ),
    ("untrusted-issuing", "PSP Gateway Sandbox QTSP Issuing CA"),
];

/// A fixed validation time inside every validity window but `expired`'s.
const NOW: OffsetDateTime = datetime!(2026-06-01 0:00 UTC);

// ---------------------------------------------------------------------------------------------
// The fixture: one generation per test binary.

struct Fixture {
    manifest: Manifest,
    reloaded: Manifest,
    /// Every file written, by path relative to the output directory.
    files: BTreeMap<String, Vec<u8>>,
    elapsed: Duration,
}

/// Removes a temporary directory when dropped, also when a test panics.
struct TempDir(PathBuf);

impl TempDir {
    fn new(purpose: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "psp-gateway-{purpose}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = TempDir::new("sandbox-pki");
        let started = Instant::now();
        let manifest = generate(&dir.0).expect("generate the sandbox PKI");
        let elapsed = started.elapsed();
        eprintln!("sandbox PKI generated in {elapsed:?}");
        let reloaded = load_manifest(&dir.0.join(MANIFEST_FILE)).expect("load the manifest");
        let mut files = BTreeMap::new();
        read_tree(&dir.0, &dir.0, &mut files);
        Fixture {
            manifest,
            reloaded,
            files,
            elapsed,
        }
    })
}

fn read_tree(root: &Path, dir: &Path, files: &mut BTreeMap<String, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            read_tree(root, &path, files);
        } else {
            let relative = path
                .strip_prefix(root)
                .expect("below root")
                .to_str()
                .expect("UTF-8 path")
                .replace('\\', "/");
            files.insert(relative, std::fs::read(&path).expect("read file"));
        }
    }
}

impl Fixture {
    fn file(&self, relative: &str) -> &[u8] {
        self.files
            .get(relative)
            .unwrap_or_else(|| panic!("{relative} was not written"))
    }

    /// DER of the PEM certificate at `relative`.
    fn der(&self, relative: &str) -> Vec<u8> {
        let (rest, pem) =
            x509_parser::pem::parse_x509_pem(self.file(relative)).expect("PEM certificate");
        assert_eq!(pem.label, "CERTIFICATE", "{relative}");
        assert!(rest.iter().all(u8::is_ascii_whitespace), "{relative}");
        pem.contents
    }

    /// PKCS#8 DER of the PEM key at `relative`.
    fn key_der(&self, relative: &str) -> Vec<u8> {
        let (_, pem) = x509_parser::pem::parse_x509_pem(self.file(relative)).expect("PEM key");
        assert_eq!(pem.label, "PRIVATE KEY", "{relative} is PKCS#8");
        pem.contents
    }

    fn ca_der(&self, name: &str) -> Vec<u8> {
        self.der(&self.manifest.ca(name).expect("CA in manifest").cert)
    }

    fn psp_der(&self, scenario: &str) -> Vec<u8> {
        self.der(&self.manifest.psp(scenario).expect("PSP in manifest").cert)
    }
}

fn parse(der: &[u8]) -> X509Certificate<'_> {
    let (rest, cert) = X509Certificate::from_der(der).expect("X.509 certificate");
    assert!(rest.is_empty());
    cert
}

fn upper_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

fn uri(name: &GeneralName<'_>) -> String {
    match name {
        GeneralName::URI(uri) => (*uri).to_owned(),
        other => panic!("expected a URI, found {other:?}"),
    }
}

fn crl_urls(cert: &X509Certificate<'_>) -> Vec<String> {
    let mut urls = Vec::new();
    for ext in cert.extensions() {
        if let ParsedExtension::CRLDistributionPoints(points) = ext.parsed_extension() {
            for point in points.iter() {
                if let Some(DistributionPointName::FullName(names)) = &point.distribution_point {
                    urls.extend(names.iter().map(uri));
                }
            }
        }
    }
    urls
}

/// (OCSP URLs, caIssuers URLs).
fn aia_urls(cert: &X509Certificate<'_>) -> (Vec<String>, Vec<String>) {
    let (mut ocsp, mut ca_issuers) = (Vec::new(), Vec::new());
    for ext in cert.extensions() {
        if let ParsedExtension::AuthorityInfoAccess(aia) = ext.parsed_extension() {
            assert!(!ext.critical, "AIA must be non-critical (RFC 5280 4.2.2.1)");
            for desc in aia.iter() {
                if desc.access_method == OID_PKIX_ACCESS_DESCRIPTOR_OCSP {
                    ocsp.push(uri(&desc.access_location));
                } else if desc.access_method == OID_PKIX_ACCESS_DESCRIPTOR_CA_ISSUERS {
                    ca_issuers.push(uri(&desc.access_location));
                } else {
                    panic!("unexpected access method {}", desc.access_method);
                }
            }
        }
    }
    (ocsp, ca_issuers)
}

fn subject_key_id(cert: &X509Certificate<'_>) -> Vec<u8> {
    cert.extensions()
        .iter()
        .find_map(|ext| match ext.parsed_extension() {
            ParsedExtension::SubjectKeyIdentifier(id) => Some(id.0.to_vec()),
            _ => None,
        })
        .expect("subjectKeyIdentifier")
}

fn authority_key_id(cert: &X509Certificate<'_>) -> Vec<u8> {
    cert.extensions()
        .iter()
        .find_map(|ext| match ext.parsed_extension() {
            ParsedExtension::AuthorityKeyIdentifier(aki) => {
                aki.key_identifier.as_ref().map(|id| id.0.to_vec())
            }
            _ => None,
        })
        .expect("authorityKeyIdentifier with keyIdentifier")
}

/// An attribute of the subject by dotted OID: (universal tag number, value).
fn subject_attribute(cert: &X509Certificate<'_>, oid: &str) -> Option<(u32, String)> {
    cert.subject().iter_attributes().find_map(|attr| {
        (attr.attr_type().to_id_string() == oid).then(|| {
            (
                attr.attr_value().tag().0,
                attr.as_str().expect("string attribute").to_owned(),
            )
        })
    })
}

const TAG_UTF8_STRING: u32 = 12;
const TAG_PRINTABLE_STRING: u32 = 19;

// ---------------------------------------------------------------------------------------------
// QCStatements, walked with der-parser.

#[derive(Debug, PartialEq)]
struct DecodedQc {
    compliance: bool,
    qc_types: Vec<String>,
    roles: Vec<(String, String)>,
    nca_name: String,
    nca_id: String,
    statement_order: Vec<String>,
}

fn seq<'a, 'b>(obj: &'b BerObject<'a>) -> &'b [BerObject<'a>] {
    obj.as_sequence().expect("SEQUENCE")
}

fn oid_string(obj: &BerObject<'_>) -> String {
    obj.as_oid().expect("OBJECT IDENTIFIER").to_id_string()
}

fn utf8(obj: &BerObject<'_>) -> String {
    match &obj.content {
        BerObjectContent::UTF8String(s) => (*s).to_owned(),
        other => panic!("expected a UTF8String, found {other:?}"),
    }
}

fn decode_qc(cert: &X509Certificate<'_>) -> DecodedQc {
    let ext = cert
        .extensions()
        .iter()
        .find(|ext| ext.oid.to_id_string() == "1.3.6.1.5.5.7.1.3")
        .expect("QCStatements extension");
    assert!(!ext.critical, "QCStatements is non-critical");
    let (rest, statements) = parse_der(ext.value).expect("QCStatements DER");
    assert!(rest.is_empty(), "nothing after QCStatements");
    let mut decoded = DecodedQc {
        compliance: false,
        qc_types: Vec::new(),
        roles: Vec::new(),
        nca_name: String::new(),
        nca_id: String::new(),
        statement_order: Vec::new(),
    };
    for statement in seq(&statements) {
        let parts = seq(statement);
        let id = oid_string(&parts[0]);
        decoded.statement_order.push(id.clone());
        match id.as_str() {
            "0.4.0.1862.1.1" => {
                assert_eq!(parts.len(), 1, "QcCompliance has no statementInfo");
                decoded.compliance = true;
            }
            "0.4.0.1862.1.6" => {
                assert_eq!(parts.len(), 2);
                decoded.qc_types = seq(&parts[1]).iter().map(oid_string).collect();
            }
            "0.4.0.19495.2" => {
                assert_eq!(parts.len(), 2);
                let psd2 = seq(&parts[1]);
                assert_eq!(psd2.len(), 3, "rolesOfPSP, nCAName, nCAId");
                decoded.roles = seq(&psd2[0])
                    .iter()
                    .map(|role| {
                        let role = seq(role);
                        assert_eq!(role.len(), 2);
                        (oid_string(&role[0]), utf8(&role[1]))
                    })
                    .collect();
                decoded.nca_name = utf8(&psd2[1]);
                decoded.nca_id = utf8(&psd2[2]);
            }
            other => panic!("unexpected statement {other}"),
        }
    }
    decoded
}

// ---------------------------------------------------------------------------------------------
// Keys.

/// Signs with the PKCS#8 key and verifies with the certificate's public key.
fn key_matches(key_pkcs8: &[u8], cert: &X509Certificate<'_>, ecdsa: bool) -> bool {
    use ring::signature::{self, KeyPair as _};
    let rng = ring::rand::SystemRandom::new();
    let message = b"sandbox proof of possession";
    let spk = cert.public_key().subject_public_key.data.as_ref();
    if ecdsa {
        let key = signature::EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_ASN1_SIGNING,
            key_pkcs8,
            &rng,
        )
        .expect("P-256 PKCS#8 key");
        let sig = key.sign(&rng, message).expect("sign");
        key.public_key().as_ref() == spk
            && signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_ASN1, spk)
                .verify(message, sig.as_ref())
                .is_ok()
    } else {
        let key = signature::RsaKeyPair::from_pkcs8(key_pkcs8).expect("RSA PKCS#8 key");
        let mut sig = vec![0; key.public().modulus_len()];
        key.sign(&signature::RSA_PKCS1_SHA256, &rng, message, &mut sig)
            .expect("sign");
        key.public_key().as_ref() == spk
            && signature::UnparsedPublicKey::new(&signature::RSA_PKCS1_2048_8192_SHA256, spk)
                .verify(message, &sig)
                .is_ok()
    }
}

// ---------------------------------------------------------------------------------------------
// The specification.

#[test]
fn generation_writes_every_file_the_manifest_lists_and_nothing_else() {
    let f = fixture();
    eprintln!("generation took {:?}", f.elapsed);
    // The evidence signing key sits at a fixed path beside the manifest.
    let mut listed: Vec<&str> = vec![MANIFEST_FILE, "README.md", psp_sandbox::pki::EVIDENCE_KEY];
    for ca in &f.manifest.cas {
        listed.extend([ca.cert.as_str(), ca.key.as_str()]);
    }
    for psp in &f.manifest.psps {
        listed.extend([psp.cert.as_str(), psp.key.as_str()]);
    }
    let s = &f.manifest.server;
    listed.extend([
        s.ca_cert.as_str(),
        s.ca_key.as_str(),
        s.cert.as_str(),
        s.key.as_str(),
    ]);
    for site in &s.sites {
        listed.extend([site.cert.as_str(), site.key.as_str()]);
    }
    assert_eq!(
        s.sites.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["xx.localhost", "xy.localhost"],
        "a certificate for each sandbox site"
    );
    listed.sort_unstable();
    let written: Vec<&str> = f.files.keys().map(String::as_str).collect();
    assert_eq!(written, listed);
    let key = psp_service::evidence::SigningKey::from_pem(
        std::str::from_utf8(&f.files[psp_sandbox::pki::EVIDENCE_KEY]).expect("PEM text"),
    )
    .expect("the evidence key loads");
    assert_eq!(key.alg(), psp_service::evidence::Alg::Es256);

    let cas: Vec<(&str, &str)> = f
        .manifest
        .cas
        .iter()
        .map(|ca| (ca.name.as_str(), ca.subject_cn.as_str()))
        .collect();
    assert_eq!(cas, CA_FILES);
    for ca in &f.manifest.cas {
        assert_eq!(ca.cert, format!("ca/{}.pem", ca.name));
        assert_eq!(ca.key, format!("ca/{}.key", ca.name));
    }
    let scenarios: Vec<&str> = f
        .manifest
        .psps
        .iter()
        .map(|p| p.scenario.as_str())
        .collect();
    let expected: Vec<&str> = EXPECTED.iter().map(|e| e.scenario).collect();
    assert_eq!(scenarios, expected);
    assert_eq!(s.ca_cert, "server/ca.pem");
    assert_eq!(s.cert, "server/cert.pem");
    assert_eq!(s.key, "server/key.pem");

    let readme = String::from_utf8(f.file("README.md").to_vec()).expect("UTF-8 README");
    assert!(readme.contains("public test key"));
    assert!(readme.contains("outside the sandbox"));
}

#[test]
fn ca_certificates_are_critical_cas_allowed_to_sign_certificates_and_crls() {
    let f = fixture();
    for ca in &f.manifest.cas {
        let der = f.ca_der(&ca.name);
        let cert = parse(&der);
        let bc = cert
            .basic_constraints()
            .expect("unique")
            .expect("basicConstraints");
        assert!(bc.critical && bc.value.ca, "{}", ca.name);
        let ku = cert.key_usage().expect("unique").expect("keyUsage");
        assert!(ku.critical, "{}", ca.name);
        assert!(
            ku.value.key_cert_sign() && ku.value.crl_sign(),
            "{}",
            ca.name
        );
        assert!(!ku.value.digital_signature(), "{}", ca.name);
        assert_eq!(upper_hex(&subject_key_id(&cert)), ca.subject_key_id);
        assert_eq!(
            cert.validity().not_before.to_datetime(),
            datetime!(2025-01-01 0:00 UTC)
        );
        assert_eq!(
            cert.validity().not_after.to_datetime(),
            datetime!(2065-01-01 0:00 UTC)
        );
        let cn = subject_attribute(&cert, "2.5.4.3").expect("CN");
        assert_eq!(cn.1, ca.subject_cn);
        let country = subject_attribute(&cert, "2.5.4.6").expect("C");
        assert_eq!(country.0, TAG_PRINTABLE_STRING);
        let expected_country = if ca.name.starts_with("obie") {
            "GB"
        } else {
            "XX"
        };
        assert_eq!(country.1, expected_country, "{}", ca.name);
        assert_eq!(ca.crl_url, format!("{BASE_URL}/crl/{}.crl", ca.name));
        assert_eq!(ca.ocsp_url, format!("{BASE_URL}/ocsp/{}", ca.name));
        assert_eq!(ca.ca_issuers_url, format!("{BASE_URL}/ca/{}.crt", ca.name));
    }
    assert_eq!(BASE_URL, "http://127.0.0.1:9090/sandbox");
}

#[test]
fn issuing_cas_verify_against_their_roots_and_roots_against_themselves() {
    let f = fixture();
    let chains = [
        ("qtsp-root", "qtsp-root"),
        ("qtsp-issuing", "qtsp-root"),
        ("qtsp-ecdsa-issuing", "qtsp-root"),
        ("obie-root", "obie-root"),
        ("obie-issuing", "obie-root"),
        ("obhd-root", "obhd-root"),
        ("obhd-issuing", "obhd-root"),
        ("untrusted-issuing", "untrusted-issuing"),
    ];
    for (child, parent) in chains {
        let (child_der, parent_der) = (f.ca_der(child), f.ca_der(parent));
        let (child_cert, parent_cert) = (parse(&child_der), parse(&parent_der));
        assert!(
            child_cert
                .verify_signature(Some(parent_cert.public_key()))
                .is_ok(),
            "{child} is signed by {parent}"
        );
        assert_eq!(child_cert.issuer().as_raw(), parent_cert.subject().as_raw());
        let entry = f.manifest.ca(child).expect("in manifest");
        assert_eq!(
            entry.issued_by.as_deref(),
            (child != parent).then_some(parent)
        );
        if child != parent {
            assert_eq!(authority_key_id(&child_cert), subject_key_id(&parent_cert));
        }
    }
    let ecdsa_der = f.ca_der("qtsp-ecdsa-issuing");
    let ecdsa = parse(&ecdsa_der);
    assert_eq!(
        ecdsa.public_key().algorithm.algorithm.to_id_string(),
        "1.2.840.10045.2.1",
        "id-ecPublicKey"
    );
    assert_eq!(
        ecdsa.signature_algorithm.algorithm.to_id_string(),
        "1.2.840.113549.1.1.11",
        "signed by the RSA root with sha256WithRSAEncryption"
    );
}

#[test]
fn every_psp_certificate_verifies_against_its_issuing_ca_except_the_tampered_one() {
    let f = fixture();
    for expected in EXPECTED {
        let entry = f.manifest.psp(expected.scenario).expect("in manifest");
        assert_eq!(entry.issuer, expected.issuer, "{}", expected.scenario);
        let (der, ca_der) = (f.psp_der(expected.scenario), f.ca_der(expected.issuer));
        let (cert, ca) = (parse(&der), parse(&ca_der));
        assert_eq!(cert.issuer().as_raw(), ca.subject().as_raw());
        assert_eq!(authority_key_id(&cert), subject_key_id(&ca));
        let verified = cert.verify_signature(Some(ca.public_key())).is_ok();
        assert_eq!(
            verified,
            expected.scenario != "tampered",
            "{}",
            expected.scenario
        );
        assert_eq!(entry.tampered, expected.scenario == "tampered");
        let algorithm = cert.signature_algorithm.algorithm.to_id_string();
        let expected_algorithm = if expected.ecdsa {
            "1.2.840.10045.4.3.2"
        } else {
            "1.2.840.113549.1.1.11"
        };
        assert_eq!(algorithm, expected_algorithm, "{}", expected.scenario);
    }
}

#[test]
fn the_untrusted_certificate_verifies_only_against_the_lookalike_with_an_identical_name() {
    let f = fixture();
    let (der, lookalike_der, genuine_der) = (
        f.psp_der("untrusted"),
        f.ca_der("untrusted-issuing"),
        f.ca_der("qtsp-issuing"),
    );
    let (cert, lookalike, genuine) = (parse(&der), parse(&lookalike_der), parse(&genuine_der));
    // The names are the same octets …
    assert_eq!(lookalike.subject().as_raw(), genuine.subject().as_raw());
    assert_eq!(cert.issuer().as_raw(), genuine.subject().as_raw());
    // … the keys are not.
    assert_ne!(lookalike.public_key().raw, genuine.public_key().raw);
    assert!(cert.verify_signature(Some(lookalike.public_key())).is_ok());
    assert!(cert.verify_signature(Some(genuine.public_key())).is_err());
    assert_ne!(authority_key_id(&cert), subject_key_id(&genuine));
    let entry = f.manifest.ca("untrusted-issuing").expect("in manifest");
    assert_eq!(entry.lookalike_of.as_deref(), Some("qtsp-issuing"));
    assert_eq!(entry.issued_by, None);
}

#[test]
fn the_tampered_certificate_parses_and_names_an_organisation_it_was_not_signed_for() {
    let f = fixture();
    let der = f.psp_der("tampered");
    let cert = parse(&der);
    let o = subject_attribute(&cert, "2.5.4.10").expect("O");
    assert_eq!(o, (TAG_UTF8_STRING, "Sandbox Tampered PSQ".to_owned()));
    let entry = f.manifest.psp("tampered").expect("in manifest");
    assert_eq!(entry.organisation, "Sandbox Tampered PSP");
    // Changing the octet back restores the signature: exactly one octet was changed.
    let mut restored = der.clone();
    let at = restored
        .windows(20)
        .position(|w| w == b"Sandbox Tampered PSQ")
        .expect("tampered O value");
    restored[at + 19] = b'P';
    let ca_der = f.ca_der("qtsp-issuing");
    let ca = parse(&ca_der);
    assert!(
        parse(&restored)
            .verify_signature(Some(ca.public_key()))
            .is_ok()
    );
}

#[test]
fn validity_windows_follow_the_scenarios() {
    let f = fixture();
    for expected in EXPECTED {
        let der = f.psp_der(expected.scenario);
        let cert = parse(&der);
        let entry = f.manifest.psp(expected.scenario).expect("in manifest");
        let (not_before, not_after) = if expected.scenario == "expired" {
            (
                datetime!(2020-01-01 0:00 UTC),
                datetime!(2021-01-01 0:00 UTC),
            )
        } else {
            (
                datetime!(2025-01-01 0:00 UTC),
                datetime!(2055-01-01 0:00 UTC),
            )
        };
        let validity = cert.validity();
        assert_eq!(validity.not_before.to_datetime(), not_before);
        assert_eq!(validity.not_after.to_datetime(), not_after);
        assert_eq!((entry.not_before, entry.not_after), (not_before, not_after));
        let valid_now =
            validity.not_before.to_datetime() <= NOW && NOW <= validity.not_after.to_datetime();
        assert_eq!(valid_now, expected.scenario != "expired");
    }
}

#[test]
fn revocation_pointers_are_the_issuers_exact_urls_except_for_no_revocation() {
    let f = fixture();
    for expected in EXPECTED {
        let der = f.psp_der(expected.scenario);
        let cert = parse(&der);
        let entry = f.manifest.psp(expected.scenario).expect("in manifest");
        let (ocsp, ca_issuers) = aia_urls(&cert);
        let ca = expected.issuer;
        assert_eq!(
            ca_issuers,
            vec![format!("http://127.0.0.1:9090/sandbox/ca/{ca}.crt")]
        );
        if expected.scenario == "no-revocation" {
            assert!(crl_urls(&cert).is_empty());
            assert!(ocsp.is_empty());
            assert_eq!((&entry.crl_url, &entry.ocsp_url), (&None, &None));
        } else {
            let crl = format!("http://127.0.0.1:9090/sandbox/crl/{ca}.crl");
            let ocsp_url = format!("http://127.0.0.1:9090/sandbox/ocsp/{ca}");
            assert_eq!(crl_urls(&cert), vec![crl.clone()], "{}", expected.scenario);
            assert_eq!(ocsp, vec![ocsp_url.clone()], "{}", expected.scenario);
            assert_eq!(entry.crl_url.as_deref(), Some(crl.as_str()));
            assert_eq!(entry.ocsp_url.as_deref(), Some(ocsp_url.as_str()));
            let issuer = f.manifest.ca(ca).expect("issuer in manifest");
            assert_eq!(issuer.crl_url, crl);
            assert_eq!(issuer.ocsp_url, ocsp_url);
        }
        let revoked = expected.scenario == "revoked";
        assert_eq!(entry.revoked, revoked);
        assert_eq!(
            entry.revocation_reason,
            revoked.then_some(RevocationReason::KeyCompromise)
        );
        assert_eq!(entry.revocation_time.is_some(), revoked);
    }
    assert_eq!(RevocationReason::KeyCompromise.code(), 1);
}

#[test]
fn qc_statements_decode_to_the_intended_roles_nca_and_qc_type() {
    let f = fixture();
    for expected in EXPECTED {
        let der = f.psp_der(expected.scenario);
        let qc = decode_qc(&parse(&der));
        let roles: Vec<(String, String)> = expected
            .roles
            .iter()
            .map(|(oid, name)| ((*oid).to_owned(), (*name).to_owned()))
            .collect();
        let mut order = Vec::new();
        if expected.qc_compliance {
            order.push("0.4.0.1862.1.1".to_owned());
        }
        order.extend(["0.4.0.1862.1.6".to_owned(), "0.4.0.19495.2".to_owned()]);
        assert_eq!(
            qc,
            DecodedQc {
                compliance: expected.qc_compliance,
                qc_types: vec![expected.qc_type.to_owned()],
                roles,
                nca_name: expected.nca_name.to_owned(),
                nca_id: expected.nca_id.to_owned(),
                statement_order: order,
            },
            "{}",
            expected.scenario
        );
        let entry = f.manifest.psp(expected.scenario).expect("in manifest");
        let names: Vec<&str> = expected.roles.iter().map(|(_, name)| *name).collect();
        assert_eq!(entry.roles, names);
        assert_eq!(
            (entry.nca_name.as_str(), entry.nca_id.as_str()),
            (expected.nca_name, expected.nca_id)
        );
        assert_eq!(entry.qc_compliance, expected.qc_compliance);
        let qc_type = if expected.qc_type == QCT_WEB {
            SandboxQcType::Web
        } else {
            SandboxQcType::Eseal
        };
        assert_eq!(entry.qc_type, qc_type);
    }
}

#[test]
fn subjects_carry_home_country_name_and_auth_number_as_organization_identifier() {
    let f = fixture();
    for expected in EXPECTED {
        let der = f.psp_der(expected.scenario);
        let cert = parse(&der);
        let entry = f.manifest.psp(expected.scenario).expect("in manifest");
        assert_eq!(
            subject_attribute(&cert, "2.5.4.97"),
            Some((TAG_UTF8_STRING, expected.auth_number.to_owned())),
            "{}",
            expected.scenario
        );
        assert_eq!(entry.auth_number, expected.auth_number);
        assert_eq!(
            subject_attribute(&cert, "2.5.4.6"),
            Some((TAG_PRINTABLE_STRING, expected.country.to_owned()))
        );
        assert_eq!(entry.country, expected.country);
        let cn = format!("{}.psp.sandbox", expected.scenario);
        assert_eq!(
            subject_attribute(&cert, "2.5.4.3"),
            Some((TAG_UTF8_STRING, cn.clone()))
        );
        assert_eq!(entry.common_name, cn);
        if expected.scenario != "tampered" {
            assert_eq!(
                subject_attribute(&cert, "2.5.4.10"),
                Some((TAG_UTF8_STRING, entry.organisation.clone()))
            );
        }
        assert!(entry.organisation.starts_with("Sandbox "));
    }
}

#[test]
fn psp_certificates_have_end_entity_extensions_and_random_positive_serials() {
    let f = fixture();
    let mut serials = std::collections::HashSet::new();
    for expected in EXPECTED {
        let der = f.psp_der(expected.scenario);
        let cert = parse(&der);
        let entry = f.manifest.psp(expected.scenario).expect("in manifest");

        let ku = cert.key_usage().expect("unique").expect("keyUsage");
        assert!(ku.critical);
        assert!(ku.value.digital_signature());
        assert!(!ku.value.key_cert_sign());

        let eku = cert.extended_key_usage().expect("unique");
        if expected.qc_type == QCT_ESEAL {
            assert!(eku.is_none(), "a QSealC has no TLS extended key usage");
            assert!(!entry.tls_key_usage);
        } else {
            let eku = eku.expect("extendedKeyUsage").value;
            assert!(eku.server_auth && eku.client_auth, "{}", expected.scenario);
            assert!(entry.tls_key_usage);
        }

        let bc = cert.basic_constraints().expect("unique");
        assert!(bc.is_none_or(|bc| !bc.value.ca));
        assert!(!subject_key_id(&cert).is_empty());

        let serial = cert.raw_serial();
        assert_eq!(serial.len(), 16, "{}", expected.scenario);
        assert!(
            serial[0] != 0 && serial[0] < 0x80,
            "positive, no leading zero"
        );
        assert_eq!(upper_hex(serial), entry.serial);
        assert_eq!(entry.serial_bytes().as_deref(), Some(serial));
        assert!(serials.insert(entry.serial.clone()), "serials are unique");

        let spki_algorithm = cert.public_key().algorithm.algorithm.to_id_string();
        if expected.ecdsa {
            assert_eq!(spki_algorithm, "1.2.840.10045.2.1");
        } else {
            assert_eq!(spki_algorithm, "1.2.840.113549.1.1.1");
            let rsa = match cert.public_key().parsed().expect("RSA key") {
                x509_parser::public_key::PublicKey::RSA(rsa) => rsa,
                other => panic!("expected RSA, found {other:?}"),
            };
            assert_eq!(rsa.key_size(), 2048);
        }
    }
}

#[test]
fn every_key_file_matches_its_certificate() {
    let f = fixture();
    let mut pairs: Vec<(String, String, bool)> = Vec::new();
    for ca in &f.manifest.cas {
        let ecdsa = ca.name == "qtsp-ecdsa-issuing";
        pairs.push((ca.cert.clone(), ca.key.clone(), ecdsa));
    }
    for expected in EXPECTED {
        let entry = f.manifest.psp(expected.scenario).expect("in manifest");
        pairs.push((entry.cert.clone(), entry.key.clone(), expected.ecdsa));
    }
    let s = &f.manifest.server;
    pairs.push((s.ca_cert.clone(), s.ca_key.clone(), true));
    pairs.push((s.cert.clone(), s.key.clone(), true));
    for (cert_path, key_path, ecdsa) in pairs {
        let der = f.der(&cert_path);
        let cert = parse(&der);
        assert!(
            key_matches(&f.key_der(&key_path), &cert, ecdsa),
            "{key_path} matches {cert_path}"
        );
    }
}

#[test]
fn rsa_ca_keys_are_3072_bits() {
    let f = fixture();
    for ca in &f.manifest.cas {
        let der = f.ca_der(&ca.name);
        let cert = parse(&der);
        match cert.public_key().parsed().expect("public key") {
            x509_parser::public_key::PublicKey::RSA(rsa) => {
                assert_eq!(rsa.key_size(), 3072, "{}", ca.name);
            }
            x509_parser::public_key::PublicKey::EC(_) => {
                assert_eq!(ca.name, "qtsp-ecdsa-issuing");
            }
            other => panic!("unexpected key {other:?}"),
        }
    }
}

#[test]
fn the_server_certificate_serves_localhost_and_the_loopback_addresses() {
    let f = fixture();
    let s = &f.manifest.server;
    let (der, ca_der) = (f.der(&s.cert), f.der(&s.ca_cert));
    let (cert, ca) = (parse(&der), parse(&ca_der));
    assert!(cert.verify_signature(Some(ca.public_key())).is_ok());
    assert!(
        ca.verify_signature(None).is_ok(),
        "the server CA is self-signed"
    );
    assert_eq!(
        subject_attribute(&ca, "2.5.4.3").map(|a| a.1).as_deref(),
        Some("PSP Gateway Sandbox Server CA")
    );
    assert_eq!(
        cert.signature_algorithm.algorithm.to_id_string(),
        "1.2.840.10045.4.3.2"
    );
    let san = cert
        .subject_alternative_name()
        .expect("unique")
        .expect("subjectAltName")
        .value;
    let mut dns = Vec::new();
    let mut ips = Vec::new();
    for name in &san.general_names {
        match name {
            GeneralName::DNSName(n) => dns.push((*n).to_owned()),
            GeneralName::IPAddress(ip) => ips.push(ip.to_vec()),
            other => panic!("unexpected SAN {other:?}"),
        }
    }
    assert_eq!(dns, vec!["localhost"]);
    let mut v6_loopback = vec![0u8; 16];
    v6_loopback[15] = 1;
    assert_eq!(ips, vec![vec![127, 0, 0, 1], v6_loopback]);
    assert_eq!(s.ip_addresses, vec!["127.0.0.1", "::1"]);
    let eku = cert
        .extended_key_usage()
        .expect("unique")
        .expect("EKU")
        .value;
    assert!(eku.server_auth);
    assert_eq!(
        cert.validity().not_after.to_datetime(),
        datetime!(2065-01-01 0:00 UTC)
    );
    assert_eq!(authority_key_id(&cert), subject_key_id(&ca));
}

#[test]
fn the_manifest_round_trips_through_load_manifest() {
    let f = fixture();
    assert_eq!(f.reloaded, f.manifest);
    let written: serde_json::Value =
        serde_json::from_slice(f.file(MANIFEST_FILE)).expect("manifest is JSON");
    assert_eq!(written["psps"][5]["scenario"], "revoked");
    assert_eq!(written["psps"][5]["revocation_reason"], "keyCompromise");
    assert_eq!(
        written["psps"][5]["revocation_time"],
        "2025-01-02T00:00:00Z"
    );
    assert_eq!(written["cas"][0]["not_before"], "2025-01-01T00:00:00Z");
}

#[test]
fn load_manifest_rejects_what_is_not_a_manifest() {
    let dir = TempDir::new("sandbox-manifest");
    let path = dir.0.join(MANIFEST_FILE);
    std::fs::write(&path, b"{\"format\": 1}").expect("write");
    let err = load_manifest(&path).expect_err("not a manifest");
    assert!(err.to_string().contains(MANIFEST_FILE), "{err}");
    assert!(load_manifest(&dir.0.join("missing.json")).is_err());
}

#[test]
fn a_ca_loaded_from_the_manifest_signs_certificates_that_chain_to_it() {
    let f = fixture();
    let dir = TempDir::new("sandbox-issuer");
    for name in ["qtsp-issuing", "qtsp-ecdsa-issuing"] {
        let ca = f.manifest.ca(name).expect("in manifest");
        std::fs::create_dir_all(dir.0.join("ca")).expect("mkdir");
        std::fs::write(dir.0.join(&ca.cert), f.file(&ca.cert)).expect("write cert");
        std::fs::write(dir.0.join(&ca.key), f.file(&ca.key)).expect("write key");
        let issuer = ca.load_issuer(&dir.0).expect("load issuer");

        let mut params =
            rcgen::CertificateParams::new(vec!["x.psp.sandbox".to_owned()]).expect("params");
        params.use_authority_key_identifier_extension = true;
        let leaf_key = rcgen::KeyPair::generate().expect("P-256 key");
        let leaf = params.signed_by(&leaf_key, &issuer).expect("sign");

        let ca_der = f.ca_der(name);
        let ca_cert = parse(&ca_der);
        let leaf_cert = parse(leaf.der());
        assert!(
            leaf_cert
                .verify_signature(Some(ca_cert.public_key()))
                .is_ok()
        );
        assert_eq!(leaf_cert.issuer().as_raw(), ca_cert.subject().as_raw());
        assert_eq!(authority_key_id(&leaf_cert), subject_key_id(&ca_cert));
    }
}
