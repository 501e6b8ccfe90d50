//! Metrics: `prometheus-client` types, served by the admin listener at `/metrics` in the
//! Prometheus text format (version 0.0.4), which `promtool check metrics` accepts.
//!
//! Two kinds:
//! - **events**, counted where they happen, in the process-wide [`Metrics`] ([`metrics`]):
//!   requests by face, route, decision and reason; check latency; result-cache hits and
//!   misses; rate-limited requests and rate-limiter evictions; reloads and refreshes by
//!   outcome; TLS handshakes; upstream errors;
//! - **state**, read at each scrape by the admin listener (trust issuers and lists, registers,
//!   revocation counters, cache size), passed to [`render`] as a second registry.
//!
//! `prometheus-client` writes OpenMetrics, whose counter families are named without the
//! `_total` their samples carry and which ends with `# EOF`; [`render`] turns that into the
//! classic text format (family named as its samples, no `# EOF`, no `# UNIT`), which every
//! Prometheus version and `promtool` read.

use std::borrow::Cow;
use std::sync::OnceLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// A request's face, route, decision and reason. Counted on every request: the labels the
/// code names are borrowed, not copied (`Cow`), and only a site or route allocates.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `api`, `gateway`, `ext-authz`, `forward-auth` or `admin`.
    pub face: Cow<'static, str>,
    /// The site (`[[sites]]` name; `default` for `[gateway]`); empty for the endpoint.
    pub site: Cow<'static, str>,
    /// The gateway route prefix that matched (empty for the endpoint).
    pub route: Cow<'static, str>,
    /// `answered`/`refused` (endpoint), `forwarded`/`rejected` (gateway).
    pub decision: Cow<'static, str>,
    /// The error or rejection code; empty when answered or forwarded.
    pub reason: Cow<'static, str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FaceLabels {
    pub face: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `hit` or `miss`.
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TableLabels {
    /// A rate limiter's key table: `requests` (per source), `logins-per-source`,
    /// `logins-per-user`.
    pub table: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FallbackLabels {
    /// The counter kind: `rate_limits` or `failed_logins`.
    pub kind: String,
    /// The failure mode that decided: `local`, `open` or `closed`.
    pub mode: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// The counter kind: `rate_limits` or `failed_logins`.
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// What was reloaded or refreshed: `reference-data`, `trusted-lists`, `registers`.
    pub what: String,
    /// `ok` or `failed`.
    pub outcome: String,
}

/// The event metrics of this process.
pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub check_duration: Family<FaceLabels, Histogram>,
    pub result_cache: Family<ResultLabels, Counter>,
    pub rate_limited: Family<FaceLabels, Counter>,
    pub reloads: Family<OutcomeLabels, Counter>,
    pub refreshes: Family<OutcomeLabels, Counter>,
    /// TLS handshakes by outcome: `full`, `resumed`, `failed`, `timeout`.
    pub tls_handshakes: Family<OutcomeLabels, Counter>,
    /// Gateway upstream errors by kind: `connect`, `protocol`, `timeout`, `request`.
    pub upstream_errors: Family<OutcomeLabels, Counter>,
    /// Keys a full rate-limiter table forgot to make room, by table.
    pub limiter_evictions: Family<TableLabels, Counter>,
    /// Distinct client certificate chains the gateway keeps parsed for its connections.
    pub client_chains: Gauge<i64>,
    /// Gateway calls in flight to the upstream (bounded by `gateway.upstream_max_requests`).
    pub upstream_in_flight: Gauge<i64>,
    /// HTTP/1 connections parked: open and idle, without hyper's state and buffers.
    pub connections_parked: Gauge<i64>,
    /// Gateway calls refused because a budget of calls to the upstream was spent, by scope
    /// (`total`, `psp`).
    pub upstream_overflows: Family<ScopeLabels, Counter>,
    /// Audit records that could not be written (a full disk): each is a record lost.
    pub audit_write_failures: Counter,
    /// Torn final audit lines set aside at start (a write was cut short before).
    pub audit_torn_lines: Counter,
    /// Audit records lost after they were written: in a file removed while open.
    pub audit_records_lost: Counter,
    /// 1 while the audit log's writes fail, 0 while it takes records (or there is none).
    pub audit_failing: Gauge<i64>,
    /// Signed checkpoints of the audit log written.
    pub audit_checkpoints: Counter,
    /// Signed checkpoints of the audit log that could not be written.
    pub audit_checkpoint_failures: Counter,
    /// Attempts to append checkpoints to `checkpoint_copy` that failed.
    pub audit_checkpoint_copy_failures: Counter,
    /// 1 while `checkpoint_copy` is behind the checkpoint file (its writes fail), else 0.
    pub audit_checkpoint_copy_failing: Gauge<i64>,
    /// Decisions signed (once per cached decision, not per request).
    pub decisions_signed: Counter,
    /// Decisions of shared counters taken by the failure mode because Redis did not answer
    /// within the budget (`[shared_state]`), by counter kind and mode.
    pub shared_state_fallbacks: Family<FallbackLabels, Counter>,
    /// Times a counter kind switched to its failure mode (Redis failed it, or answered none
    /// of its calls for the silence window), by kind.
    pub shared_state_degradations: Family<KindLabels, Counter>,
    /// 1 while the shared state (Redis) answered the last call, 0 after a failure; absent
    /// from the meaning when `[shared_state]` is not configured (stays 0).
    pub shared_state_up: Gauge<i64>,
    /// 1 when `[shared_state]` is configured: what tells `shared_state_up`'s 0 apart.
    pub shared_state_configured: Gauge<i64>,
    /// Bytes of argon2 working memory the endpoint's password-check slots hold (each slot's
    /// buffer grows to the hashes' memory cost on first use and is kept).
    pub password_check_memory: Gauge<i64>,
    /// Span batches the OTLP exporter could not deliver (a transport error or a status other
    /// than 2xx).
    pub trace_export_failures: Counter,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScopeLabels {
    /// `total` or `psp`.
    pub scope: String,
}

fn latency_histogram() -> Histogram {
    // 0.5 ms to about 8 s: a cached check is sub-millisecond, a cold one waits for OCSP.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.0005, 2.0, 15,
    ))
}

impl Metrics {
    /// The registry with every metric registered.
    // Whole: one exhaustive table, every metric the gateway exports (name, help text, type)
    // registered once, in the order `/metrics` lists them; split, that list would be
    // scattered over helpers with nothing of their own to say.
    fn new() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "psp_gateway_requests",
            "Requests by face, site, gateway route, decision and reason",
            requests.clone(),
        );
        let check_duration =
            Family::<FaceLabels, Histogram>::new_with_constructor(latency_histogram as fn() -> _);
        registry.register(
            "psp_gateway_check_duration_seconds",
            "Time to answer a check (certificate checks, revocation, registers), by face",
            check_duration.clone(),
        );
        let result_cache = Family::<ResultLabels, Counter>::default();
        registry.register(
            "psp_gateway_result_cache",
            "Check-result cache lookups by result",
            result_cache.clone(),
        );
        let rate_limited = Family::<FaceLabels, Counter>::default();
        registry.register(
            "psp_gateway_rate_limited",
            "Requests refused by a rate limit, by face",
            rate_limited.clone(),
        );
        let reloads = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "psp_gateway_reloads",
            "Reference-data reloads by outcome (a failed reload keeps the data in use)",
            reloads.clone(),
        );
        let refreshes = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "psp_gateway_refreshes",
            "Downloads of trusted lists and registers by outcome (a failed one keeps the last good copy)",
            refreshes.clone(),
        );
        let tls_handshakes = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "psp_gateway_tls_handshakes",
            "TLS handshakes on the listeners by outcome (full, resumed, failed, timeout)",
            tls_handshakes.clone(),
        );
        let upstream_errors = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "psp_gateway_upstream_errors",
            "Gateway calls the upstream did not answer, by kind (connect, protocol, timeout, request)",
            upstream_errors.clone(),
        );
        let limiter_evictions = Family::<TableLabels, Counter>::default();
        registry.register(
            "psp_gateway_rate_limiter_evictions",
            "Keys a full rate-limiter table dropped to make room (their quota starts afresh), by table",
            limiter_evictions.clone(),
        );
        let client_chains = Gauge::<i64>::default();
        registry.register(
            "psp_gateway_client_chain_cache_entries",
            "Parsed client certificate chains the gateway shares between connections and the authorisation faces (bound: 32 MiB of them)",
            client_chains.clone(),
        );
        let connections_parked = Gauge::<i64>::default();
        registry.register(
            "psp_gateway_connections_parked",
            "HTTP/1 connections open and idle for 250 ms or more, parked: hyper's state and buffers for them released until their next request (every listener)",
            connections_parked.clone(),
        );
        let upstream_in_flight = Gauge::<i64>::default();
        registry.register(
            "psp_gateway_upstream_in_flight",
            "Gateway calls in flight to the upstream (bound gateway.upstream_max_requests)",
            upstream_in_flight.clone(),
        );
        let upstream_overflows = Family::<ScopeLabels, Counter>::default();
        registry.register(
            "psp_gateway_upstream_overflows",
            "Gateway calls answered 503 because a budget of calls to the upstream was spent, by scope (total, psp)",
            upstream_overflows.clone(),
        );
        let audit_write_failures = Counter::default();
        registry.register(
            "psp_gateway_audit_write_failures",
            "Audit records that could not be written to the audit file (a full disk): each is a record lost",
            audit_write_failures.clone(),
        );
        let audit_torn_lines = Counter::default();
        registry.register(
            "psp_gateway_audit_torn_lines",
            "Torn final lines of the audit file set aside at start (moved to <file>.torn-<time>)",
            audit_torn_lines.clone(),
        );
        let audit_records_lost = Counter::default();
        registry.register(
            "psp_gateway_audit_records_lost",
            "Audit records written to a file that was then removed while open (its records are gone from the disk)",
            audit_records_lost.clone(),
        );
        let audit_failing = Gauge::<i64>::default();
        registry.register(
            "psp_gateway_audit_failing",
            "1 while the audit log's writes fail (fail_closed: checks and gateway calls get 503), 0 while it takes records or there is none",
            audit_failing.clone(),
        );
        let audit_checkpoints = Counter::default();
        registry.register(
            "psp_gateway_audit_checkpoints",
            "Signed checkpoints of the audit log written",
            audit_checkpoints.clone(),
        );
        let audit_checkpoint_failures = Counter::default();
        registry.register(
            "psp_gateway_audit_checkpoint_failures",
            "Signed checkpoints of the audit log that could not be written (its records are covered by the next one written)",
            audit_checkpoint_failures.clone(),
        );
        let audit_checkpoint_copy_failures = Counter::default();
        registry.register(
            "psp_gateway_audit_checkpoint_copy_failures",
            "Attempts to append signed checkpoints to checkpoint_copy that failed (the copy is caught up from the checkpoint file when it can be written again)",
            audit_checkpoint_copy_failures.clone(),
        );
        let audit_checkpoint_copy_failing = Gauge::<i64>::default();
        registry.register(
            "psp_gateway_audit_checkpoint_copy_failing",
            "1 while checkpoint_copy is behind the checkpoint file because it cannot be written, 0 otherwise",
            audit_checkpoint_copy_failing.clone(),
        );
        let decisions_signed = Counter::default();
        registry.register(
            "psp_gateway_decisions_signed",
            "Gateway decisions signed (once per cached decision, not per request)",
            decisions_signed.clone(),
        );
        let shared_state_fallbacks = Family::<FallbackLabels, Counter>::default();
        registry.register(
            "psp_gateway_shared_state_fallbacks",
            "Shared-counter decisions taken by the failure mode because Redis did not answer within the budget, by kind and mode",
            shared_state_fallbacks.clone(),
        );
        let shared_state_degradations = Family::<KindLabels, Counter>::default();
        registry.register(
            "psp_gateway_shared_state_degradations",
            "Times a kind of shared counter switched to its failure mode (Redis failed its call, or answered none of its calls for 50 ms), by kind",
            shared_state_degradations.clone(),
        );
        let shared_state_up = Gauge::<i64>::default();
        registry.register(
            "psp_gateway_shared_state_up",
            "1 while the shared state (Redis) answers both kinds of counter within the budget, 0 when either is degraded; read it with psp_gateway_shared_state_configured (0 without [shared_state], when this reads 0 too)",
            shared_state_up.clone(),
        );
        let shared_state_configured = Gauge::<i64>::default();
        registry.register(
            "psp_gateway_shared_state_configured",
            "1 when [shared_state] is configured (counters shared through Redis), 0 when every counter is per process",
            shared_state_configured.clone(),
        );
        let password_check_memory = Gauge::<i64>::default();
        registry.register(
            "psp_gateway_password_check_memory_bytes",
            "Bytes of argon2 working memory held by the check endpoint's password-check slots (grown on first use, kept; at most api.max_concurrent_password_checks + 1 buffers)",
            password_check_memory.clone(),
        );
        let trace_export_failures = Counter::default();
        registry.register(
            "psp_gateway_trace_export_failures",
            "Span batches the OTLP exporter could not deliver to the collector (a transport error, or an answer other than 2xx); the spans in them are lost",
            trace_export_failures.clone(),
        );
        Metrics {
            registry,
            trace_export_failures,
            password_check_memory,
            shared_state_fallbacks,
            shared_state_degradations,
            shared_state_up,
            shared_state_configured,
            audit_write_failures,
            audit_torn_lines,
            audit_records_lost,
            audit_failing,
            audit_checkpoints,
            audit_checkpoint_failures,
            audit_checkpoint_copy_failures,
            audit_checkpoint_copy_failing,
            decisions_signed,
            limiter_evictions,
            client_chains,
            connections_parked,
            upstream_in_flight,
            upstream_overflows,
            tls_handshakes,
            upstream_errors,
            requests,
            check_duration,
            result_cache,
            rate_limited,
            reloads,
            refreshes,
        }
    }

    /// Counts one request.
    pub fn request(
        &self,
        face: &'static str,
        site: &str,
        route: &str,
        decision: &'static str,
        reason: &'static str,
    ) {
        let owned = |s: &str| match s {
            "" => Cow::Borrowed(""),
            s => Cow::Owned(s.to_owned()),
        };
        self.requests
            .get_or_create(&RequestLabels {
                face: Cow::Borrowed(face),
                site: owned(site),
                route: owned(route),
                decision: Cow::Borrowed(decision),
                reason: Cow::Borrowed(reason),
            })
            .inc();
    }

    /// Records a reload or refresh outcome.
    pub fn outcome(family: &Family<OutcomeLabels, Counter>, what: &str, ok: bool) {
        family
            .get_or_create(&OutcomeLabels {
                what: what.to_owned(),
                outcome: if ok { "ok" } else { "failed" }.to_owned(),
            })
            .inc();
    }
}

/// The process's event metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

/// The event metrics and `state` (read at this scrape) in the Prometheus text format.
pub fn render(state: &Registry) -> String {
    let mut open_metrics = String::new();
    // Writing into a String cannot fail.
    let _ =
        prometheus_client::encoding::text::encode_registry(&mut open_metrics, &metrics().registry);
    let _ = prometheus_client::encoding::text::encode_registry(&mut open_metrics, state);
    to_prometheus_text(&open_metrics)
}

/// OpenMetrics text → Prometheus text 0.0.4: a counter family takes its samples' `_total`
/// name in `# HELP` and `# TYPE`; `# UNIT` and `# EOF` go.
fn to_prometheus_text(open_metrics: &str) -> String {
    let counters: Vec<&str> = open_metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(open_metrics.len() + 64);
    for line in open_metrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(&name)
                .then(|| format!("{p}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_families_take_their_samples_name_and_eof_goes() {
        let mut r = Registry::default();
        let c = Family::<FaceLabels, Counter>::default();
        r.register("x_events", "Events", c.clone());
        c.get_or_create(&FaceLabels { face: "api" }).inc();
        let mut om = String::new();
        prometheus_client::encoding::text::encode(&mut om, &r).expect("encode");
        assert!(om.contains("# TYPE x_events counter"), "{om}");
        let text = to_prometheus_text(&om);
        assert!(text.contains("# HELP x_events_total Events"), "{text}");
        assert!(text.contains("# TYPE x_events_total counter"), "{text}");
        assert!(text.contains("x_events_total{face=\"api\"} 1"), "{text}");
        assert!(!text.contains("# EOF"));
    }
}
