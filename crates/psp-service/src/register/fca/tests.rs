//! Unit tests: FRN parsing, the mapping tables, the status table, and the wire parsing of the
//! recorded responses in `../shared/data/registers/fca/`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use governor::RateLimiter;
use governor::clock::FakeRelativeClock;

use super::mapping::{
    firm_standing, map_firm, normalise, passport_direction, permission_meaning, psd_status_row,
};
use super::wire::{self, Endpoint, FirmRecord, PassportRecord, StatusClass};
use super::*;
use crate::register::PaymentService;

fn recorded(name: &str) -> serde_json::Value {
    let path: PathBuf = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("../shared/data/registers/fca")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (tests read ../shared/data)", path.display()));
    let file: serde_json::Value = serde_json::from_str(&text).expect("recorded file is JSON");
    file["body"].clone()
}

fn envelope(name: &str) -> wire::Envelope {
    let body = serde_json::to_vec(&recorded(name)).expect("serialises");
    wire::parse_envelope(&body).expect("recorded envelope parses")
}

fn record(status: &str, psd: &str) -> FirmRecord {
    FirmRecord {
        frn: "900001".into(),
        name: "Example Payments Ltd".into(),
        status: status.into(),
        psd_emd_status: psd.into(),
    }
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn frn_of_accepts_only_the_fca_prefix_and_ascii_digits() {
    assert_eq!(frn_of("PSDGB-FCA-552016"), Some("552016"));
    assert_eq!(frn_of("PSDGB-FCA-1"), Some("1"));
    assert_eq!(frn_of("PSDGB-FCA-1234567890"), Some("1234567890"));
    for refused in [
        "PSDGB-OB-Unknown0015800001HQQrZAAX",
        "PSDGB-FCA-",
        "PSDGB-FCA-12345678901",
        "PSDGB-FCA-../552016",
        "PSDGB-FCA-552016/../1",
        "PSDGB-FCA-552016?x=1",
        "PSDGB-FCA-552016%2F1",
        "PSDGB-FCA-552 016",
        "PSDGB-FCA- 552016",
        "PSDGB-FCA-552016 ",
        "PSDGB-FCA-+552016",
        "PSDGB-FCA-５５２０１６",
        "PSDGB-FCA-٥٥٢٠١٦",
        "psdgb-fca-552016",
        "PSDIE-CBI-552016",
        "PSDGB-FCA-552016\n",
    ] {
        assert_eq!(frn_of(refused), None, "{refused:?}");
    }
}

#[test]
fn frn_from_a_parsed_auth_number_needs_gb_fca() {
    let fca = PsdAuthNumber::parse("PSDGB-FCA-765112").expect("PSD form");
    assert_eq!(
        Frn::from_auth_number(&fca).map(|f| f.0),
        Some("765112".into())
    );
    let ob = PsdAuthNumber::parse("PSDGB-OB-Unknown0015800001HQQrZAAX").expect("PSD form");
    assert_eq!(Frn::from_auth_number(&ob), None);
    let other = PsdAuthNumber::parse("PSDIE-CBI-765112").expect("PSD form");
    assert_eq!(Frn::from_auth_number(&other), None);
}

#[test]
fn every_table_row_is_reachable_and_service_rows_are_in_1_to_8() {
    for (i, row) in PSD_EMD_STATUS.iter().enumerate() {
        assert_eq!(
            psd_status_row(row.value),
            Some(row),
            "row {i} is shadowed by an earlier row"
        );
    }
    for (i, (value, standing)) in FIRM_STATUS.iter().enumerate() {
        assert_eq!(firm_standing(value), Some(*standing), "firm status row {i}");
        assert!(
            FIRM_STATUS[..i]
                .iter()
                .all(|(v, _)| normalise(v) != normalise(value)),
            "firm status row {i} repeats an earlier one"
        );
    }
    for (i, (name, meaning)) in PERMISSIONS.iter().enumerate() {
        assert!(
            PERMISSIONS[..i]
                .iter()
                .all(|(v, _)| normalise(v) != normalise(name)),
            "permission row {i} repeats an earlier one"
        );
        if let PermissionMeaning::Service(n) = meaning {
            assert!(PaymentService::new(*n).is_some(), "row {i}: service {n}");
        }
    }
    let covered: ServiceSet = PERMISSIONS
        .iter()
        .filter_map(|(_, m)| match m {
            PermissionMeaning::Service(n) => PaymentService::new(*n),
            _ => None,
        })
        .collect();
    assert_eq!(covered, ServiceSet::ALL, "every Annex I service has a row");
}

#[test]
fn names_match_whatever_the_case_spacing_and_apostrophes() {
    assert_eq!(
        permission_meaning("  PAYMENT   initiation services. "),
        Some(PermissionMeaning::Service(7))
    );
    assert_eq!(
        permission_meaning(
            "Execution of payment transactions, including transfers of funds on a payment \
             account with the user\u{2019}s payment service provider or with another payment \
             service provider;"
        ),
        Some(PermissionMeaning::Service(3))
    );
    assert_eq!(
        permission_meaning("Accepting deposits"),
        Some(PermissionMeaning::DepositTaking)
    );
    assert_eq!(permission_meaning("Execution of direct debits"), None);
    assert_eq!(permission_meaning("Payment initiation"), None);
    assert_eq!(
        psd_status_row("cancelled -  small pi").map(|r| r.status),
        Some(AuthStatus::Unauthorised)
    );
}

#[test]
fn passport_direction_does_not_depend_on_the_exact_spelling() {
    assert_eq!(
        passport_direction("Passporting Out"),
        PassportDirection::Out
    );
    // The FCA's own documentation example.
    assert_eq!(passport_direction("Passpoting Out"), PassportDirection::Out);
    assert_eq!(passport_direction("Passporting In"), PassportDirection::In);
    assert_eq!(passport_direction(""), PassportDirection::Other);
    assert_eq!(passport_direction("Outward"), PassportDirection::Other);
}

#[test]
fn a_payment_institution_gets_its_category_status_and_services() {
    let firm = map_firm(
        record("Authorised", "Authorised"),
        names(&[
            "Payment initiation services",
            "Account information services",
            "Money remittance",
        ]),
        Vec::new(),
    );
    assert_eq!(
        firm.standing,
        Some(PsdStanding {
            category: Category::PaymentInstitution,
            status: AuthStatus::Authorised
        })
    );
    assert_eq!(firm.services.to_vec(), vec![6, 7, 8]);
    assert!(firm.unmapped_permissions.is_empty());
    let entity = firm.to_entity();
    assert_eq!(entity.reference, "900001");
    assert_eq!(entity.entries.len(), 1);
    assert_eq!(entity.entries[0].legal_name, "Example Payments Ltd");
    assert_eq!(entity.entries[0].passport_out, None);
}

#[test]
fn categories_follow_the_psd_status_or_the_permissions() {
    let cases: &[(&str, &str, &[&str], Category, AuthStatus)] = &[
        (
            "Registered",
            "Registered",
            &["Account information services"],
            Category::Aisp,
            AuthStatus::Registered,
        ),
        (
            "Registered",
            "Registered",
            &["Money remittance"],
            Category::ExemptPaymentInstitution,
            AuthStatus::Registered,
        ),
        (
            "Authorised",
            "Authorised",
            &["Issuing electronic money", "Payment initiation services"],
            Category::EMoneyInstitution,
            AuthStatus::Authorised,
        ),
        (
            "Registered",
            "Small E-Money Institution",
            &["Issuing electronic money"],
            Category::ExemptEMoneyInstitution,
            AuthStatus::Registered,
        ),
        (
            "Registered",
            "Registered Account Information Service Provider",
            &["Account information services"],
            Category::Aisp,
            AuthStatus::Registered,
        ),
        (
            "Authorised",
            "Cancelled - Small PI",
            &[],
            Category::ExemptPaymentInstitution,
            AuthStatus::Unauthorised,
        ),
    ];
    for (status, psd, perms, category, auth) in cases {
        let firm = map_firm(record(status, psd), names(perms), Vec::new());
        assert_eq!(
            firm.standing,
            Some(PsdStanding {
                category: category.clone(),
                status: *auth
            }),
            "{status} / {psd} / {perms:?}"
        );
    }
}

#[test]
fn a_firm_no_longer_authorised_is_unauthorised_whatever_its_psd_status_says() {
    let firm = map_firm(
        record("No longer authorised", "Authorised Payment Institution"),
        names(&["Payment initiation services"]),
        Vec::new(),
    );
    assert_eq!(
        firm.standing.map(|s| s.status),
        Some(AuthStatus::Unauthorised)
    );
    assert_eq!(firm.notes.len(), 1, "{:?}", firm.notes);
}

#[test]
fn unknown_values_are_reported_and_never_guessed_into_a_status() {
    let firm = map_firm(
        record("Authorised", "Authorised - Something New"),
        names(&["Payment initiation services"]),
        Vec::new(),
    );
    assert_eq!(firm.standing, None);
    assert!(firm.services.is_empty());
    assert!(firm.to_entity().entries.is_empty());
    assert!(firm.notes[0].contains("Something New"), "{:?}", firm.notes);

    let firm = map_firm(
        record("Suspended (new)", "Authorised Payment Institution"),
        names(&["Payment initiation services", "Debt Adjusting"]),
        Vec::new(),
    );
    assert_eq!(
        firm.standing.map(|s| s.status),
        Some(AuthStatus::Unauthorised),
        "an unknown firm status is not current"
    );
    assert_eq!(firm.unmapped_permissions, names(&["Debt Adjusting"]));
}

#[test]
fn recorded_bank_permissions_make_a_credit_institution_with_every_service() {
    let mut permissions = Vec::new();
    for page in [
        "fca_765112_permissions_p1.json",
        "fca_765112_permissions_p2.json",
    ] {
        let e = envelope(page);
        assert_eq!(
            wire::classify(Endpoint::Permissions, &e.status),
            Some(StatusClass::Ok)
        );
        permissions.extend(wire::permission_names(&e.data).expect("recorded shape"));
    }
    assert_eq!(permissions.len(), 38, "total_count of 765112");
    let passports =
        wire::passport_records(&envelope("fca_765112_passports.json").data).expect("shape");
    assert_eq!(
        passports,
        vec![PassportRecord {
            country: "GIBRALTAR".into(),
            direction: "Passporting Out".into()
        }]
    );
    let firm = map_firm(record("Authorised", ""), permissions, passports);
    assert_eq!(
        firm.standing,
        Some(PsdStanding {
            category: Category::CreditInstitution,
            status: AuthStatus::Authorised
        })
    );
    assert_eq!(firm.services, ServiceSet::ALL);
    assert_eq!(
        firm.unmapped_permissions.len(),
        37,
        "all but Accepting Deposits"
    );
    assert_eq!(firm.passports[0].direction, PassportDirection::Out);
}

#[test]
fn the_recorded_investment_firm_is_in_the_register_but_not_a_psp() {
    let e = envelope("fca_552016_firm.json");
    assert_eq!(
        wire::classify(Endpoint::Firm, &e.status),
        Some(StatusClass::Ok)
    );
    let rec = wire::firm_record(&e.data).expect("recorded firm record");
    assert_eq!(rec.frn, "552016");
    assert_eq!(rec.name, "J.P. MORGAN PERSONAL INVESTING LIMITED");
    assert_eq!(rec.status, "Authorised");
    assert_eq!(rec.psd_emd_status, "");
    let passports = envelope("fca_552016_passports.json");
    assert_eq!(
        wire::classify(Endpoint::Passports, &passports.status),
        Some(StatusClass::NoRecords)
    );
    assert!(passports.data.is_null());
    let firm = map_firm(rec, Vec::new(), Vec::new());
    assert_eq!(firm.standing, None);
    assert!(firm.to_entity().entries.is_empty());
}

#[test]
fn recorded_pagination_reads_next_and_total_count() {
    let p1 = envelope("fca_765112_permissions_p1.json")
        .page
        .expect("ResultInfo");
    assert_eq!((p1.page, p1.per_page, p1.total_count), (1, 20, 38));
    assert!(p1.has_next);
    assert_eq!(p1.total_pages(), 2);
    let p2 = envelope("fca_765112_permissions_p2.json")
        .page
        .expect("ResultInfo");
    assert_eq!(p2.page, 2);
    assert!(!p2.has_next, "page 2 has `Previous` only");
    let barclays = envelope("fca_122702_permissions_p1.json")
        .page
        .expect("ResultInfo");
    assert_eq!(barclays.total_pages(), 3, "42 activities, 20 a page");
    assert!(envelope("fca_552016_passports.json").page.is_none());
}

#[test]
fn statuses_are_read_per_endpoint_and_unknown_codes_are_not_guessed() {
    use StatusClass::*;
    let cases = [
        (Endpoint::Firm, "FSR-API-02-01-00", Some(Ok)),
        (Endpoint::Firm, "FSR-API-02-01-11", Some(FirmNotFound)),
        (Endpoint::Firm, "FSR-API-02-01-21", Some(FirmNotFound)),
        (Endpoint::Firm, "FSR-API-01-01-11", Some(Unauthorised)),
        (Endpoint::Passports, "FSR-API-01-01-21", Some(Unauthorised)),
        (Endpoint::Permissions, "FSR-API-02-03-11", Some(NoRecords)),
        (Endpoint::Passports, "FSR-API-02-07-11", Some(NoRecords)),
        (
            Endpoint::Permissions,
            "FSR-API-99-99-99",
            Some(UpstreamFailure),
        ),
        (Endpoint::Passports, "FSR-API-02-07-22", Some(Refused)),
        // A code of another endpoint is not an answer for this one.
        (Endpoint::Firm, "FSR-API-02-03-00", None),
        (Endpoint::Firm, "FSR-API-02-07-11", None),
        (Endpoint::Permissions, "FSR-API-02-01-11", None),
        (Endpoint::Firm, "FSR-API-04-01-11", None),
        (Endpoint::Firm, "FSR-API-02-01-99", None),
    ];
    for (endpoint, code, class) in cases {
        assert_eq!(wire::classify(endpoint, code), class, "{endpoint} {code}");
    }
    assert!(wire::is_status_code("FSR-API-02-01-00"));
    for bad in [
        "FSR-API-2-01-00",
        "FSR-API-02-01-0a",
        "fsr-api-02-01-00",
        "OK",
        "",
    ] {
        assert!(!wire::is_status_code(bad), "{bad}");
    }
}

#[test]
fn broken_bodies_are_errors_not_panics() {
    let malformed = [&b"not json"[..], b"", b"{\"Status\":", b"\xff\xfe"];
    for body in malformed {
        assert!(matches!(
            wire::parse_envelope(body),
            Err(wire::WireError::Malformed(_))
        ));
    }
    let shapes = [
        &br#"[]"#[..],
        br#"{"Data":[]}"#,
        br#"{"Status":7}"#,
        br#"{"Status":"OK"}"#,
        br#"{"Status":"FSR-API-02-03-00","ResultInfo":{"page":"1","per_page":"0","total_count":"5"}}"#,
        br#"{"Status":"FSR-API-02-03-00","ResultInfo":{"page":"x"}}"#,
    ];
    for body in shapes {
        assert!(
            matches!(wire::parse_envelope(body), Err(wire::WireError::Shape(_))),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
    let data = |s: &str| serde_json::from_str::<serde_json::Value>(s).expect("test JSON");
    assert!(wire::firm_record(&data("{}")).is_err());
    assert!(wire::firm_record(&data("[]")).is_err());
    assert!(wire::firm_record(&data(r#"[{"FRN":"1"}]"#)).is_err());
    assert!(
        wire::firm_record(&data(
            r#"[{"FRN":"1","Organisation Name":"","Status":"Authorised","PSD / EMD Status":""}]"#
        ))
        .is_err()
    );
    assert!(
        wire::firm_record(&data(
            r#"[{"FRN":"1","Organisation Name":["x"],"Status":"","PSD / EMD Status":""}]"#
        ))
        .is_err()
    );
    assert!(wire::permission_names(&data("[1,2]")).is_err());
    assert!(wire::passport_records(&data(r#"{"Passports":[]}"#)).is_err());
    assert!(wire::passport_records(&data(r#"[{"Passports":[{"Country":1}]}]"#)).is_err());
}

#[test]
fn text_from_the_network_is_shortened_and_stripped_of_control_characters() {
    assert_eq!(wire::clean("a\r\nb\u{1b}[31m", 100), "a  b [31m");
    assert_eq!(
        wire::clean(&"x".repeat(500), 10),
        format!("{}…", "x".repeat(10))
    );
}

#[test]
fn credentials_never_show_the_key() {
    let c = FcaCredentials::new("ops@bank.example", "s3cr3t-k3y-value").expect("valid");
    let debug = format!("{c:?}");
    assert!(debug.contains("ops@bank.example"));
    assert!(!debug.contains("s3cr3t"), "{debug}");
    let config = FcaConfig::new(c);
    assert!(!format!("{config:?}").contains("s3cr3t"));
    assert!(FcaCredentials::new("", "k").is_err());
    assert!(FcaCredentials::new("a@b", "k\r\nX-Injected: 1").is_err());
    let missing = FcaCredentials::from_vars(|_| None).expect_err("unset");
    assert!(missing.to_string().contains(ENV_EMAIL));
    let from_vars = FcaCredentials::from_vars(|name| match name {
        ENV_EMAIL => Some("ops@bank.example".into()),
        ENV_KEY => Some(" s3cr3t \n".into()),
        _ => None,
    })
    .expect("both set");
    assert_eq!(from_vars.key, "s3cr3t");
}

#[test]
fn base_urls_that_would_leak_the_key_are_refused() {
    let c = FcaCredentials::new("a@b.example", "key").expect("valid");
    let with = |url: &str| {
        let mut config = FcaConfig::new(c.clone());
        config.base_url = url.into();
        config.checked_base()
    };
    assert_eq!(with(DEFAULT_BASE_URL).as_deref(), Ok(DEFAULT_BASE_URL));
    assert_eq!(
        with("http://127.0.0.1:8080/services/V0.1/").as_deref(),
        Ok("http://127.0.0.1:8080/services/V0.1")
    );
    assert!(with("http://[::1]:80/x").is_ok());
    for bad in [
        "http://register.fca.org.uk/services/V0.1",
        "ftp://register.fca.org.uk/",
        "https://register.fca.org.uk/services/V0.1?x=1",
        "not a url",
        "/services/V0.1",
    ] {
        assert!(with(bad).is_err(), "{bad}");
    }
    let mut config = FcaConfig::new(c);
    config.max_stale = config.ttl / 2;
    assert!(config.check().is_err());
}

/// A greedy client takes every token as soon as it exists, for three periods, and every window
/// of one period is checked: never more than the quota.
#[test]
fn the_token_bucket_never_admits_more_than_the_quota_in_any_window() {
    for requests in [1u32, 2, 3, 4, 7, 50] {
        let period = Duration::from_millis(400);
        let quota = FcaQuota { requests, period };
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::direct_with_clock(gcra_quota(quota), clock.clone());
        let mut admitted: Vec<u64> = Vec::new();
        for ms in 0..(3 * 400u64) {
            while limiter.check().is_ok() {
                admitted.push(ms);
            }
            clock.advance(Duration::from_millis(1));
        }
        assert!(!admitted.is_empty());
        for (i, start) in admitted.iter().enumerate() {
            let in_window = admitted[i..]
                .iter()
                .take_while(|t| **t <= start + 400)
                .count();
            assert!(
                in_window <= requests as usize,
                "quota {requests}: {in_window} requests in the window from {start} ms"
            );
        }
        // And the quota is used: at least half of it at once.
        assert!(admitted.iter().filter(|t| **t == 0).count() >= requests.div_ceil(2) as usize);
    }
}

/// The integrator calls `lookup` from spawned tasks: its future must be `Send`, and the
/// client shareable.
#[test]
fn the_client_and_its_lookup_future_can_cross_threads() {
    fn send<T: Send>(_: &T) {}
    fn shared<T: Send + Sync + Clone>() {}
    shared::<FcaRegister>();
    #[allow(dead_code)]
    fn lookup_is_send(r: &FcaRegister, f: &Frn) {
        send(&r.lookup(f));
        send(&r.lookup_reference("1"));
    }
}
