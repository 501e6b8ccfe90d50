//! The real 2019 and 2024 lists of the lists, and the ways trust could be carried further
//! than the pinned keys allow.

use super::*;

fn data(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("../shared/data/trusted-lists")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const LOTL_2019: &str = "eu-lotl_seq248_2019-09-04.xml";
const LOTL_2024: &str = "eu-lotl_seq341_2024-05-31.xml";
const CZ: &str = "CZ-tl_seq77_2019-08-23.xml";
const IE: &str = "IE-tl_seq17_2019-07-29.xml";

fn signer(name: &str) -> Fingerprint {
    signer_of(&data(name)).expect("verifies").fingerprint_sha256
}

fn lotl_2019() -> TrustedList {
    verify_lotl(&data(LOTL_2019), &[signer(LOTL_2019)], &[])
        .expect("the 2019 LOTL verifies with its signer pinned")
        .lotl
        .list
}

#[test]
fn the_2019_lotl_verifies_with_its_own_signer_pinned_and_not_with_another() {
    let v = verify_lotl(&data(LOTL_2019), &[signer(LOTL_2019)], &[]).expect("verifies");
    assert_eq!(v.lotl.list.sequence_number, Some(248));
    assert!(v.pivots_followed.is_empty());
    // The CZ list's signer is a real certificate, but not one pinned for the LOTL.
    let e = verify_lotl(&data(LOTL_2019), &[signer(CZ)], &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("not pinned") && e.contains("none of its 0 pivot LOTLs"),
        "{e}"
    );
}

#[test]
fn the_2019_lotl_authorises_the_real_czech_and_irish_lists_each_for_its_own_territory() {
    let lotl = lotl_2019();
    let cz = verify_national(&lotl, "CZ", &data(CZ)).expect("CZ authorised");
    assert_eq!(cz.list.territory, "CZ");
    assert_eq!(cz.list.sequence_number, Some(77));
    verify_national(&lotl, "IE", &data(IE)).expect("IE authorised");
    // The Czech list presented as Ireland's: its signer is not the one the LOTL names for IE.
    let e = verify_national(&lotl, "IE", &data(CZ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("the LOTL authorises for IE"), "{e}");
    // No pointer at all for a territory the LOTL does not list.
    let e = verify_national(&lotl, "XX", &data(CZ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no pointer to an XML list for XX"), "{e}");
}

#[test]
fn a_lotl_signed_with_a_national_key_does_not_authorise_lists() {
    // The Czech list is signed and is a real list, but it is not a list of the lists.
    let e = verify_lotl(&data(CZ), &[signer(CZ)], &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a list of the lists"), "{e}");
}

#[test]
fn the_2019_lotl_names_one_xml_list_per_territory_with_its_signers() {
    let lotl = lotl_2019();
    let all = national_pointers(&lotl, None);
    // 44 pointers: the LOTL itself, and the UK twice (PDF and XML).
    assert_eq!(
        all.len(),
        31,
        "{:?}",
        all.iter().map(|p| &p.territory).collect::<Vec<_>>()
    );
    assert!(all.iter().all(|p| !p.signers.is_empty()));
    assert!(all.iter().all(|p| p.territory != "EU"));
    let uk: Vec<_> = all.iter().filter(|p| p.territory == "UK").collect();
    assert_eq!(uk.len(), 1);
    assert!(uk[0].location.ends_with(".xml"), "{}", uk[0].location);
    let some = national_pointers(&lotl, Some(&["CZ".to_owned(), "IE".to_owned()]));
    assert_eq!(
        some.iter()
            .map(|p| p.territory.as_str())
            .collect::<Vec<_>>(),
        ["CZ", "IE"]
    );
}

#[test]
fn pivot_locations_are_the_xml_uris_oldest_first() {
    let lotl = tsl::parse(&data(LOTL_2024)).expect("parses");
    assert_eq!(
        pivot_locations(&lotl),
        [
            "https://ec.europa.eu/tools/lotl/eu-lotl-pivot-282.xml",
            "https://ec.europa.eu/tools/lotl/eu-lotl-pivot-300.xml",
            "https://ec.europa.eu/tools/lotl/eu-lotl-pivot-335.xml",
            "https://ec.europa.eu/tools/lotl/eu-lotl-pivot-341.xml",
        ]
    );
    // The 2019 LOTL announces no pivot: its only URIs are the Official Journal and notices.
    assert!(pivot_locations(&lotl_2019()).is_empty());
}

#[test]
fn the_2019_keys_do_not_reach_the_2024_lotl_without_the_pivots_in_between() {
    let pinned_2019 = [signer(LOTL_2019)];
    let lotl_2024 = data(LOTL_2024);
    let signer_2024 = signer(LOTL_2024);
    assert!(
        !pinned_2019.contains(&signer_2024),
        "the 2024 LOTL has another signer than the 2019 one"
    );
    // The real 2019 LOTL does not announce the 2024 signer: the Commission changed keys
    // three times in between (pivots 282, 300 and 335, not in the data). With only the 2019
    // LOTL as a pivot, the link to 2024 is missing and the 2024 LOTL is refused.
    assert!(!announced_lotl_signers(&lotl_2019()).contains(&signer_2024));
    let chain = [(LOTL_2019.to_owned(), data(LOTL_2019))];
    let e = verify_lotl(&lotl_2024, &pinned_2019, &chain)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("which is not among the 8 certificates announced by pivot eu-lotl_seq248"),
        "{e}"
    );
    // Without any pivot the 2024 LOTL is refused with the 2019 keys pinned.
    let e = verify_lotl(&lotl_2024, &pinned_2019, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("not pinned"), "{e}");
    // A pivot that no pinned key signed gives no trust at all.
    let e = verify_lotl(&lotl_2024, &[signer(CZ)], &chain)
        .unwrap_err()
        .to_string();
    assert!(e.contains("none of its 1 pivot LOTLs"), "{e}");
}

#[test]
fn a_national_list_cannot_be_used_as_a_pivot() {
    // Pin the CZ signer and offer the CZ list as a pivot: it is not a list of the lists.
    let e = verify_lotl(
        &data(LOTL_2019),
        &[signer(CZ)],
        &[("cz-as-pivot".to_owned(), data(CZ))],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("pivot cz-as-pivot is not a list of the lists"),
        "{e}"
    );
}

#[test]
fn too_many_pivots_are_refused_before_any_is_read() {
    let pivots: Vec<(String, Vec<u8>)> = (0..=MAX_PIVOTS)
        .map(|i| (format!("p{i}"), Vec::new()))
        .collect();
    let e = verify_lotl(&data(LOTL_2019), &[signer(LOTL_2019)], &pivots)
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than the 16 followed"), "{e}");
}

#[test]
fn a_signer_is_judged_at_the_lists_issue_date_and_refused_outside_its_validity() {
    // The real CZ list (issued 2019-08-23) was signed with a certificate valid from
    // 2019-03-04 to 2020-03-03.
    let signed = verify_national(&lotl_2019(), "CZ", &data(CZ)).expect("verifies");
    let mut list = signed.list.clone();
    assert!(signer_valid_at_issue(&list, &signed.signer).is_ok());
    // The same signature claimed for a list issued after the certificate expired.
    list.issue_date = Some(time::macros::datetime!(2020-03-04 0:00 UTC));
    let e = signer_valid_at_issue(&list, &signed.signer)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("was not valid at the list's ListIssueDateTime 2020-03-04T00:00:00Z")
            && e.contains("to 2020-03-03T09:43:18Z"),
        "{e}"
    );
    // And one issued before it was made.
    list.issue_date = Some(time::macros::datetime!(2019-03-01 0:00 UTC));
    assert!(signer_valid_at_issue(&list, &signed.signer).is_err());
    // Without an issue date, the rule cannot be applied: refused.
    list.issue_date = None;
    let e = signer_valid_at_issue(&list, &signed.signer)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no ListIssueDateTime"), "{e}");
}
