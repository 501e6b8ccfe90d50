//! A load generator for the ext_authz face (issue 28, section 3): Envoy's
//! `Authorization/Check` over gRPC on plain HTTP/2 (h2), several connections, several streams
//! on each, the same `CheckRequest` every time (the `valid` PSP's certificate as Envoy's
//! `include_peer_certificate` sends it, `GET /v1/accounts` on the site `xx`), so that after
//! the first call every decision is a cached one. Every answer is checked: gRPC status 0 and
//! a CheckResponse whose status is OK (allowed); anything else fails the run.
//!
//! Run by `benches/load-ext-authz.sh`; by hand:
//!
//! ```sh
//! EXT_AUTHZ_ADDR=127.0.0.1:9191 SECONDS=8 RATE=10000 cargo bench --bench ext_authz_load
//! ```
//!
//! - `RATE=0` (the default): closed loop, each stream sends its next Check when the last is
//!   answered: the most Checks per second the face gives.
//! - `RATE=N`: open loop, N Checks per second on a fixed schedule, kept by spinning; each
//!   latency runs from the time the Check was due, not from when it was sent, so a stalled
//!   face is not hidden by a stalled client (no coordinated omission).
//! - `CONNS` connections (default 2), `STREAMS` concurrent streams on each (default 16) in the
//!   closed loop; in the open loop, at most `CONNS` × 256 Checks in flight.
//!
//! Prints one JSON line: checks, seconds, per second, p50/p90/p99/p99.9/max in µs, and the
//! size of the `CheckResponse` (`answer_bytes`: `examples/bare_ext_authz.rs`, the floor,
//! answers as many).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use envoy_types::ext_authz::v3::pb::{CheckRequest, CheckResponse};
use envoy_types::pb::envoy::config::core::v3::{Address, SocketAddress, address, socket_address};
use envoy_types::pb::envoy::service::auth::v3::{AttributeContext, attribute_context};
use prost::Message;
use tokio::net::TcpStream;
use tokio::sync::Mutex;

const PATH: &str = "/envoy.service.auth.v3.Authorization/Check";

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Envoy's `urlEncodedPemEncodedPeerCertificate`: every byte but the unreserved ones
/// (RFC 3986 section 2.3) percent-encoded.
fn url_encoded(pem: &str) -> String {
    let mut out = String::with_capacity(pem.len() * 2);
    for b in pem.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The gRPC message frame of the one Check every call sends.
fn check_frame() -> Bytes {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let pem = std::fs::read_to_string(root.join("certs/psp/valid.pem")).expect("valid.pem");
    let address = |port: u32| Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: "127.0.0.1".to_owned(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(port)),
            ..Default::default()
        })),
    };
    let request = CheckRequest {
        attributes: Some(AttributeContext {
            source: Some(attribute_context::Peer {
                address: Some(address(40000)),
                certificate: url_encoded(&pem),
                ..Default::default()
            }),
            destination: Some(attribute_context::Peer {
                address: Some(address(8443)),
                ..Default::default()
            }),
            request: Some(attribute_context::Request {
                http: Some(attribute_context::HttpRequest {
                    method: "GET".to_owned(),
                    path: "/v1/accounts".to_owned(),
                    host: "localhost".to_owned(),
                    protocol: "HTTP/1.1".to_owned(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            context_extensions: [("psp_site".to_owned(), "xx".to_owned())].into(),
            ..Default::default()
        }),
    };
    let message = request.encode_to_vec();
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.push(0);
    frame.extend_from_slice(&u32::try_from(message.len()).expect("small").to_be_bytes());
    frame.extend_from_slice(&message);
    Bytes::from(frame)
}

/// One Check on `sender`: the size of its `CheckResponse`, or what was wrong with the answer.
async fn check(
    sender: &mut h2::client::SendRequest<Bytes>,
    uri: &http::Uri,
    frame: &Bytes,
) -> Result<usize, String> {
    let request = http::Request::post(uri.clone())
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .expect("request");
    let ready = sender.clone().ready().await.map_err(|e| e.to_string())?;
    *sender = ready;
    let (response, mut stream) = sender
        .send_request(request, false)
        .map_err(|e| e.to_string())?;
    stream
        .send_data(frame.clone(), true)
        .map_err(|e| e.to_string())?;
    let response = response.await.map_err(|e| e.to_string())?;
    if response.status() != 200 {
        return Err(format!("HTTP {}", response.status()));
    }
    let mut body = response.into_body();
    let mut data = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| e.to_string())?;
        let _ = body.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await.map_err(|e| e.to_string())?;
    let status = trailers
        .as_ref()
        .and_then(|t| t.get("grpc-status"))
        .map(|v| v.to_str().unwrap_or("?").to_owned());
    if status.as_deref() != Some("0") {
        return Err(format!("grpc-status {status:?}"));
    }
    if data.len() < 5 {
        return Err("no message".to_owned());
    }
    let answer = CheckResponse::decode(&data[5..]).map_err(|e| e.to_string())?;
    match answer.status.map(|s| s.code) {
        Some(0) => Ok(data.len() - 5),
        other => Err(format!("not allowed: status {other:?}")),
    }
}

async fn connect(addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.set_nodelay(true).expect("nodelay");
    let (sender, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    sender
}

fn main() {
    let addr: SocketAddr = env("EXT_AUTHZ_ADDR", "127.0.0.1:9191".parse().expect("address"));
    let seconds: u64 = env("SECONDS", 8);
    let rate: u64 = env("RATE", 0);
    let conns: usize = env("CONNS", 2);
    let streams: usize = env("STREAMS", 16);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let frame = check_frame();
    let uri: http::Uri = format!("http://{addr}{PATH}").parse().expect("uri");
    let (mut latencies, elapsed, failures, answer_bytes) = runtime.block_on(async move {
        let mut senders = Vec::new();
        for _ in 0..conns {
            senders.push(connect(addr).await);
        }
        // The first Check makes the decision that the rest find in the cache.
        let answer_bytes = check(&mut senders[0], &uri, &frame)
            .await
            .expect("the first Check is allowed");
        let latencies = Arc::new(Mutex::new(Vec::<u32>::new()));
        let failures = Arc::new(Mutex::new(Vec::<String>::new()));
        let start = Instant::now();
        let end = start + Duration::from_secs(seconds);
        let mut tasks = Vec::new();
        if rate == 0 {
            for sender in &senders {
                for _ in 0..streams {
                    let (mut sender, uri, frame) = (sender.clone(), uri.clone(), frame.clone());
                    let (latencies, failures) = (Arc::clone(&latencies), Arc::clone(&failures));
                    tasks.push(tokio::spawn(async move {
                        let mut mine = Vec::new();
                        while Instant::now() < end {
                            let sent = Instant::now();
                            match check(&mut sender, &uri, &frame).await {
                                Ok(_) => mine.push(micros(sent.elapsed())),
                                Err(e) => failures.lock().await.push(e),
                            }
                        }
                        latencies.lock().await.extend(mine);
                    }));
                }
            }
        } else {
            let in_flight = Arc::new(tokio::sync::Semaphore::new(conns * 256));
            let interval = Duration::from_secs_f64(1.0 / rate as f64);
            let total = rate * seconds;
            // The schedule is kept by spinning (this thread has a core of its own), not by
            // tokio's timer, whose 1 ms resolution would send the Checks in bursts and count
            // the timer's lateness as the face's.
            let mut next = 0;
            while next < total {
                let i = next;
                let due = start + interval.mul_f64(i as f64);
                if Instant::now() < due {
                    tokio::task::yield_now().await;
                    continue;
                }
                next += 1;
                let permit = Arc::clone(&in_flight)
                    .acquire_owned()
                    .await
                    .expect("semaphore");
                let mut sender = senders[i as usize % conns].clone();
                let (uri, frame) = (uri.clone(), frame.clone());
                let (latencies, failures) = (Arc::clone(&latencies), Arc::clone(&failures));
                tasks.push(tokio::spawn(async move {
                    let result = check(&mut sender, &uri, &frame).await;
                    let took = micros(due.elapsed());
                    drop(permit);
                    match result {
                        Ok(_) => latencies.lock().await.push(took),
                        Err(e) => failures.lock().await.push(e),
                    }
                }));
            }
        }
        for task in tasks {
            task.await.expect("task");
        }
        let elapsed = start.elapsed();
        let latencies = std::mem::take(&mut *latencies.lock().await);
        let failures = std::mem::take(&mut *failures.lock().await);
        (latencies, elapsed, failures, answer_bytes)
    });
    if !failures.is_empty() {
        eprintln!(
            "{} Checks failed, the first: {}",
            failures.len(),
            failures[0]
        );
        std::process::exit(1);
    }
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "{{\"checks\":{},\"seconds\":{:.3},\"per_second\":{:.0},\"rate\":{rate},\"conns\":{conns},\"streams\":{streams},\"p50_us\":{},\"p90_us\":{},\"p99_us\":{},\"p999_us\":{},\"max_us\":{},\"answer_bytes\":{answer_bytes}}}",
        latencies.len(),
        elapsed.as_secs_f64(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        at(0.5),
        at(0.9),
        at(0.99),
        at(0.999),
        latencies.last().copied().unwrap_or(0)
    );
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}
