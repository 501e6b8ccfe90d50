//! A sandbox PKI generated for the test run, whose CRL and OCSP URLs point at a sandbox
//! responder on an ephemeral loopback port (the committed `certs/` point at 127.0.0.1:9090,
//! which a test must not depend on). Generated once per test binary; the responder runs on a
//! thread of its own for the life of the process.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use psp_gateway::Config;
use psp_sandbox::{SandboxResponder, generate_with_base_url};
use psp_server::{self as server, Handler, Limits, full};
use time::OffsetDateTime;

use super::root;

pub struct TestPki {
    /// The generated `certs/` equivalent.
    pub dir: PathBuf,
    /// The responder's address.
    pub responder: SocketAddr,
}

impl TestPki {
    pub fn psp(&self, name: &str) -> PathBuf {
        self.dir.join(format!("psp/{name}.pem"))
    }
}

/// The PKI of this test binary.
pub fn test_pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind responder");
        let addr = listener.local_addr().expect("addr");
        let dir = std::env::temp_dir().join(format!("psp-gateway-test-pki-{}", std::process::id()));
        generate_with_base_url(&dir, &format!("http://{addr}/sandbox"))
            .expect("generate the test PKI");
        let responder = SandboxResponder::load(&dir).expect("load the responder");
        listener.set_nonblocking(true).expect("nonblocking");
        std::thread::spawn(move || serve_responder(listener, responder));
        TestPki {
            dir,
            responder: addr,
        }
    })
}

/// Serves `responder` on `listener` for the life of the process (its own thread and runtime);
/// the responder can be swapped through the returned handle.
pub fn serve_swappable(
    listener: std::net::TcpListener,
    responder: SandboxResponder,
) -> Arc<std::sync::RwLock<Arc<SandboxResponder>>> {
    let slot = Arc::new(std::sync::RwLock::new(Arc::new(responder)));
    let shared = slot.clone();
    listener.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || run_responder(listener, shared));
    slot
}

fn serve_responder(listener: std::net::TcpListener, responder: SandboxResponder) {
    run_responder(
        listener,
        Arc::new(std::sync::RwLock::new(Arc::new(responder))),
    );
}

fn run_responder(
    listener: std::net::TcpListener,
    slot: Arc<std::sync::RwLock<Arc<SandboxResponder>>>,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
        let handler: Handler = Arc::new(move |req, _conn| {
            let responder = slot.read().expect("responder lock").clone();
            Box::pin(async move {
                use http_body_util::BodyExt;
                let (parts, body) = req.into_parts();
                let body = body
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                match responder.respond(
                    &parts.method,
                    parts.uri.path(),
                    &body,
                    OffsetDateTime::now_utc(),
                ) {
                    Some((status, content_type, bytes)) => {
                        let mut r = http::Response::new(full(bytes));
                        *r.status_mut() = status;
                        r.headers_mut().insert(
                            http::header::CONTENT_TYPE,
                            http::HeaderValue::from_static(content_type),
                        );
                        r
                    }
                    None => {
                        let mut r = http::Response::new(full("not found"));
                        *r.status_mut() = http::StatusCode::NOT_FOUND;
                        r
                    }
                }
            })
        });
        let (_stop, stop_rx) = tokio::sync::watch::channel(false);
        server::serve_with_link_base(
            listener,
            None,
            Limits::default(),
            "/docs/errors#".into(),
            handler,
            stop_rx,
        )
        .await;
    });
}

/// The repository's gateway.toml on the test PKI, every listener on an ephemeral loopback
/// port, then `edit` applied to the text.
pub fn test_config(edit: impl FnOnce(String) -> String) -> Config {
    config_for(&test_pki().dir, edit)
}

/// The repository's gateway.toml as it is (its two sites `xx` and `xy` on one listener) on
/// the test PKI, every listener on an ephemeral loopback port, then `edit` applied.
pub fn two_site_config(edit: impl FnOnce(String) -> String) -> Config {
    let text = std::fs::read_to_string(root().join("gateway.toml")).expect("gateway.toml");
    on_pki(text, &test_pki().dir, edit)
}

/// The repository's gateway.toml on the PKI in `dir`, every listener on an ephemeral
/// loopback port, then `edit` applied to the text.
pub fn config_for(dir: &Path, edit: impl FnOnce(String) -> String) -> Config {
    on_pki(super::one_site_sandbox_toml(), dir, edit)
}

/// `text` on the PKI in `dir`, every listener on an ephemeral loopback port, then `edit`.
fn on_pki(text: String, dir: &Path, edit: impl FnOnce(String) -> String) -> Config {
    let dir = dir.display().to_string();
    let text = text
        .replace("\"certs/", &format!("\"{dir}/"))
        .replace(
            "enabled = true",
            &format!("enabled = true\ncerts = \"{dir}\""),
        )
        .replace("127.0.0.1:8080", "127.0.0.1:0")
        .replace("127.0.0.1:8443", "127.0.0.1:0")
        .replace("127.0.0.1:9090", "127.0.0.1:0");
    let text = edit(text);
    Config::from_toml(&text, Path::new("gateway.toml"), root()).expect("test configuration")
}

#[allow(unused_imports)] // the reload tests use it
pub use psp_testkit::pki::new_server_certificate;

/// The repository's sandbox configuration as a file in `dir`: certificates from `certs`,
/// every other path absolute, every listener on an ephemeral loopback port, then `edit`.
pub fn config_file(dir: &Path, certs: &Path, edit: impl FnOnce(String) -> String) -> PathBuf {
    let (certs, r) = (certs.display().to_string(), root().display().to_string());
    let text = super::one_site_sandbox_toml()
        .replace("\"certs/", &format!("\"{certs}/"))
        .replace("\"registers/", &format!("\"{r}/registers/"))
        .replace(
            "enabled = true",
            &format!("enabled = true\ncerts = \"{certs}\""),
        )
        .replace("127.0.0.1:8080", "127.0.0.1:0")
        .replace("127.0.0.1:8443", "127.0.0.1:0")
        .replace("127.0.0.1:9090", "127.0.0.1:0");
    let path = dir.join("gateway.toml");
    std::fs::write(&path, edit(text)).expect("write config");
    path
}
