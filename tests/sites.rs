//! One deployment, several sites: the sandbox's `gateway.toml` as it is, with site `xx`
//! (jurisdiction XX, server names `xx.localhost` and `localhost`, the listener's default) and
//! site `xy` (XY, `xy.localhost`) on one TLS listener, over real TLS with real clients. And
//! the configuration rules that keep sites apart.

mod common;

use std::sync::Arc;

use common::service;
use common::test_pki::{test_pki, two_site_config};
use common::tls_client::{self, Proto, ReqBody};
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use psp_gateway::app::Running;

/// The client certificate of the test PKI's PSP `psp`, over HTTP/1.1.
fn client(psp: &str) -> Arc<rustls::ClientConfig> {
    tls_client::client_config(&test_pki().dir, Some(psp), Proto::H1)
}

/// `GET path` in origin form (its host is the `Host` header the caller sets).
fn get(path: &str) -> Request<ReqBody> {
    Request::builder()
        .uri(path)
        .body(tls_client::empty())
        .expect("request")
}

/// One request on a new connection that asked for `sni`, with `Host: host`: the status and
/// the body.
async fn call(
    running: &Running,
    config: Arc<rustls::ClientConfig>,
    sni: &str,
    host: &str,
    path: &str,
) -> (StatusCode, serde_json::Value) {
    let addr = running.gateway.expect("gateway");
    let tls = tls_client::connect_as(addr, config, sni)
        .await
        .expect("handshake");
    let mut sender = tls_client::h1_on(tls).await;
    let mut req = get(path);
    req.headers_mut()
        .insert(http::header::HOST, host.parse().expect("host"));
    let response = sender.send_request(req).await.expect("answer");
    read(response).await
}

async fn read(response: http::Response<hyper::body::Incoming>) -> (StatusCode, serde_json::Value) {
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let json = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    (status, json)
}

/// What the sandbox echo upstream says it received: the request's header `name`.
fn echoed_header<'a>(echo: &'a serde_json::Value, name: &str) -> Option<&'a str> {
    echo["headers"]
        .as_array()?
        .iter()
        .find(|pair| pair[0] == name)
        .and_then(|pair| pair[1].as_str())
}

#[tokio::test]
async fn each_site_answers_at_its_server_name_with_its_own_rule() {
    let running = service::start(two_site_config(|t| t)).await;
    let port = running.gateway.expect("gateway").port();
    let xx = format!("xx.localhost:{port}");
    let xy = format!("xy.localhost:{port}");

    // `valid` is authorised in XX and passported nowhere: let in at xx, refused at xy. The
    // check is cached per jurisdiction and the rule is the site's: the first answer does not
    // carry over.
    let (status, echo) = call(
        &running,
        client("valid"),
        "xx.localhost",
        &xx,
        "/v1/accounts",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{echo}");
    assert_eq!(
        echoed_header(&echo, "x-psp-auth-number"),
        Some("PSDXX-TEST-000001"),
        "{echo}"
    );
    let (status, body) = call(
        &running,
        client("valid"),
        "xy.localhost",
        &xy,
        "/v1/accounts",
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["tppMessages"][0]["code"], "ROLE_INVALID", "{body}");

    // `passport-out-xy` is passported to XY for account information (8) only.
    let psp = client("passport-out-xy");
    let (status, echo) = call(&running, psp.clone(), "xy.localhost", &xy, "/v1/accounts").await;
    assert_eq!(status, StatusCode::OK, "{echo}");
    let (status, body) = call(
        &running,
        psp.clone(),
        "xy.localhost",
        &xy,
        "/v1/payments/sepa",
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, echo) = call(&running, psp, "xx.localhost", &xx, "/v1/payments/sepa").await;
    assert_eq!(status, StatusCode::OK, "at home, payments too: {echo}");

    // Each site's own dialect where no route matches: xy writes UK Open Banking.
    let (status, body) = call(&running, client("valid"), "xy.localhost", &xy, "/nowhere").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body["Errors"][0]["ErrorCode"], "UK.OBIE.Resource.NotFound",
        "{body}"
    );
    let (status, body) = call(&running, client("valid"), "xx.localhost", &xx, "/nowhere").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["tppMessages"][0]["code"], "RESOURCE_UNKNOWN", "{body}");
    running.stop().await;
}

/// A connection made for one site never carries a request for another: `Host` (HTTP/1.1)
/// or `:authority` (HTTP/2, where a client coalesces connections whose certificate covers
/// both names) naming the other site gets 421 and reaches no upstream.
#[tokio::test]
async fn a_request_for_another_site_than_its_connection_gets_421() {
    let running = service::start(two_site_config(|t| t)).await;
    let port = running.gateway.expect("gateway").port();

    // `passport-out-xy` would be let in at both sites: only the 421 stands in the way.
    for (sni, host) in [
        ("xx.localhost", format!("xy.localhost:{port}")),
        ("xy.localhost", format!("xx.localhost:{port}")),
        ("xy.localhost", "localhost".to_owned()),
        ("xx.localhost", "XY.LOCALHOST.".to_owned()),
        ("xx.localhost", "bank.example".to_owned()),
    ] {
        let (status, body) = call(
            &running,
            client("passport-out-xy"),
            sni,
            &host,
            "/v1/accounts",
        )
        .await;
        assert_eq!(
            status,
            StatusCode::MISDIRECTED_REQUEST,
            "{sni} / {host}: {body}"
        );
        let text = body.to_string();
        assert!(text.contains("is not served on this connection"), "{text}");
        assert!(
            body["headers"].is_null(),
            "the echo upstream never answered: {body}"
        );
    }
    // The names are matched whatever their case, port or final dot.
    let (status, _) = call(
        &running,
        client("passport-out-xy"),
        "xy.localhost",
        "XY.Localhost.:443",
        "/v1/accounts",
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    // HTTP/2: the second stream of a connection made for xx.localhost names xy.localhost.
    let mut h2 = tls_client::client_config(&test_pki().dir, Some("passport-out-xy"), Proto::H2)
        .as_ref()
        .clone();
    h2.alpn_protocols = vec![b"h2".to_vec()];
    let tls = tls_client::connect_as(
        running.gateway.expect("gateway"),
        Arc::new(h2),
        "xx.localhost",
    )
    .await
    .expect("handshake");
    let mut sender = tls_client::h2_on(tls).await;
    let on = |authority: &str| -> Request<ReqBody> {
        Request::builder()
            .uri(format!("https://{authority}:{port}/v1/accounts"))
            .body(tls_client::empty())
            .expect("request")
    };
    let (status, _) = read(
        sender
            .send_request(on("xx.localhost"))
            .await
            .expect("answer"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = read(
        sender
            .send_request(on("xy.localhost"))
            .await
            .expect("answer"),
    )
    .await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{body}");
    running.stop().await;
}

/// The server name chooses the certificate: each site presents its own, a client that sends
/// none reaches the default site (`xx`, as before there were sites), and a name no site has
/// ends the handshake.
#[tokio::test]
async fn the_server_name_chooses_the_certificate_and_an_unknown_one_fails_the_handshake() {
    let running = service::start(two_site_config(|t| t)).await;
    let addr = running.gateway.expect("gateway");
    let presented = |name: &str| {
        let pem = std::fs::read(test_pki().dir.join(format!("server/{name}.pem"))).expect("pem");
        psp_cert::cert::input::decode_certificate_input(&pem).expect("certificate")
    };
    for (asked, name) in [
        ("xx.localhost", "xx.localhost"),
        ("xy.localhost", "xy.localhost"),
        ("XY.Localhost", "xy.localhost"),
    ] {
        let tls = tls_client::connect_as(addr, client("valid"), asked)
            .await
            .unwrap_or_else(|e| panic!("{asked}: {e}"));
        let peer = tls
            .get_ref()
            .1
            .peer_certificates()
            .expect("server certificate")[0]
            .to_vec();
        assert_eq!(
            peer,
            presented(name),
            "{asked} is answered with {name}'s certificate"
        );
    }
    // No SNI: the default site, whose certificate also names the loopback addresses.
    let no_sni = tls_client::without_sni(&client("valid"));
    let tls = tls_client::connect_as(addr, no_sni, "127.0.0.1")
        .await
        .expect("the default site takes a client without SNI");
    assert_eq!(
        tls.get_ref().1.peer_certificates().expect("certificate")[0].to_vec(),
        presented("xx.localhost")
    );
    let mut sender = tls_client::h1_on(tls).await;
    let mut req = get("/v1/accounts");
    req.headers_mut().insert(
        http::header::HOST,
        format!("127.0.0.1:{}", addr.port()).parse().expect("host"),
    );
    let (status, echo) = read(sender.send_request(req).await.expect("answer")).await;
    assert_eq!(status, StatusCode::OK, "{echo}");

    // A name no site has: no certificate, the handshake fails with an alert.
    let error = tls_client::connect_as(addr, client("valid"), "zz.localhost")
        .await
        .err()
        .unwrap_or_else(|| panic!("no site has zz.localhost"));
    assert!(error.to_string().contains("AccessDenied"), "{error}");
    running.stop().await;
}

/// Without a default site, a client that sends no server name gets no handshake.
#[tokio::test]
async fn without_a_default_site_a_client_without_sni_gets_no_handshake() {
    let running = service::start(two_site_config(|t| t.replace("default = true\n", ""))).await;
    let addr = running.gateway.expect("gateway");
    let error =
        tls_client::connect_as(addr, tls_client::without_sni(&client("valid")), "127.0.0.1")
            .await
            .err()
            .unwrap_or_else(|| panic!("no default site"));
    assert!(error.to_string().contains("AccessDenied"), "{error}");
    // Named clients are served as before.
    let port = addr.port();
    let (status, _) = call(
        &running,
        client("valid"),
        "xx.localhost",
        &format!("xx.localhost:{port}"),
        "/v1/accounts",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    running.stop().await;
}

/// The sites' counters carry their names: a bank group reads each site's traffic apart.
#[tokio::test]
async fn metrics_carry_the_site() {
    let running = service::start(two_site_config(|t| t)).await;
    let port = running.gateway.expect("gateway").port();
    let (status, _) = call(
        &running,
        client("valid"),
        "xy.localhost",
        &format!("xy.localhost:{port}"),
        "/v1/accounts",
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let text =
        psp_service::telemetry::metrics::render(&prometheus_client::registry::Registry::default());
    assert!(
        text.contains("face=\"gateway\",site=\"xy\",route=\"/v1/accounts\",decision=\"rejected\""),
        "{text}"
    );
    running.stop().await;
}

/// What keeps sites apart is checked when the configuration loads.
#[test]
fn a_configuration_that_cannot_keep_its_sites_apart_is_refused() {
    let text = std::fs::read_to_string(common::root().join("gateway.toml")).expect("gateway.toml");
    let refused = |edit: &dyn Fn(&str) -> String, says: &[&str]| {
        let edited = edit(&text);
        let error = psp_gateway::Config::from_toml(
            &edited,
            std::path::Path::new("gateway.toml"),
            common::root(),
        )
        .err()
        .unwrap_or_else(|| panic!("accepted: expected {says:?}"))
        .to_string();
        for s in says {
            assert!(error.contains(s), "{error} lacks {s}");
        }
    };
    refused(
        &|t| t.replace("server_names = [\"xy.localhost\"]\n", ""),
        &["site `xy` shares this listener and needs server_names"],
    );
    refused(
        &|t| t.replace("name = \"xy\"\n", "name = \"xy\"\ndefault = true\n"),
        &["each the listener's default"],
    );
    refused(
        &|t| t.replace("[\"xy.localhost\"]", "[\"xy.localhost\", \"xx.localhost\"]"),
        &["`xx.localhost` names both site `xx` and site `xy`"],
    );
    refused(
        &|t| t.replace("name = \"xy\"", "name = \"xx\""),
        &["name `xx` is used twice"],
    );
    refused(
        &|t| t.replace("name = \"xy\"", "name = \"X Y\""),
        &["name `X Y`"],
    );
    refused(
        &|t| t.replace("name = \"xy\"\n", ""),
        &["every site needs a name"],
    );
    refused(
        &|t| {
            t.replace(
                "name = \"xy\"\n",
                "name = \"xy\"\nclient_certificate = \"required\"\n",
            )
        },
        &["share this listener but not"],
    );
    refused(
        &|t| {
            format!(
                "{t}\n[gateway]\nlisten = \"127.0.0.1:8444\"\njurisdiction = \"XX\"\nupstream = \"sandbox-echo\"\ntls = {{ cert = \"c\", key = \"k\" }}\n"
            )
        },
        &["[gateway] and [[sites]] are both set"],
    );
    refused(
        &|t| t.replace("[\"xy.localhost\"]", "[\"xy.localhost\", \"xy_bad\"]"),
        &["server_names", "xy_bad", "not a DNS name"],
    );
    refused(
        &|t| {
            t.replace(
                "listen = \"127.0.0.1:8443\"\njurisdiction = \"XY\"",
                "jurisdiction = \"XY\"\ndefault = true",
            )
        },
        &["site `xy`: default = true needs listen"],
    );
    // A site without a listener needs no upstream and no TLS: the external authorisers
    // decide for it.
    let ext_only = text.replace(
        "listen = \"127.0.0.1:8443\"\njurisdiction = \"XY\"\ntls = { cert = \"certs/server/xy.localhost.pem\", key = \"certs/server/xy.localhost.key\" }\nupstream = \"sandbox-echo\"",
        "jurisdiction = \"XY\"",
    );
    assert_ne!(ext_only, text);
    psp_gateway::Config::from_toml(
        &ext_only,
        std::path::Path::new("gateway.toml"),
        common::root(),
    )
    .expect("a site without a listener");
}

/// `config check` reports each site.
#[test]
fn config_check_reports_each_site() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(["config", "check", "--config"])
        .arg(common::root().join("gateway.toml"))
        .output()
        .expect("runs");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains(
            "site xx: jurisdiction XX, listener 127.0.0.1:8443 as xx.localhost, localhost"
        ),
        "{said}"
    );
    assert!(
        said.contains("site xy: jurisdiction XY, listener 127.0.0.1:8443 as xy.localhost"),
        "{said}"
    );
}

/// The sandbox's two-site `gateway.toml` as a file in a directory of its own, on the test PKI
/// (whose responder answers the revocation checks of a `psp-gateway check` run).
fn two_site_config_file(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir).expect("dir");
    let (certs, root) = (
        test_pki().dir.display().to_string(),
        common::root().display().to_string(),
    );
    let text = std::fs::read_to_string(common::root().join("gateway.toml"))
        .expect("gateway.toml")
        .replace("\"certs/", &format!("\"{certs}/"))
        .replace("\"registers/", &format!("\"{root}/registers/"))
        .replace(
            "enabled = true",
            &format!("enabled = true\ncerts = \"{certs}\""),
        );
    let path = dir.join("gateway.toml");
    std::fs::write(&path, text).expect("write");
    path
}

/// `psp-gateway check --site NAME --path P`: what that site would decide, as its gateway and
/// its external authorisers decide it.
#[test]
fn check_site_answers_what_each_site_would_decide() {
    let config = two_site_config_file("sites_check");
    let check = |site: &str, psp: &str, path: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
            .args(["check", "--config"])
            .arg(&config)
            .args(["--site", site, "--path", path, "--cert"])
            .arg(test_pki().psp(psp))
            .output()
            .expect("runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("JSON")
    };
    let d = check("xx", "valid", "/v1/accounts");
    assert_eq!(d["decision"], "allow", "{d}");
    assert_eq!(
        d["identityHeaders"]["x-psp-auth-number"], "PSDXX-TEST-000001",
        "{d}"
    );
    let d = check("xy", "valid", "/v1/accounts");
    assert_eq!(d["decision"], "refuse", "{d}");
    assert_eq!(
        (d["status"].as_u64(), d["jurisdiction"].as_str()),
        (Some(403), Some("XY")),
        "{d}"
    );
    let d = check("xy", "passport-out-xy", "/v1/payments/sepa");
    assert_eq!(
        (d["decision"].as_str(), d["status"].as_u64()),
        (Some("refuse"), Some(403)),
        "{d}"
    );
    let d = check("xx", "revoked", "/v1/accounts");
    assert_eq!(
        (d["decision"].as_str(), d["code"].as_str()),
        (Some("refuse"), Some("certificate_revoked")),
        "{d}"
    );
    // The site's route rule and path screening apply: `..` is decided on its normal form.
    let d = check("xx", "aisp", "/v1/accounts/../payments");
    assert_eq!(d["decision"], "refuse", "{d}");

    // A site the configuration does not have, and a site with a jurisdiction: usage errors.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(["check", "--config"])
        .arg(&config)
        .args(["--site", "zz", "--path", "/v1/accounts", "--cert"])
        .arg(test_pki().psp("valid"))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(64));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("no site `zz`") && said.contains("xx, xy"),
        "{said}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(["check", "--config"])
        .arg(&config)
        .args([
            "--site",
            "xx",
            "--jurisdiction",
            "XY",
            "--path",
            "/",
            "--cert",
        ])
        .arg(test_pki().psp("valid"))
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(64),
        "--site with --jurisdiction is a usage error"
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("--jurisdiction"), "{said}");
}

/// A reload is all or nothing across sites: one site's error leaves every site as it was.
#[tokio::test]
async fn one_sites_reload_error_leaves_every_site_as_it_was() {
    let path = two_site_config_file("sites_reload");
    let on_ephemeral_ports = |t: String| {
        t.replace("127.0.0.1:8080", "127.0.0.1:0")
            .replace("127.0.0.1:8443", "127.0.0.1:0")
            .replace("127.0.0.1:9090", "127.0.0.1:0")
    };
    let original = on_ephemeral_ports(std::fs::read_to_string(&path).expect("config"));
    std::fs::write(&path, &original).expect("write");
    let running = service::start(psp_gateway::Config::load(&path).expect("loads")).await;
    let port = running.gateway.expect("gateway").port();
    let xx = format!("xx.localhost:{port}");
    let at_xx = |running: &Running| {
        let xx = xx.clone();
        let addr = running.gateway;
        async move {
            let addr = addr.expect("gateway");
            let tls = tls_client::connect_as(addr, client("valid"), "xx.localhost")
                .await
                .expect("handshake");
            let mut sender = tls_client::h1_on(tls).await;
            let mut req = get("/v1/accounts");
            req.headers_mut()
                .insert(http::header::HOST, xx.parse().expect("host"));
            read(sender.send_request(req).await.expect("answer"))
                .await
                .0
        }
    };
    assert_eq!(at_xx(&running).await, StatusCode::OK);

    // xx denies `valid`; xy's route prefix is refused: nothing is applied.
    let xx_site = "listen = \"127.0.0.1:0\"\njurisdiction = \"XX\"";
    let deny = format!("{xx_site}\ndeny = [\"PSDXX-TEST-000001\"]");
    let broken = original.replace(xx_site, &deny).replace(
        "default_dialect = \"uk-open-banking\"",
        "default_dialect = \"uk-open-banking\"\n[[sites.routes]]\nprefix = \"/v1/./x\"\nservices = [8]",
    );
    std::fs::write(&path, &broken).expect("write");
    assert!(psp_gateway::app::reload(&path, &running).await.is_none());
    let error = running.service.last_reload_error().expect("recorded").1;
    assert!(
        error.contains("site `xy`") && error.contains("/v1/./x"),
        "{error}"
    );
    assert_eq!(at_xx(&running).await, StatusCode::OK, "xx kept its rule");

    // xy fixed: both apply together.
    std::fs::write(&path, original.replace(xx_site, &deny)).expect("write");
    assert!(psp_gateway::app::reload(&path, &running).await.is_some());
    assert_eq!(
        at_xx(&running).await,
        StatusCode::UNAUTHORIZED,
        "xx now denies"
    );
    running.stop().await;
}

/// Behind a load balancer that terminates TLS (header mode), sites share a plain listener and
/// are chosen by `Host`; a host no site has goes to the default site, whose host check then
/// answers 421, so no request reaches a site it does not name.
#[tokio::test]
async fn on_a_plain_listener_the_host_chooses_the_site() {
    use common::in_memory;
    let up = common::upstream::start().await;
    let config = two_site_config(|t| {
        let t = t
            .replace(
                "tls = { cert = \"",
                "# tls removed: a load balancer terminates TLS\n# = { cert = \"",
            )
            .replace(
                "upstream = \"sandbox-echo\"",
                &format!(
                    "upstream = \"http://{}\"\nidentity = \"header\"\nidentity_header = \"x-client-cert\"\ntrusted_proxies = [\"127.0.0.1/32\"]",
                    up.addr
                ),
            );
        assert!(!t.contains("\ntls = "), "every site's tls line went");
        t
    });
    let faces = in_memory::faces(&config);
    let listen = faces.gateway().and_then(|g| g.listen()).expect("listener");
    let pem = std::fs::read_to_string(test_pki().psp("valid")).expect("pem");
    let escaped: String =
        percent_encoding::utf8_percent_encode(&pem, percent_encoding::NON_ALPHANUMERIC).to_string();
    let send_as = |version: http::Version, host: Option<&'static str>| {
        let (faces, escaped) = (&faces, escaped.clone());
        async move {
            let mut req = in_memory::request("GET", "/v1/accounts");
            *req.version_mut() = version;
            req.headers_mut().remove(http::header::HOST);
            if let Some(host) = host {
                req.headers_mut()
                    .insert(http::header::HOST, host.parse().expect("host"));
            }
            req.headers_mut()
                .insert("x-client-cert", escaped.parse().expect("value"));
            in_memory::gateway_at(faces, listen, &in_memory::connection(None), req)
                .await
                .status
        }
    };
    let send = |host: Option<&'static str>| send_as(http::Version::HTTP_11, host);
    assert_eq!(send(Some("xx.localhost")).await, StatusCode::OK);
    assert_eq!(
        send(Some("127.0.0.1:8443")).await,
        StatusCode::OK,
        "xx's hosts"
    );
    assert_eq!(
        send(Some("xy.localhost")).await,
        StatusCode::FORBIDDEN,
        "xy's rule"
    );
    assert_eq!(
        send(Some("bank.example")).await,
        StatusCode::MISDIRECTED_REQUEST,
        "no site names it"
    );
    // HTTP/1.0 may name no host: the default site. HTTP/1.1 must (RFC 9112 section 3.2;
    // issue 40 finding 5): 400.
    assert_eq!(
        send_as(http::Version::HTTP_10, None).await,
        StatusCode::OK,
        "no host: the default site"
    );
    assert_eq!(
        send(None).await,
        StatusCode::BAD_REQUEST,
        "HTTP/1.1 without Host"
    );
    assert_eq!(
        up.received.lock().expect("lock").len(),
        3,
        "only xx's calls went on"
    );
}
