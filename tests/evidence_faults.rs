//! Issue 26 §3: the audit log under faults, each against a real `psp-gateway serve`
//! subprocess. No record is lost without a metric and an error saying so.
//!
//! - a SIGKILL under load, then `audit verify` / `audit repair` and a restart on the same
//!   file whose checkpoints still verify;
//! - a full disk (a small tmpfs filled up), under `fail_closed` and `fail_open`;
//! - a read-only file system: Linux refuses to remount it read-only under the open log
//!   (EBUSY), so serve is started on one (it refuses, naming the file), and a read-only
//!   directory is met at a rotation's reopen and at the replacement of a removed file;
//! - the log file removed while open.
//!
//! The mount tests need root (CI runs them as root): without it they fail saying so.
//! Every process and mount is released by a Drop guard, also when a test fails.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use common::root;
use psp_testkit::wait::until_blocking;

const BIN: &str = env!("CARGO_BIN_EXE_psp-gateway");
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A running `serve`: killed and reaped when dropped.
struct Serve {
    child: Child,
    api: SocketAddr,
    admin: SocketAddr,
    gateway: SocketAddr,
    stderr: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    /// SIGTERM, then waits (10 s at most) for a clean exit.
    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(sent.success());
        until_blocking(Duration::from_secs(10), || {
            self.child.try_wait().expect("try_wait")
        })
        .expect("serve exits within 10 s of SIGTERM")
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

/// The gateway.toml of the repository with absolute paths, ports 0 and `audit` appended.
/// The certificates are the test binary's generated sandbox PKI (its OCSP and CRL URLs point
/// at a responder on an ephemeral loopback port, not the committed certs/' 127.0.0.1:9090);
/// the evidence signing key is the repository's sandbox key.
fn write_config(dir: &Path, audit: &str) -> PathBuf {
    let root = root().display().to_string();
    let pki = common::test_pki::test_pki().dir.display().to_string();
    let text = std::fs::read_to_string(root_path("gateway.toml"))
        .expect("gateway.toml")
        .replace("\"certs/evidence/", &format!("\"{root}/certs/evidence/"))
        .replace("\"certs/", &format!("\"{pki}/"))
        .replace("\"registers/", &format!("\"{root}/registers/"))
        .replace(
            "enabled = true",
            &format!("enabled = true\ncerts = \"{pki}\""),
        )
        .replace("127.0.0.1:8080", "127.0.0.1:0")
        .replace("127.0.0.1:8443", "127.0.0.1:0")
        .replace("127.0.0.1:9090", "127.0.0.1:0");
    let config = dir.join("gateway.toml");
    std::fs::write(&config, format!("{text}\n[audit]\n{audit}\n")).expect("write config");
    config
}

fn root_path(rel: &str) -> PathBuf {
    root().join(rel)
}

/// An `[audit]` section's body.
fn audit_section(file: &Path, policy: &str, checkpoints: Option<&Path>) -> String {
    let mut s = format!(
        "file = \"{}\"\nsync_interval_ms = 20\non_write_failure = \"{policy}\"\n",
        file.display()
    );
    if let Some(cp) = checkpoints {
        s.push_str(&format!(
            "checkpoints = \"{}\"\ncheckpoint_records = 7\ncheckpoint_seconds = 1\n",
            cp.display()
        ));
    }
    s
}

fn spawn(dir: &Path, audit: &str, tag: &str) -> (Child, PathBuf) {
    let config = write_config(dir, audit);
    let stderr = dir.join(format!("serve-{tag}.stderr"));
    let child = Command::new(BIN)
        .args(["serve", "--config", config.to_str().expect("path")])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).expect("stderr file"))
        .spawn()
        .expect("serve starts");
    (child, stderr)
}

fn serve(dir: &Path, audit: &str, tag: &str) -> Serve {
    let (child, stderr) = spawn(dir, audit, tag);
    // The guard first: a listener that is never logged still ends the process.
    let mut s = Serve {
        child,
        api: "127.0.0.1:0".parse().expect("addr"),
        admin: "127.0.0.1:0".parse().expect("addr"),
        gateway: "127.0.0.1:0".parse().expect("addr"),
        stderr: stderr.clone(),
    };
    s.api = common::logged_listener(&stderr, "check endpoint listening");
    s.admin = common::logged_listener(&stderr, "admin listener listening");
    s.gateway = common::logged_listener(&stderr, "gateway listening");
    s
}

/// A directory of its own for each test (the tests of this file run side by side).
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("evidence_faults")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

/// An HTTP/1.1 response, as text.
struct Response {
    status: u16,
    head: String,
    body: String,
}

impl Response {
    fn parse(text: &str) -> Result<Response, String> {
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| format!("no head: {text:?}"))?;
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("no status: {head:?}"))?;
        Ok(Response {
            status,
            head: head.to_ascii_lowercase(),
            body: body.to_owned(),
        })
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            (n.trim() == name).then(|| v.trim())
        })
    }
}

/// One plain HTTP/1.1 GET on a fresh connection.
fn try_http(addr: SocketAddr, path: &str, extra: &str) -> Result<Response, String> {
    let mut s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: x\r\n{extra}connection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).map_err(|e| e.to_string())?;
    Response::parse(&String::from_utf8_lossy(&out))
}

fn get(addr: SocketAddr, path: &str) -> Response {
    try_http(addr, path, "").unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// The `eidas` header of the sandbox PSP certificate `name`.
fn eidas(name: &str) -> String {
    let pem = std::fs::read(common::test_pki::test_pki().psp(name)).expect("cert");
    let der = psp_cert::cert::PspCertificate::parse(&pem)
        .expect("parses")
        .der;
    base64::engine::general_purpose::STANDARD.encode(der)
}

/// One check through the endpoint.
fn try_check(api: SocketAddr, eidas: &str) -> Result<Response, String> {
    try_http(
        api,
        "/v1/psp/eidas?jurisdiction=XX",
        &format!(
            "authorization: Basic c2FuZGJveDpzYW5kYm94\r\nfi_reference_id: PSDXX-TEST-999999\r\neidas: {eidas}\r\n"
        ),
    )
}

/// One call through the gateway over mutual TLS (HTTP/1.1), presenting `certs/psp/valid`.
fn try_gateway(addr: SocketAddr, config: &Arc<rustls::ClientConfig>) -> Result<Response, String> {
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let conn = rustls::ClientConnection::new(config.clone(), name).map_err(|e| e.to_string())?;
    let sock = TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    sock.set_write_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, sock);
    write!(
        tls,
        "GET /v1/accounts HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    // A peer that closes without close_notify still gave its whole answer.
    match tls.read_to_end(&mut out) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !out.is_empty() => {}
        Err(e) => return Err(e.to_string()),
    }
    Response::parse(&String::from_utf8_lossy(&out))
}

fn psp_client() -> Arc<rustls::ClientConfig> {
    common::tls_client::client_config(
        &common::test_pki::test_pki().dir,
        Some("valid"),
        common::tls_client::Proto::H1,
    )
}

/// A metric's value (the first sample line of that name without labels).
fn metric(admin: SocketAddr, name: &str) -> f64 {
    let text = get(admin, "/metrics").body;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} "))?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
}

fn audit(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("audit")
        .args(args)
        .output()
        .expect("psp-gateway audit runs")
}

fn show(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn records(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

/// Gateway and endpoint requests from a thread of its own until stopped (or 2,000 at most);
/// failures are counted, not fatal (the process is killed under it).
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(serve: &Serve) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicUsize::new(0));
        let (api, gateway) = (serve.api, serve.gateway);
        let (stop2, ok2) = (stop.clone(), ok.clone());
        let thread = std::thread::spawn(move || {
            let config = psp_client();
            let valid = eidas("valid");
            for i in 0..2000 {
                if stop2.load(Ordering::Acquire) {
                    return;
                }
                let r = if i % 2 == 0 {
                    try_gateway(gateway, &config)
                } else {
                    try_check(api, &valid)
                };
                if matches!(r, Ok(r) if r.status == 200) {
                    ok2.fetch_add(1, Ordering::AcqRel);
                }
            }
        });
        Load {
            stop,
            ok,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> usize {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.join().expect("load thread");
        }
        self.ok.load(Ordering::Acquire)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A tmpfs mounted on a directory, unmounted (lazily if busy) when dropped.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        Tmpfs::mount_with(dir, &format!("size={size}"))
    }

    /// A tmpfs with mount options `opts` (`size=256k`, `ro`), over what `dir` held.
    fn mount_with(dir: &Path, opts: &str) -> Tmpfs {
        let size = opts;
        std::fs::create_dir_all(dir).expect("mount point");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "tmpfs"])
            .arg(dir)
            .output()
            .expect("mount runs");
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            panic!(
                "this test mounts a tmpfs (to fill a file system or make one read-only), which needs \
                 root (CI runs it as root; uid here: {}): `mount -t tmpfs -o {size} tmpfs {}` failed: {err}",
                current_uid(),
                dir.display()
            );
        }
        Tmpfs {
            dir: dir.to_owned(),
        }
    }

    /// `mount -o remount,<opts>`; the command's output.
    fn remount(&self, opts: &str) -> Output {
        Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(&self.dir)
            .output()
            .expect("mount runs")
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let done = Command::new("umount")
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if !done {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

fn current_uid() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:").map(|v| v.trim().to_owned()))
        })
        .unwrap_or_else(|| "?".to_owned())
}

/// Fills the file system of `path` with one file until a write fails with ENOSPC.
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).expect("filler");
    let chunk = [0u8; 4096];
    for _ in 0..100_000 {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(28), "ENOSPC, not {e}");
                break;
            }
        }
    }
    // Bytes left in partial pages, one at a time.
    for _ in 0..4096 {
        if f.write(&[0]).is_err() {
            break;
        }
    }
}

/// Fills the file system before serve opens `file` (which then has no page of its own).
/// Filling it while serve runs leaves the free bytes of the audit file's last tmpfs page: a
/// record longer than them fails, a shorter one (the `audit_log_writable_again` note) still
/// fits, and the log flaps between failing and recovered while the disk is "full" (seen
/// here: recovered without the filler being deleted). Full from the start, every write fails.
fn fill_before_start(file: &Path, filler: &Path) {
    assert!(!file.exists());
    fill(filler);
}

// ---------------------------------------------------------------------------------------
// 1. SIGKILL under load
// ---------------------------------------------------------------------------------------

#[test]
fn a_sigkill_under_load_leaves_a_log_that_verifies_or_is_repaired_and_goes_on() {
    let mut torn_rounds = 0;
    for round in 0..3 {
        let dir = scratch(&format!("kill-{round}"));
        let file = dir.join("audit.jsonl");
        let cp = dir.join("checkpoints");
        let section = audit_section(&file, "fail_closed", Some(&cp));

        let first = serve(&dir, &section, "first");
        let load = Load::start(&first);
        let delay = 50 + common::random_below(351);
        std::thread::sleep(Duration::from_millis(delay));
        let mut first = first;
        first.child.kill().expect("SIGKILL");
        let _ = first.child.wait();
        let served = load.stop();
        drop(first);

        let lines = std::fs::read_to_string(&file).unwrap_or_default();
        let before = audit(&["verify", file.to_str().expect("path")]);
        match before.status.code() {
            Some(0) => {}
            Some(65) => {
                // Exactly one torn record, the last line.
                let err = String::from_utf8_lossy(&before.stderr);
                let n = lines.split_inclusive('\n').count();
                assert!(
                    err.contains("torn") && err.contains(&format!("line {n}")),
                    "round {round}: not a torn final line: {}",
                    show(&before)
                );
                torn_rounds += 1;
                let repair = audit(&["repair", file.to_str().expect("path")]);
                assert_eq!(repair.status.code(), Some(0), "{}", show(&repair));
                assert!(
                    String::from_utf8_lossy(&repair.stdout).contains("a torn final record"),
                    "{}",
                    show(&repair)
                );
                let after = audit(&["verify", file.to_str().expect("path")]);
                assert_eq!(after.status.code(), Some(0), "{}", show(&after));
            }
            _ => panic!("round {round}: {}", show(&before)),
        }
        let written = records(&file).len();
        let found = std::fs::read_to_string(&file).unwrap_or_default();
        // The last whole checkpoint line (a torn one is passed over, as the restart does).
        let covered = std::fs::read_to_string(&cp)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|c| c["size"].as_u64())
            .max()
            .unwrap_or(0) as usize;
        eprintln!(
            "round {round}: SIGKILL after {delay} ms, {served} requests answered 200, {written} records in the file, {covered} covered by a checkpoint"
        );

        // Restart on the same file (the checkpoint resume takes it), more requests, SIGTERM.
        let second = serve(&dir, &section, "second");
        let jwks = get(second.admin, "/.well-known/jwks.json");
        assert_eq!(jwks.status, 200, "{}", jwks.body);
        let jwks_file = dir.join("jwks.json");
        std::fs::write(&jwks_file, body_of(&jwks)).expect("jwks");
        let config = psp_client();
        let valid = eidas("valid");
        for _ in 0..5 {
            let g = try_gateway(second.gateway, &config).expect("gateway");
            assert_eq!(g.status, 200, "{}", g.body);
            let c = try_check(second.api, &valid).expect("check");
            assert_eq!(c.status, 200, "{}", c.body);
        }
        let stderr = second.stderr.clone();
        let status = second.terminate();
        assert!(
            status.success(),
            "{status}: {}",
            std::fs::read_to_string(stderr).unwrap_or_default()
        );
        // The records after the last checkpoint are not taken into the log: they are moved,
        // as found, to a file of their own, which the restart's record names with its SHA-256.
        let recs = records(&file);
        assert!(
            recs.len() > covered + 10,
            "round {round}: {} records after the restart, {covered} covered before",
            recs.len()
        );
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(r["seq"], (i + 1) as u64, "one chain, no gap: {r}");
        }
        let opened = &recs[covered];
        assert_eq!(opened["message"], "audit_log_opened", "{opened}");
        assert_eq!(opened["checkpoint"], covered as u64, "{opened}");
        assert_eq!(opened["clean_stop"], false, "{opened}");
        if written > covered {
            assert_eq!(
                opened["set_aside_first_seq"],
                covered as u64 + 1,
                "{opened}"
            );
            assert_eq!(opened["set_aside_last_seq"], written as u64, "{opened}");
            let aside = std::fs::read_to_string(opened["set_aside_file"].as_str().expect("file"))
                .expect("the records set aside");
            let kept: String = found.split_inclusive('\n').take(covered).collect();
            assert_eq!(
                format!("{kept}{aside}"),
                found,
                "moved as found, byte for byte"
            );
        } else {
            assert!(opened.get("set_aside_file").is_none(), "{opened}");
        }
        let full = audit(&[
            "verify",
            file.to_str().expect("path"),
            "--checkpoints",
            cp.to_str().expect("path"),
            "--key",
            jwks_file.to_str().expect("path"),
        ]);
        assert_eq!(
            full.status.code(),
            Some(0),
            "round {round}: {}",
            show(&full)
        );
        if written > covered {
            assert!(
                String::from_utf8_lossy(&full.stderr).contains("holds them, SHA-256 as recorded"),
                "round {round}: {}",
                show(&full)
            );
        }
    }
    eprintln!("{torn_rounds} of 3 rounds left a torn final record");
}

/// A body, de-chunked when the answer is chunked.
fn body_of(r: &Response) -> String {
    if r.header("transfer-encoding") != Some("chunked") {
        return r.body.clone();
    }
    let mut out = String::new();
    let mut rest = r.body.as_str();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).expect("chunk size");
        if n == 0 {
            break;
        }
        out.push_str(&after[..n]);
        rest = &after[n + 2..];
    }
    out
}

// ---------------------------------------------------------------------------------------
// 2. A full disk
// ---------------------------------------------------------------------------------------

/// Recovery: the filler is deleted; requests pass again within 5 s; the log holds an
/// `audit_log_writable_again` record with `records_lost`, and verifies.
fn recover_after_full(
    serve: &Serve,
    file: &Path,
    filler: &Path,
    config: &Arc<rustls::ClientConfig>,
) -> serde_json::Value {
    std::fs::remove_file(filler).expect("remove filler");
    let start = Instant::now();
    until_blocking(Duration::from_secs(5), || {
        let r = try_gateway(serve.gateway, config).ok()?;
        (r.status == 200 && metric(serve.admin, "psp_gateway_audit_failing") == 0.0).then_some(())
    })
    .unwrap_or_else(|| panic!("no recovery within 5 s:\n{}", serve.stderr()));
    eprintln!(
        "recovered {} ms after the filler was deleted",
        start.elapsed().as_millis()
    );
    let again = records(file)
        .into_iter()
        .find(|r| r["message"] == "audit_log_writable_again")
        .unwrap_or_else(|| panic!("no audit_log_writable_again record in {}", file.display()));
    assert!(again["records_lost"].as_u64().unwrap_or(0) > 0, "{again}");
    assert!(
        serve.stderr().contains("takes records again"),
        "an error saying so: {}",
        serve.stderr()
    );
    let ok = audit(&["verify", file.to_str().expect("path")]);
    assert_eq!(ok.status.code(), Some(0), "{}", show(&ok));
    again
}

#[test]
fn a_full_disk_under_fail_closed_refuses_then_recovers() {
    let dir = scratch("full-closed");
    let mnt = Tmpfs::mount(&dir.join("mnt"), "256k");
    let file = mnt.dir.join("audit.jsonl");
    let filler = mnt.dir.join("filler");
    // Full before serve writes its first record (see `fill_before_start`).
    fill_before_start(&file, &filler);
    let serve = serve(&dir, &audit_section(&file, "fail_closed", None), "s");
    let config = psp_client();
    let valid = eidas("valid");

    // A call is decided before its record is written: the first may pass, then none.
    let mut served_while_full = 0;
    let refused = (0..50)
        .find_map(|_| {
            let r = try_gateway(serve.gateway, &config).expect("gateway");
            if r.status == 200 {
                served_while_full += 1;
                None
            } else {
                Some(r)
            }
        })
        .expect("a refusal within 50 requests on a full disk");
    assert_eq!(refused.status, 503, "{}", refused.body);
    let body: serde_json::Value = serde_json::from_str(&body_of(&refused)).expect("JSON body");
    assert_eq!(
        body["tppMessages"][0]["code"], "SERVICE_UNAVAILABLE",
        "Berlin Group body: {body}"
    );
    // docs/errors.md: the reason `audit_log_unavailable` is answered in the Berlin Group
    // dialect as its code SERVICE_UNAVAILABLE (the BG codes are a closed list), with the text
    // saying why; the contract's code itself is in the check endpoint's body and the log.
    assert!(
        body["tppMessages"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with(
                "The gateway cannot record this call in its audit log now, so it lets nothing through"
            )),
        "{body}"
    );
    assert_eq!(refused.header("retry-after"), Some("1"), "{}", refused.head);

    let c = try_check(serve.api, &valid).expect("check");
    assert_eq!(c.status, 503, "{}", c.body);
    let cb: serde_json::Value = serde_json::from_str(&body_of(&c)).expect("JSON body");
    assert_eq!(cb["errors"][0]["code"], "audit_log_unavailable", "{cb}");
    assert_eq!(c.header("retry-after"), Some("1"), "{}", c.head);

    let ready = get(serve.admin, "/readyz");
    assert_eq!(ready.status, 503, "{}", ready.body);
    assert!(
        ready.body.contains("the audit log cannot be written"),
        "{}",
        ready.body
    );
    assert_eq!(metric(serve.admin, "psp_gateway_audit_failing"), 1.0);
    let failures = metric(serve.admin, "psp_gateway_audit_write_failures_total");
    assert!(failures > 0.0, "{failures}");
    eprintln!("fail_closed: {served_while_full} served after the fill, {failures} write failures");

    let again = recover_after_full(&serve, &file, &filler, &config);
    let after = metric(serve.admin, "psp_gateway_audit_write_failures_total");
    // Each lost record is counted once, in the metric and in the record.
    assert_eq!(again["records_lost"].as_f64(), Some(after), "{again}");
    let ready = get(serve.admin, "/readyz");
    assert!(!ready.body.contains("audit log"), "{}", ready.body);
    drop(serve);
    drop(mnt);
}

#[test]
fn a_full_disk_under_fail_open_serves_and_counts_each_lost_record() {
    let dir = scratch("full-open");
    let mnt = Tmpfs::mount(&dir.join("mnt"), "256k");
    let file = mnt.dir.join("audit.jsonl");
    let filler = mnt.dir.join("filler");
    fill_before_start(&file, &filler);
    let serve = serve(&dir, &audit_section(&file, "fail_open", None), "s");
    let config = psp_client();
    let valid = eidas("valid");
    // Warm up first (the first call fetches revocation evidence, which has records of its
    // own): then each call below is exactly one record.
    assert_eq!(try_gateway(serve.gateway, &config).expect("gw").status, 200);
    assert_eq!(try_check(serve.api, &valid).expect("check").status, 200);
    let failures_before = metric(serve.admin, "psp_gateway_audit_write_failures_total");
    let lines_before = records(&file).len();
    for _ in 0..10 {
        let g = try_gateway(serve.gateway, &config).expect("gateway");
        assert_eq!(g.status, 200, "served while the disk is full: {}", g.body);
        let c = try_check(serve.api, &valid).expect("check");
        assert_eq!(c.status, 200, "served while the disk is full: {}", c.body);
    }
    // Under fail_open an answer does not wait for its record: wait until the writer has
    // tried all 20 (within 10 s), then a little longer to see that no more are counted.
    until_blocking(Duration::from_secs(10), || {
        let counted = metric(serve.admin, "psp_gateway_audit_write_failures_total");
        let tried = (counted - failures_before) as usize + (records(&file).len() - lines_before);
        (tried >= 20).then_some(())
    });
    let written_while_full = records(&file).len() - lines_before;
    // Not one more while the disk stays full: failed recovery attempts are no lost records
    // (they were counted, one per tick, before the fix in audit.rs).
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(metric(serve.admin, "psp_gateway_audit_failing"), 1.0);
    let failures = metric(serve.admin, "psp_gateway_audit_write_failures_total");
    // 20 requests, 20 records: each either written or counted.
    assert_eq!(written_while_full, 0);
    assert_eq!(
        (failures - failures_before) as usize + written_while_full,
        20,
        "every record written or counted ({written_while_full} written)"
    );
    let stderr = serve.stderr();
    assert!(
        stderr.contains("cannot append to the audit log"),
        "each lost record is logged: {stderr}"
    );
    let ready = get(serve.admin, "/readyz");
    eprintln!(
        "fail_open while full: /readyz {} ({} write failures)",
        ready.status, failures
    );
    assert!(!ready.body.contains("the audit log cannot be written"));

    let again = recover_after_full(&serve, &file, &filler, &config);
    assert_eq!(again["records_lost"].as_f64(), Some(failures), "{again}");
    drop(serve);
    drop(mnt);
}

// ---------------------------------------------------------------------------------------
// 3. A read-only file system
// ---------------------------------------------------------------------------------------

/// Linux refuses `mount -o remount,ro` of a file system on which a file is open for writing
/// (EBUSY: the open file holds a write reference on the mount), and serve keeps its audit
/// file open for appending: a file system cannot become read-only under a running log. This
/// is asserted first (should a kernel ever allow it, the test says so and must be extended).
/// What can happen is a log whose directory is read-only when serve starts (a volume mounted
/// read-only by mistake): serve must refuse to start, naming the file.
#[test]
fn a_read_only_file_system_refuses_the_start_naming_the_file() {
    for policy in ["fail_closed", "fail_open"] {
        let dir = scratch(&format!("ro-{policy}"));
        let mnt = Tmpfs::mount(&dir.join("mnt"), "256k");
        let file = mnt.dir.join("audit.jsonl");
        let section = audit_section(&file, policy, None);
        {
            let running = serve(&dir, &section, "running");
            let ro = mnt.remount("ro");
            assert!(
                !ro.status.success(),
                "the kernel made the file system read-only under an open audit file; this test \
                 must now check the running log's behaviour: {}",
                show(&ro)
            );
            assert!(
                String::from_utf8_lossy(&ro.stderr).contains("busy"),
                "{}",
                show(&ro)
            );
            let g = try_gateway(running.gateway, &psp_client()).expect("gateway");
            assert_eq!(g.status, 200, "{}", g.body);
            running.terminate();
        }
        // Read-only before the start (the file exists, as it would after a restart).
        assert!(file.exists());
        let ro = mnt.remount("ro");
        assert!(ro.status.success(), "{}", show(&ro));
        let (mut child, stderr) = spawn(&dir, &section, "ro");
        let status = until_blocking(Duration::from_secs(30), || {
            child.try_wait().expect("try_wait")
        });
        let Some(status) = status else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{policy}: serve started on a read-only audit file system");
        };
        let text = std::fs::read_to_string(&stderr).unwrap_or_default();
        assert!(!status.success(), "{text}");
        assert!(
            text.contains(file.to_str().expect("path")) && text.contains("Read-only file system"),
            "{policy}: the error names the file and why: {text}"
        );
        let _ = mnt.remount("rw");
        drop(mnt);
    }
}

// ---------------------------------------------------------------------------------------
// 4. The log file deleted while running
// ---------------------------------------------------------------------------------------

#[test]
fn a_log_file_removed_while_open_is_replaced_naming_what_it_held() {
    for policy in ["fail_closed", "fail_open"] {
        let dir = scratch(&format!("removed-{policy}"));
        let file = dir.join("audit.jsonl");
        let serve = serve(&dir, &audit_section(&file, policy, None), "s");
        let config = psp_client();
        let valid = eidas("valid");
        for _ in 0..3 {
            assert_eq!(try_gateway(serve.gateway, &config).expect("gw").status, 200);
            assert_eq!(try_check(serve.api, &valid).expect("check").status, 200);
        }
        // Every call's record, not merely six records: the first decision adds a record of
        // its signing, and under `fail_open` an answer does not wait for its record, so six
        // records could be read before the last call's was written (a CI run did: 7 lost
        // against the 6 read).
        let before = until_blocking(Duration::from_secs(5), || {
            let r = records(&file);
            let calls = |message: &str| r.iter().filter(|x| x["message"] == message).count();
            (calls("gateway decision") == 3 && calls("check") == 3).then_some(r)
        })
        .expect("the six calls' records");
        let last_seq = before.last().expect("records")["seq"]
            .as_u64()
            .expect("seq");
        std::fs::remove_file(&file).expect("remove");
        let start = Instant::now();
        let first = until_blocking(Duration::from_secs(5), || records(&file).into_iter().next())
            .unwrap_or_else(|| panic!("{policy}: no new file within 5 s:\n{}", serve.stderr()));
        eprintln!(
            "{policy}: the new file was there {} ms after the removal",
            start.elapsed().as_millis()
        );
        assert_eq!(first["message"], "audit_file_removed_while_open", "{first}");
        assert_eq!(first["first_seq_lost"], 1, "{first}");
        assert_eq!(first["last_seq_lost"], last_seq, "{first}");
        assert_eq!(first["records_lost"], last_seq, "{first}");
        assert_eq!(first["seq"], last_seq + 1, "the chain goes on: {first}");
        assert_eq!(
            metric(serve.admin, "psp_gateway_audit_records_lost_total"),
            last_seq as f64
        );
        assert!(serve.stderr().contains("was removed while open"));

        assert_eq!(try_gateway(serve.gateway, &config).expect("gw").status, 200);
        assert_eq!(try_check(serve.api, &valid).expect("check").status, 200);
        let now = until_blocking(Duration::from_secs(5), || {
            let r = records(&file);
            (r.len() >= 3).then_some(r)
        })
        .expect("the later requests are in the new file");
        assert_eq!(now.len(), 3, "{now:#?}");
        // The new file starts mid-chain (its first `prev` is the hash of a record in the removed
        // file): verify takes it as a chain from that point on.
        let v = audit(&["verify", file.to_str().expect("path")]);
        assert_eq!(v.status.code(), Some(0), "{policy}: {}", show(&v));
        drop(serve);
    }
}

/// Sends `signal` (`-HUP`) to the serve process.
fn signal(serve: &Serve, signal: &str) {
    let pid = serve.child.id().to_string();
    assert!(
        Command::new("kill")
            .args([signal, &pid])
            .status()
            .expect("kill")
            .success()
    );
}

/// The read-only file system that can happen under a running log: logrotate moved the file
/// away and the directory is read-only when serve reopens it on SIGHUP (here a read-only
/// tmpfs mounted over the directory). The reopen fails with an error; the records go on in
/// the moved file (still open), so none is lost and requests are served under both
/// policies; a later SIGHUP, once the directory is writable, starts the new file, and the
/// chain runs across both.
#[test]
fn a_read_only_directory_at_rotation_keeps_the_records_in_the_moved_file() {
    for policy in ["fail_closed", "fail_open"] {
        let dir = scratch(&format!("ro-rotate-{policy}"));
        let mnt = Tmpfs::mount(&dir.join("mnt"), "256k");
        let file = mnt.dir.join("audit.jsonl");
        let rotated = mnt.dir.join("audit.jsonl.1");
        let serve = serve(&dir, &audit_section(&file, policy, None), "s");
        let config = psp_client();
        let valid = eidas("valid");
        assert_eq!(try_gateway(serve.gateway, &config).expect("gw").status, 200);
        assert_eq!(try_check(serve.api, &valid).expect("check").status, 200);
        std::fs::rename(&file, &rotated).expect("rotate");
        let over = Tmpfs::mount_with(&mnt.dir, "ro,size=64k");
        signal(&serve, "-HUP");
        until_blocking(Duration::from_secs(5), || {
            serve
                .stderr()
                .contains("cannot reopen the audit log")
                .then_some(())
        })
        .unwrap_or_else(|| panic!("{policy}: no error about the reopen: {}", serve.stderr()));
        let text = serve.stderr();
        assert!(text.contains("Read-only file system"), "{text}");
        for _ in 0..3 {
            assert_eq!(try_gateway(serve.gateway, &config).expect("gw").status, 200);
            assert_eq!(try_check(serve.api, &valid).expect("check").status, 200);
        }
        assert_eq!(metric(serve.admin, "psp_gateway_audit_failing"), 0.0);
        assert_eq!(
            metric(serve.admin, "psp_gateway_audit_write_failures_total"),
            0.0
        );
        drop(over);
        // Under fail_open the last answers may come before their records are written.
        let kept = until_blocking(Duration::from_secs(10), || {
            let r = records(&rotated);
            (r.len() >= 8).then_some(r)
        })
        .unwrap_or_else(|| records(&rotated));
        assert!(
            kept.len() >= 8,
            "{policy}: the records went on in the moved file: {kept:#?}"
        );
        signal(&serve, "-HUP");
        until_blocking(Duration::from_secs(5), || file.exists().then_some(()))
            .expect("the new file after the second SIGHUP");
        assert_eq!(try_check(serve.api, &valid).expect("check").status, 200);
        let new = until_blocking(Duration::from_secs(5), || {
            let r = records(&file);
            (!r.is_empty()).then_some(r)
        })
        .expect("a record in the new file");
        assert_eq!(
            new[0]["seq"].as_u64(),
            records(&rotated)
                .last()
                .and_then(|r| r["seq"].as_u64())
                .map(|s| s + 1)
        );
        let v = audit(&[
            "verify",
            rotated.to_str().expect("path"),
            file.to_str().expect("path"),
        ]);
        assert_eq!(v.status.code(), Some(0), "{policy}: {}", show(&v));
        drop(serve);
        drop(mnt);
    }
}

/// The log file removed while the directory cannot take a new one (a read-only tmpfs mounted
/// over it before the next tick). The records written meanwhile go to the removed file, which
/// no one will read: under fail_closed the log must refuse requests until a new file can be
/// opened (nothing let through that the log does not hold), under fail_open it must say so;
/// in both, the note in the new file names every record the removed file took.
#[test]
fn a_removed_log_that_cannot_be_replaced_refuses_under_fail_closed() {
    for policy in ["fail_closed", "fail_open"] {
        let dir = scratch(&format!("removed-ro-{policy}"));
        let mnt = Tmpfs::mount(&dir.join("mnt"), "256k");
        let file = mnt.dir.join("audit.jsonl");
        let serve = serve(&dir, &audit_section(&file, policy, None), "s");
        let config = psp_client();
        let valid = eidas("valid");
        assert_eq!(try_gateway(serve.gateway, &config).expect("gw").status, 200);
        assert_eq!(try_check(serve.api, &valid).expect("check").status, 200);
        // The read-only tmpfs goes over the directory first, then the file is removed through
        // a handle on the directory beneath (/proc/self/fd/N): no tick can come in between.
        let beneath = std::fs::File::open(&mnt.dir).expect("the directory");
        let over = Tmpfs::mount_with(&mnt.dir, "ro,size=64k");
        {
            use std::os::fd::AsRawFd;
            std::fs::remove_file(format!("/proc/self/fd/{}/audit.jsonl", beneath.as_raw_fd()))
                .expect("remove beneath the read-only mount");
        }
        drop(beneath);
        // Ticks (every 20 ms): the removal is noticed and the new file cannot be opened.
        until_blocking(Duration::from_secs(5), || {
            serve
                .stderr()
                .contains("no new file can be opened")
                .then_some(())
        });
        let text = serve.stderr();
        assert!(
            text.contains("removed while open") && text.contains("Read-only file system"),
            "{policy}: an error saying the removed file cannot be replaced: {text}"
        );
        assert_eq!(
            metric(serve.admin, "psp_gateway_audit_failing"),
            1.0,
            "{policy}"
        );
        let g = try_gateway(serve.gateway, &config).expect("gw");
        let c = try_check(serve.api, &valid).expect("check");
        if policy == "fail_closed" {
            assert_eq!(g.status, 503, "{}", g.body);
            assert_eq!(c.status, 503, "{}", c.body);
            assert_eq!(get(serve.admin, "/readyz").status, 503);
        } else {
            assert_eq!(g.status, 200, "{}", g.body);
            assert_eq!(c.status, 200, "{}", c.body);
        }
        drop(over);
        let first = until_blocking(Duration::from_secs(5), || records(&file).into_iter().next())
            .unwrap_or_else(|| panic!("{policy}: no new file within 5 s:\n{}", serve.stderr()));
        assert_eq!(first["message"], "audit_file_removed_while_open", "{first}");
        // Every record the removed file took, those written after the removal included.
        let seq = first["seq"].as_u64().expect("seq");
        assert_eq!(first["first_seq_lost"], 1, "{first}");
        assert_eq!(first["last_seq_lost"], seq - 1, "{first}");
        assert_eq!(first["records_lost"], seq - 1, "{first}");
        assert_eq!(
            metric(serve.admin, "psp_gateway_audit_records_lost_total"),
            (seq - 1) as f64
        );
        until_blocking(Duration::from_secs(5), || {
            (metric(serve.admin, "psp_gateway_audit_failing") == 0.0).then_some(())
        })
        .expect("writable again");
        assert_eq!(try_gateway(serve.gateway, &config).expect("gw").status, 200);
        let v = audit(&["verify", file.to_str().expect("path")]);
        assert_eq!(v.status.code(), Some(0), "{policy}: {}", show(&v));
        drop(serve);
        drop(mnt);
    }
}

// ---------------------------------------------------------------------------------------
// 4. Crashes against the checkpoints (issue 38 findings 1 to 3)
// ---------------------------------------------------------------------------------------

/// An `[audit]` section whose checkpoints come only at start, rotation and shutdown (never
/// by count or time within a test), synced every 20 ms; `copy` when given.
fn rare_checkpoints(file: &Path, cp: &Path, copy: Option<&Path>) -> String {
    let mut s = format!(
        "file = \"{}\"\nsync_interval_ms = 20\non_write_failure = \"fail_closed\"\ncheckpoints = \"{}\"\ncheckpoint_records = 100000\ncheckpoint_seconds = 3600\n",
        file.display(),
        cp.display()
    );
    if let Some(copy) = copy {
        s.push_str(&format!("checkpoint_copy = \"{}\"\n", copy.display()));
    }
    s
}

/// The sizes of the whole checkpoint lines of `cp`.
fn checkpoint_sizes(cp: &Path) -> Vec<u64> {
    std::fs::read_to_string(cp)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|c| c["size"].as_u64())
        .collect()
}

/// A started, stopped, started again log (so the last checkpoint is the second start's),
/// then three refused checks (an expired certificate), answered under `fail_closed` (each
/// after its record was written), synced, and a SIGKILL. Returns the checkpoint size the
/// file was left at and the number of records in it.
fn three_refusals_then_sigkill(dir: &Path, section: &str) -> (usize, usize) {
    stop_cleanly(serve(dir, section, "first"));
    let second = serve(dir, section, "second");
    let jwks = get(second.admin, "/.well-known/jwks.json");
    std::fs::write(dir.join("jwks.json"), body_of(&jwks)).expect("jwks");
    let expired = eidas("expired");
    for _ in 0..3 {
        let c = try_check(second.api, &expired).expect("check");
        assert_eq!(c.status, 200, "{}", c.body);
        assert!(c.body.contains("\"notExpired\":false"), "{}", c.body);
    }
    // Synced (every 20 ms) well before the kill.
    std::thread::sleep(Duration::from_millis(300));
    let mut second = second;
    second.child.kill().expect("SIGKILL");
    let _ = second.child.wait();
    let covered = *checkpoint_sizes(&dir.join("checkpoints"))
        .last()
        .expect("a checkpoint") as usize;
    let held = records(&dir.join("audit.jsonl")).len();
    assert_eq!(
        held,
        covered + 3,
        "three refusals after the last checkpoint"
    );
    (covered, held)
}

/// SIGTERM once the process answers (its signal handlers are in place), and a clean exit.
fn stop_cleanly(serve: Serve) {
    until_blocking(Duration::from_secs(10), || {
        try_http(serve.admin, "/healthz", "").ok().map(drop)
    })
    .expect("the admin listener answers");
    let stderr = serve.stderr.clone();
    let status = serve.terminate();
    assert!(
        status.success(),
        "{status}: {}",
        std::fs::read_to_string(stderr).unwrap_or_default()
    );
}

/// Rewrites `lines` from `from` on with `edit`, and chains them again with plain SHA-256
/// (what anyone who can write the file can do: the chain has no key).
fn rewrite_and_rechain(lines: &mut [String], from: usize, edit: impl Fn(&str) -> String) {
    for i in from..lines.len() {
        let mut v: serde_json::Value = serde_json::from_str(&edit(&lines[i])).expect("json");
        if i > 0 {
            let prev = psp_cert::hex::lower(&psp_cert::hex::sha256(lines[i - 1].as_bytes()));
            v["prev"] = prev.into();
        }
        // Keep `seq` and `prev` first, as the writer does.
        let mut out = format!("{{\"seq\":{},\"prev\":{}", v["seq"], v["prev"]);
        for (k, val) in v.as_object().expect("object") {
            if k != "seq" && k != "prev" {
                out.push_str(&format!(",{}:{}", serde_json::Value::from(k.as_str()), val));
            }
        }
        out.push('}');
        lines[i] = out;
    }
}

fn write_lines(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(path, text).expect("write the log");
}

fn verify_with_checkpoints(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "verify".to_owned(),
        dir.join("audit.jsonl").display().to_string(),
        "--checkpoints".to_owned(),
        dir.join("checkpoints").display().to_string(),
        "--key".to_owned(),
        dir.join("jwks.json").display().to_string(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    audit(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn refusals_rewritten_as_permits_after_a_crash_never_become_signed_history() {
    for also_the_mark in [false, true] {
        let dir = scratch(&format!("rechained-{also_the_mark}"));
        let (file, cp) = (dir.join("audit.jsonl"), dir.join("checkpoints"));
        let section = rare_checkpoints(&file, &cp, None);
        let (covered, _) = three_refusals_then_sigkill(&dir, &section);

        // The attacker: refuse → permit in the records no checkpoint covers, re-chained.
        let mut lines: Vec<String> = std::fs::read_to_string(&file)
            .expect("read")
            .lines()
            .map(str::to_owned)
            .collect();
        rewrite_and_rechain(&mut lines, covered, |l| {
            l.replace("\"not_expired\":false", "\"not_expired\":true")
        });
        write_lines(&file, &lines);
        let forged: String = lines[covered..].iter().map(|l| format!("{l}\n")).collect();
        if also_the_mark {
            // …and the high-water mark beside the checkpoints, made to name the forgery.
            let mark = cp.with_file_name("checkpoints.synced");
            let mut m: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&mark).expect("the mark")).expect("json");
            m["chain_head"] = psp_cert::hex::lower(&psp_cert::hex::sha256(
                lines.last().expect("a line").as_bytes(),
            ))
            .into();
            std::fs::write(&mark, m.to_string()).expect("write the mark");
        }

        stop_cleanly(serve(&dir, &section, "third"));

        // No record of the main log says what the attacker wrote: the records after the
        // checkpoint were moved aside as found, and the restart's record names them.
        let recs = records(&file);
        assert!(
            recs.iter().all(|r| r["not_expired"] != true),
            "a forged permit became part of the log"
        );
        let opened = &recs[covered];
        assert_eq!(opened["message"], "audit_log_opened", "{opened}");
        assert_eq!(
            opened["set_aside_first_seq"],
            covered as u64 + 1,
            "{opened}"
        );
        assert_eq!(opened["set_aside_last_seq"], covered as u64 + 3, "{opened}");
        let aside = opened["set_aside_file"].as_str().expect("set aside");
        assert_eq!(std::fs::read_to_string(aside).expect("read"), forged);
        assert_eq!(
            opened["set_aside_sha256"],
            psp_cert::hex::lower(&psp_cert::hex::sha256(forged.as_bytes())),
            "{opened}"
        );
        let v = verify_with_checkpoints(&dir, &[]);
        let said = show(&v);
        assert!(
            said.contains("no signature covers them in their true form"),
            "{said}"
        );
        if also_the_mark {
            // A mark rewritten with the records: only "set aside, unsigned" can be said.
            assert_eq!(v.status.code(), Some(0), "{said}");
        } else {
            // The mark kept apart names the record as synced: the rewrite shows.
            assert_eq!(opened["synced_record_matches"], false, "{opened}");
            assert_eq!(v.status.code(), Some(65), "{said}");
            assert!(
                said.contains("records were rewritten after they were synced"),
                "{said}"
            );
            let accepted = verify_with_checkpoints(&dir, &["--accept-losses"]);
            assert_eq!(accepted.status.code(), Some(0), "{}", show(&accepted));
        }
    }
}

#[test]
fn answered_records_cut_after_a_crash_are_named_missing_and_verify_fails() {
    for main_mark_removed in [false, true] {
        let dir = scratch(&format!("cut-{main_mark_removed}"));
        let (file, cp) = (dir.join("audit.jsonl"), dir.join("checkpoints"));
        let copy_dir = dir.join("other-volume");
        let copy = copy_dir.join("checkpoints");
        let section = rare_checkpoints(&file, &cp, Some(&copy));
        let (covered, held) = three_refusals_then_sigkill(&dir, &section);

        // Cut back exactly to the last checkpoint: the three answered refusals are gone.
        let lines: Vec<String> = std::fs::read_to_string(&file)
            .expect("read")
            .lines()
            .map(str::to_owned)
            .collect();
        write_lines(&file, &lines[..covered]);
        if main_mark_removed {
            // The mark beside the checkpoints goes with the cut; the copy's stays.
            std::fs::remove_file(cp.with_file_name("checkpoints.synced")).expect("remove");
        }

        stop_cleanly(serve(&dir, &section, "third"));
        let recs = records(&file);
        let opened = &recs[covered];
        assert_eq!(opened["message"], "audit_log_opened", "{opened}");
        assert_eq!(opened["found_last_seq"], covered as u64, "{opened}");
        assert_eq!(opened["synced_seq"], held as u64, "{opened}");
        assert_eq!(opened["missing_first_seq"], covered as u64 + 1, "{opened}");
        assert_eq!(opened["missing_last_seq"], held as u64, "{opened}");
        let v = verify_with_checkpoints(&dir, &[]);
        assert_eq!(v.status.code(), Some(65), "{}", show(&v));
        assert!(
            show(&v).contains(&format!(
                "records {} to {held} were synced to disk before the stop and are not in the file",
                covered + 1
            )),
            "{}",
            show(&v)
        );
    }
}

#[test]
fn a_full_checkpoint_copy_is_counted_shown_by_readiness_and_caught_up_without_rewriting_the_file() {
    let dir = scratch("copy-full");
    let mnt = Tmpfs::mount(&dir.join("mnt"), "64k");
    let (file, cp) = (dir.join("audit.jsonl"), dir.join("checkpoints"));
    let copy = mnt.dir.join("checkpoints");
    let filler = mnt.dir.join("filler");
    fill(&filler);
    let mut section = rare_checkpoints(&file, &cp, Some(&copy));
    section = section.replace("checkpoint_seconds = 3600", "checkpoint_seconds = 1");
    let serve = serve(&dir, &section, "s");
    let valid = eidas("valid");
    for _ in 0..4 {
        let c = try_check(serve.api, &valid).expect("check");
        assert_eq!(c.status, 200, "{}", c.body);
    }
    // A checkpoint is due a second after the records; the copy cannot take it.
    until_blocking(Duration::from_secs(10), || {
        (metric(serve.admin, "psp_gateway_audit_checkpoint_copy_failing") == 1.0).then_some(())
    })
    .unwrap_or_else(|| panic!("the copy's failure is not shown:\n{}", serve.stderr()));
    std::thread::sleep(Duration::from_secs(2));
    // One checkpoint over the records, not one per tick.
    let sizes = checkpoint_sizes(&cp);
    let mut distinct = sizes.clone();
    distinct.dedup();
    assert_eq!(sizes, distinct, "a checkpoint written again: {sizes:?}");
    assert!(sizes.len() <= 3, "{sizes:?}");
    assert!(
        metric(
            serve.admin,
            "psp_gateway_audit_checkpoint_copy_failures_total"
        ) >= 1.0
    );
    let ready = get(serve.admin, "/readyz");
    assert_eq!(ready.status, 503, "{}", ready.body);
    assert!(
        ready.body.contains("checkpoint_copy cannot be written"),
        "{}",
        ready.body
    );

    // Room again: the copy is caught up from the checkpoint file, which is not written again.
    std::fs::remove_file(&filler).expect("remove filler");
    until_blocking(Duration::from_secs(10), || {
        (metric(serve.admin, "psp_gateway_audit_checkpoint_copy_failing") == 0.0).then_some(())
    })
    .unwrap_or_else(|| panic!("the copy did not catch up:\n{}", serve.stderr()));
    assert_eq!(checkpoint_sizes(&cp), sizes);
    assert_eq!(
        std::fs::read_to_string(&copy).expect("copy"),
        std::fs::read_to_string(&cp).expect("file"),
        "the copy holds every checkpoint, in order"
    );
    assert_eq!(get(serve.admin, "/readyz").status, 200);
    assert!(serve.terminate().success());
}

#[test]
fn a_certificate_no_approved_issuer_signed_is_recorded_as_claiming_a_number_not_as_the_psp() {
    let dir = scratch("claimed");
    let file = dir.join("audit.jsonl");
    let serve = serve(&dir, &audit_section(&file, "fail_closed", None), "s");
    for name in ["untrusted", "valid", "expired"] {
        let c = try_check(serve.api, &eidas(name)).expect("check");
        assert_eq!(c.status, 200, "{name}: {}", c.body);
    }
    stop_cleanly(serve);
    let checks: Vec<_> = records(&file)
        .into_iter()
        .filter(|r| r["message"] == "check")
        .collect();
    assert_eq!(checks.len(), 3);
    // An issuer not on the trust list: the number is only claimed (anyone can make such a
    // certificate with a real PSP's number), never attributed to that PSP.
    assert_eq!(checks[0]["auth_number"], "", "{}", checks[0]);
    assert!(
        checks[0]["claimed_auth_number"]
            .as_str()
            .is_some_and(|n| n.starts_with("PSD")),
        "{}",
        checks[0]
    );
    // An approved issuer's signature attests the number, expired or not.
    for r in &checks[1..] {
        assert!(
            r["auth_number"]
                .as_str()
                .is_some_and(|n| n.starts_with("PSD")),
            "{r}"
        );
        assert!(r.get("claimed_auth_number").is_none(), "{r}");
    }
}

#[test]
fn b3_a_copy_volume_that_fills_after_the_start_stays_shown_as_failing_while_its_mark_cannot_be_written()
 {
    let dir = scratch("copy-fills");
    let mnt = Tmpfs::mount(&dir.join("mnt"), "64k");
    let (file, cp) = (dir.join("audit.jsonl"), dir.join("checkpoints"));
    let copy = mnt.dir.join("checkpoints");
    let section = rare_checkpoints(&file, &cp, Some(&copy))
        .replace("checkpoint_seconds = 3600", "checkpoint_seconds = 1");
    let serve = serve(&dir, &section, "s");
    let valid = eidas("valid");
    let check = || {
        let c = try_check(serve.api, &valid).expect("check");
        assert_eq!(c.status, 200, "{}", c.body);
    };
    check();
    // The copy and its mark written while there is room.
    until_blocking(Duration::from_secs(10), || {
        (!checkpoint_sizes(&copy).is_empty()).then_some(())
    })
    .unwrap_or_else(|| panic!("no checkpoint in the copy:\n{}", serve.stderr()));
    fill(&mnt.dir.join("filler"));
    // A checkpoint line may still fit in the copy's last page; its mark (a new file) cannot.
    for _ in 0..3 {
        check();
        std::thread::sleep(Duration::from_millis(1200));
        assert_eq!(
            metric(serve.admin, "psp_gateway_audit_checkpoint_copy_failing"),
            1.0,
            "{}",
            serve.stderr()
        );
        assert_eq!(get(serve.admin, "/readyz").status, 503);
    }
    std::fs::remove_file(mnt.dir.join("filler")).expect("remove");
    until_blocking(Duration::from_secs(10), || {
        (metric(serve.admin, "psp_gateway_audit_checkpoint_copy_failing") == 0.0).then_some(())
    })
    .unwrap_or_else(|| panic!("the copy did not recover:\n{}", serve.stderr()));
    stop_cleanly(serve);
    let main_mark = std::fs::read_to_string(dir.join("checkpoints.synced")).expect("mark");
    let copy_mark = std::fs::read_to_string(mnt.dir.join("checkpoints.synced")).expect("mark");
    assert_eq!(main_mark, copy_mark, "the copy's mark caught up");
}

#[test]
fn b4_audit_repair_changes_nothing_it_refuses_and_never_follows_a_symbolic_link() {
    let dir = scratch("repair");
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "line one\nline two\n").expect("write");
    let link = dir.join("audit.jsonl");
    std::os::unix::fs::symlink(&victim, &link).expect("symlink");
    let o = audit(&["repair", link.to_str().expect("path")]);
    assert_eq!(o.status.code(), Some(65), "{}", show(&o));
    assert!(show(&o).contains("not a regular file"), "{}", show(&o));
    assert_eq!(
        std::fs::read_to_string(&victim).expect("read"),
        "line one\nline two\n"
    );
    // A file whose end is no audit record: refused as it is, not cut.
    let not_a_log = dir.join("not-a-log.jsonl");
    std::fs::write(&not_a_log, "line one\nline two\n").expect("write");
    let o = audit(&["repair", not_a_log.to_str().expect("path")]);
    assert_eq!(o.status.code(), Some(65), "{}", show(&o));
    assert!(show(&o).contains("nothing was changed"), "{}", show(&o));
    assert_eq!(
        std::fs::read_to_string(&not_a_log).expect("read"),
        "line one\nline two\n"
    );
    // A log whose last line is longer than the window read back: refused, not cut.
    let long = dir.join("long.jsonl");
    let log = psp_service::telemetry::audit::AuditLog::open(&long).expect("open");
    let mut m = serde_json::Map::new();
    m.insert("message".into(), "check".into());
    log.append(m).expect("append");
    drop(log);
    let mut bytes = std::fs::read(&long).expect("read");
    bytes.extend(std::iter::repeat_n(b'x', 5 << 20));
    std::fs::write(&long, &bytes).expect("write");
    let o = audit(&["repair", long.to_str().expect("path")]);
    assert_eq!(o.status.code(), Some(65), "{}", show(&o));
    assert_eq!(
        std::fs::read(&long).expect("read").len(),
        bytes.len(),
        "not cut"
    );
    assert!(
        std::fs::read_dir(&dir)
            .expect("dir")
            .filter_map(Result::ok)
            .all(|e| !e.file_name().to_string_lossy().contains(".torn-")),
        "nothing set aside"
    );
}
