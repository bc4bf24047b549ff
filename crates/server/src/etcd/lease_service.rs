//! `etcdserverpb.Lease`: grant, revoke, keep-alive, time-to-live and list.
//!
//! Grants and revokes are log entries. Keep-alives and time-to-live need the
//! leader's clock ([`Lessor`]), so a follower forwards them to the leader: a
//! keep-alive stream opened on a follower is relayed over one stream to the
//! leader, reopened when the leader changes.

use super::backend::{EtcdBackend, NotHere};
use super::channel_stream::ChannelStream;
use super::lessor::{Lessor, Renewal};
use bellwether_api::etcdserverpb as pb;
use bellwether_api::etcdserverpb::lease_client::LeaseClient;
use bellwether_api::etcdserverpb::lease_server::Lease;
use bellwether_core::NodeId;
use bellwether_etcd::command::Command;
use bellwether_kv::Permission;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tonic::transport::Channel;
use tonic::{Request, Response, Status, Streaming};

/// Responses queued per keep-alive stream, at most (a client that stops
/// reading stops being served, it does not grow the server's memory).
const KEEP_ALIVE_QUEUE_MAX: usize = 16;
/// How long a keep-alive or time-to-live waits for a primary lessor (a new
/// leader that has not yet applied an entry of its term, or a member that
/// knows no leader yet) before answering "no leader". etcd 3.4 likewise
/// retries a renewal on the server until its request timeout rather than
/// failing it at the start of a term.
const PRIMARY_WAIT_MAX: Duration = Duration::from_secs(5);
/// How often that wait looks again: half the lease clock's check
/// interval, since the clock becomes primary at one of its checks.
const PRIMARY_RETRY_INTERVAL: Duration = Duration::from_millis(5);
/// The request metadata by which a keep-alive stream asks for release on
/// disconnect (a bellwether extension; etcd ignores unknown metadata): the
/// leases it renews are shortened to this many milliseconds once the stream
/// ends, so a crashed holder's election moves on within that time instead
/// of its TTL.
pub const RELEASE_ON_DISCONNECT_METADATA: &str = "bellwether-release-on-disconnect-ms";
/// The shortest and longest release-on-disconnect grace accepted.
pub const RELEASE_ON_DISCONNECT_MS_MIN: u64 = 50;
/// See [`RELEASE_ON_DISCONNECT_MS_MIN`].
pub const RELEASE_ON_DISCONNECT_MS_MAX: u64 = 60_000;
/// Leases one keep-alive stream tracks for release on disconnect; renewals
/// of more (unusual: one session has one lease) keep their TTL.
const RELEASED_LEASES_PER_STREAM_MAX: usize = 64;

/// The release-on-disconnect grace a keep-alive stream asked for, if any.
fn release_on_disconnect(
    metadata: &tonic::metadata::MetadataMap,
) -> Result<Option<Duration>, Status> {
    let Some(value) = metadata.get(RELEASE_ON_DISCONNECT_METADATA) else {
        return Ok(None);
    };
    let millis = value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| (RELEASE_ON_DISCONNECT_MS_MIN..=RELEASE_ON_DISCONNECT_MS_MAX).contains(ms))
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "bellwether: {RELEASE_ON_DISCONNECT_METADATA} must be a whole number of \
                 milliseconds from {RELEASE_ON_DISCONNECT_MS_MIN} to {RELEASE_ON_DISCONNECT_MS_MAX}"
            ))
        })?;
    Ok(Some(Duration::from_millis(millis)))
}

/// The Lease service of one node.
#[derive(Clone)]
pub struct LeaseService {
    /// What the node's services share.
    pub backend: EtcdBackend,
    /// The leader's lease clock.
    pub lessor: Lessor,
}

fn no_leader() -> Status {
    Status::unavailable("etcdserver: no leader")
}

impl LeaseService {
    /// The service of the member `backend` serves, with its lease clock.
    pub fn new(backend: EtcdBackend, lessor: Lessor) -> Self {
        LeaseService { backend, lessor }
    }

    async fn leader_client(&self, leader: NodeId) -> Result<LeaseClient<Channel>, Status> {
        Ok(LeaseClient::new(self.backend.channel_to(leader).await?))
    }

    /// The leader this member knows, if it is another member.
    fn other_leader(&self) -> Option<NodeId> {
        self.backend
            .status
            .borrow()
            .leader
            .filter(|l| *l != self.backend.member_id)
    }

    /// One keep-alive, served here if this member is the primary lessor.
    fn renew_here(&self, id: i64) -> Renewal {
        // The lessor learns of a lost leadership only at its next check;
        // the member's status knows at once. A member that no longer leads
        // must not renew: the new leader counts leases from its takeover.
        let Some(term) = self.leading_term() else {
            return Renewal::NotPrimary;
        };
        let ttl = self.backend.store().lease(id).map(|l| l.ttl_seconds);
        self.lessor.renew(term, id, ttl)
    }

    /// Whether a quorum still follows this member, asked (with a read
    /// barrier, a heartbeat round: a member serves no read from a leader
    /// lease) only when its status says it leads.
    ///
    /// Why: a leader paused (SIGSTOP, a stalled VM) wakes believing it
    /// leads, and a keep-alive that queued meanwhile may reach it before
    /// it hears of the new leader. Renewing it would promise the client a
    /// TTL from now, while the new leader, which never heard of that
    /// renewal, expires the lease on its own count from its takeover:
    /// early for that client. A deposed leader cannot complete the round.
    /// etcd 3.5 checks leadership before a renewal for the same reason.
    async fn still_leading(&self) -> Result<bool, Status> {
        if !self.leading() {
            return Ok(false);
        }
        match self.backend.read_barrier_once().await {
            Ok(()) => Ok(true),
            Err(NotHere::Forward(_)) => Ok(false),
            Err(NotHere::Fail(status)) => Err(status),
        }
    }

    /// Whether the member's status says it leads now.
    fn leading(&self) -> bool {
        self.leading_term().is_some()
    }

    /// The term the member's status says it leads now, if it does.
    fn leading_term(&self) -> Option<u64> {
        let status = self.backend.status.borrow();
        let leads = status.role == bellwether_core::Role::Leader
            && status.leader == Some(self.backend.member_id);
        leads.then_some(status.term)
    }

    /// Where a call that needs the leader's lease clock is served: here once
    /// this member's lessor is primary for the term its status says it
    /// leads (the lessor hears of a lost leadership only at its next check,
    /// and a "here" it still claimed would send a keep-alive round and round
    /// on this member's one thread, starving that check), or on another member
    /// that leads.
    /// While neither holds (a leader at the very start of its term, or no
    /// leader known), waits up to [`PRIMARY_WAIT_MAX`].
    async fn lease_clock(&self) -> Result<LeaseClock, Status> {
        let deadline = Instant::now() + PRIMARY_WAIT_MAX;
        loop {
            let term = self.leading_term();
            if term.is_some() && self.lessor.primary_term() == term {
                return Ok(LeaseClock::Here);
            }
            if let Some(leader) = self.other_leader() {
                return Ok(LeaseClock::Leader(leader));
            }
            if Instant::now() >= deadline {
                return Err(no_leader());
            }
            tokio::time::sleep(PRIMARY_RETRY_INTERVAL).await;
        }
    }
}

/// Which member's lease clock serves a call.
enum LeaseClock {
    /// This member is the primary lessor.
    Here,
    /// Another member leads.
    Leader(NodeId),
}

#[tonic::async_trait]
impl Lease for LeaseService {
    async fn lease_grant(
        &self,
        request: Request<pb::LeaseGrantRequest>,
    ) -> Result<Response<pb::LeaseGrantResponse>, Status> {
        let request = request.into_inner();
        let response = super::lease_grant::grant(&self.backend, request).await?;
        Ok(Response::new(response))
    }

    async fn lease_revoke(
        &self,
        request: Request<pb::LeaseRevokeRequest>,
    ) -> Result<Response<pb::LeaseRevokeResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        // etcd's rule: revoking deletes the lease's keys, so the caller
        // needs write permission on each of them.
        self.backend
            .authorize(&caller, |store| {
                caller.check_lease_keys(store, request.id, Permission::Write)
            })
            .await?;
        let response = self
            .backend
            .write_as::<pb::LeaseRevokeResponse>(&caller, &Command::LeaseRevoke(request))
            .await?;
        Ok(Response::new(response))
    }

    type LeaseKeepAliveStream = ChannelStream<Result<pb::LeaseKeepAliveResponse, Status>>;

    async fn lease_keep_alive(
        &self,
        request: Request<Streaming<pb::LeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        let release = release_on_disconnect(request.metadata())?;
        let mut incoming = request.into_inner();
        let (replies, stream) = mpsc::channel(KEEP_ALIVE_QUEUE_MAX);
        let service = self.clone();
        tokio::spawn(async move {
            let mut relay: Option<KeepAliveRelay> = None;
            let mut renewed = std::collections::BTreeSet::new();
            loop {
                let request = match incoming.message().await {
                    Ok(Some(request)) => request,
                    Ok(None) | Err(_) => break,
                };
                if release.is_some() && renewed.len() < RELEASED_LEASES_PER_STREAM_MAX {
                    renewed.insert(request.id);
                }
                assert!(
                    renewed.len() <= RELEASED_LEASES_PER_STREAM_MAX,
                    "a stream tracks a bounded number of leases"
                );
                let reply = service
                    .keep_alive_once(request.id, &mut relay, release)
                    .await;
                let failed = reply.is_err();
                if replies.send(reply).await.is_err() || failed {
                    break;
                }
            }
            // The stream ended (the client closed it, crashed, or stopped
            // reading). Leases renewed through a relay are released by the
            // leader when the relay's stream ends with this task; the
            // others are released here.
            if let Some(within) = release {
                drop(relay);
                for id in renewed {
                    let Some(at) = service.lessor.shorten(id, within) else {
                        continue;
                    };
                    tracing::debug!(
                        lease = id,
                        ?within,
                        "keep-alive stream ended; lease released"
                    );
                    let lessor = service.lessor.clone();
                    let backend = service.backend.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep_until(at.into()).await;
                        if lessor.expire_released(id, at) {
                            super::lessor::propose_revoke(&backend, id);
                        }
                    });
                }
            }
        });
        Ok(Response::new(ChannelStream::new(stream)))
    }

    async fn lease_time_to_live(
        &self,
        request: Request<pb::LeaseTimeToLiveRequest>,
    ) -> Result<Response<pb::LeaseTimeToLiveResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        if request.keys {
            // The answer names the lease's keys: the caller must be allowed
            // to read each of them (etcd's fix for CVE-2023-32082).
            self.backend
                .authorize(&caller, |store| {
                    caller.check_lease_keys(store, request.id, Permission::Read)
                })
                .await?;
        }
        if let LeaseClock::Leader(leader) = self.lease_clock().await? {
            let mut answer = self
                .leader_client(leader)
                .await?
                .lease_time_to_live(self.backend.forwarded(&caller, request))
                .await?;
            // etcd fills a relayed answer's header in as the member that
            // answers the client.
            answer.get_mut().header = Some(self.backend.header());
            return Ok(answer);
        }
        // Copy what is needed and release the store before building the
        // header, which locks it again.
        let found = {
            let store = self.backend.store();
            store.lease(request.id).map(|lease| {
                let keys = if request.keys {
                    store.lease_keys(request.id).unwrap_or_default()
                } else {
                    Vec::new()
                };
                (lease.ttl_seconds, keys)
            })
        };
        let Some((granted, keys)) = found else {
            // etcd answers a missing lease with TTL -1, not an error.
            return Ok(Response::new(pb::LeaseTimeToLiveResponse {
                header: Some(self.backend.header()),
                id: request.id,
                ttl: -1,
                granted_ttl: 0,
                keys: Vec::new(),
            }));
        };
        // Never above the granted TTL, as etcd reports it: a lease may live
        // longer after a takeover (see `Lessor::set_takeover_extension`),
        // and a client that counts on less is safe.
        let ttl = self
            .lessor
            .remaining_seconds(request.id)
            .unwrap_or(granted)
            .min(granted);
        Ok(Response::new(pb::LeaseTimeToLiveResponse {
            header: Some(self.backend.header()),
            id: request.id,
            ttl,
            granted_ttl: granted,
            keys,
        }))
    }

    async fn lease_leases(
        &self,
        _request: Request<pb::LeaseLeasesRequest>,
    ) -> Result<Response<pb::LeaseLeasesResponse>, Status> {
        self.backend.read_barrier().await?;
        let leases = self
            .backend
            .store()
            .leases()
            .into_iter()
            .map(|id| pb::LeaseStatus { id })
            .collect();
        Ok(Response::new(pb::LeaseLeasesResponse {
            header: Some(self.backend.header()),
            leases,
        }))
    }
}

/// A keep-alive stream to the leader, for a stream opened on a follower.
pub struct KeepAliveRelay {
    leader: NodeId,
    requests: mpsc::Sender<pb::LeaseKeepAliveRequest>,
    responses: Streaming<pb::LeaseKeepAliveResponse>,
}

impl LeaseService {
    /// Renews lease `id` at the leader's lease clock, here or relayed over
    /// `relay` (kept between calls): the TTL it now has, 0 if it is gone.
    /// For ZooKeeper's sessions, which are leases renewed by their pings.
    pub async fn renew(&self, id: i64, relay: &mut Option<KeepAliveRelay>) -> Result<i64, Status> {
        Ok(self.keep_alive_once(id, relay, None).await?.ttl)
    }

    /// Serves one keep-alive here, or relays it to the leader.
    async fn keep_alive_once(
        &self,
        id: i64,
        relay: &mut Option<KeepAliveRelay>,
        release: Option<Duration>,
    ) -> Result<pb::LeaseKeepAliveResponse, Status> {
        let leader = loop {
            let renewal = match self.still_leading().await? {
                true => self.renew_here(id),
                false => Renewal::NotPrimary,
            };
            let ttl = match renewal {
                Renewal::Renewed(ttl) => ttl,
                Renewal::NotFound => 0,
                Renewal::NotPrimary => match self.lease_clock().await? {
                    // Became primary meanwhile: renew here.
                    LeaseClock::Here => continue,
                    LeaseClock::Leader(leader) => break leader,
                },
            };
            *relay = None;
            return Ok(pb::LeaseKeepAliveResponse {
                header: Some(self.backend.header()),
                id,
                ttl,
            });
        };
        // Relaying to this member would send the keep-alive round and round.
        assert_ne!(
            leader, self.backend.member_id,
            "a keep-alive is relayed to another member"
        );
        if relay.as_ref().is_none_or(|r| r.leader != leader) {
            let (requests, receiver) = mpsc::channel(KEEP_ALIVE_QUEUE_MAX);
            let mut relayed = Request::new(ChannelStream::new(receiver));
            if let Some(within) = release {
                // The leader releases the leases when this relay ends.
                let millis = within.as_millis().to_string();
                relayed.metadata_mut().insert(
                    RELEASE_ON_DISCONNECT_METADATA,
                    millis.parse().expect("digits are valid metadata"),
                );
            }
            let responses = self
                .leader_client(leader)
                .await?
                .lease_keep_alive(relayed)
                .await?
                .into_inner();
            *relay = Some(KeepAliveRelay {
                leader,
                requests,
                responses,
            });
        }
        let open = relay.as_mut().expect("relay opened above");
        let answer = async {
            open.requests
                .send(pb::LeaseKeepAliveRequest { id })
                .await
                .map_err(|_| no_leader())?;
            open.responses.message().await?.ok_or_else(no_leader)
        }
        .await;
        if answer.is_err() {
            *relay = None;
            self.backend.drop_channel(leader).await;
        }
        // etcd fills a relayed answer's header in as the member that
        // answers the client.
        answer.map(|reply| pb::LeaseKeepAliveResponse {
            header: Some(self.backend.header()),
            ..reply
        })
    }
}
