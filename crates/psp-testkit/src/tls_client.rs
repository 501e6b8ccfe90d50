//! A real rustls client (ring) for the gateway tests: presents a sandbox PSP certificate, speaks
//! HTTP/1.1 or HTTP/2, and can resume its TLS session.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// The body type of the requests this client sends.
pub type ReqBody = BoxBody<Bytes, std::io::Error>;

/// An empty request body.
pub fn empty() -> ReqBody {
    use http_body_util::BodyExt;
    http_body_util::Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed()
}

/// `GET https://localhost{path}` with an empty body.
pub fn get(path: &str) -> Request<ReqBody> {
    Request::builder()
        .method(http::Method::GET)
        .uri(format!("https://localhost{path}"))
        .body(empty())
        .expect("request")
}

/// The HTTP version a connection asks for by ALPN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// HTTP/1.1 (`http/1.1`).
    H1,
    /// HTTP/2 (`h2`).
    H2,
}

/// A client configuration trusting the sandbox server CA in `certs`, presenting
/// `psp/<name>.pem` (or nothing). Keep it to resume sessions.
pub fn client_config(certs: &Path, psp: Option<&str>, proto: Proto) -> Arc<rustls::ClientConfig> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(certs.join("server/ca.pem")).expect("server CA") {
        roots.add(c.expect("server CA")).expect("add root");
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots);
    let mut config = match psp {
        Some(name) => {
            let chain: Vec<CertificateDer<'static>> =
                CertificateDer::pem_file_iter(certs.join(format!("psp/{name}.pem")))
                    .expect("psp cert")
                    .collect::<Result<_, _>>()
                    .expect("psp cert");
            let key = PrivateKeyDer::from_pem_file(certs.join(format!("psp/{name}.key")))
                .expect("psp key");
            builder
                .with_client_auth_cert(chain, key)
                .expect("client auth")
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![match proto {
        Proto::H1 => b"http/1.1".to_vec(),
        Proto::H2 => b"h2".to_vec(),
    }];
    Arc::new(config)
}

/// One TLS connection: sends `req`, returns the response and whether the session was
/// resumed.
pub async fn send(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    proto: Proto,
    req: Request<ReqBody>,
) -> (Response<Incoming>, bool) {
    let tls = connect(addr, config).await;
    let resumed = tls.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    let io = TokioIo::new(tls);
    let response = match proto {
        Proto::H1 => {
            let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
                .await
                .expect("h1 handshake");
            tokio::spawn(conn);
            sender.send_request(req).await.expect("h1 response")
        }
        Proto::H2 => {
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                    .await
                    .expect("h2 handshake");
            tokio::spawn(conn);
            sender.send_request(req).await.expect("h2 response")
        }
    };
    (response, resumed)
}

/// One TLS connection kept open for HTTP/1.1 keep-alive requests, one after the other.
pub async fn open_h1(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> hyper::client::conn::http1::SendRequest<ReqBody> {
    h1_on(connect(addr, config).await).await
}

/// One TLS connection (HTTP/1.1 by ALPN) on which `request` is written byte for byte, below
/// any HTTP library that would refuse or repair it. Returns the status of the answer, or
/// `None` when the gateway closed the connection without one. `request` should carry
/// `Connection: close`; the answer is read until the gateway closes (5 s at most).
pub async fn send_raw(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    request: &[u8],
) -> (Option<u16>, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tls = connect(addr, config).await;
    tls.write_all(request).await.expect("write the request");
    tls.flush().await.expect("flush");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        tls.read_to_end(&mut answer),
    )
    .await;
    // A gateway that answers and closes may end TLS without close_notify: keep what came.
    let _ = read;
    let status = answer
        .strip_prefix(b"HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| std::str::from_utf8(code).ok())
        .and_then(|code| code.parse().ok());
    (status, answer)
}

/// One TLS connection (HTTP/2 by ALPN) on which many requests can be in flight at once:
/// clone the sender for each stream.
pub async fn open_h2(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> hyper::client::conn::http2::SendRequest<ReqBody> {
    h2_on(connect(addr, config).await).await
}

/// A TLS connection to the gateway at `addr` as `localhost` (TCP_NODELAY set), handshake done.
pub async fn connect(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    connect_as(addr, config, "localhost")
        .await
        .expect("TLS handshake")
}

/// A TLS connection to `addr` asking for the server name `name` (SNI), and verifying the
/// server's certificate for it; the handshake's error when it fails.
pub async fn connect_as(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    name: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from(name.to_owned()).expect("a server name");
    TlsConnector::from(config).connect(name, tcp).await
}

/// `config` sending no server name (SNI) in its handshakes, as a client connecting to an IP
/// address does; the certificate is still verified for the name `connect_as` is given.
pub fn without_sni(config: &rustls::ClientConfig) -> Arc<rustls::ClientConfig> {
    let mut config = config.clone();
    config.enable_sni = false;
    Arc::new(config)
}

/// An HTTP/1.1 sender on `tls`.
pub async fn h1_on(
    tls: tokio_rustls::client::TlsStream<TcpStream>,
) -> hyper::client::conn::http1::SendRequest<ReqBody> {
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("h1 handshake");
    tokio::spawn(conn);
    sender
}

/// An HTTP/2 sender on `tls` (its ALPN must have chosen h2).
pub async fn h2_on(
    tls: tokio_rustls::client::TlsStream<TcpStream>,
) -> hyper::client::conn::http2::SendRequest<ReqBody> {
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    sender
}
