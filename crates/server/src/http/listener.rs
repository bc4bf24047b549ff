//! A TCP listener that bounds what HTTP clients can hold: how many
//! connections are open at once, and how long each may sit idle.
//!
//! axum's own `TcpListener` accepts without limit and hyper sets no read
//! timeout unless given a timer, so a few hundred idle sockets (or one
//! slow-loris client) could exhaust file descriptors on a node whose real
//! job is Raft. Here every accepted stream carries a semaphore permit, and
//! a stream that moves no byte for `idle_max` fails with `TimedOut`, which
//! makes hyper drop the connection.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// Accepts connections only while fewer than `connections_max` are open.
#[derive(Debug)]
pub(crate) struct BoundedListener {
    /// The socket connections arrive on.
    listener: TcpListener,
    /// One permit per open connection; accepting waits for a free one, so
    /// excess clients queue in the kernel's backlog.
    permits: Arc<Semaphore>,
    /// Longest a connection may go without reading or writing.
    idle_max: Duration,
}

impl BoundedListener {
    /// Wraps `listener`.
    pub(crate) fn new(listener: TcpListener, connections_max: usize, idle_max: Duration) -> Self {
        assert!(
            connections_max > 0,
            "a listener that may hold no connection serves nothing"
        );
        assert!(
            !idle_max.is_zero(),
            "a zero idle limit would close every connection at once"
        );
        Self {
            listener,
            permits: Arc::new(Semaphore::new(connections_max)),
            idle_max,
        }
    }
}

impl axum::serve::Listener for BoundedListener {
    type Io = BoundedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        // Both awaits are cancel-safe: axum drops this future on shutdown.
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .expect("the connection semaphore is never closed");
        // axum's accept retries transient errors and backs off on EMFILE.
        let (stream, address) = axum::serve::Listener::accept(&mut self.listener).await;
        let stream = BoundedStream {
            stream,
            idle_max: self.idle_max,
            idle_deadline: Box::pin(tokio::time::sleep(self.idle_max)),
            _permit: permit,
        };
        (stream, address)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// An accepted connection that holds its permit until dropped and fails
/// once idle for too long.
#[derive(Debug)]
pub(crate) struct BoundedStream {
    /// The connection itself.
    stream: TcpStream,
    /// Idle limit, copied from the listener to re-arm the deadline.
    idle_max: Duration,
    /// Fires `idle_max` after the last byte moved; re-armed on progress.
    idle_deadline: Pin<Box<Sleep>>,
    /// Released on drop, letting the listener accept another connection.
    _permit: OwnedSemaphorePermit,
}

impl BoundedStream {
    /// Records progress: the connection is not idle.
    fn touch(&mut self) {
        let deadline = Instant::now() + self.idle_max;
        self.idle_deadline.as_mut().reset(deadline);
    }

    /// Called when the stream would block: errors once the deadline passed,
    /// else registers the deadline's wakeup alongside the socket's.
    fn poll_idle<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match self.idle_deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "http connection idle for too long",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Shared tail of every poll: progress re-arms the deadline, blocking
    /// checks it.
    fn settle<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match polled {
            Poll::Ready(result) => {
                self.touch();
                Poll::Ready(result)
            }
            Poll::Pending => self.poll_idle(cx),
        }
    }
}

impl AsyncRead for BoundedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        this.settle(cx, polled)
    }
}

impl AsyncWrite for BoundedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.settle(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.settle(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_flush(cx);
        this.settle(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_shutdown(cx);
        this.settle(cx, polled)
    }
}
