//! etcd's gRPC-JSON gateway on the client port: `POST /v3/kv/put` with a
//! JSON body, as etcd 3.4 serves it (HTTP clients such as curl scripts,
//! Patroni's etcd3 backend and APISIX use it), plus `GET /version` and
//! `GET /health`.
//!
//! One port serves gRPC and JSON over HTTP/1.1 and HTTP/2: a request whose
//! content type is not gRPC and whose path is a gateway path comes here;
//! everything else goes on to the gRPC services unchanged. A JSON call is
//! turned into the gRPC call it stands for and sent to the same services in
//! process, so both answer alike by construction.
//!
//! etcd's JSON conventions: field names as etcd's `.proto` files spell
//! them (`cluster_id`, but `ID`, `TTL`, `peerURLs`; [`etcd_name`] lists
//! where bellwether's own `.proto` names differ), 64-bit integers as
//! strings, bytes as base64, enums by name, fields at their default value
//! left out. Errors answer `{"error", "message", "code"}` with the HTTP
//! status grpc-gateway gives the gRPC code. Streaming calls (Watch, lease
//! keep-alive, Observe, Snapshot) answer one `{"result": ...}` object per
//! message, each on its own line, for as long as the call runs.

use super::backend::EtcdBackend;
use super::GRPC_MESSAGE_BYTES_MAX;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use http_body::Frame;
use http_body_util::BodyExt;
use prost::Message;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, Kind, MessageDescriptor, MethodDescriptor,
    SerializeOptions,
};
use serde_json::Value;
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll};
use tonic::body::Body;

/// The gateway's paths (after `/v3/` or `/v3beta/`) and the gRPC methods
/// they stand for, as etcd 3.4 maps them.
const ROUTES: &[(&str, &str, &str)] = &[
    ("kv/range", "etcdserverpb.KV", "Range"),
    ("kv/put", "etcdserverpb.KV", "Put"),
    ("kv/deleterange", "etcdserverpb.KV", "DeleteRange"),
    ("kv/txn", "etcdserverpb.KV", "Txn"),
    ("kv/compaction", "etcdserverpb.KV", "Compact"),
    ("watch", "etcdserverpb.Watch", "Watch"),
    ("lease/grant", "etcdserverpb.Lease", "LeaseGrant"),
    ("lease/revoke", "etcdserverpb.Lease", "LeaseRevoke"),
    ("kv/lease/revoke", "etcdserverpb.Lease", "LeaseRevoke"),
    ("lease/keepalive", "etcdserverpb.Lease", "LeaseKeepAlive"),
    ("lease/timetolive", "etcdserverpb.Lease", "LeaseTimeToLive"),
    (
        "kv/lease/timetolive",
        "etcdserverpb.Lease",
        "LeaseTimeToLive",
    ),
    ("lease/leases", "etcdserverpb.Lease", "LeaseLeases"),
    ("kv/lease/leases", "etcdserverpb.Lease", "LeaseLeases"),
    ("cluster/member/add", "etcdserverpb.Cluster", "MemberAdd"),
    (
        "cluster/member/remove",
        "etcdserverpb.Cluster",
        "MemberRemove",
    ),
    (
        "cluster/member/update",
        "etcdserverpb.Cluster",
        "MemberUpdate",
    ),
    ("cluster/member/list", "etcdserverpb.Cluster", "MemberList"),
    (
        "cluster/member/promote",
        "etcdserverpb.Cluster",
        "MemberPromote",
    ),
    ("maintenance/alarm", "etcdserverpb.Maintenance", "Alarm"),
    ("maintenance/status", "etcdserverpb.Maintenance", "Status"),
    (
        "maintenance/defragment",
        "etcdserverpb.Maintenance",
        "Defragment",
    ),
    ("maintenance/hash", "etcdserverpb.Maintenance", "Hash"),
    (
        "maintenance/snapshot",
        "etcdserverpb.Maintenance",
        "Snapshot",
    ),
    (
        "maintenance/transfer-leadership",
        "etcdserverpb.Maintenance",
        "MoveLeader",
    ),
    ("election/campaign", "v3electionpb.Election", "Campaign"),
    ("election/proclaim", "v3electionpb.Election", "Proclaim"),
    ("election/leader", "v3electionpb.Election", "Leader"),
    ("election/observe", "v3electionpb.Election", "Observe"),
    ("election/resign", "v3electionpb.Election", "Resign"),
    ("lock/lock", "v3lockpb.Lock", "Lock"),
    ("lock/unlock", "v3lockpb.Lock", "Unlock"),
    ("auth/enable", "etcdserverpb.Auth", "AuthEnable"),
    ("auth/disable", "etcdserverpb.Auth", "AuthDisable"),
    ("auth/authenticate", "etcdserverpb.Auth", "Authenticate"),
    ("auth/user/add", "etcdserverpb.Auth", "UserAdd"),
    ("auth/user/get", "etcdserverpb.Auth", "UserGet"),
    ("auth/user/list", "etcdserverpb.Auth", "UserList"),
    ("auth/user/delete", "etcdserverpb.Auth", "UserDelete"),
    (
        "auth/user/changepw",
        "etcdserverpb.Auth",
        "UserChangePassword",
    ),
    ("auth/user/grant", "etcdserverpb.Auth", "UserGrantRole"),
    ("auth/user/revoke", "etcdserverpb.Auth", "UserRevokeRole"),
    ("auth/role/add", "etcdserverpb.Auth", "RoleAdd"),
    ("auth/role/get", "etcdserverpb.Auth", "RoleGet"),
    ("auth/role/list", "etcdserverpb.Auth", "RoleList"),
    ("auth/role/delete", "etcdserverpb.Auth", "RoleDelete"),
    (
        "auth/role/grant",
        "etcdserverpb.Auth",
        "RoleGrantPermission",
    ),
    (
        "auth/role/revoke",
        "etcdserverpb.Auth",
        "RoleRevokePermission",
    ),
];

/// The prefixes etcd 3.4 serves the gateway under.
const PREFIXES: [&str; 2] = ["/v3/", "/v3beta/"];

/// The methods by gateway path, described from the `.proto` files.
static METHODS: LazyLock<HashMap<&'static str, MethodDescriptor>> = LazyLock::new(|| {
    let pool = DescriptorPool::decode(bellwether_api::FILE_DESCRIPTOR_SET)
        .expect("the build's own descriptor set decodes");
    ROUTES
        .iter()
        .map(|(path, service, method)| {
            let service = pool
                .get_service_by_name(service)
                .unwrap_or_else(|| panic!("service {service} is declared"));
            let method = service
                .methods()
                .find(|m| m.name() == *method)
                .unwrap_or_else(|| panic!("method {method} is declared"));
            (*path, method)
        })
        .collect()
});

/// etcd's JSON name for a field bellwether's `.proto` spells otherwise
/// (`message` is the full message name, `field` our field name).
fn etcd_name(message: &str, field: &str) -> Option<&'static str> {
    let lease = message.starts_with("etcdserverpb.Lease");
    let member = message.starts_with("etcdserverpb.Member");
    Some(match (message, field) {
        (_, "id") if lease || member => "ID",
        (_, "ttl") if lease => "TTL",
        (_, "granted_ttl") if lease => "grantedTTL",
        (_, "peer_urls") if member => "peerURLs",
        (_, "client_urls") if member => "clientURLs",
        (_, "is_learner") if member => "isLearner",
        ("etcdserverpb.AlarmRequest" | "etcdserverpb.AlarmMember", "member_id") => "memberID",
        ("etcdserverpb.StatusResponse", "db_size") => "dbSize",
        ("etcdserverpb.StatusResponse", "raft_index") => "raftIndex",
        ("etcdserverpb.StatusResponse", "raft_term") => "raftTerm",
        ("etcdserverpb.StatusResponse", "raft_applied_index") => "raftAppliedIndex",
        ("etcdserverpb.StatusResponse", "db_size_in_use") => "dbSizeInUse",
        ("etcdserverpb.StatusResponse", "is_learner") => "isLearner",
        ("etcdserverpb.MoveLeaderRequest", "target_id") => "targetID",
        ("authpb.Permission", "perm_type") => "permType",
        _ => return None,
    })
}

/// Renames the keys of `value` (a message of type `message`) between our
/// field names and etcd's, in place, nested messages included.
/// `to_etcd`: ours → etcd's (answers); otherwise etcd's → ours (requests).
fn rename(value: &mut Value, message: &MessageDescriptor, to_etcd: bool) {
    let Value::Object(object) = value else {
        return;
    };
    for field in message.fields() {
        let ours = field.name();
        let theirs = etcd_name(message.full_name(), ours).unwrap_or(ours);
        let (from, to) = if to_etcd {
            (ours, theirs)
        } else {
            (theirs, ours)
        };
        let Some(mut inner) = object.remove(from) else {
            continue;
        };
        if let Kind::Message(nested) = field.kind() {
            match &mut inner {
                Value::Array(items) => {
                    for item in items {
                        rename(item, &nested, to_etcd);
                    }
                }
                other => rename(other, &nested, to_etcd),
            }
        }
        object.insert(to.to_string(), inner);
    }
}

/// Every JSON request in `body` (a streaming call's body may hold several,
/// one after the other, as etcd's gateway reads them), as protobuf; an
/// empty body is one empty request.
fn request_messages(body: &[u8], input: &MessageDescriptor) -> Result<Vec<Vec<u8>>, String> {
    let options = DeserializeOptions::new().deny_unknown_fields(false);
    let mut messages = Vec::new();
    for value in serde_json::Deserializer::from_slice(body).into_iter::<Value>() {
        let mut value = value.map_err(|e| e.to_string())?;
        rename(&mut value, input, false);
        let message = DynamicMessage::deserialize_with_options(input.clone(), value, &options)
            .map_err(|e| e.to_string())?;
        messages.push(message.encode_to_vec());
    }
    if messages.is_empty() {
        messages.push(Vec::new());
    }
    Ok(messages)
}

/// What the gateway makes of a request body sent to `path` (such as
/// `/v3/kv/range`): the protobuf requests it would call with, or the error
/// it would answer; `None` for a path it does not serve. The fuzz tests
/// feed this untrusted bytes.
pub fn parse_request(path: &str, body: &[u8]) -> Option<Result<Vec<Vec<u8>>, String>> {
    let method = PREFIXES
        .iter()
        .find_map(|p| path.strip_prefix(p))
        .and_then(|rest| METHODS.get(rest.trim_end_matches('/')))?;
    Some(request_messages(body, &method.input()))
}

/// The gateway paths served (without the `/v3/` prefix).
pub fn paths() -> impl Iterator<Item = &'static str> {
    ROUTES.iter().map(|(path, _, _)| *path)
}

/// A protobuf answer as etcd's gateway writes it.
fn answer_json(bytes: &[u8], output: &MessageDescriptor) -> Result<Value, String> {
    let message = DynamicMessage::decode(output.clone(), bytes).map_err(|e| e.to_string())?;
    let options = SerializeOptions::new()
        .use_proto_field_name(true)
        .stringify_64_bit_integers(true)
        .skip_default_fields(true);
    let mut value = message
        .serialize_with_options(serde_json::value::Serializer, &options)
        .map_err(|e| e.to_string())?;
    rename(&mut value, output, true);
    Ok(value)
}

/// The HTTP status grpc-gateway answers a gRPC code with.
fn http_status(code: tonic::Code) -> http::StatusCode {
    use http::StatusCode as H;
    use tonic::Code as G;
    match code {
        G::Ok => H::OK,
        G::Cancelled => H::REQUEST_TIMEOUT,
        G::InvalidArgument | G::OutOfRange => H::BAD_REQUEST,
        G::DeadlineExceeded => H::GATEWAY_TIMEOUT,
        G::NotFound => H::NOT_FOUND,
        G::AlreadyExists | G::Aborted => H::CONFLICT,
        G::PermissionDenied => H::FORBIDDEN,
        G::Unauthenticated => H::UNAUTHORIZED,
        G::ResourceExhausted => H::TOO_MANY_REQUESTS,
        G::FailedPrecondition => H::PRECONDITION_FAILED,
        G::Unimplemented => H::NOT_IMPLEMENTED,
        G::Unavailable => H::SERVICE_UNAVAILABLE,
        G::Unknown | G::Internal | G::DataLoss => H::INTERNAL_SERVER_ERROR,
    }
}

fn json_response(status: http::StatusCode, value: &Value) -> http::Response<Body> {
    http::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::new(http_body_util::Full::new(Bytes::from(
            value.to_string(),
        ))))
        .expect("a valid response")
}

/// etcd's error answer for a gRPC status.
fn error_response(code: tonic::Code, message: &str) -> http::Response<Body> {
    json_response(
        http_status(code),
        &serde_json::json!({"error": message, "message": message, "code": code as i32}),
    )
}

fn plain(status: http::StatusCode, text: &'static str) -> http::Response<Body> {
    http::Response::builder()
        .status(status)
        .header("content-type", "text/plain; charset=utf-8")
        .body(Body::new(http_body_util::Full::new(Bytes::from_static(
            text.as_bytes(),
        ))))
        .expect("a valid response")
}

/// Puts [`JsonGateway`] in front of the gRPC services.
#[derive(Clone)]
pub struct JsonGatewayLayer {
    backend: EtcdBackend,
}

impl JsonGatewayLayer {
    /// The layer, answering `/health` from `backend`'s status.
    pub fn new(backend: EtcdBackend) -> Self {
        JsonGatewayLayer { backend }
    }
}

impl<S> tower_layer::Layer<S> for JsonGatewayLayer {
    type Service = JsonGateway<S>;

    fn layer(&self, inner: S) -> Self::Service {
        JsonGateway {
            backend: self.backend.clone(),
            inner,
        }
    }
}

/// Serves the gateway's paths and hands everything else to `inner`.
#[derive(Clone)]
pub struct JsonGateway<S> {
    backend: EtcdBackend,
    inner: S,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The gRPC services behind the gateway, as tower sees them.
pub trait GrpcRoutes:
    tower_service::Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
    + Send
    + 'static
{
}

impl<S> GrpcRoutes for S where
    S: tower_service::Service<
            http::Request<Body>,
            Response = http::Response<Body>,
            Error = Infallible,
        > + Send
        + 'static
{
}

/// True for a request the gateway serves.
/// Whether `request` is a gRPC call (by its content type), for the gRPC
/// services; anything else is plain HTTP, for the gateway.
fn is_grpc(request: &http::Request<Body>) -> bool {
    request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"))
}

/// Whether plain HTTP to `path` is the gateway's to answer.
fn is_gateway_path(path: &str) -> bool {
    path == "/version" || path == "/health" || PREFIXES.iter().any(|p| path.starts_with(p))
}

/// etcd's answer to plain HTTP on a path it does not serve (Go's
/// `http.NotFound`): a client that mistakes the API (etcd's v2 paths,
/// say) reads the same error from bellwether as from etcd, where the
/// gRPC services would answer 200 with an UNIMPLEMENTED gRPC status.
fn page_not_found() -> http::Response<Body> {
    let mut response = plain(http::StatusCode::NOT_FOUND, "404 page not found\n");
    response.headers_mut().insert(
        "x-content-type-options",
        http::HeaderValue::from_static("nosniff"),
    );
    response
}

impl<S> tower_service::Service<http::Request<Body>> for JsonGateway<S>
where
    S: GrpcRoutes + Clone,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        if is_grpc(&request) {
            return Box::pin(self.inner.call(request));
        }
        if !is_gateway_path(request.uri().path()) {
            return Box::pin(std::future::ready(Ok(page_not_found())));
        }
        // The ready inner service goes to this call; a clone stays behind
        // for the next one (tower's rule for services called from a task).
        let inner = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, inner);
        let backend = self.backend.clone();
        Box::pin(async move { Ok(serve(request, inner, &backend).await) })
    }
}

async fn serve<S>(
    request: http::Request<Body>,
    inner: S,
    backend: &EtcdBackend,
) -> http::Response<Body>
where
    S: GrpcRoutes,
    S::Future: Send + 'static,
{
    let path = request.uri().path().to_string();
    if path == "/version" {
        return version_response();
    }
    if path == "/health" {
        return health_response(backend);
    }
    let route = PREFIXES
        .iter()
        .find_map(|p| path.strip_prefix(p))
        .and_then(|rest| METHODS.get(rest.trim_end_matches('/')));
    let Some(method) = route.cloned() else {
        return plain(http::StatusCode::NOT_FOUND, "Not Found\n");
    };
    if request.method() != http::Method::POST {
        return plain(http::StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed\n");
    }
    let credentials = Credentials::of(&request);
    let body = match http_body_util::Limited::new(request.into_body(), GRPC_MESSAGE_BYTES_MAX)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            return error_response(
                tonic::Code::InvalidArgument,
                &format!("cannot read the body: {error}"),
            )
        }
    };
    let messages = match request_messages(&body, &method.input()) {
        Ok(messages) if method.is_client_streaming() => messages,
        // A unary call takes the body's first request, as etcd's gateway.
        Ok(mut messages) => {
            messages.truncate(1);
            messages
        }
        Err(error) => return error_response(tonic::Code::InvalidArgument, &error),
    };
    // An empty body is one empty request; a unary call sends exactly one.
    assert!(
        !messages.is_empty() && (method.is_client_streaming() || messages.len() == 1),
        "a call sends at least one request, a unary call exactly one"
    );
    let grpc_path = format!("/{}/{}", method.parent_service().full_name(), method.name());
    call_grpc(inner, &grpc_path, &method, messages, credentials).await
}

/// `GET /version`, as etcd 3.4 answers it, with bellwether's own version
/// under a key of its own that no etcd client reads.
fn version_response() -> http::Response<Body> {
    let body = serde_json::json!({
        "etcdserver": crate::status::ETCD_VERSION,
        "etcdcluster": "3.4.0",
        "bellwether": crate::status::BELLWETHER_VERSION,
    });
    json_response(http::StatusCode::OK, &body)
}

/// `GET /health`, as etcd 3.4: healthy while a leader is known and no
/// alarm is raised.
fn health_response(backend: &EtcdBackend) -> http::Response<Body> {
    let leader = backend.status.borrow().leader.is_some();
    let alarmed = backend.store().alarms().next().is_some();
    let healthy = leader && !alarmed;
    let status = if healthy {
        http::StatusCode::OK
    } else {
        http::StatusCode::SERVICE_UNAVAILABLE
    };
    json_response(status, &serde_json::json!({"health": healthy.to_string()}))
}

/// What names the caller of a gateway request.
struct Credentials {
    headers: Vec<(&'static str, http::HeaderValue)>,
    extensions: http::Extensions,
}

impl Credentials {
    /// Who is calling, to go with the call: a token (etcd's gateway takes
    /// it in `Authorization`) and the TLS session's client certificate.
    fn of(request: &http::Request<Body>) -> Credentials {
        Credentials {
            headers: ["authorization", "token"]
                .iter()
                .filter_map(|name| Some((*name, request.headers().get(*name)?.clone())))
                .collect(),
            extensions: request.extensions().clone(),
        }
    }
}

/// One gRPC message with its 5-byte prefix.
fn framed(message: &[u8]) -> Bytes {
    // Each message is re-encoded from a body of at most
    // GRPC_MESSAGE_BYTES_MAX: far below what a length prefix holds.
    assert!(
        u32::try_from(message.len()).is_ok(),
        "a gateway request fits a gRPC length prefix"
    );
    let mut out = BytesMut::with_capacity(5 + message.len());
    out.put_u8(0);
    out.put_u32(message.len() as u32);
    out.put_slice(message);
    out.freeze()
}

/// The gRPC status in `headers`, if any: (code, message).
fn grpc_status(headers: &http::HeaderMap) -> Option<(tonic::Code, String)> {
    let code = headers
        .get("grpc-status")?
        .to_str()
        .ok()?
        .parse::<i32>()
        .ok()?;
    let message = headers
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .map(percent_decode)
        .unwrap_or_default();
    Some((tonic::Code::from_i32(code), message))
}

/// gRPC percent-encodes `grpc-message`.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(byte) = u8::from_str_radix(&text[i + 1..i + 3], 16) {
                out.push(byte);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Sends `message` to the gRPC service `path` in process and answers its
/// reply (or replies, for a streaming method) as JSON.
async fn call_grpc<S>(
    inner: S,
    path: &str,
    method: &MethodDescriptor,
    messages: Vec<Vec<u8>>,
    credentials: Credentials,
) -> http::Response<Body>
where
    S: GrpcRoutes,
    S::Future: Send + 'static,
{
    // The requests, then the end of the request stream, as etcd's gateway
    // sends them: a keep-alive call then answers each and ends, a watch
    // keeps sending events until the HTTP client goes away.
    let mut frames = BytesMut::new();
    for message in &messages {
        frames.extend_from_slice(&framed(message));
    }
    let body = Body::new(http_body_util::Full::new(frames.freeze()));
    let mut grpc_request = http::Request::builder()
        .method(http::Method::POST)
        .uri(path)
        .version(http::Version::HTTP_2)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(body)
        .expect("a valid request");
    for (name, value) in credentials.headers {
        grpc_request.headers_mut().insert(name, value);
    }
    *grpc_request.extensions_mut() = credentials.extensions;
    let mut inner = inner;
    let Ok(response) = inner.call(grpc_request).await;
    if let Some((code, text)) = grpc_status(response.headers()) {
        if code != tonic::Code::Ok {
            return error_response(code, &text);
        }
    }
    let output = method.output();
    if !method.is_server_streaming() {
        let collected = match response.into_body().collect().await {
            Ok(collected) => collected,
            Err(status) => return error_response(status.code(), status.message()),
        };
        let trailers = collected.trailers().cloned();
        let mut data = collected.to_bytes();
        if let Some((code, text)) = trailers.as_ref().and_then(grpc_status) {
            if code != tonic::Code::Ok {
                return error_response(code, &text);
            }
        }
        let Some(message) = next_message(&mut data) else {
            return error_response(tonic::Code::Internal, "no answer from the service");
        };
        return match answer_json(&message, &output) {
            Ok(value) => json_response(http::StatusCode::OK, &value),
            Err(error) => error_response(tonic::Code::Internal, &error),
        };
    }
    let stream = json_lines(response.into_body(), output);
    http::Response::builder()
        .status(http::StatusCode::OK)
        .header("content-type", "application/json")
        .body(Body::new(http_body_util::StreamBody::new(stream)))
        .expect("a valid response")
}

/// Takes one complete gRPC message off the front of `buffer`.
fn next_message(buffer: &mut Bytes) -> Option<Bytes> {
    if buffer.len() < 5 {
        return None;
    }
    let length = u32::from_be_bytes([buffer[1], buffer[2], buffer[3], buffer[4]]) as usize;
    if buffer.len() < 5 + length {
        return None;
    }
    buffer.advance(5);
    Some(buffer.split_to(length))
}

type FrameResult = Result<Frame<Bytes>, tonic::Status>;

/// The line a stream ends with when its call fails, as grpc-gateway
/// writes it.
fn stream_error(code: tonic::Code, message: &str) -> Bytes {
    let status = http_status(code);
    let error = serde_json::json!({"error": {
        "grpc_code": code as i32,
        "http_code": status.as_u16(),
        "message": message,
        "http_status": status.canonical_reason().unwrap_or(""),
    }});
    Bytes::from(error.to_string() + "\n")
}

/// The replies of a streaming call as JSON lines: `{"result": ...}` per
/// message, and `{"error": ...}` if the call ends with an error.
fn json_lines(
    body: Body,
    output: MessageDescriptor,
) -> impl futures_core::Stream<Item = FrameResult> + Send {
    let (sender, receiver) = tokio::sync::mpsc::channel::<FrameResult>(8);
    tokio::spawn(async move {
        let mut body = body;
        let mut buffer = BytesMut::new();
        loop {
            // Dropping the call's body when the HTTP client goes away ends
            // the gRPC call (and its watch or relay) even while it is quiet.
            let frame = tokio::select! {
                frame = body.frame() => frame,
                () = sender.closed() => return,
            };
            let Some(frame) = frame else {
                return;
            };
            let frame = match frame {
                Ok(frame) => frame,
                Err(status) => {
                    let line = stream_error(status.code(), status.message());
                    let _ = sender.send(Ok(Frame::data(line))).await;
                    return;
                }
            };
            if let Some(trailers) = frame.trailers_ref() {
                if let Some((code, text)) = grpc_status(trailers) {
                    if code != tonic::Code::Ok {
                        let line = stream_error(code, &text);
                        let _ = sender.send(Ok(Frame::data(line))).await;
                    }
                }
                return;
            }
            if let Ok(data) = frame.into_data() {
                buffer.extend_from_slice(&data);
            }
            let mut pending = std::mem::take(&mut buffer).freeze();
            while let Some(message) = next_message(&mut pending) {
                let line = match answer_json(&message, &output) {
                    Ok(value) => serde_json::json!({"result": value}).to_string() + "\n",
                    Err(error) => {
                        serde_json::json!({"error": {"message": error}}).to_string() + "\n"
                    }
                };
                if sender
                    .send(Ok(Frame::data(Bytes::from(line))))
                    .await
                    .is_err()
                {
                    return; // The HTTP client went away; dropping ends the call.
                }
            }
            buffer.extend_from_slice(&pending);
        }
    });
    ReceiverStream(receiver)
}

/// An mpsc receiver as a stream.
struct ReceiverStream(tokio::sync::mpsc::Receiver<FrameResult>);

impl futures_core::Stream for ReceiverStream {
    type Item = FrameResult;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<FrameResult>> {
        self.0.poll_recv(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request_bytes(body: &[u8], input: &MessageDescriptor) -> Result<Vec<u8>, String> {
        Ok(request_messages(body, input)?.remove(0))
    }

    #[test]
    fn every_route_names_a_declared_method() {
        assert_eq!(METHODS.len(), ROUTES.len());
    }

    #[test]
    fn json_follows_etcds_names_and_conventions() {
        let grant = &METHODS["lease/grant"];
        let bytes =
            request_bytes(br#"{"TTL": "30", "ID": 7, "unknown": 1}"#, &grant.input()).unwrap();
        let request = bellwether_api::etcdserverpb::LeaseGrantRequest::decode(&bytes[..]).unwrap();
        assert_eq!((request.ttl, request.id), (30, 7));
        let response = bellwether_api::etcdserverpb::LeaseGrantResponse {
            header: Some(bellwether_api::etcdserverpb::ResponseHeader {
                cluster_id: 1,
                member_id: 2,
                revision: 3,
                raft_term: 0,
            }),
            id: 7,
            ttl: 30,
            error: String::new(),
        };
        let value = answer_json(&response.encode_to_vec(), &grant.output()).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"header": {"cluster_id": "1", "member_id": "2", "revision": "3"}, "ID": "7", "TTL": "30"})
        );
        let put = &METHODS["kv/put"];
        let bytes = request_bytes(br#"{"key": "Zm9v", "value": "YmFy"}"#, &put.input()).unwrap();
        let request = bellwether_api::etcdserverpb::PutRequest::decode(&bytes[..]).unwrap();
        assert_eq!(
            (&request.key[..], &request.value[..]),
            (&b"foo"[..], &b"bar"[..])
        );
        assert!(request_bytes(b"{bad", &put.input()).is_err());
        let two = request_messages(
            br#"{"ID":"1"} {"ID":"2"}"#,
            &METHODS["lease/keepalive"].input(),
        );
        assert_eq!(two.map(|m| m.len()), Ok(2));
        assert_eq!(percent_decode("a%20b%"), "a b%");
    }
}
