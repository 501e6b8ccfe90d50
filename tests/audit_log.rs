//! The chained audit log of a running `psp-gateway serve`: one record per check, chained
//! by hash; `audit verify` confirms an untouched log (exit 0), names the first broken line
//! of an edited one (exit 65), and keeps the chain across a logrotate-style move and SIGHUP.
//! No certificate and no credential is ever written to it.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use psp_testkit::wait::until_blocking;

use base64::Engine;
use common::root;

struct Serve {
    child: Child,
    api: SocketAddr,
    admin: SocketAddr,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &Path, audit: &Path) -> Serve {
    serve_with(dir, audit, "")
}

/// [`serve`] with more `[audit]` settings.
fn serve_with(dir: &Path, audit: &Path, settings: &str) -> Serve {
    let root = root().display().to_string();
    let text = std::fs::read_to_string(common::root().join("gateway.toml"))
        .expect("gateway.toml")
        .replace("\"certs/", &format!("\"{root}/certs/"))
        .replace("\"registers/", &format!("\"{root}/registers/"))
        .replace(
            "enabled = true",
            &format!("enabled = true\ncerts = \"{root}/certs\""),
        )
        .replace("127.0.0.1:8080", "127.0.0.1:0")
        .replace("127.0.0.1:8443", "127.0.0.1:0")
        .replace("127.0.0.1:9090", "127.0.0.1:0");
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "{text}\n[audit]\nfile = \"{}\"\n{settings}\n",
            audit.display()
        ),
    )
    .expect("write config");
    let stderr = dir.join("serve.stderr");
    let child = Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(["serve", "--config", config.to_str().expect("path")])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).expect("stderr file"))
        .spawn()
        .expect("serve starts");
    // Each listener is bound before serve logs it: no connection attempts needed.
    let api = common::logged_listener(&stderr, "check endpoint listening");
    let admin = common::logged_listener(&stderr, "admin listener listening");
    Serve { child, api, admin }
}

/// One check through the endpoint, over a plain HTTP/1.1 socket, which must be answered.
fn check(api: SocketAddr, name: &str) -> String {
    let (eidas, answer) = check_answer(api, name);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    eidas
}

/// One check through the endpoint: the certificate sent and the whole answer.
fn check_answer(api: SocketAddr, name: &str) -> (String, String) {
    try_check_answer(api, name).expect("the check is sent and answered")
}

/// [`check_answer`], or `None` when the connection fails (the server is gone).
fn try_check_answer(api: SocketAddr, name: &str) -> Option<(String, String)> {
    use std::io::{Read, Write};
    let pem = std::fs::read(root().join(format!("certs/psp/{name}.pem"))).expect("cert");
    let der = psp_cert::cert::PspCertificate::parse(&pem)
        .expect("parses")
        .der;
    let eidas = base64::engine::general_purpose::STANDARD.encode(der);
    let mut s = std::net::TcpStream::connect(api).ok()?;
    write!(
        s,
        "GET /v1/psp/eidas?jurisdiction=XX HTTP/1.1\r\nhost: x\r\nauthorization: Basic c2FuZGJveDpzYW5kYm94\r\nfi_reference_id: PSDXX-TEST-999999\r\neidas: {eidas}\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some((eidas, out))
}

/// One check's whole answer, or `None` when the server is gone or the answer was cut short
/// (no body, or part of one).
fn try_check(api: SocketAddr, name: &str) -> Option<String> {
    let (_, out) = try_check_answer(api, name)?;
    // Whole: the JSON body closed (the answer is `connection: close`, no chunking).
    out.trim_end().ends_with('}').then_some(out)
}

/// `audit verify` of `files`, which must pass: what it printed.
fn verified(files: &[&Path]) -> String {
    let ok = verify(files);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    String::from_utf8_lossy(&ok.stdout).into_owned()
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
    scratch_named("audit_log")
}

/// A directory of its own for each test (the tests of this file run side by side).
fn scratch_named(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

/// The lines of `path` once there are `n` (or what there is after 10 s).
fn wait_for_lines(path: &Path, n: usize) -> Vec<String> {
    let lines = || -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    };
    until_blocking(Duration::from_secs(10), || {
        let now = lines();
        (now.len() >= n).then_some(now)
    })
    .unwrap_or_else(lines)
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
    assert_eq!(first["prev"], psp_service::telemetry::audit::GENESIS);
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

    let ok_stdout = verified(&[&audit]);
    assert!(ok_stdout.contains("3 records"));

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
    // serve reopens the audit log on SIGHUP, which creates the file again: wait for that
    // (was: a fixed 500 ms).
    until_blocking(Duration::from_secs(10), || audit.exists().then_some(()))
        .expect("serve reopened the audit log after SIGHUP");
    check(serve.api, "valid");
    let new_lines = wait_for_lines(&audit, 1);
    assert_eq!(new_lines.len(), 1);
    let next: serde_json::Value = serde_json::from_str(&new_lines[0]).expect("JSON");
    assert_eq!(next["seq"], 4);
    verified(&[&rotated, &audit]);

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

/// One plain HTTP/1.1 GET; the response's text.
/// Records go to the file in batches, off the request path; an answer waits for its own
/// batch. So `kill -9` in the middle of a flood of checks finds every answered check in the
/// file, chained: 6 clients ask as fast as they can, and serve is killed after 400 ms with
/// checks in flight.
#[test]
fn serve_killed_in_a_flood_of_checks_holds_the_record_of_every_answered_one() {
    // Three times: the moment of the kill falls differently each time (without the wait,
    // one round in three or so found an answered check unrecorded).
    for round in 0..3 {
        flood_then_kill(round);
    }
}

fn flood_then_kill(round: usize) {
    let dir = scratch_named(&format!("audit_log_kill_{round}"));
    let audit = dir.join("audit.jsonl");
    let mut serve = serve(&dir, &audit);
    let api = serve.api;
    let clients: Vec<_> = (0..6)
        .map(|i| {
            std::thread::spawn(move || {
                let mut ids = Vec::new();
                for n in 0.. {
                    let name = ["valid", "expired", "revoked"][(i + n) % 3];
                    let Some(answer) = try_check(api, name) else {
                        return ids;
                    };
                    if !answer.starts_with("HTTP/1.1 200") {
                        // Cut off by the kill, or before it: only whole answers count.
                        return ids;
                    }
                    if let Some(id) = answer
                        .lines()
                        .find_map(|l| l.strip_prefix("x-request-id: "))
                    {
                        ids.push(id.trim().to_owned());
                    }
                }
                ids
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(400));
    serve.child.kill().expect("SIGKILL");
    serve.child.wait().expect("reaped");
    let answered: Vec<String> = clients
        .into_iter()
        .flat_map(|c| c.join().expect("client"))
        .collect();
    let text = std::fs::read_to_string(&audit).expect("the audit file");
    let recorded: std::collections::HashSet<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("whole JSON lines"))
        .filter(|v| v["message"] == "check")
        .map(|v| v["request_id"].as_str().expect("request_id").to_owned())
        .collect();
    assert!(
        answered.len() >= 20,
        "only {} checks answered",
        answered.len()
    );
    let missing: Vec<&String> = answered
        .iter()
        .filter(|id| !recorded.contains(*id))
        .collect();
    assert!(missing.is_empty(), "answered without a record: {missing:?}");
    verified(&[&audit]);
}

fn get(addr: SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out
}

#[test]
fn a_torn_final_audit_line_does_not_stop_serve_and_verify_still_reports_it() {
    let dir = scratch_named("audit_log_torn");
    let audit = dir.join("audit.jsonl");
    {
        let log = psp_service::telemetry::audit::AuditLog::open(&audit).expect("open");
        for i in 0..2 {
            let mut m = serde_json::Map::new();
            m.insert("message".into(), "check".into());
            m.insert("n".into(), i.into());
            log.append(m).expect("append");
        }
    }
    // A write cut short (a full disk): half a record, no line end.
    let torn = br#"{"seq":3,"prev":"ab12","message":"che"#;
    let mut bytes = std::fs::read(&audit).expect("read");
    bytes.extend_from_slice(torn);
    std::fs::write(&audit, &bytes).expect("write");

    let before = verify(&[&audit]);
    assert_eq!(before.status.code(), Some(65));
    let err = String::from_utf8_lossy(&before.stderr);
    assert!(err.contains("line 3") && err.contains("torn"), "{err}");

    // serve starts (it exited 73 here before), and goes on chaining.
    let serve = serve(&dir, &audit);
    check(serve.api, "valid");
    let lines = wait_for_lines(&audit, 4);
    assert_eq!(lines.len(), 4, "{lines:#?}");
    let note: serde_json::Value = serde_json::from_str(&lines[2]).expect("JSON");
    assert_eq!(note["seq"], 3);
    assert_eq!(note["message"], "audit_torn_line_set_aside");
    assert_eq!(note["torn_bytes"], torn.len());
    let aside = PathBuf::from(note["torn_file"].as_str().expect("torn_file"));
    assert_eq!(
        std::fs::read(&aside).expect("set aside"),
        torn,
        "the evidence is kept"
    );
    let last: serde_json::Value = serde_json::from_str(&lines[3]).expect("JSON");
    assert_eq!(
        (&last["seq"], &last["message"]),
        (&4.into(), &"check".into())
    );

    let after = verify(&[&audit]);
    assert_eq!(
        after.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&after.stderr)
    );
    assert!(String::from_utf8_lossy(&after.stdout).contains("1 torn line(s) set aside"));
    let err = String::from_utf8_lossy(&after.stderr);
    assert!(err.contains(aside.to_str().expect("path")), "{err}");

    let metrics = get(serve.admin, "/metrics");
    assert!(
        metrics.contains("psp_gateway_audit_torn_lines_total 1"),
        "{metrics}"
    );
    let stderr = std::fs::read_to_string(dir.join("serve.stderr")).expect("stderr");
    assert!(
        stderr.contains("torn") && stderr.contains("WARN"),
        "a warning in the log: {stderr}"
    );
}

#[test]
fn a_full_disk_under_fail_open_loses_no_audit_record_silently() {
    let dir = scratch_named("audit_log_full");
    // /dev/full: every write fails with ENOSPC, as on a full disk.
    let serve = serve_with(
        &dir,
        Path::new("/dev/full"),
        "on_write_failure = \"fail_open\"",
    );
    check(serve.api, "valid");
    check(serve.api, "expired");
    // Under fail_open an answer does not wait for its record: the writer thread may still
    // hold the second one when the answer arrives. Each must be counted and logged once it
    // has been tried (within 10 s).
    let counted = "psp_gateway_audit_write_failures_total 2";
    let metrics = until_blocking(Duration::from_secs(10), || {
        let now = get(serve.admin, "/metrics");
        now.contains(counted).then_some(now)
    })
    .unwrap_or_else(|| get(serve.admin, "/metrics"));
    assert!(
        metrics.contains(counted),
        "each lost record is counted: {metrics}"
    );
    // The count is taken before the line is logged: wait for the line too.
    let logged = || {
        let stderr = std::fs::read_to_string(dir.join("serve.stderr")).expect("stderr");
        let lines = stderr.matches("cannot append to the audit log").count();
        (lines, stderr)
    };
    let (lines, stderr) = until_blocking(Duration::from_secs(10), || {
        Some(logged()).filter(|(n, _)| *n >= 2)
    })
    .unwrap_or_else(logged);
    assert_eq!(lines, 2, "each lost record is logged: {stderr}");
    assert!(
        metrics.contains("psp_gateway_audit_failing 1"),
        "the log is reported not writable: {metrics}"
    );
}

#[test]
fn a_full_disk_under_fail_closed_answers_nothing_the_log_does_not_hold() {
    let dir = scratch_named("audit_log_full_closed");
    let serve = serve(&dir, Path::new("/dev/full"));
    // The check's own record cannot be written: its answer is not given either.
    for name in ["valid", "expired"] {
        let (_, answer) = check_answer(serve.api, name);
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(
            answer.contains("\"code\":\"audit_log_unavailable\""),
            "{answer}"
        );
        assert!(
            answer.to_ascii_lowercase().contains("retry-after: 1"),
            "{answer}"
        );
    }
    let ready = get(serve.admin, "/readyz");
    assert!(ready.starts_with("HTTP/1.1 503"), "{ready}");
    assert!(ready.contains("the audit log cannot be written"), "{ready}");
    let metrics = get(serve.admin, "/metrics");
    assert!(metrics.contains("psp_gateway_audit_failing 1"), "{metrics}");
}

#[test]
fn audit_repair_sets_a_torn_last_record_aside_and_records_the_repair_in_the_chain() {
    let dir = scratch_named("audit_log_repair");
    let audit = dir.join("audit.jsonl");
    let log = psp_service::telemetry::audit::AuditLog::open(&audit).expect("open");
    for i in 0..3 {
        let mut fields = serde_json::Map::new();
        fields.insert("message".into(), format!("record {i}").into());
        log.append(fields).expect("append");
    }
    drop(log);
    // A write cut short by a crash.
    let mut bytes = std::fs::read(&audit).expect("read");
    bytes.extend_from_slice(b"{\"seq\":4,\"prev\":\"ab");
    std::fs::write(&audit, &bytes).expect("write");
    let before = verify(&[&audit]);
    assert_eq!(before.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&before.stderr).contains("torn"));

    let repair = Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(["audit", "repair"])
        .arg(&audit)
        .output()
        .expect("runs");
    assert_eq!(repair.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&repair.stdout).contains("a torn final record was moved to"));
    verified(&[&audit]);
    let text = std::fs::read_to_string(&audit).expect("read");
    let last: serde_json::Value =
        serde_json::from_str(text.lines().last().expect("a line")).expect("JSON");
    assert_eq!(last["seq"], 4, "the repair is the next link of the chain");
    assert_eq!(last["message"], "audit_torn_line_set_aside");
    let aside = last["torn_file"]
        .as_str()
        .expect("the file the bytes went to");
    assert_eq!(
        std::fs::read(aside).expect("kept"),
        b"{\"seq\":4,\"prev\":\"ab",
        "the torn bytes are kept as evidence"
    );
    // A second repair finds nothing to do and changes nothing.
    let again = Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(["audit", "repair"])
        .arg(&audit)
        .output()
        .expect("runs");
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to repair"));
    assert_eq!(std::fs::read_to_string(&audit).expect("read"), text);
    // A missing file is a missing input.
    let missing = Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(["audit", "repair"])
        .arg(dir.join("nope.jsonl"))
        .output()
        .expect("runs");
    assert_eq!(missing.status.code(), Some(66));
}
