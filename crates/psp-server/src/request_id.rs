//! Request ids: the `id` of an error body and the `x-request-id` header of every response the
//! check endpoint gives, and the check id of every call through the gateway.

use crate::telemetry::trace_context::{IdSource, SystemIds};

/// A random UUID (version 4, RFC 9562 section 5.4) for the error `id` and `x-request-id`,
/// from the thread's generator of ids ([`SystemIds`]).
pub fn new_request_id() -> String {
    let mut b = [0u8; 16];
    SystemIds.fill(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut id = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            id.push('-');
        }
        id.push(char::from(HEX[usize::from(byte >> 4)]));
        id.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    id
}

#[cfg(test)]
mod tests {
    use super::new_request_id;

    #[test]
    fn request_ids_are_version_4_uuids_in_lower_case_and_do_not_repeat() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..5_000 {
            let id = new_request_id();
            let b = id.as_bytes();
            assert_eq!(b.len(), 36, "{id}");
            for (i, c) in b.iter().enumerate() {
                if matches!(i, 8 | 13 | 18 | 23) {
                    assert_eq!(*c, b'-', "{id}");
                } else {
                    assert!(matches!(c, b'0'..=b'9' | b'a'..=b'f'), "{id}");
                }
            }
            assert_eq!(b[14], b'4', "version 4: {id}");
            assert!(
                matches!(b[19], b'8' | b'9' | b'a' | b'b'),
                "RFC 9562 variant: {id}"
            );
            assert!(seen.insert(id));
        }
    }
}
