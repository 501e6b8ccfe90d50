//! Writes held until h2's last flush of a round, so that one answer leaves in one write.
//!
//! h2 keeps a DATA frame's payload of 256 bytes or more apart from its frame buffer, and
//! writes it out (with a flush) before it buffers the next frame: a gRPC answer, its
//! HEADERS and DATA then its trailers, left in two writes (`strace`: a 10-byte `writev` for
//! the trailers after every Check), each waking the caller. [`HeldWrites`] takes what h2
//! writes into a buffer of its own and puts off the first flush of a round: it wakes the
//! task instead, so the bytes go out at the next flush, which comes in the same poll (h2
//! flushes again when it has buffered the trailers) or in the next one (h2 ends every poll
//! of its connection with a flush). Every flush after a put-off one writes, so bytes are
//! held for one flush at most, and a held byte is never left without a wake-up to send it.
//! At most [`HELD_MAX`] bytes are held; a larger write goes through after what is held.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most bytes held before they are written.
pub(crate) const HELD_MAX: usize = 64 * 1024;

/// `T`, its writes held until a flush ([module](self)).
pub(crate) struct HeldWrites<T> {
    inner: T,
    held: Vec<u8>,
    /// How much of `held` is written already.
    written: usize,
    /// A flush was put off, and the task woken for the next one.
    put_off: bool,
}

impl<T: AsyncWrite + Unpin> HeldWrites<T> {
    pub(crate) fn new(inner: T) -> HeldWrites<T> {
        HeldWrites {
            inner,
            held: Vec::new(),
            written: 0,
            put_off: false,
        }
    }

    /// Writes everything held.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(crate::server::poll_write_rest(
            &mut self.inner,
            cx,
            &self.held,
            &mut self.written
        ))?;
        self.held.clear();
        self.written = 0;
        if self.held.capacity() > HELD_MAX {
            self.held = Vec::new();
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for HeldWrites<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for HeldWrites<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if me.held.len() + len > HELD_MAX {
            ready!(me.poll_drain(cx))?;
            if len > HELD_MAX {
                return Pin::new(&mut me.inner).poll_write_vectored(cx, bufs);
            }
        }
        for buf in bufs {
            me.held.extend_from_slice(buf);
        }
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.held.is_empty() {
            me.put_off = false;
            return Pin::new(&mut me.inner).poll_flush(cx);
        }
        if !me.put_off {
            me.put_off = true;
            cx.waker().wake_by_ref();
            return Poll::Ready(Ok(()));
        }
        ready!(me.poll_drain(cx))?;
        me.put_off = false;
        Pin::new(&mut me.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(me.poll_drain(cx))?;
        Pin::new(&mut me.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Wake, Waker};

    /// A transport that records each write, and refuses (`Pending`) the next `stalls` writes.
    #[derive(Default)]
    struct Recorded {
        writes: Vec<Vec<u8>>,
        flushes: usize,
        shut: bool,
        stalls: usize,
    }

    impl AsyncWrite for Recorded {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            if self.stalls > 0 {
                self.stalls -= 1;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            // Takes at most 100 bytes a write, as a full socket would.
            let n = buf.len().min(100);
            self.writes.push(buf[..n].to_vec());
            Poll::Ready(Ok(n))
        }
        fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.flushes += 1;
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.shut = true;
            Poll::Ready(Ok(()))
        }
    }

    struct Wakes(AtomicUsize);
    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn context() -> (Arc<Wakes>, Waker) {
        let wakes = Arc::new(Wakes(AtomicUsize::new(0)));
        (Arc::clone(&wakes), Waker::from(wakes))
    }

    fn write(held: &mut HeldWrites<Recorded>, cx: &mut Context<'_>, bytes: &[u8]) {
        assert!(matches!(
            Pin::new(held).poll_write(cx, bytes),
            Poll::Ready(Ok(n)) if n == bytes.len()
        ));
    }

    fn flush(held: &mut HeldWrites<Recorded>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(held).poll_flush(cx)
    }

    /// h2's round: HEADERS and DATA, a flush (its buffer full), the trailers, a flush: one
    /// write; the first flush wakes the task.
    #[test]
    fn an_answer_and_its_trailers_leave_in_one_write() {
        let (wakes, waker) = context();
        let mut cx = Context::from_waker(&waker);
        let mut held = HeldWrites::new(Recorded::default());
        // As h2 writes a chained DATA frame: its head in one slice, its payload in another.
        let slices = [io::IoSlice::new(b"headers+"), io::IoSlice::new(b"data ")];
        assert!(matches!(
            Pin::new(&mut held).poll_write_vectored(&mut cx, &slices),
            Poll::Ready(Ok(13))
        ));
        assert!(matches!(flush(&mut held, &mut cx), Poll::Ready(Ok(()))));
        assert!(held.inner.writes.is_empty(), "the first flush is put off");
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "and the task woken");
        write(&mut held, &mut cx, b"trailers");
        assert!(matches!(flush(&mut held, &mut cx), Poll::Ready(Ok(()))));
        assert_eq!(held.inner.writes, vec![b"headers+data trailers".to_vec()]);
        assert_eq!(held.inner.flushes, 1);
        // Nothing held: a flush goes straight through, and wakes nothing.
        assert!(matches!(flush(&mut held, &mut cx), Poll::Ready(Ok(()))));
        assert_eq!(held.inner.flushes, 2);
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
    }

    /// A round with one flush: put off, the task woken, and the next poll's flush writes.
    #[test]
    fn bytes_are_held_for_one_flush_at_most() {
        let (wakes, waker) = context();
        let mut cx = Context::from_waker(&waker);
        let mut held = HeldWrites::new(Recorded::default());
        for round in 1..=3 {
            write(&mut held, &mut cx, b"answer");
            assert!(matches!(flush(&mut held, &mut cx), Poll::Ready(Ok(()))));
            assert_eq!(wakes.0.load(Ordering::SeqCst), round);
            assert!(matches!(flush(&mut held, &mut cx), Poll::Ready(Ok(()))));
            assert_eq!(held.inner.writes.len(), round);
        }
    }

    /// A transport that takes part of the bytes, or none for a while: nothing is lost or
    /// repeated, and the flush waits until all is written.
    #[test]
    fn a_slow_transport_gets_every_byte_once_in_order() {
        let (_wakes, waker) = context();
        let mut cx = Context::from_waker(&waker);
        let mut held = HeldWrites::new(Recorded {
            stalls: 2,
            ..Recorded::default()
        });
        let bytes: Vec<u8> = (0..250u8).collect();
        write(&mut held, &mut cx, &bytes);
        assert!(flush(&mut held, &mut cx).is_ready(), "put off");
        assert!(flush(&mut held, &mut cx).is_pending(), "stalled");
        assert!(flush(&mut held, &mut cx).is_pending(), "stalled");
        assert!(matches!(flush(&mut held, &mut cx), Poll::Ready(Ok(()))));
        assert_eq!(held.inner.writes.concat(), bytes);
        assert_eq!(held.inner.writes.len(), 3, "100 + 100 + 50");
    }

    /// A caller that never reads: once the transport takes nothing, a write that would hold
    /// more than [`HELD_MAX`] waits (`Pending`, nothing taken), so h2 stops there too and the
    /// bytes held stay within the bound however much is written.
    #[test]
    fn a_caller_that_never_reads_holds_at_most_held_max() {
        let (_wakes, waker) = context();
        let mut cx = Context::from_waker(&waker);
        let mut held = HeldWrites::new(Recorded {
            stalls: usize::MAX,
            ..Recorded::default()
        });
        let answer = [1u8; 3000];
        let mut taken = 0;
        for _ in 0..1000 {
            match Pin::new(&mut held).poll_write(&mut cx, &answer) {
                Poll::Ready(Ok(n)) => taken += n,
                Poll::Pending => break,
                Poll::Ready(Err(e)) => panic!("{e}"),
            }
        }
        assert!(
            Pin::new(&mut held)
                .poll_write(&mut cx, &answer)
                .is_pending()
        );
        // A flush puts off once, then waits on the transport: nothing is dropped for room.
        assert!(flush(&mut held, &mut cx).is_ready());
        assert!(flush(&mut held, &mut cx).is_pending());
        assert!(
            held.held.len() <= HELD_MAX,
            "{} bytes held",
            held.held.len()
        );
        assert_eq!(taken, held.held.len(), "what was taken is held, none lost");
        assert!(held.inner.writes.is_empty());
    }

    /// More than [`HELD_MAX`]: what is held goes first, then the large write itself; and a
    /// shutdown writes what is held before it shuts the transport.
    #[test]
    fn large_writes_go_through_and_shutdown_writes_what_is_held() {
        let (_wakes, waker) = context();
        let mut cx = Context::from_waker(&waker);
        let mut held = HeldWrites::new(Recorded::default());
        write(&mut held, &mut cx, b"first");
        let large = vec![7u8; HELD_MAX + 1];
        let Poll::Ready(Ok(n)) = Pin::new(&mut held).poll_write(&mut cx, &large) else {
            panic!("the large write");
        };
        assert_eq!(held.inner.writes[0], b"first");
        assert_eq!(held.inner.writes[1], vec![7u8; n]);
        write(&mut held, &mut cx, b"last");
        assert!(matches!(
            Pin::new(&mut held).poll_shutdown(&mut cx),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(held.inner.writes.last().unwrap(), b"last");
        assert!(held.inner.shut);
    }
}
