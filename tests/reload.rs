//! Reloading reference data: all or nothing, and a failed reload keeps serving the old data.

mod common;

use common::service::*;
use common::test_pki::test_config;
use common::*;
use psp_gateway::app;

fn write_config(dir: &std::path::Path, registers_xx: &str) -> std::path::PathBuf {
    // The sandbox configuration, with XX's register read from `registers_xx`.
    let text = std::fs::read_to_string(root().join("gateway.toml"))
        .expect("gateway.toml")
        .replace("\"certs/", &format!("\"{}/certs/", root().display()))
        .replace(
            "\"registers/sandbox/XX.json\"",
            &format!("\"{registers_xx}\""),
        )
        .replace(
            "\"registers/",
            &format!("\"{}/registers/", root().display()),
        );
    let path = dir.join("gateway.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

#[tokio::test]
async fn a_failed_reload_keeps_the_current_data_and_a_good_one_swaps_it_whole() {
    let running = start(test_config(|t| t)).await;
    let service = running.service.clone();
    assert_eq!(service.data().generation, 1);
    let before = service.data().registers.registers().len();

    let dir = std::env::temp_dir().join(format!("psp-gateway-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");

    // A truncated register file: refused, nothing changes.
    let good = std::fs::read_to_string(root().join("registers/sandbox/XX.json")).expect("XX");
    let broken = dir.join("XX-broken.json");
    std::fs::write(&broken, &good[..good.len() / 2]).expect("write");
    let path = write_config(&dir, &broken.display().to_string());
    app::reload(&path, &running).await;
    assert_eq!(
        service.data().generation,
        1,
        "a failed reload is not applied"
    );
    assert_eq!(service.data().registers.registers().len(), before);

    // A configuration that does not parse: refused too.
    let bad_toml = dir.join("bad.toml");
    std::fs::write(&bad_toml, "[checks\n").expect("write");
    app::reload(&bad_toml, &running).await;
    assert_eq!(service.data().generation, 1);

    // A good one: a new generation, every part loaded.
    let copy = dir.join("XX.json");
    std::fs::write(&copy, &good).expect("write");
    let path = write_config(&dir, &copy.display().to_string());
    app::reload(&path, &running).await;
    assert_eq!(service.data().generation, 2);
    assert_eq!(service.data().registers.registers().len(), before);
    assert!(!service.data().trust.is_empty());

    running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The repository's sandbox configuration as a file in `dir`, with every path absolute, every
/// listener on an ephemeral loopback port, and `extra` appended.
fn sandbox_file(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    let r = root().display().to_string();
    let text = std::fs::read_to_string(root().join("gateway.toml"))
        .expect("gateway.toml")
        .replace("\"certs/", &format!("\"{r}/certs/"))
        .replace("\"registers/", &format!("\"{r}/registers/"))
        .replace(
            "enabled = true",
            &format!("enabled = true\ncerts = \"{r}/certs\""),
        )
        .replace("127.0.0.1:8080", "127.0.0.1:0")
        .replace("127.0.0.1:8443", "127.0.0.1:0")
        .replace("127.0.0.1:9090", "127.0.0.1:0");
    let path = dir.join("gateway.toml");
    std::fs::write(&path, format!("{text}\n{extra}")).expect("write config");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_reloads_under_load_fail_no_request_and_a_new_credential_takes_effect() {
    use base64::Engine;
    use http::{Method, StatusCode};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

    let dir = std::env::temp_dir().join(format!("psp-gateway-reload20-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = sandbox_file(&dir, "");
    let config = psp_gateway::Config::load(&path).expect("config");
    let hash = std::fs::read_to_string(&path)
        .expect("read")
        .lines()
        .find(|l| l.starts_with("password_hash"))
        .expect("hash")
        .to_owned();
    let running = start(config).await;
    let api = running.api.expect("api");
    let admin = running.admin.expect("admin");
    let pem = std::fs::read(root().join("certs/psp/valid.pem")).expect("cert");
    let der = psp_gateway::cert::PspCertificate::parse(&pem)
        .expect("parses")
        .der;
    let eidas = base64::engine::general_purpose::STANDARD.encode(der);
    let check = {
        let eidas = eidas.clone();
        move |auth: &'static str| {
            let eidas = eidas.clone();
            async move {
                send(
                    api,
                    Method::GET,
                    "/v1/psp/eidas?jurisdiction=XX",
                    &[
                        ("authorization", auth),
                        ("fi_reference_id", "PSDXX-TEST-999999"),
                        ("eidas", &eidas),
                    ],
                )
                .await
                .status
            }
        }
    };
    // second:sandbox is not a caller yet.
    const SECOND: &str = "Basic c2Vjb25kOnNhbmRib3g=";
    assert_eq!(check(SECOND).await, StatusCode::UNAUTHORIZED);

    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU32::new(0));
    let mut load = Vec::new();
    for _ in 0..2 {
        let (stop, answered, check) = (stop.clone(), answered.clone(), check.clone());
        load.push(tokio::spawn(async move {
            let mut failed = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let status = check("Basic c2FuZGJveDpzYW5kYm94").await;
                answered.fetch_add(1, Ordering::Relaxed);
                if status != StatusCode::OK {
                    failed.push(status);
                }
            }
            failed
        }));
    }
    for round in 0..20 {
        // Every other reload adds the second caller; the last one keeps it.
        let extra = if round % 2 == 1 {
            format!("[[api.credentials]]\nusername = \"second\"\n{hash}\n")
        } else {
            String::new()
        };
        let path = sandbox_file(&dir, &extra);
        app::reload(&path, &running).await;
        assert_eq!(
            running.service.data().generation,
            round + 2,
            "round {round}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for task in load {
        let failed = task.await.expect("join");
        assert!(
            failed.is_empty(),
            "failed requests during reloads: {failed:?}"
        );
    }
    assert!(answered.load(Ordering::Relaxed) > 0);
    // The last reload's configuration has the second caller.
    assert_eq!(check(SECOND).await, StatusCode::OK);

    // A failed reload is shown in /readyz (ready still: the data in use is the last good),
    // and cleared by the next good one.
    std::fs::write(dir.join("bad.toml"), "[checks\n").expect("write");
    app::reload(&dir.join("bad.toml"), &running).await;
    let ready = send(admin, Method::GET, "/readyz", &[]).await.json();
    assert!(
        ready["lastReloadError"]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("configuration invalid"),
        "{ready:#}"
    );
    app::reload(&sandbox_file(&dir, ""), &running).await;
    let ready = send(admin, Method::GET, "/readyz", &[]).await.json();
    assert!(ready["lastReloadError"].is_null(), "{ready:#}");
    // And the second caller is gone again.
    assert_eq!(check(SECOND).await, StatusCode::UNAUTHORIZED);
    running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
