//! The elector's event loop: the tokio shell around one sans-IO core.
//!
//! It turns elapsed monotonic time into the core's 1 ms ticks, hands it
//! the peers' messages and the transport's connection-loss hints, and
//! carries out each `Ready` in the order the core's contract demands:
//! persist (fsync) first, then send. It holds no election logic of its own:
//! everything it decides is when to call the core and what to publish.

use crate::builder::TICK;
use crate::elector::Elector;
use crate::embeddable::Embeddable;
use crate::error::ElectorError;
use crate::leadership::Leadership;
use crate::metrics::ElectorMetrics;
use crate::state_file::{Owner, StateFile};
use crate::Algorithm;
use bellwether_core::{Message, NodeId, Protocol, Rng, Role, Status};
use bellwether_transport::{self as transport, Identity, PeerEvent};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};

/// Most ticks replayed at once after the process was stalled: enough for
/// every timeout to fire, few enough not to hold the loop.
const CATCH_UP_TICKS_MAX: u64 = 10_000;
/// Peer events handled per turn of the loop before ticking again.
const EVENTS_PER_TURN_MAX: usize = 256;

/// Checked settings, as the builder hands them over.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub algorithm: Algorithm,
    pub id: u64,
    pub peers: BTreeMap<u64, SocketAddr>,
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub group: String,
    pub fingerprint: u32,
    pub leases: bool,
    pub tls: Option<Arc<transport::PeerTls>>,
}

/// Opens the data directory and the listener, then starts the loop.
pub(crate) async fn start<P>(plan: Plan, config: P::Config) -> Result<Elector, ElectorError>
where
    P: Embeddable,
{
    let (state, durable) = open_state::<P>(&plan)?;
    let listener = TcpListener::bind(plan.listen)
        .await
        .map_err(|e| ElectorError::Listen {
            address: plan.listen.to_string(),
            error: e.to_string(),
        })?;
    let others: Vec<u64> = plan
        .peers
        .keys()
        .copied()
        .filter(|p| *p != plan.id)
        .collect();
    let metrics = Arc::new(ElectorMetrics::new(
        P::NAME,
        P::Message::all_kinds(),
        &others,
    ));
    let (events, acceptor, outbound) = spawn_transport::<P::Message>(&plan, listener, &metrics);
    let members: Vec<NodeId> = plan.peers.keys().map(|id| NodeId(*id)).collect();
    let node = P::new(
        &config,
        NodeId(plan.id),
        &members,
        durable.clone(),
        seed(plan.id),
    );
    let token = P::durable_term(&durable).0;
    let (leadership_tx, leadership) =
        watch::channel(Leadership::initial(plan.id, token, plan.leases));
    let (stop_tx, stop) = oneshot::channel();
    let status = node.status();
    let event_loop = Loop {
        node,
        durable,
        state: Arc::new(state),
        outbound,
        metrics: metrics.clone(),
        leadership: leadership_tx,
        started: Instant::now(),
        ticks_done: 0,
        leader_lost_at: Some(Instant::now()),
        last_status: status,
    };
    let task = tokio::spawn(event_loop.run(events, stop));
    Ok(Elector::new(
        plan.algorithm,
        leadership,
        metrics,
        stop_tx,
        task,
        acceptor,
    ))
}

/// Opens the state file in the data directory and decodes the durable
/// state it holds (the protocol's default when there is none yet).
fn open_state<P: Embeddable>(plan: &Plan) -> Result<(StateFile, P::Durable), ElectorError> {
    let owner = Owner {
        algorithm: P::NAME,
        group: plan.group.clone(),
        id: plan.id,
        fingerprint: plan.fingerprint,
    };
    let (state, stored) = StateFile::open(&plan.data_dir, owner)?;
    let durable = match stored {
        None => P::Durable::default(),
        Some(bytes) => P::decode_durable(&bytes).map_err(|e| ElectorError::CorruptState {
            path: plan.data_dir.join("elector.state").display().to_string(),
            reason: e.0,
        })?,
    };
    Ok((state, durable))
}

/// What the transport hands the loop: the peers' events, the acceptor's
/// task, and one outbound queue per other member.
type Transport<M> = (
    mpsc::Receiver<PeerEvent<M>>,
    tokio::task::JoinHandle<()>,
    BTreeMap<u64, mpsc::Sender<M>>,
);

/// Starts accepting peer connections on `listener` and one dialer per
/// other member.
fn spawn_transport<M: transport::WireMessage>(
    plan: &Plan,
    listener: TcpListener,
    metrics: &Arc<ElectorMetrics>,
) -> Transport<M> {
    let identity = Identity {
        cluster: plan.group.clone(),
        id: plan.id,
        members: transport::Members::new(plan.peers.keys().copied().collect()),
        source_ip: plan.listen.ip(),
        fingerprint: plan.fingerprint,
        wakeups: Arc::new(transport::Wakeups::new(
            &plan.peers.keys().copied().collect::<Vec<_>>(),
        )),
        tls: plan.tls.clone(),
    };
    let (events_tx, events) = mpsc::channel(transport::INBOUND_QUEUE_MAX);
    let acceptor = tokio::spawn(transport::accept(
        listener,
        identity.clone(),
        events_tx.clone(),
        metrics.clone(),
    ));
    let outbound = plan
        .peers
        .iter()
        .filter(|(id, _)| **id != plan.id)
        .map(|(id, address)| {
            let queue = transport::spawn_outbound(
                identity.clone(),
                *id,
                *address,
                events_tx.clone(),
                metrics.clone(),
            );
            (*id, queue)
        })
        .collect();
    (events, acceptor, outbound)
}

/// A seed no other node or restart shares, for the core's only randomness.
fn seed(id: u64) -> Rng {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    Rng::new(nanos ^ id.rotate_left(32) ^ u64::from(std::process::id()))
}

struct Loop<P: Protocol> {
    node: P,
    durable: P::Durable,
    state: Arc<StateFile>,
    outbound: BTreeMap<u64, mpsc::Sender<P::Message>>,
    metrics: Arc<ElectorMetrics>,
    leadership: watch::Sender<Leadership>,
    started: Instant,
    ticks_done: u64,
    /// When this node last lost its leader (or started), until it knows
    /// the next one: the failover it measures.
    leader_lost_at: Option<Instant>,
    last_status: Status,
}

impl<P: Embeddable> Loop<P> {
    async fn run(
        mut self,
        mut events: mpsc::Receiver<PeerEvent<P::Message>>,
        mut stop: oneshot::Receiver<()>,
    ) -> Result<(), ElectorError> {
        let mut ticker = tokio::time::interval(TICK);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let result = loop {
            tokio::select! {
                _ = &mut stop => break Ok(()),
                _ = ticker.tick() => self.catch_up(),
                event = events.recv() => {
                    let Some(event) = event else { break Ok(()) };
                    self.handle(event);
                    for _ in 1..EVENTS_PER_TURN_MAX {
                        match events.try_recv() {
                            Ok(event) => self.handle(event),
                            Err(_) => break,
                        }
                    }
                }
            }
            if let Err(error) = self.flush().await {
                break Err(error);
            }
        };
        self.leadership.send_modify(|view| {
            view.leader = None;
            view.role = "follower";
            view.valid_until = None;
        });
        result
    }

    /// Ticks the core up to the time that has passed.
    fn catch_up(&mut self) {
        let due = (self.started.elapsed().as_micros() / TICK.as_micros()) as u64;
        let behind = due.saturating_sub(self.ticks_done);
        for _ in 0..behind.min(CATCH_UP_TICKS_MAX) {
            self.node.tick();
        }
        self.ticks_done = self.ticks_done.max(due);
    }

    fn handle(&mut self, event: PeerEvent<P::Message>) {
        match event {
            PeerEvent::Message(from, message) => {
                self.metrics.count_received(Message::kind(&message));
                self.node.step(NodeId(from), message);
            }
            PeerEvent::Lost(peer) => self.node.peer_unreachable(NodeId(peer)),
            // An elector's group is fixed at start: no peer records
            // removals, so none refuses us as removed.
            PeerEvent::Removed(peer) => self.node.peer_unreachable(NodeId(peer)),
        }
    }

    /// Carries out the core's output: persist, then send, then publish.
    /// A view whose token is durable already is published before the
    /// fsync, so that a follower that learns its new leader from a message
    /// it must also persist says so at once; a new token is published only
    /// once it is on disk, so an application never acts on a token a crash
    /// could hand out again.
    async fn flush(&mut self) -> Result<(), ElectorError> {
        while self.node.has_ready() {
            let ready = self.node.ready();
            if let Some(change) = ready.persist {
                if self.node.status().term <= P::durable_term(&self.durable) {
                    self.publish();
                }
                self.persist(change).await?;
            }
            for envelope in ready.messages {
                if let Some(queue) = self.outbound.get(&envelope.to.0) {
                    // A full queue means the peer is unreachable; the
                    // algorithms resend what matters.
                    let _ = queue.try_send(envelope.message);
                }
            }
        }
        self.publish();
        Ok(())
    }

    async fn persist(&mut self, change: P::Persist) -> Result<(), ElectorError> {
        let before = P::durable_term(&self.durable);
        P::apply_persist(&mut self.durable, change);
        assert!(
            P::durable_term(&self.durable) >= before,
            "the persisted term or epoch never goes back"
        );
        let mut bytes = Vec::new();
        P::encode_durable(&self.durable, &mut bytes);
        let state = self.state.clone();
        let stored = tokio::task::spawn_blocking(move || state.store(&bytes))
            .await
            .expect("the persist thread does not panic");
        stored.map_err(|error| ElectorError::Persist {
            path: self.state.directory().display().to_string(),
            error: error.to_string(),
        })
    }

    /// Publishes the node's leadership when any of it changed.
    fn publish(&mut self) {
        let status = self.node.status();
        assert!(
            status.term <= P::durable_term(&self.durable),
            "a term or epoch is published only once it is durable"
        );
        let now = Instant::now();
        if status.role == Role::Candidate && self.last_status.role != Role::Candidate {
            self.metrics.count_election();
        }
        if status.leader != self.last_status.leader {
            match status.leader {
                None => self.leader_lost_at = Some(now),
                Some(leader) => {
                    if let Some(lost) = self.leader_lost_at.take() {
                        self.metrics
                            .record_failover(now.duration_since(lost).as_micros() as u64);
                    }
                    let token = status.fencing_token.unwrap_or(status.term.0);
                    self.metrics
                        .set_leader(leader.0, token, leader == status.id);
                }
            }
            if status.leader.is_none() {
                self.metrics.set_leader(0, status.term.0, false);
            }
        }
        self.last_status = status;
        let valid_until = (status.role == Role::Leader)
            .then(|| self.node.lease_remaining_ticks())
            .flatten()
            .map(|left| self.started + TICK * (self.ticks_done + left) as u32);
        let view = Leadership {
            id: status.id.0,
            leader: status.leader.map(|l| l.0),
            token: status.fencing_token.unwrap_or(status.term.0),
            role: status.role.as_str(),
            valid_until,
            leases: self.leadership.borrow().leases,
        };
        self.leadership.send_if_modified(|current| {
            let changed = *current != view;
            *current = view;
            changed
        });
    }
}
