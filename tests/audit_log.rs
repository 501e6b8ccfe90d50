//! The chained audit log of a running `psp-gateway serve`: one record per check, chained
//! by hash; `audit verify` confirms an untouched log (exit 0), names the first broken line
//! of an edited one (exit 65), and keeps the chain across a logrotate-style move and SIGHUP.
//! No certificate and no credential is ever written to it.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use common::{free_port, root};

struct Serve {
    child: Child,
    api: SocketAddr,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &Path, audit: &Path) -> Serve {
    let api_port = free_port();
    let root = root().display().to_string();
    let text = std::fs::read_to_string(common::root().join("gateway.toml"))
        .expect("gateway.toml")
        .replace("\"certs/", &format!("\"{root}/certs/"))
        .replace("\"registers/", &format!("\"{root}/registers/"))
        .replace(
            "enabled = true",
            &format!("enabled = true\ncerts = \"{root}/certs\""),
        )
        .replace("127.0.0.1:8080", &format!("127.0.0.1:{api_port}"))
        .replace("127.0.0.1:8443", &format!("127.0.0.1:{}", free_port()))
        .replace("127.0.0.1:9090", &format!("127.0.0.1:{}", free_port()));
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!("{text}\n[audit]\nfile = \"{}\"\n", audit.display()),
    )
    .expect("write config");
    let child = Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(["serve", "--config", config.to_str().expect("path")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let api: SocketAddr = format!("127.0.0.1:{api_port}").parse().expect("addr");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(api).is_err() {
        assert!(
            Instant::now() < deadline,
            "serve did not listen within 20 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Serve { child, api }
}

/// One check through the endpoint, over a plain HTTP/1.1 socket.
fn check(api: SocketAddr, name: &str) -> String {
    use std::io::{Read, Write};
    let pem = std::fs::read(root().join(format!("certs/psp/{name}.pem"))).expect("cert");
    let der = psp_gateway::cert::PspCertificate::parse(&pem)
        .expect("parses")
        .der;
    let eidas = base64::engine::general_purpose::STANDARD.encode(der);
    let mut s = std::net::TcpStream::connect(api).expect("connect");
    write!(
        s,
        "GET /v1/psp/eidas?jurisdiction=XX HTTP/1.1\r\nhost: x\r\nauthorization: Basic c2FuZGJveDpzYW5kYm94\r\nfi_reference_id: PSDXX-TEST-999999\r\neidas: {eidas}\r\nconnection: close\r\n\r\n"
    )
    .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    eidas
}

fn verify(files: &[&Path]) -> Output {
    let mut args = vec!["audit".to_owned(), "verify".to_owned()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(&args)
        .output()
        .expect("runs")
}

fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("audit_log");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

fn wait_for_lines(path: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let lines: Vec<String> = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect();
        if lines.len() >= n || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_running_service_keeps_a_chained_audit_log_that_verify_checks() {
    let dir = scratch();
    let audit = dir.join("audit.jsonl");
    let serve = serve(&dir, &audit);
    let mut sent = Vec::new();
    for name in ["valid", "expired", "revoked"] {
        sent.push(check(serve.api, name));
    }
    let lines = wait_for_lines(&audit, 3);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let first: serde_json::Value = serde_json::from_str(&lines[0]).expect("JSON");
    assert_eq!(first["seq"], 1);
    assert_eq!(first["prev"], psp_gateway::telemetry::audit::GENESIS);
    assert_eq!(first["message"], "check");
    assert!(first["fingerprint"].is_string());
    // Never a certificate nor a credential.
    let text = lines.join("\n");
    for eidas in &sent {
        assert!(
            !text.contains(&eidas[..64]),
            "a certificate in the audit log"
        );
    }
    assert!(!text.contains("c2FuZGJveDpzYW5kYm94") && !text.contains("argon2"));

    let ok = verify(&[&audit]);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("3 records"));

    // logrotate: move the file away, SIGHUP, go on: the chain runs across both files.
    let rotated = dir.join("audit.jsonl.1");
    std::fs::rename(&audit, &rotated).expect("rotate");
    let pid = serve.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .expect("kill")
            .success()
    );
    std::thread::sleep(Duration::from_millis(500));
    check(serve.api, "valid");
    let new_lines = wait_for_lines(&audit, 1);
    assert_eq!(new_lines.len(), 1);
    let next: serde_json::Value = serde_json::from_str(&new_lines[0]).expect("JSON");
    assert_eq!(next["seq"], 4);
    let both = verify(&[&rotated, &audit]);
    assert_eq!(
        both.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&both.stderr)
    );

    // An edited record: exit 65, naming the line after it.
    let edited = lines[1].replace("\"message\":\"check\"", "\"message\":\"chec\"");
    assert_ne!(edited, lines[1]);
    std::fs::write(
        &rotated,
        [lines[0].clone(), edited, lines[2].clone()].join("\n") + "\n",
    )
    .expect("write");
    let broken = verify(&[&rotated, &audit]);
    assert_eq!(broken.status.code(), Some(65));
    let err = String::from_utf8_lossy(&broken.stderr);
    assert!(err.contains("audit.jsonl.1: line 3"), "{err}");
}
