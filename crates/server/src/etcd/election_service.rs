//! `v3electionpb.Election`: Campaign, Proclaim, Leader, Observe and Resign,
//! with etcd 3.4's semantics (its `v3election` server, which runs
//! `clientv3/concurrency.Election` against its own node).
//!
//! - **Campaign** claims `name/<lease hex>` (see [`super::campaign`]), makes
//!   the key's value the requested one if the key already existed with
//!   another, then waits until no older key remains under `name/`. The
//!   returned `LeaderKey.rev` is the key's create revision. A caller that
//!   names no lease gets a fresh lease of
//!   [`SESSION_TTL_SECONDS`](super::campaign::SESSION_TTL_SECONDS) that the
//!   server does not keep alive, as in etcd. If the call is cancelled while
//!   it waits, the key is deleted (etcd resigns on a cancelled context).
//! - **Proclaim** and **Resign** act only if `LeaderKey.key` still has
//!   create revision `LeaderKey.rev`; Proclaim otherwise fails with
//!   "election: not leader", Resign succeeds doing nothing.
//! - **Leader** is a linearizable read of the oldest key under `name/`.
//! - **Observe** reads the leader linearizably once, then follows this
//!   member's applied store (see [`super::leader_observer`]), so it is
//!   served by whichever member the client reached.
//!
//! Errors carry etcd's messages and, as etcd's server returns them, code
//! `Unknown` (see [`as_etcd`]).

use super::auth_gate::Caller;
use super::backend::EtcdBackend;
use super::campaign::{self, as_etcd, first_created_request, Claim, WithdrawOnDrop};
use super::leader_observer::LeaderObserver;
use bellwether_api::etcdserverpb as pb;
use bellwether_api::v3electionpb as epb;
use bellwether_api::v3electionpb::election_server::Election;
use bellwether_etcd::convert;
use bellwether_kv::Permission;
use tokio::sync::mpsc;
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

/// Responses an Observe stream buffers for a slow client before the
/// observer waits for it.
const OBSERVE_BUFFER_MAX: usize = 16;

/// Leader reports one observer step may produce before it sends them.
const OBSERVE_STEP_SIGHTINGS_MAX: usize = 64;

/// etcd's message when no leader is elected.
const NO_LEADER: &str = "election: no leader";

/// etcd's message when a leader key no longer leads.
const NOT_LEADER: &str = "election: not leader";

/// etcd's message when Proclaim or Resign carries no leader key.
const MISSING_LEADER_KEY: &str = "\"leader\" field must be provided";

/// The Election service of one node.
#[derive(Clone)]
pub struct ElectionService {
    /// What the node's services share.
    pub backend: EtcdBackend,
}

impl ElectionService {
    /// Puts `value` on `key` with `lease` if the key is still the one
    /// created at `create_revision`.
    async fn proclaim_value(
        &self,
        caller: &Caller,
        key: &[u8],
        create_revision: i64,
        lease: i64,
        value: &[u8],
    ) -> Result<pb::TxnResponse, Status> {
        let put = pb::RequestOp {
            request: Some(pb::request_op::Request::RequestPut(pb::PutRequest {
                key: key.to_vec(),
                value: value.to_vec(),
                lease,
                ..Default::default()
            })),
        };
        let request = pb::TxnRequest {
            compare: vec![campaign::created_at(key, create_revision)],
            success: vec![put],
            failure: vec![],
        };
        let response = campaign::txn(&self.backend, caller, request).await?;
        if !response.succeeded {
            return Err(Status::unknown(NOT_LEADER));
        }
        Ok(response)
    }

    /// Makes the claim's value `value` (a campaign by a key that already
    /// existed with another value); on failure, withdraws the claim, as
    /// etcd does.
    async fn adopt_value(
        &self,
        caller: &Caller,
        claim: &Claim,
        lease: i64,
        value: &[u8],
    ) -> Result<(), Status> {
        if claim.value == value {
            return Ok(());
        }
        let proclaimed = self
            .proclaim_value(caller, &claim.key, claim.create_revision, lease, value)
            .await;
        if let Err(status) = proclaimed {
            let _ =
                campaign::withdraw(&self.backend, caller, &claim.key, claim.create_revision).await;
            return Err(status);
        }
        Ok(())
    }

    /// The header for a report of the store at `revision`.
    fn header_at(&self, revision: i64) -> pb::ResponseHeader {
        pb::ResponseHeader {
            revision,
            ..self.backend.header()
        }
    }
}

#[tonic::async_trait]
impl Election for ElectionService {
    async fn campaign(
        &self,
        request: Request<epb::CampaignRequest>,
    ) -> Result<Response<epb::CampaignResponse>, Status> {
        let prefix = campaign::prefix(&request.get_ref().name);
        let caller = self
            .backend
            .authorize_prefix(&request, &prefix, &[Permission::Read, Permission::Write])
            .await?;
        let request = request.into_inner();
        self.backend
            .app_elections
            .campaigned(&request.name, "election");
        let lease = match request.lease {
            0 => campaign::session_lease(&self.backend)
                .await
                .map_err(as_etcd)?,
            lease => lease,
        };
        let claim = campaign::claim(&self.backend, &caller, &request.name, lease, &request.value)
            .await
            .map_err(as_etcd)?;
        // Dropped with the call if the client goes away while we wait.
        let withdraw_on_cancel = WithdrawOnDrop::new(&self.backend, &caller, &claim);
        let mut outcome = self
            .adopt_value(&caller, &claim, lease, &request.value)
            .await;
        if outcome.is_ok() && !claim.holds() {
            outcome = campaign::wait_turn(&self.backend, &request.name, &claim).await;
        }
        // An answered call keeps its key, even on failure (etcd withdraws
        // only on cancellation, or when adopting the value failed).
        withdraw_on_cancel.disarm();
        outcome.map_err(as_etcd)?;
        self.backend
            .app_elections
            .led(&request.name, "election", claim.create_revision);
        Ok(Response::new(epb::CampaignResponse {
            header: claim.header,
            leader: Some(epb::LeaderKey {
                name: request.name,
                key: claim.key,
                rev: claim.create_revision,
                lease,
            }),
        }))
    }

    async fn proclaim(
        &self,
        request: Request<epb::ProclaimRequest>,
    ) -> Result<Response<epb::ProclaimResponse>, Status> {
        // The call names the key it writes: that key is checked (read for
        // the compare, write for the put), whatever election it claims.
        let key = request.get_ref().leader.as_ref().map(|l| l.key.clone());
        let caller = self
            .backend
            .authorize_key(
                &request,
                &key.unwrap_or_default(),
                &[Permission::Read, Permission::Write],
            )
            .await?;
        let request = request.into_inner();
        let leader = request
            .leader
            .ok_or_else(|| Status::unknown(MISSING_LEADER_KEY))?;
        let response = self
            .proclaim_value(
                &caller,
                &leader.key,
                leader.rev,
                leader.lease,
                &request.value,
            )
            .await
            .map_err(as_etcd)?;
        Ok(Response::new(epb::ProclaimResponse {
            header: response.header,
        }))
    }

    async fn leader(
        &self,
        request: Request<epb::LeaderRequest>,
    ) -> Result<Response<epb::LeaderResponse>, Status> {
        let prefix = campaign::prefix(&request.get_ref().name);
        self.backend
            .authorize_prefix(&request, &prefix, &[Permission::Read])
            .await?;
        let name = request.into_inner().name;
        let prefix = campaign::prefix(&name);
        let response = campaign::range(&self.backend, first_created_request(&prefix))
            .await
            .map_err(as_etcd)?;
        let kv = response.kvs.into_iter().next();
        if kv.is_none() {
            return Err(Status::unknown(NO_LEADER));
        }
        Ok(Response::new(epb::LeaderResponse {
            header: response.header,
            kv,
        }))
    }

    type ObserveStream = ReceiverStream<Result<epb::LeaderResponse, Status>>;

    async fn observe(
        &self,
        request: Request<epb::LeaderRequest>,
    ) -> Result<Response<Self::ObserveStream>, Status> {
        let prefix = campaign::prefix(&request.get_ref().name);
        self.backend
            .authorize_prefix(&request, &prefix, &[Permission::Read])
            .await?;
        let name = request.into_inner().name;
        let prefix = campaign::prefix(&name);
        let first = campaign::range(&self.backend, first_created_request(&prefix))
            .await
            .map_err(as_etcd)?;
        let revision = first.header.as_ref().map_or(0, |header| header.revision);
        let leader = first.kvs.into_iter().next();
        let observer = LeaderObserver::new(
            prefix,
            leader
                .as_ref()
                .map(|kv| (kv.key.as_slice(), kv.mod_revision)),
            revision,
        );
        let (sender, receiver) = mpsc::channel(OBSERVE_BUFFER_MAX);
        if let Some(kv) = leader {
            let first = epb::LeaderResponse {
                header: first.header,
                kv: Some(kv),
            };
            // The buffer is empty: this cannot wait.
            sender
                .try_send(Ok(first))
                .expect("a fresh observe buffer has room");
        }
        tokio::spawn(self.clone().follow(observer, sender));
        Ok(Response::new(ReceiverStream::new(receiver)))
    }

    async fn resign(
        &self,
        request: Request<epb::ResignRequest>,
    ) -> Result<Response<epb::ResignResponse>, Status> {
        // The key deleted is the one the call names: it is checked.
        let key = request.get_ref().leader.as_ref().map(|l| l.key.clone());
        let caller = self
            .backend
            .authorize_key(
                &request,
                &key.unwrap_or_default(),
                &[Permission::Read, Permission::Write],
            )
            .await?;
        let leader = request
            .into_inner()
            .leader
            .ok_or_else(|| Status::unknown(MISSING_LEADER_KEY))?;
        let response = campaign::withdraw(&self.backend, &caller, &leader.key, leader.rev)
            .await
            .map_err(as_etcd)?;
        Ok(Response::new(epb::ResignResponse {
            header: response.header,
        }))
    }
}

impl ElectionService {
    /// Feeds an Observe stream from this member's store until the client
    /// goes away or the node stops.
    async fn follow(
        self,
        mut observer: LeaderObserver,
        sender: mpsc::Sender<Result<epb::LeaderResponse, Status>>,
    ) {
        let mut revisions = self.backend.revisions.clone();
        loop {
            revisions.borrow_and_update();
            let sightings = observer.step(&self.backend.store(), OBSERVE_STEP_SIGHTINGS_MAX);
            // `full` tells a step cut short by the bound from one that
            // found everything; and one step reports in revision order.
            assert!(
                sightings.len() <= OBSERVE_STEP_SIGHTINGS_MAX,
                "a step reports at most the sightings asked for"
            );
            assert!(
                sightings
                    .windows(2)
                    .all(|pair| pair[0].revision <= pair[1].revision),
                "a step reports in revision order"
            );
            let full = sightings.len() == OBSERVE_STEP_SIGHTINGS_MAX;
            for sighting in sightings {
                let response = epb::LeaderResponse {
                    header: Some(self.header_at(sighting.revision)),
                    kv: Some(convert::key_value(sighting.kv)),
                };
                if sender.send(Ok(response)).await.is_err() {
                    return;
                }
            }
            if full {
                continue;
            }
            tokio::select! {
                changed = revisions.changed() => {
                    if changed.is_err() {
                        let stopped = Status::unavailable("etcdserver: server stopped");
                        let _ = sender.send(Err(stopped)).await;
                        return;
                    }
                }
                () = sender.closed() => return,
            }
        }
    }
}
