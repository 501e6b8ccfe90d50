//! Trusted lists signed by an independent signer: keys and self-signed certificates from
//! the `openssl` CLI, XAdES signatures from `xmlsec1 --sign` (Debian packages `openssl` and
//! `xmlsec1`; scripts/test installs them).

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;

/// A scratch directory of this test process, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("xmlsig-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn run(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("{cmd:?} runs (install xmlsec1 and openssl; scripts/test does): {e}")
    });
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A key and a self-signed certificate made by `openssl req`.
pub struct Signer {
    pub key: PathBuf,
    /// The certificate, PEM file.
    pub cert_pem: PathBuf,
    pub cert_der: Vec<u8>,
}

pub fn signer(dir: &Path, name: &str, newkey: &[&str]) -> Signer {
    let key = dir.join(format!("{name}.key.pem"));
    let cert = dir.join(format!("{name}.cert.pem"));
    let der = dir.join(format!("{name}.cert.der"));
    run(Command::new("openssl")
        .args(["req", "-x509", "-nodes", "-days", "30", "-subj"])
        .arg(format!("/CN=Test {name} signer"))
        .args(newkey)
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert));
    run(Command::new("openssl")
        .args(["x509", "-outform", "DER", "-in"])
        .arg(&cert)
        .arg("-out")
        .arg(&der));
    Signer {
        key,
        cert_pem: cert,
        cert_der: std::fs::read(&der).expect("certificate DER"),
    }
}

/// An RSA-2048 signer.
pub fn rsa_signer(dir: &Path, name: &str) -> Signer {
    signer(dir, name, &["-newkey", "rsa:2048"])
}

pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `xml` without its enveloped `ds:Signature` (as the real lists write it), if it has one.
pub fn strip_signature(xml: &str) -> String {
    match (xml.find("<ds:Signature "), xml.rfind("</ds:Signature>")) {
        (Some(start), Some(end)) => {
            format!("{}{}", &xml[..start], &xml[end + "</ds:Signature>".len()..])
        }
        _ => xml.to_owned(),
    }
}

/// Signs the unsigned list `xml` with `signer`: an XAdES baseline-B template (exclusive
/// C14N, RSA-SHA256, `SigningCertificateV2`) is put before the root's end tag and filled by
/// `xmlsec1 --sign`.
pub fn sign_list(dir: &Path, name: &str, xml: &str, signer: &Signer) -> Vec<u8> {
    let digest = b64(ring::digest::digest(&ring::digest::SHA256, &signer.cert_der).as_ref());
    let template = format!(
        r##"<ds:Signature xmlns:ds="http://www.w3.org/2000/09/xmldsig#" Id="sig"><ds:SignedInfo><ds:CanonicalizationMethod Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/><ds:SignatureMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"/><ds:Reference Id="doc" URI=""><ds:Transforms><ds:Transform Algorithm="http://www.w3.org/2000/09/xmldsig#enveloped-signature"/><ds:Transform Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/></ds:Transforms><ds:DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha256"/><ds:DigestValue></ds:DigestValue></ds:Reference><ds:Reference Type="http://uri.etsi.org/01903#SignedProperties" URI="#xades-sig"><ds:Transforms><ds:Transform Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/></ds:Transforms><ds:DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha256"/><ds:DigestValue></ds:DigestValue></ds:Reference></ds:SignedInfo><ds:SignatureValue></ds:SignatureValue><ds:KeyInfo><ds:X509Data><ds:X509Certificate>{cert}</ds:X509Certificate></ds:X509Data></ds:KeyInfo><ds:Object><xades:QualifyingProperties xmlns:xades="http://uri.etsi.org/01903/v1.3.2#" Target="#sig"><xades:SignedProperties Id="xades-sig"><xades:SignedSignatureProperties><xades:SigningTime>2026-01-01T00:00:00Z</xades:SigningTime><xades:SigningCertificateV2><xades:Cert><xades:CertDigest><ds:DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha256"/><ds:DigestValue>{digest}</ds:DigestValue></xades:CertDigest></xades:Cert></xades:SigningCertificateV2></xades:SignedSignatureProperties></xades:SignedProperties></xades:QualifyingProperties></ds:Object></ds:Signature>"##,
        cert = b64(&signer.cert_der),
    );
    let end = xml
        .rfind("</TrustServiceStatusList>")
        .expect("the list's root end tag, unprefixed");
    let unsigned = format!("{}{template}{}", &xml[..end], &xml[end..]);
    let input = dir.join(format!("{name}.template.xml"));
    let output = dir.join(format!("{name}.signed.xml"));
    std::fs::write(&input, unsigned).expect("write template");
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
