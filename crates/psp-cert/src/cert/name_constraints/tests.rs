//! Name constraints against the real corpora: NIST PKITS 4.13 and the x509-limbo name
//! constraint cases, plus hand-made extension values for the edges.

use super::*;
use psp_testkit::der::tlv;
use x509_parser::prelude::{FromDer, X509Certificate};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data/");

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

// ---------------------------------------------------------------------------------------
// Edges, on hand-made values

/// `NameConstraints` with the given permitted and excluded `GeneralSubtree` contents.
fn nc_value(permitted: Option<&[Vec<u8>]>, excluded: Option<&[Vec<u8>]>) -> Vec<u8> {
    let mut seq = Vec::new();
    if let Some(p) = permitted {
        seq.extend(tlv(0xa0, &p.concat()));
    }
    if let Some(e) = excluded {
        seq.extend(tlv(0xa1, &e.concat()));
    }
    tlv(0x30, &seq)
}

fn subtree(general_name: Vec<u8>) -> Vec<u8> {
    tlv(0x30, &general_name)
}

fn dns(name: &str) -> Vec<u8> {
    tlv(0x82, name.as_bytes())
}

fn names(presented: Vec<Presented>) -> CertNames {
    CertNames {
        subject: NormalizedName::from_der(&[0x30, 0x00]).expect("empty name"),
        names: presented,
    }
}

fn dns_name(s: &str) -> Presented {
    Presented::from_general_name(&Tlv {
        tag: 0x82,
        value: s.as_bytes(),
    })
    .expect("a dNSName")
}

fn email(s: &str) -> Presented {
    Presented::from_general_name(&Tlv {
        tag: 0x81,
        value: s.as_bytes(),
    })
    .expect("an rfc822Name")
}

fn parse_nc(value: &[u8]) -> Result<NameConstraints, NcError> {
    NameConstraints::from_extension_value(value, true)
}

#[test]
fn dns_constraints_add_labels_on_the_left_only_and_ignore_case() {
    let nc = parse_nc(&nc_value(Some(&[subtree(dns("Example.COM"))]), None)).expect("valid");
    for ok in ["example.com", "www.example.com", "a.b.EXAMPLE.com"] {
        assert!(nc.check(&names(vec![dns_name(ok)])).is_ok(), "{ok}");
    }
    for refused in ["notexample.com", "example.com.evil", "com"] {
        assert!(
            matches!(
                nc.check(&names(vec![dns_name(refused)])),
                Err(NcError::NotPermitted { .. })
            ),
            "{refused}"
        );
    }
}

#[test]
fn a_wildcard_san_is_permitted_only_if_all_its_names_are_and_excluded_if_any_is() {
    let permit = |c: &str| Base::Dns(c.into()).permits(&dns_name("*.example.com"));
    let exclude = |c: &str| Base::Dns(c.into()).excludes(&dns_name("*.example.com"));
    assert!(permit("example.com"));
    assert!(permit("com"));
    assert!(permit(""));
    assert!(
        !permit("foo.example.com"),
        "CVE-2025-61727, permitted variant"
    );
    assert!(exclude("bar.example.com"), "CVE-2025-61727");
    assert!(exclude("example.com"));
    assert!(
        !exclude("a.bar.example.com"),
        "two labels below cannot be matched by one `*`"
    );
    assert!(!exclude("other.com"));
    assert!(!exclude("barexample.com"));
}

#[test]
fn mailbox_host_and_domain_forms_of_rfc822_constraints() {
    let rfc822 = |c: &str| {
        read_base(&Tlv {
            tag: 0x81,
            value: c.as_bytes(),
        })
        .expect("valid constraint")
    };
    let mailbox = rfc822("Alice@Example.com");
    assert!(mailbox.contains(&email("Alice@example.COM")));
    assert!(
        !mailbox.contains(&email("alice@example.com")),
        "local part is case-sensitive"
    );
    let host = rfc822("example.com");
    assert!(host.contains(&email("bob@EXAMPLE.com")));
    assert!(!host.contains(&email("bob@mail.example.com")));
    let domain = rfc822(".example.com");
    assert!(domain.contains(&email("bob@mail.example.com")));
    assert!(!domain.contains(&email("bob@example.com")));
    assert!(!domain.contains(&email("bob@evilexample.com")));
    for bad in [
        "a@b@example.com",
        "@example.com",
        "..example.com",
        "exa mple.com",
        "",
    ] {
        assert!(
            read_base(&Tlv {
                tag: 0x81,
                value: bad.as_bytes()
            })
            .is_err(),
            "{bad:?}"
        );
    }
}

#[test]
fn uri_names_are_checked_by_their_host_and_hostless_uris_fail_closed() {
    assert_eq!(
        uri_host("https://user@Host.Example.com:8443/p?q#f").as_deref(),
        Some("host.example.com")
    );
    assert_eq!(
        uri_host("ftp://invalidcertificates.gov:21/test37/").as_deref(),
        Some("invalidcertificates.gov")
    );
    for no_host in [
        "urn:isbn:0451450523",
        "mailto:a@example.com",
        "http://[::1]/",
        "http://192.0.2.1/",
        "http://example.com:port/",
        "http://%65xample.com/",
        "1http://example.com/",
        "",
    ] {
        assert_eq!(uri_host(no_host), None, "{no_host}");
    }
    let nc = parse_nc(&nc_value(
        Some(&[subtree(tlv(0x86, b".example.com"))]),
        None,
    ))
    .expect("valid");
    let uri = |u: &str| {
        Presented::from_general_name(&Tlv {
            tag: 0x86,
            value: u.as_bytes(),
        })
        .expect("a URI")
    };
    assert!(
        nc.check(&names(vec![uri("https://www.example.com/")]))
            .is_ok()
    );
    assert!(nc.check(&names(vec![uri("https://example.com/")])).is_err());
    assert!(matches!(
        nc.check(&names(vec![uri("urn:example.com")])),
        Err(NcError::MalformedName {
            kind: NameKind::Uri,
            ..
        })
    ));
}

#[test]
fn ip_constraints_need_a_contiguous_mask_and_match_within_their_family_only() {
    let ip = |octets: &[u8]| subtree(tlv(0x87, octets));
    let v4_net = ip(&[192, 0, 2, 0, 255, 255, 255, 0]);
    let nc = parse_nc(&nc_value(Some(&[v4_net]), None)).expect("valid");
    let addr = |o: &[u8]| names(vec![Presented::Ip(o.to_vec())]);
    assert!(nc.check(&addr(&[192, 0, 2, 77])).is_ok());
    assert!(nc.check(&addr(&[192, 0, 3, 1])).is_err());
    // The IPv4-mapped IPv6 form of a permitted address is a different family: refused.
    let mapped = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1];
    assert!(matches!(
        nc.check(&addr(&mapped)),
        Err(NcError::NotPermitted { .. })
    ));
    for bad in [
        ip(&[192, 0, 2, 0, 255, 0, 255, 0]),
        ip(&[192, 0, 2, 0]),
        ip(&[192, 0, 2, 0, 255, 255, 255]),
    ] {
        assert!(
            matches!(
                parse_nc(&nc_value(Some(&[bad]), None)),
                Err(NcError::MalformedConstraint {
                    kind: NameKind::IpAddress,
                    ..
                })
            ),
            "non-contiguous mask or wrong length"
        );
    }
}

#[test]
fn the_extension_must_be_critical_non_empty_and_without_minimum_or_maximum() {
    let one = [subtree(dns("example.com"))];
    let good = nc_value(Some(&one), None);
    assert!(matches!(
        NameConstraints::from_extension_value(&good, false),
        Err(NcError::NotCritical)
    ));
    assert!(matches!(parse_nc(&tlv(0x30, &[])), Err(NcError::Empty)));
    assert!(matches!(
        parse_nc(&nc_value(Some(&[]), Some(&[]))),
        Err(NcError::Empty)
    ));
    assert!(matches!(
        parse_nc(&nc_value(Some(&[]), Some(&one))),
        Err(NcError::Empty)
    ));

    let with = |extra: &[u8]| {
        nc_value(
            Some(&[tlv(0x30, &[dns("example.com"), extra.to_vec()].concat())]),
            None,
        )
    };
    assert!(
        parse_nc(&with(&[0x80, 0x01, 0x00])).is_ok(),
        "explicit minimum 0 is read around"
    );
    assert!(matches!(
        parse_nc(&with(&[0x80, 0x01, 0x01])),
        Err(NcError::SubtreeBounds)
    ));
    assert!(matches!(
        parse_nc(&with(&[0x81, 0x01, 0x02])),
        Err(NcError::SubtreeBounds)
    ));
    assert!(matches!(
        parse_nc(&with(&[0x04, 0x00])),
        Err(NcError::Der(_))
    ));

    let mut trailing = good.clone();
    trailing.push(0);
    assert!(matches!(parse_nc(&trailing), Err(NcError::Der(_))));
    assert!(matches!(
        parse_nc(&nc_value(Some(&[subtree(tlv(0x89, b"x"))]), None)),
        Err(NcError::Der(_))
    ));
    // Truncations of a valid value never panic.
    for cut in 0..good.len() {
        assert!(parse_nc(&good[..cut]).is_err());
    }
}

#[test]
fn names_of_a_form_the_ca_does_not_constrain_are_not_checked_even_when_malformed() {
    let nc = parse_nc(&nc_value(
        None,
        Some(&[subtree(tlv(0x87, &[10, 0, 0, 0, 255, 0, 0, 0]))]),
    ))
    .expect("valid");
    let presented = names(vec![
        dns_name(".example.com"),
        Presented::Unsupported(NameKind::OtherName),
        Presented::Ip(vec![192, 0, 2, 1]),
    ]);
    assert!(nc.check(&presented).is_ok());
    // The attacker's variant: the same malformed name under a CA that constrains its form.
    let dns_nc = parse_nc(&nc_value(None, Some(&[subtree(dns("evil.example"))]))).expect("valid");
    assert!(matches!(
        dns_nc.check(&presented),
        Err(NcError::MalformedName {
            kind: NameKind::Dns,
            ..
        })
    ));
}

#[test]
fn an_excluded_subtree_wins_over_a_permitted_one() {
    let both = [subtree(dns("example.com"))];
    let nc = parse_nc(&nc_value(
        Some(&both),
        Some(&[subtree(dns("admin.example.com"))]),
    ))
    .expect("valid");
    assert!(nc.check(&names(vec![dns_name("www.example.com")])).is_ok());
    assert!(matches!(
        nc.check(&names(vec![dns_name("x.admin.example.com")])),
        Err(NcError::Excluded { .. })
    ));
}

#[test]
fn one_budget_is_shared_by_every_check_of_a_path() {
    let nc = parse_nc(&nc_value(
        Some(&[subtree(dns("a.example")), subtree(dns("b.example"))]),
        None,
    ))
    .expect("valid");
    let leaf = names(vec![dns_name("x.b.example")]);
    let mut budget = NcBudget { remaining: 3 };
    assert!(
        nc.check_with_budget(&leaf, &mut budget).is_ok(),
        "two comparisons"
    );
    assert!(matches!(
        nc.check_with_budget(&leaf, &mut budget),
        Err(NcError::BudgetExceeded { .. })
    ));
}

#[test]
fn directory_name_constraints_apply_to_the_subject_unless_it_is_empty() {
    // PKITS 4.13.14: empty subject, DN-constrained CA, the name is in an rfc822Name SAN.
    let ee = pkits("ValidDNnameConstraintsTest14EE");
    let names = CertNames::from_certificate_der(&ee).expect("names");
    assert!(names.subject().is_empty());
    assert!(names.names.iter().all(|n| n.kind() != NameKind::Directory));
    let ca = NameConstraints::from_certificate_der(&pkits("nameConstraintsDN1subCA2Cert"))
        .expect("valid")
        .expect("present");
    assert!(ca.check(&names).is_ok());
    assert_eq!(ca.permitted().map(<[Subtree]>::len), Some(1));
    assert!(ca.excluded().is_empty());
    assert_eq!(
        has_name_constraints(&pkits("nameConstraintsDN1subCA2Cert")),
        Ok(true)
    );
    assert_eq!(has_name_constraints(&ee), Ok(false));
    assert!(
        NameConstraints::from_certificate_der(&ee)
            .expect("parses")
            .is_none()
    );
}

#[test]
fn error_messages_quote_names_briefly_and_printably() {
    let long = format!("{}\u{7}.example", "a".repeat(300));
    let s = shown(&long);
    assert!(s.chars().count() <= MAX_SHOWN_CHARS + 1);
    assert!(!s.chars().any(char::is_control));
}
