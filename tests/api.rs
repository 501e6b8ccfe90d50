//! `GET /v1/psp/eidas` over real HTTP, the service on 127.0.0.1:0 with the sandbox
//! configuration.

mod common;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use common::in_memory;
use common::service::*;
use common::test_pki::{test_config, test_pki};
use common::*;
use http::{Method, StatusCode};
use psp_gateway::app::Faces;
use psp_service::revocation::RevocationChecker;
use psp_service::service::{CheckService, ReferenceData, Revocation};

const AUTH: &str = "Basic c2FuZGJveDpzYW5kYm94"; // sandbox:sandbox

fn der(name: &str) -> Vec<u8> {
    load_cert(&test_pki().psp(name)).der
}

fn b64(name: &str) -> String {
    STANDARD.encode(der(name))
}

/// A check through the endpoint's handler in memory (the listener plays no part in what
/// these tests assert).
async fn check_in(faces: &Faces, eidas: &str, jurisdiction: &str) -> Reply {
    in_memory::api(
        faces,
        Method::GET,
        &format!("/v1/psp/eidas?jurisdiction={jurisdiction}"),
        &[
            ("authorization", AUTH),
            ("fi_reference_id", "PSDXX-TEST-999999"),
            ("version", "latest"),
            ("eidas", eidas),
        ],
    )
    .await
}

async fn check(addr: std::net::SocketAddr, eidas: &str, jurisdiction: &str) -> Reply {
    send(
        addr,
        Method::GET,
        &format!("/v1/psp/eidas?jurisdiction={jurisdiction}"),
        &[
            ("authorization", AUTH),
            ("fi_reference_id", "PSDXX-TEST-999999"),
            ("version", "latest"),
            ("eidas", eidas),
        ],
    )
    .await
}

/// The body the checking service gives for the same certificate and jurisdiction, outside
/// any HTTP: the endpoint must add nothing and lose nothing.
async fn expected_body(name: &str, jurisdiction: &str) -> serde_json::Value {
    let config = test_config(|t| t);
    let service = CheckService::new(
        ReferenceData::load(&config.data_sources(), 1, time::OffsetDateTime::now_utc())
            .expect("reference data"),
        Revocation::Fetch(RevocationChecker::new(&config.revocation).expect("revocation")),
        std::time::Duration::ZERO,
        1,
    );
    let cert = load_cert(&test_pki().psp(name));
    let report = service
        .check(
            std::sync::Arc::new(cert),
            std::sync::Arc::new(Vec::new()),
            cc(jurisdiction),
            time::OffsetDateTime::now_utc(),
        )
        .await;
    serde_json::to_value(report.to_wire(&config.checks.error_link_base)).expect("json")
}

/// (scenario, jurisdiction, [validQTSP, validSignature, notRevoked, notExpired], host block)
type Scenario = (&'static str, &'static str, [bool; 4], bool);

/// The contract's sandbox table; the four flags in the contract's order.
const SCENARIOS: &[Scenario] = &[
    ("valid", "xx", [true, true, true, true], false),
    ("unauthorised", "XX", [true, true, true, true], false),
    ("roles-1-2", "XX", [true, true, true, true], false),
    ("expired", "XX", [true, true, true, false], false),
    ("untrusted", "XX", [false, false, false, true], false),
    ("revoked", "XX", [true, true, false, true], false),
    ("no-revocation", "XX", [true, true, false, true], false),
    ("tampered", "XX", [true, false, false, true], false),
    ("passport-out-xy", "XY", [true, true, true, true], true),
    ("gb-tpr", "gb", [true, true, true, true], true),
    ("role-5", "XY", [true, true, true, true], true),
    ("obie-valid", "GB", [true, true, true, true], false),
    ("obhd-valid", "XX", [true, true, true, true], false),
    ("ecdsa", "XX", [true, true, true, true], false),
    ("qseal", "XX", [true, true, true, true], false),
];

#[tokio::test]
async fn every_sandbox_scenario_answers_as_the_contract_says() {
    let faces = in_memory::faces(&test_config(|t| t));
    for &(name, j, flags, host) in SCENARIOS {
        let reply = check_in(&faces, &b64(name), j).await;
        assert_eq!(reply.status, StatusCode::OK, "{name}");
        assert_eq!(reply.headers["content-type"], "application/json", "{name}");
        let v = reply.json();
        let validity = &v["eIDAS"]["validity"];
        for (flag, want) in ["validQTSP", "validSignature", "notRevoked", "notExpired"]
            .into_iter()
            .zip(flags)
        {
            assert_eq!(validity[flag], want, "{name}: {flag} in {v}");
        }
        assert_eq!(v.get("hostRegister").is_some(), host, "{name}");
        assert!(v.get("homeRegister").is_some(), "{name}");
        assert_eq!(
            v,
            expected_body(name, j).await,
            "{name}: the wire body is the checking service's report"
        );
        if flags.iter().all(|f| *f) {
            assert!(
                v["eIDAS"].get("errors").is_none(),
                "{name}: no errors when all is well"
            );
        }
    }
    // Spot checks against the contract's sandbox table.
    let v = check_in(&faces, &b64("unauthorised"), "XX").await.json();
    assert_eq!(
        v["homeRegister"]["categoryEntries"][0]["pspAuthStatus"],
        "Unauthorised"
    );
    let v = check_in(&faces, &b64("roles-1-2"), "XX").await.json();
    assert_eq!(
        v["homeRegister"]["categoryEntries"][0]["pspPaymentServices"],
        serde_json::json!([1, 2])
    );
    let v = check_in(&faces, &b64("untrusted"), "XX").await.json();
    assert_eq!(v["eIDAS"]["data"]["QTSPSource"], "Unknown");
    assert_eq!(v["eIDAS"]["data"]["QTSPJurisdiction"], "Unknown");
    let v = check_in(&faces, &b64("no-revocation"), "XX").await.json();
    let codes: Vec<_> = v["eIDAS"]["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e["code"].as_str().expect("code").to_owned())
        .collect();
    assert_eq!(codes, ["crl_response_error", "ocsp_response_error"]);
    let v = check_in(&faces, &b64("passport-out-xy"), "XY").await.json();
    assert_eq!(
        v["homeRegister"]["categoryEntries"][0]["passportOut"],
        serde_json::json!({"countryCode": "XY", "paymentServices": [8]})
    );
    assert_eq!(v["hostRegister"]["ncaName"], serde_json::Value::Null);
    assert!(v["hostRegister"]["warning"].is_array());
    let v = check_in(&faces, &b64("gb-tpr"), "GB").await.json();
    assert_eq!(
        v["hostRegister"]["categoryEntries"][0]["passportIn"]["paymentServices"],
        serde_json::json!([7, 8])
    );
    let v = check_in(&faces, &b64("obhd-valid"), "XX").await.json();
    assert_eq!(
        v["homeRegister"]["categoryEntries"][0]["categoryName"],
        "Private Domestic Bank"
    );
}

#[tokio::test]
async fn the_eidas_header_is_decoded_tolerantly() {
    let faces = in_memory::faces(&test_config(|t| t));
    let der = der("valid");
    let std = STANDARD.encode(&der);
    let pem_one_line = format!("-----BEGIN CERTIFICATE----- {std} -----END CERTIFICATE-----");
    let pem = std::fs::read_to_string(root().join("certs/psp/valid.pem")).expect("pem");
    let url_encoded_pem: String =
        percent_encoding::utf8_percent_encode(&pem, percent_encoding::NON_ALPHANUMERIC).to_string();
    let variants = [
        ("standard Base64", std.clone()),
        ("URL-safe without padding", URL_SAFE_NO_PAD.encode(&der)),
        ("unpadded", std.trim_end_matches('=').to_owned()),
        ("plus turned into space", std.replace('+', " ")),
        ("PEM armour on one line", pem_one_line),
        ("URL-encoded PEM", url_encoded_pem),
        (
            "percent-encoded Base64",
            std.replace('+', "%2B").replace('/', "%2F"),
        ),
    ];
    assert!(std.contains('+'), "the test certificate exercises `+`");
    for (what, value) in variants {
        let reply = check_in(&faces, &value, "XX").await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "{what}: {value}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(
            reply.json()["eIDAS"]["data"]["authNumber"],
            "PSDXX-TEST-000001",
            "{what}"
        );
    }
}

fn error_code(reply: &Reply) -> String {
    let v = reply.json();
    let e = &v["errors"][0];
    for field in ["id", "code", "title", "link"] {
        assert!(e[field].is_string(), "{field} in {v}");
    }
    assert_eq!(
        reply.headers["x-request-id"].to_str().expect("ascii"),
        e["id"].as_str().expect("id"),
        "the id is echoed in x-request-id"
    );
    e["code"].as_str().expect("code").to_owned()
}

#[tokio::test]
async fn every_error_has_its_status_and_code() {
    let faces = in_memory::faces(&test_config(|t| t));
    let valid = b64("valid");
    let base = vec![
        ("authorization", AUTH),
        ("fi_reference_id", "ref-1"),
        ("eidas", valid.as_str()),
    ];
    let without = |name: &str| -> Vec<(&str, &str)> {
        base.iter().copied().filter(|(k, _)| *k != name).collect()
    };
    let with = |name: &'static str, value: &'static str| -> Vec<(&str, &str)> {
        let mut h = without(name);
        h.push((name, value));
        h
    };
    let q = "/v1/psp/eidas?jurisdiction=XX";
    /// (what, method, path and query, headers, status, code)
    type Case<'a> = (
        &'a str,
        Method,
        &'a str,
        Vec<(&'a str, &'a str)>,
        StatusCode,
        &'a str,
    );
    let cases: Vec<Case> = vec![
        (
            "no credentials",
            Method::GET,
            q,
            without("authorization"),
            StatusCode::UNAUTHORIZED,
            "authentication_error",
        ),
        (
            "wrong password",
            Method::GET,
            q,
            with("authorization", "Basic c2FuZGJveDp3cm9uZw=="),
            StatusCode::UNAUTHORIZED,
            "authentication_error",
        ),
        (
            "unknown user",
            Method::GET,
            q,
            with("authorization", "Basic bm9ib2R5OnNhbmRib3g="),
            StatusCode::UNAUTHORIZED,
            "authentication_error",
        ),
        (
            "not Basic",
            Method::GET,
            q,
            with("authorization", "Bearer abc"),
            StatusCode::UNAUTHORIZED,
            "authentication_error",
        ),
        (
            "no jurisdiction",
            Method::GET,
            "/v1/psp/eidas",
            base.clone(),
            StatusCode::NOT_FOUND,
            "parameter_missing",
        ),
        (
            "empty jurisdiction",
            Method::GET,
            "/v1/psp/eidas?jurisdiction=",
            base.clone(),
            StatusCode::NOT_FOUND,
            "parameter_missing",
        ),
        (
            "jurisdiction not a code",
            Method::GET,
            "/v1/psp/eidas?jurisdiction=XYZ",
            base.clone(),
            StatusCode::NOT_FOUND,
            "jurisdiction_invalid",
        ),
        (
            "jurisdiction not configured",
            Method::GET,
            "/v1/psp/eidas?jurisdiction=US",
            base.clone(),
            StatusCode::NOT_FOUND,
            "jurisdiction_invalid",
        ),
        (
            "jurisdiction twice",
            Method::GET,
            "/v1/psp/eidas?jurisdiction=XX&jurisdiction=XY",
            base.clone(),
            StatusCode::NOT_FOUND,
            "parameter_invalid",
        ),
        (
            "no eidas",
            Method::GET,
            q,
            without("eidas"),
            StatusCode::NOT_FOUND,
            "parameter_missing",
        ),
        (
            "eidas not a certificate",
            Method::GET,
            q,
            with("eidas", "bm90IGEgY2VydGlmaWNhdGU="),
            StatusCode::NOT_FOUND,
            "certificate_invalid",
        ),
        (
            "eidas garbage",
            Method::GET,
            q,
            with("eidas", "!!!"),
            StatusCode::NOT_FOUND,
            "certificate_invalid",
        ),
        (
            "no fi_reference_id",
            Method::GET,
            q,
            without("fi_reference_id"),
            StatusCode::NOT_FOUND,
            "parameter_missing",
        ),
        (
            "blank fi_reference_id",
            Method::GET,
            q,
            with("fi_reference_id", " "),
            StatusCode::NOT_FOUND,
            "parameter_missing",
        ),
        (
            "bad version",
            Method::GET,
            q,
            with("version", "2"),
            StatusCode::NOT_FOUND,
            "version_invalid",
        ),
        (
            "POST",
            Method::POST,
            q,
            base.clone(),
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            "DELETE",
            Method::DELETE,
            q,
            base.clone(),
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            "unknown path",
            Method::GET,
            "/v1/psp/other?jurisdiction=XX",
            base.clone(),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
    ];
    let mut ids = std::collections::HashSet::new();
    for (what, method, path, headers, status, code) in cases {
        let reply = in_memory::api(&faces, method.clone(), path, &headers).await;
        assert_eq!(
            reply.status,
            status,
            "{what}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(error_code(&reply), code, "{what}");
        assert!(
            ids.insert(
                reply.json()["errors"][0]["id"]
                    .as_str()
                    .expect("id")
                    .to_owned()
            ),
            "{what}: ids are unique"
        );
        if status == StatusCode::METHOD_NOT_ALLOWED {
            assert_eq!(reply.headers["allow"], "GET", "{what}");
        }
        if status == StatusCode::UNAUTHORIZED {
            assert!(reply.headers.contains_key("www-authenticate"), "{what}");
        }
    }
    // An oversized eidas header.
    let big = "A".repeat(17 * 1024);
    let reply = in_memory::api(&faces, Method::GET, q, &with_owned(&base, "eidas", &big)).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(error_code(&reply), "parameter_invalid");
    // version `1` and absent are accepted.
    for v in [Some("1"), Some("latest"), None] {
        let mut h = base.clone();
        if let Some(v) = v {
            h.push(("version", v));
        }
        assert_eq!(
            in_memory::api(&faces, Method::GET, q, &h).await.status,
            StatusCode::OK,
            "{v:?}"
        );
    }
}

fn with_owned<'a>(
    base: &[(&'a str, &'a str)],
    name: &'a str,
    value: &'a str,
) -> Vec<(&'a str, &'a str)> {
    let mut h: Vec<_> = base.iter().copied().filter(|(k, _)| *k != name).collect();
    h.push((name, value));
    h
}

#[tokio::test]
async fn both_path_spellings_answer() {
    let faces = in_memory::faces(&test_config(|t| t));
    let valid = b64("valid");
    for path in ["/v1/psp/eidas", "/v1/PSP/eIDAS", "/V1/Psp/EIDAS"] {
        let reply = in_memory::api(
            &faces,
            Method::GET,
            &format!("{path}?jurisdiction=xx"),
            &[
                ("authorization", AUTH),
                ("fi_reference_id", "r"),
                ("eidas", &valid),
            ],
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
    }
}

#[tokio::test]
async fn the_rate_limit_applies_per_source_and_a_spoofed_forwarded_for_does_not_help() {
    let config = test_config(|t| {
        t.replace(
            "rate_limit = { requests = 15000, period_seconds = 300 }",
            "rate_limit = { requests = 3, period_seconds = 300 }",
        )
    });
    let running = start(config).await;
    let addr = running.api.expect("api listening");
    let valid = b64("valid");
    let headers = |xff: &'static str| -> Vec<(&'static str, String)> {
        vec![
            ("authorization", AUTH.to_owned()),
            ("fi_reference_id", "r".to_owned()),
            ("eidas", valid.clone()),
            ("x-forwarded-for", xff.to_owned()),
        ]
    };
    let mut statuses = Vec::new();
    for i in 0..5 {
        // Each request claims another client address; the peer is not a trusted proxy.
        let xff = [
            "198.51.100.1",
            "198.51.100.2",
            "198.51.100.3",
            "198.51.100.4",
            "198.51.100.5",
        ][i];
        let h = headers(xff);
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let reply = send(addr, Method::GET, "/v1/psp/eidas?jurisdiction=XX", &h).await;
        if reply.status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(error_code(&reply), "rate_limit_exceeded");
            let retry: u64 = reply.headers["retry-after"]
                .to_str()
                .expect("ascii")
                .parse()
                .expect("seconds");
            assert!((1..=300).contains(&retry), "Retry-After {retry}");
        }
        statuses.push(reply.status);
    }
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    running.stop().await;
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_forwarded_client_is_limited_not_the_proxy() {
    let config = test_config(|t| {
        t.replace(
            "rate_limit = { requests = 15000, period_seconds = 300 }",
            "rate_limit = { requests = 1, period_seconds = 300 }\ntrusted_proxies = [\"127.0.0.1/32\", \"::1/128\"]",
        )
    });
    let running = start(config).await;
    let addr = running.api.expect("api listening");
    let valid = b64("valid");
    let mut statuses = Vec::new();
    for xff in ["198.51.100.1", "198.51.100.2", "198.51.100.1"] {
        let reply = send(
            addr,
            Method::GET,
            "/v1/psp/eidas?jurisdiction=XX",
            &[
                ("authorization", AUTH),
                ("fi_reference_id", "r"),
                ("eidas", &valid),
                ("x-forwarded-for", xff),
            ],
        )
        .await;
        statuses.push(reply.status);
    }
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    running.stop().await;
}

#[tokio::test]
async fn an_ipv6_client_rotating_addresses_inside_its_64_shares_one_quota() {
    // Behind a trusted proxy, one IPv6 subscriber (a /64) tries a fresh address per request
    // to escape the per-source limit; another /64 keeps its own quota.
    let config = test_config(|t| {
        t.replace(
            "rate_limit = { requests = 15000, period_seconds = 300 }",
            "rate_limit = { requests = 2, period_seconds = 300 }\ntrusted_proxies = [\"127.0.0.1/32\", \"::1/128\"]",
        )
    });
    let running = start(config).await;
    let addr = running.api.expect("api listening");
    let valid = b64("valid");
    let mut statuses = Vec::new();
    for xff in [
        "2001:db8:1:2::1",
        "2001:db8:1:2:aaaa::2",
        "2001:db8:1:2:ffff:ffff:ffff:ffff",
        "2001:db8:1:3::1",
    ] {
        let reply = send(
            addr,
            Method::GET,
            "/v1/psp/eidas?jurisdiction=XX",
            &[
                ("authorization", AUTH),
                ("fi_reference_id", "r"),
                ("eidas", &valid),
                ("x-forwarded-for", xff),
            ],
        )
        .await;
        statuses.push(reply.status);
    }
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS,
            StatusCode::OK
        ]
    );
    running.stop().await;
}

#[tokio::test]
async fn the_admin_listener_reports_health_and_readiness() {
    let running = start(test_config(|t| t)).await;
    let admin = running.admin.expect("admin listening");
    assert_eq!(
        send(admin, Method::GET, "/healthz", &[]).await.status,
        StatusCode::OK
    );
    let ready = send(admin, Method::GET, "/readyz", &[]).await;
    assert_eq!(ready.status, StatusCode::OK);
    assert_eq!(ready.json()["ready"], true);
    running.stop().await;
}

#[tokio::test]
async fn error_links_resolve_to_the_error_documentation() {
    let running = start(test_config(|t| t)).await;
    let addr = running.api.expect("api listening");
    let refused = send(addr, Method::GET, "/v1/psp/eidas?jurisdiction=XX", &[]).await;
    let link = refused.json()["errors"][0]["link"]
        .as_str()
        .expect("link")
        .to_owned();
    let (path, anchor) = link.split_once('#').expect("a fragment");
    let doc = send(addr, Method::GET, path, &[]).await;
    assert_eq!(doc.status, StatusCode::OK, "{link}");
    assert!(
        doc.headers["content-type"]
            .to_str()
            .expect("ascii")
            .starts_with("text/markdown")
    );
    let text = String::from_utf8_lossy(&doc.body);
    assert!(
        text.contains(&format!("<a id=\"{anchor}\"></a>")),
        "{link} has its anchor"
    );
    running.stop().await;
}

/// An unauthenticated caller (no credentials, a wrong password, a malformed header) makes the
/// service fetch nothing: authentication comes before the certificate is even decoded, so
/// anyone on the network cannot aim the service's CRL and OCSP requests.
#[tokio::test]
async fn an_unauthenticated_caller_triggers_no_revocation_fetch() {
    let running = start(test_config(|t| t)).await;
    let api = running.api.expect("api");
    let eidas = b64("valid");
    for authorization in [
        None,
        Some("Basic c2FuZGJveDp3cm9uZw=="),
        Some("Basic !!!"),
        Some("Bearer x"),
    ] {
        let mut headers = vec![
            ("fi_reference_id", "PSDXX-TEST-999999"),
            ("eidas", eidas.as_str()),
        ];
        if let Some(a) = authorization {
            headers.push(("authorization", a));
        }
        let r = send(api, Method::GET, "/v1/psp/eidas?jurisdiction=XX", &headers).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{authorization:?}");
    }
    let stats = running
        .service
        .revocation()
        .expect("the service fetches")
        .stats();
    assert_eq!(
        (stats.ocsp, stats.crl),
        Default::default(),
        "no lookup, no fetch: {stats:?}"
    );
    // The same request, authenticated, does look its evidence up: the counters are live.
    let r = check(api, &eidas, "XX").await;
    assert_eq!(r.status, StatusCode::OK);
    let stats = running.service.revocation().expect("fetches").stats();
    assert_ne!((stats.ocsp, stats.crl), Default::default());
    running.stop().await;
}

/// One login attempt with `credentials` (`user:password`) from `source`, behind the trusted
/// proxy on 127.0.0.1.
async fn login_from(addr: std::net::SocketAddr, credentials: &str, source: &str) -> Reply {
    let authorization = format!("Basic {}", STANDARD.encode(credentials));
    send(
        addr,
        Method::GET,
        "/v1/psp/eidas?jurisdiction=XX",
        &[
            ("authorization", authorization.as_str()),
            ("fi_reference_id", "PSDXX-TEST-999999"),
            ("eidas", &b64("valid")),
            ("x-forwarded-for", source),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_flooding_wrong_passwords_for_a_name_never_locks_its_owner_out() {
    // Issue 22: twenty wrong passwords for `sandbox` from one address gave the owner 429 from
    // every other address, and one more every 0.5 s kept it so. The defaults:
    // 10 failures per name and source, 20 per name from all sources (then only slowed).
    let config = test_config(|t| {
        t.replace(
            "rate_limit = { requests = 15000, period_seconds = 300 }",
            "rate_limit = { requests = 15000, period_seconds = 300 }\ntrusted_proxies = [\"127.0.0.1/32\"]",
        )
    });
    let running = start(config).await;
    let addr = running.api.expect("api listening");
    let strangers = ["203.0.113.1", "203.0.113.2", "203.0.113.3"];
    for stranger in strangers {
        for i in 0..10 {
            let reply = login_from(addr, &format!("sandbox:guess{i}"), stranger).await;
            assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{stranger} try {i}");
        }
    }
    // 30 failures for the name: it is under attack. Each stranger's own address is refused
    // for it, at once, however long the stranger goes on.
    for round in 0..5 {
        for stranger in strangers {
            let reply = login_from(addr, "sandbox:guess", stranger).await;
            assert_eq!(
                reply.status,
                StatusCode::TOO_MANY_REQUESTS,
                "{stranger} round {round}"
            );
            assert_eq!(error_code(&reply), "login_attempts_exceeded");
            assert!(reply.headers.contains_key("retry-after"));
        }
        // The owner, from an address that has not failed for the name, gets in.
        let owner = format!("192.0.2.{}", round + 10);
        let reply = login_from(addr, "sandbox:sandbox", &owner).await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "the owner from {owner}, round {round}"
        );
    }
    running.stop().await;
}
