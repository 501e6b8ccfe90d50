//! A whole decision with psp-check alone, as a bank's own Rust service would embed it: no
//! network, no runtime, no configuration file. The inputs are built in memory here; where
//! they come from (trusted lists, CRLs and OCSP, register files) is the embedder's choice.
//!
//! ```text
//! cargo run -p psp-check --example decide [certs/psp/NAME.pem]
//! ```
//!
//! It reads the repository's sandbox certificates (`certs/`): the issuing CA approved for
//! jurisdiction `XX`, and the PSP certificate named (default `certs/psp/valid.pem`). It prints
//! the four certificate flags, then the access rule's answer for a payment-initiation route
//! in `XX`, with revocation evidence given as "good" (gathering it is the embedder's job).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use psp_check::cert::PspCertificate;
use psp_check::check::{self, CheckInput, MethodOutcome, RevocationEvidence, Snapshots};
use psp_check::policy::{self, CrossBorderRule, Policy};
use psp_check::register::{
    AuthStatus, Category, CategoryEntry, Entity, Normalisation, PaymentService, Register,
    RegisterKind, RegisterParts, RegisterSnapshot, ServiceSet,
};
use psp_check::trust::{
    Approval, CertKind, QcCompliancePolicy, QtspSource, Source, TrustList, TrustedIssuer,
    UntypedPolicy,
};
use time::macros::datetime;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn certificate(path: &Path) -> Result<PspCertificate, Box<dyn std::error::Error>> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(PspCertificate::parse(&bytes)?)
}

/// The trust data: one source approving the sandbox issuing CA for jurisdiction XX.
fn trust() -> Result<TrustList, Box<dyn std::error::Error>> {
    let source = Source {
        name: "example".into(),
        qtsp_source: QtspSource::Eidas,
        reported_jurisdiction: "XX".into(),
        valid_for: BTreeSet::from(["XX".parse()?]),
        qc_compliance: QcCompliancePolicy::Required,
        untyped: UntypedPolicy::Reject,
    };
    let issuer = TrustedIssuer {
        source: 0,
        certificate: certificate(&repository().join("certs/ca/qtsp-issuing.pem"))?,
        origin: "certs/ca/qtsp-issuing.pem".into(),
        history: vec![Approval {
            from: None,
            active: true,
            kinds: BTreeSet::from([CertKind::Web, CertKind::Seal]),
            status: "granted".into(),
            qualifications: Vec::new(),
            not_understood: Vec::new(),
        }],
    };
    Ok(TrustList::new(vec![source], vec![issuer]))
}

/// The register snapshot: NCA `XX-TEST`, one authorised payment institution (`000001`, the
/// sandbox's `valid` PSP) registered for services 7 and 8.
fn registers() -> Result<RegisterSnapshot, Box<dyn std::error::Error>> {
    let entity = Entity {
        reference: "000001".into(),
        entries: vec![CategoryEntry {
            category: Category::PaymentInstitution,
            legal_name: "Sandbox Valid PSP".into(),
            status: AuthStatus::Authorised,
            services: ServiceSet::from_numbers(&[7, 8]).ok_or("services 7 and 8")?,
            e_money: false,
            passport_out: None,
        }],
    };
    let register = Register::from(RegisterParts {
        nca_id: "XX-TEST".into(),
        aliases: Vec::new(),
        name: "Example competent authority".into(),
        country: "XX".parse()?,
        kind: RegisterKind::Psd2,
        normalisation: Normalisation::NONE,
        by_reference: HashMap::from([("000001".to_owned(), 0)]),
        entities: vec![entity],
        passport_in: HashMap::new(),
        source: PathBuf::from("built in memory"),
    });
    Ok(RegisterSnapshot::from_registers(vec![register])?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let psp = match std::env::args_os().nth(1) {
        Some(path) => PathBuf::from(path),
        None => repository().join("certs/psp/valid.pem"),
    };
    let certificate = certificate(&psp)?;
    let (trust, registers) = (trust()?, registers()?);
    // Time is an argument: a fixed instant, inside the sandbox certificates' validity.
    let now = datetime!(2026-11-21 00:00 UTC);
    let input = CheckInput {
        certificate: &certificate,
        intermediates: &[],
        jurisdiction: "XX".parse()?,
        now,
    };
    let good = || MethodOutcome::Good {
        evidence: "given by the example".into(),
        valid_until: None,
    };
    let evidence = RevocationEvidence {
        crl: good(),
        ocsp: good(),
    };
    let snapshots = Snapshots {
        trust: &trust,
        registers: &registers,
    };
    let report = check::check(&input, snapshots, &evidence);
    println!("certificate: {}", psp.display());
    println!("validity:    {:?}", report.validity);
    for line in &report.explanation {
        println!("  {line}");
    }

    let rule = Policy {
        jurisdiction: "XX".parse()?,
        cross_border: CrossBorderRule::PassportOut,
        accepted_statuses: vec![AuthStatus::Authorised, AuthStatus::Registered],
        require_roles: false,
        allow: None,
        deny: Default::default(),
    };
    let mut payments = ServiceSet::EMPTY;
    payments.insert(PaymentService::PAYMENT_INITIATION);
    match policy::decide(&rule, Arc::new(report), &certificate, payments) {
        Ok(permit) => println!(
            "decision:    permit ({}, registered for {:?})",
            permit.report().auth_number.as_deref().unwrap_or("?"),
            permit.services().to_vec()
        ),
        Err(rejection) => println!(
            "decision:    refuse, {} ({})",
            rejection.reason.code(),
            rejection.detail
        ),
    }
    Ok(())
}
