//! The real trusted lists, and the ways an attacker would try to make an edited one pass.

use super::*;

fn data(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/trusted-lists")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_real_cz_list_verifies() {
    let v = verify_bytes(&data("CZ-tl_seq77_2019-08-23.xml")).expect("CZ verifies");
    eprintln!("CZ signer: {:?}", v.signer.subject_cn);
}

#[test]
fn the_real_ie_list_and_both_lists_of_the_lists_verify() {
    for (file, method_digest) in [
        ("IE-tl_seq17_2019-07-29.xml", DigestAlgorithm::Sha256),
        ("eu-lotl_seq248_2019-09-04.xml", DigestAlgorithm::Sha256),
        ("eu-lotl_seq341_2024-05-31.xml", DigestAlgorithm::Sha256),
    ] {
        let v = verify_bytes(&data(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        eprintln!(
            "{file} signer: {:?} at {:?}",
            v.signer.subject_cn, v.signing_time
        );
        assert_eq!(v.document_digest, method_digest, "{file}");
    }
}
