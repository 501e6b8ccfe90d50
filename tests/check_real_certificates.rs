//! The check core against real certificates and real trusted lists from `../shared/data`.

mod common;

use common::*;
use psp_cert::cert::PspCertificate;
use psp_service::trust::QtspSource;

/// The real Czech list as a trust source, its signature verified and its signer pinned to
/// the certificates the real 2019 EU list of lists names for CZ ([`cz_signers_pem`]).
fn cz_tl() -> String {
    format!(
        r#"
[[trust.sources]]
name = "cz-tl"
qtsp_source = "EIDAS"
qtsp_jurisdiction = "EEA"
valid_for = ["EEA"]
trusted_lists = [{{ file = "../shared/data/trusted-lists/CZ-tl_seq77_2019-08-23.xml", signers = ["{}"] }}]
"#,
        cz_signers_pem().display()
    )
}

/// A time when the real 2019 Czech list (issued 2019-08-23, `NextUpdate` 2020-02-23) was
/// fresh: the lists are loaded as they were then, the certificates checked at each test's
/// own time (as `serve` does between two refreshes).
fn cz_fresh() -> time::OffsetDateTime {
    at("2020-01-15T00:00:00Z")
}

/// The certificates the real EU LOTL of 2019-09-04 authorises to sign the CZ list (its CZ
/// `OtherTSLPointer`s' `ServiceDigitalIdentities`), as a PEM file written once per test run.
fn cz_signers_pem() -> &'static std::path::Path {
    static PATH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let lotl = std::fs::read_to_string(data("trusted-lists/eu-lotl_seq248_2019-09-04.xml"))
            .expect("the LOTL is UTF-8");
        let doc = roxmltree::Document::parse(&lotl).expect("the LOTL parses");
        // The CZ pointers (the list in XML and in PDF form), each naming the signers.
        let pointers: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("OtherTSLPointer"))
            .filter(|p| {
                p.descendants().any(|n| {
                    n.has_tag_name("SchemeTerritory") && n.text().map(str::trim) == Some("CZ")
                })
            })
            .collect();
        assert!(!pointers.is_empty(), "the LOTL points to the CZ list");
        let mut ders: Vec<Vec<u8>> = pointers
            .iter()
            .flat_map(|p| p.descendants())
            .filter(|n| n.has_tag_name("X509Certificate"))
            .filter_map(|n| n.text())
            .map(|b64| {
                use base64::Engine;
                let clean: String = b64.chars().filter(|c| !c.is_whitespace()).collect();
                base64::engine::general_purpose::STANDARD
                    .decode(clean)
                    .expect("Base64 certificate")
            })
            .collect();
        let named = ders.len();
        ders.sort();
        ders.dedup();
        assert_eq!(
            (named, ders.len()),
            (6, 3),
            "the 2019 LOTL names three CZ signers, in each of its two CZ pointers (XML and PDF)"
        );
        let refs: Vec<&[u8]> = ders.iter().map(Vec::as_slice).collect();
        let path =
            std::env::temp_dir().join(format!("psp-gateway-{}-cz-signers.pem", std::process::id()));
        std::fs::write(&path, common::forge::pem_chain(&refs)).expect("signers written");
        path
    })
}

const OBIE_PP: &str = r#"
[[trust.sources]]
name = "obie-pp"
qtsp_source = "OBIE"
qtsp_jurisdiction = "GB"
valid_for = ["GB"]

[[trust.sources.issuers]]
pem = "../shared/data/psd2-certs/obie_pp_issuing_ca.pem"
kinds = ["web", "seal"]

[[trust.sources.issuers]]
pem = "../shared/data/psd2-certs/obie_pp_root_ca.pem"
kinds = ["web", "seal"]
"#;

fn creditas() -> PspCertificate {
    load_cert(&data("psd2-certs/ica_creditas_cz_qwac_psdcz_cnb.pem"))
}

#[test]
fn real_production_qwac_is_valid_against_the_real_czech_trusted_list_in_2020() {
    let trust = trust_at(&cz_tl(), cz_fresh());
    let r = run(&trust, &creditas(), &[], "CZ", at("2020-01-15T00:00:00Z"));
    assert_eq!(flags3(&r), (true, true, true), "{:#?}", r.explanation());
    assert_eq!(r.auth_number(), Some("PSDCZ-CNB-63492555"));
    assert_eq!(r.qtsp_common_name(), Some("I.CA SSL EV CA/RSA 10/2017"));
    assert_eq!(r.qtsp_source(), Some(QtspSource::Eidas));
    assert_eq!(r.qtsp_jurisdiction(), Some("EEA"));
    assert_eq!(r.psp_subject_name(), Some("Banka CREDITAS a.s."));
    assert!(
        !r.validity().not_revoked,
        "no revocation evidence: fail closed"
    );
    let codes: Vec<_> = r.errors().iter().map(|e| e.code.as_str()).collect();
    assert_eq!(codes, ["crl_response_error", "ocsp_response_error"]);
}

#[test]
fn the_real_czech_list_is_not_used_past_its_next_update_unless_the_grace_covers_it() {
    // Loaded today, the 2019 list is years past its NextUpdate: not used, and said so.
    let today = trust(&cz_tl());
    assert!(today.issuers().is_empty());
    let now = time::OffsetDateTime::now_utc();
    let problems = today.list_problems(now);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("past its NextUpdate (2020-02-23T00:00:00Z)"),
        "{problems:?}"
    );
    let r = run(&today, &creditas(), &[], "CZ", at("2020-01-15T00:00:00Z"));
    assert!(!r.validity().valid_qtsp, "{:#?}", r.explanation());
    // At the boundary: used at NextUpdate itself, not one second after.
    let at_next = trust_at(&cz_tl(), at("2020-02-23T00:00:00Z"));
    assert!(!at_next.issuers().is_empty());
    assert!(at_next.list_problems(at("2020-02-23T00:00:00Z")).is_empty());
    let after = trust_at(&cz_tl(), at("2020-02-23T00:00:01Z"));
    assert!(after.issuers().is_empty());
    // A one-day grace, configured, covers the day after and not a second more.
    let graced = format!("[trust]\nnext_update_grace_secs = 86400\n{}", cz_tl());
    assert!(
        !trust_at(&graced, at("2020-02-24T00:00:00Z"))
            .issuers()
            .is_empty()
    );
    let late = trust_at(&graced, at("2020-02-24T00:00:01Z"));
    assert!(late.issuers().is_empty());
    let p = late.list_problems(at("2020-02-24T00:00:01Z"));
    assert!(
        p[0].contains("and the grace (until 2020-02-24T00:00:00Z)"),
        "{p:?}"
    );
}

#[test]
fn a_loaded_list_stops_approving_the_instant_it_passes_its_next_update_without_a_reload() {
    // Loaded while fresh, as serve holds it between two refreshes.
    let trust = trust_at(&cz_tl(), cz_fresh());
    let r = run(&trust, &creditas(), &[], "CZ", at("2020-02-23T00:00:00Z"));
    assert!(r.validity().valid_qtsp, "{:#?}", r.explanation());
    let codes = |r: &psp_check::check::CheckReport| -> Vec<&'static str> {
        r.errors().iter().map(|e| e.code.as_str()).collect()
    };
    assert!(!codes(&r).contains(&"trusted_list_stale"));
    // One second past NextUpdate: the same snapshot approves nothing, and says why.
    let r = run(&trust, &creditas(), &[], "CZ", at("2020-02-23T00:00:01Z"));
    assert!(!r.validity().valid_qtsp, "{:#?}", r.explanation());
    assert_eq!(
        r.qtsp_source(),
        Some(QtspSource::Eidas),
        "the issuer is known"
    );
    let stale = r
        .errors()
        .iter()
        .find(|e| e.code.as_str() == "trusted_list_stale")
        .unwrap_or_else(|| panic!("{:#?}", r.errors()));
    assert!(
        stale
            .title
            .contains("past its NextUpdate (2020-02-23T00:00:00Z)")
            && stale.title.contains("CZ-tl_seq77_2019-08-23.xml"),
        "{}",
        stale.title
    );
    // The grace moves the instant, and only by the grace.
    let graced = format!("[trust]\nnext_update_grace_secs = 86400\n{}", cz_tl());
    let trust = trust_at(&graced, cz_fresh());
    let r = run(&trust, &creditas(), &[], "CZ", at("2020-02-24T00:00:00Z"));
    assert!(r.validity().valid_qtsp, "{:#?}", r.explanation());
    let r = run(&trust, &creditas(), &[], "CZ", at("2020-02-24T00:00:01Z"));
    assert!(!r.validity().valid_qtsp);
    assert!(
        codes(&r).contains(&"trusted_list_stale"),
        "{:#?}",
        r.errors()
    );
}

#[test]
fn the_same_qwac_today_is_expired_and_keeps_its_other_flags() {
    // The list must still be fresh when the check is made (freshness is judged at every
    // decision): ten years of grace, explicitly.
    let graced = format!("[trust]\nnext_update_grace_secs = 315360000\n{}", cz_tl());
    let trust = trust_at(&graced, cz_fresh());
    let r = run(&trust, &creditas(), &[], "CZ", at("2026-11-21T00:00:00Z"));
    assert_eq!(flags3(&r), (true, true, false));
    assert_eq!(r.qtsp_source(), Some(QtspSource::Eidas));
}

#[test]
fn a_czech_qwac_is_not_approved_outside_the_sources_jurisdictions() {
    let trust = trust_at(&cz_tl(), cz_fresh());
    let r = run(&trust, &creditas(), &[], "GB", at("2020-01-15T00:00:00Z"));
    assert_eq!(flags3(&r), (false, true, true));
    assert_eq!(
        r.qtsp_source(),
        Some(QtspSource::Eidas),
        "the issuer is known, only not approved here"
    );
}

#[test]
fn without_a_trust_list_the_qwac_is_untrusted_and_its_signature_cannot_be_checked() {
    let none = trust("");
    let r = run(&none, &creditas(), &[], "CZ", at("2020-01-15T00:00:00Z"));
    assert_eq!(flags3(&r), (false, false, true));
    assert_eq!(r.qtsp_source(), None);
    assert_eq!(r.qtsp_common_name(), Some("I.CA SSL EV CA/RSA 10/2017"));
    assert!(
        r.errors()
            .iter()
            .any(|e| e.code.as_str() == "issuer_key_not_found")
    );
}

#[test]
fn the_issuing_ca_presented_as_an_intermediate_verifies_the_signature_but_is_not_trusted() {
    let none = trust("");
    let ca = load_cert(&data("psd2-certs/ica_ssl_ev_ca_rsa_10_2017.pem"));
    let r = run(&none, &creditas(), &[ca], "CZ", at("2020-01-15T00:00:00Z"));
    assert_eq!(flags3(&r), (false, true, true));
}

#[test]
fn one_changed_byte_in_the_signed_part_fails_the_signature_and_nothing_else() {
    let trust = trust_at(&cz_tl(), cz_fresh());
    let original = creditas();
    // Change one letter of the subject CN `creditas.cz` inside the TBSCertificate.
    let mut der = original.der.clone();
    let pos = der
        .windows(b"creditas.cz".len())
        .position(|w| w == b"creditas.cz")
        .expect("the CN is in the DER");
    der[pos] = b'k';
    let tampered = PspCertificate::from_der(der).expect("still parses");
    let before = run(&trust, &original, &[], "CZ", at("2020-01-15T00:00:00Z"));
    let after = run(&trust, &tampered, &[], "CZ", at("2020-01-15T00:00:00Z"));
    assert!(before.validity().valid_signature);
    assert!(!after.validity().valid_signature);
    assert_eq!(after.validity().valid_qtsp, before.validity().valid_qtsp);
    assert_eq!(after.validity().not_expired, before.validity().not_expired);
    assert_eq!(after.validity().not_revoked, before.validity().not_revoked);
    assert_eq!(after.qtsp_source(), before.qtsp_source());
    assert!(
        !after
            .errors()
            .iter()
            .any(|e| e.code.as_str() == "issuer_key_not_found"),
        "the key was found; the signature is simply wrong"
    );
}

#[test]
fn obie_pre_production_certificates_are_trusted_as_obie_for_gb() {
    let trust = trust(OBIE_PP);
    let now = at("2026-11-21T00:00:00Z");
    for file in [
        "obie_pp_wso2_transport_qwac_2026.pem",
        "obie_pp_wso2_signing_qseal_2026.pem",
        "obie_pp_wso2_obwac_legacy_2026.pem",
    ] {
        let r = run(
            &trust,
            &load_cert(&data(&format!("psd2-certs/{file}"))),
            &[],
            "GB",
            now,
        );
        assert_eq!(
            flags3(&r),
            (true, true, true),
            "{file}: {:#?}",
            r.explanation()
        );
        assert_eq!(r.qtsp_source(), Some(QtspSource::Obie), "{file}");
        assert_eq!(r.qtsp_jurisdiction(), Some("GB"), "{file}");
    }
}

#[test]
fn an_expired_obie_certificate_keeps_its_issuer_and_signature_flags() {
    let trust = trust(OBIE_PP);
    let cert = load_cert(&data("psd2-certs/obie_pp_wso2_signing_expired_2024.pem"));
    let r = run(&trust, &cert, &[], "GB", at("2026-11-21T00:00:00Z"));
    assert_eq!(flags3(&r), (true, true, false));
}

#[test]
fn the_look_alike_of_the_obie_issuer_is_untrusted() {
    let trust = trust(OBIE_PP);
    let cert = load_cert(&data("psd2-certs/wso2_fake_obie_issuer_selfmade.pem"));
    assert_eq!(
        cert.issuer_cn.as_deref(),
        Some("OpenBanking Pre-Production Issuing CA")
    );
    let r = run(&trust, &cert, &[], "GB", at("2023-06-01T00:00:00Z"));
    assert!(!r.validity().valid_qtsp);
    assert!(!r.validity().valid_signature);
    assert_eq!(r.qtsp_source(), None);
    assert_eq!(r.qtsp_jurisdiction(), None);
    let wire = serde_json::to_value(r.to_wire("/docs/errors#")).unwrap();
    assert_eq!(wire["eIDAS"]["data"]["QTSPSource"], "Unknown");
    assert_eq!(wire["eIDAS"]["data"]["QTSPJurisdiction"], "Unknown");
    assert_eq!(
        wire["eIDAS"]["data"]["QTSPCommonName"],
        "OpenBanking Pre-Production Issuing CA"
    );
}

#[test]
fn a_qwac_under_a_trusted_root_is_approved_through_the_presented_intermediate() {
    // The e-Szigno test root is configured as a private anchor; the issuing CA (Test CA3)
    // arrives with the certificate, as in a TLS handshake.
    let trust = trust(
        r#"
[[trust.sources]]
name = "eszigno-test"
qtsp_source = "QTSP"
qtsp_jurisdiction = "EEA"
valid_for = ["EEA"]
[[trust.sources.issuers]]
pem = "../shared/data/psd2-certs/eszigno_test_root_ca_2008.pem"
kinds = ["web", "seal"]
"#,
    );
    let ca3 = load_cert(&data("psd2-certs/eszigno_test_ca3.pem"));
    let now = at("2023-03-02T12:30:00Z");
    for file in [
        "eszigno_test_qwac_psdfi.pem",
        "eszigno_test_qsealc_psdfi.pem",
    ] {
        let cert = load_cert(&data(&format!("psd2-certs/{file}")));
        let r = run(&trust, &cert, std::slice::from_ref(&ca3), "FI", now);
        assert_eq!(
            flags3(&r),
            (true, true, true),
            "{file}: {:#?}",
            r.explanation()
        );
        assert_eq!(r.auth_number(), Some("PSDFI-FINFSA-1234567-8"));
        assert_eq!(r.qtsp_source(), Some(QtspSource::Qtsp));
        // Without the intermediate there is no path and no issuer key.
        let r = run(&trust, &cert, &[], "FI", now);
        assert_eq!(flags3(&r), (false, false, true), "{file}");
    }
}

#[test]
fn a_presented_intermediate_that_does_not_chain_to_the_trust_list_is_not_trust() {
    // The e-Szigno CA3 is the certificate's real issuer, but only the OBIE anchors are
    // configured: the signature verifies, the issuer is not approved.
    let trust = trust(OBIE_PP);
    let ca3 = load_cert(&data("psd2-certs/eszigno_test_ca3.pem"));
    let cert = load_cert(&data("psd2-certs/eszigno_test_qwac_psdfi.pem"));
    let r = run(&trust, &cert, &[ca3], "GB", at("2023-03-02T12:30:00Z"));
    assert!(!r.validity().valid_qtsp);
    assert!(
        r.validity().valid_signature,
        "the presented issuer's key verifies"
    );
}

#[test]
fn untrusted_issuers_of_the_corpus_come_out_unknown() {
    let trust = trust_at(&format!("{}\n{OBIE_PP}", cz_tl()), cz_fresh());
    for (file, when) in [
        ("ing_sandbox_example_qwac.pem", "2021-01-01T00:00:00Z"),
        ("ing_sandbox_example_qsealc.pem", "2021-01-01T00:00:00Z"),
        (
            "dtrust_test_hanseatic_psdde_bafin.pem",
            "2020-01-01T00:00:00Z",
        ),
        (
            "bdr_psd2_test_subca_hanseatic_psdde_bafin.pem",
            "2019-01-01T00:00:00Z",
        ),
        (
            "adorsys_psd2accel_mock_qwac_nonpsd_orgid.pem",
            "2018-08-20T00:00:00Z",
        ),
        (
            "adorsys_xs2a_mock_qwac_psdde_fakenca.pem",
            "2021-01-01T00:00:00Z",
        ),
    ] {
        let r = run(
            &trust,
            &load_cert(&data(&format!("psd2-certs/{file}"))),
            &[],
            "DE",
            at(when),
        );
        assert!(!r.validity().valid_qtsp, "{file}");
        assert_eq!(r.qtsp_source(), None, "{file}");
        assert!(
            r.validity().not_expired,
            "{file} is inside its validity at {when}"
        );
    }
}

#[test]
fn a_non_ca_certificate_is_refused_as_a_configured_issuer() {
    let c = config(
        r#"
[[trust.sources]]
name = "wrong"
qtsp_source = "QTSP"
qtsp_jurisdiction = "EEA"
valid_for = ["EEA"]
[[trust.sources.issuers]]
pem = "../shared/data/psd2-certs/eszigno_test_qwac_psdfi.pem"
kinds = ["web"]
"#,
    );
    let e = c
        .load_trust(time::OffsetDateTime::now_utc())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a CA certificate"), "{e}");
    assert!(e.contains("wrong"), "{e}");
}

/// The real Czech list with `edit` applied to the I.CA QWAC service (from its name to the end
/// of its `TSPService`), written to a temporary file, as a trust source.
fn edited_czech_list(name: &str, edit: impl Fn(&str) -> String) -> psp_service::trust::TrustList {
    let xml = std::fs::read_to_string(data("trusted-lists/CZ-tl_seq77_2019-08-23.xml"))
        .expect("the CZ list is UTF-8");
    let start = xml
        .find("(104) I.CA - issuing qualified certificates for website authentication")
        .expect("the I.CA QWAC service");
    let end = start + xml[start..].find("</TSPService>").expect("its end");
    let edited = format!("{}{}{}", &xml[..start], edit(&xml[start..end]), &xml[end..]);
    assert_ne!(edited, xml, "{name}: the edit changed the list");
    let path =
        std::env::temp_dir().join(format!("psp-gateway-{}-cz-{name}.xml", std::process::id()));
    std::fs::write(&path, edited).expect("temporary list written");
    let t = trust_at(
        &format!(
            r#"
[[trust.sources]]
name = "cz-tl-edited"
qtsp_source = "EIDAS"
qtsp_jurisdiction = "EEA"
valid_for = ["EEA"]
trusted_lists = ["{0}"]

# The edit breaks the list's signature: loaded as an unsigned list of our own making.
[danger]
unsigned_trusted_lists = ["{0}"]
"#,
            path.display()
        ),
        cz_fresh(),
    );
    let _ = std::fs::remove_file(&path);
    t
}

const QSCD_AS_IN_CERT: &str =
    r#"uri="http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCQSCDStatusAsInCert""#;

#[test]
fn the_czech_qwac_services_qualifications_are_read_and_leave_the_qwac_approved() {
    // The real service carries a critical Qualifications extension (QCQSCDStatusAsInCert for
    // certificates with one of three I.CA policies); the QWAC has one of them.
    let cert = creditas();
    assert_eq!(
        cert.policies,
        ["1.3.6.1.4.1.23624.10.1.40.1.1", "0.4.0.194112.1.4"]
    );
    let trust = trust_at(&cz_tl(), cz_fresh());
    assert!(
        trust
            .notes()
            .iter()
            .all(|n| !n.contains("critical extensions not understood")),
        "{:?}",
        trust.notes()
    );
    let r = run(&trust, &cert, &[], "CZ", at("2020-01-15T00:00:00Z"));
    assert!(r.validity().valid_qtsp, "{:#?}", r.explanation());
}

#[test]
fn not_qualified_in_the_real_czech_list_withdraws_the_qwac_it_selects() {
    let not_qualified = edited_czech_list("not-qualified", |svc| {
        svc.replacen("QCQSCDStatusAsInCert", "NotQualified", 1)
    });
    let r = run(
        &not_qualified,
        &creditas(),
        &[],
        "CZ",
        at("2020-01-15T00:00:00Z"),
    );
    assert!(!r.validity().valid_qtsp);
    assert!(
        r.explanation().iter().any(|e| e.contains("NotQualified")),
        "{:#?}",
        r.explanation()
    );

    // The same qualifier for policies the QWAC does not carry changes nothing for it.
    let elsewhere = edited_czech_list("not-qualified-elsewhere", |svc| {
        svc.replacen("QCQSCDStatusAsInCert", "NotQualified", 1)
            .replace(
                "1.3.6.1.4.1.23624.10.1.40.1.1",
                "1.3.6.1.4.1.23624.10.1.40.1.9",
            )
    });
    let r = run(
        &elsewhere,
        &creditas(),
        &[],
        "CZ",
        at("2020-01-15T00:00:00Z"),
    );
    assert!(r.validity().valid_qtsp, "{:#?}", r.explanation());
}

#[test]
fn an_unknown_qualifier_in_the_real_czech_list_fails_closed_for_the_qwac() {
    let t = edited_czech_list("unknown-qualifier", |svc| {
        svc.replacen(
            QSCD_AS_IN_CERT,
            r#"uri="http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCForAnything""#,
            1,
        )
    });
    let r = run(&t, &creditas(), &[], "CZ", at("2020-01-15T00:00:00Z"));
    assert!(!r.validity().valid_qtsp);
    assert!(
        r.explanation()
            .iter()
            .any(|e| e.contains("QCForAnything applies to this certificate and is not understood")),
        "{:#?}",
        r.explanation()
    );
}

#[test]
fn an_unknown_critical_extension_in_the_real_czech_list_stops_the_service_being_used() {
    let t = edited_czech_list("unknown-critical", |svc| {
        svc.replacen(
            "</ServiceInformationExtensions>",
            r#"<Extension Critical="true"><x:NewRule xmlns:x="urn:example:new"/></Extension></ServiceInformationExtensions>"#,
            1,
        )
    });
    assert!(
        t.notes().iter().any(|n| n.contains("(104) I.CA")
            && n.contains("critical extensions not understood")
            && n.contains("{urn:example:new}NewRule")),
        "{:?}",
        t.notes()
    );
    let r = run(&t, &creditas(), &[], "CZ", at("2020-01-15T00:00:00Z"));
    assert!(!r.validity().valid_qtsp);
    assert!(
        r.explanation().iter().any(|e| e
            .contains("service extension {urn:example:new}NewRule is critical and not understood")),
        "{:#?}",
        r.explanation()
    );
    // Marked non-critical, the same extension is ignored (clause 5.5.9).
    let t = edited_czech_list("unknown-non-critical", |svc| {
        svc.replacen(
            "</ServiceInformationExtensions>",
            r#"<Extension Critical="false"><x:NewRule xmlns:x="urn:example:new"/></Extension></ServiceInformationExtensions>"#,
            1,
        )
    });
    let r = run(&t, &creditas(), &[], "CZ", at("2020-01-15T00:00:00Z"));
    assert!(r.validity().valid_qtsp, "{:#?}", r.explanation());
}

#[test]
fn a_czech_list_whose_signature_was_broken_is_refused_with_the_failed_reference() {
    // One ServiceStatus changed withdrawn → granted: an attacker "re-granting" a service.
    let toml = cz_tl().replace("CZ-tl_seq77_2019-08-23.xml", "CZ-tl_seq77_broken-sig.xml");
    let e = config(&toml)
        .load_trust(time::OffsetDateTime::now_utc())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("signature refused") && e.contains("reference URI=\"\" digest mismatch"),
        "{e}"
    );
}

#[test]
fn a_czech_list_signed_by_someone_the_configuration_does_not_pin_is_refused() {
    // The genuine list, with the OBIE CAs pinned as its signers instead.
    let toml = cz_tl().replace(
        &cz_signers_pem().display().to_string(),
        &data("psd2-certs/obie_pp_issuing_ca.pem")
            .display()
            .to_string(),
    );
    let e = config(&toml)
        .load_trust(time::OffsetDateTime::now_utc())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not among the signers configured for it"), "{e}");
}
