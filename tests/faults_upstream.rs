//! The bank's API failing under the gateway (issue 27 section 1): an upstream that refuses
//! connections, resets them while the gateway sends a request body or while it sends its
//! response body, answers its headers too late or stalls its body, sends a response that is
//! not HTTP (a garbage status line, invalid chunked encoding), or closes a keep-alive
//! connection the pool still holds. The upstream is a raw TCP server below HTTP that
//! misbehaves on purpose, chosen by the last segment of the request path, and records every
//! request line it reads. The gateway is driven in memory (its handler, as the listener calls
//! it) on a Berlin Group route and a UK Open Banking route.
//!
//! For each fault: the client gets the dialect's 502 `upstream_unavailable` or 504
//! `upstream_timeout` when no response head came (once a head has been streamed to the
//! client a status can no longer change, so a fault after it ends the body in an error,
//! never in a clean but truncated body); nothing waits past its timeout (bounded generously
//! for a loaded machine: the timeout plus 3 s); a POST reaches the upstream once, never
//! retried; and the next call through the same gateway succeeds.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::in_memory;
use common::test_pki::test_config;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use psp_gateway::app::Faces;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// `gateway.upstream_timeout_ms` in these tests.
const UPSTREAM_TIMEOUT: Duration = Duration::from_millis(1000);
/// How long anything may take: the timeout, and 3 s for a loaded 2-core machine.
const BOUND: Duration = Duration::from_millis(1000 + 3000);
/// Bytes of the request body the upstream resets on: more than loopback's socket buffers
/// hold, so the gateway is still writing it when the reset comes.
const LARGE_BODY: usize = 16 * 1024 * 1024;

/// The two dialects' routes for a payment (service 7): where the calls go.
const ROUTES: [(&str, &str); 2] = [
    ("berlin-group", "/v1/payments"),
    ("uk-open-banking", "/open-banking/v3.1/pisp"),
];

/// An upstream below HTTP. The request path's last segment says what it does:
/// - `reset-request`: reads the head and a little of the body, then resets the connection;
/// - `reset-response`: a head announcing 1,000 bytes, 100 of them, then a reset;
/// - `slow-headers`: the head 2 s late (after the gateway's timeout), then a normal answer;
/// - `stall-body`: a head announcing 1,000 bytes, 10 of them, then nothing for a minute;
/// - `steady-drip`: ten body bytes, one every 300 ms (3 s in all, no silence of 1 s);
/// - `garbage-status`: a status line that is not HTTP, then closes;
/// - `bad-chunked`: a chunked head, then a chunk size that is not hexadecimal, then closes;
/// - `keepalive-close`: a normal keep-alive answer, then the socket closed at once;
/// - `keepalive-then-drop`: a normal keep-alive answer; the next request on that connection
///   is read and the connection dropped without an answer (the pool believed it alive);
/// - anything else: `200 ok`, keep-alive.
struct Faulty {
    addr: SocketAddr,
    lines: Arc<Mutex<Vec<String>>>,
    connections: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Faulty {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Faulty {
    /// How many requests for `path` the upstream read.
    fn count(&self, path: &str) -> usize {
        let line = |m: &str| format!("{m} {path} HTTP/1.1");
        self.lines
            .lock()
            .expect("lock")
            .iter()
            .filter(|l| **l == line("POST") || **l == line("GET"))
            .count()
    }

    fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

async fn faulty_on(listener: TcpListener) -> Faulty {
    let addr = listener.local_addr().expect("addr");
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let connections: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
    let (log, count) = (lines.clone(), connections.clone());
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(connection(stream, log.clone()));
        }
    });
    Faulty {
        addr,
        lines,
        connections,
        task,
    }
}

async fn faulty() -> Faulty {
    faulty_on(TcpListener::bind("127.0.0.1:0").await.expect("bind")).await
}

/// One connection of [`Faulty`]: its requests in turn.
async fn connection(mut stream: TcpStream, log: Arc<Mutex<Vec<String>>>) {
    let mut buf: Vec<u8> = Vec::new();
    let mut previous = String::new();
    loop {
        let Some((line, content_length)) = read_head(&mut stream, &mut buf).await else {
            return;
        };
        log.lock().expect("lock").push(line.clone());
        if previous == "keepalive-then-drop" {
            // The request was read; the connection goes without an answer (a reset, as the
            // body may be unread).
            reset(stream);
            return;
        }
        let path = line.split(' ').nth(1).unwrap_or_default().to_owned();
        let fault = path.rsplit('/').next().unwrap_or_default().to_owned();
        if fault == "reset-request" {
            let mut chunk = vec![0u8; 64 * 1024];
            let _ = stream.read(&mut chunk).await;
            reset(stream);
            return;
        }
        if !drain(&mut stream, &mut buf, content_length).await {
            return;
        }
        let wrote = match fault.as_str() {
            "reset-response" => {
                let mut answer = b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n".to_vec();
                answer.extend_from_slice(&[b'x'; 100]);
                let _ = stream.write_all(&answer).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
                reset(stream);
                return;
            }
            "slow-headers" => {
                tokio::time::sleep(UPSTREAM_TIMEOUT * 2).await;
                stream.write_all(OK).await
            }
            "stall-body" => {
                let mut answer = b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n".to_vec();
                answer.extend_from_slice(&[b'x'; 10]);
                let _ = stream.write_all(&answer).await;
                tokio::time::sleep(Duration::from_secs(60)).await;
                return;
            }
            "steady-drip" => {
                // Ten bytes, one every 300 ms: 3 s in all, never 1 s of silence.
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n")
                    .await;
                for _ in 0..10 {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    if stream.write_all(b"d").await.is_err() {
                        return;
                    }
                }
                Ok(())
            }
            "garbage-status" => {
                let _ = stream
                    .write_all(b"HTTP/1.1 two hundred OK\r\ncontent-length: 2\r\n\r\nok")
                    .await;
                let _ = stream.shutdown().await;
                return;
            }
            "bad-chunked" => {
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\nworld\r\n",
                    )
                    .await;
                tokio::time::sleep(Duration::from_millis(50)).await;
                let _ = stream.shutdown().await;
                return;
            }
            "keepalive-close" => {
                let _ = stream.write_all(OK).await;
                let _ = stream.shutdown().await;
                return;
            }
            _ => stream.write_all(OK).await,
        };
        if wrote.is_err() {
            return;
        }
        previous = fault;
    }
}

/// Drops `stream` with a reset (RST) rather than a FIN.
fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

/// Reads one request head from `stream` (after what `buf` holds): its request line and
/// `Content-Length`; the bytes after the head stay in `buf`. `None` at the end or on error.
async fn read_head(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, usize)> {
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            let mut lines = head.split("\r\n");
            let line = lines.next().unwrap_or_default().to_owned();
            let length = lines
                .filter_map(|l| l.split_once(':'))
                .find(|(n, _)| n.trim().eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse().ok())
                .unwrap_or(0);
            return Some((line, length));
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Reads and discards a body of `length` bytes (some already in `buf`).
async fn drain(stream: &mut TcpStream, buf: &mut Vec<u8>, length: usize) -> bool {
    let mut chunk = vec![0u8; 64 * 1024];
    while buf.len() < length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    buf.drain(..length);
    true
}

/// The gateway in memory in front of `upstream`, with a 1 s upstream timeout.
fn gateway_to(upstream: SocketAddr) -> Faces {
    in_memory::faces(&test_config(move |t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!(
                "upstream = \"http://{upstream}\"\nupstream_timeout_ms = {}",
                UPSTREAM_TIMEOUT.as_millis()
            ),
        )
    }))
}

/// What the client got: the status, the body or why it failed, and how long it all took.
struct Outcome {
    status: StatusCode,
    body: Result<Bytes, String>,
    took: Duration,
}

impl Outcome {
    fn json(&self) -> serde_json::Value {
        let body = self.body.as_ref().expect("a whole body");
        serde_json::from_slice(body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)))
    }
}

/// One call from the `valid` PSP: `method` on `path` with `body`, answered and read within
/// [`BOUND`] (a panic otherwise: the gateway hung).
async fn call(faces: &Faces, method: &str, path: &str, body: Bytes) -> Outcome {
    let listen = faces
        .gateway()
        .and_then(|g| g.listen())
        .expect("a gateway listener");
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-length", body.len())
        .header("content-type", "application/json")
        .body(Full::new(body))
        .expect("request");
    let connection = in_memory::connection(Some(in_memory::chain_of("valid")));
    let started = Instant::now();
    let response = tokio::time::timeout(
        BOUND,
        psp_faces::sites::handle_on(&faces.sites, listen, request, connection),
    )
    .await
    .unwrap_or_else(|_| panic!("{method} {path}: no response head within {BOUND:?}"));
    let status = response.status();
    let left = BOUND.saturating_sub(started.elapsed());
    let body = match tokio::time::timeout(left, response.into_body().collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => panic!("{method} {path}: {status}, and the body hung past {BOUND:?}"),
    };
    Outcome {
        status,
        body,
        took: started.elapsed(),
    }
}

/// The dialect's error answer for `status`: Berlin Group `SERVICE_UNAVAILABLE`, UK Open
/// Banking `UK.OBIE.UnexpectedError` (docs/errors.md), with the text of the contract `code`.
fn assert_dialect_error(dialect: &str, outcome: &Outcome, status: StatusCode, code: &str) {
    assert_eq!(outcome.status, status, "{dialect}: {:?}", outcome.body);
    let body = outcome.json();
    let (field, value) = match dialect {
        "berlin-group" => ("/tppMessages/0/code", "SERVICE_UNAVAILABLE"),
        _ => ("/Errors/0/ErrorCode", "UK.OBIE.UnexpectedError"),
    };
    assert_eq!(
        body.pointer(field).and_then(|v| v.as_str()),
        Some(value),
        "{dialect}: {body}"
    );
    // The dialect bodies carry the dialect's code; the contract code is told by the text.
    let says = match code {
        "upstream_timeout" => "did not answer in time",
        _ => "could not be reached",
    };
    assert!(
        body.to_string().contains(says),
        "{dialect}: the body says {says:?} (`{code}`): {body}"
    );
}

/// A POST of `body` to each dialect's `…/{fault}` that must get `status` with `code` and
/// reach the upstream once; then a healthy call through the same gateway.
async fn head_fault(fault: &str, body: Bytes, status: StatusCode, code: &str) {
    let up = faulty().await;
    let faces = gateway_to(up.addr);
    for (dialect, base) in ROUTES {
        let path = format!("{base}/{fault}");
        let outcome = call(&faces, "POST", &path, body.clone()).await;
        eprintln!(
            "{fault} {dialect}: {} in {:?}",
            outcome.status, outcome.took
        );
        assert_dialect_error(dialect, &outcome, status, code);
        assert_eq!(
            up.count(&path),
            1,
            "{path}: the POST reached the upstream once"
        );
    }
    healthy_after(&faces, &up).await;
}

/// A fault after the response head: the head (200) is streamed, then the body must fail,
/// never end cleanly short; the POST reached the upstream once; then a healthy call.
async fn body_fault(fault: &str) {
    let up = faulty().await;
    let faces = gateway_to(up.addr);
    for (dialect, base) in ROUTES {
        let path = format!("{base}/{fault}");
        let outcome = call(&faces, "POST", &path, Bytes::from_static(b"{}")).await;
        eprintln!(
            "{fault} {dialect}: {} then {:?} in {:?}",
            outcome.status,
            outcome.body.as_ref().map(Bytes::len),
            outcome.took
        );
        assert_eq!(outcome.status, StatusCode::OK, "{dialect}: the head came");
        assert!(
            outcome.body.is_err(),
            "{dialect}: a body cut short is an error, not a clean end: {:?}",
            outcome.body
        );
        assert_eq!(
            up.count(&path),
            1,
            "{path}: the POST reached the upstream once"
        );
    }
    healthy_after(&faces, &up).await;
}

/// The pool recovered: a POST and a GET through the same gateway get the upstream's `ok`.
async fn healthy_after(faces: &Faces, up: &Faulty) {
    for (method, path) in [("POST", "/v1/payments/sepa"), ("GET", "/v1/accounts")] {
        let outcome = call(faces, method, path, Bytes::new()).await;
        assert_eq!(
            outcome.status,
            StatusCode::OK,
            "{method} {path} after the fault"
        );
        assert_eq!(outcome.body.as_deref(), Ok(&b"ok"[..]));
    }
    assert!(up.count("/v1/payments/sepa") >= 1);
}

#[tokio::test]
async fn an_upstream_that_refuses_connections_is_502_then_served_once_it_listens() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = closed.local_addr().expect("addr");
    drop(closed);
    let faces = gateway_to(addr);
    for (dialect, base) in ROUTES {
        let outcome = call(&faces, "POST", &format!("{base}/sepa"), Bytes::new()).await;
        eprintln!(
            "refused {dialect}: {} in {:?}",
            outcome.status, outcome.took
        );
        assert_dialect_error(
            dialect,
            &outcome,
            StatusCode::BAD_GATEWAY,
            "upstream_unavailable",
        );
    }
    // The bank's API comes back on its address: the same gateway reaches it.
    let listener = TcpListener::bind(addr).await.expect("rebind the same port");
    let up = faulty_on(listener).await;
    healthy_after(&faces, &up).await;
}

#[tokio::test]
async fn an_upstream_that_resets_while_the_request_body_is_sent_is_502_and_not_retried() {
    head_fault(
        "reset-request",
        Bytes::from(vec![b' '; LARGE_BODY]),
        StatusCode::BAD_GATEWAY,
        "upstream_unavailable",
    )
    .await;
}

#[tokio::test]
async fn an_upstream_that_resets_during_its_response_body_cuts_the_body_with_an_error() {
    body_fault("reset-response").await;
}

#[tokio::test]
async fn response_headers_later_than_the_upstream_timeout_are_504_within_it() {
    let up = faulty().await;
    let faces = gateway_to(up.addr);
    for (dialect, base) in ROUTES {
        let path = format!("{base}/slow-headers");
        let outcome = call(&faces, "POST", &path, Bytes::from_static(b"{}")).await;
        eprintln!(
            "slow-headers {dialect}: {} in {:?}",
            outcome.status, outcome.took
        );
        assert_dialect_error(
            dialect,
            &outcome,
            StatusCode::GATEWAY_TIMEOUT,
            "upstream_timeout",
        );
        assert!(
            outcome.took >= UPSTREAM_TIMEOUT,
            "not before the timeout: {:?}",
            outcome.took
        );
        assert_eq!(
            up.count(&path),
            1,
            "{path}: the POST reached the upstream once"
        );
    }
    healthy_after(&faces, &up).await;
}

#[tokio::test]
async fn a_response_body_that_stalls_after_its_head_is_cut_off_within_the_timeout() {
    body_fault("stall-body").await;
}

/// The bound on a stalled body is on silence, not on the whole: a body that takes three
/// times the timeout but never pauses for as long arrives whole.
#[tokio::test]
async fn a_slow_but_steady_response_body_is_not_cut_off() {
    let up = faulty().await;
    let faces = gateway_to(up.addr);
    let started = Instant::now();
    let listen = faces
        .gateway()
        .and_then(|g| g.listen())
        .expect("a gateway listener");
    let response = tokio::time::timeout(
        BOUND,
        psp_faces::sites::handle_on(
            &faces.sites,
            listen,
            in_memory::request("GET", "/v1/accounts/steady-drip"),
            in_memory::connection(Some(in_memory::chain_of("valid"))),
        ),
    )
    .await
    .expect("a head within the bound");
    assert_eq!(response.status(), StatusCode::OK);
    let body = tokio::time::timeout(
        Duration::from_secs(3) + BOUND,
        response.into_body().collect(),
    )
    .await
    .expect("the body within its 3 s and the bound")
    .expect("a whole body")
    .to_bytes();
    eprintln!(
        "steady-drip: {} bytes in {:?}",
        body.len(),
        started.elapsed()
    );
    assert_eq!(&body[..], b"dddddddddd");
    assert!(
        started.elapsed() > UPSTREAM_TIMEOUT * 2,
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_garbage_status_line_is_502() {
    head_fault(
        "garbage-status",
        Bytes::from_static(b"{}"),
        StatusCode::BAD_GATEWAY,
        "upstream_unavailable",
    )
    .await;
}

#[tokio::test]
async fn invalid_chunked_encoding_in_the_response_cuts_the_body_with_an_error() {
    body_fault("bad-chunked").await;
}

#[tokio::test]
async fn a_keep_alive_connection_closed_after_its_answer_never_hangs_the_next_call() {
    let up = faulty().await;
    let faces = gateway_to(up.addr);
    for (dialect, base) in ROUTES {
        let first = call(
            &faces,
            "GET",
            &format!("{base}/keepalive-close"),
            Bytes::new(),
        )
        .await;
        assert_eq!(first.status, StatusCode::OK, "{dialect}");
        assert_eq!(first.body.as_deref(), Ok(&b"ok"[..]));
        // At once: the pool may still hold the connection the upstream closed.
        let path = format!("{base}/after-close");
        let next = call(&faces, "POST", &path, Bytes::from_static(b"{}")).await;
        eprintln!(
            "after keepalive-close {dialect}: {} in {:?}",
            next.status, next.took
        );
        if next.status == StatusCode::OK {
            assert_eq!(next.body.as_deref(), Ok(&b"ok"[..]));
        } else {
            assert_dialect_error(
                dialect,
                &next,
                StatusCode::BAD_GATEWAY,
                "upstream_unavailable",
            );
        }
        assert_eq!(
            up.count(&path),
            1,
            "{path}: the POST reached the upstream once"
        );
    }
    healthy_after(&faces, &up).await;
}

#[tokio::test]
async fn a_keep_alive_connection_dropped_under_the_next_request_is_502_and_not_retried() {
    let up = faulty().await;
    let faces = gateway_to(up.addr);
    for (dialect, base) in ROUTES {
        let first = call(
            &faces,
            "GET",
            &format!("{base}/keepalive-then-drop"),
            Bytes::new(),
        )
        .await;
        assert_eq!(first.status, StatusCode::OK, "{dialect}");
        assert_eq!(first.body.as_deref(), Ok(&b"ok"[..]));
        let path = format!("{base}/after-drop");
        let before = up.connections();
        let next = call(&faces, "POST", &path, Bytes::from_static(b"{}")).await;
        let reused = up.connections() == before;
        eprintln!(
            "after keepalive-then-drop {dialect}: {} in {:?} (connection reused: {reused})",
            next.status, next.took
        );
        // The POST went out on the pooled connection, which the upstream dropped unanswered:
        // it was sent, so it is not sent again (the bank may have acted on it).
        assert_eq!(
            up.count(&path),
            1,
            "{path}: the POST reached the upstream once"
        );
        if reused {
            assert_dialect_error(
                dialect,
                &next,
                StatusCode::BAD_GATEWAY,
                "upstream_unavailable",
            );
        } else {
            assert_eq!(next.status, StatusCode::OK, "{dialect}");
        }
    }
    healthy_after(&faces, &up).await;
}

/// The stalled body over the real listener: the TLS client, on HTTP/1.1 and on HTTP/2, sees
/// its response end in an error within the timeout (the connection closed early, the stream
/// reset), and the next call on a new connection is served.
#[tokio::test]
async fn over_tls_a_stalled_response_body_ends_in_an_error_on_h1_and_h2() {
    use common::tls_client::{self, Proto, get};
    let up = faulty().await;
    let config = test_config(|t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!(
                "upstream = \"http://{}\"\nupstream_timeout_ms = {}",
                up.addr,
                UPSTREAM_TIMEOUT.as_millis()
            ),
        )
    });
    let running = common::service::start(config).await;
    let addr = running.gateway.expect("gateway listening");
    for proto in [Proto::H1, Proto::H2] {
        let client =
            tls_client::client_config(&common::test_pki::test_pki().dir, Some("valid"), proto);
        let started = Instant::now();
        let (response, _) = tokio::time::timeout(
            BOUND,
            tls_client::send(addr, client.clone(), proto, get("/v1/accounts/stall-body")),
        )
        .await
        .expect("a response head within the bound");
        assert_eq!(response.status(), StatusCode::OK, "{proto:?}");
        let left = BOUND.saturating_sub(started.elapsed());
        let body = tokio::time::timeout(left, response.into_body().collect())
            .await
            .unwrap_or_else(|_| panic!("{proto:?}: the body hung past {BOUND:?}"))
            .map(|b| b.to_bytes().len())
            .map_err(|e| e.to_string());
        eprintln!(
            "over TLS {proto:?}: stall-body ended {body:?} after {:?}",
            started.elapsed()
        );
        assert!(body.is_err(), "{proto:?}: cut off, not a clean short body");
        let (next, _) = tokio::time::timeout(
            BOUND,
            tls_client::send(addr, client, proto, get("/v1/accounts")),
        )
        .await
        .expect("the next call within the bound");
        assert_eq!(next.status(), StatusCode::OK, "{proto:?}");
    }
    running.stop().await;
}
