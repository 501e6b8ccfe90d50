//! `serve` reloads when a file its configuration names changes, without a signal: a register
//! file replaced the way deployments do it (written aside, renamed over) is picked up.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, root};

fn readyz(admin: SocketAddr) -> Option<serde_json::Value> {
    let mut s = TcpStream::connect(admin).ok()?;
    write!(
        s,
        "GET /readyz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let body = out.split("\r\n\r\n").nth(1)?;
    serde_json::from_str(body).ok()
}

#[test]
fn a_replaced_register_file_is_reloaded_without_a_signal() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("reload_watch");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let xx = dir.join("XX.json");
    let original =
        std::fs::read_to_string(root().join("registers/sandbox/XX.json")).expect("XX.json");
    std::fs::write(&xx, &original).expect("write");
    let admin_port = free_port();
    let r = root().display().to_string();
    let text = std::fs::read_to_string(root().join("gateway.toml"))
        .expect("gateway.toml")
        .replace(
            "\"registers/sandbox/XX.json\"",
            &format!("\"{}\"", xx.display()),
        )
        .replace("\"certs/", &format!("\"{r}/certs/"))
        .replace("\"registers/", &format!("\"{r}/registers/"))
        .replace(
            "enabled = true",
            &format!("enabled = true\ncerts = \"{r}/certs\""),
        )
        .replace("127.0.0.1:8080", &format!("127.0.0.1:{}", free_port()))
        .replace("127.0.0.1:8443", &format!("127.0.0.1:{}", free_port()))
        .replace("127.0.0.1:9090", &format!("127.0.0.1:{admin_port}"));
    let config = dir.join("gateway.toml");
    std::fs::write(&config, text).expect("write config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(["serve", "--config", config.to_str().expect("path")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let admin: SocketAddr = format!("127.0.0.1:{admin_port}").parse().expect("addr");
    let generation = |deadline: Duration| {
        let until = Instant::now() + deadline;
        loop {
            if let Some(v) = readyz(admin)
                && let Some(g) = v["generation"].as_u64()
            {
                return Some(g);
            }
            if Instant::now() > until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let first = generation(Duration::from_secs(20));
    assert_eq!(first, Some(1), "serve is up with generation 1");

    // Replaced as deployments do: written next to it, renamed over it.
    let staged = dir.join(".XX.json.new");
    std::fs::write(
        &staged,
        original.replacen("Sandbox Valid PSP", "Sandbox Valid PSP Ltd", 1),
    )
    .expect("write");
    std::fs::rename(&staged, &xx).expect("rename");

    let until = Instant::now() + Duration::from_secs(15);
    let mut seen = first;
    while Instant::now() < until {
        seen = generation(Duration::from_secs(1));
        if seen == Some(2) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if seen != Some(2) {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the change was not picked up without a signal: generation {seen:?}");
    }

    // A file the configuration does not name, in the same directory: no reload.
    std::fs::write(dir.join("unrelated.json"), "{}").expect("write");
    std::thread::sleep(Duration::from_secs(2));
    let after_unrelated = generation(Duration::from_secs(1));

    // A broken replacement: the reload fails, everything stays as it was, and says why.
    std::fs::write(&staged, "{ not json").expect("write");
    std::fs::rename(&staged, &xx).expect("rename");
    let until = Instant::now() + Duration::from_secs(15);
    let mut status = None;
    while Instant::now() < until {
        if let Some(v) = readyz(admin)
            && !v["lastReloadError"].is_null()
        {
            status = Some(v);
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        after_unrelated,
        Some(2),
        "an unrelated file does not reload"
    );
    let status = status.expect("the failed reload is shown in /readyz");
    assert_eq!(
        status["generation"], 2,
        "the failed reload changed nothing: {status}"
    );
    let error = status["lastReloadError"].to_string();
    assert!(
        error.contains("XX.json"),
        "the error names the file: {error}"
    );
}
