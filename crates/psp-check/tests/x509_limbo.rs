//! The x509-limbo corpus (`../shared/data/x509-limbo/limbo.json`, TEST-SUITES.md section 1)
//! against the real check core, as a black box (`crates/psp-check/tests/conformance_support`).
//!
//! Each case's `trusted_certs` are the issuers of one trust source, `untrusted_intermediates`
//! are the presented chain, `peer_certificate` is the certificate checked at
//! `validation_time` (now when null). SUCCESS means validQTSP && validSignature && notExpired;
//! for `has-crl` cases the CRLs are evaluated by the product's CRL code
//! (`revocation::crl::CrlIndex`) for the issuer the check resolved, and notRevoked counts too.
//! A certificate that does not parse gives FAILURE: the gateway refuses such input (and a
//! trust source with such an anchor does not load).
//!
//! Cases are skipped only by the rules of [`skip_reason`]. Deliberate differences are in
//! `tests/data/x509-limbo-divergences.toml`; any other disagreement fails the test, and so does
//! an entry there that no longer diverges.

#[path = "conformance_support/mod.rs"]
mod support;

use std::collections::BTreeMap;

use psp_check::cert::PspCertificate;
use serde::Deserialize;
use support::{Crl, Judged, Outcome};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// `limbo-schema.json`, the fields the harness reads.
#[derive(Debug, Deserialize)]
struct Limbo {
    version: u32,
    testcases: Vec<Testcase>,
}

#[derive(Debug, Deserialize)]
struct Testcase {
    id: String,
    #[serde(default)]
    features: Option<Vec<String>>,
    trusted_certs: Vec<String>,
    #[serde(default)]
    untrusted_intermediates: Vec<String>,
    peer_certificate: String,
    validation_time: Option<String>,
    expected_result: Outcome,
    #[serde(default)]
    crls: Option<Vec<String>>,
}

impl Testcase {
    fn has_feature(&self, f: &str) -> bool {
        self.features.iter().flatten().any(|x| x == f)
    }
}

/// Peer-name (host-name) matching: these groups exist to test whether the certificate matches
/// `expected_peer_name` (SAN dNSName/iPAddress, CN fallback, wildcards). The gateway never
/// matches a host name: a PSP is identified by its organizationIdentifier, and the TLS client
/// certificate it checks has no "expected peer name". Name constraints (`rfc5280::nc::*`,
/// `webpki::nc::*`) are path validation, not peer-name matching, and are kept.
const HOST_NAME: &str = "host-name matching (webpki::san::*, webpki::cn::*)";

/// Extended key usage as a TLS server-auth policy (`rfc5280::eku::*` tests the validator's
/// "expected EKU serverAuth"; `webpki::eku::*` the CA/Browser Forum profile). The gateway
/// has no expected EKU: QWACs carry serverAuth and/or clientAuth and QSealCs none, and
/// EN 319 412-4 does not make it a condition of the trust decision. Cases whose
/// `extended_key_usage` is set only as the CLIENT profile (`rfc5280::nc::*email*`, clientAuth)
/// are name-constraint cases and are kept.
const EKU: &str = "server-auth EKU policy (rfc5280::eku::*, webpki::eku::*)";

/// `max_chain_depth` is a caller setting of the validator (feature `max-chain-depth`); the
/// gateway has fixed budgets (check::MAX_PATH_INTERMEDIATES) and no such parameter.
const MAX_DEPTH: &str = "caller-set max chain depth (feature max-chain-depth)";

const RULES: &[&str] = &[HOST_NAME, EKU, MAX_DEPTH];

/// Why a case is not run, by rule; `None`: run it. Rules are about classes of cases, never
/// about single ids: a case that fails for another reason is a disagreement, not a skip.
/// `has-crl` cases are run (their CRLs go through the product's CRL code).
fn skip_reason(tc: &Testcase) -> Option<&'static str> {
    let id = tc.id.as_str();
    if id.starts_with("webpki::san::") || id.starts_with("webpki::cn::") {
        return Some(HOST_NAME);
    }
    if id.starts_with("rfc5280::eku::") || id.starts_with("webpki::eku::") {
        return Some(EKU);
    }
    if tc.has_feature("max-chain-depth") {
        return Some(MAX_DEPTH);
    }
    None
}

fn parse(what: &str, pem: &str) -> Result<PspCertificate, String> {
    PspCertificate::parse(pem.as_bytes()).map_err(|e| format!("{what} does not parse: {e}"))
}

/// The outcome of one case and the line that explains it.
fn run(tc: &Testcase) -> (Outcome, String) {
    let now = match &tc.validation_time {
        Some(t) => OffsetDateTime::parse(t, &Rfc3339)
            .unwrap_or_else(|e| panic!("{}: validation_time {t}: {e}", tc.id)),
        None => OffsetDateTime::now_utc(),
    };
    let certs = || -> Result<_, String> {
        let anchors = tc
            .trusted_certs
            .iter()
            .map(|p| parse("a trusted certificate", p))
            .collect::<Result<Vec<_>, _>>()?;
        let intermediates = tc
            .untrusted_intermediates
            .iter()
            .map(|p| parse("an intermediate", p))
            .collect::<Result<Vec<_>, _>>()?;
        let leaf = parse("the peer certificate", &tc.peer_certificate)?;
        Ok((anchors, intermediates, leaf))
    };
    let (anchors, intermediates, leaf) = match certs() {
        Ok(c) => c,
        Err(e) => return (Outcome::Failure, e),
    };
    let crls: Option<Vec<Crl>> = tc.crls.as_ref().filter(|c| !c.is_empty()).map(|c| {
        c.iter()
            .enumerate()
            .map(|(i, p)| Crl {
                name: format!("crls[{i}]"),
                bytes: p.as_bytes().to_vec(),
            })
            .collect()
    });
    let r = support::run_case(&anchors, &leaf, &intermediates, now, crls.as_deref());
    (r.outcome, r.detail())
}

#[test]
fn every_limbo_case_gives_its_expected_result_or_is_a_recorded_divergence() {
    let path = support::data("x509-limbo/limbo.json");
    let text = std::fs::read_to_string(&path).expect("limbo.json reads");
    let limbo: Limbo = serde_json::from_str(&text).expect("limbo.json follows the schema");
    assert_eq!(limbo.version, 1);
    let divergences = support::load_divergences(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/x509-limbo-divergences.toml"),
    );

    let mut skipped: BTreeMap<&str, usize> = RULES.iter().map(|r| (*r, 0)).collect();
    let mut results = Vec::new();
    for tc in &limbo.testcases {
        if let Some(rule) = skip_reason(tc) {
            *skipped.get_mut(rule).expect("a listed rule") += 1;
            continue;
        }
        let (actual, detail) = run(tc);
        results.push(Judged {
            id: tc.id.clone(),
            expected: tc.expected_result,
            actual,
            detail,
        });
    }
    let v = support::judge(&results, &divergences);
    let per_rule: Vec<String> = skipped.iter().map(|(r, n)| format!("{r}: {n}")).collect();
    eprintln!(
        "x509-limbo: {} cases; agree {}, skipped by rule {} ({}), intended divergences {}, problems {}",
        limbo.testcases.len(),
        v.agree,
        skipped.values().sum::<usize>(),
        per_rule.join("; "),
        v.intended,
        v.problems.len()
    );
    for p in &v.problems {
        eprintln!("  {p}");
    }
    assert!(
        v.problems.is_empty(),
        "{} x509-limbo problems:\n{}",
        v.problems.len(),
        v.problems.join("\n")
    );
}
