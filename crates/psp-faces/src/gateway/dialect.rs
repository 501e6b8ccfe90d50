//! Rejections in the route's dialect. One exhaustive table maps every gateway failure to its
//! status and to the code of each dialect; each body carries the check id.
//!
//! - Berlin Group NextGenPSD2 (Implementation Guidelines, section 14.11 "Additional Error
//!   Information"): `{"tppMessages":[{"category":"ERROR","code":…,"text":…}]}`, with the
//!   check id in `X-Request-ID` and in the text.
//! - UK Open Banking (Read/Write API, `OBErrorResponse1`):
//!   `{"Code":"401","Id":<check id>,"Message":…,"Errors":[{"ErrorCode":…,"Message":…}]}`.
//!   The OB enumeration has no certificate codes: `ErrorCode` carries the Berlin Group-style
//!   code prefixed `PSPGW.` (documented in docs/errors.md), except where OB has one.
//! - The contract's `{"errors":[{"id","code","title","link"}]}`, built by
//!   [`crate::server::contract_error`] as the check endpoint's errors are.

use http::StatusCode;
use hyper::Response;
use serde_json::json;

use super::authority::AuthorityRefusal;
use super::config::Dialect;
use super::path::PathRefusal;
use crate::policy::{ReasonKind, Rejection};
use crate::server::{Body, contract_error, json_response};

/// Every way the gateway refuses or fails a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The access rule refused.
    Refused(Rejection),
    /// The path's meaning depends on the receiver's decoder (`path::normalise`); no route is
    /// chosen and nothing is forwarded.
    PathRefused(PathRefusal),
    /// The request names two authorities, or a malformed one (`authority::accepted`).
    AuthorityRefused(AuthorityRefusal),
    /// An external authoriser's request path is not in normal form (the form the route was
    /// chosen on): the authoriser's proxy forwards it as it is, so the bank's API could read
    /// it as another route. The normal form is given.
    PathNotNormal(String),
    /// The request's host (`Host` or `:authority`) is not one of the site its connection
    /// was made for (its SNI): 421, and it reaches no upstream.
    Misdirected(String),
    /// The client is over `gateway.rate_limit`.
    RateLimited { retry_after_secs: u64 },
    /// The method is not one the gateway forwards (`gateway.allowed_methods`; `CONNECT` and
    /// `TRACE` never): refused before any route is chosen.
    MethodRefused(http::Method),
    /// A query parameter that an upstream framework reads as the request's method or path
    /// (`_method`, `X-HTTP-Method-Override`, …; `overrides::refused_parameter`).
    OverrideRefused(String),
    /// A form body over `overrides::MAX_FORM_BODY_BYTES`: it is read whole before forwarding
    /// (to find method overrides), so it is bounded.
    FormBodyTooLarge,
    /// A header name with an underscore, under `gateway.headers_with_underscores = "refuse"`.
    HeaderNameRefused(String),
    /// A header the built-in proxy removes (an override, a client-certificate or client-address
    /// header, an identity header, a look-alike spelling), asked about by an authoriser whose
    /// proxy cannot be told to remove it (nginx, Caddy, Traefik forward-auth).
    HeaderRefused(String),
    /// The upstream's budget of calls in flight is spent, in total or for this PSP
    /// (`gateway.upstream_max_requests`, `gateway.upstream_max_requests_per_psp`).
    UpstreamOverloaded(OverloadScope),
    /// The audit log cannot take the call's record and its policy is `fail_closed`: nothing
    /// passes that the log does not hold.
    AuditUnavailable,
    /// `gateway.rate_limit` is shared (`[shared_state]`), Redis did not decide within its
    /// budget, and the `rate_limits` failure mode is `closed`.
    SharedStateUnavailable,
    /// No route matches the path and method.
    RouteUnknown,
    /// The request body could not be read while it was forwarded (malformed chunking, a
    /// connection closed early).
    RequestBodyInvalid,
    /// The upstream refused the connection or broke it.
    UpstreamUnavailable,
    /// The upstream did not answer in time.
    UpstreamTimeout,
}

/// The HTTP status of a refusal of this kind, in every response dialect: certificate
/// problems 401, register and role problems 403. The policy says why; the face says how.
pub fn refusal_status(kind: ReasonKind) -> StatusCode {
    match kind {
        ReasonKind::CertificateMissing
        | ReasonKind::CertificateExpired
        | ReasonKind::CertificateRevoked
        | ReasonKind::CertificateBlocked
        | ReasonKind::CertificateInvalid => StatusCode::UNAUTHORIZED,
        ReasonKind::RegisterOrRole => StatusCode::FORBIDDEN,
    }
}

impl Failure {
    // Whole: one exhaustive table giving every Failure its status, Berlin Group code,
    // contract code and sentence side by side; split, the codes of one failure would scatter.
    /// Status, Berlin Group code, contract code, sentence.
    fn parts(&self) -> (StatusCode, &'static str, &'static str, String) {
        match self {
            Failure::Refused(r) => {
                let status = refusal_status(r.reason.kind());
                let bg = match r.reason.kind() {
                    ReasonKind::CertificateMissing => "CERTIFICATE_MISSING",
                    ReasonKind::CertificateExpired => "CERTIFICATE_EXPIRED",
                    ReasonKind::CertificateRevoked => "CERTIFICATE_REVOKED",
                    ReasonKind::CertificateBlocked => "CERTIFICATE_BLOCKED",
                    ReasonKind::CertificateInvalid => "CERTIFICATE_INVALID",
                    ReasonKind::RegisterOrRole => "ROLE_INVALID",
                };
                (status, bg, r.reason.code(), r.detail.clone())
            }
            // NextGenPSD2 section 14.11: FORMAT_ERROR, 400, "Format of certain request fields
            // are not matching the XS2A requirements".
            Failure::PathRefused(refusal) => (
                StatusCode::BAD_REQUEST,
                "FORMAT_ERROR",
                "path_refused",
                format!("The request path is refused: {refusal}"),
            ),
            Failure::PathNotNormal(normal) => (
                StatusCode::BAD_REQUEST,
                "FORMAT_ERROR",
                "path_not_normal",
                format!(
                    "The request path is not in normal form (`{normal}`): the proxy would forward it as written"
                ),
            ),
            Failure::AuthorityRefused(refusal) => (
                StatusCode::BAD_REQUEST,
                "FORMAT_ERROR",
                "authority_refused",
                format!("The request's authority is refused: {refusal}"),
            ),
            // RFC 9110 section 15.5.20: 421, the request was directed at a server that is not
            // able to produce a response for it (the client may retry on a new connection).
            Failure::Misdirected(host) => (
                StatusCode::MISDIRECTED_REQUEST,
                "FORMAT_ERROR",
                "misdirected_request",
                format!(
                    "The host `{host}` is not served on this connection: open a connection for it"
                ),
            ),
            // NextGenPSD2 section 14.11: ACCESS_EXCEEDED, 429, "The access on the account has
            // been exceeding the consented multiplicity per day" (the nearest code it has).
            Failure::RateLimited { retry_after_secs } => (
                StatusCode::TOO_MANY_REQUESTS,
                "ACCESS_EXCEEDED",
                "rate_limit_exceeded",
                format!("Too many requests from this client; retry after {retry_after_secs} s"),
            ),
            // NextGenPSD2 section 14.11: SERVICE_INVALID, 405, "The addressed service is not
            // valid for the addressed resources".
            Failure::MethodRefused(method) => (
                StatusCode::METHOD_NOT_ALLOWED,
                "SERVICE_INVALID",
                "method_not_allowed",
                format!("The method {method} is not forwarded by this gateway"),
            ),
            Failure::OverrideRefused(parameter) => (
                StatusCode::BAD_REQUEST,
                "FORMAT_ERROR",
                "override_parameter_refused",
                format!(
                    "The query parameter `{parameter}` would override the request's method or path at the bank's API"
                ),
            ),
            Failure::FormBodyTooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "FORMAT_ERROR",
                "form_body_too_large",
                format!(
                    "A form-encoded body is read before forwarding and may not exceed {} bytes",
                    super::overrides::MAX_FORM_BODY_BYTES
                ),
            ),
            Failure::HeaderNameRefused(name) => (
                StatusCode::BAD_REQUEST,
                "FORMAT_ERROR",
                "header_name_refused",
                format!("The header name `{name}` has an underscore, which this gateway refuses"),
            ),
            Failure::HeaderRefused(name) => (
                StatusCode::BAD_REQUEST,
                "FORMAT_ERROR",
                "header_refused",
                format!(
                    "The header `{name}` is one this gateway removes before the bank's API, and the proxy in front cannot be told to: send the request without it"
                ),
            ),
            Failure::UpstreamOverloaded(scope) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "SERVICE_UNAVAILABLE",
                "upstream_overloaded",
                match scope {
                    OverloadScope::Total => {
                        "The bank's API has as many calls in flight as this gateway allows"
                    }
                    OverloadScope::Psp => {
                        "This PSP has as many calls in flight to the bank's API as this gateway allows"
                    }
                }
                .to_owned(),
            ),
            Failure::AuditUnavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "SERVICE_UNAVAILABLE",
                "audit_log_unavailable",
                "The gateway cannot record this call in its audit log now, so it lets nothing through"
                    .to_owned(),
            ),
            Failure::SharedStateUnavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "SERVICE_UNAVAILABLE",
                "shared_state_unavailable",
                "The fleet's shared request counters did not answer in time, and this gateway refuses rather than count alone"
                    .to_owned(),
            ),
            Failure::RequestBodyInvalid => (
                StatusCode::BAD_REQUEST,
                "FORMAT_ERROR",
                "request_body_invalid",
                "The request body could not be read (malformed chunked encoding, or cut short)"
                    .to_owned(),
            ),
            Failure::RouteUnknown => (
                StatusCode::NOT_FOUND,
                "RESOURCE_UNKNOWN",
                "route_unknown",
                "No route of this gateway matches the path and method".to_owned(),
            ),
            Failure::UpstreamUnavailable => (
                StatusCode::BAD_GATEWAY,
                "SERVICE_UNAVAILABLE",
                "upstream_unavailable",
                "The bank's API could not be reached".to_owned(),
            ),
            Failure::UpstreamTimeout => (
                StatusCode::GATEWAY_TIMEOUT,
                "SERVICE_UNAVAILABLE",
                "upstream_timeout",
                "The bank's API did not answer in time".to_owned(),
            ),
        }
    }

    /// The reason code for logs.
    pub fn code(&self) -> &'static str {
        self.parts().2
    }

    pub fn status(&self) -> StatusCode {
        self.parts().0
    }

    pub fn response(&self, dialect: Dialect, check_id: &str, link_base: &str) -> Response<Body> {
        let (status, bg, code, text) = self.parts();
        let body = match dialect {
            Dialect::BerlinGroup => json!({
                "tppMessages": [{
                    "category": "ERROR",
                    "code": bg,
                    "text": format!("{text} (check id {check_id})"),
                }]
            }),
            Dialect::UkOpenBanking => json!({
                "Code": status.as_u16().to_string(),
                "Id": check_id,
                "Message": text,
                "Errors": [{
                    "ErrorCode": ob_code(self, bg),
                    "Message": text,
                }]
            }),
            Dialect::Contract => {
                return contract_error(status, check_id, code, &text, link_base);
            }
        };
        json_response(status, body.to_string(), check_id)
    }
}

/// Which budget of calls to the upstream is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverloadScope {
    /// `gateway.upstream_max_requests`: all PSPs together.
    Total,
    /// `gateway.upstream_max_requests_per_psp`: the calling PSP's share.
    Psp,
}

impl OverloadScope {
    pub fn label(self) -> &'static str {
        match self {
            OverloadScope::Total => "total",
            OverloadScope::Psp => "psp",
        }
    }
}

/// UK OB `ErrorCode`: OB's own code where it has one, else ours.
fn ob_code(failure: &Failure, bg: &'static str) -> String {
    match failure {
        Failure::PathRefused(_)
        | Failure::AuthorityRefused(_)
        | Failure::Misdirected(_)
        | Failure::PathNotNormal(_)
        | Failure::OverrideRefused(_)
        | Failure::HeaderNameRefused(_)
        | Failure::HeaderRefused(_)
        | Failure::FormBodyTooLarge
        | Failure::RequestBodyInvalid => "UK.OBIE.Resource.InvalidFormat".to_owned(),
        Failure::RouteUnknown => "UK.OBIE.Resource.NotFound".to_owned(),
        Failure::UpstreamUnavailable
        | Failure::UpstreamTimeout
        | Failure::AuditUnavailable
        | Failure::SharedStateUnavailable
        | Failure::UpstreamOverloaded(_) => "UK.OBIE.UnexpectedError".to_owned(),
        Failure::Refused(_) | Failure::RateLimited { .. } | Failure::MethodRefused(_) => {
            format!("PSPGW.{bg}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Reason;

    /// One failure of each kind. The `match` has no `_` arm: a new kind of failure does not
    /// compile until it is named here, beside the list it must join (a reminder: the compiler
    /// cannot check a list).
    fn every_failure() -> Vec<Failure> {
        let reasons = Reason::ALL;
        let mut all: Vec<Failure> = reasons
            .into_iter()
            .map(|r| Failure::Refused(Rejection::new(r, "")))
            .collect();
        all.extend([
            Failure::PathRefused(PathRefusal::NotAbsolute),
            Failure::AuthorityRefused(AuthorityRefusal::DuplicateHost),
            Failure::Misdirected("xy.localhost".into()),
            Failure::PathNotNormal("/v1/accounts".into()),
            Failure::RateLimited {
                retry_after_secs: 1,
            },
            Failure::MethodRefused(http::Method::CONNECT),
            Failure::OverrideRefused("_method".into()),
            Failure::HeaderNameRefused("x_a".into()),
            Failure::HeaderRefused("x-original-url".into()),
            Failure::FormBodyTooLarge,
            Failure::UpstreamOverloaded(OverloadScope::Total),
            Failure::AuditUnavailable,
            Failure::SharedStateUnavailable,
            Failure::RouteUnknown,
            Failure::RequestBodyInvalid,
            Failure::UpstreamUnavailable,
            Failure::UpstreamTimeout,
        ]);
        for failure in &all {
            match failure {
                Failure::Refused(_)
                | Failure::PathRefused(_)
                | Failure::AuthorityRefused(_)
                | Failure::Misdirected(_)
                | Failure::PathNotNormal(_)
                | Failure::RateLimited { .. }
                | Failure::MethodRefused(_)
                | Failure::OverrideRefused(_)
                | Failure::HeaderNameRefused(_)
                | Failure::HeaderRefused(_)
                | Failure::FormBodyTooLarge
                | Failure::UpstreamOverloaded(_)
                | Failure::AuditUnavailable
                | Failure::SharedStateUnavailable
                | Failure::RouteUnknown
                | Failure::RequestBodyInvalid
                | Failure::UpstreamUnavailable
                | Failure::UpstreamTimeout => {}
            }
        }
        all
    }

    #[test]
    fn every_code_a_gateway_body_can_carry_links_to_its_explanation() {
        let errors_md = std::fs::read_to_string(
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
                .join("docs/errors.md"),
        )
        .expect("docs/errors.md");
        for failure in every_failure() {
            let response = failure.response(Dialect::Contract, "id-1", "/docs/errors#");
            let code = failure.code();
            let anchor = format!("<a id=\"{code}\"></a>");
            assert!(
                errors_md.contains(&anchor),
                "docs/errors.md has no anchor for `{code}`"
            );
            assert!(
                errors_md.contains(&format!("`{code}`")),
                "docs/errors.md does not explain `{code}`"
            );
            let bg = failure.parts().1;
            assert!(
                errors_md.contains(&format!("`{bg}`")),
                "docs/errors.md does not name the Berlin Group code `{bg}`"
            );
            assert_eq!(response.status(), failure.status());
        }
    }
}
