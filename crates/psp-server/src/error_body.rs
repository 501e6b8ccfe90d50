//! The contract's error body, `{"errors":[{"id","code","title","link"}]}`, built in one place
//! for every face that answers with it: the check endpoint's error table (`api::error`) and
//! the gateway's `contract` dialect (`gateway::dialect`).

use http::StatusCode;
use hyper::Response;
use serde::Serialize;

use super::{Body, json_response};

/// The contract's error response: `status`, the body with one error whose `id` is
/// `request_id` (also sent as `x-request-id`) and whose `link` is `link_base` + `code`.
pub fn contract_error(
    status: StatusCode,
    request_id: &str,
    code: &str,
    title: &str,
    link_base: &str,
) -> Response<Body> {
    let json = contract_error_json(request_id, code, title, link_base);
    json_response(status, json, request_id)
}

/// The contract's error body alone, for answers written without hyper (`server::framing`).
pub(crate) fn contract_error_json(
    request_id: &str,
    code: &str,
    title: &str,
    link_base: &str,
) -> Vec<u8> {
    let body = ErrorBody {
        errors: [ErrorObject {
            id: request_id,
            code,
            title,
            link: format!("{link_base}{code}"),
        }],
    };
    // Serialising a struct of strings cannot fail (serde_json fails only on maps with
    // non-string keys and on failing `Serialize` impls); an empty body would still carry the
    // status and the request id.
    serde_json::to_vec(&body).unwrap_or_default()
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    errors: [ErrorObject<'a>; 1],
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    id: &'a str,
    code: &'a str,
    title: &'a str,
    link: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn the_body_has_one_error_with_id_code_title_and_link() {
        let r = contract_error(
            StatusCode::FORBIDDEN,
            "id-1",
            "not_in_register",
            "the PSP is not found",
            "https://example.test/errors#",
        );
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        assert_eq!(r.headers()["x-request-id"], "id-1");
        let bytes = r.into_body().collect().await.expect("full body").to_bytes();
        assert_eq!(
            &bytes[..],
            br#"{"errors":[{"id":"id-1","code":"not_in_register","title":"the PSP is not found","link":"https://example.test/errors#not_in_register"}]}"#
        );
    }
}
