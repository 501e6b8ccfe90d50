//! A tiny DER writer (ITU-T X.690 section 10), just enough for the two extensions rcgen has no
//! field for: QCStatements and authorityInfoAccess.
//!
//! Only definite lengths in their shortest form are written, as DER requires (X.690 10.1).
//! Every function returns the complete encoding (tag, length, contents) of one value, so values
//! compose by concatenation.

/// Universal tag numbers used here (X.680 section 8.4, table 1), with the constructed bit
/// already set on SEQUENCE.
const TAG_OBJECT_IDENTIFIER: u8 = 0x06;
const TAG_UTF8_STRING: u8 = 0x0c;
const TAG_SEQUENCE: u8 = 0x30;

/// Context-specific class, primitive form (X.690 8.1.2.2, table 1): `10x0 0000`.
const CLASS_CONTEXT_PRIMITIVE: u8 = 0x80;

/// One TLV: `tag`, then the length in the definite form, then `contents`.
///
/// X.690 8.1.3: lengths up to 127 take the short form (one octet); longer lengths take the
/// long form: `0x80 | n` followed by the length in `n` big-endian octets, without leading zero
/// octets (10.1: "the definite form of length encoding shall be used, encoded in the minimum
/// number of octets").
pub(crate) fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(contents.len() + 6);
    out.push(tag);
    push_length(&mut out, contents.len());
    out.extend_from_slice(contents);
    out
}

fn push_length(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        // Short form; the cast cannot truncate because len < 128.
        out.push(len as u8);
        return;
    }
    let bytes = len.to_be_bytes();
    let first = bytes
        .iter()
        .position(|&b| b != 0)
        .unwrap_or(bytes.len() - 1);
    let significant = &bytes[first..];
    // At most size_of::<usize>() octets, far below the 126 the long form allows.
    out.push(0x80 | significant.len() as u8);
    out.extend_from_slice(significant);
}

/// `SEQUENCE { items... }`: each item is already a complete encoding.
pub(crate) fn sequence(items: &[Vec<u8>]) -> Vec<u8> {
    tlv(TAG_SEQUENCE, &items.concat())
}

/// `UTF8String`.
pub(crate) fn utf8_string(value: &str) -> Vec<u8> {
    tlv(TAG_UTF8_STRING, value.as_bytes())
}

/// `[n] IMPLICIT IA5String` (as in `GeneralName.uniformResourceIdentifier [6]`). The caller
/// passes ASCII; the URLs written here are constants of this module's callers.
pub(crate) fn context_ia5_string(tag_number: u8, value: &str) -> Vec<u8> {
    debug_assert!(tag_number < 31, "low tag numbers only (X.690 8.1.2.2)");
    debug_assert!(value.is_ascii(), "IA5String holds ASCII only");
    tlv(CLASS_CONTEXT_PRIMITIVE | tag_number, value.as_bytes())
}

/// `OBJECT IDENTIFIER` from its arcs (X.690 8.19): the first two arcs are packed into one
/// subidentifier `40 * a + b`; each subidentifier is written base 128, most significant group
/// first, with bit 8 set on every octet but the last.
///
/// The arcs are constants of this crate, so a malformed OID is a programming error.
pub(crate) fn oid(arcs: &[u64]) -> Vec<u8> {
    assert!(
        arcs.len() >= 2 && arcs[0] <= 2 && (arcs[0] == 2 || arcs[1] < 40),
        "an OID has at least two arcs, the first 0, 1 or 2 (X.660)"
    );
    let mut contents = Vec::new();
    push_base128(&mut contents, arcs[0] * 40 + arcs[1]);
    for &arc in &arcs[2..] {
        push_base128(&mut contents, arc);
    }
    tlv(TAG_OBJECT_IDENTIFIER, &contents)
}

fn push_base128(out: &mut Vec<u8>, mut value: u64) {
    let mut groups = [0u8; 10];
    let mut n = 0;
    loop {
        groups[n] = (value & 0x7f) as u8;
        n += 1;
        value >>= 7;
        if value == 0 {
            break;
        }
    }
    for i in (0..n).rev() {
        let more = if i == 0 { 0 } else { 0x80 };
        out.push(groups[i] | more);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lengths_take_one_octet() {
        assert_eq!(tlv(0x04, &[]), vec![0x04, 0x00]);
        let v = tlv(0x04, &[0xaa; 127]);
        assert_eq!(&v[..2], &[0x04, 0x7f]);
        assert_eq!(v.len(), 129);
    }

    #[test]
    fn lengths_above_127_take_the_long_form_in_minimal_octets() {
        assert_eq!(&tlv(0x04, &[0; 128])[..3], &[0x04, 0x81, 0x80]);
        assert_eq!(&tlv(0x04, &[0; 255])[..3], &[0x04, 0x81, 0xff]);
        assert_eq!(&tlv(0x04, &[0; 256])[..4], &[0x04, 0x82, 0x01, 0x00]);
        assert_eq!(
            &tlv(0x04, &[0; 65_536])[..5],
            &[0x04, 0x83, 0x01, 0x00, 0x00]
        );
    }

    #[test]
    fn object_identifiers_encode_as_in_x690() {
        // id-etsi-qcs-QcCompliance 0.4.0.1862.1.1: 1862 = 14 * 128 + 70.
        assert_eq!(
            oid(&[0, 4, 0, 1862, 1, 1]),
            vec![0x06, 0x06, 0x04, 0x00, 0x8e, 0x46, 0x01, 0x01]
        );
        // organizationIdentifier 2.5.4.97.
        assert_eq!(oid(&[2, 5, 4, 97]), vec![0x06, 0x03, 0x55, 0x04, 0x61]);
        // id-pe-authorityInfoAccess 1.3.6.1.5.5.7.1.1.
        assert_eq!(
            oid(&[1, 3, 6, 1, 5, 5, 7, 1, 1]),
            vec![0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x01]
        );
        // id-etsi-psd2-qcStatement 0.4.0.19495.2: 19495 = 1 * 16384 + 24 * 128 + 39.
        assert_eq!(
            oid(&[0, 4, 0, 19495, 2]),
            vec![0x06, 0x06, 0x04, 0x00, 0x81, 0x98, 0x27, 0x02]
        );
    }

    #[test]
    fn strings_and_sequences_nest() {
        assert_eq!(utf8_string("AB"), vec![0x0c, 0x02, b'A', b'B']);
        assert_eq!(context_ia5_string(6, "h"), vec![0x86, 0x01, b'h']);
        assert_eq!(
            sequence(&[utf8_string("A"), utf8_string("B")]),
            vec![0x30, 0x06, 0x0c, 0x01, b'A', 0x0c, 0x01, b'B']
        );
        let long = sequence(&[utf8_string(&"x".repeat(300))]);
        assert_eq!(
            &long[..8],
            &[0x30, 0x82, 0x01, 0x30, 0x0c, 0x82, 0x01, 0x2c]
        );
    }
}
