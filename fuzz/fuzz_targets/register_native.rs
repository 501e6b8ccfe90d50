//! A native register file (the gateway's own JSON format) read and built into a register.
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_service::register::read_native_file;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("fuzz-native-{}.json", std::process::id()));
    if std::fs::write(&path, data).is_ok() {
        let _ = read_native_file(&path);
    }
});
