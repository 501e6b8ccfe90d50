//! An answer of the UK FCA register API: the envelope, its status for each endpoint, and the
//! firm, permission and passport records.
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_service::register::decode_answer_for_fuzzing;

fuzz_target!(|data: &[u8]| {
    let _ = decode_answer_for_fuzzing(data);
});
