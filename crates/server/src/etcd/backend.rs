//! What every etcd service of a node shares: the node's client API (writes
//! and read barriers), the store, the node's status, a signal that fires
//! after each applied write, and gRPC connections to the other members for
//! the few calls only the leader's own process can answer.
//!
//! The services are thin: each turns a gRPC call into [`EtcdBackend::write`]
//! or [`EtcdBackend::read_barrier`] plus a store lookup. A follower's write
//! or read barrier reaches the leader one way only: the member forwards it
//! over its peer connection. What comes back unserved but safe to retry (the
//! leader refused it, or it never left this member) is handed to the member
//! again here, in [`EtcdBackend::propose`] and [`EtcdBackend::read_barrier`],
//! for every service and for ZooKeeper's connections alike; no service keeps
//! a forwarding path of its own.
//!
//! What still dials another member's gRPC port: a lease's keep-alive and
//! time-to-live, answered by the leader's lease clock (`lease_service.rs`);
//! a learner's promotion, which only the leader can judge
//! (`member_service.rs`); and the corruption check, which asks each member
//! for its hash (`corruption_check.rs`).

use super::auth_gate::{AuthGate, Caller};
use super::refusal_status::refusal_status;
use crate::client::{ClientError, NodeClient};
use crate::status::NodeStatus;
use bellwether_api::etcdserverpb as pb;
use bellwether_core::NodeId;
use bellwether_etcd::command::{Checked, Command, NO_SPACE};
use bellwether_etcd::{read_answer, Answer, Refusal};
use bellwether_kv::{AlarmKind, KvError, KvStore, REQUEST_BYTES_MAX};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tonic::Status;

/// How long a write or read barrier that came back unserved, but safe to
/// retry, is handed to the member again (see [`EtcdBackend::propose`]):
/// longer than an election takes, shorter than a client's deadline.
pub const REROUTE_PATIENCE: Duration = Duration::from_secs(2);
/// ... waiting at most this long between two tries for news of a leader.
pub const REROUTE_PAUSE: Duration = Duration::from_millis(50);

/// Where a write or a read barrier went when this member could not serve it.
#[derive(Debug)]
pub enum NotHere {
    /// Another member leads: forward the call to it.
    Forward(NodeId),
    /// A failure to report to the client as is.
    Fail(Status),
}

impl From<Status> for NotHere {
    fn from(status: Status) -> Self {
        NotHere::Fail(status)
    }
}

/// The shared state behind a node's etcd services. Cheap to clone.
#[derive(Clone)]
pub struct EtcdBackend {
    /// Submits writes and read barriers to the node's event loop.
    pub client: NodeClient,
    /// The store the node applies to; lock it for one operation at a time.
    pub store: Arc<Mutex<KvStore>>,
    /// The node's latest status (term, leader, role).
    pub status: watch::Receiver<NodeStatus>,
    /// The store's revision after each applied write: services that wait
    /// for changes (watch, election, lock) wake on it.
    pub revisions: watch::Receiver<i64>,
    /// Cluster id in headers (a hash of the cluster name).
    pub cluster_id: u64,
    /// This member's id.
    pub member_id: NodeId,
    /// Members' peer addresses.
    pub peers: Arc<BTreeMap<NodeId, SocketAddr>>,
    /// Members' client (gRPC) addresses as configured, for the member list.
    pub client_addresses: Arc<BTreeMap<NodeId, SocketAddr>>,
    /// Applications' elections and locks served here (see
    /// [`EtcdBackend::with_app_elections`]).
    pub app_elections: Arc<crate::app_elections::AppElections>,
    /// The member's data directory, for the database size Status reports.
    data_dir: Option<Arc<std::path::PathBuf>>,
    /// The storage quota: a write that would grow the store's size past
    /// it is refused and raises the NOSPACE alarm. 0: no quota.
    quota_bytes: u64,
    /// The cluster's name, recorded in snapshot files.
    pub cluster_name: Arc<str>,
    /// How often the leader compares members' history hashes; `None`:
    /// never (see `corruption_check.rs`).
    corruption_check: Option<Duration>,
    /// Whether the client port serves TLS (for the client URLs members
    /// publish).
    client_tls: bool,
    /// Whether members speak TLS to each other (for listed peer URLs).
    peer_tls: bool,
    /// Who may do what (see `auth_gate.rs`).
    pub auth: AuthGate,
    /// Where this member's server-chosen lease ids come from.
    pub lease_ids: super::lease_ids::LeaseIds,
}

/// A client error as etcd clients expect it.
pub fn status_of(error: ClientError) -> Status {
    match error {
        ClientError::NotLeader { .. } => Status::unavailable(format!("etcdserver: {error}")),
        ClientError::Busy => Status::resource_exhausted(format!("etcdserver: {error}")),
        ClientError::NotApplied => Status::unavailable(format!("etcdserver: {error}")),
        ClientError::Stopped => Status::unavailable("etcdserver: server stopped"),
        ClientError::LeaderChanged => Status::unavailable("etcdserver: leader changed"),
        ClientError::TimedOut => Status::unavailable("etcdserver: request timed out"),
        ClientError::Unreachable { .. } => Status::unavailable(format!("etcdserver: {error}")),
    }
}

/// A store error as the gRPC status etcd answers with.
pub fn status_of_kv(error: &KvError) -> Status {
    refusal_status(Refusal::of_kv(error))
}

impl EtcdBackend {
    /// A backend for a node.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: NodeClient,
        store: Arc<Mutex<KvStore>>,
        status: watch::Receiver<NodeStatus>,
        revisions: watch::Receiver<i64>,
        cluster_id: u64,
        member_id: NodeId,
        peers: BTreeMap<NodeId, SocketAddr>,
        client_addresses: BTreeMap<NodeId, SocketAddr>,
    ) -> Self {
        EtcdBackend {
            client,
            store,
            status,
            revisions,
            cluster_id,
            member_id,
            peers: Arc::new(peers),
            client_addresses: Arc::new(client_addresses),
            app_elections: Default::default(),
            data_dir: None,
            quota_bytes: 0,
            cluster_name: Arc::from(""),
            corruption_check: None,
            client_tls: false,
            peer_tls: false,
            auth: AuthGate::default(),
            lease_ids: super::lease_ids::LeaseIds::new(member_id),
        }
    }

    /// Checks callers with `gate` (its summary comes from the state
    /// machine, [`super::MachineSignals::auth`]).
    pub fn with_auth(mut self, gate: AuthGate) -> Self {
        self.auth = gate;
        self
    }

    /// Who is making `request` (see `auth_gate.rs`).
    pub fn caller<T>(&self, request: &tonic::Request<T>) -> Result<Caller, Status> {
        self.auth.caller(&self.store, request)
    }

    /// Checks a call of `caller` with `check`. A refusal is confirmed after
    /// a read barrier: this member may not have applied yet a grant
    /// acknowledged through another. (A stale approval is safe: the write
    /// is checked again when applied, see `machine.rs`.)
    pub async fn authorize(
        &self,
        caller: &Caller,
        check: impl Fn(&KvStore) -> Result<(), Status>,
    ) -> Result<(), Status> {
        if !caller.enabled || check(&self.store()).is_ok() {
            return Ok(());
        }
        let _ = self.read_barrier().await;
        check(&self.store())
    }

    /// Refuses `request` unless its caller may make administrative calls
    /// (membership changes), with etcd's errors.
    /// Answers the caller, for the write the call makes (checked again
    /// when applied). The check follows a read barrier: this member may not
    /// have applied an enable or a revoke acknowledged elsewhere yet.
    pub async fn authorize_admin<T>(&self, request: &tonic::Request<T>) -> Result<Caller, Status> {
        let caller = self.caller(request)?;
        let _ = self.read_barrier().await;
        caller
            .check_admin(&self.store())
            .map_err(super::auth_gate::auth_status)?;
        Ok(caller)
    }

    /// Refuses `request` unless its caller holds each of `needed` on every
    /// key under `prefix` (the Election and Lock services' keys); answers
    /// the caller, for the writes the call makes.
    pub async fn authorize_prefix<T>(
        &self,
        request: &tonic::Request<T>,
        prefix: &[u8],
        needed: &[bellwether_kv::Permission],
    ) -> Result<Caller, Status> {
        let range = bellwether_kv::KeyRange::prefix(prefix);
        self.authorize_range(request, &range.key, &range.range_end, needed)
            .await
    }

    /// [`authorize_prefix`](Self::authorize_prefix) for the one key `key`.
    pub async fn authorize_key<T>(
        &self,
        request: &tonic::Request<T>,
        key: &[u8],
        needed: &[bellwether_kv::Permission],
    ) -> Result<Caller, Status> {
        self.authorize_range(request, key, &[], needed).await
    }

    async fn authorize_range<T>(
        &self,
        request: &tonic::Request<T>,
        key: &[u8],
        range_end: &[u8],
        needed: &[bellwether_kv::Permission],
    ) -> Result<Caller, Status> {
        let caller = self.caller(request)?;
        self.authorize(&caller, |store| {
            needed
                .iter()
                .try_for_each(|permission| caller.check_range(store, key, range_end, *permission))
        })
        .await?;
        Ok(caller)
    }

    /// Lists peer URLs as `https://` (members speak mutual TLS).
    pub fn with_peer_tls(mut self, on: bool) -> Self {
        self.peer_tls = on;
        self
    }

    /// The scheme of this cluster's peer URLs: `https` with peer TLS.
    pub fn peer_scheme(&self) -> &'static str {
        if self.peer_tls {
            "https"
        } else {
            "http"
        }
    }

    /// Whether the client port serves TLS (then the client URL this member
    /// publishes is `https://`).
    pub fn with_client_tls(mut self, on: bool) -> Self {
        self.client_tls = on;
        self
    }

    /// The scheme of this cluster's client URLs: `https` with TLS.
    pub fn client_scheme(&self) -> &'static str {
        if self.client_tls {
            "https"
        } else {
            "http"
        }
    }

    /// Runs the leader's consistency check every `interval` (etcd's
    /// `--experimental-corrupt-check-time`); see `corruption_check.rs`.
    pub fn with_corruption_check(mut self, interval: Option<Duration>) -> Self {
        self.corruption_check = interval;
        self
    }

    /// The consistency check's interval, if it runs.
    pub fn corruption_check(&self) -> Option<Duration> {
        self.corruption_check
    }

    /// The cluster's name, recorded in the snapshot files this member
    /// streams.
    pub fn with_cluster_name(mut self, name: &str) -> Self {
        self.cluster_name = Arc::from(name);
        self
    }

    /// Sets the storage quota (etcd's `--quota-backend-bytes`): see
    /// [`EtcdBackend::write`]. 0 turns it off.
    pub fn with_quota(mut self, quota_bytes: u64) -> Self {
        self.quota_bytes = quota_bytes;
        self
    }

    /// The storage quota; 0 when there is none.
    pub fn quota_bytes(&self) -> u64 {
        self.quota_bytes
    }

    /// Where the member keeps its write-ahead log and snapshots: Status
    /// reports their size as the database size.
    pub fn with_data_dir(mut self, data_dir: std::path::PathBuf) -> Self {
        self.data_dir = Some(Arc::new(data_dir));
        self
    }

    /// Bytes of every file under the data directory (the write-ahead log
    /// and the snapshots: this member's database); 0 without one.
    pub fn data_dir_bytes(&self) -> u64 {
        fn walk(dir: &std::path::Path, depth: usize) -> u64 {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return 0;
            };
            entries
                .flatten()
                .map(|entry| match entry.metadata() {
                    Ok(meta) if meta.is_dir() && depth < 4 => walk(&entry.path(), depth + 1),
                    Ok(meta) if meta.is_file() => meta.len(),
                    _ => 0,
                })
                .sum()
        }
        self.data_dir.as_deref().map_or(0, |dir| walk(dir, 0))
    }

    /// Lets the task-queue registry (the member's metrics hold it) read
    /// queues from this store.
    pub fn with_app_tasks(self, registry: &crate::app_tasks::AppTasks) -> Self {
        registry.attach_store(self.store.clone());
        self
    }

    /// Records the Election and Lock services' calls in `registry` (the
    /// member's metrics hold it), which reads leaders from this store.
    pub fn with_app_elections(mut self, registry: Arc<crate::app_elections::AppElections>) -> Self {
        registry.attach_store(self.store.clone());
        self.app_elections = registry;
        self
    }

    /// The store, locked.
    pub fn store(&self) -> MutexGuard<'_, KvStore> {
        self.store.lock().expect("store lock")
    }

    /// The header every response carries. Its revision is the one published
    /// after the last apply, so building a header never takes the store's
    /// lock (callers may hold it) and is never older than a store read made
    /// before it.
    pub fn header(&self) -> pb::ResponseHeader {
        self.header_at(*self.revisions.borrow())
    }

    /// The header of an answer at store revision `revision`.
    pub(crate) fn header_at(&self, revision: i64) -> pb::ResponseHeader {
        pb::ResponseHeader {
            cluster_id: self.cluster_id,
            member_id: self.member_id.0,
            revision,
            raft_term: self.status.borrow().term,
        }
    }

    /// True while this member leads.
    pub fn is_leader(&self) -> bool {
        let status = self.status.borrow();
        status.role == bellwether_core::Role::Leader && status.leader == Some(self.member_id)
    }

    fn not_here(&self, error: ClientError) -> NotHere {
        match error {
            ClientError::NotLeader {
                leader: Some(leader),
            } if leader != self.member_id => NotHere::Forward(leader),
            error => NotHere::Fail(status_of(error)),
        }
    }

    /// Replicates `command` and decodes the state machine's answer, with
    /// its header complete: the revision the write was applied at (set by
    /// the state machine), this member and the current term. A follower
    /// hands it to its leader through the member (see [`EtcdBackend::propose`]).
    ///
    /// A write that would grow the store past the quota is refused here,
    /// before the log, with etcd's NOSPACE error, and raises this member's
    /// NOSPACE alarm through the log; from then on every member refuses
    /// such writes until the alarm is cleared (see `machine.rs`).
    pub async fn write<M: Answer>(&self, command: &Command) -> Result<M, Status> {
        let bytes = self.admit(command, command.encode(), 0).await?;
        let answer = self.propose(bytes).await.map_err(status_of)?;
        self.answer(&answer)
    }

    /// [`write`](Self::write), but only if this member leads: the member
    /// never forwards it, nor is it tried again. For what only the leader
    /// decides (a lease's expiry), which a deposed leader must not get its
    /// successor to apply.
    pub async fn write_here<M: Answer>(&self, command: &Command) -> Result<M, NotHere> {
        let bytes = self.admit(command, command.encode(), 0).await?;
        let answer = self
            .client
            .propose_here(bytes)
            .await
            .map_err(|error| self.not_here(error))?;
        Ok(self.answer(&answer)?)
    }

    /// [`write`](Self::write) for a client's command, checked for `caller`:
    /// the entry carries the auth revision of the check and the user, and
    /// is checked again when applied if auth has changed since (see
    /// `auth_gate.rs`).
    pub async fn write_as<M: Answer>(
        &self,
        caller: &Caller,
        command: &Command,
    ) -> Result<M, Status> {
        let checked = Checked {
            auth_revision: caller.auth_revision,
            user: caller.user.clone().unwrap_or_default(),
        };
        let envelope = Command::CHECKED_ENVELOPE_BYTES + checked.user.len();
        let bytes = self
            .admit(command, command.encode_checked(&checked), envelope)
            .await?;
        let answer = self.propose(bytes).await.map_err(status_of)?;
        self.answer(&answer)
    }

    /// `bytes`, the encoding of `command` inside an envelope of `envelope`
    /// bytes (not counted against the request size limit), if they may go
    /// to the log: not too large, and not past the quota.
    async fn admit(
        &self,
        command: &Command,
        bytes: Vec<u8>,
        envelope: usize,
    ) -> Result<Vec<u8>, Status> {
        assert!(
            envelope <= bytes.len(),
            "the envelope is part of the entry's bytes"
        );
        if bytes.len() - envelope > REQUEST_BYTES_MAX {
            // Refused before it reaches the log, as etcd does.
            return Err(Status::invalid_argument("etcdserver: request is too large"));
        }
        if self.over_quota(command) {
            self.raise_no_space().await;
            return Err(Status::resource_exhausted(NO_SPACE));
        }
        Ok(bytes)
    }

    /// The state machine's answer, decoded, with its header completed.
    fn answer<M: Answer>(&self, answer: &[u8]) -> Result<M, Status> {
        let mut response = read_answer::<M>(answer).map_err(refusal_status)?;
        let header = response.header_mut();
        let revision = match header {
            Some(header) => header.revision,
            None => *self.revisions.borrow(),
        };
        *header = Some(self.header_at(revision));
        Ok(response)
    }

    /// Logs `bytes` through the member and returns the state machine's
    /// answer. This is the one way a follower's write reaches the leader:
    /// the member forwards it over the peer connection. A write that comes
    /// back unserved but known not to be in the log (the leader refused
    /// it, this member could not send it, it was not applied) is handed to
    /// the member again: at once if it was not applied, since the log has
    /// moved past it; else once another leader is known, or after
    /// [`REROUTE_PAUSE`]. After [`REROUTE_PATIENCE`] the last refusal is
    /// the answer. One whose outcome is unknown (timed out, the leader
    /// changed under it) is never sent again.
    pub async fn propose(&self, bytes: Vec<u8>) -> Result<Vec<u8>, ClientError> {
        self.rerouted(|| self.client.propose(bytes.clone())).await
    }

    /// Runs `attempt` until it is answered with anything but a refusal that
    /// is safe to retry ("not the leader", "busy", "not applied"), for up
    /// to [`REROUTE_PATIENCE`]; the last refusal is the answer after that.
    /// The rule of [`EtcdBackend::propose`] and [`EtcdBackend::read_barrier`].
    async fn rerouted<T, F, A>(&self, mut attempt: A) -> Result<T, ClientError>
    where
        A: FnMut() -> F,
        F: std::future::Future<Output = Result<T, ClientError>>,
    {
        let give_up = Instant::now() + REROUTE_PATIENCE;
        loop {
            let error = match attempt().await {
                Ok(answer) => return Ok(answer),
                Err(
                    error @ (ClientError::NotLeader { .. }
                    | ClientError::Busy
                    | ClientError::NotApplied),
                ) => error,
                Err(error) => return Err(error),
            };
            if Instant::now() >= give_up {
                return Err(error);
            }
            match error {
                ClientError::NotApplied => tokio::task::yield_now().await,
                ClientError::NotLeader { .. } => self.news_of_a_leader(REROUTE_PAUSE).await,
                _ => tokio::time::sleep(REROUTE_PAUSE).await,
            }
        }
    }

    /// Waits at most `pause` for the member to know a leader other than
    /// the one it knows now (or than none).
    pub async fn news_of_a_leader(&self, pause: Duration) {
        let mut status = self.status.clone();
        let known = status.borrow_and_update().leader;
        let news = status.wait_for(|s| s.leader.is_some() && s.leader != known);
        let stopped = matches!(tokio::time::timeout(pause, news).await, Ok(Err(_)));
        if stopped {
            // No more news will come: the pause still paces the tries.
            tokio::time::sleep(pause).await;
        }
    }

    /// True when `command` would grow the store past the quota.
    fn over_quota(&self, command: &Command) -> bool {
        let cost = command.space_cost();
        if cost == 0 || self.quota_bytes == 0 {
            return false;
        }
        self.store().size_bytes().saturating_add(cost) > self.quota_bytes
    }

    /// Raises this member's NOSPACE alarm, unless one is raised already.
    /// Best effort: if it cannot be replicated now, the next refused write
    /// tries again.
    async fn raise_no_space(&self) {
        if self.store().is_alarmed(AlarmKind::NoSpace) {
            return;
        }
        let raise = Command::Alarm(pb::AlarmRequest {
            action: pb::alarm_request::AlarmAction::Activate as i32,
            member_id: self.member_id.0,
            alarm: pb::AlarmType::Nospace as i32,
        });
        match self.client.propose(raise.encode()).await {
            Ok(_) => tracing::warn!(
                quota_bytes = self.quota_bytes,
                "the store reached its quota: NOSPACE alarm raised; free space (delete, compact) then `etcdctl alarm disarm`"
            ),
            Err(error) => tracing::warn!(%error, "could not raise the NOSPACE alarm"),
        }
    }

    /// Waits until reading the local store is linearizable (ReadIndex). A
    /// follower asks its leader through the member; a read the leader could
    /// not confirm (it no longer leads, or is not known yet) is asked again,
    /// as a write that was refused is (see [`EtcdBackend::propose`]): a
    /// read barrier changes nothing, so every refusal is safe to retry.
    pub async fn read_barrier(&self) -> Result<(), Status> {
        self.rerouted(|| self.client.read_barrier())
            .await
            .map_err(status_of)
    }

    /// One read barrier, not asked again: [`NotHere::Forward`] when
    /// another member leads. For a leader that asks whether a quorum still
    /// follows it.
    pub async fn read_barrier_once(&self) -> Result<(), NotHere> {
        self.client
            .read_barrier()
            .await
            .map_err(|error| self.not_here(error))
    }

    /// Member `to`'s answer to `call`, carried over the peer connection
    /// (see `member_call.rs`).
    pub async fn call<T: prost::Message + Default>(
        &self,
        to: NodeId,
        call: &super::member_call::MemberCall,
    ) -> Result<T, Status> {
        let answer = self
            .client
            .call(to, call.encode())
            .await
            .map_err(status_of)?;
        super::member_call::decode_answer(&answer)
    }

    /// Where `member` serves the etcd API: as the member directory or the
    /// configuration says (see `roster.rs`).
    pub fn client_address_of(&self, member: NodeId) -> Option<String> {
        let status = self.status.borrow();
        status
            .members
            .iter()
            .find(|m| m.id == member)
            .and_then(|m| m.client_address.clone())
            .or_else(|| self.client_addresses.get(&member).map(|a| a.to_string()))
    }

    /// Every member of the cluster's configuration, this one included
    /// unless it is outside it.
    pub fn member_ids(&self) -> Vec<NodeId> {
        let status = self.status.borrow();
        let own = (!status.outside).then_some(status.id);
        let mut ids: Vec<NodeId> = own
            .into_iter()
            .chain(status.members.iter().map(|m| m.id))
            .collect();
        ids.sort_unstable();
        // The status lists the other members of the configuration, each
        // once, and this one apart.
        assert!(
            ids.windows(2).all(|pair| pair[0] < pair[1]),
            "each member is listed once"
        );
        ids
    }

    /// Waits until the store's revision passes `revision`, or the node
    /// stops (then returns false).
    pub async fn wait_revision_after(&self, revision: i64) -> bool {
        let mut revisions = self.revisions.clone();
        let reached = revisions.wait_for(|r| *r > revision).await.is_ok();
        reached
    }
}
