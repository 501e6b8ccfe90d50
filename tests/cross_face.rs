//! One table of cases (rows) put to every face of psp-gateway (columns), and the decision
//! each face shows compared with the built-in proxy's:
//!
//! - the built-in proxy, over real TLS to the two-site sandbox listener (`xx`, `xy`);
//! - the forward-auth face behind REAL nginx (deploy/nginx): the client sees the status only
//!   (nginx answers with its own page);
//! - the forward-auth face behind REAL Caddy (deploy/caddy): Caddy passes psp-gateway's answer
//!   on, so the client sees the dialect body (never the built-in proxy's status or the refusal
//!   code, which psp-gateway logs);
//! - the gRPC Check face (ext_authz), asked by an independent Envoy client (Python grpcio with
//!   Envoy's messages from PyPI, `scripts/ext-authz/check.py`) as Envoy asks: the client
//!   sees what Envoy makes of the answer (the denial's status and body, or the request going
//!   on with the answer's headers).
//!
//! Besides what the client sees, every face's decision is read where psp-gateway records it:
//! the `psp_gateway_requests_total` line its request added (face, site, decision, reason),
//! so the refusal code is compared for nginx too. A face whose decision differs from the
//! built-in proxy's fails the test, unless the row declares the divergence, with its reason;
//! a declared divergence that does not happen fails it too (the table must stay true).

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use common::edge_proxies::{
    self, CADDY_CERTIFICATE_HEADER, Door, NGINX_CALLER, NGINX_CERTIFICATE_HEADER, Proxy,
};
use common::ext_authz_client;
use common::service;
use common::test_pki::{test_config, test_pki, two_site_config};
use common::upstream::{self, Upstream};
use http::Method;
use psp_gateway::app::Running;

const LIMIT: Duration = Duration::from_secs(60);

// --- the table ------------------------------------------------------------------------------

/// A decision, as the built-in proxy shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Forwarded, with this auth number in the identity headers, decided at `site`.
    Allowed {
        auth_number: &'static str,
        site: &'static str,
    },
    /// Refused by psp-gateway at `site`: the built-in proxy's status, its dialect code
    /// (Berlin Group `tppMessages[0].code` on these routes), and the refusal code
    /// (`docs/errors.md`: `x-psp-refusal`, the metrics' `reason`).
    Refused {
        status: u16,
        code: &'static str,
        refusal: &'static str,
        site: &'static str,
    },
    /// Refused by the forward-auth face before any question is decided (403, this code, in
    /// the contract's body; counted as the face's own refusal, with no site).
    Unasked { refusal: &'static str },
    /// Refused with a 4xx by whichever layer reads it first (the HTTP layer's framing guard,
    /// the proxy, or psp-gateway's face), and never forwarded: for a request target no HTTP
    /// client sends, which each face reads in its own layer.
    NeverForwarded,
    /// Refused by the proxy itself, with this status: psp-gateway is never asked.
    ByTheProxy { status: u16 },
}

/// A face's decision that is not the built-in proxy's, and why that is intended.
struct Divergence {
    face: Face,
    expect: Expect,
    why: &'static str,
}

/// One row: a request, and the built-in proxy's decision on it.
struct Case {
    name: &'static str,
    /// The client certificate (test PKI scenario), or none.
    psp: Option<&'static str>,
    /// The server name the client connects to.
    sni: &'static str,
    /// The `Host` it names (the port is appended).
    host: &'static str,
    method: Method,
    path: &'static str,
    /// Headers the client adds; `{valid-pem}` and `{valid-der}` in a value stand for `valid`'s
    /// certificate as URL-encoded PEM and as Base64 DER.
    headers: &'static [(&'static str, &'static str)],
    /// The certificate comes in a header from an address that is no configured proxy: for
    /// the built-in proxy, a header-mode listener whose trusted proxy is someone else; for
    /// the forward-auth faces, a psp-gateway whose forward-auth callers are someone else.
    stranger: bool,
    expect: Expect,
    diverges: &'static [Divergence],
}

/// A client's own identity headers naming another PSP (valid, PSDXX-TEST-000001).
const SPOOFED: &[(&str, &str)] = &[
    ("x-psp-auth-number", "PSDXX-TEST-000001"),
    ("x-psp-name", "Sandbox%20Valid%20PSP"),
    ("x-psp-services", "1,2,3,4,5,6,7,8"),
    ("x-psp-certificate", "{valid-pem}"),
    ("x-psp-check-id", "forged-check-id"),
];

/// The certificate headers of every proxy kind, carrying `valid`'s certificate, sent by a
/// client that presented none.
const FORGED_CERTIFICATE_HEADERS: &[(&str, &str)] = &[
    (NGINX_CERTIFICATE_HEADER, "{valid-pem}"),
    (CADDY_CERTIFICATE_HEADER, "{valid-der}"),
    ("x-forwarded-tls-client-cert", "{valid-der}"),
    ("ssl-client-cert", "{valid-pem}"),
    ("x-forwarded-client-cert", "Cert=\"{valid-pem}\""),
    ("x-original-uri", "/v1/accounts"),
    ("x-original-method", "GET"),
];

/// The path and method override headers of every framework the built-in proxy strips, sent by
/// the client beside a valid certificate (nginx's own `X-Original-URI` and `X-Original-Method`
/// are in the forged-certificate row).
const OVERRIDES: &[(&str, &str)] = &[
    (
        "x-original-url",
        "forged-/v1/payments/sepa-credit-transfers",
    ),
    ("x-rewrite-url", "forged-/v1/payments/sepa-credit-transfers"),
    ("x-forwarded-prefix", "forged-/admin"),
    ("x-forwarded-path", "forged-/v1/payments"),
    ("x-envoy-original-path", "forged-/v1/payments"),
    ("x-envoy-original-url", "forged-/v1/payments"),
    ("x-http-method-override", "forged-DELETE"),
    ("x-http-method", "forged-DELETE"),
    ("x-method-override", "forged-DELETE"),
];

/// Client-address and client-certificate headers other proxies set and frameworks believe,
/// sent by the client beside a valid certificate.
const CLIENT_ADDRESS_AND_CERTIFICATE: &[(&str, &str)] = &[
    ("x-real-ip", "forged-203.0.113.66"),
    ("true-client-ip", "forged-203.0.113.66"),
    ("cf-connecting-ip", "forged-203.0.113.66"),
    ("x-cluster-client-ip", "forged-203.0.113.66"),
    ("forwarded", "forged-for=203.0.113.66"),
    ("client-cert", "forged-:AAAA:"),
    ("x-client-verify", "forged-SUCCESS"),
    ("x-ssl-client-s-dn", "forged-CN=valid"),
    // The second attack's additions (docs/attacks/faces.md, break 4).
    ("x-forwarded-tls-client-cert", "forged-MIIBforged"),
    ("x-ssl-cert", "forged-cert"),
    ("x-client-dn", "forged-CN=valid"),
    ("x-originating-ip", "forged-203.0.113.66"),
    ("x-remote-addr", "forged-203.0.113.66"),
    ("client-ip", "forged-203.0.113.66"),
    ("x-envoy-internal", "forged-true"),
    ("x-envoy-external-address", "forged-203.0.113.66"),
];

/// How a forward-auth face answers a request carrying a header of the strip set that is not
/// its proxy's own: refused, since nginx and Caddy cannot be told to remove it.
const HEADER_REFUSED: Expect = refused(400, "FORMAT_ERROR", "header_refused");

const HEADER_REFUSED_WHY: &str = "the built-in proxy removes the header and goes on; ext_authz \
    has Envoy remove it (headers_to_remove); nginx and Caddy cannot be told to remove a header \
    by their forward-auth, so psp-gateway refuses the request (header_refused) rather than let \
    the header reach the bank's API";

/// The divergence of nginx alone for a row with identity headers: the Caddy example removes
/// the client's `X-Psp-*` at the edge before its check (deploy/caddy), nginx cannot.
const NGINX_REFUSES: &[Divergence] = &[Divergence {
    face: Face::Nginx,
    expect: HEADER_REFUSED,
    why: HEADER_REFUSED_WHY,
}];

/// The divergence of both forward-auth fronts for a row with a strip-set header.
const FORWARD_AUTH_REFUSES: &[Divergence] = &[
    Divergence {
        face: Face::Nginx,
        expect: HEADER_REFUSED,
        why: HEADER_REFUSED_WHY,
    },
    Divergence {
        face: Face::Caddy,
        expect: HEADER_REFUSED,
        why: HEADER_REFUSED_WHY,
    },
];

const fn refused(status: u16, code: &'static str, refusal: &'static str) -> Expect {
    Expect::Refused {
        status,
        code,
        refusal,
        site: "xx",
    }
}

const fn allowed(auth_number: &'static str) -> Expect {
    Expect::Allowed {
        auth_number,
        site: "xx",
    }
}

/// A case at site xx with no extra headers.
const fn at_xx(
    name: &'static str,
    psp: Option<&'static str>,
    path: &'static str,
    expect: Expect,
) -> Case {
    Case {
        name,
        psp,
        sni: "xx.localhost",
        host: "xx.localhost",
        method: Method::GET,
        path,
        headers: &[],
        stranger: false,
        expect,
        diverges: &[],
    }
}

/// The external authorisers' view of a path not in normal form: refused before the rule,
/// since their proxy forwards the path as written (crates/psp-faces/src/gateway/ask.rs).
const NOT_NORMAL: Expect = refused(400, "FORMAT_ERROR", "path_not_normal");

const NOT_NORMAL_WHY: &str = "an external authoriser cannot rewrite the path its proxy \
    forwards, so a path not in normal form is refused (path_not_normal) before the rule; the \
    built-in proxy decides on, and forwards, the normal form";

fn cases() -> Vec<Case> {
    vec![
        at_xx(
            "a valid PSP on its allowed route",
            Some("valid"),
            "/v1/accounts",
            allowed("PSDXX-TEST-000001"),
        ),
        at_xx(
            "a route needing a service the PSP lacks (aisp on payments)",
            Some("aisp"),
            "/v1/payments/sepa-credit-transfers",
            refused(403, "ROLE_INVALID", "services_not_covered"),
        ),
        at_xx(
            "a revoked certificate",
            Some("revoked"),
            "/v1/accounts",
            refused(401, "CERTIFICATE_REVOKED", "certificate_revoked"),
        ),
        Case {
            diverges: &[Divergence {
                face: Face::Nginx,
                expect: Expect::ByTheProxy { status: 400 },
                why: "nginx's `ssl_verify_client optional_no_ca` lets an unknown issuer \
                      through but not an expired certificate: nginx answers 400 (\"The SSL \
                      certificate error\") itself and never asks. Refused all the same",
            }],
            ..at_xx(
                "an expired certificate",
                Some("expired"),
                "/v1/accounts",
                refused(401, "CERTIFICATE_EXPIRED", "certificate_expired"),
            )
        },
        at_xx(
            "a forged issuer (a CA copying the trusted issuer's name, with another key)",
            Some("untrusted"),
            "/v1/accounts",
            refused(401, "CERTIFICATE_INVALID", "issuer_not_approved"),
        ),
        at_xx(
            "a register entry whose status is Unauthorised",
            Some("unauthorised"),
            "/v1/accounts",
            refused(403, "ROLE_INVALID", "not_authorised"),
        ),
        at_xx(
            "an auth number in no register (ecdsa, its entry removed from the XX register \
             this deployment loads)",
            Some("ecdsa"),
            "/v1/accounts",
            refused(403, "ROLE_INVALID", "not_in_register"),
        ),
        at_xx(
            "no certificate",
            None,
            "/v1/accounts",
            refused(401, "CERTIFICATE_MISSING", "certificate_missing"),
        ),
        Case {
            headers: FORGED_CERTIFICATE_HEADERS,
            diverges: FORWARD_AUTH_REFUSES,
            ..at_xx(
                "no certificate, and every proxy's certificate header sent by the client \
                 with valid's certificate",
                None,
                "/v1/accounts",
                refused(401, "CERTIFICATE_MISSING", "certificate_missing"),
            )
        },
        Case {
            diverges: &[
                Divergence {
                    face: Face::Nginx,
                    expect: NOT_NORMAL,
                    why: NOT_NORMAL_WHY,
                },
                Divergence {
                    face: Face::Caddy,
                    expect: NOT_NORMAL,
                    why: NOT_NORMAL_WHY,
                },
                Divergence {
                    face: Face::ExtAuthzGrpc,
                    expect: NOT_NORMAL,
                    why: NOT_NORMAL_WHY,
                },
            ],
            ..at_xx(
                "`..` route confusion: /v1/accounts/../payments for an AIS-only PSP",
                Some("aisp"),
                "/v1/accounts/../payments",
                refused(403, "ROLE_INVALID", "services_not_covered"),
            )
        },
        at_xx(
            "encoded `..`: /v1/accounts%2F..%2Fpayments for an AIS-only PSP",
            Some("aisp"),
            "/v1/accounts%2F..%2Fpayments",
            refused(400, "FORMAT_ERROR", "path_refused"),
        ),
        Case {
            headers: SPOOFED,
            diverges: NGINX_REFUSES,
            ..at_xx(
                "spoofed identity headers (aisp claims valid's): decision and identity \
                 unchanged, the forged values never upstream",
                Some("aisp"),
                "/v1/accounts",
                allowed("PSDXX-TEST-000016"),
            )
        },
        Case {
            headers: OVERRIDES,
            diverges: FORWARD_AUTH_REFUSES,
            ..at_xx(
                "every path and method override header beside a valid certificate: never \
                 upstream",
                Some("aisp"),
                "/v1/accounts",
                allowed("PSDXX-TEST-000016"),
            )
        },
        Case {
            headers: CLIENT_ADDRESS_AND_CERTIFICATE,
            diverges: FORWARD_AUTH_REFUSES,
            ..at_xx(
                "client-address and client-certificate headers beside a valid certificate: \
                 never upstream",
                Some("aisp"),
                "/v1/accounts",
                allowed("PSDXX-TEST-000016"),
            )
        },
        at_xx(
            "a fragment in the target (/v1/accounts#/../../v1/payments/x for an AIS-only \
             PSP): written byte for byte, refused wherever it is read, never forwarded",
            Some("aisp"),
            "/v1/accounts#/../../v1/payments/x",
            Expect::NeverForwarded,
        ),
        Case {
            headers: SPOOFED,
            diverges: NGINX_REFUSES,
            ..at_xx(
                "spoofed identity headers on a route the PSP may not use",
                Some("aisp"),
                "/v1/payments/sepa-credit-transfers",
                refused(403, "ROLE_INVALID", "services_not_covered"),
            )
        },
        Case {
            sni: "xy.localhost",
            host: "xy.localhost",
            ..at_xx(
                "a certificate for another site: valid (XX, passported nowhere) at xy",
                Some("valid"),
                "/v1/accounts",
                Expect::Refused {
                    status: 403,
                    code: "ROLE_INVALID",
                    refusal: "not_passported",
                    site: "xy",
                },
            )
        },
        Case {
            sni: "xy.localhost",
            host: "xy.localhost",
            ..at_xx(
                "passported to the other site for account information: passport-out-xy at xy",
                Some("passport-out-xy"),
                "/v1/accounts",
                Expect::Allowed {
                    auth_number: "PSDXX-TEST-000009",
                    site: "xy",
                },
            )
        },
        Case {
            sni: "xy.localhost",
            host: "xy.localhost",
            ..at_xx(
                "passported for account information only: passport-out-xy on payments at xy",
                Some("passport-out-xy"),
                "/v1/payments/sepa-credit-transfers",
                Expect::Refused {
                    status: 403,
                    code: "ROLE_INVALID",
                    refusal: "not_passported",
                    site: "xy",
                },
            )
        },
        Case {
            stranger: true,
            diverges: &[
                Divergence {
                    face: Face::Nginx,
                    expect: Expect::Unasked {
                        refusal: "forward_auth_caller_unknown",
                    },
                    why: STRANGER_WHY,
                },
                Divergence {
                    face: Face::Caddy,
                    expect: Expect::Unasked {
                        refusal: "forward_auth_caller_unknown",
                    },
                    why: STRANGER_WHY,
                },
                Divergence {
                    face: Face::ExtAuthzGrpc,
                    expect: Expect::Unasked {
                        refusal: "no answer",
                    },
                    why: "the ext_authz face closes a connection from an address outside \
                          ext_authz.callers at accept and answers nothing; Envoy, with \
                          failure_mode_allow false, refuses the call (403). Refused all the same",
                },
            ],
            ..at_xx(
                "a certificate header from an address that is no configured proxy",
                Some("valid"),
                "/v1/accounts",
                Expect::Refused {
                    status: 401,
                    code: "CERTIFICATE_MISSING",
                    refusal: "certificate_missing",
                    site: "default",
                },
            )
        },
        Case {
            host: "xy.localhost",
            diverges: &[
                Divergence {
                    face: Face::Nginx,
                    expect: Expect::ByTheProxy { status: 421 },
                    why: "nginx answers 421 itself when the Host's server block differs from \
                          the one the handshake chose and verifies client certificates \
                          (ssl_verify_client, set by the example): the same status, never asked",
                },
                Divergence {
                    face: Face::Caddy,
                    expect: Expect::ByTheProxy { status: 421 },
                    why: "Caddy turns strict_sni_host on where client authentication is \
                          configured (the example's `client_auth`) and answers 421 itself: \
                          the same status, never asked",
                },
            ],
            ..at_xx(
                "Host names the other site than the connection's server name (SNI xx, Host xy)",
                Some("passport-out-xy"),
                "/v1/accounts",
                refused(421, "FORMAT_ERROR", "misdirected_request"),
            )
        },
        Case {
            method: Method::TRACE,
            diverges: &[Divergence {
                face: Face::Nginx,
                expect: Expect::ByTheProxy { status: 405 },
                why: "nginx does not serve TRACE and answers 405 itself, never asking: the \
                      built-in proxy's status (Caddy asks, and psp-gateway refuses 405 \
                      method_not_allowed, passed on as 403)",
            }],
            ..at_xx(
                "TRACE, which would echo the identity headers back",
                Some("valid"),
                "/v1/accounts",
                refused(405, "SERVICE_INVALID", "method_not_allowed"),
            )
        },
        Case {
            diverges: &[
                Divergence {
                    face: Face::Nginx,
                    expect: NOT_NORMAL,
                    why: NOT_NORMAL_WHY,
                },
                Divergence {
                    face: Face::Caddy,
                    expect: NOT_NORMAL,
                    why: NOT_NORMAL_WHY,
                },
                Divergence {
                    face: Face::ExtAuthzGrpc,
                    expect: NOT_NORMAL,
                    why: NOT_NORMAL_WHY,
                },
            ],
            // The one known, intended divergence in the decision itself: /v1/payments/../accounts
            // is /v1/accounts, which the AIS-only PSP may use. The built-in proxy lets it in and
            // forwards /v1/accounts; nginx and Caddy would forward the path as written, which
            // the bank's API might resolve otherwise, so psp-gateway refuses to authorise it.
            ..at_xx(
                "a path not in normal form that normalises to an allowed route \
                 (/v1/payments/../accounts for an AIS-only PSP)",
                Some("aisp"),
                "/v1/payments/../accounts",
                allowed("PSDXX-TEST-000016"),
            )
        },
    ]
}

const STRANGER_WHY: &str = "the forward-auth face refuses the asker itself (403 \
    forward_auth_caller_unknown) before reading anything; the built-in proxy in header mode \
    ignores the header of a peer that is no trusted proxy and finds no certificate (401). \
    Refused both";

// --- the faces ------------------------------------------------------------------------------

/// The columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Face {
    BuiltIn,
    Nginx,
    Caddy,
    /// The gRPC Check face (Envoy ext_authz), asked by an independent client (Python
    /// grpcio with Envoy's messages from PyPI) as Envoy asks, with the certificate in the
    /// attribute context's peer certificate.
    ExtAuthzGrpc,
}

/// The faces the table runs through, the built-in proxy first (the reference).
const FACES: &[Face] = &[Face::BuiltIn, Face::Nginx, Face::Caddy, Face::ExtAuthzGrpc];

/// What a face showed.
#[derive(Debug, Default)]
struct Seen {
    /// The status the client got.
    client_status: u16,
    /// The built-in proxy's status: its own answer's, or `x-psp-status` where a proxy passes
    /// psp-gateway's answer on.
    status: Option<u16>,
    /// The dialect code of the body, where the client gets psp-gateway's body.
    code: Option<String>,
    /// `x-psp-refusal`, where the client gets it.
    refusal_header: Option<String>,
    /// What psp-gateway recorded for the request: (site, decision, reason).
    recorded: Option<(String, String, String)>,
    /// Whether the bank's API received the request, and the auth number it was given.
    api_reached: bool,
    upstream_auth_number: Option<String>,
    /// Values of the client's own x-psp-* headers that reached the API.
    forged_upstream: Vec<String>,
    /// The client's own x-psp-* headers the API received (name: value), for the report.
    detail: String,
}

type Asked<'a> = Pin<Box<dyn Future<Output = Seen> + 'a>>;

/// Asks `case` through `face`.
fn ask<'a>(rig: &'a Rig, face: Face, case: &'a Case) -> Asked<'a> {
    match face {
        Face::BuiltIn => Box::pin(built_in(rig, case)),
        Face::Nginx => Box::pin(through(rig, &rig.nginx, case)),
        Face::Caddy => Box::pin(through(rig, &rig.caddy, case)),
        Face::ExtAuthzGrpc => Box::pin(ext_authz_grpc(rig, case)),
    }
}

/// The gRPC Check face, asked as Envoy asks for the request the client sent it: method,
/// path, host (with the port), the server name, the client's headers, and the client's
/// certificate as Envoy's `attributes.source.certificate` (`include_peer_certificate`). What
/// the client would see is what Envoy does with the answer: OK lets the request go on with
/// the answer's headers set and removed; a denial answers its HTTP status and body. A call
/// psp-gateway does not answer is Envoy's 403 (`failure_mode_allow: false`).
async fn ext_authz_grpc(rig: &Rig, case: &Case) -> Seen {
    let before = requests();
    let addr = if case.stranger {
        rig.stranger.ext_authz
    } else {
        rig.main.ext_authz
    }
    .expect("[ext_authz]");
    let port = rig.main.gateway.expect("gateway").port();
    let headers = client_headers(case);
    let mut spec = serde_json::json!({
        "method": case.method.as_str(),
        "path": case.path,
        "host": format!("{}:{port}", case.host),
        "sni": case.sni,
        "source_address": "192.0.2.10:40000",
        "headers": headers
            .iter()
            .map(|(name, value)| ((*name).to_owned(), serde_json::Value::from(value.as_str())))
            .collect::<serde_json::Map<_, _>>(),
    });
    if let Some(psp) = case.psp {
        spec["source_certificate_pem"] = std::fs::read_to_string(test_pki().psp(psp))
            .expect("pem")
            .into();
    }
    let answer = ext_authz_client::check(addr, spec).await;
    if answer.get("grpc_error").is_some() {
        return Seen {
            client_status: 403,
            recorded: recorded("ext-authz", &before, Duration::ZERO).await,
            detail: format!("no answer: {}", answer["grpc_error"]),
            ..Seen::default()
        };
    }
    let recorded = recorded("ext-authz", &before, Duration::from_secs(3)).await;
    if answer["status"]["code"] == 0 {
        let set = |name: &str| {
            answer["ok"]["headers"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|h| h["key"] == name)
                .and_then(|h| h["value"].as_str())
                .map(str::to_owned)
        };
        let removed: Vec<&str> = answer["ok"]["headers_to_remove"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_str)
            .collect();
        // What survives at Envoy: a client header neither overwritten nor removed.
        let forged_upstream = headers
            .iter()
            .filter(|(name, value)| is_forged(name, value))
            .filter(|(name, _)| set(name).is_none() && !removed.contains(name))
            .map(|(name, value)| format!("{name}: {value}"))
            .collect();
        return Seen {
            client_status: 200,
            status: None,
            code: None,
            refusal_header: None,
            recorded,
            api_reached: true,
            upstream_auth_number: set("x-psp-auth-number"),
            forged_upstream,
            detail: String::new(),
        };
    }
    let denied = &answer["denied"];
    let status = u16::try_from(denied["status"].as_u64().unwrap_or_default()).unwrap_or_default();
    let body: serde_json::Value =
        serde_json::from_str(denied["body"].as_str().unwrap_or_default()).unwrap_or_default();
    Seen {
        client_status: status,
        status: Some(status),
        code: dialect_code(&body),
        // The gRPC status message carries the refusal code.
        refusal_header: answer["status"]["message"].as_str().map(str::to_owned),
        recorded,
        api_reached: false,
        upstream_auth_number: None,
        forged_upstream: Vec::new(),
        detail: String::new(),
    }
}

/// The client's header values, with the certificate placeholders filled in.
fn client_headers(case: &Case) -> Vec<(&'static str, String)> {
    let pem = std::fs::read_to_string(test_pki().psp("valid")).expect("pem");
    let escaped =
        percent_encoding::utf8_percent_encode(&pem, percent_encoding::NON_ALPHANUMERIC).to_string();
    let der: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    case.headers
        .iter()
        .map(|(name, value)| {
            (
                *name,
                value
                    .replace("{valid-pem}", &escaped)
                    .replace("{valid-der}", &der),
            )
        })
        .collect()
}

/// Whether a client header's value must never reach the API: the client's own x-psp-*
/// headers, and every strip-set header of the rows (their values start `forged-`).
fn is_forged(name: &str, value: &str) -> bool {
    name.starts_with("x-psp-") || value.starts_with("forged-")
}

/// The values of the client's headers that must never reach the API ([`is_forged`]).
fn forged_values(case: &Case) -> Vec<String> {
    client_headers(case)
        .into_iter()
        .filter(|(name, value)| is_forged(name, value))
        .map(|(_, value)| value)
        .collect()
}

/// `case` written byte for byte to `addr` (its target as it is, `Connection: close`), for a
/// target an HTTP client would not send as written; `reached` says whether the API got it
/// (the built-in proxy's echo answers with `"echo"`).
async fn raw_seen(addr: SocketAddr, case: &Case, reached: impl Fn() -> bool) -> Seen {
    let head = format!(
        "{} {} HTTP/1.1\r\nHost: {}:{}\r\nConnection: close\r\n\r\n",
        case.method,
        case.path,
        case.host,
        addr.port()
    );
    let (status, text) = edge_proxies::call_raw(addr, case.psp, case.sni, head.as_bytes()).await;
    Seen {
        client_status: status,
        api_reached: reached() || text.contains("\"echo\""),
        detail: text
            .lines()
            .last()
            .unwrap_or_default()
            .chars()
            .take(200)
            .collect(),
        ..Seen::default()
    }
}

/// The code in a refusal body of any dialect.
fn dialect_code(body: &serde_json::Value) -> Option<String> {
    [
        &body["tppMessages"][0]["code"],
        &body["Errors"][0]["ErrorCode"],
        &body["errors"][0]["code"],
    ]
    .into_iter()
    .find_map(|v| v.as_str().map(str::to_owned))
}

/// The built-in proxy: over TLS to the two-site listener (or, for a stranger's header, plain
/// HTTP to the header-mode listener from a peer it does not trust).
async fn built_in(rig: &Rig, case: &Case) -> Seen {
    let before = requests();
    let headers = client_headers(case);
    let mut pairs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let reply = if case.stranger {
        let addr = rig.stranger.gateway.expect("the header-mode listener");
        let pem = std::fs::read_to_string(test_pki().psp(case.psp.expect("a PSP"))).expect("pem");
        let escaped =
            percent_encoding::utf8_percent_encode(&pem, percent_encoding::NON_ALPHANUMERIC)
                .to_string();
        pairs.push((NGINX_CERTIFICATE_HEADER, escaped.as_str()));
        let reply = tokio::time::timeout(
            LIMIT,
            service::send(addr, case.method.clone(), case.path, &pairs),
        )
        .await
        .expect("the header-mode listener answers");
        edge_proxies::Reply {
            status: reply.status,
            headers: reply.headers,
            body: reply.body,
        }
    } else if case.path.contains('#') {
        let addr = rig.main.gateway.expect("the two-site listener");
        return raw_seen(addr, case, || false).await;
    } else {
        let addr = rig.main.gateway.expect("the two-site listener");
        let host = format!("{}:{}", case.host, addr.port());
        edge_proxies::call(
            addr,
            case.psp,
            case.sni,
            &host,
            case.method.clone(),
            case.path,
            &pairs,
        )
        .await
    };
    let body = reply.json();
    let echoed = body["echo"].is_string();
    let echoed_header = |name: &str| -> Vec<String> {
        body["headers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|pair| pair[0] == name)
            .filter_map(|pair| pair[1].as_str().map(str::to_owned))
            .collect()
    };
    let forged = forged_values(case);
    let mut forged_upstream = Vec::new();
    for pair in body["headers"].as_array().into_iter().flatten() {
        if let Some(value) = pair[1].as_str()
            && forged.iter().any(|f| f == value)
        {
            forged_upstream.push(format!("{}: {value}", pair[0]));
        }
    }
    Seen {
        client_status: reply.status.as_u16(),
        status: Some(reply.status.as_u16()),
        code: if echoed { None } else { dialect_code(&body) },
        refusal_header: reply.header("x-psp-refusal").map(str::to_owned),
        recorded: recorded("gateway", &before, Duration::from_secs(3)).await,
        api_reached: echoed,
        upstream_auth_number: echoed_header("x-psp-auth-number").into_iter().next(),
        forged_upstream,
        detail: String::new(),
    }
}

/// The forward-auth face behind `front` (nginx or Caddy).
async fn through(rig: &Rig, front: &Front, case: &Case) -> Seen {
    let _ = rig;
    let before = requests();
    let api_before = front.api.received.lock().expect("lock").len();
    let port = if case.stranger {
        front.stranger_port
    } else {
        front.port
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    if case.path.contains('#') {
        let api = &front.api;
        return raw_seen(addr, case, || {
            api.received.lock().expect("lock").len() > api_before
        })
        .await;
    }
    let headers = client_headers(case);
    let pairs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let host = format!("{}:{port}", case.host);
    let reply = edge_proxies::call(
        addr,
        case.psp,
        case.sni,
        &host,
        case.method.clone(),
        case.path,
        &pairs,
    )
    .await;
    let received = front.api.received.lock().expect("lock").clone();
    let new = &received[api_before..];
    let forged = forged_values(case);
    let mut forged_upstream = Vec::new();
    for seen in new {
        for (name, value) in &seen.headers {
            let value = value.to_str().unwrap_or_default();
            if forged.iter().any(|f| f == value) {
                forged_upstream.push(format!("{name}: {value}"));
            }
        }
    }
    let body = reply.json();
    // Internals stay in psp-gateway's log: a proxy that passes the answer on shows them to
    // the client.
    for name in ["x-psp-status", "x-psp-refusal"] {
        assert_eq!(
            reply.header(name),
            None,
            "{}: {name} reached the client",
            case.name
        );
    }
    Seen {
        client_status: reply.status.as_u16(),
        status: reply.header("x-psp-status").and_then(|s| s.parse().ok()),
        code: if new.is_empty() {
            dialect_code(&body)
        } else {
            None
        },
        refusal_header: reply.header("x-psp-refusal").map(str::to_owned),
        recorded: recorded("forward-auth", &before, Duration::ZERO).await,
        api_reached: !new.is_empty(),
        upstream_auth_number: new.first().and_then(|seen| {
            seen.headers
                .get("x-psp-auth-number")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        }),
        forged_upstream,
        detail: if reply.status.is_success() || reply.body.starts_with(b"{") {
            String::new()
        } else {
            format!(
                "{}: {}",
                front.name,
                reply
                    .text()
                    .lines()
                    .find(|l| l.contains("<title>"))
                    .unwrap_or("")
            )
        },
    }
}

// --- what psp-gateway records -----------------------------------------------------------------

/// `psp_gateway_requests_total`: each label set's count.
fn requests() -> BTreeMap<String, u64> {
    let text =
        psp_service::telemetry::metrics::render(&prometheus_client::registry::Registry::default());
    text.lines()
        .filter_map(|line| line.strip_prefix("psp_gateway_requests_total{"))
        .filter_map(|rest| {
            let (labels, count) = rest.rsplit_once("} ")?;
            Some((labels.to_owned(), count.trim().parse().ok()?))
        })
        .collect()
}

fn label<'l>(labels: &'l str, name: &str) -> &'l str {
    labels
        .split(',')
        .find_map(|pair| pair.strip_prefix(&format!("{name}=\"")))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or("")
}

/// The label set of `face` whose count grew since `before`: (site, decision, reason). Waits
/// `patience` at most: the built-in proxy records after its answer, the forward-auth face
/// before it (an unasked question is never recorded).
async fn recorded(
    face: &str,
    before: &BTreeMap<String, u64>,
    patience: Duration,
) -> Option<(String, String, String)> {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let grown: Vec<(String, String, String)> = requests()
            .into_iter()
            .filter(|(labels, count)| {
                label(labels, "face") == face && before.get(labels).copied().unwrap_or(0) < *count
            })
            .map(|(labels, _)| {
                (
                    label(&labels, "site").to_owned(),
                    label(&labels, "decision").to_owned(),
                    label(&labels, "reason").to_owned(),
                )
            })
            .collect();
        match grown.as_slice() {
            [one] => return Some(one.clone()),
            [] if tokio::time::Instant::now() >= deadline => return None,
            [] => tokio::time::sleep(Duration::from_millis(20)).await,
            more => panic!("one request, several records: {more:?}"),
        }
    }
}

// --- comparing ----------------------------------------------------------------------------------

/// The status a client of `face` gets for a refusal whose built-in status is `status`:
/// forward-auth answers 401 for certificate problems and 403 for everything else (nginx
/// turns any other status into a 500), and the proxies pass that on.
fn client_status(face: Face, status: u16) -> u16 {
    match face {
        // Envoy answers a denial's own status.
        Face::BuiltIn | Face::ExtAuthzGrpc => status,
        _ if status == 401 => 401,
        _ => 403,
    }
}

/// What is wrong with `seen` for `expect` at `face` (nothing: it agrees).
fn disagreements(face: Face, seen: &Seen, expect: &Expect) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut want = |ok: bool, what: String| {
        if !ok {
            wrong.push(what);
        }
    };
    match *expect {
        Expect::Allowed { auth_number, site } => {
            want(
                seen.client_status == 200,
                format!("status {}", seen.client_status),
            );
            want(seen.api_reached, "the API was not reached".into());
            want(
                seen.upstream_auth_number.as_deref() == Some(auth_number),
                format!("the API got {:?}", seen.upstream_auth_number),
            );
            want(
                seen.forged_upstream.is_empty(),
                format!("forged values upstream: {:?}", seen.forged_upstream),
            );
            let recorded = seen
                .recorded
                .as_ref()
                .map(|(s, _, r)| (s.as_str(), r.as_str()));
            want(
                recorded == Some((site, "")),
                format!("recorded {:?}", seen.recorded),
            );
        }
        Expect::Refused {
            status,
            code,
            refusal,
            site,
        } => {
            want(!seen.api_reached, "the API was reached".into());
            want(
                seen.client_status == client_status(face, status),
                format!(
                    "client status {} (expected {})",
                    seen.client_status,
                    client_status(face, status)
                ),
            );
            want(
                seen.status.is_none_or(|s| s == status),
                format!("status {:?}", seen.status),
            );
            want(
                seen.code.as_deref().is_none_or(|c| c == code),
                format!("code {:?}", seen.code),
            );
            want(
                seen.refusal_header.as_deref().is_none_or(|r| r == refusal),
                format!("x-psp-refusal {:?}", seen.refusal_header),
            );
            let recorded = seen
                .recorded
                .as_ref()
                .map(|(s, d, r)| (s.as_str(), d.as_str(), r.as_str()));
            want(
                recorded == Some((site, "rejected", refusal)),
                format!("recorded {:?}", seen.recorded),
            );
        }
        Expect::Unasked { refusal } => {
            want(!seen.api_reached, "the API was reached".into());
            want(
                seen.client_status == 403,
                format!("client status {}", seen.client_status),
            );
            want(seen.status.is_none(), format!("status {:?}", seen.status));
            want(
                seen.refusal_header.as_deref().is_none_or(|r| r == refusal),
                format!("x-psp-refusal {:?}", seen.refusal_header),
            );
            // Counted as the face's own refusal (no site), unless nothing was answered.
            let expected = (refusal != "no answer")
                .then(|| (String::new(), "rejected".to_owned(), refusal.to_owned()));
            want(
                seen.recorded == expected,
                format!("recorded {:?}", seen.recorded),
            );
        }
        Expect::NeverForwarded => {
            want(!seen.api_reached, "the API was reached".into());
            want(
                (400..500).contains(&seen.client_status),
                format!("client status {}", seen.client_status),
            );
        }
        Expect::ByTheProxy { status } => {
            want(!seen.api_reached, "the API was reached".into());
            want(
                seen.client_status == status,
                format!("client status {}", seen.client_status),
            );
            want(
                seen.recorded.is_none(),
                format!("psp-gateway was asked: {:?}", seen.recorded),
            );
        }
    }
    wrong
}

fn shown(seen: &Seen) -> String {
    let mut text = format!("{}", seen.client_status);
    if let Some(status) = seen.status
        && status != seen.client_status
    {
        let _ = write!(text, " (gateway {status})");
    }
    match &seen.recorded {
        Some((site, decision, reason)) if reason.is_empty() => {
            let _ = write!(text, " {decision}@{site}");
        }
        Some((site, _, reason)) => {
            let _ = write!(text, " {reason}@{site}");
        }
        None => {
            let _ = write!(
                text,
                " {}",
                seen.refusal_header.as_deref().unwrap_or("not asked")
            );
        }
    }
    if let Some(auth) = &seen.upstream_auth_number {
        let _ = write!(text, " api:{auth}");
    }
    if !seen.detail.is_empty() {
        let _ = write!(text, " [{}]", seen.detail);
    }
    text
}

// --- the deployment ---------------------------------------------------------------------------

/// A proxy, its doors (to the main deployment and to the stranger's) and its API stand-in.
struct Front {
    name: &'static str,
    port: u16,
    stranger_port: u16,
    api: Upstream,
    _proxy: Proxy,
}

struct Rig {
    /// The two-site sandbox with `[forward_auth]` (nginx from 127.0.0.2, Caddy from
    /// 127.0.0.1), its XX register without ecdsa's entry.
    main: Running,
    /// A one-site deployment whose built-in proxy takes the certificate from a header set by
    /// 192.0.2.1 only, and whose forward-auth callers are 192.0.2.1 and 192.0.2.2.
    stranger: Running,
    nginx: Front,
    caddy: Front,
}

/// The XX register without ecdsa's entry (PSDXX-TEST-000015), in a file of its own.
fn register_without_ecdsa() -> std::path::PathBuf {
    let text = std::fs::read_to_string(common::root().join("registers/sandbox/XX.json"))
        .expect("registers/sandbox/XX.json");
    let mut register: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let entities = register["registers"][0]["entities"]
        .as_array_mut()
        .expect("entities");
    let before = entities.len();
    entities.retain(|e| e["reference"] != "000015");
    assert_eq!(entities.len(), before - 1, "ecdsa's entry is 000015");
    let file = edge_proxies::scratch("cross-face-register").join("XX.json");
    std::fs::write(&file, register.to_string()).expect("write");
    file
}

async fn rig() -> Rig {
    let register = register_without_ecdsa();
    let main = two_site_config(|t| {
        let from = "path = \"registers/sandbox/XX.json\"";
        assert!(t.contains(from));
        format!(
            "{}{}",
            t.replace(from, &format!("path = \"{}\"", register.display())),
            edge_proxies::forward_auth_section(&[
                (
                    "nginx",
                    &format!("{NGINX_CALLER}/32"),
                    NGINX_CERTIFICATE_HEADER
                ),
                ("caddy", "127.0.0.1/32", CADDY_CERTIFICATE_HEADER),
            ])
        ) + "\n[ext_authz]\nlisten = \"127.0.0.1:0\"\ncallers = [\"127.0.0.1/32\"]\n"
    });
    let stranger = test_config(|t| {
        let upstream = "upstream = \"sandbox-echo\"";
        let tls = "tls = { cert = ";
        assert!(t.contains(upstream) && t.contains(tls));
        format!(
            "{}{}",
            t.replace(
                upstream,
                &format!(
                    "{upstream}\nidentity = \"header\"\nidentity_header = \"{NGINX_CERTIFICATE_HEADER}\"\ntrusted_proxies = [\"192.0.2.1/32\"]"
                ),
            )
            .replace(tls, "# tls = { cert = "),
            edge_proxies::forward_auth_section(&[
                ("nginx", "192.0.2.1/32", NGINX_CERTIFICATE_HEADER),
                ("caddy", "192.0.2.2/32", CADDY_CERTIFICATE_HEADER),
            ])
        ) + "\n[ext_authz]\nlisten = \"127.0.0.1:0\"\ncallers = [\"192.0.2.1/32\"]\n"
    });
    let main = service::start(main).await;
    let stranger = service::start(stranger).await;
    let check = main.forward_auth.expect("forward-auth");
    let stranger_check = stranger.forward_auth.expect("forward-auth");
    let mut fronts = Vec::new();
    for name in ["nginx", "caddy"] {
        let api = upstream::start().await;
        let (port, stranger_port) = (edge_proxies::free_port(), edge_proxies::free_port());
        let bind = (name == "nginx").then(|| NGINX_CALLER.parse().expect("address"));
        let doors = [
            Door { port, check, bind },
            Door {
                port: stranger_port,
                check: stranger_check,
                bind: None,
            },
        ];
        let to = api.addr;
        let proxy = tokio::task::spawn_blocking(move || match name {
            "nginx" => edge_proxies::start_nginx("cross-face-nginx", &doors, to),
            _ => edge_proxies::start_caddy("cross-face-caddy", &doors, to),
        })
        .await
        .expect("the proxy starts");
        fronts.push(Front {
            name,
            port,
            stranger_port,
            api,
            _proxy: proxy,
        });
    }
    let caddy = fronts.pop().expect("caddy");
    let nginx = fronts.pop().expect("nginx");
    Rig {
        main,
        stranger,
        nginx,
        caddy,
    }
}

// --- the test ---------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_face_decides_as_the_built_in_proxy() {
    let rig = tokio::time::timeout(LIMIT, rig())
        .await
        .expect("psp-gateway, nginx and Caddy start within 60 s");
    let cases = cases();
    assert_eq!(
        FACES[0],
        Face::BuiltIn,
        "the built-in proxy is the reference"
    );
    let mut table = String::new();
    let mut failures = Vec::new();
    let mut divergences = Vec::new();
    for case in &cases {
        let _ = writeln!(table, "{}", case.name);
        for &face in FACES {
            let seen = tokio::time::timeout(LIMIT, ask(&rig, face, case))
                .await
                .unwrap_or_else(|_| panic!("{face:?}: no decision on {} within 60 s", case.name));
            let declared = case.diverges.iter().find(|d| d.face == face);
            let expect = declared.map_or(&case.expect, |d| &d.expect);
            let wrong = disagreements(face, &seen, expect);
            let mark = match (wrong.is_empty(), declared) {
                (true, None) => "=",
                (true, Some(d)) => {
                    divergences.push(format!("{} / {face:?}: {}", case.name, d.why));
                    "~"
                }
                (false, _) => {
                    failures.push(format!(
                        "{} / {face:?}: expected {expect:?}{}, saw {seen:?}: {}",
                        case.name,
                        if declared.is_some() {
                            " (a declared divergence)"
                        } else {
                            ""
                        },
                        wrong.join("; ")
                    ));
                    "X"
                }
            };
            let _ = writeln!(table, "    {mark} {face:?}: {}", shown(&seen));
        }
    }
    let faces = FACES.len();
    eprintln!(
        "{} cases x {faces} faces ({} decisions; = agrees with the built-in proxy, ~ a declared \
         divergence, X wrong):\n{table}\ndeclared divergences seen:\n  {}",
        cases.len(),
        cases.len() * faces,
        divergences.join("\n  ")
    );
    let Rig {
        main,
        stranger,
        nginx,
        caddy,
    } = rig;
    drop((nginx, caddy));
    tokio::time::timeout(LIMIT, async {
        main.stop().await;
        stranger.stop().await;
    })
    .await
    .expect("psp-gateway stops");
    assert!(
        failures.is_empty(),
        "{} disagreement(s):\n{}\n\n{table}",
        failures.len(),
        failures.join("\n")
    );
}
