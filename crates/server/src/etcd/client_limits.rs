//! Bounds on what clients of the etcd API can hold open, so that a
//! client (abusive or broken) cannot exhaust a member's memory or file
//! descriptors:
//!
//! - **Connections**: at most `client_connections_max` open at once
//!   (default [`CLIENT_CONNECTIONS_MAX_DEFAULT`]). Past it a new connection
//!   is accepted and closed at once, so its client fails fast (gRPC
//!   `Unavailable`) and can try another member, instead of hanging in the
//!   kernel's backlog. The refusal is logged (the first, then every
//!   thousandth). A failed accept (no file descriptor left) pauses
//!   accepting for 50 ms instead of spinning; `bellwether node` raises its
//!   open-files limit to the hard limit at start. Connections are not
//!   timed out while idle (etcd does not either): the bound is the count.
//! - **Streams per connection**: [`STREAMS_PER_CONNECTION_MAX`], announced
//!   in HTTP/2's `SETTINGS_MAX_CONCURRENT_STREAMS`. Clients queue calls
//!   past it; a client that ignores the setting gets `REFUSED_STREAM`,
//!   which gRPC clients report as `Unavailable`.
//!
//! The other client bounds live with what they bound: watchers per stream
//! (`watch_service::WATCHERS_PER_STREAM_MAX`), live leases
//! (`bellwether_kv::LEASES_MAX`) and request size
//! (`GRPC_MESSAGE_BYTES_MAX`), each answered with etcd's error.

use futures_core::Stream;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::url_authority::UrlAuthorityRepair;

/// Client connections a member holds open at once, by default.
pub const CLIENT_CONNECTIONS_MAX_DEFAULT: usize = 1024;
/// Concurrent gRPC calls (HTTP/2 streams) per client connection.
pub const STREAMS_PER_CONNECTION_MAX: u32 = 512;

/// The client port's accepted connections, at most `max` open at once.
pub struct LimitedIncoming {
    listener: TcpListener,
    permits: Arc<Semaphore>,
    max: usize,
    refused: Arc<AtomicU64>,
    /// After a failed accept (out of file descriptors, say), the next one
    /// waits for this, so the accept loop does not spin.
    backoff: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// How long accepting pauses after an accept error.
const ACCEPT_ERROR_BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);

impl LimitedIncoming {
    /// Accepts on `listener`, holding at most `max` connections.
    pub fn new(listener: TcpListener, max: usize) -> LimitedIncoming {
        assert!(
            max > 0,
            "a client port that holds no connection serves nothing"
        );
        LimitedIncoming {
            listener,
            permits: Arc::new(Semaphore::new(max)),
            max,
            refused: Arc::new(AtomicU64::new(0)),
            backoff: None,
        }
    }

    /// Connections refused so far for being over the limit.
    pub fn refused(&self) -> Arc<AtomicU64> {
        self.refused.clone()
    }
}

impl Stream for LimitedIncoming {
    type Item = io::Result<LimitedConnection>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(backoff) = &mut this.backoff {
                if backoff.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.backoff = None;
            }
            let (stream, remote) = match this.listener.poll_accept(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(error)) => {
                    tracing::warn!(%error, "client port: accept failed; pausing accepts briefly");
                    this.backoff = Some(Box::pin(tokio::time::sleep(ACCEPT_ERROR_BACKOFF)));
                    continue;
                }
                Poll::Ready(Ok(accepted)) => accepted,
            };
            match this.permits.clone().try_acquire_owned() {
                Ok(permit) => {
                    let _ = stream.set_nodelay(true);
                    return Poll::Ready(Some(Ok(LimitedConnection {
                        stream,
                        _permit: permit,
                        repair: Some(Box::default()),
                        repaired: Vec::new(),
                        repaired_at: 0,
                    })));
                }
                Err(_) => {
                    let refused = this.refused.fetch_add(1, Ordering::Relaxed);
                    if refused.is_multiple_of(1000) {
                        tracing::warn!(%remote, limit = this.max, refused = refused + 1, "refused a client connection: too many open (client_connections_max)");
                    }
                    drop(stream); // Closed at once: the client fails fast.
                }
            }
        }
    }
}

/// An accepted client connection; frees its slot when dropped.
///
/// What the client sends goes through [`UrlAuthorityRepair`] until the
/// filter steps aside (after the first request, for every client but etcd
/// 3.4's Go client dialing a member by URL).
pub struct LimitedConnection {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
    repair: Option<Box<UrlAuthorityRepair>>,
    /// Bytes the filter let through, from `repaired_at` on not yet read.
    repaired: Vec<u8>,
    repaired_at: usize,
}

/// How much a filtered connection reads from the socket at a time.
const FILTERED_READ_BYTES: usize = 16 * 1024;

impl tonic::transport::server::Connected for LimitedConnection {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        <TcpStream as tonic::transport::server::Connected>::connect_info(&self.stream)
    }
}

impl AsyncRead for LimitedConnection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.repaired_at < this.repaired.len() {
                let ready = &this.repaired[this.repaired_at..];
                let given = ready.len().min(buf.remaining());
                buf.put_slice(&ready[..given]);
                this.repaired_at += given;
                if this.repaired_at == this.repaired.len() {
                    this.repaired.clear();
                    this.repaired_at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let Some(repair) = &mut this.repair else {
                return Pin::new(&mut this.stream).poll_read(cx, buf);
            };
            let mut chunk = [0u8; FILTERED_READ_BYTES];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.stream).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Ready(Ok(())) => {}
            }
            if read.filled().is_empty() {
                // End of stream: whatever the filter still holds goes on
                // (the server will find it incomplete), then the end.
                let mut rest = Vec::new();
                repair.finish(&mut rest);
                this.repair = None;
                this.repaired = rest;
                if this.repaired.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            repair.push(read.filled(), &mut this.repaired);
            if repair.is_aside() {
                this.repair = None;
            }
            if this.repaired.is_empty() {
                // Held back (half a frame): read on.
                continue;
            }
        }
    }
}

impl AsyncWrite for LimitedConnection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
