//! Route confusion (docs/design.md section 5): the gateway routes on the normalised path and the
//! upstream receives exactly that path; a path whose meaning depends on the receiver's decoder
//! is refused with 400 and never forwarded. The upstream here is raw: it records the request
//! line byte for byte, so nothing between the gateway and the assertion can repair a path.

mod common;

use common::service;
use common::test_pki::{test_config, test_pki};
use common::tls_client::{self, Proto};
use common::upstream::{self, RawUpstream};
use http::StatusCode;
use http_body_util::BodyExt;
use psp_gateway::app::Running;

/// The sandbox PSP registered for account information (service 8) only.
const AISP: &str = "aisp";

async fn gateway(upstream: &RawUpstream, edit: impl FnOnce(String) -> String) -> Running {
    let config = test_config(|t| {
        edit(t.replace(
            "upstream = \"sandbox-echo\"",
            &format!(
                "upstream = \"http://{}\"\nupstream_timeout_ms = 2000",
                upstream.addr
            ),
        ))
    });
    service::start(config).await
}

/// An answer read off the wire.
struct Answer {
    /// `None` when the connection closed without an HTTP answer.
    status: Option<u16>,
    text: String,
}

impl Answer {
    fn body(&self) -> serde_json::Value {
        let body = self.text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        serde_json::from_str(body).unwrap_or(serde_json::Value::Null)
    }

    /// The Berlin Group code of a gateway rejection.
    fn code(&self) -> String {
        self.body()["tppMessages"][0]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("not a Berlin Group body: {}", self.text))
            .to_owned()
    }
}

/// Writes `GET <target> HTTP/1.1` with `headers` over TLS, presenting `psp`'s certificate.
async fn raw_get(running: &Running, psp: &str, target: &[u8], headers: &[(&str, &str)]) -> Answer {
    let mut request = b"GET ".to_vec();
    request.extend_from_slice(target);
    request.extend_from_slice(b" HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n");
    for (k, v) in headers {
        request.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    request.extend_from_slice(b"\r\n");
    let config = tls_client::client_config(&test_pki().dir, Some(psp), Proto::H1);
    let addr = running.gateway.expect("gateway listening");
    let (status, answer) = tls_client::send_raw(addr, config, &request).await;
    Answer {
        status,
        text: String::from_utf8_lossy(&answer).into_owned(),
    }
}

/// One HTTP/2 request through hyper's client (HTTP/2 carries the path in `:path`, which no
/// HTTP/1 request-line parser sees).
async fn h2_get(running: &Running, psp: &str, path: &str) -> (StatusCode, serde_json::Value) {
    let req = tls_client::get(path);
    let config = tls_client::client_config(&test_pki().dir, Some(psp), Proto::H2);
    let addr = running.gateway.expect("gateway listening");
    let (response, _) = tls_client::send(addr, config, Proto::H2, req).await;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Paths by which an AIS-only PSP tries to reach the payments route (PIS) or to make the
/// upstream read another path than the gateway routed on, with the answer each must get.
/// 403 `ROLE_INVALID`: the normalised path is on the payments route, where the PSP has no
/// permission. 400 `FORMAT_ERROR`: the path means different things to different decoders.
/// 404 `RESOURCE_UNKNOWN`: the normalised path is on no route.
const CONFUSING_PATHS: &[(&str, u16, &str)] = &[
    // Dot segments, in every spelling, resolved before routing.
    ("/v1/accounts/../payments", 403, "ROLE_INVALID"),
    ("/v1/accounts/%2e%2e/payments", 403, "ROLE_INVALID"),
    ("/v1/accounts/%2E%2E/payments", 403, "ROLE_INVALID"),
    ("/v1/accounts/.%2e/payments", 403, "ROLE_INVALID"),
    ("/v1/accounts/%2E./payments", 403, "ROLE_INVALID"),
    ("/v1/accounts/./../payments", 403, "ROLE_INVALID"),
    ("/v1/accounts/%2e/../payments", 403, "ROLE_INVALID"),
    (
        "/v1/accounts/123/../../payments/sepa-credit-transfers",
        403,
        "ROLE_INVALID",
    ),
    (
        "/v1/accounts/../payments?x=/v1/accounts",
        403,
        "ROLE_INVALID",
    ),
    // Encoded unreserved characters and repeated slashes.
    ("/v1/%70ayments", 403, "ROLE_INVALID"),
    ("/v1/%50ayments", 404, "RESOURCE_UNKNOWN"),
    ("//v1/payments", 403, "ROLE_INVALID"),
    ("/v1//payments", 403, "ROLE_INVALID"),
    // Separators and parameters whose meaning depends on the receiver.
    ("/v1/accounts%2f..%2fpayments", 400, "FORMAT_ERROR"),
    ("/v1/accounts%2F..%2Fpayments", 400, "FORMAT_ERROR"),
    ("/v1/accounts/..%5cpayments", 400, "FORMAT_ERROR"),
    ("/v1/accounts/..%5Cpayments", 400, "FORMAT_ERROR"),
    ("/v1/accounts;x=1", 400, "FORMAT_ERROR"),
    ("/v1/accounts/..;/payments", 400, "FORMAT_ERROR"),
    ("/v1/accounts%3Bx=1", 400, "FORMAT_ERROR"),
    // Double encoding, in any spelling.
    ("/v1/accounts/%252e%252e/payments", 400, "FORMAT_ERROR"),
    (
        "/v1/accounts/%25%32%65%25%32%65/payments",
        400,
        "FORMAT_ERROR",
    ),
    ("/v1/accounts%252fpayments", 400, "FORMAT_ERROR"),
    // Above the root.
    ("/../v1/accounts", 400, "FORMAT_ERROR"),
    ("/..", 400, "FORMAT_ERROR"),
    ("/v1/../../v1/accounts", 400, "FORMAT_ERROR"),
    ("/%2e%2e/v1/accounts", 400, "FORMAT_ERROR"),
    // Control characters and invalid encodings.
    ("/v1/accounts/%00/../../payments", 400, "FORMAT_ERROR"),
    (
        "/v1/accounts/%0d%0aX-Original-URL:%20/v1/payments",
        400,
        "FORMAT_ERROR",
    ),
    ("/v1/accounts/%7f", 400, "FORMAT_ERROR"),
    ("/v1/accounts/%zz", 400, "FORMAT_ERROR"),
    ("/v1/accounts/%4", 400, "FORMAT_ERROR"),
    ("/v1/accounts/%u002e%u002e/payments", 400, "FORMAT_ERROR"),
    // Decoders that are lenient with UTF-8, Unicode or Windows names.
    ("/v1/accounts/%C0%AE%C0%AE/payments", 400, "FORMAT_ERROR"),
    (
        "/v1/accounts/%EF%BC%8E%EF%BC%8E/payments",
        400,
        "FORMAT_ERROR",
    ),
    ("/v1/accounts%EF%BC%8Fpayments", 400, "FORMAT_ERROR"),
    ("/v1/accounts/..%20/payments", 400, "FORMAT_ERROR"),
    ("/v1/accounts/.../payments", 400, "FORMAT_ERROR"),
    // Normalised onto no route at all: refused, not forwarded.
    ("/v1/accounts/..", 404, "RESOURCE_UNKNOWN"),
    ("/v1/accounts/%2e%2e", 404, "RESOURCE_UNKNOWN"),
    ("/V1/PAYMENTS", 404, "RESOURCE_UNKNOWN"),
    // Not a path at all.
    ("*", 400, "FORMAT_ERROR"),
];

#[tokio::test]
async fn an_ais_only_psp_cannot_reach_payments_or_smuggle_a_path_past_the_route() {
    let up = upstream::start_raw().await;
    let running = gateway(&up, |t| t).await;
    for (path, status, code) in CONFUSING_PATHS {
        let answer = raw_get(&running, AISP, path.as_bytes(), &[]).await;
        assert_eq!(answer.status, Some(*status), "{path}: {}", answer.text);
        assert_eq!(answer.code(), *code, "{path}");
        assert_eq!(
            up.count(),
            0,
            "{path} reached the upstream as {:?}",
            up.targets().iter().map(|t| lossy(t)).collect::<Vec<_>>()
        );
    }
    // The same PSP is forwarded on its own route: the upstream is reachable.
    let answer = raw_get(&running, AISP, b"/v1/accounts", &[]).await;
    assert_eq!(answer.status, Some(200), "{}", answer.text);
    assert_eq!(up.targets(), vec![b"/v1/accounts".to_vec()]);
    running.stop().await;
}

#[tokio::test]
async fn over_http2_the_path_is_normalised_and_refused_the_same_way() {
    let up = upstream::start_raw().await;
    let running = gateway(&up, |t| t).await;
    for (path, status, code) in CONFUSING_PATHS {
        if *path == "*" {
            continue; // `*` is no `:path` for a GET; hyper's client would not send it
        }
        let (got, body) = h2_get(&running, AISP, path).await;
        assert_eq!(got.as_u16(), *status, "{path}: {body}");
        assert_eq!(body["tppMessages"][0]["code"], *code, "{path}");
    }
    assert_eq!(up.count(), 0);
    let (got, body) = h2_get(&running, AISP, "/v1//accounts/./%7E123").await;
    assert_eq!(got, StatusCode::OK, "{body}");
    assert_eq!(up.targets(), vec![b"/v1/accounts/~123".to_vec()]);
    running.stop().await;
}

#[tokio::test]
async fn raw_bytes_a_parser_may_reject_never_reach_the_upstream() {
    let up = upstream::start_raw().await;
    let running = gateway(&up, |t| t).await;
    // (target, the gateway's code; `None` where hyper's HTTP/1 parser refuses the request
    // line itself with a bare 400, before the gateway sees it).
    let cases: &[(&[u8], u16, Option<&str>)] = &[
        (b"/v1/accounts/..\\payments", 400, Some("FORMAT_ERROR")),
        (b"/v1/accounts\\..\\payments", 400, Some("FORMAT_ERROR")),
        (b"/v1/accounts/\x00/../../payments", 400, None),
        (b"/v1/accounts/a\x01b", 400, None),
        (b"/v1/accounts/a\tb", 400, None),
        (b"/v1/accounts/a\x7fb", 400, None),
        (b"/v1/accounts/a\x1b[2J", 400, None),
        (b"/v1/accounts/\xC0\xAE\xC0\xAE/payments", 400, None),
        (b"/v1/accounts/\xFF", 400, None),
        (
            b"https://localhost/v1/accounts/../payments",
            403,
            Some("ROLE_INVALID"),
        ),
    ];
    for (target, status, code) in cases {
        let answer = raw_get(&running, AISP, target, &[]).await;
        assert_eq!(
            answer.status,
            Some(*status),
            "{}: {}",
            lossy(target),
            answer.text
        );
        if let Some(code) = code {
            assert_eq!(answer.code(), *code, "{}", lossy(target));
        }
        assert_eq!(up.count(), 0, "{} reached the upstream", lossy(target));
    }
    running.stop().await;
}

#[tokio::test]
async fn the_upstream_receives_exactly_the_normalised_path_and_the_query_unchanged() {
    let up = upstream::start_raw().await;
    let running = gateway(&up, |t| t).await;
    let cases: &[(&[u8], &[u8])] = &[
        (b"/v1//accounts/./123", b"/v1/accounts/123"),
        (b"/v1/accounts/%7Euser", b"/v1/accounts/~user"),
        (b"/v1/accounts/caf%C3%A9?x=1", b"/v1/accounts/caf%C3%A9?x=1"),
        // Raw UTF-8 in the request line: percent-encoded once, never re-encoded.
        (
            b"/v1/accounts/caf\xC3\xA9?x=1",
            b"/v1/accounts/caf%C3%A9?x=1",
        ),
        (b"/v1/accounts/caf%c3%a9?x=1", b"/v1/accounts/caf%C3%A9?x=1"),
        (
            b"/v1/accounts/%E2%82%AC/\xE2\x82\xAC",
            b"/v1/accounts/%E2%82%AC/%E2%82%AC",
        ),
        (b"/v1/accounts/123/%2e", b"/v1/accounts/123/"),
        (b"/v1/accounts/123/x/..", b"/v1/accounts/123/"),
        (b"/v1/%61ccounts", b"/v1/accounts"),
        (b"//v1/accounts", b"/v1/accounts"),
        (b"/v1/accounts/a%2bb%40c%3F", b"/v1/accounts/a%2Bb%40c%3F"),
        (b"/v1/accounts/100%25", b"/v1/accounts/100%25"),
        (b"/v1/accounts/a..b/.c", b"/v1/accounts/a..b/.c"),
        // The query is not the route's business: it goes as it came.
        (
            b"/v1/accounts/123?q=%2e%2e/../x;y&r=%zz",
            b"/v1/accounts/123?q=%2e%2e/../x;y&r=%zz",
        ),
        // Absolute form: the authority is the gateway's business, the path is normalised.
        (
            b"https://localhost/v1/accounts/./1?a=b",
            b"/v1/accounts/1?a=b",
        ),
    ];
    for (sent, expected) in cases {
        let answer = raw_get(&running, AISP, sent, &[]).await;
        assert_eq!(answer.status, Some(200), "{}: {}", lossy(sent), answer.text);
        let targets = up.targets();
        let got = targets.last().expect("forwarded");
        assert_eq!(
            lossy(got),
            lossy(expected),
            "{} was forwarded as {}",
            lossy(sent),
            lossy(got)
        );
    }
    assert_eq!(up.count(), cases.len());
    running.stop().await;
}

/// A site that renames its identity headers (a reload, say) still removes a client's copy of
/// the default names, which an upstream written for them may still read.
#[tokio::test]
async fn a_clients_copy_of_a_default_identity_name_never_reaches_the_upstream_after_a_rename() {
    let up = upstream::start_raw().await;
    let running = gateway(&up, |t| {
        t.replace(
            "upstream_timeout_ms = 2000",
            "upstream_timeout_ms = 2000\nidentity_headers = { auth_number = \"x-bank-psp-id\", name = \"x-bank-psp-name\" }",
        )
    })
    .await;
    let headers = [
        ("x-psp-auth-number", "PSDXX-TEST-000001"),
        ("x-psp-name", "Forged"),
        ("x-bank-psp-id", "PSDXX-TEST-000001"),
    ];
    let answer = raw_get(&running, AISP, b"/v1/accounts", &headers).await;
    assert_eq!(answer.status, Some(200), "{}", answer.text);
    let seen = up.last_header_names();
    for gone in ["x-psp-auth-number", "x-psp-name"] {
        assert!(
            !seen.iter().any(|h| h == gone),
            "{gone} reached the upstream"
        );
    }
    // The configured name carries the gateway's own value, once.
    assert_eq!(
        seen.iter().filter(|h| *h == "x-bank-psp-id").count(),
        1,
        "{seen:?}"
    );
    running.stop().await;
}

#[tokio::test]
async fn path_and_method_override_headers_never_reach_the_upstream() {
    let up = upstream::start_raw().await;
    let running = gateway(&up, |t| {
        t.replace(
            "upstream_timeout_ms = 2000",
            "upstream_timeout_ms = 2000\nstrip_headers = [\"X-Bank-Route\"]",
        )
    })
    .await;
    let headers = [
        ("X-Original-URL", "/v1/payments"),
        ("x-original-url", "/v1/payments/sepa-credit-transfers"),
        ("X-Rewrite-URL", "/v1/payments"),
        ("X-HTTP-Method-Override", "DELETE"),
        ("X-HTTP-Method", "DELETE"),
        ("X-Method-Override", "DELETE"),
        ("x-method-override", "PUT"),
        ("X-Original-URI", "/v1/payments"),
        ("X-Forwarded-Uri", "/v1/payments"),
        ("X-Forwarded-Path", "/v1/payments"),
        ("X-Forwarded-Prefix", "/v1/payments"),
        ("X-Envoy-Original-Path", "/v1/payments"),
        ("X-Forwarded-Method", "DELETE"),
        ("X-Original-Method", "DELETE"),
        ("X-Envoy-Original-Method", "DELETE"),
        ("x-bank-route", "payments"),
        ("X-BANK-ROUTE", "payments"),
        ("x-request-id", "kept"),
    ];
    let answer = raw_get(&running, AISP, b"/v1/accounts", &headers).await;
    assert_eq!(answer.status, Some(200), "{}", answer.text);
    let seen = up.last_header_names();
    for gone in [
        "x-original-url",
        "x-rewrite-url",
        "x-http-method-override",
        "x-http-method",
        "x-method-override",
        "x-original-uri",
        "x-forwarded-uri",
        "x-forwarded-path",
        "x-forwarded-prefix",
        "x-envoy-original-path",
        "x-forwarded-method",
        "x-original-method",
        "x-envoy-original-method",
        "x-bank-route",
    ] {
        assert!(
            !seen.iter().any(|h| h == gone),
            "{gone} reached the upstream"
        );
    }
    assert!(
        seen.iter().any(|h| h == "x-request-id"),
        "other headers pass: {seen:?}"
    );
    assert_eq!(up.targets(), vec![b"/v1/accounts".to_vec()]);
    running.stop().await;
}

#[tokio::test]
async fn a_refused_path_is_answered_in_the_default_dialect() {
    let up = upstream::start_raw().await;
    for (dialect, field, code) in [
        (
            "uk-open-banking",
            "/Errors/0/ErrorCode",
            "UK.OBIE.Resource.InvalidFormat",
        ),
        ("contract", "/errors/0/code", "path_refused"),
        ("berlin-group", "/tppMessages/0/code", "FORMAT_ERROR"),
    ] {
        let running = gateway(&up, |t| {
            t.replace(
                "upstream_timeout_ms = 2000",
                &format!("upstream_timeout_ms = 2000\ndefault_dialect = \"{dialect}\""),
            )
        })
        .await;
        let answer = raw_get(&running, AISP, b"/v1/accounts%2f..%2fpayments", &[]).await;
        assert_eq!(answer.status, Some(400), "{}", answer.text);
        let body = answer.body();
        assert_eq!(
            body.pointer(field).and_then(|v| v.as_str()),
            Some(code),
            "{body}"
        );
        assert!(
            body.to_string().contains("encoded `/`"),
            "the body names the problem: {body}"
        );
        running.stop().await;
    }
    assert_eq!(up.count(), 0);
}

/// The sandbox configuration text (its one-site form) with `edit` applied, parsed and
/// validated.
fn parse(edit: impl FnOnce(String) -> String) -> Result<psp_gateway::Config, String> {
    let text = common::one_site_sandbox_toml();
    psp_gateway::Config::from_toml(
        &edit(text),
        std::path::Path::new("gateway.toml"),
        common::root(),
    )
    .map_err(|e| e.to_string())
}

/// `line` added to the `[gateway]` table.
fn in_gateway(line: &str) -> impl FnOnce(String) -> String + '_ {
    move |t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!("upstream = \"sandbox-echo\"\n{line}"),
        )
    }
}

#[test]
fn strip_headers_and_route_prefixes_are_validated_at_load() {
    parse(in_gateway("strip_headers = [\"x-foo\", \"X-Bar\"]")).expect("header names");
    let e = parse(in_gateway("strip_headers = [\"x foo\"]")).expect_err("not a header name");
    assert!(e.contains("strip_headers") && e.contains("x foo"), "{e}");
    let e = parse(in_gateway("strip_header = [\"x-foo\"]")).expect_err("unknown key");
    assert!(e.contains("strip_header"), "{e}");
    for (prefix, says) in [
        ("/v1/./accounts", "write `/v1/accounts`"),
        ("/v1/%61ccounts", "write `/v1/accounts`"),
        ("/v1//accounts", "write `/v1/accounts`"),
        ("/v1/accounts;x", "path parameter"),
        ("/v1/../accounts", "write `/accounts`"),
    ] {
        let e =
            parse(|t| format!("{t}\n[[gateway.routes]]\nprefix = \"{prefix}\"\nservices = [8]\n"))
                .expect_err(prefix);
        assert!(e.contains(prefix) && e.contains(says), "{prefix}: {e}");
    }
}

/// Issue 40 findings 4 and 5, over real HTTP/2 and raw HTTP/1.1: an HTTP/2 `:authority` with
/// user information or a port of 0 or over 65535 was accepted and forwarded as
/// `X-Forwarded-Host` (HTTP/1.1 refused the same `Host` with 400), and an HTTP/1.1 request
/// without `Host` was forwarded. One authority rule for both protocols now, and the upstream
/// sees none of them.
#[tokio::test]
async fn a_bad_http2_authority_and_an_http11_request_without_host_are_refused_before_the_upstream()
{
    let up = upstream::start_raw().await;
    let running = gateway(&up, |t| t).await;
    let addr = running.gateway.expect("gateway listening");
    for authority in ["evil.example@localhost", "localhost:99999", "localhost:0"] {
        let request = http::Request::builder()
            .uri(format!("https://{authority}/v1/accounts"))
            .body(tls_client::empty())
            .expect("request");
        let config = tls_client::client_config(&test_pki().dir, Some("valid"), Proto::H2);
        let (response, _) = tls_client::send(addr, config, Proto::H2, request).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{authority}");
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let body: serde_json::Value = serde_json::from_slice(&bytes).expect("JSON");
        assert_eq!(
            body["tppMessages"][0]["code"], "FORMAT_ERROR",
            "{authority}"
        );
        assert!(
            body["tppMessages"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("authority")),
            "{authority}: {body}"
        );
    }
    let config = tls_client::client_config(&test_pki().dir, Some("valid"), Proto::H1);
    let (status, answer) = tls_client::send_raw(
        addr,
        config,
        b"GET /v1/accounts HTTP/1.1\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, Some(400), "{}", lossy(&answer));
    assert!(
        lossy(&answer).contains("without a Host header"),
        "{}",
        lossy(&answer)
    );
    assert_eq!(up.count(), 0, "the upstream saw {:?}", up.request_lines());
    running.stop().await;
}
