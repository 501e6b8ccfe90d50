//! Banks as PSPs. Credit institutions are not in the EBA payment-institutions register; a
//! credit-institutions file (the EBA credit-institutions search answer, `CRD_CRE_INS`
//! wrapped in `_payload`, or a native snapshot) adds them to the same NCA's register with
//! `merge = true`, and a bank PSP is then reported as what it is: a Credit Institution,
//! entitled to all eight services (the contract's category table).
//!
//! No recorded credit-institutions answer exists (REGISTER-FORMATS.md section 2): the
//! document below is reconstructed from the shape that section describes.

use std::path::{Path, PathBuf};

use psp_cert::cert::PsdAuthNumber;
use psp_service::register::{
    AuthStatus, Category, RegisterConfig, RegisterFileConfig, RegisterFormat, ServiceSet,
};

const PAYMENT_INSTITUTIONS: &str = r#"[[{"__EBA_Disclaimer": {}}], [
  {"CA_OwnerID": "DE_BAFIN", "EntityCode": "DE_BAFIN!150001", "EntityType": "PSD_AISP",
   "Properties": [{"ENT_NAM": "Konto Blick GmbH"}, {"ENT_NAT_REF_COD": "150001"}, {"ENT_AUT": ["2019-03-01"]}],
   "Services": [{"DE": ["PS_080"]}]}
]]"#;

const CREDIT_INSTITUTIONS: &str = r#"[
  {"_id": "a", "_payload": {"CA_OwnerID": "DE_BAFIN", "EntityCode": "529900HNOAA1KXQJUQ27",
   "EntityType": "CRD_CRE_INS",
   "Properties": [{"ENT_NAM": "Beispielbank AG"}, {"ENT_NAT_REF_COD": "100200"},
                  {"ENT_AUT": ["1999-01-01"]}, {"ENT_COU_RES": "DE"}]}},
  {"_id": "b", "_payload": {"CA_OwnerID": "DE_BAFIN", "EntityCode": "529900XXXXXXXXXXXX01",
   "EntityType": "CRD_CRE_INS",
   "Properties": [{"ENT_NAM": "Geschlossene Bank AG"}, {"ENT_NAT_REF_COD": "100300"},
                  {"ENT_AUT": ["1999-01-01", "2024-06-30"]}]}},
  {"_id": "c", "_payload": {"CA_OwnerID": "DE_BAFIN", "EntityCode": "DE_BAFIN!150001",
   "EntityType": "CRD_CRE_INS",
   "Properties": [{"ENT_NAM": "Konto Blick Bank AG"}, {"ENT_NAT_REF_COD": "150001"},
                  {"ENT_AUT": ["2024-01-01"]}]}}
]"#;

/// A directory of the test's own (`test` names it): the tests run in parallel, and a shared
/// one was removed by one test while another read it.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("register_credit_institutions")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    std::fs::write(dir.join("pir.json"), PAYMENT_INSTITUTIONS).expect("write");
    std::fs::write(dir.join("cir.json"), CREDIT_INSTITUTIONS).expect("write");
    dir
}

fn config(dir: &Path, merge: bool) -> RegisterConfig {
    let file = |name: &str, merge: bool| RegisterFileConfig {
        path: dir.join(name),
        format: RegisterFormat::Eba,
        merge,
        ..RegisterFileConfig::default()
    };
    RegisterConfig {
        files: vec![file("pir.json", false), file("cir.json", merge)],
        ..RegisterConfig::default()
    }
}

fn bafin(reference: &str) -> PsdAuthNumber {
    PsdAuthNumber {
        country: "DE".parse().expect("cc"),
        nca: "BAFIN".to_owned(),
        reference: reference.to_owned(),
    }
}

#[test]
fn a_bank_psp_is_a_credit_institution_entitled_to_all_eight_services() {
    let dir = scratch("a_bank_psp");
    let (snapshot, _) =
        psp_service::register::load(&config(&dir, true), Path::new("/")).expect("loads");
    let de = snapshot.register("DE-BAFIN").expect("BaFin register");
    let bank = de.entity("100200").expect("the bank");
    assert_eq!(bank.entries.len(), 1);
    assert_eq!(bank.entries[0].category, Category::CreditInstitution);
    assert_eq!(bank.entries[0].status, AuthStatus::Authorised);
    assert_eq!(
        bank.entries[0].services,
        ServiceSet::from_numbers(&[1, 2, 3, 4, 5, 6, 7, 8]).expect("services")
    );
    // The contract's answer for the bank in its home country.
    let got =
        serde_json::to_value(snapshot.lookup(Some(&bafin("100200")), "DE".parse().expect("cc")))
            .expect("serialises");
    let home = &got["homeRegister"];
    assert_eq!(home["ncaName"], "DE-BAFIN");
    assert_eq!(
        home["categoryEntries"][0]["categoryName"],
        "Credit Institution"
    );
    assert_eq!(home["categoryEntries"][0]["pspAuthStatus"], "Authorised");
    assert_eq!(
        home["categoryEntries"][0]["pspPaymentServices"],
        serde_json::json!([1, 2, 3, 4, 5, 6, 7, 8])
    );
    assert!(
        home.get("warning").is_none() || home["warning"].is_null(),
        "{got:#}"
    );

    // A bank whose authorisation was withdrawn is there, and Unauthorised.
    let closed = de.entity("100300").expect("the closed bank");
    assert_eq!(closed.entries[0].status, AuthStatus::Unauthorised);

    // The payment institutions of the same authority are still there; a firm in both
    // registers keeps both entries.
    let both = de.entity("150001").expect("in both files");
    let categories: Vec<_> = both.entries.iter().map(|e| e.category.clone()).collect();
    assert_eq!(categories, [Category::Aisp, Category::CreditInstitution]);
}

#[test]
fn without_merge_a_second_file_for_the_same_authority_is_refused_naming_both() {
    let dir = scratch("without_merge");
    let e = psp_service::register::load(&config(&dir, false), Path::new("/"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("DE-BAFIN is defined twice"), "{e}");
    assert!(e.contains("pir.json") && e.contains("cir.json"), "{e}");
}

#[test]
fn merging_files_that_read_references_differently_is_refused() {
    let dir = scratch("merging");
    let mut c = config(&dir, true);
    c.files[1].normalise = Some(vec![]);
    let e = psp_service::register::load(&c, Path::new("/"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("normalises references differently"), "{e}");
}
