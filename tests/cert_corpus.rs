//! Every certificate of the shared PSD2 corpus, parsed and compared with the values an
//! independent decoder recorded in `expected.json`.
//!
//! The corpus lives outside the crate (`../shared/data/psd2-certs`); it is read, never copied.

use std::collections::BTreeSet;
use std::path::PathBuf;

use psp_cert::cert::{PspCertificate, QcStatementKind};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/psd2-certs")
}

fn expected_entries() -> Vec<Value> {
    let text = std::fs::read_to_string(corpus_dir().join("expected.json"))
        .expect("expected.json is readable");
    match serde_json::from_str(&text).expect("expected.json is JSON") {
        Value::Array(entries) => entries,
        other => panic!("expected.json is not an array: {other}"),
    }
}

/// The certificate files: every `*.pem` except the CRLs (`*.crl.pem`).
fn certificate_files() -> BTreeSet<String> {
    std::fs::read_dir(corpus_dir())
        .expect("corpus directory is readable")
        .map(|e| {
            e.expect("directory entry")
                .file_name()
                .into_string()
                .expect("UTF-8 file name")
        })
        .filter(|n| n.ends_with(".pem") && !n.ends_with(".crl.pem"))
        .collect()
}

fn opt_str(v: &Value) -> Option<&str> {
    v.as_str()
}

/// A list that the expected file writes as `null` when the extension is absent and `[]` when
/// it is present without entries; the certificate model has a plain list for both.
fn str_list(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().expect("string").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn time(v: &Value) -> OffsetDateTime {
    OffsetDateTime::parse(v.as_str().expect("time string"), &Rfc3339).expect("RFC 3339 time")
}

/// Extended key usage OIDs named as the expected file names them.
fn eku_name(oid: &str) -> &'static str {
    match oid {
        "1.3.6.1.5.5.7.3.1" => "serverAuth",
        "1.3.6.1.5.5.7.3.2" => "clientAuth",
        "1.3.6.1.5.5.7.3.3" => "codeSigning",
        "1.3.6.1.5.5.7.3.4" => "emailProtection",
        "1.3.6.1.5.5.7.3.8" => "timeStamping",
        "1.3.6.1.5.5.7.3.9" => "OCSPSigning",
        _ => "Unknown OID",
    }
}

fn statement_name(kind: &QcStatementKind) -> String {
    kind.name().to_owned()
}

#[test]
fn every_certificate_file_has_an_expected_entry_and_every_entry_a_file() {
    let files = certificate_files();
    let entries: BTreeSet<String> = expected_entries()
        .iter()
        .map(|e| e["file"].as_str().expect("file name").to_owned())
        .collect();
    assert!(!files.is_empty(), "the corpus holds certificates");
    let without_entry: Vec<_> = files.difference(&entries).collect();
    let without_file: Vec<_> = entries.difference(&files).collect();
    assert!(
        without_entry.is_empty(),
        "files without an entry: {without_entry:?}"
    );
    assert!(
        without_file.is_empty(),
        "entries without a file: {without_file:?}"
    );
}

#[test]
fn every_corpus_certificate_parses_to_its_expected_values() {
    let entries = expected_entries();
    let files = certificate_files();
    let mut checked = 0;
    for file in &files {
        let expected = entries
            .iter()
            .find(|e| e["file"].as_str() == Some(file.as_str()))
            .unwrap_or_else(|| panic!("{file}: no entry in expected.json"));
        let bytes = std::fs::read(corpus_dir().join(file)).expect("certificate file is readable");
        let cert = PspCertificate::parse(&bytes).unwrap_or_else(|e| panic!("{file}: {e}"));
        check(file, &cert, expected);
        checked += 1;
    }
    assert_eq!(checked, files.len());
}

fn check(file: &str, cert: &PspCertificate, e: &Value) {
    assert_eq!(
        Some(cert.subject.as_str()),
        opt_str(&e["subject"]),
        "{file}: subject (RFC 4514)"
    );
    assert_eq!(
        Some(cert.issuer.as_str()),
        opt_str(&e["issuer"]),
        "{file}: issuer (RFC 4514)"
    );
    assert_eq!(
        cert.subject_cn.as_deref(),
        opt_str(&e["subject_cn"]),
        "{file}: subject CN"
    );
    assert_eq!(
        cert.subject_o.as_deref(),
        opt_str(&e["subject_o"]),
        "{file}: subject O"
    );
    assert_eq!(
        cert.subject_c.as_deref(),
        opt_str(&e["subject_c"]),
        "{file}: subject C"
    );
    assert_eq!(
        cert.issuer_cn.as_deref(),
        opt_str(&e["issuer_cn"]),
        "{file}: issuer CN"
    );
    assert_eq!(
        cert.organization_identifier
            .as_ref()
            .map(|o| o.raw.as_str()),
        opt_str(&e["organization_identifier"]),
        "{file}: organizationIdentifier"
    );
    assert_eq!(
        Some(cert.serial_hex().as_str()),
        opt_str(&e["serial_hex"]),
        "{file}: serial"
    );
    assert_eq!(cert.not_before, time(&e["not_before"]), "{file}: notBefore");
    assert_eq!(cert.not_after, time(&e["not_after"]), "{file}: notAfter");
    assert_eq!(
        Some(cert.fingerprint_hex().as_str()),
        opt_str(&e["sha256"]),
        "{file}: SHA-256"
    );
    assert_eq!(
        cert.crl_urls,
        str_list(&e["crl_dp"]),
        "{file}: CRL distribution points"
    );
    assert_eq!(cert.ocsp_urls, str_list(&e["ocsp"]), "{file}: OCSP");
    assert_eq!(
        cert.ca_issuers_urls,
        str_list(&e["ca_issuers"]),
        "{file}: caIssuers"
    );
    assert_eq!(cert.is_ca, e["ca"].as_bool(), "{file}: basicConstraints cA");
    assert_eq!(
        cert.extended_key_usage
            .as_ref()
            .map(|oids| oids.iter().map(|o| eku_name(o)).collect::<Vec<_>>()),
        e["eku"].as_array().map(|a| a
            .iter()
            .map(|s| s.as_str().expect("EKU name"))
            .collect::<Vec<_>>()),
        "{file}: extended key usage"
    );

    // The PSD2 auth number, when the identifier has the PSD2 form.
    let org_id = opt_str(&e["organization_identifier"]);
    assert_eq!(
        cert.auth_number().is_some(),
        org_id.is_some_and(|o| o.starts_with("PSD")),
        "{file}: PSD2 auth number"
    );

    let qc_warnings: Vec<&str> = cert.qc_warnings().collect();
    match (&cert.qc, &e["qc"]) {
        (None, Value::Null) => {
            assert!(
                qc_warnings.is_empty(),
                "{file}: QC warnings without QC statements"
            );
        }
        (Some(qc), eq @ Value::Object(_)) => {
            assert_eq!(
                Some(qc.critical),
                e["qc_statements_critical"].as_bool(),
                "{file}: qcStatements critical"
            );
            let names: Vec<String> = qc.statements.iter().map(statement_name).collect();
            assert_eq!(names, str_list(&eq["statements"]), "{file}: statements");
            let types: Vec<&str> = qc.types.iter().map(|t| t.name()).collect();
            assert_eq!(types, str_list(&eq["qc_types"]), "{file}: QcType");
            match (&qc.psd2, &eq["psd2"]) {
                (None, Value::Null) => {}
                (Some(psd2), ep @ Value::Object(_)) => {
                    let roles: Vec<(String, String)> = psd2
                        .roles
                        .iter()
                        .map(|r| (r.oid.clone(), r.name.clone()))
                        .collect();
                    let expected_roles: Vec<(String, String)> = ep["roles"]
                        .as_array()
                        .expect("roles array")
                        .iter()
                        .map(|r| {
                            (
                                r["oid"].as_str().expect("oid").to_owned(),
                                r["name"].as_str().expect("name").to_owned(),
                            )
                        })
                        .collect();
                    assert_eq!(roles, expected_roles, "{file}: PSD2 roles");
                    for (role, er) in psd2
                        .roles
                        .iter()
                        .zip(ep["roles"].as_array().into_iter().flatten())
                    {
                        assert_eq!(
                            role.role.is_some_and(|r| r.name() == role.name),
                            er["oid_matches_name"].as_bool() == Some(true),
                            "{file}: role OID matches name"
                        );
                    }
                    assert_eq!(
                        Some(psd2.nca_name.as_str()),
                        ep["nca_name"].as_str(),
                        "{file}: NCA name"
                    );
                    assert_eq!(
                        Some(psd2.nca_id.as_str()),
                        ep["nca_id"].as_str(),
                        "{file}: NCA id"
                    );
                }
                (ours, theirs) => panic!("{file}: PSD2 statement {ours:?} vs expected {theirs}"),
            }
            let expected_warnings = eq["warnings"].as_array().map_or(0, Vec::len);
            assert_eq!(
                !qc_warnings.is_empty(),
                expected_warnings > 0,
                "{file}: QC warnings {qc_warnings:?} vs expected {}",
                eq["warnings"]
            );
        }
        (ours, theirs) => panic!("{file}: QC statements {ours:?} vs expected {theirs}"),
    }
}

#[test]
fn the_flattened_roles_of_the_wso2_certificate_yield_one_role_and_a_warning() {
    let bytes = std::fs::read(corpus_dir().join("wso2_fake_obie_issuer_selfmade.pem"))
        .expect("corpus file");
    let cert = PspCertificate::parse(&bytes).expect("parses");
    let psd2 = cert
        .qc
        .as_ref()
        .and_then(|q| q.psd2.as_ref())
        .expect("PSD2 statement");
    assert_eq!(psd2.role_set(), vec![psp_cert::cert::Psd2Role::PspAs]);
    assert!(
        cert.qc_warnings()
            .any(|w| w.contains("RoleOfPSP SEQUENCE has 8 elements")),
        "{:?}",
        cert.warnings
    );
}

#[test]
fn the_adorsys_country_name_germany_is_kept_and_reported() {
    let bytes = std::fs::read(corpus_dir().join("adorsys_xs2a_mock_qwac_psdde_fakenca.pem"))
        .expect("corpus file");
    let cert = PspCertificate::parse(&bytes).expect("parses");
    assert_eq!(cert.subject_c.as_deref(), Some("Germany"));
    assert!(
        cert.warnings
            .iter()
            .any(|w| w.contains("countryName `Germany`"))
    );
    let auth = cert.auth_number().expect("PSD2 auth number");
    assert_eq!(
        (
            auth.country.as_str(),
            auth.nca.as_str(),
            auth.reference.as_str()
        ),
        ("DE", "FAKENCA", "87B2AC")
    );
    assert_eq!(cert.psp_subject_name(), Some("Fictional Corporation AG"));
}

#[test]
fn the_ing_sandbox_certificate_has_no_subject_name_but_an_auth_number() {
    let bytes =
        std::fs::read(corpus_dir().join("ing_sandbox_example_qwac.pem")).expect("corpus file");
    let cert = PspCertificate::parse(&bytes).expect("parses");
    assert_eq!(cert.psp_subject_name(), None);
    assert_eq!(
        cert.auth_number().map(|a| a.nca_id()).as_deref(),
        Some("NL-SBX")
    );
    assert!(cert.qc.as_ref().is_some_and(|q| q.has_compliance()));
}

#[test]
fn the_subject_name_falls_back_from_organization_to_common_name() {
    let bytes =
        std::fs::read(corpus_dir().join("eszigno_test_qwac_psdfi.pem")).expect("corpus file");
    let cert = PspCertificate::parse(&bytes).expect("parses");
    assert_eq!(cert.psp_subject_name(), Some("Certificate Verifier"));
    let without_o = PspCertificate {
        subject_o: None,
        ..cert
    };
    assert_eq!(without_o.psp_subject_name(), Some("crt-prsr.com"));
}

#[test]
fn validity_includes_both_ends_and_nothing_outside() {
    let bytes = std::fs::read(corpus_dir().join("ica_creditas_cz_qwac_psdcz_cnb.pem"))
        .expect("corpus file");
    let cert = PspCertificate::parse(&bytes).expect("parses");
    let second = time::Duration::seconds(1);
    assert!(cert.is_valid_at(cert.not_before));
    assert!(cert.is_valid_at(cert.not_after));
    assert!(!cert.is_valid_at(cert.not_before - second));
    assert!(!cert.is_valid_at(cert.not_after + second));
    assert!(cert.is_valid_at(time::macros::datetime!(2020-01-15 00:00 UTC)));
}
