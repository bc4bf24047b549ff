//! A short path for the unary calls that carry the load: KV Put, Range,
//! DeleteRange and Txn, and Lease grant and revoke.
//!
//! Under a 128-client put load, tonic's per-call machinery (the axum
//! router, the streaming decoder, the encoder body, boxed futures at each
//! layer) cost about as much of the leader's CPU as the put itself. These
//! calls are one request message and one answer, so this layer reads the
//! single length-prefixed message, decodes it with prost, calls the same
//! service method tonic would, and answers with one DATA frame and the
//! `grpc-status` trailer. Everything else (streams, other services, HTTP
//! errors) goes on to tonic unchanged, and so does the connection handling.
//!
//! The wire rules are gRPC's: a message bigger than the server accepts is
//! refused with `ResourceExhausted`, as etcd's grpc-go server does; a
//! `grpc-encoding` other than identity, which etcd's clients never send,
//! with `Unimplemented`; a message flagged compressed without such an
//! encoding, and a missing or cut-off message, with `Internal` (the gRPC
//! protocol's rule, and grpc-go's).

use super::{KvService, LeaseService, GRPC_MESSAGE_BYTES_MAX};
use bellwether_api::etcdserverpb::kv_server::Kv;
use bellwether_api::etcdserverpb::lease_server::Lease;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use http_body::Frame;
use http_body_util::BodyExt;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::body::Body;
use tonic::{Request, Response, Status};

/// Bytes before each gRPC message: a compression flag and a big-endian
/// length.
const MESSAGE_PREFIX_BYTES: usize = 5;

/// The calls served here, by their HTTP/2 path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    Put,
    Range,
    DeleteRange,
    Txn,
    LeaseGrant,
    LeaseRevoke,
}

impl Call {
    fn of(path: &str) -> Option<Call> {
        Some(match path {
            "/etcdserverpb.KV/Put" => Call::Put,
            "/etcdserverpb.KV/Range" => Call::Range,
            "/etcdserverpb.KV/DeleteRange" => Call::DeleteRange,
            "/etcdserverpb.KV/Txn" => Call::Txn,
            "/etcdserverpb.Lease/LeaseGrant" => Call::LeaseGrant,
            "/etcdserverpb.Lease/LeaseRevoke" => Call::LeaseRevoke,
            _ => return None,
        })
    }
}

/// Puts [`UnaryFastPath`] in front of tonic's routes.
#[derive(Clone)]
pub struct UnaryFastPathLayer {
    kv: KvService,
    lease: LeaseService,
}

impl UnaryFastPathLayer {
    /// The layer, calling into these services.
    pub fn new(kv: KvService, lease: LeaseService) -> Self {
        UnaryFastPathLayer { kv, lease }
    }
}

impl<S> tower_layer::Layer<S> for UnaryFastPathLayer {
    type Service = UnaryFastPath<S>;

    fn layer(&self, inner: S) -> Self::Service {
        UnaryFastPath {
            kv: self.kv.clone(),
            lease: self.lease.clone(),
            inner,
        }
    }
}

/// Serves the hot unary calls itself and hands the rest to `inner`.
#[derive(Clone)]
pub struct UnaryFastPath<S> {
    kv: KvService,
    lease: LeaseService,
    inner: S,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

impl<S> tower_service::Service<http::Request<Body>> for UnaryFastPath<S>
where
    S: tower_service::Service<
        http::Request<Body>,
        Response = http::Response<Body>,
        Error = Infallible,
    >,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let Some(call) = Call::of(request.uri().path()) else {
            return Box::pin(self.inner.call(request));
        };
        let (kv, lease) = (self.kv.clone(), self.lease.clone());
        Box::pin(async move {
            let answer = match serve(call, request, &kv, &lease).await {
                Ok(message) => answer(message),
                Err(status) => status.into_http(),
            };
            Ok(answer)
        })
    }
}

/// Decodes the request, runs the call, encodes its answer (prefix included).
async fn serve(
    call: Call,
    request: http::Request<Body>,
    kv: &KvService,
    lease: &LeaseService,
) -> Result<Bytes, Status> {
    if let Some(encoding) = request.headers().get("grpc-encoding") {
        if encoding != "identity" {
            return Err(Status::unimplemented(format!(
                "this server does not decompress; grpc-encoding {encoding:?} is not supported"
            )));
        }
    }
    let (parts, body) = request.into_parts();
    let message = read_message(body, GRPC_MESSAGE_BYTES_MAX).await?;
    // The headers (a token) and extensions (the client's certificate) go
    // with the message, for the services' auth checks.
    let context = CallContext {
        metadata: tonic::metadata::MetadataMap::from_headers(parts.headers),
        extensions: parts.extensions,
    };
    match call {
        Call::Put => encoded(kv.put(decoded(message, context)?).await?),
        Call::Range => encoded(kv.range(decoded(message, context)?).await?),
        Call::DeleteRange => encoded(kv.delete_range(decoded(message, context)?).await?),
        Call::Txn => encoded(kv.txn(decoded(message, context)?).await?),
        Call::LeaseGrant => encoded(lease.lease_grant(decoded(message, context)?).await?),
        Call::LeaseRevoke => encoded(lease.lease_revoke(decoded(message, context)?).await?),
    }
}

/// What a request carries besides its message.
struct CallContext {
    metadata: tonic::metadata::MetadataMap,
    extensions: http::Extensions,
}

/// Reads the one message of a unary call: its prefix, then exactly as many
/// bytes as the prefix announces (at most `limit`).
async fn read_message(mut body: Body, limit: usize) -> Result<Bytes, Status> {
    let mut buffer = BytesMut::new();
    let mut wanted: Option<usize> = None;
    loop {
        if wanted.is_none() && buffer.len() >= MESSAGE_PREFIX_BYTES {
            let compressed = buffer[0];
            let length = u32::from_be_bytes([buffer[1], buffer[2], buffer[3], buffer[4]]) as usize;
            if compressed != 0 {
                // Any grpc-encoding but identity was refused already.
                return Err(Status::internal(
                    "grpc: compressed flag set with identity or empty encoding",
                ));
            }
            if length > limit {
                return Err(Status::resource_exhausted(format!(
                    "grpc: received message larger than max ({length} vs. {limit})"
                )));
            }
            wanted = Some(length);
            buffer.reserve((MESSAGE_PREFIX_BYTES + length).saturating_sub(buffer.len()));
        }
        if let Some(length) = wanted {
            if buffer.len() >= MESSAGE_PREFIX_BYTES + length {
                buffer.advance(MESSAGE_PREFIX_BYTES);
                buffer.truncate(length);
                assert!(
                    buffer.len() == length && length <= limit,
                    "the message is exactly its announced length, within the limit"
                );
                return Ok(buffer.freeze());
            }
        }
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    buffer.extend_from_slice(&data);
                }
            }
            Some(Err(status)) => return Err(status),
            None if buffer.is_empty() => {
                return Err(Status::internal("missing request message"));
            }
            None => {
                return Err(Status::internal(format!(
                    "request message cut off after {} bytes",
                    buffer.len()
                )));
            }
        }
    }
}

fn decoded<M: prost::Message + Default>(
    message: Bytes,
    context: CallContext,
) -> Result<Request<M>, Status> {
    M::decode(message)
        .map(|message| Request::from_parts(context.metadata, context.extensions, message))
        .map_err(|error| Status::internal(format!("failed to decode Protobuf message: {error}")))
}

fn encoded<M: prost::Message>(response: Response<M>) -> Result<Bytes, Status> {
    let message = response.into_inner();
    let length = message.encoded_len();
    let prefix_length =
        u32::try_from(length).map_err(|_| Status::resource_exhausted("answer over 4 GiB"))?;
    let mut buffer = BytesMut::with_capacity(MESSAGE_PREFIX_BYTES + length);
    buffer.put_u8(0);
    buffer.put_u32(prefix_length);
    message
        .encode(&mut buffer)
        .expect("the buffer was sized for the message");
    assert_eq!(
        buffer.len(),
        MESSAGE_PREFIX_BYTES + length,
        "the answer is its prefix then exactly the length it announces"
    );
    Ok(buffer.freeze())
}

/// A successful unary answer: headers, one message, `grpc-status: 0`.
fn answer(message: Bytes) -> http::Response<Body> {
    let mut response = http::Response::new(Body::new(UnaryAnswer {
        message: Some(message),
        trailers_sent: false,
    }));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}

/// The body of a successful unary answer.
struct UnaryAnswer {
    message: Option<Bytes>,
    trailers_sent: bool,
}

impl http_body::Body for UnaryAnswer {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(message) = self.message.take() {
            return Poll::Ready(Some(Ok(Frame::data(message))));
        }
        if self.trailers_sent {
            return Poll::Ready(None);
        }
        self.trailers_sent = true;
        let mut trailers = http::HeaderMap::with_capacity(1);
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        Poll::Ready(Some(Ok(Frame::trailers(trailers))))
    }

    fn is_end_stream(&self) -> bool {
        self.message.is_none() && self.trailers_sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request body delivered in the given chunks.
    struct Chunks(std::collections::VecDeque<Bytes>);

    impl http_body::Body for Chunks {
        type Data = Bytes;
        type Error = Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(self.0.pop_front().map(|c| Ok(Frame::data(c))))
        }
    }

    fn body_of(chunks: Vec<Vec<u8>>) -> Body {
        Body::new(Chunks(chunks.into_iter().map(Bytes::from).collect()))
    }

    fn framed(message: &[u8]) -> Vec<u8> {
        let mut out = vec![0];
        out.extend_from_slice(&(message.len() as u32).to_be_bytes());
        out.extend_from_slice(message);
        out
    }

    fn read(chunks: Vec<Vec<u8>>, limit: usize) -> Result<Bytes, Status> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(read_message(body_of(chunks), limit))
    }

    #[test]
    fn a_message_split_across_frames_is_joined() {
        let whole = framed(b"hello world");
        let (a, b) = whole.split_at(3);
        let (b, c) = b.split_at(6);
        let read = read(vec![a.to_vec(), b.to_vec(), c.to_vec()], 100).unwrap();
        assert_eq!(&read[..], b"hello world");
    }

    #[test]
    fn an_empty_message_is_a_message() {
        assert_eq!(&read(vec![framed(b"")], 100).unwrap()[..], b"");
    }

    #[test]
    fn a_message_over_the_limit_is_refused_before_it_is_read() {
        let mut prefix = vec![0];
        prefix.extend_from_slice(&1_000_000u32.to_be_bytes());
        let error = read(vec![prefix], 1000).unwrap_err();
        assert_eq!(error.code(), tonic::Code::ResourceExhausted);
        assert!(error.message().contains("1000000 vs. 1000"), "{error:?}");
    }

    #[test]
    fn compressed_missing_and_cut_off_messages_are_refused() {
        let mut compressed = framed(b"x");
        compressed[0] = 1;
        assert_eq!(
            read(vec![compressed], 100).unwrap_err().code(),
            tonic::Code::Internal,
            "flagged compressed without an encoding"
        );
        assert_eq!(read(vec![], 100).unwrap_err().code(), tonic::Code::Internal);
        let cut = framed(b"hello")[..7].to_vec();
        assert_eq!(
            read(vec![cut], 100).unwrap_err().code(),
            tonic::Code::Internal
        );
    }

    #[test]
    fn the_answer_is_one_message_then_status_ok() {
        let response = Response::new(bellwether_api::etcdserverpb::PutResponse::default());
        let bytes = encoded(response).unwrap();
        assert_eq!(&bytes[..], &[0, 0, 0, 0, 0]);
        let collected = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(answer(bytes).into_body().collect())
            .unwrap();
        let trailers = collected.trailers().cloned().expect("trailers");
        assert_eq!(trailers["grpc-status"], "0");
        assert_eq!(&collected.to_bytes()[..], &[0, 0, 0, 0, 0]);
    }

    #[test]
    fn only_the_hot_unary_paths_are_taken() {
        assert_eq!(Call::of("/etcdserverpb.KV/Put"), Some(Call::Put));
        assert_eq!(Call::of("/etcdserverpb.Lease/LeaseKeepAlive"), None);
        assert_eq!(Call::of("/etcdserverpb.Watch/Watch"), None);
        assert_eq!(Call::of("/etcdserverpb.KV/Compact"), None);
    }
}
