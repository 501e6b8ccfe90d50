//! Waiting for events, never for a fixed time: bounded polls of a condition (for state only
//! visible by asking, or owned by another process) and a gate that holds answers until the
//! test releases it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// How often [`until`] and [`until_blocking`] ask their condition again.
const POLL: Duration = Duration::from_millis(10);

/// Waits until `condition` holds, asking every 10 ms for at most `limit` of tokio's clock
/// (under a paused clock the polls cost no real time); panics naming `what` past the limit.
pub async fn until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if condition() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {limit:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Like [`until`], for a condition that is itself async (a request to a running service).
/// Returns the first `Some` the condition gives.
pub async fn until_some<T, F, Fut>(what: &str, limit: Duration, mut condition: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = condition().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {limit:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Waits on this thread (wall clock) until `condition` gives `Some`, for at most `limit`:
/// for state owned by another process (a spawned binary's port, log or files). Returns the
/// value, or `None` past the limit so the caller can say what it saw.
pub fn until_blocking<T>(limit: Duration, mut condition: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = condition() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL);
    }
}

/// A gate that holds whoever waits on it until it is opened (once, for good): a test server's
/// answer held back until the test has its callers in place, instead of a delay.
#[derive(Clone)]
pub struct Gate {
    open: Arc<watch::Sender<bool>>,
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Gate {
            open: Arc::new(watch::channel(false).0),
        }
    }

    /// Opens the gate: every waiter, present and future, goes through.
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// Waits until the gate is opened (forever, if it never is).
    pub async fn wait(&self) {
        let mut opened = self.open.subscribe();
        let _ = opened.wait_for(|open| *open).await;
    }
}
