//! The sandbox registers answer each contract scenario with the register objects the contract
//! describes (behaviour rules 1 to 6). Expected values are JSON literals compared with the
//! serialised result.

use std::path::Path;

use psp_cert::cert::PsdAuthNumber;
use psp_cert::country::CountryCode;
use psp_service::register::{HomeOutcome, RegisterConfig, RegisterSnapshot, not_found_warning};
use serde_json::{Value, json};

fn sandbox() -> RegisterSnapshot {
    let (snapshot, report) = psp_service::register::load(
        &RegisterConfig::sandbox(),
        Path::new(env!("CARGO_MANIFEST_DIR")),
    )
    .expect("the sandbox registers load");
    assert_eq!(report.files.len(), 4);
    snapshot
}

fn auth(text: &str) -> PsdAuthNumber {
    // The certificate parser lives elsewhere; the tests build the parts directly.
    let rest = text
        .strip_prefix("PSD")
        .expect("test auth numbers are PSD form");
    let (cc, rest) = rest.split_once('-').expect("country");
    let (nca, reference) = rest.split_once('-').expect("NCA");
    PsdAuthNumber {
        country: cc.parse().expect("country code"),
        nca: nca.to_owned(),
        reference: reference.to_owned(),
    }
}

fn cc(code: &str) -> CountryCode {
    code.parse().expect("country code")
}

fn check(snapshot: &RegisterSnapshot, auth_number: &str, jurisdiction: &str) -> Value {
    let a = auth(auth_number);
    serde_json::to_value(snapshot.lookup(Some(&a), cc(jurisdiction))).expect("serialises")
}

fn xx_home(entries: Value) -> Value {
    json!({
        "ncaName": "XX-TEST",
        "ncaCountryCode": "XX",
        "registerType": "Home",
        "categoryEntries": entries
    })
}

fn host_not_found(country: &str) -> Value {
    json!({
        "ncaName": null,
        "ncaCountryCode": country,
        "registerType": "Host",
        "categoryEntries": [],
        "warning": [format!("The PSP could not be found in any register of the jurisdiction {country}.")]
    })
}

#[test]
fn valid_psp_is_authorised_with_all_eight_services_and_no_host_block_at_home() {
    let got = check(&sandbox(), "PSDXX-TEST-000001", "XX");
    assert_eq!(
        got,
        json!({
            "homeRegister": xx_home(json!([{
                "categoryName": "Payment Institution",
                "pspLegalName": "Sandbox Valid PSP",
                "pspAuthStatus": "Authorised",
                "pspPaymentServices": [1, 2, 3, 4, 5, 6, 7, 8]
            }]))
        })
    );
}

#[test]
fn unauthorised_psp_is_in_the_register_as_unauthorised() {
    let got = check(&sandbox(), "PSDXX-TEST-000002", "xx");
    assert_eq!(
        got,
        json!({
            "homeRegister": xx_home(json!([{
                "categoryName": "Payment Institution",
                "pspLegalName": "Sandbox Unauthorised PSP",
                "pspAuthStatus": "Unauthorised",
                "pspPaymentServices": [7, 8]
            }]))
        })
    );
}

#[test]
fn roles_one_and_two_certificate_gets_the_register_services_one_and_two() {
    let got = check(&sandbox(), "PSDXX-TEST-000003", "XX");
    assert_eq!(
        got["homeRegister"]["categoryEntries"][0]["pspPaymentServices"],
        json!([1, 2])
    );
    assert_eq!(
        got["homeRegister"]["categoryEntries"][0]["pspLegalName"],
        json!("Sandbox Roles 1-2 PSP")
    );
}

#[test]
fn certificate_scenarios_with_register_services_seven_and_eight_are_authorised() {
    let snapshot = sandbox();
    for (reference, name) in [
        ("000004", "Sandbox Expired PSP"),
        ("000005", "Sandbox Untrusted PSP"),
        ("000006", "Sandbox Revoked PSP"),
        ("000007", "Sandbox No Revocation PSP"),
        ("000008", "Sandbox Tampered PSP"),
        ("000014", "Sandbox QSeal PSP"),
        ("000015", "Sandbox ECDSA PSP"),
    ] {
        let got = check(&snapshot, &format!("PSDXX-TEST-{reference}"), "XX");
        assert_eq!(
            got,
            json!({
                "homeRegister": xx_home(json!([{
                    "categoryName": "Payment Institution",
                    "pspLegalName": name,
                    "pspAuthStatus": "Authorised",
                    "pspPaymentServices": [7, 8]
                }]))
            }),
            "{reference}"
        );
    }
}

#[test]
fn passport_out_to_xy_gives_passport_out_at_home_and_a_host_block_not_found() {
    let got = check(&sandbox(), "PSDXX-TEST-000009", "XY");
    assert_eq!(
        got,
        json!({
            "homeRegister": xx_home(json!([{
                "categoryName": "Payment Institution",
                "pspLegalName": "Sandbox Passport XY PSP",
                "pspAuthStatus": "Authorised",
                "pspPaymentServices": [7, 8],
                "passportOut": {"countryCode": "XY", "paymentServices": [8]}
            }])),
            "hostRegister": host_not_found("XY")
        })
    );
}

#[test]
fn gb_temporary_permissions_psp_has_host_entries_with_passport_in() {
    let got = check(&sandbox(), "PSDXX-TEST-000010", "GB");
    assert_eq!(
        got,
        json!({
            "homeRegister": xx_home(json!([{
                "categoryName": "Payment Institution",
                "pspLegalName": "Sandbox GB TPR PSP",
                "pspAuthStatus": "Authorised",
                "pspPaymentServices": [7, 8]
            }])),
            "hostRegister": {
                "ncaName": "GB-FCA",
                "ncaCountryCode": "GB",
                "registerType": "Host",
                "categoryEntries": [{
                    "categoryName": "Payment Institution",
                    "pspLegalName": "Sandbox GB TPR PSP",
                    "pspAuthStatus": "Authorised",
                    "pspPaymentServices": [7, 8],
                    "passportIn": {"paymentServices": [7, 8], "countryCode": "XX"}
                }]
            }
        })
    );
}

#[test]
fn role_five_psp_gets_service_five_and_passport_out_five_to_xy() {
    let snapshot = sandbox();
    let at_home = check(&snapshot, "PSDXX-TEST-000011", "XX");
    assert_eq!(
        at_home,
        json!({
            "homeRegister": xx_home(json!([{
                "categoryName": "Payment Institution",
                "pspLegalName": "Sandbox Role 5 PSP",
                "pspAuthStatus": "Authorised",
                "pspPaymentServices": [5]
            }]))
        })
    );
    let to_xy = check(&snapshot, "PSDXX-TEST-000011", "XY");
    assert_eq!(
        to_xy["homeRegister"]["categoryEntries"][0]["passportOut"],
        json!({"countryCode": "XY", "paymentServices": [5]})
    );
    assert_eq!(to_xy["hostRegister"], host_not_found("XY"));
}

#[test]
fn hub_directory_psp_is_a_private_domestic_bank_with_tiers_one_to_four() {
    let got = check(&sandbox(), "PSDXX-OBHD-000013", "XX");
    assert_eq!(
        got,
        json!({
            "homeRegister": {
                "ncaName": "XX-OBHD",
                "ncaCountryCode": "XX",
                "registerType": "Home",
                "categoryEntries": [{
                    "categoryName": "Private Domestic Bank",
                    "pspLegalName": "Sandbox Hub Directory PSP",
                    "pspAuthStatus": "Authorised",
                    "pspPaymentServices": [1, 2, 3, 4]
                }]
            }
        })
    );
}

#[test]
fn uk_open_banking_psp_is_found_in_the_gb_register_at_home() {
    let got = check(&sandbox(), "PSDGB-FCA-000012", "GB");
    assert_eq!(
        got,
        json!({
            "homeRegister": {
                "ncaName": "GB-FCA",
                "ncaCountryCode": "GB",
                "registerType": "Home",
                "categoryEntries": [{
                    "categoryName": "Payment Institution",
                    "pspLegalName": "Sandbox OBIE PSP",
                    "pspAuthStatus": "Authorised",
                    "pspPaymentServices": [7, 8]
                }]
            }
        })
    );
}

#[test]
fn same_country_jurisdiction_gives_no_host_block_and_no_passport_out() {
    // Rule 1, and rule 2's passportOut only for a foreign jurisdiction: the XY passporter
    // checked in XX.
    let got = check(&sandbox(), "PSDXX-TEST-000009", "XX");
    assert!(got.get("hostRegister").is_none(), "{got}");
    assert!(
        got["homeRegister"]["categoryEntries"][0]
            .get("passportOut")
            .is_none(),
        "{got}"
    );
}

#[test]
fn psp_not_passported_to_the_jurisdiction_has_no_passport_out_and_a_host_not_found() {
    // Rule 3: the valid PSP has no passporting to XY.
    let got = check(&sandbox(), "PSDXX-TEST-000001", "XY");
    assert!(
        got["homeRegister"]["categoryEntries"][0]
            .get("passportOut")
            .is_none()
    );
    assert_eq!(got["hostRegister"], host_not_found("XY"));
}

#[test]
fn credit_institution_without_passporting_data_gets_a_host_block_not_found() {
    // Rule 5.
    let got = check(&sandbox(), "PSDXX-TEST-000017", "XY");
    assert_eq!(
        got,
        json!({
            "homeRegister": xx_home(json!([{
                "categoryName": "Credit Institution",
                "pspLegalName": "Sandbox Credit Institution",
                "pspAuthStatus": "Authorised",
                "pspPaymentServices": [1, 2, 3, 4, 5, 6, 7, 8]
            }])),
            "hostRegister": host_not_found("XY")
        })
    );
}

#[test]
fn aisp_and_exempt_institution_are_registered() {
    let snapshot = sandbox();
    let aisp = check(&snapshot, "PSDXX-TEST-000016", "XX");
    assert_eq!(
        aisp["homeRegister"]["categoryEntries"],
        json!([{
            "categoryName": "AISP",
            "pspLegalName": "Sandbox AISP",
            "pspAuthStatus": "Registered",
            "pspPaymentServices": [8]
        }])
    );
    let exempt = check(&snapshot, "PSDXX-TEST-000018", "XX");
    assert_eq!(
        exempt["homeRegister"]["categoryEntries"],
        json!([{
            "categoryName": "Exempt Payment Institution",
            "pspLegalName": "Sandbox Exempt PSP",
            "pspAuthStatus": "Registered",
            "pspPaymentServices": [3, 6]
        }])
    );
}

#[test]
fn eea_psp_checked_for_gb_without_temporary_permission_gets_a_gb_host_not_found() {
    // The GB register publishes inbound data, but not for this PSP.
    let got = check(&sandbox(), "PSDXX-TEST-000001", "GB");
    assert_eq!(got["hostRegister"], host_not_found("GB"));
}

#[test]
fn unknown_reference_in_a_loaded_register_names_the_nca_with_no_entries() {
    let snapshot = sandbox();
    let a = auth("PSDXX-TEST-999999");
    let result = snapshot.lookup(Some(&a), cc("XX"));
    assert_eq!(
        serde_json::to_value(&result).expect("serialises"),
        json!({"homeRegister": xx_home(json!([]))})
    );
    assert_eq!(
        result.home_outcome,
        HomeOutcome::NotFound {
            nca_id: "XX-TEST".into()
        }
    );
}

#[test]
fn nca_without_a_loaded_register_gives_a_null_nca_name_in_the_auth_number_country() {
    let snapshot = sandbox();
    let a = auth("PSDZZ-NONE-1");
    let result = snapshot.lookup(Some(&a), cc("XX"));
    assert_eq!(
        serde_json::to_value(&result).expect("serialises"),
        json!({
            "homeRegister": {
                "ncaName": null,
                "ncaCountryCode": "ZZ",
                "registerType": "Home",
                "categoryEntries": []
            },
            "hostRegister": host_not_found("XX")
        })
    );
    assert_eq!(
        result.home_outcome,
        HomeOutcome::NoRegister {
            nca_id: "ZZ-NONE".into()
        }
    );
}

#[test]
fn identifier_not_in_psd_form_gives_an_empty_home_block_in_the_jurisdiction_and_no_host() {
    let result = sandbox().lookup(None, cc("XY"));
    assert_eq!(
        serde_json::to_value(&result).expect("serialises"),
        json!({
            "homeRegister": {
                "ncaName": null,
                "ncaCountryCode": "XY",
                "registerType": "Home",
                "categoryEntries": []
            }
        })
    );
    assert_eq!(result.home_outcome, HomeOutcome::NotPsdForm);
}

#[test]
fn nca_acronym_and_reference_match_regardless_of_case_and_leading_zeros() {
    let snapshot = sandbox();
    let a = auth("PSDXX-test-1");
    let result = snapshot.lookup(Some(&a), cc("XX"));
    assert_eq!(
        result.home.category_entries[0].psp_legal_name,
        "Sandbox Valid PSP"
    );
}

#[test]
fn the_xy_register_has_its_own_local_psp() {
    let got = check(&sandbox(), "PSDXY-TEST-000001", "XY");
    assert_eq!(
        got,
        json!({
            "homeRegister": {
                "ncaName": "XY-TEST",
                "ncaCountryCode": "XY",
                "registerType": "Home",
                "categoryEntries": [{
                    "categoryName": "Payment Institution",
                    "pspLegalName": "Sandbox XY Local PSP",
                    "pspAuthStatus": "Authorised",
                    "pspPaymentServices": [7, 8]
                }]
            }
        })
    );
}

#[test]
fn register_blocks_read_back_from_their_json() {
    let a = auth("PSDXX-TEST-000010");
    let result = sandbox().lookup(Some(&a), cc("GB"));
    let host = result.host.expect("cross-border");
    let text = serde_json::to_string(&host).expect("serialises");
    let back: psp_service::register::RegisterBlock =
        serde_json::from_str(&text).expect("reads back");
    assert_eq!(back, host);
    assert_eq!(
        not_found_warning(cc("XY")),
        host_not_found("XY")["warning"][0]
    );
}

#[test]
fn a_snapshot_answers_with_its_generation() {
    let (snapshot, _) = psp_service::register::load(
        &RegisterConfig::sandbox(),
        Path::new(env!("CARGO_MANIFEST_DIR")),
    )
    .expect("loads");
    let snapshot = snapshot.with_generation(1);
    assert_eq!(snapshot.generation(), 1);
    let a = auth("PSDXX-TEST-000001");
    assert_eq!(snapshot.lookup(Some(&a), cc("XX")).generation, 1);
    assert_eq!(snapshot.registers_of(cc("XX")).count(), 2);
}
