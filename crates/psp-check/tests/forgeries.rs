//! What a program embedding psp-check could do to get a `Permit` the check must not give, each
//! tried by the fresh-eyes attack of issue 41 (`docs/attacks/embedding.md`) and each refused
//! now: a revoked answer's proof on a good answer, a resolution of another certificate, an
//! answer about another certificate or signed by a look-alike CA, an answer read as of the
//! past used now, another PSP's register answer, and indices that made public functions
//! panic. The material is the sandbox's (`certs/`, `registers/sandbox/XX.json`); its CA keys
//! are public test keys, so a CRL signed with them is real evidence.

use std::path::{Path, PathBuf};
use std::time::Duration;

use psp_check::cert::{PsdAuthNumber, PspCertificate};
use psp_check::check::{self, CheckInput, KeyRef, RevocationPlan, Snapshots};
use psp_check::policy::{self, Policy, Reason};
use psp_check::register::{
    AuthStatus, Category, CategoryEntry, Entity, OnDemandHome, RegisterSnapshot, ServiceSet,
};
use psp_check::revocation::crl::CrlIndex;
use psp_check::revocation::{MethodOutcome, RevocationEvidence};
use psp_check::trust::{CertKind, QtspSource, Source, TrustList};
use time::OffsetDateTime;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(relative: &str) -> Vec<u8> {
    std::fs::read(repository().join(relative)).expect(relative)
}

fn psp(scenario: &str) -> PspCertificate {
    PspCertificate::parse(&read(&format!("certs/psp/{scenario}.pem"))).expect("parses")
}

fn ca(name: &str) -> PspCertificate {
    PspCertificate::parse(&read(&format!("certs/ca/{name}.pem"))).expect("parses")
}

/// The sandbox as an embedder builds it: `qtsp-issuing` approved for XX, the XX register.
struct Sandbox {
    trust: TrustList,
    registers: RegisterSnapshot,
    now: OffsetDateTime,
}

fn sandbox() -> Sandbox {
    let xx = "XX".parse().expect("country");
    let source = Source::configured("sandbox", QtspSource::Eidas, &[xx]);
    let trust = TrustList::from_pem(source, &read("certs/ca/qtsp-issuing.pem")).expect("trust");
    let file = repository().join("registers/sandbox/XX.json");
    let registers = RegisterSnapshot::from_native(&read("registers/sandbox/XX.json"), &file)
        .expect("registers");
    Sandbox {
        trust,
        registers,
        now: OffsetDateTime::now_utc(),
    }
}

/// What a CRL signed by sandbox CA `signer`, current now and listing `listed`, says of
/// `certificate` when parsed against `parsed_against`.
fn crl_answer(
    sb: &Sandbox,
    signer: &str,
    parsed_against: &PspCertificate,
    listed: &[&PspCertificate],
    certificate: &PspCertificate,
) -> MethodOutcome {
    let serials: Vec<&[u8]> = listed.iter().map(|c| c.serial.as_slice()).collect();
    let der = psp_testkit::pki::signed_crl(
        &String::from_utf8(read(&format!("certs/ca/{signer}.pem"))).expect("PEM"),
        &String::from_utf8(read(&format!("certs/ca/{signer}.key"))).expect("PEM"),
        sb.now - time::Duration::minutes(5),
        sb.now + time::Duration::hours(1),
        &serials,
    );
    let index = CrlIndex::parse(&der, parsed_against).expect("the CRL verifies");
    MethodOutcome::from_crl(
        &index,
        certificate,
        signer,
        sb.now,
        (Duration::ZERO, Duration::ZERO),
    )
}

/// The check of `certificate`, presented alone, for XX at `now`.
fn xx_input(certificate: &PspCertificate, now: OffsetDateTime) -> CheckInput<'_> {
    CheckInput {
        certificate,
        intermediates: &[],
        jurisdiction: "XX".parse().expect("country"),
        now,
    }
}

fn decide(sb: &Sandbox, certificate: &PspCertificate, crl: MethodOutcome) -> Result<(), Reason> {
    let mut evidence = RevocationEvidence::not_checked("not asked");
    evidence.crl = crl;
    let snapshots = Snapshots::new(&sb.trust, &sb.registers);
    let rule = Policy::for_jurisdiction("XX".parse().expect("country"));
    let payments = ServiceSet::from_numbers(&[7]).expect("service 7");
    psp_check::decide(certificate, snapshots, &evidence, &rule, payments, sb.now)
        .map(|_| ())
        .map_err(|r| r.reason)
}

/// `revoked`, and the genuine answer of a CRL of its CA that lists it.
fn revoked_and_listed(sb: &Sandbox) -> (PspCertificate, MethodOutcome) {
    let revoked = psp("revoked");
    let issuer = ca("qtsp-issuing");
    let listed = crl_answer(sb, "qtsp-issuing", &issuer, &[&revoked], &revoked);
    (revoked, listed)
}

/// The honest baseline the attacks below start from: valid permitted, revoked refused.
#[test]
fn with_honest_evidence_valid_is_permitted_and_revoked_refused() {
    let sb = sandbox();
    let (issuer, valid, revoked) = (ca("qtsp-issuing"), psp("valid"), psp("revoked"));
    let good = crl_answer(&sb, "qtsp-issuing", &issuer, &[&revoked], &valid);
    assert_eq!(decide(&sb, &valid, good), Ok(()));
    let listed = crl_answer(&sb, "qtsp-issuing", &issuer, &[&revoked], &revoked);
    assert_eq!(
        decide(&sb, &revoked, listed),
        Err(Reason::CertificateRevoked)
    );
}

/// Break 1: the proof of a genuine "revoked" answer moved onto a "good" answer.
#[test]
fn a_revoked_answers_proof_does_not_make_a_good_answer() {
    let sb = sandbox();
    let (revoked, listed) = revoked_and_listed(&sb);
    let MethodOutcome::Revoked { verified, .. } = &listed else {
        panic!("the CRL lists it: {listed:?}");
    };
    let forged = MethodOutcome::Good {
        evidence: "forged".into(),
        valid_until: None,
        verified: verified.clone(),
    };
    assert_eq!(
        decide(&sb, &revoked, forged),
        Err(Reason::RevocationUnknown)
    );
}

/// Break 3: a good answer about `valid` given as `revoked`'s evidence.
#[test]
fn an_answer_about_another_certificate_is_not_relied_on() {
    let sb = sandbox();
    let (valid, revoked) = (psp("valid"), psp("revoked"));
    let about_valid = crl_answer(
        &sb,
        "qtsp-issuing",
        &ca("qtsp-issuing"),
        &[&revoked],
        &valid,
    );
    assert_eq!(
        decide(&sb, &revoked, about_valid),
        Err(Reason::RevocationUnknown)
    );
}

/// Break 4: a CRL signed by the look-alike CA (same name, another key), verified against the
/// look-alike's own certificate, says nothing of a certificate the trusted CA issued.
#[test]
fn a_look_alike_cas_crl_is_not_relied_on() {
    let sb = sandbox();
    let revoked = psp("revoked");
    let lookalike = ca("untrusted-issuing");
    let answer = crl_answer(&sb, "untrusted-issuing", &lookalike, &[], &revoked);
    assert!(matches!(answer, MethodOutcome::Good { .. }), "{answer:?}");
    assert_eq!(
        decide(&sb, &revoked, answer),
        Err(Reason::RevocationUnknown)
    );
}

/// Break 5: a revocation read as of a time before it happened is "not revoked then", and
/// only then: used for a check now, it is not relied on.
#[test]
fn an_answer_read_as_of_the_past_is_not_relied_on_now() {
    let sb = sandbox();
    let (revoked, listed) = revoked_and_listed(&sb);
    let before = sb.now - time::Duration::days(1);
    let then = RevocationEvidence {
        crl: listed,
        ocsp: MethodOutcome::Failed {
            reason: "not asked".into(),
        },
    }
    .as_of(before);
    assert!(
        matches!(then.crl, MethodOutcome::Good { .. }),
        "{:?}",
        then.crl
    );
    assert_eq!(
        decide(&sb, &revoked, then.crl.clone()),
        Err(Reason::RevocationUnknown)
    );
}

/// Break 2: the resolution of `valid` handed to the report of `untrusted` and `tampered`.
#[test]
fn a_resolution_made_for_another_certificate_is_not_used() {
    let sb = sandbox();
    let valid = psp("valid");
    let snapshots = Snapshots::new(&sb.trust, &sb.registers);
    let borrowed = check::resolve_issuer(&xx_input(&valid, sb.now), &sb.trust);
    for (scenario, flag) in [("untrusted", 0), ("tampered", 1)] {
        let certificate = psp(scenario);
        let evidence = RevocationEvidence::not_checked("not asked").into();
        let report = check::report(
            &xx_input(&certificate, sb.now),
            snapshots,
            &borrowed,
            &evidence,
        );
        let validity = report.validity();
        let flags = [validity.valid_qtsp, validity.valid_signature];
        assert!(!flags[flag], "{scenario}: {validity:?}");
    }
}

/// Break 6: another PSP's register answer given for the unauthorised PSP's report.
#[test]
fn another_psps_register_answer_is_taken_as_no_answer() {
    let sb = sandbox();
    let unauthorised = psp("unauthorised");
    let issuer = ca("qtsp-issuing");
    let good = crl_answer(&sb, "qtsp-issuing", &issuer, &[], &unauthorised);
    let mut evidence = RevocationEvidence::not_checked("not asked");
    evidence.crl = good;
    let input = CheckInput {
        certificate: &unauthorised,
        intermediates: &[],
        jurisdiction: "XX".parse().expect("country"),
        now: sb.now,
    };
    let snapshots = Snapshots::new(&sb.trust, &sb.registers);
    let authorised_entry = |reference: &str| Entity {
        reference: reference.into(),
        entries: vec![CategoryEntry {
            category: Category::PaymentInstitution,
            legal_name: "Sandbox Valid PSP".into(),
            status: AuthStatus::Authorised,
            services: ServiceSet::from_numbers(&[7, 8]).expect("services"),
            e_money: false,
            passport_out: None,
        }],
    };
    let other = PsdAuthNumber::parse("PSDXX-TEST-000001").expect("auth number");
    let own = unauthorised.auth_number().expect("its auth number").clone();
    for (auth, entity) in [(&other, "000001"), (&own, "000001")] {
        let mut report = check::check(&input, snapshots, &evidence);
        let home = OnDemandHome::Answer {
            entity: Some(authorised_entry(entity)),
            warning: None,
        };
        report.consult_home_on_demand(
            &sb.registers,
            auth,
            input.jurisdiction,
            ("XX-TEST", &home),
            "home register: forged".into(),
        );
        let rule = Policy::for_jurisdiction(input.jurisdiction);
        let payments = ServiceSet::from_numbers(&[7]).expect("service 7");
        let decided = policy::decide(&rule, std::sync::Arc::new(report), &unauthorised, payments);
        assert!(decided.is_err(), "{auth} / {entity}: a permit");
    }
}

/// Break 7: indices a program chooses no longer make public functions panic.
#[test]
fn indices_from_elsewhere_are_errors_not_panics() {
    let sb = sandbox();
    let xx = "XX".parse().expect("country");
    let source = Source::configured("other", QtspSource::Eidas, &[xx]);
    let mut trust = TrustList::new(vec![source], Vec::new()).expect("one source");
    assert!(
        trust
            .add_issuers(7, vec![ca("qtsp-issuing")], &[CertKind::Web], "x")
            .is_err()
    );
    assert!(
        trust
            .add_pem_issuers(7, &read("certs/ca/qtsp-issuing.pem"), &[], "x")
            .is_err()
    );
    assert!(KeyRef::TrustList(99).certificate(&trust, &[]).is_none());
    assert!(KeyRef::Presented(99).certificate(&trust, &[]).is_none());

    // A resolution made against the sandbox's list, used with an empty one.
    let valid = psp("valid");
    let input = CheckInput {
        certificate: &valid,
        intermediates: &[],
        jurisdiction: xx,
        now: sb.now,
    };
    let resolution = check::resolve_issuer(&input, &sb.trust);
    let snapshots = Snapshots::new(&trust, &sb.registers);
    let evidence = RevocationEvidence::not_checked("not asked").into();
    let report = check::report(&input, snapshots, &resolution, &evidence);
    assert!(!report.validity().valid_qtsp);
    assert!(RevocationPlan::new(input, &trust, &resolution).is_none());
    let plan = RevocationPlan::new(input, &sb.trust, &resolution).expect("a verified path");
    assert!(plan.target(99).is_none());
}
