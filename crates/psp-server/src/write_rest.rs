//! Writing out bytes held by a wrapper of a connection across polls: the framing guard's
//! refusal answer, the ext_authz face's held writes.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::AsyncWrite;

/// Writes `bytes[*written..]` to `out`, advancing `*written` as `out` takes them, until all
/// are written. `Pending` keeps the count, so the next poll goes on from there; an `out` that
/// takes nothing is `WriteZero`.
pub fn poll_write_rest<W: AsyncWrite + Unpin>(
    out: &mut W,
    cx: &mut Context<'_>,
    bytes: &[u8],
    written: &mut usize,
) -> Poll<io::Result<()>> {
    while *written < bytes.len() {
        let n = ready!(Pin::new(&mut *out).poll_write(cx, &bytes[*written..]))?;
        if n == 0 {
            return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
        }
        *written += n;
    }
    Poll::Ready(Ok(()))
}
