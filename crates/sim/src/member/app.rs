//! [`EtcdApp`]: the key-value workload on simulated members that run the
//! member driver, with the `kv` crate's etcd store behind it. Clients put,
//! get and compare-and-set a few hot keys through any member: a follower
//! forwards writes and read barriers to its leader, as the server does.
//! The history goes through the linearizability checker; a write answered
//! from another operation's entry fails the run at once.

use super::protocol::{ClientAnswer, OpRef, SimMember};
use crate::checkers::Violation;
use crate::event::NodeIndex;
use crate::kv::clients::{self, ClientWorkload, Clients, Reply, Timer};
use crate::kv::codec::{encode, LoggedWrite};
use crate::kv::KvConfig;
use crate::linearizability::{Command, Key, Value};
use crate::world::{Application, World};
use bellwether_core::raft::RaftPersist;
use bellwether_core::Rng;
use bellwether_member::{ClientError, Request};

/// The workload.
pub struct EtcdApp {
    config: KvConfig,
    /// The clients and their history.
    pub clients: Clients,
}

impl EtcdApp {
    /// A workload for a cluster of `nodes`.
    pub fn new(config: KvConfig, nodes: usize, seed: u64) -> Self {
        let pace = config.pace();
        let rng = Rng::derive(seed, 0x6574_6364);
        let first_guess = |id: u64| (id as usize) % nodes;
        EtcdApp {
            clients: Clients::new(config.clients, nodes, pace, rng, first_guess),
            config,
        }
    }

    /// Starts every client.
    pub fn start(world: &mut World<SimMember, EtcdApp>) {
        clients::start(world);
    }
}

impl ClientWorkload for EtcdApp {
    fn clients(&mut self) -> &mut Clients {
        &mut self.clients
    }

    /// Puts, leased puts, gets, revokes of a lease seen, and
    /// compare-and-sets.
    fn next_command(&mut self, client: usize) -> Command {
        let key = Key(self.clients.rng.range(0, self.config.keys));
        let state = self.clients.client(client);
        let value = Value(((client as u64) << 32) | u64::from(state.ops_started));
        let seen = state.last_seen.get(&key.0).copied().flatten();
        match self.clients.rng.range(0, 20) {
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

impl EtcdApp {
    /// A request reaches its member, which serves or forwards it.
    fn on_arrive(world: &mut World<SimMember, EtcdApp>, client: u64, attempt: u32) {
        let Some(op) = world.app.clients.op_of_attempt(client, attempt) else {
            return;
        };
        let node = op.target;
        if !world.hosts[node].is_running() {
            // Refused at once by a member that is down; never read by a
            // paused one.
            if world.hosts[node].node.is_none() {
                clients::reply(world, client, attempt, Reply::Retry);
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
            clients::reply(world, op.client, op.attempt, reply);
        }
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
        if let Some(Timer::Arrive(client, attempt)) = clients::on_timer(world, token) {
            Self::on_arrive(world, client, attempt);
        }
    }
}
