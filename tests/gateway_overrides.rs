//! Requests the bank's framework would read as other requests, through the gateway (over real
//! TLS, or handed to its handler in memory where the listener plays no part) to a
//! recording upstream: a method the gateway does not forward (`CONNECT` with a path, `TRACE`,
//! an invented one), a method or path override in the query string, header names with
//! underscores that WSGI and CGI read as the identity headers. And the upstream's budget of
//! calls in flight: one PSP's streams cannot multiply into thousands of upstream connections.

mod common;

use std::sync::atomic::Ordering;

use common::test_pki::{test_config, test_pki};
use common::tls_client::{self, Proto, get};
use common::upstream::{self, Upstream, held_upstream, until};
use common::*;
use http::{HeaderName, HeaderValue, StatusCode};
use http_body_util::BodyExt;
use psp_gateway::app::Running;

async fn gateway(upstream: std::net::SocketAddr, extra: &str) -> Running {
    let extra = extra.to_owned();
    service::start(test_config(move |t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!("upstream = \"http://{upstream}\"\n{extra}"),
        )
    }))
    .await
}

/// The faces with the gateway forwarding to `upstream`, driven in memory.
fn in_memory(upstream: std::net::SocketAddr, extra: &str) -> psp_gateway::app::Faces {
    let extra = extra.to_owned();
    in_memory::faces(&test_config(move |t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!("upstream = \"http://{upstream}\"\n{extra}"),
        )
    }))
}

async fn body_json(response: http::Response<hyper::body::Incoming>) -> serde_json::Value {
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    serde_json::from_slice(&bytes).expect("json body")
}

fn received(up: &Upstream) -> usize {
    up.received.lock().expect("lock").len()
}

#[tokio::test]
async fn connect_with_a_path_is_refused_before_any_decision_and_never_forwarded() {
    let up = upstream::start().await;
    let running = gateway(up.addr, "").await;
    let addr = running.gateway.expect("gateway");
    let config = tls_client::client_config(&test_pki().dir, Some("valid"), Proto::H1);
    for request in [
        &b"CONNECT /v1/accounts HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"[..],
        b"CONNECT localhost:443 HTTP/1.1\r\nHost: localhost:443\r\nConnection: close\r\n\r\n",
        b"TRACE /v1/accounts HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        b"PROPFIND /v1/accounts HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        // Methods are case-sensitive (RFC 9110 section 9.1): `get` is not GET, whatever a
        // lenient upstream makes of it.
        b"get /v1/accounts HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ] {
        let (status, answer) = tls_client::send_raw(addr, config.clone(), request).await;
        let text = String::from_utf8_lossy(&answer);
        assert_eq!(status, Some(405), "{text}");
        assert!(
            text.to_ascii_lowercase()
                .contains("allow: get, head, post, put, patch, delete, options"),
            "{text}"
        );
        assert!(text.contains("SERVICE_INVALID"), "{text}");
    }
    assert_eq!(received(&up), 0, "nothing reached the upstream");

    // Over HTTP/2 too.
    let config = tls_client::client_config(&test_pki().dir, Some("valid"), Proto::H2);
    let mut trace = get("/v1/accounts");
    *trace.method_mut() = http::Method::TRACE;
    let (response, _) = tls_client::send(addr, config, Proto::H2, trace).await;
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(received(&up), 0);
    running.stop().await;
}

#[test]
fn a_configuration_cannot_allow_connect_or_trace() {
    for method in ["CONNECT", "TRACE"] {
        let text = one_site_sandbox_toml().replace(
            "upstream = \"sandbox-echo\"",
            &format!("upstream = \"sandbox-echo\"\nallowed_methods = [\"GET\", \"{method}\"]"),
        );
        let error =
            psp_gateway::Config::from_toml(&text, std::path::Path::new("gateway.toml"), root())
                .err()
                .unwrap_or_else(|| panic!("{method} was accepted"));
        assert!(error.to_string().contains(method), "{error}");
    }
}

#[tokio::test]
async fn a_method_or_path_override_in_the_query_is_refused_for_every_framework_convention() {
    let up = upstream::start().await;
    let faces = in_memory(up.addr, "");
    // The AIS-only PSP may GET accounts; each query would make a framework act otherwise.
    for (convention, query) in [
        (
            "Rails, Laravel, Symfony, Spring HiddenHttpMethodFilter",
            "_method=DELETE",
        ),
        ("the same, percent-encoded", "%5Fmethod=DELETE"),
        ("PHP array syntax", "_method[]=DELETE"),
        ("PHP reads a dot as an underscore", ".method=DELETE"),
        (
            "Express method-override, query getter",
            "X-HTTP-Method-Override=DELETE",
        ),
        ("OData", "X-HTTP-Method=MERGE"),
        ("Google APIs", "x-method-override=PUT"),
        (
            "Phalcon's router path",
            "_url=/v1/payments/sepa-credit-transfers",
        ),
        (
            "after another parameter, `;`-separated",
            "withBalance=true;_method=DELETE",
        ),
    ] {
        let answer = in_memory::gateway(
            &faces,
            in_memory::chain_of("aisp"),
            in_memory::request("GET", &format!("/v1/accounts?{query}")),
        )
        .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{convention}");
        let body = answer.json();
        assert_eq!(
            body["tppMessages"][0]["code"], "FORMAT_ERROR",
            "{convention}"
        );
        assert!(
            body["tppMessages"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("override")),
            "{convention}: {body}"
        );
    }
    assert_eq!(received(&up), 0, "no override reached the upstream");

    // The route is chosen on the path alone: a path in the query changes nothing.
    let answer = in_memory::gateway(
        &faces,
        in_memory::chain_of("aisp"),
        in_memory::request("GET", "/v1/accounts?next=/v1/payments&payment_method=x"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    let seen = up.received.lock().expect("lock").pop().expect("forwarded");
    assert_eq!(seen.path, "/v1/accounts");
}

#[tokio::test]
async fn an_underscore_spelling_of_an_identity_header_never_reaches_the_upstream() {
    let up = upstream::start().await;
    let running = gateway(up.addr, "").await;
    let addr = running.gateway.expect("gateway");
    let forged = [
        ("x_psp_services", "1,2,3,4,5,6,7,8"),
        ("x_psp_auth_number", "PSDXX-TEST-999999"),
        ("x_psp_certificate", "forged"),
        ("x_original_url", "/v1/payments"),
        ("x_http_method_override", "DELETE"),
        ("x_forwarded_for", "6.6.6.6"),
        ("x.psp.services", "1,2,3,4,5,6,7,8"),
        (
            "x_custom_header",
            "underscores are dropped whatever they spell",
        ),
    ];
    for proto in [Proto::H1, Proto::H2] {
        let config = tls_client::client_config(&test_pki().dir, Some("aisp"), proto);
        let mut req = get("/v1/accounts");
        for (name, value) in forged {
            req.headers_mut().append(
                HeaderName::from_bytes(name.as_bytes()).expect("name"),
                HeaderValue::from_static(value),
            );
        }
        let (response, _) = tls_client::send(addr, config, proto, req).await;
        assert_eq!(response.status(), StatusCode::OK, "{proto:?}");
        let seen = up.received.lock().expect("lock").pop().expect("forwarded");
        for (name, _) in forged {
            assert!(
                !seen.headers.contains_key(name),
                "{proto:?}: {name} reached the upstream"
            );
        }
        assert_eq!(
            seen.headers["x-psp-auth-number"], "PSDXX-TEST-000016",
            "{proto:?}: the gateway's own identity"
        );
        assert_eq!(seen.headers.get_all("x-psp-services").iter().count(), 1);
        assert_ne!(seen.headers["x-psp-services"], "1,2,3,4,5,6,7,8");
    }
    running.stop().await;
}

#[tokio::test]
async fn header_names_with_underscores_can_be_refused_outright() {
    let up = upstream::start().await;
    let faces = in_memory(up.addr, "headers_with_underscores = \"refuse\"");
    let mut req = in_memory::request("GET", "/v1/accounts");
    req.headers_mut().insert(
        HeaderName::from_static("x_psp_services"),
        HeaderValue::from_static("1,2,3"),
    );
    let answer = in_memory::gateway(&faces, in_memory::chain_of("valid"), req).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    let body = answer.json();
    assert!(
        body["tppMessages"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("x_psp_services")),
        "{body}"
    );
    assert_eq!(received(&up), 0);
    let answer = in_memory::gateway(
        &faces,
        in_memory::chain_of("valid"),
        in_memory::request("GET", "/v1/accounts"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "a clean request passes");
}

#[tokio::test]
async fn one_psps_streams_cannot_multiply_into_upstream_connections() {
    let up = held_upstream().await;
    let running = gateway(
        up.addr,
        "upstream_max_requests = 3\nupstream_max_requests_per_psp = 2",
    )
    .await;
    let addr = running.gateway.expect("gateway");
    let dir = &test_pki().dir;

    // One PSP opens 10 streams on one HTTP/2 connection: 2 reach the upstream, 8 are refused
    // at once with 503 and Retry-After.
    let valid = tls_client::open_h2(
        addr,
        tls_client::client_config(dir, Some("valid"), Proto::H2),
    )
    .await;
    let mut streams = tokio::task::JoinSet::new();
    for _ in 0..10 {
        let mut sender = valid.clone();
        streams.spawn(async move { sender.send_request(get("/v1/accounts")).await });
    }
    let mut refused = 0;
    while refused < 8 {
        let response = streams
            .join_next()
            .await
            .expect("a stream")
            .expect("task")
            .expect("response");
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()["retry-after"], "1");
        let body = body_json(response).await;
        assert_eq!(body["tppMessages"][0]["code"], "SERVICE_UNAVAILABLE");
        refused += 1;
    }
    until("two calls held upstream", || {
        up.held.load(Ordering::SeqCst) == 2
    })
    .await;

    // Another PSP still gets the third call of the total...
    let aisp = tls_client::open_h2(
        addr,
        tls_client::client_config(dir, Some("aisp"), Proto::H2),
    )
    .await;
    let mut sender = aisp.clone();
    streams.spawn(async move { sender.send_request(get("/v1/accounts")).await });
    until("three calls held upstream", || {
        up.held.load(Ordering::SeqCst) == 3
    })
    .await;
    // ...and a fourth, of any PSP, is past the total.
    let (response, _) = tls_client::send(
        addr,
        tls_client::client_config(dir, Some("ecdsa"), Proto::H1),
        Proto::H1,
        get("/v1/accounts"),
    )
    .await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        up.connections.load(Ordering::SeqCst) <= 3,
        "the upstream holds no more connections than calls allowed in flight"
    );

    // Released, the held calls are answered, and their tickets are given back.
    up.release.send(true).expect("release");
    while let Some(done) = streams.join_next().await {
        let response = done.expect("task").expect("response");
        assert_eq!(response.status(), StatusCode::OK);
    }
    let mut sender = valid.clone();
    let response = sender
        .send_request(get("/v1/accounts"))
        .await
        .expect("response");
    assert_eq!(response.status(), StatusCode::OK, "the budget came back");
    let overflows = |scope: &str| {
        psp_service::telemetry::metrics::metrics()
            .upstream_overflows
            .get_or_create(&psp_service::telemetry::metrics::ScopeLabels {
                scope: scope.to_owned(),
            })
            .get()
    };
    // Only this test overflows a budget in this test binary (the registry is the process's).
    assert_eq!((overflows("psp"), overflows("total")), (8, 1));
    running.stop().await;
}

fn post_form(
    path: &str,
    content_type: Option<&str>,
    body: &'static str,
) -> http::Request<http_body_util::Full<bytes::Bytes>> {
    let mut builder = http::Request::builder()
        .method(http::Method::POST)
        .uri(path)
        .header(http::header::HOST, "localhost");
    if let Some(t) = content_type {
        builder = builder.header(http::header::CONTENT_TYPE, t);
    }
    builder
        .body(http_body_util::Full::new(bytes::Bytes::from_static(
            body.as_bytes(),
        )))
        .expect("request")
}

#[tokio::test]
async fn a_method_override_in_a_form_body_never_reaches_a_rails_or_spring_upstream() {
    let up = upstream::start().await;
    let faces = in_memory(up.addr, "");
    for content_type in [
        Some("application/x-www-form-urlencoded"),
        Some("application/x-www-form-urlencoded; charset=UTF-8"),
    ] {
        let answer = in_memory::gateway(
            &faces,
            in_memory::chain_of("valid"),
            post_form("/v1/consents", content_type, "access=all&_method=DELETE"),
        )
        .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{content_type:?}");
    }
    assert_eq!(received(&up), 0);
    // An ordinary form is forwarded whole; a JSON body is never read as a form.
    for (content_type, body) in [
        (
            "application/x-www-form-urlencoded",
            "grant_type=client_credentials",
        ),
        ("application/json", r#"{"_method":"DELETE"}"#),
    ] {
        let answer = in_memory::gateway(
            &faces,
            in_memory::chain_of("valid"),
            post_form("/v1/consents", Some(content_type), body),
        )
        .await;
        assert_eq!(answer.status, StatusCode::OK, "{content_type}");
        let seen = up.received.lock().expect("lock").pop().expect("forwarded");
        assert_eq!(seen.body_bytes, body.len() as u64, "{content_type}");
    }
}
