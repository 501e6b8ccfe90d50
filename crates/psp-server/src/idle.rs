//! Connection idleness measured in requests, not bytes.
//!
//! An HTTP/2 client can keep a connection "active" forever with PING or SETTINGS frames and
//! never send a request; counting bytes would let it hold a connection slot indefinitely.
//! Here a connection is idle when no request is in progress and none started or finished
//! within the idle timeout; a connection that has not started a request within the
//! first-request deadline is idle too. The service wrapper marks requests (a [`InFlight`]
//! guard lives as long as the handler and then the response body), and the per-connection
//! watchdog ([`RequestTracker::idle`]) resolves when the connection should be closed.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::Instant;

use super::{Body, BodyError};

/// Requests on one connection: how many are in progress, how many started, and when the
/// last one started or finished.
pub(super) struct RequestTracker {
    start: Instant,
    in_flight: AtomicUsize,
    started: AtomicU64,
    /// Milliseconds since `start` at the last request start or end.
    last: AtomicU64,
    /// Told when the first request starts: the watchdog waiting for the first-request
    /// deadline must then measure idleness from requests instead (a later start or end needs
    /// no wake: the watchdog re-checks by then).
    first: tokio::sync::Notify,
    /// Times the connection was parked (`connection`).
    parks: AtomicU64,
}

impl RequestTracker {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(RequestTracker {
            start: Instant::now(),
            in_flight: AtomicUsize::new(0),
            started: AtomicU64::new(0),
            last: AtomicU64::new(0),
            first: tokio::sync::Notify::new(),
            parks: AtomicU64::new(0),
        })
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.fetch_max(ms, Ordering::Relaxed);
    }

    /// A request starts; it is in progress until the guard is dropped.
    pub(super) fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.touch();
        if self.started.fetch_add(1, Ordering::AcqRel) == 0 {
            // A permit is kept if the watchdog is not waiting yet: no wake is lost.
            self.first.notify_one();
        }
        InFlight {
            tracker: self.clone(),
        }
    }

    pub(super) fn requests_started(&self) -> u64 {
        self.started.load(Ordering::Acquire)
    }

    /// The connection was parked once more.
    pub(super) fn parked(&self) {
        self.parks.fetch_add(1, Ordering::Relaxed);
    }

    /// Times the connection was parked.
    #[cfg(test)]
    pub(super) fn parks(&self) -> u64 {
        self.parks.load(Ordering::Relaxed)
    }

    pub(super) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Resolves when the connection is idle: no request within `first_request` of the
    /// connection's start, or, after one, none in progress and none started or finished for
    /// `idle`. While a request is in progress this only re-checks, every `idle`.
    pub(super) async fn idle(&self, idle: Duration, first_request: Duration) {
        loop {
            let now = Instant::now();
            let deadline = if self.in_flight() > 0 {
                now + idle
            } else if self.requests_started() == 0 {
                self.start + first_request
            } else {
                self.start + Duration::from_millis(self.last.load(Ordering::Relaxed)) + idle
            };
            if self.in_flight() == 0 && now >= deadline {
                return;
            }
            let sleep = tokio::time::sleep_until(deadline.max(now + Duration::from_millis(1)));
            if self.requests_started() == 0 {
                // Waiting for the first request: its arrival changes the deadline, which may
                // then be much nearer (an idle timeout shorter than the first-request one).
                tokio::select! {
                    () = sleep => {}
                    () = self.first.notified() => {}
                }
            } else {
                sleep.await;
            }
        }
    }

    /// Resolves when no request is in progress and none started or finished for `quiet`,
    /// counted from `since` at the earliest (when hyper began serving the connection).
    pub(super) async fn quiet(&self, quiet: Duration, since: Instant) {
        loop {
            let now = Instant::now();
            let last = self.start + Duration::from_millis(self.last.load(Ordering::Relaxed));
            let deadline = if self.in_flight() > 0 {
                now + quiet
            } else {
                last.max(since) + quiet
            };
            if self.in_flight() == 0 && now >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline.max(now + Duration::from_millis(1))).await;
        }
    }
}

/// A request in progress on its connection.
pub(super) struct InFlight {
    tracker: Arc<RequestTracker>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.tracker.touch();
        self.tracker.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request in progress until the body is finished or
/// dropped (streamed upstream bodies take as long as they take).
pub struct TrackedBody {
    inner: Body,
    _in_flight: InFlight,
}

impl TrackedBody {
    pub(super) fn new(inner: Body, in_flight: InFlight) -> Self {
        TrackedBody {
            inner,
            _in_flight: in_flight,
        }
    }
}

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // On the paused clock: each wait ends exactly at its deadline, so the times are asserted
    // as equalities, never as bounds on a measured duration.

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_requests_is_idle_at_the_first_request_deadline() {
        let t = RequestTracker::new();
        let begun = Instant::now();
        tokio::time::timeout(
            Duration::from_secs(20),
            t.idle(Duration::from_secs(60), Duration::from_millis(200)),
        )
        .await
        .expect("idle by the first-request deadline, not the idle timeout");
        assert_eq!(Instant::now() - begun, Duration::from_millis(200));
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_first_request_idleness_counts_from_it_not_from_the_first_request_deadline() {
        let t = RequestTracker::new();
        let connected = Instant::now();
        let watch = {
            let t = t.clone();
            tokio::spawn(async move {
                t.idle(Duration::from_millis(400), Duration::from_secs(10))
                    .await;
                Instant::now()
            })
        };
        // The watchdog waits for the first-request deadline; the request comes at 1 s.
        tokio::time::sleep(Duration::from_secs(1)).await;
        drop(t.begin());
        let idle_at = watch.await.expect("watchdog");
        assert_eq!(
            idle_at - connected,
            Duration::from_millis(1_400),
            "idle 400 ms after the request, not at the 10 s first-request deadline"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_progress_is_never_idle_and_idleness_counts_from_its_end() {
        let t = RequestTracker::new();
        let guard = t.begin();
        let watch = {
            let t = t.clone();
            tokio::spawn(async move {
                t.idle(Duration::from_millis(100), Duration::from_millis(50))
                    .await;
                Instant::now()
            })
        };
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(!watch.is_finished(), "a request in progress keeps it open");
        let ended = Instant::now();
        drop(guard);
        let idle_at = tokio::time::timeout(Duration::from_secs(20), watch)
            .await
            .expect("idle after the request")
            .expect("watchdog");
        assert_eq!(
            idle_at - ended,
            Duration::from_millis(100),
            "the idle timeout after the request's end"
        );
        assert_eq!(t.in_flight(), 0);
        assert_eq!(t.requests_started(), 1);
    }
}
