//! The service's logs captured in memory as JSON lines (tracing's own JSON format), for tests
//! that assert what a request leaves in the audit record and the access line.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// Everything written through the capture.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("capture").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// The lines whose message is `message`, parsed.
    pub fn lines(&self, message: &str) -> Vec<serde_json::Value> {
        let text = String::from_utf8_lossy(&self.0.lock().expect("capture")).into_owned();
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["fields"]["message"] == message)
            .collect()
    }

    /// How many lines have `message`.
    pub fn count(&self, message: &str) -> usize {
        self.lines(message).len()
    }
}

/// Logs captured as JSON lines, up to DEBUG, for the rest of the calling thread's test (while
/// the guard lives).
pub fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
    let captured = Captured::default();
    let guard = tracing::subscriber::set_default(subscriber(&captured));
    tracing::callsite::rebuild_interest_cache();
    (captured, guard)
}

/// A subscriber writing every event up to DEBUG into `captured`, as JSON lines.
pub fn subscriber(captured: &Captured) -> impl tracing::Subscriber + Send + Sync + 'static {
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(move || writer.clone())
        .finish()
}

/// Every log line of this test binary, as JSON lines: a global subscriber installed on first
/// call, for all threads (call it before the first request whose lines are read).
pub fn global() -> &'static Captured {
    static LOGS: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let captured = Captured::default();
        tracing::subscriber::set_global_default(subscriber(&captured))
            .expect("one global subscriber");
        captured
    })
}
