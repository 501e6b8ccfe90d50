//! A bank's service deciding a PSP with psp-check alone, from the repository root:
//! `cargo run -p psp-check --example embed -- certs/psp/valid.pem [CRL]` (the DER CRL of
//! `qtsp-issuing`, as the sandbox serves it; without one, revocation is unknown).
use psp_check::revocation::{MethodOutcome, RevocationEvidence, crl::CrlIndex};
use psp_check::{Snapshots, cert::PspCertificate, policy::Policy, register::*, trust::*};
use std::{fs::read, path::Path, time::Duration};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (now, xx) = (time::OffsetDateTime::now_utc(), "XX".parse()?);
    let source = Source::configured("sandbox", QtspSource::Eidas, &[xx]);
    let trust = TrustList::from_pem(source, &read("certs/ca/qtsp-issuing.pem")?)?;
    let file = Path::new("registers/sandbox/XX.json");
    let registers = RegisterSnapshot::from_native(&read(file)?, file)?;
    let psp = PspCertificate::parse(&read(&args[1])?)?;
    let mut evidence = RevocationEvidence::not_checked("no CRL given");
    if let Some(crl) = args.get(2) {
        let index = CrlIndex::parse(&read(crl)?, &trust.issuers()[0].certificate)?;
        let tolerance = (Duration::ZERO, Duration::from_secs(60));
        evidence.crl = MethodOutcome::from_crl(&index, &psp, crl, now, tolerance);
    }
    let inputs = Snapshots::new(&trust, &registers);
    let (rule, pis) = (Policy::for_jurisdiction(xx), ServiceSet::from_numbers(&[7]));
    match psp_check::decide(&psp, inputs, &evidence, &rule, pis.ok_or("PIS")?, now) {
        Ok(permit) => println!("permit {:?}", permit.report().attested_auth_number()),
        Err(refused) => println!("refuse {}: {}", refused.reason.code(), refused.detail),
    }
    Ok(())
}
