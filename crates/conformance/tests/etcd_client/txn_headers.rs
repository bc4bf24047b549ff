//! The headers of the responses nested in a txn, compared with a real
//! etcd 3.4's.
//!
//! etcd gives every response inside a txn a header that holds only a
//! revision: the one the operation saw (the revision before the txn for a
//! read or an empty delete that comes before any change, the txn's own
//! revision for a put and for anything after a change). A nested txn's
//! header is present and empty. Clients read the revision of a put made in
//! a txn from its nested header; with no header they read 0, and a client
//! that then watches from that revision + 1 waits on history that is gone
//! or never comes.

use super::common::etcd_server::EtcdServer;
use super::{within, Members};
use etcd_client::{Client, EventType, Txn, TxnOp, TxnOpResponse, WatchOptions};

/// One nested response, reduced to what must match etcd: its kind, whether
/// it has a header, the header's revision relative to the revision before
/// the txn, and whether the header's other fields are zero.
#[derive(Debug, PartialEq, Eq)]
struct Nested {
    kind: &'static str,
    has_header: bool,
    revision_from_before: i64,
    other_fields_zero: bool,
}

/// Flattens the nested responses of a txn, depth first.
fn flatten(responses: Vec<TxnOpResponse>, before: i64, out: &mut Vec<Nested>) {
    for response in responses {
        let (kind, header, nested) = match &response {
            TxnOpResponse::Put(r) => ("put", r.header().cloned(), None),
            TxnOpResponse::Get(r) => ("range", r.header().cloned(), None),
            TxnOpResponse::Delete(r) => ("delete", r.header().cloned(), None),
            TxnOpResponse::Txn(r) => ("txn", r.header().cloned(), Some(r.op_responses())),
        };
        out.push(Nested {
            kind,
            has_header: header.is_some(),
            revision_from_before: header.as_ref().map_or(-1, |h| {
                if h.revision() == 0 {
                    0
                } else {
                    h.revision() - before
                }
            }),
            other_fields_zero: header
                .as_ref()
                .is_some_and(|h| h.cluster_id() == 0 && h.member_id() == 0 && h.raft_term() == 0),
        });
        if let Some(nested) = nested {
            flatten(nested, before, out);
        }
    }
}

/// Runs the same txns on `client` under `prefix` and returns their nested
/// responses, normalised, and the outer headers' revisions relative to the
/// revision before each txn.
async fn txn_transcript(client: &mut Client, prefix: &str) -> (Vec<Nested>, Vec<i64>) {
    let key = |name: &str| format!("{prefix}/{name}");
    let put = within(client.put(key("a"), "1", None)).await.expect("put");
    let mut before = put.header().expect("header").revision();
    let get = || TxnOp::get(key("a"), None);
    let inner = Txn::new().and_then([get(), TxnOp::put(key("x"), "1", None), get()]);
    let txns = [
        // Reads around a nested txn that writes.
        Txn::new().and_then([get(), TxnOp::txn(inner), get()]),
        // An empty delete before and after a delete that deletes.
        Txn::new().and_then([
            TxnOp::delete(key("none"), None),
            TxnOp::delete(key("a"), None),
            TxnOp::delete(key("none2"), None),
        ]),
        // A read-only txn.
        Txn::new().and_then([get(), TxnOp::txn(Txn::new().and_then([get()]))]),
    ];
    let mut nested = Vec::new();
    let mut outer = Vec::new();
    for txn in txns {
        let response = within(client.txn(txn)).await.expect("txn");
        let revision = response.header().expect("outer header").revision();
        outer.push(revision - before);
        flatten(response.op_responses(), before, &mut nested);
        before = revision;
    }
    (nested, outer)
}

/// bellwether's nested headers match etcd's, through the leader and
/// through a follower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_txn_headers_match_a_real_etcd() {
    let etcd = EtcdServer::start("conformance-txn-headers-etcd");
    let members = Members::start("conformance-txn-headers");
    let mut etcd_client = within(Client::connect([etcd.url()], None))
        .await
        .expect("connects to etcd");
    let expected = txn_transcript(&mut etcd_client, "etcd").await;
    // The shape checked is not empty nor trivially equal.
    assert_eq!(expected.0.len(), 12, "etcd's transcript: {expected:?}");
    assert!(expected.0.iter().all(|n| n.has_header), "{expected:?}");
    for (index, label) in [(0, "leader"), (1, "follower")] {
        let mut client = members.client(index).await;
        let got = txn_transcript(&mut client, label).await;
        assert_eq!(got, expected, "through the {label}");
    }
}

/// The revision read from a put made inside a txn is the one the put
/// created, so a watch from the next revision sees the very next change
/// and nothing older (the pattern a widely used client's own test follows).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_a_txn_put_revision_sees_the_next_change() {
    let members = Members::start("conformance-txn-watch");
    let mut client = members.client(1).await;
    let txn = Txn::new().and_then([TxnOp::put("tw/k", "v1", None)]);
    let response = within(client.txn(txn)).await.expect("txn");
    let TxnOpResponse::Put(put) = &response.op_responses()[0] else {
        panic!("expected a put response")
    };
    let revision = put.header().expect("nested put header").revision();
    let read = within(client.get("tw/k", None)).await.expect("get");
    assert_eq!(
        revision,
        read.kvs()[0].mod_revision(),
        "nested put revision"
    );
    let options = WatchOptions::new().with_start_revision(revision + 1);
    let mut stream = within(client.watch("tw/k", Some(options)))
        .await
        .expect("watch");
    within(client.put("tw/k", "v2", None)).await.expect("put");
    // The first answer confirms the watch; the events come after it.
    let message = loop {
        let message = within(stream.message())
            .await
            .expect("watch stream")
            .expect("a watch response");
        if !message.events().is_empty() {
            break message;
        }
    };
    let event = &message.events()[0];
    assert_eq!(event.event_type(), EventType::Put);
    let kv = event.kv().expect("event kv");
    assert_eq!(
        (kv.value(), kv.mod_revision()),
        (b"v2".as_slice(), revision + 1)
    );
}
