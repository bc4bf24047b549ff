//! A TCP listener that bounds what HTTP clients can hold: how many
//! connections are open at once, and how long each may sit idle.
//!
//! axum's own `TcpListener` accepts without limit and hyper sets no read
//! timeout unless given a timer, so a few hundred idle sockets (or one
//! slow-loris client) could exhaust file descriptors on a node whose real
//! job is Raft. Here every accepted stream carries a semaphore permit, and
//! a stream that moves no byte for `idle_max` fails with `TimedOut`, which
//! makes hyper drop the connection.
//!
//! With TLS, the handshake runs inside the stream on its first read or
//! write, not in `accept`: a client that stalls its handshake holds only
//! its own connection (and the idle limit ends it), never the accept loop.

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
pub(crate) struct BoundedListener {
    /// The socket connections arrive on.
    listener: TcpListener,
    /// One permit per open connection; accepting waits for a free one, so
    /// excess clients queue in the kernel's backlog.
    permits: Arc<Semaphore>,
    /// Longest a connection may go without reading or writing.
    idle_max: Duration,
    /// TLS for every connection, if set.
    tls: Option<tokio_rustls::TlsAcceptor>,
}

impl std::fmt::Debug for BoundedListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedListener")
            .field("listener", &self.listener)
            .field("idle_max", &self.idle_max)
            .field("tls", &self.tls.is_some())
            .finish()
    }
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
            tls: None,
        }
    }

    /// Serves TLS with `config` on every connection.
    pub(crate) fn with_tls(mut self, config: Arc<rustls::ServerConfig>) -> Self {
        self.tls = Some(tokio_rustls::TlsAcceptor::from(config));
        self
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
        let stream = match &self.tls {
            None => Io::Plain(stream),
            Some(acceptor) => Io::Handshaking(Box::new(acceptor.accept(stream))),
        };
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

/// The connection under a [`BoundedStream`].
enum Io {
    /// Plain TCP.
    Plain(TcpStream),
    /// A TLS handshake under way.
    Handshaking(Box<tokio_rustls::Accept<TcpStream>>),
    /// TLS, after the handshake.
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    /// The handshake failed; every call fails.
    Failed,
}

impl std::fmt::Debug for Io {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Io::Plain(_) => "Plain",
            Io::Handshaking(_) => "Handshaking",
            Io::Tls(_) => "Tls",
            Io::Failed => "Failed",
        })
    }
}

/// Calls `$poll` on the stream an [`Io`] holds once its handshake is done.
macro_rules! on_stream {
    ($this:expr, $cx:expr, |$s:ident| $poll:expr) => {{
        match $this.finish_handshake($cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
            Poll::Pending => return $this.poll_idle($cx),
        }
        let polled = match &mut $this.stream {
            Io::Plain($s) => $poll,
            Io::Tls(tls) => {
                let $s = &mut **tls;
                $poll
            }
            Io::Handshaking(_) | Io::Failed => unreachable!("the handshake finished"),
        };
        $this.settle($cx, polled)
    }};
}

/// An accepted connection that holds its permit until dropped and fails
/// once idle for too long.
#[derive(Debug)]
pub(crate) struct BoundedStream {
    /// The connection itself.
    stream: Io,
    /// Idle limit, copied from the listener to re-arm the deadline.
    idle_max: Duration,
    /// Fires `idle_max` after the last byte moved; re-armed on progress.
    idle_deadline: Pin<Box<Sleep>>,
    /// Released on drop, letting the listener accept another connection.
    _permit: OwnedSemaphorePermit,
}

impl BoundedStream {
    /// Drives a TLS handshake to its end; ready at once for plain TCP.
    fn finish_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.stream {
            Io::Plain(_) | Io::Tls(_) => Poll::Ready(Ok(())),
            Io::Failed => Poll::Ready(Err(io::Error::other("TLS handshake failed"))),
            Io::Handshaking(accept) => match Pin::new(&mut **accept).poll(cx) {
                Poll::Ready(Ok(tls)) => {
                    self.stream = Io::Tls(Box::new(tls));
                    self.touch();
                    Poll::Ready(Ok(()))
                }
                Poll::Ready(Err(error)) => {
                    tracing::debug!(%error, "http: TLS handshake failed");
                    self.stream = Io::Failed;
                    Poll::Ready(Err(error))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

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
        on_stream!(this, cx, |s| Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for BoundedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        on_stream!(this, cx, |s| Pin::new(s).poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        on_stream!(this, cx, |s| Pin::new(s).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match &self.stream {
            Io::Plain(stream) => stream.is_write_vectored(),
            Io::Tls(stream) => stream.is_write_vectored(),
            Io::Handshaking(_) | Io::Failed => false,
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        on_stream!(this, cx, |s| Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        on_stream!(this, cx, |s| Pin::new(s).poll_shutdown(cx))
    }
}
