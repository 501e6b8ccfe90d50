//! The enveloped XAdES baseline-B signature of an ETSI TS 119 612 trusted list (clause 5.7),
//! verified over the one roxmltree tree that is then read.
//!
//! Signature wrapping attacks work when the bytes that were digested and the elements that
//! are read are not the same: a second parse, a sibling list, a look-alike `Id`. Here
//! [`verify`] takes the very [`roxmltree::Document`] the caller will read, canonicalises
//! its own nodes (module `c14n`) and requires the shape of TS 119 612 and XAdES exactly, failing
//! closed on anything else:
//!
//! 1. The root element is the one `TrustServiceStatusList` (TS 119 612 namespace) of the
//!    document, and the document holds exactly one `ds:Signature`, a child of that root.
//! 2. `SignedInfo` names a canonicalisation method of [`c14n::Method`] with no parameters
//!    (an `InclusiveNamespaces PrefixList` is refused as unsupported) and a signature
//!    method of [`SignatureAlgorithm`].
//! 3. Exactly two `Reference`s: `URI=""`, whose transforms are the enveloped-signature
//!    transform and at most one canonicalisation (the whole document minus the signature),
//!    and `Type="http://uri.etsi.org/01903#SignedProperties"` with `URI="#id"` naming exactly
//!    one element of the document, which must be the `xades:SignedProperties` in this
//!    signature's `ds:Object/xades:QualifyingProperties`, whose `Target` names this
//!    signature's `Id`. Digests: SHA-256, SHA-384, SHA-512.
//! 4. The signer certificate is the single `ds:X509Certificate` of `KeyInfo`; its digest
//!    appears in `xades:SigningCertificate` or `xades:SigningCertificateV2`.
//! 5. The `SignatureValue` verifies over the canonicalised `SignedInfo` with that
//!    certificate's key.
//! 6. What no digest covers is only what verification needs, and small: the `ds:Signature`
//!    holds `SignedInfo`, `SignatureValue`, `KeyInfo` and one `ds:Object`, which holds the
//!    `QualifyingProperties` only, which hold the `SignedProperties` and at most one
//!    `UnsignedProperties`; all of it but `SignedInfo` and the `SignedProperties` is at most
//!    [`MAX_UNSIGNED_SIGNATURE_BYTES`]. (Checked before the digests.)
//!
//! Before any of this, [`parse_document`] bounds the document's shape
//! ([`super::tsl::shape`]) so that no tree is built from a document whose parse would be
//! superlinear.
//!
//! Who may sign which list is not decided here: [`VerifiedList::signer`] is handed to the
//! caller, which must compare it with the certificates the configuration or the list of the
//! lists authorises.

mod c14n;
#[cfg(test)]
mod tests;

use base64::Engine as _;
use roxmltree::{Document, Node};
use time::OffsetDateTime;

use super::tsl::read::{children_in, is_in};
use super::tsl::{MAX_TSL_BYTES, MAX_XML_NODES, TSL_NAMESPACE};
use crate::cert::PspCertificate;
use crate::cert::signature::{Scheme, SchemeHash, SignatureError, verify_with_scheme};

pub use c14n::Method as Canonicalization;

/// XML-DSig 1.0 namespace (`ds:`).
pub const DSIG_NAMESPACE: &str = "http://www.w3.org/2000/09/xmldsig#";
/// XAdES 1.3.2 namespace (`xades:`, ETSI EN 319 132-1).
pub const XADES_NAMESPACE: &str = "http://uri.etsi.org/01903/v1.3.2#";
/// The `Type` of the reference to the XAdES signed properties.
pub const SIGNED_PROPERTIES_TYPE: &str = "http://uri.etsi.org/01903#SignedProperties";
/// The enveloped-signature transform (XML-DSig 1.0 section 6.6.4).
pub const ENVELOPED_SIGNATURE: &str = "http://www.w3.org/2000/09/xmldsig#enveloped-signature";

/// Why a trusted list's signature was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum XmlSigError {
    /// The input is over a budget ([`MAX_TSL_BYTES`], [`MAX_XML_NODES`]).
    #[error("{what} over the limit of {limit}")]
    TooLarge {
        /// What was counted, for people.
        what: &'static str,
        /// The limit it exceeds.
        limit: usize,
    },
    /// The document's shape is over a budget of [`super::tsl::shape`], found before any
    /// tree is built.
    #[error("{0}")]
    Shape(#[from] super::tsl::shape::ShapeError),
    /// Not UTF-8, not well-formed XML, or a document type declaration.
    #[error("not a readable XML document: {0}")]
    NotXml(String),
    /// The document does not have the shape of a signed trusted list (root element, number
    /// and place of the signature, a missing or repeated element).
    #[error("signature structure: {0}")]
    Structure(String),
    /// An algorithm or a feature outside what this verifier accepts.
    #[error("unsupported {what}: {value}")]
    Unsupported {
        /// The element or feature concerned (`SignatureMethod`, …).
        what: &'static str,
        /// The value found (an algorithm URI, …).
        value: String,
    },
    /// A reference's digest does not match what it points to.
    #[error("reference URI=\"{uri}\" digest mismatch")]
    DigestMismatch {
        /// The reference's `URI`.
        uri: String,
    },
    /// The `SignedProperties` reference does not point to this signature's own
    /// `xades:SignedProperties` (signature wrapping).
    #[error("reference URI=\"{uri}\": {reason}")]
    BadReferenceTarget {
        /// The reference's `URI`.
        uri: String,
        /// What is wrong with the target.
        reason: String,
    },
    /// The signer certificate cannot be read.
    #[error("signer certificate: {0}")]
    Certificate(String),
    /// The KeyInfo certificate is not the one the signed properties name.
    #[error("signing certificate: {0}")]
    SigningCertificateMismatch(String),
    /// The signature value is malformed, or does not verify over `SignedInfo` with the
    /// signer's key, or the key is refused by the algorithm policy.
    #[error("SignatureValue over SignedInfo: {0}")]
    Signature(SignatureError),
}

/// A signature method of the allow-list (RFC 6931 names), each with its hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureAlgorithm {
    /// `http://www.w3.org/2001/04/xmldsig-more#rsa-sha256` and the sha384, sha512 variants.
    RsaPkcs1(DigestAlgorithm),
    /// `http://www.w3.org/2007/05/xmldsig-more#sha256-rsa-MGF1` and sha384, sha512.
    RsaPss(DigestAlgorithm),
    /// `http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256` and sha384, on P-256 or P-384.
    Ecdsa(DigestAlgorithm),
}

impl SignatureAlgorithm {
    fn from_uri(uri: &str) -> Option<Self> {
        use DigestAlgorithm::*;
        Some(match uri {
            "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256" => Self::RsaPkcs1(Sha256),
            "http://www.w3.org/2001/04/xmldsig-more#rsa-sha384" => Self::RsaPkcs1(Sha384),
            "http://www.w3.org/2001/04/xmldsig-more#rsa-sha512" => Self::RsaPkcs1(Sha512),
            "http://www.w3.org/2007/05/xmldsig-more#sha256-rsa-MGF1" => Self::RsaPss(Sha256),
            "http://www.w3.org/2007/05/xmldsig-more#sha384-rsa-MGF1" => Self::RsaPss(Sha384),
            "http://www.w3.org/2007/05/xmldsig-more#sha512-rsa-MGF1" => Self::RsaPss(Sha512),
            "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256" => Self::Ecdsa(Sha256),
            "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384" => Self::Ecdsa(Sha384),
            _ => return None,
        })
    }

    fn scheme(self) -> Scheme {
        match self {
            Self::RsaPkcs1(h) => Scheme::RsaPkcs1(h.scheme_hash()),
            Self::RsaPss(h) => Scheme::RsaPss(h.scheme_hash()),
            Self::Ecdsa(h) => Scheme::EcdsaFixed(h.scheme_hash()),
        }
    }
}

/// A digest method of the allow-list for references.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestAlgorithm {
    /// `http://www.w3.org/2001/04/xmlenc#sha256`
    Sha256,
    /// `http://www.w3.org/2001/04/xmldsig-more#sha384`
    Sha384,
    /// `http://www.w3.org/2001/04/xmlenc#sha512`
    Sha512,
}

impl DigestAlgorithm {
    fn from_uri(uri: &str) -> Option<Self> {
        match uri {
            "http://www.w3.org/2001/04/xmlenc#sha256" => Some(Self::Sha256),
            "http://www.w3.org/2001/04/xmldsig-more#sha384" => Some(Self::Sha384),
            "http://www.w3.org/2001/04/xmlenc#sha512" => Some(Self::Sha512),
            _ => None,
        }
    }

    fn ring(self) -> &'static ring::digest::Algorithm {
        match self {
            Self::Sha256 => &ring::digest::SHA256,
            Self::Sha384 => &ring::digest::SHA384,
            Self::Sha512 => &ring::digest::SHA512,
        }
    }

    fn scheme_hash(self) -> SchemeHash {
        match self {
            Self::Sha256 => SchemeHash::Sha256,
            Self::Sha384 => SchemeHash::Sha384,
            Self::Sha512 => SchemeHash::Sha512,
        }
    }
}

/// What a verified signature establishes: these bytes of this tree were signed by the key of
/// `signer`, under these algorithms. Only [`verify`] makes one.
#[derive(Debug, Clone)]
pub struct VerifiedList {
    /// The signer certificate from `KeyInfo`, parsed; `signer.der` is its DER.
    pub signer: PspCertificate,
    /// `xades:SigningTime`, when present (the signer's claim, not a timestamp).
    pub signing_time: Option<OffsetDateTime>,
    /// The signature algorithm of `SignedInfo` (`SignatureMethod`).
    pub signature_algorithm: SignatureAlgorithm,
    /// The canonicalization of `SignedInfo` (`CanonicalizationMethod`).
    pub canonicalization: Canonicalization,
    /// Digest of the `URI=""` reference and of the `SignedProperties` reference.
    pub document_digest: DigestAlgorithm,
    /// The digest algorithm of the `SignedProperties` reference.
    pub signed_properties_digest: DigestAlgorithm,
}

/// Most bytes of a `ds:Signature` that no digest covers: everything but `SignedInfo` and
/// the `SignedProperties` (`KeyInfo`, `SignatureValue`, the `ds:Object` and
/// `QualifyingProperties` wrappers, an `UnsignedProperties`). The real lists have at most
/// 4,443 such bytes (CZ 2019: a `KeyInfo` with the RSA key and the certificate); 64 KiB is
/// fifteen times that, room for a signature time-stamp in `UnsignedProperties`.
pub const MAX_UNSIGNED_SIGNATURE_BYTES: usize = 64 * 1024;

/// Rule 6 of the module documentation: the unsigned parts of the signature hold what
/// verification needs and are small. The `ds:Signature` holds `SignedInfo`, `SignatureValue`,
/// `KeyInfo` and one `ds:Object` only; that `ds:Object` holds the `QualifyingProperties` only,
/// and those hold the `SignedProperties` and at most one `UnsignedProperties`. Anything else
/// (a second `ds:Object`, content beside the properties) is refused rather than parsed again
/// at every load: the enveloped-signature transform leaves all of it out of every digest.
fn unsigned_content(
    signature: Node<'_, '_>,
    signed_info: Node<'_, '_>,
    signed_properties: Node<'_, '_>,
) -> Result<(), XmlSigError> {
    let unsigned = |n: Node<'_, '_>| {
        structure(format!(
            "unsigned content refused: {} in {} (no digest covers it, and nothing reads it)",
            expanded(n),
            n.parent_element().map(expanded).unwrap_or_default()
        ))
    };
    let mut objects = 0usize;
    for child in signature.children().filter(Node::is_element) {
        let known = ["SignedInfo", "SignatureValue", "KeyInfo", "Object"]
            .iter()
            .any(|l| is_in(child, DSIG_NAMESPACE, l));
        if !known {
            return Err(unsigned(child));
        }
        if is_in(child, DSIG_NAMESPACE, "Object") {
            objects += 1;
            if objects > 1 {
                return Err(unsigned(child));
            }
        }
    }
    // The SignedProperties reference was checked to sit in this signature's
    // ds:Object/xades:QualifyingProperties.
    let qualifying = signed_properties.parent_element();
    let object = qualifying.and_then(|q| q.parent_element());
    if let Some(object) = object
        && let Some(other) = object
            .children()
            .filter(Node::is_element)
            .find(|c| Some(c.id()) != qualifying.map(|q| q.id()))
    {
        return Err(unsigned(other));
    }
    if let Some(qualifying) = qualifying {
        let mut unsigned_properties = 0usize;
        for child in qualifying.children().filter(Node::is_element) {
            if child.id() == signed_properties.id() {
                continue;
            }
            if is_in(child, XADES_NAMESPACE, "UnsignedProperties") && unsigned_properties == 0 {
                unsigned_properties += 1;
                continue;
            }
            return Err(unsigned(child));
        }
    }
    let bytes = signature
        .range()
        .len()
        .saturating_sub(signed_info.range().len())
        .saturating_sub(signed_properties.range().len());
    if bytes > MAX_UNSIGNED_SIGNATURE_BYTES {
        return Err(XmlSigError::TooLarge {
            what: "bytes of the signature no digest covers (MAX_UNSIGNED_SIGNATURE_BYTES)",
            limit: MAX_UNSIGNED_SIGNATURE_BYTES,
        });
    }
    Ok(())
}

/// `prefix-free {namespace}local` of an element, shortened, for messages.
fn expanded(n: Node<'_, '_>) -> String {
    let name = n.tag_name();
    let local: String = name.name().chars().take(60).collect();
    match name.namespace() {
        Some(ns) => format!("{{{}}}{local}", ns.chars().take(80).collect::<String>()),
        None => local,
    }
}

/// Parses `xml` with roxmltree's defaults (a document type declaration is refused, so no
/// entity is declared or expanded) under the size budgets of [`super::tsl`], and verifies it.
/// For a list whose entries are then read, parse once and call [`verify`] and the reader on
/// the same [`Document`].
pub fn verify_bytes(xml: &[u8]) -> Result<VerifiedList, XmlSigError> {
    let doc = parse_document(xml)?;
    verify(&doc)
}

/// Parses a trusted list the way [`verify_bytes`] does, for a caller that verifies and then
/// reads the same tree.
pub fn parse_document(xml: &[u8]) -> Result<Document<'_>, XmlSigError> {
    if xml.len() > MAX_TSL_BYTES {
        return Err(XmlSigError::TooLarge {
            what: "trusted list size in bytes",
            limit: MAX_TSL_BYTES,
        });
    }
    let text = std::str::from_utf8(xml).map_err(|e| XmlSigError::NotXml(e.to_string()))?;
    // Linear, before roxmltree, whose cost is superlinear in some shapes.
    super::tsl::shape::check(xml)?;
    let options = roxmltree::ParsingOptions {
        allow_dtd: false,
        nodes_limit: MAX_XML_NODES,
        entity_resolver: None,
    };
    Document::parse_with_options(text, options).map_err(|e| match e {
        roxmltree::Error::NodesLimitReached => XmlSigError::TooLarge {
            what: "number of XML nodes",
            limit: MAX_XML_NODES as usize,
        },
        other => XmlSigError::NotXml(other.to_string()),
    })
}

/// Verifies the enveloped XAdES signature of the trusted list in `doc` (module
/// documentation: the rules, in order).
///
/// The steps of XML Signature core validation (W3C XML Signature 1.1 section 3.2) and the
/// XAdES checks, each a function below: the signature located and `SignedInfo` read (rules 1
/// and 2), the `SignedProperties` reference dereferenced and placed (rule 3), the unsigned
/// content bounded (rule 6), reference validation of both references (section 3.2.1), the
/// signer from `KeyInfo` and the XAdES signed signature properties (rule 4), then signature
/// validation (section 3.2.2, rule 5). The order is that of the error reported first.
pub fn verify(doc: &Document<'_>) -> Result<VerifiedList, XmlSigError> {
    let signature = locate_signature(doc)?;
    let signed_info = one_child(signature, DSIG_NAMESPACE, "SignedInfo")?;
    let signature_value = one_child(signature, DSIG_NAMESPACE, "SignatureValue")?;
    let key_info = one_child(signature, DSIG_NAMESPACE, "KeyInfo")?;
    let info = read_signed_info(signed_info)?;

    let (target, uri) = dereference_signed_properties(doc, signature, info.signed_properties)?;
    check_qualifying_target(signature, target)?;
    unsigned_content(signature, signed_info, target)?;
    let document_digest = validate_document_reference(doc, signature, info.document)?;
    let signed_properties_digest =
        validate_signed_properties_reference(info.signed_properties, target, uri)?;

    let signer = signer_from_key_info(key_info)?;
    let signing_time = check_signed_signature_properties(target, &signer)?;

    verify_signature_value(signed_info, signature_value, &info, &signer)?;
    Ok(VerifiedList {
        signer,
        signing_time,
        signature_algorithm: info.signature_algorithm,
        canonicalization: info.canonicalization,
        document_digest,
        signed_properties_digest,
    })
}

/// Rule 1: the document is one `TrustServiceStatusList` (TS 119 612 clause 5.7) holding
/// exactly one `ds:Signature`, a child of its root; no document type declaration. Returns
/// the signature.
fn locate_signature<'a, 'i>(doc: &'a Document<'i>) -> Result<Node<'a, 'i>, XmlSigError> {
    // roxmltree refuses a DTD by default, but a caller may have parsed with `allow_dtd`:
    // entity declarations would make the tree differ from what another reader sees.
    if doc.input_text().contains("<!DOCTYPE") {
        return Err(XmlSigError::NotXml(
            "a document type declaration is refused".to_owned(),
        ));
    }
    let root = doc.root_element();
    if !is_in(root, TSL_NAMESPACE, "TrustServiceStatusList") {
        return Err(structure("the root element is not TrustServiceStatusList"));
    }
    let lists = doc
        .descendants()
        .filter(|n| is_in(*n, TSL_NAMESPACE, "TrustServiceStatusList"))
        .count();
    if lists != 1 {
        return Err(structure(format!(
            "{lists} TrustServiceStatusList elements in the document, expected 1"
        )));
    }
    let signatures: Vec<Node<'_, '_>> = doc
        .descendants()
        .filter(|n| is_in(*n, DSIG_NAMESPACE, "Signature"))
        .collect();
    let signature = match signatures.as_slice() {
        [one] => *one,
        [] => return Err(structure("no ds:Signature in the document")),
        more => {
            return Err(structure(format!(
                "{} ds:Signature elements in the document, expected 1",
                more.len()
            )));
        }
    };
    if signature.parent_element().map(|p| p.id()) != Some(root.id()) {
        return Err(structure(
            "ds:Signature is not a child of the TrustServiceStatusList root",
        ));
    }
    Ok(signature)
}

/// What `SignedInfo` says (XML Signature 1.1 section 4.4): how it is canonicalised, how it
/// is signed, and its two references.
struct SignedInfoParts<'a, 'i> {
    canonicalization: c14n::Method,
    signature_algorithm: SignatureAlgorithm,
    /// The `URI=""` reference: the whole document minus the signature.
    document: Node<'a, 'i>,
    /// The reference of `Type` [`SIGNED_PROPERTIES_TYPE`].
    signed_properties: Node<'a, 'i>,
}

/// Rules 2 and 3 as far as `SignedInfo` alone says: `CanonicalizationMethod` and
/// `SignatureMethod` of the allow-lists without parameters (XML Signature 1.1 sections 4.4.1
/// and 4.4.2), and exactly two `Reference`s (section 4.4.3), one of them to the signed
/// properties, and nothing else.
fn read_signed_info<'a, 'i>(
    signed_info: Node<'a, 'i>,
) -> Result<SignedInfoParts<'a, 'i>, XmlSigError> {
    let c14n_node = one_child(signed_info, DSIG_NAMESPACE, "CanonicalizationMethod")?;
    let canonicalization = c14n_method(c14n_node)?;
    let method_node = one_child(signed_info, DSIG_NAMESPACE, "SignatureMethod")?;
    let method_uri = algorithm(method_node)?;
    let signature_algorithm =
        SignatureAlgorithm::from_uri(method_uri).ok_or_else(|| XmlSigError::Unsupported {
            what: "SignatureMethod",
            value: method_uri.to_owned(),
        })?;
    if method_node.children().any(|c| c.is_element()) {
        return Err(XmlSigError::Unsupported {
            what: "SignatureMethod parameter",
            value: method_uri.to_owned(),
        });
    }
    let references: Vec<Node<'_, '_>> =
        children_in(signed_info, DSIG_NAMESPACE, "Reference").collect();
    if references.len() != 2 {
        return Err(structure(format!(
            "{} References in SignedInfo, expected 2 (URI=\"\" and SignedProperties)",
            references.len()
        )));
    }
    if let Some(other) = signed_info.children().find(|c| {
        c.is_element()
            && !(is_in(*c, DSIG_NAMESPACE, "CanonicalizationMethod")
                || is_in(*c, DSIG_NAMESPACE, "SignatureMethod")
                || is_in(*c, DSIG_NAMESPACE, "Reference"))
    }) {
        return Err(structure(format!(
            "unexpected element {} in SignedInfo",
            other.tag_name().name()
        )));
    }
    let (whole, props): (Vec<Node<'_, '_>>, Vec<Node<'_, '_>>) = references
        .iter()
        .partition(|r| r.attribute("Type") != Some(SIGNED_PROPERTIES_TYPE));
    let (&[document], &[signed_properties]) = (whole.as_slice(), props.as_slice()) else {
        return Err(structure(
            "expected one Reference of Type SignedProperties and one to the document",
        ));
    };
    Ok(SignedInfoParts {
        canonicalization,
        signature_algorithm,
        document,
        signed_properties,
    })
}

/// Reference validation, step 1 for the signed properties (XML Signature 1.1 section 3.2.1:
/// dereference the URI): `URI="#id"` names exactly one element of the document, and it is
/// the `xades:SignedProperties` of this signature's `ds:Object/xades:QualifyingProperties`
/// (rule 3). Resolved before any digest is computed, so a wrapping attempt is named as such.
/// Returns the target and the URI.
fn dereference_signed_properties<'a, 'i>(
    doc: &'a Document<'i>,
    signature: Node<'a, 'i>,
    reference: Node<'a, 'i>,
) -> Result<(Node<'a, 'i>, &'a str), XmlSigError> {
    let uri = reference.attribute("URI").unwrap_or("");
    let Some(id) = uri.strip_prefix('#').filter(|id| !id.is_empty()) else {
        return Err(XmlSigError::BadReferenceTarget {
            uri: uri.to_owned(),
            reason: "not a same-document reference by Id".to_owned(),
        });
    };
    let targets: Vec<Node<'_, '_>> = doc
        .descendants()
        .filter(|n| n.is_element() && n.attribute("Id") == Some(id))
        .collect();
    let target = match targets.as_slice() {
        [one] => *one,
        other => {
            return Err(XmlSigError::BadReferenceTarget {
                uri: uri.to_owned(),
                reason: format!("{} elements carry Id=\"{id}\", expected 1", other.len()),
            });
        }
    };
    let qualifying = target.parent_element();
    let object = qualifying.and_then(|q| q.parent_element());
    let owner = object.and_then(|o| o.parent_element());
    let in_place = is_in(target, XADES_NAMESPACE, "SignedProperties")
        && qualifying.is_some_and(|q| is_in(q, XADES_NAMESPACE, "QualifyingProperties"))
        && object.is_some_and(|o| is_in(o, DSIG_NAMESPACE, "Object"))
        && owner.map(|s| s.id()) == Some(signature.id());
    if !in_place {
        return Err(XmlSigError::BadReferenceTarget {
            uri: uri.to_owned(),
            reason: "does not point to xades:SignedProperties in this signature's \
                     ds:Object/xades:QualifyingProperties"
                .to_owned(),
        });
    }
    Ok((target, uri))
}

/// XAdES (EN 319 132-1 section 4.3.1): `QualifyingProperties`' `Target` names the signature
/// it qualifies. The signature's `Id` is not covered by any digest, `Target` is.
fn check_qualifying_target(
    signature: Node<'_, '_>,
    signed_properties: Node<'_, '_>,
) -> Result<(), XmlSigError> {
    let qualifying = signed_properties.parent_element();
    let target_attr = qualifying.and_then(|q| q.attribute("Target"));
    let signature_id = signature.attribute("Id");
    if target_attr.is_none() || target_attr.and_then(|t| t.strip_prefix('#')) != signature_id {
        return Err(structure(format!(
            "xades:QualifyingProperties Target={:?} does not name this ds:Signature (Id={:?})",
            target_attr.unwrap_or("(none)"),
            signature_id.unwrap_or("(none)")
        )));
    }
    Ok(())
}

/// Reference validation of `URI=""` (XML Signature 1.1 section 3.2.1): dereference (the
/// whole document), apply the transforms (the enveloped-signature transform of section
/// 6.6.4 and at most one canonicalisation; a same-document reference drops comments,
/// section 4.4.3.3), digest and compare with `DigestValue`.
fn validate_document_reference(
    doc: &Document<'_>,
    signature: Node<'_, '_>,
    reference: Node<'_, '_>,
) -> Result<DigestAlgorithm, XmlSigError> {
    if reference.attribute("URI") != Some("") {
        return Err(structure(format!(
            "the document Reference has URI=\"{}\", expected URI=\"\"",
            reference.attribute("URI").unwrap_or("(none)")
        )));
    }
    let listed = transforms(reference)?;
    let method = match listed.as_slice() {
        [enveloped] if *enveloped == ENVELOPED_SIGNATURE => c14n::Method::Inclusive,
        [enveloped, c] if *enveloped == ENVELOPED_SIGNATURE => c14n::Method::from_uri(c)
            .ok_or_else(|| XmlSigError::Unsupported {
                what: "Transform of Reference URI=\"\"",
                value: (*c).to_owned(),
            })?,
        _ => {
            return Err(XmlSigError::Unsupported {
                what: "Transforms of Reference URI=\"\"",
                value: format!(
                    "{listed:?} (expected enveloped-signature, then one canonicalisation)"
                ),
            });
        }
    };
    let bytes = c14n::canonicalize(doc.root(), Some(signature.id()), method, false)
        .map_err(|e| structure(e.to_string()))?;
    check_digest(reference, "", &bytes)
}

/// Reference validation of the signed properties (XML Signature 1.1 section 3.2.1), once
/// [`dereference_signed_properties`] has found `target`: apply the transforms (at most one
/// canonicalisation), digest and compare with `DigestValue`.
fn validate_signed_properties_reference(
    reference: Node<'_, '_>,
    target: Node<'_, '_>,
    uri: &str,
) -> Result<DigestAlgorithm, XmlSigError> {
    let listed = transforms(reference)?;
    let method = match listed.as_slice() {
        [] => c14n::Method::Inclusive,
        [c] => c14n::Method::from_uri(c).ok_or_else(|| XmlSigError::Unsupported {
            what: "Transform of the SignedProperties Reference",
            value: (*c).to_owned(),
        })?,
        _ => {
            return Err(XmlSigError::Unsupported {
                what: "Transforms of the SignedProperties Reference",
                value: format!("{listed:?} (expected at most one canonicalisation)"),
            });
        }
    };
    let bytes =
        c14n::canonicalize(target, None, method, false).map_err(|e| structure(e.to_string()))?;
    check_digest(reference, uri, &bytes)
}

/// Signature validation, step 2 (XML Signature 1.1 section 3.2.2: obtain the keying
/// information from `KeyInfo`): the one `ds:X509Certificate` of `KeyInfo` (rule 4).
fn signer_from_key_info(key_info: Node<'_, '_>) -> Result<PspCertificate, XmlSigError> {
    let certs: Vec<Node<'_, '_>> = key_info
        .descendants()
        .filter(|n| is_in(*n, DSIG_NAMESPACE, "X509Certificate"))
        .collect();
    let [cert_node] = certs.as_slice() else {
        return Err(structure(format!(
            "{} X509Certificate elements in KeyInfo, expected 1",
            certs.len()
        )));
    };
    let der = base64_content(*cert_node)
        .map_err(|e| XmlSigError::Certificate(format!("X509Certificate is not Base64: {e}")))?;
    PspCertificate::from_der(der).map_err(|e| XmlSigError::Certificate(e.to_string()))
}

/// The XAdES signed signature properties (EN 319 132-1 section 5.2): the signing
/// certificate names the `KeyInfo` certificate ([`check_signing_certificate`], rule 4), and
/// `SigningTime`, at most once, is read. Returns the signing time.
fn check_signed_signature_properties(
    signed_properties: Node<'_, '_>,
    signer: &PspCertificate,
) -> Result<Option<OffsetDateTime>, XmlSigError> {
    let properties = one_child(
        signed_properties,
        XADES_NAMESPACE,
        "SignedSignatureProperties",
    )?;
    check_signing_certificate(properties, &signer.der)?;
    match children_in(properties, XADES_NAMESPACE, "SigningTime")
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => Ok(None),
        [t] => {
            let text = t.text().unwrap_or("").trim();
            OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
                .map(Some)
                .map_err(|e| structure(format!("SigningTime {text:?}: {e}")))
        }
        _ => Err(structure("SigningTime given more than once")),
    }
}

/// Signature validation, steps 1 and 3 (XML Signature 1.1 section 3.2.2): canonicalise
/// `SignedInfo` with its `CanonicalizationMethod`, and verify `SignatureValue` over it with
/// the `SignatureMethod` and the signer's key (rule 5).
fn verify_signature_value(
    signed_info: Node<'_, '_>,
    signature_value: Node<'_, '_>,
    info: &SignedInfoParts<'_, '_>,
    signer: &PspCertificate,
) -> Result<(), XmlSigError> {
    let canonicalization = info.canonicalization;
    let signed_info_bytes = c14n::canonicalize(
        signed_info,
        None,
        canonicalization,
        canonicalization.with_comments(),
    )
    .map_err(|e| structure(e.to_string()))?;
    let value = base64_content(signature_value)
        .map_err(|e| structure(format!("SignatureValue is not Base64: {e}")))?;
    verify_with_scheme(
        &signed_info_bytes,
        info.signature_algorithm.scheme(),
        &value,
        &signer.spki,
    )
    .map_err(XmlSigError::Signature)
}

/// `xades:SigningCertificate` (XAdES 1.3.2, `CertDigest` with SHA-1 or SHA-256) or
/// `xades:SigningCertificateV2` (EN 319 132-1, SHA-256/384/512): one `Cert` must carry the
/// digest of the KeyInfo certificate.
///
/// SHA-1 is accepted in `SigningCertificate` only: there it does not bind a signature to
/// content, it identifies a certificate we already hold in full (the KeyInfo one, whose key
/// verifies the signature), and the real EU list of lists and the IE list use it. A second
/// pre-image of a given certificate under SHA-1 is not known to be feasible.
fn check_signing_certificate(ssp: Node<'_, '_>, cert_der: &[u8]) -> Result<(), XmlSigError> {
    let v1: Vec<_> = children_in(ssp, XADES_NAMESPACE, "SigningCertificate").collect();
    let v2: Vec<_> = children_in(ssp, XADES_NAMESPACE, "SigningCertificateV2").collect();
    let (holder, allow_sha1) = match (v1.as_slice(), v2.as_slice()) {
        ([one], []) => (*one, true),
        ([], [one]) => (*one, false),
        _ => {
            return Err(XmlSigError::SigningCertificateMismatch(
                "expected exactly one SigningCertificate or SigningCertificateV2".to_owned(),
            ));
        }
    };
    let mut seen = 0;
    for cert in children_in(holder, XADES_NAMESPACE, "Cert") {
        seen += 1;
        let digest = one_child(cert, XADES_NAMESPACE, "CertDigest")?;
        let method = one_child(digest, DSIG_NAMESPACE, "DigestMethod")?;
        let uri = algorithm(method)?;
        let ring_alg: &'static ring::digest::Algorithm = match uri {
            "http://www.w3.org/2000/09/xmldsig#sha1" if allow_sha1 => {
                &ring::digest::SHA1_FOR_LEGACY_USE_ONLY
            }
            other => match DigestAlgorithm::from_uri(other) {
                Some(d) => d.ring(),
                None => {
                    return Err(XmlSigError::Unsupported {
                        what: "CertDigest DigestMethod",
                        value: other.to_owned(),
                    });
                }
            },
        };
        let expected = base64_content(one_child(digest, DSIG_NAMESPACE, "DigestValue")?)
            .map_err(|e| structure(format!("CertDigest DigestValue is not Base64: {e}")))?;
        if ring::digest::digest(ring_alg, cert_der).as_ref() == expected.as_slice() {
            return Ok(());
        }
    }
    Err(XmlSigError::SigningCertificateMismatch(format!(
        "none of the {seen} Cert digests matches the KeyInfo X509Certificate"
    )))
}

/// Checks a Reference's `DigestMethod` and `DigestValue` against `bytes`.
fn check_digest(
    reference: Node<'_, '_>,
    uri: &str,
    bytes: &[u8],
) -> Result<DigestAlgorithm, XmlSigError> {
    let method = one_child(reference, DSIG_NAMESPACE, "DigestMethod")?;
    let method_uri = algorithm(method)?;
    let digest = DigestAlgorithm::from_uri(method_uri).ok_or_else(|| XmlSigError::Unsupported {
        what: "DigestMethod",
        value: method_uri.to_owned(),
    })?;
    let expected = base64_content(one_child(reference, DSIG_NAMESPACE, "DigestValue")?)
        .map_err(|e| structure(format!("DigestValue of URI=\"{uri}\" is not Base64: {e}")))?;
    if ring::digest::digest(digest.ring(), bytes).as_ref() != expected.as_slice() {
        return Err(XmlSigError::DigestMismatch {
            uri: uri.to_owned(),
        });
    }
    Ok(digest)
}

/// The `Algorithm` URIs of a Reference's `Transforms`, in order; refuses parameters.
fn transforms<'a>(reference: Node<'a, '_>) -> Result<Vec<&'a str>, XmlSigError> {
    let list: Vec<_> = children_in(reference, DSIG_NAMESPACE, "Transforms").collect();
    let holder = match list.as_slice() {
        [] => return Ok(Vec::new()),
        [one] => *one,
        _ => return Err(structure("Transforms given more than once in a Reference")),
    };
    let mut out = Vec::new();
    for t in holder.children().filter(|c| c.is_element()) {
        if !is_in(t, DSIG_NAMESPACE, "Transform") {
            return Err(structure(format!(
                "unexpected element {} in Transforms",
                t.tag_name().name()
            )));
        }
        let uri = algorithm(t)?;
        if t.children().any(|c| c.is_element()) {
            return Err(XmlSigError::Unsupported {
                what: "Transform parameters (InclusiveNamespaces, XPath)",
                value: uri.to_owned(),
            });
        }
        out.push(uri);
    }
    Ok(out)
}

fn c14n_method(node: Node<'_, '_>) -> Result<c14n::Method, XmlSigError> {
    let uri = algorithm(node)?;
    let method = c14n::Method::from_uri(uri).ok_or_else(|| XmlSigError::Unsupported {
        what: "CanonicalizationMethod",
        value: uri.to_owned(),
    })?;
    if node.children().any(|c| c.is_element()) {
        return Err(XmlSigError::Unsupported {
            what: "CanonicalizationMethod parameters (InclusiveNamespaces PrefixList)",
            value: uri.to_owned(),
        });
    }
    Ok(method)
}

fn algorithm<'a>(node: Node<'a, '_>) -> Result<&'a str, XmlSigError> {
    node.attribute("Algorithm").ok_or_else(|| {
        structure(format!(
            "{} without an Algorithm attribute",
            node.tag_name().name()
        ))
    })
}

/// The Base64 text of an element (whitespace, which XML-DSig allows, removed).
fn base64_content(node: Node<'_, '_>) -> Result<Vec<u8>, base64::DecodeError> {
    let mut text = String::new();
    for child in node.children() {
        if let Some(t) = child.text().filter(|_| child.is_text()) {
            text.extend(t.chars().filter(|c| !c.is_ascii_whitespace()));
        }
    }
    base64::engine::general_purpose::STANDARD.decode(text)
}

fn one_child<'a, 'i>(
    parent: Node<'a, 'i>,
    ns: &'static str,
    local: &'static str,
) -> Result<Node<'a, 'i>, XmlSigError> {
    let mut found = children_in(parent, ns, local);
    match (found.next(), found.next()) {
        (Some(one), None) => Ok(one),
        (None, _) => Err(structure(format!(
            "{} has no {local}",
            parent.tag_name().name()
        ))),
        (Some(_), Some(_)) => Err(structure(format!(
            "{} has more than one {local}",
            parent.tag_name().name()
        ))),
    }
}

fn structure(msg: impl Into<String>) -> XmlSigError {
    XmlSigError::Structure(msg.into())
}
