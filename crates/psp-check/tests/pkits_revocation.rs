//! NIST PKITS section 4.4 (basic certificate revocation tests) against our CRL verifier
//! (`../shared/data/pkits/`, TEST-SUITES.md section 2).
//!
//! For each case the chain is named here (the CAs below the trust anchor, as in PKITS.pdf,
//! and the CA's CRL-signing certificate where it has one), and the case runs through the
//! check core as the checking service runs it (`crates/psp-check/tests/conformance_support`): the path is
//! built and verified, then the revocation of every certificate of the path below the trust
//! anchor is established from the case's CRLs with the product's CRL code and
//! `check::RevocationPlan`. A CRL must verify with the issuer's key, or with another key of
//! the issuer whose certificate has a verified path to the same trust anchor (RFC 5280
//! section 6.3.3 (f)), whose own revocation is then checked too; be current at the
//! validation time; and cover the certificate. The end entity is valid when every
//! certificate has a usable CRL that does not list it; any listed certificate or any
//! certificate without a usable CRL ("revocation status unknown", PKITS's default) makes it
//! invalid.
//!
//! No case diverges: 4.4.19 (a CRL signed by the CA's separate CRL-signing key) is valid,
//! 4.4.20 invalid because that CRL lists the end entity, 4.4.21 invalid because the
//! CRL-signing certificate is revoked by the trust anchor
//! (`the_separate_crl_signing_key_is_relied_on_only_while_its_certificate_is_not_revoked`).

#[path = "conformance_support/mod.rs"]
mod conformance;

use conformance::{at, data, read};
use psp_check::cert::PspCertificate;
use psp_check::revocation::crl::CrlIndex;

const TRUST_ANCHOR: &str = "TrustAnchorRootCertificate";
const TRUST_ANCHOR_CRL: &str = "TrustAnchorRootCRL";
/// The validation time TEST-SUITES.md suggests (the PKITS 2048 material is valid 2010–2030).
const VALIDATION_TIME: &str = "2020-06-15T00:00:00Z";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expected {
    Valid,
    Invalid,
}

/// One PKITS 4.4 case: the end entity, the CAs from the trust anchor down, and for each
/// issuer (trust anchor included) the CRL files it publishes.
struct Case {
    section: &'static str,
    ee: &'static str,
    expected: Expected,
    cas: &'static [&'static str],
    crls: &'static [(&'static str, &'static [&'static str])],
}

use Expected::{Invalid, Valid};

const CASES: &[Case] = &[
    Case {
        section: "4.4.1",
        ee: "InvalidMissingCRLTest1EE",
        expected: Invalid,
        cas: &["NoCRLCACert"],
        crls: &[("NoCRLCACert", &[])],
    },
    Case {
        section: "4.4.2",
        ee: "InvalidRevokedCATest2EE",
        expected: Invalid,
        cas: &["GoodCACert", "RevokedsubCACert"],
        crls: &[
            ("GoodCACert", &["GoodCACRL"]),
            ("RevokedsubCACert", &["RevokedsubCACRL"]),
        ],
    },
    Case {
        section: "4.4.3",
        ee: "InvalidRevokedEETest3EE",
        expected: Invalid,
        cas: &["GoodCACert"],
        crls: &[("GoodCACert", &["GoodCACRL"])],
    },
    Case {
        section: "4.4.4",
        ee: "InvalidBadCRLSignatureTest4EE",
        expected: Invalid,
        cas: &["BadCRLSignatureCACert"],
        crls: &[("BadCRLSignatureCACert", &["BadCRLSignatureCACRL"])],
    },
    Case {
        section: "4.4.5",
        ee: "InvalidBadCRLIssuerNameTest5EE",
        expected: Invalid,
        cas: &["BadCRLIssuerNameCACert"],
        crls: &[("BadCRLIssuerNameCACert", &["BadCRLIssuerNameCACRL"])],
    },
    Case {
        section: "4.4.6",
        ee: "InvalidWrongCRLTest6EE",
        expected: Invalid,
        cas: &["WrongCRLCACert"],
        crls: &[("WrongCRLCACert", &["WrongCRLCACRL"])],
    },
    Case {
        section: "4.4.7",
        ee: "ValidTwoCRLsTest7EE",
        expected: Valid,
        cas: &["TwoCRLsCACert"],
        crls: &[("TwoCRLsCACert", &["TwoCRLsCABadCRL", "TwoCRLsCAGoodCRL"])],
    },
    Case {
        section: "4.4.8",
        ee: "InvalidUnknownCRLEntryExtensionTest8EE",
        expected: Invalid,
        cas: &["UnknownCRLEntryExtensionCACert"],
        crls: &[(
            "UnknownCRLEntryExtensionCACert",
            &["UnknownCRLEntryExtensionCACRL"],
        )],
    },
    Case {
        section: "4.4.9",
        ee: "InvalidUnknownCRLExtensionTest9EE",
        expected: Invalid,
        cas: &["UnknownCRLExtensionCACert"],
        crls: &[("UnknownCRLExtensionCACert", &["UnknownCRLExtensionCACRL"])],
    },
    Case {
        section: "4.4.10",
        ee: "InvalidUnknownCRLExtensionTest10EE",
        expected: Invalid,
        cas: &["UnknownCRLExtensionCACert"],
        crls: &[("UnknownCRLExtensionCACert", &["UnknownCRLExtensionCACRL"])],
    },
    Case {
        section: "4.4.11",
        ee: "InvalidOldCRLnextUpdateTest11EE",
        expected: Invalid,
        cas: &["OldCRLnextUpdateCACert"],
        crls: &[("OldCRLnextUpdateCACert", &["OldCRLnextUpdateCACRL"])],
    },
    Case {
        section: "4.4.12",
        ee: "Invalidpre2000CRLnextUpdateTest12EE",
        expected: Invalid,
        cas: &["pre2000CRLnextUpdateCACert"],
        crls: &[("pre2000CRLnextUpdateCACert", &["pre2000CRLnextUpdateCACRL"])],
    },
    Case {
        section: "4.4.13",
        ee: "ValidGeneralizedTimeCRLnextUpdateTest13EE",
        expected: Valid,
        cas: &["GeneralizedTimeCRLnextUpdateCACert"],
        crls: &[(
            "GeneralizedTimeCRLnextUpdateCACert",
            &["GeneralizedTimeCRLnextUpdateCACRL"],
        )],
    },
    Case {
        section: "4.4.14",
        ee: "ValidNegativeSerialNumberTest14EE",
        expected: Valid,
        cas: &["NegativeSerialNumberCACert"],
        crls: &[("NegativeSerialNumberCACert", &["NegativeSerialNumberCACRL"])],
    },
    Case {
        section: "4.4.15",
        ee: "InvalidNegativeSerialNumberTest15EE",
        expected: Invalid,
        cas: &["NegativeSerialNumberCACert"],
        crls: &[("NegativeSerialNumberCACert", &["NegativeSerialNumberCACRL"])],
    },
    Case {
        section: "4.4.16",
        ee: "ValidLongSerialNumberTest16EE",
        expected: Valid,
        cas: &["LongSerialNumberCACert"],
        crls: &[("LongSerialNumberCACert", &["LongSerialNumberCACRL"])],
    },
    Case {
        section: "4.4.17",
        ee: "ValidLongSerialNumberTest17EE",
        expected: Valid,
        cas: &["LongSerialNumberCACert"],
        crls: &[("LongSerialNumberCACert", &["LongSerialNumberCACRL"])],
    },
    Case {
        section: "4.4.18",
        ee: "InvalidLongSerialNumberTest18EE",
        expected: Invalid,
        cas: &["LongSerialNumberCACert"],
        crls: &[("LongSerialNumberCACert", &["LongSerialNumberCACRL"])],
    },
    Case {
        section: "4.4.19",
        ee: "ValidSeparateCertificateandCRLKeysTest19EE",
        expected: Valid,
        cas: &["SeparateCertificateandCRLKeysCertificateSigningCACert"],
        crls: &[(
            "SeparateCertificateandCRLKeysCertificateSigningCACert",
            &["SeparateCertificateandCRLKeysCRL"],
        )],
    },
    Case {
        section: "4.4.20",
        ee: "InvalidSeparateCertificateandCRLKeysTest20EE",
        expected: Invalid,
        cas: &["SeparateCertificateandCRLKeysCertificateSigningCACert"],
        crls: &[(
            "SeparateCertificateandCRLKeysCertificateSigningCACert",
            &["SeparateCertificateandCRLKeysCRL"],
        )],
    },
    Case {
        section: "4.4.21",
        ee: "InvalidSeparateCertificateandCRLKeysTest21EE",
        expected: Invalid,
        cas: &["SeparateCertificateandCRLKeysCA2CertificateSigningCACert"],
        crls: &[(
            "SeparateCertificateandCRLKeysCA2CertificateSigningCACert",
            &["SeparateCertificateandCRLKeysCA2CRL"],
        )],
    },
];

/// The CA's separate CRL-signing certificate, presented with the chain (PKITS gives it to
/// the relying party as it gives the CA certificates).
fn crl_signing_certificates(ee: &str) -> &'static [&'static str] {
    match ee {
        "ValidSeparateCertificateandCRLKeysTest19EE"
        | "InvalidSeparateCertificateandCRLKeysTest20EE" => {
            &["SeparateCertificateandCRLKeysCRLSigningCert"]
        }
        "InvalidSeparateCertificateandCRLKeysTest21EE" => {
            &["SeparateCertificateandCRLKeysCA2CRLSigningCert"]
        }
        _ => &[],
    }
}

fn cert(name: &str) -> PspCertificate {
    let path = data(&format!("pkits/certs/{name}.crt"));
    PspCertificate::from_der(read(&path)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The check core's report on the case (see the module documentation).
fn report(case: &Case) -> conformance::Run {
    let presented: Vec<PspCertificate> = case
        .cas
        .iter()
        .chain(crl_signing_certificates(case.ee))
        .map(|&n| cert(n))
        .collect();
    let mut files: Vec<&str> = vec![TRUST_ANCHOR_CRL];
    for (_, crls) in case.crls {
        files.extend(crls.iter().copied());
    }
    let crls: Vec<conformance::Crl> = files
        .into_iter()
        .map(|name| conformance::Crl {
            name: name.to_owned(),
            bytes: read(&data(&format!("pkits/crls/{name}.crl"))),
        })
        .collect();
    conformance::run_case(
        &[cert(TRUST_ANCHOR)],
        &cert(case.ee),
        &presented,
        at(VALIDATION_TIME),
        Some(&crls),
    )
}

fn run(case: &Case) -> Result<(), String> {
    let r = report(case);
    match r.outcome {
        conformance::Outcome::Success => Ok(()),
        conformance::Outcome::Failure => Err(r.detail()),
    }
}

#[test]
fn every_section_4_4_case_gives_its_expected_outcome() {
    assert_eq!(CASES.len(), 21, "PKITS 4.4 has 21 tests");
    let mut report = Vec::new();
    let mut unexpected = Vec::new();
    for case in CASES {
        let verdict = run(case);
        let got = if verdict.is_ok() { Valid } else { Invalid };
        report.push(format!(
            "{} {}: expected {:?}, got {:?}{}",
            case.section,
            case.ee,
            case.expected,
            got,
            verdict
                .as_ref()
                .err()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ));
        if got != case.expected {
            unexpected.push(format!(
                "{} {}: expected {:?}, got {:?}: {:?}",
                case.section, case.ee, case.expected, got, verdict
            ));
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(
        unexpected.is_empty(),
        "{}\n\nall cases:\n{}",
        unexpected.join("\n"),
        report.join("\n")
    );
}

/// PKITS 4.4.19 to 4.4.21: the CA "Separate Certificate and CRL Keys" signs certificates
/// with one key and CRLs with another, each certified by the trust anchor under the CA's
/// name. The CRL is used after a path to its signer verified (RFC 5280 section 6.3.3 (f)), and
/// the signer's own certificate is checked against the trust anchor's CRL: each case is
/// invalid, or valid, for its own reason.
#[test]
fn the_separate_crl_signing_key_is_relied_on_only_while_its_certificate_is_not_revoked() {
    let case = |ee: &str| {
        CASES
            .iter()
            .find(|c| c.ee == ee)
            .unwrap_or_else(|| panic!("{ee} is a case"))
    };
    let explanation = |r: &conformance::Run| r.report.explanation().join(" | ");

    let valid = report(case("ValidSeparateCertificateandCRLKeysTest19EE"));
    assert!(valid.report.validity().not_revoked, "{}", valid.detail());
    let text = explanation(&valid);
    assert!(
        text.contains("CRL: not revoked (CRL from SeparateCertificateandCRLKeysCRL")
            && text.contains("signed by the CRL signer CN=Separate Certificate and CRL Keys CA1"),
        "the end entity's CRL is the one signed by the CRL-signing key: {text}"
    );
    assert!(
        text.contains(
            "CRL signer CN=Separate Certificate and CRL Keys CA1,O=Test Certificates 2011,C=US: CRL: not revoked (CRL from TrustAnchorRootCRL"
        ),
        "the CRL signer's own status is checked: {text}"
    );

    // 4.4.20: the CRL signed by the separate key lists the end entity.
    let revoked_ee = report(case("InvalidSeparateCertificateandCRLKeysTest20EE"));
    assert!(!revoked_ee.report.validity().not_revoked);
    let text = explanation(&revoked_ee);
    assert!(
        text.starts_with("issuer approved")
            && text.contains("| CRL: revoked at ")
            && text.contains("signed by the CRL signer CN=Separate Certificate and CRL Keys CA1"),
        "{text}"
    );
    assert!(
        !revoked_ee
            .report
            .errors()
            .iter()
            .any(|e| e.code.as_str() == "crl_response_error"),
        "every CRL was usable: {}",
        revoked_ee.detail()
    );

    // 4.4.21: the CRL signer's certificate is revoked by the trust anchor; the end entity is
    // not listed on the CRL it signed.
    let revoked_signer = report(case("InvalidSeparateCertificateandCRLKeysTest21EE"));
    assert!(!revoked_signer.report.validity().not_revoked);
    let text = explanation(&revoked_signer);
    assert!(
        text.contains("| CRL: not revoked (CRL from SeparateCertificateandCRLKeysCA2CRL")
            && text.contains(
                "CRL signer CN=Separate Certificate and CRL Keys CA2,O=Test Certificates 2011,C=US: CRL: revoked at "
            ),
        "{text}"
    );
    assert!(
        !revoked_signer
            .report
            .errors()
            .iter()
            .any(|e| e.code.as_str() == "crl_response_error"),
        "the CRL signed by the separate key is not refused: {}",
        revoked_signer.detail()
    );
}

#[test]
fn serial_numbers_are_matched_by_their_exact_octets() {
    let ca = cert("LongSerialNumberCACert");
    let crl = CrlIndex::parse(&read(&data("pkits/crls/LongSerialNumberCACRL.crl")), &ca)
        .expect("verifies");
    let listed = cert("InvalidLongSerialNumberTest18EE");
    assert_eq!(listed.serial.len(), 20);
    assert!(crl.lookup(&listed.serial).is_some());
    for valid in [
        "ValidLongSerialNumberTest16EE",
        "ValidLongSerialNumberTest17EE",
    ] {
        let c = cert(valid);
        assert!(crl.lookup(&c.serial).is_none(), "{valid}");
    }

    let ca = cert("NegativeSerialNumberCACert");
    let crl = CrlIndex::parse(
        &read(&data("pkits/crls/NegativeSerialNumberCACRL.crl")),
        &ca,
    )
    .expect("verifies");
    assert_eq!(
        cert("InvalidNegativeSerialNumberTest15EE").serial,
        vec![0xff]
    );
    assert!(crl.lookup(&[0xff]).is_some());
    assert!(crl.lookup(&[0x00, 0xff]).is_none(), "255 is not -1");
}
