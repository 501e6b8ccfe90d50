//! Logs: `tracing`, JSON lines when stderr is not a terminal (collectors), readable text when
//! it is. `RUST_LOG` sets the filter (default `info`). Audit records use the target `audit`;
//! with `[audit] file`, they also go to a chained audit log ([`audit`]).

pub mod audit;
pub mod metrics;

use std::io::IsTerminal;
use std::sync::Arc;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Installs the global subscriber; a second call does nothing.
pub fn init() {
    init_with_audit(None);
}

/// Installs the global subscriber, with the audit records (target `audit`) also appended to
/// `audit_log`; a second call does nothing.
pub fn init_with_audit(audit_log: Option<Arc<audit::AuditLog>>) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let audit_layer = audit_log.map(|log| {
        audit::install(log.clone());
        AuditLayer { log }
    });
    let registry = tracing_subscriber::registry().with(audit_layer);
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let result = if std::io::stderr().is_terminal() {
        registry.with(fmt.with_filter(filter)).try_init()
    } else {
        registry
            .with(fmt.json().flatten_event(true).with_filter(filter))
            .try_init()
    };
    // Already installed (tests start several servers in one process): keep the first.
    drop(result);
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
        let mut fields = Fields(serde_json::Map::new());
        event.record(&mut fields);
        let mut record = fields.0;
        record.insert(
            "time".to_owned(),
            serde_json::Value::String(
                time::OffsetDateTime::now_utc()
                    .format(&time::format_description::well_known::Rfc3339)
                    .unwrap_or_default(),
            ),
        );
        if let Err(e) = self.log.append(record) {
            // Not through tracing: that would come back here.
            eprintln!(
                "psp-gateway: cannot append to the audit log {}: {e}",
                self.log.path().display()
            );
        }
    }
}

/// An event's fields as JSON values (written in name order).
struct Fields(serde_json::Map<String, serde_json::Value>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            serde_json::Value::String(format!("{value:?}")),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(
            field.name().to_owned(),
            serde_json::Value::String(value.to_owned()),
        );
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0
            .insert(field.name().to_owned(), serde_json::Value::Bool(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
}
