//! Trusted-list signatures made and checked by someone else: `xmlsec1` (libxmlsec1 over
//! libxml2 and OpenSSL, Debian package `xmlsec1`; scripts/test installs it) signs small
//! TS 119 612 documents with keys made by the `openssl` CLI, with each allowed algorithm and
//! canonicalisation, and our verifier must agree; and `xmlsec1 --verify` must agree with us
//! on the real lists in `../shared/data/trusted-lists/`.
//!
//! xmlsec1 1.2.37 (Debian 12) has no RSA-PSS; PSS is covered by the unit tests of
//! `cert::signature` only.

mod common;

use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use common::xmlsec::{Scratch, Signer, run, signer};
use psp_service::trust::xmlsig::{
    Canonicalization, DigestAlgorithm, SignatureAlgorithm, XmlSigError, verify_bytes,
};

const EXC: &str = "http://www.w3.org/2001/10/xml-exc-c14n#";
const EXC_COMMENTS: &str = "http://www.w3.org/2001/10/xml-exc-c14n#WithComments";
const INC: &str = "http://www.w3.org/TR/2001/REC-xml-c14n-20010315";
const INC_COMMENTS: &str = "http://www.w3.org/TR/2001/REC-xml-c14n-20010315#WithComments";
const RSA_SHA256: &str = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256";
const RSA_SHA384: &str = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha384";
const RSA_SHA512: &str = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha512";
const ECDSA_SHA256: &str = "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256";
const ECDSA_SHA384: &str = "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384";
const SHA256: &str = "http://www.w3.org/2001/04/xmlenc#sha256";
const SHA512: &str = "http://www.w3.org/2001/04/xmlenc#sha512";
const SHA1: &str = "http://www.w3.org/2000/09/xmldsig#sha1";

fn rsa(dir: &Path, bits: u32) -> Signer {
    signer(
        dir,
        &format!("rsa{bits}"),
        &["-newkey", &format!("rsa:{bits}")],
    )
}

fn ec(dir: &Path, curve: &str) -> Signer {
    signer(
        dir,
        &format!("ec-{curve}"),
        &[
            "-newkey",
            "ec",
            "-pkeyopt",
            &format!("ec_paramgen_curve:{curve}"),
        ],
    )
}

/// The two ways XAdES names the signing certificate.
#[derive(Clone, Copy)]
enum SigningCert {
    /// XAdES 1.3.2 `SigningCertificate`, CertDigest SHA-1 (as the real LOTL and IE lists).
    V1Sha1,
    /// EN 319 132-1 `SigningCertificateV2`, CertDigest SHA-256 (TLv6).
    V2Sha256,
}

struct Template<'a> {
    c14n: &'a str,
    signature: &'a str,
    document_digest: &'a str,
    properties_digest: &'a str,
    signing_cert: SigningCert,
}

const DEFAULT: Template<'static> = Template {
    c14n: EXC,
    signature: RSA_SHA256,
    document_digest: SHA256,
    properties_digest: SHA512,
    signing_cert: SigningCert::V2Sha256,
};

/// A small TS 119 612 list with an unsigned XAdES template for xmlsec1 to fill, exercising
/// what canonicalisation must get right: an XML declaration, comments and a processing
/// instruction outside and inside, namespaces declared on the root and used deeper, a
/// namespaced attribute, `xml:lang`, entity and character references, CR in content.
fn template(t: &Template<'_>, cert_der: &[u8]) -> String {
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let cert_ref = match t.signing_cert {
        SigningCert::V1Sha1 => format!(
            "<xades:SigningCertificate><xades:Cert><xades:CertDigest><ds:DigestMethod Algorithm=\"{SHA1}\"/><ds:DigestValue>{}</ds:DigestValue></xades:CertDigest><xades:IssuerSerial><ds:X509IssuerName>CN=x</ds:X509IssuerName><ds:X509SerialNumber>1</ds:X509SerialNumber></xades:IssuerSerial></xades:Cert></xades:SigningCertificate>",
            b64(ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, cert_der).as_ref())
        ),
        SigningCert::V2Sha256 => format!(
            "<xades:SigningCertificateV2><xades:Cert><xades:CertDigest><ds:DigestMethod Algorithm=\"{SHA256}\"/><ds:DigestValue>{}</ds:DigestValue></xades:CertDigest></xades:Cert></xades:SigningCertificateV2>",
            b64(ring::digest::digest(&ring::digest::SHA256, cert_der).as_ref())
        ),
    };
    format!(
        r##"<?xml version="1.0" encoding="UTF-8"?>
<!-- before the list -->
<TrustServiceStatusList xmlns="http://uri.etsi.org/02231/v2#" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" xmlns:tslx="http://uri.etsi.org/02231/v2/additionaltypes#" xmlns:unused="urn:unused" Id="TSL" TSLTag="http://uri.etsi.org/19612/TSLTag">
  <SchemeInformation>
    <TSLVersionIdentifier>6</TSLVersionIdentifier>
    <TSLSequenceNumber>1</TSLSequenceNumber>
    <SchemeOperatorName><Name xml:lang="en">Test operator &amp; sons &lt;x&gt; &#169;&#13;</Name></SchemeOperatorName>
    <SchemeTerritory>CZ</SchemeTerritory>
  </SchemeInformation>
  <?keep this?>
  <TrustServiceProviderList>
    <TrustServiceProvider>
      <TSPServices><TSPService><ServiceInformation>
        <ServiceStatus>http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/withdrawn</ServiceStatus>
        <!-- inside -->
        <ServiceInformationExtensions><Extension Critical="false"><tslx:ExtendedKeyUsage tslx:note="a&#9;b"><KeyPurposeId xmlns=""><Identifier>1.3.6.1.5.5.7.3.1</Identifier></KeyPurposeId></tslx:ExtendedKeyUsage></Extension></ServiceInformationExtensions>
      </ServiceInformation></TSPService></TSPServices>
    </TrustServiceProvider>
  </TrustServiceProviderList>
<ds:Signature Id="sig"><ds:SignedInfo><ds:CanonicalizationMethod Algorithm="{c14n}"/><ds:SignatureMethod Algorithm="{sig}"/><ds:Reference Id="doc" URI=""><ds:Transforms><ds:Transform Algorithm="http://www.w3.org/2000/09/xmldsig#enveloped-signature"/><ds:Transform Algorithm="{c14n}"/></ds:Transforms><ds:DigestMethod Algorithm="{dd}"/><ds:DigestValue></ds:DigestValue></ds:Reference><ds:Reference Type="http://uri.etsi.org/01903#SignedProperties" URI="#xades-sig"><ds:Transforms><ds:Transform Algorithm="{c14n}"/></ds:Transforms><ds:DigestMethod Algorithm="{pd}"/><ds:DigestValue></ds:DigestValue></ds:Reference></ds:SignedInfo><ds:SignatureValue></ds:SignatureValue><ds:KeyInfo><ds:X509Data><ds:X509Certificate>{cert}</ds:X509Certificate></ds:X509Data></ds:KeyInfo><ds:Object><xades:QualifyingProperties xmlns:xades="http://uri.etsi.org/01903/v1.3.2#" Target="#sig"><xades:SignedProperties Id="xades-sig"><xades:SignedSignatureProperties><xades:SigningTime>2026-01-01T00:00:00Z</xades:SigningTime>{cert_ref}</xades:SignedSignatureProperties></xades:SignedProperties></xades:QualifyingProperties></ds:Object></ds:Signature></TrustServiceStatusList>
<!-- after the list -->
"##,
        c14n = t.c14n,
        sig = t.signature,
        dd = t.document_digest,
        pd = t.properties_digest,
        cert = b64(cert_der),
    )
}

/// Signs `t` with `signer` using `xmlsec1 --sign`.
fn xmlsec_sign(dir: &Path, name: &str, t: &Template<'_>, signer: &Signer) -> Vec<u8> {
    let input = dir.join(format!("{name}.template.xml"));
    let output = dir.join(format!("{name}.signed.xml"));
    std::fs::write(&input, template(t, &signer.cert_der)).expect("write template");
    run(Command::new("xmlsec1")
        .args([
            "--sign",
            "--id-attr:Id",
            "SignedProperties",
            "--privkey-pem",
        ])
        .arg(&signer.key)
        .arg("--output")
        .arg(&output)
        .arg(&input));
    std::fs::read(&output).expect("signed output")
}

/// `xmlsec1 --verify` with the certificate from KeyInfo taken as is: true when it says OK.
fn xmlsec_verifies(file: &Path) -> bool {
    let out = Command::new("xmlsec1")
        .args(["--verify", "--insecure", "--id-attr:Id", "SignedProperties"])
        .arg(file)
        .output()
        .expect("xmlsec1 runs (install xmlsec1; scripts/test does)");
    out.status.success()
}

#[test]
fn lists_signed_by_xmlsec1_with_each_allowed_rsa_algorithm_and_canonicalisation_verify() {
    let scratch = Scratch::new("rsa");
    let key = rsa(&scratch.0, 2048);
    let cases = [
        (
            RSA_SHA256,
            EXC,
            SignatureAlgorithm::RsaPkcs1(DigestAlgorithm::Sha256),
        ),
        (
            RSA_SHA384,
            EXC,
            SignatureAlgorithm::RsaPkcs1(DigestAlgorithm::Sha384),
        ),
        (
            RSA_SHA512,
            EXC,
            SignatureAlgorithm::RsaPkcs1(DigestAlgorithm::Sha512),
        ),
        (
            RSA_SHA256,
            EXC_COMMENTS,
            SignatureAlgorithm::RsaPkcs1(DigestAlgorithm::Sha256),
        ),
        (
            RSA_SHA256,
            INC,
            SignatureAlgorithm::RsaPkcs1(DigestAlgorithm::Sha256),
        ),
        (
            RSA_SHA256,
            INC_COMMENTS,
            SignatureAlgorithm::RsaPkcs1(DigestAlgorithm::Sha256),
        ),
    ];
    for (i, (sig, c14n, expected)) in cases.into_iter().enumerate() {
        for signing_cert in [SigningCert::V1Sha1, SigningCert::V2Sha256] {
            let t = Template {
                c14n,
                signature: sig,
                signing_cert,
                ..DEFAULT
            };
            let signed = xmlsec_sign(&scratch.0, &format!("rsa-{i}"), &t, &key);
            let v = verify_bytes(&signed).unwrap_or_else(|e| panic!("{sig} with {c14n}: {e}"));
            assert_eq!(v.signature_algorithm, expected);
            assert_eq!(Some(v.canonicalization.uri()), Some(c14n));
            assert_eq!(v.signed_properties_digest, DigestAlgorithm::Sha512);
            assert_eq!(v.signer.der, key.cert_der);
            assert_eq!(v.signer.subject_cn.as_deref(), Some("Test rsa2048 signer"));
            assert!(v.signing_time.is_some());
        }
    }
}

#[test]
fn lists_signed_by_xmlsec1_with_ecdsa_on_p256_and_p384_verify() {
    let scratch = Scratch::new("ec");
    for (curve, sig, hash) in [
        ("P-256", ECDSA_SHA256, DigestAlgorithm::Sha256),
        ("P-384", ECDSA_SHA384, DigestAlgorithm::Sha384),
    ] {
        let key = ec(&scratch.0, curve);
        for c14n in [EXC, INC] {
            let t = Template {
                c14n,
                signature: sig,
                ..DEFAULT
            };
            let signed = xmlsec_sign(&scratch.0, curve, &t, &key);
            let v = verify_bytes(&signed)
                .unwrap_or_else(|e| panic!("{sig} on {curve} with {c14n}: {e}"));
            assert_eq!(v.signature_algorithm, SignatureAlgorithm::Ecdsa(hash));
        }
    }
}

#[test]
fn an_xmlsec1_signed_list_edited_after_signing_is_refused_by_both() {
    let scratch = Scratch::new("edit");
    let key = rsa(&scratch.0, 2048);
    for c14n in [EXC, INC] {
        let t = Template { c14n, ..DEFAULT };
        let signed = String::from_utf8(xmlsec_sign(&scratch.0, "edit", &t, &key)).expect("UTF-8");
        let edited = signed.replacen("Svcstatus/withdrawn", "Svcstatus/granted", 1);
        assert_ne!(edited, signed);
        let file = scratch.0.join("edited.xml");
        std::fs::write(&file, &edited).expect("write");
        assert!(!xmlsec_verifies(&file), "xmlsec1 accepted an edited list");
        assert_eq!(
            verify_bytes(edited.as_bytes()).expect_err("edited"),
            XmlSigError::DigestMismatch { uri: String::new() }
        );
    }
}

#[test]
fn a_list_re_signed_by_another_key_verifies_but_names_that_other_signer() {
    // Who may sign a list is decided by the caller against the configuration or the list of
    // the lists: the verifier must hand back the signer that really signed, not one the
    // document claims elsewhere.
    let scratch = Scratch::new("resign");
    let operator = rsa(&scratch.0, 2048);
    let attacker = ec(&scratch.0, "P-256");
    let t = Template {
        signature: ECDSA_SHA256,
        ..DEFAULT
    };
    let honest = verify_bytes(&xmlsec_sign(&scratch.0, "op", &DEFAULT, &operator)).expect("op");
    let forged = verify_bytes(&xmlsec_sign(&scratch.0, "at", &t, &attacker)).expect("at");
    assert_ne!(
        honest.signer.fingerprint_sha256,
        forged.signer.fingerprint_sha256
    );
    assert_eq!(forged.signer.der, attacker.cert_der);
}

#[test]
fn a_list_signed_with_a_1024_bit_rsa_key_is_refused() {
    let scratch = Scratch::new("weak");
    let key = rsa(&scratch.0, 1024);
    let signed = xmlsec_sign(&scratch.0, "weak", &DEFAULT, &key);
    let err = verify_bytes(&signed).expect_err("1024-bit RSA");
    assert!(
        err.to_string().contains("below the 2048-bit minimum"),
        "{err}"
    );
}

#[test]
fn a_list_naming_the_signer_with_a_sha1_signing_certificate_v2_is_refused() {
    // SHA-1 is tolerated only in the XAdES 1.3.2 SigningCertificate of older lists.
    let scratch = Scratch::new("v2sha1");
    let key = rsa(&scratch.0, 2048);
    let t = template(&DEFAULT, &key.cert_der);
    let sha256 = base64::engine::general_purpose::STANDARD
        .encode(ring::digest::digest(&ring::digest::SHA256, &key.cert_der).as_ref());
    let sha1 = base64::engine::general_purpose::STANDARD.encode(
        ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &key.cert_der).as_ref(),
    );
    let t = t.replacen(
        &format!("<ds:DigestMethod Algorithm=\"{SHA256}\"/><ds:DigestValue>{sha256}"),
        &format!("<ds:DigestMethod Algorithm=\"{SHA1}\"/><ds:DigestValue>{sha1}"),
        1,
    );
    let input = scratch.0.join("v2sha1.template.xml");
    let output = scratch.0.join("v2sha1.signed.xml");
    std::fs::write(&input, t).expect("write");
    run(Command::new("xmlsec1")
        .args([
            "--sign",
            "--id-attr:Id",
            "SignedProperties",
            "--privkey-pem",
        ])
        .arg(&key.key)
        .arg("--output")
        .arg(&output)
        .arg(&input));
    let err = verify_bytes(&std::fs::read(&output).expect("signed")).expect_err("SHA-1 in V2");
    assert!(
        matches!(&err, XmlSigError::Unsupported { what, .. } if *what == "CertDigest DigestMethod"),
        "{err}"
    );
}

#[test]
fn xmlsec1_and_our_verifier_agree_on_the_real_lists() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/trusted-lists");
    for (file, good) in [
        ("CZ-tl_seq77_2019-08-23.xml", true),
        ("CZ-tl_seq77_broken-sig.xml", false),
        ("IE-tl_seq17_2019-07-29.xml", true),
        ("eu-lotl_seq248_2019-09-04.xml", true),
        ("eu-lotl_seq341_2024-05-31.xml", true),
    ] {
        let path = dir.join(file);
        let ours = verify_bytes(&std::fs::read(&path).expect("read"));
        assert_eq!(xmlsec_verifies(&path), good, "xmlsec1 on {file}");
        assert_eq!(ours.is_ok(), good, "ours on {file}: {ours:?}");
        if let Ok(v) = ours {
            assert_eq!(v.canonicalization, Canonicalization::Exclusive);
            eprintln!("{file}: signed by {:?}", v.signer.subject_cn);
        }
    }
}

/// A list signed by xmlsec1 with `extra` put after its `ds:Object`, where no digest covers
/// it: the signature still verifies for xmlsec1.
fn signed_with_unsigned(dir: &Path, name: &str, extra: &str) -> Vec<u8> {
    let key = rsa(dir, 2048);
    let signed = String::from_utf8(xmlsec_sign(dir, name, &DEFAULT, &key)).expect("UTF-8");
    let at = signed.rfind("</ds:Signature>").expect("signature end");
    format!("{}{extra}{}", &signed[..at], &signed[at..]).into_bytes()
}

#[test]
fn a_namespace_bomb_in_an_unsigned_object_of_a_genuinely_signed_list_is_refused_before_parsing() {
    let scratch = Scratch::new("ns-bomb");
    // 6,000 nested elements each declaring a prefix (166 KB): 77 s to parse before.
    let open: String = (0..6000)
        .map(|i| format!("<p{i}:e xmlns:p{i}=\"urn:{i}\">"))
        .collect();
    let close: String = (0..6000).rev().map(|i| format!("</p{i}:e>")).collect();
    let bytes = signed_with_unsigned(
        &scratch.0,
        "ns-bomb",
        &format!("<ds:Object>{open}{close}</ds:Object>"),
    );
    match verify_bytes(&bytes) {
        Err(XmlSigError::Shape(e)) => {
            assert_eq!(e.budget, "MAX_XML_NAMESPACES_IN_SCOPE", "{e}")
        }
        other => panic!("expected the shape budget to refuse it, got {other:?}"),
    }
}

#[test]
fn an_attribute_bomb_in_an_unsigned_object_of_a_genuinely_signed_list_is_refused_before_parsing() {
    let scratch = Scratch::new("attr-bomb");
    // 200,000 attributes on one element (2.3 MB): 37 s to parse before.
    let attrs: String = (0..200_000).map(|i| format!(" a{i}=\"\"")).collect();
    let bytes = signed_with_unsigned(
        &scratch.0,
        "attr-bomb",
        &format!("<ds:Object><x{attrs}/></ds:Object>"),
    );
    let err = verify_bytes(&bytes).expect_err("refused");
    assert!(
        matches!(&err, XmlSigError::Shape(e) if e.budget == "MAX_XML_ATTRIBUTES"),
        "{err}"
    );
    assert!(err.to_string().contains("MAX_XML_ATTRIBUTES = 32"), "{err}");
}

#[test]
fn unsigned_content_beside_the_signed_properties_is_refused_and_a_small_unsigned_properties_is_not()
{
    let scratch = Scratch::new("unsigned");
    // A second ds:Object, however small: nothing reads it and no digest covers it.
    let err = verify_bytes(&signed_with_unsigned(
        &scratch.0,
        "object",
        "<ds:Object><x/></ds:Object>",
    ))
    .expect_err("refused");
    assert!(
        err.to_string().contains("unsigned content refused"),
        "{err}"
    );
    // An element beside the QualifyingProperties in the one ds:Object.
    let key = rsa(&scratch.0, 2048);
    let signed =
        String::from_utf8(xmlsec_sign(&scratch.0, "beside", &DEFAULT, &key)).expect("UTF-8");
    let beside = signed.replacen("</ds:Object>", "<x/></ds:Object>", 1);
    let err = verify_bytes(beside.as_bytes()).expect_err("refused");
    assert!(
        err.to_string().contains("unsigned content refused"),
        "{err}"
    );
    // XAdES UnsignedProperties (a signature time-stamp would go there) is allowed, small.
    let with = |content: &str| {
        signed.replacen(
            "</xades:QualifyingProperties>",
            &format!("<xades:UnsignedProperties>{content}</xades:UnsignedProperties></xades:QualifyingProperties>"),
            1,
        )
    };
    verify_bytes(with("<xades:UnsignedSignatureProperties/>").as_bytes())
        .expect("a small UnsignedProperties verifies");
    let err = verify_bytes(with(&"A".repeat(70 * 1024)).as_bytes()).expect_err("too big");
    assert!(
        err.to_string().contains("MAX_UNSIGNED_SIGNATURE_BYTES"),
        "{err}"
    );
}
