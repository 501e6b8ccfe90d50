//! A trusted list or list of lists (ETSI TS 119 612 XML) parsed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_service::trust::tsl::parse;

fuzz_target!(|data: &[u8]| {
    let _ = parse(data);
});
