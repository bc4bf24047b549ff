//! Mutual TLS for peer connections, with rustls on ring.
//!
//! Both ends present a certificate signed by the group's CA and check the
//! other's: a node without one, or with one from another CA, is refused
//! during the TLS handshake, before it can send a byte of the peer
//! protocol. The dialer checks the server's certificate against the IP
//! address it dials, so a peer's certificate names its peer address (as a
//! subject alternative name), as etcd's peer certificates do.
//!
//! Plain connections keep Tokio's lock-free owned halves
//! ([`PeerStream::into_split`]); only TLS connections pay for the shared
//! halves a TLS session needs.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io;
use std::net::IpAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A TLS set-up that cannot be used, with what to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("peer TLS: {0}")]
pub struct TlsError(pub String);

/// The group's CA and this node's certificate, as both a TLS server (for
/// inbound connections) and a TLS client (for outbound ones).
#[derive(Clone)]
pub struct PeerTls {
    acceptor: tokio_rustls::TlsAcceptor,
    connector: tokio_rustls::TlsConnector,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerTls")
    }
}

impl PeerTls {
    /// Reads this node's certificate chain and key and the CA's
    /// certificates, all PEM files.
    pub fn load(cert: &Path, key: &Path, ca: &Path) -> Result<PeerTls, TlsError> {
        let read = |what: &str, path: &Path| {
            std::fs::read(path)
                .map_err(|e| TlsError(format!("cannot read the {what} {}: {e}", path.display())))
        };
        PeerTls::from_pem(
            &read("certificate", cert)?,
            &read("key", key)?,
            &read("CA file", ca)?,
        )
    }

    /// [`PeerTls::load`] from PEM bytes.
    pub fn from_pem(cert: &[u8], key: &[u8], ca: &[u8]) -> Result<PeerTls, TlsError> {
        let chain = certificates(cert, "certificate")?;
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|e| TlsError(format!("no usable private key in the key file: {e}")))?;
        let mut roots = rustls::RootCertStore::empty();
        for ca in certificates(ca, "CA file")? {
            roots
                .add(ca)
                .map_err(|e| TlsError(format!("a CA certificate is unusable: {e}")))?;
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            roots.clone(),
            provider.clone(),
        )
        .build()
        .map_err(|e| TlsError(format!("the CA cannot verify peers: {e}")))?;
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError(e.to_string()))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| TlsError(format!("the certificate does not match its key: {e}")))?;
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError(e.to_string()))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| TlsError(format!("the certificate does not match its key: {e}")))?;
        Ok(PeerTls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
            connector: tokio_rustls::TlsConnector::from(Arc::new(client)),
        })
    }

    /// The server side of the TLS handshake on an accepted connection.
    pub async fn accept(&self, stream: TcpStream) -> io::Result<PeerStream> {
        let tls = self.acceptor.accept(stream).await?;
        Ok(PeerStream::Tls(Box::new(tokio_rustls::TlsStream::Server(
            tls,
        ))))
    }

    /// The client side of the TLS handshake on a connection to `ip`, whose
    /// certificate must name that address.
    pub async fn connect(&self, ip: IpAddr, stream: TcpStream) -> io::Result<PeerStream> {
        let tls = self
            .connector
            .connect(ServerName::IpAddress(ip.into()), stream)
            .await?;
        Ok(PeerStream::Tls(Box::new(tokio_rustls::TlsStream::Client(
            tls,
        ))))
    }
}

fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let list = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError(format!("the {what} is not PEM: {e}")))?;
    if list.is_empty() {
        return Err(TlsError(format!("the {what} holds no certificate")));
    }
    Ok(list)
}

/// A peer connection, plain or TLS.
#[derive(Debug)]
pub enum PeerStream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP, either side.
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl PeerStream {
    /// Separate read and write halves.
    pub fn into_split(self) -> (PeerReader, PeerWriter) {
        match self {
            PeerStream::Plain(stream) => {
                let (reader, writer) = stream.into_split();
                (PeerReader::Plain(reader), PeerWriter::Plain(writer))
            }
            PeerStream::Tls(stream) => {
                let (reader, writer) = tokio::io::split(*stream);
                (PeerReader::Tls(reader), PeerWriter::Tls(writer))
            }
        }
    }
}

/// The read half of a [`PeerStream`].
#[derive(Debug)]
pub enum PeerReader {
    /// Plain TCP.
    Plain(tokio::net::tcp::OwnedReadHalf),
    /// TLS.
    Tls(tokio::io::ReadHalf<tokio_rustls::TlsStream<TcpStream>>),
}

/// The write half of a [`PeerStream`].
#[derive(Debug)]
pub enum PeerWriter {
    /// Plain TCP.
    Plain(tokio::net::tcp::OwnedWriteHalf),
    /// TLS.
    Tls(tokio::io::WriteHalf<tokio_rustls::TlsStream<TcpStream>>),
}

/// Delegates `AsyncRead` to whichever stream a variant holds.
macro_rules! delegate_read {
    ($type:ty, $($variant:ident),+) => {
        impl AsyncRead for $type {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_read(cx, buf),)+
                }
            }
        }
    };
}

/// Delegates `AsyncWrite` to whichever stream a variant holds.
macro_rules! delegate_write {
    ($type:ty, $($variant:ident),+) => {
        impl AsyncWrite for $type {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_write(cx, buf),)+
                }
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_flush(cx),)+
                }
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_shutdown(cx),)+
                }
            }
        }
    };
}

delegate_read!(PeerStream, Plain, Tls);
delegate_write!(PeerStream, Plain, Tls);
delegate_read!(PeerReader, Plain, Tls);
delegate_write!(PeerWriter, Plain, Tls);
