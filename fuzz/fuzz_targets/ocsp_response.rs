//! An OCSP response (RFC 6960) decoded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_service::revocation::ocsp::parse_response;

fuzz_target!(|data: &[u8]| {
    let _ = parse_response(data);
});
