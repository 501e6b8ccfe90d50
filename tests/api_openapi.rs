//! `docs/openapi.yaml` against the running endpoint: the real service on 127.0.0.1:0 with the
//! sandbox configuration answers real requests (every sandbox certificate, every error
//! status), and each answer must have a status the document declares for the operation, the
//! headers it declares, and a body that validates against the declared schema (JSON Schema
//! 2020-12, the dialect of OpenAPI 3.1). The 200 requests must satisfy the documented
//! parameters too, and the document's examples their schemas (the 200 examples are real
//! answers). The schemas are shown to reject wrong bodies, and the error codes of the
//! document, of the error table (`src/api/error.rs`, `src/check/report.rs`) and of
//! `docs/errors.md` are held equal.
//!
//! Statuses no request can produce here: 500 (`internal_error`) is checked on the error
//! table's own response.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::openapi::{DOC, OpenApi, violations};
use common::service::*;
use common::test_pki::{test_config, test_pki};
use common::*;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use psp_faces::api::{ApiError, PATH};
use serde_json::{Value, json};

const AUTH: &str = "Basic c2FuZGJveDpzYW5kYm94"; // sandbox:sandbox
/// The configured `checks.error_link_base` of the sandbox (the default).
const LINK_BASE: &str = "/docs/errors#";

// ---------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------

fn der(name: &str) -> Vec<u8> {
    load_cert(&test_pki().psp(name)).der
}

/// The sandbox certificates, by file name without `.pem`.
fn sandbox_certificates() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(test_pki().dir.join("psp"))
        .expect("certs/psp")
        .filter_map(|e| {
            let name = e.expect("entry").file_name().into_string().expect("utf-8");
            name.strip_suffix(".pem").map(str::to_owned)
        })
        .collect();
    names.sort();
    assert!(
        names.len() >= 13,
        "the sandbox has a certificate per scenario: {names:?}"
    );
    names
}

/// The jurisdiction that exercises a sandbox certificate: its passporting or host-register
/// scenario, else its home country.
fn jurisdiction_for(name: &str) -> &'static str {
    match name {
        "passport-out-xy" | "role-5" => "XY",
        "gb-tpr" | "obie-valid" => "GB",
        _ => "XX",
    }
}

/// Sends a request and checks the reply against the document; returns the reply and body.
async fn exchange(
    doc: &OpenApi,
    addr: std::net::SocketAddr,
    what: &str,
    method: Method,
    path_and_query: &str,
    headers: &[(&str, &str)],
) -> (Reply, Value) {
    let reply = send(addr, method, path_and_query, headers).await;
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let body = doc.conform(path, what, &reply);
    if reply.status == StatusCode::OK {
        doc.conform_request(path, query, headers);
    }
    (reply, body)
}

/// The one error of an error body, its `id` echoed in `x-request-id`, its `link` pointing at
/// an anchor of docs/errors.md; returns the code.
fn error_code(reply: &Reply, body: &Value, anchors: &BTreeSet<String>) -> String {
    let error = &body["errors"][0];
    let code = error["code"].as_str().expect("code").to_owned();
    assert_eq!(
        reply.headers["x-request-id"].to_str().expect("ascii"),
        error["id"].as_str().expect("id"),
        "the error id is the x-request-id"
    );
    assert_eq!(error["link"], format!("{LINK_BASE}{code}"));
    assert!(
        anchors.contains(&code),
        "docs/errors.md has no anchor {code}"
    );
    code
}

// ---------------------------------------------------------------------------------------
// The sources of error codes, read as text
// ---------------------------------------------------------------------------------------

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// (status, code) of the error table in `src/api/error.rs`: each code literal follows its
/// `StatusCode::…` line in `ApiError::parts`.
fn codes_in_error_rs() -> BTreeSet<(u16, String)> {
    let text = read("crates/psp-faces/src/api/error.rs");
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut out = BTreeSet::new();
    for pair in lines.windows(2) {
        let Some(constant) = pair[0]
            .strip_prefix("StatusCode::")
            .and_then(|s| s.strip_suffix(','))
        else {
            continue;
        };
        let code = pair[1]
            .strip_prefix('"')
            .and_then(|s| s.strip_suffix("\","))
            .unwrap_or_else(|| panic!("src/api/error.rs: no code after StatusCode::{constant}"));
        let status = match constant {
            "UNAUTHORIZED" => 401,
            "NOT_FOUND" => 404,
            "METHOD_NOT_ALLOWED" => 405,
            "TOO_MANY_REQUESTS" => 429,
            "SERVICE_UNAVAILABLE" => 503,
            "INTERNAL_SERVER_ERROR" => 500,
            other => panic!("src/api/error.rs uses StatusCode::{other}: add it here and to {DOC}"),
        };
        out.insert((status, code.to_owned()));
    }
    assert!(out.len() >= 10, "the error table was read: {out:?}");
    out
}

/// The `eIDAS.errors` codes of `ErrorCode::as_str` in `src/check/report.rs`.
fn codes_in_report_rs() -> BTreeSet<String> {
    let out: BTreeSet<String> = read("crates/psp-check/src/check/report.rs")
        .lines()
        .filter(|l| l.trim_start().starts_with("ErrorCode::"))
        .filter_map(|l| l.split_once("=> \"").map(|(_, rest)| rest))
        .map(|rest| rest.split('"').next().expect("literal").to_owned())
        .collect();
    assert!(out.len() >= 2, "ErrorCode::as_str was read: {out:?}");
    out
}

/// The `<a id="…"></a>` anchors of docs/errors.md, per `## ` section, with the text of the
/// table cell after the code (the status, in the check endpoint's table).
fn anchors_in_errors_md() -> BTreeMap<String, BTreeMap<String, String>> {
    let mut sections: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut section = String::new();
    for line in read("docs/errors.md").lines() {
        if let Some(title) = line.strip_prefix("## ") {
            section = title.to_owned();
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find("<a id=\"") {
            let after = &rest[start + "<a id=\"".len()..];
            let id = after.split('"').next().expect("anchor id").to_owned();
            let next_cell = line
                .split('|')
                .map(str::trim)
                .nth(2)
                .unwrap_or_default()
                .to_owned();
            let previous = sections
                .entry(section.clone())
                .or_default()
                .insert(id.clone(), next_cell);
            assert!(previous.is_none(), "docs/errors.md: anchor {id} twice");
            rest = after;
        }
    }
    sections
}

fn all_anchors() -> BTreeSet<String> {
    anchors_in_errors_md()
        .into_values()
        .flat_map(BTreeMap::into_keys)
        .collect()
}

/// Every variant of the error table. The `match` is exhaustive: a new variant does not
/// compile until it is listed here too.
fn every_api_error() -> Vec<ApiError> {
    let all = vec![
        ApiError::NotFound,
        ApiError::MethodNotAllowed,
        ApiError::AuthenticationMissing,
        ApiError::AuthenticationFailed,
        ApiError::RateLimited {
            retry_after_secs: 7,
        },
        ApiError::LoginAttemptsExceeded {
            retry_after_secs: 15,
        },
        ApiError::Busy {
            retry_after_secs: 1,
        },
        ApiError::SharedStateUnavailable,
        ApiError::AuditUnavailable,
        ApiError::ParameterMissing("eidas"),
        ApiError::ParameterInvalid {
            name: "jurisdiction",
            why: "the parameter appears more than once".to_owned(),
        },
        ApiError::JurisdictionInvalid("ZZ".to_owned()),
        ApiError::VersionInvalid("2".to_owned()),
        ApiError::CertificateInvalid("input is empty".to_owned()),
        ApiError::Internal,
    ];
    for e in &all {
        match e {
            ApiError::NotFound
            | ApiError::MethodNotAllowed
            | ApiError::AuthenticationMissing
            | ApiError::AuthenticationFailed
            | ApiError::RateLimited { .. }
            | ApiError::LoginAttemptsExceeded { .. }
            | ApiError::Busy { .. }
            | ApiError::SharedStateUnavailable
            | ApiError::AuditUnavailable
            | ApiError::ParameterMissing(_)
            | ApiError::ParameterInvalid { .. }
            | ApiError::JurisdictionInvalid(_)
            | ApiError::VersionInvalid(_)
            | ApiError::CertificateInvalid(_)
            | ApiError::Internal => {}
        }
    }
    all
}

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

#[test]
fn the_document_describes_the_endpoint_as_configured() {
    let doc = OpenApi::load();
    let all = doc.paths();
    assert!(all.iter().any(|p| p == "/v1/psp/eidas"), "{all:?}");
    assert!(all.iter().any(|p| p == "/v1/PSP/eIDAS"), "{all:?}");
    // Besides the endpoint's spellings, only the error documentation the links point at.
    let (paths, others): (Vec<String>, Vec<String>) =
        all.into_iter().partition(|p| p.eq_ignore_ascii_case(PATH));
    assert_eq!(
        others,
        [psp_faces::api::ERRORS_PATH],
        "other documented paths"
    );
    for p in &paths {
        assert!(p.eq_ignore_ascii_case(PATH), "{p} is not the endpoint");
        let item = doc.root["paths"][p].as_object().expect("path item");
        assert_eq!(item.keys().collect::<Vec<_>>(), ["get"], "{p}: GET only");
    }
    // Both spellings describe one operation.
    let mut first = doc.operation(&paths[0]);
    for p in &paths[1..] {
        let mut other = doc.operation(p);
        for op in [&mut first, &mut other] {
            let op = op.as_object_mut().expect("operation");
            for k in ["operationId", "summary", "description"] {
                op.remove(k);
            }
        }
        assert_eq!(first, other, "{p} differs from {}", paths[0]);
    }
    // HTTP Basic, required on every operation.
    let basic = &doc.root["components"]["securitySchemes"]["basicAuth"];
    assert_eq!(
        (&basic["type"], &basic["scheme"]),
        (&json!("http"), &json!("basic"))
    );
    assert_eq!(doc.root["security"], json!([{"basicAuth": []}]));
    for p in &paths {
        assert_eq!(
            doc.operation(p)["security"],
            json!([{"basicAuth": []}]),
            "{p}"
        );
    }
    // The documented limits are the configuration's defaults.
    let config = test_config(|t| t);
    let api = config.api.as_ref().expect("[api]");
    assert_eq!(
        doc.root["components"]["parameters"]["eidas"]["schema"]["maxLength"],
        json!(api.max_eidas_header_bytes),
        "eidas maxLength is api.max_eidas_header_bytes"
    );
    assert_eq!(api.max_eidas_header_bytes, 16 * 1024);
    assert_eq!(
        (api.rate_limit.requests, api.rate_limit.period_seconds),
        (15_000, 300)
    );
    assert_eq!(config.limits.resolve().max_header_bytes, 64 * 1024);
    assert_eq!(config.checks.error_link_base, LINK_BASE);
}

#[test]
fn the_documents_examples_conform_to_their_schemas() {
    let doc = OpenApi::load();
    let mut checked = 0;
    let mut check = |what: &str, schema: &Value, holder: &Value| {
        let mut values: Vec<Value> = holder.get("example").into_iter().cloned().collect();
        if let Some(examples) = holder.get("examples").and_then(Value::as_object) {
            values.extend(examples.values().map(|e| e["value"].clone()));
        }
        for value in values {
            let errors = violations(schema, &value);
            assert!(
                errors.is_empty(),
                "{what}: example {value} does not conform: {errors:?}"
            );
            checked += 1;
        }
    };
    for path in doc.paths() {
        let op = doc.operation(&path);
        for param in op["parameters"].as_array().into_iter().flatten() {
            let what = format!("{path} parameter {}", param["name"]);
            check(&what, &param["schema"], param);
        }
        for (status, response) in op["responses"].as_object().expect("responses") {
            for (media, content) in response["content"].as_object().into_iter().flatten() {
                let what = format!("{path} {status} {media}");
                check(&what, &content["schema"], content);
            }
        }
    }
    // Schema-level `examples` (JSON Schema annotations) of the component schemas.
    fn walk(node: &Value, path: &str, out: &mut Vec<(String, Value, Value)>) {
        let Value::Object(map) = node else { return };
        if let (Some(Value::Array(examples)), true) =
            (map.get("examples"), map.contains_key("type"))
        {
            for e in examples {
                out.push((path.to_owned(), node.clone(), e.clone()));
            }
        }
        for (k, v) in map {
            walk(v, &format!("{path}/{k}"), out);
        }
    }
    let mut schema_examples = Vec::new();
    walk(
        &doc.resolve(&doc.root["components"]["schemas"]),
        "",
        &mut schema_examples,
    );
    assert!(!schema_examples.is_empty());
    for (path, schema, example) in &schema_examples {
        let errors = violations(schema, example);
        assert!(
            errors.is_empty(),
            "{path}: example {example} does not conform: {errors:?}"
        );
    }
    assert!(checked >= 10, "examples checked: {checked}");
}

#[tokio::test]
async fn every_sandbox_certificate_answers_as_documented() {
    let doc = OpenApi::load();
    let anchors = all_anchors();
    let running = start(test_config(|t| t)).await;
    let addr = running.api.expect("api listening");

    // What the 200 bodies must have shown between them, so that every branch of the schema
    // met a real answer.
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut note = |body: &Value| {
        let data = &body["eIDAS"]["data"];
        seen.insert(format!("QTSPSource {}", data["QTSPSource"]));
        for field in ["pspSubjectName", "authNumber", "QTSPCommonName"] {
            if data[field].is_null() {
                seen.insert(format!("{field} null"));
            }
        }
        for e in body["eIDAS"]["errors"].as_array().into_iter().flatten() {
            seen.insert(format!("error {}", e["code"]));
        }
        for register in ["homeRegister", "hostRegister"] {
            let Some(block) = body.get(register) else {
                continue;
            };
            if block["ncaName"].is_null() {
                seen.insert(format!("{register} ncaName null"));
            }
            if block.get("warning").is_some() {
                seen.insert(format!("{register} warning"));
            }
            for entry in block["categoryEntries"].as_array().expect("entries") {
                seen.insert(format!("pspAuthStatus {}", entry["pspAuthStatus"]));
                for passport in ["passportOut", "passportIn"] {
                    if let Some(p) = entry.get(passport) {
                        seen.insert(passport.to_owned());
                        if p.get("countryCode").is_some() {
                            seen.insert(format!("{passport} countryCode"));
                        }
                    }
                }
            }
        }
    };

    let mut bodies: BTreeMap<(String, String), Value> = BTreeMap::new();
    let mut requests: Vec<(String, String, String)> = Vec::new();
    for name in sandbox_certificates() {
        let j = jurisdiction_for(&name);
        requests.push((name.clone(), "/v1/psp/eidas".to_owned(), j.to_owned()));
        requests.push((
            name.clone(),
            "/v1/PSP/eIDAS".to_owned(),
            j.to_ascii_lowercase(),
        ));
    }
    // Cross-border answers the scenarios above do not give: an EEA host register with no
    // inbound data, GB without temporary permissions, and an OBIE certificate outside GB.
    for (name, j) in [("valid", "XY"), ("valid", "GB"), ("obie-valid", "XX")] {
        requests.push((name.to_owned(), "/v1/psp/eidas".to_owned(), j.to_owned()));
    }
    for (name, path, j) in &requests {
        let eidas = STANDARD.encode(der(name));
        let what = format!("{name} at {path}?jurisdiction={j}");
        let (reply, body) = exchange(
            &doc,
            addr,
            &what,
            Method::GET,
            &format!("{path}?jurisdiction={j}"),
            &[
                ("authorization", AUTH),
                ("fi_reference_id", "PSDXX-TEST-999999"),
                ("version", "latest"),
                ("transaction_reference", "tx 42"),
                ("eidas", &eidas),
            ],
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK, "{what}");
        // Contract rule 1: a host block exactly when the jurisdiction is not home.
        let auth = body["eIDAS"]["data"]["authNumber"].as_str().expect("auth");
        let home = &auth[3..5];
        assert_eq!(
            body.get("hostRegister").is_some(),
            !home.eq_ignore_ascii_case(j),
            "{what}"
        );
        for e in body["eIDAS"]["errors"].as_array().into_iter().flatten() {
            let code = e["code"].as_str().expect("code");
            assert_eq!(e["link"], format!("{LINK_BASE}{code}"), "{what}");
            assert!(anchors.contains(code), "{what}: no anchor {code}");
        }
        note(&body);
        bodies.insert((name.clone(), j.to_ascii_uppercase()), body);
    }

    // The document's 200 examples are real answers.
    let examples = doc
        .response(PATH, StatusCode::OK, "200")
        .pointer("/content/application~1json/examples")
        .and_then(Value::as_object)
        .expect("200 examples")
        .clone();
    for (example, (name, j)) in [
        ("passportOut", ("passport-out-xy", "XY")),
        ("passportIn", ("gb-tpr", "GB")),
    ] {
        assert_eq!(
            examples[example]["value"],
            bodies[&(name.to_owned(), j.to_owned())],
            "the 200 example {example} is the answer for {name} in {j}"
        );
    }

    // Tolerated encodings of `eidas` and the other accepted header values.
    let pem = std::fs::read_to_string(test_pki().psp("valid")).expect("pem");
    let url_encoded_pem =
        percent_encoding::utf8_percent_encode(&pem, percent_encoding::NON_ALPHANUMERIC).to_string();
    let one_line = format!(
        "-----BEGIN CERTIFICATE----- {} -----END CERTIFICATE-----",
        STANDARD.encode(der("valid"))
    );
    for (what, eidas, version) in [
        ("URL-encoded PEM", url_encoded_pem.as_str(), "1"),
        ("PEM on one line", one_line.as_str(), "LATEST"),
    ] {
        let (reply, body) = exchange(
            &doc,
            addr,
            what,
            Method::GET,
            "/v1/psp/eidas?jurisdiction=xx",
            &[
                ("authorization", AUTH),
                ("fi_reference_id", "ref with spaces"),
                ("version", version),
                ("eidas", eidas),
            ],
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK, "{what}");
        assert_eq!(body["eIDAS"]["data"]["authNumber"], "PSDXX-TEST-000001");
    }

    // Certificates the sandbox does not have: no names at all (every nullable field null),
    // and a PSD2 auth number whose NCA has no register (home `ncaName` null, host not found).
    for (what, dn, j) in [
        (
            "no subject or issuer names",
            rcgen::DistinguishedName::new(),
            "XX",
        ),
        (
            "auth number of an unknown NCA",
            {
                let mut dn = rcgen::DistinguishedName::new();
                dn.push(rcgen::DnType::OrganizationName, "Unregistered PSP");
                dn.push(
                    rcgen::DnType::CustomDnType(vec![2, 5, 4, 97]),
                    rcgen::DnValue::Utf8String("PSDZZ-NONE-42".to_owned()),
                );
                dn
            },
            "XX",
        ),
    ] {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name = dn;
        let cert = params.self_signed(&key).expect("certificate");
        let eidas = STANDARD.encode(cert.der());
        let (reply, body) = exchange(
            &doc,
            addr,
            what,
            Method::GET,
            &format!("/v1/psp/eidas?jurisdiction={j}"),
            &[
                ("authorization", AUTH),
                ("fi_reference_id", "r"),
                ("eidas", &eidas),
            ],
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK, "{what}");
        assert_eq!(body["homeRegister"]["ncaName"], Value::Null, "{what}");
        note(&body);
    }

    let expected = [
        "QTSPSource \"EIDAS\"",
        "QTSPSource \"OBIE\"",
        "QTSPSource \"OBHD\"",
        "QTSPSource \"Unknown\"",
        "pspSubjectName null",
        "authNumber null",
        "QTSPCommonName null",
        "error \"crl_response_error\"",
        "error \"ocsp_response_error\"",
        "error \"issuer_key_not_found\"",
        "homeRegister ncaName null",
        "hostRegister ncaName null",
        "hostRegister warning",
        "pspAuthStatus \"Authorised\"",
        "pspAuthStatus \"Registered\"",
        "pspAuthStatus \"Unauthorised\"",
        "passportOut",
        "passportOut countryCode",
        "passportIn",
        "passportIn countryCode",
    ];
    let missing: Vec<_> = expected.iter().filter(|e| !seen.contains(**e)).collect();
    assert!(
        missing.is_empty(),
        "no 200 answer showed {missing:?}; seen {seen:?}"
    );
    running.stop().await;
}

#[tokio::test]
async fn every_error_status_answers_as_documented() {
    let doc = OpenApi::load();
    let anchors = all_anchors();
    let config = test_config(|t| t);
    let max_eidas = config.api.as_ref().expect("[api]").max_eidas_header_bytes;
    let max_head = config.limits.resolve().max_header_bytes;
    let running = start(config).await;
    let addr = running.api.expect("api listening");

    let valid = STANDARD.encode(der("valid"));
    let base = [
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
    let plus = |name: &'static str, value: &'static str| -> Vec<(&str, &str)> {
        let mut h = base.to_vec();
        h.push((name, value));
        h
    };
    let at_limit = "A".repeat(max_eidas);
    let over_limit = "A".repeat(max_eidas + 1);
    let long_reference = "r".repeat(257);
    let q = "/v1/psp/eidas?jurisdiction=XX";
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
            "unknown path",
            Method::GET,
            "/v1/psp/other?jurisdiction=XX",
            base.to_vec(),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "trailing slash",
            Method::GET,
            "/v1/psp/eidas/?jurisdiction=XX",
            base.to_vec(),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "POST to an unknown path",
            Method::POST,
            "/",
            vec![],
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "no jurisdiction",
            Method::GET,
            "/v1/psp/eidas",
            base.to_vec(),
            StatusCode::NOT_FOUND,
            "parameter_missing",
        ),
        (
            "empty jurisdiction",
            Method::GET,
            "/v1/psp/eidas?jurisdiction=",
            base.to_vec(),
            StatusCode::NOT_FOUND,
            "parameter_missing",
        ),
        (
            "jurisdiction twice",
            Method::GET,
            "/v1/psp/eidas?jurisdiction=XX&jurisdiction=XY",
            base.to_vec(),
            StatusCode::NOT_FOUND,
            "parameter_invalid",
        ),
        (
            "jurisdiction not a code",
            Method::GET,
            "/v1/psp/eidas?jurisdiction=XYZ",
            base.to_vec(),
            StatusCode::NOT_FOUND,
            "jurisdiction_invalid",
        ),
        (
            "jurisdiction EEA",
            Method::GET,
            "/v1/psp/eidas?jurisdiction=EEA",
            base.to_vec(),
            StatusCode::NOT_FOUND,
            "jurisdiction_invalid",
        ),
        (
            "jurisdiction not configured",
            Method::GET,
            "/v1/PSP/eIDAS?jurisdiction=US",
            base.to_vec(),
            StatusCode::NOT_FOUND,
            "jurisdiction_invalid",
        ),
        (
            "bad version",
            Method::GET,
            q,
            plus("version", "2"),
            StatusCode::NOT_FOUND,
            "version_invalid",
        ),
        (
            "version twice",
            Method::GET,
            q,
            [plus("version", "1"), vec![("version", "1")]].concat(),
            StatusCode::NOT_FOUND,
            "parameter_invalid",
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
            "fi_reference_id over 256",
            Method::GET,
            q,
            with_value(&base, "fi_reference_id", &long_reference),
            StatusCode::NOT_FOUND,
            "parameter_invalid",
        ),
        (
            "blank transaction_reference",
            Method::GET,
            q,
            plus("transaction_reference", " "),
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
            "empty eidas",
            Method::GET,
            q,
            with("eidas", ""),
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
            "eidas at its limit",
            Method::GET,
            q,
            with_value(&base, "eidas", &at_limit),
            StatusCode::NOT_FOUND,
            "certificate_invalid",
        ),
        (
            "eidas over its limit",
            Method::GET,
            q,
            with_value(&base, "eidas", &over_limit),
            StatusCode::NOT_FOUND,
            "parameter_invalid",
        ),
        (
            "eidas twice",
            Method::GET,
            q,
            [base.to_vec(), vec![("eidas", valid.as_str())]].concat(),
            StatusCode::NOT_FOUND,
            "parameter_invalid",
        ),
        (
            "Authorization twice",
            Method::GET,
            q,
            [base.to_vec(), vec![("authorization", AUTH)]].concat(),
            StatusCode::UNAUTHORIZED,
            "authentication_error",
        ),
        (
            "POST",
            Method::POST,
            q,
            base.to_vec(),
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            "PUT without credentials",
            Method::PUT,
            "/v1/PSP/eIDAS",
            vec![],
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            "DELETE",
            Method::DELETE,
            q,
            base.to_vec(),
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            "PATCH",
            Method::PATCH,
            q,
            base.to_vec(),
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            "OPTIONS",
            Method::OPTIONS,
            q,
            vec![],
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
    ];
    let mut seen = BTreeSet::new();
    let mut ids = BTreeSet::new();
    for (what, method, path, headers, status, code) in cases {
        let (reply, body) = exchange(&doc, addr, what, method, path, &headers).await;
        assert_eq!(reply.status, status, "{what}: {body}");
        assert_eq!(error_code(&reply, &body, &anchors), code, "{what}");
        assert!(
            ids.insert(body["errors"][0]["id"].to_string()),
            "{what}: ids are unique"
        );
        seen.insert((status.as_u16(), code.to_owned()));
    }
    // HEAD is refused like any other method; the reply has the headers and no body.
    let reply = send(addr, Method::HEAD, q, &base).await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
    let path = doc.documented_path("/v1/psp/eidas");
    doc.conform_headers(
        &doc.response(&path, reply.status, "HEAD"),
        "HEAD",
        reply.status,
        &reply.headers,
    );
    assert!(reply.body.is_empty(), "a HEAD reply has no body");

    // A request head over the HTTP layer's limit: 431 from the framing guard, with the
    // contract's body (checked against the document by `exchange`).
    let huge = "A".repeat(max_head + 1024);
    let (reply, body) = exchange(
        &doc,
        addr,
        "request head over the limit",
        Method::GET,
        q,
        &with_value(&base, "eidas", &huge),
    )
    .await;
    assert_eq!(reply.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert_eq!(
        error_code(&reply, &body, &anchors),
        "request_head_too_large"
    );
    seen.insert((431, "request_head_too_large".to_owned()));
    running.stop().await;

    // Every (status, code) of the document except the rate limits, the busy refusal and the
    // internal error was produced over HTTP here; the rate limits are produced in the tests
    // below, the busy refusal in tests/exhaustion.rs, the shared-state refusal in
    // tests/shared_state.rs (it needs Redis), the audit log's refusal in tests/audit_log.rs
    // (it needs a disk that fails), all of them from the table below.
    let mut expected = doc.endpoint_codes("/v1/psp/eidas");
    expected.remove(&(429, "rate_limit_exceeded".to_owned()));
    expected.remove(&(429, "login_attempts_exceeded".to_owned()));
    expected.remove(&(503, "server_busy".to_owned()));
    expected.remove(&(503, "shared_state_unavailable".to_owned()));
    expected.remove(&(503, "audit_log_unavailable".to_owned()));
    expected.remove(&(500, "internal_error".to_owned()));
    // A conforming HTTP client cannot send an ambiguous head: tests/limits.rs writes one by
    // hand to the endpoint and checks the answer.
    expected.remove(&(400, "request_framing_invalid".to_owned()));
    assert_eq!(seen, expected);
}

/// (what, method, path and query, headers, status, code)
type Case<'a> = (
    &'a str,
    Method,
    &'a str,
    Vec<(&'a str, &'a str)>,
    StatusCode,
    &'a str,
);

fn with_value<'a>(
    base: &[(&'a str, &'a str)],
    name: &'a str,
    value: &'a str,
) -> Vec<(&'a str, &'a str)> {
    let mut h: Vec<_> = base.iter().copied().filter(|(k, _)| *k != name).collect();
    h.push((name, value));
    h
}

#[tokio::test]
async fn the_rate_limit_answers_as_documented_on_every_path_and_method() {
    let doc = OpenApi::load();
    let anchors = all_anchors();
    let running = start(test_config(|t| {
        let limited = t.replace(
            "rate_limit = { requests = 15000, period_seconds = 300 }",
            "rate_limit = { requests = 2, period_seconds = 300 }",
        );
        assert_ne!(
            limited, t,
            "gateway.toml still has the contract's rate limit line"
        );
        limited
    }))
    .await;
    let addr = running.api.expect("api listening");
    let valid = STANDARD.encode(der("valid"));
    let headers = [
        ("authorization", AUTH),
        ("fi_reference_id", "r"),
        ("eidas", valid.as_str()),
    ];
    let q = "/v1/psp/eidas?jurisdiction=XX";
    let mut statuses = Vec::new();
    for (what, method, path, h) in [
        ("first", Method::GET, q, &headers[..]),
        (
            "second",
            Method::GET,
            "/v1/PSP/eIDAS?jurisdiction=XX",
            &headers[..],
        ),
        ("over the quota", Method::GET, q, &headers[..]),
        (
            "over the quota, other spelling",
            Method::GET,
            "/v1/PSP/eIDAS?jurisdiction=XX",
            &headers[..],
        ),
        (
            "over the quota, unknown path",
            Method::GET,
            "/elsewhere",
            &[][..],
        ),
        ("over the quota, POST", Method::POST, q, &[][..]),
    ] {
        let (reply, body) = exchange(&doc, addr, what, method, path, h).await;
        if reply.status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(error_code(&reply, &body, &anchors), "rate_limit_exceeded");
            let retry: u64 = reply.headers["retry-after"]
                .to_str()
                .expect("ascii")
                .parse()
                .expect("seconds");
            assert!(retry <= 300, "Retry-After {retry}");
        }
        statuses.push(reply.status.as_u16());
    }
    assert_eq!(statuses, [200, 200, 429, 429, 429, 429]);
    running.stop().await;
}

#[tokio::test]
async fn the_login_quota_answers_as_documented() {
    let doc = OpenApi::load();
    let anchors = all_anchors();
    let running = start(test_config(|t| {
        format!("{t}\n").replace(
            "rate_limit = { requests = 15000, period_seconds = 300 }\n",
            "rate_limit = { requests = 15000, period_seconds = 300 }\nfailed_logins = { per_source = 2 }\n",
        )
    }))
    .await;
    let addr = running.api.expect("api listening");
    let valid = STANDARD.encode(der("valid"));
    let q = "/v1/psp/eidas?jurisdiction=XX";
    let mut statuses = Vec::new();
    for auth in [
        "Basic c2FuZGJveDp3cm9uZw==", // sandbox:wrong
        "Basic bm9ib2R5OnNhbmRib3g=", // nobody:sandbox
        "Basic c2FuZGJveDp3cm9uZw==",
        "Basic c2FuZGJveDpzYW5kYm94", // sandbox:sandbox, not yet verified: refused too
    ] {
        let headers = [
            ("authorization", auth),
            ("fi_reference_id", "r"),
            ("eidas", valid.as_str()),
        ];
        let (reply, body) = exchange(&doc, addr, auth, Method::GET, q, &headers).await;
        if reply.status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(
                error_code(&reply, &body, &anchors),
                "login_attempts_exceeded"
            );
            let retry: u64 = reply.headers["retry-after"]
                .to_str()
                .expect("ascii")
                .parse()
                .expect("seconds");
            assert!((1..=300).contains(&retry), "Retry-After {retry}");
        }
        statuses.push(reply.status.as_u16());
    }
    assert_eq!(statuses, [401, 401, 429, 429]);
    running.stop().await;
}

#[tokio::test]
async fn every_error_of_the_table_conforms_to_its_status() {
    // The error table's own responses, the internal error included (no request produces it).
    let doc = OpenApi::load();
    let anchors = all_anchors();
    let mut produced = BTreeSet::new();
    for error in every_api_error() {
        let id = psp_server::new_request_id();
        let response = error.response(&id, LINK_BASE);
        let status = response.status();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let reply = Reply {
            status,
            headers,
            body,
        };
        let what = format!("{error:?}");
        let json = doc.conform(PATH, &what, &reply);
        let code = error_code(&reply, &json, &anchors);
        assert_eq!(code, error.code(), "{what}");
        produced.insert((status.as_u16(), code));
    }
    // The framing guard's refusals, written without hyper: each conforms too.
    for refusal in psp_server::framing::REFUSALS {
        let bytes = refusal.answer("7ef70f86-56d3-4c46-b029-0395cf848dfd", "/docs/errors#");
        let text = String::from_utf8(bytes).expect("text");
        let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
        let mut lines = head.split("\r\n");
        let status_line = lines.next().expect("status line");
        let status: StatusCode = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status");
        let mut headers = http::HeaderMap::new();
        for line in lines {
            let (name, value) = line.split_once(": ").expect("header");
            headers.append(
                http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
                http::HeaderValue::from_str(value).expect("value"),
            );
        }
        let reply = Reply {
            status,
            headers,
            body: bytes::Bytes::from(body.to_owned()),
        };
        let what = format!("{refusal:?}");
        let json = doc.conform(PATH, &what, &reply);
        produced.insert((status.as_u16(), error_code(&reply, &json, &anchors)));
    }
    assert_eq!(
        produced,
        doc.endpoint_codes("/v1/psp/eidas"),
        "the error table and {DOC} declare the same (status, code) pairs"
    );
}

#[test]
fn error_codes_agree_between_the_document_the_code_and_docs_errors_md() {
    let doc = OpenApi::load();
    // Refused by the HTTP layer's framing guard, on every path, before the endpoint runs
    // (src/server/framing.rs).
    let framing: BTreeSet<(u16, String)> = [
        (400, "request_framing_invalid".to_owned()),
        (431, "request_head_too_large".to_owned()),
    ]
    .into_iter()
    .collect();
    let endpoint = doc.endpoint_codes("/v1/psp/eidas");
    for p in doc.paths() {
        if p == psp_faces::api::ERRORS_PATH {
            // The error documentation can only be refused by the rate limit and the framing
            // guard.
            let mut expected = framing.clone();
            expected.insert((429, "rate_limit_exceeded".to_owned()));
            assert_eq!(doc.endpoint_codes(&p), expected, "{p}");
            continue;
        }
        assert_eq!(doc.endpoint_codes(&p), endpoint, "{p}");
    }
    assert!(
        endpoint.is_superset(&framing),
        "{DOC}: the framing refusals"
    );
    let endpoint: BTreeSet<(u16, String)> = endpoint.difference(&framing).cloned().collect();
    let certificate = doc.certificate_check_codes();

    // src/api/error.rs and src/check/report.rs.
    assert_eq!(endpoint, codes_in_error_rs(), "{DOC} vs src/api/error.rs");
    assert_eq!(
        certificate,
        codes_in_report_rs(),
        "{DOC} vs src/check/report.rs"
    );

    // docs/errors.md: the check endpoint's table (code and status), the certificate check
    // table, and no other anchor.
    let sections = anchors_in_errors_md();
    let endpoint_section = sections
        .iter()
        .find(|(title, _)| title.starts_with("Check endpoint"))
        .map(|(_, anchors)| anchors)
        .expect("docs/errors.md has a `## Check endpoint` section");
    let documented: BTreeSet<(u16, String)> = endpoint_section
        .iter()
        .map(|(code, status)| {
            let status = status
                .parse()
                .unwrap_or_else(|_| panic!("docs/errors.md: status of {code} is `{status}`"));
            (status, code.clone())
        })
        .collect();
    assert_eq!(
        endpoint, documented,
        "{DOC} vs docs/errors.md (check endpoint)"
    );
    let certificate_section: BTreeSet<String> = sections
        .iter()
        .find(|(title, _)| title.starts_with("Certificate check errors"))
        .map(|(_, anchors)| anchors.keys().cloned().collect())
        .expect("docs/errors.md has a `## Certificate check errors` section");
    assert_eq!(
        certificate, certificate_section,
        "{DOC} vs docs/errors.md (eIDAS.errors)"
    );

    // Nothing else: every code the document enumerates anywhere, and every anchor of
    // docs/errors.md, is one of the two lists.
    let framing_section: BTreeSet<(u16, String)> = sections
        .iter()
        .find(|(title, _)| title.starts_with("Refused before any face"))
        .map(|(_, anchors)| {
            anchors
                .iter()
                .map(|(code, status)| (status.parse().expect("status"), code.clone()))
                .collect()
        })
        .expect("docs/errors.md has a `## Refused before any face` section");
    assert_eq!(
        framing, framing_section,
        "docs/errors.md (framing refusals)"
    );
    let all: BTreeSet<String> = endpoint
        .iter()
        .chain(framing.iter())
        .map(|(_, c)| c.clone())
        .chain(certificate.iter().cloned())
        .collect();
    assert_eq!(doc.all_code_enums(), all, "codes enumerated in {DOC}");
    // The gateway's codes have anchors of their own, held to the gateway's error table by
    // src/gateway/dialect.rs; the external authorisers' own codes are held to their sources
    // below; every other anchor is one of the endpoint's lists.
    let endpoint_anchors: BTreeSet<String> = sections
        .iter()
        .filter(|(title, _)| {
            !title.starts_with("Gateway rejections") && !title.starts_with("External authorisers")
        })
        .flat_map(|(_, anchors)| anchors.keys().cloned())
        .collect();
    assert_eq!(endpoint_anchors, all, "anchors of docs/errors.md");
    let authoriser_sources = ["ext_authz/answer.rs", "forward_auth.rs"]
        .map(|file| {
            std::fs::read_to_string(root().join("crates/psp-faces/src").join(file)).expect(file)
        })
        .concat();
    let authoriser_anchors: Vec<&String> = sections
        .iter()
        .filter(|(title, _)| title.starts_with("External authorisers"))
        .flat_map(|(_, anchors)| anchors.keys())
        .collect();
    assert_eq!(authoriser_anchors.len(), 4, "{authoriser_anchors:?}");
    for code in authoriser_anchors {
        assert!(
            authoriser_sources.contains(&format!("\"{code}\"")),
            "docs/errors.md explains `{code}`, which no external authoriser answers"
        );
    }
}

// ---------------------------------------------------------------------------------------
// The validation has teeth
// ---------------------------------------------------------------------------------------

/// `body` changed at a JSON pointer: `Some(v)` sets (or adds) the value, `None` removes it.
fn mutated(body: &Value, pointer: &str, value: Option<Value>) -> Value {
    let mut body = body.clone();
    let (parent, key) = pointer.rsplit_once('/').expect("pointer");
    let parent = body
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("no {parent} in the body"));
    match (parent, value) {
        (Value::Object(map), Some(v)) => {
            map.insert(key.to_owned(), v);
        }
        (Value::Object(map), None) => {
            map.remove(key)
                .unwrap_or_else(|| panic!("no {pointer} to remove"));
        }
        (Value::Array(items), v) => {
            let i: usize = key.parse().expect("index");
            match v {
                Some(v) if i == items.len() => items.push(v),
                Some(v) => items[i] = v,
                None => {
                    items.remove(i);
                }
            }
        }
        (other, _) => panic!("{pointer}: parent is {other}"),
    }
    body
}

/// Asserts `schema` accepts `body` and rejects each mutation, with an error located at or
/// under the given instance path.
fn assert_rejects(schema: &Value, body: &Value, mutations: &[(&str, &str, Option<Value>, &str)]) {
    let errors = violations(schema, body);
    assert!(errors.is_empty(), "the unchanged body is valid: {errors:?}");
    for (what, pointer, value, at) in mutations {
        let wrong = mutated(body, pointer, value.clone());
        let errors = violations(schema, &wrong);
        assert!(
            !errors.is_empty(),
            "{what}: the schema accepted a wrong body:\n{wrong:#}"
        );
        assert!(
            errors.iter().any(|e| e.starts_with(&format!("at `{at}"))),
            "{what}: no error at `{at}`: {errors:#?}"
        );
    }
}

#[tokio::test]
async fn the_schemas_reject_wrong_bodies() {
    let doc = OpenApi::load();
    let running = start(test_config(|t| t)).await;
    let addr = running.api.expect("api listening");
    let check = |name: &'static str, j: &'static str| {
        let eidas = STANDARD.encode(der(name));
        async move {
            let reply = send(
                addr,
                Method::GET,
                &format!("/v1/psp/eidas?jurisdiction={j}"),
                &[
                    ("authorization", AUTH),
                    ("fi_reference_id", "r"),
                    ("eidas", &eidas),
                ],
            )
            .await;
            assert_eq!(reply.status, StatusCode::OK);
            reply.json()
        }
    };
    // Real bodies: a host register that found the PSP (GB temporary permissions) and one that
    // did not (passport out to XY).
    let host_found = check("gb-tpr", "GB").await;
    let host_not_found = check("passport-out-xy", "XY").await;
    // And one with eIDAS.errors: no revocation pointers in the certificate.
    let with_errors = check("no-revocation", "XX").await;
    let not_found = send(addr, Method::GET, "/nowhere", &[]).await;
    assert_eq!(not_found.status, StatusCode::NOT_FOUND);
    let not_found = not_found.json();
    running.stop().await;

    let ok = doc
        .response(PATH, StatusCode::OK, "200")
        .pointer("/content/application~1json/schema")
        .expect("200 schema")
        .clone();
    let entry = "/homeRegister/categoryEntries/0";
    assert_rejects(
        &ok,
        &with_errors,
        &[
            (
                "stray field in an eIDAS error",
                "/eIDAS/errors/0/id",
                Some(json!("x")),
                "/eIDAS/errors/0",
            ),
            (
                "unknown eIDAS error code",
                "/eIDAS/errors/0/code",
                Some(json!("crl_failed")),
                "/eIDAS/errors/0/code",
            ),
            (
                "empty eIDAS.errors",
                "/eIDAS/errors",
                Some(json!([])),
                "/eIDAS/errors",
            ),
        ],
    );
    assert_rejects(
        &ok,
        &host_found,
        &[
            (
                "missing validity flag",
                "/eIDAS/validity/notExpired",
                None,
                "/eIDAS/validity",
            ),
            ("missing homeRegister", "/homeRegister", None, ""),
            (
                "missing pspLegalName",
                &format!("{entry}/pspLegalName"),
                None,
                entry,
            ),
            (
                "missing eIDAS.data.authNumber",
                "/eIDAS/data/authNumber",
                None,
                "/eIDAS/data",
            ),
            ("stray top-level field", "/data", Some(json!({})), ""),
            (
                "stray field in a category entry",
                &format!("{entry}/roles"),
                Some(json!([7])),
                entry,
            ),
            (
                "stray field in eIDAS.data",
                "/eIDAS/data/serial",
                Some(json!("01")),
                "/eIDAS/data",
            ),
            (
                "stray field in passportIn",
                "/hostRegister/categoryEntries/0/passportIn/extra",
                Some(json!(1)),
                "/hostRegister/categoryEntries/0/passportIn",
            ),
            (
                "services as a string",
                &format!("{entry}/pspPaymentServices"),
                Some(json!("7,8")),
                &format!("{entry}/pspPaymentServices"),
            ),
            (
                "service number 9",
                &format!("{entry}/pspPaymentServices/2"),
                Some(json!(9)),
                &format!("{entry}/pspPaymentServices/2"),
            ),
            (
                "service as a string",
                &format!("{entry}/pspPaymentServices/0"),
                Some(json!("7")),
                &format!("{entry}/pspPaymentServices/0"),
            ),
            (
                "flag as a string",
                "/eIDAS/validity/validQTSP",
                Some(json!("true")),
                "/eIDAS/validity/validQTSP",
            ),
            (
                "ncaName a number",
                "/homeRegister/ncaName",
                Some(json!(42)),
                "/homeRegister",
            ),
            (
                "unknown pspAuthStatus",
                &format!("{entry}/pspAuthStatus"),
                Some(json!("Active")),
                &format!("{entry}/pspAuthStatus"),
            ),
            (
                "QTSPSource in the wrong case",
                "/eIDAS/data/QTSPSource",
                Some(json!("Eidas")),
                "/eIDAS/data/QTSPSource",
            ),
            (
                "lower-case country code",
                "/homeRegister/ncaCountryCode",
                Some(json!("xx")),
                "/homeRegister",
            ),
            (
                "home block typed Host",
                "/homeRegister/registerType",
                Some(json!("Host")),
                "/homeRegister",
            ),
            (
                "warning on a home block",
                "/homeRegister/warning",
                Some(json!(["w"])),
                "/homeRegister",
            ),
            (
                "passportIn on a home entry",
                &format!("{entry}/passportIn"),
                Some(json!({"paymentServices": [7]})),
                "/homeRegister",
            ),
            (
                "passportOut on a host entry",
                "/hostRegister/categoryEntries/0/passportOut",
                Some(json!({"countryCode": "GB", "paymentServices": [7]})),
                "/hostRegister",
            ),
            (
                "warning on a host that found the PSP",
                "/hostRegister/warning",
                Some(json!(["w"])),
                "/hostRegister",
            ),
            (
                "host entry without passportIn",
                "/hostRegister/categoryEntries/0/passportIn",
                None,
                "/hostRegister",
            ),
        ],
    );
    let home_entry = "/homeRegister/categoryEntries/0";
    assert_rejects(
        &ok,
        &host_not_found,
        &[
            (
                "not-found host with an NCA",
                "/hostRegister/ncaName",
                Some(json!("XY-TEST")),
                "/hostRegister",
            ),
            (
                "not-found host without warning",
                "/hostRegister/warning",
                None,
                "/hostRegister",
            ),
            (
                "warning not an array",
                "/hostRegister/warning",
                Some(json!("not found")),
                "/hostRegister",
            ),
            (
                "missing passportOut.countryCode",
                &format!("{home_entry}/passportOut/countryCode"),
                None,
                &format!("{home_entry}/passportOut"),
            ),
            (
                "empty passportOut services",
                &format!("{home_entry}/passportOut/paymentServices"),
                Some(json!([])),
                &format!("{home_entry}/passportOut/paymentServices"),
            ),
            (
                "hostRegister null",
                "/hostRegister",
                Some(Value::Null),
                "/hostRegister",
            ),
        ],
    );

    let error404 = doc
        .response(PATH, StatusCode::NOT_FOUND, "404")
        .pointer("/content/application~1json/schema")
        .expect("404 schema")
        .clone();
    let second = not_found["errors"][0].clone();
    assert_rejects(
        &error404,
        &not_found,
        &[
            ("missing id", "/errors/0/id", None, "/errors/0"),
            ("missing link", "/errors/0/link", None, "/errors/0"),
            (
                "stray field in the error",
                "/errors/0/status",
                Some(json!(404)),
                "/errors/0",
            ),
            ("stray top-level field", "/status", Some(json!(404)), ""),
            (
                "title a number",
                "/errors/0/title",
                Some(json!(404)),
                "/errors/0/title",
            ),
            (
                "id not a UUID",
                "/errors/0/id",
                Some(json!("42")),
                "/errors/0/id",
            ),
            (
                "a 401 code in a 404",
                "/errors/0/code",
                Some(json!("authentication_error")),
                "/errors/0/code",
            ),
            (
                "an eIDAS code in a 404",
                "/errors/0/code",
                Some(json!("crl_response_error")),
                "/errors/0/code",
            ),
            ("two errors", "/errors/1", Some(second), "/errors"),
            ("no errors", "/errors/0", None, "/errors"),
            ("errors an object", "/errors", Some(json!({})), "/errors"),
        ],
    );
}
