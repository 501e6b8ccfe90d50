//! OpenTelemetry export over OTLP/HTTP, against a receiver of our own: a hyper server on
//! `127.0.0.1:0` that decodes each `ExportTraceServiceRequest` (protobuf, the protocol's own
//! messages) and keeps its spans. The gateway's spans carry the client's trace id, the
//! request span's parent is the client's span, the upstream's `traceparent` names the
//! exported request span as its parent, and the phases that cost time have spans of their own.

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use common::in_memory;
use common::test_pki::test_config;
use common::upstream;
use http::StatusCode;
use http_body_util::{BodyExt, Full};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use psp_service::telemetry::otlp::TraceExport;
use tracing_subscriber::layer::SubscriberExt;

const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_PARENT: &str = "00f067aa0ba902b7";
const CLIENT_TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The spans received, and the content types the exporter sent them with.
#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<Span>>>,
    content_types: Arc<Mutex<Vec<String>>>,
}

/// Starts the receiver: every POST body is an `ExportTraceServiceRequest`, answered with an
/// empty (default) `ExportTraceServiceResponse`.
async fn receiver() -> (SocketAddr, Receiver) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let got = Receiver::default();
    let keep = got.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let keep = keep.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: http::Request<_>| {
                    let keep = keep.clone();
                    async move {
                        if let Some(ct) = req.headers().get(http::header::CONTENT_TYPE) {
                            keep.content_types
                                .lock()
                                .expect("lock")
                                .push(ct.to_str().unwrap_or("").to_owned());
                        }
                        let body: hyper::body::Incoming = req.into_body();
                        let bytes = body.collect().await.expect("body").to_bytes();
                        let export =
                            ExportTraceServiceRequest::decode(bytes).expect("an OTLP export");
                        let spans = export
                            .resource_spans
                            .into_iter()
                            .flat_map(|r| r.scope_spans)
                            .flat_map(|s| s.spans);
                        keep.spans.lock().expect("lock").extend(spans);
                        Ok::<_, Infallible>(
                            http::Response::builder()
                                .header("content-type", "application/x-protobuf")
                                .body(Full::new(Bytes::new()))
                                .expect("response"),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    (addr, got)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

/// The value of the string attribute `key` of `span`.
fn attribute(span: &Span, key: &str) -> Option<String> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| match &v.value {
            Some(Value::StringValue(s)) => Some(s.clone()),
            _ => None,
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exported_spans_carry_the_clients_trace_and_the_upstream_names_our_span() {
    let (addr, got) = receiver().await;
    let export = TraceExport::to_endpoint(&format!("http://{addr}/v1/traces")).expect("exporter");
    let subscriber = tracing_subscriber::registry().with(export.layer());
    let _guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();

    let up = upstream::start().await;
    let faces = in_memory::faces(&test_config(|t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!("upstream = \"http://{}\"", up.addr),
        )
    }));
    let mut request = in_memory::request("GET", "/v1/accounts");
    request
        .headers_mut()
        .insert("traceparent", CLIENT_TRACEPARENT.parse().expect("value"));
    let answer = in_memory::gateway(&faces, in_memory::chain_of("valid"), request).await;
    assert_eq!(answer.status, StatusCode::OK);
    // A second request, without a trace: a new one, whose id the SDK chose.
    let answer = in_memory::gateway(
        &faces,
        in_memory::chain_of("valid"),
        in_memory::request("GET", "/v1/accounts"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    let forwarded: Vec<String> = up
        .received
        .lock()
        .expect("lock")
        .iter()
        .map(|r| r.headers["traceparent"].to_str().expect("ascii").to_owned())
        .collect();
    assert_eq!(forwarded.len(), 2);

    export.flush();
    let spans = got.spans.lock().expect("lock").clone();
    assert!(
        got.content_types
            .lock()
            .expect("lock")
            .iter()
            .all(|ct| ct == "application/x-protobuf"),
        "http/protobuf"
    );

    let requests = named(&spans, "gateway request");
    assert_eq!(
        requests.len(),
        2,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let first = requests
        .iter()
        .find(|s| hex(&s.trace_id) == CLIENT_TRACE)
        .expect("a request span in the client's trace");
    assert_eq!(
        hex(&first.parent_span_id),
        CLIENT_PARENT,
        "the client's span is the parent"
    );
    assert_eq!(
        forwarded[0],
        format!("00-{CLIENT_TRACE}-{}-01", hex(&first.span_id)),
        "the upstream's parent is the exported request span"
    );
    let second = requests
        .iter()
        .find(|s| hex(&s.trace_id) != CLIENT_TRACE)
        .expect("the second request's span");
    assert!(
        second.parent_span_id.is_empty(),
        "a new trace has no parent"
    );
    assert_eq!(
        forwarded[1],
        format!("00-{}-{}-01", hex(&second.trace_id), hex(&second.span_id)),
        "a new trace: the exported ids are the forwarded ones"
    );

    // The phases: the check (a miss, then a hit) and the upstream call, inside the request.
    let checks = named(&spans, "certificate check");
    assert_eq!(checks.len(), 2);
    let in_first: Vec<&&Span> = checks
        .iter()
        .filter(|s| hex(&s.trace_id) == CLIENT_TRACE)
        .collect();
    assert_eq!(in_first.len(), 1);
    assert_eq!(in_first[0].parent_span_id, first.span_id);
    assert_eq!(attribute(in_first[0], "cache").as_deref(), Some("miss"));
    let in_second: Vec<&&Span> = checks
        .iter()
        .filter(|s| s.trace_id == second.trace_id)
        .collect();
    assert_eq!(attribute(in_second[0], "cache").as_deref(), Some("hit"));
    let calls = named(&spans, "upstream call");
    assert_eq!(calls.len(), 2);
    assert!(
        calls
            .iter()
            .any(|s| hex(&s.trace_id) == CLIENT_TRACE && s.parent_span_id == first.span_id)
    );
    // The miss fetched revocation evidence and looked the PSP up, in the client's trace.
    for phase in ["revocation", "register lookup"] {
        assert!(
            named(&spans, phase)
                .iter()
                .any(|s| hex(&s.trace_id) == CLIENT_TRACE),
            "{phase}"
        );
    }
}

#[tokio::test]
async fn export_is_off_unless_an_otlp_endpoint_is_set() {
    // The test environment sets none (CI neither): nothing is exported by default.
    if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
        && std::env::var_os("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none()
    {
        assert!(!psp_service::telemetry::otlp::enabled_by_env());
        assert!(TraceExport::from_env().expect("no error").is_none());
    }
}

/// Kills the spawned `serve` when the test ends, however it ends.
struct Serve(std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_exports_when_the_standard_variable_names_a_collector() {
    use std::io::{Read, Write};
    let (addr, got) = receiver().await;
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("trace_export_serve");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let root = common::root().display().to_string();
    let text = std::fs::read_to_string(common::root().join("gateway.toml"))
        .expect("gateway.toml")
        .replace("\"certs/", &format!("\"{root}/certs/"))
        .replace("\"registers/", &format!("\"{root}/registers/"))
        .replace(
            "enabled = true",
            &format!("enabled = true\ncerts = \"{root}/certs\""),
        )
        .replace("127.0.0.1:8080", "127.0.0.1:0")
        .replace("127.0.0.1:8443", "127.0.0.1:0")
        .replace("127.0.0.1:9090", "127.0.0.1:0");
    let config = dir.join("gateway.toml");
    std::fs::write(&config, text).expect("write config");
    let stderr = dir.join("serve.stderr");
    let _serve = Serve(
        std::process::Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
            .args(["serve", "--config", config.to_str().expect("path")])
            // The base URL: the exporter appends /v1/traces. A short batch delay: the test
            // waits for the first batch, not the default 5 s.
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"))
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("OTEL_SDK_DISABLED")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("serve starts"),
    );
    let api = tokio::task::spawn_blocking({
        let stderr = stderr.clone();
        move || common::logged_listener(&stderr, "check endpoint listening")
    })
    .await
    .expect("listener");
    let log = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert!(log.contains("traces are exported over OTLP/HTTP"), "{log}");

    // One check through the endpoint: its certificate check is a span of its own.
    let pem = std::fs::read(common::root().join("certs/psp/valid.pem")).expect("cert");
    let der = psp_cert::cert::PspCertificate::parse(&pem)
        .expect("parses")
        .der;
    let eidas = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(der)
    };
    let answer = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(api).expect("connect");
        write!(
            s,
            "GET /v1/psp/eidas?jurisdiction=XX HTTP/1.1\r\nhost: x\r\nauthorization: Basic c2FuZGJveDpzYW5kYm94\r\nfi_reference_id: PSDXX-TEST-999999\r\neidas: {eidas}\r\nconnection: close\r\n\r\n"
        )
        .expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    })
    .await
    .expect("check");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let exported = psp_testkit::wait::until(
        "the check's span is exported",
        std::time::Duration::from_secs(20),
        || !named(&got.spans.lock().expect("lock"), "certificate check").is_empty(),
    );
    exported.await;
}

/// Issue 39 finding 9: a collector that refuses the spans was silent (no log line, no metric).
/// Each batch it refuses is counted now, and the change is logged once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_refuses_the_spans_is_counted_not_silent() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|_req| async {
                    Ok::<_, Infallible>(
                        http::Response::builder()
                            .status(StatusCode::INTERNAL_SERVER_ERROR)
                            .body(Full::new(Bytes::from_static(b"no")))
                            .expect("response"),
                    )
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    let failures = || {
        psp_service::telemetry::metrics::metrics()
            .trace_export_failures
            .get()
    };
    let before = failures();
    let export = TraceExport::to_endpoint(&format!("http://{addr}/v1/traces")).expect("exporter");
    let subscriber = tracing_subscriber::registry().with(export.layer());
    {
        let _guard = tracing::subscriber::set_default(subscriber);
        tracing::callsite::rebuild_interest_cache();
        let up = upstream::start().await;
        let faces = in_memory::faces(&test_config(|t| {
            t.replace(
                "upstream = \"sandbox-echo\"",
                &format!("upstream = \"http://{}\"", up.addr),
            )
        }));
        let answer = in_memory::gateway(
            &faces,
            in_memory::chain_of("valid"),
            in_memory::request("GET", "/v1/accounts"),
        )
        .await;
        assert_eq!(answer.status, StatusCode::OK);
    }
    export.flush();
    assert!(failures() > before, "the refused batch is counted");
}
