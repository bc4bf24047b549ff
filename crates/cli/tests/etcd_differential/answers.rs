//! Runs one call against one server and writes its answer in a form that
//! two servers holding the same data must agree on: the header keeps
//! only the revision (cluster and member ids and Raft terms are each
//! server's own), a lease's remaining TTL only whether it is positive,
//! and an error its gRPC code and message.

use super::calls::Call;
use bellwether_api::etcdserverpb as pb;
use pb::kv_client::KvClient;
use pb::lease_client::LeaseClient;
use tonic::transport::Channel;

/// One server's clients.
pub struct Server {
    kv: KvClient<Channel>,
    lease: LeaseClient<Channel>,
}

impl Server {
    pub async fn connect(address: &str) -> Server {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
            .expect("an address")
            .connect()
            .await
            .unwrap_or_else(|e| panic!("cannot reach {address}: {e}"));
        Server {
            kv: KvClient::new(channel.clone()),
            lease: LeaseClient::new(channel),
        }
    }
}

/// An answer as compared, and the revision it reports, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub text: String,
    pub revision: Option<i64>,
    pub ok: bool,
}

fn header(header: &mut Option<pb::ResponseHeader>) -> Option<i64> {
    let header = header.as_mut()?;
    header.cluster_id = 0;
    header.member_id = 0;
    header.raft_term = 0;
    Some(header.revision)
}

fn answer<T: std::fmt::Debug>(
    result: Result<tonic::Response<T>, tonic::Status>,
    normalize: impl FnOnce(&mut T) -> Option<i64>,
) -> Answer {
    match result {
        Ok(response) => {
            let mut response = response.into_inner();
            let revision = normalize(&mut response);
            Answer {
                text: format!("{response:?}"),
                revision,
                ok: true,
            }
        }
        Err(status) => Answer {
            text: format!("error {:?}: {}", status.code(), status.message()),
            revision: None,
            ok: false,
        },
    }
}

/// Headers inside a txn's answers carry the same ids: cleared too.
fn txn_headers(txn: &mut pb::TxnResponse) -> Option<i64> {
    use pb::response_op::Response;
    for op in &mut txn.responses {
        match &mut op.response {
            Some(Response::ResponseRange(r)) => {
                header(&mut r.header);
            }
            Some(Response::ResponsePut(r)) => {
                header(&mut r.header);
            }
            Some(Response::ResponseDeleteRange(r)) => {
                header(&mut r.header);
            }
            Some(Response::ResponseTxn(r)) => {
                txn_headers(r);
            }
            None => {}
        }
    }
    header(&mut txn.header)
}

/// Sends `call` to `server`.
pub async fn run(server: &mut Server, call: &Call) -> Answer {
    match call.clone() {
        Call::Range(r) => answer(server.kv.range(r).await, |a| header(&mut a.header)),
        Call::Put(r) => answer(server.kv.put(r).await, |a| header(&mut a.header)),
        Call::Delete(r) => answer(server.kv.delete_range(r).await, |a| header(&mut a.header)),
        Call::Txn(r) => answer(server.kv.txn(r).await, txn_headers),
        Call::Compact(r) => answer(server.kv.compact(r).await, |a| header(&mut a.header)),
        Call::LeaseGrant(r) => answer(server.lease.lease_grant(r).await, |a| header(&mut a.header)),
        Call::LeaseRevoke(r) => answer(server.lease.lease_revoke(r).await, |a| {
            header(&mut a.header)
        }),
        Call::LeaseTimeToLive(r) => answer(server.lease.lease_time_to_live(r).await, |a| {
            a.ttl = a.ttl.signum();
            a.keys.sort();
            header(&mut a.header)
        }),
    }
}
