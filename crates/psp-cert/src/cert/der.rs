//! A small, strict DER reader for the few structures x509-parser leaves to us (the
//! QCStatements extension value, extended key usage in encoded order).
//!
//! It reads one tag-length-value at a time from a slice and never recurses: callers walk the
//! fixed-depth schemas of RFC 3739, EN 319 412-5 and TS 119 495 by hand, so the work is
//! linear in the input and the nesting of hostile input cannot exhaust the stack.
//!
//! X.690 (DER) rules enforced: low-tag-number form only (every tag in these schemas is
//! below 31), definite lengths only, minimal length encoding, no length beyond the input.

use std::fmt;

/// Universal tags used by the schemas we read (X.680 section 8.6).
pub(crate) mod tag {
    pub(crate) const BOOLEAN: u8 = 0x01;
    pub(crate) const INTEGER: u8 = 0x02;
    pub(crate) const BIT_STRING: u8 = 0x03;
    pub(crate) const OCTET_STRING: u8 = 0x04;
    pub(crate) const NULL: u8 = 0x05;
    pub(crate) const OID: u8 = 0x06;
    pub(crate) const UTF8_STRING: u8 = 0x0c;
    pub(crate) const NUMERIC_STRING: u8 = 0x12;
    pub(crate) const PRINTABLE_STRING: u8 = 0x13;
    pub(crate) const TELETEX_STRING: u8 = 0x14;
    pub(crate) const IA5_STRING: u8 = 0x16;
    pub(crate) const VISIBLE_STRING: u8 = 0x1a;
    pub(crate) const UNIVERSAL_STRING: u8 = 0x1c;
    pub(crate) const BMP_STRING: u8 = 0x1e;
    pub(crate) const SEQUENCE: u8 = 0x30;
}

/// Why bytes are not the DER we expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DerError {
    /// The input ended inside a tag, a length or a value.
    Truncated,
    /// Tag number 31 or above (high-tag-number form); nothing we read uses one.
    HighTagNumber,
    /// Length octet 0x80: the BER indefinite form, forbidden in DER.
    IndefiniteLength,
    /// A long-form length with leading zero octets, or long form for a length below 128.
    NonMinimalLength,
    /// A length field of more than four octets; no certificate comes near 4 GiB.
    LengthTooLong,
    /// An OBJECT IDENTIFIER that is empty, has a non-minimal arc, or an arc beyond `u64`.
    BadOid,
}

impl fmt::Display for DerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DerError::Truncated => "truncated",
            DerError::HighTagNumber => "high-tag-number form",
            DerError::IndefiniteLength => "indefinite length (BER, not DER)",
            DerError::NonMinimalLength => "non-minimal length encoding",
            DerError::LengthTooLong => "length field longer than four octets",
            DerError::BadOid => "malformed OBJECT IDENTIFIER",
        })
    }
}

/// One tag-length-value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tlv<'a> {
    /// The identifier octet (class, constructed bit and tag number).
    pub tag: u8,
    /// The content octets.
    pub value: &'a [u8],
}

impl<'a> Tlv<'a> {
    /// A reader over the content octets (for a constructed value).
    pub(super) fn reader(&self) -> Reader<'a> {
        Reader::new(self.value)
    }
}

/// Reads consecutive TLVs from a slice.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn new(input: &'a [u8]) -> Self {
        Reader { rest: input }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The bytes not read yet.
    pub(super) fn remaining(&self) -> &'a [u8] {
        self.rest
    }

    /// The tag of the next TLV, without consuming it.
    pub(super) fn peek_tag(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    /// Reads the next TLV. On error the reader is left where it was.
    pub(super) fn read(&mut self) -> Result<Tlv<'a>, DerError> {
        let (tlv, used) = read_tlv(self.rest)?;
        self.rest = self.rest.get(used..).unwrap_or_default();
        Ok(tlv)
    }
}

/// Reads one TLV at the start of `input`; returns it and the number of bytes it spans.
pub(crate) fn read_tlv(input: &[u8]) -> Result<(Tlv<'_>, usize), DerError> {
    let (&tag, after_tag) = input.split_first().ok_or(DerError::Truncated)?;
    if tag & 0x1f == 0x1f {
        return Err(DerError::HighTagNumber);
    }
    let (&first, after_first) = after_tag.split_first().ok_or(DerError::Truncated)?;
    let (len, header_len) = if first < 0x80 {
        (usize::from(first), 2)
    } else if first == 0x80 {
        return Err(DerError::IndefiniteLength);
    } else {
        let n = usize::from(first & 0x7f);
        if n > 4 {
            return Err(DerError::LengthTooLong);
        }
        let octets = after_first.get(..n).ok_or(DerError::Truncated)?;
        if octets.first() == Some(&0) {
            return Err(DerError::NonMinimalLength);
        }
        let len = octets
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        if len < 0x80 {
            return Err(DerError::NonMinimalLength);
        }
        (len, 2 + n)
    };
    let end = header_len.checked_add(len).ok_or(DerError::Truncated)?;
    let value = input.get(header_len..end).ok_or(DerError::Truncated)?;
    Ok((Tlv { tag, value }, end))
}

/// Decodes the content octets of an OBJECT IDENTIFIER (X.690 section 8.19) to dotted form.
pub(crate) fn oid_to_string(content: &[u8]) -> Result<String, DerError> {
    // Longest OID we accept, in content octets. The OIDs in certificates are below 30
    // octets; the bound keeps a hostile OID from producing a long string.
    const MAX_OID_OCTETS: usize = 64;
    if content.is_empty() || content.len() > MAX_OID_OCTETS {
        return Err(DerError::BadOid);
    }
    let mut out = String::new();
    let mut arc: u64 = 0;
    let mut arc_start = true;
    let mut first = true;
    for &b in content {
        if arc_start && b == 0x80 {
            // A leading 0x80 octet is a non-minimal arc encoding.
            return Err(DerError::BadOid);
        }
        arc_start = false;
        arc = arc
            .checked_mul(128)
            .and_then(|a| a.checked_add(u64::from(b & 0x7f)))
            .ok_or(DerError::BadOid)?;
        if b & 0x80 == 0 {
            if first {
                // The first subidentifier packs the first two arcs: 40 * X + Y.
                let (x, y) = match arc {
                    0..=39 => (0, arc),
                    40..=79 => (1, arc - 40),
                    _ => (2, arc - 80),
                };
                out.push_str(&format!("{x}.{y}"));
                first = false;
            } else {
                out.push_str(&format!(".{arc}"));
            }
            arc = 0;
            arc_start = true;
        }
    }
    if !arc_start {
        // The last octet had its continuation bit set.
        return Err(DerError::BadOid);
    }
    Ok(out)
}

/// A string value read from one of the ASN.1 character string types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodedString {
    pub text: String,
    /// The universal tag it was encoded with.
    pub tag: u8,
}

/// Reads a character string of any of the types found in certificates. `None` when the tag
/// is not a string type or the content is not valid for it.
///
/// TeletexString is read as ISO 8859-1, as OpenSSL and most software do in practice;
/// BMPString as UTF-16BE; UniversalString as UTF-32BE.
pub(crate) fn decode_string(tlv: &Tlv<'_>) -> Option<DecodedString> {
    let text = match tlv.tag {
        tag::UTF8_STRING => std::str::from_utf8(tlv.value).ok()?.to_owned(),
        tag::PRINTABLE_STRING | tag::IA5_STRING | tag::NUMERIC_STRING | tag::VISIBLE_STRING => {
            if !tlv.value.is_ascii() {
                return None;
            }
            std::str::from_utf8(tlv.value).ok()?.to_owned()
        }
        tag::TELETEX_STRING => tlv.value.iter().map(|&b| char::from(b)).collect(),
        tag::BMP_STRING => {
            if !tlv.value.len().is_multiple_of(2) {
                return None;
            }
            let units = tlv
                .value
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]));
            char::decode_utf16(units)
                .collect::<Result<String, _>>()
                .ok()?
        }
        tag::UNIVERSAL_STRING => {
            if !tlv.value.len().is_multiple_of(4) {
                return None;
            }
            tlv.value
                .chunks_exact(4)
                .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
                .collect::<Option<String>>()?
        }
        _ => return None,
    };
    Some(DecodedString { text, tag: tlv.tag })
}

/// The name of a universal tag for messages (`UTF8String`, `tag 0x31`).
pub(crate) fn tag_name(t: u8) -> String {
    match t {
        tag::BOOLEAN => "BOOLEAN".into(),
        tag::INTEGER => "INTEGER".into(),
        tag::BIT_STRING => "BIT STRING".into(),
        tag::OCTET_STRING => "OCTET STRING".into(),
        tag::NULL => "NULL".into(),
        tag::OID => "OBJECT IDENTIFIER".into(),
        tag::UTF8_STRING => "UTF8String".into(),
        tag::NUMERIC_STRING => "NumericString".into(),
        tag::PRINTABLE_STRING => "PrintableString".into(),
        tag::TELETEX_STRING => "TeletexString".into(),
        tag::IA5_STRING => "IA5String".into(),
        tag::VISIBLE_STRING => "VisibleString".into(),
        tag::UNIVERSAL_STRING => "UniversalString".into(),
        tag::BMP_STRING => "BMPString".into(),
        tag::SEQUENCE => "SEQUENCE".into(),
        other => format!("tag 0x{other:02x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_form_lengths_are_read() {
        let (tlv, used) = read_tlv(&[0x04, 0x02, 0xaa, 0xbb, 0xff]).unwrap();
        assert_eq!((tlv.tag, tlv.value, used), (0x04, &[0xaa, 0xbb][..], 4));

        let mut long = vec![0x04, 0x81, 0x80];
        long.extend(std::iter::repeat_n(0x11, 0x80));
        let (tlv, used) = read_tlv(&long).unwrap();
        assert_eq!((tlv.value.len(), used), (0x80, 0x83));
    }

    #[test]
    fn non_der_lengths_and_truncation_are_errors() {
        assert_eq!(read_tlv(&[]), Err(DerError::Truncated));
        assert_eq!(read_tlv(&[0x30]), Err(DerError::Truncated));
        assert_eq!(read_tlv(&[0x30, 0x03, 0x01]), Err(DerError::Truncated));
        assert_eq!(
            read_tlv(&[0x30, 0x80, 0, 0]),
            Err(DerError::IndefiniteLength)
        );
        assert_eq!(
            read_tlv(&[0x04, 0x81, 0x05]),
            Err(DerError::NonMinimalLength)
        );
        assert_eq!(
            read_tlv(&[0x04, 0x82, 0x00, 0x80]),
            Err(DerError::NonMinimalLength)
        );
        assert_eq!(
            read_tlv(&[0x04, 0x85, 1, 1, 1, 1, 1]),
            Err(DerError::LengthTooLong)
        );
        assert_eq!(
            read_tlv(&[0x04, 0x84, 0xff, 0xff, 0xff, 0xff]),
            Err(DerError::Truncated)
        );
        assert_eq!(read_tlv(&[0x1f, 0x01, 0x00]), Err(DerError::HighTagNumber));
    }

    #[test]
    fn object_identifiers_decode_to_dotted_form() {
        // 0.4.0.19495.2 (the PSD2 statement) and 1.3.6.1.5.5.7.1.3 (qcStatements)
        assert_eq!(
            oid_to_string(&[0x04, 0x00, 0x81, 0x98, 0x27, 0x02]).unwrap(),
            "0.4.0.19495.2"
        );
        assert_eq!(
            oid_to_string(&[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x03]).unwrap(),
            "1.3.6.1.5.5.7.1.3"
        );
        // 2.5.4.97
        assert_eq!(oid_to_string(&[0x55, 0x04, 0x61]).unwrap(), "2.5.4.97");
    }

    #[test]
    fn malformed_object_identifiers_are_errors() {
        assert_eq!(oid_to_string(&[]), Err(DerError::BadOid));
        assert_eq!(oid_to_string(&[0x2b, 0x81]), Err(DerError::BadOid));
        assert_eq!(oid_to_string(&[0x2b, 0x80, 0x01]), Err(DerError::BadOid));
        assert_eq!(
            oid_to_string(&[
                0x2b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f
            ]),
            Err(DerError::BadOid)
        );
        assert_eq!(oid_to_string(&[0x2b; 65]), Err(DerError::BadOid));
    }

    #[test]
    fn string_types_decode_and_bad_content_is_refused() {
        let s = |tag: u8, value: &'static [u8]| decode_string(&Tlv { tag, value });
        assert_eq!(s(tag::UTF8_STRING, b"PSP_AS").unwrap().text, "PSP_AS");
        assert_eq!(s(tag::PRINTABLE_STRING, b"GB-FCA").unwrap().text, "GB-FCA");
        assert_eq!(s(tag::BMP_STRING, &[0, b'O', 0, b'K']).unwrap().text, "OK");
        assert_eq!(s(tag::TELETEX_STRING, &[0xe9]).unwrap().text, "é");
        assert_eq!(
            s(tag::UNIVERSAL_STRING, &[0, 0, 0, b'A']).unwrap().text,
            "A"
        );
        assert!(s(tag::UTF8_STRING, &[0xff]).is_none());
        assert!(s(tag::PRINTABLE_STRING, &[0xc3, 0xa9]).is_none());
        assert!(s(tag::BMP_STRING, &[0]).is_none());
        assert!(s(tag::INTEGER, &[1]).is_none());
    }
}
