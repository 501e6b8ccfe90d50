//! Criterion benchmarks of the check's hot parts (issue 16's list), on the sandbox's data:
//!
//! - `certificate_parse/{rsa,ecdsa}`: a PSP certificate from PEM (what the endpoint does with
//!   the `eidas` header, and the gateway with the peer certificate);
//! - `check_miss/{rsa,ecdsa}`: the pure check on a cache miss, no network (path building and
//!   signatures, QC statements, registers), RSA-2048 and ECDSA P-256 issuers;
//! - `check_cached`: a decision served from the service's result cache (async, one runtime);
//! - `crl/{parse_index,lookup}/{100000,1000000}`: a CRL of that many entries decoded, its
//!   signature verified and indexed; one serial looked up.
//!
//! Run: `cargo bench --bench check`. Targets (issue 16): a miss under 100 µs, a cached decision
//! under 2 µs, a 1,000,000-entry CRL under 1 s. Figures: BENCHMARKS.md.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use psp_cert::cert::PspCertificate;
use psp_check::check::{self, CheckInput, RevocationEvidence, Snapshots};
use psp_gateway::Config;
use psp_service::revocation::crl::CrlIndex;
use psp_service::service::{CheckService, ReferenceData, Revocation};
use time::OffsetDateTime;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn pem(name: &str) -> Vec<u8> {
    std::fs::read(root().join("certs/psp").join(format!("{name}.pem"))).expect("sandbox PSP")
}

fn sandbox() -> ReferenceData {
    let config = Config::load(&root().join("gateway.toml")).expect("gateway.toml");
    ReferenceData::load(&config.data_sources(), 1, OffsetDateTime::now_utc()).expect("data")
}

fn certificate_parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("certificate_parse");
    for (label, name) in [("rsa", "valid"), ("ecdsa", "ecdsa")] {
        let bytes = pem(name);
        g.bench_function(label, |b| {
            b.iter(|| PspCertificate::parse(black_box(&bytes)).expect("parses"))
        });
    }
    g.finish();
}

fn check_miss(c: &mut Criterion) {
    let data = sandbox();
    let now = OffsetDateTime::now_utc();
    let evidence = RevocationEvidence::not_checked("benchmark: no network");
    let mut g = c.benchmark_group("check_miss");
    for (label, name) in [("rsa", "valid"), ("ecdsa", "ecdsa")] {
        let cert = PspCertificate::parse(&pem(name)).expect("parses");
        let jurisdiction = "XX".parse().expect("XX");
        g.bench_function(label, |b| {
            b.iter(|| {
                let input = CheckInput {
                    certificate: &cert,
                    intermediates: &[],
                    jurisdiction,
                    now,
                };
                let snapshots = Snapshots {
                    trust: &data.trust,
                    registers: &data.registers,
                };
                black_box(check::check(&input, snapshots, &evidence))
            })
        });
    }
    g.finish();
}

fn check_cached(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let service = CheckService::new(
        sandbox(),
        Revocation::Offline,
        Duration::from_secs(300),
        10_000,
    );
    let cert = Arc::new(PspCertificate::parse(&pem("valid")).expect("parses"));
    let chain = Arc::new(Vec::new());
    let jurisdiction = "XX".parse().expect("XX");
    let now = OffsetDateTime::now_utc();
    // The first check fills the cache.
    runtime.block_on(service.check(cert.clone(), chain.clone(), jurisdiction, now));
    c.bench_function("check_cached", |b| {
        b.to_async(&runtime)
            .iter(|| service.check(black_box(cert.clone()), chain.clone(), jurisdiction, now))
    });
}

/// A CA and a CRL of `n` revoked serials it signed (generated once per size into the target
/// directory: the million-entry one takes a few seconds to sign).
fn crl_of(n: u64) -> (PspCertificate, Vec<u8>) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-crl");
    std::fs::create_dir_all(&dir).expect("dir");
    let (ca_path, crl_path) = (
        dir.join(format!("ca-{n}.der")),
        dir.join(format!("crl-{n}.der")),
    );
    if !(ca_path.exists() && crl_path.exists()) {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Benchmark CRL CA");
        let ca = params.self_signed(&key).expect("CA");
        let issuer = rcgen::Issuer::new(params, key);
        let now = time::OffsetDateTime::now_utc();
        let revoked = (1..=n)
            .map(|serial| rcgen::RevokedCertParams {
                serial_number: rcgen::SerialNumber::from(serial * 7919),
                revocation_time: now - time::Duration::days(1),
                reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                invalidity_date: None,
            })
            .collect();
        let crl = rcgen::CertificateRevocationListParams {
            this_update: now - time::Duration::hours(1),
            next_update: now + time::Duration::days(7),
            crl_number: rcgen::SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: revoked,
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        }
        .signed_by(&issuer)
        .expect("CRL");
        std::fs::write(&ca_path, ca.der()).expect("write CA");
        std::fs::write(&crl_path, crl.der()).expect("write CRL");
    }
    let ca = PspCertificate::from_der(std::fs::read(&ca_path).expect("CA")).expect("CA parses");
    (ca, std::fs::read(&crl_path).expect("CRL"))
}

fn crl(c: &mut Criterion) {
    let mut g = c.benchmark_group("crl");
    g.sample_size(10);
    for n in [100_000u64, 1_000_000] {
        let (ca, der) = crl_of(n);
        g.bench_with_input(BenchmarkId::new("parse_index", n), &der, |b, der| {
            b.iter(|| CrlIndex::parse(black_box(der), &ca).expect("verified and indexed"))
        });
        let index = CrlIndex::parse(&der, &ca).expect("indexed");
        assert_eq!(index.len() as u64, n);
        let serial = (n / 2 * 7919).to_be_bytes();
        // The serial's DER content octets: minimal, with a 0x00 before a high bit.
        let mut serial: Vec<u8> = serial.iter().copied().skip_while(|b| *b == 0).collect();
        if serial[0] & 0x80 != 0 {
            serial.insert(0, 0);
        }
        assert!(index.lookup(&serial).is_some(), "the serial is listed");
        g.bench_with_input(BenchmarkId::new("lookup", n), &serial, |b, serial| {
            b.iter(|| black_box(index.lookup(black_box(serial))))
        });
    }
    g.finish();
}

/// What evidence costs: a detached signature of a check answer's body (once per body and
/// second), a signed decision (once per decision), and the verification a client does.
fn evidence(c: &mut Criterion) {
    use psp_service::evidence::{
        Alg, Jwks, SigningKey, sign_compact, sign_detached, verify_detached,
    };
    let body = vec![b'x'; 1024];
    let decision = vec![b'y'; 1500];
    let mut g = c.benchmark_group("evidence");
    for alg in [Alg::Es256, Alg::EdDsa] {
        let key = SigningKey::from_pem(&SigningKey::generate_pem(alg)).expect("key");
        let jwks = Jwks::new([key.public()]);
        g.bench_function(format!("sign_answer_1k_{alg}"), |b| {
            b.iter(|| sign_detached(&key, &body, 1_764_000_000, None))
        });
        g.bench_function(format!("sign_decision_{alg}"), |b| {
            b.iter(|| sign_compact(&key, "psp-decision+json", &decision, 1_764_000_000))
        });
        let jws = sign_detached(&key, &body, 1_764_000_000, None);
        g.bench_function(format!("verify_answer_1k_{alg}"), |b| {
            b.iter(|| verify_detached(&jwks, &jws, &body).expect("verifies"))
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    certificate_parse,
    check_miss,
    check_cached,
    crl,
    evidence
);
criterion_main!(benches);
