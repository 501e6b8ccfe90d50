//! The EBA register export: its JSON (first byte even) or its ZIP (first byte odd), imported
//! into a native file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_service::register::import_eba;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let dir = std::env::temp_dir();
    let id = std::process::id();
    let input = dir.join(if selector % 2 == 0 {
        format!("fuzz-eba-{id}.json")
    } else {
        format!("fuzz-eba-{id}.zip")
    });
    let out = dir.join(format!("fuzz-eba-{id}-out.json"));
    if std::fs::write(&input, body).is_ok() {
        let _ = import_eba(&input, &out, false);
    }
});
