//! Loading safely: a file that fails is rejected with its name and the position of the fault,
//! and the snapshot in use stays in use.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use psp_cert::cert::PsdAuthNumber;
use psp_cert::country::CountryCode;
use psp_service::register::{
    RegisterConfig, RegisterFileConfig, RegisterFormat, RegisterLoadError, RegisterSnapshot,
};

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("register_loading")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

fn native(path: &str) -> RegisterFileConfig {
    RegisterFileConfig {
        path: path.into(),
        format: RegisterFormat::Native,
        nca_map: BTreeMap::new(),
        normalise: None,
        ..RegisterFileConfig::default()
    }
}

fn config(files: Vec<RegisterFileConfig>) -> RegisterConfig {
    RegisterConfig {
        files,
        ..RegisterConfig::default()
    }
}

const GOOD: &str = r#"{
  "version": 1,
  "registers": [{
    "ncaId": "XX-TEST", "name": "Test authority", "country": "XX",
    "entities": [{"reference": "1", "entries": [{
      "category": "Payment Institution", "legalName": "First PSP",
      "status": "Authorised", "services": [7, 8]}]}]
  }]
}"#;

/// The same register with the PSP renamed, for telling generations apart.
fn good_renamed() -> String {
    GOOD.replace("First PSP", "Second PSP")
}

fn legal_name(snapshot: &RegisterSnapshot) -> Option<String> {
    let auth = PsdAuthNumber {
        country: CountryCode::from_static("XX"),
        nca: "TEST".into(),
        reference: "1".into(),
    };
    snapshot
        .lookup(Some(&auth), CountryCode::from_static("XX"))
        .home
        .category_entries
        .first()
        .map(|e| e.psp_legal_name.clone())
}

fn expect_parse_error(err: RegisterLoadError, file: &Path) -> (usize, usize, String) {
    let text = err.to_string();
    match err {
        RegisterLoadError::Parse {
            path,
            line,
            column,
            message,
        } => {
            assert_eq!(path, file);
            assert!(text.starts_with(&file.display().to_string()), "{text}");
            assert!(
                text.contains(&format!("line {line}, column {column}")),
                "{text}"
            );
            (line, column, message)
        }
        other => panic!("expected a parse error, got {other}"),
    }
}

#[test]
fn a_truncated_file_is_rejected_with_its_position_and_the_old_snapshot_stays() {
    let dir = scratch("truncated");
    let file = dir.join("XX.json");
    std::fs::write(&file, GOOD).expect("write");
    let cfg = config(vec![native("XX.json")]);
    let (first, _) = psp_service::register::load(&cfg, &dir).expect("first load");
    assert_eq!(legal_name(&first).as_deref(), Some("First PSP"));

    let cut = &GOOD[..GOOD.len() / 2];
    std::fs::write(&file, cut).expect("write truncated");
    let err = psp_service::register::load(&cfg, &dir).expect_err("truncated JSON fails");
    let (line, _, message) = expect_parse_error(err, &file);
    assert_eq!(
        line,
        cut.lines().count(),
        "the error is at the end of what is there"
    );
    assert!(message.contains("EOF"), "{message}");

    assert_eq!(legal_name(&first).as_deref(), Some("First PSP"));
}

#[test]
fn a_value_of_the_wrong_type_is_rejected_at_its_line_and_the_old_snapshot_stays() {
    let dir = scratch("wrong_type");
    let file = dir.join("XX.json");
    std::fs::write(&file, GOOD).expect("write");
    let cfg = config(vec![native("XX.json")]);
    let (first, _) = psp_service::register::load(&cfg, &dir).expect("first load");

    std::fs::write(&file, GOOD.replace("[7, 8]", "\"seven\"")).expect("write wrong type");
    let err = psp_service::register::load(&cfg, &dir).expect_err("wrong type fails");
    let (line, column, message) = expect_parse_error(err, &file);
    let services_line = GOOD
        .lines()
        .position(|l| l.contains("\"services\""))
        .expect("the services line")
        + 1;
    assert_eq!(line, services_line);
    assert!(column > 1);
    assert!(message.contains("invalid type"), "{message}");
    assert_eq!(legal_name(&first).as_deref(), Some("First PSP"));
}

#[test]
fn unknown_fields_and_out_of_range_services_are_rejected_with_their_position() {
    let dir = scratch("unknown_field");
    let file = dir.join("XX.json");
    let cfg = config(vec![native("XX.json")]);

    std::fs::write(
        &file,
        GOOD.replace("\"legalName\"", "\"colour\": \"blue\", \"legalName\""),
    )
    .expect("write");
    let err = psp_service::register::load(&cfg, &dir).expect_err("unknown field");
    let (_, _, message) = expect_parse_error(err, &file);
    assert!(message.contains("unknown field `colour`"), "{message}");

    std::fs::write(&file, GOOD.replace("[7, 8]", "[7, 9]")).expect("write");
    let err = psp_service::register::load(&cfg, &dir).expect_err("service 9");
    let (_, _, message) = expect_parse_error(err, &file);
    assert!(
        message.contains("payment service 9 is not in 1 to 8"),
        "{message}"
    );
}

#[test]
fn a_successful_reload_swaps_in_the_next_generation() {
    let dir = scratch("reload");
    let file = dir.join("XX.json");
    std::fs::write(&file, GOOD).expect("write");
    let cfg = config(vec![native("XX.json")]);
    let (before, _) = psp_service::register::load(&cfg, &dir).expect("first load");

    std::fs::write(&file, good_renamed()).expect("write new data");
    let (after, report) = psp_service::register::load(&cfg, &dir).expect("reload");
    assert_eq!(report.files[0].registers[0].entities, 1);
    assert_eq!(legal_name(&after).as_deref(), Some("Second PSP"));
    // A reader that took the old snapshot keeps a consistent view.
    assert_eq!(legal_name(&before).as_deref(), Some("First PSP"));
}

#[test]
fn a_truncated_eba_export_is_rejected_with_its_position() {
    let dir = scratch("truncated_eba");
    let file = dir.join("eba.json");
    let export = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/data/registers/eba/eba_psd2_register_shape_example.json"),
    )
    .expect("the shape example");
    let cut = &export[..export.len() - 40];
    std::fs::write(&file, cut).expect("write");
    let mut eba = native("eba.json");
    eba.format = RegisterFormat::Eba;
    let err = psp_service::register::load(&config(vec![eba]), &dir).expect_err("truncated export");
    let (line, _, _) = expect_parse_error(err, &file);
    assert_eq!(line, cut.lines().count());
}

#[test]
fn an_eba_export_with_a_wrong_type_is_rejected_with_its_position() {
    let dir = scratch("wrong_type_eba");
    let file = dir.join("eba.json");
    std::fs::write(
        &file,
        "[[],\n[{\"CA_OwnerID\": \"IE_CBI\", \"EntityType\": \"PSD_PI\",\n \"Properties\": [{\"ENT_NAM\": {\"nested\": true}}]}]]",
    )
    .expect("write");
    let mut eba = native("eba.json");
    eba.format = RegisterFormat::Eba;
    let err = psp_service::register::load(&config(vec![eba]), &dir).expect_err("object as a name");
    let (line, _, message) = expect_parse_error(err, &file);
    assert_eq!(line, 3);
    assert!(
        message.contains("a string or a list of strings"),
        "{message}"
    );
}

#[test]
fn a_file_that_is_not_an_eba_export_is_refused_rather_than_loaded_empty() {
    let dir = scratch("not_eba");
    std::fs::write(dir.join("eba.json"), GOOD).expect("write");
    let mut eba = native("eba.json");
    eba.format = RegisterFormat::Eba;
    let err = psp_service::register::load(&config(vec![eba]), &dir).expect_err("no records");
    assert!(matches!(err, RegisterLoadError::Invalid { .. }), "{err}");
    assert!(err.to_string().contains("no EBA entity records"), "{err}");
}

#[test]
fn two_files_defining_one_nca_are_refused_naming_both() {
    let dir = scratch("duplicate");
    std::fs::write(dir.join("a.json"), GOOD).expect("write");
    std::fs::write(dir.join("b.json"), good_renamed()).expect("write");
    let err = psp_service::register::load(&config(vec![native("a.json"), native("b.json")]), &dir)
        .expect_err("duplicate NCA");
    let text = err.to_string();
    assert!(text.contains("XX-TEST"), "{text}");
    assert!(text.contains("a.json") && text.contains("b.json"), "{text}");
}

#[test]
fn content_rules_are_checked_and_name_the_file() {
    let dir = scratch("content");
    let file = dir.join("XX.json");
    let cfg = config(vec![native("XX.json")]);
    for (bad, expected) in [
        (
            GOOD.replace("\"XX-TEST\"", "\"XY-TEST\""),
            "does not start with the register's country",
        ),
        (
            GOOD.replace("\"version\": 1", "\"version\": 2"),
            "version 2 is not supported",
        ),
        (
            GOOD.replace("\"First PSP\"", "\"  \""),
            "legal name is empty",
        ),
        (
            GOOD.replace(
                "\"country\": \"XX\",",
                "\"country\": \"XX\", \"kind\": \"hub-directory\",",
            ),
            "service 8 is out of range for a hub-directory register (1 to 4)",
        ),
        (
            GOOD.replace(
                "\"services\": [7, 8]",
                "\"services\": [7, 8], \"passportOut\": {\"XX\": [7]}",
            ),
            "passport-out to the register's own country",
        ),
    ] {
        std::fs::write(&file, bad).expect("write");
        let err = psp_service::register::load(&cfg, &dir).expect_err(expected);
        let text = err.to_string();
        assert!(text.starts_with(&file.display().to_string()), "{text}");
        assert!(text.contains(expected), "{text}");
    }
}

#[test]
fn a_missing_file_is_reported_with_its_path() {
    let dir = scratch("missing");
    let err = psp_service::register::load(&config(vec![native("absent.json")]), &dir)
        .expect_err("missing file");
    assert!(matches!(err, RegisterLoadError::Read { .. }), "{err}");
    assert!(err.to_string().contains("absent.json"), "{err}");
}

#[test]
fn references_that_meet_after_normalisation_are_merged_into_one_entity() {
    let dir = scratch("merged");
    let two = GOOD.replace(
        "\"entities\": [",
        "\"entities\": [{\"reference\": \"0001\", \"entries\": [{\"category\": \"AISP\", \"legalName\": \"First PSP\", \"status\": \"Registered\", \"services\": [8]}]},",
    );
    std::fs::write(dir.join("XX.json"), two).expect("write");
    let (snapshot, report) =
        psp_service::register::load(&config(vec![native("XX.json")]), &dir).expect("loads");
    assert_eq!(report.files[0].merged_references, 1);
    let auth = PsdAuthNumber {
        country: CountryCode::from_static("XX"),
        nca: "TEST".into(),
        reference: "01".into(),
    };
    let result = snapshot.lookup(Some(&auth), CountryCode::from_static("XX"));
    let categories: Vec<&str> = result
        .home
        .category_entries
        .iter()
        .map(|e| e.category_name.as_str())
        .collect();
    assert_eq!(categories, vec!["AISP", "Payment Institution"]);
}

/// Issue 40 finding 7: two references normalised into one PSP with the same category
/// Authorised and Unauthorised were returned side by side, silently. The load report says so
/// (config check and `register load` print it), and the access rule lets the most
/// restrictive status decide (tests/policy.rs).
#[test]
fn contradicting_entries_after_normalisation_are_counted_and_reported() {
    let dir = scratch("contradicting");
    let two = GOOD.replace(
        "\"entities\": [",
        "\"entities\": [{\"reference\": \"0001\", \"entries\": [{\"category\": \"Payment Institution\", \"legalName\": \"First PSP\", \"status\": \"Unauthorised\", \"services\": []}]},",
    );
    std::fs::write(dir.join("XX.json"), two).expect("write");
    let (snapshot, report) =
        psp_service::register::load(&config(vec![native("XX.json")]), &dir).expect("loads");
    assert_eq!(report.files[0].registers[0].contradicting, 1);
    assert!(
        report
            .to_string()
            .contains("1 entities list one category with different statuses"),
        "{report}"
    );
    let auth = PsdAuthNumber {
        country: CountryCode::from_static("XX"),
        nca: "TEST".into(),
        reference: "1".into(),
    };
    let statuses: Vec<&str> = snapshot
        .lookup(Some(&auth), CountryCode::from_static("XX"))
        .home
        .category_entries
        .iter()
        .map(|e| e.psp_auth_status.as_str())
        .collect();
    assert_eq!(
        statuses.len(),
        2,
        "both entries are shown as the register has them"
    );
    // The control: without the second reference, nothing contradicts.
    std::fs::write(dir.join("XX.json"), GOOD).expect("write");
    let (_, report) =
        psp_service::register::load(&config(vec![native("XX.json")]), &dir).expect("loads");
    assert_eq!(report.files[0].registers[0].contradicting, 0);
}

/// The fresh-eyes attack of issue 40 (docs/attacks/proxy-and-data.md B5): a FIFO put in place
/// of a register file blocked the load, and every reload after it, with no sign. It is refused
/// at once now.
#[test]
fn a_fifo_in_place_of_a_register_file_is_refused_not_waited_on() {
    let dir = scratch("fifo");
    let fifo = dir.join("XX.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let cfg = config(vec![native("XX.json")]);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(psp_service::register::load(&cfg, &dir).map(|_| ()));
    });
    let outcome = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the load answers instead of waiting on the FIFO");
    let err = outcome.expect_err("a FIFO is not a register file");
    assert!(err.to_string().contains("not a regular file"), "{err}");
}
