//! The configuration file: TOML, then every validation `Config` does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_gateway::Config;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Config::from_toml(
            text,
            std::path::Path::new("gateway.toml"),
            std::path::PathBuf::from("/nonexistent"),
        );
    }
});
