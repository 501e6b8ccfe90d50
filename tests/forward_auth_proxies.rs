//! psp-gateway's forward-auth face behind REAL nginx and REAL Caddy (the Debian packages
//! scripts/test installs), configured from deploy/nginx and deploy/caddy, in front of a
//! recording stand-in for the bank's API; a Rust TLS client presents the test PKI's PSP
//! certificates to them. What reaches the API is what the proxy forwarded after psp-gateway's
//! answer: the identity of a PSP let in, never a client's own copy of it, and nothing at all
//! for a PSP refused.
//!
//! psp-gateway tells its callers apart by address: nginx's checks come from 127.0.0.2
//! (`proxy_bind`), Caddy's from 127.0.0.1 (Caddy 2.6 cannot choose). Two callers on one
//! address would be read as one kind: such a configuration is refused (tests/forward_auth.rs
//! `a_configuration_with_two_callers_on_one_address_is_refused`).

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::edge_proxies::{
    self, CADDY_CERTIFICATE_HEADER, Door, NGINX_CALLER, NGINX_CERTIFICATE_HEADER, Proxy, Reply,
};
use common::service;
use common::test_pki::{test_pki, two_site_config};
use common::upstream::{self, Received, Upstream};
use http::{Method, StatusCode};
use psp_gateway::app::Running;

const LIMIT: Duration = Duration::from_secs(60);

/// One proxy in front of psp-gateway and its own API stand-in.
struct Front {
    name: &'static str,
    port: u16,
    api: Upstream,
    proxy: Proxy,
    /// The header the proxy puts the certificate in for the check.
    certificate_header: &'static str,
}

impl Front {
    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// What the API received so far.
    fn received(&self) -> Vec<Received> {
        self.api.received.lock().expect("lock").clone()
    }

    /// `method path` as `psp` (or without a certificate) at the site `sni` (`Host` the same,
    /// with the port), with `headers`.
    async fn call(
        &self,
        psp: Option<&str>,
        sni: &str,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Reply {
        let host = format!("{sni}:{}", self.port);
        edge_proxies::call(self.addr(), psp, sni, &host, method, path, headers).await
    }
}

/// psp-gateway (the two-site sandbox on the test PKI, with `[forward_auth]`) and nginx and
/// Caddy in front of it.
struct Rig {
    running: Running,
    nginx: Front,
    caddy: Front,
}

/// Every log line of this test binary ([`common::log_capture::global`]).
fn logs() -> &'static common::log_capture::Captured {
    common::log_capture::global()
}

async fn rig(test: &str) -> Rig {
    logs();
    let work = async {
        let config = two_site_config(|t| {
            format!(
                "{t}{}",
                edge_proxies::forward_auth_section(&[
                    (
                        "nginx",
                        &format!("{NGINX_CALLER}/32"),
                        NGINX_CERTIFICATE_HEADER
                    ),
                    ("caddy", "127.0.0.1/32", CADDY_CERTIFICATE_HEADER),
                ])
            )
        });
        let running = service::start(config).await;
        let check = running.forward_auth.expect("the forward-auth listener");
        let (nginx_api, caddy_api) = (upstream::start().await, upstream::start().await);
        let (nginx_port, caddy_port) = (edge_proxies::free_port(), edge_proxies::free_port());
        let (nginx_name, caddy_name) = (format!("{test}-nginx"), format!("{test}-caddy"));
        let nginx_door = Door {
            port: nginx_port,
            check,
            bind: Some(NGINX_CALLER.parse().expect("address")),
        };
        let caddy_door = Door {
            port: caddy_port,
            check,
            bind: None,
        };
        let (nginx_to, caddy_to) = (nginx_api.addr, caddy_api.addr);
        let nginx = tokio::task::spawn_blocking(move || {
            edge_proxies::start_nginx(&nginx_name, &[nginx_door], nginx_to)
        });
        let caddy = tokio::task::spawn_blocking(move || {
            edge_proxies::start_caddy(&caddy_name, &[caddy_door], caddy_to)
        });
        let (nginx, caddy) = (
            nginx.await.expect("nginx starts"),
            caddy.await.expect("caddy starts"),
        );
        Rig {
            running,
            nginx: Front {
                name: "nginx",
                port: nginx_port,
                api: nginx_api,
                proxy: nginx,
                certificate_header: NGINX_CERTIFICATE_HEADER,
            },
            caddy: Front {
                name: "caddy",
                port: caddy_port,
                api: caddy_api,
                proxy: caddy,
                certificate_header: CADDY_CERTIFICATE_HEADER,
            },
        }
    };
    tokio::time::timeout(LIMIT, work)
        .await
        .expect("psp-gateway, nginx and Caddy start within 60 s")
}

impl Rig {
    fn fronts(&self) -> [&Front; 2] {
        [&self.nginx, &self.caddy]
    }

    async fn stop(self) {
        let Rig {
            running,
            nginx,
            caddy,
        } = self;
        drop(nginx.proxy);
        drop(caddy.proxy);
        tokio::time::timeout(LIMIT, running.stop())
            .await
            .expect("psp-gateway stops");
    }
}

/// Every value the API received for `name`.
fn values<'r>(seen: &'r Received, name: &str) -> Vec<&'r str> {
    seen.headers
        .get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap_or("<not text>"))
        .collect()
}

/// A header name as a CGI/WSGI framework reads it (`HTTP_X_PSP_AUTH_NUMBER`): case and the
/// `-`/`_` spelling do not tell two names apart.
fn cgi_name(name: &str) -> String {
    name.to_ascii_uppercase().replace('-', "_")
}

const IDENTITY: [&str; 5] = [
    "x-psp-auth-number",
    "x-psp-name",
    "x-psp-services",
    "x-psp-certificate",
    "x-psp-check-id",
];

/// A client's own copies of the identity headers, naming another PSP (valid's number, for the
/// AIS-only `aisp`), in the spellings a proxy might pass.
const FORGED: [(&str, &str); 6] = [
    ("x-psp-auth-number", "PSDXX-TEST-000001"),
    ("X-PSP-Name", "forged-name"),
    ("x-psp-services", "1,2,3,4,5,6,7,8"),
    ("x-psp-certificate", "forged-certificate"),
    ("x-psp-check-id", "forged-check-id"),
    ("X-Psp-Auth-Number", "PSDXX-TEST-000001"),
];

fn said(front: &Front, reply: &Reply) -> String {
    format!(
        "{}: {} {:?} {}\n{}",
        front.name,
        reply.status,
        reply.headers,
        reply.text(),
        front.proxy.logs()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_psp_reaches_the_api_with_its_identity_and_never_with_a_forged_one() {
    let rig = rig("allowed").await;
    for front in rig.fronts() {
        // aisp (PSDXX-TEST-000016, account information only) claims to be `valid`.
        let reply = front
            .call(
                Some("aisp"),
                "xx.localhost",
                Method::GET,
                "/v1/accounts?withBalance=true",
                &FORGED,
            )
            .await;
        if front.name == "nginx" {
            // nginx passes the client's x-psp-* on to the check and cannot be told to remove
            // them from the request to the API: psp-gateway refuses (header_refused).
            assert_eq!(
                reply.status,
                StatusCode::FORBIDDEN,
                "{}",
                said(front, &reply)
            );
            assert!(front.received().is_empty(), "{}", front.name);
            continue;
        }
        // Caddy's example removes them at the edge, before its check.
        assert_eq!(reply.status, StatusCode::OK, "{}", said(front, &reply));
        let received = front.received();
        assert_eq!(received.len(), 1, "{}", front.name);
        let seen = &received[0];
        assert_eq!(seen.method, Method::GET);
        assert_eq!(seen.path, "/v1/accounts");
        // psp-gateway's identity, once each, and none of the client's values.
        assert_eq!(
            values(seen, "x-psp-auth-number"),
            ["PSDXX-TEST-000016"],
            "{}: {:?}",
            front.name,
            seen.headers
        );
        assert_eq!(values(seen, "x-psp-name"), ["Sandbox%20AISP%20PSP"]);
        assert_eq!(values(seen, "x-psp-services"), ["8"]);
        for name in IDENTITY {
            assert_eq!(values(seen, name).len(), 1, "{}: {name}", front.name);
        }
        for (name, value) in seen.headers.iter() {
            let value = value.to_str().unwrap_or_default();
            assert!(
                !value.contains("forged") && value != "PSDXX-TEST-000001",
                "{}: the client's own {name}: {value} reached the API",
                front.name
            );
        }
        // The certificate header is for the check only.
        assert!(
            !seen.headers.contains_key(front.certificate_header),
            "{}: {:?}",
            front.name,
            seen.headers
        );
        // The PSP's own certificate, as psp-gateway forwards it.
        let certificate = values(seen, "x-psp-certificate")[0].to_owned();
        let pem = std::fs::read(test_pki().psp("aisp")).expect("pem");
        assert_eq!(
            psp_cert::cert::input::decode_certificate_input(certificate.as_bytes())
                .expect("x-psp-certificate decodes"),
            psp_cert::cert::input::decode_certificate_input(&pem).expect("pem")
        );
    }
    rig.stop().await;
}

/// A framework that reads headers the CGI way (`HTTP_X_PSP_AUTH_NUMBER`: WSGI, Rack, PHP) sees
/// `x_psp_auth_number` as `x-psp-auth-number`. nginx drops header names with underscores
/// (`underscores_in_headers off`, its default), as the built-in proxy does
/// (`gateway.headers_with_underscores = "drop"`). Caddy forwards them: deploy/caddy/Caddyfile
/// removes `X_Psp_*` as well as `X-Psp-*` (found by this test, which first saw a client's
/// `x_psp_auth_number` reach the API beside psp-gateway's `X-Psp-Auth-Number`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_underscore_spelling_of_an_identity_header_never_reaches_the_api() {
    let rig = rig("underscore").await;
    let spelt: Vec<(String, &str)> = FORGED
        .iter()
        .map(|(name, value)| (name.replace('-', "_"), *value))
        .collect();
    let headers: Vec<(&str, &str)> = spelt.iter().map(|(n, v)| (n.as_str(), *v)).collect();
    for front in rig.fronts() {
        let reply = front
            .call(
                Some("aisp"),
                "xx.localhost",
                Method::GET,
                "/v1/accounts",
                &headers,
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", said(front, &reply));
        let seen = front.received().pop().expect("forwarded");
        let as_cgi_reads: Vec<String> = seen
            .headers
            .iter()
            .filter(|(name, _)| cgi_name(name.as_str()) == "X_PSP_AUTH_NUMBER")
            .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap_or_default()))
            .collect();
        assert_eq!(
            as_cgi_reads,
            ["x-psp-auth-number: PSDXX-TEST-000016"],
            "{}: only psp-gateway's identity reaches the API",
            front.name
        );
    }
    rig.stop().await;
}

/// The audit record's client address is the one the proxy saw, never one the client wrote:
/// nginx passes the client's own `X-Forwarded-For` into its check unless told otherwise
/// (deploy/nginx sets it to `$remote_addr`), and Caddy replaces an untrusted client's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audited_and_forwarded_client_address_and_host_are_never_the_clients_own() {
    let rig = rig("client-address").await;
    for front in rig.fronts() {
        let reply = front
            .call(
                Some("valid"),
                "xx.localhost",
                Method::GET,
                "/v1/accounts",
                &[
                    ("x-forwarded-for", "203.0.113.66"),
                    ("x-forwarded-host", "xy.localhost"),
                ],
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", said(front, &reply));
        let seen = front.received().pop().expect("forwarded");
        // Nor what the bank's API is told: the proxy's own values, as the built-in proxy's
        // (docs/attacks/faces.md, break 1).
        assert_eq!(
            values(&seen, "x-forwarded-for"),
            ["127.0.0.1"],
            "{}",
            front.name
        );
        let hosts = values(&seen, "x-forwarded-host");
        assert!(
            hosts.len() == 1 && hosts[0].starts_with("xx.localhost"),
            "{}: {hosts:?}",
            front.name
        );
        let check_id = values(&seen, "x-psp-check-id")[0].to_owned();
        let decision: Vec<_> = logs()
            .lines("gateway decision")
            .into_iter()
            .filter(|line| line["fields"]["check_id"] == check_id.as_str())
            .collect();
        assert_eq!(decision.len(), 1, "{}: {check_id}", front.name);
        let peer = decision[0]["fields"]["peer"].as_str().unwrap_or_default();
        assert!(
            peer.starts_with("127.0.0.1:"),
            "{}: the audited client is {peer}",
            front.name
        );
    }
    rig.stop().await;
}

/// nginx forwards `$request_uri` whole, fragment included, and Go's request parser keeps it in
/// Caddy's `X-Forwarded-Uri`: an AIS-only PSP's `/v1/accounts#/../../v1/payments/x` must not be
/// decided as `/v1/accounts` and delivered as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fragment_in_the_target_never_reaches_the_api() {
    let rig = rig("fragment").await;
    for front in rig.fronts() {
        let head = format!(
            "GET /v1/accounts#/../../v1/payments/x HTTP/1.1\r\nHost: xx.localhost:{}\r\nConnection: close\r\n\r\n",
            front.port
        );
        let (status, text) =
            edge_proxies::call_raw(front.addr(), Some("aisp"), "xx.localhost", head.as_bytes())
                .await;
        assert!(
            (400..500).contains(&status),
            "{}: {status} {text}",
            front.name
        );
        assert!(front.received().is_empty(), "{}: {text}", front.name);
    }
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_psp_gets_401_and_the_api_never_sees_the_call() {
    let rig = rig("revoked").await;
    for front in rig.fronts() {
        // nginx would refuse the forged identity headers first (header_refused).
        let forged: &[(&str, &str)] = if front.name == "nginx" { &[] } else { &FORGED };
        let reply = front
            .call(
                Some("revoked"),
                "xx.localhost",
                Method::GET,
                "/v1/accounts",
                forged,
            )
            .await;
        assert_eq!(
            reply.status,
            StatusCode::UNAUTHORIZED,
            "{}",
            said(front, &reply)
        );
        match front.name {
            // auth_request passes the status on, with nginx's own page.
            "nginx" => assert!(
                reply.text().contains("401 Authorization Required")
                    && reply.text().contains("nginx"),
                "{}",
                said(front, &reply)
            ),
            // forward_auth passes psp-gateway's answer on, body and headers.
            _ => {
                assert_eq!(
                    reply.json()["tppMessages"][0]["code"],
                    "CERTIFICATE_REVOKED",
                    "{}",
                    said(front, &reply)
                );
                // The built-in proxy's status and the refusal code are psp-gateway's log's,
                // never the client's.
                assert_eq!(
                    reply.header("x-psp-refusal"),
                    None,
                    "{}",
                    said(front, &reply)
                );
                assert_eq!(
                    reply.header("x-psp-status"),
                    None,
                    "{}",
                    said(front, &reply)
                );
            }
        }
        assert!(front.received().is_empty(), "{}", front.name);
    }
    rig.stop().await;
}

/// Without a certificate the check is asked with none (nginx: no header, its value empty;
/// Caddy 2.6: the placeholder's own text) and answers 401, also when the client sends the
/// proxy's certificate header itself with another PSP's certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_certificate_is_401_whatever_certificate_header_the_client_sends() {
    let rig = rig("no-certificate").await;
    let pem = std::fs::read_to_string(test_pki().psp("valid")).expect("pem");
    let escaped =
        percent_encoding::utf8_percent_encode(&pem, percent_encoding::NON_ALPHANUMERIC).to_string();
    let der: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    for front in rig.fronts() {
        for headers in [
            vec![],
            vec![
                (NGINX_CERTIFICATE_HEADER, escaped.as_str()),
                (CADDY_CERTIFICATE_HEADER, der.as_str()),
                ("x-forwarded-tls-client-cert", der.as_str()),
                ("ssl-client-cert", escaped.as_str()),
            ],
        ] {
            let reply = front
                .call(None, "xx.localhost", Method::GET, "/v1/accounts", &headers)
                .await;
            // Another proxy's certificate header reaches the check as the client sent it: it
            // is refused (header_refused, 403) before the certificate is looked for.
            let (status, code) = if headers.is_empty() {
                (StatusCode::UNAUTHORIZED, "CERTIFICATE_MISSING")
            } else {
                (StatusCode::FORBIDDEN, "FORMAT_ERROR")
            };
            assert_eq!(reply.status, status, "{}", said(front, &reply));
            if front.name == "caddy" {
                assert_eq!(
                    reply.json()["tppMessages"][0]["code"],
                    code,
                    "{}",
                    said(front, &reply)
                );
                assert_eq!(
                    reply.header("x-psp-refusal"),
                    None,
                    "{}",
                    said(front, &reply)
                );
            }
        }
        assert!(front.received().is_empty(), "{}", front.name);
    }
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_psp_on_a_route_needing_a_service_it_lacks_gets_403() {
    let rig = rig("service").await;
    for front in rig.fronts() {
        let reply = front
            .call(
                Some("aisp"),
                "xx.localhost",
                Method::POST,
                "/v1/payments/sepa-credit-transfers",
                &[],
            )
            .await;
        assert_eq!(
            reply.status,
            StatusCode::FORBIDDEN,
            "{}",
            said(front, &reply)
        );
        if front.name == "caddy" {
            assert_eq!(
                reply.header("x-psp-refusal"),
                None,
                "{}",
                said(front, &reply)
            );
            assert_eq!(reply.json()["tppMessages"][0]["code"], "ROLE_INVALID");
        }
        // The same PSP on its own route, and `valid` on payments: let in.
        let reply = front
            .call(
                Some("valid"),
                "xx.localhost",
                Method::POST,
                "/v1/payments/sepa-credit-transfers",
                &[],
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", said(front, &reply));
        let received = front.received();
        assert_eq!(received.len(), 1, "{}: only valid's call", front.name);
        assert_eq!(
            values(&received[0], "x-psp-auth-number"),
            ["PSDXX-TEST-000001"]
        );
    }
    rig.stop().await;
}

/// Each site decides for itself through the proxies too: `valid` is at home in XX and
/// passported nowhere, `passport-out-xy` is passported to XY for account information.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_site_decides_behind_the_proxies() {
    let rig = rig("sites").await;
    for front in rig.fronts() {
        for (psp, sni, path, status) in [
            (
                "valid",
                "xy.localhost",
                "/v1/accounts",
                StatusCode::FORBIDDEN,
            ),
            (
                "passport-out-xy",
                "xy.localhost",
                "/v1/accounts",
                StatusCode::OK,
            ),
            (
                "passport-out-xy",
                "xy.localhost",
                "/v1/payments/sepa-credit-transfers",
                StatusCode::FORBIDDEN,
            ),
            (
                "passport-out-xy",
                "xx.localhost",
                "/v1/payments/sepa-credit-transfers",
                StatusCode::OK,
            ),
        ] {
            let reply = front.call(Some(psp), sni, Method::GET, path, &[]).await;
            assert_eq!(
                reply.status,
                status,
                "{psp} {sni}{path}: {}",
                said(front, &reply)
            );
        }
        assert_eq!(front.received().len(), 2, "{}", front.name);
    }
    rig.stop().await;
}

/// A client of Caddy sends what nginx would send the check (X-Original-Method,
/// X-Original-URI, X-SSL-Client-Cert with `valid`'s public certificate): Caddy passes a
/// client's headers on to the check, and only its own caller kind's headers are read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_of_caddy_cannot_pass_for_nginx() {
    let rig = rig("pass-for-nginx").await;
    let pem = std::fs::read_to_string(test_pki().psp("valid")).expect("pem");
    let escaped =
        percent_encoding::utf8_percent_encode(&pem, percent_encoding::NON_ALPHANUMERIC).to_string();
    let front = &rig.caddy;
    for psp in [None, Some("revoked")] {
        let reply = front
            .call(
                psp,
                "xx.localhost",
                Method::POST,
                "/v1/payments/sepa-credit-transfers",
                &[
                    ("x-original-method", "GET"),
                    ("x-original-uri", "/v1/accounts"),
                    (NGINX_CERTIFICATE_HEADER, escaped.as_str()),
                ],
            )
            .await;
        // nginx's X-Original-URI and certificate header, sent to Caddy by the client, are
        // headers the built-in proxy strips: refused before anything of them is read.
        assert_eq!(
            reply.status,
            StatusCode::FORBIDDEN,
            "{}",
            said(front, &reply)
        );
        assert_eq!(
            reply.json()["tppMessages"][0]["code"],
            "FORMAT_ERROR",
            "{}",
            said(front, &reply)
        );
        assert!(
            ["x-original-method", "x-original-uri", "x-ssl-client-cert"]
                .iter()
                .any(|name| reply.text().contains(name)),
            "the refusal names the header: {}",
            said(front, &reply)
        );
    }
    assert!(front.received().is_empty());
    rig.stop().await;
}
