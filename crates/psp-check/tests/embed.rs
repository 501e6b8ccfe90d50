//! `examples/embed.rs`, run as an embedder runs it: from the repository root, on the sandbox's
//! PEM issuers, register file and certificates, with a CRL the sandbox CA signs (its key is a
//! public test key, `certs/README.md`). `cargo test` builds the example first.

use std::path::{Path, PathBuf};
use std::process::Command;

use psp_check::cert::PspCertificate;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The example's binary, beside this test's (`target/<profile>/examples/embed`).
fn example() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let example = profile.join("examples").join("embed");
    assert!(
        example.is_file(),
        "{} is not built: run `cargo build -p psp-check --examples` first (scripts/test does)",
        example.display()
    );
    example
}

/// A CRL signed by the sandbox CA `ca` (`certs/ca/<ca>.pem` and its key), current now,
/// listing the certificates of `revoked` (scenario names); its path.
fn crl(ca: &str, revoked: &[&str]) -> PathBuf {
    let root = repository();
    let serials: Vec<Vec<u8>> = revoked
        .iter()
        .map(|scenario| {
            let pem = std::fs::read(root.join(format!("certs/psp/{scenario}.pem"))).expect("PSP");
            PspCertificate::parse(&pem).expect("parses").serial
        })
        .collect();
    let listed: Vec<&[u8]> = serials.iter().map(Vec::as_slice).collect();
    let now = time::OffsetDateTime::now_utc();
    let der = psp_testkit::pki::signed_crl(
        &std::fs::read_to_string(root.join(format!("certs/ca/{ca}.pem"))).expect("CA"),
        &std::fs::read_to_string(root.join(format!("certs/ca/{ca}.key"))).expect("CA key"),
        now - time::Duration::minutes(5),
        now + time::Duration::hours(1),
        &listed,
    );
    let path =
        std::env::temp_dir().join(format!("psp-check-embed-{}-{ca}.crl", std::process::id()));
    std::fs::write(&path, der).expect("write the CRL");
    path
}

fn embed(args: &[&Path]) -> String {
    let out = Command::new(example())
        .args(args)
        .current_dir(repository())
        .output()
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn the_embedded_check_permits_the_valid_psp_with_a_verified_crl_and_refuses_the_others() {
    let crl = crl("qtsp-issuing", &["revoked"]);
    let psp = |scenario: &str| PathBuf::from(format!("certs/psp/{scenario}.pem"));
    assert_eq!(
        embed(&[&psp("valid"), &crl]),
        "permit Some(\"PSDXX-TEST-000001\")\n"
    );
    assert!(embed(&[&psp("revoked"), &crl]).starts_with("refuse certificate_revoked:"));
    assert!(embed(&[&psp("expired"), &crl]).starts_with("refuse certificate_expired:"));
    assert!(embed(&[&psp("untrusted"), &crl]).starts_with("refuse issuer_not_approved:"));
    // Without revocation evidence the answer is no: fail closed.
    assert!(embed(&[&psp("valid")]).starts_with("refuse revocation_unknown:"));
}

/// A CRL signed by another key (the look-alike CA's, same name) is not evidence: the CRL does
/// not verify, and the example stops with the error rather than decide.
#[test]
fn a_crl_signed_by_a_look_alike_is_refused() {
    let path = crl("untrusted-issuing", &[]);
    let out = Command::new(example())
        .args([Path::new("certs/psp/valid.pem"), &path])
        .current_dir(repository())
        .output()
        .expect("the example runs");
    assert!(!out.status.success(), "a forged CRL must not decide");
    assert!(
        String::from_utf8_lossy(&out.stdout).is_empty(),
        "no decision printed"
    );
}
