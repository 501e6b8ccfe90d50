//! What a request may not carry because the bank's framework would read it as another
//! request: a method the gateway does not forward, a query parameter that overrides the method
//! or the path, a header name with an underscore.
//!
//! The gateway decides on the method and the normalised path; the upstream must act on the
//! same. Override headers are removed before forwarding (`forward::OVERRIDE_HEADERS`); the
//! same overrides in the query string are refused here, since a query cannot be rewritten
//! without changing what the bank's API reads in it.

use std::time::Duration;

use http::{HeaderMap, HeaderName, Method, Request};
use http_body_util::BodyExt;

use crate::server::{Body, BodyError};

/// Query parameters that upstream frameworks read as the request's method or path, in the
/// form [`normalised`] gives them:
/// - `_method`: Laravel and Symfony (`Request::getMethod` with parameter override), Spring's
///   `HiddenHttpMethodFilter` (`getParameter`, which includes the query), Rails'
///   `Rack::MethodOverride` (`_method` in a form body; the query form is refused too), Express
///   `method-override` configured with a query getter;
/// - `X-HTTP-Method-Override`, `X-HTTP-Method`, `X-Method-Override`: the header names that
///   Express `method-override`, OData and Google APIs honour, as query parameters;
/// - `_url`: Phalcon's router reads the path from it.
const OVERRIDE_PARAMETERS: [&str; 5] = [
    "-method",
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
    "-url",
];

/// Characters of a parameter or header name that receivers map onto one another: PHP turns
/// `.`, ` ` and `[` in parameter names into `_`, and CGI and WSGI turn `-` into `_` in header
/// names (`HTTP_X_PSP_SERVICES`). All become `-` here.
fn is_separator(c: char) -> bool {
    matches!(c, '_' | '-' | '.' | ' ' | '[')
}

/// A name as every receiver we know reads it: lower case, trimmed, a PHP array suffix
/// (`name[]`, `name[x]`) dropped, separators made `-`.
fn normalised(name: &str) -> String {
    normalised_chars(name).collect()
}

/// [`normalised`], character by character (compared without allocating).
fn normalised_chars(name: &str) -> impl Iterator<Item = char> + '_ {
    let name = name.trim();
    let name = match name.find('[') {
        // `a[b]` is the array `a` in PHP; a leading `[` is a name of its own.
        Some(at) if at > 0 => &name[..at],
        _ => name,
    };
    name.chars().map(|c| {
        if is_separator(c) {
            '-'
        } else {
            c.to_ascii_lowercase()
        }
    })
}

/// Longest name echoed back in an error body.
const ECHO_MAX_CHARS: usize = 64;

/// A name the client sent, cut to [`ECHO_MAX_CHARS`] characters for an error body.
pub(super) fn echoed(name: &str) -> String {
    name.chars().take(ECHO_MAX_CHARS).collect()
}

/// The first query parameter (as sent, cut to 64 characters) that overrides the method or the
/// path, if any. Names are percent-decoded once (as frameworks do), `+` read as a space, and
/// `&` and `;` both separate parameters (older Rack and Python split on `;` too).
pub(super) fn refused_parameter(query: &str) -> Option<String> {
    query
        .split(['&', ';'])
        .map(|pair| pair.split('=').next().unwrap_or_default())
        .find(|raw| {
            // Every query of every request passes here: nothing is allocated for a name
            // without `+` or `%`.
            let spaced = if raw.contains('+') {
                std::borrow::Cow::Owned(raw.replace('+', " "))
            } else {
                std::borrow::Cow::Borrowed(*raw)
            };
            let decoded = percent_encoding::percent_decode_str(&spaced).decode_utf8_lossy();
            OVERRIDE_PARAMETERS
                .iter()
                .any(|p| normalised_chars(&decoded).eq(p.chars()))
        })
        .map(echoed)
}

/// `gateway.allowed_methods` by default: the methods of the PSD2 APIs (NextGenPSD2 and UK OB
/// use GET, POST, PUT, PATCH and DELETE), with HEAD and OPTIONS (CORS preflight).
pub(super) const DEFAULT_METHODS: [Method; 7] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
    Method::OPTIONS,
];

/// Methods no configuration may allow: `CONNECT` asks the gateway for a tunnel (its target
/// is an authority, which an HTTP/1.1 parser may still hand over as a path), `TRACE` echoes
/// the request, identity headers included.
pub(super) const NEVER_METHODS: [Method; 2] = [Method::CONNECT, Method::TRACE];

/// The first header name with an underscore (cut to 64 characters), if any, other than
/// `except` (header mode's configured certificate header, which a load balancer may spell
/// with underscores; it is read from trusted proxies only and never forwarded).
pub(super) fn underscore_header(
    headers: &HeaderMap,
    except: Option<&HeaderName>,
) -> Option<String> {
    headers
        .keys()
        .find(|name| name.as_str().contains('_') && Some(*name) != except)
        .map(|name| echoed(name.as_str()))
}

/// Removes every header whose name has an underscore (nginx's `underscores_in_headers off`,
/// Envoy's `headers_with_underscores_action: DROP_HEADER`), and every header that another
/// spelling would make one of `protected` at the receiver (`x.psp.services` for
/// `x-psp-services`): a WSGI or CGI upstream reads `x_psp_services` as `X-Psp-Services`,
/// and would see a forged value beside (or before) the gateway's.
pub(super) fn drop_lookalikes(h: &mut HeaderMap, protected: impl Fn(&str) -> bool) {
    let dropped: Vec<HeaderName> = h
        .keys()
        .filter(|name| is_lookalike(name.as_str(), &protected))
        .cloned()
        .collect();
    for name in dropped {
        h.remove(name);
    }
}

/// Whether [`drop_lookalikes`] drops the header `name` (lower case): a name with an underscore,
/// or one another spelling makes `protected`.
pub(super) fn is_lookalike(name: &str, protected: impl Fn(&str) -> bool) -> bool {
    if name.contains('_') {
        return true;
    }
    // Header names are lower-case tokens: of the separators, only `.` can still make one
    // spelling of another (and most names have none, so nothing is allocated).
    name.contains('.') && protected(&normalised(name))
}

/// Largest form body read before forwarding: 64 KiB. PSD2 forms are OAuth token and
/// consent requests of a few hundred bytes; NextGenPSD2's bulk payments are JSON, XML or
/// multipart, never form-encoded.
pub(super) const MAX_FORM_BODY_BYTES: usize = 64 * 1024;

/// Why a form body is not forwarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum FormRefusal {
    /// A form field that overrides the method or path (the name, as sent).
    Override(String),
    /// Over [`MAX_FORM_BODY_BYTES`].
    TooLarge,
    /// Not read completely: cut short, malformed framing, or not within the time allowed.
    Unreadable(String),
}

/// Whether the body is declared a form: `Content-Type: application/x-www-form-urlencoded`
/// (any parameters, any case, in any of several `Content-Type` fields). A body without
/// `Content-Type` is not read (Rack would read a POST's as a form; docs/hardening.md says why
/// it streams anyway).
fn is_form<B>(req: &Request<B>) -> bool {
    is_form_headers(req.headers())
}

/// [`is_form`] on the headers alone: whether any `Content-Type` field is
/// `application/x-www-form-urlencoded`.
pub(super) fn is_form_headers(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(http::header::CONTENT_TYPE)
        .iter()
        .any(|value| {
            // A field may list several media types (`a/b, c/d`): Rack reads the request as a
            // form when any of them is one (docs/attacks/proxy-and-data.md B4).
            value
                .to_str()
                .unwrap_or_default()
                .split(',')
                .filter_map(|item| item.split(';').next())
                .any(|media| {
                    media
                        .trim()
                        .eq_ignore_ascii_case("application/x-www-form-urlencoded")
                })
        })
}

/// Why a form body cannot be screened as sent, if it cannot (issue 40 finding 5): a
/// `Content-Encoding` other than `identity` (gzip, deflate, br: the bank's framework may
/// decode it, the screen would read compressed bytes), or a `charset` that is not ASCII-based
/// (UTF-16, UTF-32: `_method` would be spelled with NUL bytes between its letters).
fn unscreenable(headers: &http::HeaderMap) -> Option<String> {
    for encoding in headers.get_all(http::header::CONTENT_ENCODING) {
        let encoding = encoding.to_str().unwrap_or("?");
        if encoding
            .split(',')
            .any(|e| !e.trim().eq_ignore_ascii_case("identity"))
        {
            return Some(format!(
                "a form body with Content-Encoding `{}` cannot be screened",
                echoed(encoding)
            ));
        }
    }
    for content_type in headers.get_all(http::header::CONTENT_TYPE) {
        let text = content_type.to_str().unwrap_or_default();
        for parameter in text.split(';').skip(1) {
            let Some((name, value)) = parameter.split_once('=') else {
                continue;
            };
            if !name.trim().eq_ignore_ascii_case("charset") {
                continue;
            }
            let charset = value.trim().trim_matches('"').to_ascii_lowercase();
            let ascii_based = matches!(
                charset.as_str(),
                "utf-8" | "utf8" | "us-ascii" | "ascii" | "iso-8859-1" | "latin1" | "windows-1252"
            );
            if !ascii_based {
                return Some(format!(
                    "a form body in charset `{}` cannot be screened",
                    echoed(&charset)
                ));
            }
        }
    }
    None
}

/// The request with its body ready to forward. A form body (see [`is_form`]) is read first,
/// within `read_timeout` and [`MAX_FORM_BODY_BYTES`], and refused when a field would override
/// the method or path as `_method` does in Rails' `Rack::MethodOverride`, Spring's
/// `HiddenHttpMethodFilter` and Laravel; any other body streams untouched.
pub(super) async fn screen_form<B>(
    req: Request<B>,
    read_timeout: Duration,
) -> Result<Request<Body>, FormRefusal>
where
    B: hyper::body::Body<Data = bytes::Bytes> + Send + Sync + 'static,
    B::Error: Into<BodyError>,
{
    if !is_form(&req) {
        return Ok(req.map(|b| b.map_err(Into::into).boxed()));
    }
    if let Some(why) = unscreenable(req.headers()) {
        return Err(FormRefusal::Unreadable(why));
    }
    let (parts, body) = req.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_FORM_BODY_BYTES);
    let bytes = match tokio::time::timeout(read_timeout, limited.collect()).await {
        Err(_) => return Err(FormRefusal::Unreadable("not sent in time".to_owned())),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(FormRefusal::TooLarge);
        }
        Ok(Err(e)) => return Err(FormRefusal::Unreadable(e.to_string())),
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    // A form in UTF-16 or UTF-32 (which a framework may decode by its byte order mark or a
    // charset it guesses) has NUL bytes where the screen reads ASCII: it is not forwarded
    // unread. Percent-encoding leaves no NUL in a form that is ASCII, UTF-8 or Latin-1.
    if bytes.contains(&0) {
        return Err(FormRefusal::Unreadable(
            "a form body with NUL bytes (UTF-16 or UTF-32) cannot be screened".to_owned(),
        ));
    }
    if let Some(field) = refused_parameter(&String::from_utf8_lossy(&bytes)) {
        return Err(FormRefusal::Override(field));
    }
    Ok(Request::from_parts(parts, crate::server::full(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_framework_spelling_of_a_method_override_is_found() {
        for query in [
            "_method=DELETE",
            "a=1&_method=DELETE",
            "_METHOD=DELETE",
            "%5Fmethod=DELETE",
            "%5fmethod=DELETE",
            "_method[]=DELETE",
            ".method=DELETE",
            "+_method=DELETE",
            "x=1;_method=DELETE",
            "X-HTTP-Method-Override=DELETE",
            "x_http_method_override=DELETE",
            "x.http.method=DELETE",
            "X-Method-Override=PUT",
            "_url=/v1/payments",
            "_method",
        ] {
            assert!(refused_parameter(query).is_some(), "{query}");
        }
    }

    #[test]
    fn ordinary_parameters_pass() {
        for query in [
            "",
            "dateFrom=2024-01-01&bookingStatus=booked",
            "method=card",
            "payment_method=SEPA",
            "url=https%3A%2F%2Fexample.test",
            "withBalance=true;x=1",
            "%255Fmethod=DELETE",
        ] {
            assert_eq!(refused_parameter(query), None, "{query}");
        }
    }

    fn request(content_type: Option<&str>, body: &'static str) -> Request<Body> {
        let mut builder = Request::builder().method(Method::POST).uri("/v1/token");
        if let Some(t) = content_type {
            builder = builder.header(http::header::CONTENT_TYPE, t);
        }
        builder.body(crate::server::full(body)).expect("request")
    }

    async fn screened(req: Request<Body>) -> Result<bytes::Bytes, FormRefusal> {
        let req = screen_form(req, Duration::from_secs(5)).await?;
        Ok(req.into_body().collect().await.expect("body").to_bytes())
    }

    /// The fresh-eyes attack of issue 40 (docs/attacks/proxy-and-data.md B4): a form declared
    /// in a list of media types was not read, so its `_method` reached Rack.
    #[tokio::test]
    async fn a_form_declared_in_a_list_of_media_types_is_screened() {
        for content_type in [
            "application/x-www-form-urlencoded, application/json",
            "application/json, application/x-www-form-urlencoded; charset=utf-8",
        ] {
            let req = request(Some(content_type), "_method=DELETE");
            assert_eq!(
                screened(req).await,
                Err(FormRefusal::Override("_method".into())),
                "{content_type}"
            );
        }
    }

    /// Issue 40 finding 5: a gzip-encoded or UTF-16 form body was forwarded unread, so a
    /// `_method` in it reached the bank's framework.
    #[tokio::test]
    async fn a_form_body_the_screen_cannot_read_is_refused_not_forwarded() {
        let gzip = Request::builder()
            .method(Method::POST)
            .uri("/v1/token")
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(http::header::CONTENT_ENCODING, "gzip")
            .body(crate::server::full("\x1f\u{8b}compressed"))
            .expect("request");
        assert!(
            matches!(screened(gzip).await, Err(FormRefusal::Unreadable(why)) if why.contains("gzip"))
        );
        let utf16 = request(
            Some("application/x-www-form-urlencoded; charset=UTF-16"),
            "_method=DELETE",
        );
        assert!(
            matches!(screened(utf16).await, Err(FormRefusal::Unreadable(why)) if why.contains("utf-16"))
        );
        // UTF-16 bytes without a charset: `_method=DELETE` with NUL bytes between its letters.
        let spelled: String = "_method=DELETE".chars().flat_map(|c| [c, '\0']).collect();
        let nul = Request::builder()
            .method(Method::POST)
            .uri("/v1/token")
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(crate::server::full(spelled))
            .expect("request");
        assert!(
            matches!(screened(nul).await, Err(FormRefusal::Unreadable(why)) if why.contains("NUL"))
        );
        // The control: identity and UTF-8 are screened as before.
        let plain = Request::builder()
            .method(Method::POST)
            .uri("/v1/token")
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded; charset=utf-8",
            )
            .header(http::header::CONTENT_ENCODING, "identity")
            .body(crate::server::full("grant_type=client_credentials"))
            .expect("request");
        assert!(screened(plain).await.is_ok());
    }

    #[tokio::test]
    async fn a_method_override_in_a_form_body_is_refused() {
        for content_type in [
            Some("application/x-www-form-urlencoded"),
            Some("Application/X-WWW-Form-Urlencoded; charset=utf-8"),
        ] {
            assert_eq!(
                screened(request(content_type, "grant_type=x&_method=DELETE")).await,
                Err(FormRefusal::Override("_method".to_owned())),
                "{content_type:?}"
            );
        }
    }

    #[tokio::test]
    async fn other_bodies_pass_unchanged() {
        let form = "grant_type=client_credentials&scope=accounts";
        assert_eq!(
            screened(request(Some("application/x-www-form-urlencoded"), form)).await,
            Ok(bytes::Bytes::from_static(form.as_bytes()))
        );
        // JSON is not read as a form, whatever it holds.
        let json = r#"{"_method":"DELETE"}"#;
        assert_eq!(
            screened(request(Some("application/json"), json)).await,
            Ok(bytes::Bytes::from_static(json.as_bytes()))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_form_body_that_never_ends_is_given_up_at_the_read_timeout() {
        use futures_util::stream::{self, StreamExt};
        // The first bytes of a form, then nothing, for ever.
        let trickle = stream::iter([Ok::<_, BodyError>(hyper::body::Frame::data(
            bytes::Bytes::from_static(b"grant_type=x&"),
        ))])
        .chain(stream::pending());
        let req = Request::builder()
            .method(Method::POST)
            .uri("/v1/token")
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(BodyExt::boxed(http_body_util::StreamBody::new(trickle)))
            .expect("request");
        let started = tokio::time::Instant::now();
        let refused = screen_form(req, Duration::from_secs(30)).await;
        assert!(
            matches!(refused, Err(FormRefusal::Unreadable(_))),
            "{:?}",
            refused.map(|_| ())
        );
        assert_eq!(started.elapsed(), Duration::from_secs(30));
    }

    #[test]
    fn only_the_configured_certificate_header_may_carry_an_underscore() {
        let configured = HeaderName::from_static("ssl_client_cert");
        let mut h = HeaderMap::new();
        h.insert(configured.clone(), http::HeaderValue::from_static("pem"));
        assert_eq!(underscore_header(&h, Some(&configured)), None);
        h.insert(
            HeaderName::from_static("x_psp_services"),
            http::HeaderValue::from_static("1"),
        );
        assert_eq!(
            underscore_header(&h, Some(&configured)).as_deref(),
            Some("x_psp_services")
        );
        assert!(
            underscore_header(&h, None).is_some(),
            "without header mode nothing is exempt"
        );
    }

    #[tokio::test]
    async fn a_form_body_over_the_limit_is_refused_not_buffered() {
        let big: &'static str = Box::leak("a=1&".repeat(MAX_FORM_BODY_BYTES).into_boxed_str());
        assert_eq!(
            screened(request(Some("application/x-www-form-urlencoded"), big)).await,
            Err(FormRefusal::TooLarge)
        );
    }

    #[test]
    fn an_echoed_name_is_cut_short() {
        let long = format!("_method[{}]=x", "a".repeat(1000));
        assert_eq!(
            refused_parameter(&long).expect("refused").chars().count(),
            64
        );
    }

    #[test]
    fn underscore_and_dotted_lookalikes_of_protected_names_are_dropped() {
        let mut h = HeaderMap::new();
        for name in [
            "x_psp_services",
            "x.psp.auth.number",
            "x-psp-services",
            "accept",
            "x.other",
        ] {
            h.insert(
                HeaderName::from_bytes(name.as_bytes()).expect("name"),
                http::HeaderValue::from_static("v"),
            );
        }
        drop_lookalikes(&mut h, |n| n.starts_with("x-psp-"));
        let mut left: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        left.sort_unstable();
        assert_eq!(left, ["accept", "x-psp-services", "x.other"]);
    }
}
