//! Bad input through a real etcd client: each request gets etcd 3.4's gRPC
//! code and message, through the leader and through a follower (which
//! forwards), and nothing written before is lost or changed.

use super::{within, Members};
use etcd_client::{Client, Compare, CompareOp, Error, GetOptions, PutOptions, Txn, TxnOp};

/// etcd's bound on a request (`--max-request-bytes` default, 1.5 MiB).
const REQUEST_BYTES_MAX: usize = 1536 * 1024;
/// etcd's bound on the operations of one txn (`--max-txn-ops` default).
const TXN_OPS_MAX: usize = 128;

/// The gRPC code's name and the message of a failed call.
fn code_and_message<T: std::fmt::Debug>(result: Result<T, Error>) -> (String, String) {
    match result {
        Err(Error::GRpcStatus(status)) => {
            (format!("{:?}", status.code()), status.message().to_string())
        }
        other => panic!("expected a gRPC error status, got {other:?}"),
    }
}

/// Runs every bad request through `client` and checks etcd's answer.
async fn refused_as_etcd_refuses(client: &mut Client, via: &str) {
    let refused = |result, code: &str, message: &str| {
        let (got_code, got_message) = code_and_message(result);
        assert_eq!(
            (got_code.as_str(), got_message.as_str()),
            (code, message),
            "via {via}"
        );
    };
    refused(
        within(client.put("", "v", None)).await.map(|_| ()),
        "InvalidArgument",
        "etcdserver: key is not provided",
    );
    refused(
        within(client.put("big", vec![b'x'; REQUEST_BYTES_MAX + 1], None))
            .await
            .map(|_| ()),
        "InvalidArgument",
        "etcdserver: request is too large",
    );
    // Past the gRPC bound (the request bound plus 512 KiB) the message is
    // refused unread, with grpc-go's code and wording.
    let (code, message) = code_and_message(
        within(client.put("huge", vec![b'x'; 2 * 1024 * 1024], None))
            .await
            .map(|_| ()),
    );
    assert_eq!(code, "ResourceExhausted", "via {via}: {message}");
    assert!(
        message.starts_with("grpc: received message larger than max ("),
        "via {via}: {message}"
    );
    refused(
        within(client.put("k", "v", Some(PutOptions::new().with_lease(0x7777))))
            .await
            .map(|_| ()),
        "NotFound",
        "etcdserver: requested lease not found",
    );
    refused(
        within(client.put(
            "never-written",
            "",
            Some(PutOptions::new().with_ignore_value()),
        ))
        .await
        .map(|_| ()),
        "InvalidArgument",
        "etcdserver: key not found",
    );
    let too_many: Vec<TxnOp> = (0..=TXN_OPS_MAX)
        .map(|n| TxnOp::put(format!("op{n}"), "v", None))
        .collect();
    refused(
        within(client.txn(Txn::new().and_then(too_many)))
            .await
            .map(|_| ()),
        "InvalidArgument",
        "etcdserver: too many operations in txn request",
    );
    let duplicate = Txn::new()
        .when([Compare::version("kept", CompareOp::Greater, 0)])
        .and_then([TxnOp::put("dup", "1", None), TxnOp::put("dup", "2", None)]);
    refused(
        within(client.txn(duplicate)).await.map(|_| ()),
        "InvalidArgument",
        "etcdserver: duplicate key given in txn request",
    );
    refused(
        within(client.get("kept", Some(GetOptions::new().with_revision(1 << 40))))
            .await
            .map(|_| ()),
        "OutOfRange",
        "etcdserver: mvcc: required revision is a future revision",
    );
    refused(
        within(client.lease_revoke(0x7777)).await.map(|_| ()),
        "NotFound",
        "etcdserver: requested lease not found",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_etcds_codes_and_lose_nothing() {
    let members = Members::start("conformance-bad-input");
    let mut leader = members.client(0).await;
    let kept = within(leader.put("kept", "value", None))
        .await
        .expect("put");
    let kept_revision = kept.header().expect("header").revision();
    for (index, via) in [(0, "the leader"), (1, "a follower")] {
        let mut client = members.client(index).await;
        refused_as_etcd_refuses(&mut client, via).await;
    }
    // A compacted revision, once history was compacted past it.
    within(leader.put("kept2", "value", None))
        .await
        .expect("put");
    let now = within(leader.get("kept2", None))
        .await
        .expect("get")
        .header()
        .expect("header")
        .revision();
    within(leader.compact(now, None)).await.expect("compact");
    let (code, message) = code_and_message(
        within(leader.get("kept", Some(GetOptions::new().with_revision(kept_revision)))).await,
    );
    assert_eq!(
        (code.as_str(), message.as_str()),
        (
            "OutOfRange",
            "etcdserver: mvcc: required revision has been compacted"
        )
    );
    // Nothing refused was written, and nothing written was lost.
    let read = within(leader.get("kept", None)).await.expect("get");
    assert_eq!(read.kvs().len(), 1);
    assert_eq!(read.kvs()[0].value(), b"value");
    assert_eq!(read.kvs()[0].mod_revision(), kept_revision);
    for absent in ["", "big", "k", "never-written", "op0", "dup"] {
        let read = within(leader.get(absent, None)).await;
        if absent.is_empty() {
            assert!(read.is_err(), "an empty key is refused on reads too");
        } else {
            assert!(read.expect("get").kvs().is_empty(), "{absent} was written");
        }
    }
}
