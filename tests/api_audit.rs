//! The endpoint's `at` (an extension for audits): only callers with the `audit` role may ask
//! for a check as of a past time; everyone else gets the error of an unknown parameter. The
//! answer says which register snapshots and which revocation evidence it used.

mod common;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::service::*;
use common::test_pki::{test_config, test_pki};
use http::{Method, StatusCode};

const SANDBOX: &str = "Basic c2FuZGJveDpzYW5kYm94"; // sandbox:sandbox
const AUDITOR: &str = "Basic YXVkaXRvcjpzYW5kYm94"; // auditor:sandbox

fn eidas() -> String {
    STANDARD.encode(common::load_cert(&test_pki().psp("valid")).der)
}

async fn check(addr: std::net::SocketAddr, auth: &str, query: &str) -> Reply {
    send(
        addr,
        Method::GET,
        &format!("/v1/psp/eidas?jurisdiction=XX{query}"),
        &[
            ("authorization", auth),
            ("fi_reference_id", "PSDXX-TEST-999999"),
            ("version", "latest"),
            ("eidas", &eidas()),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_auditors_may_ask_as_of_a_past_time_and_the_answer_names_its_sources() {
    let history = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("api_audit_history");
    let _ = std::fs::remove_dir_all(&history);
    let config = test_config(|t| {
        // The sandbox password hash, for a second caller with the audit role.
        let hash = t
            .lines()
            .find(|l| l.starts_with("password_hash"))
            .expect("the sandbox credential")
            .to_owned();
        format!(
            "{t}\n[[api.credentials]]\nusername = \"auditor\"\n{hash}\nroles = [\"audit\"]\n\n[registers]\nhistory_dir = \"{}\"\n",
            history.display()
        )
    });
    let running = start(config).await;
    let api = running.api.expect("api");

    // A caller without the role: `at` is an unknown parameter for it.
    let r = check(api, SANDBOX, "&at=2026-01-01T00:00:00Z").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let body = r.json();
    assert_eq!(body["errors"][0]["code"], "parameter_invalid", "{body:#}");
    assert!(
        body["errors"][0]["title"].to_string().contains("`at`"),
        "{body:#}"
    );

    // The auditor, before the service's first start: no snapshot covers that time.
    let r = check(api, AUDITOR, "&at=2020-01-01T00:00:00Z").await;
    assert_eq!(r.status, StatusCode::OK);
    let body = r.json();
    assert_eq!(body["audit"]["at"], "2020-01-01T00:00:00Z");
    assert_eq!(
        body["audit"]["registersNotCovered"]
            .as_array()
            .map(Vec::len),
        Some(4),
        "the four sandbox register files: {body:#}"
    );
    assert!(
        body["homeRegister"]["warning"]
            .to_string()
            .contains("No register snapshot of"),
        "{body:#}"
    );

    // Now (the service recorded its registers at start): every file covered, the
    // snapshots named, and the answer the same as a plain check's.
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .expect("format");
    let r = check(api, AUDITOR, &format!("&at={}", now.replace(':', "%3A"))).await;
    assert_eq!(r.status, StatusCode::OK);
    // The extension is documented: the answer conforms to docs/openapi.yaml.
    common::openapi::OpenApi::load().conform("/v1/psp/eidas", "an audit answer", &r);
    let audited = r.json();
    assert_eq!(
        audited["audit"]["registerSnapshots"]
            .as_array()
            .map(Vec::len),
        Some(4),
        "{audited:#}"
    );
    assert!(audited["audit"]["revocation"]["ocsp"].is_string());
    let plain = check(api, SANDBOX, "").await.json();
    assert_eq!(audited["homeRegister"], plain["homeRegister"]);
    assert_eq!(audited["eIDAS"]["validity"], plain["eIDAS"]["validity"]);
    assert!(plain.get("audit").is_none());

    // Bad values, and `at` twice, are refused for the auditor too.
    for (query, why) in [
        ("&at=yesterday", "RFC 3339"),
        ("&at=2999-01-01T00:00:00Z", "in the future"),
        (
            "&at=2026-01-01T00:00:00Z&at=2026-01-02T00:00:00Z",
            "more than once",
        ),
    ] {
        let r = check(api, AUDITOR, query).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{query}");
        let body = r.json();
        assert_eq!(body["errors"][0]["code"], "parameter_invalid", "{query}");
        assert!(
            body["errors"][0]["title"].to_string().contains(why),
            "{query}: {body:#}"
        );
    }
    running.stop().await;
}

/// The sandbox XX register with PSP 000001 withdrawn.
fn withdrawn(text: &str) -> String {
    let at = text
        .find("\"legalName\": \"Sandbox Valid PSP\"")
        .expect("000001");
    let (head, tail) = text.split_at(at);
    format!(
        "{head}{}",
        tail.replacen(
            "\"status\": \"Authorised\"",
            "\"status\": \"Unauthorised\"",
            1
        )
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_reproduces_the_answer_of_march_after_the_register_changed_in_june() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("api_audit_changed");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let xx = dir.join("XX.json");
    let original =
        std::fs::read_to_string(common::root().join("registers/sandbox/XX.json")).expect("XX.json");
    let history = dir.join("history");
    let config = test_config(|t| {
        let hash = t
            .lines()
            .find(|l| l.starts_with("password_hash"))
            .expect("the sandbox credential")
            .to_owned();
        format!(
            "{}\n[[api.credentials]]\nusername = \"auditor\"\n{hash}\nroles = [\"audit\"]\n\n[registers]\nhistory_dir = \"{}\"\n",
            t.replace(
                "\"registers/sandbox/XX.json\"",
                &format!("\"{}\"", xx.display())
            ),
            history.display()
        )
    });
    // What serve recorded earlier: the sandbox content from March, the withdrawal from June.
    let h =
        psp_service::register::History::of(&config.registers, &config.base_dir).expect("history");
    std::fs::write(&xx, &original).expect("write");
    h.record(
        &config.registers,
        &config.base_dir,
        common::at("2026-03-01T00:00:00Z"),
    )
    .expect("record");
    std::fs::write(&xx, withdrawn(&original)).expect("write");
    h.record(
        &config.registers,
        &config.base_dir,
        common::at("2026-06-01T00:00:00Z"),
    )
    .expect("record");
    let running = start(config).await;
    let api = running.api.expect("api");

    let status = |v: &serde_json::Value| {
        v["homeRegister"]["categoryEntries"][0]["pspAuthStatus"]
            .as_str()
            .unwrap_or("none")
            .to_owned()
    };
    let today = check(api, SANDBOX, "").await.json();
    assert_eq!(status(&today), "Unauthorised", "{today:#}");
    let march = check(api, AUDITOR, "&at=2026-03-03T00:00:00Z").await.json();
    assert_eq!(status(&march), "Authorised", "{march:#}");
    let used = march["audit"]["registerSnapshots"].to_string();
    assert!(
        used.contains("2026-03-01T00:00:00Z") && used.contains("2026-06-01T00:00:00Z"),
        "{march:#}"
    );
    running.stop().await;
}
