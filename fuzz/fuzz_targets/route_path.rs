//! The gateway's path normaliser: whatever it accepts is in normal form (normalising again
//! changes nothing), starts at the root and has no dot segment, however a receiver decodes it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_faces::gateway::path::normalise;

fuzz_target!(|data: &[u8]| {
    let Ok(path) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(normalised) = normalise(path) {
        let n = normalised.as_str();
        assert!(n.starts_with('/'), "{n:?}");
        let again = normalise(n).expect("a normalised path is accepted");
        assert_eq!(again.as_str(), n, "normalising twice changed {path:?}");
        for segment in n.split('/') {
            assert!(segment != "." && segment != "..", "dot segment in {n:?}");
        }
    }
});
