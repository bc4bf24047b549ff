//! [`Clients`]: the simulated clients both key-value workloads share, the
//! kv workload (clients of Raft alone) and the etcd workload (clients of
//! the member driver). Each client runs one operation at a time against the
//! node it believes leads, follows redirects, retries definite failures,
//! gives up at its deadline (outcome unknown, recorded as indeterminate)
//! and records every operation in the history the linearizability checker
//! reads.
//!
//! Why one copy: the two workloads differ only in what a request does when
//! it reaches its node. Each implements [`ClientWorkload`] (its mix of
//! commands) and serves [`Timer::Arrive`] itself (the kv workload also
//! [`Timer::Membership`], the etcd workload [`Timer::Renew`] and
//! [`Timer::Lessor`]); everything else a client does happens here, so a
//! fix to how clients retry or give up reaches both checks at once.
//! ([`Client`] itself, one client's state, is in `client.rs`.)

use super::client::{Client, PendingOp};
use crate::event::NodeIndex;
use crate::linearizability::{ClientId, Command, Operation, Response};
use crate::world::{Application, World};
use bellwether_core::{Protocol, Rng};
use std::collections::BTreeMap;

/// A reply travelling back to a client.
#[derive(Clone, Copy, Debug)]
pub enum Reply {
    /// The operation took effect (or the read was served) with this result.
    Done(Response),
    /// Not the leader; try this one (or the next node).
    Redirect(Option<NodeIndex>),
    /// Definitely not applied (the node is down, refused it, or another
    /// entry took its place): retry.
    Retry,
}

/// The workloads' timers, carried as the world's app-timer tokens.
#[derive(Clone, Copy, Debug)]
pub enum Timer {
    /// A client starts its next operation.
    Start(u64),
    /// A client's attempt reaches its node.
    Arrive(u64, u32),
    /// A reply to an attempt reaches its client.
    Respond(u64, u32),
    /// A client's operation (by its count) runs out of time.
    Deadline(u64, u32),
    /// The kv workload's next membership step is due.
    Membership,
    /// The etcd workload's next round of keep-alives is due.
    Renew,
    /// The etcd workload hands a lease clock's revoke (by number) to its
    /// member.
    Lessor(u32),
}

impl Timer {
    /// The token: kind, client and attempt (or operation count).
    pub fn token(self) -> u64 {
        let (kind, client, n) = match self {
            Timer::Start(c) => (0, c, 0),
            Timer::Arrive(c, a) => (1, c, a),
            Timer::Respond(c, a) => (2, c, a),
            Timer::Deadline(c, o) => (3, c, o),
            Timer::Membership => (4, 0, 0),
            Timer::Renew => (5, 0, 0),
            Timer::Lessor(n) => (6, 0, n),
        };
        (kind << 56) | (client << 32) | u64::from(n)
    }

    /// The timer a token names.
    pub fn from_token(token: u64) -> Timer {
        let (client, n) = ((token >> 32) & 0xFF_FFFF, token as u32);
        match token >> 56 {
            0 => Timer::Start(client),
            1 => Timer::Arrive(client, n),
            2 => Timer::Respond(client, n),
            3 => Timer::Deadline(client, n),
            4 => Timer::Membership,
            5 => Timer::Renew,
            _ => Timer::Lessor(n),
        }
    }
}

/// How clients pace themselves.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    /// A client gives up on an operation after this long (indeterminate).
    pub op_timeout_us: u64,
    /// Pause between a client's operations, drawn from `[0, think_us_max]`.
    pub think_us_max: u64,
    /// Operations per client at most, so histories stay checkable.
    pub ops_per_client_max: u32,
}

/// A workload whose clients are [`Clients`].
pub trait ClientWorkload {
    /// Its clients.
    fn clients(&mut self) -> &mut Clients;
    /// What client `client` asks next.
    fn next_command(&mut self, client: usize) -> Command;
}

/// Every client of a workload, their replies in flight and their history.
pub struct Clients {
    /// Workload randomness, separate from the network's and the nodes':
    /// commands, think times and backoffs (and the kv workload's
    /// membership steps). A seed replays only if the draws keep their order.
    pub rng: Rng,
    list: Vec<Client>,
    replies: BTreeMap<(u64, u32), Reply>,
    /// Completed and abandoned operations.
    pub history: Vec<Operation>,
    /// No new operation starts once set.
    pub stopped: bool,
    nodes: usize,
    pace: Pace,
}

impl Clients {
    /// Points every client's next attempt at `node`, for tests that send
    /// the load through one member.
    pub fn aim_all_at(&mut self, node: NodeIndex) {
        for client in &mut self.list {
            client.guess = node;
        }
    }

    /// `count` clients of a cluster of `nodes`, each first aiming at the
    /// node `first_guess` picks for it.
    pub fn new(
        count: usize,
        nodes: usize,
        pace: Pace,
        rng: Rng,
        first_guess: impl Fn(u64) -> NodeIndex,
    ) -> Self {
        let list = (0..count as u64)
            .map(|id| Client {
                id,
                ops_started: 0,
                attempts: 0,
                op: None,
                guess: first_guess(id),
                last_seen: BTreeMap::new(),
            })
            .collect();
        Clients {
            rng,
            list,
            replies: BTreeMap::new(),
            history: Vec::new(),
            stopped: false,
            nodes,
            pace,
        }
    }

    /// Client `client`.
    pub fn client(&self, client: usize) -> &Client {
        &self.list[client]
    }

    /// The operation of `client` whose current attempt is `attempt`.
    pub fn op_of_attempt(&self, client: u64, attempt: u32) -> Option<PendingOp> {
        self.list[client as usize]
            .op
            .filter(|op| op.attempt == attempt)
    }

    /// Op id of `client`'s current attempt.
    pub fn op_id(&self, client: u64) -> u64 {
        self.list[client as usize].op_id()
    }

    /// `client`'s write reached a leader's log: it may take effect without
    /// an answer, so it is not sent again. (The kv workload's; the etcd
    /// workload's member driver keeps a forwarded write's fate itself.)
    pub fn mark_proposed(&mut self, client: u64) {
        if let Some(op) = self.list[client as usize].op.as_mut() {
            op.proposed = true;
        }
    }

    /// Stops new operations and records those still open as indeterminate.
    pub fn finish(&mut self) {
        self.stopped = true;
        for client in &mut self.list {
            if let Some(op) = client.op.take() {
                let id = ClientId(client.id);
                self.history
                    .push(Operation::indeterminate(id, op.command, op.invoke_us));
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

    /// Notes what a completed operation showed its client, for its next
    /// compare-and-set.
    fn note_seen(&mut self, c: usize, command: Command, response: Response) {
        let seen = match (command, response) {
            (Command::Get { key }, Response::Get(value)) => Some((key, value)),
            (Command::Put { key, value } | Command::LeasedPut { key, value }, _) => {
                Some((key, Some(value)))
            }
            (Command::CompareAndSet { key, new, .. }, Response::CompareAndSet(true)) => {
                Some((key, Some(new)))
            }
            _ => None,
        };
        if let Some((key, value)) = seen {
            self.list[c].last_seen.insert(key.0, value.map(|v| v.0));
        }
    }
}

/// Starts every client within the first 10 ms.
pub fn start<P: Protocol, A: Application<P> + ClientWorkload>(world: &mut World<P, A>) {
    for client in 0..world.app.clients().list.len() as u64 {
        let at = world.now_us() + world.app.clients().rng.range(0, 10_000);
        world.schedule_app_timer(at, Timer::Start(client).token());
    }
}

/// Handles the client timers; returns the ones the workload handles itself
/// ([`Timer::Arrive`], [`Timer::Membership`], [`Timer::Renew`],
/// [`Timer::Lessor`]).
pub fn on_timer<P: Protocol, A: Application<P> + ClientWorkload>(
    world: &mut World<P, A>,
    token: u64,
) -> Option<Timer> {
    match Timer::from_token(token) {
        Timer::Start(client) => on_start(world, client),
        Timer::Respond(client, attempt) => on_respond(world, client, attempt),
        Timer::Deadline(client, ops) => on_deadline(world, client, ops),
        timer => return Some(timer),
    }
    None
}

/// Sends `reply` to `client`'s `attempt`, one network latency away.
pub fn reply<P: Protocol, A: Application<P> + ClientWorkload>(
    world: &mut World<P, A>,
    client: u64,
    attempt: u32,
    reply: Reply,
) {
    world.app.clients().replies.insert((client, attempt), reply);
    let at = world.now_us() + world.network.sample_latency_us(&mut world.rng);
    world.schedule_app_timer(at, Timer::Respond(client, attempt).token());
}

fn on_start<P: Protocol, A: Application<P> + ClientWorkload>(world: &mut World<P, A>, client: u64) {
    let now = world.now_us();
    let c = client as usize;
    let clients = world.app.clients();
    if clients.stopped
        || clients.list[c].op.is_some()
        || clients.list[c].ops_started >= clients.pace.ops_per_client_max
    {
        return;
    }
    let command = world.app.next_command(c);
    let clients = world.app.clients();
    clients.list[c].ops_started += 1;
    let deadline_us = now + clients.pace.op_timeout_us;
    let target = clients.list[c].guess;
    clients.list[c].op = Some(PendingOp {
        command,
        invoke_us: now,
        deadline_us,
        attempt: 0,
        target,
        proposed: false,
    });
    let ops = clients.list[c].ops_started;
    world.schedule_app_timer(deadline_us, Timer::Deadline(client, ops).token());
    let attempt = world.app.clients().list[c].next_attempt();
    let at = now + world.network.sample_latency_us(&mut world.rng);
    world.schedule_app_timer(at, Timer::Arrive(client, attempt).token());
}

/// A reply reaches its client.
fn on_respond<P: Protocol, A: Application<P> + ClientWorkload>(
    world: &mut World<P, A>,
    client: u64,
    attempt: u32,
) {
    let now = world.now_us();
    let clients = world.app.clients();
    let Some(reply) = clients.replies.remove(&(client, attempt)) else {
        return;
    };
    let Some(op) = clients.op_of_attempt(client, attempt) else {
        return;
    };
    let c = client as usize;
    let nodes = clients.nodes;
    match reply {
        Reply::Done(response) => {
            let record = Operation::ok(ClientId(client), op.command, op.invoke_us, now, response);
            clients.history.push(record);
            clients.note_seen(c, op.command, response);
            clients.list[c].op = None;
            clients.list[c].guess = op.target;
            let at = now + clients.rng.range(0, clients.pace.think_us_max + 1);
            world.schedule_app_timer(at, Timer::Start(client).token());
        }
        Reply::Redirect(leader) => {
            clients.list[c].guess = leader.unwrap_or((op.target + 1) % nodes);
            retry(world, client, 1_000);
        }
        Reply::Retry => {
            if let Some(op) = clients.list[c].op.as_mut() {
                op.proposed = false;
            }
            clients.list[c].guess = (op.target + 1) % nodes;
            retry(world, client, 5_000);
        }
    }
}

/// Tries again after a definite failure, within `backoff_us`, unless the
/// write may still take effect or the deadline is near.
fn retry<P: Protocol, A: Application<P> + ClientWorkload>(
    world: &mut World<P, A>,
    client: u64,
    backoff_us: u64,
) {
    let now = world.now_us();
    let clients = world.app.clients();
    let Some(op) = clients.list[client as usize].op else {
        return;
    };
    if op.proposed || now + backoff_us >= op.deadline_us {
        return; // The deadline will record it.
    }
    let at = now + clients.rng.range(0, backoff_us + 1);
    let attempt = clients.list[client as usize].next_attempt();
    world.schedule_app_timer(at, Timer::Arrive(client, attempt).token());
}

/// An operation ran out of time: its outcome is unknown.
fn on_deadline<P: Protocol, A: Application<P> + ClientWorkload>(
    world: &mut World<P, A>,
    client: u64,
    ops: u32,
) {
    let now = world.now_us();
    let clients = world.app.clients();
    let c = client as usize;
    if clients.list[c].ops_started != ops {
        return;
    }
    let Some(op) = clients.list[c].op.take() else {
        return;
    };
    let record = Operation::indeterminate(ClientId(client), op.command, op.invoke_us);
    clients.history.push(record);
    clients.list[c].guess = (op.target + 1) % clients.nodes;
    world.schedule_app_timer(now, Timer::Start(client).token());
}
