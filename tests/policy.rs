//! The access rule on the sandbox's certificates and registers, with revocation evidence
//! given explicitly (gathering it is the revocation module's job).

mod common;

use std::sync::Arc;

use common::*;
use psp_cert::cert::PspCertificate;
use psp_check::CheckReport;
use psp_check::check::{self, CheckInput, MethodOutcome, RevocationEvidence, Snapshots};
use psp_check::policy::{self, CrossBorderRule, Policy, Reason};
use psp_gateway::Config;
use psp_service::register::{AuthStatus, RegisterSnapshot, ServiceSet};
use psp_service::revocation::crl::CrlIndex;
use psp_service::trust::TrustList;

const NOW: &str = "2026-11-21T00:00:00Z";

struct Sandbox {
    trust: TrustList,
    registers: RegisterSnapshot,
}

fn sandbox() -> Sandbox {
    let config = Config::load(&root().join("gateway.toml")).expect("gateway.toml");
    Sandbox {
        trust: config
            .load_trust(time::OffsetDateTime::now_utc())
            .expect("trust"),
        registers: psp_service::register::load(&config.registers, &config.base_dir)
            .expect("registers")
            .0,
    }
}

/// A verified CRL answer about `cert` at [`NOW`], from its sandbox CA (the one in `certs/ca/`
/// whose subject and key identifier are the certificate's issuer's, signing with its key), listing the certificate
/// when `revoked`. Evidence is real: a good answer can only come from a verified CRL or OCSP
/// response.
fn crl_answer(cert: &PspCertificate, revoked: bool) -> MethodOutcome {
    let cas = root().join("certs/ca");
    let ca_pem = std::fs::read_dir(&cas)
        .expect("certs/ca")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pem"))
        .find(|p| {
            // The issuer by name and key: `untrusted-issuing` has `qtsp-issuing`'s name.
            let ca = load_cert(p);
            ca.subject_raw == cert.issuer_raw && ca.subject_key_id == cert.authority_key_id
        })
        .expect("the certificate's sandbox CA");
    let ca = load_cert(&ca_pem);
    let now = at(NOW);
    let listed: &[&[u8]] = if revoked { &[&cert.serial] } else { &[] };
    let crl = psp_testkit::pki::signed_crl(
        &std::fs::read_to_string(&ca_pem).expect("CA"),
        &std::fs::read_to_string(ca_pem.with_extension("key")).expect("CA key"),
        now - time::Duration::hours(1),
        now + time::Duration::days(1),
        listed,
    );
    let index = CrlIndex::parse(&crl, &ca).expect("the CRL verifies");
    let tolerance = (std::time::Duration::ZERO, std::time::Duration::ZERO);
    MethodOutcome::from_crl(&index, cert, "test CRL", now, tolerance)
}

/// What revocation says of a certificate, as a test gives it.
type Evidence = fn(&PspCertificate) -> RevocationEvidence;

fn good(cert: &PspCertificate) -> RevocationEvidence {
    let answer = crl_answer(cert, false);
    assert!(matches!(answer, MethodOutcome::Good { .. }), "{answer:?}");
    RevocationEvidence {
        crl: answer.clone(),
        ocsp: answer,
    }
}

fn revoked(cert: &PspCertificate) -> RevocationEvidence {
    let answer = crl_answer(cert, true);
    assert!(
        matches!(answer, MethodOutcome::Revoked { .. }),
        "{answer:?}"
    );
    RevocationEvidence {
        crl: answer,
        ocsp: MethodOutcome::Failed {
            reason: "down".into(),
        },
    }
}

fn unknown(_: &PspCertificate) -> RevocationEvidence {
    RevocationEvidence::not_checked("responders down")
}

fn rule(jurisdiction: &str) -> Policy {
    let j = cc(jurisdiction);
    Policy {
        jurisdiction: j,
        cross_border: CrossBorderRule::default_for(j),
        accepted_statuses: vec![AuthStatus::Authorised, AuthStatus::Registered],
        require_roles: false,
        allow: None,
        deny: Default::default(),
    }
}

fn services(n: &[u8]) -> ServiceSet {
    ServiceSet::from_numbers(n).expect("services")
}

/// Decides `scenario` calling a route needing `required`, at a bank with `policy`.
/// The sandbox certificate of `scenario`, and its check for `policy`'s jurisdiction at
/// [`NOW`] with `evidence`.
fn checked(
    sb: &Sandbox,
    scenario: &str,
    policy: &Policy,
    evidence: Evidence,
) -> (PspCertificate, CheckReport) {
    let cert = load_cert(&root().join(format!("certs/psp/{scenario}.pem")));
    let input = CheckInput {
        certificate: &cert,
        intermediates: &[],
        jurisdiction: policy.jurisdiction,
        now: at(NOW),
    };
    let report = check::check(
        &input,
        Snapshots {
            trust: &sb.trust,
            registers: &sb.registers,
        },
        &evidence(&cert),
    );
    (cert, report)
}

fn decide(
    sb: &Sandbox,
    scenario: &str,
    policy: &Policy,
    required: &[u8],
    evidence: Evidence,
) -> Result<ServiceSet, Reason> {
    let (cert, report) = checked(sb, scenario, policy, evidence);
    policy::decide(policy, Arc::new(report), &cert, services(required))
        .map(|p| p.services())
        .map_err(|r| r.reason)
}

#[test]
fn an_authorised_psp_with_good_evidence_is_permitted_on_its_services() {
    let sb = sandbox();
    let p = rule("XX");
    assert!(decide(&sb, "valid", &p, &[8], good).is_ok());
    assert!(decide(&sb, "valid", &p, &[7], good).is_ok());
    assert!(decide(&sb, "ecdsa", &p, &[8], good).is_ok());
    assert!(decide(&sb, "qseal", &p, &[7], good).is_ok());
    assert!(decide(&sb, "credit-institution", &p, &[5], good).is_ok());
    assert_eq!(decide(&sb, "aisp", &p, &[8], good), Ok(services(&[8])));
}

#[test]
fn certificate_problems_are_named_in_a_fixed_order() {
    let sb = sandbox();
    let p = rule("XX");
    assert_eq!(
        decide(&sb, "untrusted", &p, &[8], good),
        Err(Reason::IssuerNotApproved)
    );
    assert_eq!(
        decide(&sb, "tampered", &p, &[8], good),
        Err(Reason::SignatureInvalid)
    );
    assert_eq!(
        decide(&sb, "expired", &p, &[8], good),
        Err(Reason::CertificateExpired)
    );
    assert_eq!(
        decide(&sb, "valid", &p, &[8], revoked),
        Err(Reason::CertificateRevoked)
    );
    assert_eq!(
        decide(&sb, "expired", &p, &[8], revoked),
        Err(Reason::CertificateRevoked),
        "revoked is reported before expired"
    );
    assert_eq!(
        decide(&sb, "valid", &p, &[8], unknown),
        Err(Reason::RevocationUnknown),
        "no verified evidence: fail closed"
    );
    assert_eq!(
        psp_faces::gateway::refusal_status(Reason::RevocationUnknown.kind()),
        http::StatusCode::UNAUTHORIZED
    );
}

/// Issue 40 finding 7: the home register lists the PSP's category both Authorised and
/// Unauthorised (two references normalised into one PSP): the most restrictive status
/// decides, on every face (they all decide through `policy::decide`). The register is the
/// sandbox's XX file with the `valid` PSP's entry listed a second time, withdrawn.
#[test]
fn a_register_that_contradicts_itself_vouches_for_nothing_in_that_category() {
    let sb = sandbox();
    let p = rule("XX");
    let (cert, report) = checked(&sb, "valid", &p, good);
    assert!(policy::decide(&p, Arc::new(report), &cert, services(&[8])).is_ok());

    let dir = std::env::temp_dir().join(format!("psp-policy-contradicts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut native: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root().join("registers/sandbox/XX.json")).expect("XX.json"),
    )
    .expect("native JSON");
    let entries = native["registers"][0]["entities"][0]["entries"]
        .as_array_mut()
        .expect("the valid PSP's entries");
    let mut withdrawn = entries[0].clone();
    withdrawn["status"] = "Unauthorised".into();
    entries.push(withdrawn);
    let file = dir.join("XX.json");
    std::fs::write(&file, serde_json::to_vec(&native).expect("JSON")).expect("write");
    let contradicted = Sandbox {
        trust: sb.trust,
        registers: psp_service::register::load(
            &toml::from_str(&format!(
                "[[files]]\npath = {:?}\nformat = \"native\"",
                file
            ))
            .expect("register configuration"),
            &dir,
        )
        .expect("a register that contradicts itself loads")
        .0,
    };
    let (cert, report) = checked(&contradicted, "valid", &p, good);
    let refused = policy::decide(&p, Arc::new(report), &cert, services(&[8]))
        .expect_err("the most restrictive status decides");
    assert_eq!(refused.reason, Reason::NotAuthorised);
    assert!(
        refused.detail.contains("contradicts itself"),
        "{}",
        refused.detail
    );
}

#[test]
fn register_problems_are_refused() {
    let sb = sandbox();
    let p = rule("XX");
    assert_eq!(
        decide(&sb, "unauthorised", &p, &[8], good),
        Err(Reason::NotAuthorised)
    );
    assert_eq!(
        decide(&sb, "aisp", &p, &[7], good),
        Err(Reason::ServicesNotCovered),
        "an AIS-only PSP on a payments route"
    );
    assert_eq!(
        decide(&sb, "roles-1-2", &p, &[8], good),
        Err(Reason::ServicesNotCovered),
        "the register's services count, not the certificate's roles"
    );
    assert_eq!(
        psp_faces::gateway::refusal_status(Reason::ServicesNotCovered.kind()),
        http::StatusCode::FORBIDDEN
    );
    let mut only_authorised = rule("XX");
    only_authorised.accepted_statuses = vec![AuthStatus::Authorised];
    assert_eq!(
        decide(&sb, "aisp", &only_authorised, &[8], good),
        Err(Reason::NotAuthorised),
        "Registered is accepted only when configured"
    );
}

#[test]
fn passport_out_allows_the_passported_services_only() {
    let sb = sandbox();
    let p = rule("XY");
    assert_eq!(
        decide(&sb, "passport-out-xy", &p, &[8], good),
        Ok(services(&[7, 8]))
    );
    assert_eq!(
        decide(&sb, "passport-out-xy", &p, &[7], good),
        Err(Reason::NotPassported)
    );
    assert!(decide(&sb, "role-5", &p, &[5], good).is_ok());
    assert_eq!(
        decide(&sb, "valid", &p, &[8], good),
        Err(Reason::NotPassported)
    );
    let mut home_only = rule("XY");
    home_only.cross_border = CrossBorderRule::HomeOnly;
    assert_eq!(
        decide(&sb, "passport-out-xy", &home_only, &[8], good),
        Err(Reason::CrossBorderRefused)
    );
}

#[test]
fn the_uk_temporary_permissions_rule_follows_contract_rule_6() {
    let sb = sandbox();
    let p = rule("GB");
    assert_eq!(p.cross_border, CrossBorderRule::UkTpr, "the default for GB");
    assert!(decide(&sb, "gb-tpr", &p, &[8], good).is_ok());
    assert!(decide(&sb, "gb-tpr", &p, &[7], good).is_ok());
    assert_eq!(
        decide(&sb, "gb-tpr", &p, &[5], good),
        Err(Reason::ServicesNotCovered)
    );
    assert_eq!(
        decide(&sb, "passport-out-xy", &p, &[8], good),
        Err(Reason::NoTemporaryPermission),
        "no passportIn entry in the GB register"
    );
    // A GB-home PSP at a GB bank is not cross-border.
    assert!(decide(&sb, "obie-valid", &p, &[8], good).is_ok());
}

#[test]
fn roles_allow_and_deny_lists_apply_when_configured() {
    let sb = sandbox();
    let mut p = rule("XX");
    p.require_roles = true;
    assert!(
        decide(&sb, "valid", &p, &[8], good).is_ok(),
        "PSP_AI covers 8"
    );
    assert_eq!(
        decide(&sb, "valid", &p, &[6], good),
        Err(Reason::RolesNotCovered),
        "no role stands for money remittance"
    );
    let mut deny = rule("XX");
    deny.deny.insert("PSDXX-TEST-000001");
    assert_eq!(decide(&sb, "valid", &deny, &[8], good), Err(Reason::Denied));
    let mut allow = rule("XX");
    allow.allow = Some(["PSDXX-TEST-000016".to_owned()].into_iter().collect());
    assert_eq!(
        decide(&sb, "valid", &allow, &[8], good),
        Err(Reason::NotAllowed)
    );
    assert!(decide(&sb, "aisp", &allow, &[8], good).is_ok());
}

#[test]
fn hub_directory_tiers_stand_for_account_information_and_payment_initiation() {
    let sb = sandbox();
    let p = rule("XX");
    assert_eq!(
        decide(&sb, "obhd-valid", &p, &[8], good),
        Ok(services(&[7, 8]))
    );
    assert_eq!(
        decide(&sb, "obhd-valid", &p, &[5], good),
        Err(Reason::ServicesNotCovered)
    );
}
