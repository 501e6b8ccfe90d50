//! Listener limits on what comes from the network: slow headers, idle connections, slow TLS
//! handshakes are cut off. Limits are set small here; the assertions are on behaviour (the
//! server closes the connection), with generous margins, not on timings.

mod common;

use std::time::Duration;

use common::service::*;
use common::test_pki::test_config;
use http::{Method, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

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

const AUTH: &str = "Basic c2FuZGJveDpzYW5kYm94"; // sandbox:sandbox

/// A check of the sandbox's valid certificate on the check endpoint.
async fn a_normal_request(addr: std::net::SocketAddr) -> Reply {
    let pem = std::fs::read(common::test_pki::test_pki().psp("valid")).expect("pem");
    let der = psp_cert::cert::PspCertificate::parse(&pem)
        .expect("certificate")
        .der;
    use base64::Engine;
    let eidas = base64::engine::general_purpose::STANDARD.encode(der);
    send(
        addr,
        Method::GET,
        "/v1/psp/eidas?jurisdiction=XX",
        &[
            ("authorization", AUTH),
            ("fi_reference_id", "ref"),
            ("eidas", &eidas),
        ],
    )
    .await
}

/// Connections that only send HTTP/2 PINGs.
const PINGERS: usize = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_connections_that_only_ping_are_closed_and_new_clients_get_in() {
    // Every connection slot is taken by a client that sends PING frames every 200 ms and no
    // request (half of them after one request). PINGs are not requests: the ones that never
    // asked for anything are closed at the first-request deadline (1 s), the others 1.5 s
    // after their request, and a new client, waiting in the accept queue, is then served.
    let running = start(test_config(|t| {
        format!(
            "{t}\n[limits]\nmax_connections = {PINGERS}\nfirst_request_timeout_ms = 1000\nidle_timeout_ms = 1500\n"
        )
    }))
    .await;
    let addr = running.api.expect("api");
    let (established_tx, mut established) = tokio::sync::mpsc::channel(PINGERS);
    let mut pingers = tokio::task::JoinSet::new();
    for i in 0..PINGERS {
        let established_tx = established_tx.clone();
        pingers.spawn(async move {
            let tcp = TcpStream::connect(addr).await.expect("connect");
            let (mut client, mut connection) =
                h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
            let mut ping_pong = connection.ping_pong().expect("ping-pong handle");
            let driver = tokio::spawn(connection);
            let asked = i % 2 == 1;
            if asked {
                let request = http::Request::get(format!("http://{addr}/healthz"))
                    .body(())
                    .expect("request");
                let (response, _) = client.send_request(request, true).expect("send");
                let response = response.await.expect("response");
                assert_eq!(response.status(), StatusCode::NOT_FOUND);
            }
            let mut pongs = 0u32;
            // Bounded: 60 s at most, then the server has failed to close the connection.
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline && !driver.is_finished() {
                match tokio::time::timeout(
                    Duration::from_secs(5),
                    ping_pong.ping(h2::Ping::opaque()),
                )
                .await
                {
                    Ok(Ok(_)) => pongs += 1,
                    Ok(Err(_)) | Err(_) => break,
                }
                if pongs == 1 {
                    let _ = established_tx.send(()).await;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let closed_by_server = tokio::time::timeout(Duration::from_secs(10), driver)
                .await
                .is_ok();
            drop(client);
            (asked, pongs, closed_by_server)
        });
    }
    drop(established_tx);
    // Wait until the pingers hold their slots (or were already closed).
    let mut holding = 0;
    while holding < PINGERS
        && tokio::time::timeout(Duration::from_secs(30), established.recv())
            .await
            .ok()
            .flatten()
            .is_some()
    {
        holding += 1;
    }
    assert!(holding > 0, "some pingers held a slot");

    // Every slot is taken: this client waits in the accept queue until a pinger is closed.
    let started = Instant::now();
    let reply = tokio::time::timeout(Duration::from_secs(60), a_normal_request(addr))
        .await
        .expect("a new client is served once the pinging connections are closed");
    assert_eq!(reply.status, StatusCode::OK);
    let waited = started.elapsed();

    let mut closed = 0;
    let mut asked_and_closed = 0;
    while let Some(result) = pingers.join_next().await {
        let (asked, pongs, closed_by_server) = result.expect("pinger");
        assert!(closed_by_server, "a pinging connection was left open");
        assert!(
            pongs >= 1,
            "PINGs were answered while the connection was open"
        );
        closed += 1;
        asked_and_closed += usize::from(asked);
    }
    println!(
        "{closed} of {PINGERS} PING-only HTTP/2 connections closed by the server ({asked_and_closed} after one request); {holding} held a slot; a new client was served after {waited:?}"
    );
    assert_eq!(closed, PINGERS);
    assert_eq!(asked_and_closed, PINGERS / 2);
    running.stop().await;
}

#[tokio::test]
async fn connections_over_the_per_source_cap_are_closed_at_once() {
    // A first-request deadline far beyond the test's waits, so only the cap can close the
    // extra connection.
    let running = start(test_config(|t| {
        format!(
            "{t}\n[limits]\nmax_connections_per_source = 3\nfirst_request_timeout_ms = 120000\n"
        )
    }))
    .await;
    let addr = running.api.expect("api");
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(TcpStream::connect(addr).await.expect("connect"));
    }
    let mut extra = TcpStream::connect(addr).await.expect("connect");
    let answer = read_until_closed(&mut extra, Duration::from_secs(30)).await;
    assert!(answer.is_empty(), "nothing is served over the cap");
    // Still at the cap: a real request is refused the same way.
    let mut another = TcpStream::connect(addr).await.expect("connect");
    another
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let answer = read_until_closed(&mut another, Duration::from_secs(30)).await;
    assert!(answer.is_empty(), "nothing is served over the cap");
    // One of the held connections goes away: its slot comes back (asynchronously, so
    // a few tries, bounded).
    drop(held.pop());
    let mut served = None;
    for _ in 0..100 {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("write");
        let answer = read_until_closed(&mut s, Duration::from_secs(30)).await;
        if !answer.is_empty() {
            served = Some(String::from_utf8_lossy(&answer).into_owned());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let served = served.expect("a slot came back");
    assert!(served.starts_with("HTTP/1.1 404"), "{served}");
    // Other listeners count their own connections.
    assert_eq!(
        send(running.admin.expect("admin"), Method::GET, "/healthz", &[])
            .await
            .status,
        StatusCode::OK
    );
    drop(held);
    running.stop().await;
}

/// 200 stalled connections (50 from each of four loopback sources, under the per-source cap):
/// half stall the gateway's TLS handshake, half send half a request head to the check
/// endpoint. Normal requests from another source are answered meanwhile, and the stalled ones
/// are closed at their deadlines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_stalled_connections_do_not_stop_normal_requests() {
    let running = start(test_config(|t| {
        format!("{t}\n[limits]\nheader_read_timeout_ms = 2000\nhandshake_timeout_ms = 2000\n")
    }))
    .await;
    let (api, gateway) = (running.api.expect("api"), running.gateway.expect("gateway"));
    let mut stalled = Vec::new();
    for source in 2..=5u8 {
        for i in 0..50 {
            let socket = tokio::net::TcpSocket::new_v4().expect("socket");
            socket
                .bind(std::net::SocketAddr::from(([127, 0, 0, source], 0)))
                .expect("bind a loopback source");
            let target = if i % 2 == 0 { gateway } else { api };
            let mut stream = socket.connect(target).await.expect("connect");
            if target == api {
                stream
                    .write_all(b"GET /v1/psp/eidas HTTP/1.1\r\nHost: x\r\n")
                    .await
                    .expect("half a head");
            }
            stalled.push(stream);
        }
    }
    let started = Instant::now();
    for _ in 0..10 {
        let r = tokio::time::timeout(Duration::from_secs(5), a_normal_request(api))
            .await
            .expect("a normal request is answered within 5 s");
        assert_eq!(r.status, StatusCode::OK);
    }
    let normal = started.elapsed();
    // Every stalled connection is closed by its deadline (2 s), with a generous margin.
    for stream in &mut stalled {
        let answer = read_until_closed(stream, Duration::from_secs(20)).await;
        assert!(
            answer.is_empty() || answer.starts_with(b"HTTP/1.1 408"),
            "{}",
            String::from_utf8_lossy(&answer)
        );
    }
    eprintln!(
        "10 normal requests in {normal:?} beside 200 stalled connections; all 200 closed after {:?}",
        started.elapsed()
    );
    running.stop().await;
}

/// The framing guard is in front of every listener: a bare LF, or both framings, to the
/// check endpoint gets 400 with the contract's body before the endpoint reads anything.
#[tokio::test]
async fn ambiguous_framing_to_the_check_endpoint_is_refused_with_the_contract_body() {
    let running = start(test_config(|t| t)).await;
    for request in [
        &b"GET /v1/psp/eidas?jurisdiction=XX HTTP/1.1\nHost: x\r\n\r\n"[..],
        b"GET /v1/psp/eidas?jurisdiction=XX HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ] {
        let mut s = TcpStream::connect(running.api.expect("api"))
            .await
            .expect("connect");
        s.write_all(request).await.expect("write");
        let answer = read_until_closed(&mut s, Duration::from_secs(10)).await;
        let text = String::from_utf8_lossy(&answer);
        let (head, body) = text.split_once("\r\n\r\n").expect("an answer");
        assert!(head.starts_with("HTTP/1.1 400 "), "{text}");
        let body: serde_json::Value = serde_json::from_str(body).expect("JSON body");
        assert_eq!(body["errors"][0]["code"], "request_framing_invalid", "{text}");
        assert_eq!(
            body["errors"][0]["link"],
            "/docs/errors#request_framing_invalid"
        );
        let id = body["errors"][0]["id"].as_str().expect("id");
        assert!(head.contains(&format!("x-request-id: {id}")), "{head}");
    }
    running.stop().await;
}
