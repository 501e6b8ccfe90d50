//! Name constraints against the real corpora: NIST PKITS 4.13 and the x509-limbo name
//! constraint cases, plus hand-made extension values for the edges.

use super::*;
use x509_parser::prelude::{FromDer, X509Certificate};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data/");

/// What the path validator does with name constraints, for a path given anchor first: the
/// constraints of every CA apply to every later certificate except self-issued
/// intermediates, and a leaf may not carry the extension. One budget for the path.
fn apply_path(path: &[&[u8]]) -> Result<(), PathRefusal> {
    let (leaf, cas) = path.split_last().ok_or(PathRefusal::Empty)?;
    if has_name_constraints(leaf).map_err(PathRefusal::Nc)? {
        return Err(PathRefusal::LeafHasNameConstraints);
    }
    let mut budget = NcBudget::default();
    for (i, ca) in cas.iter().enumerate() {
        let Some(nc) = NameConstraints::from_certificate_der(ca).map_err(PathRefusal::Nc)? else {
            continue;
        };
        for (j, later) in path.iter().enumerate().skip(i + 1) {
            let is_leaf = j == path.len() - 1;
            if !is_leaf && is_self_issued(later) {
                continue;
            }
            let names = CertNames::from_certificate_der(later).map_err(PathRefusal::Nc)?;
            nc.check_with_budget(&names, &mut budget)
                .map_err(PathRefusal::Nc)?;
        }
    }
    Ok(())
}

#[derive(Debug)]
enum PathRefusal {
    Empty,
    /// RFC 5280 section 4.2.1.10: "MUST be used only in a CA certificate" (the caller's rule).
    LeafHasNameConstraints,
    Nc(NcError),
}

fn names_of(der: &[u8]) -> (NormalizedName, NormalizedName) {
    let (_, cert) = X509Certificate::from_der(der).expect("certificate parses");
    (
        NormalizedName::from_x509(cert.issuer()).expect("issuer"),
        NormalizedName::from_x509(cert.subject()).expect("subject"),
    )
}

fn is_self_issued(der: &[u8]) -> bool {
    let (issuer, subject) = names_of(der);
    issuer == subject
}

// ---------------------------------------------------------------------------------------
// NIST PKITS 4.13

fn pkits(file: &str) -> Vec<u8> {
    std::fs::read(format!("{DATA}pkits/certs/{file}.crt")).expect("PKITS file present")
}

/// Every PKITS 4.13 end entity, with the CAs between the trust anchor and it (found by
/// issuer name and authorityKeyIdentifier), and whether PKITS calls it valid.
const PKITS_4_13: &[(&str, &[&str], bool)] = &[
    (
        "ValidDNnameConstraintsTest1EE",
        &["nameConstraintsDN1CACert"],
        true,
    ),
    (
        "InvalidDNnameConstraintsTest2EE",
        &["nameConstraintsDN1CACert"],
        false,
    ),
    (
        "InvalidDNnameConstraintsTest3EE",
        &["nameConstraintsDN1CACert"],
        false,
    ),
    (
        "ValidDNnameConstraintsTest4EE",
        &["nameConstraintsDN1CACert"],
        true,
    ),
    (
        "ValidDNnameConstraintsTest5EE",
        &["nameConstraintsDN2CACert"],
        true,
    ),
    (
        "ValidDNnameConstraintsTest6EE",
        &["nameConstraintsDN3CACert"],
        true,
    ),
    (
        "InvalidDNnameConstraintsTest7EE",
        &["nameConstraintsDN3CACert"],
        false,
    ),
    (
        "InvalidDNnameConstraintsTest8EE",
        &["nameConstraintsDN4CACert"],
        false,
    ),
    (
        "InvalidDNnameConstraintsTest9EE",
        &["nameConstraintsDN4CACert"],
        false,
    ),
    (
        "InvalidDNnameConstraintsTest10EE",
        &["nameConstraintsDN5CACert"],
        false,
    ),
    (
        "ValidDNnameConstraintsTest11EE",
        &["nameConstraintsDN5CACert"],
        true,
    ),
    (
        "InvalidDNnameConstraintsTest12EE",
        &["nameConstraintsDN1CACert", "nameConstraintsDN1subCA1Cert"],
        false,
    ),
    (
        "InvalidDNnameConstraintsTest13EE",
        &["nameConstraintsDN1CACert", "nameConstraintsDN1subCA2Cert"],
        false,
    ),
    (
        "ValidDNnameConstraintsTest14EE",
        &["nameConstraintsDN1CACert", "nameConstraintsDN1subCA2Cert"],
        true,
    ),
    (
        "InvalidDNnameConstraintsTest15EE",
        &["nameConstraintsDN3CACert", "nameConstraintsDN3subCA1Cert"],
        false,
    ),
    (
        "InvalidDNnameConstraintsTest16EE",
        &["nameConstraintsDN3CACert", "nameConstraintsDN3subCA1Cert"],
        false,
    ),
    (
        "InvalidDNnameConstraintsTest17EE",
        &["nameConstraintsDN3CACert", "nameConstraintsDN3subCA2Cert"],
        false,
    ),
    (
        "ValidDNnameConstraintsTest18EE",
        &["nameConstraintsDN3CACert", "nameConstraintsDN3subCA2Cert"],
        true,
    ),
    // 4.13.19: the path runs through a self-issued CA whose subject is outside the permitted
    // subtree; self-issued intermediates are exempt.
    (
        "ValidDNnameConstraintsTest19EE",
        &[
            "nameConstraintsDN1CACert",
            "nameConstraintsDN1SelfIssuedCACert",
        ],
        true,
    ),
    // 4.13.20: the end entity itself is self-issued; the leaf is never exempt.
    (
        "InvalidDNnameConstraintsTest20EE",
        &["nameConstraintsDN1CACert"],
        false,
    ),
    (
        "ValidRFC822nameConstraintsTest21EE",
        &["nameConstraintsRFC822CA1Cert"],
        true,
    ),
    (
        "InvalidRFC822nameConstraintsTest22EE",
        &["nameConstraintsRFC822CA1Cert"],
        false,
    ),
    (
        "ValidRFC822nameConstraintsTest23EE",
        &["nameConstraintsRFC822CA2Cert"],
        true,
    ),
    (
        "InvalidRFC822nameConstraintsTest24EE",
        &["nameConstraintsRFC822CA2Cert"],
        false,
    ),
    (
        "ValidRFC822nameConstraintsTest25EE",
        &["nameConstraintsRFC822CA3Cert"],
        true,
    ),
    (
        "InvalidRFC822nameConstraintsTest26EE",
        &["nameConstraintsRFC822CA3Cert"],
        false,
    ),
    (
        "ValidDNandRFC822nameConstraintsTest27EE",
        &["nameConstraintsDN1CACert", "nameConstraintsDN1subCA3Cert"],
        true,
    ),
    (
        "InvalidDNandRFC822nameConstraintsTest28EE",
        &["nameConstraintsDN1CACert", "nameConstraintsDN1subCA3Cert"],
        false,
    ),
    // 4.13.29: the mailbox is only in the subject's emailAddress attribute.
    (
        "InvalidDNandRFC822nameConstraintsTest29EE",
        &["nameConstraintsDN1CACert", "nameConstraintsDN1subCA3Cert"],
        false,
    ),
    (
        "ValidDNSnameConstraintsTest30EE",
        &["nameConstraintsDNS1CACert"],
        true,
    ),
    (
        "InvalidDNSnameConstraintsTest31EE",
        &["nameConstraintsDNS1CACert"],
        false,
    ),
    (
        "ValidDNSnameConstraintsTest32EE",
        &["nameConstraintsDNS2CACert"],
        true,
    ),
    (
        "InvalidDNSnameConstraintsTest33EE",
        &["nameConstraintsDNS2CACert"],
        false,
    ),
    (
        "ValidURInameConstraintsTest34EE",
        &["nameConstraintsURI1CACert"],
        true,
    ),
    (
        "InvalidURInameConstraintsTest35EE",
        &["nameConstraintsURI1CACert"],
        false,
    ),
    // 4.13.36: a URI constraint without a leading period is one host, not its subdomains.
    (
        "ValidURInameConstraintsTest36EE",
        &["nameConstraintsURI2CACert"],
        true,
    ),
    (
        "InvalidURInameConstraintsTest37EE",
        &["nameConstraintsURI2CACert"],
        false,
    ),
    // 4.13.38: `mytestcertificates.gov` is not below `testcertificates.gov` (label boundary).
    (
        "InvalidDNSnameConstraintsTest38EE",
        &["nameConstraintsDNS1CACert"],
        false,
    ),
];

#[test]
fn pkits_4_13_every_name_constraints_test_gets_its_expected_result() {
    let baseline = std::fs::read_to_string(format!("{DATA}pkits/pkits_openssl_baseline.tsv"))
        .expect("baseline present");
    let mut all_ees: Vec<String> = std::fs::read_dir(format!("{DATA}pkits/certs"))
        .expect("PKITS certs")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| f.contains("nameConstraints") && f.ends_with("EE.crt"))
        .map(|f| f.trim_end_matches(".crt").to_owned())
        .collect();
    all_ees.sort();
    let mut covered: Vec<String> = PKITS_4_13
        .iter()
        .map(|(ee, _, _)| (*ee).to_owned())
        .collect();
    covered.sort();
    assert_eq!(covered, all_ees, "the table covers every 4.13 end entity");

    let anchor = pkits("TrustAnchorRootCertificate");
    let mut passed = 0;
    for (ee, cas, valid) in PKITS_4_13 {
        // The file name and OpenSSL 3 agree on every 4.13 case; the table is checked
        // against both.
        assert_eq!(*valid, ee.starts_with("Valid"), "{ee}");
        let openssl_ok = baseline
            .lines()
            .any(|l| l.split('\t').collect::<Vec<_>>() == [*ee, "OK"]);
        assert_eq!(openssl_ok, *valid, "{ee}: OpenSSL baseline");

        let mut path = vec![anchor.clone()];
        path.extend(cas.iter().map(|ca| pkits(ca)));
        path.push(pkits(ee));
        for pair in path.windows(2) {
            let (_, parent) = names_of(&pair[0]);
            let (issuer, _) = names_of(&pair[1]);
            assert_eq!(issuer, parent, "{ee}: the path chains by name");
        }
        let refs: Vec<&[u8]> = path.iter().map(Vec::as_slice).collect();
        let result = apply_path(&refs);
        assert_eq!(result.is_ok(), *valid, "{ee}: {result:?}");
        if let Err(PathRefusal::Nc(e)) = &result {
            assert!(
                e.is_violation(),
                "{ee} fails on its names, not on parsing: {e}"
            );
        }
        passed += 1;
    }
    assert_eq!(passed, 38);
}

// ---------------------------------------------------------------------------------------
// x509-limbo

/// Limbo cases whose expected result name constraints alone do not produce, with why.
const LIMBO_NOT_DECIDED_BY_NC: &[(&str, &str)] = &[
    (
        "webpki::nc::permitted-dns-match-noncritical",
        "CA/B Forum exception: a non-critical nameConstraints is accepted there; we follow \
         RFC 5280 (rfc5280::nc::permitted-dns-match-noncritical expects FAILURE)",
    ),
    (
        "pathological::nc-dos-3",
        "the root constrains dNSNames only and the leaf has no subjectAltName, so no name is \
         constrained; the expected FAILURE is the missing peer name t0.test (hostname \
         verification) or OpenSSL's count of names × constraints regardless of form",
    ),
];

fn limbo_cases() -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(format!("{DATA}x509-limbo/limbo.json")).expect("limbo");
    let json: serde_json::Value = serde_json::from_str(&text).expect("limbo.json parses");
    json["testcases"]
        .as_array()
        .expect("testcases")
        .iter()
        .filter(|t| {
            let id = t["id"].as_str().unwrap_or_default();
            id.starts_with("rfc5280::nc::")
                || id.starts_with("webpki::nc::")
                || id.starts_with("pathological::nc-dos-")
                || id.starts_with("cve::cve-2025-61727")
        })
        .cloned()
        .collect()
}

fn pem_der(pem: &serde_json::Value) -> Vec<u8> {
    let text = pem.as_str().expect("PEM string");
    let (_, pem) = x509_parser::pem::parse_x509_pem(text.as_bytes()).expect("PEM");
    pem.contents
}

/// Every path from `leaf` up to a trusted certificate, built on prepared names alone (no
/// signatures: these tests are about names), anchor first.
fn paths(leaf: &[u8], trusted: &[Vec<u8>], pool: &[Vec<u8>]) -> Vec<Vec<Vec<u8>>> {
    const MAX_DEPTH: usize = 8;
    fn walk(
        chain: &mut Vec<Vec<u8>>,
        trusted: &[Vec<u8>],
        pool: &[Vec<u8>],
        out: &mut Vec<Vec<Vec<u8>>>,
    ) {
        let Some(current) = chain.last() else { return };
        let (issuer, _) = names_of(current);
        if chain.len() > MAX_DEPTH {
            return;
        }
        for (candidate, is_anchor) in trusted
            .iter()
            .map(|c| (c, true))
            .chain(pool.iter().map(|c| (c, false)))
        {
            if chain.contains(candidate) || names_of(candidate).1 != issuer {
                continue;
            }
            chain.push(candidate.clone());
            if is_anchor {
                out.push(chain.iter().rev().cloned().collect());
            } else {
                walk(chain, trusted, pool, out);
            }
            chain.pop();
        }
    }
    let mut out = Vec::new();
    walk(&mut vec![leaf.to_vec()], trusted, pool, &mut out);
    out
}

#[test]
fn limbo_name_constraint_cases_agree_with_their_expected_results() {
    let cases = limbo_cases();
    assert_eq!(cases.len(), 57, "the nc, nc-dos and CVE-2025-61727 cases");
    let mut agreed = Vec::new();
    let mut disagreed = Vec::new();
    for case in &cases {
        let id = case["id"].as_str().expect("id");
        let trusted: Vec<Vec<u8>> = case["trusted_certs"]
            .as_array()
            .expect("trusted")
            .iter()
            .map(pem_der)
            .collect();
        let pool: Vec<Vec<u8>> = case["untrusted_intermediates"]
            .as_array()
            .expect("intermediates")
            .iter()
            .map(pem_der)
            .collect();
        let leaf = pem_der(&case["peer_certificate"]);
        let candidates = paths(&leaf, &trusted, &pool);
        assert!(!candidates.is_empty(), "{id}: no path by name");
        let outcomes: Vec<Result<(), PathRefusal>> = candidates
            .iter()
            .map(|p| apply_path(&p.iter().map(Vec::as_slice).collect::<Vec<_>>()))
            .collect();
        let actual = if outcomes.iter().any(Result::is_ok) {
            "SUCCESS"
        } else {
            "FAILURE"
        };
        let expected = case["expected_result"].as_str().expect("expected");
        for outcome in &outcomes {
            assert!(
                !matches!(
                    outcome,
                    Err(PathRefusal::Nc(
                        NcError::Certificate(_) | NcError::SubjectAltName(_) | NcError::Subject(_)
                    ))
                ),
                "{id}: every certificate must be readable, refusals are about names: {outcome:?}"
            );
        }
        if actual == expected {
            agreed.push(id.to_owned());
        } else {
            disagreed.push(format!(
                "{id}: expected {expected}, got {actual} {outcomes:?}"
            ));
        }
    }
    let known: Vec<String> = LIMBO_NOT_DECIDED_BY_NC
        .iter()
        .map(|(id, _)| (*id).to_owned())
        .collect();
    let unexpected: Vec<&String> = disagreed
        .iter()
        .filter(|d| !known.iter().any(|k| d.starts_with(&format!("{k}:"))))
        .collect();
    assert!(unexpected.is_empty(), "disagreements: {unexpected:#?}");
    assert_eq!(
        disagreed.len(),
        known.len(),
        "every listed divergence still diverges: {disagreed:#?}"
    );
    assert_eq!(agreed.len() + known.len(), cases.len());
}

#[test]
fn limbo_denial_of_service_cases_stop_at_the_comparison_budget() {
    for case in limbo_cases() {
        let id = case["id"].as_str().expect("id");
        if !id.starts_with("pathological::nc-dos-") || id == "pathological::nc-dos-3" {
            continue;
        }
        let root = pem_der(&case["trusted_certs"][0]);
        let leaf = pem_der(&case["peer_certificate"]);
        let started = std::time::Instant::now();
        let result = apply_path(&[&root, &leaf]);
        assert!(
            matches!(result, Err(PathRefusal::Nc(NcError::BudgetExceeded { .. }))),
            "{id}: {result:?}"
        );
        eprintln!("{id}: refused in {:?}", started.elapsed());
    }
}
