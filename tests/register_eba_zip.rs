//! The EBA register as EBA publishes it: a ZIP of one JSON document and its `.sha256`. The
//! JSON member is streamed and its digest must match; anything else about the ZIP that is
//! wrong is refused with the file's name and what is wrong, and the current snapshot stays.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use psp_service::register::{RegisterConfig, RegisterFileConfig, RegisterFormat, RegisterSnapshot};

fn shape_example() -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/data/registers/eba/eba_psd2_register_shape_example.json"),
    )
    .expect("shape example")
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("register_eba_zip")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// A ZIP of `members` (name, bytes), deflated.
fn zip_of(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut w = zip::ZipWriter::new(&mut out);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in members {
        w.start_file(*name, options).expect("member");
        w.write_all(bytes).expect("write");
    }
    w.finish().expect("finish");
    out.into_inner()
}

fn sha256_hex(bytes: &[u8]) -> String {
    psp_cert::hex::lower(&psp_cert::hex::sha256(bytes))
}

/// The published layout: the JSON and `<name>.sha256` holding "<hex>  <name>".
fn published(json: &[u8]) -> Vec<u8> {
    let name = "PSDMD_20260816.json";
    let sidecar = format!("{}  {name}\n", sha256_hex(json));
    zip_of(&[
        (name, json),
        ("PSDMD_20260816.json.sha256", sidecar.as_bytes()),
    ])
}

fn config(path: &Path) -> RegisterConfig {
    RegisterConfig {
        files: vec![RegisterFileConfig {
            path: path.to_owned(),
            format: RegisterFormat::Eba,
            nca_map: BTreeMap::new(),
            normalise: None,
            ..RegisterFileConfig::default()
        }],
        ..RegisterConfig::default()
    }
}

fn load(path: &Path) -> Result<RegisterSnapshot, String> {
    psp_service::register::load(&config(path), Path::new("/"))
        .map(|(s, _)| s)
        .map_err(|e| e.to_string())
}

fn entity_count(s: &RegisterSnapshot) -> usize {
    s.registers().iter().map(|r| r.entities().len()).sum()
}

#[test]
fn the_published_zip_loads_exactly_as_its_json_does() {
    let dir = scratch("same");
    let json = dir.join("eba.json");
    std::fs::write(&json, shape_example()).expect("write");
    let zip = dir.join("eba.zip");
    std::fs::write(&zip, published(&shape_example())).expect("write");
    let from_json = load(&json).expect("JSON loads");
    let from_zip = load(&zip).expect("ZIP loads");
    assert!(entity_count(&from_zip) > 0);
    assert_eq!(entity_count(&from_zip), entity_count(&from_json));
    let names = |s: &RegisterSnapshot| {
        s.registers()
            .iter()
            .map(|r| r.nca_id().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&from_zip), names(&from_json));
}

#[test]
fn a_zip_whose_json_does_not_match_its_sha256_is_refused_and_the_current_snapshot_stays() {
    let dir = scratch("hash");
    let path = dir.join("eba.zip");
    std::fs::write(&path, published(&shape_example())).expect("write");
    let (current, _) = psp_service::register::load(&config(&path), Path::new("/")).expect("loads");
    let before = entity_count(&current);
    // One byte of the JSON changed after the digest was taken (white space, so the document
    // still parses: only the digest can tell).
    let mut altered = shape_example();
    let at = altered.iter().position(|b| *b == b'\n').expect("a newline");
    altered[at] = b' ';
    let name = "PSDMD_20260816.json";
    let sidecar = format!("{}  {name}\n", sha256_hex(&shape_example()));
    std::fs::write(
        &path,
        zip_of(&[
            (name, &altered),
            ("PSDMD_20260816.json.sha256", sidecar.as_bytes()),
        ]),
    )
    .expect("write");
    let e = psp_service::register::load(&config(&path), Path::new("/"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("eba.zip"), "{e}");
    assert!(e.contains("the download is corrupt or was altered"), "{e}");
    assert_eq!(entity_count(&current), before, "the current snapshot stays");
}

#[test]
fn a_truncated_zip_is_refused_naming_the_file() {
    let dir = scratch("truncated");
    let path = dir.join("eba.zip");
    let full = published(&shape_example());
    for cut in [full.len() / 2, full.len() - 10, 30] {
        std::fs::write(&path, &full[..cut]).expect("write");
        let e = load(&path).unwrap_err();
        assert!(e.contains("eba.zip"), "cut at {cut}: {e}");
        assert!(
            e.contains("not a readable ZIP archive") || e.contains("EOF") || e.contains("corrupt"),
            "cut at {cut}: {e}"
        );
    }
}

#[test]
fn a_zip_without_its_digest_or_with_two_documents_is_refused() {
    let dir = scratch("members");
    let path = dir.join("eba.zip");
    let json = shape_example();
    std::fs::write(&path, zip_of(&[("PSDMD.json", &json)])).expect("write");
    let e = load(&path).unwrap_err();
    assert!(e.contains("expected exactly one .sha256 member"), "{e}");

    let sidecar = format!("{}  a.json\n", sha256_hex(&json));
    std::fs::write(
        &path,
        zip_of(&[
            ("a.json", &json),
            ("b.json", &json),
            ("a.json.sha256", sidecar.as_bytes()),
        ]),
    )
    .expect("write");
    let e = load(&path).unwrap_err();
    assert!(
        e.contains("expected exactly one .json member, found 2"),
        "{e}"
    );

    std::fs::write(
        &path,
        zip_of(&[("a.json", &json), ("a.json.sha256", b"not a digest")]),
    )
    .expect("write");
    let e = load(&path).unwrap_err();
    assert!(
        e.contains("does not start with a SHA-256 hex digest"),
        "{e}"
    );
}

#[test]
fn a_zip_of_the_wrong_document_is_refused_for_its_shape() {
    let dir = scratch("shape");
    let path = dir.join("eba.zip");
    std::fs::write(&path, published(br#"[[{"__EBA_Disclaimer": {}}], []]"#)).expect("write");
    let e = load(&path).unwrap_err();
    assert!(e.contains("no EBA entity records"), "{e}");
    std::fs::write(&path, published(b"[[{\"EntityType\": ")).expect("write");
    let e = load(&path).unwrap_err();
    assert!(e.contains("eba.zip"), "{e}");
}
