//! NIST PKITS path validation (`../shared/data/pkits/`, TEST-SUITES.md section 2), sections
//! 4.1–4.7, 4.13 and 4.16, against the real check core as a black box
//! (`crates/psp-check/tests/conformance_support`).
//!
//! For each end entity of those sections: the trust anchor is `TrustAnchorRootCertificate`,
//! the presented chain is the CA certificates reachable from the end entity by issuer →
//! subject name (compared loosely, so that the name-chaining tests 4.3.x get their CAs and the
//! check core decides), breadth first, at most `MAX_PRESENTED_INTERMEDIATES`, and the
//! validation time is 2020-06-15T00:00:00Z. Expected: the file-name prefix (`Valid` →
//! SUCCESS, `Invalid` → FAILURE), PKITS's default settings.
//!
//! Revocation: as the checking service does, the status of every certificate of the verified
//! path below the trust anchor is established (`check::RevocationPlan`): the end entity's and
//! each intermediate's, from the suite's CRLs with the product's CRL code, accepting a CRL
//! signed by another key of the issuer when that key's certificate (presented with the
//! chain, as the harness presents every CA of the same name) has a verified path to the same
//! trust anchor, and then checking that certificate's status too (RFC 5280 section 6.3.3
//! (f)). notRevoked counts, so a certificate without a usable CRL is invalid, as PKITS wants.
//!
//! OpenSSL 3's verdicts (`pkits_openssl_baseline.tsv`, `-crl_check_all`) are a second opinion:
//! where OpenSSL disagrees with the file-name prefix it is printed, and every disagreement of
//! ours shows OpenSSL's verdict beside it.

#[path = "conformance_support/mod.rs"]
mod support;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;

use psp_check::cert::PspCertificate;
use psp_check::check::MAX_PRESENTED_INTERMEDIATES;
use support::{Crl, Judged, Outcome};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

const TRUST_ANCHOR: &str = "TrustAnchorRootCertificate";
/// TEST-SUITES.md: the PKITS 2048 material is valid 2010–2030.
const VALIDATION_TIME: &str = "2020-06-15T00:00:00Z";

/// The end entities of the sections run, with their PKITS section. The test number in the
/// file name is the subsection number (`InvalidpathLenConstraintTest5EE` is 4.6.5).
const CASES: &[(&str, &str)] = &[
    // 4.1 Signature verification
    ("ValidCertificatePathTest1EE", "4.1"),
    ("InvalidCASignatureTest2EE", "4.1"),
    ("InvalidEESignatureTest3EE", "4.1"),
    ("ValidDSASignaturesTest4EE", "4.1"),
    ("ValidDSAParameterInheritanceTest5EE", "4.1"),
    ("InvalidDSASignatureTest6EE", "4.1"),
    // 4.2 Validity periods
    ("InvalidCAnotBeforeDateTest1EE", "4.2"),
    ("InvalidEEnotBeforeDateTest2EE", "4.2"),
    ("Validpre2000UTCnotBeforeDateTest3EE", "4.2"),
    ("ValidGeneralizedTimenotBeforeDateTest4EE", "4.2"),
    ("InvalidCAnotAfterDateTest5EE", "4.2"),
    ("InvalidEEnotAfterDateTest6EE", "4.2"),
    ("Invalidpre2000UTCEEnotAfterDateTest7EE", "4.2"),
    ("ValidGeneralizedTimenotAfterDateTest8EE", "4.2"),
    // 4.3 Verifying name chaining
    ("InvalidNameChainingTest1EE", "4.3"),
    ("InvalidNameChainingOrderTest2EE", "4.3"),
    ("ValidNameChainingWhitespaceTest3EE", "4.3"),
    ("ValidNameChainingWhitespaceTest4EE", "4.3"),
    ("ValidNameChainingCapitalizationTest5EE", "4.3"),
    ("ValidNameUIDsTest6EE", "4.3"),
    ("ValidRFC3280MandatoryAttributeTypesTest7EE", "4.3"),
    ("ValidRFC3280OptionalAttributeTypesTest8EE", "4.3"),
    ("ValidUTF8StringEncodedNamesTest9EE", "4.3"),
    (
        "ValidRolloverfromPrintableStringtoUTF8StringTest10EE",
        "4.3",
    ),
    ("ValidUTF8StringCaseInsensitiveMatchTest11EE", "4.3"),
    // 4.4 Basic certificate revocation tests
    ("InvalidMissingCRLTest1EE", "4.4"),
    ("InvalidRevokedCATest2EE", "4.4"),
    ("InvalidRevokedEETest3EE", "4.4"),
    ("InvalidBadCRLSignatureTest4EE", "4.4"),
    ("InvalidBadCRLIssuerNameTest5EE", "4.4"),
    ("InvalidWrongCRLTest6EE", "4.4"),
    ("ValidTwoCRLsTest7EE", "4.4"),
    ("InvalidUnknownCRLEntryExtensionTest8EE", "4.4"),
    ("InvalidUnknownCRLExtensionTest9EE", "4.4"),
    ("InvalidUnknownCRLExtensionTest10EE", "4.4"),
    ("InvalidOldCRLnextUpdateTest11EE", "4.4"),
    ("Invalidpre2000CRLnextUpdateTest12EE", "4.4"),
    ("ValidGeneralizedTimeCRLnextUpdateTest13EE", "4.4"),
    ("ValidNegativeSerialNumberTest14EE", "4.4"),
    ("InvalidNegativeSerialNumberTest15EE", "4.4"),
    ("ValidLongSerialNumberTest16EE", "4.4"),
    ("ValidLongSerialNumberTest17EE", "4.4"),
    ("InvalidLongSerialNumberTest18EE", "4.4"),
    ("ValidSeparateCertificateandCRLKeysTest19EE", "4.4"),
    ("InvalidSeparateCertificateandCRLKeysTest20EE", "4.4"),
    ("InvalidSeparateCertificateandCRLKeysTest21EE", "4.4"),
    // 4.5 Verifying paths with self-issued certificates
    ("ValidBasicSelfIssuedOldWithNewTest1EE", "4.5"),
    ("InvalidBasicSelfIssuedOldWithNewTest2EE", "4.5"),
    ("ValidBasicSelfIssuedNewWithOldTest3EE", "4.5"),
    ("ValidBasicSelfIssuedNewWithOldTest4EE", "4.5"),
    ("InvalidBasicSelfIssuedNewWithOldTest5EE", "4.5"),
    ("ValidBasicSelfIssuedCRLSigningKeyTest6EE", "4.5"),
    ("InvalidBasicSelfIssuedCRLSigningKeyTest7EE", "4.5"),
    ("InvalidBasicSelfIssuedCRLSigningKeyTest8EE", "4.5"),
    // 4.6 Verifying basic constraints
    ("InvalidMissingbasicConstraintsTest1EE", "4.6"),
    ("InvalidcAFalseTest2EE", "4.6"),
    ("InvalidcAFalseTest3EE", "4.6"),
    ("ValidbasicConstraintsNotCriticalTest4EE", "4.6"),
    ("InvalidpathLenConstraintTest5EE", "4.6"),
    ("InvalidpathLenConstraintTest6EE", "4.6"),
    ("ValidpathLenConstraintTest7EE", "4.6"),
    ("ValidpathLenConstraintTest8EE", "4.6"),
    ("InvalidpathLenConstraintTest9EE", "4.6"),
    ("InvalidpathLenConstraintTest10EE", "4.6"),
    ("InvalidpathLenConstraintTest11EE", "4.6"),
    ("InvalidpathLenConstraintTest12EE", "4.6"),
    ("ValidpathLenConstraintTest13EE", "4.6"),
    ("ValidpathLenConstraintTest14EE", "4.6"),
    ("ValidSelfIssuedpathLenConstraintTest15EE", "4.6"),
    ("InvalidSelfIssuedpathLenConstraintTest16EE", "4.6"),
    ("ValidSelfIssuedpathLenConstraintTest17EE", "4.6"),
    // 4.7 Key usage
    ("InvalidkeyUsageCriticalkeyCertSignFalseTest1EE", "4.7"),
    ("InvalidkeyUsageNotCriticalkeyCertSignFalseTest2EE", "4.7"),
    ("ValidkeyUsageNotCriticalTest3EE", "4.7"),
    ("InvalidkeyUsageCriticalcRLSignFalseTest4EE", "4.7"),
    ("InvalidkeyUsageNotCriticalcRLSignFalseTest5EE", "4.7"),
    // 4.13 Name constraints
    ("ValidDNnameConstraintsTest1EE", "4.13"),
    ("InvalidDNnameConstraintsTest2EE", "4.13"),
    ("InvalidDNnameConstraintsTest3EE", "4.13"),
    ("ValidDNnameConstraintsTest4EE", "4.13"),
    ("ValidDNnameConstraintsTest5EE", "4.13"),
    ("ValidDNnameConstraintsTest6EE", "4.13"),
    ("InvalidDNnameConstraintsTest7EE", "4.13"),
    ("InvalidDNnameConstraintsTest8EE", "4.13"),
    ("InvalidDNnameConstraintsTest9EE", "4.13"),
    ("InvalidDNnameConstraintsTest10EE", "4.13"),
    ("ValidDNnameConstraintsTest11EE", "4.13"),
    ("InvalidDNnameConstraintsTest12EE", "4.13"),
    ("InvalidDNnameConstraintsTest13EE", "4.13"),
    ("ValidDNnameConstraintsTest14EE", "4.13"),
    ("InvalidDNnameConstraintsTest15EE", "4.13"),
    ("InvalidDNnameConstraintsTest16EE", "4.13"),
    ("InvalidDNnameConstraintsTest17EE", "4.13"),
    ("ValidDNnameConstraintsTest18EE", "4.13"),
    ("ValidDNnameConstraintsTest19EE", "4.13"),
    ("InvalidDNnameConstraintsTest20EE", "4.13"),
    ("ValidRFC822nameConstraintsTest21EE", "4.13"),
    ("InvalidRFC822nameConstraintsTest22EE", "4.13"),
    ("ValidRFC822nameConstraintsTest23EE", "4.13"),
    ("InvalidRFC822nameConstraintsTest24EE", "4.13"),
    ("ValidRFC822nameConstraintsTest25EE", "4.13"),
    ("InvalidRFC822nameConstraintsTest26EE", "4.13"),
    ("ValidDNandRFC822nameConstraintsTest27EE", "4.13"),
    ("InvalidDNandRFC822nameConstraintsTest28EE", "4.13"),
    ("InvalidDNandRFC822nameConstraintsTest29EE", "4.13"),
    ("ValidDNSnameConstraintsTest30EE", "4.13"),
    ("InvalidDNSnameConstraintsTest31EE", "4.13"),
    ("ValidDNSnameConstraintsTest32EE", "4.13"),
    ("InvalidDNSnameConstraintsTest33EE", "4.13"),
    ("ValidURInameConstraintsTest34EE", "4.13"),
    ("InvalidURInameConstraintsTest35EE", "4.13"),
    ("ValidURInameConstraintsTest36EE", "4.13"),
    ("InvalidURInameConstraintsTest37EE", "4.13"),
    ("InvalidDNSnameConstraintsTest38EE", "4.13"),
    // 4.16 Private certificate extensions
    ("ValidUnknownNotCriticalCertificateExtensionTest1EE", "4.16"),
    ("InvalidUnknownCriticalCertificateExtensionTest2EE", "4.16"),
];

/// Tests per section in PKITS.pdf, to catch a slip in the table.
const SECTION_SIZES: &[(&str, usize)] = &[
    ("4.1", 6),
    ("4.2", 8),
    ("4.3", 11),
    ("4.4", 21),
    ("4.5", 8),
    ("4.6", 17),
    ("4.7", 5),
    ("4.13", 38),
    ("4.16", 2),
];

/// `4.6.5` from `("InvalidpathLenConstraintTest5EE", "4.6")`.
fn subsection(stem: &str, section: &str) -> String {
    let digits: String = stem
        .trim_end_matches("EE")
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    assert!(!digits.is_empty(), "{stem} has a test number");
    format!("{section}.{digits}")
}

fn expected(stem: &str) -> Outcome {
    if stem.starts_with("Valid") {
        Outcome::Success
    } else if stem.starts_with("Invalid") {
        Outcome::Failure
    } else {
        panic!("{stem} has neither prefix")
    }
}

/// A name compared loosely: only its letters and digits, lower-cased (case, white space,
/// RFC 4514 escapes and string types ignored). Only for choosing which CAs to present; the
/// check core decides whether they chain.
fn loose(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// The CA certificates reachable from `leaf` by issuer → subject, breadth first, at most
/// `MAX_PRESENTED_INTERMEDIATES` (what the check core considers), the anchor excluded.
fn pool<'a>(
    leaf: &PspCertificate,
    cas: &'a [(String, PspCertificate)],
) -> Vec<&'a (String, PspCertificate)> {
    let mut out: Vec<&(String, PspCertificate)> = Vec::new();
    let mut queue = VecDeque::from([loose(&leaf.issuer)]);
    while let Some(wanted) = queue.pop_front() {
        for ca in cas {
            if out.len() == MAX_PRESENTED_INTERMEDIATES {
                return out;
            }
            if loose(&ca.1.subject) == wanted && !out.iter().any(|o| o.0 == ca.0) {
                out.push(ca);
                queue.push_back(loose(&ca.1.issuer));
            }
        }
    }
    out
}

fn openssl_baseline() -> HashMap<String, String> {
    let text = std::fs::read_to_string(support::data("pkits/pkits_openssl_baseline.tsv"))
        .expect("baseline reads");
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(ee, verdict)| (ee.to_owned(), verdict.to_owned()))
        .collect()
}

#[test]
fn pkits_sections_4_1_to_4_7_4_13_4_16_give_their_expected_outcome_or_a_recorded_divergence() {
    let mut sizes: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, s) in CASES {
        *sizes.entry(s).or_default() += 1;
    }
    for (s, n) in SECTION_SIZES {
        assert_eq!(sizes.get(s), Some(n), "section {s}");
    }
    assert_eq!(sizes.len(), SECTION_SIZES.len());

    let dir = support::data("pkits");
    let read_dir = |sub: &str| {
        let mut files: Vec<_> = std::fs::read_dir(dir.join(sub))
            .expect("pkits directory")
            .map(|e| e.expect("directory entry").path())
            .collect();
        files.sort();
        files
    };
    let stem = |p: &Path| {
        p.file_stem()
            .and_then(|s| s.to_str())
            .expect("UTF-8 file name")
            .to_owned()
    };
    let parse = |p: &Path| {
        PspCertificate::from_der(std::fs::read(p).expect("reads"))
            .map_err(|e| format!("{} does not parse: {e}", p.display()))
    };
    let mut anchor = None;
    let mut cas = Vec::new();
    let mut unparsed_cas = Vec::new();
    for p in read_dir("certs") {
        let name = stem(&p);
        if name.ends_with("EE") {
            continue;
        }
        match parse(&p) {
            Ok(c) if name == TRUST_ANCHOR => anchor = Some(c),
            Ok(c) => cas.push((name, c)),
            Err(e) => unparsed_cas.push(e),
        }
    }
    let anchor = anchor.expect("the trust anchor parses");
    let crls: Vec<Crl> = read_dir("crls")
        .iter()
        .map(|p| Crl {
            name: stem(p),
            bytes: std::fs::read(p).expect("reads"),
        })
        .collect();
    let now = OffsetDateTime::parse(VALIDATION_TIME, &Rfc3339).expect("RFC 3339");
    let baseline = openssl_baseline();
    let divergences = support::load_divergences(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pkits-divergences.toml"),
    );

    let mut results = Vec::new();
    let mut openssl_differs = Vec::new();
    for &(ee, section) in CASES {
        let id = ee.to_owned();
        let expected = expected(ee);
        let openssl = baseline
            .get(ee)
            .map(String::as_str)
            .unwrap_or("no baseline");
        if (openssl == "OK") != (expected == Outcome::Success) {
            openssl_differs.push(format!(
                "{} {ee}: expected {expected:?}, OpenSSL: {openssl}",
                subsection(ee, section)
            ));
        }
        let (actual, detail) = match parse(&support::data(&format!("pkits/certs/{ee}.crt"))) {
            Err(e) => (Outcome::Failure, e),
            Ok(leaf) => {
                let presented = pool(&leaf, &cas);
                let names: Vec<&str> = presented.iter().map(|c| c.0.as_str()).collect();
                let chain: Vec<PspCertificate> = presented.iter().map(|c| c.1.clone()).collect();
                let r = support::run_case(
                    std::slice::from_ref(&anchor),
                    &leaf,
                    &chain,
                    now,
                    Some(&crls),
                );
                (
                    r.outcome,
                    format!(
                        "[{}] presented [{}]; OpenSSL: {openssl}; {}",
                        subsection(ee, section),
                        names.join(", "),
                        r.detail()
                    ),
                )
            }
        };
        results.push(Judged {
            id,
            expected,
            actual,
            detail,
        });
    }

    let v = support::judge(&results, &divergences);
    eprintln!(
        "PKITS 4.1-4.7, 4.13, 4.16: {} cases; agree {}, intended divergences {}, problems {}; CA certificates that do not parse: {}",
        results.len(),
        v.agree,
        v.intended,
        v.problems.len(),
        unparsed_cas.len()
    );
    for e in &unparsed_cas {
        eprintln!("  {e}");
    }
    eprintln!(
        "OpenSSL 3 (second opinion) differs from the expected outcome in {} of these cases:",
        openssl_differs.len()
    );
    for d in &openssl_differs {
        eprintln!("  {d}");
    }
    for p in &v.problems {
        eprintln!("  {p}");
    }
    assert!(
        v.problems.is_empty(),
        "{} PKITS problems:\n{}",
        v.problems.len(),
        v.problems.join("\n")
    );
}
