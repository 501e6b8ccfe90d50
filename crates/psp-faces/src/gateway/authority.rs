//! The authority a request names, accepted only when it names one: a request with two `Host`
//! headers, or a `Host` that contradicts the absolute-form target or the HTTP/2 `:authority`,
//! is routed by one receiver on one and by another on the other (RFC 9112 section 3.2: 400 for
//! more than one `Host`; RFC 9113 section 8.3.1: `:authority` and `Host` must agree).

use http::header::HOST;
use http::uri::Authority;
use http::{HeaderMap, HeaderValue, Uri};

/// Why a request's authority is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthorityRefusal {
    #[error("the request has more than one Host header")]
    DuplicateHost,
    #[error("the Host header is not a host and port")]
    InvalidHost,
    #[error("the Host header contradicts the request target's authority")]
    HostMismatch,
}

impl AuthorityRefusal {
    pub fn code(&self) -> &'static str {
        match self {
            AuthorityRefusal::DuplicateHost => "duplicate_host",
            AuthorityRefusal::InvalidHost => "invalid_host",
            AuthorityRefusal::HostMismatch => "host_mismatch",
        }
    }
}

/// The one authority the request names (the target's, or else `Host`'s), if any; refused when
/// it names more than one, or a `Host` that is no authority (user information included).
pub(super) fn accepted(
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<Option<HeaderValue>, AuthorityRefusal> {
    let mut hosts = headers.get_all(HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err(AuthorityRefusal::DuplicateHost);
    }
    if let Some(host) = host {
        let parsed =
            Authority::try_from(host.as_bytes()).map_err(|_| AuthorityRefusal::InvalidHost)?;
        if parsed.as_str().contains('@') || parsed.as_str().is_empty() {
            return Err(AuthorityRefusal::InvalidHost);
        }
    }
    match (uri.authority(), host) {
        (Some(target), Some(host))
            if !target
                .as_str()
                .eq_ignore_ascii_case(host.to_str().unwrap_or_default()) =>
        {
            Err(AuthorityRefusal::HostMismatch)
        }
        (Some(target), _) => Ok(HeaderValue::from_str(target.as_str()).ok()),
        (None, host) => Ok(host.cloned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(hosts: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in hosts {
            h.append(HOST, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn one_authority_is_accepted_from_wherever_it_is_named() {
        let origin: Uri = "/v1/accounts".parse().expect("uri");
        let absolute: Uri = "https://bank.example/v1/accounts".parse().expect("uri");
        assert_eq!(
            accepted(&origin, &headers(&["bank.example"])),
            Ok(Some(HeaderValue::from_static("bank.example")))
        );
        assert_eq!(
            accepted(&absolute, &headers(&[])),
            Ok(Some(HeaderValue::from_static("bank.example")))
        );
        assert_eq!(
            accepted(&absolute, &headers(&["BANK.example"])),
            Ok(Some(HeaderValue::from_static("bank.example"))),
            "host names are case-insensitive"
        );
        assert_eq!(accepted(&origin, &headers(&[])), Ok(None));
    }

    #[test]
    fn two_authorities_or_a_malformed_one_are_refused() {
        let origin: Uri = "/v1/accounts".parse().expect("uri");
        let absolute: Uri = "https://bank.example/v1/accounts".parse().expect("uri");
        assert_eq!(
            accepted(&origin, &headers(&["bank.example", "evil.example"])),
            Err(AuthorityRefusal::DuplicateHost)
        );
        assert_eq!(
            accepted(&origin, &headers(&["bank.example", "bank.example"])),
            Err(AuthorityRefusal::DuplicateHost),
            "even the same twice"
        );
        assert_eq!(
            accepted(&absolute, &headers(&["evil.example"])),
            Err(AuthorityRefusal::HostMismatch)
        );
        assert_eq!(
            accepted(&absolute, &headers(&["bank.example:8443"])),
            Err(AuthorityRefusal::HostMismatch),
            "another port is another authority"
        );
        for bad in ["user@bank.example", "bank example", "bank.example/x", ""] {
            let mut h = HeaderMap::new();
            h.insert(HOST, HeaderValue::from_str(bad).expect("value"));
            assert_eq!(
                accepted(&origin, &h),
                Err(AuthorityRefusal::InvalidHost),
                "{bad:?}"
            );
        }
    }
}
