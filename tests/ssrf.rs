//! Outbound requests go only where the configuration allows. Every fetch (CRL, OCSP, trusted
//! lists, the EBA register, the FCA API) goes through `fetch::Fetcher`, so one policy covers them
//! all. Loopback in every spelling, tried against a counting listener, gets no connection. The
//! other special-purpose ranges (cloud metadata, private, link-local, NAT64 and IPv4-mapped
//! forms) are proved on the classifier only. A regression must not send traffic off this
//! machine, and no test here sends any.

use std::net::{IpAddr, SocketAddr};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use psp_service::fetch::{AddressClass, AllowDestinations, Fetcher, Limits, allowed, classify};

mod common;
#[path = "revocation_support/mod.rs"]
mod support;

/// A listener on 127.0.0.1 that counts the connections it accepts.
struct Counting {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Counting {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn counting() -> Counting {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    Counting {
        addr,
        accepted,
        task,
    }
}

const LIMITS: Limits = Limits {
    total: Duration::from_secs(3),
    max_bytes: 1 << 20,
};

#[tokio::test]
async fn loopback_in_every_spelling_is_refused_under_the_public_policy() {
    let server = counting().await;
    let port = server.addr.port();
    let fetcher = Fetcher::new(AllowDestinations::Public, Duration::from_secs(2));
    let spellings = [
        format!("http://127.0.0.1:{port}/crl"),
        format!("http://127.1:{port}/crl"),
        format!("http://2130706433:{port}/crl"),
        format!("http://0177.0.0.1:{port}/crl"),
        format!("http://0x7f.0.0.1:{port}/crl"),
        format!("http://0x7f000001:{port}/crl"),
        format!("http://127.0.0.2:{port}/crl"),
        format!("http://localhost:{port}/crl"),
        format!("http://localhost.:{port}/crl"),
        format!("http://LOCALHOST:{port}/crl"),
        format!("http://[::1]:{port}/crl"),
        format!("http://[::ffff:127.0.0.1]:{port}/crl"),
        format!("http://[::ffff:7f00:1]:{port}/crl"),
        format!("http://[0:0:0:0:0:0:0:1]:{port}/crl"),
        format!("https://127.0.0.1:{port}/crl"),
        format!("http://user@127.0.0.1:{port}/crl"),
    ];
    for url in &spellings {
        let error = fetcher
            .get(url, LIMITS)
            .await
            .expect_err(&format!("{url} must be refused"));
        let text = error.to_string();
        // Refused by the policy, naming the address's class; or, for a spelling this
        // machine's resolver does not know (`localhost.`), never resolved at all.
        assert!(
            text.contains("a loopback address") || text.contains("cannot resolve"),
            "{url}: {text}"
        );
    }
    assert_eq!(
        server.accepted.load(Ordering::SeqCst),
        0,
        "no spelling reached the listener"
    );

    // The same listener is reached when the configuration allows loopback: the listener and
    // the URLs above are real, and only the policy stood in the way.
    let allowing = Fetcher::new(AllowDestinations::Loopback, Duration::from_secs(2));
    let _ = allowing
        .get(&format!("http://127.0.0.1:{port}/crl"), LIMITS)
        .await;
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn schemes_other_than_http_and_https_are_refused_before_any_connection() {
    let server = counting().await;
    let port = server.addr.port();
    let fetcher = Fetcher::new(AllowDestinations::Loopback, Duration::from_secs(2));
    for url in [
        "file:///etc/passwd".to_owned(),
        format!("ldap://127.0.0.1:{port}/cn=crl"),
        format!("gopher://127.0.0.1:{port}/_x"),
        format!("ftp://127.0.0.1:{port}/crl"),
        format!("dict://127.0.0.1:{port}/x"),
        "http:///no-host".to_owned(),
    ] {
        let error = fetcher
            .get(&url, LIMITS)
            .await
            .expect_err(&format!("{url} must be refused"));
        assert!(!error.to_string().is_empty(), "{url}");
    }
    assert_eq!(server.accepted.load(Ordering::SeqCst), 0);
}

#[test]
fn every_special_purpose_range_is_refused_by_both_policies() {
    let cases: [(&str, AddressClass); 17] = [
        ("169.254.169.254", AddressClass::LinkLocal),
        ("10.0.0.1", AddressClass::Private),
        ("172.16.0.1", AddressClass::Private),
        ("172.31.255.254", AddressClass::Private),
        ("192.168.1.1", AddressClass::Private),
        ("100.64.0.1", AddressClass::Private),
        ("0.0.0.0", AddressClass::Unspecified),
        ("224.0.0.1", AddressClass::Multicast),
        ("255.255.255.255", AddressClass::Multicast),
        ("192.0.2.1", AddressClass::Reserved),
        ("fd00::1", AddressClass::Private),
        ("fe80::1", AddressClass::LinkLocal),
        ("::", AddressClass::Unspecified),
        ("::ffff:169.254.169.254", AddressClass::LinkLocal),
        ("::ffff:10.0.0.1", AddressClass::Private),
        ("64:ff9b::a9fe:a9fe", AddressClass::LinkLocal),
        ("fd00:ec2::254", AddressClass::Private),
    ];
    for (text, class) in cases {
        let ip: IpAddr = text.parse().expect("address");
        assert_eq!(classify(ip), class, "{text}");
        assert!(!allowed(AllowDestinations::Public, class), "{text}");
        assert!(!allowed(AllowDestinations::Loopback, class), "{text}");
    }
    for loopback in ["127.0.0.1", "127.255.255.254", "::1", "::ffff:127.0.0.1"] {
        let class = classify(loopback.parse().expect("address"));
        assert_eq!(class, AddressClass::Loopback, "{loopback}");
        assert!(!allowed(AllowDestinations::Public, class));
        assert!(allowed(AllowDestinations::Loopback, class));
    }
    assert!(allowed(
        AllowDestinations::Public,
        classify("93.184.215.14".parse().expect("address"))
    ));
}

/// The register download takes the same road: a configured EBA URL on loopback, under the
/// default public policy, is refused and the listener sees nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_register_download_to_loopback_is_refused_under_the_public_policy() {
    let server = counting().await;
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("ssrf-register");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[[registers.files]]\npath = \"eba.zip\"\nformat = \"eba\"\nurl = \"http://localhost:{}/register/api/filemetadata\"\n",
            server.addr.port()
        ),
    )
    .expect("write config");
    let c = config.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
            .args(["register", "fetch", "--config", c.to_str().expect("UTF-8")])
            .output()
            .expect("the binary runs")
    })
    .await
    .expect("join");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("loopback"), "the refusal says why: {text}");
    assert_eq!(server.accepted.load(Ordering::SeqCst), 0, "{text}");
    assert!(!dir.join("eba.zip").exists());
}

/// The revocation URLs of a certificate are attacker data until its path verifies: a
/// self-made certificate, one "issued" under a trusted name by another key, and a genuine
/// certificate with one byte changed (its signature no longer verifies, though it names the
/// trusted issuer by key identifier) all point CRL and OCSP at a counting loopback server
/// the configuration allows. None of them makes the gateway fetch; each report says that no
/// path verified, so no revocation was checked. The genuine certificate, pointing at the
/// same server, is fetched for: the URLs and the policy are real.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_whose_path_does_not_verify_never_makes_the_gateway_fetch_its_urls() {
    use support::{NOW, Reply, TestCa, TestServer, service_trusting, test_config};
    let server = TestServer::fixed(Reply::status(404)).await;
    let crl = [server.url("/attacker.crl")];
    let ocsp = [server.url("/attacker-ocsp")];
    let trusted = TestCa::new("Trusted QTSP CA");
    let service = service_trusting(&[&trusted.cert], &test_config());
    let jurisdiction = "XX".parse().expect("country code");
    let no_chain = Arc::new(Vec::new());

    let self_made = TestCa::new("Attacker Self-Signed").leaf(&[1], &crl, &ocsp);
    // Same subject name as the trusted CA, another key.
    let look_alike = TestCa::new("Trusted QTSP CA").leaf(&[2], &crl, &ocsp);
    let genuine = trusted.leaf(&[3], &crl, &ocsp);
    let mut der = genuine.der.clone();
    let at = der
        .windows(7)
        .position(|w| w == b"leaf 03")
        .expect("the subject's common name is in the DER");
    der[at] = b'L';
    let tampered = psp_cert::cert::PspCertificate::from_der(der).expect("still parses");

    for (name, cert) in [
        ("self-made", self_made),
        ("look-alike issuer", look_alike),
        ("tampered", tampered),
    ] {
        let report = service
            .check(Arc::new(cert), no_chain.clone(), jurisdiction, NOW)
            .await;
        assert!(!report.validity().valid_signature, "{name}");
        assert!(!report.validity().not_revoked, "{name}");
        let titles: Vec<&str> = report.errors().iter().map(|e| e.title.as_str()).collect();
        assert!(
            titles
                .iter()
                .filter(|t| t.contains(
                    "no certification path to a trust-list issuer verified, so no revocation evidence was fetched or checked"
                ))
                .count()
                == 2,
            "{name}: both methods say why: {titles:?}"
        );
        assert_eq!(server.total_hits(), 0, "{name} made the gateway fetch");
    }

    let report = service
        .check(Arc::new(genuine), no_chain, jurisdiction, NOW)
        .await;
    assert!(report.validity().valid_signature);
    assert!(server.hits("/attacker.crl") >= 1 && server.hits("/attacker-ocsp") >= 1);
}
