//! `etcdserverpb.KV`: Range, Put, DeleteRange, Txn and Compact over the
//! node's log and store. Writes go through Raft; a linearizable Range first
//! waits for a ReadIndex barrier, a serializable one reads locally.

use super::command::{read_answer, Command};
use super::convert;
use crate::client::{ClientError, NodeClient};
use crate::status::NodeStatus;
use bellwether_api::etcdserverpb as pb;
use bellwether_api::etcdserverpb::kv_client::KvClient;
use bellwether_api::etcdserverpb::kv_server::Kv;
use bellwether_kv::KvStore;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

/// The KV service of one node.
#[derive(Clone)]
pub struct KvService {
    /// Submits writes and read barriers.
    pub client: NodeClient,
    /// The store the node applies to.
    pub store: Arc<Mutex<KvStore>>,
    /// For the term in response headers.
    pub status: watch::Receiver<NodeStatus>,
    /// Cluster id in headers (a hash of the cluster name).
    pub cluster_id: u64,
    /// This member's id.
    pub member_id: u64,
    /// Members' client (gRPC) addresses, to forward requests to the leader.
    pub client_addresses: Arc<std::collections::BTreeMap<u64, std::net::SocketAddr>>,
    /// Open connections to other members, made on first use.
    pub forwarders: Arc<tokio::sync::Mutex<std::collections::BTreeMap<u64, KvClient<Channel>>>>,
}

/// A client error as etcd clients expect it.
pub fn status_of(error: ClientError) -> Status {
    match error {
        ClientError::NotLeader { .. } => Status::unavailable(format!("etcdserver: {error}")),
        ClientError::Busy => Status::resource_exhausted(format!("etcdserver: {error}")),
        ClientError::NotApplied => Status::unavailable(format!("etcdserver: {error}")),
        ClientError::Stopped => Status::unavailable("etcdserver: server stopped"),
    }
}

impl KvService {
    fn header(&self) -> pb::ResponseHeader {
        pb::ResponseHeader {
            cluster_id: self.cluster_id,
            member_id: self.member_id,
            revision: self.store.lock().expect("store lock").revision(),
            raft_term: self.status.borrow().term,
        }
    }

    /// Proposes `command`. `Err(Ok(leader))` means "not the leader, forward
    /// to this member".
    async fn write<M: prost::Message + Default>(
        &self,
        command: Command,
    ) -> Result<M, Result<u64, Status>> {
        match self.client.propose(command.encode()).await {
            Ok(answer) => read_answer::<M>(&answer).map_err(Err),
            Err(ClientError::NotLeader {
                leader: Some(leader),
            }) if leader != self.member_id => Err(Ok(leader)),
            Err(error) => Err(Err(status_of(error))),
        }
    }

    /// A client connected to member `leader`'s gRPC address.
    async fn forwarder(&self, leader: u64) -> Result<KvClient<Channel>, Status> {
        let mut forwarders = self.forwarders.lock().await;
        if let Some(client) = forwarders.get(&leader) {
            return Ok(client.clone());
        }
        let address = self.client_addresses.get(&leader).ok_or_else(|| {
            Status::unavailable(format!(
                "etcdserver: not the leader; the leader n{leader} has no client address configured"
            ))
        })?;
        let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
            .map_err(|e| Status::internal(e.to_string()))?
            .connect_timeout(std::time::Duration::from_secs(1));
        let client = KvClient::new(endpoint.connect().await.map_err(|e| {
            Status::unavailable(format!(
                "etcdserver: cannot reach the leader n{leader}: {e}"
            ))
        })?);
        forwarders.insert(leader, client.clone());
        Ok(client)
    }
}

/// Runs `$write` locally, or forwards `$request` with `$method` to the
/// leader when this member is not it.
macro_rules! write_or_forward {
    ($self:ident, $request:ident, $command:expr, $method:ident, $response:ty) => {{
        let forward_copy = $request.clone();
        match $self.write::<$response>($command($request)).await {
            Ok(mut response) => {
                response.header = Some($self.header());
                Ok(Response::new(response))
            }
            Err(Ok(leader)) => $self.forwarder(leader).await?.$method(forward_copy).await,
            Err(Err(status)) => Err(status),
        }
    }};
}

#[tonic::async_trait]
impl Kv for KvService {
    async fn range(
        &self,
        request: Request<pb::RangeRequest>,
    ) -> Result<Response<pb::RangeResponse>, Status> {
        let request = request.into_inner();
        if !request.serializable {
            match self.client.read_barrier().await {
                Ok(()) => {}
                Err(ClientError::NotLeader {
                    leader: Some(leader),
                }) if leader != self.member_id => {
                    return self.forwarder(leader).await?.range(request).await;
                }
                Err(error) => return Err(status_of(error)),
            }
        }
        let result = self
            .store
            .lock()
            .expect("store lock")
            .range(&convert::range_request(request));
        let mut response = convert::range_response(
            result.map_err(|e| Status::new(super::command::grpc_code(&e), e.to_string()))?,
        );
        response.header = Some(self.header());
        Ok(Response::new(response))
    }

    async fn put(
        &self,
        request: Request<pb::PutRequest>,
    ) -> Result<Response<pb::PutResponse>, Status> {
        let request = request.into_inner();
        write_or_forward!(self, request, Command::Put, put, pb::PutResponse)
    }

    async fn delete_range(
        &self,
        request: Request<pb::DeleteRangeRequest>,
    ) -> Result<Response<pb::DeleteRangeResponse>, Status> {
        let request = request.into_inner();
        write_or_forward!(
            self,
            request,
            Command::DeleteRange,
            delete_range,
            pb::DeleteRangeResponse
        )
    }

    async fn txn(
        &self,
        request: Request<pb::TxnRequest>,
    ) -> Result<Response<pb::TxnResponse>, Status> {
        let request = request.into_inner();
        write_or_forward!(self, request, Command::Txn, txn, pb::TxnResponse)
    }

    async fn compact(
        &self,
        request: Request<pb::CompactionRequest>,
    ) -> Result<Response<pb::CompactionResponse>, Status> {
        let request = request.into_inner();
        write_or_forward!(
            self,
            request,
            Command::Compact,
            compact,
            pb::CompactionResponse
        )
    }
}
