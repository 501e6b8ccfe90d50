//! Real nginx (Debian `nginx-light`) and real Caddy (Debian `caddy`), both installed by
//! scripts/test, in front of psp-gateway's forward-auth listener: their configurations are
//! generated from the examples in deploy/nginx/ and deploy/caddy/ (every replacement must find
//! what it replaces, so an edited example cannot leave the copy behind), with the test PKI's
//! server certificates, each on 127.0.0.1 ports. A TLS client calls them as a PSP.
//!
//! Every wait is bounded; each proxy process is killed when its guard is dropped.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;

use super::root;
use super::test_pki::test_pki;
use super::tls_client::{self, Proto};

/// Time limit of one call through a proxy (TLS handshake, the check, the API, the answer).
pub const CALL_LIMIT: Duration = Duration::from_secs(30);

/// One site of the two-site sandbox as the proxies serve it: its server names (the first is
/// the one the tests connect to) and the test PKI's server certificate for it.
#[derive(Debug, Clone, Copy)]
pub struct Site {
    pub names: &'static [&'static str],
    pub certificate: &'static str,
}

/// The sandbox's two sites (gateway.toml): `xx` (xx.localhost, localhost) and `xy`.
pub const SITES: [Site; 2] = [
    Site {
        names: &["xx.localhost", "localhost"],
        certificate: "xx.localhost",
    },
    Site {
        names: &["xy.localhost"],
        certificate: "xy.localhost",
    },
];

/// One port a proxy listens on (TLS, every site of [`SITES`]), and the forward-auth listener
/// it asks there.
#[derive(Debug, Clone, Copy)]
pub struct Door {
    pub port: u16,
    /// psp-gateway's forward-auth listener.
    pub check: SocketAddr,
    /// nginx only: the local address its connections to the check come from
    /// (`proxy_bind`). psp-gateway tells its callers apart by address, and Caddy 2.6 cannot
    /// choose its own (no `local_address`), so nginx is given another loopback address.
    pub bind: Option<IpAddr>,
}

/// A running proxy, killed (and reaped) when dropped.
pub struct Proxy {
    pub name: &'static str,
    pub dir: PathBuf,
    child: Child,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proxy {
    /// What the proxy wrote to its logs so far, for failure messages.
    pub fn logs(&self) -> String {
        let mut all = String::new();
        for file in ["stdout.log", "stderr.log", "error.log"] {
            if let Ok(text) = std::fs::read_to_string(self.dir.join(file)) {
                let _ = writeln!(all, "--- {} {file}\n{text}", self.name);
            }
        }
        all
    }
}

/// A port free on 127.0.0.1 now, for a proxy to listen on (the proxies cannot be told to
/// choose one and report it). Taken below Linux's ephemeral range (32768-60999), so that no
/// outgoing connection can take it between now and the proxy's bind (a port the kernel hands
/// out, as `127.0.0.1:0` does, can: Caddy once found its port in use), and distinct for every
/// call in this process.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    // Test binaries run one at a time; the process id spreads them anyway.
    let base = 20_000 + (std::process::id() % 1_000) as u16 * 12;
    for _ in 0..1_000 {
        let port = 20_000 + (base - 20_000 + NEXT.fetch_add(1, Ordering::Relaxed)) % 12_000;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port between 20000 and 31999 on 127.0.0.1")
}

/// A fresh directory for one proxy's configuration, logs and state.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("edge_proxies")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// `text` with each `from` replaced by its `to`; every `from` must be there.
fn replaced(text: &str, pairs: &[(&str, String)]) -> String {
    let mut text = text.to_owned();
    for (from, to) in pairs {
        assert!(text.contains(from), "the example no longer has {from:?}");
        text = text.replace(from, to);
    }
    text
}

/// The block that opens at the first `{` after `marker` in `text`, through its closing `}`
/// and the newline after it (nginx syntax: `#` comments to the end of the line are skipped).
fn block<'t>(text: &'t str, marker: &str) -> &'t str {
    let start = text
        .find(marker)
        .unwrap_or_else(|| panic!("the example no longer has {marker:?}"));
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    let end = text[i..].find('\n').map_or(text.len(), |n| i + n + 1);
                    return &text[start..end];
                }
            }
            _ => {}
        }
        i += 1;
    }
    panic!("{marker:?} opens a block that does not close");
}

fn pki_file(rel: &str) -> String {
    test_pki().dir.join(rel).display().to_string()
}

/// The nginx example (deploy/nginx/psp-gateway.conf) for `doors`, each serving every site of
/// [`SITES`] with its test PKI certificate and asking its `check`, the API being `api`.
pub fn nginx_config(dir: &Path, doors: &[Door], api: SocketAddr) -> String {
    let example = std::fs::read_to_string(root().join("deploy/nginx/psp-gateway.conf"))
        .expect("deploy/nginx/psp-gateway.conf");
    let d = dir.display();
    let text = replaced(
        &example,
        &[
            ("/run/nginx.pid", format!("{d}/nginx.pid")),
            ("/var/log/nginx/error.log", format!("{d}/error.log")),
            ("/var/log/nginx/access.log", format!("{d}/access.log")),
            (
                "http {\n",
                format!(
                    "http {{\n    client_body_temp_path {d}/body;\n    proxy_temp_path {d}/proxy;\n    \
                     fastcgi_temp_path {d}/fastcgi;\n    uwsgi_temp_path {d}/uwsgi;\n    \
                     scgi_temp_path {d}/scgi;\n"
                ),
            ),
            ("server 10.20.0.10:443;", format!("server {api};")),
            (
                "proxy_pass https://bank_psd2_api;",
                "proxy_pass http://bank_psd2_api;".to_owned(),
            ),
            // The bank's internal CA: the API is plain HTTP here, the directive stays valid.
            (
                "/etc/nginx/tls/bank-internal-ca.pem",
                pki_file("server/ca.pem"),
            ),
        ],
    );
    let check_upstream = block(&text, "upstream psp_gateway_forward_auth {").to_owned();
    let server = block(&text, "    server {\n").to_owned();
    let mut upstreams = String::new();
    let mut servers = String::new();
    for (i, door) in doors.iter().enumerate() {
        upstreams.push_str(&replaced(
            &check_upstream,
            &[
                (
                    "upstream psp_gateway_forward_auth {",
                    format!("upstream psp_gateway_forward_auth_{i} {{"),
                ),
                ("server 127.0.0.1:9292;", format!("server {};", door.check)),
            ],
        ));
        for site in SITES {
            let mut check = format!("proxy_pass http://psp_gateway_forward_auth_{i};");
            if let Some(bind) = door.bind {
                let _ = write!(check, "\n            proxy_bind {bind};");
            }
            servers.push_str(&replaced(
                &server,
                &[
                    (
                        "listen 443 ssl http2;",
                        format!("listen 127.0.0.1:{} ssl;", door.port),
                    ),
                    (
                        "server_name api.bank.nl;",
                        format!("server_name {};", site.names.join(" ")),
                    ),
                    (
                        "/etc/nginx/tls/api.bank.nl.crt",
                        pki_file(&format!("server/{}.pem", site.certificate)),
                    ),
                    (
                        "/etc/nginx/tls/api.bank.nl.key",
                        pki_file(&format!("server/{}.key", site.certificate)),
                    ),
                    ("proxy_pass http://psp_gateway_forward_auth;", check),
                ],
            ));
        }
    }
    let text = text.replace(&check_upstream, &upstreams);
    text.replace(&server, &servers)
}

/// The Caddy example (deploy/caddy/Caddyfile) for `doors`, each serving every site of
/// [`SITES`] with its test PKI certificate and asking its `check`, the API being `api`.
pub fn caddy_config(doors: &[Door], api: SocketAddr) -> String {
    let example = std::fs::read_to_string(root().join("deploy/caddy/Caddyfile"))
        .expect("deploy/caddy/Caddyfile");
    let global = "{\n\t# The site's own certificate comes from files (below), not ACME.\n\tauto_https disable_certs\n}\n";
    let start = example
        .find(global)
        .unwrap_or_else(|| panic!("the Caddyfile no longer has its global options {global:?}"));
    let site = example[start + global.len()..].trim_start_matches('\n');
    assert!(site.starts_with("api.bank.nl {"), "{site}");
    // No admin endpoint and no port 80 redirect server for the test's instance.
    let mut text = "{\n\tadmin off\n\tauto_https off\n}\n".to_owned();
    for door in doors {
        for s in SITES {
            let addresses: Vec<String> = s
                .names
                .iter()
                .map(|n| format!("https://{n}:{}", door.port))
                .collect();
            text.push('\n');
            text.push_str(&replaced(
                site,
                &[
                    // On loopback only (Caddy binds every address otherwise).
                    (
                        "api.bank.nl {",
                        format!("{} {{\n\tbind 127.0.0.1", addresses.join(", ")),
                    ),
                    (
                        "/etc/caddy/tls/api.bank.nl.crt",
                        pki_file(&format!("server/{}.pem", s.certificate)),
                    ),
                    (
                        "/etc/caddy/tls/api.bank.nl.key",
                        pki_file(&format!("server/{}.key", s.certificate)),
                    ),
                    (
                        "forward_auth 127.0.0.1:9292 {",
                        format!("forward_auth {} {{", door.check),
                    ),
                    (
                        "reverse_proxy https://psd2-api.bank.internal {\n\t\t\ttransport http {\n\t\t\t\t\
                         tls_trusted_ca_certs /etc/caddy/tls/bank-internal-ca.pem\n\t\t\t}\n\t\t}",
                        format!("reverse_proxy {api}"),
                    ),
                ],
            ));
        }
    }
    text
}

/// nginx on `doors` (ports chosen by the caller), the API being `api`.
pub fn start_nginx(name: &str, doors: &[Door], api: SocketAddr) -> Proxy {
    let dir = scratch(name);
    let file = dir.join("nginx.conf");
    std::fs::write(&file, nginx_config(&dir, doors, api)).expect("write nginx.conf");
    let mut command = Command::new(if Path::new("/usr/sbin/nginx").exists() {
        "/usr/sbin/nginx"
    } else {
        "nginx"
    });
    command
        .arg("-c")
        .arg(&file)
        .arg("-p")
        .arg(&dir)
        .arg("-e")
        .arg(dir.join("error.log"))
        .args(["-g", "daemon off; master_process off;"]);
    spawn("nginx", command, dir, doors)
}

/// Caddy on `doors` (ports chosen by the caller), the API being `api`.
pub fn start_caddy(name: &str, doors: &[Door], api: SocketAddr) -> Proxy {
    let dir = scratch(name);
    let file = dir.join("Caddyfile");
    std::fs::write(&file, caddy_config(doors, api)).expect("write Caddyfile");
    let mut command = Command::new("caddy");
    command
        .args(["run", "--adapter", "caddyfile", "--config"])
        .arg(&file)
        .env("HOME", &dir)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("config"));
    spawn("caddy", command, dir, doors)
}

/// Starts `command` and waits (15 s at most) until every door's port accepts connections.
fn spawn(name: &'static str, mut command: Command, dir: PathBuf, doors: &[Door]) -> Proxy {
    let child = command
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("stdout.log")).expect("log"))
        .stderr(std::fs::File::create(dir.join("stderr.log")).expect("log"))
        .spawn()
        .unwrap_or_else(|e| panic!("{name} runs (scripts/test installs it): {e}"));
    let mut proxy = Proxy { name, dir, child };
    let deadline = Instant::now() + Duration::from_secs(15);
    for door in doors {
        while std::net::TcpStream::connect(("127.0.0.1", door.port)).is_err() {
            if let Ok(Some(status)) = proxy.child.try_wait() {
                panic!("{name} exited ({status}):\n{}", proxy.logs());
            }
            assert!(
                Instant::now() < deadline,
                "{name} did not listen on {} within 15 s:\n{}",
                door.port,
                proxy.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    proxy
}

/// What a client got.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    /// `response`, its body read whole.
    pub async fn read(response: http::Response<hyper::body::Incoming>) -> Reply {
        let status = response.status();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        Reply {
            status,
            headers,
            body,
        }
    }

    /// The status, headers and body, for a failed assertion's message.
    pub fn said(&self) -> String {
        format!("{} {:?} {}", self.status, self.headers, self.text())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A call as a PSP presenting `psp`'s test PKI certificate (or none): a new TLS connection to
/// `addr` asking for the server name `sni`, then `method path` in origin form with
/// `Host: host` and `headers` (each appended, so a name may repeat). Bounded by
/// [`CALL_LIMIT`].
pub async fn call(
    addr: SocketAddr,
    psp: Option<&str>,
    sni: &str,
    host: &str,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
) -> Reply {
    let config: Arc<rustls::ClientConfig> =
        tls_client::client_config(&test_pki().dir, psp, Proto::H1);
    let work = async {
        let tls = tls_client::connect_as(addr, config, sni)
            .await
            .unwrap_or_else(|e| panic!("TLS handshake with {addr} as {sni}: {e}"));
        let mut sender = tls_client::h1_on(tls).await;
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .body(tls_client::empty())
            .expect("request");
        req.headers_mut()
            .insert(http::header::HOST, host.parse().expect("host"));
        for (name, value) in headers {
            req.headers_mut().append(
                http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
                value.parse().expect("value"),
            );
        }
        Reply::read(sender.send_request(req).await.expect("an answer")).await
    };
    tokio::time::timeout(CALL_LIMIT, work)
        .await
        .unwrap_or_else(|_| panic!("no answer from {addr} ({sni} {path}) within {CALL_LIMIT:?}"))
}

/// A request written byte for byte (`head`, which should ask `Connection: close`) over a new
/// TLS connection as `psp` (or none) to `addr` for the server name `sni`: for targets an HTTP
/// client would not send as written (a `#` fragment). The status of the answer (0 when the
/// connection ended without one) and its text.
pub async fn call_raw(
    addr: SocketAddr,
    psp: Option<&str>,
    sni: &str,
    head: &[u8],
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let config: Arc<rustls::ClientConfig> =
        tls_client::client_config(&test_pki().dir, psp, Proto::H1);
    let work = async {
        let mut tls = tls_client::connect_as(addr, config, sni)
            .await
            .unwrap_or_else(|e| panic!("TLS handshake with {addr} as {sni}: {e}"));
        tls.write_all(head).await.expect("write");
        let mut answer = Vec::new();
        // A peer that closes without close_notify is an answer all the same.
        let _ = tls.read_to_end(&mut answer).await;
        let text = String::from_utf8_lossy(&answer).into_owned();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, text)
    };
    tokio::time::timeout(CALL_LIMIT, work)
        .await
        .unwrap_or_else(|_| panic!("no answer from {addr} ({sni}) within {CALL_LIMIT:?}"))
}

/// The `[forward_auth]` section: listening on 127.0.0.1:0, one caller per
/// `(kind, address block, certificate header)`.
pub fn forward_auth_section(callers: &[(&str, &str, &str)]) -> String {
    let mut text = "\n[forward_auth]\nlisten = \"127.0.0.1:0\"\n".to_owned();
    for (kind, addresses, header) in callers {
        let _ = write!(
            text,
            "\n[[forward_auth.callers]]\nkind = \"{kind}\"\naddresses = [\"{addresses}\"]\ncertificate_header = \"{header}\"\n"
        );
    }
    text
}

/// The certificate header nginx sends (deploy/nginx: `X-SSL-Client-Cert
/// $ssl_client_escaped_cert`) and Caddy's (deploy/caddy: `X-Client-Cert`).
pub const NGINX_CERTIFICATE_HEADER: &str = "x-ssl-client-cert";
pub const CADDY_CERTIFICATE_HEADER: &str = "x-client-cert";

/// The address nginx's checks come from ([`Door::bind`]); Caddy's come from 127.0.0.1.
pub const NGINX_CALLER: &str = "127.0.0.2";
