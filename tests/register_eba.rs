//! The EBA PSD2 register export: the real-shape example in `shared/data` and synthetic
//! documents that exercise each rule of the mapping (docs/registers.md, "EBA export").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use psp_cert::cert::PsdAuthNumber;
use psp_cert::country::CountryCode;
use psp_service::register::{
    AuthStatus, Category, EbaReport, NormaliseRule, RegisterConfig, RegisterFileConfig,
    RegisterFormat, RegisterSnapshot, ServiceSet, import_eba, read_native_file, stats,
};
use serde_json::json;

fn shared_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data")
}

fn shape_example() -> PathBuf {
    shared_data().join("registers/eba/eba_psd2_register_shape_example.json")
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("register_eba")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

fn eba_config(path: &Path, normalise: Option<Vec<NormaliseRule>>) -> RegisterConfig {
    RegisterConfig {
        files: vec![RegisterFileConfig {
            path: path.to_owned(),
            format: RegisterFormat::Eba,
            nca_map: BTreeMap::new(),
            normalise,
            ..RegisterFileConfig::default()
        }],
        ..RegisterConfig::default()
    }
}

fn load_eba(path: &Path) -> (RegisterSnapshot, EbaReport) {
    let (snapshot, mut report) =
        psp_service::register::load(&eba_config(path, None), Path::new("/"))
            .expect("EBA file loads");
    let eba = report.files.remove(0).eba.expect("an EBA report");
    (snapshot, eba)
}

fn auth(country: &str, nca: &str, reference: &str) -> PsdAuthNumber {
    PsdAuthNumber {
        country: cc(country),
        nca: nca.to_owned(),
        reference: reference.to_owned(),
    }
}

fn cc(code: &str) -> CountryCode {
    code.parse().expect("country code")
}

fn services(numbers: &[u8]) -> ServiceSet {
    ServiceSet::from_numbers(numbers).expect("valid numbers")
}

#[test]
fn the_shape_example_yields_its_payment_institution_and_e_money_institution() {
    let (snapshot, report) = load_eba(&shape_example());

    // The file holds a disclaimer block and three entities: an Irish PI, a Spanish EMI and a
    // French agent.
    assert_eq!(report.records, 3);
    assert_eq!(report.other_objects, 1, "the disclaimer object");
    assert_eq!(report.kept, 2);
    assert_eq!(report.skipped_agents, 1);
    assert_eq!(
        report.by_entity_type,
        BTreeMap::from([
            ("PSD_AG".to_owned(), 1),
            ("PSD_EMI".to_owned(), 1),
            ("PSD_PI".to_owned(), 1)
        ])
    );
    assert!(report.unknown_service_codes.is_empty());
    assert!(report.unmapped_authorities.is_empty());

    // IE_CBI!C58301: no ENT_NAT_REF_COD, so the reference is the EntityCode's tail; one
    // ENT_AUT date (odd) → Authorised; Services IE = own services, AT = passport-out.
    let ie = snapshot.register("IE-CBI").expect("Irish register");
    assert_eq!(ie.country(), cc("IE"));
    let fire = ie.entity("C58301").expect("Fire Financial Services");
    assert_eq!(fire.entries.len(), 1);
    let entry = &fire.entries[0];
    assert_eq!(entry.category, Category::PaymentInstitution);
    assert_eq!(entry.legal_name, "Fire Financial Services Limited");
    assert_eq!(entry.status, AuthStatus::Authorised);
    assert_eq!(entry.services, services(&[3, 5]));
    assert!(!entry.e_money);
    assert_eq!(
        entry.passport_out,
        Some(vec![(cc("AT"), services(&[3, 5]))])
    );

    // ES_BE EMI "Alpha": reference 6799, no ENT_AUT (no grant on record) → Unauthorised, no
    // Services → no passporting data.
    let es = snapshot.register("ES-BE").expect("Spanish register");
    let alpha = es.entity("6799").expect("Alpha");
    let entry = &alpha.entries[0];
    assert_eq!(entry.category, Category::EMoneyInstitution);
    assert_eq!(entry.legal_name, "Alpha");
    assert_eq!(entry.status, AuthStatus::Unauthorised);
    assert_eq!(entry.services, ServiceSet::EMPTY);
    assert_eq!(entry.passport_out, None);
    assert_eq!(report.missing_authorisation_dates, 1);

    // Agents are not register entries.
    assert!(snapshot.register("FR-ACPR").is_none());
}

#[test]
fn the_shape_example_pi_checked_in_austria_carries_passport_out_and_a_host_not_found() {
    let (snapshot, _) = load_eba(&shape_example());
    let a = auth("IE", "CBI", "c58301");
    let got = serde_json::to_value(snapshot.lookup(Some(&a), cc("AT"))).expect("serialises");
    assert_eq!(
        got,
        json!({
            "homeRegister": {
                "ncaName": "IE-CBI",
                "ncaCountryCode": "IE",
                "registerType": "Home",
                "categoryEntries": [{
                    "categoryName": "Payment Institution",
                    "pspLegalName": "Fire Financial Services Limited",
                    "pspAuthStatus": "Authorised",
                    "pspPaymentServices": [3, 5],
                    "passportOut": {"countryCode": "AT", "paymentServices": [3, 5]}
                }]
            },
            "hostRegister": {
                "ncaName": null,
                "ncaCountryCode": "AT",
                "registerType": "Host",
                "categoryEntries": [],
                "warning": ["The PSP could not be found in any register of the jurisdiction AT."]
            }
        })
    );
}

/// A synthetic export that exercises every rule: a third block, bare-string services,
/// withdrawn and re-authorised histories, several names, e-money, unknown codes, every
/// entity type, an unmapped authority, and the old `EL` country code.
const SYNTHETIC: &str = r#"[
  [{"__EBA_Disclaimer": {"line1": "no legal significance"}}],
  [
    {"CA_OwnerID": "FI_FIN-FSA", "EntityCode": "FI_FIN-FSA!12345678", "EntityType": "PSD_PI",
     "Properties": [{"ENT_NAM": ["Алфа Ой", "Alfa Oy"]}, {"ENT_NAT_REF_COD": " 12345678 "},
                    {"ENT_AUT": ["2019-01-01", "2020-01-01", "2021-01-01"]}],
     "Services": [{"FI": ["PS_070", "PS_080", "PS_03A", "PS_03B", "ES_010"]},
                  {"SE": "PS_080"}, {"DE": ["PS_999", "PS_070"]}, {"X1": ["PS_070"]}, {"NO": ["ES_010"]}]},
    {"CA_OwnerID": "FI_FIN-FSA", "EntityCode": "FI_FIN-FSA!777", "EntityType": "PSD_EMI",
     "Properties": [{"ENT_NAM": "Withdrawn Money Oy"}, {"ENT_NAT_REF_COD": "777"},
                    {"ENT_AUT": ["2019-01-01", "2022-06-30"]}],
     "Services": [{"FI": ["ES_010", "PS_05A", "PS_05B"]}, {"EE": ["PS_05A"]}]},
    {"CA_OwnerID": "DE_BAFIN", "EntityType": "PSD_AISP",
     "Properties": [{"ENT_NAM": "Konto Blick GmbH"}, {"ENT_NAT_REF_COD": "150001"}, {"ENT_AUT": "2019-03-01"}],
     "Services": {"DE": ["PS_080"], "AT": "PS_080"}},
    {"CA_OwnerID": "DE_BAFIN", "EntityType": "PSD_EPI",
     "Properties": [{"ENT_NAM": "Klein Zahlung GmbH"}, {"ENT_NAT_REF_COD": "150002"}, {"ENT_AUT": ["2019-03-01"]}],
     "Services": [{"DE": ["PS_060"]}]},
    {"CA_OwnerID": "DE_BAFIN", "EntityType": "PSD_EEMI",
     "Properties": [{"ENT_NAM": "Klein Geld GmbH"}, {"ENT_NAT_REF_COD": 150003}, {"ENT_AUT": ["2019-03-01"]}],
     "Services": [{"DE": ["ES_010"]}]},
    {"CA_OwnerID": "DE_BAFIN", "EntityType": "PSD_EXC",
     "Properties": [{"ENT_NAM": "Limited Network GmbH"}, {"ENT_NAT_REF_COD": "150004"}]},
    {"CA_OwnerID": "DE_BAFIN", "EntityType": "PSD_ENL",
     "Properties": [{"ENT_NAM": "National Law AG"}, {"ENT_NAT_REF_COD": "150005"}]},
    {"CA_OwnerID": "DE_BAFIN", "EntityType": "PSD_BR",
     "Properties": [{"ENT_NAM": "Branch"}, {"ENT_COD_PAR_ENT": "DE_BAFIN!150001"}]},
    {"CA_OwnerID": "DE_BAFIN", "EntityType": "PSD_AG",
     "Properties": [{"ENT_NAM": "Agent"}, {"DER_CHI_ENT_AUT": "Active"}]},
    {"CA_OwnerID": "DE_BAFIN", "EntityType": "PSD_NEWTYPE",
     "Properties": [{"ENT_NAM": "Future Kind"}, {"ENT_NAT_REF_COD": "150006"}]},
    {"CA_OwnerID": "DE_BAFIN", "EntityType": "PSD_PI",
     "Properties": [{"ENT_NAT_REF_COD": "150007"}, {"ENT_AUT": ["2019-03-01"]}]},
    {"CA_OwnerID": "DE_BAFIN", "EntityType": "PSD_PI",
     "Properties": [{"ENT_NAM": "No Reference GmbH"}, {"ENT_AUT": ["2019-03-01"]}]},
    {"EntityType": "PSD_PI",
     "Properties": [{"ENT_NAM": "No Authority Ltd"}, {"ENT_NAT_REF_COD": "1"}]},
    {"CA_OwnerID": "EL_BOG", "EntityCode": "EL_BOG!9", "EntityType": "PSD_PI",
     "Properties": [{"ENT_NAM": "Hellas Pay"}, {"ENT_AUT": ["2020-02-02"]}],
     "Services": [{"EL": ["PS_010", "PS_020"]}, {"CY": ["PS_010"]}]},
    {"CA_OwnerID": "ZZ_NEW-AUTH", "EntityCode": "ZZ_NEW-AUTH!42", "EntityType": "PSD_PI",
     "Properties": [{"ENT_NAM": "Elsewhere Payments"}, {"ENT_AUT": ["2020-02-02"]}],
     "Services": [{"ZZ": ["PS_070"]}]}
  ],
  [{"__EBA_Something_New": {"added": "upstream"}}]
]"#;

fn synthetic(dir: &Path) -> PathBuf {
    let path = dir.join("eba.json");
    std::fs::write(&path, SYNTHETIC).expect("write synthetic export");
    path
}

#[test]
fn entities_are_found_by_content_even_with_a_third_block() {
    let dir = scratch("third_block");
    let (_, report) = load_eba(&synthetic(&dir));
    // 15 entity records; the disclaimer and the new block's object are "other".
    assert_eq!(report.records, 15);
    assert_eq!(report.other_objects, 2);
}

#[test]
fn unknown_service_codes_entity_types_and_countries_are_counted_not_fatal() {
    let dir = scratch("unknown_codes");
    let (snapshot, report) = load_eba(&synthetic(&dir));
    assert_eq!(
        report.unknown_service_codes,
        BTreeMap::from([("PS_999".to_owned(), 1)])
    );
    assert_eq!(
        report.unknown_entity_types,
        BTreeMap::from([("PSD_NEWTYPE".to_owned(), 1)])
    );
    assert_eq!(
        report.unknown_countries,
        BTreeMap::from([("X1".to_owned(), 1)])
    );
    assert_eq!(
        report.unmapped_authorities,
        BTreeMap::from([("ZZ_NEW-AUTH".to_owned(), "ZZ-NEWAUTH".to_owned())])
    );
    // The unmapped authority's institution is still loaded, under the derived id.
    let zz = snapshot.register("ZZ-NEWAUTH").expect("derived register");
    assert_eq!(
        zz.entity("42").expect("by EntityCode tail").entries[0].legal_name,
        "Elsewhere Payments"
    );
}

#[test]
fn exclusions_national_law_branches_agents_and_incomplete_records_are_skipped_and_counted() {
    let dir = scratch("skipped");
    let (snapshot, report) = load_eba(&synthetic(&dir));
    assert_eq!(report.skipped_not_authorisations, 2, "PSD_EXC and PSD_ENL");
    assert_eq!(report.skipped_branches, 1);
    assert_eq!(report.skipped_agents, 1);
    assert_eq!(report.missing_name, 1);
    assert_eq!(report.missing_reference, 1);
    assert_eq!(report.missing_authority, 1);
    assert_eq!(report.kept, 7);
    let de = snapshot.register("DE-BAFIN").expect("BaFin");
    for skipped in ["150004", "150005", "150006", "150007"] {
        assert!(de.entity(skipped).is_none(), "{skipped}");
    }
}

#[test]
fn home_services_passport_out_and_e_money_are_read_from_the_services_map() {
    let dir = scratch("services");
    let (snapshot, _) = load_eba(&synthetic(&dir));
    let fi = snapshot.register("FI-FINFSA").expect("FIN-FSA");
    let alfa = &fi.entity("12345678").expect("Alfa").entries[0];
    // Several names: the Latin one. PS_03A and PS_03B are both service 3. ENT_AUT of three
    // dates (granted, withdrawn, granted again) → Authorised.
    assert_eq!(alfa.legal_name, "Alfa Oy");
    assert_eq!(alfa.status, AuthStatus::Authorised);
    assert_eq!(alfa.services, services(&[3, 7, 8]));
    assert!(alfa.e_money);
    // SE (bare string) and DE (PS_999 ignored) are passport-out; NO has only e-money and
    // X1 is not a country, so neither is listed.
    assert_eq!(
        alfa.passport_out,
        Some(vec![(cc("DE"), services(&[7])), (cc("SE"), services(&[8]))])
    );

    // Two ENT_AUT dates: withdrawn → Unauthorised, still listed with its services.
    let withdrawn = &fi.entity("777").expect("withdrawn EMI").entries[0];
    assert_eq!(withdrawn.category, Category::EMoneyInstitution);
    assert_eq!(withdrawn.status, AuthStatus::Unauthorised);
    assert_eq!(withdrawn.services, services(&[5]));

    // Registered categories; `Services` given as one object instead of a list; a numeric
    // reference.
    let de = snapshot.register("DE-BAFIN").expect("BaFin");
    let aisp = &de.entity("150001").expect("AISP").entries[0];
    assert_eq!(
        (aisp.category.clone(), aisp.status),
        (Category::Aisp, AuthStatus::Registered)
    );
    assert_eq!(aisp.passport_out, Some(vec![(cc("AT"), services(&[8]))]));
    let epi = &de.entity("150002").expect("EPI").entries[0];
    assert_eq!(
        (epi.category.clone(), epi.status, epi.services),
        (
            Category::ExemptPaymentInstitution,
            AuthStatus::Registered,
            services(&[6])
        )
    );
    let eemi = &de
        .entity("150003")
        .expect("EEMI with a numeric reference")
        .entries[0];
    assert_eq!(
        (eemi.category.clone(), eemi.status, eemi.e_money),
        (
            Category::ExemptEMoneyInstitution,
            AuthStatus::Registered,
            true
        )
    );

    // The EU's EL is read as GR, in the authority code and in Services.
    let gr = snapshot.register("GR-BOG").expect("Bank of Greece");
    let hellas = &gr.entity("9").expect("Hellas Pay").entries[0];
    assert_eq!(hellas.services, services(&[1, 2]));
    assert_eq!(hellas.passport_out, Some(vec![(cc("CY"), services(&[1]))]));
}

#[test]
fn a_hyphenated_certificate_reference_meets_a_plain_register_reference_only_with_dash_rule() {
    let dir = scratch("dashes");
    let path = synthetic(&dir);
    let cert = auth("FI", "FINFSA", "1234567-8");

    let (plain, _) =
        psp_service::register::load(&eba_config(&path, None), Path::new("/")).expect("loads");
    assert!(
        plain
            .lookup(Some(&cert), cc("FI"))
            .home
            .category_entries
            .is_empty()
    );

    let with_dashes = Some(vec![
        NormaliseRule::Case,
        NormaliseRule::Whitespace,
        NormaliseRule::LeadingZeros,
        NormaliseRule::Dashes,
    ]);
    let (dashed, _) = psp_service::register::load(&eba_config(&path, with_dashes), Path::new("/"))
        .expect("loads");
    let result = dashed.lookup(Some(&cert), cc("SE"));
    assert_eq!(result.home.category_entries[0].psp_legal_name, "Alfa Oy");
    let out = result.home.category_entries[0]
        .passport_out
        .as_ref()
        .expect("passported to SE");
    assert_eq!(out.payment_services, services(&[8]));
}

#[test]
fn nca_map_overrides_rename_the_register_a_code_loads_into() {
    let dir = scratch("nca_map");
    let path = synthetic(&dir);
    let mut config = eba_config(&path, None);
    config.files[0]
        .nca_map
        .insert("ZZ-NEW".to_owned(), "ZZ_NEW-AUTH".to_owned());
    let (snapshot, report) = psp_service::register::load(&config, Path::new("/")).expect("loads");
    assert!(snapshot.register("ZZ-NEW").is_some());
    assert!(snapshot.register("ZZ-NEWAUTH").is_none());
    let eba = report.files[0].eba.as_ref().expect("EBA report");
    assert!(eba.unmapped_authorities.is_empty());
}

#[test]
fn importing_the_shape_example_writes_a_native_file_that_answers_the_same() {
    let dir = scratch("import");
    let out = dir.join("eba-native.json");
    let summary = import_eba(&shape_example(), &out, false).expect("imports");
    assert_eq!(summary.registers.len(), 2);
    assert_eq!(summary.report.kept, 2);

    assert!(
        !dir.join("eba-native.json.tmp").exists(),
        "no temporary file is left"
    );
    let native = read_native_file(&out).expect("the output is a native file");
    let ids: Vec<&str> = native.registers.iter().map(|r| r.nca_id.as_str()).collect();
    assert_eq!(ids, vec!["ES-BE", "IE-CBI"]);

    let native_config = RegisterConfig {
        files: vec![RegisterFileConfig {
            path: out.clone(),
            format: RegisterFormat::Native,
            nca_map: BTreeMap::new(),
            normalise: None,
            ..RegisterFileConfig::default()
        }],
        ..RegisterConfig::default()
    };
    let (from_native, _) =
        psp_service::register::load(&native_config, Path::new("/")).expect("loads");
    let (from_eba, _) = load_eba(&shape_example());
    let a = auth("IE", "CBI", "C58301");
    assert_eq!(
        from_native.lookup(Some(&a), cc("AT")),
        from_eba.lookup(Some(&a), cc("AT"))
    );
}

#[test]
fn stats_count_entities_per_country_category_and_status() {
    let text = stats(&shape_example()).expect("stats of the EBA example");
    let country_row = |cc: &str, registers: u32, entities: u32, inbound: u32| {
        format!("{cc:<8} {registers:>9} {entities:>9} {inbound:>11}")
    };
    assert!(text.contains(&country_row("IE", 1, 1, 0)), "{text}");
    assert!(text.contains(&country_row("ES", 1, 1, 0)), "{text}");
    assert!(
        text.contains(&format!("{:<40} {:>9}", "Payment Institution", 1)),
        "{text}"
    );
    assert!(
        text.contains(&format!("{:<40} {:>9}", "E-Money Institution", 1)),
        "{text}"
    );
    assert!(
        text.contains(&format!("{:<14} {:>9}", "Authorised", 1)),
        "{text}"
    );
    assert!(
        text.contains(&format!("{:<14} {:>9}", "Unauthorised", 1)),
        "{text}"
    );

    let sandbox = Path::new(env!("CARGO_MANIFEST_DIR")).join("registers/sandbox/XX.json");
    let text = stats(&sandbox).expect("stats of a native file");
    assert!(text.contains(&country_row("XX", 1, 16, 0)), "{text}");
    assert!(
        text.contains(&format!("{:<14} {:>9}", "Registered", 2)),
        "{text}"
    );
}

#[test]
fn an_import_that_cannot_write_names_the_output_and_leaves_nothing_behind() {
    let dir = scratch("import_fails");
    let out = dir.join("missing-directory").join("eba-native.json");
    let err = import_eba(&shape_example(), &out, false).expect_err("no such directory");
    assert!(err.to_string().contains("eba-native.json"), "{err}");
    assert!(!out.exists());
}
