//! Each sandbox scenario's certificate flags, as the contract's sandbox table says, with the
//! repository's `gateway.toml` and the committed `certs/`.

mod common;

use common::*;
use psp_service::trust::QtspSource;

/// A fixed time inside the sandbox certificates' validity (2025-01-01 → 2055-01-01).
const NOW: &str = "2026-11-21T00:00:00Z";

/// (scenario, jurisdiction, validQTSP, validSignature, notExpired, QTSPSource)
type Row = (
    &'static str,
    &'static str,
    bool,
    bool,
    bool,
    Option<QtspSource>,
);

const TABLE: &[Row] = &[
    ("valid", "XX", true, true, true, Some(QtspSource::Eidas)),
    (
        "unauthorised",
        "XX",
        true,
        true,
        true,
        Some(QtspSource::Eidas),
    ),
    ("roles-1-2", "XX", true, true, true, Some(QtspSource::Eidas)),
    ("expired", "XX", true, true, false, Some(QtspSource::Eidas)),
    ("untrusted", "XX", false, false, true, None),
    ("revoked", "XX", true, true, true, Some(QtspSource::Eidas)),
    (
        "no-revocation",
        "XX",
        true,
        true,
        true,
        Some(QtspSource::Eidas),
    ),
    ("tampered", "XX", true, false, true, Some(QtspSource::Eidas)),
    (
        "passport-out-xy",
        "XY",
        true,
        true,
        true,
        Some(QtspSource::Eidas),
    ),
    ("gb-tpr", "GB", true, true, true, Some(QtspSource::Eidas)),
    ("role-5", "XX", true, true, true, Some(QtspSource::Eidas)),
    ("obie-valid", "GB", true, true, true, Some(QtspSource::Obie)),
    ("obhd-valid", "XX", true, true, true, Some(QtspSource::Obhd)),
    ("qseal", "XX", true, true, true, Some(QtspSource::Eidas)),
    ("ecdsa", "XX", true, true, true, Some(QtspSource::Eidas)),
    ("aisp", "XX", true, true, true, Some(QtspSource::Eidas)),
    (
        "credit-institution",
        "XX",
        true,
        true,
        true,
        Some(QtspSource::Eidas),
    ),
    ("exempt", "XX", true, true, true, Some(QtspSource::Eidas)),
];

#[test]
fn every_sandbox_scenario_has_the_flags_of_the_contracts_table() {
    let trust = sandbox_trust();
    for &(name, j, qtsp, sig, expiry, source) in TABLE {
        let cert = load_cert(&root().join(format!("certs/psp/{name}.pem")));
        let r = run(&trust, &cert, &[], j, at(NOW));
        assert_eq!(
            flags3(&r),
            (qtsp, sig, expiry),
            "{name}: {:#?}",
            r.explanation()
        );
        assert_eq!(r.qtsp_source(), source, "{name}");
        assert!(
            !r.validity().not_revoked,
            "{name}: no revocation evidence, fail closed"
        );
    }
}

#[test]
fn the_table_covers_every_sandbox_certificate() {
    let mut files: Vec<String> = std::fs::read_dir(root().join("certs/psp"))
        .expect("certs/psp exists")
        .filter_map(|e| {
            let name = e
                .expect("dir entry")
                .file_name()
                .into_string()
                .expect("utf-8");
            name.strip_suffix(".pem").map(str::to_owned)
        })
        .collect();
    files.sort();
    let mut names: Vec<String> = TABLE.iter().map(|t| t.0.to_owned()).collect();
    names.sort();
    assert_eq!(files, names);
}

#[test]
fn an_untrusted_issuer_reports_unknown_source_and_jurisdiction_on_the_wire() {
    let trust = sandbox_trust();
    let cert = load_cert(&root().join("certs/psp/untrusted.pem"));
    let r = run(&trust, &cert, &[], "XX", at(NOW));
    let wire = serde_json::to_value(r.to_wire("/docs/errors#")).expect("serialises");
    let data = &wire["eIDAS"]["data"];
    assert_eq!(data["QTSPSource"], "Unknown");
    assert_eq!(data["QTSPJurisdiction"], "Unknown");
    assert_eq!(
        data["QTSPCommonName"],
        "PSP Gateway Sandbox QTSP Issuing CA"
    );
    assert_eq!(data["authNumber"], "PSDXX-TEST-000005");
    assert_eq!(data["pspSubjectName"], "Sandbox Untrusted PSP");
}

#[test]
fn the_obie_certificate_is_not_approved_outside_gb_but_its_source_is_still_named() {
    let trust = sandbox_trust();
    let cert = load_cert(&root().join("certs/psp/obie-valid.pem"));
    let r = run(&trust, &cert, &[], "XX", at(NOW));
    assert_eq!(flags3(&r), (false, true, true));
    assert_eq!(r.qtsp_source(), Some(QtspSource::Obie));
    assert_eq!(r.qtsp_jurisdiction(), Some("GB"));
}

/// The serialised wire form is made once per result and shared: the same bytes as
/// serialising `to_wire`, for each link base; another result is serialised anew.
#[test]
fn the_wire_json_is_the_wire_form_serialised_once_per_report_and_link_base() {
    let trust = sandbox_trust();
    let cert = load_cert(&root().join("certs/psp/untrusted.pem"));
    let report = run(&trust, &cert, &[], "XX", at(NOW));
    let r = psp_service::service::Checked::new(report.clone());
    for base in ["/docs/errors#", "https://bank.example/errors#"] {
        let expected = serde_json::to_vec(&r.to_wire(base)).expect("serialises");
        let first = r.wire_json(base).expect("serialises");
        assert_eq!(first.as_ref(), expected.as_slice(), "{base}");
        assert_eq!(r.wire_json(base).expect("serialises"), first, "{base}");
    }
    let other = run(
        &trust,
        &load_cert(&root().join("certs/psp/valid.pem")),
        &[],
        "XX",
        at(NOW),
    );
    let auth = other
        .auth_number()
        .expect("valid.pem names its PSP")
        .to_owned();
    assert_ne!(report.auth_number(), Some(auth.as_str()));
    let json = psp_service::service::Checked::new(other)
        .wire_json("/docs/errors#")
        .expect("serialises");
    assert!(
        String::from_utf8_lossy(&json).contains(&auth),
        "another result does not carry the first one's bytes"
    );
}
