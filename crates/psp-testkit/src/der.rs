//! DER as the tests write it: a TLV writer and reader, and what an attacker can make from
//! public material: a trusted CA's certificate and a victim PSP's certificate, re-issued
//! under keys the attacker holds. The to-be-signed bytes are copied field for field (names
//! byte for byte, QC statements, roles, key identifiers), only the public key, the signature
//! algorithm and chosen extensions change, and the result is signed with the attacker's key.

use rcgen::{KeyPair, PublicKeyData, SigningKey};

/// `AlgorithmIdentifier { ecdsa-with-SHA256 }` (RFC 5758 section 3.2): the attacker's keys
/// are P-256.
const ECDSA_SHA256: &[u8] = &[
    0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02,
];
/// subjectKeyIdentifier (the content of its OID's DER).
pub const SKI: &[u8] = &[0x55, 0x1d, 0x0e];
/// authorityKeyIdentifier (the content of its OID's DER).
pub const AKI: &[u8] = &[0x55, 0x1d, 0x23];

/// One DER element: tag, content, and the whole encoding.
struct Tlv<'a> {
    tag: u8,
    content: &'a [u8],
    whole: &'a [u8],
}

/// The first element of `der` and what follows it (definite lengths of up to three bytes).
fn read(der: &[u8]) -> (Tlv<'_>, &[u8]) {
    let tag = der[0];
    let (len, header) = match der[1] {
        n if n < 0x80 => (n as usize, 2),
        0x81 => (der[2] as usize, 3),
        0x82 => (((der[2] as usize) << 8) | der[3] as usize, 4),
        0x83 => (
            ((der[2] as usize) << 16) | ((der[3] as usize) << 8) | der[4] as usize,
            5,
        ),
        other => panic!("length form {other:#x} not used by these certificates"),
    };
    let end = header + len;
    (
        Tlv {
            tag,
            content: &der[header..end],
            whole: &der[..end],
        },
        &der[end..],
    )
}

/// The elements one after the other in `content`.
fn children(mut content: &[u8]) -> Vec<Tlv<'_>> {
    let mut out = Vec::new();
    while !content.is_empty() {
        let (tlv, rest) = read(content);
        out.push(tlv);
        content = rest;
    }
    out
}

/// One DER element: `tag`, the length (short form below 128, else the long form in as few
/// octets as it takes), then `content`.
pub fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let octets: Vec<u8> = n
            .to_be_bytes()
            .into_iter()
            .skip_while(|&b| b == 0)
            .collect();
        out.push(0x80 | octets.len() as u8);
        out.extend(octets);
    }
    out.extend_from_slice(content);
    out
}

/// `SEQUENCE { parts... }`: the parts (whole DER elements) concatenated under tag 0x30.
pub fn seq(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

/// A `UTF8String` (tag 0x0c) holding `text`.
pub fn utf8(text: &str) -> Vec<u8> {
    tlv(0x0c, text.as_bytes())
}

/// An `OBJECT IDENTIFIER` (tag 0x06) from its dotted form ("2.5.29.32"): the first two arcs
/// in one subidentifier, each in base 128 with the high bit on all octets but the last.
pub fn oid(dotted: &str) -> Vec<u8> {
    let arcs: Vec<u64> = dotted
        .split('.')
        .map(|a| a.parse().expect("a decimal arc"))
        .collect();
    assert!(arcs.len() >= 2, "an OID has at least two arcs: {dotted}");
    let mut content = Vec::new();
    for arc in std::iter::once(arcs[0] * 40 + arcs[1]).chain(arcs[2..].iter().copied()) {
        let mut octets = vec![(arc & 0x7f) as u8];
        let mut rest = arc >> 7;
        while rest > 0 {
            octets.push(0x80 | (rest & 0x7f) as u8);
            rest >>= 7;
        }
        octets.reverse();
        content.extend(octets);
    }
    tlv(0x06, &content)
}

/// The same as [`tlv`], by the name the forging tests use.
pub fn encode(tag: u8, content: &[u8]) -> Vec<u8> {
    tlv(tag, content)
}

/// The extnValue of a subjectKeyIdentifier: `OCTET STRING keyIdentifier`.
pub fn ski_value(id: &[u8]) -> Vec<u8> {
    encode(0x04, id)
}

/// The extnValue of an authorityKeyIdentifier with only `[0] keyIdentifier`.
pub fn aki_value(id: &[u8]) -> Vec<u8> {
    encode(0x30, &encode(0x80, id))
}

/// Re-issues `template` (a DER certificate) with `subject_key`'s public key, the extensions
/// named in `replace` (extnID content → new extnValue content) swapped, signed by `signer`.
pub fn reissue(
    template: &[u8],
    subject_key: &KeyPair,
    replace: &[(&[u8], Vec<u8>)],
    signer: &KeyPair,
) -> Vec<u8> {
    let (cert, _) = read(template);
    let parts = children(cert.content);
    let tbs = &parts[0];
    let mut fields: Vec<Vec<u8>> = Vec::new();
    let tbs_fields = children(tbs.content);
    // version? serial signature issuer validity subject spki [extensions]
    let offset = usize::from(tbs_fields[0].tag == 0xa0);
    for (i, f) in tbs_fields.iter().enumerate() {
        let k = i.wrapping_sub(offset);
        if i >= offset && k == 1 {
            fields.push(ECDSA_SHA256.to_vec());
        } else if i >= offset && k == 5 {
            fields.push(subject_key.subject_public_key_info());
        } else if f.tag == 0xa3 {
            fields.push(encode(0xa3, &replace_extensions(f.content, replace)));
        } else {
            fields.push(f.whole.to_vec());
        }
    }
    let tbs = encode(0x30, &fields.concat());
    let signature = signer.sign(&tbs).expect("sign");
    let mut bits = vec![0u8];
    bits.extend(signature);
    encode(
        0x30,
        &[tbs, ECDSA_SHA256.to_vec(), encode(0x03, &bits)].concat(),
    )
}

/// The extensions of `explicit` (the `[3]` content) with those named in `replace` swapped.
fn replace_extensions(explicit: &[u8], replace: &[(&[u8], Vec<u8>)]) -> Vec<u8> {
    let (seq, _) = read(explicit);
    let mut out = Vec::new();
    for ext in children(seq.content) {
        let parts = children(ext.content);
        let oid = parts[0].content;
        match replace.iter().find(|(o, _)| *o == oid) {
            Some((_, value)) => {
                let mut content = Vec::new();
                for p in &parts[..parts.len() - 1] {
                    content.extend_from_slice(p.whole);
                }
                content.extend(encode(0x04, value));
                out.extend(encode(0x30, &content));
            }
            None => out.extend_from_slice(ext.whole),
        }
    }
    encode(0x30, &out)
}

/// A fresh P-256 key for the attacker.
pub fn attacker_key() -> KeyPair {
    KeyPair::generate().expect("P-256 key")
}

/// PEM armour for DER certificates, concatenated.
pub fn pem_chain(ders: &[&[u8]]) -> String {
    use base64::Engine;
    let mut out = String::new();
    for der in ders {
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        for line in b64.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_take_the_short_form_below_128_and_the_fewest_long_form_octets_above() {
        assert_eq!(tlv(0x04, &[7; 3]), [&[0x04, 3][..], &[7; 3]].concat());
        assert_eq!(tlv(0x04, &[0; 0x7f])[..2], [0x04, 0x7f]);
        assert_eq!(tlv(0x04, &[0; 0x80])[..3], [0x04, 0x81, 0x80]);
        assert_eq!(tlv(0x04, &[0; 0x100])[..4], [0x04, 0x82, 0x01, 0x00]);
        assert_eq!(
            tlv(0x04, &[0; 0x1_0000])[..5],
            [0x04, 0x83, 0x01, 0x00, 0x00]
        );
    }

    #[test]
    fn oids_utf8_strings_and_sequences_are_encoded_as_x690_says() {
        // id-ce-certificatePolicies and an arc over 127 (RSA's 113549).
        assert_eq!(oid("2.5.29.32"), [0x06, 0x03, 0x55, 0x1d, 0x20]);
        assert_eq!(
            oid("1.2.840.113549.1.1.11"),
            [
                0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b
            ]
        );
        assert_eq!(utf8("ab"), [0x0c, 0x02, b'a', b'b']);
        assert_eq!(
            seq(&[utf8("a"), utf8("b")]),
            [0x30, 0x06, 0x0c, 0x01, b'a', 0x0c, 0x01, b'b']
        );
    }
}
