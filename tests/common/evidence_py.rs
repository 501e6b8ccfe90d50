//! `scripts/evidence/verify.py`: the evidence verifier no one here wrote (jwcrypto for JWS,
//! pyca/cryptography alone for signed notes, hashlib for Merkle roots), installed by
//! scripts/test into `target/evidence-venv`. Never skipped: a test that passes because its
//! verifier is missing proves nothing.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The interpreter with the verifier's packages: `PSP_EVIDENCE_PYTHON`, else the venv of
/// this checkout's target directory, else that of the target directory the binary was
/// built in (a worktree sharing one).
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("PSP_EVIDENCE_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = Path::new("evidence-venv/bin/python");
    let mut candidates = vec![
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target")
            .join(venv),
    ];
    if let Some(target) = Path::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .parent()
        .and_then(Path::parent)
    {
        candidates.push(target.join(venv));
    }
    candidates
        .iter()
        .find(|p| p.exists())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "no evidence verifier at {candidates:?}: run scripts/test, which installs it \
                 (scripts/evidence/requirements.txt); or set PSP_EVIDENCE_PYTHON"
            )
        })
}

/// verify.py's verdict on `args` (one of its modes): `Ok(stderr)` for `valid` (a compact
/// JWS's payload is printed there), `Err(why)` for `refused: why`. Anything else (a crash, a
/// usage error) fails the test.
pub fn verdict<S: AsRef<OsStr>>(args: &[S]) -> Result<String, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/evidence/verify.py");
    let output = Command::new(python())
        .arg(script)
        .args(args)
        .output()
        .expect("run scripts/evidence/verify.py");
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    match (output.status.code(), stdout.strip_prefix("refused: ")) {
        (Some(0), None) if stdout == "valid" => {
            Ok(String::from_utf8_lossy(&output.stderr).into_owned())
        }
        (Some(1), Some(why)) => Err(why.to_owned()),
        _ => panic!(
            "verify.py did not give a verdict ({}): stdout {stdout:?}, stderr {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ),
    }
}
