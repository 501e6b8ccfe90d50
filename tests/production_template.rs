//! `deploy/gateway.production.toml` is a valid configuration, and the LOTL signers it pins
//! (the OJ C/2026/1944 fingerprints, gathered from public sources) verify the Commission's
//! own signed lists of the lists in `../shared/data/`.

mod common;

use common::{data, root};
use psp_gateway::Config;
use psp_service::trust::lotl;

fn template() -> Config {
    let path = root().join("deploy/gateway.production.toml");
    Config::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn pins() -> Vec<lotl::Fingerprint> {
    let sources = template().trust_sources();
    let spec = sources[0]
        .lotl
        .clone()
        .expect("the template follows the LOTL");
    assert_eq!(spec.location, "https://ec.europa.eu/tools/lotl/eu-lotl.xml");
    spec.pinned("eu-lotl").expect("pins")
}

#[test]
fn the_template_is_a_valid_configuration_with_six_pinned_lotl_signers() {
    let c = template();
    assert!(
        c.danger.enabled().is_empty(),
        "no [danger] relaxation in production"
    );
    assert_eq!(pins().len(), 6);
}

#[test]
fn the_pinned_signers_verify_the_real_2019_and_2024_lists_of_the_lists() {
    let pins = pins();
    for (file, seq) in [
        ("trusted-lists/eu-lotl_seq248_2019-09-04.xml", 248),
        ("trusted-lists/eu-lotl_seq341_2024-05-31.xml", 341),
    ] {
        let bytes = std::fs::read(data(file)).expect("read");
        let v = lotl::verify_lotl(&bytes, &pins, &[])
            .unwrap_or_else(|e| panic!("{file}: the template's pins do not verify it: {e}"));
        assert_eq!(v.lotl.list.sequence_number, Some(seq));
        assert!(v.pivots_followed.is_empty());
    }
}

#[test]
fn one_wrong_digit_in_a_pinned_fingerprint_pins_nothing_that_verifies_the_lotl() {
    let path = root().join("deploy/gateway.production.toml");
    let text = std::fs::read_to_string(&path).expect("read");
    // #2 signed the 2024 LOTL: change its last digit, and drop #6 which signed both.
    let edited = text
        .replace(
            "E0A620FBB6747362BB933AC44169D676A553444716CF5F31605F12A22B8396B1",
            "E0A620FBB6747362BB933AC44169D676A553444716CF5F31605F12A22B8396B0",
        )
        .replace(
            "\"D2064FDD70F6982DCC516B86D9D5C56AEA939417C624B2E478C0B29DE54F8474\",",
            "",
        );
    let c = Config::from_toml(&edited, &path, root()).expect("still a valid file");
    let pins = c.trust_sources()[0]
        .lotl
        .clone()
        .expect("lotl")
        .pinned("eu-lotl")
        .expect("pins");
    let bytes = std::fs::read(data("trusted-lists/eu-lotl_seq341_2024-05-31.xml")).expect("read");
    let e = lotl::verify_lotl(&bytes, &pins, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("which is not pinned"), "{e}");
    // A fingerprint that is not 64 hex digits is a configuration error, not a silent miss.
    let short = text.replace(
        "E0A620FBB6747362BB933AC44169D676A553444716CF5F31605F12A22B8396B1",
        "E0A620FB",
    );
    let e = Config::from_toml(&short, &path, root())
        .unwrap_err()
        .to_string();
    assert!(e.contains("is not a SHA-256 fingerprint"), "{e}");
}

fn psp_gateway(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(args)
        .output()
        .expect("runs")
}

/// The template with its paths moved into `dir`, where placeholder files stand in for the
/// operator's: an EBA register (the shape example, zipped as EBA publishes it), the FCA key.
fn template_in(dir: &std::path::Path) -> String {
    use std::io::Write;
    let text =
        std::fs::read_to_string(root().join("deploy/gateway.production.toml")).expect("template");
    let json = std::fs::read(data("registers/eba/eba_psd2_register_shape_example.json"))
        .expect("shape example");
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default();
    zip.start_file("PSDMD.json", options).expect("member");
    zip.write_all(&json).expect("write");
    zip.start_file("PSDMD.json.sha256", options)
        .expect("member");
    zip.write_all(psp_cert::hex::lower(&psp_cert::hex::sha256(&json)).as_bytes())
        .expect("write");
    let zip = zip.finish().expect("zip").into_inner();
    std::fs::create_dir_all(dir.join("registers")).expect("dir");
    std::fs::write(dir.join("registers/eba-psd2.zip"), zip).expect("write");
    std::fs::write(dir.join("fca-api-key"), "placeholder-key\n").expect("write");
    // The gateway's server certificate and key, and the bank's internal CA.
    let cert = rcgen::generate_simple_self_signed(vec!["gateway.bank.example".to_owned()])
        .expect("certificate");
    std::fs::create_dir_all(dir.join("tls")).expect("dir");
    std::fs::write(dir.join("tls/cert.pem"), cert.cert.pem()).expect("write");
    std::fs::write(dir.join("tls/key.pem"), cert.signing_key.serialize_pem()).expect("write");
    std::fs::write(dir.join("tls/internal-ca.pem"), cert.cert.pem()).expect("write");
    let d = dir.display().to_string();
    text.replace("/var/lib/psp-gateway", &d)
        .replace("/run/secrets", &d)
        .replace("/etc/psp-gateway", &d)
}

#[test]
fn config_check_accepts_the_template_with_its_files_and_names_a_misspelt_key_with_78() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("production_template");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("gateway.toml");
    std::fs::write(&path, template_in(&dir)).expect("write");
    let ok = psp_gateway(&["config", "check", "--config", path.to_str().expect("path")]);
    let out = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    // Nothing fetched yet: the LOTL is named as not used, and the FCA credentials are there.
    assert!(out.contains("no LOTL fetched yet"), "{out}");
    assert!(
        out.contains("UK FCA register API: credentials present"),
        "{out}"
    );

    assert!(
        out.contains("site default: jurisdiction") && out.contains("its files load"),
        "{out}"
    );

    // A server key that does not belong to the certificate: refused before serving.
    let other = rcgen::KeyPair::generate().expect("key");
    let good_key = std::fs::read(dir.join("tls/key.pem")).expect("key");
    std::fs::write(dir.join("tls/key.pem"), other.serialize_pem()).expect("write");
    let mismatch = psp_gateway(&["config", "check", "--config", path.to_str().expect("path")]);
    assert_eq!(mismatch.status.code(), Some(78));
    let err = String::from_utf8_lossy(&mismatch.stderr);
    assert!(err.contains("key.pem"), "{err}");
    std::fs::write(dir.join("tls/key.pem"), good_key).expect("restore");

    let misspelt = template_in(&dir).replace("refresh_interval_secs", "refresh_intervall_secs");
    std::fs::write(&path, misspelt).expect("write");
    let bad = psp_gateway(&["config", "check", "--config", path.to_str().expect("path")]);
    assert_eq!(bad.status.code(), Some(78));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("refresh_intervall_secs"), "{err}");
}
