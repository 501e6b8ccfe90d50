//! The check endpoint against its own OpenAPI document, by a tool no one here wrote:
//! schemathesis (PyPI; scripts/test installs it) generates requests from `docs/openapi.yaml`,
//! sends them to the real `psp-gateway serve`, and checks every response: no 5xx, status and
//! body as documented, content type, headers, 405 for undeclared methods.
//!
//! One check is excluded, with its reason: `missing_required_header` expects a 4xx other than
//! 404 for a missing header, and the contract answers every parameter error with 404
//! (`parameter_missing`, docs/errors.md).
//!
//! Bounded: 25 examples per operation and phase, 60 seconds in all.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::root;

struct Serve(std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ready(admin: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect(admin) else {
        return false;
    };
    let _ = write!(
        s,
        "GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    );
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.1 200")
}

#[test]
fn schemathesis_finds_no_failure_against_the_openapi_document() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("schemathesis");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
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
    let config = dir.join("gateway.toml");
    std::fs::write(&config, text).expect("write config");
    let stderr = dir.join("serve.stderr");
    let _serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
            .args(["serve", "--config", config.to_str().expect("path")])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("serve starts"),
    );
    // The ports serve bound, from its log (no port chosen free beforehand).
    let api = common::logged_listener(&stderr, "check endpoint listening").port();
    let admin = common::logged_listener(&stderr, "admin listener listening");
    assert!(
        psp_testkit::wait::until_blocking(Duration::from_secs(30), || ready(admin).then_some(()))
            .is_some(),
        "serve did not become healthy"
    );

    let out = Command::new("schemathesis")
        .current_dir(&dir)
        .args([
            "run",
            root().join("docs/openapi.yaml").to_str().expect("path"),
            "--url",
            &format!("http://127.0.0.1:{api}"),
            "--auth",
            "sandbox:sandbox",
            "--checks",
            "all",
            "--exclude-checks",
            "missing_required_header",
            "--max-examples",
            "25",
            "--max-time",
            "60",
            "--generation-deterministic",
            "--request-timeout",
            "10",
        ])
        .env("SCHEMATHESIS_TELEMETRY", "false")
        .env("NO_COLOR", "1")
        .output()
        .expect("schemathesis runs (PyPI; scripts/test installs it)");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "schemathesis found failures:\n{report}"
    );
    assert!(
        report.contains("Tested: 3"),
        "every operation was tested:\n{report}"
    );
}
