//! Driving a face without a socket on the client's side: the faces built as `serve` builds
//! them (`app::build_faces`, over a `CheckService` loaded from the configuration), a request
//! made in memory, handed to the face's handler, and its response read back. What the
//! listener does (TLS, framing, limits) is not involved: the end-to-end tests over real TLS
//! keep that.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use psp_faces::gateway::Connection;
use psp_gateway::Config;
use psp_gateway::app::{self, Faces};
use psp_server::{ConnInfo, TlsInfo};
use psp_service::revocation::RevocationChecker;
use psp_service::service::{CheckService, ReferenceData, Revocation};
use rustls_pki_types::CertificateDer;
use time::OffsetDateTime;

use super::test_pki::test_pki;

/// The faces of `config`, over a check service with its reference data, revocation (fetched
/// from the test PKI's responder) and `[results]` cache as `serve` sets them up (without the
/// FCA adapter and the register history), and no listener bound.
pub fn faces(config: &Config) -> Faces {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let data = ReferenceData::load(&config.data_sources(), 1, OffsetDateTime::now_utc())
        .expect("reference data loads");
    let revocation = RevocationChecker::new(&config.revocation).expect("revocation checker");
    let service = Arc::new(CheckService::new(
        data,
        Revocation::Fetch(revocation),
        config.results.ttl(),
        config.results.cache_entries,
    ));
    app::build_faces(config, service, None, None).expect("faces build")
}

/// A face's answer, read whole.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// The client certificate chain of the test PKI's PSP `name`, as a TLS handshake presents it.
pub fn chain_of(name: &str) -> Vec<CertificateDer<'static>> {
    let pem = std::fs::read(test_pki().psp(name)).expect("PSP certificate");
    psp_cert::cert::input::decode_certificate_chain(&pem)
        .expect("PEM chain")
        .into_iter()
        .map(CertificateDer::from)
        .collect()
}

/// A connection from `127.0.0.1`, as the listener hands it to the gateway: over TLS with the
/// client `chain` presented, or plain (`None`: a load balancer in front terminated TLS).
pub fn connection(chain: Option<Vec<CertificateDer<'static>>>) -> Arc<Connection> {
    connection_named(chain, None)
}

/// A connection as [`connection`] makes, whose TLS client asked for `server_name` (SNI).
pub fn connection_named(
    chain: Option<Vec<CertificateDer<'static>>>,
    server_name: Option<&str>,
) -> Arc<Connection> {
    let peer = SocketAddr::from(([127, 0, 0, 1], 40_000));
    let tls = chain.map(|peer_chain| TlsInfo {
        peer_chain: peer_chain.into(),
        resumed: false,
        server_name: server_name.map(str::to_ascii_lowercase),
    });
    Arc::new(Connection::new(Arc::new(ConnInfo::new(peer, tls))))
}

/// One request to the gateway on `connection` (several requests may share one).
pub async fn gateway_on(
    faces: &Faces,
    connection: &Arc<Connection>,
    request: Request<Full<Bytes>>,
) -> Answer {
    let listen = faces
        .gateway()
        .and_then(|g| g.listen())
        .expect("the configuration has a gateway listener");
    gateway_at(faces, listen, connection, request).await
}

/// One request on `connection` of the gateway listener `listen`, which goes to the site the
/// connection's server name (or the request's host) chooses, as on a real listener.
pub async fn gateway_at(
    faces: &Faces,
    listen: SocketAddr,
    connection: &Arc<Connection>,
    request: Request<Full<Bytes>>,
) -> Answer {
    read(psp_faces::sites::handle_on(&faces.sites, listen, request, Arc::clone(connection)).await)
        .await
}

/// One request to the gateway on a TLS connection of its own that presented `chain`.
pub async fn gateway(
    faces: &Faces,
    chain: Vec<CertificateDer<'static>>,
    request: Request<Full<Bytes>>,
) -> Answer {
    gateway_on(faces, &connection(Some(chain)), request).await
}

async fn read(response: http::Response<psp_server::Body>) -> Answer {
    let (parts, body) = response.into_parts();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await.expect("body").to_bytes(),
    }
}

/// A request with an empty body.
pub fn request(method: &str, uri: &str) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "localhost")
        .body(Full::new(Bytes::new()))
        .expect("request")
}

/// One request to the check endpoint from `127.0.0.1`, with `headers`, as `service::send`
/// makes it over a socket.
pub async fn api(
    faces: &Faces,
    method: http::Method,
    path_and_query: &str,
    headers: &[(&str, &str)],
) -> super::service::Reply {
    let state = faces
        .api
        .clone()
        .expect("the configuration has the check endpoint");
    let mut builder = Request::builder()
        .method(method)
        .uri(path_and_query)
        .header("host", "localhost");
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let request = builder.body(Full::new(Bytes::new())).expect("request");
    let info = Arc::new(ConnInfo::new(
        SocketAddr::from(([127, 0, 0, 1], 40_001)),
        None,
    ));
    let answer = read(psp_faces::api::handle(state, request, info).await).await;
    super::service::Reply {
        status: answer.status,
        headers: answer.headers,
        body: answer.body,
    }
}
