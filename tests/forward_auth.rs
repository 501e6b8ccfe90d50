//! The forward-auth face asked directly, by a Rust HTTP client sending what each proxy sends
//! (nginx `auth_request`, ingress-nginx `auth-url`, Traefik `ForwardAuth`, Caddy
//! `forward_auth`, Envoy's HTTP ext_authz), on the two-site sandbox (`xx`, `xy`) of the test
//! PKI. Then what a caller that is not one, a client hiding behind one, or a request the
//! built-in proxy would refuse gets: refused, never guessed.
//!
//! tests/forward_auth_proxies.rs puts real nginx and Caddy in front; tests/cross_face.rs
//! compares the decisions of every face.

mod common;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use common::edge_proxies::Reply;
use common::service;
use common::test_pki::{test_pki, two_site_config};
use http::{Request, StatusCode};
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use psp_gateway::app::Running;

/// Time limit of one question to the face.
const LIMIT: Duration = Duration::from_secs(30);

/// The two-site sandbox on the test PKI with `[forward_auth]` on 127.0.0.1:0 and `callers`
/// (TOML of `[[forward_auth.callers]]` tables).
async fn gateway(callers: &str) -> (Running, SocketAddr) {
    // The decisions' log lines are read by `refused`: captured from before the first request.
    logs();
    let config =
        two_site_config(|t| format!("{t}\n[forward_auth]\nlisten = \"127.0.0.1:0\"\n{callers}"));
    let running = tokio::time::timeout(LIMIT, service::start(config))
        .await
        .expect("the service starts within 30 s");
    let addr = running.forward_auth.expect("the forward-auth listener");
    (running, addr)
}

fn caller(kind: &str, addresses: &str, extra: &str) -> String {
    format!(
        "\n[[forward_auth.callers]]\nkind = \"{kind}\"\naddresses = [\"{addresses}\"]\n{extra}\n"
    )
}

/// Every log line of this test binary ([`common::log_capture::global`]).
fn logs() -> &'static common::log_capture::Captured {
    common::log_capture::global()
}

/// A refusal: the status the proxy gets, the built-in proxy's status and the refusal code.
/// The two last are not in the answer (a proxy could pass them on to the client): they are
/// read from the decision's access line, found by the answer's `x-request-id` (its check id),
/// or, for a question never decided, from the contract body's code.
fn refused(reply: &Reply) -> (StatusCode, Option<&'static str>, Option<&'static str>) {
    assert_eq!(reply.header("x-psp-status"), None, "{}", reply.said());
    assert_eq!(reply.header("x-psp-refusal"), None, "{}", reply.said());
    let leak = |s: &str| -> &'static str { Box::leak(s.to_owned().into_boxed_str()) };
    let check_id = reply.header("x-request-id").unwrap_or_default();
    let decided = logs()
        .lines("gateway request")
        .into_iter()
        .find(|line| line["fields"]["check_id"] == check_id);
    match decided {
        Some(line) => (
            reply.status,
            line["fields"]["status"]
                .as_u64()
                .map(|s| leak(&s.to_string())),
            line["fields"]["reason"].as_str().map(leak),
        ),
        None => (
            reply.status,
            None,
            reply.json()["errors"][0]["code"].as_str().map(leak),
        ),
    }
}

/// One question to the face at `fa`, from the local address `from`: `method target` and
/// `headers` exactly (each appended, so a name may repeat; no Host unless given).
async fn ask_from(
    fa: SocketAddr,
    from: IpAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> Reply {
    let work = async {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.bind(SocketAddr::new(from, 0)).expect("bind");
        let tcp = socket.connect(fa).await.expect("connect");
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        let mut req = Request::builder()
            .method(method)
            .uri(target)
            .body(Empty::<Bytes>::new())
            .expect("request");
        for (name, value) in headers {
            req.headers_mut().append(
                http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
                http::HeaderValue::from_str(value).expect("value"),
            );
        }
        Reply::read(sender.send_request(req).await.expect("an answer")).await
    };
    tokio::time::timeout(LIMIT, work)
        .await
        .unwrap_or_else(|_| panic!("no answer to {method} {target} within {LIMIT:?}"))
}

const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

async fn ask(fa: SocketAddr, headers: &[(&str, &str)]) -> Reply {
    ask_from(fa, LOOPBACK, "GET", "/_psp_check", headers).await
}

// --- the certificate as each proxy writes it ------------------------------------------------

fn der_of(pem_file: &std::path::Path) -> Vec<u8> {
    let pem = std::fs::read(pem_file).unwrap_or_else(|e| panic!("{}: {e}", pem_file.display()));
    psp_cert::cert::input::decode_certificate_input(&pem).expect("a certificate")
}

fn psp_der(psp: &str) -> Vec<u8> {
    der_of(&test_pki().psp(psp))
}

fn b64(der: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(der)
}

fn pem_of(der: &[u8]) -> String {
    let body = b64(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).expect("base64"));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

fn percent(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// nginx `$ssl_client_escaped_cert` (and ingress-nginx `ssl-client-cert`): URL-encoded PEM.
fn escaped_pem(psp: &str) -> String {
    percent(&pem_of(&psp_der(psp)))
}

/// Traefik's `X-Forwarded-Tls-Client-Cert` (2.9.4 and later): each certificate of the chain
/// the client presented, leaf first, as bare Base64 DER, joined with `,`.
fn traefik_chain(psp: &str) -> String {
    let issuer = der_of(&test_pki().dir.join("ca/qtsp-issuing.pem"));
    format!("{},{}", b64(&psp_der(psp)), b64(&issuer))
}

/// Caddy's `{http.request.tls.client.certificate_der_base64}`.
fn caddy_der(psp: &str) -> String {
    b64(&psp_der(psp))
}

const ENVOY: &str = "spiffe://bank.example/ns/edge/sa/envoy";

/// One XFCC element as Envoy writes it (`By`, `Hash`, `Cert` as URL-encoded PEM).
fn xfcc_element(by: &str, psp: &str) -> String {
    let der = psp_der(psp);
    let hash = ring::digest::digest(&ring::digest::SHA256, &der);
    let hex: String = hash.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("By={by};Hash={hex};Cert=\"{}\"", percent(&pem_of(&der)))
}

// --- each caller kind, as that proxy asks ---------------------------------------------------

const IDENTITY: [&str; 5] = [
    "x-psp-auth-number",
    "x-psp-name",
    "x-psp-services",
    "x-psp-certificate",
    "x-psp-check-id",
];

/// Exactly 200 (Envoy's HTTP mode and ingress-nginx let through on 200 only), an empty body,
/// every identity header, nothing of a refusal.
/// A GET of `/v1/accounts` for the XX site, from loopback, with one XFCC header.
async fn ask_xfcc(fa: SocketAddr, xfcc: &str) -> Reply {
    ask_from(
        fa,
        LOOPBACK,
        "GET",
        "/v1/accounts",
        &[("host", "xx.localhost"), ("x-forwarded-client-cert", xfcc)],
    )
    .await
}

/// Refused because the certificate cannot be read: 401, `certificate_unreadable`.
fn assert_unreadable(reply: &Reply) {
    assert_eq!(
        refused(reply),
        (
            StatusCode::UNAUTHORIZED,
            Some("401"),
            Some("certificate_unreadable")
        ),
        "{}",
        reply.said()
    );
}

fn assert_allowed(reply: &Reply, auth_number: &str) {
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.said());
    assert!(reply.body.is_empty(), "{}", reply.said());
    for name in IDENTITY {
        assert!(
            reply.header(name).is_some_and(|v| !v.is_empty()),
            "{name} missing: {}",
            reply.said()
        );
    }
    assert_eq!(reply.header("x-psp-auth-number"), Some(auth_number));
    assert_eq!(reply.header("x-psp-status"), None, "{}", reply.said());
    assert_eq!(reply.header("x-psp-refusal"), None, "{}", reply.said());
}

#[tokio::test]
async fn nginx_asks_with_x_original_method_uri_and_host_and_the_escaped_pem() {
    let (running, fa) = gateway(&caller(
        "nginx",
        "127.0.0.1/32",
        "certificate_header = \"x-ssl-client-cert\"",
    ))
    .await;
    let cert = escaped_pem("valid");
    // deploy/nginx: the check's own request line is /_psp_check; the original request is in
    // X-Original-Method and X-Original-URI ($request_uri, query included), the site in Host
    // ($host: no port).
    let reply = ask(
        fa,
        &[
            ("host", "xx.localhost"),
            ("x-original-method", "GET"),
            ("x-original-uri", "/v1/accounts?withBalance=true"),
            ("x-ssl-client-cert", &cert),
            ("x-forwarded-for", "198.51.100.7"),
        ],
    )
    .await;
    assert_allowed(&reply, "PSDXX-TEST-000001");
    assert_eq!(
        reply.header("x-psp-name"),
        Some("Sandbox%20Valid%20PSP"),
        "{}",
        reply.said()
    );
    let services = reply.header("x-psp-services").expect("services");
    assert!(
        services.split(',').any(|s| s == "8"),
        "account information: {services}"
    );
    // The certificate header for the API: the same certificate.
    let forwarded = reply.header("x-psp-certificate").expect("certificate");
    assert_eq!(
        psp_cert::cert::input::decode_certificate_input(forwarded.as_bytes())
            .expect("x-psp-certificate decodes"),
        psp_der("valid")
    );
    // Each answer has its own check id.
    let again = ask(
        fa,
        &[
            ("host", "xx.localhost"),
            ("x-original-method", "GET"),
            ("x-original-uri", "/v1/accounts"),
            ("x-ssl-client-cert", &cert),
        ],
    )
    .await;
    assert_allowed(&again, "PSDXX-TEST-000001");
    assert_ne!(
        again.header("x-psp-check-id"),
        reply.header("x-psp-check-id")
    );
    // nginx sends no certificate header without a client certificate (an empty
    // $ssl_client_escaped_cert): a 401, as the built-in proxy's, in the route's dialect.
    for empty in [None, Some("")] {
        let mut headers = vec![
            ("host", "xx.localhost"),
            ("x-original-method", "GET"),
            ("x-original-uri", "/v1/accounts"),
        ];
        if let Some(value) = empty {
            headers.push(("x-ssl-client-cert", value));
        }
        let reply = ask(fa, &headers).await;
        assert_eq!(
            refused(&reply),
            (
                StatusCode::UNAUTHORIZED,
                Some("401"),
                Some("certificate_missing")
            ),
            "{}",
            reply.said()
        );
        assert_eq!(
            reply.json()["tppMessages"][0]["code"],
            "CERTIFICATE_MISSING",
            "{}",
            reply.said()
        );
    }
    running.stop().await;
}

#[tokio::test]
async fn ingress_nginx_asks_with_the_absolute_x_original_url_whose_host_chooses_the_site() {
    fn host_of_url(url: &str) -> &str {
        url.split('/').nth(2).unwrap_or_default()
    }
    let (running, fa) = gateway(&caller("ingress-nginx", "127.0.0.1/32", "")).await;
    // ingress-nginx's auth location: Host is the auth service's own; the original request is
    // X-Original-Method and the absolute X-Original-URL; the certificate in ssl-client-cert.
    let asked = |psp: &str, url: &str| {
        let cert = escaped_pem(psp);
        let url = url.to_owned();
        async move {
            ask(
                fa,
                &[
                    (
                        "host",
                        "psp-gateway-forward-auth.psp-gateway.svc.cluster.local",
                    ),
                    ("x-original-method", "GET"),
                    ("x-original-url", &url),
                    // The documented auth-snippet: nginx's $host, the URL's host here.
                    ("x-routed-host", host_of_url(&url)),
                    ("x-sent-from", "nginx-ingress-controller"),
                    ("ssl-client-cert", &cert),
                ],
            )
            .await
        }
    };
    // passport-out-xy is passported to XY for account information: let in at xy.
    let reply = asked(
        "passport-out-xy",
        "https://xy.localhost/v1/accounts?withBalance=true",
    )
    .await;
    assert_allowed(&reply, "PSDXX-TEST-000009");
    // valid is at home in XX only: refused at xy, let in at xx, by the URL's host alone.
    let reply = asked("valid", "https://xy.localhost/v1/accounts").await;
    assert_eq!(refused(&reply).0, StatusCode::FORBIDDEN, "{}", reply.said());
    assert_eq!(refused(&reply).1, Some("403"));
    let reply = asked("valid", "https://xx.localhost/v1/accounts").await;
    assert_allowed(&reply, "PSDXX-TEST-000001");
    // A URL that is none: refused, never read as a path.
    let reply = asked("valid", "https://xx.localhost/v1/accounts with spaces").await;
    assert_eq!(
        refused(&reply),
        (
            StatusCode::FORBIDDEN,
            None,
            Some("forward_auth_request_incomplete")
        ),
        "{}",
        reply.said()
    );
    // A host with a port that is none names no site.
    let reply = asked("valid", "https://xx.localhost:notaport/v1/accounts").await;
    assert_eq!(
        refused(&reply),
        (StatusCode::FORBIDDEN, None, Some("misdirected_request")),
        "{}",
        reply.said()
    );
    running.stop().await;
}

#[tokio::test]
async fn traefik_asks_with_x_forwarded_headers_and_its_comma_joined_chain() {
    let (running, fa) = gateway(&caller("traefik", "127.0.0.1/32", "")).await;
    let chain = traefik_chain("valid");
    // Traefik's ForwardAuth: the original method, proto, host and URI in X-Forwarded-*, the
    // client's chain from passTLSClientCert in X-Forwarded-Tls-Client-Cert (the default).
    let reply = ask(
        fa,
        &[
            ("host", "psp-gateway:9292"),
            ("x-forwarded-method", "POST"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "xx.localhost"),
            ("x-forwarded-uri", "/v1/payments/sepa-credit-transfers"),
            ("x-forwarded-for", "198.51.100.7"),
            ("x-forwarded-tls-client-cert", &chain),
        ],
    )
    .await;
    assert_allowed(&reply, "PSDXX-TEST-000001");
    let services = reply.header("x-psp-services").expect("services");
    assert!(
        services.split(',').any(|s| s == "7"),
        "payment initiation: {services}"
    );
    // The same request as the aisp PSP: it holds account information only.
    let reply = ask(
        fa,
        &[
            ("x-forwarded-method", "POST"),
            ("x-forwarded-host", "xx.localhost"),
            ("x-forwarded-uri", "/v1/payments/sepa-credit-transfers"),
            ("x-forwarded-tls-client-cert", &traefik_chain("aisp")),
        ],
    )
    .await;
    assert_eq!(
        refused(&reply),
        (
            StatusCode::FORBIDDEN,
            Some("403"),
            Some("services_not_covered")
        ),
        "{}",
        reply.said()
    );
    running.stop().await;
}

#[tokio::test]
async fn caddy_asks_with_x_forwarded_headers_and_base64_der_or_its_placeholder() {
    let (running, fa) = gateway(&caller(
        "caddy",
        "127.0.0.1/32",
        "certificate_header = \"x-client-cert\"",
    ))
    .await;
    // deploy/caddy: `uri /` with the original query kept on it; X-Forwarded-Host is the
    // request's Host, port included.
    let reply = ask_from(
        fa,
        LOOPBACK,
        "GET",
        "/?withBalance=true",
        &[
            ("host", "xx.localhost:8443"),
            ("x-forwarded-method", "GET"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "xx.localhost:8443"),
            ("x-forwarded-uri", "/v1/accounts?withBalance=true"),
            ("x-forwarded-for", "198.51.100.7"),
            ("x-client-cert", &caddy_der("valid")),
        ],
    )
    .await;
    assert_allowed(&reply, "PSDXX-TEST-000001");
    // Without a client certificate Caddy 2.6 sends the placeholder's own text: no
    // certificate, 401, not an unreadable one.
    let reply = ask(
        fa,
        &[
            ("x-forwarded-method", "GET"),
            ("x-forwarded-host", "xx.localhost:8443"),
            ("x-forwarded-uri", "/v1/accounts"),
            (
                "x-client-cert",
                "{http.request.tls.client.certificate_der_base64}",
            ),
        ],
    )
    .await;
    assert_eq!(
        refused(&reply),
        (
            StatusCode::UNAUTHORIZED,
            Some("401"),
            Some("certificate_missing")
        ),
        "{}",
        reply.said()
    );
    running.stop().await;
}

#[tokio::test]
async fn envoy_asks_with_the_request_line_behind_its_prefix_and_xfcc() {
    let (running, fa) = gateway(&caller(
        "envoy",
        "127.0.0.1/32",
        &format!("path_prefix = \"/psp-check\"\nxfcc_by = \"{ENVOY}\""),
    ))
    .await;
    let xfcc = xfcc_element(ENVOY, "valid");
    // Envoy's HTTP ext_authz: the original method, the original path behind path_prefix, the
    // original Host, and the allowed headers (XFCC with SANITIZE_SET: Envoy's element only).
    let reply = ask_from(
        fa,
        LOOPBACK,
        "DELETE",
        "/psp-check/v1/consents/123?x=1",
        &[("host", "xx.localhost"), ("x-forwarded-client-cert", &xfcc)],
    )
    .await;
    assert_allowed(&reply, "PSDXX-TEST-000001");
    // Envoy's HTTP mode can remove headers (x-envoy-auth-headers-to-remove): the client's
    // override, client-address and certificate headers are allowed through the check and
    // named for Envoy to remove, never left for the bank's API.
    let reply = ask_from(
        fa,
        LOOPBACK,
        "GET",
        "/psp-check/v1/accounts",
        &[
            ("host", "xx.localhost"),
            ("x-forwarded-client-cert", &xfcc),
            ("x-original-url", "/v1/payments"),
            ("x-real-ip", "203.0.113.66"),
            ("client-cert", ":AAAA:"),
            ("x_psp_auth_number", "PSDXX-TEST-000002"),
        ],
    )
    .await;
    assert_allowed(&reply, "PSDXX-TEST-000001");
    let removed: Vec<&str> = reply
        .header("x-envoy-auth-headers-to-remove")
        .unwrap_or_default()
        .split(',')
        .collect();
    for name in [
        "x-original-url",
        "x-real-ip",
        "client-cert",
        "x_psp_auth_number",
        "x-http-method-override",
    ] {
        assert!(removed.contains(&name), "{name} not removed: {removed:?}");
    }
    // Nor the identity headers the answer sets (Envoy removes after it sets).
    assert!(!removed.contains(&"x-psp-auth-number"), "{removed:?}");
    // A path outside the prefix is no question it knows how to read.
    let reply = ask_from(
        fa,
        LOOPBACK,
        "GET",
        "/v1/accounts",
        &[("host", "xx.localhost"), ("x-forwarded-client-cert", &xfcc)],
    )
    .await;
    assert_eq!(
        refused(&reply),
        (
            StatusCode::FORBIDDEN,
            None,
            Some("forward_auth_request_incomplete")
        ),
        "{}",
        reply.said()
    );
    // Nor a prefix that only starts the same: /psp-checkv1/accounts.
    let reply = ask_from(
        fa,
        LOOPBACK,
        "GET",
        "/psp-checkv1/accounts",
        &[("host", "xx.localhost"), ("x-forwarded-client-cert", &xfcc)],
    )
    .await;
    assert_eq!(
        refused(&reply).2,
        Some("forward_auth_request_incomplete"),
        "{}",
        reply.said()
    );
    running.stop().await;
}

// --- what an attacker tries -----------------------------------------------------------------

/// nginx's question for `uri` (as `X-Original-URI`) by `psp` at xx.
fn nginx_question<'a>(cert: &'a str, uri: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("host", "xx.localhost"),
        ("x-original-method", "GET"),
        ("x-original-uri", uri),
        ("x-ssl-client-cert", cert),
    ]
}

fn nginx_caller() -> String {
    caller(
        "nginx",
        "127.0.0.1/32",
        "certificate_header = \"x-ssl-client-cert\"",
    )
}

/// Whoever can ask can name any certificate: an address that is no configured caller is
/// refused before anything is read, and nothing is decided (no request counted for the
/// route; the same question from the configured caller is).
#[tokio::test]
async fn a_caller_whose_address_is_not_configured_is_refused_before_any_decision() {
    let (running, fa) = gateway(&caller(
        "nginx",
        "192.0.2.1/32",
        "certificate_header = \"x-ssl-client-cert\"",
    ))
    .await;
    let cert = escaped_pem("valid");
    // /v1/funds-confirmations is asked by this test only (the metric below).
    let question = nginx_question(&cert, "/v1/funds-confirmations");
    let reply = ask(fa, &question).await;
    assert_eq!(
        refused(&reply),
        (
            StatusCode::FORBIDDEN,
            None,
            Some("forward_auth_caller_unknown")
        ),
        "{}",
        reply.said()
    );
    assert_eq!(
        reply.json()["errors"][0]["code"],
        "forward_auth_caller_unknown"
    );
    // Audited, under the answer's request id.
    let id = reply.header("x-request-id").expect("a request id");
    let audited: Vec<_> = logs()
        .lines("gateway refused")
        .into_iter()
        .filter(|line| line["fields"]["check_id"] == id)
        .collect();
    assert_eq!(audited.len(), 1, "{}", reply.said());
    assert_eq!(audited[0]["target"], "audit");
    assert_eq!(
        audited[0]["fields"]["reason"],
        "forward_auth_caller_unknown"
    );
    assert_eq!(audited[0]["fields"]["face"], "forward-auth");
    for name in IDENTITY {
        assert_eq!(reply.header(name), None, "{}", reply.said());
    }
    let counted = |metrics: &str| {
        metrics.contains("face=\"forward-auth\",site=\"xx\",route=\"/v1/funds-confirmations\"")
    };
    let metrics = || {
        psp_service::telemetry::metrics::render(&prometheus_client::registry::Registry::default())
    };
    assert!(!counted(&metrics()), "decided for an unknown caller");
    running.stop().await;

    // The control: the same question from a configured caller (127.0.0.2, another loopback
    // address) is decided and counted.
    let (running, fa) = gateway(&caller(
        "nginx",
        "127.0.0.2/32",
        "certificate_header = \"x-ssl-client-cert\"",
    ))
    .await;
    let from_loopback = ask(fa, &question).await;
    assert_eq!(
        refused(&from_loopback).2,
        Some("forward_auth_caller_unknown"),
        "127.0.0.1 is not 127.0.0.2: {}",
        from_loopback.said()
    );
    let reply = ask_from(fa, "127.0.0.2".parse().expect("ip"), "GET", "/", &question).await;
    assert_allowed(&reply, "PSDXX-TEST-000001");
    assert!(
        counted(&metrics()),
        "the configured caller's question is counted"
    );
    running.stop().await;
}

#[tokio::test]
async fn x_original_uri_missing_twice_or_misspelt_is_an_incomplete_question() {
    let (running, fa) = gateway(&nginx_caller()).await;
    let cert = escaped_pem("valid");
    let incomplete = (
        StatusCode::FORBIDDEN,
        None,
        Some("forward_auth_request_incomplete"),
    );
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        (
            "no X-Original-URI",
            vec![
                ("host", "xx.localhost"),
                ("x-original-method", "GET"),
                ("x-ssl-client-cert", &cert),
            ],
        ),
        (
            "X-Original-URI twice",
            vec![
                ("host", "xx.localhost"),
                ("x-original-method", "GET"),
                ("x-original-uri", "/v1/accounts"),
                ("x-original-uri", "/v1/payments"),
                ("x-ssl-client-cert", &cert),
            ],
        ),
        (
            "X-Original-URI spelt with underscores (nginx drops such names; a client may not \
             stand in for the proxy's header)",
            vec![
                ("host", "xx.localhost"),
                ("x-original-method", "GET"),
                ("x_original_uri", "/v1/accounts"),
                ("x-ssl-client-cert", &cert),
            ],
        ),
        (
            "no X-Original-Method",
            vec![
                ("host", "xx.localhost"),
                ("x-original-uri", "/v1/accounts"),
                ("x-ssl-client-cert", &cert),
            ],
        ),
        (
            "X-Original-Method twice",
            vec![
                ("host", "xx.localhost"),
                ("x-original-method", "GET"),
                ("x-original-method", "POST"),
                ("x-original-uri", "/v1/accounts"),
                ("x-ssl-client-cert", &cert),
            ],
        ),
        (
            "Host twice",
            vec![
                ("host", "xx.localhost"),
                ("host", "xy.localhost"),
                ("x-original-method", "GET"),
                ("x-original-uri", "/v1/accounts"),
                ("x-ssl-client-cert", &cert),
            ],
        ),
    ];
    for (what, headers) in cases {
        let reply = ask(fa, &headers).await;
        assert_eq!(refused(&reply), incomplete, "{what}: {}", reply.said());
        assert_eq!(
            reply.json()["errors"][0]["code"],
            "forward_auth_request_incomplete",
            "{what}"
        );
        assert_eq!(reply.header("x-psp-auth-number"), None, "{what}");
    }
    running.stop().await;
}

/// Two certificate headers: which one the proxy meant is not guessed (first wins and last
/// wins are both wrong half the time).
#[tokio::test]
async fn the_certificate_header_twice_is_refused_whichever_comes_first() {
    let (running, fa) = gateway(&nginx_caller()).await;
    let (valid, revoked) = (escaped_pem("valid"), escaped_pem("revoked"));
    for (first, second) in [(&valid, &revoked), (&revoked, &valid), (&valid, &valid)] {
        let reply = ask(
            fa,
            &[
                ("host", "xx.localhost"),
                ("x-original-method", "GET"),
                ("x-original-uri", "/v1/accounts"),
                ("x-ssl-client-cert", first),
                ("x-ssl-client-cert", second),
            ],
        )
        .await;
        assert_unreadable(&reply);
        assert_eq!(reply.header("x-psp-auth-number"), None);
    }
    running.stop().await;
}

/// A certificate header is decoded once per distinct value and the decoding kept
/// (`gateway::presented`): a value another face accepted, as added by its own `xfcc_by`, is
/// never taken from that cache by a face that requires another hop. Both gateways run in
/// this one process and share the cache; each asks in turn, twice.
#[tokio::test]
async fn a_value_decoded_for_one_xfcc_by_is_not_reused_for_another() {
    let (edge, fa_edge) = gateway(&caller(
        "envoy",
        "127.0.0.1/32",
        &format!("xfcc_by = \"{ENVOY}\""),
    ))
    .await;
    let (other, fa_other) = gateway(&caller(
        "envoy",
        "127.0.0.1/32",
        "xfcc_by = \"spiffe://bank.example/ns/other/sa/envoy\"",
    ))
    .await;
    let xfcc = xfcc_element(ENVOY, "valid");
    for _ in 0..2 {
        assert_unreadable(&ask_xfcc(fa_other, &xfcc).await);
        assert_allowed(&ask_xfcc(fa_edge, &xfcc).await, "PSDXX-TEST-000001");
    }
    edge.stop().await;
    other.stop().await;
}

/// Envoy with `APPEND_FORWARD` keeps what the client sent in XFCC and appends its own
/// element: only the last element is the proxy's. A client element naming another PSP's
/// certificate is never read; with `xfcc_by`, a last element not added by that hop is
/// refused, and so is a client element that claims the hop's `By`.
#[tokio::test]
async fn an_xfcc_element_injected_by_the_client_before_the_proxys_is_never_read() {
    let (running, fa) = gateway(&caller(
        "envoy",
        "127.0.0.1/32",
        &format!("xfcc_by = \"{ENVOY}\"\nxfcc_forwarding = \"append-forward\""),
    ))
    .await;
    let ask_xfcc = |xfcc: String| async move { ask_xfcc(fa, &xfcc).await };
    // The client injects `valid`'s certificate (public: any PSP's is) in front of Envoy's
    // element for its own, revoked one.
    let injected = format!(
        "{},{}",
        xfcc_element("spiffe://attacker", "valid"),
        xfcc_element(ENVOY, "revoked")
    );
    let reply = ask_xfcc(injected).await;
    assert_eq!(
        refused(&reply),
        (
            StatusCode::UNAUTHORIZED,
            Some("401"),
            Some("certificate_revoked")
        ),
        "{}",
        reply.said()
    );
    // The client's element claims the hop's own By: the value is not one Envoy wrote.
    let reply = ask_xfcc(format!(
        "{},{}",
        xfcc_element(ENVOY, "valid"),
        xfcc_element(ENVOY, "revoked")
    ))
    .await;
    assert_unreadable(&reply);
    // The other way round: the last one is read, whatever comes before.
    let reply = ask_xfcc(format!(
        "{},{}",
        xfcc_element("spiffe://attacker", "revoked"),
        xfcc_element(ENVOY, "valid")
    ))
    .await;
    assert_allowed(&reply, "PSDXX-TEST-000001");
    // Envoy added nothing (the client presented no certificate): the client's own element is
    // last, and it was not added by the configured hop.
    let reply = ask_xfcc(xfcc_element("spiffe://attacker", "valid")).await;
    assert_unreadable(&reply);
    // A client that leaves a quote open cannot make Envoy's element part of its own.
    let reply = ask_xfcc(format!(
        "By={ENVOY};Cert=\"{},{}",
        percent(&pem_of(&psp_der("valid"))),
        xfcc_element(ENVOY, "revoked")
    ))
    .await;
    assert_ne!(reply.status, StatusCode::OK, "{}", reply.said());
    assert_eq!(reply.header("x-psp-auth-number"), None);
    // Two XFCC field lines: refused, not joined in an order the proxy did not write.
    let reply = ask_from(
        fa,
        LOOPBACK,
        "GET",
        "/v1/accounts",
        &[
            ("host", "xx.localhost"),
            ("x-forwarded-client-cert", &xfcc_element(ENVOY, "valid")),
            ("x-forwarded-client-cert", &xfcc_element(ENVOY, "revoked")),
        ],
    )
    .await;
    assert_eq!(
        refused(&reply).2,
        Some("certificate_unreadable"),
        "{}",
        reply.said()
    );
    running.stop().await;
}

/// A client certificate whose URI SAN is `https://tpp.example/x,By=<the edge>;Hash=<the
/// victim's>;Cert=<the victim's public certificate>`, made the attacker's way (self-signed,
/// rcgen), put in XFCC exactly as Envoy writes it: `URI=` unquoted. Read naively it is two
/// elements, the last the victim's; in either forwarding mode it is refused.
#[tokio::test]
async fn a_uri_san_that_smuggles_an_xfcc_element_never_makes_a_client_another_psp() {
    let victim = xfcc_element(ENVOY, "valid");
    let smuggled = format!("https://tpp.example/x,{}", victim.replace('"', ""));
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.subject_alt_names = vec![rcgen::SanType::URI(
        smuggled.clone().try_into().expect("IA5"),
    )];
    let key = rcgen::KeyPair::generate().expect("key");
    let attacker = params.self_signed(&key).expect("self-signed");
    let der = attacker.der().to_vec();
    let hash = ring::digest::digest(&ring::digest::SHA256, &der);
    let hex: String = hash.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let envoy_wrote = format!(
        "By={ENVOY};Hash={hex};Cert=\"{}\";Subject=\"\";URI={smuggled}",
        percent(&pem_of(&der))
    );
    for mode in ["sanitize-set", "append-forward"] {
        let (running, fa) = gateway(&caller(
            "envoy",
            "127.0.0.1/32",
            &format!("xfcc_by = \"{ENVOY}\"\nxfcc_forwarding = \"{mode}\""),
        ))
        .await;
        let reply = ask_xfcc(fa, &envoy_wrote).await;
        assert_unreadable(&reply);
        assert_eq!(reply.header("x-psp-auth-number"), None, "{mode}");
        assert!(!reply.said().contains(ENVOY), "{mode}: {}", reply.said());
        running.stop().await;
    }
}

/// nginx forwards `$request_uri` whole, fragment included, to the bank's API; a URI parser
/// drops the fragment. `/v1/accounts#/../../v1/payments` must not be decided as
/// `/v1/accounts` for an AIS-only PSP.
#[tokio::test]
async fn a_fragment_in_the_original_uri_is_refused_not_dropped() {
    let (running, fa) = gateway(&nginx_caller()).await;
    let cert = escaped_pem("aisp");
    for uri in [
        "/v1/accounts#/../../v1/payments",
        "/v1/accounts?a=1#x",
        "/v1/accounts#",
    ] {
        let reply = ask(fa, &nginx_question(&cert, uri)).await;
        assert_eq!(
            refused(&reply),
            (StatusCode::FORBIDDEN, Some("400"), Some("path_refused")),
            "{uri}: {}",
            reply.said()
        );
        assert_eq!(reply.header("x-psp-auth-number"), None);
    }
    running.stop().await;
}

/// ingress-nginx builds `X-Original-URL` from the `Host` header, but nginx chooses the backend
/// by the request line's authority when the target is absolute (`GET
/// https://xy.localhost/v1/accounts` with `Host: xx.localhost`): decided for xx, delivered to
/// xy. The documented `auth-snippet` sends nginx's `$host` as `X-Routed-Host`; a request whose
/// two hosts differ, or without it, is refused.
#[tokio::test]
async fn ingress_nginx_a_request_decided_for_one_site_and_routed_to_another_is_refused() {
    let (running, fa) = gateway(&caller("ingress-nginx", "127.0.0.1/32", "")).await;
    let cert = escaped_pem("valid");
    let question = |routed: Option<&'static str>| {
        let mut headers = vec![
            ("host", "psp-gateway.psp.svc"),
            ("x-original-method", "GET"),
            ("x-original-url", "https://xx.localhost/v1/accounts"),
            ("ssl-client-cert", cert.as_str()),
        ];
        if let Some(routed) = routed {
            headers.push(("x-routed-host", routed));
        }
        headers
    };
    let reply = ask(fa, &question(Some("xy.localhost"))).await;
    assert_eq!(
        refused(&reply),
        (StatusCode::FORBIDDEN, None, Some("misdirected_request")),
        "{}",
        reply.said()
    );
    assert_eq!(reply.header("x-psp-auth-number"), None);
    let reply = ask(fa, &question(None)).await;
    assert_eq!(
        refused(&reply),
        (
            StatusCode::FORBIDDEN,
            None,
            Some("forward_auth_request_incomplete")
        ),
        "{}",
        reply.said()
    );
    // The same host, in another case or with its port: one host.
    let reply = ask(fa, &question(Some("XX.localhost:443"))).await;
    assert_allowed(&reply, "PSDXX-TEST-000001");
    // A fragment in the URL (nginx forwards `$request_uri` whole): refused, as on every face
    // (docs/attacks/faces.md, break 2).
    let reply = ask(
        fa,
        &[
            ("host", "psp-gateway.psp.svc"),
            ("x-original-method", "GET"),
            (
                "x-original-url",
                "https://xx.localhost/v1/accounts#/../../v1/payments/x",
            ),
            ("x-routed-host", "xx.localhost"),
            ("ssl-client-cert", cert.as_str()),
        ],
    )
    .await;
    assert_eq!(
        refused(&reply),
        (StatusCode::FORBIDDEN, Some("400"), Some("path_refused")),
        "{}",
        reply.said()
    );
    running.stop().await;
}

#[tokio::test]
async fn a_host_that_no_site_names_is_misdirected() {
    let (running, fa) = gateway(&nginx_caller()).await;
    let cert = escaped_pem("passport-out-xy");
    for host in [Some("bank.example"), Some("xz.localhost"), None] {
        let mut headers = vec![
            ("x-original-method", "GET"),
            ("x-original-uri", "/v1/accounts"),
            ("x-ssl-client-cert", cert.as_str()),
        ];
        if let Some(host) = host {
            headers.push(("host", host));
        }
        let reply = ask(fa, &headers).await;
        assert_eq!(
            refused(&reply),
            (StatusCode::FORBIDDEN, None, Some("misdirected_request")),
            "{host:?}: {}",
            reply.said()
        );
        assert_eq!(reply.json()["errors"][0]["code"], "misdirected_request");
    }
    // Names are matched as the built-in proxy matches them: case, port and final dot aside.
    for host in ["XY.Localhost.", "xy.localhost:8443"] {
        let reply = ask(
            fa,
            &[
                ("host", host),
                ("x-original-method", "GET"),
                ("x-original-uri", "/v1/accounts"),
                ("x-ssl-client-cert", cert.as_str()),
            ],
        )
        .await;
        assert_allowed(&reply, "PSDXX-TEST-000009");
    }
    running.stop().await;
}

/// The proxy forwards the path as written: a path whose meaning depends on who reads it, or
/// that is not in the normal form the route was chosen on, is refused (the built-in proxy
/// forwards the normal form it decided on; an authoriser cannot).
#[tokio::test]
async fn dot_segments_encoded_slashes_and_empty_segments_are_refused() {
    let (running, fa) = gateway(&nginx_caller()).await;
    // aisp holds account information only: each of these could reach payments.
    let cert = escaped_pem("aisp");
    for (uri, code) in [
        ("/v1/accounts/../payments", "path_not_normal"),
        ("/v1/payments/../accounts", "path_not_normal"),
        ("/v1/accounts/./../payments/x", "path_not_normal"),
        ("/v1//accounts", "path_not_normal"),
        ("//v1/accounts", "path_not_normal"),
        ("/v1/accounts%2F..%2Fpayments", "path_refused"),
        ("/v1/accounts%2f..%2fpayments", "path_refused"),
        // Percent-encoded dots are dots (RFC 3986 section 6.2.2.2): the normal form differs.
        ("/v1/accounts/%2e%2e/payments", "path_not_normal"),
        ("/v1/accounts/..%2Fpayments", "path_refused"),
        ("/v1/accounts\\..\\payments", "path_refused"),
        ("https://xx.localhost/v1/accounts", "path_refused"),
        ("*", "path_refused"),
    ] {
        let reply = ask(fa, &nginx_question(&cert, uri)).await;
        assert_eq!(
            refused(&reply),
            (StatusCode::FORBIDDEN, Some("400"), Some(code)),
            "{uri}: {}",
            reply.said()
        );
        assert_eq!(reply.header("x-psp-auth-number"), None, "{uri}");
    }
    // The normal form of the first: the aisp PSP's own route, let in.
    let reply = ask(fa, &nginx_question(&cert, "/v1/accounts")).await;
    assert_allowed(&reply, "PSDXX-TEST-000016");
    running.stop().await;
}

#[tokio::test]
async fn connect_trace_and_other_unforwarded_methods_are_refused_as_the_original_method() {
    let (running, fa) = gateway(&nginx_caller()).await;
    let cert = escaped_pem("valid");
    for method in ["CONNECT", "TRACE", "get", "PROPFIND"] {
        let reply = ask(
            fa,
            &[
                ("host", "xx.localhost"),
                ("x-original-method", method),
                ("x-original-uri", "/v1/accounts"),
                ("x-ssl-client-cert", &cert),
            ],
        )
        .await;
        assert_eq!(
            refused(&reply),
            (
                StatusCode::FORBIDDEN,
                Some("405"),
                Some("method_not_allowed")
            ),
            "{method}: {}",
            reply.said()
        );
    }
    // An original method that is no method at all.
    let reply = ask(
        fa,
        &[
            ("host", "xx.localhost"),
            ("x-original-method", "G(E)T"),
            ("x-original-uri", "/v1/accounts"),
            ("x-ssl-client-cert", &cert),
        ],
    )
    .await;
    assert_eq!(
        refused(&reply),
        (
            StatusCode::FORBIDDEN,
            None,
            Some("forward_auth_request_incomplete")
        ),
        "{}",
        reply.said()
    );
    running.stop().await;
}

/// The refusals the built-in proxy would give, with its status beside the proxy's: a PSP
/// without the route's service (403 and 403), a revoked or expired certificate (401), a
/// forged issuer (401), a register entry that is not authorised (403).
#[tokio::test]
async fn refusals_carry_the_built_in_proxys_status_and_code() {
    let (running, fa) = gateway(&nginx_caller()).await;
    for (psp, uri, expected, dialect) in [
        (
            "aisp",
            "/v1/payments/sepa-credit-transfers",
            (
                StatusCode::FORBIDDEN,
                Some("403"),
                Some("services_not_covered"),
            ),
            "ROLE_INVALID",
        ),
        (
            "revoked",
            "/v1/accounts",
            (
                StatusCode::UNAUTHORIZED,
                Some("401"),
                Some("certificate_revoked"),
            ),
            "CERTIFICATE_REVOKED",
        ),
        (
            "expired",
            "/v1/accounts",
            (
                StatusCode::UNAUTHORIZED,
                Some("401"),
                Some("certificate_expired"),
            ),
            "CERTIFICATE_EXPIRED",
        ),
        (
            "untrusted",
            "/v1/accounts",
            (
                StatusCode::UNAUTHORIZED,
                Some("401"),
                Some("issuer_not_approved"),
            ),
            "CERTIFICATE_INVALID",
        ),
        (
            "unauthorised",
            "/v1/accounts",
            (StatusCode::FORBIDDEN, Some("403"), Some("not_authorised")),
            "ROLE_INVALID",
        ),
    ] {
        let cert = escaped_pem(psp);
        let reply = ask(fa, &nginx_question(&cert, uri)).await;
        assert_eq!(refused(&reply), expected, "{psp}: {}", reply.said());
        assert_eq!(
            reply.json()["tppMessages"][0]["code"],
            dialect,
            "{psp}: {}",
            reply.said()
        );
        for name in IDENTITY {
            assert_eq!(reply.header(name), None, "{psp}: {}", reply.said());
        }
    }
    running.stop().await;
}

/// A certificate asked about again is not parsed again: its parse is shared, by the digest of
/// its DER, with every face and connection that presents it. Each question is still decided
/// on its own certificate: a revoked and an expired one asked between the questions of a
/// valid one, twice over (the second round from the shared parses and the cached checks),
/// never take the valid one's identity, nor it theirs.
#[tokio::test]
async fn interleaved_certificates_each_get_their_own_decision_from_the_shared_parses() {
    let (running, fa) = gateway(&nginx_caller()).await;
    for round in 1..=2 {
        for (psp, refusal) in [
            ("valid", None),
            ("revoked", Some("certificate_revoked")),
            ("valid", None),
            ("expired", Some("certificate_expired")),
            ("valid", None),
        ] {
            let cert = escaped_pem(psp);
            let reply = ask(fa, &nginx_question(&cert, "/v1/accounts")).await;
            match refusal {
                None => {
                    assert_allowed(&reply, "PSDXX-TEST-000001");
                    let forwarded = reply.header("x-psp-certificate").expect("certificate");
                    assert_eq!(
                        psp_cert::cert::input::decode_certificate_input(forwarded.as_bytes())
                            .expect("x-psp-certificate decodes"),
                        psp_der(psp),
                        "round {round}: {psp}"
                    );
                }
                Some(code) => {
                    assert_eq!(
                        refused(&reply),
                        (StatusCode::UNAUTHORIZED, Some("401"), Some(code)),
                        "round {round}: {psp}: {}",
                        reply.said()
                    );
                    for name in IDENTITY {
                        assert_eq!(reply.header(name), None, "{psp}: {}", reply.said());
                    }
                }
            }
        }
    }
    running.stop().await;
}

/// A certificate header that is not a certificate is 401 (the built-in proxy's status for a
/// certificate it cannot read), never a decision on part of it.
#[tokio::test]
async fn a_certificate_header_that_is_not_a_certificate_is_refused() {
    let (running, fa) = gateway(&nginx_caller()).await;
    for value in ["forged", "%ZZ", "-----BEGIN CERTIFICATE-----%0AAAAA%0A"] {
        let reply = ask(fa, &nginx_question(value, "/v1/accounts")).await;
        assert_eq!(
            refused(&reply),
            (
                StatusCode::UNAUTHORIZED,
                Some("401"),
                Some("certificate_unreadable")
            ),
            "{value}: {}",
            reply.said()
        );
    }
    running.stop().await;
}

/// Callers are told apart by address, the first whose addresses hold the peer answering. Two
/// callers sharing an address (nginx and Caddy on one host, as deploy/nginx and deploy/caddy
/// each suggest `127.0.0.1/32`) made the second's requests read as the first kind's: through
/// real Caddy, a client without a certificate sent nginx's `X-Original-Method`,
/// `X-Original-URI` and `X-SSL-Client-Cert` (with `valid`'s public certificate), Caddy passed
/// them on to the check, psp-gateway read them as nginx's and let the client's POST to
/// /v1/payments through as PSDXX-TEST-000001 with every service. Such a configuration is now
/// refused; tests/forward_auth_proxies.rs `a_client_of_caddy_cannot_pass_for_nginx` runs the
/// attack against the configuration that is accepted.
/// An envoy caller in `append-forward` mode without `xfcc_by` could read the client's own
/// element as the edge's: the configuration is refused before anything listens.
#[test]
fn append_forward_without_the_edges_by_is_refused() {
    let text = std::fs::read_to_string(common::root().join("gateway.toml")).expect("gateway.toml");
    let load = |extra: &str| {
        let section = format!(
            "\n[forward_auth]\nlisten = \"127.0.0.1:0\"\n\n[[forward_auth.callers]]\nkind = \"envoy\"\naddresses = [\"127.0.0.1/32\"]\n{extra}\n"
        );
        psp_gateway::Config::from_toml(
            &format!("{text}{section}"),
            std::path::Path::new("gateway.toml"),
            common::root(),
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    let refused = load("xfcc_forwarding = \"append-forward\"").expect_err("refused");
    assert!(refused.contains("append-forward"), "{refused}");
    assert_eq!(
        load(&format!(
            "xfcc_forwarding = \"append-forward\"\nxfcc_by = \"{ENVOY}\""
        )),
        Ok(())
    );
}

#[test]
fn a_configuration_with_two_callers_on_one_address_is_refused() {
    let text = std::fs::read_to_string(common::root().join("gateway.toml")).expect("gateway.toml");
    let load = |callers: &[(&str, &str)]| {
        let mut section = "\n[forward_auth]\nlisten = \"127.0.0.1:0\"\n".to_owned();
        for (kind, addresses) in callers {
            section.push_str(&format!(
                "\n[[forward_auth.callers]]\nkind = \"{kind}\"\naddresses = [{addresses}]\ncertificate_header = \"x-client-cert\"\n"
            ));
        }
        psp_gateway::Config::from_toml(
            &format!("{text}{section}"),
            std::path::Path::new("gateway.toml"),
            common::root(),
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    for callers in [
        [("nginx", "\"127.0.0.1/32\""), ("caddy", "\"127.0.0.1/32\"")],
        [("nginx", "\"10.0.0.0/8\""), ("traefik", "\"10.1.2.3\"")],
        [("caddy", "\"10.1.2.3/32\""), ("nginx", "\"10.1.0.0/16\"")],
        [
            ("nginx", "\"::ffff:127.0.0.1\""),
            ("caddy", "\"127.0.0.1\""),
        ],
        [
            ("envoy", "\"2001:db8::/32\""),
            ("caddy", "\"2001:db8:1::7\""),
        ],
        [
            ("nginx", "\"192.0.2.1/32\", \"127.0.0.1/32\""),
            ("nginx", "\"198.51.100.0/24\", \"127.0.0.0/8\""),
        ],
    ] {
        let error = load(&callers).expect_err(&format!("accepted {callers:?}"));
        assert!(
            error.contains("overlap") && error.contains("told apart by their addresses"),
            "{callers:?}: {error}"
        );
    }
    // Apart: accepted.
    for callers in [
        [("nginx", "\"127.0.0.2/32\""), ("caddy", "\"127.0.0.1/32\"")],
        [("nginx", "\"10.0.0.0/16\""), ("traefik", "\"10.1.0.0/16\"")],
        [("envoy", "\"::1\""), ("caddy", "\"127.0.0.1\"")],
    ] {
        load(&callers).unwrap_or_else(|e| panic!("{callers:?}: {e}"));
    }
    // One caller's own blocks may overlap: it is one caller.
    load(&[("nginx", "\"10.0.0.0/8\", \"10.1.0.0/16\"")]).expect("one caller");
}
