//! The forged-issuer attack at every face. An attacker holds only public material: a victim
//! PSP's certificate and the trusted CAs' certificates. It makes its own CA copying a trusted
//! issuer's subject (byte for byte) and key identifier, re-issues the victim's certificate
//! under it with keys it holds, and presents the chain. Names and key identifiers propose
//! issuers; only verified signatures bind them, so every forgery must be refused, while a
//! genuine chain with a forged CA slipped into the presented list still passes on its real
//! path.

mod common;

use std::path::PathBuf;

use common::forge::{self, AKI, SKI, aki_value, attacker_key, pem_chain, reissue, ski_value};
use common::test_pki::{test_config, test_pki};
use common::tls_client::{self, Proto, get};
use common::upstream;
use common::*;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use psp_cert::cert::PspCertificate;
use psp_check::check::CheckReport;
use rcgen::KeyPair;

/// One forged identity: the re-issued PSP certificate, the key the attacker holds for it, and
/// the CAs the attacker presents with it (certificate side first).
struct Forgery {
    leaf: Vec<u8>,
    leaf_key: KeyPair,
    presented: Vec<Vec<u8>>,
}

impl Forgery {
    fn leaf(&self) -> PspCertificate {
        PspCertificate::from_der(self.leaf.clone()).expect("the forgery parses")
    }

    fn presented(&self) -> Vec<PspCertificate> {
        self.presented
            .iter()
            .map(|d| PspCertificate::from_der(d.clone()).expect("parses"))
            .collect()
    }

    /// Writes the chain and key as `psp/<name>.pem|.key` under `dir`, where the TLS client
    /// reads them.
    fn write(&self, dir: &std::path::Path, name: &str) {
        let mut chain: Vec<&[u8]> = vec![&self.leaf];
        chain.extend(self.presented.iter().map(Vec::as_slice));
        std::fs::write(dir.join(format!("psp/{name}.pem")), pem_chain(&chain)).expect("write");
        std::fs::write(
            dir.join(format!("psp/{name}.key")),
            self.leaf_key.serialize_pem(),
        )
        .expect("write");
    }
}

fn der_in(dir: &std::path::Path, rel: &str) -> Vec<u8> {
    load_cert(&dir.join(rel)).der
}

/// A CA of the attacker's copying `issuer` whole (subject, subject key identifier), and the
/// victim's certificate re-issued under it: its authority key identifier still names the
/// trusted issuer.
fn with_key_identifier(dir: &std::path::Path, issuer: &str, victim: &str) -> Forgery {
    let ca_key = attacker_key();
    let leaf_key = attacker_key();
    let ca = reissue(&der_in(dir, issuer), &ca_key, &[], &ca_key);
    let leaf = reissue(&der_in(dir, victim), &leaf_key, &[], &ca_key);
    Forgery {
        leaf,
        leaf_key,
        presented: vec![ca],
    }
}

/// A CA copying only the trusted issuer's name, with key identifiers of its own.
fn with_name_only(dir: &std::path::Path, issuer: &str, victim: &str) -> Forgery {
    let ca_key = attacker_key();
    let leaf_key = attacker_key();
    let own_id = [0xa5u8; 20];
    let ca = reissue(
        &der_in(dir, issuer),
        &ca_key,
        &[(SKI, ski_value(&own_id))],
        &ca_key,
    );
    let leaf = reissue(
        &der_in(dir, victim),
        &leaf_key,
        &[(AKI, aki_value(&own_id))],
        &ca_key,
    );
    Forgery {
        leaf,
        leaf_key,
        presented: vec![ca],
    }
}

/// A forged root copying the trusted root (name, key identifier), a forged intermediate
/// copying the real issuing CA under it, and the victim re-issued under that.
fn root_and_intermediate(dir: &std::path::Path, victim: &str) -> Forgery {
    let root_key = attacker_key();
    let inter_key = attacker_key();
    let leaf_key = attacker_key();
    let root = reissue(&der_in(dir, "ca/qtsp-root.pem"), &root_key, &[], &root_key);
    let inter = reissue(
        &der_in(dir, "ca/qtsp-issuing.pem"),
        &inter_key,
        &[],
        &root_key,
    );
    let leaf = reissue(&der_in(dir, victim), &leaf_key, &[], &inter_key);
    Forgery {
        leaf,
        leaf_key,
        presented: vec![inter, root],
    }
}

fn repo() -> PathBuf {
    root().join("certs")
}

fn check(trust: &psp_service::trust::TrustList, f: &Forgery) -> CheckReport {
    run(trust, &f.leaf(), &f.presented(), "XX", now())
}

fn now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

fn codes(r: &CheckReport) -> Vec<&'static str> {
    r.errors().iter().map(|e| e.code.as_str()).collect()
}

/// The sandbox trust source with the QTSP root as its only issuer.
fn root_trust(dir: &std::path::Path) -> psp_service::trust::TrustList {
    trust(&format!(
        r#"
[[trust.sources]]
name = "root-only"
qtsp_source = "EIDAS"
qtsp_jurisdiction = "EEA"
valid_for = ["XX"]
[[trust.sources.issuers]]
pem = "{}/ca/qtsp-root.pem"
kinds = ["web", "seal"]
"#,
        dir.display()
    ))
}

#[test]
fn a_ca_copying_the_trusted_issuers_name_and_key_identifier_does_not_lend_its_signature() {
    let trust = sandbox_trust();
    for (issuer, victim) in [
        ("ca/qtsp-issuing.pem", "psp/valid.pem"),
        ("ca/qtsp-ecdsa-issuing.pem", "psp/ecdsa.pem"),
    ] {
        let f = with_key_identifier(&repo(), issuer, victim);
        assert_eq!(
            f.leaf().authority_key_id,
            forge::subject_key_id(&der_in(&repo(), issuer)),
            "the forgery names the trusted issuer by key identifier"
        );
        let r = check(&trust, &f);
        assert!(
            !r.validity().valid_signature,
            "{issuer}: the trusted issuer's key does not verify the forgery: {r:#?}"
        );
        assert!(codes(&r).contains(&"signature_invalid"), "{issuer}: {r:#?}");
        // Alone, without the attacker's CA, it is the same: the trusted key does not verify.
        let alone = run(&trust, &f.leaf(), &[], "XX", now());
        assert!(!alone.validity().valid_signature, "{issuer}: {alone:#?}");
    }
}

#[test]
fn a_ca_copying_only_the_trusted_issuers_name_is_an_untrusted_issuer() {
    let trust = sandbox_trust();
    for (issuer, victim) in [
        ("ca/qtsp-issuing.pem", "psp/valid.pem"),
        ("ca/qtsp-ecdsa-issuing.pem", "psp/ecdsa.pem"),
    ] {
        let f = with_name_only(&repo(), issuer, victim);
        let r = check(&trust, &f);
        assert!(!r.validity().valid_qtsp, "{issuer}: {r:#?}");
        assert_eq!(r.qtsp_source(), None, "{issuer}: reported as Unknown");
        // Its own CA's key does verify it: the signature is genuine, the issuer is not trusted.
        assert!(r.validity().valid_signature, "{issuer}: {r:#?}");
    }
}

#[test]
fn a_forged_root_and_intermediate_do_not_reach_the_trusted_root() {
    let trust = root_trust(&repo());
    // The genuine path: certificate → issuing CA (presented) → root (trusted).
    let genuine = run(
        &trust,
        &load_cert(&repo().join("psp/valid.pem")),
        &[load_cert(&repo().join("ca/qtsp-issuing.pem"))],
        "XX",
        now(),
    );
    assert!(genuine.validity().valid_qtsp, "{genuine:#?}");
    assert!(genuine.validity().valid_signature, "{genuine:#?}");

    let f = root_and_intermediate(&repo(), "psp/valid.pem");
    let r = check(&trust, &f);
    assert!(!r.validity().valid_qtsp, "{r:#?}");
    assert!(!r.validity().valid_signature, "{r:#?}");
    assert_eq!(r.qtsp_source(), None);
    let titles: Vec<&str> = r.errors().iter().map(|e| e.title.as_str()).collect();
    assert!(
        codes(&r).contains(&"signature_invalid")
            && titles.iter().any(|t| t.contains("presented intermediate")),
        "the error names the intermediate the trusted root did not sign: {r:#?}"
    );
}

#[test]
fn a_genuine_chain_with_a_forged_ca_slipped_in_still_passes_on_its_real_path() {
    // Issuing CA trusted directly; the attacker's copy of it is presented too.
    let trust = sandbox_trust();
    let valid = load_cert(&repo().join("psp/valid.pem"));
    let forged_ca = with_key_identifier(&repo(), "ca/qtsp-issuing.pem", "psp/valid.pem").presented;
    let forged_ca = PspCertificate::from_der(forged_ca[0].clone()).expect("parses");
    let r = run(
        &trust,
        &valid,
        std::slice::from_ref(&forged_ca),
        "XX",
        now(),
    );
    assert!(
        r.validity().valid_qtsp && r.validity().valid_signature,
        "{r:#?}"
    );

    // Root trusted; the forged copy of the issuing CA comes first, the real one after it,
    // and the other way round.
    let trust = root_trust(&repo());
    let real = load_cert(&repo().join("ca/qtsp-issuing.pem"));
    for presented in [
        vec![forged_ca.clone(), real.clone()],
        vec![real.clone(), forged_ca.clone()],
    ] {
        let r = run(&trust, &valid, &presented, "XX", now());
        assert!(
            r.validity().valid_qtsp && r.validity().valid_signature,
            "{r:#?}"
        );
    }
}

// ---- the CLI ----

#[test]
fn check_with_chain_refuses_every_forgery() {
    let dir = tempdir("cli");
    let cases = [
        (
            "key-id-rsa",
            with_key_identifier(&repo(), "ca/qtsp-issuing.pem", "psp/valid.pem"),
        ),
        (
            "key-id-ecdsa",
            with_key_identifier(&repo(), "ca/qtsp-ecdsa-issuing.pem", "psp/ecdsa.pem"),
        ),
        (
            "name-only",
            with_name_only(&repo(), "ca/qtsp-issuing.pem", "psp/valid.pem"),
        ),
    ];
    for (name, f) in &cases {
        let leaf = dir.join(format!("{name}.pem"));
        std::fs::write(&leaf, pem_chain(&[&f.leaf])).expect("write");
        let mut args = vec![
            "check".to_owned(),
            "--cert".to_owned(),
            leaf.display().to_string(),
            "--jurisdiction".to_owned(),
            "XX".to_owned(),
            "--offline".to_owned(),
        ];
        for (i, ca) in f.presented.iter().enumerate() {
            let p = dir.join(format!("{name}-ca{i}.pem"));
            std::fs::write(&p, pem_chain(&[ca])).expect("write");
            args.extend(["--chain".to_owned(), p.display().to_string()]);
        }
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
            .args(&args)
            .current_dir(root())
            .output()
            .expect("runs");
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let validity = &v["eIDAS"]["validity"];
        assert!(
            validity["validQTSP"] == false || validity["validSignature"] == false,
            "{name}: {v:#}"
        );
        if name.starts_with("key-id") {
            assert_eq!(validity["validSignature"], false, "{name}: {v:#}");
        } else {
            assert_eq!(validity["validQTSP"], false, "{name}: {v:#}");
            assert_eq!(v["eIDAS"]["data"]["QTSPSource"], "Unknown", "{name}: {v:#}");
        }
    }
}

fn tempdir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("psp-gateway-forged-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

// ---- the gateway, over mutual TLS and behind a load balancer ----

#[tokio::test]
async fn the_gateway_refuses_forged_chains_over_mutual_tls() {
    let pki = test_pki();
    let up = upstream::start().await;
    let forgeries = [
        (
            "forged-key-id-rsa",
            with_key_identifier(&pki.dir, "ca/qtsp-issuing.pem", "psp/valid.pem"),
        ),
        (
            "forged-key-id-ecdsa",
            with_key_identifier(&pki.dir, "ca/qtsp-ecdsa-issuing.pem", "psp/ecdsa.pem"),
        ),
        (
            "forged-name-only",
            with_name_only(&pki.dir, "ca/qtsp-issuing.pem", "psp/valid.pem"),
        ),
    ];
    let config = test_config(|t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!("upstream = \"http://{}\"", up.addr),
        )
    });
    let running = service::start(config).await;
    let addr = running.gateway.expect("gateway");
    // The genuine PSP first, so that its parsed chain is in the gateway's shared cache of
    // client chains: no forgery below may be answered from it.
    let client = tls_client::client_config(&pki.dir, Some("valid"), Proto::H1);
    let (response, _) = tls_client::send(addr, client, Proto::H1, get("/v1/accounts")).await;
    assert_eq!(response.status(), StatusCode::OK);
    up.received.lock().expect("lock").clear();
    for (name, f) in &forgeries {
        f.write(&pki.dir, name);
        let client = tls_client::client_config(&pki.dir, Some(name), Proto::H1);
        let (response, _) = tls_client::send(addr, client, Proto::H1, get("/v1/accounts")).await;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{name}: {}",
            String::from_utf8_lossy(&body)
        );
        let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(
            v["tppMessages"][0]["code"], "CERTIFICATE_INVALID",
            "{name}: {v}"
        );
    }
    assert_eq!(
        up.received.lock().expect("lock").len(),
        0,
        "no forgery reached the bank"
    );

    // The genuine certificate with the attacker's CA slipped into its chain still passes.
    let genuine = Forgery {
        leaf: der_in(&pki.dir, "psp/valid.pem"),
        leaf_key: KeyPair::from_pem(
            &std::fs::read_to_string(pki.dir.join("psp/valid.key")).expect("key"),
        )
        .expect("key"),
        presented: forgeries[0].1.presented.clone(),
    };
    genuine.write(&pki.dir, "genuine-with-forged-ca");
    let client = tls_client::client_config(&pki.dir, Some("genuine-with-forged-ca"), Proto::H2);
    let (response, _) = tls_client::send(addr, client, Proto::H2, get("/v1/accounts")).await;
    assert_eq!(response.status(), StatusCode::OK);
    let seen = up.received.lock().expect("lock").pop().expect("forwarded");
    assert_eq!(seen.headers["x-psp-auth-number"], "PSDXX-TEST-000001");
    running.stop().await;
}

#[tokio::test]
async fn the_gateway_refuses_a_forged_root_and_intermediate_over_mutual_tls() {
    let pki = test_pki();
    let up = upstream::start().await;
    // The bank trusts the QTSP root; genuine PSPs present their issuing CA.
    let config = test_config(|t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!("upstream = \"http://{}\"", up.addr),
        )
        .replace("ca/qtsp-issuing.pem\"", "ca/qtsp-root.pem\"")
    });
    let running = service::start(config).await;
    let addr = running.gateway.expect("gateway");

    let genuine = Forgery {
        leaf: der_in(&pki.dir, "psp/valid.pem"),
        leaf_key: KeyPair::from_pem(
            &std::fs::read_to_string(pki.dir.join("psp/valid.key")).expect("key"),
        )
        .expect("key"),
        presented: vec![der_in(&pki.dir, "ca/qtsp-issuing.pem")],
    };
    genuine.write(&pki.dir, "genuine-under-root");
    let client = tls_client::client_config(&pki.dir, Some("genuine-under-root"), Proto::H1);
    let (response, _) = tls_client::send(addr, client, Proto::H1, get("/v1/accounts")).await;
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "the genuine chain passes"
    );
    up.received.lock().expect("lock").clear();

    let f = root_and_intermediate(&pki.dir, "psp/valid.pem");
    f.write(&pki.dir, "forged-root");
    let client = tls_client::client_config(&pki.dir, Some("forged-root"), Proto::H1);
    let (response, _) = tls_client::send(addr, client, Proto::H1, get("/v1/accounts")).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(up.received.lock().expect("lock").len(), 0);
    running.stop().await;
}

#[tokio::test]
async fn the_gateway_refuses_forged_chains_from_the_load_balancers_header() {
    let pki = test_pki();
    let up = upstream::start().await;
    let config = test_config(|t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!(
                "upstream = \"http://{}\"\nidentity = \"header\"\nidentity_header = \"x-client-cert\"\ntrusted_proxies = [\"127.0.0.1/32\"]",
                up.addr
            ),
        )
        .replace("tls = { cert = ", "# tls = { cert = ")
    });
    let running = service::start(config).await;
    let addr = running.gateway.expect("gateway");
    for f in [
        with_key_identifier(&pki.dir, "ca/qtsp-issuing.pem", "psp/valid.pem"),
        with_name_only(&pki.dir, "ca/qtsp-issuing.pem", "psp/valid.pem"),
        root_and_intermediate(&pki.dir, "psp/valid.pem"),
    ] {
        let mut chain: Vec<&[u8]> = vec![&f.leaf];
        chain.extend(f.presented.iter().map(Vec::as_slice));
        let escaped = percent_encoding::utf8_percent_encode(
            &pem_chain(&chain),
            percent_encoding::NON_ALPHANUMERIC,
        )
        .to_string();
        let reply = service::send(
            addr,
            Method::GET,
            "/v1/accounts",
            &[("x-client-cert", escaped.as_str())],
        )
        .await;
        assert_eq!(
            reply.status,
            StatusCode::UNAUTHORIZED,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
    }
    assert_eq!(up.received.lock().expect("lock").len(), 0);
    running.stop().await;
}

// ---- the check endpoint ----

#[tokio::test]
async fn the_check_endpoint_reports_forgeries_with_a_false_flag() {
    use base64::Engine;
    let pki = test_pki();
    let running = service::start(test_config(|t| t)).await;
    let addr = running.api.expect("api");
    for (f, flag) in [
        (
            with_key_identifier(&pki.dir, "ca/qtsp-issuing.pem", "psp/valid.pem"),
            "validSignature",
        ),
        (
            with_key_identifier(&pki.dir, "ca/qtsp-ecdsa-issuing.pem", "psp/ecdsa.pem"),
            "validSignature",
        ),
        (
            with_name_only(&pki.dir, "ca/qtsp-issuing.pem", "psp/valid.pem"),
            "validQTSP",
        ),
    ] {
        let eidas = base64::engine::general_purpose::STANDARD.encode(&f.leaf);
        let reply = service::send(
            addr,
            Method::GET,
            "/v1/psp/eidas?jurisdiction=XX",
            &[
                ("authorization", "Basic c2FuZGJveDpzYW5kYm94"),
                ("fi_reference_id", "PSDXX-TEST-999999"),
                ("eidas", eidas.as_str()),
            ],
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK);
        let v = reply.json();
        assert_eq!(v["eIDAS"]["validity"][flag], false, "{v:#}");
    }
    running.stop().await;
}
