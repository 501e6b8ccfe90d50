//! Listener limits on what comes from the network: slow headers, idle connections, slow TLS
//! handshakes are cut off. Limits are set small here; the assertions are on behaviour (the
//! server closes the connection), with generous margins, not on timings.

mod common;

use std::time::Duration;

use common::service::*;
use common::test_pki::test_config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Reads until the server closes the connection; returns what it sent. Gives up (panics)
/// after `limit`, so a server that never closes fails the test instead of hanging it.
async fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return out,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the server did not close the connection within {limit:?}"),
        }
    }
}

fn limits(t: String) -> String {
    format!(
        "{t}\n[limits]\nheader_read_timeout_ms = 300\nidle_timeout_ms = 400\nhandshake_timeout_ms = 300\n"
    )
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_cut_off() {
    let running = start(test_config(limits)).await;
    let mut s = TcpStream::connect(running.api.expect("api"))
        .await
        .expect("connect");
    s.write_all(b"GET /v1/psp/eidas?jurisdiction=XX HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    // Never send the blank line: the header-read timeout (300 ms) closes the connection.
    let answer = read_until_closed(&mut s, Duration::from_secs(10)).await;
    let text = String::from_utf8_lossy(&answer);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "no request was served: {text}"
    );
    running.stop().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let running = start(test_config(limits)).await;
    let mut s = TcpStream::connect(running.admin.expect("admin"))
        .await
        .expect("connect");
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    // The answer arrives, then nothing more is sent: the connection is closed for idleness.
    let answer = read_until_closed(&mut s, Duration::from_secs(10)).await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    running.stop().await;
}

#[tokio::test]
async fn a_tls_client_that_never_completes_its_handshake_is_cut_off() {
    let running = start(test_config(limits)).await;
    let mut s = TcpStream::connect(running.gateway.expect("gateway"))
        .await
        .expect("connect");
    // A TLS record header announcing a ClientHello that never comes.
    s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00])
        .await
        .expect("write");
    let answer = read_until_closed(&mut s, Duration::from_secs(10)).await;
    assert!(answer.is_empty(), "nothing is served before a handshake");
    running.stop().await;
}
