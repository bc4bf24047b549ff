//! `etcdserverpb.KV`: Range, Put, DeleteRange, Txn and Compact over the
//! node's log and store. Writes go through Raft; a linearizable Range, or
//! a Txn that only reads, first waits for a ReadIndex barrier, a
//! serializable one reads locally. A follower forwards what only the
//! leader can serve. Every call is checked against the caller's
//! permissions first (`auth_gate.rs`).

use super::auth_gate::Caller;
use super::backend::{status_of_kv, EtcdBackend};
use bellwether_api::etcdserverpb as pb;
use bellwether_api::etcdserverpb::kv_server::Kv;
use bellwether_etcd::command::Command;
use bellwether_etcd::convert;
use bellwether_kv::Permission;
use tonic::{Request, Response, Status};

/// The KV service of one node.
#[derive(Clone)]
pub struct KvService {
    /// What the node's services share.
    pub backend: EtcdBackend,
}

impl KvService {
    /// A txn that only reads, served as etcd serves one: not through the
    /// log, but after a ReadIndex barrier (none when every range asks for
    /// a serializable read), from this member's store.
    async fn read_only_txn(
        &self,
        caller: Caller,
        request: pb::TxnRequest,
    ) -> Result<Response<pb::TxnResponse>, Status> {
        assert!(
            is_read_only(&request),
            "a txn served outside the log only reads"
        );
        if !is_serializable(&request) {
            self.backend.read_barrier().await?;
        }
        let mut store = self.backend.store();
        caller.check_txn(&store, &request)?;
        let txn = convert::txn_request(request)
            .ok_or_else(|| Status::invalid_argument("etcdserver: invalid txn request"))?;
        let result = store.read_txn(&txn);
        drop(store);
        let result = result.map_err(|e| status_of_kv(&e))?;
        // The revision read at: a write applied since must not show in
        // the header of data read before it.
        let revision = result.revision;
        let mut response = convert::txn_response(result);
        response.header = Some(self.backend.header_at(revision));
        Ok(Response::new(response))
    }
}

/// etcd's rule for a txn served without the log: every operation of both
/// branches is a range.
fn is_read_only(request: &pb::TxnRequest) -> bool {
    request
        .success
        .iter()
        .chain(&request.failure)
        .all(|op| matches!(op.request, Some(pb::request_op::Request::RequestRange(_))))
}

/// etcd's rule for a read-only txn served without a barrier: every range
/// asks for a serializable read.
fn is_serializable(request: &pb::TxnRequest) -> bool {
    request.success.iter().chain(&request.failure).all(|op| {
        matches!(&op.request, Some(pb::request_op::Request::RequestRange(range)) if range.serializable)
    })
}

/// Logs `$command($request)` for `$caller` (a follower's goes to the
/// leader through the member) and answers with the state machine's answer.
macro_rules! logged {
    ($self:ident, $caller:ident, $request:ident, $command:path, $response:ty) => {{
        let command = $command($request);
        let response = $self
            .backend
            .write_as::<$response>(&$caller, &command)
            .await?;
        Ok(Response::new(response))
    }};
}

#[tonic::async_trait]
impl Kv for KvService {
    async fn range(
        &self,
        request: Request<pb::RangeRequest>,
    ) -> Result<Response<pb::RangeResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        if !request.serializable {
            self.backend.read_barrier().await?;
        }
        let store = self.backend.store();
        caller.check_range(&store, &request.key, &request.range_end, Permission::Read)?;
        let result = store.range(&convert::range_request(request));
        drop(store);
        let result = result.map_err(|e| status_of_kv(&e))?;
        // The store's revision at the read (etcd's header revision), not
        // one published by an apply since.
        let revision = result.revision;
        let mut response = convert::range_response(result);
        response.header = Some(self.backend.header_at(revision));
        Ok(Response::new(response))
    }

    async fn put(
        &self,
        request: Request<pb::PutRequest>,
    ) -> Result<Response<pb::PutResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        self.backend
            .authorize(&caller, |store| caller.check_put(store, &request))
            .await?;
        logged!(self, caller, request, Command::Put, pb::PutResponse)
    }

    async fn delete_range(
        &self,
        request: Request<pb::DeleteRangeRequest>,
    ) -> Result<Response<pb::DeleteRangeResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        self.backend
            .authorize(&caller, |store| caller.check_delete(store, &request))
            .await?;
        logged!(
            self,
            caller,
            request,
            Command::DeleteRange,
            pb::DeleteRangeResponse
        )
    }

    async fn txn(
        &self,
        request: Request<pb::TxnRequest>,
    ) -> Result<Response<pb::TxnResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        if is_read_only(&request) {
            return self.read_only_txn(caller, request).await;
        }
        self.backend
            .authorize(&caller, |store| caller.check_txn(store, &request))
            .await?;
        logged!(self, caller, request, Command::Txn, pb::TxnResponse)
    }

    async fn compact(
        &self,
        request: Request<pb::CompactionRequest>,
    ) -> Result<Response<pb::CompactionResponse>, Status> {
        // etcd 3.4 lets any caller compact, authenticated or not.
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        logged!(
            self,
            caller,
            request,
            Command::Compact,
            pb::CompactionResponse
        )
    }
}
