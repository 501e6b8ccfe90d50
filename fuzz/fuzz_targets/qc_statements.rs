//! The QCStatements extension's value (ETSI EN 319 412-5, TS 119 495 PSD2 statement).
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_cert::cert::qc::decode_qc_statements;

fuzz_target!(|data: &[u8]| {
    let _ = decode_qc_statements(data, false);
    let _ = decode_qc_statements(data, true);
});
