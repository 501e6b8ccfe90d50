//! HTTP/2 floods against the gateway, written frame by frame over real TLS as the sandbox's
//! valid PSP: rapid reset (CVE-2023-44487), CONTINUATION flood (CVE-2024-27316 class),
//! SETTINGS flood, and more streams than allowed. Each must end with the attacking connection
//! closed before the attacker runs out of frames, memory bounded, and other clients' requests
//! answered while it runs. Counts and states only: nothing here is timed.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::test_pki::{test_config, test_pki};
use common::tls_client::{self, Proto, get};
use common::{process_memory, service};
use psp_gateway::app::Running;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("frame length");
    let mut f = Vec::with_capacity(9 + payload.len());
    f.extend_from_slice(&len.to_be_bytes()[1..]);
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An HPACK block for `GET https://localhost/v1/accounts`: static-table indexes for the method,
/// scheme and path `/`, then `:path` and `:authority` as literals.
fn request_block() -> Vec<u8> {
    let mut b = vec![0x82, 0x87];
    // :path (static index 4), literal without indexing.
    b.push(0x04);
    b.push(12);
    b.extend_from_slice(b"/v1/accounts");
    // :authority (static index 1), literal without indexing.
    b.push(0x01);
    b.push(9);
    b.extend_from_slice(b"localhost");
    b
}

async fn gateway() -> Running {
    service::start(test_config(|t| t)).await
}

/// A TLS connection with ALPN h2 as the valid PSP, the preface and an empty SETTINGS sent.
async fn h2_connection(addr: SocketAddr) -> tokio_rustls::client::TlsStream<TcpStream> {
    let config = tls_client::client_config(&test_pki().dir, Some("valid"), Proto::H2);
    let mut tls = tls_client::connect(addr, config).await;
    tls.write_all(PREFACE).await.expect("preface");
    tls.write_all(&frame(SETTINGS, 0, 0, &[]))
        .await
        .expect("settings");
    tls
}

/// What a flood did: whether the server closed the connection, and the frames written.
struct Flooded {
    closed: bool,
    written: usize,
}

/// Writes frames from `next` (at most `frames` of them) while draining what the server
/// sends, until the server closes the connection or stops reading; signals `started` once
/// the first [`STARTED_AFTER`] frames are written.
async fn flood(
    addr: SocketAddr,
    frames: usize,
    started: oneshot::Sender<()>,
    mut next: impl FnMut(usize) -> Vec<u8> + Send + 'static,
) -> Flooded {
    let tls = h2_connection(addr).await;
    let (mut reader, mut writer) = tokio::io::split(tls);
    let closed = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => return true,
                Ok(_) => {}
            }
        }
    });
    let mut started = Some(started);
    let mut written = 0;
    while written < frames && !closed.is_finished() {
        let bytes = next(written);
        // A write that cannot finish in 5 s: the server stopped reading (a bound, not a
        // measurement).
        match tokio::time::timeout(Duration::from_secs(5), writer.write_all(&bytes)).await {
            Ok(Ok(())) => written += 1,
            _ => break,
        }
        if written >= STARTED_AFTER
            && let Some(started) = started.take()
        {
            let _ = started.send(());
        }
    }
    // Frames were refused before the attack got going: let the other clients go ahead anyway.
    if let Some(started) = started.take() {
        let _ = started.send(());
    }
    let closed = tokio::time::timeout(Duration::from_secs(10), closed)
        .await
        .map(|r| r.unwrap_or(true))
        .unwrap_or(false);
    Flooded { closed, written }
}

/// Frames a flood writes before the other clients start their requests.
const STARTED_AFTER: usize = 100;

/// The rapid-reset attacker's supply: a million HEADERS + RST_STREAM pairs (about 40 MB).
const RAPID_RESETS: usize = 1_000_000;
/// The CONTINUATION attacker's supply: 16 KiB frames up to the 1 GiB its literal announces.
const CONTINUATIONS: usize = 65_536;
/// SETTINGS frames in the SETTINGS flood (15 bytes each).
const SETTINGS_FRAMES: usize = 100_000;

/// `n` normal requests, one connection each: every one must be answered `200`.
async fn normal_requests(addr: SocketAddr, n: usize) {
    let config = tls_client::client_config(&test_pki().dir, Some("valid"), Proto::H2);
    for i in 0..n {
        let (response, _) = tokio::time::timeout(
            Duration::from_secs(30),
            tls_client::send(addr, config.clone(), Proto::H2, get("/v1/accounts")),
        )
        .await
        .unwrap_or_else(|_| panic!("normal request {i} was never answered"));
        assert_eq!(
            response.status(),
            http::StatusCode::OK,
            "normal request {i}"
        );
    }
}

/// Runs the flood `attack` makes (given its started signal), and meanwhile other clients'
/// requests, once the attack has written its first frames. Checks that every other request
/// is answered, that memory stays bounded, and, when `must_close`, that the attacking
/// connection was closed before it could write all `frames` (the server cut it off; the
/// attacker did not run out).
async fn under_attack<A>(
    what: &str,
    attack: impl FnOnce(oneshot::Sender<()>) -> A,
    frames: usize,
    addr: SocketAddr,
    must_close: bool,
) where
    A: std::future::Future<Output = Flooded> + Send + 'static,
{
    normal_requests(addr, 3).await;
    let rss_before = process_memory("VmRSS:");
    let (started_tx, started) = oneshot::channel();
    let attack = tokio::spawn(attack(started_tx));
    started.await.expect("the flood started");
    normal_requests(addr, 15).await;
    let Flooded { closed, written } = attack.await.expect("attack");
    let rss_after = process_memory("VmRSS:");
    if must_close {
        assert!(
            closed,
            "{what}: the attacking connection was not closed ({written} frames)"
        );
        assert!(
            written < frames,
            "{what}: all {frames} frames were taken before the connection was closed"
        );
    }
    let growth = rss_after.saturating_sub(rss_before);
    assert!(
        growth < 256 * 1024 * 1024,
        "{what}: resident memory grew by {} MiB",
        growth >> 20
    );
    eprintln!(
        "{what}: {written} of {frames} frames written, closed {closed}; 15 other requests answered; RSS +{} KiB",
        growth >> 10
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_reset_is_cut_off() {
    let running = gateway().await;
    let addr = running.gateway.expect("gateway");
    let block = Arc::new(request_block());
    let attack = move |started| {
        flood(addr, RAPID_RESETS, started, move |i| {
            let stream = u32::try_from(2 * i + 1).unwrap_or(1);
            let mut bytes = frame(HEADERS, END_STREAM | END_HEADERS, stream, &block);
            bytes.extend(frame(RST_STREAM, 0, stream, &8u32.to_be_bytes()));
            bytes
        })
    };
    under_attack("rapid reset", attack, RAPID_RESETS, addr, true).await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuation_flood_is_cut_off() {
    let running = gateway().await;
    let addr = running.gateway.expect("gateway");
    let attack = move |started| {
        flood(addr, CONTINUATIONS, started, move |i| {
            if i == 0 {
                // A header block that never ends: a literal whose value is announced as 1 GiB.
                let mut start = request_block();
                start.extend_from_slice(&[0x00, 0x01, b'x', 0x7f]);
                let mut len = (1u64 << 30) - 127;
                while len >= 128 {
                    start.push(u8::try_from(len % 128).unwrap_or(0) | 0x80);
                    len /= 128;
                }
                start.push(u8::try_from(len).unwrap_or(0));
                frame(HEADERS, END_STREAM, 1, &start)
            } else {
                frame(CONTINUATION, 0, 1, &[b'a'; 16 * 1024])
            }
        })
    };
    under_attack("CONTINUATION flood", attack, CONTINUATIONS, addr, true).await;
    running.stop().await;
}

/// SETTINGS frames, each one to acknowledge, [`SETTINGS_FRAMES`] of them. RFC 9113 sets no
/// limit and h2 acknowledges each; what is shown is that memory stays bounded and other
/// clients are answered meanwhile, not that the connection is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settings_flood_leaves_memory_and_other_clients_unharmed() {
    let running = gateway().await;
    let addr = running.gateway.expect("gateway");
    // SETTINGS_MAX_CONCURRENT_STREAMS = 100.
    let mut setting = 3u16.to_be_bytes().to_vec();
    setting.extend_from_slice(&100u32.to_be_bytes());
    let attack = move |started| {
        flood(addr, SETTINGS_FRAMES, started, move |_| {
            frame(SETTINGS, 0, 0, &setting)
        })
    };
    under_attack("SETTINGS flood", attack, SETTINGS_FRAMES, addr, false).await;
    running.stop().await;
}

/// 300 streams opened at once, each with a request body that never comes, on one connection
/// whose limit is 100 concurrent streams: the streams past the limit are refused
/// (RST_STREAM REFUSED_STREAM) or the connection is ended (GOAWAY); the 100 admitted wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_past_the_concurrency_limit_are_refused() {
    const RST_STREAM_FRAME: u8 = 0x3;
    const GOAWAY: u8 = 0x7;
    const REFUSED_STREAM: u32 = 0x7;
    let running = gateway().await;
    let addr = running.gateway.expect("gateway");
    let mut tls = h2_connection(addr).await;
    let block = request_block();
    let mut burst = Vec::new();
    for i in 0..300u32 {
        // END_HEADERS without END_STREAM: a body is announced and never sent.
        burst.extend(frame(HEADERS, END_HEADERS, 2 * i + 1, &block));
    }
    tls.write_all(&burst).await.expect("write the burst");
    let (mut refused, mut goaway) = (0u32, false);
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while refused < 200 && !goaway {
        let n = match tokio::time::timeout_at(deadline, tls.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => n,
        };
        pending.extend_from_slice(&buf[..n]);
        while pending.len() >= 9 {
            let len = usize::from(pending[0]) << 16
                | usize::from(pending[1]) << 8
                | usize::from(pending[2]);
            if pending.len() < 9 + len {
                break;
            }
            let kind = pending[3];
            let payload = &pending[9..9 + len];
            if kind == RST_STREAM_FRAME
                && payload.len() == 4
                && u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                    == REFUSED_STREAM
            {
                refused += 1;
            }
            if kind == GOAWAY {
                goaway = true;
            }
            pending.drain(..9 + len);
        }
    }
    assert!(
        refused >= 200 || goaway,
        "streams past the limit were neither refused nor the connection ended: {refused} refused"
    );
    eprintln!("300 streams on one connection: {refused} refused, GOAWAY {goaway}");
    // The 100 admitted streams wait for their bodies: close the connection, or the drain
    // would wait for them.
    drop(tls);
    running.stop().await;
}
