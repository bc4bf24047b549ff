//! The node's event loop: the only owner of the Raft core. It wakes on a
//! tick, a peer message, a lost connection or shutdown; drains what else is
//! waiting (bounded); then persists what the core asks (one fsync for the
//! whole batch: group commit), sends its messages, applies committed
//! entries, and publishes status and metrics. A leader that fsynced a lone
//! write on the loop also steps, once per wake-up, the answers that came
//! during that fsync, and may poll briefly for them (see
//! [`Node::process_ready`]).

use crate::client::{ClientError, ClientRequest, NodeClient};
use crate::config::NodeConfig;
use crate::data_dir::{self, DataDirError};
use crate::durable_watermark::DurableWatermark;
use crate::forwarding::{self, Forwarding};
use crate::lone_writes::LoneWrites;
use crate::metrics::Metrics;
use crate::peer_message::{Forward, PeerMessage};
use crate::roster::Roster;
use crate::state_machine::{NullMachine, StateMachine};
use crate::status::NodeStatus;
use crate::status_tracker::{empty_status, unix_ms, StatusTracker};
use bellwether_transport::{self as transport, Identity, INBOUND_QUEUE_MAX};

/// What the transport hands the event loop.
type PeerEvent = transport::PeerEvent<PeerMessage>;
use bellwether_core::raft::{
    ClusterConfig, MembershipChange, Payload, ProposeError, RaftConfig, RaftMessage, RaftNode,
    RaftOutput, RaftPersist, ReadError, SnapshotMeta,
};
use bellwether_core::{LogIndex, NodeId, Protocol, Rng, Role, Term};
use bellwether_storage::{SnapshotWriter, Storage, StorageError, WalStorage};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};

/// Inputs handled per wake-up before persisting, at most: bounds both the
/// batch and the delay any one input waits (plus, after a lone write's
/// fsync on the loop, one more such drain and at most `answer_poll_us`).
const INPUTS_PER_BATCH_MAX: usize = 4_096;
/// The node snapshots its state machine and compacts the log once at
/// least this many entries were applied since the last snapshot, and the
/// entries applied since then (their commands, and
/// [`ENTRY_BYTES_IN_MEMORY`] each) add up to at least the last snapshot's
/// size (see [`Node::maybe_snapshot`]).
const SNAPSHOT_EVERY_ENTRIES_MIN: u64 = 10_000;
/// What a log entry kept in memory costs beyond its command's bytes: the
/// entry itself and its command's allocation. It counts toward the bytes
/// applied since the last snapshot, so that a log of small commands (lease
/// grants of about 20 bytes) is compacted once it holds about as much
/// memory as the snapshot, not several times that.
const ENTRY_BYTES_IN_MEMORY: u64 = std::mem::size_of::<bellwether_core::raft::Entry>() as u64 + 16;
/// A log that grows slowly is snapshotted sooner: after this many entries
/// (and the bytes rule) once [`SNAPSHOT_SLOW_LOG_AFTER`] has passed since
/// the last snapshot. One client writing 256-byte values fills 10,000
/// entries in about five seconds, and that log, about 4 MiB, was most of a
/// member's memory; a busy log still reaches the 10,000 first, so its
/// snapshots stay as rare as before.
const SNAPSHOT_SLOW_LOG_ENTRIES_MIN: u64 = 1_000;
/// ... at most one such early snapshot per this much time, which bounds
/// the loop time they take.
const SNAPSHOT_SLOW_LOG_AFTER: Duration = Duration::from_secs(1);
/// ... and always after this many, whatever their size: bounds the log
/// kept in memory and replayed on restart.
const SNAPSHOT_EVERY_ENTRIES_MAX: u64 = 1_000_000;
/// Most entries a member writes and fsyncs on its own loop instead of on
/// a blocking thread (see [`Node::persists_inline`]): a lone client's
/// write is one entry, and a larger append means load, where the loop
/// should keep serving.
const INLINE_PERSIST_ENTRIES_MAX: usize = 2;
/// ... and at most this many bytes of them, so a large write (up to the
/// 1.5 MiB request bound) still goes to the blocking thread.
const INLINE_PERSIST_BYTES_MAX: usize = 16 * 1024;
/// A leader holds a snapshot back from compacting its log until every
/// follower has the entries it covers, so a follower a few in-flight
/// appends behind is not sent a whole snapshot (and its clients' forwarded
/// writes are not lost with the entries). A follower this many entries
/// behind, or gone, no longer holds compaction back.
const SNAPSHOT_HOLD_ENTRIES_MAX: u64 = 10_000;

type ProposeReply = tokio::sync::oneshot::Sender<Result<Vec<u8>, ClientError>>;
type ReadReply = tokio::sync::oneshot::Sender<Result<(), ClientError>>;

/// Why the node stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The data directory cannot be used.
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    /// An address cannot be bound.
    #[error("cannot listen on {address} ({what}): {error}; is another process using it?")]
    Bind {
        /// Which listener.
        what: &'static str,
        /// The address.
        address: std::net::SocketAddr,
        /// Why.
        error: std::io::Error,
    },
    /// Writing the log failed (full disk, IO error). The node stops rather
    /// than acknowledge anything it could not persist.
    #[error("cannot persist to the write-ahead log in {path}: {error}; free disk space or fix the disk, then restart this node (nothing acknowledged was lost)")]
    Persist {
        /// The data directory.
        path: String,
        /// The storage error.
        error: bellwether_storage::StorageError,
    },
    /// The peer TLS files cannot be used.
    #[error(transparent)]
    PeerTls(#[from] bellwether_transport::TlsError),
}

/// Handles the rest of the process uses to observe a running node.
#[derive(Clone)]
pub struct NodeHandles {
    /// Latest status.
    pub status: watch::Receiver<NodeStatus>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
}

/// A node bound to its addresses and ready to run.
pub struct Node {
    config: NodeConfig,
    raft: RaftNode,
    /// The write-ahead log; lent to a blocking thread during each fsync.
    wal: Option<WalStorage>,
    peer_listener: Option<TcpListener>,
    /// Mutual TLS between members, if configured.
    peer_tls: Option<Arc<bellwether_transport::PeerTls>>,
    metrics: Arc<Metrics>,
    status_tx: watch::Sender<NodeStatus>,
    /// Address HTTP is bound to (for status).
    pub http_address: std::net::SocketAddr,
    /// The HTTP listener, handed to the HTTP server.
    pub http_listener: Option<TcpListener>,
    /// What committed commands are applied to.
    machine: Box<dyn StateMachine>,
    /// Client requests (proposals, read barriers).
    requests: Option<mpsc::Receiver<ClientRequest>>,
    /// The handle for submitting them.
    client: NodeClient,
    /// Proposals waiting for their entry: index → (term proposed in, when,
    /// reply). An entry of another term at that index means it was replaced.
    proposals: BTreeMap<LogIndex, (Term, Instant, ProposeReply)>,
    /// Reads waiting for ReadIndex confirmation, by read id.
    reads: BTreeMap<u64, ReadReply>,
    /// Confirmed reads waiting for the state machine to reach their index.
    confirmed_reads: Vec<(LogIndex, ReadReply)>,
    /// Next read id.
    next_read_id: u64,
    /// Index of the last snapshot taken here.
    snapshot_index: LogIndex,
    /// Size of the last snapshot's data, bytes.
    snapshot_bytes: u64,
    /// Bytes of commands applied since the last snapshot.
    applied_bytes_since_snapshot: u64,
    /// When the last snapshot was taken here (or the node started).
    snapshot_taken_at: Instant,
    /// A snapshot taken but not yet compacted into the log (see
    /// [`SNAPSHOT_HOLD_ENTRIES_MAX`]): its index and data.
    held_snapshot: Option<(LogIndex, Vec<u8>)>,
    /// A snapshot taken on the loop and being encoded on a blocking
    /// thread (see [`StateMachine::snapshot_later`]): its index, and where
    /// its data arrives.
    encoding_snapshot: Option<(LogIndex, oneshot::Receiver<Vec<u8>>)>,
    /// Writes this member's own snapshots beside the log, on a blocking
    /// thread (see `SnapshotWriter`): the log's appends do not wait for
    /// a snapshot's write and fsync.
    snapshot_writer: SnapshotWriter,
    /// A snapshot being written by it: its metadata, and the outcome.
    writing_snapshot: Option<(SnapshotMeta, oneshot::Receiver<Result<(), StorageError>>)>,
    /// A snapshot written, for the log to record (and delete the segments
    /// it covers) at its next persist; or why it could not be written,
    /// which that persist reports, stopping the member as any failed write
    /// to its log does.
    snapshot_to_record: Option<Result<SnapshotMeta, StorageError>>,
    /// Whether this member's appends come one at a time (see
    /// [`Node::persists_inline`]).
    lone_writes: LoneWrites,
    /// Queues to the other members' connections (set by `run`).
    outbound: BTreeMap<NodeId, mpsc::Sender<PeerMessage>>,
    /// The address each of those connections dials.
    dialed: BTreeMap<NodeId, std::net::SocketAddr>,
    /// Who the members are and where they listen (see `roster.rs`).
    roster: Roster,
    /// The configuration and directory version the connections were last
    /// set up for; a change of either sets them up again.
    wired: Option<(ClusterConfig, u64)>,
    /// What the transport needs to dial a new member (set by `run`).
    transport: Option<(Identity, mpsc::Sender<PeerEvent>)>,
    /// Writes and reads forwarded to the leader, or served for followers.
    forwarding: Forwarding,
    /// What the disk holds as of the last finished fsync; every Raft
    /// message is checked against it before it leaves.
    durable: DurableWatermark,
}

fn raft_config(config: &NodeConfig) -> RaftConfig {
    let tick = config.tick_ms();
    let hint_ms: u64 = 3;
    RaftConfig {
        heartbeat_ticks: (config.heartbeat_ms / tick).max(1),
        election_ticks_min: (config.election_ms / tick).max(2),
        // [election_ms, 1.5 × election_ms): a silent failure is noticed
        // sooner than with the paper's [min, 2 × min); split votes stay rare
        // because rival pre-candidates yield by rank.
        election_jitter_ticks: (config.election_ms / tick / 2).max(1),
        hint_slot_ticks: hint_ms.div_ceil(tick).max(1),
        priorities: config.priorities.clone(),
        ..RaftConfig::default()
    }
}

impl Node {
    /// Opens the data directory, recovers, and binds both listeners, with no
    /// state machine (leadership only).
    pub async fn open(config: NodeConfig) -> Result<Node, NodeError> {
        Node::with_machine(config, Box::new(NullMachine)).await
    }

    /// Like [`Node::open`], applying committed commands to `machine`.
    pub async fn with_machine(
        config: NodeConfig,
        mut machine: Box<dyn StateMachine>,
    ) -> Result<Node, NodeError> {
        let peer_tls = match &config.peer_tls {
            Some(files) => Some(Arc::new(bellwether_transport::PeerTls::load(
                &files.cert,
                &files.key,
                &files.trusted_ca,
            )?)),
            None => None,
        };
        let (wal, durable) = data_dir::open(&config)?;
        let durable_watermark = watermark_of(&wal);
        let snapshot_index = durable
            .snapshot
            .as_ref()
            .map_or(LogIndex(0), |s| s.meta.last_index);
        if let Some(snapshot) = &durable.snapshot {
            machine.restore(snapshot.meta.last_index, &snapshot.data);
        }
        let snapshot_bytes = durable.snapshot.as_ref().map_or(0, |s| s.data.len() as u64);
        let members: Vec<NodeId> = config.peers.keys().copied().collect();
        let seed = unix_ms() ^ (u64::from(std::process::id()) << 32) ^ config.id.0;
        let raft = if config.join_voters.is_empty() {
            RaftNode::new(
                &raft_config(&config),
                config.id,
                &members,
                durable,
                Rng::new(seed),
            )
        } else {
            RaftNode::joining(
                &raft_config(&config),
                config.id,
                &config.join_voters,
                durable,
                Rng::new(seed),
            )
        };
        let mut roster = Roster::new(&config.peers, &config.peer_client, &config.peer_http);
        roster.set_directory(machine.directory(), machine.directory_version());
        let peer_listener = TcpListener::bind(config.peer_listen)
            .await
            .map_err(|error| NodeError::Bind {
                what: "peers",
                address: config.peer_listen,
                error,
            })?;
        let http_listener = TcpListener::bind(config.http_listen)
            .await
            .map_err(|error| NodeError::Bind {
                what: "http",
                address: config.http_listen,
                error,
            })?;
        let http_address = http_listener.local_addr().unwrap_or(config.http_listen);
        let metrics = Arc::new(Metrics::default());
        let (status_tx, _) = watch::channel(empty_status(&config, http_address));
        let (client, requests) = NodeClient::channel();
        let forwarding = Forwarding::new(config.id);
        Ok(Node {
            config,
            raft,
            snapshot_writer: wal.snapshot_writer(),
            writing_snapshot: None,
            snapshot_to_record: None,
            wal: Some(wal),
            peer_listener: Some(peer_listener),
            peer_tls,
            metrics,
            status_tx,
            http_address,
            http_listener: Some(http_listener),
            machine,
            requests: Some(requests),
            client,
            proposals: BTreeMap::new(),
            reads: BTreeMap::new(),
            confirmed_reads: Vec::new(),
            next_read_id: 1,
            snapshot_index,
            snapshot_bytes,
            applied_bytes_since_snapshot: 0,
            held_snapshot: None,
            encoding_snapshot: None,
            snapshot_taken_at: Instant::now(),
            outbound: BTreeMap::new(),
            dialed: BTreeMap::new(),
            roster,
            wired: None,
            transport: None,
            forwarding,
            lone_writes: LoneWrites::default(),
            durable: durable_watermark,
        })
    }

    /// A handle to propose commands and wait for read barriers.
    pub fn client(&self) -> NodeClient {
        self.client.clone()
    }

    /// Observers of this node.
    pub fn handles(&self) -> NodeHandles {
        NodeHandles {
            status: self.status_tx.subscribe(),
            metrics: self.metrics.clone(),
        }
    }

    /// Runs until `shutdown` completes. A leader then hands over to the most
    /// up-to-date follower before returning.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), NodeError> {
        let identity = Identity {
            cluster: self.config.cluster.clone(),
            id: self.config.id.0,
            members: transport::Members::new(numbers(self.roster.accepted(self.raft.cluster()))),
            source_ip: self.config.peer_listen.ip(),
            // Members are not checked by fingerprint: the cluster name and
            // member ids are, and membership will change at run time.
            fingerprint: 0,
            wakeups: std::sync::Arc::new(transport::Wakeups::new(&numbers(
                self.config.peers.keys().copied(),
            ))),
            tls: self.peer_tls.clone(),
        };
        let (events_tx, mut events) = mpsc::channel(INBOUND_QUEUE_MAX);
        let listener = self.peer_listener.take().expect("run is called once");
        // Stopped when `run` returns, so the peer port is free again for a
        // member restarted in the same process.
        let _accepting = AbortOnDrop(tokio::spawn(transport::accept(
            listener,
            identity.clone(),
            events_tx.clone(),
            self.metrics.clone(),
        )));
        self.transport = Some((identity, events_tx));
        self.rewire();
        let mut tracker = StatusTracker::new(&self.config, self.http_address);
        let mut ticker = tokio::time::interval(Duration::from_millis(self.config.tick_ms()));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        tokio::pin!(shutdown);
        let mut handover_deadline: Option<Instant> = None;
        let mut requests = self.requests.take().expect("run is called once");
        loop {
            tokio::select! {
                _ = ticker.tick() => {
                    self.raft.tick();
                    let leader = self.raft.status().leader;
                    self.forwarding.expire(leader, Instant::now());
                    // A confirmed read waits for this member to apply its
                    // index, which a cut-off follower may never do: forget
                    // the reads whose callers gave up, so they cannot pile up.
                    self.confirmed_reads.retain(|(_, reply)| !reply.is_closed());
                    self.step_membership();
                    // A snapshot encoded while no entry was applied.
                    self.maybe_snapshot();
                }
                Some(request) = requests.recv() => self.handle_request(request),
                event = events.recv() => match event {
                    Some(event) => self.handle(event),
                    None => break,
                },
                _ = &mut shutdown, if handover_deadline.is_none() => {
                    handover_deadline = Some(Instant::now() + Duration::from_millis(2 * self.config.election_ms));
                    if self.raft.status().role == Role::Leader {
                        match self.raft.transfer_leadership(None) {
                            Ok(target) => tracing::info!(target = target.0, "shutting down: handing leadership over"),
                            Err(error) => tracing::warn!(%error, "shutting down without a handover"),
                        }
                    }
                }
            }
            self.drain_events(&mut events);
            for _ in 0..INPUTS_PER_BATCH_MAX {
                match requests.try_recv() {
                    Ok(request) => self.handle_request(request),
                    Err(_) => break,
                }
            }
            self.process_ready(&mut events).await?;
            self.rewire();
            tracker.publish(&self.raft, &self.roster, &self.metrics, &self.status_tx);
            if let Some(deadline) = handover_deadline {
                if self.raft.status().role != Role::Leader || Instant::now() >= deadline {
                    // Let the last messages (the TimeoutNow) reach the wire.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Sets the peer connections up again when Raft's configuration or the
    /// member directory changed: a dialer for every member with a known
    /// address (restarted if the address changed), none for members that
    /// left, and the transport told whom to accept.
    fn rewire(&mut self) {
        let version = self.machine.directory_version();
        if version != self.roster.directory_version {
            self.roster.set_directory(self.machine.directory(), version);
        }
        let unchanged = self
            .wired
            .as_ref()
            .is_some_and(|(cluster, v)| cluster == self.raft.cluster() && *v == version);
        let Some((identity, events_tx)) = &self.transport else {
            return;
        };
        if unchanged {
            return;
        }
        let me = self.config.id;
        let was_member = self
            .wired
            .as_ref()
            .is_some_and(|(cluster, _)| cluster.members().any(|m| m == me));
        if was_member && !self.raft.cluster().members().any(|m| m == me) {
            tracing::warn!(
                "this member was removed from the cluster: it takes no part any more; stop it"
            );
        }
        self.wired = Some((self.raft.cluster().clone(), version));
        identity
            .members
            .set(numbers(self.roster.accepted(self.raft.cluster())));
        let mut wanted = BTreeMap::new();
        for member in self.raft.cluster().members() {
            if member != me {
                if let Some(address) = self.roster.peer_address(member) {
                    wanted.insert(member, address);
                }
            }
        }
        let dialed = &self.dialed;
        self.outbound
            .retain(|id, _| wanted.contains_key(id) && wanted.get(id) == dialed.get(id));
        self.dialed.retain(|id, _| self.outbound.contains_key(id));
        for (id, address) in wanted {
            if self.outbound.contains_key(&id) {
                continue;
            }
            tracing::info!(peer = id.0, %address, "connecting to member");
            let queue = transport::spawn_outbound(
                identity.clone(),
                id.0,
                address,
                events_tx.clone(),
                self.metrics.clone(),
            );
            self.outbound.insert(id, queue);
            self.dialed.insert(id, address);
        }
    }

    /// A leader steps Raft's configuration toward the member directory,
    /// one change at a time (see [`Roster::next_change`]).
    fn step_membership(&mut self) {
        if self.raft.status().role != Role::Leader {
            return;
        }
        let Some(change) = self.roster.next_change(&self.raft) else {
            return;
        };
        // A leader asked to remove itself hands leadership over first, so
        // the cluster does not wait out an election timeout after the
        // removal commits; the next leader removes it. With no voter to
        // hand over to, it removes itself.
        if change == MembershipChange::Remove(self.config.id) {
            if self.raft.transfer().is_some() {
                return;
            }
            match self.raft.transfer_leadership(None) {
                Ok(target) => {
                    tracing::info!(
                        target = target.0,
                        "removed from the cluster: handing leadership over first"
                    );
                    return;
                }
                Err(error) => tracing::info!(%error, "removing itself without a handover"),
            }
        }
        match self.raft.propose_membership(change) {
            Ok(index) => tracing::info!(?change, index = index.0, "membership change proposed"),
            Err(error) => tracing::debug!(?change, %error, "membership change waits"),
        }
    }

    /// Steps the peer events already queued, a bounded batch of them.
    fn drain_events(&mut self, events: &mut mpsc::Receiver<PeerEvent>) {
        for _ in 0..INPUTS_PER_BATCH_MAX {
            match events.try_recv() {
                Ok(event) => self.handle(event),
                Err(_) => break,
            }
        }
    }

    /// Steps a peer event. The transport names members by their numbers;
    /// they become [`NodeId`]s here.
    fn handle(&mut self, event: PeerEvent) {
        match event {
            PeerEvent::Message(from, PeerMessage::Raft(message)) => {
                if let RaftMessage::AppendEntries {
                    prev_log_index,
                    entries,
                    leader_commit,
                    ..
                } = &message
                {
                    self.lone_writes
                        .note_append(entries.len(), *prev_log_index, *leader_commit);
                }
                self.raft.step(NodeId(from), message)
            }
            PeerEvent::Message(from, PeerMessage::Forward(forward)) => {
                self.handle_forward(NodeId(from), forward)
            }
            PeerEvent::Lost(peer) => self.raft.peer_unreachable(NodeId(peer)),
        }
    }

    /// A forwarded request from a follower, or a leader's answer to one of
    /// ours.
    fn handle_forward(&mut self, from: NodeId, forward: Forward) {
        match forward {
            Forward::Propose { request, command } => match self.raft.propose(command) {
                Ok(_) => {}
                Err(error) => {
                    let busy = !matches!(error, ProposeError::NotLeader { .. });
                    let refused = Forward::ProposeRefused {
                        request,
                        leader: self.known_leader(),
                        busy,
                    };
                    self.send(from, PeerMessage::Forward(refused));
                }
            },
            Forward::ReadIndex { request } => {
                let id = self.take_read_id();
                match self.raft.read_index(id) {
                    Ok(()) => self.forwarding.serve_remote_read(id, from, request),
                    Err(_) => {
                        let refused = Forward::ReadIndexRefused {
                            request,
                            leader: self.known_leader(),
                        };
                        self.send(from, PeerMessage::Forward(refused));
                    }
                }
            }
            Forward::ProposeRefused {
                request,
                leader,
                busy,
            } => self.forwarding.write_refused(request, leader, busy),
            Forward::ReadIndexConfirmed { request, index } => {
                if let Some(reply) = self.forwarding.read_confirmed(request) {
                    self.confirmed_reads.push((index, reply));
                }
            }
            Forward::ReadIndexRefused { request, leader } => {
                self.forwarding.read_refused(request, leader)
            }
        }
    }

    /// The leader this member knows, if any.
    fn known_leader(&self) -> Option<NodeId> {
        self.raft.status().leader
    }

    /// Queues `message` for member `to`; false if it cannot be queued now
    /// (no connection queue, or the queue is full).
    fn send(&self, to: NodeId, message: PeerMessage) -> bool {
        self.outbound
            .get(&to)
            .is_some_and(|queue| queue.try_send(message).is_ok())
    }

    /// Sends what may leave before the fsync, persists, sends the rest,
    /// and applies.
    ///
    /// The core's contract is that a `Ready`'s state is durable before its
    /// messages are sent. One exception is safe and is what lets a leader's
    /// fsync overlap its followers' (Raft thesis §10.2.1): a leader's
    /// AppendEntries, heartbeats and snapshot chunks claim nothing about
    /// this node's disk, so they leave first. The leader still counts
    /// itself in a commit quorum only after its own fsync, because the fsync
    /// below completes before this loop steps any answer to those messages
    /// into the core (the core counts the leader at its last index). Every
    /// answer and vote, which does claim durability, waits for the fsync.
    ///
    /// Committed entries this `Ready` does not write are applied while its
    /// fsync runs on a blocking thread, or just before an fsync on this
    /// loop (see [`applies_before_persist`]), so a leader answers the
    /// clients of the previous batch without waiting for the next fsync.
    ///
    /// After a leader's fsync on this loop, the followers' answers that
    /// arrived meanwhile are stepped before the next `Ready`, and that
    /// `Ready`'s clients are answered before its messages leave (see
    /// [`Node::answer_then_send`]).
    async fn process_ready(
        &mut self,
        events: &mut mpsc::Receiver<PeerEvent>,
    ) -> Result<(), NodeError> {
        let mut after_leader_fsync_here = false;
        // At most one drain after an fsync and one poll per call, so the
        // call ends even while lone writes keep arriving; the loop's other
        // inputs (ticks, local clients, shutdown) wait no longer than that.
        let mut drained_after_fsync = false;
        let mut poll_due = false;
        loop {
            if !self.raft.has_ready() {
                // Polled only once nothing is left to send: the durable
                // notices a follower's forwarded write waits for leave first.
                if !poll_due {
                    break;
                }
                poll_due = false;
                self.poll_for_answers(events).await;
                continue;
            }
            let mut ready = self.raft.ready();
            if after_leader_fsync_here && ready.persist.is_none() && !ready.output.is_empty() {
                self.answer_then_send(ready).await;
                continue;
            }
            after_leader_fsync_here = false;
            let (early, late): (Vec<_>, Vec<_>) = std::mem::take(&mut ready.messages)
                .into_iter()
                .partition(|envelope| {
                    sendable_before_persist(&envelope.message)
                        && self.durable.term_is_durable(&envelope.message)
                });
            let sent_early = !early.is_empty();
            send_all(&self.outbound, &self.durable, early);
            let mut output = ready.output.into_iter().peekable();
            if let Some(persist) = ready.persist {
                let unwritten_from = first_written_index(&persist);
                let applies_before =
                    move |output: &RaftOutput| applies_before_persist(output, unwritten_from);
                if self.persists_inline(&persist) {
                    let mut applied = false;
                    while let Some(apply) = output.next_if(applies_before) {
                        self.apply_output(apply);
                        applied = true;
                    }
                    if sent_early || applied {
                        // Let the connections write the appends and the
                        // gRPC side the answers before the thread blocks.
                        tokio::task::yield_now().await;
                    }
                    self.metrics.wal_syncs_on_loop.inc();
                    self.persist_here(persist)?;
                    after_leader_fsync_here = self.raft.status().role == Role::Leader;
                } else {
                    let syncing = self.start_persist(persist);
                    self.metrics.wal_syncs_on_thread.inc();
                    while let Some(apply) = output.next_if(applies_before) {
                        self.apply_output(apply);
                    }
                    // Confirmed reads are released only below, once every
                    // output is applied: the core counts them all applied.
                    self.finish_persist(syncing).await?;
                    // A poll is for a lone write; this one was not.
                    poll_due = false;
                }
            }
            send_all(&self.outbound, &self.durable, late);
            for output in output {
                self.apply_output(output);
            }
            self.release_confirmed_reads();
            self.maybe_snapshot();
            if after_leader_fsync_here && !drained_after_fsync {
                // Nothing of this member ran during the fsync: let the
                // connections read what came meanwhile (with one client,
                // often the follower's answer that commits the entry).
                drained_after_fsync = true;
                tokio::task::yield_now().await;
                self.drain_events(events);
                poll_due = true;
            }
        }
        // Reads confirmed by the leader for this follower may already be
        // applied here, with nothing for the core to do.
        self.release_confirmed_reads();
        Ok(())
    }

    /// Leader, just after fsyncing a lone write on its loop with the entry
    /// not yet committed: polls for the followers' answers for up to
    /// `answer_poll_us` instead of letting the thread sleep. Each round
    /// yields to the runtime, which polls the sockets without blocking and
    /// runs every other task of this member, then steps what arrived.
    ///
    /// Why: the first answer usually comes a few tens of microseconds after
    /// the leader's own fsync (on the test machine: median 48 µs, 90th
    /// percentile 87 µs), and waking a thread that went to sleep costs
    /// about 20–25 µs there (a virtual CPU that halted). Polling made a
    /// lone client's write about 7% faster (1-client p50 at the leader
    /// 0.243 -> 0.226 ms, six A/B pairs), for at most `answer_poll_us` of
    /// CPU per such write. It only runs after a lone write's fsync on the
    /// loop (and no fsync on the blocking thread since, in the same
    /// wake-up), so a busy member never polls.
    ///
    /// It stops as soon as the entry commits, or anything stepped gives the
    /// core something to carry out (a forwarded write that arrived, a
    /// higher term), or this member stops leading, or the time is up.
    /// Local clients' requests wait meanwhile, at most `answer_poll_us`.
    async fn poll_for_answers(&mut self, events: &mut mpsc::Receiver<PeerEvent>) {
        let budget = Duration::from_micros(self.config.answer_poll_us);
        let awaited = self.raft.log().last_index();
        if budget.is_zero() || self.raft.commit_index() >= awaited {
            return;
        }
        let deadline = Instant::now() + budget;
        while self.raft.commit_index() < awaited
            && !self.raft.has_ready()
            && self.raft.status().role == Role::Leader
            && Instant::now() < deadline
        {
            tokio::task::yield_now().await;
            self.drain_events(events);
        }
        let counter = if self.raft.commit_index() >= awaited {
            &self.metrics.answer_polls_answered
        } else {
            &self.metrics.answer_polls_expired
        };
        counter.inc();
    }

    /// Carries out a `Ready` that persists nothing but applies entries,
    /// after this leader's fsync on its loop (right after it, or after the
    /// poll for answers): applies first, lets the gRPC side write the
    /// answers, then sends the messages.
    ///
    /// Why: with one client, such a `Ready` commits its write and also
    /// tells the followers (commit notices, or the leader's durable index);
    /// sending those first put two socket writes, about 10 µs, before the
    /// client's answer. Nothing in them depends on the order: the `Ready`
    /// writes nothing to disk, and an applied entry is committed already.
    async fn answer_then_send(&mut self, ready: bellwether_core::Ready<RaftNode>) {
        assert!(
            ready.persist.is_none(),
            "clients are answered before sends only when nothing awaits the disk"
        );
        for output in ready.output {
            self.apply_output(output);
        }
        self.release_confirmed_reads();
        self.maybe_snapshot();
        if !ready.messages.is_empty() {
            tokio::task::yield_now().await;
            send_all(&self.outbound, &self.durable, ready.messages);
        }
    }

    /// True when `persist` is better written and fsynced on this loop
    /// than on a blocking thread: it is small (see
    /// [`INLINE_PERSIST_ENTRIES_MAX`]), and this member either follows
    /// with no write or linearizable read of its own in flight, or has seen
    /// only lone appends lately ([`LoneWrites`]).
    ///
    /// Why: handing a small fsync to a blocking thread costs two thread
    /// wake-ups (there and back), a good part of a lone client's write on
    /// a loaded 2-core machine, and both the leader's fsync and a
    /// follower's are on that write's path. While this loop waits on the
    /// disk nothing else of this member runs (the `node` command runs a
    /// member on one thread; on a multi-threaded runtime, as in some tests,
    /// it holds one worker): a
    /// serializable read, a watch event or a keep-alive relayed through it
    /// waits one small fsync, about 0.1 ms here. Under load the fsync stays
    /// on the blocking thread, where the gRPC side and the transport keep
    /// running meanwhile.
    fn persists_inline(&mut self, persist: &RaftPersist) -> bool {
        let small = persist.snapshot.is_none()
            && self.snapshot_to_record.is_none()
            && persist.entries.len() <= INLINE_PERSIST_ENTRIES_MAX
            && persist
                .entries
                .iter()
                .map(|e| e.size_bytes())
                .sum::<usize>()
                <= INLINE_PERSIST_BYTES_MAX;
        let no_reads = self.reads.is_empty() && self.confirmed_reads.is_empty();
        let role = self.raft.status().role;
        let idle_follower = role == Role::Follower
            && self.proposals.is_empty()
            && no_reads
            && self.forwarding.is_idle();
        let uncommitted =
            (self.raft.log().last_index().0).saturating_sub(self.raft.commit_index().0);
        let lone = small
            && no_reads
            && persist.entries.len() == 1
            && uncommitted == 1
            && self.proposals.len() <= 1
            && self.forwarding.writes_waiting() <= 1;
        let lone_streak = !persist.entries.is_empty() && self.lone_writes.observe(lone);
        small && (idle_follower || lone_streak)
    }

    /// Writes and fsyncs `persist` on this thread.
    fn persist_here(&mut self, persist: RaftPersist) -> Result<(), NodeError> {
        let wal = self
            .wal
            .as_mut()
            .expect("the log is back after every fsync");
        persist_to(wal, persist, None).map_err(|error| NodeError::Persist {
            path: self.config.data_dir.display().to_string(),
            error,
        })?;
        self.durable = watermark_of(wal);
        Ok(())
    }

    /// Starts writing and fsyncing `persist` on a blocking thread, with the
    /// log lent to it. The runtime's other tasks, the gRPC services among
    /// them, keep running meanwhile, and requests that arrive wait in the
    /// queue for the next batch (group commit).
    fn start_persist(&mut self, persist: RaftPersist) -> tokio::task::JoinHandle<PersistDone> {
        let mut wal = self.wal.take().expect("the log is back after every fsync");
        let record = self.snapshot_to_record.take();
        tokio::task::spawn_blocking(move || {
            let result = persist_to(&mut wal, persist, record);
            (wal, result)
        })
    }

    /// Waits for [`Node::start_persist`] to finish and takes the log back.
    async fn finish_persist(
        &mut self,
        syncing: tokio::task::JoinHandle<PersistDone>,
    ) -> Result<(), NodeError> {
        let (wal, result) = syncing.await.expect("persisting does not panic");
        let durable = watermark_of(&wal);
        self.wal = Some(wal);
        result.map_err(|error| NodeError::Persist {
            path: self.config.data_dir.display().to_string(),
            error,
        })?;
        self.durable = durable;
        Ok(())
    }

    fn handle_request(&mut self, request: ClientRequest) {
        match request {
            ClientRequest::Propose { command, reply } => match self.leader_elsewhere() {
                Some(leader) => self.forward_write(leader, &command, reply),
                None => self.propose(command, reply),
            },
            ClientRequest::ReadBarrier { reply } => match self.leader_elsewhere() {
                Some(leader) => self.forward_read(leader, reply),
                None => self.read_here(reply),
            },
            ClientRequest::MoveLeader { target, reply } => {
                let _ = reply.send(self.move_leader(target));
            }
        }
    }

    /// Starts a leadership transfer to `target`, with etcd's error texts
    /// where etcd has one.
    fn move_leader(&mut self, target: NodeId) -> Result<(), String> {
        if self.raft.status().role != Role::Leader {
            return Err("etcdserver: not leader".into());
        }
        if target == self.config.id {
            return Ok(());
        }
        match self.raft.transfer_leadership(Some(target)) {
            Ok(_) => {
                tracing::info!(target = target.0, "moving leadership");
                Ok(())
            }
            Err(error) => Err(format!(
                "etcdserver: cannot move leadership to {:x}: {error}",
                target.0
            )),
        }
    }

    /// The leader, when this member follows a known one.
    fn leader_elsewhere(&self) -> Option<NodeId> {
        let status = self.raft.status();
        let leader = status.leader?;
        (status.role != Role::Leader && leader != self.config.id).then_some(leader)
    }

    /// Proposes a local client's command.
    fn propose(&mut self, command: Vec<u8>, reply: ProposeReply) {
        match self.raft.propose(forwarding::local_command(command)) {
            Ok(index) => {
                self.proposals
                    .insert(index, (self.raft.status().term, Instant::now(), reply));
            }
            Err(ProposeError::NotLeader { leader }) => {
                let _ = reply.send(Err(ClientError::not_leader(leader)));
            }
            Err(_) => {
                let _ = reply.send(Err(ClientError::Busy));
            }
        }
    }

    /// A fresh id for a ReadIndex read.
    fn take_read_id(&mut self) -> u64 {
        let id = self.next_read_id;
        self.next_read_id += 1;
        id
    }

    /// Starts a ReadIndex read for a local client.
    fn read_here(&mut self, reply: ReadReply) {
        let id = self.take_read_id();
        match self.raft.read_index(id) {
            Ok(()) => {
                self.reads.insert(id, reply);
            }
            Err(ReadError::NotLeader { leader }) => {
                let _ = reply.send(Err(ClientError::not_leader(leader)));
            }
            Err(ReadError::Busy) => {
                let _ = reply.send(Err(ClientError::Busy));
            }
        }
    }

    /// Sends a write to `leader` over the peer connection. When that cannot
    /// be done now, answers "not the leader" naming it, so the caller
    /// forwards its gRPC call instead.
    fn forward_write(&mut self, leader: NodeId, command: &[u8], reply: ProposeReply) {
        let not_leader = ClientError::not_leader(Some(leader));
        match self.forwarding.write(leader, command, reply) {
            Ok((request, command)) => {
                let message = PeerMessage::Forward(Forward::Propose { request, command });
                if !self.send(leader, message) {
                    if let Some(reply) = self.forwarding.unsent_write(request) {
                        let _ = reply.send(Err(not_leader));
                    }
                }
            }
            Err(reply) => {
                let _ = reply.send(Err(not_leader));
            }
        }
    }

    /// Asks `leader` for a read index over the peer connection, or answers
    /// "not the leader" naming it when that cannot be done now.
    fn forward_read(&mut self, leader: NodeId, reply: ReadReply) {
        let not_leader = ClientError::not_leader(Some(leader));
        match self.forwarding.read(leader, reply) {
            Ok(request) => {
                let message = PeerMessage::Forward(Forward::ReadIndex { request });
                if !self.send(leader, message) {
                    if let Some(reply) = self.forwarding.unsent_read(request) {
                        let _ = reply.send(Err(not_leader));
                    }
                }
            }
            Err(reply) => {
                let _ = reply.send(Err(not_leader));
            }
        }
    }

    /// Hands one output to the state machine and answers waiting clients.
    fn apply_output(&mut self, output: RaftOutput) {
        match output {
            RaftOutput::Apply(entry) => {
                assert!(
                    entry.index <= self.raft.commit_index(),
                    "entry {} applied before it committed (commit {})",
                    entry.index,
                    self.raft.commit_index()
                );
                self.applied_bytes_since_snapshot += ENTRY_BYTES_IN_MEMORY;
                let answer = match &entry.payload {
                    Payload::Command(command) => {
                        self.applied_bytes_since_snapshot += command.len() as u64;
                        let (forwarded, command) = forwarding::open(command);
                        let answer = self.machine.apply(entry.index, command);
                        // A write this member forwarded is never also one of
                        // its local proposals: the answer goes to its client.
                        match self.forwarding.applied(forwarded) {
                            Some(reply) => {
                                let _ = reply.send(Ok(answer));
                                None
                            }
                            None => Some(answer),
                        }
                    }
                    _ => None,
                };
                if let Some((term, proposed_at, reply)) = self.proposals.remove(&entry.index) {
                    let result = match answer {
                        Some(answer) if term == entry.term => {
                            self.metrics
                                .proposal_latency
                                .observe_us(proposed_at.elapsed().as_micros() as u64);
                            Ok(answer)
                        }
                        _ => Err(ClientError::NotApplied),
                    };
                    let _ = reply.send(result);
                }
            }
            RaftOutput::Restore(snapshot) => {
                self.machine
                    .restore(snapshot.meta.last_index, &snapshot.data);
                self.snapshot_index = snapshot.meta.last_index;
                self.snapshot_bytes = snapshot.data.len() as u64;
                self.applied_bytes_since_snapshot = 0;
                // Proposals covered by a snapshot from the leader: their
                // answers are gone with the entries. Clients retry reads.
                let later = self.proposals.split_off(&snapshot.meta.last_index.next());
                for (_, (_, _, reply)) in std::mem::replace(&mut self.proposals, later) {
                    let _ = reply.send(Err(ClientError::NotApplied));
                }
                self.forwarding.restored();
            }
            RaftOutput::ReadReady { id, index } => {
                if let Some(reply) = self.reads.remove(&id) {
                    self.confirmed_reads.push((index, reply));
                } else if let Some((follower, request)) = self.forwarding.remote_read(id) {
                    let confirmed = Forward::ReadIndexConfirmed { request, index };
                    self.send(follower, PeerMessage::Forward(confirmed));
                }
            }
            RaftOutput::ReadFailed { id } => {
                let leader = self.raft.status().leader;
                if let Some(reply) = self.reads.remove(&id) {
                    let _ = reply.send(Err(ClientError::not_leader(leader)));
                } else if let Some((follower, request)) = self.forwarding.remote_read(id) {
                    let refused = Forward::ReadIndexRefused { request, leader };
                    self.send(follower, PeerMessage::Forward(refused));
                }
            }
        }
    }

    /// Answers the confirmed reads whose index is applied. Called once per
    /// `Ready`, after all of its output, not once per applied entry.
    fn release_confirmed_reads(&mut self) {
        if self.confirmed_reads.is_empty() {
            return;
        }
        let applied = self.raft.applied_index();
        let mut index = 0;
        while index < self.confirmed_reads.len() {
            if self.confirmed_reads[index].0 <= applied {
                let (_, reply) = self.confirmed_reads.swap_remove(index);
                let _ = reply.send(Ok(()));
            } else {
                index += 1;
            }
        }
    }

    /// Snapshots the state machine and compacts the log when enough was
    /// applied since the last snapshot: at least
    /// [`SNAPSHOT_EVERY_ENTRIES_MIN`] entries (or
    /// [`SNAPSHOT_SLOW_LOG_ENTRIES_MIN`] on a slow log) whose memory in the
    /// log adds up to at least the last snapshot's size, or
    /// [`SNAPSHOT_EVERY_ENTRIES_MAX`] entries. A snapshot costs time
    /// proportional to the state; tying the interval to the state's size
    /// keeps that cost per applied byte constant as the state grows, where
    /// a fixed interval made it grow with the state. The log kept in memory
    /// stays below about the snapshot's size (or the minimum interval).
    ///
    /// The snapshot is taken here, between applies, and encoded on a
    /// blocking thread ([`StateMachine::snapshot_later`]): encoding a
    /// million leases on this loop stalled every member's writes for
    /// about 11 ms each time (`bench abuse`). It is held once encoded, and
    /// no other is taken meanwhile.
    fn maybe_snapshot(&mut self) {
        self.collect_encoded_snapshot();
        self.collect_written_snapshot();
        if self.encoding_snapshot.is_some()
            || self.writing_snapshot.is_some()
            || self.snapshot_to_record.is_some()
        {
            return;
        }
        let applied = self.raft.applied_index();
        if self.held_snapshot.is_none() {
            let entries = applied.0.saturating_sub(self.snapshot_index.0);
            let enough_bytes = self.applied_bytes_since_snapshot >= self.snapshot_bytes;
            let slow_log = entries >= SNAPSHOT_SLOW_LOG_ENTRIES_MIN
                && self.snapshot_taken_at.elapsed() >= SNAPSHOT_SLOW_LOG_AFTER;
            let due = entries >= SNAPSHOT_EVERY_ENTRIES_MAX
                || (enough_bytes && (entries >= SNAPSHOT_EVERY_ENTRIES_MIN || slow_log));
            if !due {
                return;
            }
            self.snapshot_taken_at = Instant::now();
            self.applied_bytes_since_snapshot = 0;
            let encode = self.machine.snapshot_later();
            let (done, encoded) = oneshot::channel();
            tokio::task::spawn_blocking(move || {
                let _ = done.send(encode());
            });
            self.encoding_snapshot = Some((applied, encoded));
            return;
        }
        let index = self.held_snapshot.as_ref().expect("held above").0;
        let waited = applied.0 - index.0;
        if !self.followers_hold(index) && waited < SNAPSHOT_HOLD_ENTRIES_MAX {
            return;
        }
        let (index, data) = self.held_snapshot.take().expect("held above");
        let bytes = data.len() as u64;
        if let Ok(snapshot) = self.raft.compact_unpersisted(index, data) {
            tracing::debug!(index = index.0, bytes, waited, "snapshot taken");
            self.snapshot_index = index;
            self.snapshot_bytes = bytes;
            let writer = self.snapshot_writer.clone();
            let (done, written) = oneshot::channel();
            let meta = snapshot.meta.clone();
            tokio::task::spawn_blocking(move || {
                let _ = done.send(writer.write(&snapshot));
            });
            self.writing_snapshot = Some((meta, written));
        }
    }

    /// Once this member's snapshot is written, has the log record it at
    /// the next persist. A snapshot that could not be written (a full
    /// disk, an IO error, one over the log's size bound) fails that
    /// persist instead, and the member stops, as it did when snapshots were
    /// written in the log's order: it must not run on with a log it can no
    /// longer compact.
    fn collect_written_snapshot(&mut self) {
        let Some((meta, written)) = &mut self.writing_snapshot else {
            return;
        };
        match written.try_recv() {
            Ok(outcome) => {
                self.snapshot_to_record = Some(outcome.map(|()| meta.clone()));
                self.writing_snapshot = None;
            }
            Err(oneshot::error::TryRecvError::Empty) => {}
            Err(oneshot::error::TryRecvError::Closed) => {
                panic!("writing a snapshot does not panic")
            }
        }
    }

    /// Holds the snapshot being encoded once its data is in. A snapshot
    /// from the leader restored meanwhile makes it useless: compacting
    /// then fails harmlessly, as for any snapshot at or below the log's.
    fn collect_encoded_snapshot(&mut self) {
        let Some((index, encoded)) = &mut self.encoding_snapshot else {
            return;
        };
        match encoded.try_recv() {
            Ok(data) => {
                assert!(self.held_snapshot.is_none(), "one snapshot at a time");
                self.held_snapshot = Some((*index, data));
                self.encoding_snapshot = None;
            }
            Err(oneshot::error::TryRecvError::Empty) => {}
            Err(oneshot::error::TryRecvError::Closed) => {
                panic!("encoding a snapshot does not panic")
            }
        }
    }

    /// True unless this member leads and some follower lacks entries up to
    /// `index`.
    fn followers_hold(&self, index: LogIndex) -> bool {
        if self.raft.status().role != Role::Leader {
            return true;
        }
        self.raft
            .cluster()
            .members()
            .filter(|id| *id != self.config.id)
            .all(|id| {
                self.raft
                    .progress(id)
                    .is_none_or(|p| p.match_index >= index)
            })
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What a blocking persist hands back: the log, and whether it worked.
type PersistDone = (WalStorage, Result<(), bellwether_storage::StorageError>);

/// The first log index `persist` writes, or `None` when it installs a
/// snapshot (which replaces the whole log); `LogIndex(u64::MAX)` when it
/// writes no entries.
fn first_written_index(persist: &RaftPersist) -> Option<LogIndex> {
    if persist.snapshot.is_some() {
        return None;
    }
    Some(
        persist
            .entries
            .first()
            .map_or(LogIndex(u64::MAX), |e| e.index),
    )
}

/// True for an output that may be applied while the `Ready`'s fsync runs:
/// a committed entry below every entry the `Ready` writes. Such an entry is
/// durable on a majority already, this member's own disk included when it
/// leads (its earlier fsyncs finished before the answers that committed
/// the entry were stepped), so applying it and answering its client does
/// not depend on this fsync. Whatever the `Ready` writes (a single-member
/// cluster commits its own entries at once), a snapshot to install, and
/// every output after the first that must wait, waits for the fsync.
fn applies_before_persist(output: &RaftOutput, unwritten_from: Option<LogIndex>) -> bool {
    match (output, unwritten_from) {
        (RaftOutput::Apply(entry), Some(first)) => entry.index < first,
        _ => false,
    }
}

fn sendable_before_persist(message: &RaftMessage) -> bool {
    matches!(
        message,
        RaftMessage::AppendEntries { .. }
            | RaftMessage::Heartbeat { .. }
            | RaftMessage::LeaderDurable { .. }
            | RaftMessage::InstallSnapshot { .. }
    )
}

/// Queues each message for its peer. A full queue means the peer is slow
/// or gone: the message is dropped; Raft retransmits what matters.
fn send_all(
    outbound: &BTreeMap<NodeId, mpsc::Sender<PeerMessage>>,
    durable: &DurableWatermark,
    envelopes: Vec<bellwether_core::Envelope<RaftMessage>>,
) {
    for envelope in envelopes {
        durable.assert_may_send(envelope.to, &envelope.message);
        if let Some(queue) = outbound.get(&envelope.to) {
            let _ = queue.try_send(PeerMessage::Raft(envelope.message));
        }
    }
}

/// What `wal` holds once its staged writes are synced: its last index and
/// hard state (the storage answers both "synced or not"; called only after
/// an fsync, or at start, when nothing is staged).
fn watermark_of(wal: &WalStorage) -> DurableWatermark {
    DurableWatermark {
        last_index: wal.last_index(),
        hard_state: wal.hard_state(),
    }
}

/// Member ids as the transport takes them: plain numbers.
fn numbers(ids: impl IntoIterator<Item = NodeId>) -> Vec<u64> {
    ids.into_iter().map(|id| id.0).collect()
}

/// Writes `persist` to the log, after recording this member's own
/// snapshot `record` if one was written since the last persist (or failing
/// with why it could not be written). A snapshot
/// from the leader, saved in the log's order, deletes the segments it
/// covers too: without that, a member's log only shrank when it restarted.
fn persist_to(
    wal: &mut WalStorage,
    persist: RaftPersist,
    record: Option<Result<SnapshotMeta, StorageError>>,
) -> Result<(), StorageError> {
    if let Some(written) = record {
        wal.record_snapshot(&written?)?;
    }
    wal.persist(&persist)?;
    if let Some(snapshot) = &persist.snapshot {
        wal.compact(snapshot.meta.last_index)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64) -> bellwether_core::raft::Entry {
        bellwether_core::raft::Entry {
            term: Term(2),
            index: LogIndex(index),
            payload: Payload::Noop,
        }
    }

    #[test]
    fn only_committed_entries_below_what_the_fsync_writes_are_applied_during_it() {
        let writes = RaftPersist {
            entries: vec![entry(8), entry(9)],
            ..RaftPersist::default()
        };
        let from = first_written_index(&writes);
        assert_eq!(from, Some(LogIndex(8)));
        assert!(applies_before_persist(&RaftOutput::Apply(entry(7)), from));
        // A single-member cluster commits what it has just appended: its
        // client is answered only once the entry is on disk.
        assert!(!applies_before_persist(&RaftOutput::Apply(entry(8)), from));
        assert!(!applies_before_persist(&RaftOutput::Apply(entry(9)), from));
        let reads = RaftOutput::ReadReady {
            id: 1,
            index: LogIndex(7),
        };
        assert!(!applies_before_persist(&reads, from), "reads wait");

        let hard_state_only = RaftPersist {
            hard_state: Some(Default::default()),
            ..RaftPersist::default()
        };
        let from = first_written_index(&hard_state_only);
        assert!(applies_before_persist(&RaftOutput::Apply(entry(9)), from));

        let snapshot = RaftPersist {
            snapshot: Some(Default::default()),
            entries: vec![entry(12)],
            ..RaftPersist::default()
        };
        let from = first_written_index(&snapshot);
        assert_eq!(from, None, "a snapshot replaces the whole log");
        assert!(!applies_before_persist(&RaftOutput::Apply(entry(3)), from));
    }

    #[test]
    fn only_a_leaders_replication_leaves_before_the_fsync() {
        let (term, index) = (Term(3), LogIndex(7));
        let early = [
            RaftMessage::AppendEntries {
                term,
                prev_log_index: index,
                prev_log_term: term,
                entries: Vec::new(),
                leader_commit: index,
            },
            RaftMessage::Heartbeat {
                term,
                commit: index,
                round: 1,
            },
            // It speaks of the disk too, but only of earlier Readys, which
            // are on disk before this one is taken.
            RaftMessage::LeaderDurable {
                term,
                index,
                config_index: index,
            },
        ];
        // Each of these tells its receiver something about our disk (an
        // entry stored, a vote cast): sent early, a crash could take it back.
        let late = [
            RaftMessage::AppendResponse {
                term,
                success: true,
                match_index: index,
                hint_index: index,
                hint_term: None,
            },
            RaftMessage::HeartbeatResponse {
                term,
                round: 1,
                last_log_index: index,
            },
            RaftMessage::VoteResponse {
                term,
                granted: true,
            },
            RaftMessage::PreVoteResponse {
                term,
                granted: true,
            },
            RaftMessage::VoteRequest {
                term,
                last_log_index: index,
                last_log_term: term,
                leadership_transfer: false,
            },
            RaftMessage::TimeoutNow { term },
        ];
        assert!(early.iter().all(sendable_before_persist));
        assert!(!late.iter().any(sendable_before_persist));
    }
}
