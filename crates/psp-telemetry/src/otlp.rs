//! OpenTelemetry traces over OTLP/HTTP (protobuf): off unless the standard environment
//! variable `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (and
//! `OTEL_SDK_DISABLED` is not `true`); the exporter reads the other `OTEL_EXPORTER_OTLP_*`
//! variables (headers, timeout) itself, and the SDK `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`
//! and `OTEL_TRACES_SAMPLER` (default: parent-based, always on).
//!
//! The spans are `tracing` spans of target [`SPAN_TARGET`] at level `TRACE`, bridged by
//! `tracing-opentelemetry`: only that target reaches the exporter (no log event, so no field
//! of a log line, is exported), and without an exporter no layer enables them, so they cost
//! a disabled callsite's check.
//!
//! The exporter's HTTP client is hyper's over hyper-rustls with ring (no reqwest, no
//! aws-lc-rs). The SDK's batch processor exports from a thread of its own, outside the tokio
//! runtime; each export is therefore run as a task on the runtime that installed the
//! exporter (`OnRuntime`).

use std::time::Duration;

use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::trace_context::{SpanId, TraceContext, TraceId};

/// The target of the spans that are exported.
pub const SPAN_TARGET: &str = "psp_trace";

/// One export's deadline when `OTEL_EXPORTER_OTLP_TIMEOUT` does not set one: the
/// specification's default (OTLP exporter configuration, 10 s).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Time given to the last batch at shutdown.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the exporter cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// Not called on a tokio runtime.
    #[error("the OTLP exporter needs a tokio runtime")]
    NoRuntime,
    /// The exporter refused its configuration (an endpoint that is no URL, …).
    #[error("OTLP exporter: {0}")]
    Build(String),
}

/// `text` with the userinfo of every URL in it (`scheme://user:password@host`) replaced by
/// `***`: an exporter's error names its endpoint, and a credential in it must not reach the
/// logs.
pub fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The authority ends at the first `/`, `?`, `#` or whitespace; userinfo is what comes
        // before its last `@`.
        let end = tail
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str("***");
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// The traces' provider while export is on; shuts it down (the last batch sent) when dropped.
pub struct TraceExport {
    provider: SdkTracerProvider,
}

impl std::fmt::Debug for TraceExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TraceExport")
    }
}

/// Whether the environment turns export on: an endpoint set, and the SDK not disabled.
pub fn enabled_by_env() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

impl TraceExport {
    /// The exporter as the environment configures it, or `None` when export is off.
    pub fn from_env() -> Result<Option<TraceExport>, OtlpError> {
        if !enabled_by_env() {
            return Ok(None);
        }
        TraceExport::build(None).map(Some)
    }

    /// An exporter to `endpoint` (the full URL, `…/v1/traces`), whatever the environment
    /// says of the endpoint: for tests.
    pub fn to_endpoint(endpoint: &str) -> Result<TraceExport, OtlpError> {
        TraceExport::build(Some(endpoint))
    }

    fn build(endpoint: Option<&str>) -> Result<TraceExport, OtlpError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| OtlpError::NoRuntime)?;
        let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| OtlpError::Build(e.to_string()))?
            .with_native_roots_or_empty();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = OnRuntime {
            runtime,
            failing: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
            inner: opentelemetry_http::hyper::HyperClient::new(connector, EXPORT_TIMEOUT, None),
        };
        let mut builder = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_http_client(client);
        if let Some(endpoint) = endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        let exporter = builder
            .build()
            .map_err(|e| OtlpError::Build(redact_userinfo(&e.to_string())))?;
        let mut resource = opentelemetry_sdk::Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("psp-gateway");
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        Ok(TraceExport { provider })
    }

    /// The `tracing` layer that turns the spans of [`SPAN_TARGET`] into exported spans.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S> + 'static
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        use tracing_subscriber::Layer;
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("psp-gateway"))
            .with_filter(tracing_subscriber::filter::filter_fn(|m| {
                m.is_span() && m.target() == SPAN_TARGET
            }))
    }

    /// Sends what is queued now (tests; the batch otherwise goes every 5 s).
    pub fn flush(&self) {
        let provider = self.provider.clone();
        // The SDK waits on its own thread; the export runs on the runtime.
        let _ = std::thread::spawn(move || provider.force_flush()).join();
    }
}

impl Drop for TraceExport {
    fn drop(&mut self) {
        let provider = self.provider.clone();
        let _ = std::thread::spawn(move || provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT)).join();
    }
}

/// The request span `span` joins the trace `trace` describes: the caller's span is its
/// parent when the trace came from the caller. With export on, the span's ids become the
/// trace's (a new trace then takes the id the SDK gave it), so the logs, the upstream's
/// `traceparent` and the exported spans agree; with export off nothing changes.
pub fn adopt(span: &tracing::Span, trace: &mut TraceContext) {
    if let Some(parent) = trace.parent_id {
        let remote = opentelemetry::trace::SpanContext::new(
            opentelemetry::trace::TraceId::from_bytes(trace.trace_id.to_bytes()),
            opentelemetry::trace::SpanId::from_bytes(parent.to_bytes()),
            opentelemetry::trace::TraceFlags::new(trace.flags),
            true,
            opentelemetry::trace::TraceState::default(),
        );
        let parent = opentelemetry::Context::new().with_remote_span_context(remote);
        if span.set_parent(parent).is_err() {
            // No exporter (or the span is disabled): our own ids stand.
            return;
        }
    }
    let context = span.context();
    let otel = context.span();
    let ids = otel.span_context();
    if !ids.is_valid() {
        return;
    }
    if let (Some(trace_id), Some(span_id)) = (
        TraceId::from_bytes(ids.trace_id().to_bytes()),
        SpanId::from_bytes(ids.span_id().to_bytes()),
    ) {
        trace.trace_id = trace_id;
        trace.span_id = span_id;
        if trace.parent_id.is_none() {
            trace.flags = ids.trace_flags().to_u8() & super::trace_context::SAMPLED;
        }
    }
}

/// An HTTP client whose every request runs as a task on `runtime`: the SDK's batch thread
/// has no tokio reactor, hyper needs one.
#[derive(Debug)]
/// Each batch it could not deliver is counted (`psp_gateway_trace_export_failures_total`) and
/// logged when delivery starts failing or works again, never once per batch.
struct OnRuntime<C> {
    runtime: tokio::runtime::Handle,
    /// Whether the last batch failed.
    failing: std::sync::Arc<std::sync::atomic::AtomicBool>,
    inner: C,
}

#[async_trait::async_trait]
impl<C> opentelemetry_http::HttpClient for OnRuntime<C>
where
    C: opentelemetry_http::HttpClient + Clone + 'static,
{
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let inner = self.inner.clone();
        let sent = self
            .runtime
            .spawn(async move { inner.send_bytes(request).await })
            .await
            .map_err(|e| Box::new(e) as opentelemetry_http::HttpError)?;
        let failure = match &sent {
            Ok(response) if response.status().is_success() => None,
            Ok(response) => Some(format!("the collector answered {}", response.status())),
            Err(e) => Some(redact_userinfo(&e.to_string())),
        };
        let ordering = std::sync::atomic::Ordering::Relaxed;
        match failure {
            Some(why) => {
                crate::metrics::metrics().trace_export_failures.inc();
                if !self.failing.swap(true, ordering) {
                    tracing::warn!(error = %why, "trace export failing: spans are lost until the collector takes them again");
                }
            }
            None => {
                if self.failing.swap(false, ordering) {
                    tracing::info!("trace export works again");
                }
            }
        }
        sent
    }
}

/// Native roots for an `https` collector, or none (an `http` one needs none).
trait NativeRootsOrEmpty {
    fn with_native_roots_or_empty(self) -> rustls::ClientConfig;
}

impl NativeRootsOrEmpty for rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier> {
    fn with_native_roots_or_empty(self) -> rustls::ClientConfig {
        let mut roots = rustls::RootCertStore::empty();
        for certificate in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(certificate);
        }
        self.with_root_certificates(roots).with_no_client_auth()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_in_an_endpoint_never_reaches_an_error_message() {
        assert_eq!(
            redact_userinfo("invalid uri http://user:s3cret@collector:4318/v1/traces here"),
            "invalid uri http://***@collector:4318/v1/traces here"
        );
        assert_eq!(
            redact_userinfo("https://a@b@host x https://plain/"),
            "https://***@host x https://plain/"
        );
        assert_eq!(redact_userinfo("no url"), "no url");
    }

    #[tokio::test]
    async fn a_malformed_endpoint_with_a_credential_is_refused_without_it() {
        let e = TraceExport::to_endpoint("http://user:s3cret@[::1")
            .expect_err("not a URL")
            .to_string();
        assert!(!e.contains("s3cret"), "{e}");
        assert!(e.contains("***@"), "{e}");
    }
}
