//! The ext_authz face over real gRPC, put Checks by a client no one here wrote: Python's
//! `grpcio` with Envoy's own messages from PyPI (`envoy-data-plane`), driven by
//! `scripts/ext-authz/check.py` (installed by `scripts/test` into `target/ext-authz-venv`).
//! The face serves the repository's sandbox configuration on the test PKI: two sites, `xx`
//! (jurisdiction XX; server names `xx.localhost`, `localhost`) and `xy` (XY; `xy.localhost`),
//! each deciding as its built-in proxy would. Every test asserts the decision; next to each
//! "it is allowed" stands the request that tries to make it say yes when it must say no.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::ext_authz_client::{check, checks, checks_with};
use common::in_memory;
use common::test_pki::{test_pki, two_site_config};
use http_body_util::Full;
use psp_faces::ext_authz::{self, ExtAuthzConfig};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The identity headers of the sandbox sites (`gateway.identity_headers` defaults).
const IDENTITY_HEADERS: [&str; 6] = [
    "x-psp-auth-number",
    "x-psp-name",
    "x-psp-services",
    "x-psp-certificate",
    "x-psp-check-id",
    "x-psp-report-only-rejection",
];

/// The face serving on `127.0.0.1:0`, stopped when dropped.
struct Face {
    addr: SocketAddr,
    faces: psp_gateway::app::Faces,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Face {
    async fn stop(self) {
        self.stop.send_replace(true);
        tokio::time::timeout(Duration::from_secs(40), self.task)
            .await
            .expect("the face stops within its drain timeout")
            .expect("the face's task ends without a panic");
    }
}

/// The sandbox configuration's faces on the test PKI, and the ext_authz face over its sites
/// with `[ext_authz]` = `section` (TOML; `listen` is added), plain or with its `tls`.
async fn start(section: &str) -> Face {
    start_with(|t| t, section).await
}

/// [`start`], the sandbox configuration edited by `edit` first.
async fn start_with(edit: impl FnOnce(String) -> String, section: &str) -> Face {
    let config = two_site_config(edit);
    let faces = in_memory::faces(&config);
    let ext: ExtAuthzConfig =
        toml::from_str(&format!("listen = \"127.0.0.1:0\"\n{section}")).expect("[ext_authz]");
    ext.validate().expect("a valid [ext_authz]");
    let tls = ext
        .tls
        .as_ref()
        .map(|tls| ext_authz::tls_acceptor(tls).expect("ext_authz TLS"));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = watch::channel(false);
    let sites = Arc::clone(&faces.sites);
    let task = tokio::spawn(ext_authz::serve(
        listener,
        tls,
        Arc::new(ext),
        move || Arc::clone(&sites),
        stopped,
    ));
    Face {
        addr,
        faces,
        stop,
        task,
    }
}

/// Callers on loopback, the certificate from Envoy's `source.certificate`.
const PEER: &str = "callers = [\"127.0.0.0/8\"]";

fn pem(psp: &str) -> String {
    std::fs::read_to_string(test_pki().psp(psp)).expect("PSP certificate")
}

/// A Check for `GET path` on site `xx` (its server name and host), from `psp` (`None`: no
/// certificate presented).
fn on_xx(psp: Option<&str>, method: &str, path: &str) -> Value {
    let mut spec = json!({
        "method": method,
        "path": path,
        "host": "xx.localhost",
        "sni": "xx.localhost",
        "source_address": "192.0.2.10:40000",
    });
    if let Some(psp) = psp {
        spec["source_certificate_pem"] = pem(psp).into();
    }
    spec
}

/// The gRPC status code of an answer (0 is OK); panics on a call that got no answer.
fn grpc_code(answer: &Value) -> i64 {
    assert!(
        answer.get("grpc_error").is_none(),
        "no CheckResponse: {answer}"
    );
    answer["status"]["code"].as_i64().expect("status code")
}

/// The denial's HTTP status and body, asserting that the answer is a denial (never OK).
fn denial(answer: &Value) -> (i64, Value) {
    let code = grpc_code(answer);
    assert_ne!(code, 0, "allowed where it must be denied: {answer}");
    assert!(answer.get("ok").is_none(), "{answer}");
    let denied = &answer["denied"];
    let status = denied["status"].as_i64().expect("a denied HTTP status");
    let body = serde_json::from_str(denied["body"].as_str().expect("body"))
        .unwrap_or_else(|e| panic!("a JSON body ({e}): {answer}"));
    (status, body)
}

/// The value the answer sets for `name`, with its append action.
fn set_header<'a>(answer: &'a Value, name: &str) -> Option<(&'a str, &'a str)> {
    answer["ok"]["headers"]
        .as_array()?
        .iter()
        .find(|h| h["key"] == name)
        .map(|h| {
            (
                h["value"].as_str().unwrap_or_default(),
                h["append_action"].as_str().unwrap_or_default(),
            )
        })
}

fn berlin_group_code(body: &Value) -> &str {
    body["tppMessages"][0]["code"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_valid_psp_is_allowed_and_every_client_copy_of_an_identity_header_is_overwritten_or_removed()
 {
    let face = start(PEER).await;
    let answer = check(face.addr, on_xx(Some("valid"), "GET", "/v1/accounts")).await;
    assert_eq!(grpc_code(&answer), 0, "{answer}");
    let (auth_number, action) = set_header(&answer, "x-psp-auth-number").expect("auth number");
    assert_eq!(action, "OVERWRITE_IF_EXISTS_OR_ADD");
    assert!(auth_number.starts_with("PSD"), "{auth_number}");
    let removed: Vec<&str> = answer["ok"]["headers_to_remove"]
        .as_array()
        .expect("headers_to_remove")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for name in IDENTITY_HEADERS {
        match set_header(&answer, name) {
            // Envoy removes after it sets: a name set here must not be removed again.
            Some((_, action)) => {
                assert_eq!(action, "OVERWRITE_IF_EXISTS_OR_ADD", "{name}");
                assert!(!removed.contains(&name), "{name} set and removed: {answer}");
            }
            None => assert!(removed.contains(&name), "{name} neither set nor removed"),
        }
    }
    // The path and method override headers the built-in proxy strips.
    for name in [
        "x-original-url",
        "x-http-method-override",
        "x-envoy-original-path",
    ] {
        assert!(removed.contains(&name), "{name}: {answer}");
    }
    let headers = answer["ok"]["headers"].as_array().expect("headers");
    assert!(headers.iter().all(|h| h["append_set"] == false), "{answer}");
    let metadata = &answer["dynamic_metadata"];
    assert_eq!(metadata["psp_auth_number"], auth_number);
    assert_eq!(metadata["psp_site"], "xx");
    assert_eq!(
        Some(metadata["psp_check_id"].as_str().expect("check id")),
        set_header(&answer, "x-psp-check-id").map(|(v, _)| v)
    );
    let services = metadata["psp_services"].as_array().expect("services");
    assert!(services.contains(&json!(8.0)), "{metadata}");
    face.stop().await;
}

#[tokio::test]
async fn an_underscore_spelling_of_an_identity_header_never_reaches_the_upstream() {
    let face = start(PEER).await;
    let mut spec = on_xx(Some("aisp"), "GET", "/v1/accounts");
    // WSGI and CGI read each of these as an identity header.
    spec["headers"] = json!({
        "x_psp_auth_number": "PSDXX-FORGED",
        "x-psp_services": "1,2,3,4,5,6,7,8",
        "x-psp-name": "Forged Name",
    });
    let answer = check(face.addr, spec).await;
    assert_eq!(grpc_code(&answer), 0, "{answer}");
    let removed = answer["ok"]["headers_to_remove"]
        .as_array()
        .expect("removed");
    assert!(removed.contains(&json!("x_psp_auth_number")), "{answer}");
    assert!(removed.contains(&json!("x-psp_services")), "{answer}");
    // The dash spelling is the identity header itself: overwritten with the PSP's name.
    let (name, _) = set_header(&answer, "x-psp-name").expect("name set");
    assert_ne!(name, "Forged Name");
    face.stop().await;
}

#[tokio::test]
async fn a_revoked_certificate_is_denied_401_unauthenticated_with_the_built_in_proxys_body() {
    let face = start(PEER).await;
    let answer = check(face.addr, on_xx(Some("revoked"), "GET", "/v1/accounts")).await;
    let (status, body) = denial(&answer);
    assert_eq!((status, grpc_code(&answer)), (401, 16), "{answer}");
    assert_eq!(answer["status"]["message"], "certificate_revoked");
    assert_eq!(berlin_group_code(&body), "CERTIFICATE_REVOKED", "{body}");
    let headers = &answer["denied"]["headers"];
    assert_eq!(headers["content-type"], "application/json");
    let check_id = headers["x-request-id"].as_str().expect("x-request-id");

    // The same request to the built-in proxy of the same site: the same body, byte for byte,
    // but for the check id.
    let chain = in_memory::chain_of("revoked");
    let connection = in_memory::connection_named(Some(chain), Some("xx.localhost"));
    let request = http::Request::get("/v1/accounts")
        .header("host", "xx.localhost")
        .body(Full::new(bytes::Bytes::new()))
        .expect("request");
    let listen = face
        .faces
        .gateway()
        .and_then(|g| g.listen())
        .expect("listen");
    let proxy = in_memory::gateway_at(&face.faces, listen, &connection, request).await;
    assert_eq!(proxy.status, http::StatusCode::UNAUTHORIZED);
    let proxy_id = proxy.headers["x-request-id"].to_str().expect("id");
    assert_eq!(
        answer["denied"]["body"]
            .as_str()
            .map(|b| b.replace(check_id, "ID")),
        Some(String::from_utf8_lossy(&proxy.body).replace(proxy_id, "ID")),
    );
    face.stop().await;
}

#[tokio::test]
async fn an_expired_certificate_a_missing_service_and_no_certificate_are_each_denied() {
    let face = start(PEER).await;
    let answers = checks(
        face.addr,
        vec![
            on_xx(Some("expired"), "GET", "/v1/accounts"),
            // The AIS-only PSP on a payment route (service 7).
            on_xx(Some("aisp"), "POST", "/v1/payments/sepa-credit-transfers"),
            on_xx(None, "GET", "/v1/accounts"),
        ],
    )
    .await;
    let (status, body) = denial(&answers[0]);
    assert_eq!((status, grpc_code(&answers[0])), (401, 16));
    assert_eq!(berlin_group_code(&body), "CERTIFICATE_EXPIRED", "{body}");
    let (status, body) = denial(&answers[1]);
    assert_eq!((status, grpc_code(&answers[1])), (403, 7));
    assert_eq!(berlin_group_code(&body), "ROLE_INVALID", "{body}");
    let (status, body) = denial(&answers[2]);
    assert_eq!((status, grpc_code(&answers[2])), (401, 16));
    assert_eq!(berlin_group_code(&body), "CERTIFICATE_MISSING", "{body}");
    face.stop().await;
}

/// A form body whose field overrides the method (`_method=DELETE`, read by Rails, Spring's
/// HiddenHttpMethodFilter, Laravel) is refused by the built-in proxy; through Envoy with
/// `with_request_body` the Check face sees the body and refuses it the same way.
#[tokio::test]
async fn a_form_body_that_overrides_the_method_is_denied_when_envoy_passes_the_body() {
    let face = start(PEER).await;
    let form = |body: &str| {
        let mut spec = on_xx(Some("valid"), "POST", "/v1/payments/sepa-credit-transfers");
        spec["headers"] = json!({ "content-type": "application/x-www-form-urlencoded" });
        spec["body"] = json!(body);
        spec
    };
    let answers = checks(
        face.addr,
        vec![
            form("amount=1&_method=DELETE"),
            form("amount=1&%5Fmethod=DELETE"),
            form("amount=1&currency=EUR"),
        ],
    )
    .await;
    for answer in &answers[..2] {
        let (status, body) = denial(answer);
        assert_eq!(status, 400, "{answer}");
        assert_eq!(berlin_group_code(&body), "FORMAT_ERROR", "{body}");
        assert_eq!(answer["status"]["message"], "override_parameter_refused");
    }
    assert_eq!(grpc_code(&answers[2]), 0, "{}", answers[2]);
    face.stop().await;
}

/// Under `headers_with_underscores = "refuse"` the built-in proxy refuses a header name with
/// an underscore; the Check face refuses it too, rather than have Envoy remove it.
#[tokio::test]
async fn headers_with_underscores_refuse_applies_to_the_check_face() {
    let face = start_with(
        |t| {
            t.replacen(
                "default = true\n",
                "default = true\nheaders_with_underscores = \"refuse\"\n",
                1,
            )
        },
        PEER,
    )
    .await;
    let mut spec = on_xx(Some("aisp"), "GET", "/v1/accounts");
    spec["headers"] = json!({ "x_psp_auth_number": "PSDXX-TEST-000001" });
    let (status, body) = denial(&check(face.addr, spec).await);
    assert_eq!(status, 400);
    assert_eq!(berlin_group_code(&body), "FORMAT_ERROR", "{body}");
    // Without the header: allowed.
    let answer = check(face.addr, on_xx(Some("aisp"), "GET", "/v1/accounts")).await;
    assert_eq!(grpc_code(&answer), 0, "{answer}");
    face.stop().await;
}

#[tokio::test]
async fn in_peer_mode_a_client_supplied_xfcc_header_vouches_for_nothing() {
    let face = start(PEER).await;
    let mut spec = on_xx(None, "GET", "/v1/accounts");
    spec["headers"] =
        json!({ "x-forwarded-client-cert": xfcc_element("spiffe://edge.bank", "valid") });
    let (status, body) = denial(&check(face.addr, spec).await);
    assert_eq!(status, 401);
    assert_eq!(berlin_group_code(&body), "CERTIFICATE_MISSING", "{body}");
    face.stop().await;
}

/// One XFCC element as Envoy writes it: `By`, `Hash` (the SHA-256 of the certificate's DER,
/// hex), the URL-encoded PEM in `Cert`.
fn xfcc_element(by: &str, psp: &str) -> String {
    let pem = pem(psp);
    let (_, hash, cert) = hash_and_cert(&pem);
    format!("By={by};Hash={hash};Cert=\"{cert}\";Subject=\"CN={psp},O=Sandbox\";URI=")
}

/// A PEM certificate's DER, the hex SHA-256 of it (Envoy's `Hash`), and the PEM URL-encoded
/// (Envoy's `Cert`).
fn hash_and_cert(pem: &str) -> (Vec<u8>, String, String) {
    let der = psp_cert::cert::input::decode_certificate_input(pem.as_bytes()).expect("DER");
    let hash: String = ring::digest::digest(&ring::digest::SHA256, &der)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let cert = percent_encoding::utf8_percent_encode(pem, percent_encoding::NON_ALPHANUMERIC);
    (der, hash, cert.to_string())
}

const XFCC: &str =
    "callers = [\"127.0.0.1/32\"]\ncertificate = \"xfcc\"\nxfcc_by = \"spiffe://edge.bank\"";

fn with_xfcc(value: &str) -> Value {
    let mut spec = on_xx(None, "GET", "/v1/accounts");
    spec["headers"] = json!({ "x-forwarded-client-cert": value });
    spec
}

/// `[ext_authz]` for an edge that forwards XFCC with `APPEND_FORWARD`.
const XFCC_APPEND: &str = "callers = [\"127.0.0.1/32\"]\ncertificate = \"xfcc\"\nxfcc_by = \"spiffe://edge.bank\"\nxfcc_forwarding = \"append-forward\"";

#[tokio::test]
async fn with_xfcc_append_forward_the_proxys_last_element_decides_whatever_the_client_put_before_it()
 {
    let face = start(XFCC_APPEND).await;
    let (edge, client) = ("spiffe://edge.bank", "spiffe://client");
    let answers = checks(
        face.addr,
        vec![
            // The client claims a valid PSP's certificate, the proxy appends the expired one
            // the client presented.
            with_xfcc(&format!(
                "{},{}",
                xfcc_element(client, "valid"),
                xfcc_element(edge, "expired")
            )),
            // The other way round: the proxy's element is the valid one.
            with_xfcc(&format!(
                "{},{}",
                xfcc_element(client, "expired"),
                xfcc_element(edge, "valid")
            )),
            // The client's element claims the proxy's By: two elements with it are refused.
            with_xfcc(&format!(
                "{},{}",
                xfcc_element(edge, "valid"),
                xfcc_element(edge, "expired")
            )),
        ],
    )
    .await;
    let (status, body) = denial(&answers[0]);
    assert_eq!(status, 401);
    assert_eq!(berlin_group_code(&body), "CERTIFICATE_EXPIRED", "{body}");
    assert_eq!(grpc_code(&answers[1]), 0, "{}", answers[1]);
    assert!(set_header(&answers[1], "x-psp-auth-number").is_some());
    let (status, _) = denial(&answers[2]);
    assert_eq!(status, 401);
    assert_eq!(answers[2]["status"]["message"], "certificate_unreadable");
    face.stop().await;
}

/// The attacker's own certificate, self-signed, whose URI SAN closes the element Envoy writes
/// for it and opens one naming the trusted edge, the victim's hash and the victim's public
/// certificate (URL-encoded, so unquoted it holds no `=`, `"` or space): a valid URI.
fn smuggling_certificate(by: Option<&str>, victim: &str) -> String {
    let victim_element = xfcc_element(by.unwrap_or("spiffe://edge.bank"), victim);
    // `By=…;Hash=…;Cert="…";…` of the victim, its Cert unquoted as a URI can carry it.
    let mut parts = victim_element.split(';');
    let by_part = parts.next().expect("By");
    let hash_part = parts.next().expect("Hash");
    let cert_part = parts.next().expect("Cert").replace('"', "");
    let smuggled = match by {
        Some(_) => format!("https://tpp.example/x,{by_part};{hash_part};{cert_part}"),
        None => format!("https://tpp.example/x,{hash_part};{cert_part}"),
    };
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "tpp.example");
    params.subject_alt_names = vec![rcgen::SanType::URI(
        smuggled.try_into().expect("the smuggling URI is IA5"),
    )];
    let key = rcgen::KeyPair::generate().expect("key");
    params.self_signed(&key).expect("self-signed").pem()
}

/// The one element Envoy writes (`SANITIZE_SET`, details Cert, Subject, URI) for a client
/// that presented `pem`: `URI=` unquoted, as `mutateXfccRequestHeader` writes it.
fn envoy_element_for(by: &str, pem: &str) -> String {
    let (der, hash, cert) = hash_and_cert(pem);
    let uri = {
        use x509_parser::prelude::*;
        let (_, parsed) = X509Certificate::from_der(&der).expect("parses");
        let san = parsed
            .subject_alternative_name()
            .expect("SAN extension")
            .expect("has SANs");
        san.value
            .general_names
            .iter()
            .find_map(|name| match name {
                GeneralName::URI(uri) => Some((*uri).to_owned()),
                _ => None,
            })
            .expect("a URI SAN")
    };
    format!("By={by};Hash={hash};Cert=\"{cert}\";Subject=\"CN=tpp.example\";URI={uri}")
}

#[tokio::test]
async fn a_uri_san_made_the_attackers_way_never_makes_a_client_another_psp() {
    let edge = "spiffe://edge.bank";
    for (section, mode) in [(XFCC, "sanitize-set"), (XFCC_APPEND, "append-forward")] {
        let face = start(section).await;
        let specs: Vec<Value> = [Some(edge), None]
            .into_iter()
            .map(|by| {
                let attacker = smuggling_certificate(by, "valid");
                with_xfcc(&envoy_element_for(edge, &attacker))
            })
            .collect();
        let answers = checks(face.addr, specs).await;
        for (i, answer) in answers.iter().enumerate() {
            let (status, body) = denial(answer);
            assert_eq!(status, 401, "{mode} {i}: {answer}");
            assert_eq!(
                berlin_group_code(&body),
                "CERTIFICATE_INVALID",
                "{mode} {i}"
            );
            assert_eq!(
                answer["status"]["message"], "certificate_unreadable",
                "{mode} {i}"
            );
            // What reaches the client names no trusted hop.
            assert!(!answer.to_string().contains(edge), "{mode} {i}: {answer}");
        }
        face.stop().await;
    }
}

#[tokio::test]
async fn with_xfcc_an_element_another_hop_added_or_a_header_given_twice_is_denied() {
    let face = start(XFCC).await;
    let edge = "spiffe://edge.bank";
    let mut twice = on_xx(None, "GET", "/v1/accounts");
    twice["header_map"] = json!([
        ["x-forwarded-client-cert", xfcc_element(edge, "valid")],
        ["x-forwarded-client-cert", xfcc_element(edge, "valid")],
    ]);
    let mut raw = on_xx(None, "GET", "/v1/accounts");
    raw["header_map"] = json!([["x-forwarded-client-cert", xfcc_element(edge, "valid")]]);
    let answers = checks(
        face.addr,
        vec![
            // A client without a certificate: the proxy appended nothing, the last element
            // is the client's own.
            with_xfcc(&xfcc_element("spiffe://client", "valid")),
            with_xfcc(&format!(
                "{},{}",
                xfcc_element(edge, "valid"),
                xfcc_element("spiffe://client", "valid")
            )),
            twice,
            with_xfcc(""),
            // Envoy's encode_raw_headers form, given once: read as the map form is.
            raw,
        ],
    )
    .await;
    for (i, answer) in answers[..3].iter().enumerate() {
        let (status, body) = denial(answer);
        assert_eq!(status, 401, "{i}: {answer}");
        assert_eq!(
            berlin_group_code(&body),
            "CERTIFICATE_INVALID",
            "{i}: {body}"
        );
        assert_eq!(answer["status"]["message"], "certificate_unreadable", "{i}");
    }
    let (status, body) = denial(&answers[3]);
    assert_eq!(status, 401);
    assert_eq!(berlin_group_code(&body), "CERTIFICATE_MISSING", "{body}");
    assert_eq!(grpc_code(&answers[4]), 0, "{}", answers[4]);
    face.stop().await;
}

#[tokio::test]
async fn a_path_that_means_another_route_or_two_things_is_denied_400() {
    let face = start(PEER).await;
    let answers = checks(
        face.addr,
        vec![
            // The AIS route's prefix, which the bank's API would read as /v1/payments.
            on_xx(Some("aisp"), "GET", "/v1/accounts/../payments"),
            on_xx(Some("aisp"), "GET", "/v1/accounts/%2E%2E/payments"),
            on_xx(Some("aisp"), "GET", "/v1/accounts%2F..%2Fpayments"),
            on_xx(Some("aisp"), "GET", "/v1/accounts/x%2Fy"),
            on_xx(Some("aisp"), "GET", "*"),
            on_xx(Some("aisp"), "GET", "http://xx.localhost/v1/accounts"),
            on_xx(Some("aisp"), "GET", ""),
            // A fragment: Envoy forwards the whole target, a URI parser drops the rest.
            on_xx(Some("aisp"), "GET", "/v1/accounts#/../../v1/payments"),
        ],
    )
    .await;
    let codes: Vec<(i64, String)> = answers
        .iter()
        .map(|a| {
            let (status, _) = denial(a);
            (
                status,
                a["status"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    let expected = |code: &str| (400, code.to_owned());
    assert_eq!(
        codes,
        [
            expected("path_not_normal"),
            expected("path_not_normal"),
            expected("path_refused"),
            expected("path_refused"),
            expected("path_refused"),
            expected("path_refused"),
            expected("path_refused"),
            expected("path_refused"),
        ]
    );
    face.stop().await;
}

#[tokio::test]
async fn a_method_the_gateway_never_forwards_is_denied_405_with_its_allow_header() {
    let face = start(PEER).await;
    let answers = checks(
        face.addr,
        vec![
            on_xx(Some("valid"), "CONNECT", "/v1/accounts"),
            on_xx(Some("valid"), "TRACE", "/v1/accounts"),
            on_xx(Some("valid"), "get", "/v1/accounts"),
        ],
    )
    .await;
    for answer in &answers {
        let (status, body) = denial(answer);
        assert_eq!(status, 405, "{answer}");
        assert_eq!(berlin_group_code(&body), "SERVICE_INVALID", "{body}");
        let allow = answer["denied"]["headers"]["allow"]
            .as_str()
            .unwrap_or_default();
        assert!(
            allow.contains("GET") && !allow.contains("CONNECT"),
            "{answer}"
        );
    }
    face.stop().await;
}

/// A Check from the PSP passported from XX into XY for account information, naming its site
/// as `naming` says.
fn passported(naming: Value) -> Value {
    let mut spec = json!({
        "method": "GET",
        "path": "/v1/accounts",
        "source_certificate_pem": pem("passport-out-xy"),
    });
    for (key, value) in naming.as_object().expect("naming") {
        spec[key] = value.clone();
    }
    spec
}

#[tokio::test]
async fn the_site_is_the_extensions_else_the_server_names_else_the_hosts() {
    let face = start(PEER).await;
    let answers = checks(
        face.addr,
        vec![
            passported(json!({"context_extensions": {"psp_site": "xy"}, "host": "xy.localhost"})),
            passported(json!({"sni": "xy.localhost", "host": "xy.localhost"})),
            passported(json!({"host": "xy.localhost"})),
            passported(json!({"host": "xx.localhost"})),
            passported(json!({"context_extensions": {"psp_site": "xx"}})),
        ],
    )
    .await;
    let sites: Vec<&str> = answers
        .iter()
        .map(|a| {
            assert_eq!(grpc_code(a), 0, "{a}");
            a["dynamic_metadata"]["psp_site"]
                .as_str()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(sites, ["xy", "xy", "xy", "xx", "xx"]);
    face.stop().await;
}

#[tokio::test]
async fn the_chosen_sites_jurisdiction_decides_and_two_sites_named_at_once_are_421() {
    let face = start(PEER).await;
    let mut valid_on_xy = passported(json!({"context_extensions": {"psp_site": "xy"}}));
    valid_on_xy["source_certificate_pem"] = pem("valid").into();
    let answers = checks(
        face.addr,
        vec![
            // `valid` is registered in XX and not passported into XY.
            valid_on_xy,
            // The route says xx, the client's TLS connection was made for xy.
            passported(json!({"context_extensions": {"psp_site": "xx"}, "sni": "xy.localhost"})),
            // The route says xy, the request's host is xx's: the site's own 421.
            passported(json!({"context_extensions": {"psp_site": "xy"}, "host": "xx.localhost"})),
            // A site that does not exist, and two sites with nothing naming either.
            passported(json!({"context_extensions": {"psp_site": "zz"}, "host": "xx.localhost"})),
            passported(json!({"host": "bank.example"})),
        ],
    )
    .await;
    let (status, _) = denial(&answers[0]);
    assert_eq!((status, grpc_code(&answers[0])), (403, 7), "{}", answers[0]);
    for answer in &answers[1..3] {
        let (status, _) = denial(answer);
        assert_eq!(status, 421, "{answer}");
        assert_eq!(answer["status"]["message"], "misdirected_request");
    }
    for answer in &answers[3..] {
        let (status, body) = denial(answer);
        assert_eq!(status, 403, "{answer}");
        assert_eq!(body["errors"][0]["code"], "site_unknown", "{body}");
    }
    face.stop().await;
}

#[tokio::test]
async fn a_caller_outside_callers_gets_no_answer_at_all() {
    let face = start("callers = [\"192.0.2.1/32\"]").await;
    let answer = check(face.addr, on_xx(Some("valid"), "GET", "/v1/accounts")).await;
    assert_eq!(answer["grpc_error"]["code"], "UNAVAILABLE", "{answer}");
    assert!(answer.get("status").is_none() && answer.get("ok").is_none());
    face.stop().await;
}

#[tokio::test]
async fn a_malformed_check_request_is_denied_400_never_allowed() {
    let face = start(PEER).await;
    let mut bad_method = on_xx(Some("valid"), "GET", "/v1/accounts");
    bad_method["method"] = "G T".into();
    let answers = checks(
        face.addr,
        vec![
            json!({"no_attributes": true}),
            // attributes {} : no HTTP request.
            json!({"raw_hex": "0a00"}),
            // attributes { request { http { path: "\xff" } } }: a string that is not UTF-8.
            json!({"raw_hex": "0a07220512032201ff"}),
            // A length past the end of the message.
            json!({"raw_hex": "0a4022"}),
            bad_method,
        ],
    )
    .await;
    for answer in &answers {
        let (status, body) = denial(answer);
        assert_eq!(status, 400, "{answer}");
        assert_eq!(body["errors"][0]["code"], "check_request_invalid", "{body}");
    }
    // Each is counted as the face's own refusal (no site chosen).
    let metrics =
        psp_service::telemetry::metrics::render(&prometheus_client::registry::Registry::default());
    let counted: f64 = metrics
        .lines()
        .filter(|line| {
            line.starts_with("psp_gateway_requests_total{")
                && line.contains("face=\"ext-authz\"")
                && line.contains("site=\"\"")
                && line.contains("reason=\"check_request_invalid\"")
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(counted >= 5.0, "{counted} counted:\n{metrics}");
    face.stop().await;
}

/// What tonic refuses before the face reads a message (over the 4 MiB limit, or compressed)
/// must still be a `CheckResponse` denial: a gRPC error is Envoy's `failure_mode_allow` case,
/// where a bank that set it lets the request through.
#[tokio::test]
async fn an_oversized_or_compressed_check_is_denied_never_a_grpc_error() {
    let face = start(PEER).await;
    let mut oversized = on_xx(Some("valid"), "GET", "/v1/accounts");
    oversized["pad_bytes"] = json!(5 * 1024 * 1024);
    let mut compressed = on_xx(Some("valid"), "GET", "/v1/accounts");
    compressed["compression"] = json!("gzip");
    let answers = checks(face.addr, vec![oversized, compressed]).await;
    for answer in &answers {
        let (status, body) = denial(answer);
        assert_eq!(status, 400, "{answer}");
        assert_eq!(body["errors"][0]["code"], "check_request_invalid", "{body}");
        assert_eq!(answer["status"]["message"], "check_request_invalid");
    }
    // The same Check, neither large nor compressed: allowed.
    let answer = check(face.addr, on_xx(Some("valid"), "GET", "/v1/accounts")).await;
    assert_eq!(grpc_code(&answer), 0, "{answer}");
    face.stop().await;
}

/// Not a pass/fail test of speed: the figures Envoy's `grpc_service.timeout` must allow for
/// (printed; run with `--nocapture`). The first Check of a PSP fetches its revocation
/// evidence from the test PKI's responder on loopback; the second is answered from the cache.
#[tokio::test]
async fn a_first_check_fetches_revocation_evidence_and_the_next_is_answered_from_the_cache() {
    let face = start(PEER).await;
    let answers = checks(
        face.addr,
        vec![
            // Opens the channel (HTTP/2 connection) without touching the decision.
            json!({"no_attributes": true}),
            on_xx(Some("valid"), "GET", "/v1/accounts"),
            on_xx(Some("valid"), "GET", "/v1/accounts"),
            on_xx(Some("valid"), "GET", "/v1/accounts"),
        ],
    )
    .await;
    for answer in &answers[1..] {
        assert_eq!(grpc_code(answer), 0, "{answer}");
    }
    let ms = |a: &Value| a["elapsed_ms"].as_f64().unwrap_or_default();
    eprintln!(
        "ext_authz Check, client-measured: channel open {:.1} ms, cold {:.1} ms, cached {:.1} ms and {:.1} ms",
        ms(&answers[0]),
        ms(&answers[1]),
        ms(&answers[2]),
        ms(&answers[3])
    );
    face.stop().await;
}

#[tokio::test]
async fn over_tls_only_a_caller_with_a_certificate_from_client_ca_is_answered() {
    let dir = test_pki().dir.display().to_string();
    let face = start(&format!(
        "{PEER}\n[tls]\ncert = \"{dir}/server/xx.localhost.pem\"\nkey = \"{dir}/server/xx.localhost.key\"\nclient_ca = \"{dir}/ca/qtsp-issuing.pem\""
    ))
    .await;
    let option = |flag: &str, path: &str| [flag.to_owned(), format!("{dir}/{path}")];
    let server_ca = option("--ca", "server/ca.pem");
    let client = |name: &str| {
        [
            option("--cert", &format!("psp/{name}.pem")),
            option("--key", &format!("psp/{name}.key")),
        ]
        .concat()
    };
    let request = || vec![on_xx(Some("valid"), "GET", "/v1/accounts")];
    // A certificate issued under client_ca (the test PKI's QTSP issuing CA stands for the
    // bank's own CA of its Envoy instances).
    let answered = checks_with(
        face.addr,
        &[server_ca.to_vec(), client("valid")].concat(),
        request(),
    )
    .await;
    assert_eq!(grpc_code(&answered[0]), 0, "{}", answered[0]);
    // No client certificate, one from another CA, or no TLS at all: no answer.
    for options in [
        server_ca.to_vec(),
        [server_ca.to_vec(), client("obie-valid")].concat(),
        Vec::new(),
    ] {
        let refused = checks_with(face.addr, &options, request()).await;
        assert_eq!(
            refused[0]["grpc_error"]["code"], "UNAVAILABLE",
            "{options:?}: {}",
            refused[0]
        );
    }
    face.stop().await;
}
