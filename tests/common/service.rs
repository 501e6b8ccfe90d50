//! Starting the real service on 127.0.0.1:0 and talking HTTP to it.

use std::net::SocketAddr;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use psp_gateway::Config;
use psp_gateway::app::{self, Running};

use super::root;

/// The repository's gateway.toml with every listener on an ephemeral loopback port, and
/// `extra` TOML appended (tables the sandbox file does not have) or substitutions applied.
pub fn sandbox_config(edit: impl FnOnce(String) -> String) -> Config {
    let text = super::one_site_sandbox_toml();
    let text = text
        .replace("127.0.0.1:8080", "127.0.0.1:0")
        .replace("127.0.0.1:8443", "127.0.0.1:0")
        .replace("127.0.0.1:9090", "127.0.0.1:0");
    let text = edit(text);
    Config::from_toml(&text, std::path::Path::new("gateway.toml"), root())
        .expect("test configuration is valid")
}

pub async fn start(config: Config) -> Running {
    let _ = rustls::crypto::ring::default_provider().install_default();
    app::start(config).await.expect("the service starts")
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

pub fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

pub async fn send(
    addr: SocketAddr,
    method: Method,
    path_and_query: &str,
    headers: &[(&str, &str)],
) -> Reply {
    let mut req = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path_and_query}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::new())).expect("request");
    let resp = client().request(req).await.expect("the service answers");
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    Reply {
        status,
        headers,
        body,
    }
}
