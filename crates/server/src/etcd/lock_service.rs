//! `v3lockpb.Lock`: Lock and Unlock, with etcd 3.4's semantics (its
//! `v3lock` server, which runs `clientv3/concurrency.Mutex` against its own
//! node).
//!
//! - **Lock** claims `name/<lease hex>` with an empty value (see
//!   [`super::campaign`]) and waits until no older key remains under
//!   `name/`; the returned key exists for as long as the lock is held and
//!   its create revision is the fencing token. A caller that names no lease
//!   gets a fresh lease that the server does not keep alive, as in etcd. If
//!   the wait fails or the call is cancelled, the key is deleted.
//! - **Unlock** deletes the key, whatever it is (etcd does no check).
//!
//! Errors carry etcd's messages and, as etcd's server returns them, code
//! `Unknown` (see [`as_etcd`]).

use super::auth_gate::Caller;
use super::backend::EtcdBackend;
use super::campaign::{self, as_etcd, WithdrawOnDrop};
use bellwether_api::etcdserverpb as pb;
use bellwether_api::v3lockpb as lpb;
use bellwether_api::v3lockpb::lock_server::Lock;
use bellwether_etcd::command::Command;
use bellwether_kv::Permission;
use tonic::{Request, Response, Status};

/// The Lock service of one node.
#[derive(Clone)]
pub struct LockService {
    /// What the node's services share.
    pub backend: EtcdBackend,
}

impl LockService {
    /// Deletes `key` for `caller`, through the log.
    async fn delete(
        &self,
        caller: &Caller,
        key: Vec<u8>,
    ) -> Result<pb::DeleteRangeResponse, Status> {
        let request = pb::DeleteRangeRequest {
            key,
            ..Default::default()
        };
        self.backend
            .write_as::<pb::DeleteRangeResponse>(caller, &Command::DeleteRange(request))
            .await
    }
}

#[tonic::async_trait]
impl Lock for LockService {
    async fn lock(
        &self,
        request: Request<lpb::LockRequest>,
    ) -> Result<Response<lpb::LockResponse>, Status> {
        let prefix = campaign::prefix(&request.get_ref().name);
        let caller = self
            .backend
            .authorize_prefix(&request, &prefix, &[Permission::Read, Permission::Write])
            .await?;
        let request = request.into_inner();
        self.backend.app_elections.campaigned(&request.name, "lock");
        let lease = match request.lease {
            0 => campaign::session_lease(&self.backend)
                .await
                .map_err(as_etcd)?,
            lease => lease,
        };
        let claim = campaign::claim(&self.backend, &caller, &request.name, lease, b"")
            .await
            .map_err(as_etcd)?;
        // The claim txn read its own key and the holder together: the key
        // lies under the lock's prefix (which the caller was authorized
        // for), and the holder was in line no later than it.
        assert!(
            claim.key.starts_with(&prefix),
            "a lock's key lies under its name"
        );
        assert!(
            claim
                .holder
                .as_ref()
                .is_none_or(|holder| holder.create_revision <= claim.create_revision),
            "the holder was in line no later than the claim"
        );
        if claim.holds() {
            self.backend
                .app_elections
                .led(&request.name, "lock", claim.create_revision);
            return Ok(Response::new(lpb::LockResponse {
                header: claim.header,
                key: claim.key,
            }));
        }
        // Dropped with the call if the client goes away while we wait.
        let withdraw_on_cancel = WithdrawOnDrop::new(&self.backend, &caller, &claim);
        let waited = campaign::wait_turn(&self.backend, &request.name, &claim).await;
        withdraw_on_cancel.disarm();
        if let Err(status) = waited {
            // As etcd: a lock that could not be acquired leaves no key.
            let _ =
                campaign::withdraw(&self.backend, &caller, &claim.key, claim.create_revision).await;
            return Err(as_etcd(status));
        }
        self.backend
            .app_elections
            .led(&request.name, "lock", claim.create_revision);
        Ok(Response::new(lpb::LockResponse {
            header: Some(self.backend.header()),
            key: claim.key,
        }))
    }

    async fn unlock(
        &self,
        request: Request<lpb::UnlockRequest>,
    ) -> Result<Response<lpb::UnlockResponse>, Status> {
        let key = request.get_ref().key.clone();
        let caller = self
            .backend
            .authorize_key(&request, &key, &[Permission::Write])
            .await?;
        let key = request.into_inner().key;
        let response = self.delete(&caller, key).await.map_err(as_etcd)?;
        Ok(Response::new(lpb::UnlockResponse {
            header: response.header,
        }))
    }
}
