//! `/metrics` on the admin listener: after a few checks, the scrape carries the event and
//! state metrics, and `promtool check metrics` (Debian package `prometheus`, installed by
//! scripts/test) accepts it.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use base64::Engine;
use common::service::*;
use common::test_pki::{test_config, test_pki};
use http::{Method, StatusCode};

/// The value of the first sample line starting with `prefix`.
fn sample(text: &str, prefix: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no sample {prefix} in:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scrape_carries_checks_cache_trust_and_registers_and_promtool_accepts_it() {
    // A request limiter that tracks two sources, and a trusted proxy to name three.
    let running = start(test_config(|t| {
        t.replace(
            "rate_limit = { requests = 15000, period_seconds = 300 }",
            "rate_limit = { requests = 15000, period_seconds = 300, max_tracked_sources = 2 }\n\
             trusted_proxies = [\"127.0.0.1/32\"]",
        )
    }))
    .await;
    let api = running.api.expect("api");
    let admin = running.admin.expect("admin");
    let eidas = base64::engine::general_purpose::STANDARD
        .encode(common::load_cert(&test_pki().psp("valid")).der);
    for source in ["192.0.2.1", "192.0.2.2", "192.0.2.3"] {
        let r = send(
            api,
            Method::GET,
            "/v1/psp/eidas?jurisdiction=XX",
            &[
                ("authorization", "Basic c2FuZGJveDpzYW5kYm94"),
                ("fi_reference_id", "PSDXX-TEST-999999"),
                ("eidas", &eidas),
                ("x-forwarded-for", source),
            ],
        )
        .await;
        assert_eq!(r.status, StatusCode::OK);
    }
    // One refused for its missing parameter.
    let r = send(
        api,
        Method::GET,
        "/v1/psp/eidas",
        &[("authorization", "Basic c2FuZGJveDpzYW5kYm94")],
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    let r = send(admin, Method::GET, "/metrics", &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.headers["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = String::from_utf8(r.body.to_vec()).expect("UTF-8");

    assert!(
        sample(
            &text,
            "psp_gateway_requests_total{face=\"api\",site=\"\",route=\"\",decision=\"answered\",reason=\"\"}"
        ) >= 3.0
    );
    assert!(
        sample(
            &text,
            "psp_gateway_requests_total{face=\"api\",site=\"\",route=\"\",decision=\"refused\",reason=\"parameter_missing\"}"
        ) >= 1.0
    );
    assert!(
        sample(
            &text,
            "psp_gateway_check_duration_seconds_count{face=\"api\"}"
        ) >= 3.0
    );
    assert!(sample(&text, "psp_gateway_result_cache_total{result=\"miss\"}") >= 1.0);
    assert!(sample(&text, "psp_gateway_result_cache_total{result=\"hit\"}") >= 2.0);
    assert!(
        sample(
            &text,
            "psp_gateway_trusted_issuers{source=\"sandbox-qtsp\"}"
        ) >= 1.0
    );
    assert_eq!(
        sample(&text, "psp_gateway_register_entities{nca=\"XX-TEST\"}"),
        16.0
    );
    assert!(sample(&text, "psp_gateway_reference_data_generation") >= 1.0);
    // The third source made room in the two-source table.
    assert!(
        sample(
            &text,
            "psp_gateway_rate_limiter_evictions_total{table=\"requests\"}"
        ) >= 1.0
    );
    assert!(text.contains("psp_gateway_revocation_lookups_total{method=\"ocsp\""));
    // Bounded state (docs/hardening.md): each bound's gauge is in the scrape.
    assert_eq!(
        sample(&text, "psp_gateway_revocation_fetches_in_flight_max"),
        32.0
    );
    assert_eq!(
        sample(&text, "psp_gateway_revocation_fetches_in_flight"),
        0.0
    );
    assert!(
        sample(
            &text,
            "psp_gateway_revocation_cache_entries{method=\"ocsp\"}"
        ) >= 0.0
    );
    assert!(sample(&text, "psp_gateway_revocation_crl_cache_bytes") >= 0.0);
    assert!(sample(&text, "psp_gateway_client_chain_cache_entries") >= 0.0);
    assert_eq!(sample(&text, "psp_gateway_upstream_in_flight"), 0.0);

    // An independent check of the format.
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (Debian package prometheus; scripts/test installs it)");
    promtool
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = promtool.wait_with_output().expect("promtool");
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    running.stop().await;
}
