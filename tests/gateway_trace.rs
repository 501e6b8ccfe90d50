//! W3C Trace Context through the gateway, driven in memory: a client's trace reaches the bank's
//! API with the gateway's span as its parent and is written into the audit record and the
//! access line beside the check id; what the gateway does not believe (a malformed
//! `traceparent`, one from a peer `from-trusted-proxies` does not trust, anything under
//! `ignore`) starts a new trace and never reaches the upstream as it was sent. The external
//! authorisers' audit records carry the trace id of the request they describe. Alone in its
//! binary: it installs its own log capture.

mod common;

use std::net::SocketAddr;

use common::in_memory;
use common::log_capture::capture;
use common::test_pki::test_config;
use common::upstream;
use http::StatusCode;

/// The specification's example (W3C Trace Context, section 3.2.2.5.1).
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_PARENT: &str = "00f067aa0ba902b7";
const CLIENT_TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The sandbox gateway in front of `up`, with `extra` in its `[gateway]` section.
fn faces_with(up: &upstream::Upstream, extra: &str) -> psp_gateway::app::Faces {
    in_memory::faces(&test_config(|t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!("upstream = \"http://{}\"\n{extra}", up.addr),
        )
    }))
}

/// One request of the valid PSP to `/v1/accounts` with `headers`.
async fn send(faces: &psp_gateway::app::Faces, headers: &[(&str, &str)]) -> in_memory::Answer {
    let mut request = in_memory::request("GET", "/v1/accounts");
    for (name, value) in headers {
        request.headers_mut().append(
            http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
            http::HeaderValue::from_str(value).expect("value"),
        );
    }
    in_memory::gateway(faces, in_memory::chain_of("valid"), request).await
}

/// The `traceparent` values the upstream received with its last request.
fn forwarded(up: &upstream::Upstream) -> (Vec<String>, Vec<String>) {
    let received = up.received.lock().expect("lock");
    let last = received.last().expect("a forwarded request");
    let all = |name: &str| {
        last.headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().expect("ascii").to_owned())
            .collect::<Vec<_>>()
    };
    (all("traceparent"), all("tracestate"))
}

/// `00-<trace>-<parent>-<flags>` split into its fields.
fn fields(traceparent: &str) -> (String, String, String) {
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    assert_eq!(parts[0], "00");
    (
        parts[1].to_owned(),
        parts[2].to_owned(),
        parts[3].to_owned(),
    )
}

#[tokio::test(flavor = "current_thread")]
async fn a_clients_trace_reaches_the_upstream_the_audit_record_and_the_access_line() {
    let (captured, _guard) = capture();
    let up = upstream::start().await;
    let faces = faces_with(&up, "");
    let answer = send(
        &faces,
        &[
            ("traceparent", CLIENT_TRACEPARENT),
            ("tracestate", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"),
        ],
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    let (parents, states) = forwarded(&up);
    assert_eq!(parents.len(), 1, "one traceparent: {parents:?}");
    let (trace, parent, flags) = fields(&parents[0]);
    assert_eq!(trace, CLIENT_TRACE, "the same trace");
    assert_ne!(parent, CLIENT_PARENT, "the gateway's span is the parent");
    assert_eq!(parent.len(), 16);
    assert_eq!(flags, "01");
    assert_eq!(states, ["congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"]);

    let decision = captured.lines("gateway decision");
    assert_eq!(decision.len(), 1);
    let check_id = decision[0]["fields"]["check_id"]
        .as_str()
        .expect("check id");
    assert_eq!(decision[0]["fields"]["trace_id"], CLIENT_TRACE);
    let access = captured.lines("gateway request");
    assert_eq!(access.len(), 1);
    assert_eq!(access[0]["fields"]["trace_id"], CLIENT_TRACE);
    assert_eq!(access[0]["fields"]["span_id"], parent.as_str());
    assert_eq!(access[0]["fields"]["traceparent"], "accepted");
    assert_eq!(access[0]["fields"]["check_id"], check_id);
    // The check id is still what the upstream and the client are told.
    let received = up.received.lock().expect("lock");
    let names = &received[0].headers;
    assert!(
        names
            .iter()
            .any(|(_, v)| v.to_str().is_ok_and(|v| v == check_id)),
        "the check id is forwarded"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_request_without_a_trace_starts_one_and_a_refusal_records_it() {
    let (captured, _guard) = capture();
    let up = upstream::start().await;
    let faces = faces_with(&up, "");
    assert_eq!(send(&faces, &[]).await.status, StatusCode::OK);
    let (parents, states) = forwarded(&up);
    assert_eq!(parents.len(), 1);
    let (trace, _, flags) = fields(&parents[0]);
    assert_eq!(flags, "01", "a new trace is sampled");
    assert!(states.is_empty());
    let access = captured.lines("gateway request");
    assert_eq!(access[0]["fields"]["trace_id"], trace.as_str());
    assert_eq!(access[0]["fields"]["traceparent"], "absent");

    // A refusal before the rule carries its trace id too, and its body the check id.
    let mut request = in_memory::request("GET", "/nowhere");
    request
        .headers_mut()
        .insert("traceparent", CLIENT_TRACEPARENT.parse().expect("value"));
    let refused = in_memory::gateway(&faces, in_memory::chain_of("valid"), request).await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND);
    let refusal = captured.lines("gateway refused");
    assert_eq!(refusal.len(), 1);
    assert_eq!(refusal[0]["fields"]["trace_id"], CLIENT_TRACE);
    let body = refused.body;
    assert!(
        !String::from_utf8_lossy(&body).contains(CLIENT_TRACE),
        "the error body names the check id, not the trace"
    );
    assert!(
        String::from_utf8_lossy(&body)
            .contains(refusal[0]["fields"]["check_id"].as_str().expect("id"))
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_malformed_traceparent_is_replaced_by_a_new_trace_never_forwarded_as_is() {
    let (captured, _guard) = capture();
    let up = upstream::start().await;
    let faces = faces_with(&up, "");
    let malformed: &[&[(&str, &str)]] = &[
        // Upper-case hex.
        &[(
            "traceparent",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        )],
        // All-zero trace id.
        &[(
            "traceparent",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        )],
        // A later version's extra field.
        &[(
            "traceparent",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-ff",
        )],
        // Two of them (the second the attacker's choice).
        &[
            ("traceparent", CLIENT_TRACEPARENT),
            (
                "traceparent",
                "00-11111111111111111111111111111111-2222222222222222-01",
            ),
        ],
        // Carrying a tracestate, which goes with it.
        &[
            (
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            ),
            ("tracestate", "congo=t61rcWkgMzE"),
        ],
    ];
    for headers in malformed {
        assert_eq!(send(&faces, headers).await.status, StatusCode::OK);
        let (parents, states) = forwarded(&up);
        assert_eq!(parents.len(), 1, "{headers:?}: {parents:?}");
        let (trace, _, _) = fields(&parents[0]);
        assert_ne!(trace, CLIENT_TRACE, "{headers:?}");
        assert_ne!(trace, "11111111111111111111111111111111", "{headers:?}");
        assert!(
            headers.iter().all(|(_, v)| *v != parents[0]),
            "{headers:?} forwarded as is"
        );
        assert!(states.is_empty(), "{headers:?}: {states:?}");
    }
    let access = captured.lines("gateway request");
    assert_eq!(access.len(), malformed.len());
    for line in access {
        assert_eq!(line["fields"]["traceparent"], "refused", "{line}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn from_trusted_proxies_ignores_a_clients_traceparent_and_believes_the_proxys() {
    let up = upstream::start().await;
    // The in-memory client is 127.0.0.1: not among these proxies.
    let untrusted = faces_with(
        &up,
        "trace_context = \"from-trusted-proxies\"\ntrusted_proxies = [\"10.0.0.0/8\"]",
    );
    let headers = [
        ("traceparent", CLIENT_TRACEPARENT),
        ("tracestate", "congo=t61rcWkgMzE"),
    ];
    assert_eq!(send(&untrusted, &headers).await.status, StatusCode::OK);
    let (parents, states) = forwarded(&up);
    assert_ne!(fields(&parents[0]).0, CLIENT_TRACE);
    assert!(states.is_empty(), "the untrusted tracestate is dropped");

    let trusted = faces_with(
        &up,
        "trace_context = \"from-trusted-proxies\"\ntrusted_proxies = [\"127.0.0.1/32\"]",
    );
    assert_eq!(send(&trusted, &headers).await.status, StatusCode::OK);
    let (parents, states) = forwarded(&up);
    assert_eq!(fields(&parents[0]).0, CLIENT_TRACE);
    assert_eq!(states, ["congo=t61rcWkgMzE"]);

    let ignoring = faces_with(
        &up,
        "trace_context = \"ignore\"\ntrusted_proxies = [\"127.0.0.1/32\"]",
    );
    assert_eq!(send(&ignoring, &headers).await.status, StatusCode::OK);
    let (parents, _) = forwarded(&up);
    assert_ne!(
        fields(&parents[0]).0,
        CLIENT_TRACE,
        "ignore believes nobody"
    );
}

/// `site` asked, as a forward-auth caller asks, whether `valid` may GET /v1/accounts, with
/// the trace fields `trace_headers`.
async fn forward_auth_ask(
    site: &psp_faces::gateway::GatewayState,
    trace_headers: http::HeaderMap,
) -> psp_faces::gateway::Answer {
    let chain: Vec<Vec<u8>> = in_memory::chain_of("valid")
        .into_iter()
        .map(|c| c.to_vec())
        .collect();
    site.authorise(psp_faces::gateway::Ask {
        face: "forward-auth",
        method: http::Method::GET,
        target: "/v1/accounts".to_owned(),
        host: None,
        chain: Ok(psp_faces::gateway::DecodedChain::new(chain)),
        peer: SocketAddr::from(([127, 0, 0, 1], 1)),
        header_names: Vec::new(),
        edge_removes: false,
        form_body: None,
        trace_headers,
    })
    .await
}

#[tokio::test(flavor = "current_thread")]
async fn an_external_authorisers_audit_record_carries_the_trace_of_the_request_it_describes() {
    let (captured, _guard) = capture();
    let up = upstream::start().await;
    let faces = faces_with(&up, "");
    let site = faces.sites.named("default").expect("the default site");
    let answer = forward_auth_ask(
        site,
        psp_faces::gateway::trace_headers([
            ("Traceparent", CLIENT_TRACEPARENT.as_bytes()),
            ("x-other", &b"1"[..]),
        ]),
    )
    .await;
    assert!(answer.allowed(), "{answer:?}");
    let decision = captured.lines("gateway decision");
    assert_eq!(decision.len(), 1);
    assert_eq!(decision[0]["fields"]["face"], "forward-auth");
    assert_eq!(decision[0]["fields"]["trace_id"], CLIENT_TRACE);
}

/// nginx copies the client's headers into its check request: under `from-trusted-proxies` the
/// `traceparent` an authoriser passes on is the client's, and never names the trace in the
/// audit record, even though the authoriser itself is a trusted caller.
#[tokio::test(flavor = "current_thread")]
async fn through_an_authoriser_from_trusted_proxies_never_believes_the_clients_trace() {
    let (captured, _guard) = capture();
    let up = upstream::start().await;
    let faces = faces_with(
        &up,
        "trace_context = \"from-trusted-proxies\"\ntrusted_proxies = [\"127.0.0.1/32\"]",
    );
    let site = faces.sites.named("default").expect("the default site");
    let answer = forward_auth_ask(
        site,
        psp_faces::gateway::trace_headers([("traceparent", CLIENT_TRACEPARENT.as_bytes())]),
    )
    .await;
    assert!(answer.allowed(), "{answer:?}");
    let decision = captured.lines("gateway decision");
    assert_eq!(decision.len(), 1);
    let trace_id = decision[0]["fields"]["trace_id"]
        .as_str()
        .expect("a trace id");
    assert_ne!(
        trace_id, CLIENT_TRACE,
        "the client chose the audited trace id"
    );
    assert_eq!(trace_id.len(), 32);
}

/// Other tracing systems' headers, as a client may send them to choose a bank's trace id.
const OTHER_SYSTEMS: [(&str, &str); 19] = [
    ("b3", "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1"),
    ("x-b3-traceid", "80f198ee56343ba864fe8b2a57d3eff7"),
    ("uber-trace-id", "5f1f45d9a0c4f1e2:1:0:1"),
    (
        "x-amzn-trace-id",
        "Root=1-5759e988-bd862e3fe1be46a994272793",
    ),
    ("x-datadog-trace-id", "1234567890"),
    (
        "x-cloud-trace-context",
        "105445aa7843bc8bf206b12000100000/1;o=1",
    ),
    ("baggage", "userId=alice"),
    ("uberctx-tenant", "evil"),
    // The fresh-eyes attack of issue 39 (docs/attacks/replicas.md): these passed.
    ("jaeger-debug-id", "chosen"),
    ("jaeger-baggage", "k=v"),
    ("x-client-trace-id", "chosen"),
    ("x-envoy-force-trace", "true"),
    ("x-ot-span-context", "5f1f45d9a0c4f1e2;5f1f45d9a0c4f1e2;0"),
    (
        "sw8",
        "1-MQ==-NQ==-1-bWVzaA==-aW5zdGFuY2U=-L2dldA==-MTI3LjAuMC4xOjgw",
    ),
    ("x-instana-t", "1234567890abcdef"),
    ("l5d-ctx-trace", "AAAAAAAAAAA="),
    (
        "elastic-apm-traceparent",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    ),
    ("newrelic", "eyJ2IjpbMCwxXX0="),
    ("x-dynatrace", "FW4;129;12345678;4294967295"),
];

/// Which of [`OTHER_SYSTEMS`] the upstream received with its last request.
fn other_systems_forwarded(up: &upstream::Upstream) -> Vec<String> {
    let received = up.received.lock().expect("lock");
    let last = received.last().expect("a forwarded request");
    OTHER_SYSTEMS
        .iter()
        .filter(|(name, _)| last.headers.contains_key(*name))
        .map(|(name, _)| (*name).to_owned())
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn other_tracing_systems_headers_follow_the_trust_mode_as_traceparent_does() {
    let up = upstream::start().await;
    for (extra, believed) in [
        ("", true),
        (
            "trace_context = \"from-trusted-proxies\"\ntrusted_proxies = [\"127.0.0.1/32\"]",
            true,
        ),
        (
            "trace_context = \"from-trusted-proxies\"\ntrusted_proxies = [\"10.0.0.0/8\"]",
            false,
        ),
        ("trace_context = \"ignore\"", false),
    ] {
        let faces = faces_with(&up, extra);
        assert_eq!(send(&faces, &OTHER_SYSTEMS).await.status, StatusCode::OK);
        let forwarded = other_systems_forwarded(&up);
        if believed {
            assert_eq!(
                forwarded.len(),
                OTHER_SYSTEMS.len(),
                "{extra:?}: {forwarded:?}"
            );
        } else {
            assert!(forwarded.is_empty(), "{extra:?}: a PSP chose {forwarded:?}");
        }
    }
    // Through an authoriser whose proxy removes what it is told (Envoy): named for removal
    // under from-trusted-proxies (a client's headers), not under accept.
    for (extra, removed) in [
        (
            "trace_context = \"from-trusted-proxies\"\ntrusted_proxies = [\"127.0.0.1/32\"]",
            true,
        ),
        ("", false),
    ] {
        let faces = faces_with(&up, extra);
        let site = faces.sites.named("default").expect("the default site");
        let chain: Vec<Vec<u8>> = in_memory::chain_of("valid")
            .into_iter()
            .map(|c| c.to_vec())
            .collect();
        let answer = site
            .authorise(psp_faces::gateway::Ask {
                face: "ext_authz",
                method: http::Method::GET,
                target: "/v1/accounts".to_owned(),
                host: None,
                chain: Ok(psp_faces::gateway::DecodedChain::new(chain)),
                peer: SocketAddr::from(([127, 0, 0, 1], 1)),
                header_names: OTHER_SYSTEMS.iter().map(|(n, _)| (*n).to_owned()).collect(),
                edge_removes: true,
                form_body: None,
                trace_headers: http::HeaderMap::new(),
            })
            .await;
        let psp_faces::gateway::Answer::Allow { remove, .. } = answer else {
            panic!("{extra:?}: not allowed: {answer:?}");
        };
        for (name, _) in OTHER_SYSTEMS {
            assert_eq!(
                remove.iter().any(|r| r.as_str() == name),
                removed,
                "{extra:?}: {name} in {remove:?}"
            );
        }
    }
}
