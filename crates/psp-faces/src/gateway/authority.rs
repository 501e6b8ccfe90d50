//! The authority a request names, accepted only when it names one: a request with two `Host`
//! headers, or a `Host` that contradicts the absolute-form target or the HTTP/2 `:authority`,
//! is routed by one receiver on one and by another on the other (RFC 9112 section 3.2: 400 for
//! more than one `Host`; RFC 9113 section 8.3.1: `:authority` and `Host` must agree). One parser
//! for both protocols (issue 40 finding 4): `Host` and the target's authority (HTTP/1.1's
//! absolute form, HTTP/2's `:authority`) are held to the same rule, a host and an optional port
//! between 1 and 65535, never user information; and an HTTP/1.1 request names one (RFC 9112
//! section 3.2: 400 without `Host`).

use http::header::HOST;
use http::uri::Authority;
use http::{HeaderMap, HeaderValue, Uri, Version};

/// Why a request's authority is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthorityRefusal {
    #[error("the request has more than one Host header")]
    DuplicateHost,
    #[error("the Host header is not a host and port")]
    InvalidHost,
    #[error("the Host header contradicts the request target's authority")]
    HostMismatch,
    #[error("the request target's authority (HTTP/2 :authority) is not a host and port")]
    InvalidAuthority,
    #[error("an HTTP/1.1 request without a Host header")]
    MissingHost,
}

impl AuthorityRefusal {
    pub fn code(&self) -> &'static str {
        match self {
            AuthorityRefusal::DuplicateHost => "duplicate_host",
            AuthorityRefusal::InvalidHost => "invalid_host",
            AuthorityRefusal::HostMismatch => "host_mismatch",
            AuthorityRefusal::InvalidAuthority => "invalid_authority",
            AuthorityRefusal::MissingHost => "missing_host",
        }
    }
}

/// Whether `authority` is a host with an optional port between 1 and 65535: no user
/// information, not empty, no empty port.
fn is_host_and_port(authority: &Authority) -> bool {
    let text = authority.as_str();
    // The port is what follows the last `:` after the host (an IPv6 host is bracketed); the
    // http crate reads a port out of range as no port at all, so it is read here.
    let after_host = text.rfind(']').map_or(text, |end| &text[end + 1..]);
    let port_ok = match after_host.rsplit_once(':') {
        None => true,
        Some((_, port)) => port.parse::<u16>().is_ok_and(|p| p != 0),
    };
    port_ok && !text.contains('@') && !authority.host().is_empty()
}

/// A request an external authoriser described: its HTTP version is the client's, which the
/// authoriser does not pass (its proxy enforces `Host` for HTTP/1.1 itself).
#[derive(Debug, Clone, Copy)]
pub(super) struct VersionUnknown;

/// The one authority the request names (the target's, or else `Host`'s), if any; refused when
/// it names more than one, one that is not a host and port (user information, a port out of
/// range), or none in an HTTP/1.1 request (`version`, when known).
pub(super) fn accepted(
    version: Option<Version>,
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
        if !is_host_and_port(&parsed) {
            return Err(AuthorityRefusal::InvalidHost);
        }
    }
    if let Some(target) = uri.authority()
        && !is_host_and_port(target)
    {
        return Err(AuthorityRefusal::InvalidAuthority);
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
        (None, None) if version == Some(Version::HTTP_11) => Err(AuthorityRefusal::MissingHost),
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
            accepted(Some(Version::HTTP_11), &origin, &headers(&["bank.example"])),
            Ok(Some(HeaderValue::from_static("bank.example")))
        );
        assert_eq!(
            accepted(Some(Version::HTTP_11), &absolute, &headers(&[])),
            Ok(Some(HeaderValue::from_static("bank.example")))
        );
        assert_eq!(
            accepted(
                Some(Version::HTTP_11),
                &absolute,
                &headers(&["BANK.example"])
            ),
            Ok(Some(HeaderValue::from_static("bank.example"))),
            "host names are case-insensitive"
        );
        assert_eq!(
            accepted(Some(Version::HTTP_10), &origin, &headers(&[])),
            Ok(None),
            "HTTP/1.0 may name no host"
        );
        assert_eq!(
            accepted(Some(Version::HTTP_2), &origin, &headers(&[])),
            Ok(None),
            "HTTP/2 may name no authority"
        );
    }

    #[test]
    fn two_authorities_or_a_malformed_one_are_refused() {
        let origin: Uri = "/v1/accounts".parse().expect("uri");
        let absolute: Uri = "https://bank.example/v1/accounts".parse().expect("uri");
        assert_eq!(
            accepted(
                Some(Version::HTTP_11),
                &origin,
                &headers(&["bank.example", "evil.example"])
            ),
            Err(AuthorityRefusal::DuplicateHost)
        );
        assert_eq!(
            accepted(
                Some(Version::HTTP_11),
                &origin,
                &headers(&["bank.example", "bank.example"])
            ),
            Err(AuthorityRefusal::DuplicateHost),
            "even the same twice"
        );
        assert_eq!(
            accepted(
                Some(Version::HTTP_11),
                &absolute,
                &headers(&["evil.example"])
            ),
            Err(AuthorityRefusal::HostMismatch)
        );
        assert_eq!(
            accepted(
                Some(Version::HTTP_11),
                &absolute,
                &headers(&["bank.example:8443"])
            ),
            Err(AuthorityRefusal::HostMismatch),
            "another port is another authority"
        );
        for bad in [
            "user@bank.example",
            "bank example",
            "bank.example/x",
            "",
            "bank.example:99999",
            "bank.example:0",
            "bank.example:",
        ] {
            let mut h = HeaderMap::new();
            h.insert(HOST, HeaderValue::from_str(bad).expect("value"));
            assert_eq!(
                accepted(Some(Version::HTTP_11), &origin, &h),
                Err(AuthorityRefusal::InvalidHost),
                "{bad:?}"
            );
        }
    }

    /// Issue 40 findings 4 and 5: HTTP/2's `:authority` with user information or a port out of
    /// range was forwarded as `X-Forwarded-Host` (HTTP/1.1 refused the same `Host`), and an
    /// HTTP/1.1 request without `Host` was accepted.
    #[test]
    fn the_targets_authority_is_held_to_the_hosts_rule_and_http11_names_a_host() {
        for bad in [
            "https://evil.example@xx.localhost/v1/accounts",
            "https://xx.localhost:99999/v1/accounts",
            "https://xx.localhost:0/v1/accounts",
        ] {
            let uri: Uri = bad.parse().expect("the http crate parses it");
            for version in [Version::HTTP_11, Version::HTTP_2] {
                assert_eq!(
                    accepted(Some(version), &uri, &headers(&[])),
                    Err(AuthorityRefusal::InvalidAuthority),
                    "{bad} over {version:?}"
                );
            }
        }
        let good: Uri = "https://xx.localhost:8443/v1/accounts"
            .parse()
            .expect("uri");
        assert_eq!(
            accepted(Some(Version::HTTP_2), &good, &headers(&[])),
            Ok(Some(HeaderValue::from_static("xx.localhost:8443")))
        );
        let origin: Uri = "/v1/accounts".parse().expect("uri");
        assert_eq!(
            accepted(Some(Version::HTTP_11), &origin, &headers(&[])),
            Err(AuthorityRefusal::MissingHost)
        );
        assert_eq!(
            accepted(None, &origin, &headers(&[])),
            Ok(None),
            "an authoriser's request, whose version is not known"
        );
    }
}
