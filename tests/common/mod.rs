//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod eba;
pub mod edge_proxies;
pub mod evidence_py;
pub mod ext_authz_client;
pub mod forge;
pub mod in_memory;
pub mod log_capture;
pub mod lotl_world;
pub mod openapi;
pub mod redis;
pub mod resp_proxy;
pub mod service;
pub mod test_pki;
pub mod upstream;
pub mod xmlsec;

use std::path::{Path, PathBuf};

#[allow(unused_imports)] // the gateway tests use it
pub use psp_testkit::tls_client;

use psp_cert::cert::PspCertificate;
use psp_cert::country::CountryCode;
use psp_check::check::{self, CheckInput, CheckReport, RevocationEvidence, Snapshots};
use psp_gateway::Config;
use psp_service::register::RegisterSnapshot;
use psp_service::trust::TrustList;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The address a spawned `serve` logged for `message` ("check endpoint listening", "gateway
/// listening", "admin listener listening") in its JSON log on `stderr`, once it has: the
/// configuration names port 0, and the process reports the port it bound (no port is chosen
/// free beforehand, which another process could take). Waits 30 s at most.
pub fn logged_listener(stderr: &Path, message: &str) -> std::net::SocketAddr {
    let found = psp_testkit::wait::until_blocking(std::time::Duration::from_secs(30), || {
        let text = std::fs::read_to_string(stderr).ok()?;
        text.lines().find_map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).ok()?;
            let fields = if v["fields"].is_object() {
                &v["fields"]
            } else {
                &v
            };
            (fields["message"] == message)
                .then(|| fields["addr"].as_str()?.parse().ok())
                .flatten()
        })
    });
    found.unwrap_or_else(|| {
        panic!(
            "serve did not log {message:?} within 30 s:\n{}",
            std::fs::read_to_string(stderr).unwrap_or_default()
        )
    })
}

/// The crate root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `../shared/data`, the real public test material (never copied into the project).
pub fn data(rel: &str) -> PathBuf {
    let p = root().join("../shared/data").join(rel);
    assert!(
        p.exists(),
        "{} is missing: the tests read ../shared/data beside the repository",
        p.display()
    );
    p
}

pub fn at(s: &str) -> OffsetDateTime {
    OffsetDateTime::parse(s, &Rfc3339).expect("test time is RFC 3339")
}

pub fn cc(s: &str) -> CountryCode {
    s.parse().expect("test country code")
}

pub fn load_cert(path: &Path) -> PspCertificate {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    PspCertificate::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A configuration from TOML text whose relative paths resolve against the crate root.
pub fn config(toml: &str) -> Config {
    Config::from_toml(toml, Path::new("test.toml"), root()).expect("test configuration is valid")
}

pub fn trust(toml: &str) -> TrustList {
    config(toml)
        .load_trust(OffsetDateTime::now_utc())
        .expect("test trust list loads")
}

/// The trust list as loaded at `at`: trusted lists are judged fresh or stale then (the real
/// 2019 lists' `NextUpdate` passed in 2020).
pub fn trust_at(toml: &str, at: OffsetDateTime) -> TrustList {
    config(toml).load_trust(at).expect("test trust list loads")
}

/// The repository's sandbox configuration.
pub fn sandbox_trust() -> TrustList {
    let c = Config::load(&root().join("gateway.toml")).expect("gateway.toml is valid");
    c.load_trust(OffsetDateTime::now_utc())
        .expect("sandbox trust list loads")
}

/// Runs the check with no revocation evidence (revocation is gathered at the edges).
pub fn run(
    trust: &TrustList,
    cert: &PspCertificate,
    intermediates: &[PspCertificate],
    jurisdiction: &str,
    now: OffsetDateTime,
) -> CheckReport {
    let input = CheckInput {
        certificate: cert,
        intermediates,
        jurisdiction: cc(jurisdiction),
        now,
    };
    let registers = RegisterSnapshot::empty();
    let snapshots = Snapshots {
        trust,
        registers: &registers,
    };
    check::check(
        &input,
        snapshots,
        &RevocationEvidence::not_checked("not attempted in this test"),
    )
}

/// (validQTSP, validSignature, notExpired)
pub fn flags3(r: &CheckReport) -> (bool, bool, bool) {
    (
        r.validity().valid_qtsp,
        r.validity().valid_signature,
        r.validity().not_expired,
    )
}

/// A memory field of this process's `/proc/self/status` (`"VmRSS:"`, `"VmHWM:"`), in bytes.
pub fn process_memory(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"))
        * 1024
}

/// A trust list of one source (`name`, `qtsp_source`, reported as `reported`, valid for
/// `jurisdiction`) whose issuers are `anchors`: both kinds, no QcCompliance or QcType
/// required, approved since always (`origin` names each, with its index). The revocation
/// and conformance tests build their trust anchors with it.
pub fn anchors_trust_list<'a>(
    name: &str,
    qtsp_source: psp_service::trust::QtspSource,
    reported: &str,
    jurisdiction: CountryCode,
    origin: &str,
    anchors: impl IntoIterator<Item = &'a PspCertificate>,
) -> TrustList {
    use psp_service::trust::{
        Approval, CertKind, QcCompliancePolicy, Source, TrustedIssuer, UntypedPolicy,
    };
    use std::collections::BTreeSet;
    let source = Source {
        name: name.into(),
        qtsp_source,
        reported_jurisdiction: reported.into(),
        valid_for: BTreeSet::from([jurisdiction]),
        qc_compliance: QcCompliancePolicy::Optional,
        untyped: UntypedPolicy::Accept,
    };
    let issuers = anchors
        .into_iter()
        .enumerate()
        .map(|(i, certificate)| TrustedIssuer {
            source: 0,
            certificate: certificate.clone(),
            origin: format!("{origin} {i}"),
            history: vec![Approval {
                from: None,
                active: true,
                kinds: BTreeSet::from([CertKind::Web, CertKind::Seal]),
                status: "granted".into(),
                qualifications: Vec::new(),
                not_understood: Vec::new(),
            }],
        })
        .collect();
    TrustList::new(vec![source], issuers).expect("every issuer names source 0")
}

/// The repository's `gateway.toml` with its two sandbox sites (`xx` and `xy`, told apart by
/// server name on one listener) written as the single `[gateway]` of a bank with one site:
/// jurisdiction XX on `127.0.0.1:8443` with the certificate for `localhost`. Most tests (and
/// the production template) are about one site and edit that section; the sites' own tests
/// (`tests/sites.rs`) read the file as it is.
pub fn one_site_sandbox_toml() -> String {
    let text = std::fs::read_to_string(root().join("gateway.toml")).expect("gateway.toml");
    let start = text.find("[[sites]]").expect("gateway.toml has [[sites]]");
    let end = text
        .find("# Listener limits")
        .expect("gateway.toml has its [limits] comment after the sites");
    format!("{}{ONE_SITE}\n{}", &text[..start], &text[end..])
}

/// The one site of [`one_site_sandbox_toml`].
const ONE_SITE: &str = "[gateway]
listen = \"127.0.0.1:8443\"
jurisdiction = \"XX\"
tls = { cert = \"certs/server/cert.pem\", key = \"certs/server/key.pem\" }
upstream = \"sandbox-echo\"
";

/// `gateway.toml` written in `dir` for the CLI's fetching commands run against the tests' own
/// servers: fetches may reach loopback (`[revocation] allow_destinations`), then `rest`.
pub fn loopback_config(dir: &Path, rest: &str) -> PathBuf {
    let path = dir.join("gateway.toml");
    std::fs::write(
        &path,
        format!("\n[revocation]\nallow_destinations = \"loopback\"\n{rest}"),
    )
    .expect("write config");
    path
}

/// A pseudo-random number in `0..n` (no RNG crate needed: the clock's nanoseconds, mixed).
pub fn random_below(n: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as u64;
    let mut x = nanos ^ 0x9E37_79B9_7F4A_7C15;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x % n.max(1)
}
