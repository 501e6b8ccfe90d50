//! Logs: `tracing`, JSON lines when stderr is not a terminal (collectors), readable text when
//! it is. `RUST_LOG` sets the filter (default `info`). Audit records use the target `audit`;
//! with `[audit] file`, they also go to a chained audit log ([`audit`]).

pub mod audit;
pub mod merkle;

// Metrics, trace context and the log lines are `psp-telemetry`'s (which the listeners use
// without the service); named here so that every path `telemetry::…` stays one home.
pub use psp_telemetry::{json_lines, log_writer, metrics, otlp, trace_context};

use std::io::IsTerminal;
use std::sync::Arc;

use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Keeps the thread that writes the JSON log lines; dropping it writes what is queued.
/// `serve` holds it until it exits.
#[must_use = "dropping the guard stops the log writer"]
pub struct LogGuard {
    _writer: Option<log_writer::LogWriterGuard>,
    /// The trace exporter, when `OTEL_EXPORTER_OTLP_*` turned it on: dropped after the
    /// writer, it sends its last batch.
    _traces: Option<otlp::TraceExport>,
}

/// Installs the global subscriber, with the audit records (target `audit`) also appended to
/// `audit_log`; a second call does nothing.
///
/// JSON lines (stderr not a terminal) are recorded on the calling thread, then formatted and
/// written by a thread of their own ([`json_lines`], [`log_writer`]), which writes the lines
/// of each interval (10 ms) in one `write`: at load, one system call serves hundreds of
/// lines, and the request threads make none and format none. No line is dropped (8 MiB pending make callers wait), and what is pending is
/// written out when the guard is dropped. The chained audit file ([`audit`]) is written and flushed per record as before.
///
/// With `OTEL_EXPORTER_OTLP_ENDPOINT` (or `…_TRACES_ENDPOINT`) set, the spans of
/// [`otlp::SPAN_TARGET`] are also exported over OTLP/HTTP ([`otlp`]); called on a tokio
/// runtime then. An exporter that cannot be set up is reported and left off (the gateway's
/// work does not depend on it).
pub fn init_with_audit(audit_log: Option<Arc<audit::AuditLog>>) -> LogGuard {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let audit_layer = audit_log.map(|log| {
        audit::install(log.clone());
        AuditLayer { log }
    });
    let (traces, trace_error) = match otlp::TraceExport::from_env() {
        Ok(traces) => (traces, None),
        Err(e) => (None, Some(e)),
    };
    let registry = tracing_subscriber::registry()
        .with(audit_layer)
        .with(traces.as_ref().map(|t| t.layer()));
    let report = |traces: &Option<otlp::TraceExport>| {
        if let Some(e) = &trace_error {
            tracing::error!(error = %e, "traces are not exported");
        } else if traces.is_some() {
            tracing::info!("traces are exported over OTLP/HTTP");
        }
    };
    if std::io::stderr().is_terminal() {
        let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
        // Already installed (tests start several servers in one process): keep the first.
        drop(registry.with(fmt.with_filter(filter)).try_init());
        report(&traces);
        return LogGuard {
            _writer: None,
            _traces: traces,
        };
    }
    let (writer, guard) = match log_writer::spawn_formatting(
        "psp-gateway-log",
        std::io::stderr(),
        json_lines::format,
    ) {
        Ok(spawned) => spawned,
        Err(e) => {
            // No thread for the writer: lines are written by the caller, one call each.
            eprintln!("psp-gateway: cannot start the log writer: {e}; writing lines directly");
            let fmt = tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .json()
                .flatten_event(true);
            drop(registry.with(fmt.with_filter(filter)).try_init());
            report(&traces);
            return LogGuard {
                _writer: None,
                _traces: traces,
            };
        }
    };
    let lines = json_lines::JsonLines::new(writer);
    match registry.with(lines.with_filter(filter)).try_init() {
        Ok(()) => {
            report(&traces);
            LogGuard {
                _writer: Some(guard),
                _traces: traces,
            }
        }
        // Already installed: keep the first, and let this writer go.
        Err(_) => LogGuard {
            _writer: None,
            _traces: None,
        },
    }
}

/// Appends every event of target `audit` to the chained audit log, whatever `RUST_LOG` says.
struct AuditLayer {
    log: Arc<audit::AuditLog>,
}

impl<S: Subscriber> Layer<S> for AuditLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if event.metadata().target() != "audit" {
            return;
        }
        // The event's compact record: the log's writer thread formats and chains it.
        json_lines::with_record(event, |record| self.log.take(record));
    }
}
