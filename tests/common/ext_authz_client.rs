//! The independent Envoy ext_authz client (`scripts/ext-authz/check.py`: grpcio and Envoy's
//! messages from PyPI, installed by scripts/test into `target/ext-authz-venv`), driven from
//! the tests: JSON descriptions of Checks in, the CheckResponses as JSON out.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

/// A whole Python run (interpreter start, imports, every Check of one test) takes about a
/// second here; 120 s is the bound for a loaded CI machine, not an expectation.
pub const CLIENT_DEADLINE: Duration = Duration::from_secs(120);

/// The Python interpreter with the client's packages.
pub fn python() -> PathBuf {
    let python = std::env::var_os("PSP_EXT_AUTHZ_PYTHON").map_or_else(
        || super::root().join("target/ext-authz-venv/bin/python"),
        PathBuf::from,
    );
    assert!(
        python.exists(),
        "{} is missing: scripts/test installs the ext_authz test client \
         (scripts/ext-authz/requirements.txt) there; or set PSP_EXT_AUTHZ_PYTHON",
        python.display()
    );
    python
}

/// Puts `checks` (check.py's JSON descriptions) to the face at `addr`, in order on one
/// channel; check.py's answer to each.
pub async fn checks(addr: SocketAddr, checks: Vec<Value>) -> Vec<Value> {
    checks_with(addr, &[], checks).await
}

/// [`checks`] with check.py's `options` (TLS).
pub async fn checks_with(addr: SocketAddr, options: &[String], checks: Vec<Value>) -> Vec<Value> {
    use std::io::Write;
    let mut child = std::process::Command::new(python())
        .arg(super::root().join("scripts/ext-authz/check.py"))
        .arg(addr.to_string())
        .args(options)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start check.py");
    let pid = child.id();
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(Value::Array(checks).to_string().as_bytes())
        .expect("write the checks");
    let waited = tokio::time::timeout(
        CLIENT_DEADLINE,
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await;
    let output = match waited {
        Ok(joined) => joined.expect("join").expect("check.py output"),
        Err(_) => {
            // Our own child, by its id.
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
            panic!("check.py did not finish within {CLIENT_DEADLINE:?}");
        }
    };
    assert!(
        output.status.success(),
        "check.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answers: Value = serde_json::from_slice(&output.stdout).expect("check.py prints JSON");
    answers.as_array().expect("an array").clone()
}

pub async fn check(addr: SocketAddr, spec: Value) -> Value {
    checks(addr, vec![spec]).await.remove(0)
}
