//! [`KvApp`]: a key-value workload on a simulated Raft cluster. Clients put,
//! get and compare-and-set a few hot keys through the leader (writes through
//! the log, reads through ReadIndex); every node applies the log to its own
//! [`KvMachine`]; the history is recorded for the linearizability checker and
//! the replication invariants are checked as events happen.

use super::checks::ReplicationChecker;
use super::clients::{self, ClientWorkload, Clients, Pace, Reply, Timer};
use super::codec::{encode, LoggedWrite};
use super::machine::KvMachine;
use super::RaftLike;
use crate::event::NodeIndex;
use crate::host::Host;
use crate::linearizability::{Command, Key, Response, Value};
use crate::world::{Application, World};
use bellwether_core::raft::{Payload, ProposeError, RaftOutput, RaftPersist, ReadError};
use bellwether_core::{LogIndex, Rng, Role, Status};
use std::collections::BTreeMap;

/// Workload settings.
#[derive(Clone, Debug)]
pub struct KvConfig {
    /// Concurrent clients that put, get and compare-and-set.
    pub clients: usize,
    /// Further clients that only read. A reader that knows a deposed leader
    /// keeps reading from it while the writers move on to the new leader,
    /// which is what it takes to observe a stale read (writers leave a
    /// leader that cannot commit as soon as one of their writes times out).
    pub readers: usize,
    /// Hot keys they share.
    pub keys: u64,
    /// A client gives up on an operation after this long (indeterminate).
    pub op_timeout_us: u64,
    /// Pause between a client's operations, drawn from `[0, think_us_max]`.
    pub think_us_max: u64,
    /// Each node snapshots its machine every this many applied entries.
    pub snapshot_every_entries: u64,
    /// Operations per client at most, so histories stay checkable.
    pub ops_per_client_max: u32,
    /// Drive membership changes through the leader while the clients run
    /// (see `membership.rs`).
    pub membership_changes: bool,
}

impl Default for KvConfig {
    fn default() -> Self {
        KvConfig {
            clients: 5,
            readers: 0,
            keys: 3,
            op_timeout_us: 1_000_000,
            think_us_max: 5_000,
            snapshot_every_entries: 64,
            ops_per_client_max: 2_000,
            membership_changes: false,
        }
    }
}

impl KvConfig {
    /// How the clients pace themselves.
    pub fn pace(&self) -> Pace {
        Pace {
            op_timeout_us: self.op_timeout_us,
            think_us_max: self.think_us_max,
            ops_per_client_max: self.ops_per_client_max,
        }
    }
}

/// Per-node bookkeeping of requests in progress.
#[derive(Clone, Debug, Default)]
struct NodeRequests {
    /// Log index → (client, attempt, op id) of writes this node proposed.
    writes: BTreeMap<LogIndex, (u64, u32, u64)>,
    /// Read id → (client, attempt, key, arrival time) awaiting ReadIndex
    /// (or lease) confirmation.
    reads: BTreeMap<u64, (u64, u32, Key, u64)>,
    /// Confirmed reads waiting for the machine to reach their index.
    confirmed: Vec<(LogIndex, u64, u32, Key)>,
}

/// What the workload counted besides the history.
#[derive(Clone, Copy, Debug, Default)]
pub struct KvStats {
    /// Reads confirmed sooner than any heartbeat round could be: by lease.
    pub reads_without_round: u64,
    /// Membership changes the leader accepted.
    pub membership_changes: u64,
    /// Of those, removals of the leader itself.
    pub leader_removals: u64,
    /// Membership changes the leader refused (change pending, learner
    /// behind, not ready in its term, transfer under way).
    pub membership_refused: u64,
}

/// The workload.
pub struct KvApp {
    pub(super) config: KvConfig,
    pub(super) nodes: usize,
    /// Counters.
    pub stats: KvStats,
    machines: Vec<KvMachine>,
    requests: Vec<NodeRequests>,
    /// The clients and their history.
    pub clients: Clients,
    /// Replication invariants.
    checker: ReplicationChecker,
    next_read_id: u64,
}

impl KvApp {
    /// A workload for a cluster of `nodes`.
    pub fn new(config: KvConfig, nodes: usize, seed: u64) -> Self {
        let pace = config.pace();
        let count = config.clients + config.readers;
        let rng = Rng::derive(seed, 0x6B76);
        KvApp {
            machines: vec![KvMachine::default(); nodes],
            requests: vec![NodeRequests::default(); nodes],
            clients: Clients::new(count, nodes, pace, rng, |_| 0),
            checker: ReplicationChecker::new(nodes),
            next_read_id: 1,
            stats: KvStats::default(),
            nodes,
            config,
        }
    }

    /// Starts every client, and the membership changes if asked.
    pub fn start<P: RaftLike>(world: &mut World<P, KvApp>) {
        clients::start(world);
        if world.app.config.membership_changes {
            Self::schedule_membership_step(world);
        }
    }
}

impl ClientWorkload for KvApp {
    fn clients(&mut self) -> &mut Clients {
        &mut self.clients
    }

    /// Writers put, get and compare-and-set; readers only get.
    fn next_command(&mut self, client: usize) -> Command {
        let key = Key(self.clients.rng.range(0, self.config.keys));
        let state = self.clients.client(client);
        let value = Value(((client as u64) << 32) | u64::from(state.ops_started));
        let expected = state.last_seen.get(&key.0).copied().flatten().map(Value);
        if client >= self.config.clients {
            return Command::Get { key };
        }
        match self.clients.rng.range(0, 10) {
            0..=3 => Command::Put { key, value },
            4..=7 => Command::Get { key },
            _ => Command::CompareAndSet {
                key,
                expected,
                new: value,
            },
        }
    }
}

impl KvApp {
    /// A request reaches its target node.
    fn on_arrive<P: RaftLike>(world: &mut World<P, KvApp>, client: u64, attempt: u32) {
        let Some(op) = world.app.clients.op_of_attempt(client, attempt) else {
            return;
        };
        let node = op.target;
        if !world.hosts[node].is_running() {
            // Connection refused (down) or never read (paused): a paused
            // node answers nothing; a down one refuses at once.
            if world.hosts[node].node.is_none() {
                clients::reply(world, client, attempt, Reply::Retry);
            }
            return;
        }
        let op_id = world.app.clients.op_id(client);
        let reply = match op.command {
            Command::Get { key } => {
                let id = world.app.next_read_id;
                world.app.next_read_id += 1;
                let raft = world.node_mut(node).expect("running").raft_mut();
                match raft.read_index(id) {
                    Ok(()) => {
                        let now = world.now_us();
                        world.app.requests[node]
                            .reads
                            .insert(id, (client, attempt, key, now));
                        None
                    }
                    Err(ReadError::NotLeader { leader }) => {
                        Some(Reply::Redirect(leader.map(|l| (l.0 - 1) as usize)))
                    }
                    Err(ReadError::Busy) => Some(Reply::Retry),
                }
            }
            command => {
                let raft = world.node_mut(node).expect("running").raft_mut();
                match raft.propose(encode(&LoggedWrite { op_id, command })) {
                    Ok(index) => {
                        world.app.requests[node]
                            .writes
                            .insert(index, (client, attempt, op_id));
                        world.app.clients.mark_proposed(client);
                        None
                    }
                    Err(ProposeError::NotLeader { leader }) => {
                        Some(Reply::Redirect(leader.map(|l| (l.0 - 1) as usize)))
                    }
                    Err(_) => Some(Reply::Retry),
                }
            }
        };
        world.flush(node);
        if let Some(reply) = reply {
            clients::reply(world, client, attempt, reply);
        }
    }

    fn on_apply<P: RaftLike>(
        world: &mut World<P, KvApp>,
        node: NodeIndex,
        entry: bellwether_core::raft::Entry,
    ) {
        let now = world.now_us();
        let result = world.app.checker.on_apply(node, &entry, now);
        if let Err(violation) = result {
            world.report_violation(violation);
        }
        let data = match &entry.payload {
            Payload::Command(data) => Some(data.as_slice()),
            _ => None,
        };
        let applied = world.app.machines[node].apply(entry.index, data);
        if let Some((client, attempt, op_id)) = world.app.requests[node].writes.remove(&entry.index)
        {
            let reply = match applied {
                Some((write, response)) if write.op_id == op_id => Reply::Done(response),
                _ => Reply::Retry, // Another entry won this index: ours never applies.
            };
            clients::reply(world, client, attempt, reply);
        }
        Self::serve_confirmed_reads(world, node);
        Self::maybe_snapshot(world, node);
    }

    fn serve_confirmed_reads<P: RaftLike>(world: &mut World<P, KvApp>, node: NodeIndex) {
        let applied = world.app.machines[node].applied;
        let (ready, waiting): (Vec<_>, Vec<_>) = world.app.requests[node]
            .confirmed
            .drain(..)
            .partition(|(index, ..)| *index <= applied);
        world.app.requests[node].confirmed = waiting;
        for (_, client, attempt, key) in ready {
            let value = world.app.machines[node].get(key);
            clients::reply(world, client, attempt, Reply::Done(Response::Get(value)));
        }
    }

    fn maybe_snapshot<P: RaftLike>(world: &mut World<P, KvApp>, node: NodeIndex) {
        let machine = &world.app.machines[node];
        let every = world.app.config.snapshot_every_entries;
        let Some(raft) = world.node(node).map(|n| n.raft()) else {
            return;
        };
        if machine.applied.0 < raft.log().snapshot_index().0 + every
            || raft.applied_index() != machine.applied
        {
            return;
        }
        let (applied, data) = (machine.applied, machine.encode());
        let raft = world.node_mut(node).expect("up").raft_mut();
        raft.compact(applied, data)
            .expect("applied entries can be compacted");
        world.flush(node);
    }
}

impl<P: RaftLike> Application<P> for KvApp {
    fn on_boot(world: &mut World<P, Self>, node: NodeIndex) {
        let disk = &world.hosts[node].disk;
        world.app.machines[node] = disk.snapshot.as_ref().map_or_else(KvMachine::default, |s| {
            KvMachine::decode(s.data.bytes(), s.meta.last_index)
        });
        world.app.checker.on_boot(node, disk);
        // Requests held by the previous incarnation are lost with it; their
        // clients time out.
        world.app.requests[node] = NodeRequests::default();
    }

    fn on_output(world: &mut World<P, Self>, node: NodeIndex, output: RaftOutput) {
        match output {
            RaftOutput::Apply(entry) => Self::on_apply(world, node, entry),
            RaftOutput::Restore(snapshot) => {
                let last = snapshot.meta.last_index;
                world.app.machines[node] = KvMachine::decode(snapshot.data.bytes(), last);
                let requests = &mut world.app.requests[node];
                requests.writes.retain(|index, _| *index > last);
                Self::serve_confirmed_reads(world, node);
            }
            RaftOutput::ReadReady { id, index } => {
                if let Some((client, attempt, key, arrived_us)) =
                    world.app.requests[node].reads.remove(&id)
                {
                    // A heartbeat round is a message to a follower and an
                    // answer back, each at least the minimum latency: a
                    // read confirmed sooner was confirmed by the lease.
                    let round_trip_us_min = 2 * world.config.latency_us_min;
                    if world.now_us() - arrived_us < round_trip_us_min {
                        world.app.stats.reads_without_round += 1;
                    }
                    world.app.requests[node]
                        .confirmed
                        .push((index, client, attempt, key));
                    Self::serve_confirmed_reads(world, node);
                }
            }
            RaftOutput::ReadFailed { id } => {
                if let Some((client, attempt, ..)) = world.app.requests[node].reads.remove(&id) {
                    clients::reply(world, client, attempt, Reply::Redirect(None));
                }
            }
        }
        let now = world.now_us();
        if let Some(raft) = world.hosts[node].node.as_ref().map(|n| n.raft()) {
            let result = world.app.checker.on_progress(node, raft, now);
            if let Err(violation) = result {
                world.report_violation(violation);
            }
        }
    }

    fn on_persisted(world: &mut World<P, Self>, node: NodeIndex, persist: &RaftPersist) {
        let now = world.now_us();
        if let Err(violation) = world.app.checker.on_persist(node, persist, now) {
            world.report_violation(violation);
        }
    }

    fn on_status(
        world: &mut World<P, Self>,
        node: NodeIndex,
        old: Option<Status>,
        new: Option<Status>,
    ) {
        let became_leader = new.is_some_and(|s| s.role == Role::Leader)
            && old.is_none_or(|s| s.role != Role::Leader);
        if !became_leader {
            return;
        }
        let now = world.now_us();
        let raft = world.hosts[node]
            .node
            .as_ref()
            .expect("a leader is up")
            .raft();
        if let Err(violation) = world.app.checker.on_leader(node, raft, now) {
            world.report_violation(violation);
        }
    }

    /// Only members of the leader's configuration (voters and learners,
    /// which it replicates to) must follow it: a removed node hears nothing
    /// more from the leader and, no longer a voter, never campaigns, so its
    /// view of the leader may stay stale for good, and rightly so. With a
    /// fixed membership this is every node, as before.
    fn must_follow(world: &World<P, Self>, leader: NodeIndex, node: NodeIndex) -> bool {
        let Some(leader_node) = world.node(leader) else {
            return true;
        };
        let id = Host::<P>::id_of(node);
        leader_node.raft().cluster().members().any(|m| m == id)
    }

    fn on_timer(world: &mut World<P, Self>, token: u64) {
        match clients::on_timer(world, token) {
            Some(Timer::Arrive(client, attempt)) => Self::on_arrive(world, client, attempt),
            Some(Timer::Membership) => Self::on_membership_step(world),
            _ => {}
        }
    }
}
