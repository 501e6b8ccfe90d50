//! Headers a client must not control, through the real gateway to a recording upstream:
//! client-address and client-certificate headers other proxies believe, headers named in
//! `Connection` to make the gateway's own disappear, two authorities in one request, and
//! HTTP/2 cookie crumbs.

mod common;

use common::test_pki::{test_config, test_pki};
use common::tls_client::{self, Proto, get};
use common::upstream::{self, Upstream};
use common::*;
use http::{HeaderName, HeaderValue, StatusCode};
use psp_gateway::app::Running;

async fn gateway(upstream: &Upstream) -> Running {
    service::start(test_config(|t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!("upstream = \"http://{}\"", upstream.addr),
        )
    }))
    .await
}

fn with_headers(
    mut req: http::Request<tls_client::ReqBody>,
    headers: &[(&str, &str)],
) -> http::Request<tls_client::ReqBody> {
    for (k, v) in headers {
        req.headers_mut().append(
            HeaderName::from_bytes(k.as_bytes()).expect("name"),
            HeaderValue::from_str(v).expect("value"),
        );
    }
    req
}

#[tokio::test]
async fn client_address_and_certificate_headers_never_reach_the_upstream() {
    let up = upstream::start().await;
    let running = gateway(&up).await;
    let spoofed = [
        ("X-Real-IP", "6.6.6.6"),
        ("True-Client-IP", "6.6.6.6"),
        ("CF-Connecting-IP", "6.6.6.6"),
        ("Fastly-Client-IP", "6.6.6.6"),
        ("X-Client-IP", "6.6.6.6"),
        ("X-Cluster-Client-IP", "6.6.6.6"),
        ("X-Original-Forwarded-For", "6.6.6.6"),
        ("X-Forwarded-Port", "8443"),
        ("X-Forwarded-Prefix", "/admin"),
        ("X-Forwarded-Server", "evil"),
        ("X-Forwarded-Scheme", "https"),
        ("X-Forwarded-Ssl", "on"),
        ("X-Url-Scheme", "https"),
        ("Front-End-Https", "on"),
        ("X-Client-Cert", "forged"),
        ("X-Client-Verify", "SUCCESS"),
        ("X-ARR-ClientCert", "forged"),
        ("X-Amzn-Mtls-Clientcert", "forged"),
        ("X-Amzn-Mtls-Clientcert-Leaf", "forged"),
        ("X-Amzn-Mtls-Clientcert-Subject", "CN=evil"),
        ("Forwarded", "for=6.6.6.6;host=evil.example"),
        ("X-Forwarded-Host", "evil.example"),
    ];
    for proto in [Proto::H1, Proto::H2] {
        let config = tls_client::client_config(&test_pki().dir, Some("valid"), proto);
        let addr = running.gateway.expect("gateway");
        let (response, _) = tls_client::send(
            addr,
            config,
            proto,
            with_headers(get("/v1/accounts"), &spoofed),
        )
        .await;
        assert_eq!(response.status(), StatusCode::OK, "{proto:?}");
        let seen = up.received.lock().expect("lock").pop().expect("forwarded");
        for (name, _) in spoofed {
            let lower = name.to_ascii_lowercase();
            if lower == "x-forwarded-host" {
                continue;
            }
            assert!(
                !seen.headers.contains_key(lower.as_str()),
                "{proto:?}: {name} reached the upstream"
            );
        }
        assert_eq!(
            seen.headers["x-forwarded-host"], "localhost",
            "{proto:?}: X-Forwarded-Host is the authority the gateway accepted"
        );
        assert_eq!(
            seen.headers.get_all("x-forwarded-host").iter().count(),
            1,
            "{proto:?}"
        );
    }
    running.stop().await;
}

#[tokio::test]
async fn headers_named_in_connection_cannot_remove_what_the_gateway_adds() {
    let up = upstream::start().await;
    let running = gateway(&up).await;
    let config = tls_client::client_config(&test_pki().dir, Some("valid"), Proto::H1);
    let addr = running.gateway.expect("gateway");
    let request = b"GET /v1/accounts HTTP/1.1\r\nHost: localhost\r\n\
        Connection: close, x-psp-auth-number, x-psp-certificate, x-psp-check-id, \
        x-forwarded-for, x-forwarded-proto, x-forwarded-host, x-psp-services\r\n\r\n";
    let (status, answer) = tls_client::send_raw(addr, config, request).await;
    assert_eq!(status, Some(200), "{}", String::from_utf8_lossy(&answer));
    let seen = up.received.lock().expect("lock").pop().expect("forwarded");
    for added in [
        "x-psp-auth-number",
        "x-psp-certificate",
        "x-psp-check-id",
        "x-psp-services",
        "x-forwarded-for",
        "x-forwarded-proto",
        "x-forwarded-host",
    ] {
        assert!(seen.headers.contains_key(added), "{added} was removed");
    }
    let passed_on = seen
        .headers
        .get_all("connection")
        .iter()
        .any(|v| v.to_str().unwrap_or_default().contains("x-psp"));
    assert!(!passed_on, "the client's Connection list is not passed on");
    running.stop().await;
}

#[tokio::test]
async fn a_request_naming_two_authorities_is_refused_before_anything_is_forwarded() {
    let up = upstream::start().await;
    let running = gateway(&up).await;
    let addr = running.gateway.expect("gateway");
    let h1 = tls_client::client_config(&test_pki().dir, Some("valid"), Proto::H1);
    let cases: [(&str, &[u8]); 4] = [
        (
            "two Host headers",
            b"GET /v1/accounts HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
        ),
        (
            "the same Host twice",
            b"GET /v1/accounts HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        ),
        (
            "a Host contradicting the absolute-form target",
            b"GET https://localhost/v1/accounts HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
        ),
        (
            "a Host with user information",
            b"GET /v1/accounts HTTP/1.1\r\nHost: localhost@evil.example\r\nConnection: close\r\n\r\n",
        ),
    ];
    for (what, request) in cases {
        let (status, answer) = tls_client::send_raw(addr, h1.clone(), request).await;
        let text = String::from_utf8_lossy(&answer);
        assert_eq!(status, Some(400), "{what}: {text}");
        assert!(text.contains("FORMAT_ERROR"), "{what}: {text}");
    }
    // HTTP/2: a Host that contradicts :authority.
    let h2 = tls_client::client_config(&test_pki().dir, Some("valid"), Proto::H2);
    let req = with_headers(get("/v1/accounts"), &[("host", "evil.example")]);
    let (response, _) = tls_client::send(addr, h2, Proto::H2, req).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(
        up.received.lock().expect("lock").is_empty(),
        "nothing reached the upstream"
    );
    // The absolute-form target alone, and with its own Host, are accepted.
    for request in [
        &b"GET https://localhost/v1/accounts HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"[..],
        &b"GET https://LOCALHOST/v1/accounts HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"[..],
    ] {
        let (status, answer) = tls_client::send_raw(addr, h1.clone(), request).await;
        assert_eq!(status, Some(200), "{}", String::from_utf8_lossy(&answer));
    }
    running.stop().await;
}

#[tokio::test]
async fn http2_cookie_crumbs_reach_an_http1_upstream_as_one_line() {
    let up = upstream::start().await;
    let running = gateway(&up).await;
    let h2 = tls_client::client_config(&test_pki().dir, Some("valid"), Proto::H2);
    let req = with_headers(
        get("/v1/accounts"),
        &[("cookie", "a=1"), ("cookie", "b=2"), ("cookie", "c=3")],
    );
    let (response, _) =
        tls_client::send(running.gateway.expect("gateway"), h2, Proto::H2, req).await;
    assert_eq!(response.status(), StatusCode::OK);
    let seen = up.received.lock().expect("lock").pop().expect("forwarded");
    let cookies: Vec<_> = seen.headers.get_all("cookie").iter().collect();
    assert_eq!(cookies, ["a=1; b=2; c=3"]);
    running.stop().await;
}

#[tokio::test]
async fn each_client_has_its_own_request_quota_in_a_bounded_table() {
    use psp_service::telemetry::metrics::{TableLabels, metrics};
    let up = upstream::start().await;
    // Three requests per client; the table remembers two clients; the test's own address is
    // a trusted proxy, so X-Forwarded-For names the client.
    let running = service::start(test_config(|t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!(
                "upstream = \"http://{}\"\n\
                 trusted_proxies = [\"127.0.0.1/32\"]\n\
                 rate_limit = {{ requests = 3, period_seconds = 300, max_tracked_sources = 2 }}",
                up.addr
            ),
        )
    }))
    .await;
    let addr = running.gateway.expect("gateway");
    let config = tls_client::client_config(&test_pki().dir, Some("valid"), Proto::H1);
    let call = |client: &'static str| {
        let config = config.clone();
        async move {
            let req = with_headers(get("/v1/accounts"), &[("x-forwarded-for", client)]);
            tls_client::send(addr, config, Proto::H1, req).await.0
        }
    };
    for _ in 0..3 {
        assert_eq!(call("192.0.2.1").await.status(), StatusCode::OK);
    }
    let refused = call("192.0.2.1").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = refused.headers()["retry-after"]
        .to_str()
        .expect("ASCII")
        .parse()
        .expect("seconds");
    assert!((1..=300).contains(&retry_after), "{retry_after}");
    assert_eq!(
        call("192.0.2.2").await.status(),
        StatusCode::OK,
        "another client has its own quota"
    );
    let forwarded = up.received.lock().expect("lock").len();
    assert_eq!(forwarded, 4, "the refused request was not forwarded");

    let evictions = || {
        metrics()
            .limiter_evictions
            .get_or_create(&TableLabels {
                table: "gateway-requests".to_owned(),
            })
            .get()
    };
    let before = evictions();
    for client in ["192.0.2.3", "192.0.2.4", "192.0.2.5"] {
        assert_eq!(call(client).await.status(), StatusCode::OK);
    }
    assert!(
        evictions() > before,
        "new clients made room in the two-client table"
    );
    running.stop().await;
}
