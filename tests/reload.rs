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
    app::reload(&path, &service);
    assert_eq!(
        service.data().generation,
        1,
        "a failed reload is not applied"
    );
    assert_eq!(service.data().registers.registers().len(), before);

    // A configuration that does not parse: refused too.
    let bad_toml = dir.join("bad.toml");
    std::fs::write(&bad_toml, "[checks\n").expect("write");
    app::reload(&bad_toml, &service);
    assert_eq!(service.data().generation, 1);

    // A good one: a new generation, every part loaded.
    let copy = dir.join("XX.json");
    std::fs::write(&copy, &good).expect("write");
    let path = write_config(&dir, &copy.display().to_string());
    app::reload(&path, &service);
    assert_eq!(service.data().generation, 2);
    assert_eq!(service.data().registers.registers().len(), before);
    assert!(!service.data().trust.is_empty());

    running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
