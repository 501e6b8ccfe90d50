//! The real trusted lists, and the ways an attacker would try to make an edited one pass.

use super::*;

fn data(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("../shared/data/trusted-lists")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_real_cz_list_verifies() {
    let v = verify_bytes(&data("CZ-tl_seq77_2019-08-23.xml")).expect("CZ verifies");
    eprintln!("CZ signer: {:?}", v.signer.subject_cn);
}

#[test]
fn the_real_ie_list_and_both_lists_of_the_lists_verify() {
    for (file, method_digest) in [
        ("IE-tl_seq17_2019-07-29.xml", DigestAlgorithm::Sha256),
        ("eu-lotl_seq248_2019-09-04.xml", DigestAlgorithm::Sha256),
        ("eu-lotl_seq341_2024-05-31.xml", DigestAlgorithm::Sha256),
    ] {
        let v = verify_bytes(&data(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        eprintln!(
            "{file} signer: {:?} at {:?}",
            v.signer.subject_cn, v.signing_time
        );
        assert_eq!(v.document_digest, method_digest, "{file}");
    }
}

const CZ: &str = "CZ-tl_seq77_2019-08-23.xml";

fn cz() -> String {
    String::from_utf8(data(CZ)).expect("CZ is UTF-8")
}

/// The `<ds:Signature …>…</ds:Signature>` text of `xml`.
fn signature_text(xml: &str) -> &str {
    let start = xml.find("<ds:Signature ").expect("signature start");
    let end = xml.find("</ds:Signature>").expect("signature end") + "</ds:Signature>".len();
    &xml[start..end]
}

fn refused(xml: &str) -> XmlSigError {
    match verify_bytes(xml.as_bytes()) {
        Ok(v) => panic!("accepted, signed by {:?}", v.signer.subject_cn),
        Err(e) => e,
    }
}

#[test]
fn the_broken_cz_copy_is_refused_naming_the_document_reference() {
    let err = verify_bytes(&data("CZ-tl_seq77_broken-sig.xml")).expect_err("broken CZ");
    assert_eq!(err, XmlSigError::DigestMismatch { uri: String::new() });
    assert_eq!(err.to_string(), "reference URI=\"\" digest mismatch");
}

#[test]
fn an_edited_service_status_breaks_the_document_digest() {
    let xml = cz().replacen(
        "Svcstatus/withdrawn</ServiceStatus>",
        "Svcstatus/granted</ServiceStatus>",
        1,
    );
    assert_ne!(xml, cz());
    assert_eq!(
        refused(&xml),
        XmlSigError::DigestMismatch { uri: String::new() }
    );
}

#[test]
fn a_signature_moved_below_the_root_is_refused() {
    let original = cz();
    let sig = signature_text(&original).to_owned();
    let xml = original.replacen(&sig, "", 1).replacen(
        "<SchemeInformation>",
        &format!("<SchemeInformation>{sig}"),
        1,
    );
    let err = refused(&xml);
    assert!(
        err.to_string()
            .contains("not a child of the TrustServiceStatusList root"),
        "{err}"
    );
}

#[test]
fn a_duplicated_signature_is_refused() {
    let original = cz();
    let sig = signature_text(&original).to_owned();
    let xml = original.replacen(&sig, &format!("{sig}{sig}"), 1);
    let err = refused(&xml);
    assert!(err.to_string().contains("2 ds:Signature elements"), "{err}");
}

#[test]
fn a_second_list_wrapped_inside_the_signature_is_refused() {
    // Inside ds:Object the wrapped list is outside the document digest (enveloped
    // signature): a reader that took the first TrustServiceStatusList it met, or one from a
    // second parse, could be fooled. Refused before any digest.
    let xml = cz().replacen(
        "</ds:Signature>",
        "<ds:Object><TrustServiceStatusList xmlns=\"http://uri.etsi.org/02231/v2#\"/></ds:Object></ds:Signature>",
        1,
    );
    let err = refused(&xml);
    assert!(
        err.to_string()
            .contains("2 TrustServiceStatusList elements in the document"),
        "{err}"
    );
}

#[test]
fn a_root_that_is_not_a_trusted_list_is_refused() {
    let xml = format!(
        "<Wrapper xmlns=\"urn:x\">{}</Wrapper>",
        cz().trim_start_matches("<?xml version=\"1.0\" encoding=\"utf-8\"?>")
    );
    let err = refused(&xml);
    assert!(err.to_string().contains("root element is not"), "{err}");
}

#[test]
fn signed_properties_id_pointing_to_a_look_alike_outside_the_signature_is_refused() {
    let original = cz();
    let id = "SignedProperties-1536489189";
    // The real SignedProperties keeps its content but loses its Id; a look-alike with the Id
    // sits in the list itself.
    let xml = original
        .replacen(&format!("Id=\"{id}\""), "Id=\"renamed\"", 1)
        .replacen(
            "<SchemeInformation>",
            &format!(
                "<SchemeInformation><xades:SignedProperties xmlns:xades=\"http://uri.etsi.org/01903/v1.3.2#\" Id=\"{id}\"/>"
            ),
            1,
        );
    let err = refused(&xml);
    assert!(
        matches!(&err, XmlSigError::BadReferenceTarget { uri, .. } if uri == &format!("#{id}")),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("does not point to xades:SignedProperties")
    );
}

#[test]
fn a_second_element_with_the_signed_properties_id_is_refused() {
    let id = "SignedProperties-1536489189";
    let xml = cz().replacen(
        "<SchemeInformation>",
        &format!("<SchemeInformation><Look Id=\"{id}\"/>"),
        1,
    );
    let err = refused(&xml);
    assert!(err.to_string().contains("2 elements carry Id"), "{err}");
}

#[test]
fn a_keyinfo_certificate_not_named_by_signing_certificate_is_refused() {
    // KeyInfo is not covered by a reference in the real lists: swap in another certificate
    // of the same list (a service's), as an attacker holding that key would.
    let original = cz();
    let other_start = original
        .find("<X509Certificate>")
        .expect("a service certificate")
        + "<X509Certificate>".len();
    let other_end = other_start + original[other_start..].find('<').expect("end");
    let other = original[other_start..other_end].to_owned();
    let sig_start = original
        .find("<ds:X509Certificate>")
        .expect("KeyInfo certificate")
        + "<ds:X509Certificate>".len();
    let sig_end = sig_start + original[sig_start..].find('<').expect("end");
    let xml = format!(
        "{}{}{}",
        &original[..sig_start],
        other,
        &original[sig_end..]
    );
    let err = refused(&xml);
    assert!(
        matches!(err, XmlSigError::SigningCertificateMismatch(_)),
        "{err}"
    );
}

#[test]
fn algorithms_outside_the_allow_list_are_refused() {
    let cases = [
        (
            "xmldsig-more#rsa-sha256\"",
            "xmldsig#rsa-sha1\"",
            "SignatureMethod",
        ),
        (
            "<ds:DigestMethod Algorithm=\"http://www.w3.org/2001/04/xmlenc#sha256\"/>",
            "<ds:DigestMethod Algorithm=\"http://www.w3.org/2000/09/xmldsig#sha1\"/>",
            "DigestMethod",
        ),
        (
            "<ds:CanonicalizationMethod Algorithm=\"http://www.w3.org/2001/10/xml-exc-c14n#\"/>",
            "<ds:CanonicalizationMethod Algorithm=\"http://www.w3.org/2006/12/xml-c14n11\"/>",
            "CanonicalizationMethod",
        ),
        (
            "<ds:CanonicalizationMethod Algorithm=\"http://www.w3.org/2001/10/xml-exc-c14n#\"/>",
            "<ds:CanonicalizationMethod Algorithm=\"http://www.w3.org/2001/10/xml-exc-c14n#\"><ec:InclusiveNamespaces xmlns:ec=\"http://www.w3.org/2001/10/xml-exc-c14n#\" PrefixList=\"ds\"/></ds:CanonicalizationMethod>",
            "InclusiveNamespaces",
        ),
        (
            "<ds:Transform Algorithm=\"http://www.w3.org/2000/09/xmldsig#enveloped-signature\"/>",
            "<ds:Transform Algorithm=\"http://www.w3.org/TR/1999/REC-xpath-19991116\"/><ds:Transform Algorithm=\"http://www.w3.org/2000/09/xmldsig#enveloped-signature\"/>",
            "Transforms of Reference URI=\"\"",
        ),
    ];
    for (from, to, named) in cases {
        let original = cz();
        assert!(original.contains(from), "{from}");
        let err = refused(&original.replacen(from, to, 1));
        assert!(
            matches!(err, XmlSigError::Unsupported { .. }),
            "{to}: {err}"
        );
        assert!(err.to_string().contains(named), "{named}: {err}");
    }
}

#[test]
fn an_edited_signature_value_or_signed_info_does_not_verify() {
    let original = cz();
    let start = original.find("<ds:SignatureValue").expect("SignatureValue");
    let start = start + original[start..].find('>').expect("tag end") + 1;
    let mut bytes = original.clone().into_bytes();
    bytes[start + 10] = if bytes[start + 10] == b'A' {
        b'B'
    } else {
        b'A'
    };
    let err = verify_bytes(&bytes).expect_err("edited SignatureValue");
    assert_eq!(
        err,
        XmlSigError::Signature(SignatureError::Invalid),
        "{err}"
    );

    // A Reference Id is covered by the signature, not by any digest.
    let xml = original.replacen(
        "Id=\"id-LockItSignatureReference-1x1637019229\"",
        "Id=\"id-other\"",
        1,
    );
    assert_eq!(
        refused(&xml),
        XmlSigError::Signature(SignatureError::Invalid)
    );
}

#[test]
fn a_document_type_declaration_is_refused() {
    let xml = cz().replacen(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>",
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><!DOCTYPE x [<!ENTITY e \"granted\">]>",
        1,
    );
    assert!(matches!(refused(&xml), XmlSigError::NotXml(_)));
}

#[test]
fn comments_and_whitespace_changes_outside_the_signature_are_judged_like_c14n_does() {
    // A comment is not part of a same-document reference: adding one keeps the digest.
    let xml = cz().replacen("<SchemeInformation>", "<SchemeInformation><!-- note -->", 1);
    verify_bytes(xml.as_bytes()).expect("a comment does not change the canonical form");
    // Whitespace in content does.
    let xml = cz().replacen("<SchemeInformation>", "<SchemeInformation> ", 1);
    assert_eq!(
        refused(&xml),
        XmlSigError::DigestMismatch { uri: String::new() }
    );
}

#[test]
fn the_tree_that_was_verified_is_the_tree_the_reader_gets() {
    let bytes = data(CZ);
    let doc = parse_document(&bytes).expect("parses");
    let verified = verify(&doc).expect("verifies");
    assert_eq!(
        verified.signature_algorithm,
        SignatureAlgorithm::RsaPkcs1(DigestAlgorithm::Sha256)
    );
    assert_eq!(verified.canonicalization, Canonicalization::Exclusive);
    assert_eq!(
        verified.signer.subject_cn.as_deref(),
        Some("Ing. Radomír Šimek")
    );
    assert!(verified.signing_time.is_some());
    assert_eq!(
        doc.root_element().tag_name().name(),
        "TrustServiceStatusList"
    );
}

/// RSA-PSS (RFC 6931 `sha256-rsa-MGF1`), which xmlsec1 1.2 cannot make: the document and
/// SignedInfo are canonicalised here (the canonicaliser is checked against xmlsec1 in
/// tests/trusted_list_signatures.rs) and the signature is made by the `openssl` CLI, with an
/// rsaEncryption key and with an id-RSASSA-PSS key as the German list's signer has.
#[test]
fn rsa_pss_signatures_made_by_openssl_verify_with_rsa_and_rsa_pss_keys() {
    use base64::Engine as _;
    use std::process::Command;

    let dir = std::env::temp_dir().join(format!("xmlsig-pss-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let run = |cmd: &mut Command| {
        let out = cmd
            .output()
            .expect("openssl runs (scripts/test installs it)");
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    for (name, newkey) in [("rsa", "rsa:2048"), ("rsa-pss", "rsa-pss")] {
        let key = dir.join(format!("{name}.key"));
        let cert = dir.join(format!("{name}.der"));
        let mut req = Command::new("openssl");
        req.args([
            "req",
            "-x509",
            "-nodes",
            "-days",
            "30",
            "-subj",
            "/CN=PSS signer",
        ])
        .args(["-newkey", newkey]);
        if newkey == "rsa-pss" {
            req.args(["-pkeyopt", "rsa_keygen_bits:2048"]);
        }
        run(req
            .arg("-keyout")
            .arg(&key)
            .args(["-outform", "DER", "-out"])
            .arg(&cert));
        let cert_der = std::fs::read(&cert).expect("certificate");
        let cert_digest = b64(ring::digest::digest(&ring::digest::SHA256, &cert_der).as_ref());

        let template = format!(
            "<TrustServiceStatusList xmlns=\"http://uri.etsi.org/02231/v2#\"><SchemeInformation><TSLSequenceNumber>1</TSLSequenceNumber></SchemeInformation>\
             <ds:Signature xmlns:ds=\"http://www.w3.org/2000/09/xmldsig#\" Id=\"s\"><ds:SignedInfo>\
             <ds:CanonicalizationMethod Algorithm=\"http://www.w3.org/2001/10/xml-exc-c14n#\"/>\
             <ds:SignatureMethod Algorithm=\"http://www.w3.org/2007/05/xmldsig-more#sha256-rsa-MGF1\"/>\
             <ds:Reference URI=\"\"><ds:Transforms><ds:Transform Algorithm=\"{ENVELOPED_SIGNATURE}\"/><ds:Transform Algorithm=\"http://www.w3.org/2001/10/xml-exc-c14n#\"/></ds:Transforms>\
             <ds:DigestMethod Algorithm=\"http://www.w3.org/2001/04/xmlenc#sha256\"/><ds:DigestValue>DOC</ds:DigestValue></ds:Reference>\
             <ds:Reference Type=\"{SIGNED_PROPERTIES_TYPE}\" URI=\"#p\"><ds:Transforms><ds:Transform Algorithm=\"http://www.w3.org/2001/10/xml-exc-c14n#\"/></ds:Transforms>\
             <ds:DigestMethod Algorithm=\"http://www.w3.org/2001/04/xmlenc#sha256\"/><ds:DigestValue>PROPS</ds:DigestValue></ds:Reference>\
             </ds:SignedInfo><ds:SignatureValue>SIG</ds:SignatureValue><ds:KeyInfo><ds:X509Data><ds:X509Certificate>{cert}</ds:X509Certificate></ds:X509Data></ds:KeyInfo>\
             <ds:Object><xades:QualifyingProperties xmlns:xades=\"{XADES_NAMESPACE}\" Target=\"#s\"><xades:SignedProperties Id=\"p\"><xades:SignedSignatureProperties>\
             <xades:SigningCertificateV2><xades:Cert><xades:CertDigest><ds:DigestMethod Algorithm=\"http://www.w3.org/2001/04/xmlenc#sha256\"/><ds:DigestValue>{cert_digest}</ds:DigestValue></xades:CertDigest></xades:Cert></xades:SigningCertificateV2>\
             </xades:SignedSignatureProperties></xades:SignedProperties></xades:QualifyingProperties></ds:Object></ds:Signature></TrustServiceStatusList>",
            cert = b64(&cert_der),
        );
        let digest_of = |xml: &str, whole: bool| {
            let doc = roxmltree::Document::parse(xml).expect("template");
            let sig = doc
                .descendants()
                .find(|n| is_in(*n, DSIG_NAMESPACE, "Signature"))
                .expect("signature");
            let bytes = if whole {
                c14n::canonicalize(doc.root(), Some(sig.id()), c14n::Method::Exclusive, false)
            } else {
                let props = doc
                    .descendants()
                    .find(|n| is_in(*n, XADES_NAMESPACE, "SignedProperties"))
                    .expect("props");
                c14n::canonicalize(props, None, c14n::Method::Exclusive, false)
            }
            .expect("c14n");
            b64(ring::digest::digest(&ring::digest::SHA256, &bytes).as_ref())
        };
        let filled = template
            .replacen("DOC", &digest_of(&template, true), 1)
            .replacen("PROPS", &digest_of(&template, false), 1);
        let signed_info = {
            let doc = roxmltree::Document::parse(&filled).expect("filled");
            let si = doc
                .descendants()
                .find(|n| is_in(*n, DSIG_NAMESPACE, "SignedInfo"))
                .expect("SignedInfo");
            c14n::canonicalize(si, None, c14n::Method::Exclusive, false).expect("c14n")
        };
        let data = dir.join(format!("{name}.signedinfo"));
        let sig = dir.join(format!("{name}.sig"));
        std::fs::write(&data, &signed_info).expect("write");
        run(Command::new("openssl")
            .args(["dgst", "-sha256", "-sign"])
            .arg(&key)
            .args([
                "-sigopt",
                "rsa_padding_mode:pss",
                "-sigopt",
                "rsa_pss_saltlen:digest",
                "-sigopt",
                "rsa_mgf1_md:sha256",
                "-out",
            ])
            .arg(&sig)
            .arg(&data));
        let value = b64(&std::fs::read(&sig).expect("signature"));
        let xml = filled.replacen("SIG", &value, 1);
        let v = verify_bytes(xml.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            v.signature_algorithm,
            SignatureAlgorithm::RsaPss(DigestAlgorithm::Sha256)
        );
        // The same signature under the PKCS#1 v1.5 name does not verify.
        let relabelled = xml.replacen(
            "http://www.w3.org/2007/05/xmldsig-more#sha256-rsa-MGF1",
            "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256",
            1,
        );
        assert!(verify_bytes(relabelled.as_bytes()).is_err(), "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_single_byte_edit_of_the_signature_panics_and_signed_parts_are_all_refused() {
    let original = data(CZ);
    let text = cz();
    let start = text.find("<ds:Signature ").expect("signature");
    let end = text.find("</ds:Signature>").expect("end") + "</ds:Signature>".len();
    // KeyInfo is not signed in the real lists: an edit there may leave a valid signature.
    let key_info =
        text.find("<ds:KeyInfo").expect("KeyInfo")..text.find("</ds:KeyInfo>").expect("end");
    let mut refused = 0;
    for at in (start..end).step_by(97) {
        for replacement in [b'x', b'<', 0xff] {
            let mut bytes = original.clone();
            if bytes[at] == replacement {
                continue;
            }
            bytes[at] = replacement;
            match verify_bytes(&bytes) {
                Err(_) => refused += 1,
                Ok(_) => assert!(
                    key_info.contains(&at),
                    "an edit at byte {at} outside KeyInfo was accepted"
                ),
            }
        }
    }
    assert!(refused > 150, "{refused}");
}

#[test]
fn a_signature_whose_id_the_signed_properties_do_not_target_is_refused() {
    let xml = cz().replacen(
        "<ds:Signature xmlns:ds=\"http://www.w3.org/2000/09/xmldsig#\" Id=\"Signature-1217271300\"",
        "<ds:Signature xmlns:ds=\"http://www.w3.org/2000/09/xmldsig#\" Id=\"Signature-other\"",
        1,
    );
    let err = refused(&xml);
    assert!(
        err.to_string()
            .contains("Target=\"#Signature-1217271300\" does not name this ds:Signature"),
        "{err}"
    );
}
