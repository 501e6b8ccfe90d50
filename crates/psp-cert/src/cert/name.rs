//! Distinguished names: RFC 4514 strings for reports, and single attributes as text.

use x509_parser::asn1_rs::Class;
use x509_parser::x509::{AttributeTypeAndValue, X509Name};

use super::der;

/// The attribute type keywords of RFC 4514 section 3; every other type is written as its
/// dotted OID (as OpenSSL's `-nameopt RFC2253` and Python's `rfc4514_string` do).
fn keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.6" => "C",
        "2.5.4.9" => "STREET",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

/// RFC 4514 section 2: the RDNs in reverse order separated by `,`, the attributes of a
/// multi-valued RDN joined by `+`, string values escaped (section 2.4), and values that are
/// not a readable string as `#` and the hex of their DER encoding.
///
/// For titles and logs only; names are matched on their DER (`subject_raw`, `issuer_raw`).
pub(crate) fn rfc4514(name: &X509Name<'_>) -> String {
    let rdns: Vec<String> = name
        .iter_rdn()
        .map(|rdn| {
            rdn.iter()
                .map(|attr| {
                    let oid = attr.attr_type().to_id_string();
                    let key = keyword(&oid).map_or(oid, str::to_owned);
                    let value = match attribute_text(attr) {
                        Some(text) => escape(&text),
                        None => hex_value(attr),
                    };
                    format!("{key}={value}")
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    rdns.into_iter().rev().collect::<Vec<_>>().join(",")
}

/// RFC 4514 section 2.4 escaping.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' | '"' | '+' | ',' | ';' | '<' | '>' => {
                out.push('\\');
                out.push(c);
            }
            '\0' => out.push_str("\\00"),
            _ => out.push(c),
        }
    }
    if out.starts_with('#') || out.starts_with(' ') {
        out.insert(0, '\\');
    }
    if out.ends_with(' ') && !out.ends_with("\\ ") {
        out.pop();
        out.push_str("\\ ");
    }
    out
}

/// `#` and the hex of the value's DER encoding (RFC 4514 section 2.4).
fn hex_value(attr: &AttributeTypeAndValue<'_>) -> String {
    let value = attr.attr_value();
    let mut out = String::from("#");
    for b in value.header.raw_tag().unwrap_or(&[]) {
        out.push_str(&format!("{b:02x}"));
    }
    // The raw tag is not always kept by the parser; fall back to a one-octet universal tag.
    if out.len() == 1 {
        let tag = u8::try_from(value.tag().0).unwrap_or(0) & 0x1f;
        let constructed = if value.header.is_constructed() {
            0x20
        } else {
            0
        };
        let class = (value.class() as u8) << 6;
        out.push_str(&format!("{:02x}", class | constructed | tag));
    }
    let len = value.data.len();
    if len < 0x80 {
        out.push_str(&format!("{len:02x}"));
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|&b| b == 0)
            .collect();
        out.push_str(&format!("{:02x}", 0x80 | bytes.len()));
        for b in bytes {
            out.push_str(&format!("{b:02x}"));
        }
    }
    for b in value.data {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The attribute types of `name`, dotted, in encoded order (repeats kept).
pub(crate) fn attribute_types(name: &X509Name<'_>) -> Vec<String> {
    name.iter_attributes()
        .map(|a| a.attr_type().to_id_string())
        .collect()
}

/// The first attribute of type `oid` (dotted) in `name`, as text. A second one, or one that
/// is not a readable string, is reported in `warnings` (`what` names it there).
pub(crate) fn first_attribute(
    name: &X509Name<'_>,
    oid: &str,
    what: &str,
    warnings: &mut Vec<String>,
) -> Option<String> {
    let mut matching = name
        .iter_attributes()
        .filter(|a| a.attr_type().to_id_string() == oid);
    let first = matching.next()?;
    let others = matching.count();
    if others > 0 {
        warnings.push(format!(
            "{what} appears {} times; the first is used",
            others + 1
        ));
    }
    let text = attribute_text(first);
    if text.is_none() {
        warnings.push(format!("{what} is not a readable string; ignored"));
    }
    text
}

/// An attribute value of any of the DirectoryString types (and IA5String, NumericString,
/// VisibleString), decoded as [`der::decode_string`] does.
fn attribute_text(attr: &AttributeTypeAndValue<'_>) -> Option<String> {
    let value = attr.attr_value();
    if value.class() != Class::Universal || value.header.is_constructed() {
        return None;
    }
    let tag = u8::try_from(value.tag().0).ok().filter(|t| *t < 31)?;
    der::decode_string(&der::Tlv {
        tag,
        value: value.data,
    })
    .map(|s| s.text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::prelude::FromDer;

    #[test]
    fn names_are_written_in_reverse_with_keywords_plus_and_hex_values() {
        // SEQUENCE {
        //   SET { SEQUENCE { 2.5.4.6 (C), PrintableString "CZ" } }
        //   SET { SEQUENCE { 2.5.4.3 (CN), UTF8String "a,b" },
        //         SEQUENCE { 1.2.3.4, INTEGER 5 } } }
        let der = [
            0x30, 0x25, //
            0x31, 0x0b, 0x30, 0x09, 0x06, 0x03, 0x55, 0x04, 0x06, 0x13, 0x02, b'C', b'Z', //
            0x31, 0x16, //
            0x30, 0x0a, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x03, b'a', b',', b'b', //
            0x30, 0x08, 0x06, 0x03, 0x2a, 0x03, 0x04, 0x02, 0x01, 0x05,
        ];
        let (rest, name) = X509Name::from_der(&der).expect("a Name");
        assert!(rest.is_empty());
        assert_eq!(rfc4514(&name), "CN=a\\,b+1.2.3.4=#020105,C=CZ");
        let mut warnings = Vec::new();
        assert_eq!(
            first_attribute(&name, "2.5.4.3", "commonName", &mut warnings).as_deref(),
            Some("a,b")
        );
        assert_eq!(first_attribute(&name, "1.2.3.4", "x", &mut warnings), None);
        assert_eq!(warnings, vec!["x is not a readable string; ignored"]);
    }

    #[test]
    fn special_characters_are_escaped_as_rfc_4514_requires() {
        assert_eq!(escape("Praha 8, Karlín"), "Praha 8\\, Karlín");
        assert_eq!(escape("a+b;c<d>e\"f\\g"), "a\\+b\\;c\\<d\\>e\\\"f\\\\g");
        assert_eq!(escape("#1"), "\\#1");
        assert_eq!(escape(" lead"), "\\ lead");
        assert_eq!(escape("trail "), "trail\\ ");
        assert_eq!(escape("nul\0"), "nul\\00");
        assert_eq!(escape("plain"), "plain");
    }
}
