//! Wire-format checks for the generated etcd v3 types.
//!
//! A field number typo in a .proto file would still compile and still round
//! trip through our own code, yet break every real etcd client. So these tests
//! pin exact encoded bytes for fields whose numbers etcd fixed, then check one
//! gRPC call end to end over loopback.

use bellwether_api::etcdserverpb::{
    compare, kv_client::KvClient, kv_server, request_op, CompactionRequest, CompactionResponse,
    Compare, DeleteRangeRequest, DeleteRangeResponse, PutRequest, PutResponse, RangeRequest,
    RangeResponse, RequestOp, ResponseHeader, TxnRequest, TxnResponse, WatchResponse,
};
use bellwether_api::mvccpb::{Event, KeyValue};
use bellwether_api::v3electionpb::LeaderKey;
use bellwether_api::v3lockpb::LockResponse;
use prost::Message;

/// The protobuf tag byte for a field: its number shifted left three bits,
/// or'ed with the wire type (0 = varint, 2 = length-delimited).
fn tag(field_number: u8, wire_type: u8) -> u8 {
    assert!(field_number < 16, "single-byte tags only");
    (field_number << 3) | wire_type
}

#[test]
fn put_request_puts_key_value_lease_in_fields_1_2_3() {
    let request = PutRequest {
        key: b"a".to_vec(),
        value: b"b".to_vec(),
        lease: 5,
        ..Default::default()
    };
    assert_eq!(
        request.encode_to_vec(),
        [0x0a, 1, b'a', 0x12, 1, b'b', 0x18, 5],
    );
}

#[test]
fn response_header_numbers_cluster_member_revision_term_1_to_4() {
    let header = ResponseHeader {
        cluster_id: 11,
        member_id: 22,
        revision: 33,
        raft_term: 44,
    };
    assert_eq!(
        header.encode_to_vec(),
        [tag(1, 0), 11, tag(2, 0), 22, tag(3, 0), 33, tag(4, 0), 44],
    );
}

#[test]
fn key_value_numbers_its_six_fields_in_etcd_order() {
    let kv = KeyValue {
        key: b"k".to_vec(),
        create_revision: 2,
        mod_revision: 3,
        version: 4,
        value: b"v".to_vec(),
        lease: 6,
    };
    assert_eq!(
        kv.encode_to_vec(),
        [
            tag(1, 2),
            1,
            b'k',
            tag(2, 0),
            2,
            tag(3, 0),
            3,
            tag(4, 0),
            4,
            tag(5, 2),
            1,
            b'v',
            tag(6, 0),
            6
        ],
    );
}

#[test]
fn watch_response_sends_compact_revision_as_5_and_events_as_11() {
    let response = WatchResponse {
        compact_revision: 7,
        events: vec![Event::default()],
        ..Default::default()
    };
    // Field 11, length-delimited, still fits one tag byte: (11 << 3) | 2 =
    // 0x5a. An empty event encodes to zero bytes.
    assert_eq!(response.encode_to_vec(), [tag(5, 0), 7, 0x5a, 0]);
}

#[test]
fn compare_range_end_uses_field_64_and_lease_target_uses_field_8() {
    let guard = Compare {
        target: compare::CompareTarget::Lease as i32,
        target_union: Some(compare::TargetUnion::Lease(9)),
        range_end: b"z".to_vec(),
        ..Default::default()
    };
    // Field 64 needs a two-byte varint tag: (64 << 3) | 2 = 514 = 0x82 0x04.
    assert_eq!(
        guard.encode_to_vec(),
        [tag(2, 0), 4, tag(8, 0), 9, 0x82, 0x04, 1, b'z'],
    );
}

#[test]
fn request_op_carries_put_in_oneof_field_2() {
    let op = RequestOp {
        request: Some(request_op::Request::RequestPut(PutRequest {
            key: b"a".to_vec(),
            ..Default::default()
        })),
    };
    assert_eq!(op.encode_to_vec(), [tag(2, 2), 3, 0x0a, 1, b'a']);
}

#[test]
fn election_and_lock_messages_use_etcd_field_numbers() {
    let leader = LeaderKey {
        name: b"n".to_vec(),
        key: b"k".to_vec(),
        rev: 3,
        lease: 4,
    };
    assert_eq!(
        leader.encode_to_vec(),
        [
            tag(1, 2),
            1,
            b'n',
            tag(2, 2),
            1,
            b'k',
            tag(3, 0),
            3,
            tag(4, 0),
            4
        ],
    );
    let lock = LockResponse {
        header: None,
        key: b"k".to_vec(),
    };
    assert_eq!(lock.encode_to_vec(), [tag(2, 2), 1, b'k']);
}

fn sample_range_response() -> RangeResponse {
    RangeResponse {
        header: Some(ResponseHeader {
            cluster_id: 0xdead_beef,
            member_id: 7,
            revision: 42,
            raft_term: 3,
        }),
        kvs: vec![
            KeyValue {
                key: b"alpha".to_vec(),
                create_revision: 10,
                mod_revision: 41,
                version: 5,
                value: b"one".to_vec(),
                lease: 0,
            },
            KeyValue {
                key: b"beta".to_vec(),
                create_revision: 42,
                mod_revision: 42,
                version: 1,
                value: Vec::new(),
                lease: 0x1234,
            },
        ],
        more: true,
        count: 9,
    }
}

#[test]
fn range_response_with_header_and_kvs_round_trips() {
    let original = sample_range_response();
    let bytes = original.encode_to_vec();
    let decoded = RangeResponse::decode(bytes.as_slice()).expect("decodes");
    assert_eq!(decoded, original);
    // The header is field 1, so it is the first thing on the wire.
    assert_eq!(bytes[0], tag(1, 2));
}

/// A KV service that answers Range with a fixed reply and refuses the rest.
struct FixedRange;

#[tonic::async_trait]
impl kv_server::Kv for FixedRange {
    async fn range(
        &self,
        request: tonic::Request<RangeRequest>,
    ) -> Result<tonic::Response<RangeResponse>, tonic::Status> {
        if request.get_ref().key != b"alpha" {
            return Err(tonic::Status::not_found("stub only knows alpha"));
        }
        Ok(tonic::Response::new(sample_range_response()))
    }

    async fn put(
        &self,
        _request: tonic::Request<PutRequest>,
    ) -> Result<tonic::Response<PutResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("stub"))
    }

    async fn delete_range(
        &self,
        _request: tonic::Request<DeleteRangeRequest>,
    ) -> Result<tonic::Response<DeleteRangeResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("stub"))
    }

    async fn txn(
        &self,
        _request: tonic::Request<TxnRequest>,
    ) -> Result<tonic::Response<TxnResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("stub"))
    }

    async fn compact(
        &self,
        _request: tonic::Request<CompactionRequest>,
    ) -> Result<tonic::Response<CompactionResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("stub"))
    }
}

#[tokio::test]
async fn kv_range_over_grpc_returns_the_server_reply() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let address = listener.local_addr().expect("local address");
    let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(kv_server::KvServer::new(FixedRange))
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                async {
                    let _ = shutdown_rx.await;
                },
            ),
    );

    let mut client = KvClient::connect(format!("http://{address}"))
        .await
        .expect("connect to loopback server");
    let reply = client
        .range(RangeRequest {
            key: b"alpha".to_vec(),
            ..Default::default()
        })
        .await
        .expect("range succeeds")
        .into_inner();
    assert_eq!(reply, sample_range_response());

    let refused = client
        .put(PutRequest::default())
        .await
        .expect_err("stub refuses put");
    assert_eq!(refused.code(), tonic::Code::Unimplemented);

    shutdown_tx.send(()).expect("server still running");
    server
        .await
        .expect("server task joins")
        .expect("server exits cleanly");
}
