//! Hex and digest helpers: the one home for turning bytes into hex text and for SHA-256, so
//! every serial, fingerprint and key identifier is written the same way everywhere.

/// Upper-case hex, no separators: serial numbers and CRL numbers, as OpenSSL prints them.
pub fn upper(bytes: &[u8]) -> String {
    encode(bytes, b"0123456789ABCDEF")
}

/// Lower-case hex, no separators: fingerprints and key identifiers.
pub fn lower(bytes: &[u8]) -> String {
    encode(bytes, b"0123456789abcdef")
}

fn encode(bytes: &[u8], digits: &[u8; 16]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(digits[usize::from(b >> 4)]));
        out.push(char::from(digits[usize::from(b & 0x0f)]));
    }
    out
}

/// SHA-256 of `data` (ring).
pub fn sha256(data: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, data);
    let mut out = [0u8; 32];
    // A SHA-256 digest is always 32 bytes.
    out.copy_from_slice(digest.as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_in_both_cases_and_sha256_of_the_empty_string() {
        assert_eq!(upper(&[0x00, 0xab, 0x1f]), "00AB1F");
        assert_eq!(lower(&[0x00, 0xab, 0x1f]), "00ab1f");
        assert_eq!(upper(&[]), "");
        assert_eq!(
            lower(&sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
