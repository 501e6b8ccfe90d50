//! Distinguished-name comparison as RFC 5280 section 7.1 asks for it: issuer/subject chaining
//! and `directoryName` name constraints compare names after the RFC 4518 ("LDAP StringPrep")
//! preparation of their string values, not byte for byte.
//!
//! ```text
//! Name ::= CHOICE { -- only one possibility for now --
//!   rdnSequence  RDNSequence }
//!
//! RDNSequence ::= SEQUENCE OF RelativeDistinguishedName
//!
//! RelativeDistinguishedName ::= SET SIZE (1..MAX) OF AttributeTypeAndValue
//!
//! AttributeTypeAndValue ::= SEQUENCE {
//!   type     AttributeType,
//!   value    AttributeValue }
//! ```
//!
//! RFC 5280 section 7.1: "Conforming implementations MUST use the LDAP StringPrep profile
//! (including insignificant space handling), as specified in \[RFC4518\], as the basis for
//! comparison of distinguished name attributes encoded in either PrintableString or
//! UTF8String." Like OpenSSL (`x509_name_canon`) we apply the same preparation to every
//! string type a name may carry (TeletexString read as Latin-1, BMPString, UniversalString,
//! IA5String, VisibleString), so a CA that rolls its name over from PrintableString to
//! UTF8String (PKITS 4.3.10) still chains.
//!
//! The subset of RFC 4518 implemented, and why it is enough:
//! - section 2.2 (Map): the listed "mapped to nothing" code points and the common format
//!   controls are dropped; the whitespace controls and other spaces become SPACE; case is
//!   folded with Unicode lowercase (not full case folding: `ß` stays `ß`).
//! - section 2.3 (Normalize, NFKC) is not applied: the crate has no Unicode normalisation
//!   tables, and the names in certificates we meet are NFC already. Two names that differ
//!   only in normalisation form compare unequal, which fails closed for chaining (no path)
//!   and for permitted subtrees, and open only for an excluded `directoryName` subtree
//!   written in a different normal form than the subject — a CA-side misconfiguration.
//! - section 2.4 (Prohibit) is not applied: a prohibited code point is compared as itself.
//! - section 2.6.1 (insignificant space): leading and trailing spaces are removed and
//!   internal runs of spaces fold to one.
//!
//! Values of any other type (NumericString, INTEGER, …) compare by their DER encoding.

use std::fmt;

use x509_parser::x509::X509Name;

use super::der::{self, DerError, Reader, tag};

/// OID content octets of PKCS #9 emailAddress, 1.2.840.113549.1.9.1 (RFC 2985 section 5.2.1).
const OID_EMAIL_ADDRESS: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01];

/// Why bytes are not an X.501 `Name` we can compare.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnError {
    /// A tag, length or OID does not follow DER.
    #[error("Name is not valid DER: {0}")]
    Der(String),
    /// The DER is well formed but not shaped like a `Name`.
    #[error("Name structure: {0}")]
    Structure(&'static str),
    /// A string attribute whose content is not valid for its type (for example a UTF8String
    /// that is not UTF-8, or a PrintableString with non-ASCII octets).
    #[error("attribute {oid} holds a {string_type} that does not decode")]
    BadString { oid: String, string_type: String },
}

impl From<DerError> for DnError {
    fn from(e: DerError) -> Self {
        DnError::Der(e.to_string())
    }
}

/// A distinguished name prepared for comparison: the RDN sequence in encoded order, each RDN a
/// sorted set of (attribute type, prepared value).
///
/// Equality is RFC 5280 section 7.1 name matching; it never looks at the original bytes.
#[derive(Debug, Clone)]
pub struct NormalizedName {
    rdns: Vec<Vec<Attribute>>,
    /// emailAddress values as written (not case-folded): the local part of a mailbox is
    /// case-sensitive (RFC 5280 section 4.2.1.10).
    emails: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Attribute {
    /// OID content octets (DER is canonical, so equal OIDs have equal octets).
    oid: Vec<u8>,
    value: Value,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Value {
    /// A string value after RFC 4518 preparation.
    Text(String),
    /// Any other value: its complete DER encoding (tag, length, content).
    Der(Vec<u8>),
}

impl PartialEq for NormalizedName {
    fn eq(&self, other: &Self) -> bool {
        self.rdns == other.rdns
    }
}

impl Eq for NormalizedName {}

impl std::hash::Hash for NormalizedName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.rdns.hash(state);
    }
}

impl NormalizedName {
    /// Reads the DER of a `Name` (the whole input must be one `Name`).
    pub fn from_der(input: &[u8]) -> Result<NormalizedName, DnError> {
        let (name, used) = der::read_tlv(input)?;
        if used != input.len() {
            return Err(DnError::Structure("trailing data after the Name"));
        }
        if name.tag != tag::SEQUENCE {
            return Err(DnError::Structure("Name is not a SEQUENCE"));
        }
        let mut rdns = Vec::new();
        let mut emails = Vec::new();
        let mut reader = name.reader();
        while !reader.is_empty() {
            let set = reader.read()?;
            if set.tag != TAG_SET {
                return Err(DnError::Structure("RelativeDistinguishedName is not a SET"));
            }
            let mut rdn = Vec::new();
            let mut attrs = set.reader();
            while !attrs.is_empty() {
                let (attribute, email) = read_attribute(&mut attrs)?;
                if let Some(email) = email {
                    emails.push(email);
                }
                rdn.push(attribute);
            }
            if rdn.is_empty() {
                return Err(DnError::Structure("empty RelativeDistinguishedName"));
            }
            rdn.sort();
            rdns.push(rdn);
        }
        Ok(NormalizedName { rdns, emails })
    }

    /// The same as [`NormalizedName::from_der`] on the name's encoding as x509-parser kept it.
    pub fn from_x509(name: &X509Name<'_>) -> Result<NormalizedName, DnError> {
        NormalizedName::from_der(name.as_raw())
    }

    /// True for the empty `Name` (no RDN), as the subject of a certificate whose identity is
    /// only in subjectAltName.
    pub fn is_empty(&self) -> bool {
        self.rdns.is_empty()
    }

    /// Number of RDNs.
    pub fn len(&self) -> usize {
        self.rdns.len()
    }

    /// True when `subtree` is a prefix of this name's RDN sequence (RFC 5280 section
    /// 4.2.1.10, directoryName: "a name is within the subtree when its RDN sequence begins
    /// with the subtree's"). The empty name is a prefix of every name.
    pub fn is_within(&self, subtree: &NormalizedName) -> bool {
        subtree.rdns.len() <= self.rdns.len()
            && self.rdns.iter().zip(&subtree.rdns).all(|(a, b)| a == b)
    }

    /// The PKCS #9 emailAddress (1.2.840.113549.1.9.1) values, as written, in encoded order;
    /// RFC 5280 section 4.2.1.10 applies rfc822Name constraints to them.
    pub fn email_addresses(&self) -> Vec<String> {
        self.emails.clone()
    }
}

/// Universal SET, constructed.
const TAG_SET: u8 = 0x31;

/// Reads one `AttributeTypeAndValue`; returns it and, for an emailAddress, its text as written.
fn read_attribute(reader: &mut Reader<'_>) -> Result<(Attribute, Option<String>), DnError> {
    let seq = reader.read()?;
    if seq.tag != tag::SEQUENCE {
        return Err(DnError::Structure(
            "AttributeTypeAndValue is not a SEQUENCE",
        ));
    }
    let mut fields = seq.reader();
    let oid = fields.read()?;
    if oid.tag != tag::OID {
        return Err(DnError::Structure(
            "attribute type is not an OBJECT IDENTIFIER",
        ));
    }
    // Validates the arcs; the dotted form is only for messages.
    let dotted = der::oid_to_string(oid.value)?;
    let raw_value = fields.remaining();
    let (value, used) = der::read_tlv(raw_value)?;
    if used != raw_value.len() {
        return Err(DnError::Structure("AttributeTypeAndValue has extra fields"));
    }
    let is_string = matches!(
        value.tag,
        tag::UTF8_STRING
            | tag::PRINTABLE_STRING
            | tag::TELETEX_STRING
            | tag::BMP_STRING
            | tag::UNIVERSAL_STRING
            | tag::IA5_STRING
            | tag::VISIBLE_STRING
    );
    let mut email = None;
    let prepared = if is_string {
        let text = der::decode_string(&value).ok_or_else(|| DnError::BadString {
            oid: dotted,
            string_type: der::tag_name(value.tag),
        })?;
        if oid.value == OID_EMAIL_ADDRESS {
            email = Some(text.text.clone());
        }
        Value::Text(prepare(&text.text))
    } else {
        Value::Der(raw_value.to_vec())
    };
    Ok((
        Attribute {
            oid: oid.value.to_vec(),
            value: prepared,
        },
        email,
    ))
}

/// RFC 4518 preparation of a string value for the equality match (see the module comment for
/// the subset implemented).
fn prepare(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    for c in text.chars() {
        match map(c) {
            Mapped::Nothing => {}
            Mapped::Space => pending_space = !out.is_empty(),
            Mapped::Char(c) => {
                if pending_space {
                    out.push(' ');
                    pending_space = false;
                }
                out.extend(c.to_lowercase());
            }
        }
    }
    out
}

enum Mapped {
    Nothing,
    Space,
    Char(char),
}

/// RFC 4518 section 2.2.
fn map(c: char) -> Mapped {
    match c {
        // "CHARACTER TABULATION (U+0009), LINE FEED (LF) (U+000A), LINE TABULATION (U+000B),
        // FORM FEED (FF) (U+000C), CARRIAGE RETURN (CR) (U+000D), and NEXT LINE (NEL)
        // (U+0085) are mapped to SPACE"; so are the other separators (Zs, Zl, Zp).
        '\u{0009}'..='\u{000D}' | '\u{0085}' => Mapped::Space,
        // "SOFT HYPHEN (U+00AD) and MONGOLIAN TODO SOFT HYPHEN (U+1806) ... COMBINING
        // GRAPHEME JOINER (U+034F) and VARIATION SELECTORs (U+180B-180D, FF00-FE0F) ...
        // OBJECT REPLACEMENT CHARACTER (U+FFFC) ... ZERO WIDTH SPACE (U+200B) are mapped to
        // nothing", as are "all other control code (e.g., Cc) points or code points with a
        // control function (e.g., Cf)" (the common Cf ones are listed here).
        '\u{00AD}'
        | '\u{1806}'
        | '\u{034F}'
        | '\u{180B}'..='\u{180E}'
        | '\u{FE00}'..='\u{FE0F}'
        | '\u{FFFC}'
        | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}'
        | '\u{FEFF}'
        | '\u{061C}' => Mapped::Nothing,
        c if c.is_control() => Mapped::Nothing,
        c if c.is_whitespace() => Mapped::Space,
        c => Mapped::Char(c),
    }
}

impl fmt::Display for NormalizedName {
    /// RFC 4514 order (last RDN first) of the prepared values, for messages only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, rdn) in self.rdns.iter().rev().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            for (j, attr) in rdn.iter().enumerate() {
                if j > 0 {
                    f.write_str("+")?;
                }
                let oid = der::oid_to_string(&attr.oid).unwrap_or_else(|_| "?".into());
                match &attr.value {
                    Value::Text(t) => write!(f, "{oid}={}", t.escape_debug())?,
                    Value::Der(d) => {
                        write!(f, "{oid}=#")?;
                        for b in d {
                            write!(f, "{b:02x}")?;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use psp_testkit::der::{tlv, utf8};
    use x509_parser::prelude::{FromDer, X509Certificate};

    const PKITS: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/data/pkits/certs/"
    );

    fn pkits(file: &str) -> Vec<u8> {
        std::fs::read(format!("{PKITS}{file}.crt")).expect("PKITS file present")
    }

    /// (issuer of `ee`, subject of `ca`), both prepared, and whether their DER differs.
    fn issuer_and_ca_subject(ee: &str, ca: &str) -> (NormalizedName, NormalizedName, bool) {
        let ee = pkits(ee);
        let ca = pkits(ca);
        let (_, ee) = X509Certificate::from_der(&ee).expect("EE parses");
        let (_, ca) = X509Certificate::from_der(&ca).expect("CA parses");
        let bytes_differ = ee.issuer().as_raw() != ca.subject().as_raw();
        (
            NormalizedName::from_x509(ee.issuer()).expect("issuer"),
            NormalizedName::from_x509(ca.subject()).expect("subject"),
            bytes_differ,
        )
    }

    /// `SEQUENCE { SET { SEQUENCE { OID, value } } ... }` from (oid content, value TLV) RDNs.
    fn name(rdns: &[&[(&[u8], &[u8])]]) -> Vec<u8> {
        let mut seq = Vec::new();
        for rdn in rdns {
            let mut set = Vec::new();
            for (oid, value) in *rdn {
                let mut atv = tlv(0x06, oid);
                atv.extend_from_slice(value);
                set.extend(tlv(0x30, &atv));
            }
            seq.extend(tlv(0x31, &set));
        }
        tlv(0x30, &seq)
    }

    const CN: &[u8] = &[0x55, 0x04, 0x03];
    const O: &[u8] = &[0x55, 0x04, 0x0a];
    const C: &[u8] = &[0x55, 0x04, 0x06];

    fn parse(der: &[u8]) -> NormalizedName {
        NormalizedName::from_der(der).expect("a Name")
    }

    #[test]
    fn pkits_4_3_valid_name_chaining_tests_match_even_where_the_bytes_differ() {
        // The third field: whether the EE's issuer and the CA's subject differ in DER. Tests 7
        // and 8 are about reading every attribute type of RFC 3280 section 4.1.2.4 (DC,
        // serialNumber, dnQualifier, pseudonym, …), not about preparation.
        for (ee, ca, bytes_differ) in [
            ("ValidNameChainingWhitespaceTest3EE", "GoodCACert", true),
            ("ValidNameChainingWhitespaceTest4EE", "GoodCACert", true),
            ("ValidNameChainingCapitalizationTest5EE", "GoodCACert", true),
            (
                "ValidRFC3280MandatoryAttributeTypesTest7EE",
                "RFC3280MandatoryAttributeTypesCACert",
                false,
            ),
            (
                "ValidRFC3280OptionalAttributeTypesTest8EE",
                "RFC3280OptionalAttributeTypesCACert",
                false,
            ),
            (
                "ValidUTF8StringEncodedNamesTest9EE",
                "UTF8StringEncodedNamesCACert",
                false,
            ),
            (
                "ValidRolloverfromPrintableStringtoUTF8StringTest10EE",
                "RolloverfromPrintableStringtoUTF8StringCACert",
                true,
            ),
            (
                "ValidUTF8StringCaseInsensitiveMatchTest11EE",
                "UTF8StringCaseInsensitiveMatchCACert",
                true,
            ),
        ] {
            let (issuer, subject, differ) = issuer_and_ca_subject(ee, ca);
            assert_eq!(differ, bytes_differ, "{ee}: bytes differ?");
            assert_eq!(
                issuer, subject,
                "{ee}: issuer {issuer} vs {ca} subject {subject}"
            );
        }
    }

    #[test]
    fn pkits_4_3_invalid_name_chaining_tests_do_not_match_their_ca() {
        // 4.3.1: the EE names "Good CA Root" as issuer; the CA that signed it is "Good CA".
        // 4.3.2: the CA's OUs appear in the opposite order in the EE's issuer.
        for (ee, ca) in [
            ("InvalidNameChainingTest1EE", "GoodCACert"),
            ("InvalidNameChainingOrderTest2EE", "NameOrderingCACert"),
        ] {
            let (issuer, subject, _) = issuer_and_ca_subject(ee, ca);
            assert_ne!(issuer, subject, "{ee} must not chain to {ca}");
        }
    }

    #[test]
    fn printable_and_utf8_strings_of_the_same_text_compare_equal_after_space_and_case_folding() {
        let printable = name(&[&[(C, b"\x13\x02US")], &[(CN, b"\x13\x0c  Good   CA ")]]);
        let utf8 = name(&[&[(C, b"\x0c\x02us")], &[(CN, b"\x0c\x07good ca")]]);
        // BMPString "GOOD CA" and a TeletexString read as Latin-1.
        let bmp = name(&[
            &[(C, b"\x13\x02US")],
            &[(CN, b"\x1e\x0e\x00G\x00O\x00O\x00D\x00 \x00C\x00A")],
        ]);
        let teletex = name(&[&[(C, b"\x14\x02US")], &[(CN, b"\x14\x07Good\tCA")]]);
        assert_eq!(parse(&printable), parse(&utf8));
        assert_eq!(parse(&printable), parse(&bmp));
        assert_eq!(parse(&printable), parse(&teletex));
    }

    #[test]
    fn unicode_case_folding_and_invisible_characters() {
        let upper = name(&[&[(CN, &utf8("ŽLUŤOUČKÝ KŮŇ"))]]);
        let lower = name(&[&[(CN, &utf8("žluťoučký kůň"))]]);
        assert_eq!(parse(&upper), parse(&lower));
        // A soft hyphen is mapped to nothing (RFC 4518 section 2.2).
        let soft = name(&[&[(CN, &utf8("a\u{ad}b\u{200b}"))]]);
        let plain = name(&[&[(CN, b"\x0c\x02ab")]]);
        assert_eq!(parse(&soft), parse(&plain));
    }

    #[test]
    fn multi_valued_rdns_compare_as_sets_but_rdn_boundaries_and_order_matter() {
        let a = name(&[&[(CN, b"\x0c\x01a"), (O, b"\x0c\x01b")]]);
        let b = name(&[&[(O, b"\x13\x01B"), (CN, b"\x0c\x01A")]]);
        assert_eq!(parse(&a), parse(&b));
        // The attacker's variant: the same attributes split into two RDNs.
        let split = name(&[&[(CN, b"\x0c\x01a")], &[(O, b"\x0c\x01b")]]);
        assert_ne!(parse(&a), parse(&split));
        // And the RDNs in the other order.
        let swapped = name(&[&[(O, b"\x0c\x01b")], &[(CN, b"\x0c\x01a")]]);
        assert_ne!(parse(&split), parse(&swapped));
    }

    #[test]
    fn the_attribute_type_is_part_of_the_match() {
        let cn = name(&[&[(CN, b"\x0c\x03foo")]]);
        let o = name(&[&[(O, b"\x0c\x03foo")]]);
        assert_ne!(parse(&cn), parse(&o));
    }

    #[test]
    fn non_string_values_compare_by_their_der_encoding() {
        let int5 = name(&[&[(CN, b"\x02\x01\x05")]]);
        let int6 = name(&[&[(CN, b"\x02\x01\x06")]]);
        let numeric = name(&[&[(CN, b"\x12\x015")]]);
        assert_eq!(parse(&int5), parse(&int5.clone()));
        assert_ne!(parse(&int5), parse(&int6));
        assert_ne!(parse(&int5), parse(&numeric));
    }

    #[test]
    fn is_within_is_an_rdn_prefix_test() {
        let full = parse(&name(&[
            &[(C, b"\x13\x02US")],
            &[(O, b"\x13\x04Test")],
            &[(CN, b"\x13\x02EE")],
        ]));
        let subtree = parse(&name(&[&[(C, b"\x0c\x02us")], &[(O, b"\x13\x04TEST")]]));
        let other = parse(&name(&[&[(C, b"\x13\x02US")], &[(O, b"\x13\x05Other")]]));
        let empty = parse(&name(&[]));
        assert!(full.is_within(&subtree));
        assert!(full.is_within(&full));
        assert!(full.is_within(&empty));
        assert!(empty.is_empty());
        assert!(!full.is_within(&other));
        assert!(
            !subtree.is_within(&full),
            "a shorter name is not within a longer one"
        );
        // A value that merely starts like the subtree's is not within it.
        let prefix_text = parse(&name(&[&[(C, b"\x13\x02US")], &[(O, b"\x13\x06Tester")]]));
        assert!(!prefix_text.is_within(&subtree));
    }

    #[test]
    fn email_addresses_are_returned_as_written() {
        const EMAIL: &[u8] = OID_EMAIL_ADDRESS;
        let n = parse(&name(&[
            &[(CN, b"\x0c\x01x")],
            &[(EMAIL, b"\x16\x10User@Example.Com")],
        ]));
        assert_eq!(n.email_addresses(), vec!["User@Example.Com".to_owned()]);
        let pkits29 = pkits("InvalidDNandRFC822nameConstraintsTest29EE");
        let (_, cert) = X509Certificate::from_der(&pkits29).expect("parses");
        let subject = NormalizedName::from_x509(cert.subject()).expect("subject");
        assert_eq!(
            subject.email_addresses(),
            vec!["Test29EE@invalidcertificates.gov".to_owned()]
        );
    }

    #[test]
    fn hostile_encodings_are_errors_not_panics() {
        for bad in [
            &b""[..],
            b"\x30",
            b"\x30\x02\x31\x00",                                     // empty RDN
            b"\x30\x02\x30\x00",                                     // RDN not a SET
            b"\x31\x00",                                             // not a SEQUENCE
            b"\x30\x00\x00",                                         // trailing byte
            b"\x30\x07\x31\x05\x30\x03\x02\x01\x05",                 // no OID
            b"\x30\x0a\x31\x08\x30\x06\x06\x01\x55\x0c\x01\xff",     // bad UTF-8
            b"\x30\x0a\x31\x08\x30\x06\x06\x01\x55\x13\x01\xe9",     // non-ASCII PrintableString
            b"\x30\x0b\x31\x09\x30\x07\x06\x01\x55\x0c\x00\x05\x00", // extra field
            b"\x30\x80\x00\x00",                                     // indefinite length
        ] {
            assert!(NormalizedName::from_der(bad).is_err(), "{bad:02x?}");
        }
    }
}
