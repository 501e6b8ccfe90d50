//! Answers in Envoy's terms: a site's [`Answer`](crate::gateway::Answer) as a
//! `CheckResponse`, and this face's own refusals (a Check it cannot put to any site).
//!
//! What Envoy does with an allowed answer (`ext_authz.cc`, `onComplete`): it sets each header
//! of `OkHttpResponse.headers` (`OVERWRITE_IF_EXISTS_OR_ADD`: every copy the client sent is
//! replaced), then removes each of `headers_to_remove`. Removal comes second, so the identity
//! headers this answer sets are not in `headers_to_remove` (Envoy would remove them again);
//! the client's copies of them are gone through the overwrite. Every other name the site
//! strips (the identity headers it does not set for this PSP, the path and method override
//! headers, `strip_headers`) is in `headers_to_remove`, and so is every header of the request
//! whose name has an underscore: the built-in proxy drops those (its default
//! `headers_with_underscores = "drop"`), since WSGI and CGI read `x_psp_auth_number` as
//! `X-Psp-Auth-Number`.
//!
//! A refusal is never a gRPC error (Envoy's `failure_mode_allow` case) nor an
//! `error_response` (which also honours `failure_mode_allow`): it is a `denied_response` with
//! a status that is not `OK`.

use bytes::Bytes;
use envoy_types::ext_authz::v3::pb::{
    CheckResponse, DeniedHttpResponse, HeaderAppendAction, HeaderValue, HeaderValueOption,
    HttpResponse, HttpStatus, OkHttpResponse,
};
use envoy_types::pb::google::protobuf::{ListValue, Struct, Value, value::Kind};
use envoy_types::pb::google::rpc;
use http::{HeaderMap, HeaderName, StatusCode};

use crate::server::{contract_error, new_request_id};

/// The headers of a site's refusal that Envoy passes to the client: those the built-in proxy
/// sends with it (`content-type`, `cache-control`, the check id, and `allow` or `retry-after`
/// where the failure calls for them).
const DENIAL_HEADERS: [HeaderName; 5] = [
    http::header::CONTENT_TYPE,
    http::header::CACHE_CONTROL,
    HeaderName::from_static("x-request-id"),
    http::header::ALLOW,
    http::header::RETRY_AFTER,
];

/// gRPC status codes (`google.rpc.Code`).
const GRPC_OK: i32 = 0;
const GRPC_PERMISSION_DENIED: i32 = 7;
const GRPC_UNAUTHENTICATED: i32 = 16;

/// Why this face refuses a Check itself, before or around a site's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The bytes are not a `CheckRequest` (a truncated message, a string that is not UTF-8).
    Undecodable(String),
    /// A part Envoy always sends is missing (`attributes`, its HTTP request).
    Missing(&'static str),
    /// The request's method is not an HTTP method.
    MethodInvalid(String),
    /// No site is named, or the one named does not exist.
    SiteUnknown(String),
    /// The route's extension names one site and the client's server name another.
    SitesDisagree { extension: String, sni: String },
    /// The decision could not be completed (its task ended without an answer), or its answer
    /// cannot be put in Envoy's terms.
    Unfinished(String),
}

impl Refusal {
    // One exhaustive table: every refusal's status, contract code and sentence side by side.
    fn parts(&self) -> (StatusCode, &'static str, String) {
        match self {
            Refusal::Undecodable(why) => (
                StatusCode::BAD_REQUEST,
                "check_request_invalid",
                format!("The CheckRequest cannot be decoded: {why}"),
            ),
            Refusal::Missing(what) => (
                StatusCode::BAD_REQUEST,
                "check_request_invalid",
                format!("The CheckRequest has no {what}"),
            ),
            Refusal::MethodInvalid(method) => (
                StatusCode::BAD_REQUEST,
                "check_request_invalid",
                format!("The request's method is not an HTTP method: `{method}`"),
            ),
            Refusal::SiteUnknown(why) => (
                StatusCode::FORBIDDEN,
                "site_unknown",
                format!("No site decides this request: {why}"),
            ),
            // RFC 9110 section 15.5.20, as the built-in proxy's `misdirected_request`.
            Refusal::SitesDisagree { extension, sni } => (
                StatusCode::MISDIRECTED_REQUEST,
                "misdirected_request",
                format!(
                    "The route names the site `{extension}`, the connection's server name the site `{sni}`: open a connection for `{extension}`"
                ),
            ),
            Refusal::Unfinished(why) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                format!("The decision could not be completed: {why}"),
            ),
        }
    }
}

/// This face's refusal: the contract's error body with a fresh request id, its link under
/// `link_base` (`checks.error_link_base`), as a denial; counted and audited with the caller's
/// address `peer` ([`crate::gateway::log_face_refusal`]).
pub(crate) async fn refused(
    refusal: &Refusal,
    link_base: &str,
    peer: std::net::SocketAddr,
) -> CheckResponse {
    use http_body_util::BodyExt;
    let (status, code, title) = refusal.parts();
    let id = new_request_id();
    crate::gateway::log_face_refusal(crate::gateway::FaceRefusal {
        face: super::question::FACE,
        site: "",
        check_id: &id,
        peer,
        status,
        code,
        detail: &title,
    });
    let response = contract_error(status, &id, code, &title, link_base);
    let (parts, body) = response.into_parts();
    // A full body in memory: reading it cannot fail; an empty one would still deny.
    let body = body
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
    denied(parts.status, code, &parts.headers, &body)
}

/// A refusal: not `OK` (`UNAUTHENTICATED` for 401, `PERMISSION_DENIED` otherwise, with the
/// refusal's code as the message), and the HTTP answer Envoy gives the client: the status,
/// the refusal's own headers and its body, byte for byte.
pub(crate) fn denied(
    status: StatusCode,
    code: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> CheckResponse {
    let grpc_code = if status == StatusCode::UNAUTHORIZED {
        GRPC_UNAUTHENTICATED
    } else {
        GRPC_PERMISSION_DENIED
    };
    let headers = DENIAL_HEADERS
        .iter()
        .flat_map(|name| headers.get_all(name).iter().map(move |v| (name, v)))
        // The bodies and headers are the gateway's own (JSON, ASCII): a value that is not
        // text is left out rather than sent altered.
        .filter_map(|(name, value)| Some(overwrite(name.as_str(), value.to_str().ok()?)))
        .collect();
    CheckResponse {
        status: Some(rpc::Status {
            code: grpc_code,
            message: code.to_owned(),
            details: Vec::new(),
        }),
        dynamic_metadata: None,
        http_response: Some(HttpResponse::DeniedResponse(DeniedHttpResponse {
            status: Some(HttpStatus {
                code: i32::from(status.as_u16()),
            }),
            headers,
            body: String::from_utf8_lossy(body).into_owned(),
        })),
    }
}

/// What an allowed answer carries, as the site gave it.
pub(crate) struct Allowed<'a> {
    pub(crate) site: &'a str,
    pub(crate) set: &'a HeaderMap,
    pub(crate) remove: &'a [HeaderName],
    pub(crate) auth_number: Option<&'a str>,
    pub(crate) services: &'a [u8],
    pub(crate) check_id: &'a str,
}

/// An allowed request: `OK`, the identity headers to set (each replacing any client copy),
/// every other name the site strips to remove, and the dynamic metadata Envoy's rate limit
/// and access log can key on. An identity header whose value is not text (Envoy's
/// `HeaderValue.value` is a string) cannot be sent as decided: refused.
pub(crate) fn allowed(a: &Allowed<'_>) -> Result<CheckResponse, Refusal> {
    let mut headers = Vec::with_capacity(a.set.len());
    for name in a.set.keys() {
        for (i, value) in a.set.get_all(name).iter().enumerate() {
            let value = value.to_str().map_err(|_| {
                Refusal::Unfinished(format!("the identity header {name} is not text"))
            })?;
            // A second value of one name is added to the first, not put in its place.
            headers.push(if i == 0 {
                overwrite(name.as_str(), value)
            } else {
                append(name.as_str(), value)
            });
        }
    }
    let headers_to_remove: Vec<String> = a
        .remove
        .iter()
        .filter(|name| !a.set.contains_key(*name))
        .map(|name| name.as_str().to_owned())
        .collect();
    let mut fields = std::collections::HashMap::from([
        ("psp_site".to_owned(), string(a.site)),
        ("psp_check_id".to_owned(), string(a.check_id)),
        (
            "psp_services".to_owned(),
            Value {
                kind: Some(Kind::ListValue(ListValue {
                    values: a
                        .services
                        .iter()
                        .map(|s| Value {
                            kind: Some(Kind::NumberValue(f64::from(*s))),
                        })
                        .collect(),
                })),
            },
        ),
    ]);
    if let Some(number) = a.auth_number {
        fields.insert("psp_auth_number".to_owned(), string(number));
    }
    #[allow(deprecated)] // OkHttpResponse.dynamic_metadata: CheckResponse's own is used
    let ok = OkHttpResponse {
        headers,
        headers_to_remove,
        dynamic_metadata: None,
        response_headers_to_add: Vec::new(),
        query_parameters_to_set: Vec::new(),
        query_parameters_to_remove: Vec::new(),
    };
    Ok(CheckResponse {
        status: Some(rpc::Status {
            code: GRPC_OK,
            message: String::new(),
            details: Vec::new(),
        }),
        dynamic_metadata: Some(Struct { fields }),
        http_response: Some(HttpResponse::OkResponse(ok)),
    })
}

fn string(s: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(s.to_owned())),
    }
}

/// A header that replaces every copy of its name. `append` (deprecated) is left unset:
/// Envoy versions before `append_action` read an unset `append` as "set" too.
fn overwrite(name: &str, value: &str) -> HeaderValueOption {
    option(name, value, HeaderAppendAction::OverwriteIfExistsOrAdd)
}

fn append(name: &str, value: &str) -> HeaderValueOption {
    option(name, value, HeaderAppendAction::AppendIfExistsOrAdd)
}

fn option(name: &str, value: &str, action: HeaderAppendAction) -> HeaderValueOption {
    #[allow(deprecated)] // `append`, left unset
    HeaderValueOption {
        header: Some(HeaderValue {
            key: name.to_owned(),
            // Envoy's ext_authz reads `value`, not `raw_value`, from the answer's headers.
            value: value.to_owned(),
            raw_value: Vec::new(),
        }),
        append: None,
        append_action: action as i32,
        keep_empty_value: false,
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue as Value_;

    use super::*;

    fn header_of(options: &[HeaderValueOption], name: &str) -> Vec<(String, i32)> {
        options
            .iter()
            .filter_map(|o| o.header.as_ref().map(|h| (h, o.append_action)))
            .filter(|(h, _)| h.key == name)
            .map(|(h, action)| (h.value.clone(), action))
            .collect()
    }

    #[test]
    fn an_allowed_answer_overwrites_the_identity_headers_and_removes_every_other_stripped_name() {
        let mut set = HeaderMap::new();
        set.insert(
            "x-psp-auth-number",
            Value_::from_static("PSDXX-TEST-000001"),
        );
        set.insert("x-psp-services", Value_::from_static("7,8"));
        let remove: Vec<HeaderName> = [
            "x-psp-auth-number",
            "x-psp-services",
            "x-psp-report-only-rejection",
            "x-original-url",
            "x_psp_auth_number",
        ]
        .into_iter()
        .map(HeaderName::from_static)
        .collect();
        let response = allowed(&Allowed {
            site: "xx",
            set: &set,
            remove: &remove,
            auth_number: Some("PSDXX-TEST-000001"),
            services: &[7, 8],
            check_id: "c-1",
        })
        .expect("allowed");
        assert_eq!(response.status.as_ref().map(|s| s.code), Some(GRPC_OK));
        let Some(HttpResponse::OkResponse(ok)) = &response.http_response else {
            panic!("an OK response");
        };
        let overwrite = HeaderAppendAction::OverwriteIfExistsOrAdd as i32;
        assert_eq!(
            header_of(&ok.headers, "x-psp-auth-number"),
            [("PSDXX-TEST-000001".to_owned(), overwrite)]
        );
        assert_eq!(
            header_of(&ok.headers, "x-psp-services"),
            [("7,8".to_owned(), overwrite)]
        );
        #[allow(deprecated)] // `append` must stay unset
        let appends = ok.headers.iter().filter(|o| o.append.is_some()).count();
        assert_eq!(appends, 0);
        assert_eq!(
            ok.headers_to_remove,
            [
                "x-psp-report-only-rejection",
                "x-original-url",
                "x_psp_auth_number"
            ]
        );
        let fields = &response.dynamic_metadata.as_ref().expect("metadata").fields;
        assert_eq!(fields["psp_site"], string("xx"));
        assert_eq!(fields["psp_check_id"], string("c-1"));
        assert_eq!(fields["psp_auth_number"], string("PSDXX-TEST-000001"));
        let Some(Kind::ListValue(services)) = &fields["psp_services"].kind else {
            panic!("a list");
        };
        assert_eq!(
            services
                .values
                .iter()
                .map(|v| v.kind.clone())
                .collect::<Vec<_>>(),
            [Some(Kind::NumberValue(7.0)), Some(Kind::NumberValue(8.0))]
        );
    }

    #[test]
    fn an_allowed_answer_without_auth_number_has_no_such_metadata_and_refuses_non_text_values() {
        let mut set = HeaderMap::new();
        set.append("x-psp-name", Value_::from_static("a"));
        set.append("x-psp-name", Value_::from_static("b"));
        let args = |set| Allowed {
            site: "xx",
            set,
            remove: &[],
            auth_number: None,
            services: &[],
            check_id: "c-2",
        };
        let response = allowed(&args(&set)).expect("allowed");
        assert!(
            !response
                .dynamic_metadata
                .expect("metadata")
                .fields
                .contains_key("psp_auth_number")
        );
        let Some(HttpResponse::OkResponse(ok)) = response.http_response else {
            panic!("OK");
        };
        assert_eq!(
            header_of(&ok.headers, "x-psp-name"),
            [
                (
                    "a".to_owned(),
                    HeaderAppendAction::OverwriteIfExistsOrAdd as i32
                ),
                (
                    "b".to_owned(),
                    HeaderAppendAction::AppendIfExistsOrAdd as i32
                )
            ]
        );
        let mut binary = HeaderMap::new();
        binary.insert(
            "x-psp-name",
            Value_::from_bytes(b"caf\xc3\xa9").expect("obs-text"),
        );
        assert!(matches!(
            allowed(&args(&binary)),
            Err(Refusal::Unfinished(_))
        ));
    }

    #[test]
    fn a_denial_is_unauthenticated_for_401_and_permission_denied_otherwise_with_the_body_as_is() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", Value_::from_static("application/json"));
        headers.insert("x-request-id", Value_::from_static("c-3"));
        headers.insert("allow", Value_::from_static("GET"));
        headers.insert("set-cookie", Value_::from_static("never=passed"));
        let body = Bytes::from_static(br#"{"tppMessages":[]}"#);
        for (status, grpc) in [
            (StatusCode::UNAUTHORIZED, GRPC_UNAUTHENTICATED),
            (StatusCode::FORBIDDEN, GRPC_PERMISSION_DENIED),
            (StatusCode::BAD_REQUEST, GRPC_PERMISSION_DENIED),
        ] {
            let response = denied(status, "certificate_revoked", &headers, &body);
            let rpc = response.status.expect("status");
            assert_eq!(
                (rpc.code, rpc.message.as_str()),
                (grpc, "certificate_revoked")
            );
            let Some(HttpResponse::DeniedResponse(d)) = response.http_response else {
                panic!("denied");
            };
            assert_eq!(d.status.map(|s| s.code), Some(i32::from(status.as_u16())));
            assert_eq!(d.body, r#"{"tppMessages":[]}"#);
            let names: Vec<_> = d
                .headers
                .iter()
                .filter_map(|o| o.header.as_ref())
                .map(|h| h.key.as_str())
                .collect();
            assert_eq!(names, ["content-type", "x-request-id", "allow"]);
        }
    }

    #[tokio::test]
    async fn the_faces_own_refusals_carry_their_status_and_a_contract_body_naming_why() {
        for (refusal, status, code) in [
            (Refusal::Missing("attributes"), 400, "check_request_invalid"),
            (
                Refusal::Undecodable("invalid string".into()),
                400,
                "check_request_invalid",
            ),
            (
                Refusal::MethodInvalid("G T".into()),
                400,
                "check_request_invalid",
            ),
            (
                Refusal::SiteUnknown("the host `a` is no site's".into()),
                403,
                "site_unknown",
            ),
            (
                Refusal::SitesDisagree {
                    extension: "xx".into(),
                    sni: "xy".into(),
                },
                421,
                "misdirected_request",
            ),
            (
                Refusal::Unfinished("panicked".into()),
                500,
                "internal_error",
            ),
        ] {
            let peer = std::net::SocketAddr::from(([127, 0, 0, 1], 1));
            let response = refused(&refusal, "https://bank.example/psd2/errors#", peer).await;
            assert_eq!(
                response.status.map(|s| s.code),
                Some(GRPC_PERMISSION_DENIED)
            );
            let Some(HttpResponse::DeniedResponse(d)) = response.http_response else {
                panic!("denied");
            };
            assert_eq!(d.status.map(|s| s.code), Some(status));
            let body: serde_json::Value = serde_json::from_str(&d.body).expect("JSON");
            assert_eq!(body["errors"][0]["code"], code, "{refusal:?}");
            assert_eq!(
                body["errors"][0]["link"],
                format!("https://bank.example/psd2/errors#{code}")
            );
            assert!(
                body["errors"][0]["title"]
                    .as_str()
                    .is_some_and(|t| !t.is_empty())
            );
        }
    }
}
