//! The EBA register as EBA publishes it, served from a local `Files` server: the ZIP (the
//! JSON and its `.sha256`) under a dated path, and the metadata endpoint naming it
//! (`register_fetch`, `faults_refresh`).

use std::io::Write as _;

use psp_testkit::server::Files;

/// Publishes `zip` as EBA does, announcing `hash` and `size` (a test may announce others).
pub fn publish(files: &Files, zip: &[u8], hash: &str, size: usize) {
    let relative = "20260816/download-PSDMD-202608160000.zip";
    files.put(&format!("/downloads/PSDMD/{relative}"), zip.to_vec());
    let meta = serde_json::json!({
        "latest_version_relative_zip_path": relative,
        "latest_version_relative_zip_size": size.to_string(),
        "sha256_hash": hash,
        "timestamp": "Sun Aug 16 00:00:16 UTC 2026",
        "golden_copy_path_context": files.url("/downloads/PSDMD/"),
    });
    files.put("/register/api/filemetadata", meta.to_string().into_bytes());
}

/// Publishes `zip` announcing its own SHA-256 and size.
pub fn publish_whole(files: &Files, zip: &[u8]) {
    publish(files, zip, &sha256_hex(zip), zip.len());
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    psp_cert::hex::lower(&psp_cert::hex::sha256(bytes))
}

/// The published ZIP: the JSON and its `.sha256`.
pub fn zip_of(json: &[u8]) -> Vec<u8> {
    zip_with(json, &sha256_hex(json))
}

/// The ZIP with `sidecar_hash` in its `.sha256` member.
pub fn zip_with(json: &[u8], sidecar_hash: &str) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut w = zip::ZipWriter::new(&mut out);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    w.start_file("PSDMD_20260816.json", options)
        .expect("member");
    w.write_all(json).expect("write");
    w.start_file("PSDMD_20260816.json.sha256", options)
        .expect("member");
    w.write_all(format!("{sidecar_hash}  PSDMD_20260816.json\n").as_bytes())
        .expect("write");
    w.finish().expect("finish");
    out.into_inner()
}
