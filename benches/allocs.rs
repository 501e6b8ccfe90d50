//! Heap allocations per request, counted by dhat's global allocator over every thread of the
//! process (the workers, the blocking pool, the log writer): the cached check endpoint against
//! the admin listener's `/healthz` (a bare handler) in the same process (issue 28: "no
//! allocation per request beyond the response itself").
//!
//! Run: `cargo bench --bench allocs 2>&1 | tail -3` (the service's JSON log and the figures
//! both go to stderr; the log's formatting is part of what a request costs). It serves the sandbox (gateway.toml) on its own ports, 8080, 8443
//! and 9090 (the sandbox PKI's CRL and OCSP URLs name 9090), so nothing else may hold them.
//! The client is a plain socket with one request written and each answer read into a buffer
//! on the stack: it allocates nothing itself.
//!
//! `ALLOCS_SITES=FILE` writes dhat's profile of the whole run (its allocation sites with
//! their call stacks) to FILE as well: `benches/dhat_sites.py FILE` lists the sites that
//! allocate once or more per request.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const WARM_UP: u64 = 1_000;
const REQUESTS: u64 = 10_000;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Writes `request` and reads one whole answer (its head and `Content-Length` bytes) into a
/// buffer on the stack; the status.
fn exchange(stream: &mut TcpStream, request: &[u8]) -> u16 {
    stream.write_all(request).expect("write");
    let mut buf = [0u8; 16 * 1024];
    let mut filled = 0;
    loop {
        let n = stream.read(&mut buf[filled..]).expect("read");
        assert!(n > 0, "closed");
        filled += n;
        let Some(end) = buf[..filled].windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = std::str::from_utf8(&buf[..end]).expect("ASCII head");
        let status: u16 = head[9..12].parse().expect("status");
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .unwrap_or(0);
        while filled < end + 4 + length {
            let n = stream.read(&mut buf[filled..]).expect("read body");
            assert!(n > 0, "closed in the body");
            filled += n;
        }
        return status;
    }
}

/// Allocations and bytes allocated per request over `REQUESTS` exchanges of `request` on one
/// keep-alive connection, after `WARM_UP` of them.
fn per_request(stream: &mut TcpStream, request: &[u8], expect: u16) -> (f64, f64) {
    for _ in 0..WARM_UP {
        assert_eq!(exchange(stream, request), expect);
    }
    let before = dhat::HeapStats::get();
    for _ in 0..REQUESTS {
        assert_eq!(exchange(stream, request), expect);
    }
    let after = dhat::HeapStats::get();
    (
        (after.total_blocks - before.total_blocks) as f64 / REQUESTS as f64,
        (after.total_bytes - before.total_bytes) as f64 / REQUESTS as f64,
    )
}

fn main() {
    let _profiler = match std::env::var_os("ALLOCS_SITES") {
        Some(file) => dhat::Profiler::builder()
            .file_name(PathBuf::from(file))
            .trim_backtraces(Some(24))
            .build(),
        None => dhat::Profiler::builder().testing().build(),
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let _logs = psp_service::telemetry::init_with_audit(None);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let config = psp_gateway::Config::load(&root().join("gateway.toml")).expect("gateway.toml");
    let running = runtime
        .block_on(psp_gateway::app::start(config))
        .expect("the sandbox starts");
    let (api, admin) = (running.api.expect("api"), running.admin.expect("admin"));
    let connect = |addr: SocketAddr| {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        s
    };

    let pem = std::fs::read(root().join("certs/psp/valid.pem")).expect("PSP certificate");
    let der = psp_cert::cert::PspCertificate::parse(&pem)
        .expect("parses")
        .der;
    let eidas = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, der);
    let endpoint = format!(
        "GET /v1/psp/eidas?jurisdiction=XX HTTP/1.1\r\nhost: localhost\r\nauthorization: Basic c2FuZGJveDpzYW5kYm94\r\nfi_reference_id: ALLOCS-1\r\neidas: {eidas}\r\n\r\n"
    );
    let healthz = b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n";

    let (endpoint_allocs, endpoint_bytes) =
        per_request(&mut connect(api), endpoint.as_bytes(), 200);
    let (bare_allocs, bare_bytes) = per_request(&mut connect(admin), healthz, 200);
    eprintln!("allocations per request, {REQUESTS} requests on one keep-alive connection:");
    eprintln!(
        "  /v1/psp/eidas, cached:         {endpoint_allocs:7.1} allocations, {endpoint_bytes:8.0} bytes"
    );
    eprintln!(
        "  /healthz (a bare handler):     {bare_allocs:7.1} allocations, {bare_bytes:8.0} bytes"
    );
    runtime.block_on(running.stop());
}
