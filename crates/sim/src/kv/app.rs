//! [`KvApp`]: a key-value workload on a simulated Raft cluster. Clients put,
//! get and compare-and-set a few hot keys through the leader (writes through
//! the log, reads through ReadIndex); every node applies the log to its own
//! [`KvMachine`]; the history is recorded for the linearizability checker and
//! the replication invariants are checked as events happen.

use super::checks::ReplicationChecker;
use super::client::{Client, PendingOp};
use super::codec::{encode, LoggedWrite};
use super::machine::KvMachine;
use super::RaftLike;
use crate::event::NodeIndex;
use crate::host::Host;
use crate::linearizability::{ClientId, Command, Key, Operation, Response, Value};
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

/// A reply travelling back to a client.
#[derive(Clone, Copy, Debug)]
enum Reply {
    /// The operation took effect (or the read was served) with this result.
    Done(Response),
    /// Not the leader; try this one (or the next node).
    Redirect(Option<NodeIndex>),
    /// Definitely not applied (refused, or the entry was replaced): retry.
    Retry,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Timer {
    Start(u64),
    Arrive(u64, u32),
    Respond(u64, u32),
    Deadline(u64, u32),
    /// The next membership step is due.
    Membership,
}

impl Timer {
    pub(super) fn token(self) -> u64 {
        let (kind, client, n) = match self {
            Timer::Start(c) => (0, c, 0),
            Timer::Arrive(c, a) => (1, c, a),
            Timer::Respond(c, a) => (2, c, a),
            Timer::Deadline(c, o) => (3, c, o),
            Timer::Membership => (4, 0, 0),
        };
        (kind << 56) | (client << 32) | n as u64
    }

    fn from_token(token: u64) -> Timer {
        let (client, n) = ((token >> 32) & 0xFF_FFFF, token as u32);
        match token >> 56 {
            0 => Timer::Start(client),
            1 => Timer::Arrive(client, n),
            2 => Timer::Respond(client, n),
            3 => Timer::Deadline(client, n),
            _ => Timer::Membership,
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
    /// Workload randomness, separate from the network's and the nodes'.
    pub(super) rng: Rng,
    pub(super) nodes: usize,
    /// Counters.
    pub stats: KvStats,
    machines: Vec<KvMachine>,
    requests: Vec<NodeRequests>,
    clients: Vec<Client>,
    replies: BTreeMap<(u64, u32), Reply>,
    /// Completed and abandoned operations.
    pub history: Vec<Operation>,
    /// Replication invariants.
    checker: ReplicationChecker,
    next_read_id: u64,
    pub(super) stopped: bool,
}

impl KvApp {
    /// A workload for a cluster of `nodes`.
    pub fn new(config: KvConfig, nodes: usize, seed: u64) -> Self {
        let clients = (0..(config.clients + config.readers) as u64)
            .map(|id| Client {
                id,
                ops_started: 0,
                attempts: 0,
                op: None,
                guess: 0,
                last_seen: BTreeMap::new(),
            })
            .collect();
        KvApp {
            rng: Rng::derive(seed, 0x6B76),
            machines: vec![KvMachine::default(); nodes],
            requests: vec![NodeRequests::default(); nodes],
            clients,
            replies: BTreeMap::new(),
            history: Vec::new(),
            checker: ReplicationChecker::new(nodes),
            next_read_id: 1,
            stopped: false,
            stats: KvStats::default(),
            nodes,
            config,
        }
    }

    /// Starts every client.
    pub fn start<P: RaftLike>(world: &mut World<P, KvApp>) {
        for client in 0..world.app.clients.len() as u64 {
            let at = world.now_us() + world.app.rng.range(0, 10_000);
            world.schedule_app_timer(at, Timer::Start(client).token());
        }
        if world.app.config.membership_changes {
            Self::schedule_membership_step(world);
        }
    }

    /// Stops new operations and records those still open as indeterminate.
    pub fn finish(&mut self) {
        self.stopped = true;
        for client in &mut self.clients {
            if let Some(op) = client.op.take() {
                self.history.push(Operation::indeterminate(
                    ClientId(client.id),
                    op.command,
                    op.invoke_us,
                ));
            }
        }
    }

    /// Operations that completed with an answer.
    pub fn completed(&self) -> usize {
        self.history
            .iter()
            .filter(|op| op.complete_us().is_some())
            .count()
    }

    fn next_command(&mut self, client: usize) -> Command {
        let key = Key(self.rng.range(0, self.config.keys));
        let value = Value(((client as u64) << 32) | (self.clients[client].ops_started as u64));
        if client >= self.config.clients {
            return Command::Get { key };
        }
        match self.rng.range(0, 10) {
            0..=3 => Command::Put { key, value },
            4..=7 => Command::Get { key },
            _ => {
                let expected = self.clients[client]
                    .last_seen
                    .get(&key.0)
                    .copied()
                    .flatten()
                    .map(Value);
                Command::CompareAndSet {
                    key,
                    expected,
                    new: value,
                }
            }
        }
    }
}

fn latency<P: RaftLike>(world: &mut World<P, KvApp>) -> u64 {
    world.network.sample_latency_us(&mut world.rng)
}

impl KvApp {
    fn on_start<P: RaftLike>(world: &mut World<P, KvApp>, client: u64) {
        let now = world.now_us();
        let app = &mut world.app;
        let c = client as usize;
        if app.stopped
            || app.clients[c].op.is_some()
            || app.clients[c].ops_started >= app.config.ops_per_client_max
        {
            return;
        }
        let command = app.next_command(c);
        app.clients[c].ops_started += 1;
        let deadline_us = now + app.config.op_timeout_us;
        let target = app.clients[c].guess;
        app.clients[c].op = Some(PendingOp {
            command,
            invoke_us: now,
            deadline_us,
            attempt: 0,
            target,
            proposed: false,
        });
        let ops = app.clients[c].ops_started;
        world.schedule_app_timer(deadline_us, Timer::Deadline(client, ops).token());
        Self::send_attempt(world, client);
    }

    fn send_attempt<P: RaftLike>(world: &mut World<P, KvApp>, client: u64) {
        let c = client as usize;
        if world.app.clients[c].op.is_none() {
            return;
        }
        let attempt = world.app.clients[c].next_attempt();
        let at = world.now_us() + latency(world);
        world.schedule_app_timer(at, Timer::Arrive(client, attempt).token());
    }

    fn reply<P: RaftLike>(world: &mut World<P, KvApp>, client: u64, attempt: u32, reply: Reply) {
        world.app.replies.insert((client, attempt), reply);
        let at = world.now_us() + latency(world);
        world.schedule_app_timer(at, Timer::Respond(client, attempt).token());
    }

    /// A request reaches its target node.
    fn on_arrive<P: RaftLike>(world: &mut World<P, KvApp>, client: u64, attempt: u32) {
        let Some(op) = world.app.clients[client as usize]
            .op
            .filter(|op| op.attempt == attempt)
        else {
            return;
        };
        let node = op.target;
        if !world.hosts[node].is_running() {
            // Connection refused (down) or never read (paused): a paused
            // node answers nothing; a down one refuses at once.
            if world.hosts[node].node.is_none() {
                Self::reply(world, client, attempt, Reply::Retry);
            }
            return;
        }
        let op_id = world.app.clients[client as usize].op_id();
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
                        if let Some(op) = world.app.clients[client as usize].op.as_mut() {
                            op.proposed = true;
                        }
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
            Self::reply(world, client, attempt, reply);
        }
    }

    /// A reply reaches its client.
    fn on_respond<P: RaftLike>(world: &mut World<P, KvApp>, client: u64, attempt: u32) {
        let Some(reply) = world.app.replies.remove(&(client, attempt)) else {
            return;
        };
        let c = client as usize;
        let Some(op) = world.app.clients[c].op.filter(|op| op.attempt == attempt) else {
            return;
        };
        let now = world.now_us();
        let nodes = world.app.nodes;
        match reply {
            Reply::Done(response) => {
                let record =
                    Operation::ok(ClientId(client), op.command, op.invoke_us, now, response);
                world.app.history.push(record);
                let seen = match (op.command, response) {
                    (Command::Get { key }, Response::Get(value)) => Some((key, value)),
                    (Command::Put { key, value }, _) => Some((key, Some(value))),
                    (Command::CompareAndSet { key, new, .. }, Response::CompareAndSet(true)) => {
                        Some((key, Some(new)))
                    }
                    _ => None,
                };
                if let Some((key, value)) = seen {
                    world.app.clients[c]
                        .last_seen
                        .insert(key.0, value.map(|v| v.0));
                }
                world.app.clients[c].op = None;
                world.app.clients[c].guess = op.target;
                let at = now + world.app.rng.range(0, world.app.config.think_us_max + 1);
                world.schedule_app_timer(at, Timer::Start(client).token());
            }
            Reply::Redirect(leader) => {
                world.app.clients[c].guess = leader.unwrap_or((op.target + 1) % nodes);
                Self::retry(world, client, 1_000);
            }
            Reply::Retry => {
                if let Some(op) = world.app.clients[c].op.as_mut() {
                    op.proposed = false;
                }
                world.app.clients[c].guess = (op.target + 1) % nodes;
                Self::retry(world, client, 5_000);
            }
        }
    }

    fn retry<P: RaftLike>(world: &mut World<P, KvApp>, client: u64, backoff_us: u64) {
        let c = client as usize;
        let Some(op) = world.app.clients[c].op else {
            return;
        };
        if op.proposed || world.now_us() + backoff_us >= op.deadline_us {
            return; // The deadline will record it.
        }
        let at = world.now_us() + world.app.rng.range(0, backoff_us + 1);
        let attempt = world.app.clients[c].next_attempt();
        world.schedule_app_timer(at, Timer::Arrive(client, attempt).token());
    }

    fn on_deadline<P: RaftLike>(world: &mut World<P, KvApp>, client: u64, ops: u32) {
        let c = client as usize;
        if world.app.clients[c].ops_started != ops {
            return;
        }
        let Some(op) = world.app.clients[c].op.take() else {
            return;
        };
        world.app.history.push(Operation::indeterminate(
            ClientId(client),
            op.command,
            op.invoke_us,
        ));
        world.app.clients[c].guess = (op.target + 1) % world.app.nodes;
        world.schedule_app_timer(world.now_us(), Timer::Start(client).token());
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
            Self::reply(world, client, attempt, reply);
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
            Self::reply(world, client, attempt, Reply::Done(Response::Get(value)));
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
            KvMachine::decode(&s.data, s.meta.last_index)
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
                world.app.machines[node] = KvMachine::decode(&snapshot.data, last);
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
                    Self::reply(world, client, attempt, Reply::Redirect(None));
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
        match Timer::from_token(token) {
            Timer::Start(client) => Self::on_start(world, client),
            Timer::Arrive(client, attempt) => Self::on_arrive(world, client, attempt),
            Timer::Respond(client, attempt) => Self::on_respond(world, client, attempt),
            Timer::Deadline(client, ops) => Self::on_deadline(world, client, ops),
            Timer::Membership => Self::on_membership_step(world),
        }
    }
}
