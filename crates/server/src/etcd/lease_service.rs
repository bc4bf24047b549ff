//! `etcdserverpb.Lease`: grant, revoke, keep-alive, time-to-live and list.
//!
//! Grants and revokes are log entries. Keep-alives and time-to-live need the
//! leader's clock ([`Lessor`]), so a follower asks the leader's process for
//! each, over the peer connection ([`MemberCall`]). When a keep-alive
//! stream that asked for release on disconnect ends, the member it was
//! opened on asks the leader to release its leases the same way.

use super::backend::{EtcdBackend, NotHere};
use super::channel_stream::ChannelStream;
use super::lessor::{Lessor, Renewal};
use super::member_call::{MemberCall, RELEASED_LEASES_MAX};
use bellwether_api::etcdserverpb as pb;
use bellwether_api::etcdserverpb::lease_server::Lease;
use bellwether_core::NodeId;
use bellwether_etcd::command::Command;
use bellwether_kv::Permission;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tonic::{Code, Request, Response, Status, Streaming};

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
/// of its TTL. The member the stream was open on asks for the release
/// when it sees the stream end; if that member itself stops, nothing
/// does, and the leases keep their TTL: their holder may well be alive and
/// renewing through another member.
pub const RELEASE_ON_DISCONNECT_METADATA: &str = "bellwether-release-on-disconnect-ms";
/// The shortest and longest release-on-disconnect grace accepted.
pub const RELEASE_ON_DISCONNECT_MS_MIN: u64 = 50;
/// See [`RELEASE_ON_DISCONNECT_MS_MIN`].
pub const RELEASE_ON_DISCONNECT_MS_MAX: u64 = 60_000;
/// Leases one keep-alive stream tracks for release on disconnect; renewals
/// of more (unusual: one session has one lease) keep their TTL.
const RELEASED_LEASES_PER_STREAM_MAX: usize = RELEASED_LEASES_MAX;

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
                let reply = service.keep_alive_once(request.id).await;
                let failed = reply.is_err();
                if replies.send(reply).await.is_err() || failed {
                    break;
                }
            }
            // The stream ended (the client closed it, crashed, or stopped
            // reading): its leases are released on the leader's lease
            // clock, here or through a call to the leader.
            if let Some(within) = release {
                service.release(renewed.into_iter().collect(), within).await;
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
            let call = MemberCall::TimeToLive {
                lease: request.id,
                keys: request.keys,
            };
            let answer = self
                .backend
                .call::<pb::LeaseTimeToLiveResponse>(leader, &call)
                .await?;
            // etcd fills a relayed answer's header in as the member that
            // answers the client.
            return Ok(Response::new(pb::LeaseTimeToLiveResponse {
                header: Some(self.backend.header()),
                ..answer
            }));
        }
        Ok(Response::new(
            self.time_to_live_here(request.id, request.keys),
        ))
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

impl LeaseService {
    /// Lease `id`'s time to live on this member's lease clock, which is
    /// the primary one, with its keys if `keys` is set.
    fn time_to_live_here(&self, id: i64, keys: bool) -> pb::LeaseTimeToLiveResponse {
        // Copy what is needed and release the store before building the
        // header, which locks it again.
        let found = {
            let store = self.backend.store();
            store.lease(id).map(|lease| {
                let keys = if keys {
                    store.lease_keys(id).unwrap_or_default()
                } else {
                    Vec::new()
                };
                (lease.ttl_seconds, keys)
            })
        };
        let Some((granted, keys)) = found else {
            // etcd answers a missing lease with TTL -1, not an error.
            return pb::LeaseTimeToLiveResponse {
                header: Some(self.backend.header()),
                id,
                ttl: -1,
                granted_ttl: 0,
                keys: Vec::new(),
            };
        };
        // Never above the granted TTL, as etcd reports it: a lease may live
        // longer after a takeover (see `Lessor::set_takeover_extension`),
        // and a client that counts on less is safe.
        let ttl = self
            .lessor
            .remaining_seconds(id)
            .unwrap_or(granted)
            .min(granted);
        pb::LeaseTimeToLiveResponse {
            header: Some(self.backend.header()),
            id,
            ttl,
            granted_ttl: granted,
            keys,
        }
    }

    /// Renews lease `id` at the leader's lease clock, here or through a
    /// call to the leader: the TTL it now has, 0 if it is gone. For
    /// ZooKeeper's sessions, which are leases renewed by their pings.
    pub async fn renew(&self, id: i64) -> Result<i64, Status> {
        Ok(self.keep_alive_once(id).await?.ttl)
    }

    /// Serves one keep-alive here, or asks the leader for it. A leader
    /// that turns out not to lead (this member's view lagged) is asked
    /// again once this member hears of another leader, or after
    /// `REROUTE_PAUSE`, for up to [`PRIMARY_WAIT_MAX`].
    async fn keep_alive_once(&self, id: i64) -> Result<pb::LeaseKeepAliveResponse, Status> {
        let deadline = Instant::now() + PRIMARY_WAIT_MAX;
        let ttl = loop {
            let leader = match self.renew_at_clock(id).await? {
                Ok(ttl) => break ttl,
                Err(leader) => leader,
            };
            let call = MemberCall::KeepAlive { lease: id };
            match self
                .backend
                .call::<pb::LeaseKeepAliveResponse>(leader, &call)
                .await
            {
                Ok(answer) => break answer.ttl,
                Err(status) if status.code() == Code::Unavailable && Instant::now() < deadline => {
                    // As a refused write waits (`EtcdBackend::propose`):
                    // asking the same member again at once would only be
                    // refused again.
                    self.backend
                        .news_of_a_leader(super::backend::REROUTE_PAUSE)
                        .await;
                }
                Err(status) => return Err(status),
            }
        };
        // etcd fills a relayed answer's header in as the member that
        // answers the client.
        Ok(pb::LeaseKeepAliveResponse {
            header: Some(self.backend.header()),
            id,
            ttl,
        })
    }

    /// Renews lease `id` here if this member's lease clock is the primary
    /// one: `Ok(ttl)` (0: no such lease), or `Err(leader)`, the other
    /// member that leads.
    async fn renew_at_clock(&self, id: i64) -> Result<Result<i64, NodeId>, Status> {
        loop {
            let renewal = match self.still_leading().await? {
                true => self.renew_here(id),
                false => Renewal::NotPrimary,
            };
            return Ok(match renewal {
                Renewal::Renewed(ttl) => Ok(ttl),
                Renewal::NotFound => Ok(0),
                Renewal::NotPrimary => match self.lease_clock().await? {
                    // Became primary meanwhile: renew here.
                    LeaseClock::Here => continue,
                    LeaseClock::Leader(leader) => {
                        // Calling this member would send the keep-alive
                        // round and round.
                        assert_ne!(
                            leader, self.backend.member_id,
                            "a keep-alive is sent to another member"
                        );
                        Err(leader)
                    }
                },
            });
        }
    }

    /// Releases `leases`, renewed by a keep-alive stream that ended, within
    /// `within` on the leader's lease clock: here, or through a call to the
    /// leader. A release that cannot be made leaves the leases their TTL.
    async fn release(&self, leases: Vec<i64>, within: Duration) {
        if leases.is_empty() {
            return;
        }
        let released = match self.lease_clock().await {
            Ok(LeaseClock::Here) => {
                self.release_here(&leases, within);
                Ok(())
            }
            Ok(LeaseClock::Leader(leader)) => {
                let call = MemberCall::Release {
                    leases,
                    within_ms: within.as_millis() as u64,
                };
                self.backend.call::<()>(leader, &call).await
            }
            Err(status) => Err(status),
        };
        if let Err(status) = released {
            tracing::debug!(%status, "keep-alive stream ended; its leases keep their TTL");
        }
    }

    /// Shortens each of `leases` to `within` on this member's lease clock
    /// and revokes it then, unless it was renewed meanwhile.
    fn release_here(&self, leases: &[i64], within: Duration) {
        for &id in leases {
            let Some(at) = self.lessor.shorten(id, within) else {
                continue;
            };
            tracing::debug!(
                lease = id,
                ?within,
                "keep-alive stream ended; lease released"
            );
            let lessor = self.lessor.clone();
            let backend = self.backend.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(at.into()).await;
                if lessor.expire_released(id, at) {
                    super::lessor::propose_revoke(&backend, id);
                }
            });
        }
    }

    /// Another member's keep-alive: served only here, on the primary lease
    /// clock; "not leader" otherwise, and the caller asks again.
    pub async fn keep_alive_for_member(
        &self,
        id: i64,
    ) -> Result<pb::LeaseKeepAliveResponse, Status> {
        match self.renew_at_clock(id).await? {
            Ok(ttl) => Ok(pb::LeaseKeepAliveResponse {
                header: Some(self.backend.header()),
                id,
                ttl,
            }),
            Err(_) => Err(not_leader()),
        }
    }

    /// Another member's time-to-live, served only here.
    pub async fn time_to_live_for_member(
        &self,
        id: i64,
        keys: bool,
    ) -> Result<pb::LeaseTimeToLiveResponse, Status> {
        match self.lease_clock().await? {
            LeaseClock::Here => Ok(self.time_to_live_here(id, keys)),
            LeaseClock::Leader(_) => Err(not_leader()),
        }
    }

    /// Another member's release of a finished stream's leases, served only
    /// here.
    pub async fn release_for_member(&self, leases: &[i64], within_ms: u64) -> Result<(), Status> {
        let allowed = RELEASE_ON_DISCONNECT_MS_MIN..=RELEASE_ON_DISCONNECT_MS_MAX;
        if !allowed.contains(&within_ms) {
            return Err(Status::invalid_argument(format!(
                "bellwether: a release grace of {within_ms} ms is outside {RELEASE_ON_DISCONNECT_MS_MIN} to {RELEASE_ON_DISCONNECT_MS_MAX}"
            )));
        }
        match self.lease_clock().await? {
            LeaseClock::Here => {
                self.release_here(leases, Duration::from_millis(within_ms));
                Ok(())
            }
            LeaseClock::Leader(_) => Err(not_leader()),
        }
    }
}

/// What a member that is asked for the leader's lease clock, and does not
/// hold it, answers.
fn not_leader() -> Status {
    Status::unavailable("etcdserver: not leader")
}
