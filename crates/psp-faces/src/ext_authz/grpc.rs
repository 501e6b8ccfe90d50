//! `envoy.service.auth.v3.Authorization/Check` on tonic: the codec, which turns any message
//! into either a `CheckRequest` or the reason it is not one (so that it can be refused with an
//! answer, not a gRPC error), and the Check itself, phase by phase.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use envoy_types::ext_authz::v3::pb::{CheckRequest, CheckResponse};
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::{Status, body::Body};

use super::answer::{self, Allowed, Refusal};
use super::listener::Caller;
use super::{ExtAuthzConfig, MAX_CHECK_REQUEST_BYTES, question};
use crate::gateway::Answer;
use crate::sites::Sites;

/// The method's path (gRPC over HTTP/2: `/{service}/{method}`).
const CHECK_PATH: &str = "/envoy.service.auth.v3.Authorization/Check";

/// The sites of the moment.
type CurrentSites = Arc<dyn Fn() -> Arc<Sites> + Send + Sync>;

/// The Authorization service: Check, and nothing else (any other method is `UNIMPLEMENTED`).
#[derive(Clone)]
pub(crate) struct AuthorizationService {
    checker: Arc<Checker>,
}

impl AuthorizationService {
    pub(crate) fn new(config: Arc<ExtAuthzConfig>, sites: CurrentSites) -> Self {
        AuthorizationService {
            checker: Arc::new(Checker { config, sites }),
        }
    }
}

impl tower_service::Service<http::Request<Body>> for AuthorizationService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let checker = Arc::clone(&self.checker);
        Box::pin(async move {
            if request.uri().path() != CHECK_PATH {
                return Ok(Status::unimplemented("only Authorization/Check is served").into_http());
            }
            let mut grpc = tonic::server::Grpc::new(LenientCodec)
                .apply_max_message_size_config(Some(MAX_CHECK_REQUEST_BYTES), None);
            let link_base = (checker.sites)().error_link_base().to_owned();
            let caller = caller_of(request.extensions());
            let response = grpc.unary(CheckCall(checker), request).await;
            Ok(never_an_error(response, &link_base, caller).await)
        })
    }
}

/// tonic refuses some Checks itself, with a gRPC error, before this face reads them: a
/// message over [`MAX_CHECK_REQUEST_BYTES`], a compressed one (`grpc-encoding: gzip`; no
/// compression is enabled), a body that ends inside a message. A gRPC error is Envoy's
/// `failure_mode_allow` case, so each becomes a denial (400 `check_request_invalid`), sent as
/// an ordinary `CheckResponse`. tonic puts such an error in the response head
/// (trailers-only); a response whose head has no `grpc-status`, or `0`, is the face's own.
async fn never_an_error(
    response: http::Response<Body>,
    link_base: &str,
    caller: SocketAddr,
) -> http::Response<Body> {
    let status = response.headers().get("grpc-status");
    if status.is_none_or(|status| status == "0") {
        return response;
    }
    let message = response
        .headers()
        .get("grpc-message")
        .map(|m| {
            percent_encoding::percent_decode(m.as_bytes())
                .decode_utf8_lossy()
                .into_owned()
        })
        .unwrap_or_default();
    let refusal = Refusal::Undecodable(format!(
        "the gRPC layer refused it ({}): {message}",
        status.and_then(|s| s.to_str().ok()).unwrap_or_default()
    ));
    tracing::info!(
        target: "ext_authz",
        reason = "check_request_invalid",
        detail = %message,
        "ext_authz Check refused before it was read"
    );
    unary_ok(&answer::refused(&refusal, link_base, caller).await)
}

/// A unary gRPC answer of `message`: 200, `application/grpc`, the message in one
/// uncompressed length-prefixed frame, and `grpc-status: 0` in the trailers.
fn unary_ok(message: &CheckResponse) -> http::Response<Body> {
    use http_body_util::BodyExt;
    let encoded = message.encode_to_vec();
    let mut framed = Vec::with_capacity(5 + encoded.len());
    framed.push(0);
    framed.extend_from_slice(
        &u32::try_from(encoded.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    framed.extend_from_slice(&encoded);
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let body = http_body_util::Full::new(bytes::Bytes::from(framed))
        .with_trailers(async move { Some(Ok(trailers)) });
    let mut response = http::Response::new(Body::new(body));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}

/// One Check's call, as tonic's unary service.
struct CheckCall(Arc<Checker>);

impl tonic::server::UnaryService<Decoded> for CheckCall {
    type Response = CheckResponse;
    type Future =
        Pin<Box<dyn Future<Output = Result<tonic::Response<CheckResponse>, Status>> + Send>>;

    fn call(&mut self, request: tonic::Request<Decoded>) -> Self::Future {
        let checker = Arc::clone(&self.0);
        // The listener puts the caller in every request's extensions; without it (which the
        // listener does not allow) the unspecified address stands for an unknown one.
        let caller = caller_of(request.extensions());
        Box::pin(async move {
            Ok(tonic::Response::new(
                checker.check(caller, request.into_inner()).await,
            ))
        })
    }
}

/// The caller's address: the listener puts it in every request's extensions; without it
/// (which the listener does not allow) the unspecified address stands for an unknown one.
fn caller_of(extensions: &http::Extensions) -> SocketAddr {
    extensions
        .get::<Caller>()
        .map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |c| c.peer)
}

/// What arrived: a `CheckRequest`, or why the bytes are not one.
type Decoded = Result<CheckRequest, prost::DecodeError>;

/// Everything a Check needs: the face's configuration and the sites of the moment.
struct Checker {
    config: Arc<ExtAuthzConfig>,
    sites: CurrentSites,
}

impl Checker {
    /// One Check: every outcome is an answer.
    async fn check(&self, caller: SocketAddr, decoded: Decoded) -> CheckResponse {
        let outcome = match decoded {
            Ok(request) => self.decide(caller, &request).await,
            Err(e) => Err(Refusal::Undecodable(e.to_string())),
        };
        match outcome {
            Ok(response) => response,
            Err(refusal) => {
                answer::refused(&refusal, (self.sites)().error_link_base(), caller).await
            }
        }
    }

    /// Read, choose the site, ask it, answer.
    async fn decide(
        &self,
        caller: SocketAddr,
        request: &CheckRequest,
    ) -> Result<CheckResponse, Refusal> {
        let attributes = request
            .attributes
            .as_ref()
            .ok_or(Refusal::Missing("attributes"))?;
        let http = attributes
            .request
            .as_ref()
            .and_then(|r| r.http.as_ref())
            .ok_or(Refusal::Missing("attributes.request.http"))?;
        let sites = (self.sites)();
        let naming = question::naming(attributes, http, &self.config.site_key);
        let site = Arc::clone(question::choose_site(
            sites.as_ref(),
            &naming,
            &self.config.site_key,
        )?);
        let ask = question::ask(attributes, http, &self.config, caller)?;
        // A Check whose caller gives up (Envoy's timeout, a reset stream) still completes,
        // is logged, and leaves what it fetched in the caches.
        let decision = detached({
            let site = Arc::clone(&site);
            async move { site.authorise(ask).await }
        })
        .await
        .map_err(|e| Refusal::Unfinished(e.to_string()))?;
        match decision {
            Answer::Allow {
                set,
                remove,
                auth_number,
                services,
                check_id,
            } => answer::allowed(&Allowed {
                site: site.name(),
                set: &set,
                remove: &remove,
                auth_number: auth_number.as_deref(),
                services: &services,
                check_id: &check_id,
            }),
            Answer::Deny {
                status,
                code,
                headers,
                body,
                ..
            } => Ok(answer::denied(status, code, &headers, &body)),
        }
    }
}

/// Why a decision gave no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Unfinished {
    #[error("the decision panicked")]
    Panicked,
    #[error("the decision's task was cancelled (the server is stopping)")]
    Cancelled,
}

/// `work`'s output, with `work` finished even if the caller stops waiting. Work that is done
/// when first polled (a cached decision) is done on the caller's task; work that must wait
/// goes on a task of its own, which the caller's going away does not stop. A panic is the
/// error, as a spawned task's would be.
async fn detached<F>(work: F) -> Result<F::Output, Unfinished>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let mut work = Box::pin(work);
    let first = std::future::poll_fn(|cx| {
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| work.as_mut().poll(cx)));
        Poll::Ready(polled)
    })
    .await;
    match first {
        Ok(Poll::Ready(output)) => Ok(output),
        Ok(Poll::Pending) => tokio::spawn(work).await.map_err(|e| {
            if e.is_panic() {
                Unfinished::Panicked
            } else {
                Unfinished::Cancelled
            }
        }),
        Err(_) => Err(Unfinished::Panicked),
    }
}

/// Decodes any message: into a `CheckRequest`, or into why it is not one.
#[derive(Debug, Clone, Copy, Default)]
struct LenientCodec;

impl Codec for LenientCodec {
    type Encode = CheckResponse;
    type Decode = Decoded;
    type Encoder = LenientCodec;
    type Decoder = LenientCodec;

    fn encoder(&mut self) -> Self::Encoder {
        LenientCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        LenientCodec
    }
}

impl Encoder for LenientCodec {
    type Item = CheckResponse;
    type Error = Status;

    fn encode(&mut self, item: CheckResponse, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        // The buffer grows as needed: prost fails only on a buffer without room.
        item.encode(dst)
            .map_err(|e| Status::internal(format!("encoding the CheckResponse: {e}")))
    }
}

impl Decoder for LenientCodec {
    type Item = Decoded;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Decoded>, Status> {
        use bytes::Buf;
        // The message whole, whatever its decoding stops at: bytes left unread here would be
        // read by tonic as a truncated next message (a gRPC error). Taking them is a split of
        // tonic's buffer, not a copy.
        let message = src.copy_to_bytes(src.remaining());
        // prost bounds nesting (100 levels, its default recursion limit) and checks every
        // length against the message, which tonic has bounded by MAX_CHECK_REQUEST_BYTES.
        Ok(Some(CheckRequest::decode(message)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::sync::oneshot;

    #[tokio::test]
    async fn work_done_at_once_is_done_on_the_callers_task() {
        // The caller as a face's stream is: a task (a test's body is not one).
        let (caller, ran_on) = tokio::spawn(async {
            let ran_on = detached(async { tokio::task::id() }).await;
            (tokio::task::id(), ran_on)
        })
        .await
        .expect("the caller's task");
        assert_eq!(ran_on, Ok(caller));
    }

    #[tokio::test]
    async fn work_that_must_wait_finishes_after_its_caller_gave_up() {
        let (open, gate) = oneshot::channel::<()>();
        let (finished, done) = oneshot::channel();
        // The caller gives up while the work waits (Envoy's timeout, a reset stream).
        let caller = tokio::spawn(async move {
            let work = detached(async move {
                let _ = gate.await;
                let _ = finished.send(tokio::task::id());
            });
            let gave_up = tokio::time::timeout(Duration::from_millis(20), work).await;
            assert!(gave_up.is_err(), "the work waits on the gate");
            tokio::task::id()
        })
        .await
        .expect("the caller's task");
        open.send(()).expect("the work still waits on the gate");
        let ran_on = tokio::time::timeout(Duration::from_secs(5), done)
            .await
            .expect("the work finishes without its caller")
            .expect("and says so");
        assert_ne!(ran_on, caller, "on a task of its own");
    }

    #[tokio::test]
    async fn a_panic_before_or_after_waiting_is_an_error_not_a_lost_stream() {
        let at_once: Result<(), Unfinished> = detached(async { panic!("a test's panic") }).await;
        assert_eq!(at_once, Err(Unfinished::Panicked));
        let later: Result<(), Unfinished> = detached(async {
            tokio::task::yield_now().await;
            panic!("a test's panic after waiting")
        })
        .await;
        assert_eq!(later, Err(Unfinished::Panicked));
    }

    #[test]
    fn any_bytes_decode_into_a_request_or_the_reason_they_are_not_one() {
        let decode = |bytes: &[u8]| CheckRequest::decode(bytes);
        // An empty message is a CheckRequest without attributes (refused later as such).
        assert_eq!(decode(b"").expect("empty"), CheckRequest::default());
        // attributes { request { http { path: "\xff" } } }: not UTF-8.
        let invalid = [0x0a, 0x07, 0x22, 0x05, 0x12, 0x03, 0x22, 0x01, 0xff];
        assert!(decode(&invalid).is_err());
        // A length running past the end.
        assert!(decode(&[0x0a, 0x40, 0x22]).is_err());
    }

    #[tokio::test]
    async fn a_check_that_cannot_be_read_is_denied_with_400_and_never_ok() {
        let checker = Checker {
            config: Arc::new(ExtAuthzConfig {
                listen: SocketAddr::from(([127, 0, 0, 1], 0)),
                callers: vec!["127.0.0.1".parse().expect("cidr")],
                certificate: super::super::CertificateSource::Peer,
                xfcc_by: None,
                xfcc_forwarding: Default::default(),
                site_key: "psp_site".into(),
                tls: None,
            }),
            sites: Arc::new(|| Arc::new(Sites::new(Vec::new()))),
        };
        let caller = SocketAddr::from(([127, 0, 0, 1], 1));
        let undecodable = CheckRequest::decode(&[0x0a, 0x40, 0x22][..]);
        for decoded in [Ok(CheckRequest::default()), undecodable] {
            let response = checker.check(caller, decoded).await;
            assert_ne!(response.status.as_ref().map(|s| s.code), Some(0));
            let Some(envoy_types::ext_authz::v3::pb::HttpResponse::DeniedResponse(d)) =
                response.http_response
            else {
                panic!("denied");
            };
            assert_eq!(d.status.map(|s| s.code), Some(400));
        }
    }
}
