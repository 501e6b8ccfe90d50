//! 50 MB up and 50 MB down through the gateway, with flat memory: bodies stream, nothing
//! buffers a whole body. Alone in its test binary so the process's peak memory is its own.

mod common;

use std::convert::Infallible;

use bytes::Bytes;
use common::test_pki::{test_config, test_pki};
use common::tls_client::{self, Proto, ReqBody};
use common::upstream::{self, DOWNLOAD_BYTES};
use futures_util::stream;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty, StreamBody};
use hyper::body::Frame;

/// Resident memory of this process now (Linux `VmRSS`), in bytes.
fn rss() -> u64 {
    common::process_memory("VmRSS:")
}

/// Samples `rss()` every 2 ms on a thread of its own until stopped; returns the highest.
/// (`VmHWM` would not do: the test PKI's key generation peaks higher before the transfers.)
struct Sampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl Sampler {
    fn start() -> Sampler {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(rss());
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            peak
        });
        Sampler { stop, thread }
    }

    fn peak(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().expect("sampler")
    }
}

const UPLOAD_BYTES: u64 = 50 * 1024 * 1024;
const CHUNK: usize = 64 * 1024;

/// What memory may grow by while 100 MB pass: buffers, TLS records, pools, allocator slack.
/// A whole body held anywhere would add 50 MB.
const FLAT: u64 = 24 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_megabytes_stream_up_and_down_with_flat_memory() {
    let up = upstream::start().await;
    let config = test_config(|t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!("upstream = \"http://{}\"", up.addr),
        )
    });
    let running = common::service::start(config).await;
    let addr = running.gateway.expect("gateway");

    for proto in [Proto::H1, Proto::H2] {
        let client = tls_client::client_config(&test_pki().dir, Some("valid"), proto);
        // Warm up: the check, the revocation fetches, the connection pool.
        let warm = Request::get("https://localhost/v1/accounts")
            .body(Empty::<Bytes>::new().map_err(|n| match n {}).boxed())
            .expect("request");
        let (r, _) = tls_client::send(addr, client.clone(), proto, warm).await;
        assert_eq!(r.status(), StatusCode::OK);
        r.into_body().collect().await.expect("body");
        let before = rss();
        let sampler = Sampler::start();

        // Download.
        let req = Request::get("https://localhost/v1/accounts/download")
            .body(Empty::<Bytes>::new().map_err(|n| match n {}).boxed())
            .expect("request");
        let (r, _) = tls_client::send(addr, client.clone(), proto, req).await;
        assert_eq!(r.status(), StatusCode::OK);
        let mut body = r.into_body();
        let mut down = 0u64;
        while let Some(frame) = body.frame().await {
            if let Some(d) = frame.expect("frame").data_ref() {
                down += d.len() as u64;
            }
        }
        assert_eq!(
            down, DOWNLOAD_BYTES,
            "{proto:?}: the whole download arrived"
        );

        // Upload.
        let chunks = (UPLOAD_BYTES / CHUNK as u64) as usize;
        let s =
            stream::iter((0..chunks).map(|i| {
                Ok::<_, Infallible>(Frame::data(Bytes::from(vec![(i % 7) as u8; CHUNK])))
            }));
        let body: ReqBody = StreamBody::new(s)
            .map_err(|n: Infallible| match n {})
            .boxed();
        let req = Request::builder()
            .method(Method::POST)
            .uri("https://localhost/v1/payments/upload")
            .body(body)
            .expect("request");
        let (r, _) = tls_client::send(addr, client, proto, req).await;
        assert_eq!(r.status(), StatusCode::OK);
        let text = r.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(
            String::from_utf8_lossy(&text),
            format!("received {UPLOAD_BYTES} bytes"),
            "{proto:?}: the whole upload arrived"
        );

        let growth = sampler.peak().saturating_sub(before);
        eprintln!("{proto:?}: peak memory growth {} KB", growth / 1024);
        assert!(
            growth < FLAT,
            "{proto:?}: peak memory grew by {} MB while 100 MB streamed",
            growth / (1024 * 1024)
        );
    }
    running.stop().await;
}

/// Issue 40 finding 1: a permitted PSP that opens streams and never reads their responses
/// (HTTP/2 `SETTINGS_INITIAL_WINDOW_SIZE = 0`) kept each stream's upstream slot, and the
/// upstream connection behind it, past every timeout: its share of the budget was gone for
/// good. Now a response the client takes nothing of for `upstream_timeout_ms` is ended and
/// its slot freed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_its_responses_loses_its_upstream_slots_within_the_timeout() {
    let up = upstream::start().await;
    let config = test_config(|t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!(
                "upstream = \"http://{}\"\nupstream_timeout_ms = 1000\nupstream_max_requests = 8\nupstream_max_requests_per_psp = 2",
                up.addr
            ),
        )
    });
    let running = common::service::start(config).await;
    let addr = running.gateway.expect("gateway");
    let dir = &test_pki().dir;
    // An HTTP/2 client that opens no window: the gateway can send headers, no data.
    let tls = tls_client::connect(
        addr,
        tls_client::client_config(dir, Some("valid"), Proto::H2),
    )
    .await;
    let (client, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, bytes::Bytes>(tls)
        .await
        .expect("HTTP/2 handshake");
    tokio::spawn(connection);
    let mut client = client.ready().await.expect("ready");
    let mut held = Vec::new();
    for _ in 0..2 {
        let request = http::Request::builder()
            .uri("https://localhost/v1/accounts/download")
            .body(())
            .expect("request");
        let (response, _) = client.send_request(request, true).expect("a stream");
        let response = response.await.expect("headers arrive");
        assert_eq!(response.status(), StatusCode::OK);
        // Its body is kept and never read.
        held.push(response.into_body());
        client = client.ready().await.expect("ready");
    }
    // Both of the PSP's slots are taken by the unread responses.
    let config = tls_client::client_config(dir, Some("valid"), Proto::H1);
    let (response, _) = tls_client::send(
        addr,
        config.clone(),
        Proto::H1,
        tls_client::get("/v1/accounts"),
    )
    .await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    // Past upstream_timeout_ms (1 s) with nothing read, they are ended and the slots freed.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let (response, _) =
        tls_client::send(addr, config, Proto::H1, tls_client::get("/v1/accounts")).await;
    assert_eq!(response.status(), StatusCode::OK, "the slots came back");
    drop(held);
    running.stop().await;
}
