//! The endpoint's error table: every failure, its status, its code and its title, in one
//! exhaustive `match` (a new failure forces a decision). Bodies are the contract's
//! `{"errors":[{"id","code","title","link"}]}` ([`crate::server::contract_error`]) with a
//! unique `id`, also sent as `x-request-id`.

use crate::server::{Body, contract_error};
use http::{HeaderValue, StatusCode, header};
use hyper::Response;

/// A request the endpoint refuses, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// No such path.
    NotFound,
    /// The path exists; the method does not.
    MethodNotAllowed,
    /// No `Authorization: Basic` header, or one that cannot be read.
    AuthenticationMissing,
    /// Unknown user or wrong password.
    AuthenticationFailed,
    /// Over the per-IP quota; seconds until the next request is allowed.
    RateLimited { retry_after_secs: u64 },
    /// The source address or the user name is over its quota of password verifications
    /// (`api.failed_logins`); seconds until the next attempt is allowed.
    LoginAttemptsExceeded { retry_after_secs: u64 },
    /// A shared counter could not be read within its budget (Redis is away) and its failure
    /// mode is `closed` (`[shared_state]`).
    SharedStateUnavailable,
    /// The audit log cannot take the check's record and its policy is `fail_closed`.
    AuditUnavailable,
    /// Every password-verification slot stayed busy (`api.max_concurrent_password_checks`).
    Busy { retry_after_secs: u64 },
    /// A required parameter is absent (`jurisdiction`, `eidas`, `fi_reference_id`).
    ParameterMissing(&'static str),
    /// A parameter is present but malformed.
    ParameterInvalid { name: &'static str, why: String },
    /// `jurisdiction` is not a configured valid jurisdiction.
    JurisdictionInvalid(String),
    /// `version` is neither `latest` nor `1`.
    VersionInvalid(String),
    /// The `eidas` header does not hold a readable certificate.
    CertificateInvalid(String),
    /// Our fault, never the caller's; details are in the log under the request id.
    Internal,
}

/// At most this many characters of a value the caller sent are repeated in an error title.
const ECHOED_CHARS: usize = 64;

/// A value the caller sent, cut to [`ECHOED_CHARS`] characters (`…` marks a cut): a 30 KB
/// parameter is not sent back whole.
fn echoed(value: &str) -> String {
    match value.char_indices().nth(ECHOED_CHARS) {
        Some((end, _)) => format!("{}…", &value[..end]),
        None => value.to_owned(),
    }
}

impl ApiError {
    /// Status, code and title. The codes are documented in `docs/errors.md`.
    // Whole: one exhaustive table giving every ApiError its status, code and title, read
    // against docs/errors.md as one; split, the table would no longer be seen whole.
    fn parts(&self) -> (StatusCode, &'static str, String) {
        match self {
            ApiError::NotFound => (
                StatusCode::NOT_FOUND,
                "not_found",
                "No such resource: the check endpoint is GET /v1/psp/eidas".to_owned(),
            ),
            ApiError::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "Only GET is allowed on /v1/psp/eidas and /docs/errors".to_owned(),
            ),
            ApiError::AuthenticationMissing => (
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "Missing or unreadable Authorization header: use HTTP Basic authentication"
                    .to_owned(),
            ),
            ApiError::AuthenticationFailed => (
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "Unable to authorise: unknown user or wrong password".to_owned(),
            ),
            ApiError::RateLimited { retry_after_secs } => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_exceeded",
                format!(
                    "Rate limit exceeded for this source address; retry after {retry_after_secs} s"
                ),
            ),
            ApiError::LoginAttemptsExceeded { retry_after_secs } => (
                StatusCode::TOO_MANY_REQUESTS,
                "login_attempts_exceeded",
                format!(
                    "Too many login attempts from this source address or for this user name; retry after {retry_after_secs} s"
                ),
            ),
            ApiError::SharedStateUnavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "shared_state_unavailable",
                "The shared request counters cannot be reached; retry after 1 s".to_owned(),
            ),
            ApiError::AuditUnavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "audit_log_unavailable",
                "The check cannot be recorded in the audit log now, so none is answered; retry after 1 s"
                    .to_owned(),
            ),
            ApiError::Busy { retry_after_secs } => (
                StatusCode::SERVICE_UNAVAILABLE,
                "server_busy",
                format!("Too many password checks are running; retry after {retry_after_secs} s"),
            ),
            ApiError::ParameterMissing(name) => (
                StatusCode::NOT_FOUND,
                "parameter_missing",
                format!("Missing required parameter `{name}`"),
            ),
            ApiError::ParameterInvalid { name, why } => (
                StatusCode::NOT_FOUND,
                "parameter_invalid",
                format!("Parameter `{name}` is malformed: {why}"),
            ),
            ApiError::JurisdictionInvalid(j) => (
                StatusCode::NOT_FOUND,
                "jurisdiction_invalid",
                format!("`{}` is not a valid jurisdiction for this service", echoed(j)),
            ),
            ApiError::VersionInvalid(v) => (
                StatusCode::NOT_FOUND,
                "version_invalid",
                format!("Header `version` must be `latest` or `1`, not `{}`", echoed(v)),
            ),
            ApiError::CertificateInvalid(why) => (
                StatusCode::NOT_FOUND,
                "certificate_invalid",
                format!("Header `eidas` does not hold a readable certificate: {why}"),
            ),
            ApiError::Internal => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "Internal error; the request id identifies it in the service's log".to_owned(),
            ),
        }
    }

    /// The error response, with `id` = `request_id`.
    pub fn response(&self, request_id: &str, link_base: &str) -> Response<Body> {
        let (status, code, title) = self.parts();
        let mut response = contract_error(status, request_id, code, &title, link_base);
        let headers = response.headers_mut();
        match self {
            ApiError::MethodNotAllowed => {
                headers.insert(header::ALLOW, HeaderValue::from_static("GET"));
            }
            ApiError::AuthenticationMissing | ApiError::AuthenticationFailed => {
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"psp-gateway\", charset=\"UTF-8\""),
                );
            }
            ApiError::RateLimited { retry_after_secs }
            | ApiError::LoginAttemptsExceeded { retry_after_secs }
            | ApiError::Busy { retry_after_secs } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
            }
            ApiError::SharedStateUnavailable | ApiError::AuditUnavailable => {
                // The circuit to Redis is retried after half a second (`server::shared`); the
                // audit log every `sync_interval_ms`.
                headers.insert(header::RETRY_AFTER, HeaderValue::from(1u64));
            }
            ApiError::NotFound
            | ApiError::ParameterMissing(_)
            | ApiError::ParameterInvalid { .. }
            | ApiError::JurisdictionInvalid(_)
            | ApiError::VersionInvalid(_)
            | ApiError::CertificateInvalid(_)
            | ApiError::Internal => {}
        }
        response
    }

    /// The code, for logs.
    pub fn code(&self) -> &'static str {
        self.parts().1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_value_the_caller_sent_is_not_echoed_whole() {
        let huge = "X".repeat(30 * 1024);
        for error in [
            ApiError::JurisdictionInvalid(huge.clone()),
            ApiError::VersionInvalid(huge.clone()),
        ] {
            let (_, _, title) = error.parts();
            assert!(title.len() < 200, "{} bytes", title.len());
            assert!(title.contains(&format!("{}…", "X".repeat(ECHOED_CHARS))));
        }
        let (_, _, title) = ApiError::JurisdictionInvalid("zz".into()).parts();
        assert_eq!(title, "`zz` is not a valid jurisdiction for this service");
    }
}
