//! The XML-DSig / XAdES structure of a signed trusted list parsed (the step before any
//! digest or signature is computed).
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_service::trust::xmlsig::parse_document;

fuzz_target!(|data: &[u8]| {
    let _ = parse_document(data);
});
