//! The gateway end to end: the real service on 127.0.0.1:0, a real rustls client presenting
//! the sandbox certificates, a recording upstream, and the sandbox CRL/OCSP responder.

mod common;

use std::time::Duration;

use common::test_pki::{config_for, serve_swappable, test_config, test_pki};
use common::tls_client::{self, Proto, ReqBody, get};
use common::upstream::{self, Upstream};
use common::*;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use psp_gateway::app::Running;

/// The sandbox configuration on the test PKI with the gateway in front of `upstream`, the
/// bank in `jurisdiction`, and `edit` applied.
async fn gateway(
    upstream: &Upstream,
    jurisdiction: &str,
    edit: impl FnOnce(String) -> String,
) -> Running {
    let config = test_config(|t| {
        edit(
            t.replace(
                "upstream = \"sandbox-echo\"",
                &format!(
                    "upstream = \"http://{}\"\nupstream_timeout_ms = 1000",
                    upstream.addr
                ),
            )
            .replace(
                "jurisdiction = \"XX\"",
                &format!("jurisdiction = \"{jurisdiction}\""),
            ),
        )
    });
    service::start(config).await
}

struct Reply {
    status: StatusCode,
    headers: http::HeaderMap,
    body: serde_json::Value,
    resumed: bool,
}

async fn call(running: &Running, psp: Option<&str>, proto: Proto, req: Request<ReqBody>) -> Reply {
    let config = tls_client::client_config(&test_pki().dir, psp, proto);
    call_with(running, config, proto, req).await
}

async fn call_with(
    running: &Running,
    config: std::sync::Arc<rustls::ClientConfig>,
    proto: Proto,
    req: Request<ReqBody>,
) -> Reply {
    let addr = running.gateway.expect("gateway listening");
    let (response, resumed) = tls_client::send(addr, config, proto, req).await;
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::String(
        String::from_utf8_lossy(&bytes).into_owned(),
    ));
    Reply {
        status,
        headers,
        body,
        resumed,
    }
}

fn bg_code(r: &Reply) -> &str {
    r.body["tppMessages"][0]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("not a Berlin Group body: {}", r.body))
}

#[tokio::test]
async fn a_valid_psp_is_forwarded_with_identity_headers_over_http1_and_http2() {
    let up = upstream::start().await;
    let running = gateway(&up, "XX", |t| t).await;
    for proto in [Proto::H1, Proto::H2] {
        let r = call(
            &running,
            Some("valid"),
            proto,
            get("/v1/accounts/123?withBalance=true"),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{proto:?}: {}", r.body);
        let seen = up.received.lock().expect("lock").pop().expect("forwarded");
        assert_eq!(seen.path, "/v1/accounts/123");
        let h = &seen.headers;
        assert_eq!(h["x-psp-auth-number"], "PSDXX-TEST-000001");
        assert_eq!(h["x-psp-name"], "Sandbox%20Valid%20PSP");
        assert_eq!(h["x-psp-services"], "1,2,3,4,5,6,7,8");
        assert!(h.contains_key("x-psp-check-id"));
        assert_eq!(h["x-forwarded-proto"], "https");
        assert_eq!(h["x-forwarded-for"], "127.0.0.1");
        // The certificate header is the presented certificate, URL-encoded PEM.
        let pem =
            percent_encoding::percent_decode_str(h["x-psp-certificate"].to_str().expect("ascii"))
                .decode_utf8()
                .expect("utf-8")
                .into_owned();
        let cert = psp_cert::cert::PspCertificate::parse(pem.as_bytes()).expect("a certificate");
        assert_eq!(cert.der, load_cert(&test_pki().psp("valid")).der);
    }
    running.stop().await;
}

#[tokio::test]
async fn spoofed_identity_and_client_certificate_headers_never_reach_the_upstream() {
    let up = upstream::start().await;
    let running = gateway(&up, "XX", |t| t).await;
    let spoofed = [
        ("x-psp-auth-number", "PSDXX-TEST-666666"),
        ("X-PSP-Auth-Number", "PSDXX-TEST-777777"),
        ("x-psp-name", "Evil"),
        ("x-psp-services", "1,2,3,4,5,6,7,8"),
        ("x-psp-certificate", "forged"),
        ("x-psp-check-id", "forged"),
        ("x-psp-report-only-rejection", "forged"),
        ("x-forwarded-client-cert", "Hash=abc"),
        ("client-cert", ":Zm9v:"),
        ("client-cert-chain", ":Zm9v:"),
        ("x-ssl-client-cert", "forged"),
        ("X-SSL-Client-S-DN", "CN=evil"),
        ("ssl-client-cert", "forged"),
        ("eidas", "forged"),
        ("x-forwarded-for", "6.6.6.6"),
    ];
    let mut req = get("/v1/accounts");
    for (k, v) in spoofed {
        req.headers_mut().append(
            http::HeaderName::from_bytes(k.as_bytes()).expect("name"),
            http::HeaderValue::from_static(v),
        );
    }
    let r = call(&running, Some("valid"), Proto::H1, req).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let seen = up.received.lock().expect("lock").pop().expect("forwarded");
    let h = &seen.headers;
    assert_eq!(h.get_all("x-psp-auth-number").iter().count(), 1);
    assert_eq!(h["x-psp-auth-number"], "PSDXX-TEST-000001");
    assert_eq!(h["x-psp-name"], "Sandbox%20Valid%20PSP");
    assert_ne!(h["x-psp-check-id"], "forged");
    assert_ne!(h["x-psp-certificate"], "forged");
    for gone in [
        "x-psp-report-only-rejection",
        "x-forwarded-client-cert",
        "client-cert",
        "client-cert-chain",
        "x-ssl-client-cert",
        "x-ssl-client-s-dn",
        "ssl-client-cert",
        "eidas",
    ] {
        assert!(!h.contains_key(gone), "{gone} reached the upstream");
    }
    assert_eq!(
        h["x-forwarded-for"], "127.0.0.1",
        "a client's X-Forwarded-For is not believed"
    );
    running.stop().await;
}

#[tokio::test]
async fn failing_scenarios_are_refused_in_the_routes_dialect() {
    let up = upstream::start().await;
    let running = gateway(&up, "XX", |t| t).await;
    let cases = [
        (
            Some("expired"),
            "/v1/accounts",
            StatusCode::UNAUTHORIZED,
            "CERTIFICATE_EXPIRED",
        ),
        (
            Some("revoked"),
            "/v1/accounts",
            StatusCode::UNAUTHORIZED,
            "CERTIFICATE_REVOKED",
        ),
        (
            Some("untrusted"),
            "/v1/accounts",
            StatusCode::UNAUTHORIZED,
            "CERTIFICATE_INVALID",
        ),
        (
            Some("tampered"),
            "/v1/accounts",
            StatusCode::UNAUTHORIZED,
            "CERTIFICATE_INVALID",
        ),
        (
            Some("no-revocation"),
            "/v1/accounts",
            StatusCode::UNAUTHORIZED,
            "CERTIFICATE_INVALID",
        ),
        (
            Some("unauthorised"),
            "/v1/accounts",
            StatusCode::FORBIDDEN,
            "ROLE_INVALID",
        ),
        (
            Some("roles-1-2"),
            "/v1/accounts",
            StatusCode::FORBIDDEN,
            "ROLE_INVALID",
        ),
        (
            Some("aisp"),
            "/v1/payments/sepa-credit-transfers",
            StatusCode::FORBIDDEN,
            "ROLE_INVALID",
        ),
        (
            None,
            "/v1/accounts",
            StatusCode::UNAUTHORIZED,
            "CERTIFICATE_MISSING",
        ),
        (
            Some("valid"),
            "/v2/unknown",
            StatusCode::NOT_FOUND,
            "RESOURCE_UNKNOWN",
        ),
    ];
    for (psp, path, status, code) in cases {
        let r = call(&running, psp, Proto::H2, get(path)).await;
        assert_eq!(r.status, status, "{psp:?} {path}: {}", r.body);
        assert_eq!(bg_code(&r), code, "{psp:?} {path}");
        let id = r.headers["x-request-id"].to_str().expect("ascii");
        let text = r.body["tppMessages"][0]["text"].as_str().expect("text");
        assert!(text.contains(id), "the check id is in the body: {text}");
    }
    // The AISP is fine on an accounts route.
    let r = call(&running, Some("aisp"), Proto::H1, get("/v1/accounts")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    // Refused calls never reach the upstream: only the permitted one did.
    assert_eq!(up.received.lock().expect("lock").len(), 1);
    running.stop().await;
}

#[tokio::test]
async fn uk_open_banking_and_contract_dialects() {
    let up = upstream::start().await;
    let running = gateway(&up, "XX", |t| {
        format!(
            "{t}\n[[gateway.routes]]\nprefix = \"/v1/accounts\"\nservices = [8]\ndialect = \"contract\"\n\n[[gateway.routes]]\nprefix = \"/open-banking/v3.1/aisp\"\nservices = [8]\ndialect = \"uk-open-banking\"\n"
        )
    })
    .await;
    let r = call(
        &running,
        Some("expired"),
        Proto::H1,
        get("/open-banking/v3.1/aisp/accounts"),
    )
    .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.body["Code"], "401");
    assert_eq!(
        r.body["Errors"][0]["ErrorCode"],
        "PSPGW.CERTIFICATE_EXPIRED"
    );
    assert_eq!(
        r.body["Id"],
        r.headers["x-request-id"].to_str().expect("ascii")
    );
    let r = call(&running, Some("expired"), Proto::H1, get("/v1/accounts")).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.body["errors"][0]["code"], "certificate_expired");
    for field in ["id", "code", "title", "link"] {
        assert!(r.body["errors"][0][field].is_string(), "{field}");
    }
    // Routes from the file replace the defaults: payments is no longer a route.
    let r = call(&running, Some("valid"), Proto::H1, get("/v1/payments")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    running.stop().await;
}

#[tokio::test]
async fn a_psp_passported_to_xy_is_allowed_there_for_the_passported_services_only() {
    let up = upstream::start().await;
    let running = gateway(&up, "XY", |t| t).await;
    let r = call(
        &running,
        Some("passport-out-xy"),
        Proto::H1,
        get("/v1/accounts"),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = call(
        &running,
        Some("passport-out-xy"),
        Proto::H1,
        get("/v1/payments"),
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(bg_code(&r), "ROLE_INVALID");
    let r = call(&running, Some("valid"), Proto::H1, get("/v1/accounts")).await;
    assert_eq!(
        r.status,
        StatusCode::FORBIDDEN,
        "valid is not passported to XY"
    );
    running.stop().await;
}

#[tokio::test]
async fn a_psp_with_uk_temporary_permissions_is_allowed_at_a_gb_bank() {
    let up = upstream::start().await;
    let running = gateway(&up, "GB", |t| t).await;
    let r = call(
        &running,
        Some("gb-tpr"),
        Proto::H1,
        get("/open-banking/v3.1/aisp/accounts"),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = call(
        &running,
        Some("passport-out-xy"),
        Proto::H1,
        get("/open-banking/v3.1/aisp/accounts"),
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(r.body["Errors"][0]["ErrorCode"], "PSPGW.ROLE_INVALID");
    running.stop().await;
}

/// Header mode: a load balancer on loopback terminates TLS and passes the certificate.
async fn header_mode(up: &Upstream, trusted: &str) -> Running {
    let config = test_config(|t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!(
                "upstream = \"http://{}\"\nidentity = \"header\"\nidentity_header = \"x-client-cert\"\ntrusted_proxies = [\"{trusted}\"]",
                up.addr
            ),
        )
        .replace(
            "tls = { cert = ",
            "# tls = { cert = ",
        )
    });
    service::start(config).await
}

#[tokio::test]
async fn header_mode_believes_the_certificate_header_only_from_a_trusted_proxy() {
    let up = upstream::start().await;
    let pem = std::fs::read_to_string(test_pki().psp("valid")).expect("pem");
    let escaped =
        percent_encoding::utf8_percent_encode(&pem, percent_encoding::NON_ALPHANUMERIC).to_string();
    for (trusted, status) in [
        ("127.0.0.1/32", StatusCode::OK),
        ("10.0.0.0/8", StatusCode::UNAUTHORIZED),
    ] {
        let running = header_mode(&up, trusted).await;
        let addr = running.gateway.expect("gateway");
        let reply = service::send(
            addr,
            Method::GET,
            "/v1/accounts",
            &[
                ("x-client-cert", escaped.as_str()),
                ("x-forwarded-for", "198.51.100.7"),
            ],
        )
        .await;
        assert_eq!(
            reply.status,
            status,
            "peer trusted as {trusted}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        if status == StatusCode::OK {
            let seen = up.received.lock().expect("lock").pop().expect("forwarded");
            assert_eq!(seen.headers["x-psp-auth-number"], "PSDXX-TEST-000001");
            assert!(
                !seen.headers.contains_key("x-client-cert"),
                "the LB header is not forwarded"
            );
            assert_eq!(seen.headers["x-forwarded-for"], "198.51.100.7, 127.0.0.1");
        } else {
            assert_eq!(
                reply.json()["tppMessages"][0]["code"],
                "CERTIFICATE_MISSING"
            );
        }
        running.stop().await;
    }
    assert_eq!(up.received.lock().expect("lock").len(), 0);
}

#[tokio::test]
async fn an_upstream_that_refuses_is_502_and_one_too_slow_is_504() {
    let up = upstream::start().await;
    let running = gateway(&up, "XX", |t| t).await;
    let r = call(&running, Some("valid"), Proto::H1, get("/v1/accounts/slow")).await;
    assert_eq!(r.status, StatusCode::GATEWAY_TIMEOUT, "{}", r.body);
    assert_eq!(bg_code(&r), "SERVICE_UNAVAILABLE");
    running.stop().await;

    // Nothing listens on the port of a listener that was bound and dropped.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = closed.local_addr().expect("addr");
    drop(closed);
    let config = test_config(|t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!("upstream = \"http://{addr}\""),
        )
    });
    let running = service::start(config).await;
    let r = call(&running, Some("valid"), Proto::H2, get("/v1/accounts")).await;
    assert_eq!(r.status, StatusCode::BAD_GATEWAY, "{}", r.body);
    assert_eq!(bg_code(&r), "SERVICE_UNAVAILABLE");
    running.stop().await;
}

#[tokio::test]
async fn a_revocation_takes_effect_on_a_resumed_tls_session_and_on_an_open_connection() {
    // A PKI of this test's own, whose responder can be told that `valid` is now revoked.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let responder_addr = listener.local_addr().expect("addr");
    let dir = std::env::temp_dir().join(format!("psp-gateway-revocation-{}", std::process::id()));
    psp_sandbox::generate_with_base_url(&dir, &format!("http://{responder_addr}/sandbox"))
        .expect("generate");
    let slot = serve_swappable(
        listener,
        psp_sandbox::SandboxResponder::load(&dir).expect("responder"),
    );
    let up = upstream::start().await;
    let config = config_for(&dir, |t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!("upstream = \"http://{}\"", up.addr),
        )
        .replace("ttl_seconds = 300", "ttl_seconds = 1")
        .replace(
            "allow_destinations = \"loopback\"",
            "allow_destinations = \"loopback\"\nocsp_max_ttl_secs = 1",
        )
    });
    let running = service::start(config).await;
    let client = tls_client::client_config(&dir, Some("valid"), Proto::H1);

    let first = call_with(&running, client.clone(), Proto::H1, get("/v1/accounts")).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    assert!(!first.resumed);
    // A keep-alive connection open across the revocation: the gateway parses its certificate
    // once, and must still check it on every request.
    let mut kept = tls_client::open_h1(running.gateway.expect("gateway"), client.clone()).await;
    let before = kept
        .send_request(get("/v1/accounts"))
        .await
        .expect("answer");
    assert_eq!(before.status(), StatusCode::OK);
    let _ = before.into_body().collect().await;

    // Revoke `valid` at the CA: the manifest says so, the responder reloads it.
    let manifest_path = dir.join("sandbox-pki.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).expect("manifest")).expect("json");
    let valid = manifest["psps"]
        .as_array_mut()
        .expect("psps")
        .iter_mut()
        .find(|p| p["scenario"] == "valid")
        .expect("valid");
    valid["revoked"] = serde_json::json!(true);
    valid["revocation_reason"] = serde_json::json!("keyCompromise");
    valid["revocation_time"] = serde_json::json!("2026-01-01T00:00:00Z");
    std::fs::write(
        &manifest_path,
        serde_json::to_vec_pretty(&manifest).expect("json"),
    )
    .expect("write");
    *slot.write().expect("lock") =
        std::sync::Arc::new(psp_sandbox::SandboxResponder::load(&dir).expect("reload"));

    // Past the result and OCSP cache lifetimes (1 s each here), the same client resumes its
    // TLS session, which skips the handshake's certificate verifier; the check still runs.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let second = call_with(&running, client, Proto::H1, get("/v1/accounts")).await;
    assert!(
        second.resumed,
        "the second connection resumed the TLS session"
    );
    assert_eq!(second.status, StatusCode::UNAUTHORIZED, "{}", second.body);
    assert_eq!(bg_code(&second), "CERTIFICATE_REVOKED");
    let after = kept
        .send_request(get("/v1/accounts"))
        .await
        .expect("answer");
    assert_eq!(
        after.status(),
        StatusCode::UNAUTHORIZED,
        "the same connection, after the revocation"
    );
    running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn header_mode_refuses_a_repeated_or_non_ascii_certificate_header_with_a_reason() {
    let up = upstream::start().await;
    let running = header_mode(&up, "127.0.0.1/32").await;
    let addr = running.gateway.expect("gateway");
    let pem = std::fs::read_to_string(test_pki().psp("valid")).expect("pem");
    let escaped =
        percent_encoding::utf8_percent_encode(&pem, percent_encoding::NON_ALPHANUMERIC).to_string();
    let with_latin = format!("{escaped}é");
    for (headers, says) in [
        (
            vec![
                ("x-client-cert", escaped.as_str()),
                ("x-client-cert", escaped.as_str()),
            ],
            "appears more than once",
        ),
        (
            vec![("x-client-cert", with_latin.as_str())],
            "not visible ASCII",
        ),
    ] {
        let reply = service::send(addr, Method::GET, "/v1/accounts", &headers).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
        let v = reply.json();
        assert_eq!(v["tppMessages"][0]["code"], "CERTIFICATE_INVALID", "{v}");
        assert!(v.to_string().contains(says), "{v}");
    }
    assert_eq!(up.received.lock().expect("lock").len(), 0);
    running.stop().await;
}

#[test]
fn an_identity_header_that_is_not_a_header_name_is_a_configuration_error() {
    let text = one_site_sandbox_toml()
        .replace(
            "upstream = \"sandbox-echo\"",
            "upstream = \"sandbox-echo\"\nidentity = \"header\"\nidentity_header = \"x client cert\"\ntrusted_proxies = [\"127.0.0.1/32\"]",
        );
    let err = psp_gateway::Config::from_toml(&text, std::path::Path::new("gateway.toml"), root())
        .expect_err("refused");
    assert!(
        err.to_string().contains("identity_header"),
        "names the key: {err}"
    );
}

/// docs/attacks/proxy-and-data.md O3: identity header names that the request's framing,
/// routing, client address, credentials or trace depend on, an underscore name, and one name
/// for two identity headers were accepted; each is a configuration error now.
#[test]
fn an_identity_header_named_after_a_header_the_request_depends_on_is_a_configuration_error() {
    for (key, name) in [
        ("auth_number", "content-length"),
        ("auth_number", "transfer-encoding"),
        ("auth_number", "Host"),
        ("auth_number", "x-forwarded-for"),
        ("auth_number", "authorization"),
        ("auth_number", "x_psp_auth"),
        ("auth_number", "x-psp-name"),
    ] {
        let text = one_site_sandbox_toml().replace(
            "upstream = \"sandbox-echo\"",
            &format!("upstream = \"sandbox-echo\"\nidentity_headers = {{ {key} = \"{name}\" }}"),
        );
        let err =
            psp_gateway::Config::from_toml(&text, std::path::Path::new("gateway.toml"), root())
                .expect_err(name);
        assert!(
            err.to_string().contains("identity_headers"),
            "{name}: {err}"
        );
    }
    let text = one_site_sandbox_toml().replace(
        "upstream = \"sandbox-echo\"",
        "upstream = \"sandbox-echo\"\nidentity_headers = { auth_number = \"x-bank-psp-id\" }",
    );
    assert!(
        psp_gateway::Config::from_toml(&text, std::path::Path::new("gateway.toml"), root()).is_ok(),
        "a name of the bank's own"
    );
}

/// `gateway.tls.session_resumption = false`: the same client's second connection is a full
/// handshake again (and is answered as the first).
#[tokio::test]
async fn with_resumption_off_every_connection_is_a_full_handshake() {
    let config = test_config(|t| {
        t.replace(
            "/server/key.pem\" }",
            "/server/key.pem\", session_resumption = false }",
        )
    });
    assert!(
        !config
            .gateway
            .as_ref()
            .and_then(|g| g.tls.as_ref())
            .expect("gateway TLS")
            .session_resumption,
        "the test configuration turned resumption off"
    );
    let running = service::start(config).await;
    let client = tls_client::client_config(&test_pki().dir, Some("valid"), Proto::H1);
    for _ in 0..2 {
        let r = call_with(&running, client.clone(), Proto::H1, get("/v1/accounts")).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert!(!r.resumed, "a full handshake");
    }
    running.stop().await;

    // The same client against the default configuration does resume: the test has teeth.
    let running = service::start(test_config(|t| t)).await;
    let client = tls_client::client_config(&test_pki().dir, Some("valid"), Proto::H1);
    let first = call_with(&running, client.clone(), Proto::H1, get("/v1/accounts")).await;
    let second = call_with(&running, client, Proto::H1, get("/v1/accounts")).await;
    assert!(!first.resumed && second.resumed);
    assert!(
        psp_service::telemetry::metrics::metrics()
            .client_chains
            .get()
            >= 1,
        "the shared chain is counted"
    );
    running.stop().await;
}

/// Two PSPs on keep-alive connections held open side by side, their requests interleaved:
/// the gateway parses each connection's chain once and shares parses between connections,
/// and neither may ever lend one PSP's identity (authorisation number, certificate header)
/// to the other's request.
#[tokio::test]
async fn interleaved_keep_alive_connections_of_two_psps_never_swap_identities() {
    let up = upstream::start().await;
    let running = gateway(&up, "XX", |t| t).await;
    let addr = running.gateway.expect("gateway");
    let dir = &test_pki().dir;
    let psps = [
        ("valid", "PSDXX-TEST-000001"),
        ("aisp", "PSDXX-TEST-000016"),
    ];
    let mut connections = Vec::new();
    for (psp, _) in psps {
        let client = tls_client::client_config(dir, Some(psp), Proto::H1);
        // Two connections each: the second shares the first's parse.
        connections.push((psp, tls_client::open_h1(addr, client.clone()).await));
        connections.push((psp, tls_client::open_h1(addr, client).await));
    }
    for round in 0..3 {
        for (psp, sender) in &mut connections {
            let response = sender
                .send_request(get("/v1/accounts"))
                .await
                .expect("answer");
            assert_eq!(response.status(), StatusCode::OK, "{psp}, round {round}");
            let _ = response.into_body().collect().await;
            let seen = up.received.lock().expect("lock").pop().expect("forwarded");
            let expected = psps.iter().find(|(p, _)| p == psp).expect("psp").1;
            assert_eq!(seen.headers["x-psp-auth-number"], expected, "{psp}");
            let pem = percent_encoding::percent_decode_str(
                seen.headers["x-psp-certificate"].to_str().expect("ascii"),
            )
            .decode_utf8()
            .expect("utf-8")
            .into_owned();
            let cert = psp_cert::cert::PspCertificate::parse(pem.as_bytes()).expect("certificate");
            assert_eq!(cert.der, load_cert(&test_pki().psp(psp)).der, "{psp}");
        }
    }
    running.stop().await;
}

/// Header mode behind a load balancer that keeps one connection open for many PSPs: the
/// identity is read from each request's header, never kept for the connection. A first
/// PSP's good certificate must not vouch for the next request on the same connection.
#[tokio::test]
async fn header_mode_never_keeps_one_requests_identity_for_the_next_on_its_connection() {
    let up = upstream::start().await;
    let faces = common::in_memory::faces(&test_config(|t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!(
                "upstream = \"http://{}\"\nidentity = \"header\"\nidentity_header = \"x-client-cert\"\ntrusted_proxies = [\"127.0.0.1/32\"]",
                up.addr
            ),
        )
        .replace("tls = { cert = ", "# tls = { cert = ")
    }));
    let escaped = |name: &str| {
        let pem = std::fs::read_to_string(test_pki().psp(name)).expect("pem");
        percent_encoding::utf8_percent_encode(&pem, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    let connection = common::in_memory::connection(None);
    let request = |header: Option<String>| {
        let mut request = common::in_memory::request("GET", "/v1/accounts");
        if let Some(value) = header {
            request
                .headers_mut()
                .insert("x-client-cert", value.parse().expect("header value"));
        }
        request
    };
    let first =
        common::in_memory::gateway_on(&faces, &connection, request(Some(escaped("valid")))).await;
    assert_eq!(first.status, StatusCode::OK);
    let second =
        common::in_memory::gateway_on(&faces, &connection, request(Some(escaped("expired")))).await;
    assert_eq!(second.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        second.json()["tppMessages"][0]["code"],
        "CERTIFICATE_EXPIRED"
    );
    let third = common::in_memory::gateway_on(&faces, &connection, request(None)).await;
    assert_eq!(third.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        third.json()["tppMessages"][0]["code"],
        "CERTIFICATE_MISSING"
    );
    assert_eq!(
        up.received.lock().expect("lock").len(),
        1,
        "only the first forwarded"
    );
}
