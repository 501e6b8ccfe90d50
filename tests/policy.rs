//! The access rule on the sandbox's certificates and registers, with revocation evidence
//! given explicitly (gathering it is the revocation module's job).

mod common;

use std::sync::Arc;

use common::*;
use psp_gateway::check::{self, CheckInput, MethodOutcome, RevocationEvidence, Snapshots};
use psp_gateway::policy::{self, CrossBorderRule, Policy, Reason};
use psp_gateway::register::{AuthStatus, RegisterSnapshot, ServiceSet};
use psp_gateway::{CheckReport, Config, PspCertificate, TrustList};

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
        registers: psp_gateway::register::load(&config.registers, &config.base_dir)
            .expect("registers")
            .0,
    }
}

fn good() -> RevocationEvidence {
    RevocationEvidence {
        crl: MethodOutcome::Good {
            evidence: "test CRL".into(),
            valid_until: None,
        },
        ocsp: MethodOutcome::Good {
            evidence: "test OCSP".into(),
            valid_until: None,
        },
    }
}

fn revoked() -> RevocationEvidence {
    RevocationEvidence {
        crl: MethodOutcome::Revoked {
            at: None,
            reason: Some("keyCompromise".into()),
            evidence: "test CRL".into(),
        },
        ocsp: MethodOutcome::Failed {
            reason: "down".into(),
        },
    }
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
    evidence: &RevocationEvidence,
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
        evidence,
    );
    (cert, report)
}

fn decide(
    sb: &Sandbox,
    scenario: &str,
    policy: &Policy,
    required: &[u8],
    evidence: RevocationEvidence,
) -> Result<ServiceSet, Reason> {
    let (cert, report) = checked(sb, scenario, policy, &evidence);
    policy::decide(policy, Arc::new(report), &cert, services(required))
        .map(|p| p.services())
        .map_err(|r| r.reason)
}

#[test]
fn an_authorised_psp_with_good_evidence_is_permitted_on_its_services() {
    let sb = sandbox();
    let p = rule("XX");
    assert!(decide(&sb, "valid", &p, &[8], good()).is_ok());
    assert!(decide(&sb, "valid", &p, &[7], good()).is_ok());
    assert!(decide(&sb, "ecdsa", &p, &[8], good()).is_ok());
    assert!(decide(&sb, "qseal", &p, &[7], good()).is_ok());
    assert!(decide(&sb, "credit-institution", &p, &[5], good()).is_ok());
    assert_eq!(decide(&sb, "aisp", &p, &[8], good()), Ok(services(&[8])));
}

#[test]
fn certificate_problems_are_named_in_a_fixed_order() {
    let sb = sandbox();
    let p = rule("XX");
    assert_eq!(
        decide(&sb, "untrusted", &p, &[8], good()),
        Err(Reason::IssuerNotApproved)
    );
    assert_eq!(
        decide(&sb, "tampered", &p, &[8], good()),
        Err(Reason::SignatureInvalid)
    );
    assert_eq!(
        decide(&sb, "expired", &p, &[8], good()),
        Err(Reason::CertificateExpired)
    );
    assert_eq!(
        decide(&sb, "valid", &p, &[8], revoked()),
        Err(Reason::CertificateRevoked)
    );
    assert_eq!(
        decide(&sb, "expired", &p, &[8], revoked()),
        Err(Reason::CertificateRevoked),
        "revoked is reported before expired"
    );
    assert_eq!(
        decide(
            &sb,
            "valid",
            &p,
            &[8],
            RevocationEvidence::not_checked("responders down")
        ),
        Err(Reason::RevocationUnknown),
        "no verified evidence: fail closed"
    );
    assert_eq!(
        psp_gateway::gateway::refusal_status(Reason::RevocationUnknown.kind()),
        http::StatusCode::UNAUTHORIZED
    );
}

/// Issue 40 finding 7: the home register lists the PSP's category both Authorised and
/// Unauthorised (two references normalised into one PSP): the most restrictive status
/// decides, on every face (they all decide through `policy::decide`).
#[test]
fn a_register_that_contradicts_itself_vouches_for_nothing_in_that_category() {
    let sb = sandbox();
    let p = rule("XX");
    let (cert, report) = checked(&sb, "valid", &p, &good());
    assert!(policy::decide(&p, Arc::new(report.clone()), &cert, services(&[8])).is_ok());
    let mut contradicted = report;
    let mut withdrawn = contradicted.registers.home.category_entries[0].clone();
    withdrawn.psp_auth_status = AuthStatus::Unauthorised;
    contradicted.registers.home.category_entries.push(withdrawn);
    let refused = policy::decide(&p, Arc::new(contradicted), &cert, services(&[8]))
        .expect_err("the most restrictive status decides");
    assert_eq!(refused.reason, Reason::NotAuthorised);
    assert!(
        refused.detail.contains("contradicts itself"),
        "{}",
        refused.detail
    );
}

/// The fresh-eyes attack of issue 40 (docs/attacks/proxy-and-data.md B2): `gateway.deny`
/// compared the raw auth number while the register lookup normalised it, so
/// `PSDXX-TEST-0000000001`, `PSDXX-test-000001` or a trailing space got a denied PSP in. Every
/// spelling the register matches is on the list now; one with a control or non-ASCII
/// character is in no register at all.
#[test]
fn a_denied_psp_is_denied_under_every_spelling_of_its_auth_number() {
    let sb = sandbox();
    let mut p = rule("XX");
    p.deny = ["PSDXX-TEST-000001".to_owned()].into();
    let (cert, report) = checked(&sb, "valid", &p, &good());
    for spelling in [
        "PSDXX-TEST-000001",
        "PSDXX-TEST-0000000001",
        "PSDXX-test-000001",
        "PSDXX-TEST-000001 ",
    ] {
        let mut spelled = report.clone();
        spelled.auth_number = Some(spelling.to_owned());
        let refused =
            policy::decide(&p, Arc::new(spelled), &cert, services(&[8])).expect_err(spelling);
        assert_eq!(refused.reason, Reason::Denied, "{spelling:?}");
    }
    // The list's own spelling counts the same way: it is normalised once, when built.
    let mut listed_otherwise = rule("XX");
    listed_otherwise.deny = ["PSDXX-test-0000000001 "].into();
    let refused = policy::decide(
        &listed_otherwise,
        Arc::new(report.clone()),
        &cert,
        services(&[8]),
    )
    .expect_err("denied as listed in another spelling");
    assert_eq!(refused.reason, Reason::Denied);
    let mut other = rule("XX");
    other.deny = ["PSDXX-TEST-000002".to_owned()].into();
    assert!(policy::decide(&other, Arc::new(report), &cert, services(&[8])).is_ok());
}

#[test]
fn register_problems_are_refused() {
    let sb = sandbox();
    let p = rule("XX");
    assert_eq!(
        decide(&sb, "unauthorised", &p, &[8], good()),
        Err(Reason::NotAuthorised)
    );
    assert_eq!(
        decide(&sb, "aisp", &p, &[7], good()),
        Err(Reason::ServicesNotCovered),
        "an AIS-only PSP on a payments route"
    );
    assert_eq!(
        decide(&sb, "roles-1-2", &p, &[8], good()),
        Err(Reason::ServicesNotCovered),
        "the register's services count, not the certificate's roles"
    );
    assert_eq!(
        psp_gateway::gateway::refusal_status(Reason::ServicesNotCovered.kind()),
        http::StatusCode::FORBIDDEN
    );
    let mut only_authorised = rule("XX");
    only_authorised.accepted_statuses = vec![AuthStatus::Authorised];
    assert_eq!(
        decide(&sb, "aisp", &only_authorised, &[8], good()),
        Err(Reason::NotAuthorised),
        "Registered is accepted only when configured"
    );
}

#[test]
fn passport_out_allows_the_passported_services_only() {
    let sb = sandbox();
    let p = rule("XY");
    assert_eq!(
        decide(&sb, "passport-out-xy", &p, &[8], good()),
        Ok(services(&[7, 8]))
    );
    assert_eq!(
        decide(&sb, "passport-out-xy", &p, &[7], good()),
        Err(Reason::NotPassported)
    );
    assert!(decide(&sb, "role-5", &p, &[5], good()).is_ok());
    assert_eq!(
        decide(&sb, "valid", &p, &[8], good()),
        Err(Reason::NotPassported)
    );
    let mut home_only = rule("XY");
    home_only.cross_border = CrossBorderRule::HomeOnly;
    assert_eq!(
        decide(&sb, "passport-out-xy", &home_only, &[8], good()),
        Err(Reason::CrossBorderRefused)
    );
}

#[test]
fn the_uk_temporary_permissions_rule_follows_contract_rule_6() {
    let sb = sandbox();
    let p = rule("GB");
    assert_eq!(p.cross_border, CrossBorderRule::UkTpr, "the default for GB");
    assert!(decide(&sb, "gb-tpr", &p, &[8], good()).is_ok());
    assert!(decide(&sb, "gb-tpr", &p, &[7], good()).is_ok());
    assert_eq!(
        decide(&sb, "gb-tpr", &p, &[5], good()),
        Err(Reason::ServicesNotCovered)
    );
    assert_eq!(
        decide(&sb, "passport-out-xy", &p, &[8], good()),
        Err(Reason::NoTemporaryPermission),
        "no passportIn entry in the GB register"
    );
    // A GB-home PSP at a GB bank is not cross-border.
    assert!(decide(&sb, "obie-valid", &p, &[8], good()).is_ok());
}

#[test]
fn roles_allow_and_deny_lists_apply_when_configured() {
    let sb = sandbox();
    let mut p = rule("XX");
    p.require_roles = true;
    assert!(
        decide(&sb, "valid", &p, &[8], good()).is_ok(),
        "PSP_AI covers 8"
    );
    assert_eq!(
        decide(&sb, "valid", &p, &[6], good()),
        Err(Reason::RolesNotCovered),
        "no role stands for money remittance"
    );
    let mut deny = rule("XX");
    deny.deny.insert("PSDXX-TEST-000001");
    assert_eq!(
        decide(&sb, "valid", &deny, &[8], good()),
        Err(Reason::Denied)
    );
    let mut allow = rule("XX");
    allow.allow = Some(["PSDXX-TEST-000016".to_owned()].into_iter().collect());
    assert_eq!(
        decide(&sb, "valid", &allow, &[8], good()),
        Err(Reason::NotAllowed)
    );
    assert!(decide(&sb, "aisp", &allow, &[8], good()).is_ok());
}

#[test]
fn hub_directory_tiers_stand_for_account_information_and_payment_initiation() {
    let sb = sandbox();
    let p = rule("XX");
    assert_eq!(
        decide(&sb, "obhd-valid", &p, &[8], good()),
        Ok(services(&[7, 8]))
    );
    assert_eq!(
        decide(&sb, "obhd-valid", &p, &[5], good()),
        Err(Reason::ServicesNotCovered)
    );
}
