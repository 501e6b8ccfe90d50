//! Request smuggling through the gateway: ambiguous framing written byte for byte over TLS, and
//! an upstream that records every byte it receives. The upstream must never see two requests
//! where the client sent one, nor the smuggled request's head; ambiguous requests get 400.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::service;
use common::test_pki::{test_config, test_pki};
use common::tls_client::{self, Proto};
use psp_gateway::app::Running;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Every byte received on every connection; each connection gets one answer once its sender
/// has been quiet for a moment.
struct RecordingUpstream {
    addr: SocketAddr,
    streams: Arc<Mutex<Vec<Vec<u8>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RecordingUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RecordingUpstream {
    async fn start() -> RecordingUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let streams: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let log = streams.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 16 * 1024];
                    // Read until the gateway is quiet for 300 ms (or 1 MiB): all it sent.
                    while seen.len() < 1 << 20 {
                        match tokio::time::timeout(
                            Duration::from_millis(300),
                            stream.read(&mut buf),
                        )
                        .await
                        {
                            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
                            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
                        }
                    }
                    log.lock().expect("lock").push(seen);
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                        )
                        .await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        RecordingUpstream {
            addr,
            streams,
            task,
        }
    }

    /// Everything received, all connections together.
    fn bytes(&self) -> Vec<u8> {
        self.streams.lock().expect("lock").concat()
    }

    /// How many request lines the upstream received.
    fn requests(&self) -> usize {
        let all = self.bytes();
        all.windows(b" HTTP/1.1\r\n".len())
            .filter(|w| *w == b" HTTP/1.1\r\n")
            .count()
    }
}

async fn gateway(upstream: &RecordingUpstream) -> Running {
    service::start(test_config(|t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!(
                "upstream = \"http://{}\"\nupstream_timeout_ms = 3000",
                upstream.addr
            ),
        )
    }))
    .await
}

/// One connection as the valid PSP: `request` written as is; the status of the answer.
async fn send(running: &Running, request: &[u8]) -> (Option<u16>, String) {
    let config = tls_client::client_config(&test_pki().dir, Some("valid"), Proto::H1);
    let (status, answer) =
        tls_client::send_raw(running.gateway.expect("gateway"), config, request).await;
    (status, String::from_utf8_lossy(&answer).into_owned())
}

const SMUGGLED: &str = "GET /v1/payments/smuggled HTTP/1.1\r\nHost: localhost\r\n\r\n";

/// The request head, `headers` (CRLF-terminated lines), then `body`.
fn post(headers: &str, body: &str) -> Vec<u8> {
    format!(
        "POST /v1/accounts HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}\r\n{body}"
    )
    .into_bytes()
}

/// The code in a refusal's contract body.
fn code_of(answer: &str) -> String {
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["errors"][0]["code"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[tokio::test]
async fn ambiguous_framing_is_refused_and_nothing_is_smuggled() {
    let up = RecordingUpstream::start().await;
    let running = gateway(&up).await;
    let chunked_then_smuggled = format!("0\r\n\r\n{SMUGGLED}");
    let framing = "\"code\":\"request_framing_invalid\"";
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "Content-Length then Transfer-Encoding",
            post(
                "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
                &chunked_then_smuggled,
            ),
            framing,
        ),
        (
            "Transfer-Encoding then Content-Length",
            post(
                "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
                &chunked_then_smuggled,
            ),
            framing,
        ),
        (
            "Content-Length 0 with Transfer-Encoding",
            post(
                "Content-Length: 0\r\nTransfer-Encoding: chunked\r\n",
                &chunked_then_smuggled,
            ),
            framing,
        ),
        (
            "two different Content-Lengths",
            post(
                "Content-Length: 5\r\nContent-Length: 60\r\n",
                &format!("hello{SMUGGLED}"),
            ),
            framing,
        ),
        (
            "a signed Content-Length",
            post("Content-Length: +5\r\n", &format!("hello{SMUGGLED}")),
            framing,
        ),
        (
            "Transfer-Encoding with a second coding",
            post(
                "Transfer-Encoding: chunked, identity\r\n",
                &chunked_then_smuggled,
            ),
            framing,
        ),
        (
            "Transfer-Encoding that is not chunked",
            post("Transfer-Encoding: xchunked\r\n", &chunked_then_smuggled),
            framing,
        ),
        (
            "Transfer-Encoding with a space before the colon",
            post("Transfer-Encoding : chunked\r\n", &chunked_then_smuggled),
            framing,
        ),
        (
            "obs-fold",
            post("X-Folded: a\r\n b\r\nContent-Length: 0\r\n", SMUGGLED),
            framing,
        ),
        (
            "Transfer-Encoding in HTTP/1.0",
            format!(
                "POST /v1/accounts HTTP/1.0\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n{chunked_then_smuggled}"
            )
            .into_bytes(),
            framing,
        ),
        (
            "a chunk size that overflows 64 bits",
            post(
                "Transfer-Encoding: chunked\r\n",
                &format!("1ffffffffffffffff0\r\nx\r\n0\r\n\r\n{SMUGGLED}"),
            ),
            // The route's dialect (Berlin Group here) names request_body_invalid so.
            "\"code\":\"FORMAT_ERROR\"",
        ),
    ];
    for (what, request, code) in cases {
        let before = up.requests();
        let (status, answer) = send(&running, &request).await;
        assert_eq!(status, Some(400), "{what}: {answer}");
        assert!(answer.contains(code), "{what}: {answer}");
        assert_eq!(up.requests(), before, "{what}: something was forwarded");
    }
    let all = String::from_utf8_lossy(&up.bytes()).into_owned();
    assert!(
        !all.contains("smuggled"),
        "a smuggled request reached the upstream:\n{all}"
    );
    running.stop().await;
}

/// A good request, then an ambiguous one on the same connection (pipelined, one write): the
/// good one is forwarded once, the ambiguous one never, and the connection ends with the
/// refusal.
#[tokio::test]
async fn an_ambiguous_request_after_a_good_one_on_one_connection_is_refused_alone() {
    let up = RecordingUpstream::start().await;
    let running = gateway(&up).await;
    let mut request = b"GET /v1/accounts HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec();
    request.extend_from_slice(
        format!(
            "POST /v1/accounts HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{SMUGGLED}"
        )
        .as_bytes(),
    );
    let (_, answer) = send(&running, &request).await;
    // The gateway stops and drains: whatever it forwarded has reached the upstream, which
    // records a connection before answering it (was: a fixed wait).
    running.stop().await;
    assert_eq!(up.requests(), 1, "the good request, once: {answer}");
    assert!(
        answer.starts_with("HTTP/1.1 200 "),
        "the good one answered first: {answer}"
    );
    assert!(
        answer.contains("request_framing_invalid"),
        "then the refusal: {answer}"
    );
    let all = String::from_utf8_lossy(&up.bytes()).into_owned();
    assert!(!all.contains("POST") && !all.contains("smuggled"), "{all}");
}

#[tokio::test]
async fn a_plain_chunked_body_is_forwarded_once_with_the_length_the_gateway_counted() {
    let up = RecordingUpstream::start().await;
    let running = gateway(&up).await;
    // Chunked, with the smuggled head after the last chunk on the same connection: the gateway
    // answers the first request and closes (Connection: close); the rest is never forwarded.
    let request = post(
        "Transfer-Encoding: chunked\r\n",
        &format!("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n{SMUGGLED}"),
    );
    let (status, answer) = send(&running, &request).await;
    assert_eq!(status, Some(200), "{answer}");
    // The gateway stops and drains: whatever it forwarded has reached the upstream, which
    // records a connection before answering it (was: a fixed wait).
    running.stop().await;
    assert_eq!(up.requests(), 1, "exactly one request reached the upstream");
    let all = String::from_utf8_lossy(&up.bytes()).into_owned();
    assert!(!all.contains("smuggled"), "{all}");
    let (head, body) = all.split_once("\r\n\r\n").expect("a head");
    let head = head.to_ascii_lowercase();
    // Whatever framing the gateway chose, the upstream reads exactly "hello world".
    if head.contains("transfer-encoding: chunked") {
        assert!(body.ends_with("0\r\n\r\n"), "{body:?}");
        let decoded: String = body
            .split("\r\n")
            .collect::<Vec<_>>()
            .chunks(2)
            .filter_map(|c| c.get(1).copied())
            .collect();
        assert_eq!(decoded, "hello world", "{body:?}");
    } else {
        assert!(head.contains("content-length: 11"), "{head}");
        assert_eq!(body, "hello world");
    }
}

/// Bare LF line endings (RFC 9112 section 2.2 lets a recipient refuse them; httparse, under
/// hyper, would accept them): 400, and nothing is forwarded.
#[tokio::test]
async fn bare_line_feeds_are_refused() {
    let up = RecordingUpstream::start().await;
    let running = gateway(&up).await;
    let cases: [(&str, &[u8]); 3] = [
        (
            "a request line ended by LF",
            b"GET /v1/accounts HTTP/1.1\nHost: localhost\r\nConnection: close\r\n\r\n",
        ),
        (
            "a header ended by LF",
            b"GET /v1/accounts HTTP/1.1\r\nHost: localhost\nConnection: close\r\n\r\n",
        ),
        (
            "a blank line of LF alone",
            b"GET /v1/accounts HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\n",
        ),
    ];
    for (what, request) in cases {
        let (status, answer) = send(&running, request).await;
        assert_eq!(status, Some(400), "{what}: {answer}");
        assert_eq!(code_of(&answer), "request_framing_invalid", "{what}");
    }
    // The gateway stops and drains: whatever it forwarded has reached the upstream, which
    // records a connection before answering it (was: a fixed wait).
    running.stop().await;
    assert_eq!(up.requests(), 0, "nothing was forwarded");
}

#[tokio::test]
async fn an_oversized_head_or_ten_thousand_headers_are_refused() {
    let up = RecordingUpstream::start().await;
    let running = gateway(&up).await;
    let long_line = format!(
        "GET /v1/accounts?{} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        "a".repeat(100 * 1024)
    );
    let mut many =
        String::from("GET /v1/accounts HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for i in 0..10_000 {
        many.push_str(&format!("x-h{i}: v\r\n"));
    }
    many.push_str("\r\n");
    for (what, request) in [
        ("a 100 KiB request line", long_line),
        ("10,000 headers", many),
    ] {
        let (status, answer) = send(&running, request.as_bytes()).await;
        assert_eq!(
            status,
            Some(431),
            "{what}: {}",
            &answer[..answer.len().min(200)]
        );
        assert_eq!(code_of(&answer), "request_head_too_large", "{what}");
    }
    assert_eq!(up.requests(), 0, "nothing was forwarded");
    running.stop().await;
}
