//! [`EtcdApp`]: the key-value workload on simulated members that run the
//! member driver, with the `kv` crate's etcd store behind it. Clients put,
//! get and compare-and-set a few hot keys through any member: a follower
//! forwards writes and read barriers to its leader, as the server does.
//! The history goes through the linearizability checker; a write answered
//! from another operation's entry fails the run at once.

use super::protocol::{ClientAnswer, OpRef, SimMember};
use crate::checkers::Violation;
use crate::event::NodeIndex;
use crate::kv::client::{Client, PendingOp};
use crate::kv::codec::{encode, LoggedWrite};
use crate::kv::KvConfig;
use crate::linearizability::{ClientId, Command, Key, Operation, Response, Value};
use crate::world::{Application, World};
use bellwether_core::raft::RaftPersist;
use bellwether_core::Rng;
use bellwether_member::{ClientError, Request};
use std::collections::BTreeMap;

/// What a client hears back.
#[derive(Clone, Copy, Debug)]
enum Reply {
    /// The operation took effect (or the read was served) with this result.
    Done(Response),
    /// Not the leader; try this one (or the next member).
    Redirect(Option<NodeIndex>),
    /// Definitely not applied: retry.
    Retry,
}

/// The workload's timers.
#[derive(Clone, Copy, Debug)]
enum Timer {
    Start(u64),
    Arrive(u64, u32),
    Respond(u64, u32),
    Deadline(u64, u32),
}

impl Timer {
    fn token(self) -> u64 {
        let (kind, client, n) = match self {
            Timer::Start(c) => (0, c, 0),
            Timer::Arrive(c, a) => (1, c, a),
            Timer::Respond(c, a) => (2, c, a),
            Timer::Deadline(c, o) => (3, c, o),
        };
        (kind << 56) | (client << 32) | u64::from(n)
    }

    fn from_token(token: u64) -> Timer {
        let (client, n) = ((token >> 32) & 0xFF_FFFF, token as u32);
        match token >> 56 {
            0 => Timer::Start(client),
            1 => Timer::Arrive(client, n),
            2 => Timer::Respond(client, n),
            _ => Timer::Deadline(client, n),
        }
    }
}

/// The workload.
pub struct EtcdApp {
    config: KvConfig,
    rng: Rng,
    nodes: usize,
    clients: Vec<Client>,
    replies: BTreeMap<(u64, u32), Reply>,
    /// Completed and abandoned operations.
    pub history: Vec<Operation>,
    stopped: bool,
}

impl EtcdApp {
    /// A workload for a cluster of `nodes`.
    pub fn new(config: KvConfig, nodes: usize, seed: u64) -> Self {
        let clients = (0..config.clients as u64)
            .map(|id| Client {
                id,
                ops_started: 0,
                attempts: 0,
                op: None,
                guess: (id as usize) % nodes,
                last_seen: BTreeMap::new(),
            })
            .collect();
        EtcdApp {
            rng: Rng::derive(seed, 0x6574_6364),
            nodes,
            clients,
            replies: BTreeMap::new(),
            history: Vec::new(),
            stopped: false,
            config,
        }
    }

    /// Starts every client.
    pub fn start(world: &mut World<SimMember, EtcdApp>) {
        for client in 0..world.app.clients.len() as u64 {
            let at = world.now_us() + world.app.rng.range(0, 10_000);
            world.schedule_app_timer(at, Timer::Start(client).token());
        }
    }

    /// Stops new operations and records those still open as indeterminate.
    pub fn finish(&mut self) {
        self.stopped = true;
        for client in &mut self.clients {
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

    fn next_command(&mut self, client: usize) -> Command {
        let key = Key(self.rng.range(0, self.config.keys));
        let value = Value(((client as u64) << 32) | u64::from(self.clients[client].ops_started));
        let seen = self.clients[client]
            .last_seen
            .get(&key.0)
            .copied()
            .flatten();
        match self.rng.range(0, 20) {
            0..=5 => Command::Put { key, value },
            // Bit 62 keeps a leased value, its lease's id, positive and
            // apart from the others.
            6 | 7 => Command::LeasedPut {
                key,
                value: Value(value.0 | 1 << 62),
            },
            8..=15 => Command::Get { key },
            16 if seen.is_some_and(|v| v & 1 << 62 != 0) => Command::Revoke {
                key,
                lease: Value(seen.expect("checked")),
            },
            _ => Command::CompareAndSet {
                key,
                expected: seen.map(Value),
                new: value,
            },
        }
    }
}

fn latency(world: &mut World<SimMember, EtcdApp>) -> u64 {
    world.network.sample_latency_us(&mut world.rng)
}

impl EtcdApp {
    fn on_start(world: &mut World<SimMember, EtcdApp>, client: u64) {
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
        let attempt = world.app.clients[c].next_attempt();
        let at = world.now_us() + latency(world);
        world.schedule_app_timer(at, Timer::Arrive(client, attempt).token());
    }

    fn reply(world: &mut World<SimMember, EtcdApp>, client: u64, attempt: u32, reply: Reply) {
        world.app.replies.insert((client, attempt), reply);
        let at = world.now_us() + latency(world);
        world.schedule_app_timer(at, Timer::Respond(client, attempt).token());
    }

    /// A request reaches its member, which serves or forwards it.
    fn on_arrive(world: &mut World<SimMember, EtcdApp>, client: u64, attempt: u32) {
        let Some(op) = world.app.clients[client as usize]
            .op
            .filter(|op| op.attempt == attempt)
        else {
            return;
        };
        let node = op.target;
        if !world.hosts[node].is_running() {
            // Refused at once by a member that is down; never read by a
            // paused one.
            if world.hosts[node].node.is_none() {
                Self::reply(world, client, attempt, Reply::Retry);
            }
            return;
        }
        let key = op.command.key();
        let reply = OpRef {
            client,
            attempt,
            key,
        };
        let request = match op.command {
            Command::Get { .. } => Request::ReadBarrier { reply },
            command => Request::Propose {
                command: encode(&LoggedWrite {
                    op_id: reply.op_id(),
                    command,
                }),
                reply,
            },
        };
        world.node_mut(node).expect("running").request(request);
        world.flush(node);
    }

    /// What a member told its clients.
    fn on_answers(world: &mut World<SimMember, EtcdApp>, node: NodeIndex) {
        let Some(member) = world.node_mut(node) else {
            return;
        };
        for answer in member.take_answers() {
            let (op, result) = match answer {
                ClientAnswer::Answered(op, result) => (op, result),
                ClientAnswer::Misrouted(op, entry_op) => {
                    let detail = format!(
                        "n{} answered client {} attempt {} from the entry of operation {entry_op:#x}",
                        node + 1,
                        op.client,
                        op.attempt
                    );
                    world.report_violation(Violation {
                        property: "answers-from-own-entry",
                        time_us: world.now_us(),
                        detail,
                    });
                    continue;
                }
            };
            let reply = match result {
                Ok(response) => Reply::Done(response),
                Err(ClientError::NotLeader { leader }) => {
                    Reply::Redirect(leader.map(|l| (l.0 - 1) as usize))
                }
                Err(ClientError::Busy | ClientError::NotApplied) => Reply::Retry,
                // Unknown outcome: the deadline records it.
                Err(ClientError::LeaderChanged | ClientError::TimedOut | ClientError::Stopped) => {
                    continue
                }
            };
            Self::reply(world, op.client, op.attempt, reply);
        }
    }

    /// A reply reaches its client.
    fn on_respond(world: &mut World<SimMember, EtcdApp>, client: u64, attempt: u32) {
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
                    (Command::Put { key, value } | Command::LeasedPut { key, value }, _) => {
                        Some((key, Some(value)))
                    }

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
                world.app.clients[c].guess = (op.target + 1) % nodes;
                Self::retry(world, client, 5_000);
            }
        }
    }

    /// Tries again after a definite failure, unless the deadline is near.
    fn retry(world: &mut World<SimMember, EtcdApp>, client: u64, backoff_us: u64) {
        let c = client as usize;
        let Some(op) = world.app.clients[c].op else {
            return;
        };
        if world.now_us() + backoff_us >= op.deadline_us {
            return; // The deadline will record it.
        }
        let at = world.now_us() + world.app.rng.range(0, backoff_us + 1);
        let attempt = world.app.clients[c].next_attempt();
        world.schedule_app_timer(at, Timer::Arrive(client, attempt).token());
    }

    fn on_deadline(world: &mut World<SimMember, EtcdApp>, client: u64, ops: u32) {
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
}

impl Application<SimMember> for EtcdApp {
    fn on_persisted(world: &mut World<SimMember, Self>, node: NodeIndex, _persist: &RaftPersist) {
        if let Some(member) = world.node_mut(node) {
            member.persist_done();
        }
    }

    fn on_flushed(world: &mut World<SimMember, Self>, node: NodeIndex) {
        Self::on_answers(world, node);
    }

    fn on_timer(world: &mut World<SimMember, Self>, token: u64) {
        match Timer::from_token(token) {
            Timer::Start(client) => Self::on_start(world, client),
            Timer::Arrive(client, attempt) => Self::on_arrive(world, client, attempt),
            Timer::Respond(client, attempt) => Self::on_respond(world, client, attempt),
            Timer::Deadline(client, ops) => Self::on_deadline(world, client, ops),
        }
    }
}
