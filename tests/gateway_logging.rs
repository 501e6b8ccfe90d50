//! The gateway's logging phase, driven in memory: every request leaves exactly one request
//! metric, a decision leaves exactly one audit record, a refusal before the rule exactly one
//! refusal line, and a client flooding past its rate leaves counts but no audit line (a flood
//! must not flood the audit log). Alone in its binary: it reads process-wide counters and
//! installs its own log capture.

mod common;

use common::in_memory;
use common::log_capture::capture;
use common::test_pki::test_config;
use common::upstream;
use http::StatusCode;
use psp_service::telemetry::metrics::{FaceLabels, RequestLabels, metrics};

fn requests(route: &str, decision: &str, reason: &str) -> u64 {
    metrics()
        .requests
        .get_or_create(&RequestLabels {
            face: "gateway".into(),
            site: "default".into(),
            route: route.to_owned().into(),
            decision: decision.to_owned().into(),
            reason: reason.to_owned().into(),
        })
        .get()
}

fn rate_limited() -> u64 {
    metrics()
        .rate_limited
        .get_or_create(&FaceLabels { face: "gateway" })
        .get()
}

#[tokio::test(flavor = "current_thread")]
async fn each_request_is_logged_once_and_a_flood_past_the_rate_writes_no_audit_line() {
    let (captured, _guard) = capture();

    let up = upstream::start().await;
    let faces = in_memory::faces(&test_config(|t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!(
                "upstream = \"http://{}\"\nrate_limit = {{ requests = 3, period_seconds = 3600 }}",
                up.addr
            ),
        )
    }));
    let before = (
        requests("/v1/accounts", "forwarded", ""),
        requests("", "rejected", "path_refused"),
        requests("", "rejected", "route_unknown"),
        requests("", "rejected", "rate_limit_exceeded"),
        rate_limited(),
    );
    let send = |uri: &'static str| {
        let faces = &faces;
        async move {
            in_memory::gateway(
                faces,
                in_memory::chain_of("valid"),
                in_memory::request("GET", uri),
            )
            .await
            .status
        }
    };
    // The client's quota is three: one forwarded, two refused before the rule.
    assert_eq!(send("/v1/accounts").await, StatusCode::OK);
    assert_eq!(
        send("/v1/accounts%2f..%2fpayments").await,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(send("/nowhere").await, StatusCode::NOT_FOUND);
    // Then a flood past it.
    for _ in 0..10 {
        assert_eq!(send("/v1/accounts").await, StatusCode::TOO_MANY_REQUESTS);
    }
    assert_eq!(
        up.received.lock().expect("lock").len(),
        1,
        "one call forwarded"
    );

    let after = (
        requests("/v1/accounts", "forwarded", ""),
        requests("", "rejected", "path_refused"),
        requests("", "rejected", "route_unknown"),
        requests("", "rejected", "rate_limit_exceeded"),
        rate_limited(),
    );
    assert_eq!(
        (
            after.0 - before.0,
            after.1 - before.1,
            after.2 - before.2,
            after.3 - before.3,
            after.4 - before.4,
        ),
        (1, 1, 1, 10, 10),
        "each request counted once, under its outcome"
    );
    assert_eq!(
        captured.count("gateway decision"),
        1,
        "one decision, one record"
    );
    assert_eq!(
        captured.count("gateway refused"),
        2,
        "the two refusals before the rule, and none for the flood"
    );
    assert_eq!(
        captured.count("gateway request"),
        13,
        "one access line per request"
    );
    // The decision's record carries the revocation evidence the check used, both methods
    // (shared by every record of the cached result, joined once).
    let decision = &captured.lines("gateway decision")[0]["fields"];
    let evidence = decision["evidence"].as_str().expect("evidence");
    assert!(
        evidence.starts_with("CRL: not revoked (CRL from ")
            && evidence.contains("; OCSP: not revoked (OCSP response from "),
        "{decision}"
    );
    // Each audit record says which site decided, and through which face.
    let audited = [
        captured.lines("gateway decision"),
        captured.lines("gateway refused"),
    ]
    .concat();
    assert_eq!(audited.len(), 3);
    for line in audited {
        assert!(
            line["fields"]["site"] == "default" && line["fields"]["face"] == "gateway",
            "{line}"
        );
    }
}
