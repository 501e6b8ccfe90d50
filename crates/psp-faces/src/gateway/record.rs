//! One gateway request's record, filled in by the phases as they learn it, and the logging
//! phase that writes, from that one record and in one place, everything the request leaves
//! behind: its metrics, its audit record, the operational log of what went wrong on the way,
//! and its access line.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Method, StatusCode};

use super::config::Dialect;
use super::dialect::Failure;
use crate::server::ConnInfo;
use crate::service::Checked;
use crate::telemetry::metrics::{FaceLabels, OutcomeLabels, ScopeLabels, metrics};
use crate::telemetry::trace_context::TraceContext;

/// What the phases learned of one request.
pub(super) struct Record {
    /// The face that asked: `gateway` (the proxy), `ext-authz` or `forward-auth`.
    pub(super) face: &'static str,
    /// The site deciding, and its jurisdiction.
    pub(super) site: Arc<str>,
    pub(super) jurisdiction: crate::country::CountryCode,
    pub(super) check_id: String,
    /// The request's W3C trace (the caller's or a new one) and the gateway's span in it: the
    /// audit record and the access line link the check id to its trace id.
    pub(super) trace: TraceContext,
    started: Instant,
    pub(super) method: Method,
    /// The path as received (the normalised one is in `decided`, once there is one).
    pub(super) path: String,
    /// The route's configured prefix (bounded, for the metric's label); empty before routing
    /// and for a request no route matched.
    pub(super) route: String,
    /// The dialect the answer is written in: the route's, or the default before routing.
    pub(super) dialect: Dialect,
    /// The decision, once one was made.
    pub(super) decided: Option<Decided>,
    /// What went wrong on the way that the operator should read (not what the client did).
    pub(super) trouble: Option<Trouble>,
}

/// The decision as the audit record tells it.
pub(super) struct Decided {
    pub(super) fingerprint: String,
    /// The normalised path the route was chosen on, and the only one forwarded.
    pub(super) path: String,
    pub(super) checked: Arc<Checked>,
    /// `permit`, `report-only` or `refuse`.
    pub(super) verdict: &'static str,
    /// The refusal's code (`""` for a permit).
    pub(super) reason: &'static str,
    pub(super) check_time: Duration,
    /// The signed decision, when `[evidence]` is configured.
    pub(super) signed: Option<Arc<super::signed::SignedDecision>>,
}

/// An error met while forwarding, or reading the body for it.
pub(super) enum Trouble {
    /// The client's body could not be read (logged at info: the client's doing).
    Body(String),
    /// A form body could not be read whole (logged at info).
    FormBody(String),
    /// The upstream request could not be built (an error: it names configured parts).
    Build(String),
    /// The upstream refused or broke the connection (`connect`, `protocol`), or was silent
    /// (`timeout`, no detail).
    Upstream {
        kind: &'static str,
        detail: Option<String>,
    },
}

impl Record {
    pub(super) fn new(
        face: &'static str,
        site: (Arc<str>, crate::country::CountryCode),
        check_id: String,
        (method, path): (Method, String),
        dialect: Dialect,
        trace: TraceContext,
    ) -> Self {
        Record {
            face,
            site: site.0,
            jurisdiction: site.1,
            check_id,
            trace,
            started: Instant::now(),
            method,
            path,
            route: String::new(),
            dialect,
            decided: None,
            trouble: None,
        }
    }
}

/// The logging phase: the request's metrics, its audit record (the access rule's decision
/// with the check's details; or, for a request refused before the rule, the refusal), the
/// operational log of trouble on the way, and the access line (`target: "access"`, at debug).
pub(super) fn log(record: &Record, conn: &ConnInfo, failure: Option<&Failure>, status: StatusCode) {
    let m = metrics();
    if let Some(decided) = &record.decided {
        m.check_duration
            .get_or_create(&FaceLabels { face: record.face })
            .observe(decided.check_time.as_secs_f64());
        audit_decision(record, decided, conn);
    }
    log_trouble(record);
    match failure {
        None => m.request(
            record.face,
            &record.site,
            &record.route,
            if record.face == "gateway" {
                "forwarded"
            } else {
                "allowed"
            },
            "",
        ),
        Some(failure) => {
            m.request(
                record.face,
                &record.site,
                &record.route,
                "rejected",
                failure.code(),
            );
            match failure {
                Failure::RateLimited { .. } => {
                    m.rate_limited
                        .get_or_create(&FaceLabels { face: record.face })
                        .inc();
                }
                Failure::UpstreamOverloaded(scope) => {
                    m.upstream_overflows
                        .get_or_create(&ScopeLabels {
                            scope: scope.label().to_owned(),
                        })
                        .inc();
                }
                _ => {}
            }
            audit_refusal(record, conn, failure);
        }
    }
    tracing::debug!(
        target: "access",
        face = record.face,
        site = &*record.site,
        check_id = %record.check_id,
        trace_id = %record.trace.trace_id,
        span_id = %record.trace.span_id,
        traceparent = record.trace.inbound.label(),
        peer = %conn.peer,
        method = %record.method,
        path = %record.path,
        route = %record.route,
        status = status.as_u16(),
        reason = failure.map_or("", Failure::code),
        duration_ms = u64::try_from(record.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "gateway request"
    );
}

/// A refusal an external authoriser face makes itself, before any site decides: an asker
/// that is no configured caller, a request no site serves, a question it cannot read. It is
/// counted (`psp_gateway_requests_total`, decision `rejected`, with its `site` when one was
/// chosen) and audited (`gateway refused`, with `check_id` the answer's request id), as a
/// site's refusals before the rule are.
pub fn log_face_refusal(refusal: FaceRefusal<'_>) {
    metrics().request(refusal.face, refusal.site, "", "rejected", refusal.code);
    tracing::info!(
        target: "audit",
        face = refusal.face,
        site = refusal.site,
        check_id = refusal.check_id,
        peer = %refusal.peer,
        status = refusal.status.as_u16(),
        reason = refusal.code,
        detail = refusal.detail,
        "gateway refused"
    );
}

/// What [`log_face_refusal`] records.
pub struct FaceRefusal<'a> {
    /// `ext-authz` or `forward-auth`.
    pub face: &'static str,
    /// The site chosen, or empty when none was.
    pub site: &'a str,
    /// The refusal answer's request id.
    pub check_id: &'a str,
    /// The asker's address (the authoriser, or the client as it reported it).
    pub peer: std::net::SocketAddr,
    /// The status the refusal answers.
    pub status: StatusCode,
    /// Its code (`docs/errors.md`).
    pub code: &'static str,
    /// Its sentence.
    pub detail: &'a str,
}

/// One audit record per decision of the access rule, with the check's details; in
/// report-only mode, the refusal not enforced is also a warning.
fn audit_decision(record: &Record, decided: &Decided, conn: &ConnInfo) {
    let report = decided.checked.report();
    if decided.verdict == "report-only" {
        tracing::warn!(
            target: "audit",
            check_id = %record.check_id,
            trace_id = %record.trace.trace_id,
            auth_number = report.attested_auth_number().unwrap_or(""),
            claimed_auth_number = report.claimed_auth_number(),
            reason = decided.reason,
            "report-only: would have refused, forwarding"
        );
    }
    tracing::info!(
        target: "audit",
        face = record.face,
        site = &*record.site,
        check_id = %record.check_id,
        trace_id = %record.trace.trace_id,
        peer = %conn.peer,
        resumed = conn.tls.as_ref().is_some_and(|t| t.resumed),
        fingerprint = %decided.fingerprint,
        auth_number = report.attested_auth_number().unwrap_or(""),
        claimed_auth_number = report.claimed_auth_number(),
        psp_name = report.psp_subject_name().unwrap_or(""),
        jurisdiction = %record.jurisdiction,
        method = %record.method,
        path = decided.path.as_str(),
        valid_qtsp = report.validity().valid_qtsp,
        valid_signature = report.validity().valid_signature,
        not_revoked = report.validity().not_revoked,
        not_expired = report.validity().not_expired,
        evidence = decided.checked.revocation_evidence(),
        decision = decided.verdict,
        reason = decided.reason,
        decision_id = decided.signed.as_ref().map_or("", |s| s.id.as_str()),
        "gateway decision"
    );
}

/// The audit line of a refusal the access rule did not make (refusals by the rule are in
/// their decision record). A client over its rate is not audited: a flood must not flood the
/// audit log (it is counted).
fn audit_refusal(record: &Record, conn: &ConnInfo, failure: &Failure) {
    if matches!(failure, Failure::RateLimited { .. })
        || matches!(failure, Failure::Refused(r) if r.reason.is_decided_by_rule())
    {
        return;
    }
    tracing::info!(
        target: "audit",
        face = record.face,
        site = &*record.site,
        check_id = %record.check_id,
        trace_id = %record.trace.trace_id,
        peer = %conn.peer,
        method = %record.method,
        path = %record.path,
        status = failure.status().as_u16(),
        reason = failure.code(),
        detail = match failure {
            Failure::PathRefused(r) => r.code(),
            Failure::AuthorityRefused(r) => r.code(),
            Failure::Misdirected(_) | Failure::PathNotNormal(_) => "",
            Failure::UpstreamOverloaded(scope) => scope.label(),
            Failure::Refused(_)
            | Failure::MethodRefused(_)
            | Failure::OverrideRefused(_)
            | Failure::HeaderNameRefused(_)
            | Failure::HeaderRefused(_)
            | Failure::FormBodyTooLarge
            | Failure::RateLimited { .. }
            | Failure::RequestBodyInvalid
            | Failure::RouteUnknown
            | Failure::AuditUnavailable
            | Failure::SharedStateUnavailable
            | Failure::UpstreamUnavailable
            | Failure::UpstreamTimeout => "",
        },
        "gateway refused"
    );
}

/// What went wrong on the way, at the level it deserves, and the upstream error counter.
fn log_trouble(record: &Record) {
    let check_id = record.check_id.as_str();
    let kind = match &record.trouble {
        None => return,
        Some(Trouble::Body(detail)) => {
            tracing::info!(check_id = %check_id, trace_id = %record.trace.trace_id, error = %detail, "the request body could not be read");
            return;
        }
        Some(Trouble::FormBody(detail)) => {
            tracing::info!(check_id = %check_id, trace_id = %record.trace.trace_id, error = %detail, "the form body could not be read");
            return;
        }
        Some(Trouble::Build(detail)) => {
            tracing::error!(check_id = %check_id, trace_id = %record.trace.trace_id, error = %detail, "cannot build the upstream request");
            "request"
        }
        Some(Trouble::Upstream {
            kind,
            detail: Some(detail),
        }) => {
            tracing::warn!(check_id = %check_id, trace_id = %record.trace.trace_id, error = %detail, "upstream unavailable");
            kind
        }
        Some(Trouble::Upstream { kind, detail: None }) => {
            tracing::warn!(check_id = %check_id, trace_id = %record.trace.trace_id, "upstream timed out");
            kind
        }
    };
    metrics()
        .upstream_errors
        .get_or_create(&OutcomeLabels {
            what: "upstream".to_owned(),
            outcome: kind.to_owned(),
        })
        .inc();
}
