//! `serve` reloads when a file its configuration names changes, without a signal: a register
//! file replaced the way deployments do it (written aside, renamed over) is picked up.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::test_pki::new_server_certificate;
use common::{one_site_sandbox_toml, root};

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
    let r = root().display().to_string();
    let text = one_site_sandbox_toml()
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
        .replace("127.0.0.1:8080", "127.0.0.1:0")
        .replace("127.0.0.1:8443", "127.0.0.1:0")
        .replace("127.0.0.1:9090", "127.0.0.1:0");
    let config = dir.join("gateway.toml");
    std::fs::write(&config, text).expect("write config");
    let stderr = dir.join("serve.stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(["serve", "--config", config.to_str().expect("path")])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).expect("stderr file"))
        .spawn()
        .expect("serve starts");
    // The port serve bound, from its log (no port chosen free beforehand).
    let admin = common::logged_listener(&stderr, "admin listener listening");
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
    // Kept: a file that must NOT cause a reload gives no event to wait for; serve is another
    // process, so the debounced watcher is given a bounded 2 s to misbehave.
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

/// A `serve` started as the README starts it: in a directory holding `gateway.toml`, its
/// `certs/` and `registers/`, with the relative `--config gateway.toml`.
struct Relative {
    child: std::process::Child,
    dir: std::path::PathBuf,
    admin: SocketAddr,
    gateway: SocketAddr,
}

impl Drop for Relative {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Waits, up to a bounded deadline, for `what` to hold; false when it never did.
fn eventually(deadline: Duration, mut what: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + deadline;
    loop {
        if what() {
            return true;
        }
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn serve_relative(name: &str) -> Relative {
    serve_relative_with(name, &one_site_sandbox_toml())
}

/// [`serve_relative`] with the configuration `toml` (before its ports are made ephemeral).
fn serve_relative_with(name: &str, toml: &str) -> Relative {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("reload_watch_{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    copy_tree(&root().join("certs"), &dir.join("certs"));
    copy_tree(
        &root().join("registers/sandbox"),
        &dir.join("registers/sandbox"),
    );
    let text = toml
        .replace("127.0.0.1:8080", "127.0.0.1:0")
        .replace("127.0.0.1:8443", "127.0.0.1:0")
        .replace("127.0.0.1:9090", "127.0.0.1:0");
    std::fs::write(dir.join("gateway.toml"), text).expect("write config");
    let stderr = dir.join("serve.stderr");
    let child = Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(["serve", "--config", "gateway.toml"])
        .current_dir(&dir)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).expect("stderr file"))
        .spawn()
        .expect("serve starts");
    // The ports serve bound, from its log (no port chosen free beforehand).
    let admin = common::logged_listener(&stderr, "admin listener listening");
    let gateway = common::logged_listener(&stderr, "gateway listening");
    let serve = Relative {
        child,
        dir,
        admin,
        gateway,
    };
    // serve watches before it listens: once it answers, a change is seen.
    assert!(
        eventually(Duration::from_secs(30), || generation(&serve).is_some()),
        "serve did not answer: {}",
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );
    assert_eq!(generation(&serve), Some(1), "serve is up with generation 1");
    serve
}

fn generation(serve: &Relative) -> Option<u64> {
    readyz(serve.admin)?["generation"].as_u64()
}

/// Replaces `path` the way deployments do: written aside, renamed over.
fn replace_file(path: &std::path::Path, contents: &[u8]) {
    let mut staged = path.as_os_str().to_owned();
    staged.push(".new");
    std::fs::write(&staged, contents).expect("write");
    std::fs::rename(&staged, path).expect("rename");
}

/// Bounded: a watch that misses the change fails the test within 20 s.
fn assert_reloaded(serve: &Relative, what: &str) {
    let reloaded = eventually(Duration::from_secs(20), || generation(serve) == Some(2));
    assert!(
        reloaded,
        "{what}: the change was not picked up without a signal (generation {:?}); serve said: {}",
        generation(serve),
        std::fs::read_to_string(serve.dir.join("serve.stderr")).unwrap_or_default()
    );
}

#[test]
fn a_changed_configuration_is_reloaded_when_config_is_a_relative_path() {
    let serve = serve_relative("config");
    let path = serve.dir.join("gateway.toml");
    let mut text = std::fs::read(&path).expect("read");
    text.extend_from_slice(b"\n# changed\n");
    replace_file(&path, &text);
    assert_reloaded(&serve, "gateway.toml");
}

#[test]
fn a_replaced_register_file_named_relatively_is_reloaded() {
    let serve = serve_relative("register");
    let path = serve.dir.join("registers/sandbox/XX.json");
    let text = std::fs::read_to_string(&path).expect("read");
    replace_file(
        &path,
        text.replacen("Sandbox Valid PSP", "Sandbox Valid PSP Ltd", 1)
            .as_bytes(),
    );
    assert_reloaded(&serve, "registers/sandbox/XX.json");
}

#[test]
fn a_replaced_trust_file_named_relatively_is_reloaded() {
    let serve = serve_relative("trust");
    let path = serve.dir.join("certs/ca/qtsp-issuing.pem");
    let pem = std::fs::read(&path).expect("read");
    replace_file(&path, &pem);
    assert_reloaded(&serve, "certs/ca/qtsp-issuing.pem");
}

/// The certificate the gateway presents to a new TLS handshake (no client certificate: the
/// gateway only requests one).
fn presented_certificate(serve: &Relative) -> Option<Vec<u8>> {
    use rustls::pki_types::pem::PemObject;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(serve.dir.join("certs/server/ca.pem"))
        .expect("server CA")
    {
        roots.add(c.expect("server CA")).expect("add root");
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let mut conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).ok()?;
    let mut tcp = TcpStream::connect(serve.gateway).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).ok()?;
    }
    Some(conn.peer_certificates()?.first()?.to_vec())
}

#[test]
fn a_rotated_tls_certificate_and_key_are_presented_to_new_handshakes_without_a_restart() {
    use rustls::pki_types::pem::PemObject;
    let serve = serve_relative("tls");
    let before = presented_certificate(&serve).expect("a handshake before the rotation");
    let (cert, key) = new_server_certificate(&serve.dir.join("certs"));
    let expected = rustls::pki_types::CertificateDer::from_pem_slice(cert.as_bytes())
        .expect("new certificate")
        .to_vec();
    assert_ne!(before, expected);
    // As a certificate manager rotates them: the key, then the certificate.
    replace_file(&serve.dir.join("certs/server/key.pem"), key.as_bytes());
    replace_file(&serve.dir.join("certs/server/cert.pem"), cert.as_bytes());
    let mut last = None;
    let rotated = eventually(Duration::from_secs(20), || {
        last = presented_certificate(&serve);
        last.as_deref() == Some(&expected[..])
    });
    assert!(
        rotated,
        "new handshakes still get the old certificate (it changed: {}); serve said: {}",
        last.as_deref() != Some(&before[..]),
        std::fs::read_to_string(serve.dir.join("serve.stderr")).unwrap_or_default()
    );
    assert!(generation(&serve).is_some_and(|g| g >= 2));
}

/// With `[[sites]]` (the repository's gateway.toml: two sites on one listener, each with its
/// own certificate), a site's rotated certificate and key are watched and presented too.
#[test]
fn a_rotated_site_certificate_is_presented_without_a_restart_with_two_sites() {
    use rustls::pki_types::pem::PemObject;
    let toml = std::fs::read_to_string(root().join("gateway.toml")).expect("gateway.toml");
    assert!(
        toml.contains("[[sites]]"),
        "the repository's gateway.toml has sites"
    );
    let serve = serve_relative_with("sites-tls", &toml);
    // `localhost` is one of site xx's server names.
    let before = presented_certificate(&serve).expect("a handshake before the rotation");
    let (cert, key) = new_server_certificate(&serve.dir.join("certs"));
    let expected = rustls::pki_types::CertificateDer::from_pem_slice(cert.as_bytes())
        .expect("new certificate")
        .to_vec();
    assert_ne!(before, expected);
    replace_file(
        &serve.dir.join("certs/server/xx.localhost.key"),
        key.as_bytes(),
    );
    replace_file(
        &serve.dir.join("certs/server/xx.localhost.pem"),
        cert.as_bytes(),
    );
    let mut last = None;
    let rotated = eventually(Duration::from_secs(20), || {
        last = presented_certificate(&serve);
        last.as_deref() == Some(&expected[..])
    });
    assert!(
        rotated,
        "new handshakes still get site xx's old certificate; serve said: {}",
        std::fs::read_to_string(serve.dir.join("serve.stderr")).unwrap_or_default()
    );
}
