//! A fault proxy that speaks RESP, between a gateway and a real Redis: it forwards every byte
//! and reads each direction as RESP values, so that it knows which reply answers which
//! command, and on request drops the next reply to an `EVALSHA` (a lost reply), or replaces
//! it with the head of a 2 GB bulk string followed by as many bytes as the gateway reads.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bytes of the "2 GB" reply the proxy sends at most (it stops when the gateway stops reading
/// or closes).
const HUGE_SENT_AT_MOST: u64 = 512 * 1024 * 1024;

#[derive(Default)]
pub struct Faults {
    /// Drop the next reply to an EVALSHA.
    pub drop_next_evalsha_reply: AtomicBool,
    /// Replace the next reply to an EVALSHA with a bulk string of 2,000,000,000 bytes.
    pub huge_next_evalsha_reply: AtomicBool,
    /// Replies dropped so far.
    pub dropped: AtomicU64,
    /// Bytes of the huge reply the gateway took before it closed the connection.
    pub huge_bytes_taken: AtomicU64,
    /// Connections accepted from the gateway.
    pub connections: AtomicU64,
    /// Milliseconds every reply to an EVALSHA is held back (0: none): a Redis slower than the
    /// budget, alive.
    pub evalsha_delay_ms: AtomicU64,
}

pub struct RespProxy {
    pub addr: SocketAddr,
    pub faults: Arc<Faults>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RespProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RespProxy {
    pub async fn start(redis: SocketAddr) -> RespProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let faults = Arc::new(Faults::default());
        let shared = faults.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                shared.connections.fetch_add(1, Ordering::Relaxed);
                let faults = shared.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(redis).await {
                        relay(client, server, faults).await;
                    }
                });
            }
        });
        RespProxy { addr, faults, task }
    }
}

async fn relay(client: TcpStream, server: TcpStream, faults: Arc<Faults>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let (names, mut pending) = tokio::sync::mpsc::unbounded_channel::<String>();
    // Commands: forwarded as they are; each complete one's name queued for its reply.
    let upstream = tokio::spawn(async move {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 16 * 1024];
        loop {
            let n = match client_read.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if server_write.write_all(&chunk[..n]).await.is_err() {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            while let Some((len, name)) = value(&buf) {
                let _ = names.send(name.unwrap_or_default().to_ascii_uppercase());
                buf.drain(..len);
            }
        }
    });
    // Replies: each matched with its command's name, then forwarded, dropped or replaced.
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    'relay: loop {
        let n = match server_read.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        while let Some((len, _)) = value(&buf) {
            let reply: Vec<u8> = buf.drain(..len).collect();
            let command = pending.recv().await.unwrap_or_default();
            if command == "EVALSHA" && faults.drop_next_evalsha_reply.swap(false, Ordering::SeqCst)
            {
                faults.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if command == "EVALSHA" && faults.huge_next_evalsha_reply.swap(false, Ordering::SeqCst)
            {
                if client_write.write_all(b"$2000000000\r\n").await.is_err() {
                    break 'relay;
                }
                let zeros = vec![0u8; 64 * 1024];
                let mut sent = 0u64;
                while sent < HUGE_SENT_AT_MOST {
                    if client_write.write_all(&zeros).await.is_err() {
                        break;
                    }
                    sent += zeros.len() as u64;
                }
                faults.huge_bytes_taken.store(sent, Ordering::Relaxed);
                break 'relay;
            }
            let delay = faults.evalsha_delay_ms.load(Ordering::Relaxed);
            if command == "EVALSHA" && delay > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
            }
            if client_write.write_all(&reply).await.is_err() {
                break 'relay;
            }
        }
    }
    upstream.abort();
}

/// The length of the first complete RESP value in `buf`, and for an array whose first element
/// is a bulk string, that string (a command's name); `None` when incomplete.
fn value(buf: &[u8]) -> Option<(usize, Option<String>)> {
    let line_end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&buf[1..line_end]).ok()?;
    let after = line_end + 2;
    match buf.first()? {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Some((after, None)),
        b'$' | b'!' | b'=' => {
            let n: i64 = line.parse().ok()?;
            if n < 0 {
                return Some((after, None));
            }
            let end = after + usize::try_from(n).ok()? + 2;
            (buf.len() >= end).then(|| {
                (
                    end,
                    Some(String::from_utf8_lossy(&buf[after..end - 2]).into_owned()),
                )
            })
        }
        b'*' | b'~' | b'>' | b'%' => {
            let n: i64 = line.parse().ok()?;
            let count = if buf[0] == b'%' { n * 2 } else { n };
            let mut at = after;
            let mut first = None;
            for i in 0..count.max(0) {
                let (len, text) = value(&buf[at..])?;
                if i == 0 {
                    first = text;
                }
                at += len;
            }
            Some((at, first))
        }
        _ => Some((buf.len(), None)),
    }
}
