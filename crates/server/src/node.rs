//! The node's event loop: the tokio shell around the member's decisions
//! ([`bellwether_member::Member`]). It wakes on a tick, a peer message, a
//! lost connection, a client's request or shutdown; drains what else is
//! waiting (bounded); then carries out the member's steps: persisting to
//! the write-ahead log (one fsync for the whole batch: group commit, on
//! this loop or on a blocking thread as the member planned), sending
//! messages, applying, answering clients; and publishes status and
//! metrics. The order of all of that is decided by the member; this file
//! only does the IO.

mod effects;
mod persist;
mod recovery;

/// The core's configuration a member runs with (see `recovery.rs`).
pub fn raft_config_of(config: &NodeConfig) -> bellwether_core::raft::RaftConfig {
    recovery::raft_config(config)
}
mod steps;
mod wiring;

use crate::client::{ClientError, ClientRequest, NodeClient};
use crate::config::{NodeConfig, MISSED_TICKS_MAX};
use crate::data_dir::{self, DataDirError};
use crate::member_calls::{IncomingCall, INCOMING_CALLS_MAX};
use crate::metrics::Metrics;
use crate::peer_message::PeerMessage;
use crate::status::NodeStatus;
use crate::status_tracker::{empty_status, StatusTracker};
use bellwether_core::raft::ClusterConfig;
use bellwether_core::NodeId;
use bellwether_member::{Member, NullMachine, Request, StateMachine};
use bellwether_storage::{SnapshotWriter, StorageError, WalStorage};
use bellwether_transport::{self as transport, Identity, INBOUND_QUEUE_MAX};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};

/// What the transport hands the event loop.
type PeerEvent = transport::PeerEvent<PeerMessage>;
/// Where a write's answer goes.
type ProposeReply = oneshot::Sender<Result<Vec<u8>, ClientError>>;
/// Where a read barrier's answer goes.
type ReadReply = oneshot::Sender<Result<(), ClientError>>;

/// Inputs handled per wake-up before persisting, at most: bounds both the
/// batch and the delay any one input waits (plus, after a lone write's
/// fsync on the loop, one more such drain and at most `answer_poll_us`).
const INPUTS_PER_BATCH_MAX: usize = 4_096;

/// A turn of the loop at least this long is logged as a warning (with the
/// default 100 ms heartbeat, a follower's detector notices a stall of
/// three heartbeats): its time, beside the snapshot lines, tells what the
/// loop was doing.
const LONG_LOOP_TURN: Duration = Duration::from_millis(100);

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
    /// A peer has this member recorded as removed from the cluster for
    /// good (`member remove`): it stops instead of calling the others
    /// forever. Its data describes a membership it is no longer part of.
    #[error("this member (id {id}) was removed from the cluster (member {by} says so): it stops. To have it back, add it again (`etcdctl member add`, `bellwether up add`) and start it with an empty data directory")]
    Removed {
        /// This member.
        id: u64,
        /// The peer that refused it.
        by: u64,
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

/// What streaming a snapshot into its file gives: the unfinished file, or
/// why it could not be written.
type StreamedSnapshot =
    Result<bellwether_storage::SnapshotStream<bellwether_storage::RealFileSystem>, StorageError>;

/// A node bound to its addresses and ready to run.
pub struct Node {
    config: NodeConfig,
    /// The member's state and decisions.
    member: Member<ProposeReply, ReadReply>,
    /// The member's clock: time since this node was opened.
    started: Instant,
    /// When the next tick is due on that clock (see `catch_up_ticks`).
    next_tick: Duration,
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
    /// Client requests (proposals, read barriers).
    requests: Option<mpsc::Receiver<ClientRequest>>,
    /// The handle for submitting them.
    client: NodeClient,
    /// Where other members' calls go (see [`crate::member_calls`]).
    calls: mpsc::Sender<IncomingCall>,
    /// Their receiving end, until the process takes it
    /// ([`Node::take_calls`]); dropped at `run` if no one did, so calls
    /// are refused at once.
    calls_taken: Option<mpsc::Receiver<IncomingCall>>,
    /// Writes this member's own snapshots beside the log, on a blocking
    /// thread (see `SnapshotWriter`): the log's appends do not wait for
    /// a snapshot's write and fsync.
    snapshot_writer: SnapshotWriter,
    /// A snapshot being encoded on a blocking thread: when it began (for
    /// the log line that says how long it took) and where its data
    /// arrives.
    encoding_snapshot: Option<(Instant, oneshot::Receiver<StreamedSnapshot>)>,
    /// The file the last snapshot encoded was streamed into, until the
    /// member compacts with it and it is finished.
    encoded_stream: Option<bellwether_storage::SnapshotStream<bellwether_storage::RealFileSystem>>,
    /// A snapshot being written by `snapshot_writer`.
    writing_snapshot: Option<effects::WritingSnapshot>,
    /// A snapshot from the leader being decoded on a blocking thread.
    restoring_snapshot: Option<effects::RestoringSnapshot>,
    /// Queues to the other members' connections (set by `run`).
    outbound: BTreeMap<NodeId, mpsc::Sender<PeerMessage>>,
    /// Why this member's last snapshot could not be written: the member
    /// stops at its next batch, as for any failed write to its log.
    snapshot_failed: Option<StorageError>,
    /// The address each of those connections dials.
    dialed: BTreeMap<NodeId, std::net::SocketAddr>,
    /// The configuration and directory version the connections were last
    /// set up for; a change of either sets them up again.
    wired: Option<(ClusterConfig, u64)>,
    /// The first peer that refused this member as removed for good: the
    /// loop stops with [`NodeError::Removed`].
    removed_by: Option<NodeId>,
    /// What the transport needs to dial a new member (set by `run`).
    transport: Option<(Identity, mpsc::Sender<PeerEvent>)>,
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
        machine: Box<dyn StateMachine>,
    ) -> Result<Node, NodeError> {
        let peer_tls = match &config.peer_tls {
            Some(files) => Some(Arc::new(bellwether_transport::PeerTls::load(
                &files.cert,
                &files.key,
                &files.trusted_ca,
            )?)),
            None => None,
        };
        let mut early = None;
        let (wal, durable, opened) = data_dir::open_audited(&config, &mut |snapshot| {
            early = recovery::EarlyRestore::start(machine.as_ref(), snapshot);
        })?;
        recovery::report_audit(&config, &opened);
        let member =
            recovery::recover_member(&config, &wal, durable, opened.repair, machine, early);
        let peer_listener = bind(config.peer_listen, "peers").await?;
        let http_listener = bind(config.http_listen, "http").await?;
        let http_address = http_listener.local_addr().unwrap_or(config.http_listen);
        let (status_tx, _) = watch::channel(empty_status(&config, http_address));
        let (client, requests) = NodeClient::channel();
        let (calls, calls_taken) = mpsc::channel(INCOMING_CALLS_MAX);
        let mut node = Node {
            config,
            member,
            started: Instant::now(),
            next_tick: Duration::ZERO,
            snapshot_writer: wal.snapshot_writer(),
            encoding_snapshot: None,
            encoded_stream: None,
            writing_snapshot: None,
            restoring_snapshot: None,
            snapshot_failed: None,
            wal: Some(wal),
            peer_listener: Some(peer_listener),
            peer_tls,
            metrics: Arc::new(Metrics::default()),
            status_tx,
            http_address,
            http_listener: Some(http_listener),
            requests: Some(requests),
            client,
            calls,
            calls_taken: Some(calls_taken),
            outbound: BTreeMap::new(),
            dialed: BTreeMap::new(),
            wired: None,
            removed_by: None,
            transport: None,
        };
        // The snapshot recovered was read whole to restore the store; the
        // core reads it from its file from now on.
        node.snapshot_off_memory();
        Ok(node)
    }

    /// A handle to propose commands and wait for read barriers.
    pub fn client(&self) -> NodeClient {
        self.client.clone()
    }

    /// Other members' calls for this process, to answer through
    /// [`NodeClient::answer_call`] (see [`crate::member_calls`]). Taken
    /// once, before [`Node::run`].
    pub fn take_calls(&mut self) -> Option<mpsc::Receiver<IncomingCall>> {
        self.calls_taken.take()
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
        let (events_tx, mut events) = mpsc::channel(INBOUND_QUEUE_MAX);
        // No one serves calls here: refuse them at once.
        drop(self.calls_taken.take());
        let identity = self.identity();
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
        self.next_tick = self.now() + self.tick_interval();
        let ticker = tokio::time::sleep_until((self.started + self.next_tick).into());
        tokio::pin!(ticker);
        tokio::pin!(shutdown);
        let mut handover_deadline: Option<Instant> = None;
        let mut requests = self.requests.take().expect("run is called once");
        // The member yielded with more to apply: come back at once.
        let mut more_ready = false;
        loop {
            tokio::select! {
                _ = std::future::ready(()), if more_ready => {}
                _ = &mut ticker => {
                    self.catch_up_ticks();
                }
                Some(request) = requests.recv() => self.handle_request(request),
                event = events.recv() => match event {
                    Some(event) => self.handle(event),
                    None => break,
                },
                _ = &mut shutdown, if handover_deadline.is_none() => {
                    handover_deadline = Some(Instant::now() + Duration::from_millis(2 * self.config.election_ms));
                    match self.member.hand_over() {
                        Some(Ok(target)) => tracing::info!(target = target.0, "shutting down: handing leadership over"),
                        Some(Err(error)) => tracing::warn!(%error, "shutting down without a handover"),
                        None => {}
                    }
                }
            }
            let turn = Instant::now();
            self.drain_events(&mut events);
            for _ in 0..INPUTS_PER_BATCH_MAX {
                match requests.try_recv() {
                    Ok(request) => self.handle_request(request),
                    Err(_) => break,
                }
            }
            more_ready = self.process_ready(&mut events).await?;
            let tick_at = tokio::time::Instant::from_std(self.started + self.next_tick);
            if ticker.deadline() != tick_at {
                ticker.as_mut().reset(tick_at);
            }
            self.rewire();
            if let Some(by) = self.removed_by {
                return Err(NodeError::Removed {
                    id: self.config.id.0,
                    by: by.0,
                });
            }
            tracker.publish(
                self.member.raft(),
                self.member.roster(),
                &self.metrics,
                &self.status_tx,
            );
            let took = turn.elapsed();
            self.metrics.loop_turn(took);
            if took >= LONG_LOOP_TURN {
                tracing::warn!(
                    ms = took.as_secs_f64() * 1000.0,
                    "the loop took one turn this long: heartbeats and answers waited"
                );
            }
            if let Some(deadline) = handover_deadline {
                if !self.member.is_leader() || Instant::now() >= deadline {
                    // Let the last messages (the TimeoutNow) reach the wire.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Who this member is to the transport.
    fn identity(&self) -> Identity {
        let accepted = self.member.roster().accepted(self.member.raft().cluster());
        Identity {
            cluster: self.config.cluster.clone(),
            id: self.config.id.0,
            members: transport::Members::new(wiring::numbers(accepted)),
            source_ip: self.config.peer_listen.ip(),
            // Members are not checked by fingerprint: the cluster name and
            // member ids are, and membership will change at run time.
            fingerprint: 0,
            wakeups: std::sync::Arc::new(transport::Wakeups::new(&wiring::numbers(
                self.config.peers.keys().copied(),
            ))),
            tls: self.peer_tls.clone(),
        }
    }

    /// The member's clock now.
    fn now(&self) -> Duration {
        self.started.elapsed()
    }

    /// Time between ticks.
    fn tick_interval(&self) -> Duration {
        Duration::from_millis(self.config.tick_ms())
    }

    /// Runs every tick the clock says is due, before any input is handled.
    ///
    /// Why before: a member that was paused (SIGSTOP, a stalled VM) wakes
    /// with input queued, and its timers must first count the time that
    /// went by, as the simulator's resume does, so that the simulator
    /// checks the order the server runs. A leader that heard from no
    /// quorum for an election timeout then steps down (CheckQuorum) before
    /// it takes a client's request, instead of taking requests it can no
    /// longer commit. At most [`MISSED_TICKS_MAX`] run in a row; more
    /// would only repeat timeouts that have long expired. Returns the
    /// clock's reading, for the input that follows.
    fn catch_up_ticks(&mut self) -> Duration {
        let now = self.now();
        let mut due = 0;
        while self.next_tick <= now {
            due += 1;
            if due > MISSED_TICKS_MAX {
                self.next_tick = now + self.tick_interval();
                break;
            }
            self.tick(now);
            self.next_tick += self.tick_interval();
        }
        now
    }

    /// A tick of the clock, read at `now`.
    fn tick(&mut self, now: Duration) {
        self.member.wake(now);
        self.collect_snapshot_jobs();
        self.member
            .forget_abandoned_reads(|reply| reply.is_closed());
        self.member.tick();
        self.carry_out_effects();
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
        let now = self.catch_up_ticks();
        self.member.wake(now);
        match event {
            PeerEvent::Message(from, PeerMessage::Raft(message)) => {
                self.member.step_raft(NodeId(from), message)
            }
            PeerEvent::Message(from, PeerMessage::Forward(forward)) => {
                self.member.forwarded(NodeId(from), forward);
                self.carry_out_effects();
            }
            PeerEvent::Lost(peer) => self.member.peer_lost(NodeId(peer)),
            PeerEvent::Removed(peer) => {
                self.removed_by.get_or_insert(NodeId(peer));
            }
        }
    }

    /// A local client's request.
    fn handle_request(&mut self, request: ClientRequest) {
        let now = self.catch_up_ticks();
        self.member.wake(now);
        match request {
            ClientRequest::Propose { command, reply } => {
                self.member.request(Request::Propose { command, reply })
            }
            ClientRequest::ProposeHere { command, reply } => {
                self.member.request(Request::ProposeHere { command, reply })
            }
            ClientRequest::ReadBarrier { reply } => {
                self.member.request(Request::ReadBarrier { reply })
            }
            ClientRequest::MoveLeader { target, reply } => {
                let _ = reply.send(self.member.move_leader(target));
            }
            ClientRequest::Call { to, body, reply } => {
                self.member.request(Request::Call { to, body, reply })
            }
            ClientRequest::AnswerCall { to, request, body } => match body {
                Some(body) => self.member.answer_call(to, request, body),
                None => self.member.refuse_call(to, request),
            },
        }
        self.carry_out_effects();
    }
}

/// A listener on `address`, or why not.
async fn bind(address: std::net::SocketAddr, what: &'static str) -> Result<TcpListener, NodeError> {
    TcpListener::bind(address)
        .await
        .map_err(|error| NodeError::Bind {
            what,
            address,
            error,
        })
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
