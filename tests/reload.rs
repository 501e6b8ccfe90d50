//! Reloading reference data: all or nothing, and a failed reload keeps serving the old data.

mod common;

use std::sync::atomic::Ordering;

use common::service::*;
use common::test_pki::{config_file, new_server_certificate, test_pki};
use common::tls_client::{self, Proto, get};
use common::upstream::{held_upstream, until};
use common::*;
use http::StatusCode;
use psp_gateway::app;

fn write_config(dir: &std::path::Path, registers_xx: &str) -> std::path::PathBuf {
    // The sandbox configuration, with XX's register read from `registers_xx`.
    let xx = format!("\"{}/registers/sandbox/XX.json\"", root().display());
    sandbox_file_with(dir, |t| t.replace(&xx, &format!("\"{registers_xx}\"")))
}

#[tokio::test]
async fn a_failed_reload_keeps_the_current_data_and_a_good_one_swaps_it_whole() {
    let dir = std::env::temp_dir().join(format!("psp-gateway-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let good = std::fs::read_to_string(root().join("registers/sandbox/XX.json")).expect("XX");
    let copy = dir.join("XX.json");
    std::fs::write(&copy, &good).expect("write");
    let path = write_config(&dir, &copy.display().to_string());
    let running = start(psp_gateway::Config::load(&path).expect("config")).await;
    let service = running.service.clone();
    assert_eq!(service.data().generation, 1);
    let before = service.data().registers.registers().len();

    // A truncated register file: refused, nothing changes.
    let broken = dir.join("XX-broken.json");
    std::fs::write(&broken, &good[..good.len() / 2]).expect("write");
    let path = write_config(&dir, &broken.display().to_string());
    app::reload(&path, &running).await;
    assert_eq!(
        service.data().generation,
        1,
        "a failed reload is not applied"
    );
    assert_eq!(service.data().registers.registers().len(), before);

    // A configuration that does not parse: refused too.
    let bad_toml = dir.join("bad.toml");
    std::fs::write(&bad_toml, "[checks\n").expect("write");
    app::reload(&bad_toml, &running).await;
    assert_eq!(service.data().generation, 1);

    // A good one: a new generation, every part loaded.
    let path = write_config(&dir, &copy.display().to_string());
    app::reload(&path, &running).await;
    assert_eq!(service.data().generation, 2);
    assert_eq!(service.data().registers.registers().len(), before);
    assert!(!service.data().trust.is_empty());

    running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The repository's sandbox configuration as a file in `dir`, with every path absolute, every
/// listener on an ephemeral loopback port, and `extra` appended.
fn sandbox_file(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    sandbox_file_with(dir, |t| format!("{t}\n{extra}"))
}

/// [`sandbox_file`], edited by `edit` (paths are absolute by then).
fn sandbox_file_with(
    dir: &std::path::Path,
    edit: impl FnOnce(String) -> String,
) -> std::path::PathBuf {
    config_file(dir, &root().join("certs"), edit)
}

/// The repository's sandbox configuration as a file in `dir`, on this test binary's PKI (whose
/// revocation responder is up), every listener on an ephemeral loopback port, then `edit`.
fn pki_file_with(dir: &std::path::Path, edit: impl FnOnce(String) -> String) -> std::path::PathBuf {
    config_file(dir, &test_pki().dir, edit)
}

/// Callers that keep calling during the reloads, each with a credential of its own (so each
/// needs its own argon2 verification when its login is not remembered), more than the two
/// verification slots: before the remembered logins were kept across reloads, some of them
/// got 503 `server_busy` after each reload (16 and 23 in two runs of 20 reloads, issue 22).
const CALLERS_UNDER_LOAD: usize = 8;

/// `Basic` credentials of `user` with the sandbox's password.
fn basic_sandbox(user: &str) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:sandbox"))
    )
}

/// Argon2 verifications the running endpoint has made so far.
fn verifications(running: &app::Running) -> u64 {
    running
        .api_state
        .as_ref()
        .expect("api")
        .auth
        .load()
        .verifications()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_reloads_under_load_fail_no_request_and_a_new_credential_takes_effect() {
    use http::StatusCode;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

    let dir = std::env::temp_dir().join(format!("psp-gateway-reload20-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let hash = sandbox_hash_line(&sandbox_file(&dir, ""));
    // The callers under load, in every configuration of the test.
    let callers: String = (0..CALLERS_UNDER_LOAD)
        .map(|i| format!("[[api.credentials]]\nusername = \"client{i}\"\n{hash}\n"))
        .collect();
    let path = sandbox_file(&dir, &callers);
    let running = start(psp_gateway::Config::load(&path).expect("config")).await;
    let api = running.api.expect("api");
    let admin = running.admin.expect("admin");
    let check = move |auth: String| async move { api_check(api, &auth, "").await.status };
    // second:sandbox is not a caller yet.
    let second = basic_sandbox("second");
    assert_eq!(check(second.clone()).await, StatusCode::UNAUTHORIZED);
    // Each caller logs in once: one verification each, then remembered.
    for i in 0..CALLERS_UNDER_LOAD {
        assert_eq!(
            check(basic_sandbox(&format!("client{i}"))).await,
            StatusCode::OK
        );
    }
    let verified_before = verifications(&running);

    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU32::new(0));
    let mut load = Vec::new();
    for i in 0..CALLERS_UNDER_LOAD {
        let (stop, answered) = (stop.clone(), answered.clone());
        let auth = basic_sandbox(&format!("client{i}"));
        load.push(tokio::spawn(async move {
            let mut failed = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let status = check(auth.clone()).await;
                answered.fetch_add(1, Ordering::Relaxed);
                if status != StatusCode::OK {
                    failed.push(status);
                }
            }
            failed
        }));
    }
    for round in 0..20 {
        // Every other reload adds the second caller; the last one keeps it.
        let extra = if round % 2 == 1 {
            format!("{callers}[[api.credentials]]\nusername = \"second\"\n{hash}\n")
        } else {
            callers.clone()
        };
        let path = sandbox_file(&dir, &extra);
        app::reload(&path, &running).await;
        assert_eq!(
            running.service.data().generation,
            round + 2,
            "round {round}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for task in load {
        let failed = task.await.expect("join");
        assert!(
            failed.is_empty(),
            "failed requests during reloads: {failed:?}"
        );
    }
    assert!(answered.load(Ordering::Relaxed) > 0);
    assert_eq!(
        verifications(&running),
        verified_before,
        "the callers' remembered logins outlive the reloads: no password is verified again"
    );
    // The last reload's configuration has the second caller.
    assert_eq!(check(second.clone()).await, StatusCode::OK);

    // A failed reload is shown in /readyz (ready still: the data in use is the last good),
    // and cleared by the next good one.
    std::fs::write(dir.join("bad.toml"), "[checks\n").expect("write");
    app::reload(&dir.join("bad.toml"), &running).await;
    let ready = send(admin, http::Method::GET, "/readyz", &[]).await.json();
    assert!(
        ready["lastReloadError"]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("configuration invalid"),
        "{ready:#}"
    );
    // Unauthenticated: it says where the file is wrong, never what the file says there (a
    // secret on the offending line, or a secret value in the wrong place).
    for bad in [
        "[checks]\nerror_link_base = hunter2-on-the-line\n",
        "[[api.credentials]]\nusername = \"a\"\npassword_hash = 7\n[evidence]\nsigning_key = 1\nprevious_keys = \"hunter2-as-a-value\"\n",
    ] {
        std::fs::write(dir.join("bad.toml"), bad).expect("write");
        app::reload(&dir.join("bad.toml"), &running).await;
        let ready = send(admin, http::Method::GET, "/readyz", &[]).await;
        let text = String::from_utf8_lossy(&ready.body).into_owned();
        assert!(text.contains("lastReloadError"), "{text}");
        assert!(
            !text.contains("hunter2"),
            "a configuration's text in /readyz: {text}"
        );
    }
    app::reload(&sandbox_file(&dir, &callers), &running).await;
    let ready = send(admin, http::Method::GET, "/readyz", &[]).await.json();
    assert!(ready["lastReloadError"].is_null(), "{ready:#}");
    // And the second caller is gone again.
    assert_eq!(check(second).await, StatusCode::UNAUTHORIZED);
    running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_forgets_the_remembered_login_of_a_changed_credential_only() {
    use http::StatusCode;
    let dir = std::env::temp_dir().join(format!("psp-gateway-reload-kept-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let sandbox_hash = sandbox_hash_line(&sandbox_file(&dir, ""));
    let other = |hash: &str| {
        format!("[[api.credentials]]\nusername = \"other\"\npassword_hash = \"{hash}\"\n")
    };
    let first = psp_faces::api::auth::hash_secret("sandbox").expect("hash");
    let path = sandbox_file(&dir, &other(&first));
    let running = start(psp_gateway::Config::load(&path).expect("config")).await;
    let api = running.api.expect("api");
    let (sandbox, other_caller) = (basic_sandbox("sandbox"), basic_sandbox("other"));
    assert_eq!(api_check(api, &sandbox, "").await.status, StatusCode::OK);
    assert_eq!(
        api_check(api, &other_caller, "").await.status,
        StatusCode::OK
    );
    let verified = verifications(&running);
    assert_eq!(verified, 2, "one verification per credential");

    // Unchanged credentials (the file rewritten, the data reloaded): nothing is verified again.
    assert!(app::reload(&path, &running).await.is_some());
    assert_eq!(api_check(api, &sandbox, "").await.status, StatusCode::OK);
    assert_eq!(
        api_check(api, &other_caller, "").await.status,
        StatusCode::OK
    );
    assert_eq!(verifications(&running), verified);

    // `other` rehashed (the same password, another salt): its login is verified again, once;
    // the sandbox's is still remembered.
    let second = psp_faces::api::auth::hash_secret("sandbox").expect("hash");
    assert!(
        app::reload(&sandbox_file(&dir, &other(&second)), &running)
            .await
            .is_some()
    );
    assert_eq!(
        api_check(api, &other_caller, "").await.status,
        StatusCode::OK
    );
    assert_eq!(
        api_check(api, &other_caller, "").await.status,
        StatusCode::OK
    );
    assert_eq!(api_check(api, &sandbox, "").await.status, StatusCode::OK);
    assert_eq!(verifications(&running), verified + 1);

    // `other`'s password changed: the old one, remembered a moment ago, is refused.
    let changed = psp_faces::api::auth::hash_secret("a new password").expect("hash");
    assert!(
        app::reload(&sandbox_file(&dir, &other(&changed)), &running)
            .await
            .is_some()
    );
    assert_eq!(
        api_check(api, &other_caller, "").await.status,
        StatusCode::UNAUTHORIZED
    );
    assert!(sandbox_hash.contains("$argon2"), "{sandbox_hash}");
    running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A TLS connection to the gateway as the sandbox's valid PSP, kept open: the certificate the
/// gateway presented, and an HTTP/1.1 sender on it.
async fn open_gateway_connection(
    addr: std::net::SocketAddr,
) -> (
    rustls::pki_types::CertificateDer<'static>,
    hyper::client::conn::http1::SendRequest<common::tls_client::ReqBody>,
) {
    use common::tls_client::{Proto, client_config};
    let config = client_config(&test_pki().dir, Some("valid"), Proto::H1);
    let tls = common::tls_client::connect(addr, config).await;
    let presented = tls
        .get_ref()
        .1
        .peer_certificates()
        .expect("server certificate")[0]
        .clone();
    let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .expect("h1 handshake");
    tokio::spawn(conn);
    (presented, sender)
}

async fn get_accounts(
    sender: &mut hyper::client::conn::http1::SendRequest<common::tls_client::ReqBody>,
) -> http::StatusCode {
    sender.ready().await.expect("connection still open");
    sender
        .send_request(common::tls_client::get("/v1/accounts"))
        .await
        .expect("response")
        .status()
}

/// Replaces `path` the way deployments do: written aside, renamed over.
fn replace_file(path: &std::path::Path, contents: &str) {
    let staged = path.with_extension("new");
    std::fs::write(&staged, contents).expect("write");
    std::fs::rename(&staged, path).expect("rename");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_server_certificate_serves_new_handshakes_while_open_connections_continue() {
    let dir = std::env::temp_dir().join(format!("psp-gateway-rotate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (cert, key) = (dir.join("server-cert.pem"), dir.join("server-key.pem"));
    let pki = test_pki().dir.clone();
    std::fs::copy(pki.join("server/cert.pem"), &cert).expect("copy");
    std::fs::copy(pki.join("server/key.pem"), &key).expect("copy");
    let r = pki.display().to_string();
    let path = pki_file_with(&dir, |t| {
        t.replace(&format!("{r}/server/cert.pem"), &cert.display().to_string())
            .replace(&format!("{r}/server/key.pem"), &key.display().to_string())
    });
    let running = start(psp_gateway::Config::load(&path).expect("config")).await;
    let gateway = running.gateway.expect("gateway");

    let (old_presented, mut open) = open_gateway_connection(gateway).await;
    assert_eq!(get_accounts(&mut open).await, http::StatusCode::OK);

    // Rotated: a new certificate and key, then a reload.
    let (new_cert, new_key) = new_server_certificate(&test_pki().dir);
    replace_file(&key, &new_key);
    replace_file(&cert, &new_cert);
    assert!(
        app::reload(&path, &running).await.is_some(),
        "the reload applies"
    );

    let (new_presented, mut fresh) = open_gateway_connection(gateway).await;
    use rustls::pki_types::pem::PemObject;
    let expected = rustls::pki_types::CertificateDer::from_pem_slice(new_cert.as_bytes())
        .expect("new certificate");
    assert_eq!(
        new_presented, expected,
        "new handshakes present the new certificate"
    );
    assert_ne!(new_presented, old_presented);
    assert_eq!(get_accounts(&mut fresh).await, http::StatusCode::OK);
    // The connection opened before the rotation goes on, with the certificate it was made with.
    assert_eq!(get_accounts(&mut open).await, http::StatusCode::OK);

    // A key that is not the certificate's: refused whole, the last good certificate stays.
    let (_, other_key) = new_server_certificate(&test_pki().dir);
    replace_file(&key, &other_key);
    assert!(
        app::reload(&path, &running).await.is_none(),
        "a mismatched key is refused"
    );
    let error = running
        .service
        .last_reload_error()
        .expect("the failure is recorded")
        .1;
    assert!(
        error.contains("server-key.pem"),
        "the error names the key file: {error}"
    );
    let (still, mut again) = open_gateway_connection(gateway).await;
    assert_eq!(
        still, expected,
        "the last good certificate is still presented"
    );
    assert_eq!(get_accounts(&mut again).await, http::StatusCode::OK);

    running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_rebuilds_the_gateway_and_refuses_whole_what_only_a_restart_applies() {
    let dir = std::env::temp_dir().join(format!("psp-gateway-reload-gw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = pki_file_with(&dir, |t| t);
    let running = start(psp_gateway::Config::load(&path).expect("config")).await;
    let gateway = running.gateway.expect("gateway");
    let (_, mut before) = open_gateway_connection(gateway).await;
    assert_eq!(get_accounts(&mut before).await, http::StatusCode::OK);

    // The access rule is part of the gateway a reload rebuilds: denied from the next request.
    let deny = |t: String| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            "upstream = \"sandbox-echo\"\ndeny = [\"PSDXX-TEST-000001\"]",
        )
    };
    let path = pki_file_with(&dir, deny);
    assert!(app::reload(&path, &running).await.is_some());
    assert_eq!(
        get_accounts(&mut before).await,
        http::StatusCode::UNAUTHORIZED,
        "the denied PSP is refused (CERTIFICATE_BLOCKED) on the connection it already had"
    );

    // A change only a restart applies, with a change a reload could apply (the deny list
    // dropped): refused whole, so the PSP stays denied.
    let generation = running.service.data().generation;
    let path = pki_file_with(&dir, |t| {
        t.replace("[admin]", "[limits]\nmax_connections = 7\n\n[admin]")
    });
    assert!(app::reload(&path, &running).await.is_none());
    let error = running.service.last_reload_error().expect("recorded").1;
    assert!(
        error.contains("limits") && error.contains("restart"),
        "the error names the setting: {error}"
    );
    assert_eq!(running.service.data().generation, generation);
    assert_eq!(
        get_accounts(&mut before).await,
        http::StatusCode::UNAUTHORIZED,
        "the deny list of the last good configuration stays"
    );
    // The result cache is sized when the service starts: `[results]` is restart-only too.
    let path = pki_file_with(&dir, |t| t.replace("ttl_seconds = 300", "ttl_seconds = 60"));
    assert!(app::reload(&path, &running).await.is_none());
    let error = running.service.last_reload_error().expect("recorded").1;
    assert!(
        error.contains("results") && error.contains("restart"),
        "the error names the section: {error}"
    );

    running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_keeps_the_gateway_rate_limit_keeps_the_clients_counts() {
    let dir = std::env::temp_dir().join(format!("psp-gateway-reload-rl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let limited = |t: String| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            "upstream = \"sandbox-echo\"\nrate_limit = { requests = 2, period_seconds = 300 }",
        )
    };
    let path = pki_file_with(&dir, limited);
    let running = start(psp_gateway::Config::load(&path).expect("config")).await;
    let gateway = running.gateway.expect("gateway");
    let (_, mut open) = open_gateway_connection(gateway).await;
    assert_eq!(get_accounts(&mut open).await, http::StatusCode::OK);
    assert_eq!(get_accounts(&mut open).await, http::StatusCode::OK);
    assert_eq!(
        get_accounts(&mut open).await,
        http::StatusCode::TOO_MANY_REQUESTS
    );
    // The same limit, with another change: the gateway is rebuilt, the quota is not renewed.
    let path = pki_file_with(&dir, |t| {
        limited(t).replace(
            "upstream = \"sandbox-echo\"",
            "upstream = \"sandbox-echo\"\ndeny = [\"PSDXX-TEST-999998\"]",
        )
    });
    assert!(app::reload(&path, &running).await.is_some());
    assert_eq!(
        get_accounts(&mut open).await,
        http::StatusCode::TOO_MANY_REQUESTS,
        "a reload is no fresh quota"
    );
    // A new limit is a new table.
    let path = pki_file_with(&dir, |t| limited(t).replace("requests = 2", "requests = 5"));
    assert!(app::reload(&path, &running).await.is_some());
    assert_eq!(get_accounts(&mut open).await, http::StatusCode::OK);
    running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The sandbox's password hash line (`password_hash = "…"`, for the password `sandbox`) in the
/// configuration file at `path`.
fn sandbox_hash_line(path: &std::path::Path) -> String {
    std::fs::read_to_string(path)
        .expect("read")
        .lines()
        .find(|l| l.starts_with("password_hash"))
        .expect("the sandbox credential")
        .to_owned()
}

/// A check of the sandbox's valid PSP on the endpoint at `api` with `authorization`, and
/// `query` appended to `jurisdiction=XX`.
async fn api_check(api: std::net::SocketAddr, authorization: &str, query: &str) -> Reply {
    use base64::Engine;
    let pem = std::fs::read(root().join("certs/psp/valid.pem")).expect("cert");
    let der = psp_cert::cert::PspCertificate::parse(&pem)
        .expect("parses")
        .der;
    let eidas = base64::engine::general_purpose::STANDARD.encode(der);
    send(
        api,
        http::Method::GET,
        &format!("/v1/psp/eidas?jurisdiction=XX{query}"),
        &[
            ("authorization", authorization),
            ("fi_reference_id", "PSDXX-TEST-999999"),
            ("eidas", &eidas),
        ],
    )
    .await
}

/// auditor:sandbox
const AUDITOR: &str = "Basic YXVkaXRvcjpzYW5kYm94";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_or_a_caller_removed_by_a_reload_is_refused_from_the_next_request() {
    use http::StatusCode;
    let dir = std::env::temp_dir().join(format!("psp-gateway-reload-role-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let hash = sandbox_hash_line(&sandbox_file(&dir, ""));
    let auditor = |roles: &str| {
        format!("[[api.credentials]]\nusername = \"auditor\"\n{hash}\nroles = [{roles}]\n")
    };
    let path = sandbox_file(&dir, &auditor("\"audit\""));
    let running = start(psp_gateway::Config::load(&path).expect("config")).await;
    let api = running.api.expect("api");
    let at = "&at=2026-01-01T00:00:00Z";
    // The auditor's password is verified and remembered; `at` is allowed.
    assert_eq!(api_check(api, AUDITOR, at).await.status, StatusCode::OK);
    assert_eq!(api_check(api, AUDITOR, "").await.status, StatusCode::OK);

    // The role removed: the same (remembered) password may still check, but `at` is refused
    // as for any caller without the role, at once.
    let path = sandbox_file(&dir, &auditor(""));
    assert!(app::reload(&path, &running).await.is_some());
    let refused = api_check(api, AUDITOR, at).await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND);
    assert_eq!(
        refused.json()["errors"][0]["code"],
        "parameter_invalid",
        "the documented refusal of `at` for a caller without the audit role"
    );
    assert_eq!(api_check(api, AUDITOR, "").await.status, StatusCode::OK);

    // The role back, then the caller removed: 401 from the next request.
    let path = sandbox_file(&dir, &auditor("\"audit\""));
    assert!(app::reload(&path, &running).await.is_some());
    assert_eq!(api_check(api, AUDITOR, at).await.status, StatusCode::OK);
    let path = sandbox_file(&dir, "");
    assert!(app::reload(&path, &running).await.is_some());
    assert_eq!(
        api_check(api, AUDITOR, at).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        api_check(api, AUDITOR, "").await.status,
        StatusCode::UNAUTHORIZED
    );
    running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_reload_is_no_fresh_upstream_budget() {
    let up = held_upstream().await;
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("gateway_overrides_reload");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    let addr = up.addr;
    let budget = move |t: String, extra: &str| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!(
                "upstream = \"http://{addr}\"\nupstream_max_requests = 3\nupstream_max_requests_per_psp = 2\n{extra}"
            ),
        )
    };
    let path = config_file(&dir, &test_pki().dir, |t| budget(t, ""));
    let running = service::start(psp_gateway::Config::load(&path).expect("configuration")).await;
    let gateway_addr = running.gateway.expect("gateway");
    let conn = tls_client::open_h2(
        gateway_addr,
        tls_client::client_config(&test_pki().dir, Some("valid"), Proto::H2),
    )
    .await;
    let mut held = tokio::task::JoinSet::new();
    for _ in 0..2 {
        let mut sender = conn.clone();
        held.spawn(async move { sender.send_request(get("/v1/accounts")).await });
    }
    until("two calls held upstream", || {
        up.held.load(Ordering::SeqCst) == 2
    })
    .await;

    // A reload that changes something else, not the budget: the two calls are still in
    // flight, so the PSP's share is still spent.
    config_file(&dir, &test_pki().dir, |t| {
        budget(t, "strip_headers = [\"x-bank-route\"]")
    });
    assert!(
        psp_gateway::app::reload(&path, &running).await.is_some(),
        "the reload is accepted"
    );
    let mut sender = conn.clone();
    // With a fresh budget the call would be held upstream like the other two: bounded wait.
    let response = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        sender.send_request(get("/v1/accounts")),
    )
    .await
    .expect("answered at once, not held upstream on a fresh budget")
    .expect("response");
    assert_eq!(
        response.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "a reload gave the PSP a fresh budget"
    );

    up.release.send(true).expect("release");
    while let Some(done) = held.join_next().await {
        assert_eq!(
            done.expect("task").expect("response").status(),
            StatusCode::OK
        );
    }
    running.stop().await;
}
