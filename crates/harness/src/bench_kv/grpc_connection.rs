//! A lean unary gRPC client for the load generator, written directly on
//! the `h2` crate (the HTTP/2 layer under tonic and hyper).
//!
//! Why not tonic's `Channel`: on this 2-core machine the bench client shares
//! the CPU with the members it measures, and with tonic it was the largest
//! consumer of all (about 70 µs of CPU per put at 128 clients, more than
//! the leader spent). Its per-request path goes through a `tower` buffer
//! task, hyper's dispatcher, and a task spawned per request to pipe the
//! streaming request body, each a wake-up and several allocations. Here a
//! request is one pre-encoded `Bytes` frame (a reference-count bump to
//! reuse), one `send_request` and one `send_data` on the connection's
//! `SendRequest` handle, and the answer is read straight off the stream.
//!
//! Only what a closed-loop benchmark needs: unary calls, no compression,
//! no retries, no reconnection (a broken connection fails every later call
//! on it at once). Each answer's envelope is checked here (HTTP status,
//! content-type, gRPC status in headers or trailers, exactly one
//! length-prefixed message that decodes as the expected type); the load
//! checks the message's fields, so a server that answers wrongly counts as
//! an error.

use anyhow::{Context, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::io;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::{Code, Status};

/// Largest answer accepted, in bytes (the bench reads small messages only).
const ANSWER_BYTES_MAX: usize = 4 << 20;
/// gRPC's message prefix: a compression flag and a big-endian length.
const PREFIX_BYTES: usize = 5;
/// Flow-control window per stream and per connection; large enough that
/// a window update is never waited for with the bench's small messages.
const WINDOW_BYTES: u32 = 4 << 20;

/// The TCP (or TLS) stream as h2 sees it: without vectored writes.
///
/// h2 copies a DATA frame into its write buffer only when the payload is
/// under 256 bytes on a stream that takes vectored writes (1 KiB on one
/// that does not); a bigger one is written straight from its own buffer,
/// which flushes the connection. A put of a 256-byte value is just over
/// that, so with the plain stream every request cost its own `writev`
/// (about 27,000 a second at 128 clients, more than one per request). Seen
/// through this wrapper the requests queued since the last write go out in
/// one.
struct Unvectored<S>(S);

impl<S: AsyncRead + Unpin> AsyncRead for Unvectored<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Unvectored<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

/// One HTTP/2 connection to one endpoint; clone it to share it.
#[derive(Clone)]
pub struct GrpcConnection {
    send: h2::client::SendRequest<Bytes>,
    authority: String,
    /// `https` over TLS, else `http`.
    scheme: &'static str,
}

/// The HTTP/2 handshake over `io`; spawns the task that drives the
/// connection.
async fn start_h2<S>(io: S, endpoint: &str) -> Result<h2::client::SendRequest<Bytes>>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(WINDOW_BYTES)
        .initial_connection_window_size(WINDOW_BYTES)
        .handshake::<_, Bytes>(Unvectored(io))
        .await
        .with_context(|| format!("HTTP/2 handshake with {endpoint} failed"))?;
    tokio::spawn(async move {
        // The connection ends when every handle is dropped or the peer
        // goes away; calls in flight then fail with the reason.
        let _ = connection.await;
    });
    Ok(send)
}

impl GrpcConnection {
    /// Opens a TCP connection to `endpoint` (host:port), over TLS with
    /// `tls` (the server's certificate must name the host), performs the
    /// HTTP/2 handshake, and spawns the task that drives the connection.
    pub async fn connect(
        endpoint: &str,
        timeout: Duration,
        tls: Option<&std::sync::Arc<rustls::ClientConfig>>,
    ) -> Result<GrpcConnection> {
        let tcp = tokio::time::timeout(timeout, tokio::net::TcpStream::connect(endpoint))
            .await
            .with_context(|| format!("connecting to {endpoint} timed out"))?
            .with_context(|| format!("cannot connect to {endpoint}"))?;
        tcp.set_nodelay(true)?;
        let (send, scheme) = match tls {
            None => (start_h2(tcp, endpoint).await?, "http"),
            Some(config) => {
                let host = endpoint.rsplit_once(':').map_or(endpoint, |(host, _)| host);
                let name = rustls::pki_types::ServerName::try_from(host.to_string())
                    .with_context(|| format!("{host:?} is not a host name for TLS"))?;
                let connector = tokio_rustls::TlsConnector::from(config.clone());
                let stream = tokio::time::timeout(timeout, connector.connect(name, tcp))
                    .await
                    .with_context(|| format!("TLS handshake with {endpoint} timed out"))?
                    .with_context(|| format!("TLS handshake with {endpoint} failed"))?;
                (start_h2(stream, endpoint).await?, "https")
            }
        };
        Ok(GrpcConnection {
            send,
            authority: endpoint.to_string(),
            scheme,
        })
    }

    /// The URI of method `path` (e.g. `/etcdserverpb.KV/Put`) on this
    /// connection's endpoint; built once per client, not once per call.
    pub fn method_uri(&self, path: &str) -> Result<http::Uri> {
        format!("{}://{}{path}", self.scheme, self.authority)
            .parse()
            .with_context(|| format!("{path:?} does not make a URI with {}", self.authority))
    }

    /// Calls the method at `uri` (from [`method_uri`](Self::method_uri))
    /// with a request framed by [`frame`] and decodes the answer as `M`.
    pub async fn unary<M: prost::Message + Default>(
        &self,
        uri: &http::Uri,
        framed_request: Bytes,
    ) -> Result<M, Status> {
        let request = http::Request::builder()
            .method(http::Method::POST)
            .uri(uri.clone())
            .header(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/grpc"),
            )
            .header(http::header::TE, http::HeaderValue::from_static("trailers"))
            .body(())
            .map_err(|error| Status::internal(format!("cannot build the request: {error}")))?;
        let mut send = self.send.clone().ready().await.map_err(transport_error)?;
        let (answer, mut body) = send.send_request(request, false).map_err(transport_error)?;
        body.send_data(framed_request, true)
            .map_err(transport_error)?;
        let answer = answer.await.map_err(transport_error)?;
        if answer.status() != http::StatusCode::OK {
            // gRPC's mapping of HTTP statuses to codes.
            let code = match answer.status().as_u16() {
                400 => Code::Internal,
                401 => Code::Unauthenticated,
                403 => Code::PermissionDenied,
                404 => Code::Unimplemented,
                429 | 502 | 503 | 504 => Code::Unavailable,
                _ => Code::Unknown,
            };
            return Err(Status::new(
                code,
                format!("HTTP status {} instead of 200", answer.status()),
            ));
        }
        let content_type = answer.headers().get(http::header::CONTENT_TYPE);
        if !content_type.is_some_and(|t| t.as_bytes().starts_with(b"application/grpc")) {
            return Err(Status::internal(format!(
                "the answer's content-type is {content_type:?}, not application/grpc"
            )));
        }
        // A trailers-only answer carries its gRPC status in the headers.
        if let Some(status) = grpc_status(answer.headers()) {
            return Err(status.err().unwrap_or_else(|| {
                Status::internal("a trailers-only answer with status OK carries no message")
            }));
        }
        let mut stream = answer.into_body();
        let mut received = BytesMut::new();
        while let Some(chunk) = stream.data().await {
            let chunk = chunk.map_err(transport_error)?;
            let _ = stream.flow_control().release_capacity(chunk.len());
            if received.len() + chunk.len() > ANSWER_BYTES_MAX {
                return Err(Status::resource_exhausted("the answer is too large"));
            }
            received.extend_from_slice(&chunk);
        }
        let trailers = stream.trailers().await.map_err(transport_error)?;
        match trailers.as_ref().and_then(grpc_status) {
            Some(Ok(())) => {}
            Some(Err(status)) => return Err(status),
            None => return Err(Status::internal("the answer ended without a gRPC status")),
        }
        unframe(received.freeze())
    }
}

/// A message with gRPC's length prefix, ready to send (and to resend: a
/// `Bytes` clone shares the buffer).
pub fn frame(message: &impl prost::Message) -> Bytes {
    let length = message.encoded_len();
    let mut out = BytesMut::with_capacity(PREFIX_BYTES + length);
    out.put_u8(0);
    out.put_u32(u32::try_from(length).expect("bench messages are far below 4 GiB"));
    message
        .encode(&mut out)
        .expect("the buffer was sized for the message");
    out.freeze()
}

/// Decodes exactly one uncompressed length-prefixed message.
fn unframe<M: prost::Message + Default>(mut received: Bytes) -> Result<M, Status> {
    if received.len() < PREFIX_BYTES {
        return Err(Status::internal(format!(
            "the answer holds {} bytes, less than a message prefix",
            received.len()
        )));
    }
    let compressed = received.get_u8();
    let length = received.get_u32() as usize;
    if compressed != 0 {
        return Err(Status::internal("the answer is compressed; none was asked"));
    }
    if length != received.len() {
        return Err(Status::internal(format!(
            "the answer's prefix says {length} bytes, {} followed",
            received.len()
        )));
    }
    M::decode(received).map_err(|error| Status::internal(format!("undecodable answer: {error}")))
}

/// The gRPC status in `headers`: None when absent, Ok for code 0.
fn grpc_status(headers: &http::HeaderMap) -> Option<Result<(), Status>> {
    let code = headers.get("grpc-status")?;
    let code = code
        .to_str()
        .ok()
        .and_then(|text| text.parse::<i32>().ok())
        .unwrap_or(Code::Unknown as i32);
    if code == 0 {
        return Some(Ok(()));
    }
    let message = headers
        .get("grpc-message")
        .and_then(|value| value.to_str().ok())
        .map(percent_decode)
        .unwrap_or_default();
    Some(Err(Status::new(Code::from(code), message)))
}

/// Undoes gRPC's percent-encoding of `grpc-message`.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
        });
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn transport_error(error: h2::Error) -> Status {
    Status::unavailable(format!("HTTP/2: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_api::etcdserverpb::{PutRequest, PutResponse, ResponseHeader};

    #[test]
    fn a_framed_message_unframes_to_itself() {
        let answer = PutResponse {
            header: Some(ResponseHeader {
                revision: 7,
                ..Default::default()
            }),
            prev_kv: None,
        };
        let decoded: PutResponse = unframe(frame(&answer)).unwrap();
        assert_eq!(decoded, answer);
        let request = PutRequest {
            key: b"k".to_vec(),
            value: vec![b'x'; 256],
            ..Default::default()
        };
        let framed = frame(&request);
        assert_eq!(framed[0], 0, "not compressed");
        assert_eq!(
            u32::from_be_bytes(framed[1..5].try_into().unwrap()) as usize,
            framed.len() - PREFIX_BYTES
        );
    }

    #[test]
    fn short_compressed_or_mislabelled_answers_are_errors() {
        assert!(unframe::<PutResponse>(Bytes::from_static(&[0, 0])).is_err());
        assert!(unframe::<PutResponse>(Bytes::from_static(&[1, 0, 0, 0, 0])).is_err());
        assert!(unframe::<PutResponse>(Bytes::from_static(&[0, 0, 0, 0, 3, 1])).is_err());
        assert!(unframe::<PutResponse>(Bytes::from_static(&[0, 0, 0, 0, 0])).is_ok());
    }

    #[test]
    fn grpc_statuses_are_read_from_headers_with_their_messages() {
        let mut headers = http::HeaderMap::new();
        assert!(grpc_status(&headers).is_none());
        headers.insert("grpc-status", "0".parse().unwrap());
        assert!(grpc_status(&headers).unwrap().is_ok());
        headers.insert("grpc-status", "14".parse().unwrap());
        headers.insert(
            "grpc-message",
            "etcdserver:%20leader%20changed".parse().unwrap(),
        );
        let status = grpc_status(&headers).unwrap().unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(status.message(), "etcdserver: leader changed");
        assert_eq!(percent_decode("100%"), "100%");
    }
}
