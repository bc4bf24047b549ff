//! The header revision of a write's response.

use super::{within, Members};
use etcd_client::{Compare, CompareOp, Txn, TxnOp};

/// Writes per client.
const WRITES: usize = 40;

/// Every Put and Txn response carries the revision that write created,
/// even while other clients write through other members: etcd 3.4 sets the
/// header revision of a write to the store revision right after applying
/// it. clientv3's concurrency.Mutex and Election take their place in line
/// from that revision (the etcdctl lock and elect commands), so a later
/// revision makes them wait on keys created after their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_responses_carry_the_revision_the_write_created() {
    let members = Members::start("conformance-write-revision");
    let mut writers = Vec::new();
    for index in 0..3 {
        let mut client = members.client(index).await;
        writers.push(tokio::spawn(async move {
            let mut mismatches = Vec::new();
            for n in 0..WRITES {
                let key = format!("w{index}/{n}");
                let header_revision = if n % 2 == 0 {
                    let put = within(client.put(key.clone(), "v", None))
                        .await
                        .expect("put");
                    put.header().expect("header").revision()
                } else {
                    let txn = Txn::new()
                        .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                        .and_then([TxnOp::put(key.clone(), "v", None)]);
                    let done = within(client.txn(txn)).await.expect("txn");
                    assert!(done.succeeded());
                    done.header().expect("header").revision()
                };
                let read = within(client.get(key.clone(), None)).await.expect("get");
                let created = read.kvs()[0].mod_revision();
                if header_revision != created {
                    mismatches.push(format!(
                        "{key}: header {header_revision}, created {created}"
                    ));
                }
            }
            mismatches
        }));
    }
    let mut mismatches = Vec::new();
    for writer in writers {
        mismatches.extend(within(writer).await.expect("writer"));
    }
    assert!(
        mismatches.is_empty(),
        "write header revisions: {mismatches:?}"
    );
}
