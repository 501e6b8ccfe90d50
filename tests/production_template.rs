//! `deploy/gateway.production.toml` is a valid configuration, and the LOTL signers it pins
//! (the OJ C/2026/1944 fingerprints, gathered from public sources) verify the Commission's
//! own signed lists of the lists in `../shared/data/`.

mod common;

use common::{data, root};
use psp_gateway::Config;
use psp_gateway::trust::lotl;

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
    let e = lotl::verify_lotl(&bytes, &pins, &[]).unwrap_err();
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
